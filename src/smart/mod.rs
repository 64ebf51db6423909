//! smartctl JSON model, the vendor table and normalization: pure, no I/O (placeholder).

use std::path::Path;

/// `ssdwatch smart inspect FILE`: prints the normalized model of a saved `smartctl --json`
/// output as JSON. Returns the process exit code.
pub fn inspect_command(path: &Path) -> i32 {
    eprintln!("smart inspect {}: not implemented yet", path.display());
    2
}
