//! `ssdwatch smart inspect FILE`: the normalized model of a saved `smartctl --json` output.

use std::path::Path;

/// `ssdwatch smart inspect FILE`: prints the normalized model of a saved `smartctl --json`
/// output as JSON. Returns the process exit code: 0 on success, 1 when the file cannot be
/// read or is not smartctl JSON.
pub(super) fn inspect(path: &Path) -> i32 {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("smart inspect: cannot read {}: {e}", path.display());
            return 1;
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    match crate::smart::parse(&text) {
        Ok(h) => {
            println!("{}", crate::smart::inspect_json(&h));
            0
        }
        Err(e) => {
            eprintln!("smart inspect: {}: {e}", path.display());
            1
        }
    }
}
