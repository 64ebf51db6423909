//! `ssdwatch backtest` as a user runs it: a CSV trace in, the episodes of every alert out, from
//! Prometheus' own engines (the real prometheus' query engine, or promtool's rule manager), with
//! the daemon's forecast over time; and the alert benchmark (benches/alerts.sh) in its short
//! form, so it can't rot.

use crate::support::{require_cmd, run_bench_short};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600;

fn ssdwatch() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ssdwatch"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn backtest(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(ssdwatch())
        .arg("backtest")
        .args(args)
        .output()
        .expect("running ssdwatch backtest")
}

/// A volume of 1000 bytes sampled every minute from T0: half full for an hour, 80 % full for
/// the next hour, half full again for half an hour, then full for 20 minutes.
fn story_trace() -> String {
    let mut s = String::from("unix_seconds,size_bytes,avail_bytes\n");
    for k in 0..=170 {
        let avail = match k {
            0..60 => 500,
            60..120 => 200,
            120..150 => 500,
            _ => 0,
        };
        s.push_str(&format!("{},1000,{avail}\n", T0 + k * 60));
    }
    s
}

/// Two alerts on node_exporter's names whose firing instants follow from the story by hand.
const STORY_RULES: &str = r#"groups:
  - name: story
    rules:
      - alert: Used70
        expr: 1 - node_filesystem_avail_bytes{job="node"} / node_filesystem_size_bytes{job="node"} > 0.7
        for: 5m
        labels:
          severity: warning
      - alert: Full
        expr: node_filesystem_avail_bytes{job="node"} == 0
        labels:
          severity: critical
"#;

#[test]
fn the_episodes_of_a_known_story_come_from_the_real_rule_engine() {
    if !require_cmd("backtest through promtool", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "story.csv", &story_trace());
    let rules = write(dir.path(), "story.rules.yml", STORY_RULES);
    let out = backtest(&[
        "--trace".as_ref(),
        trace.as_os_str(),
        "--rules".as_ref(),
        rules.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let at = |min: i64| Json::from(T0 + min * 60);
    let ep = |a: &str, s: &str, start: i64, end: Option<i64>| serde_json::json!({"alertname": a, "severity": s, "start": at(start), "end": end.map(at)});
    // 80 % from minute 60: pending, firing once it held 5 minutes (65), over at 120. Full at
    // 150: the critical alert at once, the 70 % one again 5 minutes later, both to the end.
    assert_eq!(
        r["episodes"],
        Json::from(vec![
            ep("Used70", "warning", 65, Some(120)),
            ep("Full", "critical", 150, None),
            ep("Used70", "warning", 155, None),
        ]),
        "{r:#}"
    );
    assert_eq!(r["full_at"], at(150));
    let set = &r["rule_sets"][0];
    assert_eq!(set["alertnames"], serde_json::json!(["Used70", "Full"]));
    let summary = |sev: &str| {
        set["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["severity"] == sev)
            .unwrap()
            .clone()
    };
    // The warning went quiet before the volume filled and came back after: a false alarm and
    // no lead time; the critical one fired at the full instant itself.
    assert_eq!(summary("warning")["lead_seconds"], Json::Null);
    assert_eq!(summary("warning")["false_alarms"], 1);
    assert_eq!(summary("critical")["lead_seconds"], 0);
}

#[test]
fn the_json_holds_episodes_full_at_and_the_hourly_forecast() {
    if !require_cmd("backtest json", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "story.csv", &story_trace());
    // The shipped rules (the default).
    let out = backtest(&["--trace".as_ref(), trace.as_os_str(), "--json".as_ref()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    for e in r["episodes"].as_array().expect("episodes: a list") {
        assert!(
            e["alertname"].is_string() && e["severity"].is_string(),
            "{e}"
        );
        assert!(e["start"].is_i64(), "{e}");
        assert!(e["end"].is_i64() || e["end"].is_null(), "{e}");
    }
    assert!(r["full_at"].is_i64());
    let fc = r["forecast"].as_array().expect("forecast: a list");
    // A pass an hour from the trace's start: at +1 h and +2 h; under 3 h of history has no date.
    assert_eq!(fc.len(), 2, "{fc:?}");
    for (i, p) in fc.iter().enumerate() {
        assert_eq!(p["t"], T0 + (i as i64 + 1) * 3600);
        for k in ["predicted_full", "earliest", "latest"] {
            assert!(p[k].is_null(), "{p}");
        }
    }
    assert_eq!(
        r["rule_sets"][0]["rules"]
            .as_str()
            .map(|s| s.starts_with("shipped")),
        Some(true)
    );
    assert!(
        r["rule_sets"][0]["alertnames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "SsdwatchFilesystemAlmostFull")
    );
    // The table is the same report for people.
    let out = backtest(&["--trace".as_ref(), trace.as_os_str()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("full at: 2026-01-01T02:30:00Z"), "{text}");
}

#[test]
fn a_bad_trace_is_refused_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "0,10,5\n60,10,x\n",
            "bad.csv:2: avail_bytes \"x\" is not a whole number of bytes",
        ),
        (
            "0,10,5\n60,10,5\n60,10,4\n",
            "bad.csv:3: time 60 does not increase",
        ),
        ("0,10,5\n5,10,4\n", "bad.csv:2: 5 s after the row before"),
        (
            "0,10,5\n60,10,11\n",
            "bad.csv:2: avail_bytes 11 is more than size_bytes 10",
        ),
    ] {
        let trace = write(dir.path(), "bad.csv", text);
        let out = backtest(&["--trace".as_ref(), trace.as_os_str()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn without_promtool_the_error_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "story.csv", &story_trace());
    let out = Command::new(ssdwatch())
        .args(["backtest", "--trace"])
        .arg(&trace)
        .env("PATH", dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("promtool not found on PATH") && err.contains("apt-get install prometheus"),
        "{err}"
    );
}

/// benches/alerts.sh in its short form: three small traces through both rule sets, the table
/// printed; the figures come from the whole run (docs/alerts-benchmark.md).
#[test]
fn the_alert_benchmark_runs_in_its_short_form() {
    if !require_cmd("alert benchmark", "promtool", "prometheus")
        || !require_cmd("alert benchmark", "python3", "python3")
    {
        return;
    }
    let text = run_bench_short("alerts.sh", ssdwatch());
    for trace in ["runaway-minutes", "wal-runaway", "daily-checkpoint"] {
        assert!(text.contains(&format!("| {trace} |")), "{text}");
    }
    assert!(text.contains("| node-mixin |"), "{text}");
    assert!(text.contains("| ssdwatch (shipped) |"), "{text}");
}

/// benches/backtest_speed.sh in its short form: the speed trace's first days through the
/// default engine, timed, and through the other, with the episodes compared; the figures come
/// from the whole 6-month run (docs/alerts-benchmark.md, "Speed").
#[test]
fn the_backtest_speed_bench_runs_in_its_short_form() {
    if !require_cmd("backtest speed bench", "promtool", "prometheus")
        || !require_cmd("backtest speed bench", "prometheus", "prometheus")
        || !require_cmd("backtest speed bench", "python3", "python3")
        || !require_cmd("backtest speed bench", "time", "time")
    {
        return;
    }
    let text = run_bench_short("backtest_speed.sh", ssdwatch());
    assert!(text.contains("engine query"), "{text}");
    assert!(text.contains("wall seconds: min"), "{text}");
    assert!(
        text.contains("episodes the same under both engines: yes"),
        "{text}"
    );
}

/// Rules that read none of the replayed series are left out of what promtool evaluates, for
/// speed: the alerts must fire exactly as with every rule of the files (the shipped ones and
/// the node-mixin's), to the second.
#[test]
fn leaving_out_rules_without_input_changes_no_episode() {
    if !require_cmd("backtest pruning", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1 TB at 55 % for two days, then 40 GB an hour until full, a sample every 5 minutes.
    let mut csv = String::new();
    let mut k = 0;
    loop {
        let t = k * 300;
        let used = 550e9
            + if t > 2 * 86_400 {
                40e9 * (t - 2 * 86_400) as f64 / 3600.0
            } else {
                0.0
            };
        let avail = (1e12 - used).max(0.0) as u64;
        csv.push_str(&format!("{},1000000000000,{avail}\n", T0 + t));
        if avail == 0 {
            break;
        }
        k += 1;
    }
    let trace = write(dir.path(), "wal.csv", &csv);
    let mixin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/alerts/node-mixin.filesystem.alerts.yml");
    let run = |all: bool| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--trace".as_ref(),
            trace.as_os_str(),
            "--rules".as_ref(),
            "shipped".as_ref(),
            "--rules".as_ref(),
            mixin.as_os_str(),
            "--eval-interval".as_ref(),
            "5m".as_ref(),
            "--json".as_ref(),
        ];
        if all {
            args.push("--all-rules".as_ref());
        }
        let out = backtest(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Json>(&out.stdout).unwrap()
    };
    let (pruned, all) = (run(false), run(true));
    assert!(
        pruned["rules_evaluated"].as_u64() < all["rules_evaluated"].as_u64(),
        "{} vs {}",
        pruned["rules_evaluated"],
        all["rules_evaluated"]
    );
    assert!(!all["episodes"].as_array().unwrap().is_empty(), "{all:#}");
    assert_eq!(pruned["episodes"], all["episodes"]);
}

/// A rule file Prometheus would not load is an error naming it, also when its broken rule
/// reads none of the trace's series (and would be left out of the evaluation).
#[test]
fn a_rule_file_that_does_not_load_is_an_error_naming_it() {
    if !require_cmd("backtest rule check", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "story.csv", &story_trace());
    let rules = write(
        dir.path(),
        "broken.rules.yml",
        "groups:\n  - name: x\n    rules:\n      - alert: A\n        expr: \"rate(foo[5m]\"\n",
    );
    let out = backtest(&[
        "--trace".as_ref(),
        trace.as_os_str(),
        "--rules".as_ref(),
        rules.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("do not load")
            && err.contains("broken.rules.yml")
            && err.contains("parse error"),
        "{err}"
    );
}

/// Rules with a recording chain, range windows, `for` and `keep_firing_for`, on node_exporter's
/// names: what the pieces' warm-up must carry across a cut.
const CHAIN_RULES: &str = r#"groups:
  - name: chain.rules
    rules:
      - record: fs:avail_ratio
        expr: node_filesystem_avail_bytes{job="node"} / node_filesystem_size_bytes{job="node"}
      - record: fs:avail_ratio:min1h
        expr: min_over_time(fs:avail_ratio[1h])
  - name: chain.alerts
    rules:
      - alert: LowForAWhile
        expr: fs:avail_ratio:min1h < 0.3
        for: 30m
        labels:
          severity: warning
      - alert: Falling
        expr: deriv(node_filesystem_avail_bytes{job="node"}[20m]) < 0 and fs:avail_ratio < 0.5
        for: 10m
        keep_firing_for: 15m
        labels:
          severity: critical
"#;

/// Two days at one minute of a sawtooth with a 97-minute period (so the episodes fall
/// everywhere relative to any cut), then filling to full: (time, avail) of a 1000-byte volume.
fn sawtooth(t0: i64) -> Vec<(i64, u64)> {
    (0..2 * 1440)
        .map(|k| {
            let phase = (k % 97) as f64 / 97.0;
            let avail = if k < 2 * 1440 - 120 {
                (800.0 - 700.0 * phase) as u64
            } else {
                (2 * 1440 - 1 - k) as u64 * 5
            };
            (t0 + k * 60, avail)
        })
        .collect()
}

fn sawtooth_trace() -> String {
    csv(&sawtooth(T0))
}

fn csv(points: &[(i64, u64)]) -> String {
    let mut s = String::from("unix_seconds,size_bytes,avail_bytes\n");
    for (t, avail) in points {
        s.push_str(&format!("{t},1000,{avail}\n"));
    }
    s
}

/// A long trace is evaluated in pieces at once, each after a warm-up: the episodes are the
/// same to the second as in one run, although the pieces are cut in the middle of `for`
/// periods, range windows and `keep_firing_for`.
#[test]
fn a_trace_cut_into_pieces_gives_the_episodes_of_one_run() {
    if !require_cmd("backtest pieces", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "saw.csv", &sawtooth_trace());
    let rules = write(dir.path(), "chain.rules.yml", CHAIN_RULES);
    let run = |jobs: &str| {
        let out = backtest(&[
            "--trace".as_ref(),
            trace.as_os_str(),
            "--rules".as_ref(),
            rules.as_os_str(),
            "--engine".as_ref(),
            "rules".as_ref(),
            "--jobs".as_ref(),
            jobs.as_ref(),
            "--json".as_ref(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Json>(&out.stdout).unwrap()
    };
    let (one, cut) = (run("1"), run("5"));
    assert_eq!(one["pieces"], 1);
    assert_eq!(cut["pieces"], 5, "{cut:#}");
    // A warm-up of the 1 h window over the recording, the 30 m `for`, lookbacks and steps.
    let warm = cut["warmup_seconds"].as_i64().unwrap();
    assert!((5400..3 * 3600).contains(&warm), "{warm}");
    let eps = one["episodes"].as_array().unwrap();
    // Every cut (at fifths of the trace) falls inside an episode of the critical alert or
    // in a pending `for` of the warning: the story has episodes all along.
    assert!(eps.len() > 40, "{}", eps.len());
    let start = T0;
    let span = 2 * 1440 * 60 - 60;
    let cuts: Vec<i64> = (1..5).map(|k| start + span * k / 5).collect();
    let straddles = |e: &Json| {
        let (s, end) = (e["start"].as_i64().unwrap(), e["end"].as_i64());
        cuts.iter().any(|c| s < *c && end.is_none_or(|e| e > *c))
    };
    assert!(eps.iter().filter(|e| straddles(e)).count() >= 2, "{eps:?}");
    assert_eq!(one["episodes"], cut["episodes"]);
    assert_eq!(one["rule_sets"], cut["rule_sets"]);
}

/// The query engine (a range query a rule over the whole trace, the alert states replayed)
/// gives the rule manager's episodes to the second: on the sawtooth with a recording chain,
/// range windows, `for` and `keep_firing_for`, and on a WAL runaway with the shipped rules
/// (the daemon's forecast series, `or` of two recordings, subqueries) and the node-mixin's.
#[test]
fn the_query_engine_gives_the_rule_managers_episodes_to_the_second() {
    if !require_cmd("backtest engines", "promtool", "prometheus")
        || !require_cmd("backtest engines", "prometheus", "prometheus")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let saw = write(dir.path(), "saw.csv", &sawtooth_trace());
    let chain = write(dir.path(), "chain.rules.yml", CHAIN_RULES);
    // 1 TB at 55 % for ten days, then 40 GB an hour until full, a sample every 5 minutes.
    let mut wal = String::new();
    for k in 0.. {
        let t = k * 300;
        let climb = (t - 10 * 86_400).max(0) as f64;
        let avail = (450e9 - 40e9 * climb / 3600.0).max(0.0) as u64;
        wal.push_str(&format!("{},1000000000000,{avail}\n", T0 + t));
        if avail == 0 {
            break;
        }
    }
    let wal = write(dir.path(), "wal.csv", &wal);
    let mixin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/alerts/node-mixin.filesystem.alerts.yml");
    let run = |trace: &Path, rules: &[&Path], eval: &str, engine: &str| -> Json {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--trace".as_ref(),
            trace.as_os_str(),
            "--eval-interval".as_ref(),
            eval.as_ref(),
            "--engine".as_ref(),
            engine.as_ref(),
            "--json".as_ref(),
        ];
        for r in rules {
            args.push("--rules".as_ref());
            args.push(r.as_os_str());
        }
        let out = backtest(&args);
        assert!(
            out.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Json = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["engine"], engine);
        r
    };
    let shipped = Path::new("shipped");
    for (trace, rules, eval, least) in [
        (&saw, vec![chain.as_path()], "1m", 40),
        (&wal, vec![shipped, mixin.as_path()], "5m", 4),
    ] {
        let (q, r) = (
            run(trace, &rules, eval, "query"),
            run(trace, &rules, eval, "rules"),
        );
        let eps = q["episodes"].as_array().unwrap();
        assert!(eps.len() >= least, "{}: {eps:?}", trace.display());
        assert_eq!(q["episodes"], r["episodes"], "{}", trace.display());
        assert_eq!(q["rule_sets"], r["rule_sets"], "{}", trace.display());
    }
}

/// Rules the query engine can't evaluate as the rule manager does (one reads `ALERTS`) run
/// through the rule manager, saying why; asked for the query engine, they are an error naming
/// the rule. Without a `prometheus` binary the rule manager runs, saying so, and asking for
/// the query engine says what to install.
#[test]
fn what_the_query_engine_cannot_evaluate_runs_through_the_rule_manager_saying_why() {
    if !require_cmd("backtest engine choice", "promtool", "prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "story.csv", &story_trace());
    let alerts_rules = format!(
        "{STORY_RULES}      - alert: FullAndLoud\n        expr: ALERTS{{alertname=\"Full\", alertstate=\"firing\"}}\n        labels:\n          severity: critical\n"
    );
    let rules = write(dir.path(), "alerts.rules.yml", &alerts_rules);
    let run = |engine: &str, path: Option<&Path>| -> Output {
        let mut c = Command::new(ssdwatch());
        c.args(["backtest", "--json", "--engine", engine, "--trace"])
            .arg(&trace)
            .arg("--rules")
            .arg(&rules);
        if let Some(p) = path {
            c.env("PATH", p);
        }
        c.output().unwrap()
    };
    let out = run("auto", None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["engine"], "rules");
    let note = r["engine_note"].as_str().unwrap();
    assert!(
        note.contains("FullAndLoud") && note.contains("ALERTS"),
        "{note}"
    );
    // The rule manager fires the alert on ALERTS one step after Full.
    assert!(
        r["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["alertname"] == "FullAndLoud"),
        "{r:#}"
    );
    let out = run("query", None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--engine query") && err.contains("FullAndLoud"),
        "{err}"
    );

    // A PATH with promtool and no prometheus.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let promtool = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("promtool"))
        .find(|p| p.is_file())
        .unwrap();
    std::os::unix::fs::symlink(&promtool, bin.join("promtool")).unwrap();
    std::fs::write(&rules, STORY_RULES).unwrap();
    let out = run("auto", Some(&bin));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["engine"], "rules");
    assert!(
        r["engine_note"]
            .as_str()
            .unwrap()
            .contains("prometheus not found"),
        "{r:#}"
    );
    let out = run("query", Some(&bin));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("apt-get install prometheus"), "{err}");
}

/// A Prometheus holding the sawtooth as ssdwatch's and node_exporter's series of one host
/// (db7), another mount only node_exporter has, and a mount two jobs export (ambiguous);
/// killed and reaped on drop.
struct Server {
    dir: tempfile::TempDir,
    child: std::process::Child,
    url: String,
    points: Vec<(i64, u64)>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(test: &str) -> Option<Server> {
        if !require_cmd(test, "promtool", "prometheus")
            || !require_cmd(test, "prometheus", "prometheus")
        {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Three days ago, on a minute: inside the server's retention.
        let now = crate::support::unix_now() as i64;
        let t0 = (now - 3 * 86_400).div_euclid(86_400) * 86_400;
        let points = sawtooth(t0);
        let mut om = String::new();
        let series = [
            ("ssdwatch_filesystem", "db7:10150", "ssdwatch", "/srv/db"),
            ("node_filesystem", "db7:9100", "node", "/srv/db"),
            ("node_filesystem", "db7:9100", "node", "/var/log"),
            ("node_filesystem", "db7:9100", "node", "/dup"),
            ("node_filesystem", "db7:9100", "node2", "/dup"),
        ];
        for what in ["size", "avail"] {
            for prefix in ["ssdwatch_filesystem", "node_filesystem"] {
                om.push_str(&format!("# TYPE {prefix}_{what}_bytes gauge\n"));
                for (p, instance, job, mp) in series.iter().filter(|s| s.0 == prefix) {
                    for (t, avail) in &points {
                        let v = if what == "size" { 1000 } else { *avail };
                        om.push_str(&format!(
                            "{p}_{what}_bytes{{instance=\"{instance}\",job=\"{job}\",mountpoint=\"{mp}\",device=\"nvme0n1p1\",fstype=\"ext4\"}} {v} {t}\n"
                        ));
                    }
                }
            }
        }
        om.push_str("# EOF\n");
        std::fs::write(d.join("trace.om"), om).unwrap();
        let tsdb = d.join("tsdb");
        let (ok, out) = crate::support::run_status(
            "promtool",
            &[
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                d.join("trace.om").to_str().unwrap(),
                tsdb.to_str().unwrap(),
            ],
        );
        assert!(ok, "promtool: {out}");
        std::fs::write(d.join("prometheus.yml"), "global: {}\n").unwrap();
        let port = crate::support::free_port();
        let log = std::fs::File::create(d.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                d.join("prometheus.yml").display()
            ))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=10y")
            .arg("--log.level=warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let mut s = Server {
            dir,
            child,
            url: format!("http://127.0.0.1:{port}"),
            points,
        };
        // Ready once it answers (no time limit decides the test: it waits or fails on exit).
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!(
                    "prometheus exited ({st}): {}",
                    std::fs::read_to_string(s.dir.path().join("prometheus.log"))
                        .unwrap_or_default()
                );
            }
            if ssdwatch::query::Api::new(&s.url).query("1", now).is_ok() {
                return Some(s);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    fn range(&self) -> (String, String) {
        let first = self.points[0].0;
        let last = self.points.last().unwrap().0;
        (first.to_string(), last.to_string())
    }
}

/// `--prometheus`: the same trace read from a server (ssdwatch's series of the instance, else
/// node_exporter's) gives the episodes the CSV gives, to the second; the source is named.
#[test]
fn a_trace_read_from_prometheus_gives_the_episodes_of_its_csv() {
    let Some(server) = Server::start("backtest --prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "saw.csv", &csv(&server.points));
    let rules = write(dir.path(), "chain.rules.yml", CHAIN_RULES);
    let (start, end) = server.range();
    let json = |out: Output| -> Json {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let common: Vec<&std::ffi::OsStr> = vec![
        "--rules".as_ref(),
        rules.as_os_str(),
        "--json".as_ref(),
        "--mountpoint".as_ref(),
        "/srv/db".as_ref(),
    ];
    let from_csv = json(backtest(
        &[&["--trace".as_ref(), trace.as_os_str()][..], &common].concat(),
    ));
    let from_server = |instance: &str| {
        json(backtest(
            &[
                &[
                    "--prometheus".as_ref(),
                    server.url.as_ref(),
                    "--instance".as_ref(),
                    instance.as_ref(),
                    "--start".as_ref(),
                    start.as_ref(),
                    "--end".as_ref(),
                    end.as_ref(),
                ][..],
                &common,
            ]
            .concat(),
        ))
    };
    let ours = from_server("db7:10150");
    assert!(
        !from_csv["episodes"].as_array().unwrap().is_empty(),
        "{from_csv:#}"
    );
    assert_eq!(ours["samples"], from_csv["samples"]);
    assert_eq!(ours["full_at"], from_csv["full_at"]);
    assert_eq!(ours["episodes"], from_csv["episodes"]);
    let name = ours["trace"].as_str().unwrap();
    assert!(
        name.contains("ssdwatch_filesystem_avail_bytes")
            && name.contains("ssdwatch's own series")
            && name.contains(&server.url),
        "{name}"
    );
    // node_exporter's instance has no ssdwatch series: its own are read.
    let node = from_server("db7:9100");
    assert_eq!(node["episodes"], from_csv["episodes"]);
    assert!(
        node["trace"]
            .as_str()
            .unwrap()
            .contains("node_exporter's series"),
        "{}",
        node["trace"]
    );
}

/// What can go wrong asking a server is an error naming the server and the query: no series
/// (an unknown instance or mount point), two series (ambiguous: both named), no server.
#[test]
fn a_prometheus_source_that_cannot_give_one_trace_is_an_error_naming_it() {
    let Some(server) = Server::start("backtest --prometheus errors") else {
        return;
    };
    let (start, end) = server.range();
    let run = |url: &str, instance: &str, mp: &str| {
        let out = backtest(&[
            "--prometheus".as_ref(),
            url.as_ref(),
            "--instance".as_ref(),
            instance.as_ref(),
            "--mountpoint".as_ref(),
            mp.as_ref(),
            "--start".as_ref(),
            start.as_ref(),
            "--end".as_ref(),
            end.as_ref(),
        ]);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&server.url, "db9:9100", "/srv/db");
    assert!(
        e.contains(&server.url)
            && e.contains("no series")
            && e.contains(
                r#"ssdwatch_filesystem_avail_bytes{instance="db9:9100",mountpoint="/srv/db"}"#
            )
            && e.contains(
                r#"node_filesystem_avail_bytes{instance="db9:9100",mountpoint="/srv/db"}"#
            ),
        "{e}"
    );
    let e = run(&server.url, "db7:9100", "/nowhere");
    assert!(
        e.contains("no series") && e.contains(r#"mountpoint="/nowhere""#),
        "{e}"
    );
    let e = run(&server.url, "db7:9100", "/dup");
    assert!(
        e.contains(&server.url)
            && e.contains("2 series match")
            && e.contains(r#"job="node""#)
            && e.contains(r#"job="node2""#)
            && e.contains(r#"node_filesystem_avail_bytes{instance="db7:9100",mountpoint="/dup"}"#),
        "{e}"
    );
    // Nothing listens there.
    let down = format!("http://127.0.0.1:{}", crate::support::free_port());
    let e = run(&down, "db7:9100", "/srv/db");
    assert!(
        e.contains(&down) && e.contains("query ssdwatch_filesystem_avail_bytes{"),
        "{e}"
    );
}
