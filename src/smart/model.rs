//! The normalized health model of one drive and the types every protocol shares: where a figure
//! came from (`Source`) and the ordered lists that decide which source wins. No parsing here.

use super::selftest::SelfTest;
use serde::{Serialize, Serializer};
use std::fmt;

/// smartctl's exit-status bits (smartctl(8), RETURN VALUES), in bit order.
pub const EXIT_BITS: [&str; 8] = [
    "command_failed",
    "device_open_failed",
    "smart_command_failed",
    "smart_status_failing",
    "prefail_threshold_crossed",
    "threshold_crossed_in_past",
    "error_log_has_errors",
    "self_test_log_has_errors",
];

/// One ATA attribute as smartctl reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribute {
    pub id: u32,
    pub name: String,
    pub value: Option<u64>,
    pub worst: Option<u64>,
    pub thresh: Option<u64>,
    pub raw: Option<u64>,
    /// Whether the attribute is pre-failure (its crossing the threshold predicts the drive's
    /// failure) rather than old-age (wear); None when the output has no flags.
    pub prefailure: Option<bool>,
    /// Whether the normalized value is at or below the threshold now, was at some time (its
    /// worst), or never: smartctl's `when_failed` where it gives one, else worked out the way
    /// smartctl does from value, worst and a threshold above 0. None when unknown.
    pub when_failed: Option<WhenFailed>,
}

/// When an attribute's normalized value crossed its threshold (smartctl's WHEN_FAILED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFailed {
    Never,
    /// The worst value was at or below the threshold; the value now is above it.
    InThePast,
    /// The value is at or below the threshold now.
    Now,
}

impl WhenFailed {
    /// smartctl's JSON `when_failed` ("now", "past", ""), or its text column's words
    /// (`FAILING_NOW`, `In_the_past`, `-`); None for anything else.
    pub fn parse(s: &str) -> Option<WhenFailed> {
        match s.trim() {
            "" | "-" => Some(WhenFailed::Never),
            "past" | "In_the_past" => Some(WhenFailed::InThePast),
            "now" | "FAILING_NOW" => Some(WhenFailed::Now),
            _ => None,
        }
    }

    /// As smartctl decides it (ataprint.cpp): a threshold of 0 never fails; the value at or
    /// below the threshold is failing now, else the worst at or below it failed in the past.
    pub fn derive(value: Option<u64>, worst: Option<u64>, thresh: Option<u64>) -> Option<Self> {
        let t = thresh?;
        let v = value?;
        if t == 0 {
            return Some(WhenFailed::Never);
        }
        if v <= t {
            Some(WhenFailed::Now)
        } else if worst.is_some_and(|w| w <= t) {
            Some(WhenFailed::InThePast)
        } else {
            Some(WhenFailed::Never)
        }
    }
}

/// The normalized model. `None` = the drive (or this output) does not report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Health {
    pub device_type: Option<String>,
    pub protocol: Option<String>,
    pub model: Option<String>,
    pub model_family: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    pub firmware: Option<String>,
    pub capacity_bytes: Option<u64>,
    /// smartctl's `rotation_rate`: 0 for a solid-state device, the spindle speed in rpm for a
    /// disk; absent where the drive doesn't say (NVMe, many SCSI devices).
    pub rotation_rate_rpm: Option<u64>,
    pub smartctl_exit_status: Option<u64>,
    /// The vendor-table entry that gave attribute meanings (ATA only).
    pub vendor_table_family: Option<String>,
    /// How that entry was found: smartctl's database, the model name, or not at all.
    pub family_source: FamilySource,
    /// false when smartctl says the device has no SMART (virtio, RAID volumes, unknown type).
    pub smart_supported: Option<bool>,
    pub in_standby: bool,
    pub wear_used_ratio: Option<f64>,
    /// Which of `WEAR_ORDER` gave `wear_used_ratio`.
    #[serde(serialize_with = "as_text")]
    pub wear_source: Option<Source>,
    pub spare_available_ratio: Option<f64>,
    pub spare_threshold_ratio: Option<f64>,
    pub host_written_bytes: Option<u64>,
    /// Which of `HOST_WRITTEN_ORDER` gave `host_written_bytes`.
    #[serde(serialize_with = "as_text")]
    pub host_written_source: Option<Source>,
    pub host_read_bytes: Option<u64>,
    pub nand_written_bytes: Option<u64>,
    pub erase_count_avg: Option<u64>,
    pub erase_count_max: Option<u64>,
    pub media_errors: Option<u64>,
    pub critical_warning: Option<u64>,
    pub smart_passed: Option<bool>,
    pub temperature_celsius: Option<f64>,
    pub power_on_seconds: Option<u64>,
    pub power_cycles: Option<u64>,
    pub unsafe_shutdowns: Option<u64>,
    pub reallocated_sectors: Option<u64>,
    pub pending_sectors: Option<u64>,
    /// Errors the drive's own error log has counted over its life: NVMe
    /// `num_err_log_entries`, the ATA SMART error log's count (16 bits on the drive).
    pub error_log_entries: Option<u64>,
    /// SCSI non-medium errors (transport and hardware faults, not the medium).
    pub non_medium_errors: Option<u64>,
    /// The newest entry of the drive's self-test log.
    pub self_test: Option<SelfTest>,
    /// Whether a self-test runs now (ATA status byte, NVMe current operation).
    pub self_test_in_progress: Option<bool>,
    /// The drive's own temperature limits: NVMe WCTEMP / ATA SCT "op limit" (warning) and
    /// NVMe CCTEMP / SCSI drive trip (critical).
    pub temperature_warning_celsius: Option<f64>,
    pub temperature_critical_celsius: Option<f64>,
    /// Time spent above the warning / critical composite temperature (NVMe, in minutes on the
    /// drive), over its life.
    pub warning_temperature_seconds: Option<u64>,
    pub critical_temperature_seconds: Option<u64>,
    /// NVMe host-controlled thermal management: light (TMT1) and heavy (TMT2) throttling.
    pub thermal_throttle_light: ThermalThrottle,
    pub thermal_throttle_heavy: ThermalThrottle,
    /// The OCP SMART / Health Information Extended log (NVMe log C0h), when it was read and
    /// its GUID and version were ones the parser knows; its media writes fill
    /// `nand_written_bytes`.
    pub ocp_log: Option<super::ocp::OcpLog>,
    /// The drive's volatile write cache is on (ATA `--get=wcache`, SCSI WCE), where reported.
    pub write_cache_enabled: Option<bool>,
    /// smartctl's own error messages (severity error), verbatim.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    #[serde(skip)]
    pub attributes: Vec<Attribute>,
}

impl Health {
    /// The decoded exit-status bits that are set.
    pub fn exit_bits(&self) -> Vec<&'static str> {
        let s = self.smartctl_exit_status.unwrap_or(0);
        EXIT_BITS
            .iter()
            .enumerate()
            .filter(|(i, _)| s & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// One NVMe thermal-management level: how often the drive entered it and how long it stayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ThermalThrottle {
    pub transitions: Option<u64>,
    pub seconds: Option<u64>,
}

/// How a drive's vendor family was found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FamilySource {
    /// smartctl's drive database named the family (`model_family`).
    Drivedb,
    /// smartctl named none; the model name matched a family's patterns.
    ModelName,
    /// No vendor family (also every NVMe and SCSI drive: the table is ATA's).
    #[default]
    None,
}

impl FamilySource {
    /// The label value: `drivedb`, `model_name`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            FamilySource::Drivedb => "drivedb",
            FamilySource::ModelName => "model_name",
            FamilySource::None => "none",
        }
    }
}

/// Bad input text: not JSON, or not a JSON object.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not valid JSON (line {line}, column {column}): {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// Valid so far but cut short: a capped or interrupted smartctl output.
    #[error(
        "not valid JSON: it ends early (line {line}, column {column}, after {bytes} bytes): the output was cut short"
    )]
    Truncated {
        line: usize,
        column: usize,
        bytes: usize,
    },
    #[error("not a smartctl JSON object (top level is {0})")]
    NotObject(&'static str),
}

/// A kind of place in smartctl's output a figure can be read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// smartctl >= 7.5's vendor-neutral `endurance_used`.
    EnduranceUsed,
    /// The ATA device statistics log (`--log=devstat`), defined by the ATA standard (ACS).
    AtaDevstat,
    /// A SCSI log page (standard).
    ScsiLog,
    /// The NVMe SMART / health information log (standard).
    NvmeLog,
    /// A vendor ATA attribute, read with the meaning the vendor table gives it.
    AtaVendorTable,
    /// An ATA attribute whose name in smartctl's drive database says its unit
    /// (`Total_LBAs_Written`), on a drive that database knows and the vendor table does not.
    AtaNamed,
}

/// Which source wins for `wear_used_ratio`: the first in this list that gave a value.
/// - smartctl's own `endurance_used` first: smartctl picks it from the standard log or the
///   attribute its drive database knows for that exact model, and says so in one field.
/// - The ATA devstat "Percentage Used Endurance Indicator" before any vendor attribute: the
///   standard's figure means the same on every drive; an attribute's meaning hangs on our
///   family match (sometimes by model number alone). Crucial m4: devstat 3% beats 202's 2%.
/// - SCSI and NVMe standard fields: a drive has only one of them.
/// - Vendor attributes last, per the vendor table.
pub const WEAR_ORDER: [Origin; 5] = [
    Origin::EnduranceUsed,
    Origin::AtaDevstat,
    Origin::ScsiLog,
    Origin::NvmeLog,
    Origin::AtaVendorTable,
];
// (No attribute name says "percent used" reliably enough: `AtaNamed` gives no wear.)

/// Which source wins for `host_written_bytes`: the first in this list that gave a value.
/// - SCSI and NVMe standard counters: exact, and a drive has only one of them.
/// - The vendor attribute before the devstat "Logical Sectors Written": some Micron/Crucial
///   firmware keeps only a 32-bit view in devstat, which wraps; the attribute does not.
/// - The standard devstat before an attribute only its database name vouches for.
pub const HOST_WRITTEN_ORDER: [Origin; 5] = [
    Origin::ScsiLog,
    Origin::NvmeLog,
    Origin::AtaVendorTable,
    Origin::AtaDevstat,
    Origin::AtaNamed,
];

/// Where a figure came from: the kind of place and what exactly was read there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub origin: Origin,
    /// The field, log row or attribute read, e.g. `percentage_used`, `attr 177 per table samsung`.
    pub detail: String,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match self.origin {
            Origin::EnduranceUsed => "smartctl endurance_used",
            Origin::AtaDevstat => "ATA devstat",
            Origin::ScsiLog => "SCSI",
            Origin::NvmeLog => "NVMe",
            Origin::AtaVendorTable | Origin::AtaNamed => "ATA",
        };
        write!(f, "{place} {}", self.detail)
    }
}

fn as_text<S: Serializer>(s: &Option<Source>, ser: S) -> Result<S::Ok, S::Error> {
    match s {
        Some(s) => ser.collect_str(s),
        None => ser.serialize_none(),
    }
}

/// The values each source offered for one figure, collected while reading every section of
/// an output; `pick` then applies the figure's order, so no statement order decides.
#[derive(Debug)]
pub(super) struct Offers<T>(Vec<(Source, T)>);

impl<T> Default for Offers<T> {
    fn default() -> Self {
        Offers(Vec::new())
    }
}

impl<T> Offers<T> {
    /// Records what `origin` said; an unknown value is no offer.
    pub(super) fn offer(&mut self, origin: Origin, detail: impl Into<String>, value: Option<T>) {
        if let Some(v) = value {
            let source = Source {
                origin,
                detail: detail.into(),
            };
            self.0.push((source, v));
        }
    }

    /// The first known value in `order` and where it came from.
    pub(super) fn pick(mut self, order: &[Origin]) -> (Option<T>, Option<Source>) {
        for o in order {
            if let Some(i) = self.0.iter().position(|(s, _)| s.origin == *o) {
                let (s, v) = self.0.swap_remove(i);
                return (Some(v), Some(s));
            }
        }
        (None, None)
    }
}

/// What the protocol readers offer for the figures that have more than one source.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub wear: Offers<f64>,
    pub host_written: Offers<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_known_source_in_order_wins_whatever_the_offer_order() {
        let mut o = Offers::default();
        o.offer(
            Origin::AtaVendorTable,
            "attr 177 per table samsung",
            Some(0.03),
        );
        o.offer(Origin::NvmeLog, "percentage_used", None);
        o.offer(
            Origin::AtaDevstat,
            "Percentage Used Endurance Indicator",
            Some(0.05),
        );
        let (v, s) = o.pick(&WEAR_ORDER);
        assert_eq!(v, Some(0.05));
        assert_eq!(
            s.map(|s| s.to_string()).as_deref(),
            Some("ATA devstat Percentage Used Endurance Indicator")
        );
        assert_eq!(
            Offers::<u64>::default().pick(&HOST_WRITTEN_ORDER),
            (None, None)
        );
    }

    #[test]
    fn every_origin_has_a_place_in_each_order() {
        for o in [
            Origin::EnduranceUsed,
            Origin::AtaDevstat,
            Origin::ScsiLog,
            Origin::NvmeLog,
            Origin::AtaVendorTable,
            Origin::AtaNamed,
        ] {
            // A name gives no wear figure.
            assert!(o == Origin::AtaNamed || WEAR_ORDER.contains(&o), "{o:?}");
            // smartctl's endurance_used has no write counter.
            assert!(
                o == Origin::EnduranceUsed || HOST_WRITTEN_ORDER.contains(&o),
                "{o:?}"
            );
        }
    }
}
