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
    // Fast path: only the top-level sections the model reads are built into a tree; the rest
    // (self-test and error logs, SCT tables of `-x` output) is skipped without allocating.
    // (A struct also deserializes from an array, hence the object check.)
    if text.trim_start().starts_with('{')
        && let Ok(w) = serde_json::from_str::<Wanted>(text)
    {
        return Ok(normalize(&w.into_value(), Table::builtin()));
    }
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

/// Declares the top-level sections `normalize` reads; anything else is ignored while parsing.
macro_rules! wanted {
    ($($k:ident),* $(,)?) => {
        #[derive(serde::Deserialize)]
        struct Wanted { $( #[serde(default)] $k: Option<Value>, )* }
        impl Wanted {
            fn into_value(self) -> Value {
                let mut m = serde_json::Map::new();
                $( if let Some(v) = self.$k { m.insert(stringify!($k).to_string(), v); } )*
                Value::Object(m)
            }
        }
    };
}

wanted!(
    smartctl,
    device,
    model_name,
    scsi_model_name,
    scsi_vendor,
    vendor,
    scsi_product,
    product,
    model_family,
    serial_number,
    firmware_version,
    scsi_revision,
    revision,
    user_capacity,
    nvme_total_capacity,
    wwn,
    logical_unit_id,
    eui64,
    power_mode,
    smart_status,
    smart_support,
    temperature,
    power_on_time,
    power_cycle_count,
    logical_block_size,
    nvme_smart_health_information_log,
    scsi_percentage_used_endurance_indicator,
    scsi_grown_defect_list,
    scsi_start_stop_cycle_counter,
    scsi_error_counter_log,
    ata_smart_attributes,
    ata_device_statistics,
    endurance_used,
);

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
            // "Device is in STANDBY mode, exit(2)", "... STANDBY (OS) mode ...", "... SLEEP mode ...".
            if lower.contains("device is in standby") || lower.contains("device is in sleep") {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A minimal ATA output: family, model and an attribute table of (id, name, value, raw).
    fn ata(family: Option<&str>, model: &str, attrs: &[(u32, &str, u64, u64)]) -> Health {
        let table: Vec<Value> = attrs
            .iter()
            .map(|(id, name, value, raw)| {
                json!({"id": id, "name": name, "value": value, "worst": value, "thresh": 10,
                       "raw": {"value": raw, "string": raw.to_string()}})
            })
            .collect();
        let mut v = json!({
            "smartctl": {"exit_status": 0},
            "device": {"name": "/dev/sda", "type": "sat", "protocol": "ATA"},
            "model_name": model,
            "logical_block_size": 512,
            "ata_smart_attributes": {"table": table},
        });
        if let Some(f) = family {
            v["model_family"] = json!(f);
        }
        normalize(&v, Table::builtin())
    }

    const MIB32: u64 = 32 << 20;

    type Case = (&'static str, Health, Box<dyn Fn(&Health)>);

    /// One case per vendor-table family; values follow that family's documented meaning.
    #[test]
    fn each_vendor_family_reads_its_attributes_with_its_own_meaning() {
        let cases: Vec<Case> = vec![
            (
                "samsung",
                ata(
                    Some("Samsung based SSDs"),
                    "Samsung SSD 870 EVO 1TB",
                    &[
                        (177, "Wear_Leveling_Count", 97, 31),
                        (241, "Total_LBAs_Written", 99, 1000),
                        (235, "POR_Recovery_Count", 99, 4),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.03));
                    assert_eq!(h.host_written_bytes, Some(512_000));
                    assert_eq!(h.erase_count_avg, Some(31));
                    assert_eq!(h.unsafe_shutdowns, Some(4));
                }),
            ),
            (
                "intel",
                ata(
                    Some("Intel 545s Series SSDs"),
                    "INTEL SSDSC2KW256G8",
                    &[
                        (233, "Media_Wearout_Indicator", 90, 0),
                        (241, "Host_Writes_32MiB", 100, 882459),
                        (249, "NAND_Writes_1GiB", 100, 24592),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.1));
                    assert_eq!(h.host_written_bytes, Some(882459 * MIB32));
                    assert_eq!(h.nand_written_bytes, Some(24592 << 30));
                }),
            ),
            (
                "dell_intel",
                ata(
                    Some("Dell Certified Intel S3520 Series SSDs"),
                    "SSDSC2BB480G7R",
                    &[
                        (245, "Percent_Life_Remaining", 100, 93),
                        (233, "Total_LBAs_Written", 100, 5),
                        (225, "Host_Writes_32MiB", 100, 10),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.07));
                    assert_eq!(h.host_written_bytes, Some(10 * MIB32));
                }),
            ),
            (
                "micron_client",
                ata(
                    Some("Crucial/Micron Client SSDs"),
                    "CT500MX500SSD1",
                    &[
                        (202, "Percent_Lifetime_Remain", 88, 12),
                        (173, "Ave_Block-Erase_Count", 88, 180),
                        (246, "Total_LBAs_Written", 100, 2000),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.12));
                    assert_eq!(h.erase_count_avg, Some(180));
                    assert_eq!(h.host_written_bytes, Some(2000 * 512));
                }),
            ),
            (
                "micron_enterprise",
                ata(
                    Some("Micron 5100 Pro / 52x0 / 5300 SSDs"),
                    "Micron_5300_MTFDDAK1T9TDS",
                    &[
                        (202, "Percent_Lifetime_Remain", 95, 0),
                        (246, "Total_LBAs_Written", 100, 10),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.05));
                    assert_eq!(h.host_written_bytes, Some(5120));
                }),
            ),
            (
                "crucial_m4",
                ata(
                    Some("Crucial/Micron RealSSD m4/C400/P400"),
                    "M4-CT128M4SSD2",
                    &[
                        (202, "Perc_Rated_Life_Used", 98, 2),
                        (173, "Wear_Leveling_Count", 98, 68),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.02));
                    assert_eq!(h.erase_count_avg, Some(68));
                }),
            ),
            (
                "phison",
                ata(
                    Some("Phison Driven SSDs"),
                    "KINGSTON SA400S37240G",
                    // 231: normalized 100 but raw 90: Phison keeps life left in raw.
                    &[
                        (231, "SSD_Life_Left", 100, 90),
                        (173, "MaxAvgErase_Ct", 100, 0x0011_0032),
                        (241, "Lifetime_Writes_GiB", 100, 3),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.1));
                    assert_eq!(h.erase_count_max, Some(50));
                    assert_eq!(h.erase_count_avg, Some(17));
                    assert_eq!(h.host_written_bytes, Some(3 << 30));
                }),
            ),
            (
                "kingston_uv",
                ata(
                    Some("Kingston SSDNow UV400/500"),
                    "KINGSTON SUV400S37240G",
                    &[
                        (231, "SSD_Life_Left", 97, 0),
                        (241, "Host_Writes_GiB", 100, 7),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.03));
                    assert_eq!(h.host_written_bytes, Some(7 << 30));
                }),
            ),
            (
                "sandforce",
                ata(
                    Some("SandForce Driven SSDs"),
                    "KINGSTON SV300S37A120G",
                    // 231: life left in the NORMALIZED value here; raw is unrelated.
                    &[
                        (231, "SSD_Life_Left", 94, 3),
                        (241, "Lifetime_Writes_GiB", 100, 5),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.06));
                    assert_eq!(h.host_written_bytes, Some(5 << 30));
                }),
            ),
            (
                "wd_ssd",
                ata(
                    Some("WD Blue / Red / Green SSDs"),
                    "WDC WDS500G2B0A-00SM50",
                    &[
                        (233, "NAND_GB_Written_TLC", 100, 10),
                        (234, "NAND_GB_Written_SLC", 100, 20),
                        (241, "Host_Writes_GiB", 100, 25),
                        (232, "Available_Reservd_Space", 100, 100),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.nand_written_bytes, Some(30_000_000_000));
                    assert_eq!(h.host_written_bytes, Some(25 << 30));
                    assert_eq!(h.spare_available_ratio, Some(1.0));
                    assert_eq!(h.spare_threshold_ratio, Some(0.1));
                }),
            ),
            (
                "sandisk_marvell",
                ata(
                    Some("Marvell based SanDisk SSDs"),
                    "SanDisk SDSSDH3500G",
                    &[
                        (233, "Total_NAND_Writes_GiB", 100, 40),
                        (241, "Total_Writes_GiB", 100, 30),
                        (232, "Perc_Avail_Resrvd_Space", 100, 100),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.nand_written_bytes, Some(40 << 30));
                    assert_eq!(h.host_written_bytes, Some(30 << 30));
                    assert_eq!(h.spare_available_ratio, Some(1.0));
                }),
            ),
            (
                "silicon_motion",
                ata(
                    Some("Silicon Motion based SSDs"),
                    "TS256GSSD230S",
                    &[
                        (169, "Remaining_Lifetime_Perc", 100, 96),
                        (245, "TLC_Writes_32MiB", 100, 100),
                        (246, "SLC_Writes_32MiB", 100, 50),
                        (241, "Host_Writes_32MiB", 100, 120),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.04));
                    assert_eq!(h.nand_written_bytes, Some(150 * MIB32));
                    assert_eq!(h.host_written_bytes, Some(120 * MIB32));
                }),
            ),
            (
                "skhynix_enterprise",
                ata(
                    None,
                    "HFS480G3H2X069N",
                    &[
                        (245, "Unknown_Attribute", 100, 98),
                        (241, "Total_LBAs_Written", 100, 11),
                        (235, "Unknown_Attribute", 100, 10),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.02));
                    assert_eq!(h.nand_written_bytes, Some(11 << 30));
                    assert_eq!(h.host_written_bytes, Some(10 << 30));
                }),
            ),
            (
                "seagate_ssd",
                ata(
                    Some("Seagate BarraCuda SSD"),
                    "ZA500CM10002",
                    &[
                        (231, "SSD_Life_Left", 99, 0),
                        (233, "Flash_Writes_GiB", 100, 9),
                        (241, "Host_Writes_GiB", 100, 8),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.01));
                    assert_eq!(h.nand_written_bytes, Some(9 << 30));
                }),
            ),
            (
                "ocz_barefoot3",
                ata(
                    Some("OCZ/Indilinx Barefoot 3 based SSDs"),
                    "OCZ-VECTOR150",
                    &[
                        (233, "Remaining_Lifetime_Perc", 92, 92),
                        (249, "Total_NAND_Prog_Ct_GiB", 100, 12),
                        (241, "Host_Writes_GiB", 100, 6),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.08));
                    assert_eq!(h.nand_written_bytes, Some(12 << 30));
                }),
            ),
            (
                "plextor",
                ata(
                    Some("Plextor M3/M5/M6/M7 Series SSDs"),
                    "PLEXTOR PX-256M6Pro",
                    &[
                        (177, "Wear_Leveling_Count", 96, 100),
                        (241, "Host_Writes_32MiB", 100, 3),
                    ],
                ),
                Box::new(|h: &Health| {
                    assert_eq!(h.wear_used_ratio, Some(0.04));
                    assert_eq!(h.host_written_bytes, Some(3 * MIB32));
                }),
            ),
        ];
        let mut covered: Vec<&str> = Vec::new();
        for (key, h, check) in &cases {
            assert_eq!(
                h.vendor_table_family.as_deref(),
                Some(*key),
                "{:?}",
                h.warnings
            );
            check(h);
            covered.push(key);
        }
        for f in &Table::builtin().families {
            assert!(
                covered.contains(&f.key.as_str()),
                "family {} has no test",
                f.key
            );
        }
    }

    #[test]
    fn unknown_family_exports_no_converted_values() {
        let h = ata(
            None,
            "NONAME SSD 128GB",
            &[
                (241, "Total_LBAs_Written", 100, 5),
                (177, "Wear_Leveling_Count", 50, 9),
            ],
        );
        assert_eq!(h.vendor_table_family, None);
        assert_eq!(h.host_written_bytes, None);
        assert_eq!(h.wear_used_ratio, None);
        assert_eq!(h.attributes.len(), 2, "raw table still exported");
        assert!(!h.warnings.is_empty());
    }

    #[test]
    fn nvme_wear_past_rated_endurance_is_not_clamped() {
        let v = json!({"smartctl": {"exit_status": 0}, "device": {"type": "nvme", "protocol": "NVMe"},
            "nvme_smart_health_information_log": {"percentage_used": 160, "critical_warning": 9, "data_units_written": 2}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.wear_used_ratio, Some(1.6));
        assert_eq!(h.critical_warning, Some(9));
        assert_eq!(h.host_written_bytes, Some(1_024_000));
        assert!(
            h.warnings
                .iter()
                .any(|w| w.contains("past the rated endurance"))
        );
    }

    #[test]
    fn endurance_used_of_newer_smartctl_wins() {
        let v = json!({"smartctl": {"exit_status": 0}, "model_family": "Samsung based SSDs",
            "endurance_used": {"current_percent": 7},
            "ata_smart_attributes": {"table": [{"id": 177, "name": "Wear_Leveling_Count", "value": 99, "raw": {"value": 1}}]}});
        assert_eq!(normalize(&v, Table::builtin()).wear_used_ratio, Some(0.07));
    }

    #[test]
    fn standby_output_is_recognised() {
        for msg in [
            "Device is in STANDBY mode, exit(2)",
            "Device is in STANDBY (OS) mode, exit(2)",
            "Device is in SLEEP mode, exit(2)",
        ] {
            let v = json!({"smartctl": {"exit_status": 2, "messages": [{"string": msg, "severity": "information"}]}});
            assert!(normalize(&v, Table::builtin()).in_standby, "{msg}");
        }
        let awake = json!({"smartctl": {"exit_status": 0, "messages": [{"string": "Standby timer value: 0", "severity": "information"}]}});
        assert!(!normalize(&awake, Table::builtin()).in_standby);
    }

    #[test]
    fn counter_overflow_is_dropped_with_a_warning() {
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_smart_health_information_log": {"data_units_written": u64::MAX}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.host_written_bytes, None);
        assert!(h.warnings.iter().any(|w| w.contains("overflows")));
    }
}
