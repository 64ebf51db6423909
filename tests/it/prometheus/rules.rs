//! The monitoring mixin holds together: Prometheus accepts the rule files, the promtool unit tests
//! pass (with a firing and a non-firing case for every alert), the daemon's real output lints clean,
//! and the dashboards users import are exactly what the generator produces and only read the
//! `datasource` variable and recording rules that exist.

use crate::support;

use crate::support::require_cmd;
use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rule_files() -> Vec<PathBuf> {
    let dir = repo().join("packaging/prometheus");
    vec![
        dir.join("ssdwatch.rules.yml"),
        dir.join("ssdwatch.alerts.yml"),
        // Alerts that are off by default: loaded only when a user lists the file.
        dir.join("ssdwatch.optional.alerts.yml"),
    ]
}

fn unit_test_files() -> Vec<PathBuf> {
    let dir = repo().join("packaging/prometheus/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".test.yml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no promtool unit tests in {}",
        dir.display()
    );
    files
}

fn yaml(path: &Path) -> Yaml {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn rules_of(doc: &Yaml) -> Vec<&Yaml> {
    doc["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").iter())
        .collect()
}

fn promtool(args: &[&str]) -> (bool, String) {
    support::run_status("promtool", args)
}

#[test]
fn prometheus_accepts_the_rule_files() {
    if !require_cmd("promtool check rules", "promtool", "prometheus") {
        return;
    }
    let files = rule_files();
    let mut args = vec!["check", "rules"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    let (ok, out) = promtool(&args);
    assert!(ok, "promtool check rules failed:\n{out}");
    assert!(!out.contains("WARNING"), "promtool warns:\n{out}");
}

#[test]
fn promtool_unit_tests_pass_including_the_cases_that_fool_naive_forecasts() {
    if !require_cmd("promtool test rules", "promtool", "prometheus") {
        return;
    }
    let files = unit_test_files();
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    let (ok, out) = promtool(&args);
    assert!(ok, "promtool test rules failed:\n{out}");
    assert_eq!(
        out.matches("SUCCESS").count(),
        files.len(),
        "not every test file succeeded:\n{out}"
    );
}

#[test]
fn every_alert_has_a_firing_and_a_non_firing_unit_test() {
    let mut alerts = BTreeSet::new();
    for f in rule_files() {
        for r in rules_of(&yaml(&f)) {
            if let Some(a) = r["alert"].as_str() {
                alerts.insert(a.to_string());
            }
        }
    }
    assert!(alerts.len() >= 15, "only {} alerts", alerts.len());
    // alertname -> (firing cases, non-firing cases)
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for f in unit_test_files() {
        let doc = yaml(&f);
        for t in doc["tests"].as_sequence().expect("tests") {
            let Some(cases) = t["alert_rule_test"].as_sequence() else {
                continue;
            };
            for c in cases {
                let name = c["alertname"].as_str().expect("alertname").to_string();
                let n = c["exp_alerts"].as_sequence().map_or(0, |s| s.len());
                let e = seen.entry(name).or_default();
                if n > 0 { e.0 += 1 } else { e.1 += 1 }
            }
        }
    }
    for a in &alerts {
        let (firing, quiet) = seen.get(a).copied().unwrap_or_default();
        assert!(firing > 0, "alert {a} has no firing unit test");
        assert!(quiet > 0, "alert {a} has no non-firing unit test");
    }
}

#[test]
fn every_alert_has_a_severity_and_a_runbook_style_description() {
    for f in rule_files() {
        for r in rules_of(&yaml(&f)) {
            let Some(name) = r["alert"].as_str() else {
                continue;
            };
            let sev = r["labels"]["severity"].as_str().unwrap_or("");
            assert!(
                sev == "warning" || sev == "critical",
                "{name}: severity {sev:?} in {}",
                f.display()
            );
            assert!(
                r["annotations"]["summary"].as_str().is_some(),
                "{name}: no summary"
            );
            let desc = r["annotations"]["description"].as_str().unwrap_or("");
            assert!(
                desc.contains("Action:"),
                "{name}: description says no action to take: {desc:?}"
            );
            assert!(r["for"].as_str().is_some(), "{name}: no `for:` duration");
            // Every alert links its runbook section, and the section exists.
            let url = r["annotations"]["runbook_url"].as_str().unwrap_or("");
            let anchor = url
                .strip_prefix(RUNBOOK_URL)
                .unwrap_or_else(|| panic!("{name}: runbook_url {url:?} is not {RUNBOOK_URL}#..."));
            assert_eq!(anchor, name.to_lowercase(), "{name}: runbook anchor");
            assert!(
                runbook_anchors().contains(anchor),
                "{name}: docs/runbook.md has no section {anchor}"
            );
        }
    }
}

const RUNBOOK_URL: &str = "https://github.com/ssdwatch/ssdwatch/blob/main/docs/runbook.md#";

/// The anchors of docs/runbook.md's sections, as GitHub makes them from `## Heading`.
fn runbook_anchors() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/runbook.md")).expect("docs/runbook.md");
    text.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| {
            h.trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// The alert rules of `doc` whose name starts with `prefix`.
fn alerts_named<'a>(doc: &'a Yaml, prefix: &str) -> Vec<&'a Yaml> {
    rules_of(doc)
        .into_iter()
        .filter(|r| r["alert"].as_str().is_some_and(|a| a.starts_with(prefix)))
        .collect()
}

/// The trend leg every forecast alert reads is gated against the shapes that fool a plain
/// predict_linear: a day of history and a net loss over it (sawtooths), the last hour still
/// filling (a finished load), above the recurring peak (next Sunday's dump). The alerts on it
/// hold for an hour; the runaway page for longer than a batch lasts.
#[test]
fn forecast_alerts_are_gated_by_fill_history_and_duration() {
    let rules = yaml(&rule_files()[0]);
    let record = |name: &str| -> String {
        rules_of(&rules)
            .into_iter()
            .find(|r| r["record"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no recording rule {name}"))["expr"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let trend = record("ssdwatch:filesystem_seconds_until_full:trend");
    for gate in [
        "net_change24h_ratio < -0.01",
        "predict_linear1h_48h",
        "recurring_peak",
    ] {
        assert!(trend.contains(gate), "{gate} missing from {trend}");
    }
    let until_full = record("ssdwatch:filesystem_seconds_until_full");
    assert!(
        until_full.contains(":daemon") && until_full.contains(":trend"),
        "{until_full}"
    );
    assert!(
        !until_full.contains("deriv"),
        "an ungated trend: {until_full}"
    );
    let doc = yaml(&rule_files()[1]);
    let forecasts = alerts_named(&doc, "SsdwatchFilesystemPredictedFull");
    assert_eq!(forecasts.len(), 1);
    let runaway = alerts_named(&doc, "SsdwatchFilesystemRunaway");
    assert_eq!(runaway.len(), 1);
    for (r, min_for) in [(forecasts[0], 3600), (runaway[0], 3 * 3600)] {
        let expr = r["expr"].as_str().unwrap();
        assert!(
            expr.contains("ssdwatch:filesystem_seconds_until_full"),
            "{expr}"
        );
        let dur = humantime::parse_duration(r["for"].as_str().unwrap()).unwrap();
        assert!(dur.as_secs() >= min_for, "{expr}: for {dur:?}");
    }
    assert!(
        runaway[0]["expr"]
            .as_str()
            .unwrap()
            .contains("recurring_peak")
    );
}

#[test]
fn drive_forecast_alerts_are_gated_by_level_history_and_duration() {
    let doc = yaml(&rule_files()[1]);
    let forecasts = alerts_named(&doc, "SsdwatchDrivePredicted");
    assert_eq!(forecasts.len(), 2);
    for r in forecasts {
        let expr = r["expr"].as_str().unwrap();
        // A level worth worrying about, and days of readings behind the date.
        assert!(expr.contains("_used_ratio > 0.10"), "{expr}");
        assert!(expr.contains("hours_watched7d >= 144"), "{expr}");
        assert!(expr.contains("< 90 * 86400"), "{expr}");
        let dur = humantime::parse_duration(r["for"].as_str().unwrap()).unwrap();
        assert!(dur.as_secs() >= 6 * 3600, "{expr}: for {dur:?}");
    }
}

/// `ssdwatch sample` of this very machine (SMART off: its disks have none, and smartctl's
/// timeouts would only slow this down), with its state in `dir`.
fn sample_this_machine(dir: &Path) -> String {
    let cfg = dir.join("ssdwatch.yaml");
    std::fs::write(
        &cfg,
        format!(
            "state_dir: {}\ncollectors:\n  smart:\n    enabled: false\n",
            dir.join("state").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
        .args(["--config", cfg.to_str().unwrap(), "sample"])
        .output()
        .expect("running ssdwatch sample");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("ssdwatch_filesystem_size_bytes{"),
        "no filesystem metrics in the sample (stderr: {}):\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `ssdwatch sample` of this very machine through `promtool check metrics`: no warnings.
#[test]
fn the_daemons_real_output_passes_promtool_check_metrics() {
    if !require_cmd("promtool check metrics", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = sample_this_machine(dir.path());
    assert!(
        text.contains("ssdwatch_disk_info{"),
        "no disk_info:\n{text}"
    );
    support::assert_promtool_clean("ssdwatch sample", &text);
}

fn dashboards() -> Vec<(String, Json)> {
    let dir = repo().join("dashboards");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            let j: Json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            out.push((p.file_name().unwrap().to_string_lossy().into_owned(), j));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn checked_in_dashboards_are_what_the_generator_produces() {
    if !require_cmd("dashboard generator", "python3", "python3") {
        return;
    }
    let out = Command::new("python3")
        .arg(repo().join("dashboards/gen/generate.py"))
        .arg("--check")
        .output()
        .expect("running the generator");
    assert!(
        out.status.success(),
        "dashboards/*.json differ from the generator's output:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn walk<'a>(v: &'a Json, key: &str, found: &mut Vec<&'a Json>) {
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                if k == key {
                    found.push(x);
                }
                walk(x, key, found);
            }
        }
        Json::Array(a) => a.iter().for_each(|x| walk(x, key, found)),
        _ => {}
    }
}

#[test]
fn dashboards_are_importable_with_any_prometheus_data_source() {
    let dbs = dashboards();
    let uids: BTreeSet<&str> = dbs
        .iter()
        .map(|(_, d)| d["uid"].as_str().unwrap())
        .collect();
    assert_eq!(
        uids,
        BTreeSet::from(["ssdwatch-degradation", "ssdwatch-fleet", "ssdwatch-host"])
    );
    for (name, d) in &dbs {
        let vars = d["templating"]["list"].as_array().unwrap();
        let var = |n: &str| vars.iter().find(|v| v["name"] == n);
        assert_eq!(
            var("datasource").map(|v| &v["type"]),
            Some(&Json::from("datasource")),
            "{name}: no datasource variable"
        );
        assert!(var("instance").is_some(), "{name}: no instance variable");
        // Every data source reference is the variable (or Grafana's built-in annotations).
        let mut ds = Vec::new();
        walk(d, "datasource", &mut ds);
        for x in ds {
            if x.is_string() {
                continue; // the variable definition's own "datasource" name
            }
            let uid = x["uid"].as_str().unwrap_or("");
            assert!(
                uid == "${datasource}" || uid == "-- Grafana --",
                "{name}: hard-coded datasource {x}"
            );
        }
        let mut ids = BTreeSet::new();
        for p in d["panels"].as_array().unwrap() {
            assert!(
                ids.insert(p["id"].as_u64().unwrap()),
                "{name}: duplicate panel id"
            );
        }
        assert!(d["id"].is_null(), "{name}: carries a database id");
    }
}

#[test]
fn dashboards_only_read_recording_rules_that_exist() {
    let mut recorded = BTreeSet::new();
    for r in rules_of(&yaml(&rule_files()[0])) {
        if let Some(n) = r["record"].as_str() {
            recorded.insert(n.to_string());
        }
    }
    let re = regex_lite::Regex::new(r"ssdwatch:[a-zA-Z0-9_:]+").unwrap();
    for (name, d) in dashboards() {
        let mut exprs = Vec::new();
        walk(&d, "expr", &mut exprs);
        assert!(!exprs.is_empty(), "{name}: no queries");
        for e in exprs {
            for m in re.find_iter(e.as_str().unwrap()) {
                assert!(
                    recorded.contains(m.as_str()),
                    "{name}: {} is not a recording rule",
                    m.as_str()
                );
            }
        }
    }
}

#[test]
fn the_fleet_dashboard_reads_no_raw_history() {
    // With thousands of hosts, range functions over raw series belong in recording rules.
    let (_, fleet) = dashboards()
        .into_iter()
        .find(|(n, _)| n == "ssdwatch-fleet.json")
        .unwrap();
    let mut exprs = Vec::new();
    walk(&fleet, "expr", &mut exprs);
    for e in exprs {
        let e = e.as_str().unwrap();
        assert!(!e.contains('['), "fleet query over a range: {e}");
    }
}

/// One definition of fill: on this machine's root filesystem, as `ssdwatch sample` reads it,
/// the `ssdwatch:filesystem_used_ratio` rule (evaluated by promtool) and the daemon's own
/// `FsStat::fill_ratio` (what the probe context reports) give the same figure.
#[test]
fn the_fill_rule_and_the_daemon_agree_on_the_same_filesystem() {
    if !require_cmd("fill rule vs daemon", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = sample_this_machine(dir.path());
    let series = |name: &str| -> (String, f64) {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{mountpoint=\"/\",")))
            .unwrap_or_else(|| panic!("no {name} for / in:\n{text}"));
        let (labels, v) = line.rsplit_once(' ').unwrap();
        (labels[name.len()..].to_string(), v.parse().unwrap())
    };
    let (labels, size) = series("ssdwatch_filesystem_size_bytes");
    let (_, free) = series("ssdwatch_filesystem_free_bytes");
    let (_, avail) = series("ssdwatch_filesystem_avail_bytes");
    // The daemon's definition, on the same numbers (statvfs gives blocks of frsize; 1 here).
    let daemon = ssdwatch::statfs::FsStat {
        frsize: 1,
        blocks: size as u64,
        bfree: free as u64,
        bavail: avail as u64,
        ..Default::default()
    }
    .fill_ratio()
    .expect("a root filesystem has a size");
    let inner = labels.trim_start_matches('{').trim_end_matches('}');
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n\
         \x20     - series: 'ssdwatch_filesystem_size_bytes{{{inner}}}'\n        values: '{size}x5'\n\
         \x20     - series: 'ssdwatch_filesystem_free_bytes{{{inner}}}'\n        values: '{free}x5'\n\
         \x20     - series: 'ssdwatch_filesystem_avail_bytes{{{inner}}}'\n        values: '{avail}x5'\n\
         \x20   promql_expr_test:\n      - expr: ssdwatch:filesystem_used_ratio\n        eval_time: 2m\n\
         \x20       exp_samples:\n          - labels: 'ssdwatch:filesystem_used_ratio{{{inner}}}'\n\
         \x20           value: {daemon:e}\n",
        rules = rule_files()[0].display(),
    );
    let file = dir.path().join("fill.test.yml");
    std::fs::write(&file, test).unwrap();
    let (ok, out) = promtool(&["test", "rules", file.to_str().unwrap()]);
    assert!(
        ok,
        "the rule and the daemon disagree (daemon {daemon}):\n{out}"
    );
}

/// The README's table of alerts names every alert of the shipped rule files, by its full name
/// (a table that predates a round's alerts hides them from whoever reads it first).
#[test]
fn the_readme_alert_table_names_every_shipped_alert() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find("## The alerts you will get")
        .expect("the README's alert section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut missing = Vec::new();
    for file in ["ssdwatch.alerts.yml", "ssdwatch.optional.alerts.yml"] {
        let text = std::fs::read_to_string(root.join("packaging/prometheus").join(file)).unwrap();
        for name in text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- alert: "))
        {
            let name = name.trim();
            let named = section.match_indices(name).any(|(i, _)| {
                !section[i + name.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
            });
            if !named && !missing.contains(&name.to_string()) {
                missing.push(name.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README's alert table misses {missing:?}"
    );
}
