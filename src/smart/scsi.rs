//! SCSI log pages (endurance indicator, grown defects, start-stop cycles, error counters) into
//! the model. Pure: reads a JSON value only.

use super::json::{at_most, get, get_u64, limit_celsius};
use super::model::{Found, Health, Origin};
use serde_json::Value;

pub(super) fn normalize(v: &Value, h: &mut Health, found: &mut Found) {
    found.wear.offer(
        Origin::ScsiLog,
        "percentage_used_endurance_indicator",
        get_u64(v, &["scsi_percentage_used_endurance_indicator"]).map(|p| p as f64 / 100.0),
    );
    if let Some(d) = get_u64(v, &["scsi_grown_defect_list"]) {
        h.reallocated_sectors = Some(d);
    }
    if let Some(c) = get_u64(
        v,
        &[
            "scsi_start_stop_cycle_counter",
            "accumulated_start_stop_cycles",
        ],
    ) && h.power_cycles.is_none()
    {
        h.power_cycles = Some(c);
    }
    // The drive's trip point: past it the drive reports a failure prediction (SPC-4
    // Informational Exceptions); 0 = none set.
    if h.temperature_critical_celsius.is_none() {
        h.temperature_critical_celsius = limit_celsius(get(v, &["temperature", "drive_trip"]));
    }
    // The non-medium error log page (0x06) holds one 32-bit counter on most drives.
    let nme = get_u64(v, &["scsi_nonmedium_error", "count"])
        .or_else(|| get_u64(v, &["scsi_nonmedium_error_count"]));
    h.non_medium_errors = at_most(
        nme,
        u64::from(u32::MAX) - 1,
        "non-medium error count",
        &mut h.warnings,
    );
    let Some(log) = get(v, &["scsi_error_counter_log"]) else {
        return;
    };
    // gigabytes_processed is a decimal string of 10^9-byte units.
    let gb = |dir: &str| {
        get(log, &[dir, "gigabytes_processed"])
            .and_then(|g| match g {
                Value::String(s) => s.trim().parse::<f64>().ok(),
                other => other.as_f64(),
            })
            .filter(|g| g.is_finite() && *g >= 0.0 && *g < 1.8e10)
            .map(|g| (g * 1e9).round() as u64)
    };
    found.host_written.offer(
        Origin::ScsiLog,
        "error counter log write gigabytes_processed",
        gb("write"),
    );
    h.host_read_bytes = gb("read");
    let unc: Vec<u64> = ["read", "write", "verify"]
        .iter()
        .filter_map(|d| get_u64(log, &[d, "total_uncorrected_errors"]))
        .collect();
    if !unc.is_empty() {
        h.media_errors = Some(unc.iter().fold(0u64, |a, b| a.saturating_add(*b)));
    }
}
