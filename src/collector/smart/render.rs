//! The metrics of one drive from its state: identity, health figures, attributes, WAF. Pure:
//! what a sample publishes, built from what the drive's state remembers.

use super::drive::{DAY, DriveState, Target, waf_over_window};
use crate::metrics::MetricSet;
use crate::smart::EXIT_BITS;
use std::time::Duration;

pub(super) fn render_drive(
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

    m.gauge(
        "ssdwatch_device_smart_sample_ok",
        "1 if the last smartctl run on this drive gave usable data (or found it in standby).",
    )
    .push(&l, b(st.ok));
    m.gauge(
        "ssdwatch_device_in_standby",
        "1 if the drive was in standby at the last attempt; values are then from the last awake sample.",
    )
    .push(&l, b(st.in_standby));
    m.counter(
        "ssdwatch_device_smartctl_escaped_processes_total",
        "Processes a smartctl run of this drive left running after it exited (they left its process group, e.g. with setsid), found and killed.",
    )
    .push(&l, st.escaped_total as f64);
    if let Some(s) = st.exit_status {
        let fam = m.gauge(
            "ssdwatch_device_smartctl_exit_status_bit",
            "smartctl exit-status bits of the last run (smartctl(8) RETURN VALUES), 1 when set.",
        );
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
    m.gauge(
        "ssdwatch_device_info",
        "Identity of a drive as its SMART backend (smartctl or libatasmart) reports it; always 1. Join on device.",
    )
    .push(
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
    m.gauge(
        "ssdwatch_device_smart_supported",
        "1 if the drive answers SMART/health commands, 0 if it has none (virtio, RAID volume).",
    )
    .push_opt(&l, h.smart_supported.map(b));
    if let Some(t0) = st.last_ok_unix {
        m.gauge(
            "ssdwatch_device_smart_sample_age_seconds",
            "Age of the SMART values shown for this drive.",
        )
        .push(&l, (now - t0).max(0.0));
    }
    m.gauge(
        "ssdwatch_device_smart_interval_seconds",
        "Configured time between smartctl runs for this drive (its device class's interval).",
    )
    .push(&l, every.as_secs_f64());
    let f = |x: Option<u64>| x.map(|v| v as f64);
    m.gauge(
        "ssdwatch_device_wear_used_ratio",
        "Rated endurance used (0..1, may exceed 1): NVMe percentage used, SCSI/ATA endurance indicator or the vendor attribute.",
    )
    .push_opt(&l, h.wear_used_ratio);
    m.gauge(
        "ssdwatch_device_spare_available_ratio",
        "Spare blocks remaining (0..1).",
    )
    .push_opt(&l, h.spare_available_ratio);
    m.gauge(
        "ssdwatch_device_spare_threshold_ratio",
        "Spare level below which the drive reports a critical condition (0..1).",
    )
    .push_opt(&l, h.spare_threshold_ratio);
    m.counter(
        "ssdwatch_device_host_written_bytes_total",
        "Bytes written by the host over the drive's life.",
    )
    .push_opt(&l, f(h.host_written_bytes));
    m.counter(
        "ssdwatch_device_host_read_bytes_total",
        "Bytes read by the host over the drive's life.",
    )
    .push_opt(&l, f(h.host_read_bytes));
    m.counter(
        "ssdwatch_device_nand_written_bytes_total",
        "Bytes written to flash (host plus internal writes), where the vendor reports it.",
    )
    .push_opt(&l, f(h.nand_written_bytes));
    m.gauge(
        "ssdwatch_device_erase_count_avg",
        "Average program/erase cycles per block.",
    )
    .push_opt(&l, f(h.erase_count_avg));
    m.gauge(
        "ssdwatch_device_erase_count_max",
        "Maximum program/erase cycles of any block.",
    )
    .push_opt(&l, f(h.erase_count_max));
    m.counter(
        "ssdwatch_device_media_errors_total",
        "Unrecovered media/data-integrity errors (NVMe media errors, SCSI uncorrected, ATA reported uncorrectable).",
    )
    .push_opt(&l, f(h.media_errors));
    m.gauge(
        "ssdwatch_device_critical_warning",
        "NVMe critical warning bit mask (0 = none).",
    )
    .push_opt(&l, f(h.critical_warning));
    m.gauge(
        "ssdwatch_device_smart_passed",
        "1 if the drive's overall SMART self-assessment passed, 0 if it failed.",
    )
    .push_opt(&l, h.smart_passed.map(b));
    m.gauge(
        "ssdwatch_device_temperature_celsius",
        "Current drive temperature.",
    )
    .push_opt(&l, h.temperature_celsius);
    m.counter(
        "ssdwatch_device_power_on_seconds_total",
        "Power-on time over the drive's life.",
    )
    .push_opt(&l, f(h.power_on_seconds));
    m.counter(
        "ssdwatch_device_power_cycles_total",
        "Power cycles over the drive's life.",
    )
    .push_opt(&l, f(h.power_cycles));
    m.counter(
        "ssdwatch_device_unsafe_shutdowns_total",
        "Power losses without a clean shutdown over the drive's life.",
    )
    .push_opt(&l, f(h.unsafe_shutdowns));
    m.gauge(
        "ssdwatch_device_reallocated_sectors",
        "Reallocated sectors/blocks (ATA attribute 5, SCSI grown defect list).",
    )
    .push_opt(&l, f(h.reallocated_sectors));
    m.gauge(
        "ssdwatch_device_pending_sectors",
        "Sectors waiting for reallocation (ATA attribute 197).",
    )
    .push_opt(&l, f(h.pending_sectors));

    let lifetime = match (h.nand_written_bytes, h.host_written_bytes) {
        (Some(n), Some(w)) if w > 0 => Some(n as f64 / w as f64),
        _ => None,
    };
    let waf = m.gauge(
        "ssdwatch_device_write_amplification_ratio",
        "Flash bytes written per host byte written, over the drive's life or the last day.",
    );
    for (window, v) in [
        ("lifetime", lifetime),
        ("1d", waf_over_window(&st.history, DAY)),
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
        m.gauge(
            "ssdwatch_device_smart_attribute_value",
            "ATA SMART attribute normalized value (vendor scale, usually 100 or 200 = new).",
        )
        .push_opt(&al, f(a.value));
        m.gauge(
            "ssdwatch_device_smart_attribute_raw",
            "ATA SMART attribute raw value (48-bit; meaning and unit depend on the drive family).",
        )
        .push_opt(&al, f(a.raw));
    }
}
