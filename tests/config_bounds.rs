//! Every config key takes every extreme value without a panic: each is refused at start with its
//! key (and the file) or accepted, and an accepted config builds and schedules every collector
//! (a value accepted at start must never overflow the clock arithmetic at run time, as
//! `interval: 300000000000y` once did). The keys are the example config's, so a new key is
//! covered the day it is documented; probe target keys are added by hand (the example lists
//! no target).

use proptest::prelude::*;
use serde_yaml_ng::Value;
use ssdwatch::config::Config;
use std::path::Path;
use std::time::{Duration, Instant};

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    ".nan",
    ".inf",
    "-.inf",
    "0.0000001",
    "\"\"",
    "\"x\"",
    "null",
    "true",
    "[]",
    "{}",
    "0s",
    "1ns",
    "300000000000y",
    "18446744073709551615s",
    "99999999999999days",
    "1ms",
    "24h",
    "\"/\"",
    "\"relative/path\"",
    "\"(\"",
];

/// The dotted paths of every leaf of the example config (lists count as leaves).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = k.as_str().unwrap();
                let p = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(v, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

fn example() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/ssdwatch.example.yaml"
    ))
    .unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// The probe target keys: a target is added with one of them set to the value.
const TARGET_KEYS: &[&str] = &[
    "path",
    "kinds",
    "interval",
    "seq_write_interval",
    "write_ops",
    "read_ops",
    "queue_depth",
    "seq_write_bytes",
    "seq_write_block_bytes",
    "file_size_bytes",
    "budget_bytes_per_day",
    "budget_time_per_hour",
    "busy_threshold",
    "free_floor_ratio",
    "free_floor_bytes",
    "rewrite_reserve_bytes",
    "idle_priority",
    "timeout",
];

/// The example with `path` set to the YAML value `raw`.
fn with(path: &str, raw: &str) -> Option<String> {
    let mut doc = example();
    let value: Value = serde_yaml_ng::from_str(raw).ok()?;
    if let Some(key) = path.strip_prefix("collectors.probe.targets[0].") {
        let mut t = serde_yaml_ng::Mapping::new();
        t.insert("path".into(), "/srv/probe".into());
        t.insert(key.into(), value);
        doc["collectors"]["probe"]["targets"] = Value::Sequence(vec![Value::Mapping(t)]);
    } else {
        let mut node = &mut doc;
        for part in path.split('.') {
            node = node.get_mut(part)?;
        }
        *node = value;
    }
    serde_yaml_ng::to_string(&doc).ok()
}

/// An accepted config builds every collector, each one's first schedule is in range, and one
/// sample of all of them on an empty host runs to the end.
fn schedules(cfg: &Config) {
    let host = tempfile::tempdir().unwrap();
    for d in ["sys/block", "proc/self", "rootfs"] {
        std::fs::create_dir_all(host.path().join(d)).unwrap();
    }
    std::fs::write(host.path().join("proc/self/mountinfo"), "").unwrap();
    let mut cfg = cfg.clone();
    cfg.state_dir = host.path().join("state");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sampled = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            ssdwatch::sample_once(&cfg, ssdwatch::Roots::fixture(host.path())),
        )
        .await
    });
    match sampled {
        Err(_) => panic!("one sample did not finish in 30 s"),
        Ok(Err(e)) => panic!("one sample failed (a collector panicked?): {e:#}"),
        Ok(Ok(_)) => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let env = ssdwatch::registry::BuildEnv {
        state_dir: dir.path(),
        persist_state: false,
    };
    let collectors = ssdwatch::registry::build(&cfg.collectors, &env)
        .unwrap_or_else(|e| panic!("an accepted config failed to build: {e:#}"));
    for mut c in collectors {
        let d = c.next_delay();
        assert!(
            Instant::now().checked_add(d).is_some() && d <= Duration::from_secs(31 * 86400),
            "{}: next delay {d:?}",
            c.name()
        );
    }
}

fn all_keys() -> Vec<String> {
    let mut keys = Vec::new();
    leaves(&example(), "", &mut keys);
    keys.extend(
        TARGET_KEYS
            .iter()
            .map(|k| format!("collectors.probe.targets[0].{k}")),
    );
    keys
}

#[test]
fn every_key_with_every_extreme_is_refused_by_name_or_accepted_and_schedulable() {
    let keys = all_keys();
    assert!(keys.len() > 30, "{keys:?}");
    let file = Path::new("/etc/ssdwatch/ssdwatch.yaml");
    let mut refused = 0;
    for key in &keys {
        for raw in EXTREMES {
            let Some(text) = with(key, raw) else { continue };
            match Config::parse(&text, file) {
                Ok(cfg) => schedules(&cfg),
                Err(e) => {
                    refused += 1;
                    let msg = e.to_string();
                    let last = key.rsplit('.').next().unwrap();
                    assert!(
                        msg.contains("/etc/ssdwatch/ssdwatch.yaml"),
                        "{key}={raw}: {msg}"
                    );
                    assert!(
                        msg.contains(last) || msg.contains("line"),
                        "{key}={raw}: the error names neither the key nor a line: {msg}"
                    );
                }
            }
        }
    }
    assert!(
        refused > keys.len(),
        "only {refused} refusals: the extremes are not extreme"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Random durations, numbers and strings in random keys: never a panic.
    #[test]
    fn random_values_in_random_keys_never_panic(
        key in proptest::sample::select(all_keys()),
        raw in prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            (any::<u64>(), proptest::sample::select(vec!["ns", "us", "ms", "s", "m", "h", "d", "w", "y"]))
                .prop_map(|(n, u)| format!("{n}{u}")),
            "[a-z/() .*^$]{0,12}".prop_map(|s| format!("{s:?}")),
        ],
    ) {
        if let Some(text) = with(&key, &raw)
            && let Ok(cfg) = Config::parse(&text, Path::new("c.yaml"))
        {
            schedules(&cfg);
        }
    }
}
