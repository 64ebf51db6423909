//! smartctl JSON model, the per-family vendor table (data) and normalization into one health
//! model per drive, and smartctl's argument lists. Pure: nothing here reads a file, prints or
//! runs smartctl (that is `collector::smart`, `privileged` and `cli`).
//!
//! Layout: `model` (the `Health` struct, sources and their orders), `normalize` (the sections
//! every protocol shares), `ata`, `nvme`, `scsi` (each protocol's sections), `json` (lenient
//! readers of the JSON tree), `table` (the vendor table).

pub mod argv;
mod ata;
mod json;
mod model;
mod normalize;
mod nvme;
pub mod ocp;
pub mod scan;
mod scsi;
mod selftest;
pub mod table;

pub use model::{
    Attribute, EXIT_BITS, FamilySource, HOST_WRITTEN_ORDER, Health, Origin, ParseError, Source,
    ThermalThrottle, WEAR_ORDER, WhenFailed,
};
pub use normalize::{normalize, parse};
pub use selftest::{SelfTest, SelfTestKind, SelfTestResult};

/// The JSON `ssdwatch smart inspect` prints: the normalized model plus the decoded exit bits.
#[derive(serde::Serialize)]
struct Inspected<'a> {
    #[serde(flatten)]
    health: &'a Health,
    smartctl_exit_bits: Vec<&'static str>,
    /// ATA attributes at or below their threshold now or in the past (smartctl's WHEN_FAILED),
    /// with the figures that say so: the drive's own verdicts. Empty when none crossed.
    attributes_past_threshold: Vec<&'a Attribute>,
}

/// Renders the normalized model as pretty JSON.
pub fn inspect_json(h: &Health) -> String {
    let out = Inspected {
        health: h,
        smartctl_exit_bits: h.exit_bits(),
        attributes_past_threshold: h
            .attributes
            .iter()
            .filter(|a| matches!(a.when_failed, Some(WhenFailed::Now | WhenFailed::InThePast)))
            .collect(),
    };
    serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
