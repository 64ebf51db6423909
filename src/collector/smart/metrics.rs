//! The metrics of one drive from its state: identity, health figures, attributes, WAF. Pure:
//! what a sample publishes, built from what the drive's state remembers.

use super::drive::{DriveState, Target, waf_over_window};
use crate::catalogue;
use crate::metrics::MetricSet;
use crate::smart::EXIT_BITS;
use crate::time::DAY_F64;
use std::time::Duration;

pub(super) fn drive_metrics(
    t: &Target,
    st: &DriveState,
    every: Duration,
    now: f64,
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
    let dev = t.label.as_str();
    let l = [
        ("device", dev),
        ("serial", serial.as_str()),
        ("wwn", wwn.as_str()),
    ];
    let b = |x: bool| if x { 1.0 } else { 0.0 };

    m.family(&catalogue::DEVICE_SMART_SAMPLE_OK)
        .push(&l, b(st.ok));
    m.family(&catalogue::DEVICE_IN_STANDBY)
        .push(&l, b(st.in_standby));
    m.family(&catalogue::DEVICE_SMARTCTL_ESCAPED_PROCESSES_TOTAL)
        .push(&l, st.escaped_total as f64);
    if let Some(s) = st.exit_status {
        let fam = m.family(&catalogue::DEVICE_SMARTCTL_EXIT_STATUS_BIT);
        for (i, bit) in EXIT_BITS.iter().enumerate() {
            fam.push(
                &[
                    ("device", dev),
                    ("serial", serial.as_str()),
                    ("wwn", wwn.as_str()),
                    ("bit", bit),
                ],
                b(s & (1 << i) != 0),
            );
        }
    }
    let Some(h) = h else { return };
    m.family(&catalogue::DEVICE_INFO).push(
        &[
            ("device", dev),
            ("serial", serial.as_str()),
            ("wwn", wwn.as_str()),
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
        .push_opt(&l, h.smart_supported.map(b));
    if let Some(t0) = st.last_ok_unix {
        m.family(&catalogue::DEVICE_SMART_SAMPLE_AGE_SECONDS)
            .push(&l, (now - t0).max(0.0));
    }
    m.family(&catalogue::DEVICE_SMART_INTERVAL_SECONDS)
        .push(&l, every.as_secs_f64());
    let f = |x: Option<u64>| x.map(|v| v as f64);
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

    let lifetime = match (h.nand_written_bytes, h.host_written_bytes) {
        (Some(n), Some(w)) if w > 0 => Some(n as f64 / w as f64),
        _ => None,
    };
    let waf = m.family(&catalogue::DEVICE_WRITE_AMPLIFICATION_RATIO);
    for (window, v) in [
        ("lifetime", lifetime),
        ("1d", waf_over_window(&st.history, DAY_F64)),
    ] {
        waf.push_opt(
            &[
                ("device", dev),
                ("serial", serial.as_str()),
                ("wwn", wwn.as_str()),
                ("window", window),
            ],
            v,
        );
    }

    let id_buf: Vec<String> = h.attributes.iter().map(|a| a.id.to_string()).collect();
    for (a, id) in h.attributes.iter().zip(&id_buf) {
        let al = [
            ("device", dev),
            ("serial", serial.as_str()),
            ("id", id.as_str()),
            ("name", a.name.as_str()),
        ];
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_VALUE)
            .push_opt(&al, f(a.value));
        m.family(&catalogue::DEVICE_SMART_ATTRIBUTE_RAW)
            .push_opt(&al, f(a.raw));
    }
}
