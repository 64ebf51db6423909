//! Every real smartctl capture in tests/fixtures/smart goes through `ssdwatch smart inspect`
//! and must give the values checked in `expected.json`, which were worked out by hand from the
//! raw JSON and the vendor's meaning (each entry's `_why` says how). Bad input fails cleanly.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smart")
}

fn inspect(path: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
        .args(["smart", "inspect"])
        .arg(path)
        .output()
        .expect("run ssdwatch smart inspect");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn same(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => match (a.as_u64(), b.as_u64()) {
            (Some(x), Some(y)) => x == y,
            _ => {
                let (x, y) = (
                    a.as_f64().unwrap_or(f64::NAN),
                    b.as_f64().unwrap_or(f64::NAN),
                );
                (x - y).abs() <= 1e-9 * x.abs().max(1.0)
            }
        },
        _ => want == got,
    }
}

#[test]
fn every_real_smartctl_capture_normalizes_to_the_hand_checked_values() {
    let dir = fixtures();
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("read expected.json"),
    )
    .expect("expected.json is JSON");
    let expected = expected.as_object().expect("expected.json is an object");
    let names: Vec<String> = ssdwatch::sysfs::dir_names(&dir)
        .expect("list fixtures")
        .into_iter()
        .filter(|n| n.ends_with(".json") && n != "expected.json")
        .map(|n| n.trim_end_matches(".json").to_string())
        .collect();
    assert!(names.len() >= 50, "fixture corpus shrank: {}", names.len());
    let mut failures = Vec::new();
    for name in &names {
        let Some(want) = expected.get(name).and_then(Value::as_object) else {
            failures.push(format!("{name}: no entry in expected.json"));
            continue;
        };
        let (code, stdout, stderr) = inspect(&dir.join(format!("{name}.json")));
        assert_eq!(code, Some(0), "{name}: {stderr}");
        let got: Value = serde_json::from_str(&stdout).expect("inspect prints JSON");
        for (k, w) in want {
            if k.starts_with('_') {
                continue;
            }
            let g = got.get(k).unwrap_or(&Value::Null);
            if !same(w, g) {
                failures.push(format!("{name}: {k}: expected {w}, got {g}"));
            }
        }
        // Fields the issue names are always present (null when unknown), never missing.
        for k in [
            "wear_used_ratio",
            "host_written_bytes",
            "nand_written_bytes",
            "smartctl_exit_status",
            "warnings",
            "capacity_bytes",
        ] {
            assert!(got.get(k).is_some(), "{name}: field {k} missing");
        }
    }
    for k in expected.keys() {
        if !names.contains(k) {
            failures.push(format!(
                "expected.json names {k} but there is no such fixture"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn exit_bits_are_decoded_by_name() {
    let (_, out, _) = inspect(&fixtures().join("ata-hgst-hus724020ale640-exit64.json"));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        v["smartctl_exit_bits"],
        serde_json::json!(["error_log_has_errors"])
    );
    // The error log having entries is no failing drive.
    assert_eq!(v["smart_passed"], Value::Bool(true));
}

#[test]
fn a_drive_missing_from_the_database_is_flagged_in_warnings() {
    let (_, out, _) = inspect(&fixtures().join("ata-wd-red-sa500-wds400t1r0a.json"));
    let v: Value = serde_json::from_str(&out).expect("json");
    let w = v["warnings"].to_string();
    assert!(w.contains("chosen by model name"), "{w}");
    assert_eq!(v["family_source"], "model_name");
}

#[test]
fn bad_input_gives_a_clear_error_and_nonzero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(fixtures().join("nvme-samsung-970evoplus.json")).expect("fixture");
    for (name, text) in [
        ("empty.json", String::new()),
        ("garbage.json", "Segmentation fault\n\u{0}\u{1}".to_string()),
        ("truncated.json", full[..full.len() / 2].to_string()),
        ("array.json", "[1,2,3]".to_string()),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        let (code, stdout, stderr) = inspect(&p);
        assert_eq!(code, Some(1), "{name}: {stdout}");
        assert!(
            stderr.contains(name),
            "{name}: error names the file: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        if name != "array.json" {
            // Not JSON at all: where it broke, so the bad byte can be found.
            assert!(
                stderr.contains("(line ") && stderr.contains(", column "),
                "{name}: error names line and column: {stderr}"
            );
        }
    }
    let (code, _, stderr) = inspect(&dir.path().join("does-not-exist.json"));
    assert_eq!(code, Some(1));
    assert!(stderr.contains("cannot read"), "{stderr}");
}

#[test]
fn inspect_says_which_source_gave_the_wear_and_the_host_writes() {
    for (fixture, wear, written) in [
        (
            "nvme-samsung-970evoplus",
            Some("NVMe percentage_used"),
            Some("NVMe data_units_written"),
        ),
        // A vendor attribute read with its family's meaning: 177 normalized is life remaining.
        (
            "ata-samsung-pm883-mz7lh1t9hmlt",
            Some("ATA attr 177 per table samsung"),
            Some("ATA attr 241 per table samsung"),
        ),
        // The standard's devstat indicator (3%) wins over the m4's own attribute 202 (2%).
        (
            "ata-crucial-m4-mtfddak128mam",
            Some("ATA devstat Percentage Used Endurance Indicator"),
            Some("ATA devstat Logical Sectors Written"),
        ),
        // A hard disk: no wear figure, so no source (null like every unknown field).
        ("ata-wdc-wd140edfz", None, None),
    ] {
        let (code, out, err) = inspect(&fixtures().join(format!("{fixture}.json")));
        assert_eq!(code, Some(0), "{fixture}: {err}");
        let v: Value = serde_json::from_str(&out).expect("inspect prints JSON");
        for (field, want) in [("wear_source", wear), ("host_written_source", written)] {
            let got = v
                .get(field)
                .unwrap_or_else(|| panic!("{fixture}: no {field}"));
            assert_eq!(got.as_str(), want, "{fixture}: {field} is {got}");
            if want.is_none() {
                assert!(got.is_null(), "{fixture}: {field} is {got}");
            }
        }
        let value = |k: &str| v.get(k).is_some_and(|x| !x.is_null());
        assert_eq!(value("wear_used_ratio"), wear.is_some(), "{fixture}");
        assert_eq!(value("host_written_bytes"), written.is_some(), "{fixture}");
    }
}

/// A pre-failure attribute at or below its threshold (tests/fixtures/smart-derived: a real
/// capture with that one attribute lowered) shows in `smart inspect` with its threshold, its
/// type and when it failed, beside the exit bits smartctl set for it.
#[test]
fn smart_inspect_shows_a_failing_prefail_attribute_with_its_threshold() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smart-derived/ata-micron-5300-reserve-failing-now.json");
    let (code, out, err) = inspect(&path);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let attrs = v["attributes_past_threshold"]
        .as_array()
        .expect("attributes_past_threshold");
    assert_eq!(attrs.len(), 1, "only 170 crossed: {attrs:?}");
    let a170 = &attrs[0];
    assert_eq!(a170["id"], 170);
    assert_eq!(a170["name"], "Reserved_Block_Pct");
    assert_eq!(a170["thresh"], 10);
    assert_eq!(a170["value"], 8);
    assert_eq!(a170["prefailure"], true);
    assert_eq!(a170["when_failed"], "now");
    assert_eq!(
        v["smartctl_exit_bits"],
        serde_json::json!(["smart_status_failing", "prefail_threshold_crossed"])
    );
    // The real capture it was made from: none crossed, an empty list (not a missing key).
    let (_, out, _) = inspect(&fixtures().join("ata-micron-5300-mtfddak1t9tds.json"));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["attributes_past_threshold"], serde_json::json!([]));
}
