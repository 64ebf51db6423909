//! smartctl JSON model, the per-family vendor table (data) and normalization into one health
//! model per drive. Pure: nothing here runs smartctl or opens a device (that is `collector::smart`).

pub mod health;
pub mod table;

pub use health::{Attribute, EXIT_BITS, Health, ParseError, parse};

use std::path::Path;

/// The JSON `ssdwatch smart inspect` prints: the normalized model plus the decoded exit bits.
#[derive(serde::Serialize)]
struct Inspected<'a> {
    #[serde(flatten)]
    health: &'a Health,
    smartctl_exit_bits: Vec<&'static str>,
}

/// Renders the normalized model as pretty JSON.
pub fn inspect_json(h: &Health) -> String {
    let out = Inspected {
        health: h,
        smartctl_exit_bits: h.exit_bits(),
    };
    serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// `ssdwatch smart inspect FILE`: prints the normalized model of a saved `smartctl --json`
/// output as JSON. Returns the process exit code: 0 on success, 1 when the file cannot be
/// read or is not smartctl JSON.
pub fn inspect_command(path: &Path) -> i32 {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("smart inspect: cannot read {}: {e}", path.display());
            return 1;
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    match parse(&text) {
        Ok(h) => {
            println!("{}", inspect_json(&h));
            0
        }
        Err(e) => {
            eprintln!("smart inspect: {}: {e}", path.display());
            1
        }
    }
}
