//! Property tests: no smartctl output, however broken, makes the parser panic. Inputs are
//! arbitrary JSON built from smartctl's own keys, and real captures with bytes mutated,
//! truncated or values swapped for hostile ones.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Map, Value, json};
use std::path::Path;

/// Keys smartctl really emits, so generated objects reach deep into the normalizer.
const KEYS: &[&str] = &[
    "smartctl",
    "exit_status",
    "messages",
    "string",
    "severity",
    "device",
    "type",
    "protocol",
    "model_name",
    "model_family",
    "serial_number",
    "wwn",
    "naa",
    "oui",
    "id",
    "firmware_version",
    "user_capacity",
    "bytes",
    "logical_block_size",
    "smart_status",
    "passed",
    "temperature",
    "current",
    "power_on_time",
    "hours",
    "minutes",
    "power_cycle_count",
    "nvme_smart_health_information_log",
    "percentage_used",
    "available_spare",
    "available_spare_threshold",
    "data_units_written",
    "data_units_read",
    "media_errors",
    "critical_warning",
    "unsafe_shutdowns",
    "power_cycles",
    "power_on_hours",
    "ata_smart_attributes",
    "table",
    "name",
    "value",
    "worst",
    "thresh",
    "raw",
    "ata_device_statistics",
    "pages",
    "flags",
    "valid",
    "scsi_error_counter_log",
    "read",
    "write",
    "gigabytes_processed",
    "total_uncorrected_errors",
    "scsi_percentage_used_endurance_indicator",
    "scsi_grown_defect_list",
    "endurance_used",
    "current_percent",
    "smart_support",
    "available",
    "power_mode",
    "logical_unit_id",
    "eui64",
    "ext_id",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,12}".prop_map(Value::String),
        (0u64..300).prop_map(|n| json!(n)),
        Just(json!("Device is in STANDBY mode")),
        Just(json!("Samsung based SSDs")),
        Just(json!("Phison Driven SSDs")),
    ]
}

fn smartish() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k.to_string(), v);
                }
                Value::Object(m)
            }),
        ]
    })
}

fn corpus() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smart");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter(|e| e.file_name() != "expected.json")
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    out.sort();
    out
}

/// Replaces every value under `key` anywhere in `v` with `with`.
fn swap_key(v: &mut Value, key: &str, with: &Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == key {
                    *x = with.clone();
                } else {
                    swap_key(x, key, with);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| swap_key(x, key, with)),
        _ => {}
    }
}

proptest! {
    // A failing case is kept next to this file (fuzz.proptest-regressions), not under
    // tests/proptest-regressions/ where proptest's default would put it.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_smartctl_shaped_json_never_panics(v in smartish()) {
        let text = v.to_string();
        if let Ok(h) = ssdwatch::smart::parse(&text) {
            // Whatever came in, ratios that are set are numbers, never NaN.
            for r in [h.wear_used_ratio, h.spare_available_ratio, h.spare_threshold_ratio] {
                prop_assert!(r.is_none_or(|x| x.is_finite()));
            }
            let _ = ssdwatch::smart::inspect_json(&h);
        }
    }

    #[test]
    fn mutated_real_captures_never_panic(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let c = corpus();
        let text = &c[pick.index(c.len())];
        let mut bytes = text.as_bytes().to_vec();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let end = cut.index(bytes.len() + 1);
        let s = String::from_utf8_lossy(&bytes[..end]);
        let _ = ssdwatch::smart::parse(&s);
    }

    #[test]
    fn hostile_values_in_real_captures_never_panic(
        pick in any::<prop::sample::Index>(),
        key in prop::sample::select(KEYS),
        with in leaf(),
    ) {
        let c = corpus();
        let mut v: Value = serde_json::from_str(&c[pick.index(c.len())]).expect("fixture is JSON");
        swap_key(&mut v, key, &with);
        let h = ssdwatch::smart::parse(&v.to_string());
        prop_assert!(h.is_ok(), "an object always normalizes");
    }
}
