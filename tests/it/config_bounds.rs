//! Every config key takes every extreme value without a panic: each is refused at start naming
//! the file, the key path and the line the key is written on, or accepted, and an accepted config
//! builds, schedules and samples every collector and plans every probe target (a value accepted
//! at start must never overflow at run time, as `interval: 300000000000y` once did).
//!
//! The keys are found in the code, not listed by hand: a section's unknown-key error lists its
//! fields, so every field of every section, list entries included, is fed the day it is added.
//! The ranges table of docs/running.md is checked against what the code enforces: every key is
//! listed, each end of a range is accepted, one step past it refused with the key and the line,
//! and each documented default is the value used.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_yaml_ng::{Mapping, Value};
use ssdwatch::config::Config;
use std::collections::BTreeSet;
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

const FILE: &str = "/etc/ssdwatch/ssdwatch.yaml";

/// The value under test is first written as this word, then replaced by the raw text: the line
/// that holds it is the line its key is written on (block style puts a key and a scalar on one
/// line), found without reading YAML.
const MARK: &str = "ssdwatch_value_under_test";

fn example() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/ssdwatch.example.yaml"
    ))
    .unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// A valid entry of each list of sections, so that a key inside one can be set alone, and of
/// each list with a documented count.
fn list_base(list: &str) -> Value {
    let yaml = match list {
        "collectors.topology.solid_state" => "{devices: '^sda$', solid_state: true}",
        "collectors.filesystem.alert_thresholds.overrides" => "{mount_points: '^/srv$'}",
        "collectors.smart.devices" => "{path: /dev/sda}",
        "collectors.probe.targets" => "{path: /srv/probe}",
        "collectors.databases.watch" => "{name: backups, path: /srv/backups}",
        "history.endurance" => "{models: '^X', dwpd: 1, warranty_years: 5}",
        // Lists of values, for their counts.
        "collectors.filesystem.mount_points_exclude"
        | "collectors.filesystem.mount_points_include" => "'^/srv$'",
        "collectors.filesystem.fs_types_exclude" | "collectors.filesystem.fs_types_include" => {
            "tmpfs"
        }
        other => panic!("{other}: a new list of sections; give this test a valid entry of it"),
    };
    serde_yaml_ng::from_str(yaml).unwrap()
}

/// A valid optional section, so that a key inside one can be set alone (its required
/// companions given); `null` for any other.
fn section_base(section: &str) -> Value {
    match section {
        "history.import" => serde_yaml_ng::from_str(
            "{prometheus: 'https://prometheus.example:9090', instance: 'db7:9100'}",
        )
        .unwrap(),
        _ => Value::Null,
    }
}

/// Keys that exclude others of their entry: setting one removes those.
const EXCLUDES: &[(&str, &[&str])] = &[(
    "history.endurance[0].tbw_bytes",
    &["dwpd", "warranty_years"],
)];

/// Sets `key` (dotted, `[0]` for the first entry of a list) to `value` in `doc`, or removes it
/// when `value` is None. Lists on the way get an entry: a valid one when `valid_entries`.
fn set(doc: &mut Value, key: &str, value: Option<Value>, valid_entries: bool) {
    let parts: Vec<&str> = key.split('.').collect();
    let mut node = doc;
    let mut walked = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (name, entry) = match part.strip_suffix("[0]") {
            Some(n) => (n, true),
            None => (*part, false),
        };
        walked.push(name);
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        let map = node.as_mapping_mut().unwrap();
        if last && !entry {
            match value {
                Some(v) => {
                    map.insert(name.into(), v);
                }
                None => {
                    map.remove(name);
                }
            }
            for (k, gone) in EXCLUDES {
                if *k == key {
                    for g in *gone {
                        map.remove(*g);
                    }
                }
            }
            return;
        }
        if !map.contains_key(name) {
            map.insert(name.into(), section_base(&walked.join(".")));
        }
        node = map.get_mut(name).unwrap();
        if entry {
            if node.as_sequence().is_none_or(|s| s.is_empty()) {
                let e = if valid_entries {
                    list_base(&walked.join("."))
                } else {
                    Value::Mapping(Mapping::new())
                };
                *node = Value::Sequence(vec![e]);
            }
            let first = &mut node.as_sequence_mut().unwrap()[0];
            if last {
                *first = value.expect("an entry is replaced, not removed");
                return;
            }
            node = first;
        }
    }
}

/// The example config with each of `settings` applied, then `key` set to `value` (or, when
/// `value` is None, to the raw text `raw`). Returns the text and the line `key` is written on.
fn doc_text(
    settings: &[(&str, &str)],
    key: &str,
    raw: &str,
    value: Option<Value>,
) -> (String, usize) {
    let mut doc = example();
    for (k, v) in settings {
        set(&mut doc, k, Some(serde_yaml_ng::from_str(v).unwrap()), true);
    }
    set(&mut doc, key, Some(Value::from(MARK)), true);
    let marked = serde_yaml_ng::to_string(&doc).unwrap();
    assert_eq!(marked.matches(MARK).count(), 1, "{marked}");
    let line = marked.lines().position(|l| l.contains(MARK)).unwrap() + 1;
    let text = match value {
        // Everything before the key is the same, so its line is too.
        Some(v) => {
            set(&mut doc, key, Some(v), true);
            serde_yaml_ng::to_string(&doc).unwrap()
        }
        None => marked.replacen(MARK, raw, 1),
    };
    (text, line)
}

/// The example config with `key` set to the raw YAML `raw`, and the line of `key`.
fn with(key: &str, raw: &str) -> (String, usize) {
    doc_text(&[], key, raw, None)
}

/// Whether an error message names the file, `key` and `line N` (N not the start of a longer
/// number).
fn names_key_and_line(msg: &str, key: &str, line: usize) -> bool {
    let at = format!("line {line}");
    msg.contains(FILE)
        && msg.contains(key)
        && msg
            .match_indices(&at)
            .any(|(i, m)| !msg[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// The fields of the section at `key` ("" for the top), from the error its unknown-key check
/// gives; None when `key` is not a section.
fn fields_of(key: &str) -> Option<Vec<String>> {
    const UNKNOWN: &str = "zz_not_a_key";
    let mut doc = Value::Mapping(Mapping::new());
    let path = if key.is_empty() {
        UNKNOWN.to_string()
    } else {
        format!("{key}.{UNKNOWN}")
    };
    set(&mut doc, &path, Some(Value::from(1)), false);
    let text = serde_yaml_ng::to_string(&doc).unwrap();
    let msg = Config::parse(&text, Path::new(FILE)).err()?.to_string();
    let at = msg.find(&format!("unknown field `{UNKNOWN}`, expected "))?;
    let rest = &msg[at..];
    let rest = &rest[..rest.find(" at line").unwrap_or(rest.len())];
    // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`".
    let fields: Vec<String> = rest
        .split('`')
        .skip(3)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(!fields.is_empty(), "{msg}");
    Some(fields)
}

/// Every key of the config, found in the code: sections are walked, lists of sections are keys
/// themselves and walked through their entry `[0]`; every other field is a leaf.
fn discover(section: &str, out: &mut Vec<String>) {
    for f in fields_of(section).unwrap_or_else(|| panic!("{section:?} is not a section")) {
        let key = if section.is_empty() {
            f
        } else {
            format!("{section}.{f}")
        };
        if fields_of(&key).is_some() {
            discover(&key, out);
        } else if fields_of(&format!("{key}[0]")).is_some() {
            out.push(key.clone());
            discover(&format!("{key}[0]"), out);
        } else {
            out.push(key);
        }
    }
}

fn all_keys() -> Vec<String> {
    let mut keys = Vec::new();
    discover("", &mut keys);
    keys
}

/// The dotted paths of every leaf of the example config (lists count as leaves).
fn example_leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = k.as_str().unwrap();
                let p = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                example_leaves(v, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn the_keys_fed_extremes_are_every_key_of_the_code() {
    let keys = all_keys();
    let set: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(set.len(), keys.len(), "a key found twice: {keys:?}");
    let mut leaves = Vec::new();
    example_leaves(&example(), "", &mut leaves);
    for leaf in &leaves {
        assert!(
            set.contains(leaf.as_str()),
            "{leaf} of the example not found"
        );
    }
    // Keys that are no leaf of the example: map and list entry fields, optional keys.
    for key in [
        "collectors.smart.class_intervals.nvme",
        "collectors.smart.class_intervals.ata",
        "collectors.smart.class_intervals.scsi",
        "collectors.smart.devices[0].path",
        "collectors.smart.devices[0].type",
        "collectors.smart.devices[0].label",
        "collectors.smart.device_include",
        "collectors.diskstats.device_exclude",
        "collectors.topology.solid_state[0].devices",
        "collectors.filesystem.mount_points_include",
        "collectors.filesystem.alert_thresholds.overrides[0].mount_points",
        "collectors.filesystem.alert_thresholds.overrides[0].warning.avail_bytes",
        "collectors.filesystem.alert_thresholds.overrides[0].critical.full_within",
        "collectors.probe.targets[0].file_size_bytes",
        "collectors.probe.targets[0].timeout",
        "history.endurance[0].tbw_bytes",
        "history.endurance[0].dwpd",
        "history.endurance[0].warranty_years",
    ] {
        assert!(set.contains(key), "{key} not found: {keys:?}");
    }
    assert!(keys.len() > 80, "{}", keys.len());
}

/// Every accepted probe target is planned on filesystems from 4 KiB to the largest statvfs can
/// report, with budgets unused and spent, new and existing probe files: the size and budget
/// arithmetic never overflows.
fn plans(cfg: &Config) {
    use ssdwatch::probe::budget::Usage;
    use ssdwatch::probe::{
        Observed, Placement, ProbeDir, ProbeFile, Spec, floor_bytes, plan, probe_file_bytes,
        space_before_allocation,
    };
    use ssdwatch::statfs::{FsStat, FsType};
    for t in &cfg.collectors.probe.targets {
        for k in &t.kinds {
            t.planned_bytes(*k);
        }
        for blocks in [1, 1 << 20, u64::MAX / 4096, u64::MAX] {
            let stat = FsStat {
                frsize: 4096,
                blocks,
                bfree: blocks,
                bavail: blocks,
                ..FsStat::default()
            };
            let file = probe_file_bytes(t, stat.size_bytes());
            floor_bytes(t, stat.size_bytes());
            let placement = Placement {
                mountpoint: "/srv".into(),
                drives: vec!["nvme0n1".into()],
            };
            let _ = space_before_allocation(t, &placement, &stat, "a run", u64::MAX);
            for fs_type in [FsType::EXT4, FsType::BTRFS] {
                for existing in [false, true] {
                    for written in [0, t.budget_bytes_per_day, u64::MAX] {
                        for intent in [false, true] {
                            let o = Observed {
                                placement: placement.clone(),
                                fs_type,
                                stat,
                                dir: ProbeDir::Ready {
                                    stat,
                                    file: if existing {
                                        ProbeFile::Sound {
                                            size: file,
                                            allocated: file,
                                        }
                                    } else {
                                        ProbeFile::Absent
                                    },
                                    usage: Ok(Usage {
                                        written_bytes: written,
                                        ..Usage::default()
                                    }),
                                },
                                utilization_before: Some(0.0),
                                intent: intent.then_some(Ok(())),
                            };
                            let _ = plan(
                                &o,
                                &Spec {
                                    target: t,
                                    kinds: &t.kinds,
                                },
                            );
                        }
                    }
                }
            }
        }
    }
}

/// An accepted config builds every collector, each one's first schedule is in range, one
/// sample of all of them on an empty host runs to the end, every probe target plans, and a
/// history section other than the default opens a store and runs its retention.
fn schedules(cfg: &Config) {
    plans(cfg);
    if cfg.history != Config::default().history {
        // The store's retention arithmetic, at today's clock and at the end of time.
        let dir = tempfile::tempdir().unwrap();
        let mut store = ssdwatch::history::Store::open(dir.path(), &cfg.history)
            .unwrap_or_else(|e| panic!("an accepted history section failed to open: {e}"));
        for now in [1_750_000_000, i64::MAX] {
            store.downsample(now).unwrap();
        }
        cfg.history.endurance_rules().unwrap();
    }
    let host = tempfile::tempdir().unwrap();
    for d in ["sys/block", "proc/self", "rootfs"] {
        std::fs::create_dir_all(host.path().join(d)).unwrap();
    }
    std::fs::write(host.path().join("proc/self/mountinfo"), "").unwrap();
    let mut cfg = cfg.clone();
    cfg.state_dir = host.path().join("state");
    // What is checked is that the config's numbers carry through a whole sample without an
    // overflow or a panic, not how long 1,024 smartctl runs take on this machine: each
    // configured device's run is `true`, which answers at once with nothing (a per-device
    // error), so the sample's length does not depend on the machine's speed or load.
    cfg.collectors.smart.smartctl_path = "/bin/true".into();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sampled = rt.block_on(ssdwatch::sample_once(
        &cfg,
        ssdwatch::Roots::fixture(host.path()),
    ));
    if let Err(e) = sampled {
        panic!("one sample failed (a collector panicked?): {e:#}");
    }
    let dir = tempfile::tempdir().unwrap();
    let env = ssdwatch::registry::BuildEnv {
        state_dir: dir.path(),
        persist_state: false,
        helper: None,
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

#[test]
fn every_key_with_every_extreme_is_refused_naming_key_and_line_or_accepted_and_schedulable() {
    let keys = all_keys();
    let mut refused = 0;
    for key in &keys {
        for raw in EXTREMES {
            let (text, line) = with(key, raw);
            match Config::parse(&text, Path::new(FILE)) {
                Ok(cfg) => schedules(&cfg),
                Err(e) => {
                    refused += 1;
                    let msg = e.to_string();
                    assert!(
                        names_key_and_line(&msg, key, line),
                        "{key}={raw}: the error does not name the file, the key and line {line}: {msg}\n{text}"
                    );
                }
            }
        }
    }
    assert!(
        refused > keys.len() * 5,
        "only {refused} refusals: the extremes are not extreme"
    );
}

/// One row of the ranges table in docs/running.md.
#[derive(Debug)]
struct Row {
    /// With `[0]` for the table's `[]`.
    key: String,
    ty: String,
    range: String,
    default: String,
}

fn doc_rows() -> Vec<Row> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/running.md")).unwrap();
    let at = text
        .find("## Config keys, ranges and defaults")
        .expect("docs/running.md has the ranges section");
    let rows: Vec<Row> = text[at..]
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "{l}");
            Row {
                key: cells[0].trim_matches('`').replace("[]", "[0]"),
                ty: cells[1].to_string(),
                range: cells[2].to_string(),
                default: cells[3].to_string(),
            }
        })
        .collect();
    assert!(rows.len() > 80, "{} rows", rows.len());
    rows
}

/// A range written `[a, b]`, `(a, b]`, `[a, b)` or `(a, b)` at the start of a cell: (lower
/// included, a, b, upper included).
fn interval(cell: &str) -> Option<(bool, &str, &str, bool)> {
    let lo_incl = match cell.chars().next()? {
        '[' => true,
        '(' => false,
        _ => return None,
    };
    let end = cell.find([']', ')'])?;
    let (a, b) = cell[1..end].split_once(", ")?;
    Some((lo_incl, a, b, cell[end..].starts_with(']')))
}

/// Settings a bound needs to be reachable at all: the other side of a cross-field rule.
const COMPANIONS: &[(&str, &str, &str)] = &[
    ("history.retention_hourly", "history.retention_raw", "1h"),
    (
        "collectors.probe.targets[0].seq_write_block_bytes",
        "collectors.probe.targets[0].file_size_bytes",
        "1099511627776",
    ),
];

/// The values at and one step past each end of a documented range, as (raw YAML or a list
/// value, accepted?).
fn probes(row: &Row) -> Vec<(String, Option<Value>, bool)> {
    let (lo_incl, a, b, hi_incl) = interval(&row.range)
        .unwrap_or_else(|| panic!("{}: a {} without a range: {:?}", row.key, row.ty, row.range));
    let kind = row.ty.split([' ', ',']).next().unwrap();
    let step: u64 = row
        .ty
        .split_once("a multiple of ")
        .map_or(1, |(_, n)| n.parse().unwrap());
    let mut out = Vec::new();
    match kind {
        "duration" => {
            let ns = |s: &str| humantime::parse_duration(s).unwrap().as_nanos();
            let (a, b) = (ns(a), ns(b));
            assert!(
                lo_incl && hi_incl,
                "{}: durations take whole ranges",
                row.key
            );
            out.push((format!("{a}ns"), None, true));
            out.push((format!("{b}ns"), None, true));
            out.push((format!("{}ns", a as i128 - 1), None, false));
            out.push((format!("{}ns", b + 1), None, false));
        }
        "integer" | "bytes" => {
            let (a, b): (i128, i128) = (a.parse().unwrap(), b.parse().unwrap());
            assert!(lo_incl && hi_incl, "{}: counts take whole ranges", row.key);
            let step = i128::from(step);
            out.push((a.to_string(), None, true));
            out.push((b.to_string(), None, true));
            out.push(((a - step).max(-1).to_string(), None, false));
            out.push(((b + step).to_string(), None, false));
        }
        "ratio" | "number" => {
            let (a, b): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
            let eps = 1e-9;
            let show = |v: f64| format!("{v:.12}");
            out.push((show(if lo_incl { a } else { a + eps }), None, true));
            out.push((show(if hi_incl { b } else { b - eps }), None, true));
            out.push((show(if lo_incl { a - eps } else { a }), None, false));
            out.push((show(if hi_incl { b + eps } else { b }), None, false));
        }
        "list" => {
            let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
            let list_key = row.key.as_str();
            // Entries that differ where they must (a probe target's path, a watched path's
            // name).
            let entries = |n: usize| {
                let entry = |i: usize| {
                    let mut e = list_base(list_key);
                    for key in ["path", "name"] {
                        if let Some(Value::String(p)) = e.get_mut(key) {
                            p.push_str(&i.to_string());
                        }
                    }
                    e
                };
                Some(Value::Sequence((0..n).map(entry).collect()))
            };
            out.push((String::new(), entries(a), true));
            out.push((String::new(), entries(b), true));
            if a > 0 {
                out.push((String::new(), entries(a - 1), false));
            }
            out.push((String::new(), entries(b + 1), false));
        }
        other => panic!("{}: a range on a {other}", row.key),
    }
    out
}

#[test]
fn the_documented_ranges_and_defaults_are_the_ones_the_code_enforces() {
    let rows = doc_rows();
    let documented: BTreeSet<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    let keys = all_keys();
    let found: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(
        documented.difference(&found).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "documented in docs/running.md but not a key"
    );
    assert_eq!(
        found.difference(&documented).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "keys missing from the table in docs/running.md"
    );
    let numeric = ["duration", "integer", "bytes", "ratio", "number"];
    let mut checked = 0;
    for row in &rows {
        let kind = row.ty.split([' ', ',']).next().unwrap();
        // The documented type is the code's: a map where a value belongs is refused with what
        // serde expected there.
        let (text, _) = with(&row.key, "{}");
        let msg = Config::parse(&text, Path::new(FILE))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let expected = msg.split("expected ").nth(1).unwrap_or("");
        let code_kind = match expected.split(' ').next().unwrap_or("") {
            "u8" | "u16" | "u32" | "u64" | "usize" => "integer",
            "f32" | "f64" => "ratio or number",
            _ if expected.starts_with("a duration") => "duration",
            _ if expected.starts_with("a size such as 64MiB") => "bytes",
            _ => "not a number",
        };
        let doc_kind = match kind {
            "integer" => "integer",
            "bytes" => "bytes",
            "ratio" | "number" => "ratio or number",
            "duration" => "duration",
            _ => "not a number",
        };
        assert_eq!(
            doc_kind, code_kind,
            "{}: docs/running.md says {}; the code expects {expected}",
            row.key, row.ty
        );
        if numeric.contains(&kind) || (kind == "list" && interval(&row.range).is_some()) {
            let settings: Vec<(&str, &str)> = COMPANIONS
                .iter()
                .filter(|(k, _, _)| *k == row.key)
                .map(|(_, k, v)| (*k, *v))
                .collect();
            for (raw, value, accept) in probes(row) {
                let shown = value.as_ref().map_or(raw.clone(), |v| match v {
                    Value::Sequence(s) => format!("{} entries", s.len()),
                    v => format!("{v:?}"),
                });
                let (text, line) = doc_text(&settings, &row.key, &raw, value);
                match (Config::parse(&text, Path::new(FILE)), accept) {
                    (Ok(cfg), true) => schedules(&cfg),
                    (Err(e), false) => {
                        let msg = e.to_string();
                        assert!(
                            names_key_and_line(&msg, &row.key, line),
                            "{}={shown}: refused without naming the key and line {line}: {msg}",
                            row.key
                        );
                    }
                    (Ok(_), false) => panic!(
                        "{}={shown}: accepted, but docs/running.md says {}",
                        row.key, row.range
                    ),
                    (Err(e), true) => panic!(
                        "{}={shown}: refused, but docs/running.md says {}: {e}",
                        row.key, row.range
                    ),
                }
                checked += 1;
            }
        }
        // A default written as one YAML value is the value used when the key is absent.
        if let Some(v) = row
            .default
            .strip_prefix('`')
            .and_then(|d| d.strip_suffix('`'))
            .filter(|d| !d.contains('`'))
        {
            let (given, _) = with(&row.key, v);
            let given = Config::parse(&given, Path::new(FILE))
                .unwrap_or_else(|e| panic!("{}: default {v}: {e}", row.key));
            // Left out on its own, every other key of its section still given: a key with a
            // default is optional by itself (no "missing field").
            let mut doc = example();
            set(&mut doc, &row.key, None, true);
            let text = serde_yaml_ng::to_string(&doc).unwrap();
            let default = Config::parse(&text, Path::new(FILE))
                .unwrap_or_else(|e| panic!("{}: left out alone: {e}", row.key));
            assert_eq!(
                given, default,
                "{}: docs/running.md says the default is {v}",
                row.key
            );
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked} checks");
}

proptest! {
    // Failing cases are kept next to this file (config_bounds.proptest-regressions): proptest's
    // default would put them under tests/proptest-regressions/, beside the binary's main.rs.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::with_cases(256)
    })]
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
        let (text, line) = with(&key, &raw);
        match Config::parse(&text, Path::new(FILE)) {
            Ok(cfg) => schedules(&cfg),
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(names_key_and_line(&msg, &key, line), "{key}={raw}: {msg}");
            }
        }
    }
}
