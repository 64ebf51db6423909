//! From the text of one `smartctl --json` output to the normalized model: the sections shared
//! by every protocol here, each protocol's own in its module. Any shape of input is accepted;
//! what cannot be read is left `None` and noted in `warnings`. Pure: no I/O.

use super::json::{at_most, celsius, get, get_str, get_u64, kind_of, limit_celsius};
use super::model::{Found, HOST_WRITTEN_ORDER, Health, Origin, ParseError, WEAR_ORDER};
use super::table::Table;
use super::{ata, nvme, scsi, selftest};
use crate::time::{HOUR, MINUTE};
use serde_json::Value;

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
    let v: Value = serde_json::from_str(text).map_err(|e| {
        // Empty or cut-short input (an output cap, a killed smartctl) says so rather than
        // naming a parser state.
        if e.is_eof() && !text.trim().is_empty() {
            ParseError::Truncated {
                line: e.line(),
                column: e.column(),
                bytes: text.len(),
            }
        } else {
            ParseError::Json {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }
        }
    })?;
    if !v.is_object() {
        return Err(ParseError::NotObject(kind_of(&v)));
    }
    Ok(normalize(&v, Table::builtin()))
}

/// Declares the top-level sections `normalize` reads; anything else is ignored while parsing.
macro_rules! wanted {
    ($($k:ident),* $(,)?; $($s:ident: $t:ty),* $(,)?) => {
        #[derive(serde::Deserialize)]
        struct Wanted {
            $( #[serde(default)] $k: Option<Value>, )*
            $( #[serde(default)] $s: Option<$t>, )*
        }
        impl Wanted {
            fn into_value(self) -> Value {
                let mut m = serde_json::Map::new();
                $( if let Some(v) = self.$k { m.insert(stringify!($k).to_string(), v); } )*
                $( if let Some(v) = self.$s { m.insert(stringify!($s).to_string(), v.into()); } )*
                Value::Object(m)
            }
        }
    };
}

/// The ATA error log as the model reads it: its counts only. Its entries (five, each with the
/// five commands before it, in `-x` and `--log=error` output) are skipped unbuilt.
#[derive(serde::Deserialize)]
struct ErrorLogCounts {
    #[serde(default)]
    summary: Option<Count>,
    #[serde(default)]
    extended: Option<Count>,
}

#[derive(serde::Deserialize)]
struct Count {
    #[serde(default)]
    count: Option<Value>,
}

impl From<ErrorLogCounts> for Value {
    fn from(e: ErrorLogCounts) -> Value {
        let count = |c: Option<Count>| {
            let mut m = serde_json::Map::new();
            if let Some(v) = c.and_then(|c| c.count) {
                m.insert("count".into(), v);
            }
            Value::Object(m)
        };
        let mut m = serde_json::Map::new();
        m.insert("summary".into(), count(e.summary));
        m.insert("extended".into(), count(e.extended));
        Value::Object(m)
    }
}

/// The ATA self-test log as the model reads it: the newest entry of each table. The other
/// entries (up to 21 in the standard log, more in the extended one) are skipped unbuilt.
#[derive(serde::Deserialize)]
struct AtaSelfTestHeads {
    #[serde(default)]
    standard: Option<TableHead>,
    #[serde(default)]
    extended: Option<TableHead>,
}

#[derive(serde::Deserialize)]
struct TableHead {
    #[serde(default)]
    table: Option<FirstOf>,
}

/// The first element of a JSON array; anything else is no element.
struct FirstOf(Option<Value>);

impl<'de> serde::Deserialize<'de> for FirstOf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FirstOf;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FirstOf, A::Error> {
                let first = seq.next_element::<Value>()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(FirstOf(first))
            }
        }
        // Not an array (a wrong shape): no entry, and the rest of the output still parses.
        let v = d.deserialize_any(OrNone(V))?;
        Ok(v.unwrap_or(FirstOf(None)))
    }
}

/// A visitor that takes what `0` takes and turns any other shape into `None`.
struct OrNone<V>(V);

impl<'de, V: serde::de::Visitor<'de>> serde::de::Visitor<'de> for OrNone<V> {
    type Value = Option<V::Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(Some)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

impl From<AtaSelfTestHeads> for Value {
    fn from(a: AtaSelfTestHeads) -> Value {
        let head = |t: Option<TableHead>| {
            let mut m = serde_json::Map::new();
            if let Some(first) = t.and_then(|t| t.table).and_then(|f| f.0) {
                m.insert("table".into(), Value::Array(vec![first]));
            }
            Value::Object(m)
        };
        let mut m = serde_json::Map::new();
        m.insert("standard".into(), head(a.standard));
        m.insert("extended".into(), head(a.extended));
        Value::Object(m)
    }
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
    rotation_rate,
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
    in_smartctl_database,
    ata_smart_data,
    ata_sct_status,
    nvme_self_test_log,
    nvme_composite_temperature_threshold,
    scsi_self_test_0,
    scsi_nonmedium_error,
    scsi_nonmedium_error_count,
    write_cache;
    ata_smart_error_log: ErrorLogCounts,
    ata_smart_self_test_log: AtaSelfTestHeads,
);

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
        rotation_rate_rpm: get_u64(v, &["rotation_rate"]),
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
    h.temperature_celsius = celsius(get(v, &["temperature", "current"]));
    // Drives without a sensor (and RAID volumes) report exactly 0: that is no reading.
    if h.temperature_celsius == Some(0.0) {
        h.temperature_celsius = None;
        h.warnings
            .push("temperature 0 °C taken as not reported".into());
    }
    h.power_on_seconds = get_u64(v, &["power_on_time", "hours"]).map(|hours| {
        let minutes = get_u64(v, &["power_on_time", "minutes"]).unwrap_or(0);
        hours
            .saturating_mul(HOUR as u64)
            .saturating_add(minutes.saturating_mul(MINUTE as u64))
    });
    h.power_cycles = get_u64(v, &["power_cycle_count"]);
    temperature_limits(v, &mut h);

    // Each section offers what it read for the figures with several sources; the orders in
    // `model` decide, not the order of these calls.
    let mut found = Found::default();
    let nvme = get(v, &["nvme_smart_health_information_log"]).filter(|l| l.is_object());
    if let Some(log) = nvme {
        nvme::normalize(log, &mut h, &mut found);
    }
    scsi::normalize(v, &mut h, &mut found);
    let attrs = ata::read_attributes(v, &mut h);
    if !attrs.is_empty() {
        ata::normalize(v, &attrs, table, &mut h, &mut found);
    }
    h.attributes = attrs;
    ata::normalize_devstat(v, &mut h, &mut found);
    ata::normalize_named(v, &mut h, &mut found);
    // smartctl >= 7.5: a vendor-neutral endurance figure.
    found.wear.offer(
        Origin::EnduranceUsed,
        "current_percent",
        get_u64(v, &["endurance_used", "current_percent"]).map(|p| p as f64 / 100.0),
    );
    (h.wear_used_ratio, h.wear_source) = found.wear.pick(&WEAR_ORDER);
    (h.host_written_bytes, h.host_written_source) = found.host_written.pick(&HOST_WRITTEN_ORDER);

    if nvme.is_some() {
        ocp_log(v, &mut h);
    }
    logs(v, &mut h);
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

/// The OCP SMART log (C0h), when the run asked for it and the drive gave one the parser
/// trusts: its physical media writes are the NAND writes, unless a vendor attribute gave them.
/// A log that can't be trusted (another GUID, an unknown version, a damaged dump) is a warning
/// and leaves the figures unknown.
fn ocp_log(v: &Value, h: &mut Health) {
    match super::ocp::from_output(v) {
        None => {}
        Some(Err(e)) => h.warnings.push(e.to_string()),
        Some(Ok(mut l)) => {
            // Flash writes include the host's: none written to flash while the host wrote is
            // a counter the firmware does not keep, not a write amplification of 0.
            if l.physical_media_written_bytes == Some(0)
                && h.host_written_bytes.is_some_and(|w| w > 0)
            {
                h.warnings.push(
                    "NVMe log 0xc0 (OCP) counts no physical media writes while the host wrote: not used"
                        .into(),
                );
                l.physical_media_written_bytes = None;
            }
            if l.physical_media_written_bytes.is_none() {
                h.warnings.push(
                    "NVMe log 0xc0 (OCP) counts 2^64 bytes or more of physical media writes: not used"
                        .into(),
                );
            }
            if h.nand_written_bytes.is_none() {
                h.nand_written_bytes = l.physical_media_written_bytes;
            }
            h.ocp_log = Some(l);
        }
    }
}

/// The drive's own temperature limits: smartctl's protocol-neutral `temperature` limits
/// first (NVMe WCTEMP/CCTEMP in smartctl >= 7.3), then NVMe's own threshold section, then the
/// ATA SCT status's operating limit. A limit below the reading's range (0: none set) is none.
fn temperature_limits(v: &Value, h: &mut Health) {
    h.temperature_warning_celsius = limit_celsius(get(v, &["temperature", "op_limit_max"]))
        .or_else(|| limit_celsius(get(v, &["nvme_composite_temperature_threshold", "warning"])))
        .or_else(|| limit_celsius(get(v, &["ata_sct_status", "temperature", "op_limit_max"])));
    h.temperature_critical_celsius = limit_celsius(get(v, &["temperature", "critical_limit_max"]))
        .or_else(|| {
            limit_celsius(get(
                v,
                &["nvme_composite_temperature_threshold", "critical"],
            ))
        });
    if let (Some(w), Some(c)) = (
        h.temperature_warning_celsius,
        h.temperature_critical_celsius,
    ) && w > c
    {
        h.warnings.push(format!(
            "temperature warning limit {w} °C above the critical {c} °C: both dropped"
        ));
        h.temperature_warning_celsius = None;
        h.temperature_critical_celsius = None;
    }
}

/// The logs beyond the health figures: the ATA error log count, the newest self-test, the
/// write cache setting.
fn logs(v: &Value, h: &mut Health) {
    // The ATA error count is a 16-bit field of the SMART (summary) or extended error log.
    let ata_errors = get_u64(v, &["ata_smart_error_log", "extended", "count"])
        .or_else(|| get_u64(v, &["ata_smart_error_log", "summary", "count"]));
    if ata_errors.is_some() {
        h.error_log_entries = at_most(ata_errors, 0xffff, "ATA error log count", &mut h.warnings);
    }
    let hours = h.power_on_seconds.map(|s| s / HOUR as u64);
    (h.self_test, h.self_test_in_progress) = selftest::read(v, hours, &mut h.warnings);
    h.write_cache_enabled = get(v, &["write_cache", "enabled"]).and_then(Value::as_bool);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capture(name: &str) -> Health {
        let path = format!(
            "{}/tests/fixtures/smart/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// A real NVMe capture (Samsung PM9A3, a datacenter drive) with an OCP log dump added to
    /// smartctl's text output as `--json=o` carries it: the log is hand-made (no real C0h dump
    /// is in the corpus), the rest is the drive's.
    fn with_ocp_dump(log: &[u8]) -> Health {
        let path = format!(
            "{}/tests/fixtures/smart/nvme-samsung-pm9a3-mzql23t8hcls.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        v["smartctl"]["output"] = json!(crate::smart::ocp::tests::dump(log));
        parse(&v.to_string()).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn an_nvme_drive_with_the_ocp_log_reports_nand_writes() {
        use crate::smart::ocp::tests::{OCP_GUID, log};
        let plain = capture("nvme-samsung-pm9a3-mzql23t8hcls");
        assert_eq!(plain.nand_written_bytes, None);
        assert_eq!(plain.ocp_log, None);
        let host = plain.host_written_bytes.expect("host writes");
        // Flash writes 1.25 times the host's.
        let nand = host + host / 4;
        let h = with_ocp_dump(&log(u128::from(nand), 0, 3, OCP_GUID));
        assert_eq!(h.nand_written_bytes, Some(nand));
        assert_eq!(h.ocp_log.map(|l| l.version), Some(3));
        assert_eq!(
            h.host_written_bytes,
            Some(host),
            "the host's figure is untouched"
        );
        assert!(h.warnings.is_empty(), "{:?}", h.warnings);

        // Another layout under C0h: nothing taken, and said.
        let mut other = OCP_GUID;
        other[15] = 0;
        let h = with_ocp_dump(&log(u128::from(nand), 0, 3, other));
        assert_eq!((h.nand_written_bytes, h.ocp_log), (None, None));
        assert!(
            h.warnings.iter().any(|w| w.contains("GUID")),
            "{:?}",
            h.warnings
        );
        // An unknown version, an absurd count, no flash writes at all: unknown.
        for (b, says) in [
            (log(u128::from(nand), 0, 9, OCP_GUID), "version 9"),
            (log(u128::MAX, 0, 3, OCP_GUID), "2^64 bytes or more"),
            (log(0, 0, 3, OCP_GUID), "no physical media writes"),
        ] {
            let h = with_ocp_dump(&b);
            assert_eq!(h.nand_written_bytes, None, "{says}");
            assert!(
                h.warnings.iter().any(|w| w.contains(says)),
                "{:?}",
                h.warnings
            );
        }
        // A dump cut short: unknown, and the place named.
        let mut d = crate::smart::ocp::tests::dump(&log(u128::from(nand), 0, 3, OCP_GUID));
        d.truncate(20);
        let path = format!(
            "{}/tests/fixtures/smart/nvme-samsung-pm9a3-mzql23t8hcls.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut v: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
                .unwrap_or_default();
        v["smartctl"]["output"] = json!(d);
        let h = parse(&v.to_string()).expect("parse");
        assert_eq!(h.nand_written_bytes, None);
        assert!(
            h.warnings
                .iter()
                .any(|w| w.contains("272 bytes, 512 expected")),
            "{:?}",
            h.warnings
        );
    }

    /// The fast path (only the sections the model reads, the long logs cut to what it reads)
    /// gives the same model as reading the whole tree, on every capture, and on logs of the
    /// wrong shape (which send it to the whole tree).
    #[test]
    fn the_fast_path_reads_what_the_whole_tree_gives() {
        let dir = format!("{}/tests/fixtures/smart", env!("CARGO_MANIFEST_DIR"));
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if !name.ends_with(".json") || name == "expected.json" {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let whole: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                parse(&text).unwrap(),
                normalize(&whole, Table::builtin()),
                "{name}"
            );
            n += 1;
        }
        assert!(n >= 54, "{n}");
        for odd in [
            r#"{"smartctl": {"exit_status": 0}, "ata_smart_error_log": "x", "ata_smart_self_test_log": {"standard": {"table": 5}}}"#,
            r#"{"smartctl": {"exit_status": 0}, "ata_smart_self_test_log": {"standard": {"table": {"a": [1]}}, "extended": {"table": [{"type": {"value": 2}, "status": {"value": 0}, "lifetime_hours": 3}, [1, 2]]}}}"#,
        ] {
            let whole: Value = serde_json::from_str(odd).unwrap();
            assert_eq!(
                parse(odd).unwrap(),
                normalize(&whole, Table::builtin()),
                "{odd}"
            );
        }
    }

    /// Values read by hand from each capture's JSON.
    #[test]
    fn error_log_counts_of_real_drives() {
        for (name, want) in [
            // nvme_smart_health_information_log.num_err_log_entries
            ("nvme-corsair-mp510", Some(8382)),
            ("nvme-samsung-970evoplus", Some(22)),
            ("nvme-micron-9300-mtfdhal3t8tdp", Some(8)),
            ("nvme-seagate-firecuda530", Some(4)),
            ("nvme-crucial-p2-ct250p2ssd8", Some(1)),
            ("nvme-intel-p4510-ssdpe2kx010t8-worn73", Some(0)),
            // ata_smart_error_log.summary.count (smartctl --log=error)
            ("ata-hgst-hus724020ale640-exit64", Some(12)),
            ("ata-intel-s4510-ssdsc2kb480g8", Some(0)),
            // ata_smart_error_log.extended.count (smartctl -x)
            ("ata-samsung-860evo", Some(0)),
            // No error log in the output: unknown, not 0.
            ("ata-kingston-a400-sa400m8120g", None),
            ("scsi-seagate-st4000nm0043", None),
        ] {
            assert_eq!(capture(name).error_log_entries, want, "{name}");
        }
        // The SCSI grown defect list (56 on this Seagate) stays the reallocated count; no
        // capture of the corpus carries the non-medium error page.
        let h = capture("scsi-seagate-st4000nm0043");
        assert_eq!(
            (h.reallocated_sectors, h.non_medium_errors),
            (Some(56), None)
        );
    }

    /// Values read by hand from each capture's self-test log and power-on hours.
    #[test]
    fn self_tests_of_real_drives() {
        use crate::smart::{SelfTestKind as K, SelfTestResult as R};
        for (name, kind, result, at, age_hours, running) in [
            // 21 entries; the newest a short test at 1708 h, the drive at 1730 h; its status
            // byte 0xF1 says another test runs now.
            (
                "ata-wdc-wd140edfz",
                K::Short,
                R::Passed,
                1708,
                22,
                Some(true),
            ),
            // The extended (GPL) log of `-x`: 14417 h, the drive at 14551 h.
            (
                "ata-samsung-860evo",
                K::Short,
                R::Passed,
                14417,
                134,
                Some(false),
            ),
            // Behind a MegaRAID controller (`-d megaraid,0`): 35990 h of 37787 h.
            (
                "megaraid-sat-wdc-wd4000fyyx",
                K::Short,
                R::Passed,
                35990,
                1797,
                Some(false),
            ),
            // SCSI: scsi_self_test_0 is the newest; "Background short" at 1239 h of 1249 h.
            (
                "scsi-seagate-st18000nm004j-selftests",
                K::Short,
                R::Passed,
                1239,
                10,
                None,
            ),
            // "Background long" at 90 h of 34222 h.
            (
                "scsi-seagate-farm-anonymized",
                K::Extended,
                R::Passed,
                90,
                34132,
                None,
            ),
            // Code 7 is reserved by SPC: type other; at 3 h of 4665 h.
            (
                "scsi-seagate-st600mp0036",
                K::Other,
                R::Passed,
                3,
                4662,
                None,
            ),
        ] {
            let h = capture(name);
            let t = h
                .self_test
                .unwrap_or_else(|| panic!("{name}: no self-test"));
            assert_eq!((t.kind, t.result), (kind, result), "{name}");
            assert_eq!(t.power_on_hours, Some(at), "{name}");
            assert_eq!(
                t.age_power_on_seconds,
                Some(age_hours * HOUR as u64),
                "{name}"
            );
            assert_eq!(t.failing_lba, None, "{name}");
            assert_eq!(h.self_test_in_progress, running, "{name}");
        }
        // A log that was read and holds no entry: no test, and none running.
        for name in [
            "ata-wd-red-sa500-wds400t1r0a",
            "nvme-teamgroup-mp33-tm8fp6256g-smartctl75",
        ] {
            let h = capture(name);
            assert_eq!(
                (h.self_test, h.self_test_in_progress),
                (None, Some(false)),
                "{name}"
            );
        }
        // No log in the output: unknown.
        let h = capture("nvme-samsung-pm9a3-mzql23t8hcls");
        assert_eq!((h.self_test, h.self_test_in_progress), (None, None));
    }

    /// Limits and times read by hand from each capture.
    #[test]
    fn temperature_limits_and_time_above_them_of_real_drives() {
        for (name, warning, critical) in [
            // temperature.op_limit_max / critical_limit_max (smartctl 7.5, -a), the same as
            // nvme_composite_temperature_threshold 100 / 110.
            (
                "nvme-teamgroup-mp33-tm8fp6256g-smartctl75",
                Some(100.0),
                Some(110.0),
            ),
            // ata_sct_status.temperature.op_limit_max of `-x`.
            ("ata-samsung-860evo", Some(70.0), None),
            // SCSI temperature.drive_trip.
            ("scsi-seagate-st18000nm004j-selftests", None, Some(60.0)),
            ("scsi-seagate-st4000nm0043", None, Some(68.0)),
            ("scsi-hitachi-h109060sesun600g", None, Some(85.0)),
            // drive_trip 0: none set.
            ("scsi-wdc-wuh721818al5204-xall", None, None),
            // The base argv without --capabilities: NVMe limits unknown.
            ("nvme-samsung-pm9a3-mzql23t8hcls", None, None),
        ] {
            let h = capture(name);
            assert_eq!(
                (
                    h.temperature_warning_celsius,
                    h.temperature_critical_celsius
                ),
                (warning, critical),
                "{name}"
            );
        }
        for (name, secs) in [
            ("nvme-corsair-mp510", Some(0)),
            ("nvme-teamgroup-mp33-tm8fp6256g-smartctl75", Some(0)),
            // Optane M10 reports neither field.
            ("nvme-intel-optane-m10-mempek1w032ga", None),
        ] {
            let h = capture(name);
            assert_eq!(h.warning_temperature_seconds, secs, "{name}");
            assert_eq!(h.critical_temperature_seconds, secs, "{name}");
            assert_eq!(h.thermal_throttle_heavy, Default::default(), "{name}");
        }
    }

    #[test]
    fn absurd_temperatures_and_times_are_unknown() {
        let v = json!({"smartctl": {"exit_status": 0}, "power_on_time": {"hours": 100},
            "temperature": {"current": 65535, "op_limit_max": 65535, "critical_limit_max": 0},
            "nvme_smart_health_information_log": {"temperature": 65535,
                "warning_temp_time": 4_294_967_295u64, "critical_comp_time": 7000,
                "thermal_temp1_transition_count": 3, "thermal_temp1_total_time": 40,
                "thermal_temp2_transition_count": 4_294_967_295u64,
                "thermal_temp2_total_time": 500_000}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.temperature_celsius, None);
        assert_eq!(
            (
                h.temperature_warning_celsius,
                h.temperature_critical_celsius
            ),
            (None, None)
        );
        // All ones; 7000 minutes is more than the drive's 100 hours on.
        assert_eq!(h.warning_temperature_seconds, None);
        assert_eq!(h.critical_temperature_seconds, None);
        assert_eq!(
            (
                h.thermal_throttle_light.transitions,
                h.thermal_throttle_light.seconds
            ),
            (Some(3), Some(40))
        );
        assert_eq!(
            (
                h.thermal_throttle_heavy.transitions,
                h.thermal_throttle_heavy.seconds
            ),
            (None, None)
        );
        for f in [
            "warning_temp_time",
            "critical_comp_time",
            "thermal_temp2_total_time",
        ] {
            assert!(
                h.warnings.iter().any(|w| w.contains(f)),
                "{f}: {:?}",
                h.warnings
            );
        }
        // A warning limit above the critical one is a bad read of both.
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_composite_temperature_threshold": {"warning": 90, "critical": 80}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(
            (
                h.temperature_warning_celsius,
                h.temperature_critical_celsius
            ),
            (None, None)
        );
        // Wrong types cost only their field.
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_composite_temperature_threshold": {"warning": "hot", "critical": 84},
            "nvme_smart_health_information_log": {"warning_temp_time": [1]}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(
            (
                h.temperature_warning_celsius,
                h.temperature_critical_celsius
            ),
            (None, Some(84.0))
        );
        assert_eq!(h.warning_temperature_seconds, None);
    }

    #[test]
    fn absurd_error_counts_are_unknown_not_figures() {
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_smart_health_information_log": {"num_err_log_entries": 4_294_967_295u64}});
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.error_log_entries, None);
        assert!(
            h.warnings.iter().any(|w| w.contains("num_err_log_entries")),
            "{:?}",
            h.warnings
        );
        let v = json!({"smartctl": {"exit_status": 0},
            "nvme_smart_health_information_log": {"num_err_log_entries": 4_294_967_294u64}});
        assert_eq!(
            normalize(&v, Table::builtin()).error_log_entries,
            Some(4_294_967_294)
        );
        // ATA's count is 16 bits on the drive.
        for bad in [
            json!(65_536),
            json!("many"),
            json!(-1),
            json!(1.5),
            json!(null),
        ] {
            let v = json!({"smartctl": {"exit_status": 0},
                "ata_smart_error_log": {"summary": {"count": bad}}});
            assert_eq!(
                normalize(&v, Table::builtin()).error_log_entries,
                None,
                "{bad}"
            );
        }
        let v = json!({"smartctl": {"exit_status": 0},
            "scsi_nonmedium_error": {"count": 4_294_967_295u64}});
        assert_eq!(normalize(&v, Table::builtin()).non_medium_errors, None);
        let v = json!({"smartctl": {"exit_status": 0}, "scsi_nonmedium_error": {"count": 389}});
        assert_eq!(normalize(&v, Table::builtin()).non_medium_errors, Some(389));
    }

    #[test]
    fn endurance_used_of_newer_smartctl_wins() {
        let v = json!({"smartctl": {"exit_status": 0}, "model_family": "Samsung based SSDs",
            "endurance_used": {"current_percent": 7},
            "ata_smart_attributes": {"table": [{"id": 177, "name": "Wear_Leveling_Count", "value": 99, "raw": {"value": 1}}]}});
        assert_eq!(normalize(&v, Table::builtin()).wear_used_ratio, Some(0.07));
    }

    #[test]
    fn output_cut_short_says_so_and_garbage_says_where() {
        let e = parse("{\"smartctl\": {\"exit_status\": 0}, \"model_name\": \"X").unwrap_err();
        assert!(
            matches!(e, ParseError::Truncated { bytes: 49, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("the output was cut short"), "{e}");
        let e = parse("Segmentation fault").unwrap_err();
        assert!(matches!(e, ParseError::Json { line: 1, .. }), "{e:?}");
        assert!(matches!(parse("  ").unwrap_err(), ParseError::Json { .. }));
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
}
