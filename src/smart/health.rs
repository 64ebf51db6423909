//! The normalized health model of one drive, built from one `smartctl --json` output.
//! Pure: it reads a JSON value and never touches a device. Any shape of input is accepted;
//! what cannot be read is left `None` and noted in `warnings`.

use super::table::{Field, From, MatchedBy, Percent, Rule, Table, Unit};
use serde::Serialize;
use serde_json::Value;

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

/// NVMe "data units" are thousands of 512-byte units: 512,000 bytes (NVMe base spec, SMART log).
const NVME_DATA_UNIT_BYTES: u64 = 512_000;
const MIB32: u64 = 32 * 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;
const GB: u64 = 1_000_000_000;

/// One ATA attribute as smartctl reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribute {
    pub id: u32,
    pub name: String,
    pub value: Option<u64>,
    pub worst: Option<u64>,
    pub thresh: Option<u64>,
    pub raw: Option<u64>,
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
    pub smartctl_exit_status: Option<u64>,
    /// The vendor-table entry that gave attribute meanings (ATA only).
    pub vendor_table_family: Option<String>,
    /// false when smartctl says the device has no SMART (virtio, RAID volumes, unknown type).
    pub smart_supported: Option<bool>,
    pub in_standby: bool,
    pub wear_used_ratio: Option<f64>,
    pub spare_available_ratio: Option<f64>,
    pub spare_threshold_ratio: Option<f64>,
    pub host_written_bytes: Option<u64>,
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

/// Bad input text: not JSON, or not a JSON object.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not valid JSON (line {line}, column {column}): {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("not a smartctl JSON object (top level is {0})")]
    NotObject(&'static str),
}

/// Parses a `smartctl --json` output and normalizes it.
pub fn parse(text: &str) -> Result<Health, ParseError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ParseError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    if !v.is_object() {
        return Err(ParseError::NotObject(kind_of(&v)));
    }
    Ok(normalize(&v, Table::builtin()))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn get_u64(v: &Value, path: &[&str]) -> Option<u64> {
    get(v, path).and_then(as_u64)
}

/// A non-negative integer; smartctl prints some 128-bit NVMe counters as floats or strings
/// when they overflow 64 bits, which are accepted when integral and in range.
fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn get_str(v: &Value, path: &[&str]) -> Option<String> {
    get(v, path)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Normalizes one parsed smartctl output with the given vendor table.
pub fn normalize(v: &Value, table: &Table) -> Health {
    let mut h = Health {
        device_type: get_str(v, &["device", "type"]),
        protocol: get_str(v, &["device", "protocol"]),
        model: get_str(v, &["model_name"])
            .or_else(|| get_str(v, &["scsi_model_name"]))
            .or_else(|| {
                let vendor = get_str(v, &["scsi_vendor"]).or_else(|| get_str(v, &["vendor"]));
                let product = get_str(v, &["scsi_product"]).or_else(|| get_str(v, &["product"]));
                product.map(|p| match vendor {
                    Some(ven) => format!("{ven} {p}"),
                    None => p,
                })
            }),
        model_family: get_str(v, &["model_family"]),
        serial: get_str(v, &["serial_number"]),
        firmware: get_str(v, &["firmware_version"])
            .or_else(|| get_str(v, &["scsi_revision"]))
            .or_else(|| get_str(v, &["revision"])),
        capacity_bytes: get_u64(v, &["user_capacity", "bytes"])
            .or_else(|| get_u64(v, &["nvme_total_capacity"])),
        smartctl_exit_status: get_u64(v, &["smartctl", "exit_status"]),
        ..Health::default()
    };
    h.wwn = wwn(v);
    if let Some(msgs) = get(v, &["smartctl", "messages"]).and_then(Value::as_array) {
        for m in msgs {
            let Some(s) = m.get("string").and_then(Value::as_str) else {
                continue;
            };
            let lower = s.to_ascii_lowercase();
            if lower.contains("standby mode") || lower.contains("sleep mode") {
                h.in_standby = true;
            }
            if m.get("severity").and_then(Value::as_str) == Some("error") {
                h.errors.push(s.trim().to_string());
            }
        }
    }
    if let Some(pm) = get_str(v, &["power_mode", "name"]) {
        let pm = pm.to_ascii_lowercase();
        if pm.contains("standby") || pm.contains("sleep") {
            h.in_standby = true;
        }
    }
    if h.smartctl_exit_status.is_none() {
        h.warnings
            .push("no smartctl.exit_status: output trimmed or from an old smartctl".into());
    }

    h.smart_passed = get(v, &["smart_status", "passed"]).and_then(Value::as_bool);
    h.temperature_celsius = get(v, &["temperature", "current"])
        .and_then(Value::as_f64)
        .filter(|t| (-60.0..=200.0).contains(t));
    // Drives without a sensor (and RAID volumes) report exactly 0: that is no reading.
    if h.temperature_celsius == Some(0.0) {
        h.temperature_celsius = None;
        h.warnings
            .push("temperature 0 °C taken as not reported".into());
    }
    h.power_on_seconds = get_u64(v, &["power_on_time", "hours"]).map(|hours| {
        let minutes = get_u64(v, &["power_on_time", "minutes"]).unwrap_or(0);
        hours
            .saturating_mul(3600)
            .saturating_add(minutes.saturating_mul(60))
    });
    h.power_cycles = get_u64(v, &["power_cycle_count"]);

    let nvme = get(v, &["nvme_smart_health_information_log"]).filter(|l| l.is_object());
    if let Some(log) = nvme {
        normalize_nvme(log, &mut h);
    }
    normalize_scsi(v, &mut h);
    let attrs = read_attributes(v, &mut h);
    if !attrs.is_empty() {
        normalize_ata(v, &attrs, table, &mut h);
    }
    h.attributes = attrs;
    normalize_devstat(v, &mut h);

    // smartctl >= 7.5: a vendor-neutral endurance figure, preferred over every other source.
    if let Some(p) = get_u64(v, &["endurance_used", "current_percent"]) {
        h.wear_used_ratio = Some(p as f64 / 100.0);
    }

    h.smart_supported = smart_supported(v, &h, nvme.is_some());
    if h.wear_used_ratio.is_some_and(|w| w > 1.0) {
        h.warnings.push(format!(
            "wear used {:.0}% is past the rated endurance",
            h.wear_used_ratio.unwrap_or(0.0) * 100.0
        ));
    }
    if let (Some(n), Some(w)) = (h.nand_written_bytes, h.host_written_bytes)
        && w > 0
        && n < w
    {
        h.warnings
            .push("NAND writes below host writes: the vendor's flash counter is not exact".into());
    }
    h
}

/// Whether the drive has SMART at all. None when this output cannot tell (device not opened).
fn smart_supported(v: &Value, h: &Health, has_nvme: bool) -> Option<bool> {
    if let Some(a) = get(v, &["smart_support", "available"]).and_then(Value::as_bool) {
        return Some(a);
    }
    if has_nvme || h.smart_passed.is_some() || !h.attributes.is_empty() {
        return Some(true);
    }
    let unsupported = h.errors.iter().any(|e| {
        let e = e.to_ascii_lowercase();
        e.contains("unable to detect device type")
            || e.contains("lacks smart capability")
            || e.contains("smart support is: unavailable")
    });
    if unsupported {
        return Some(false);
    }
    // The device was opened and identified but answered no health command at all
    // (RAID volumes, bridges without passthrough).
    let opened =
        get(v, &["device"]).is_some() && h.smartctl_exit_status.is_some_and(|s| s & 0b11 == 0);
    let has_scsi_logs = get(v, &["scsi_error_counter_log"]).is_some();
    if opened
        && h.smart_passed.is_none()
        && !has_scsi_logs
        && (h.model.is_some() || h.serial.is_some())
    {
        return Some(false);
    }
    None
}

fn wwn(v: &Value) -> Option<String> {
    if let (Some(naa), Some(oui), Some(id)) = (
        get_u64(v, &["wwn", "naa"]),
        get_u64(v, &["wwn", "oui"]),
        get_u64(v, &["wwn", "id"]),
    ) {
        // NAA 5: 4-bit NAA, 24-bit OUI, 36-bit vendor id, as /sys and udev print it.
        if naa < 16 && oui < (1 << 24) && id < (1 << 36) {
            return Some(format!("0x{naa:x}{oui:06x}{id:09x}"));
        }
    }
    if let Some(lu) = get_str(v, &["logical_unit_id"]) {
        return Some(lu.to_ascii_lowercase());
    }
    if let (Some(oui), Some(ext)) = (
        get_u64(v, &["eui64", "oui"]),
        get_u64(v, &["eui64", "ext_id"]),
    ) && oui < (1 << 24)
        && ext < (1 << 40)
    {
        return Some(format!("eui.{oui:06x}{ext:010x}"));
    }
    None
}

fn normalize_nvme(log: &Value, h: &mut Health) {
    let n = |k: &str| get_u64(log, &[k]);
    // percentage_used may exceed 100 on a drive past its rated endurance: not clamped.
    h.wear_used_ratio = n("percentage_used").map(|p| p as f64 / 100.0);
    h.spare_available_ratio = n("available_spare").map(|p| p as f64 / 100.0);
    h.spare_threshold_ratio = n("available_spare_threshold").map(|p| p as f64 / 100.0);
    h.host_written_bytes = n("data_units_written").and_then(|u| mul(u, NVME_DATA_UNIT_BYTES, h));
    h.host_read_bytes = n("data_units_read").and_then(|u| mul(u, NVME_DATA_UNIT_BYTES, h));
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
        h.temperature_celsius = log
            .get("temperature")
            .and_then(Value::as_f64)
            .filter(|t| (-60.0..=200.0).contains(t));
    }
}

fn normalize_scsi(v: &Value, h: &mut Health) {
    if let Some(p) = get_u64(v, &["scsi_percentage_used_endurance_indicator"]) {
        h.wear_used_ratio = Some(p as f64 / 100.0);
    }
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
    h.host_written_bytes = gb("write");
    h.host_read_bytes = gb("read");
    let unc: Vec<u64> = ["read", "write", "verify"]
        .iter()
        .filter_map(|d| get_u64(log, &[d, "total_uncorrected_errors"]))
        .collect();
    if !unc.is_empty() {
        h.media_errors = Some(unc.iter().fold(0u64, |a, b| a.saturating_add(*b)));
    }
}

fn read_attributes(v: &Value, h: &mut Health) -> Vec<Attribute> {
    let Some(table) = get(v, &["ata_smart_attributes", "table"]).and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(table.len());
    for a in table {
        let Some(id) = a.get("id").and_then(as_u64).filter(|id| *id <= 255) else {
            h.warnings
                .push("an ATA attribute without a valid id was skipped".into());
            continue;
        };
        out.push(Attribute {
            id: id as u32,
            name: a
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            value: a.get("value").and_then(as_u64),
            worst: a.get("worst").and_then(as_u64),
            thresh: a.get("thresh").and_then(as_u64),
            raw: get_u64(a, &["raw", "value"]),
        });
    }
    out
}

fn normalize_ata(v: &Value, attrs: &[Attribute], table: &Table, h: &mut Health) {
    let lbs = get_u64(v, &["logical_block_size"]).unwrap_or(512);
    for r in &table.defaults {
        apply(r, attrs, lbs, h);
    }
    match table.lookup(h.model_family.as_deref(), h.model.as_deref()) {
        Some((fam, by)) => {
            h.vendor_table_family = Some(fam.key.clone());
            if by == MatchedBy::ModelPattern {
                h.warnings.push(format!(
                    "drive not in smartctl's database: vendor table entry {} chosen by model number alone",
                    fam.key
                ));
            }
            for r in &fam.rules {
                apply(r, attrs, lbs, h);
                if let (Some(want), Some(a)) = (&r.name, attrs.iter().find(|a| a.id == r.id))
                    && by == MatchedBy::ModelFamily
                    && &a.name != want
                {
                    h.warnings.push(format!(
                        "attribute {} is named {} where the vendor table expects {want}",
                        r.id, a.name
                    ));
                }
            }
        }
        None => {
            let what = h
                .model_family
                .as_deref()
                .unwrap_or("not in smartctl's database");
            h.warnings.push(format!(
                "drive family ({what}) has no vendor table entry: wear and write attributes are exported raw only"
            ));
        }
    }
}

fn apply(r: &Rule, attrs: &[Attribute], lbs: u64, h: &mut Health) {
    let Some(a) = attrs.iter().find(|a| a.id == r.id) else {
        return;
    };
    let n = match r.from {
        From::Value => a.value,
        From::Raw => a.raw,
        From::RawLow16 => a.raw.map(|x| x & 0xffff),
        From::RawWord1 => a.raw.map(|x| (x >> 16) & 0xffff),
    };
    let Some(n) = n else { return };
    let ratio = |n: u64| match r.percent {
        Some(Percent::Remaining) => (100.0 - n as f64) / 100.0,
        _ => n as f64 / 100.0,
    };
    let scale = match r.unit {
        Unit::Count => 1,
        Unit::Lba => lbs,
        Unit::Bytes32mib => MIB32,
        Unit::Gib => GIB,
        Unit::Gb => GB,
    };
    let set_u64 = |slot: &mut Option<u64>, val: Option<u64>, add: bool| match (*slot, val) {
        (Some(old), Some(v)) if add => *slot = Some(old.saturating_add(v)),
        (None, v) => *slot = v,
        _ => {}
    };
    match r.field {
        Field::WearUsedRatio => {
            if r.percent == Some(Percent::Remaining) && n > 100 {
                h.warnings.push(format!(
                    "attribute {} life remaining {n}% is out of range: ignored",
                    r.id
                ));
            } else if h.wear_used_ratio.is_none() {
                h.wear_used_ratio = Some(ratio(n));
            }
        }
        Field::SpareAvailableRatio => {
            if h.spare_available_ratio.is_none() && n <= 100 {
                // Spare is a level, life remaining in percent: ratio = v/100.
                h.spare_available_ratio = Some(n as f64 / 100.0);
                if r.from == From::Value {
                    h.spare_threshold_ratio =
                        a.thresh.filter(|t| *t <= 100).map(|t| t as f64 / 100.0);
                }
            }
        }
        Field::HostWrittenBytes => {
            let v = mul(n, scale, h);
            set_u64(&mut h.host_written_bytes, v, r.add)
        }
        Field::HostReadBytes => {
            let v = mul(n, scale, h);
            set_u64(&mut h.host_read_bytes, v, r.add)
        }
        Field::NandWrittenBytes => {
            let v = mul(n, scale, h);
            set_u64(&mut h.nand_written_bytes, v, r.add)
        }
        Field::EraseCountAvg => set_u64(&mut h.erase_count_avg, Some(n), r.add),
        Field::EraseCountMax => set_u64(&mut h.erase_count_max, Some(n), r.add),
        Field::UnsafeShutdowns => set_u64(&mut h.unsafe_shutdowns, Some(n), r.add),
        Field::ReallocatedSectors => set_u64(&mut h.reallocated_sectors, Some(n), r.add),
        Field::PendingSectors => set_u64(&mut h.pending_sectors, Some(n), r.add),
    }
}

fn mul(n: u64, scale: u64, h: &mut Health) -> Option<u64> {
    let r = n.checked_mul(scale);
    if r.is_none() {
        h.warnings
            .push(format!("counter {n} x {scale} overflows 64 bits: dropped"));
    }
    r
}

/// ATA device statistics (`--log=devstat`): vendor-neutral wear and, where no vendor rule gave
/// them, host reads/writes and uncorrectable errors.
fn normalize_devstat(v: &Value, h: &mut Health) {
    let Some(pages) = get(v, &["ata_device_statistics", "pages"]).and_then(Value::as_array) else {
        return;
    };
    let lbs = get_u64(v, &["logical_block_size"]).unwrap_or(512);
    for p in pages {
        let Some(rows) = p.get("table").and_then(Value::as_array) else {
            continue;
        };
        for row in rows {
            let valid = get(row, &["flags", "valid"])
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let (Some(name), Some(val)) = (
                row.get("name").and_then(Value::as_str),
                row.get("value").and_then(as_u64),
            ) else {
                continue;
            };
            if !valid {
                continue;
            }
            match name {
                // The ATA standard's own endurance figure beats any vendor attribute.
                "Percentage Used Endurance Indicator" => {
                    h.wear_used_ratio = Some(val as f64 / 100.0)
                }
                // Some Micron/Crucial firmware keeps a 32-bit view here: vendor attribute first.
                "Logical Sectors Written" if h.host_written_bytes.is_none() => {
                    h.host_written_bytes = val.checked_mul(lbs)
                }
                "Logical Sectors Read" if h.host_read_bytes.is_none() => {
                    h.host_read_bytes = val.checked_mul(lbs)
                }
                "Number of Reported Uncorrectable Errors" if h.media_errors.is_none() => {
                    h.media_errors = Some(val)
                }
                "Lifetime Power-On Resets" if h.power_cycles.is_none() => {
                    h.power_cycles = Some(val)
                }
                _ => {}
            }
        }
    }
}
