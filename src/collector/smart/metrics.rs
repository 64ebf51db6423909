//! The metrics of one drive from its state: identity, health figures, attributes, WAF. Pure:
//! what a sample publishes, built from what the drive's state remembers.

use super::drive::{DriveState, Target, waf_over_window};
use super::durability::Reason;
use crate::catalogue;
use crate::metrics::MetricSet;
use crate::smart::{EXIT_BITS, Health, WhenFailed};
use crate::time::DAY_F64;
use std::time::Duration;

/// Every series of one drive: how its last read went, then (once a read succeeded) what the
/// drive told.
pub(super) fn drive_metrics(
    t: &Target,
    st: &DriveState,
    every: Duration,
    now: f64,
    risk: Option<Reason>,
    m: &mut MetricSet,
) {
    let h = st.last.as_ref();
    let serial = h
        .and_then(|h| h.serial.clone())
        .or_else(|| t.serial.clone())
        .unwrap_or_default();
    let wwn = t
        .wwn
        .clone()
        .or_else(|| h.and_then(|h| h.wwn.clone()))
        .unwrap_or_default();
    let ids = Ids {
        dev: t.label.as_str(),
        serial: serial.as_str(),
        wwn: wwn.as_str(),
    };
    read_metrics(&ids, st, m);
    let Some(h) = h else { return };
    identity_metrics(&ids, t, st, h, m);
    schedule_metrics(&ids, st, every, now, m);
    health_metrics(&ids, h, m);
    self_test_metrics(&ids, h, m);
    thermal_metrics(&ids, h, m);
    if let Some(r) = risk {
        m.family(&catalogue::DEVICE_DURABILITY_RISK_INFO)
            .push(&ids.and("reason", r.as_str()), 1.0);
    }
    waf_metrics(&ids, st, h, m);
    attribute_metrics(&ids, h, m);
}

/// What names a drive in its series: the kernel name, serial and WWN ("" where unknown).
struct Ids<'a> {
    dev: &'a str,
    serial: &'a str,
    wwn: &'a str,
}

impl<'a> Ids<'a> {
    fn labels(&self) -> [(&'static str, &'a str); 3] {
        [
            ("device", self.dev),
            ("serial", self.serial),
            ("wwn", self.wwn),
        ]
    }

    /// The drive's labels and one more.
    fn and(&self, k: &'static str, v: &'a str) -> [(&'static str, &'a str); 4] {
        let [d, s, w] = self.labels();
        [d, s, w, (k, v)]
    }
}

fn b(x: bool) -> f64 {
    if x { 1.0 } else { 0.0 }
}

fn f(x: Option<u64>) -> Option<f64> {
    x.map(|v| v as f64)
}

/// How the last read went: success, standby, escaped processes and smartctl's exit bits.
fn read_metrics(ids: &Ids, st: &DriveState, m: &mut MetricSet) {
    let l = ids.labels();
    m.family(&catalogue::DEVICE_SMART_SAMPLE_OK)
        .push(&l, b(st.ok));
    m.family(&catalogue::DEVICE_IN_STANDBY)
        .push(&l, b(st.in_standby));
    m.family(&catalogue::DEVICE_SMARTCTL_ESCAPED_PROCESSES_TOTAL)
        .push(&l, st.escaped_total as f64);
    if let Some(s) = st.exit_status {
        let fam = m.family(&catalogue::DEVICE_SMARTCTL_EXIT_STATUS_BIT);
        for (i, bit) in EXIT_BITS.iter().enumerate() {
            fam.push(&ids.and("bit", bit), b(s & (1 << i) != 0));
        }
    }
}

/// The drive's `_info` series (model from /sys where smartctl has none) and whether it
/// supports SMART.
fn identity_metrics(ids: &Ids, t: &Target, st: &DriveState, h: &Health, m: &mut MetricSet) {
    m.family(&catalogue::DEVICE_INFO).push(
        &[
            ("device", ids.dev),
            ("serial", ids.serial),
            ("wwn", ids.wwn),
            (
                "model",
                h.model.as_deref().or(t.model.as_deref()).unwrap_or(""),
            ),
            ("firmware", h.firmware.as_deref().unwrap_or("")),
            ("model_family", h.model_family.as_deref().unwrap_or("")),
            ("family_source", h.family_source.as_str()),
            ("device_type", h.device_type.as_deref().unwrap_or("")),
            ("backend", st.backend.label()),
        ],
        1.0,
    );
    m.family(&catalogue::DEVICE_SMART_SUPPORTED)
        .push_opt(&ids.labels(), h.smart_supported.map(b));
}

/// The age of the last good read and the interval the drive is read at.
fn schedule_metrics(ids: &Ids, st: &DriveState, every: Duration, now: f64, m: &mut MetricSet) {
    let l = ids.labels();
    if let Some(t0) = st.last_ok_unix {
        m.family(&catalogue::DEVICE_SMART_SAMPLE_AGE_SECONDS)
            .push(&l, (now - t0).max(0.0));
    }
    m.family(&catalogue::DEVICE_SMART_INTERVAL_SECONDS)
        .push(&l, every.as_secs_f64());
}

/// The normalized health figures; an unknown one produces no series.
fn health_metrics(ids: &Ids, h: &Health, m: &mut MetricSet) {
    let l = ids.labels();
    m.family(&catalogue::DEVICE_WEAR_USED_RATIO)
        .push_opt(&l, h.wear_used_ratio);
    m.family(&catalogue::DEVICE_SPARE_AVAILABLE_RATIO)
        .push_opt(&l, h.spare_available_ratio);
    m.family(&catalogue::DEVICE_SPARE_THRESHOLD_RATIO)
        .push_opt(&l, h.spare_threshold_ratio);
    m.family(&catalogue::DEVICE_HOST_WRITTEN_BYTES_TOTAL)
        .push_opt(&l, f(h.host_written_bytes));
    m.family(&catalogue::DEVICE_HOST_READ_BYTES_TOTAL)
        .push_opt(&l, f(h.host_read_bytes));
    m.family(&catalogue::DEVICE_NAND_WRITTEN_BYTES_TOTAL)
        .push_opt(&l, f(h.nand_written_bytes));
    m.family(&catalogue::DEVICE_ERASE_COUNT_AVG)
        .push_opt(&l, f(h.erase_count_avg));
    m.family(&catalogue::DEVICE_ERASE_COUNT_MAX)
        .push_opt(&l, f(h.erase_count_max));
    m.family(&catalogue::DEVICE_MEDIA_ERRORS_TOTAL)
        .push_opt(&l, f(h.media_errors));
    m.family(&catalogue::DEVICE_CRITICAL_WARNING)
        .push_opt(&l, f(h.critical_warning));
    m.family(&catalogue::DEVICE_SMART_PASSED)
        .push_opt(&l, h.smart_passed.map(b));
    m.family(&catalogue::DEVICE_TEMPERATURE_CELSIUS)
        .push_opt(&l, h.temperature_celsius);
    m.family(&catalogue::DEVICE_POWER_ON_SECONDS_TOTAL)
        .push_opt(&l, f(h.power_on_seconds));
    m.family(&catalogue::DEVICE_POWER_CYCLES_TOTAL)
        .push_opt(&l, f(h.power_cycles));
    m.family(&catalogue::DEVICE_UNSAFE_SHUTDOWNS_TOTAL)
        .push_opt(&l, f(h.unsafe_shutdowns));
    m.family(&catalogue::DEVICE_REALLOCATED_SECTORS)
        .push_opt(&l, f(h.reallocated_sectors));
    m.family(&catalogue::DEVICE_PENDING_SECTORS)
        .push_opt(&l, f(h.pending_sectors));
    m.family(&catalogue::DEVICE_ERROR_LOG_ENTRIES_TOTAL)
        .push_opt(&l, f(h.error_log_entries));
    m.family(&catalogue::DEVICE_NON_MEDIUM_ERRORS_TOTAL)
        .push_opt(&l, f(h.non_medium_errors));
}

/// The newest self-test: one series with its type and result (bounded sets), its age in
/// power-on time and failing LBA; whether one runs now.
fn self_test_metrics(ids: &Ids, h: &Health, m: &mut MetricSet) {
    let l = ids.labels();
    m.family(&catalogue::DEVICE_SELF_TEST_IN_PROGRESS)
        .push_opt(&l, h.self_test_in_progress.map(b));
    let Some(t) = &h.self_test else { return };
    let [d, s, w] = l;
    m.family(&catalogue::DEVICE_SELF_TEST_LAST_RESULT).push(
        &[
            d,
            s,
            w,
            ("type", t.kind.as_str()),
            ("result", t.result.as_str()),
        ],
        1.0,
    );
    m.family(&catalogue::DEVICE_SELF_TEST_LAST_AGE_SECONDS)
        .push_opt(&l, f(t.age_power_on_seconds));
    m.family(&catalogue::DEVICE_SELF_TEST_LAST_FAILING_LBA)
        .push_opt(&l, f(t.failing_lba));
}

/// The drive's temperature limits, the time it spent above them and its thermal throttling;
/// two series per family at most (bounded `limit` and `level` values).
fn thermal_metrics(ids: &Ids, h: &Health, m: &mut MetricSet) {
    for (limit, at, above) in [
        (
            "warning",
            h.temperature_warning_celsius,
            h.warning_temperature_seconds,
        ),
        (
            "critical",
            h.temperature_critical_celsius,
            h.critical_temperature_seconds,
        ),
    ] {
        let l = ids.and("limit", limit);
        m.family(&catalogue::DEVICE_TEMPERATURE_LIMIT_CELSIUS)
            .push_opt(&l, at);
        m.family(&catalogue::DEVICE_TEMPERATURE_ABOVE_LIMIT_SECONDS_TOTAL)
            .push_opt(&l, f(above));
    }
    for (level, t) in [
        ("light", h.thermal_throttle_light),
        ("heavy", h.thermal_throttle_heavy),
    ] {
        let l = ids.and("level", level);
        m.family(&catalogue::DEVICE_THERMAL_THROTTLE_TRANSITIONS_TOTAL)
            .push_opt(&l, f(t.transitions));
        m.family(&catalogue::DEVICE_THERMAL_THROTTLE_SECONDS_TOTAL)
            .push_opt(&l, f(t.seconds));
    }
}

/// Write amplification over the drive's life (NAND over host bytes) and over the last day
/// (from the state's history of readings).
fn waf_metrics(ids: &Ids, st: &DriveState, h: &Health, m: &mut MetricSet) {
    let lifetime = match (h.nand_written_bytes, h.host_written_bytes) {
        (Some(n), Some(w)) if w > 0 => Some(n as f64 / w as f64),
        _ => None,
    };
    let waf = m.family(&catalogue::DEVICE_WRITE_AMPLIFICATION_RATIO);
    for (window, v) in [
        ("lifetime", lifetime),
        ("1d", waf_over_window(&st.history, DAY_F64)),
    ] {
        waf.push_opt(&ids.and("window", window), v);
    }
}

/// Each SMART attribute's normalized value and raw value, by id and name.
fn attribute_metrics(ids: &Ids, h: &Health, m: &mut MetricSet) {
    let id_buf: Vec<String> = h.attributes.iter().map(|a| a.id.to_string()).collect();
    for (a, id) in h.attributes.iter().zip(&id_buf) {
        let al = [
            ("device", ids.dev),
            ("serial", ids.serial),
            ("id", id.as_str()),
            ("name", a.name.as_str()),
        ];
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_VALUE)
            .push_opt(&al, f(a.value));
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_RAW)
            .push_opt(&al, f(a.raw));
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_THRESHOLD)
            .push_opt(&al, f(a.thresh));
        // Unknown (no threshold, no value, no when_failed) gives no series, never a 0.
        let Some(when) = a.when_failed else { continue };
        let fl = [
            ("device", ids.dev),
            ("serial", ids.serial),
            ("id", id.as_str()),
            ("name", a.name.as_str()),
            ("type", attribute_type(a.prefailure)),
        ];
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_FAILING_NOW)
            .push(&fl, b(when == WhenFailed::Now));
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_FAILED_IN_PAST)
            .push(&fl, b(when == WhenFailed::InThePast));
    }
}

/// The `type` label of an attribute: `prefail` (crossing its threshold is the drive's failure
/// prediction), `old_age` (wear), or empty where the output has no flags (libatasmart).
fn attribute_type(prefailure: Option<bool>) -> &'static str {
    match prefailure {
        Some(true) => "prefail",
        Some(false) => "old_age",
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived failing drive (tests/fixtures/smart-derived): its threshold, and the one
    /// pre-failure attribute failing now, as series a rule can select.
    #[test]
    fn a_failing_prefail_attribute_shows_with_its_threshold_and_type() {
        let path = format!(
            "{}/tests/fixtures/smart-derived/ata-micron-5300-reserve-failing-now.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let h = crate::smart::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let ids = Ids {
            dev: "sda",
            serial: "S1",
            wwn: "",
        };
        let mut m = MetricSet::new();
        attribute_metrics(&ids, &h, &mut m);
        let mut t = String::new();
        crate::render::render_families(&mut t, m.families());
        let l = "device=\"sda\",serial=\"S1\",id=\"170\",name=\"Reserved_Block_Pct\"";
        assert!(
            t.contains(&format!(
                "ssdwatch_device_smart_attribute_threshold{{{l}}} 10\n"
            )),
            "{t}"
        );
        assert!(t.contains(&format!(
            "ssdwatch_device_smart_attribute_failing_now{{{l},type=\"prefail\"}} 1\n"
        )));
        assert!(t.contains(&format!(
            "ssdwatch_device_smart_attribute_failed_in_past{{{l},type=\"prefail\"}} 0\n"
        )));
        // Exactly one attribute fails; the old-age ones carry their type.
        let failing: Vec<&str> = t
            .lines()
            .filter(|x| x.starts_with("ssdwatch_device_smart_attribute_failing_now{"))
            .filter(|x| x.ends_with(" 1"))
            .collect();
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert!(t.contains(
            "ssdwatch_device_smart_attribute_failing_now{device=\"sda\",serial=\"S1\",id=\"5\",name=\"Reallocated_Sector_Ct\",type=\"old_age\"} 0\n"
        ));
    }
}
