//! smartctl JSON model, the per-family vendor table (data) and normalization into one health
//! model per drive. Pure: nothing here runs smartctl or opens a device (that is `collector::smart`).

pub mod health;
pub mod table;

pub use health::{Attribute, EXIT_BITS, Health, ParseError, parse};

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
