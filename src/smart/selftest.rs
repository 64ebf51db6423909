//! The drive's own self-test log (ATA `ata_smart_self_test_log`, NVMe `nvme_self_test_log`,
//! SCSI `scsi_self_test_N`) into the latest entry: type, result, when, failing LBA. Pure: reads
//! a JSON value only; ssdwatch never starts a self-test.

use super::json::{as_u64, get, get_str, get_u64};
use serde::Serialize;
use serde_json::Value;

/// What kind of test an entry was; a bounded set (it is a label value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfTestKind {
    Short,
    Extended,
    Conveyance,
    Selective,
    /// ATA "offline" (immediate offline data collection run as a test).
    Offline,
    /// Vendor-specific or a code the standard reserves.
    Other,
}

impl SelfTestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SelfTestKind::Short => "short",
            SelfTestKind::Extended => "extended",
            SelfTestKind::Conveyance => "conveyance",
            SelfTestKind::Selective => "selective",
            SelfTestKind::Offline => "offline",
            SelfTestKind::Other => "other",
        }
    }
}

/// How an entry ended; a bounded set (it is a label value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfTestResult {
    /// Completed without error.
    Passed,
    /// Completed and found a fault (read, electrical, servo, a failed segment, unknown failure).
    Failed,
    /// Aborted or interrupted (by the host, a reset, a format, a sanitize...): says nothing
    /// about the medium.
    Aborted,
    InProgress,
    /// A status code the standard reserves or the vendor defines.
    Other,
}

impl SelfTestResult {
    pub fn as_str(self) -> &'static str {
        match self {
            SelfTestResult::Passed => "passed",
            SelfTestResult::Failed => "failed",
            SelfTestResult::Aborted => "aborted",
            SelfTestResult::InProgress => "in_progress",
            SelfTestResult::Other => "other",
        }
    }
}

/// The newest entry of a drive's self-test log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelfTest {
    #[serde(rename = "type")]
    pub kind: SelfTestKind,
    pub result: SelfTestResult,
    /// smartctl's words for the result, e.g. "Completed: read failure".
    pub status: Option<String>,
    /// The drive's power-on hours when the test ran, as the log stores them (16 bits on ATA
    /// and SCSI: they wrap every 65,536 h).
    pub power_on_hours: Option<u64>,
    /// Power-on time since the test ran, in seconds: the drive's hour counter now minus the
    /// entry's (modulo 2^16 on ATA and SCSI). Not wall time: a drive switched off does not age.
    pub age_power_on_seconds: Option<u64>,
    /// The first LBA that failed, when the drive logged one.
    pub failing_lba: Option<u64>,
}

/// ATA and SCSI self-test logs keep power-on hours in 16 bits.
const HOURS_16: u64 = 1 << 16;

/// The newest self-test of the output, and whether one runs now (where the drive says), or
/// `(None, None)` when the output has no self-test log. `power_on_hours` is the drive's
/// counter now. Entries whose fields are of the wrong shape give `None` for those fields only.
pub(super) fn read(
    v: &Value,
    power_on_hours: Option<u64>,
    warnings: &mut Vec<String>,
) -> (Option<SelfTest>, Option<bool>) {
    if let Some(log) = get(v, &["nvme_self_test_log"]).filter(|l| l.is_object()) {
        let running = get_u64(log, &["current_self_test_operation", "value"]).map(|op| op != 0);
        return (nvme(log, power_on_hours, warnings), running);
    }
    if let Some(log) = get(v, &["ata_smart_self_test_log"]).filter(|l| l.is_object()) {
        // ATA's current status byte: high nibble 15 = a test is running.
        let running = get_u64(v, &["ata_smart_data", "self_test", "status", "value"])
            .filter(|s| *s <= 0xff)
            .map(|s| s >> 4 == 15);
        return (ata(log, power_on_hours), running);
    }
    if v.get("scsi_self_test_0").is_some() {
        return (scsi(v, power_on_hours), None);
    }
    let running = get_u64(v, &["ata_smart_data", "self_test", "status", "value"])
        .filter(|s| *s <= 0xff)
        .map(|s| s >> 4 == 15);
    (None, running)
}

/// Age on a 16-bit hour counter: the drive's hours now (any width) against the entry's.
fn age16(now: Option<u64>, at: Option<u64>) -> Option<u64> {
    let (now, at) = (now?, at?);
    if at >= HOURS_16 {
        return None;
    }
    let now16 = now % HOURS_16;
    // A drive younger than the wrap can't have a test from the future.
    if now < HOURS_16 && at > now {
        return None;
    }
    Some((now16 + HOURS_16 - at) % HOURS_16 * crate::time::HOUR as u64)
}

fn ata(log: &Value, now: Option<u64>) -> Option<SelfTest> {
    // smartctl lists the newest entry first; the extended (GPL) log is the larger and newer
    // one where both are read.
    let row = ["extended", "standard"].iter().find_map(|k| {
        get(log, &[k, "table"])
            .and_then(Value::as_array)
            .and_then(|t| t.first())
    })?;
    let kind = match get_u64(row, &["type", "value"]).map(|t| t & 0x7f) {
        Some(1) => SelfTestKind::Short,
        Some(2) => SelfTestKind::Extended,
        Some(3) => SelfTestKind::Conveyance,
        Some(4) => SelfTestKind::Selective,
        Some(0) => SelfTestKind::Offline,
        _ => SelfTestKind::Other,
    };
    // Status byte (ACS): high nibble is the result, low nibble the tenths left.
    let result = match get_u64(row, &["status", "value"]).filter(|s| *s <= 0xff) {
        Some(s) => match s >> 4 {
            0 => SelfTestResult::Passed,
            1 | 2 => SelfTestResult::Aborted,
            3..=8 => SelfTestResult::Failed,
            15 => SelfTestResult::InProgress,
            _ => SelfTestResult::Other,
        },
        None => match get(row, &["status", "passed"]).and_then(Value::as_bool) {
            Some(true) => SelfTestResult::Passed,
            Some(false) => SelfTestResult::Failed,
            None => SelfTestResult::Other,
        },
    };
    let at = get_u64(row, &["lifetime_hours"]);
    Some(SelfTest {
        kind,
        result,
        status: get_str(row, &["status", "string"]),
        power_on_hours: at,
        age_power_on_seconds: age16(now, at),
        failing_lba: get_u64(row, &["lba"]),
    })
}

fn nvme(log: &Value, now: Option<u64>, warnings: &mut Vec<String>) -> Option<SelfTest> {
    // Newest first; result 15 marks an unused entry.
    let row = get(log, &["table"])
        .and_then(Value::as_array)?
        .iter()
        .find(|r| get_u64(r, &["self_test_result", "value"]) != Some(15))?;
    let kind = match get_u64(row, &["self_test_code", "value"]) {
        Some(1) => SelfTestKind::Short,
        Some(2) => SelfTestKind::Extended,
        _ => SelfTestKind::Other,
    };
    // NVMe base spec, Device Self-test Status: 0 done; 1-4, 8, 9 aborted (command, reset,
    // namespace removed, format, unknown, sanitize); 5 fatal, 6 unknown failed segment,
    // 7 failed segments.
    let result = match get_u64(row, &["self_test_result", "value"]) {
        Some(0) => SelfTestResult::Passed,
        Some(1..=4 | 8 | 9) => SelfTestResult::Aborted,
        Some(5..=7) => SelfTestResult::Failed,
        _ => SelfTestResult::Other,
    };
    let at = get_u64(row, &["power_on_hours"]);
    let age = match (now, at) {
        (Some(n), Some(a)) if a <= n => Some((n - a).saturating_mul(crate::time::HOUR as u64)),
        (Some(n), Some(a)) => {
            warnings.push(format!(
                "self-test log entry at {a} power-on hours is after the drive's {n} hours: no age"
            ));
            None
        }
        _ => None,
    };
    Some(SelfTest {
        kind,
        result,
        status: get_str(row, &["self_test_result", "string"]),
        power_on_hours: at,
        age_power_on_seconds: age,
        failing_lba: get_u64(row, &["lba"]),
    })
}

fn scsi(v: &Value, now: Option<u64>) -> Option<SelfTest> {
    // scsi_self_test_0 is the newest.
    let row = v.get("scsi_self_test_0").filter(|r| r.is_object())?;
    let kind = match get_u64(row, &["code", "value"]) {
        Some(1 | 5) => SelfTestKind::Short,
        Some(2 | 6) => SelfTestKind::Extended,
        _ => SelfTestKind::Other,
    };
    // SPC self-test results log: 0 no error, 1-2 aborted, 3 unknown error, 4-6 a segment
    // failed, 15 in progress.
    let result = match get_u64(row, &["result", "value"]) {
        Some(0) => SelfTestResult::Passed,
        Some(1 | 2) => SelfTestResult::Aborted,
        Some(3..=6) => SelfTestResult::Failed,
        Some(15) => SelfTestResult::InProgress,
        _ => SelfTestResult::Other,
    };
    let at = get_u64(row, &["power_on_time", "hours"]);
    let lba = row.get("lba_first_failure").and_then(|l| match l {
        Value::Object(_) => l.get("value").and_then(as_u64),
        other => as_u64(other),
    });
    Some(SelfTest {
        kind,
        result,
        status: get_str(row, &["result", "string"]),
        power_on_hours: at,
        age_power_on_seconds: age16(now, at),
        failing_lba: lba,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_16_bit_hour_counter_is_aged_across_its_wrap() {
        assert_eq!(age16(Some(1730), Some(1708)), Some(22 * 3600));
        // The drive is at 65,536 + 10 h; the test ran at 65,530 on the 16-bit counter.
        assert_eq!(age16(Some(65_546), Some(65_530)), Some(16 * 3600));
        assert_eq!(age16(Some(100), Some(200)), None, "from the future");
        assert_eq!(age16(Some(100), Some(70_000)), None, "not 16 bits");
        assert_eq!(age16(None, Some(1)), None);
    }

    /// The self-test section of a real `smartctl -x -jc` of a TEAM TM8FP6256G (NVMe), as a
    /// public NAS middleware test quotes it: two passing tests, the newest first.
    #[test]
    fn nvme_log_of_a_real_drive() {
        let v = json!({"nvme_self_test_log": {
            "current_self_test_operation": {"value": 0, "string": "No self-test in progress"},
            "table": [
                {"self_test_code": {"value": 1, "string": "Short"},
                 "self_test_result": {"value": 0, "string": "Completed without error"},
                 "power_on_hours": 23575},
                {"self_test_code": {"value": 2, "string": "Extended"},
                 "self_test_result": {"value": 0, "string": "Completed without error"},
                 "power_on_hours": 23335}]}});
        let mut w = Vec::new();
        let (t, running) = read(&v, Some(23580), &mut w);
        let t = t.unwrap();
        assert_eq!(running, Some(false));
        assert_eq!(
            (t.kind, t.result),
            (SelfTestKind::Short, SelfTestResult::Passed)
        );
        assert_eq!(t.power_on_hours, Some(23575));
        assert_eq!(t.age_power_on_seconds, Some(5 * 3600));
        assert_eq!(t.status.as_deref(), Some("Completed without error"));
        assert!(w.is_empty());
    }

    #[test]
    fn nvme_unused_entries_are_skipped_and_results_decoded() {
        let log = |rows: Value| {
            json!({"nvme_self_test_log": {"table": rows,
            "current_self_test_operation": {"value": 2, "string": "Extended self-test in progress"}}})
        };
        let v = log(json!([
            {"self_test_code": {"value": 1}, "self_test_result": {"value": 15}},
            {"self_test_code": {"value": 2}, "self_test_result": {"value": 7, "string": "Completed: failed segments"},
             "power_on_hours": 100, "lba": 123456},
        ]));
        let mut w = Vec::new();
        let (t, running) = read(&v, Some(124), &mut w);
        let t = t.unwrap();
        assert_eq!(running, Some(true));
        assert_eq!(
            (t.kind, t.result, t.failing_lba, t.age_power_on_seconds),
            (
                SelfTestKind::Extended,
                SelfTestResult::Failed,
                Some(123456),
                Some(24 * 3600)
            )
        );
        let (t, _) = read(
            &log(json!([{"self_test_result": {"value": 1}, "power_on_hours": 500}])),
            Some(100),
            &mut w,
        );
        let t = t.unwrap();
        assert_eq!(t.result, SelfTestResult::Aborted);
        assert_eq!(t.age_power_on_seconds, None);
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn wrong_shapes_cost_their_field_only() {
        let mut w = Vec::new();
        for v in [
            json!({"nvme_self_test_log": {"table": "x"}}),
            json!({"nvme_self_test_log": {"table": []}}),
            json!({"ata_smart_self_test_log": {"standard": {"table": [7]}}}),
            json!({"scsi_self_test_0": "x"}),
            json!({"ata_smart_self_test_log": 3}),
        ] {
            let (t, _) = read(&v, Some(10), &mut w);
            if let Some(t) = t {
                assert_eq!(
                    (t.power_on_hours, t.failing_lba, t.age_power_on_seconds),
                    (None, None, None),
                    "{v}"
                );
                assert_eq!(t.result, SelfTestResult::Other, "{v}");
            }
        }
        // A status byte out of range is no status.
        let v = json!({"ata_smart_self_test_log": {"standard": {"table": [
            {"type": {"value": 2}, "status": {"value": 65535}, "lifetime_hours": "x"}]}}});
        let (t, _) = read(&v, Some(10), &mut w);
        let t = t.unwrap();
        assert_eq!(
            (t.kind, t.result),
            (SelfTestKind::Extended, SelfTestResult::Other)
        );
    }
}
