//! The NVMe SMART / health information log (`nvme_smart_health_information_log`) into the
//! model. Pure: reads a JSON value only.

use super::json::{celsius, get_u64, mul};
use super::model::{Found, Health, Origin};
use serde_json::Value;

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
        h.power_on_seconds = n("power_on_hours").map(|x| x.saturating_mul(3600));
    }
    if h.temperature_celsius.is_none() {
        h.temperature_celsius = celsius(log.get("temperature"));
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
