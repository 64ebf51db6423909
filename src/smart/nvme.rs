//! The NVMe SMART / health information log (`nvme_smart_health_information_log`) into the
//! model. Pure: reads a JSON value only.

use super::json::{at_most, celsius, get_u64, mul};
use super::model::{Found, Health, Origin, ThermalThrottle};
use serde_json::Value;

const HOUR_SECONDS: u64 = crate::time::HOUR as u64;

/// More error-log entries than this is over one a second for 136 years: an all-ones read or a
/// firmware fault, not a count (the field is 128 bits wide, so width can't tell).
const MAX_ERROR_LOG_ENTRIES: u64 = u32::MAX as u64 - 1;

/// NVMe "data units" are thousands of 512-byte units: 512,000 bytes (NVMe base spec, SMART log).
const NVME_DATA_UNIT_BYTES: u64 = 512_000;

pub(super) fn normalize(log: &Value, h: &mut Health, found: &mut Found) {
    let n = |k: &str| get_u64(log, &[k]);
    // percentage_used may exceed 100 on a drive past its rated endurance: not clamped.
    found.wear.offer(
        Origin::NvmeLog,
        "percentage_used",
        n("percentage_used").map(|p| p as f64 / 100.0),
    );
    h.spare_available_ratio = n("available_spare").map(|p| p as f64 / 100.0);
    h.spare_threshold_ratio = n("available_spare_threshold").map(|p| p as f64 / 100.0);
    let written =
        n("data_units_written").and_then(|u| mul(u, NVME_DATA_UNIT_BYTES, &mut h.warnings));
    found
        .host_written
        .offer(Origin::NvmeLog, "data_units_written", written);
    h.host_read_bytes =
        n("data_units_read").and_then(|u| mul(u, NVME_DATA_UNIT_BYTES, &mut h.warnings));
    h.media_errors = n("media_errors");
    h.critical_warning = n("critical_warning");
    h.unsafe_shutdowns = n("unsafe_shutdowns");
    if let Some(c) = n("power_cycles") {
        h.power_cycles = Some(c);
    }
    if h.power_on_seconds.is_none() {
        h.power_on_seconds = n("power_on_hours").map(|x| x.saturating_mul(HOUR_SECONDS));
    }
    if h.temperature_celsius.is_none() {
        h.temperature_celsius = celsius(log.get("temperature"));
    }
    let w = &mut h.warnings;
    h.error_log_entries = at_most(
        n("num_err_log_entries"),
        MAX_ERROR_LOG_ENTRIES,
        "num_err_log_entries",
        w,
    );
    // Times the drive was hotter than a limit can't exceed the time it was on (an hour of
    // slack for the counters' own rounding); the fields are 32 bits on the drive.
    let on = h.power_on_seconds.map(|s| s.saturating_add(HOUR_SECONDS));
    let within_on = |secs: Option<u64>, field: &str, w: &mut Vec<String>| {
        let secs = at_most(secs, on.unwrap_or(u64::MAX), field, w)?;
        Some(secs)
    };
    // NVMe counts the time above WCTEMP / CCTEMP in minutes.
    let minutes =
        |k: &str, w: &mut Vec<String>| at_most(n(k), u64::from(u32::MAX) - 1, k, w).map(|m| m * 60);
    let warn = minutes("warning_temp_time", w);
    h.warning_temperature_seconds = within_on(warn, "warning_temp_time", w);
    let crit = minutes("critical_comp_time", w);
    h.critical_temperature_seconds = within_on(crit, "critical_comp_time", w);
    // Thermal management (NVMe 1.3): transition counts and total times in seconds, 32 bits.
    for (level, slot) in [1, 2]
        .into_iter()
        .zip([&mut h.thermal_throttle_light, &mut h.thermal_throttle_heavy])
    {
        let count = format!("thermal_temp{level}_transition_count");
        let time = format!("thermal_temp{level}_total_time");
        let secs = at_most(n(&time), u64::from(u32::MAX) - 1, &time, w);
        *slot = ThermalThrottle {
            transitions: at_most(n(&count), u64::from(u32::MAX) - 1, &count, w),
            seconds: within_on(secs, &time, w),
        };
    }
}

#[cfg(test)]
mod tests {
    use crate::smart::normalize;
    use crate::smart::table::Table;
    use serde_json::json;

    #[test]
    fn nvme_wear_past_rated_endurance_is_not_clamped() {
        let v = json!({"smartctl": {"exit_status": 0}, "device": {"type": "nvme", "protocol": "NVMe"},
            "nvme_smart_health_information_log": {"percentage_used": 160, "critical_warning": 9, "data_units_written": 2}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.wear_used_ratio, Some(1.6));
        assert_eq!(h.critical_warning, Some(9));
        assert_eq!(h.host_written_bytes, Some(1_024_000));
        assert_eq!(
            h.wear_source.map(|s| s.to_string()).as_deref(),
            Some("NVMe percentage_used")
        );
        assert_eq!(
            h.host_written_source.map(|s| s.to_string()).as_deref(),
            Some("NVMe data_units_written")
        );
        assert!(
            h.warnings
                .iter()
                .any(|w| w.contains("past the rated endurance"))
        );
    }

    #[test]
    fn counter_overflow_is_dropped_with_a_warning() {
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_smart_health_information_log": {"data_units_written": u64::MAX}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.host_written_bytes, None);
        assert_eq!(h.host_written_source, None);
        assert!(h.warnings.iter().any(|w| w.contains("overflows")));
    }
}
