//! The dashboards work against the real thing: a real Prometheus (Debian's `prometheus`) loads the
//! rule files and scrapes the real `ssdwatch` binary every second (rules every 2 s), on a host
//! with a loop-mounted ext4 that was written, deleted from, fstrim'd and is being probed, and a
//! second one whose drive rests between runs; the daemon is restarted after the TRIM. Then
//! every query of every panel, annotation and template variable of every dashboard is evaluated
//! through Prometheus' HTTP API: none may error, and none may come back empty unless it is in the
//! short list below of panels this machine can't fill (with the reason). And every panel is
//! evaluated as Grafana shows it (`live/grafana.rs`: range and instant queries, table merges, the
//! XY charts' joins on time, annotations as events), and its picture checked against the story.
//!
//! The machine's own disks (virtio, loop) have no SMART, so the daemon's smartctl is the
//! project's test stand-in replaying real captures (tests/fixtures/smart: a worn Intel P4510
//! NVMe and a worn Intel S4500 SATA SSD): the SMART panels are checked for data too.

use crate::support::prometheus::*;
use crate::support::unix_now;
use crate::support::*;
use grafana::{Line, Shown, View};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod grafana;

/// Table columns a row may lack, each with the reason: (dashboard, panel, column, why).
const COLUMN_MAY_BE_ABSENT: &[(&str, &str, &str, &str)] = &[(
    "ssdwatch-degradation.json",
    "Idle recovery: last run before a long rest, the run after",
    "p50 run before",
    "when the longest rest in the range came before the target's first run in it (the daemon had \
     just started, or the machine was slow to the restart), no run precedes it there: the row \
     shows the run after alone; idle_table_is_true_at checks the table's cells, an absent one \
     included",
)];

/// Panels (by dashboard file and title) that may legitimately be empty on the test machine.
const MAY_BE_EMPTY: &[(&str, &str, &str)] = &[
    (
        "ssdwatch-degradation.json",
        "Performance-full per target",
        "a run of minutes gives no fill bin the 10 runs performance-full needs: the daemon exports nothing rather than a guess",
    ),
    ("ssdwatch-host.json", "Days to full (forecast)", NOT_FILLING),
    (
        "ssdwatch-host.json",
        "Predicted wear-out (days)",
        NO_WEAR_TREND,
    ),
    (
        "ssdwatch-host.json",
        "Temperature against the drive's own limits",
        "the replayed captures were read without --capabilities: no drive limit",
    ),
    (
        "ssdwatch-host.json",
        "Thermal throttling, per day",
        "the replayed captures report no thermal-management counters",
    ),
    (
        "ssdwatch-host.json",
        "Latest self-test",
        "the replayed captures hold no self-test log",
    ),
    (
        "ssdwatch-host.json",
        "Is fsync durable?",
        "the replayed drives are configured paths the kernel doesn't list",
    ),
    (
        "ssdwatch-host.json",
        "Effective vs statvfs free space",
        NO_LAYERS,
    ),
    (
        "ssdwatch-host.json",
        "Thin pool data and metadata fill",
        NO_LAYERS,
    ),
    ("ssdwatch-host.json", "ZFS pool capacity", NO_LAYERS),
    ("ssdwatch-host.json", "ZFS pool health", NO_LAYERS),
    ("ssdwatch-host.json", "btrfs unallocated", NO_LAYERS),
    ("ssdwatch-host.json", "btrfs: metadata can grow", NO_LAYERS),
    ("ssdwatch-host.json", "md missing disks", NO_LAYERS),
    ("ssdwatch-host.json", "md sync progress", NO_LAYERS),
    (
        "ssdwatch-host.json",
        "Errors under the filesystem, new per day",
        NO_LAYERS,
    ),
    (
        "ssdwatch-host.json",
        "ZFS pools: permanent data errors",
        NO_LAYERS,
    ),
    (
        "ssdwatch-host.json",
        "ATA attributes at their threshold",
        "the replayed drives have no attribute at or below its threshold",
    ),
    (
        "ssdwatch-host.json",
        "Database components by mount",
        NO_DATABASE,
    ),
    (
        "ssdwatch-host.json",
        "Share of each mount's growth (1 d)",
        NO_DATABASE,
    ),
    (
        "ssdwatch-host.json",
        "Database component growth over a day",
        NO_DATABASE,
    ),
    (
        "ssdwatch-host.json",
        "WAL waiting for the archiver",
        NO_DATABASE,
    ),
    (
        "ssdwatch-host.json",
        "Replication slots: retained WAL",
        NO_DATABASE,
    ),
    (
        "ssdwatch-host.json",
        "MySQL binary logs: oldest kept against retention",
        NO_DATABASE,
    ),
    (
        "ssdwatch-fleet.json",
        "Soonest predicted full (days)",
        NOT_FILLING,
    ),
    (
        "ssdwatch-fleet.json",
        "SSD filesystems that cannot TRIM",
        "every SSD filesystem here has a TRIM-capable path (vda is taken for flash as a virtual disk that passes discards; the loop device can TRIM too)",
    ),
    (
        "ssdwatch-fleet.json",
        "SSD filesystems without TRIM in 8 days",
        "needs 8 days of history and an SSD",
    ),
    (
        "ssdwatch-fleet.json",
        "Soonest predicted wear-out (days)",
        NO_WEAR_TREND,
    ),
];
const NOT_FILLING: &str = "only filling filesystems appear; nothing here fills steadily for hours";
const NO_LAYERS: &str = "this machine's mounts have no thin pool, btrfs, ZFS or md below them: the_layers_row_tells_a_thin_pool_filling_under_an_ext4 fills the row on a fixture host";
const NO_DATABASE: &str = "the live run starts no database server (and a day's growth needs a day of history); tests/it/databases run real ones";
const NO_WEAR_TREND: &str = "needs wear to grow over days of SMART samples";

/// One query of a dashboard: a panel target, or an annotation.
struct Query {
    /// The panel's title, or "annotation: NAME".
    what: String,
    expr: String,
    legend: String,
    /// A table's query: rows are label sets, legends unused.
    table: bool,
    /// Run at the end of the range only (tables, some stats); else over the range.
    instant: bool,
    /// The template variable the panel is repeated for, if any.
    repeat: Option<String>,
}

/// Every panel and annotation query of a dashboard (template variables are evaluated apart).
fn queries(d: &Json) -> Vec<Query> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("title").to_string();
        for t in p["targets"].as_array().expect("targets") {
            out.push(Query {
                what: title.clone(),
                expr: t["expr"].as_str().expect("expr").to_string(),
                legend: t["legendFormat"].as_str().unwrap_or("").to_string(),
                table: t["format"] == "table",
                instant: t["instant"] == true,
                repeat: p["repeat"].as_str().map(str::to_string),
            });
        }
    }
    for a in d["annotations"]["list"].as_array().expect("annotations") {
        if let Some(e) = a["expr"].as_str() {
            out.push(Query {
                what: format!("annotation: {}", a["name"].as_str().unwrap()),
                expr: e.to_string(),
                legend: String::new(),
                table: false,
                instant: false,
                repeat: None,
            });
        }
    }
    out
}

/// Template variables that may find no values here, with the reason (none today).
const VARIABLES_MAY_BE_EMPTY: &[(&str, &str, &str)] = &[];

/// A template variable's values, as Grafana gets them for `label_values(SELECTOR, LABEL)`:
/// the label's values on the series the selector finds over the dashboard's range.
fn label_values(prom: &Prom, def: &str, start: f64, end: f64) -> Result<Vec<String>, String> {
    let (selector, label) = def
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|s| s.rsplit_once(','))
        .ok_or_else(|| format!("unexpected variable query {def}"))?;
    let j = api(agent()
        .get(&format!(
            "{}/api/v1/label/{}/values",
            prom.base,
            label.trim()
        ))
        .query("match[]", selector.trim())
        .query("start", format!("{start:.3}"))
        .query("end", format!("{end:.3}")))?;
    Ok(j["data"]
        .as_array()
        .ok_or("no values array")?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect())
}

/// Every query variable of a dashboard, in order, each from its own query with the earlier
/// variables substituted: (name, values).
fn variables(
    prom: &Prom,
    file: &str,
    d: &Json,
    start: f64,
    end: f64,
    failures: &mut Vec<String>,
) -> Vec<(String, Vec<String>)> {
    let mut vars: Vec<(String, Vec<String>)> = Vec::new();
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] != "query" {
            continue;
        }
        let name = v["name"].as_str().expect("name").to_string();
        let def = substitute(v["definition"].as_str().expect("definition"), &vars, "");
        let values = label_values(prom, &def, start, end).unwrap_or_else(|e| {
            failures.push(format!("{file} / variable {name}: {e}\n    {def}"));
            Vec::new()
        });
        eprintln!("{file} / ${name} = {values:?}");
        if values.is_empty() {
            match VARIABLES_MAY_BE_EMPTY
                .iter()
                .find(|(f, n, _)| *f == file && *n == name)
            {
                Some((_, _, why)) => eprintln!("{file} / ${name}: empty, as expected ({why})"),
                None => failures.push(format!("{file} / variable {name}: no values\n    {def}")),
            }
        }
        vars.push((name, values));
    }
    vars
}

/// The query as Grafana sends it: each variable replaced by its values (a multi-value variable
/// as a regex alternation of its escaped values, as Grafana's Prometheus data source does),
/// `$__range` by the dashboard's range.
fn substitute(expr: &str, vars: &[(String, Vec<String>)], range: &str) -> String {
    let mut s = expr
        .replace("$__rate_interval", "5s")
        .replace("$__interval", "1s")
        .replace("$__range", range)
        .replace("$topn", "10");
    // Longest names first: $instance must not eat a $instances.
    let mut by_len: Vec<&(String, Vec<String>)> = vars.iter().collect();
    by_len.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    for (name, values) in by_len {
        let v = match values.as_slice() {
            [one] if expr.contains(&format!("=\"${name}\"")) => one.clone(),
            _ => values
                .iter()
                // Escaped for the regex, then for the PromQL string it sits in.
                .map(|v| regex_lite::escape(v).replace('\\', "\\\\"))
                .collect::<Vec<_>>()
                .join("|"),
        };
        s = s.replace(&format!("${name}"), &v);
    }
    assert!(
        !s.contains('$') || s.contains("\"$1\""),
        "unsubstituted variable in {s}"
    );
    s
}

/// The variables with `name` set to `value` alone (a repeated panel, or one target looked at).
fn with_value(
    vars: &[(String, Vec<String>)],
    name: &str,
    value: &str,
) -> Vec<(String, Vec<String>)> {
    vars.iter()
        .map(|(k, v)| match k == name {
            true => (k.clone(), vec![value.to_string()]),
            false => (k.clone(), v.clone()),
        })
        .collect()
}

/// A legend as Grafana renders it for one series: `{{label}}` replaced by the label's value.
fn render_legend(legend: &str, metric: &Json) -> String {
    let re = regex_lite::Regex::new(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}").unwrap();
    re.replace_all(legend, |c: &regex_lite::Captures| {
        metric[&c[1]].as_str().unwrap_or("").to_string()
    })
    .into_owned()
}

/// The value of an instant-query series.
fn val(r: &Json) -> f64 {
    r["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The one target of panel `title` whose legend contains `legend`.
fn target<'a>(qs: &'a [Query], title: &str, legend: &str) -> &'a Query {
    qs.iter()
        .find(|q| q.what == title && q.legend.contains(legend))
        .unwrap_or_else(|| panic!("no panel '{title}' with a '{legend}' target"))
}

/// smartctl replaying real captures, per device (see tests/fake-smartctl/smartctl).
fn fake_smartctl(repo: &Path, work: &Path) -> PathBuf {
    let state = work.join("smartctl-state");
    std::fs::create_dir(&state).unwrap();
    let fixtures = repo.join("tests/fixtures/smart");
    for (dev, file) in [
        ("nvme0", "nvme-intel-p4510-ssdpe2kx010t8-worn73.json"),
        ("sdz", "ata-intel-s4500-ssdsc2kb240g7-worn45.json"),
    ] {
        std::fs::write(
            state.join(format!("{dev}.mode")),
            format!("ok {}\n", fixtures.join(file).display()),
        )
        .unwrap();
    }
    let bin = work.join("smartctl");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\nFAKE_STATE='{}' exec sh '{}' \"$@\"\n",
            state.display(),
            repo.join("tests/fake-smartctl/smartctl").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `mp` is probed every second (every kind); `quiet_target` (a directory inside the `quiet`
/// filesystem, as a database's data directory is) every 3 s with two kinds, so its drive rests
/// between runs and the runs carry an idle time.
fn write_config(
    path: &Path,
    port: u16,
    state: &Path,
    mp: &str,
    quiet: &str,
    quiet_target: &str,
    smartctl: &Path,
) {
    let mut f = std::fs::File::create(path).expect("config");
    write!(
        f,
        r#"web:
  listen_address: "127.0.0.1:{port}"
state_dir: {state}
collectors:
  topology:
    interval: 1s
  diskstats:
    interval: 1s
  filesystem:
    interval: 1s
    mount_points_include: '^(/|{mp_re}|{quiet_re})$'
  smart:
    smartctl_path: {smartctl}
    discover: false
    devices:
      - path: /dev/nvme0
      - path: /dev/sdz
  probe:
    interval: 1s
    jitter_ratio: 0
    busy_window: 0s
    targets:
      - path: {mp}
        kinds: [sync_write_4k, rand_read_4k, rand_write_4k, seq_write]
        seq_write_interval: 1s
        write_ops: 8
        read_ops: 16
        file_size_bytes: 8388608
        seq_write_bytes: 2097152
        budget_bytes_per_day: 1073741824
        busy_threshold: 1.0
        free_floor_ratio: 0.01
        free_floor_bytes: 8388608
      - path: {quiet_target}
        interval: 3s
        kinds: [sync_write_4k, rand_read_4k]
        write_ops: 8
        read_ops: 16
        file_size_bytes: 4194304
        budget_bytes_per_day: 1073741824
        busy_threshold: 1.0
        free_floor_ratio: 0.01
        free_floor_bytes: 4194304
"#,
        state = state.display(),
        mp_re = regex_lite::escape(mp),
        quiet_re = regex_lite::escape(quiet),
        smartctl = smartctl.display(),
    )
    .expect("writing config");
}

/// The rule evaluation interval of the live run, and so the step of every subquery a panel
/// runs: twice the scrape interval, as production's 1 min rules over 15 s scrapes are longer
/// than a scrape, so a panel can't count on a step between two given scrapes.
const EVAL_SECONDS: u32 = 2;

/// The ssdwatch daemon of the live run, started on `cfg` and waited for until it serves `mp`.
fn start_daemon(cfg: &Path, log: PathBuf, instance: &str, mp: &str) -> Proc {
    let mut daemon = Proc::spawn(
        "ssdwatch",
        Command::new(env!("CARGO_BIN_EXE_ssdwatch")).args([
            "--config",
            cfg.to_str().unwrap(),
            "--log.level",
            "warn",
            "serve",
        ]),
        log,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        daemon.assert_running();
        if let Some((200, m)) = get(&format!("http://{instance}/metrics"))
            && m.contains(&format!("mountpoint=\"{mp}\""))
        {
            return daemon;
        }
        assert!(
            Instant::now() < deadline,
            "ssdwatch did not serve the loop filesystem"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The story run of the dashboards: a real Prometheus scraping the real daemon while one loop
/// ext4 is written, deleted from (a delete not yet trimmed) and fstrim'd, a second one rests
/// between probe runs, and the daemon is restarted after the TRIM (as an upgrade or a reboot
/// does). Then every query of every panel, annotation and variable runs (none may fail, none may
/// be empty but the listed ones), and every panel is evaluated as Grafana shows it, with its
/// transformations (merged table rows, the XY charts' joins on time), over the whole run: each
/// picture must have the shape the story says.
#[test]
fn every_dashboard_query_runs_against_a_live_prometheus_scraping_ssdwatch() {
    let name = "prometheus live";
    if !require_root(name)
        || !require_cmd(name, "prometheus", "prometheus")
        || !require_cmd(name, "fstrim", "util-linux")
    {
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fs = LoopFs::new(256);
    let dev = fs.kernel_name();
    let mp = fs.mp().to_string();
    // A second filesystem, probed every 3 s: its drive rests between runs (the idle story). Its
    // target is a directory in it: the mount, not the path, must label the series.
    let quiet_fs = LoopFs::new(64);
    let quiet = quiet_fs.mp().to_string();
    let quiet_dev = quiet_fs.kernel_name();
    let quiet_target = quiet_fs.mountpoint.join("pgdata");
    std::fs::create_dir(&quiet_target).unwrap();
    let quiet_target = quiet_target.to_str().unwrap().to_string();
    // Garbage for fstrim: 32 MiB written and flushed now, deleted once the daemon watches, so
    // the dashboards see a delete that is not yet trimmed, then the fstrim.
    {
        let mut f = std::fs::File::create(fs.mountpoint.join("data")).unwrap();
        let chunk = vec![0x5Au8; 1 << 20];
        for _ in 0..32 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }

    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = work.path().join("ssdwatch.yaml");
    let smartctl = fake_smartctl(&repo, work.path());
    write_config(
        &cfg,
        port,
        &work.path().join("state"),
        &mp,
        &quiet,
        &quiet_target,
        &smartctl,
    );
    let instance = format!("127.0.0.1:{port}");
    let mut daemon = start_daemon(&cfg, work.path().join("ssdwatch.log"), &instance, &mp);

    let rules = repo.join("packaging/prometheus");
    let (mut prometheus, prom) = start_prometheus_with(
        work.path(),
        &[
            rules.join("ssdwatch.rules.yml"),
            rules.join("ssdwatch.alerts.yml"),
        ],
        &instance,
        EVAL_SECONDS,
    );
    let prom_started = unix_now().floor();

    // A few scrapes before the TRIM, so the daemon and Prometheus see the counter move.
    prom.wait_for(
        "three scrapes",
        r#"count_over_time(up{job="ssdwatch"}[1m]) >= 3"#,
        Duration::from_secs(20),
    );
    std::fs::remove_file(fs.mountpoint.join("data")).unwrap();
    run("sync", &[]);
    prom.wait_for(
        "probe runs while the delete is not trimmed",
        &format!(
            r#"ssdwatch_filesystem_freed_untrimmed_bytes{{mountpoint="{mp}"}} > 16777216
               and on (mountpoint) count_over_time(ssdwatch_probe_runs_total{{mountpoint="{mp}"}}[1m]) >= 3"#
        ),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_secs(3));
    let out = run("fstrim", &["-v", &mp]);
    eprintln!("fstrim: {}", out.trim());
    prom.wait_for(
        "the discard to reach Prometheus",
        &format!(r#"ssdwatch_disk_last_discard_timestamp_seconds{{device="{dev}"}}"#),
        Duration::from_secs(20),
    );
    prom.wait_for(
        "probe runs after the discard",
        &format!(
            r#"ssdwatch_probe_context_since_discard_seconds{{mountpoint="{mp}"}} < 60
               and on (mountpoint) count_over_time(ssdwatch_probe_runs_total{{mountpoint="{mp}"}}[1m]) >= 3"#
        ),
        Duration::from_secs(30),
    );

    // The restart: the daemon now knows the TRIM from its state (source="state"), its counters
    // start again, and its probe targets are placed anew.
    daemon.stop();
    prom.wait_for(
        "a scrape that found no daemon",
        r#"up{job="ssdwatch"} == 0"#,
        Duration::from_secs(30),
    );
    let restarted_at = unix_now();
    daemon = start_daemon(&cfg, work.path().join("ssdwatch-2.log"), &instance, &mp);
    prom.wait_for(
        "the TRIM known from the state after the restart",
        &format!(
            r#"ssdwatch_disk_last_discard_timestamp_seconds{{device="{dev}", source="state"}}"#
        ),
        Duration::from_secs(30),
    );
    prom.wait_for(
        "probe runs after the restart",
        &format!(
            r#"ssdwatch_probe_runs_total{{mountpoint="{mp}"}} >= 3
               and on (mountpoint) ssdwatch_probe_last_run_timestamp_seconds{{mountpoint="{mp}"}} > {restarted_at}"#
        ),
        Duration::from_secs(30),
    );
    prom.wait_for(
        "runs after a rest on the quiet filesystem, since the restart",
        &format!(
            r#"ssdwatch_probe_context_idle_seconds{{mountpoint="{quiet}"}}
               and on (mountpoint) ssdwatch_probe_last_run_timestamp_seconds{{mountpoint="{quiet}"}} > {restarted_at} + 3"#
        ),
        Duration::from_secs(30),
    );
    prom.wait_for(
        "SMART samples of both drives",
        r#"count(ssdwatch_device_wear_used_ratio) == 2"#,
        Duration::from_secs(20),
    );
    prom.wait_for(
        "recording rules",
        r#"ssdwatch:probe_latency_seconds:p99_regression_ratio"#,
        Duration::from_secs(20),
    );
    daemon.assert_running();
    prometheus.assert_running();
    // Series that just appeared are not yet visible to subqueries (their steps are aligned to
    // whole steps): give them a few more scrapes.
    std::thread::sleep(Duration::from_secs(2 * u64::from(EVAL_SECONDS)));

    let allowed: BTreeMap<(&str, &str), &str> = MAY_BE_EMPTY
        .iter()
        .map(|(d, t, why)| ((*d, *t), *why))
        .collect();
    let mut failures = Vec::new();
    let mut evaluated = 0;
    // The dashboard's time range: the whole run, as a user would look at it.
    let end = unix_now();
    let range = format!("{}s", (end - prom_started).ceil() as u64);
    let mut degradation = None;
    // Every panel as Grafana shows it, by (dashboard, title, repeated value).
    let mut shown: BTreeMap<(String, String, String), Shown> = BTreeMap::new();
    let mut events: BTreeMap<String, Vec<(Line, f64, f64)>> = BTreeMap::new();
    for file in [
        "ssdwatch-host.json",
        "ssdwatch-degradation.json",
        "ssdwatch-fleet.json",
    ] {
        let path = repo.join("dashboards").join(file);
        let d: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut vars = variables(&prom, file, &d, prom_started, end, &mut failures);
        let var = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(
            var("instance"),
            Some(vec![instance.clone()]),
            "{file}: the $instance variable"
        );
        // Custom variables as a user sets them: idle periods from 1 s (this run's rests are
        // seconds long), the top 10.
        for (n, v) in [("idle_min", "1"), ("topn", "10")] {
            vars.push((n.to_string(), vec![v.to_string()]));
        }
        let var = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        // A panel has data when any of its queries returns something.
        let mut has_data: BTreeMap<String, bool> = BTreeMap::new();
        // Per panel (and repeated value): its series' rendered legends.
        let mut legends: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        let qs = queries(&d);
        for q in &qs {
            // A repeated panel is one panel per value of its variable, with that value alone.
            let repeats: Vec<Option<String>> = match &q.repeat {
                Some(v) => var(v)
                    .unwrap_or_else(|| panic!("{file} / {}: repeat by unknown ${v}", q.what))
                    .into_iter()
                    .map(Some)
                    .collect(),
                None => vec![None],
            };
            for value in repeats {
                let vs = match (&q.repeat, &value) {
                    (Some(r), Some(v)) => with_value(&vars, r, v),
                    _ => vars.clone(),
                };
                let e = substitute(&q.expr, &vs, &range);
                evaluated += 1;
                // As Grafana runs them: annotations and panels other than instant ones are
                // range queries over the dashboard's range.
                let r = if q.instant {
                    prom.query_at(&e, end)
                } else {
                    prom.query_range(&e, prom_started, end)
                };
                let r = match r {
                    Ok(r) => r,
                    Err(err) => {
                        failures.push(format!("{file} / {}: query error {err}\n    {e}", q.what));
                        continue;
                    }
                };
                *has_data.entry(q.what.clone()).or_default() |= !r.is_empty();
                if q.what.starts_with("annotation: ") || q.table {
                    continue;
                }
                let names = legends
                    .entry((q.what.clone(), value.clone().unwrap_or_default()))
                    .or_default();
                for s in &r {
                    names.push(render_legend(&q.legend, &s["metric"]));
                }
                // Every label that tells this query's series apart is in its legend.
                let varying: BTreeSet<&str> = r
                    .iter()
                    .flat_map(|s| s["metric"].as_object().into_iter().flatten())
                    .filter(|(k, v)| r.iter().any(|o| &o["metric"][k.as_str()] != *v))
                    .map(|(k, _)| k.as_str())
                    .collect();
                for k in varying {
                    // serial and wwn name the same drive as device.
                    if !["device", "serial", "wwn"].contains(&k)
                        && !q.legend.contains(&format!("{{{{{k}}}}}"))
                    {
                        failures.push(format!("{file} / {}: its series differ in {k}, its legend '{}' does not say it", q.what, q.legend));
                    }
                }
            }
        }
        for (what, data) in has_data {
            match (data, allowed.get(&(file, what.as_str()))) {
                (true, _) => {}
                (false, Some(why)) => eprintln!("{file} / {what}: empty, as expected here ({why})"),
                (false, None) => failures.push(format!("{file} / {what}: no data")),
            }
        }
        // Every legend names its series: no two series of a panel share a name (over a range
        // with a restart in it, a series whose labels change with the restart would show twice).
        for ((what, value), names) in legends {
            let mut seen = BTreeSet::new();
            for n in &names {
                if (n.trim().is_empty() && names.len() > 1) || !seen.insert(n) {
                    failures.push(format!(
                        "{file} / {what} {value}: two series named '{n}' ({names:?})"
                    ));
                }
            }
        }

        // Each panel as Grafana shows it, once per repeated value.
        for p in d["panels"].as_array().unwrap() {
            if p["type"] == "row" {
                continue;
            }
            let title = p["title"].as_str().unwrap().to_string();
            let repeats = match p["repeat"].as_str() {
                Some(r) => var(r).unwrap_or_default(),
                None => vec![String::new()],
            };
            for value in repeats {
                let view = View {
                    prom: &prom,
                    start: prom_started,
                    end,
                    vars: match p["repeat"].as_str() {
                        Some(r) => with_value(&vars, r, &value),
                        None => vars.clone(),
                    },
                };
                let s = match view.show(p) {
                    Ok(s) => s,
                    Err(e) => {
                        failures.push(format!("{file} / {title}: {e}"));
                        continue;
                    }
                };
                let empty_ok = allowed.contains_key(&(file, title.as_str()));
                match &s {
                    // A table's queries merge into one row per label set: no row lacks one of
                    // the panel's value columns.
                    Shown::Table(rows) => {
                        let cols = value_columns(p);
                        let may_lack = |c: &str| {
                            COLUMN_MAY_BE_ABSENT
                                .iter()
                                .any(|(f, t, col, _)| *f == file && *t == title && *col == c)
                        };
                        for row in rows {
                            let missing: Vec<&String> = cols
                                .iter()
                                .filter(|c| !row.contains_key(*c) && !may_lack(c))
                                .collect();
                            if !missing.is_empty() {
                                failures.push(format!("{file} / {title}: a row without {missing:?} (the merge did not join its queries' rows): {row:?}"));
                            }
                        }
                    }
                    // A chart of the probed target shows points.
                    Shown::Xy(fields) => {
                        let points: usize = fields.values().map(Vec::len).sum();
                        if value == mp && points == 0 && !empty_ok {
                            failures.push(format!(
                                "{file} / {title} ({value}): no points after the join ({:?})",
                                fields.keys().collect::<Vec<_>>()
                            ));
                        }
                    }
                    Shown::Series(_) => {}
                }
                shown.insert((file.to_string(), title.clone(), value), s);
            }
        }
        let view = View {
            prom: &prom,
            start: prom_started,
            end,
            vars: vars.clone(),
        };
        for a in d["annotations"]["list"].as_array().unwrap() {
            if a["expr"].is_string() {
                let name = a["name"].as_str().unwrap().to_string();
                match view.events(a) {
                    Ok(e) => {
                        events.insert(name, e);
                    }
                    Err(e) => failures.push(format!("{file} / annotation {name}: {e}")),
                }
            }
        }
        if file == "ssdwatch-degradation.json" {
            degradation = Some((qs, vars.clone(), range.clone()));
        }
    }
    eprintln!(
        "{evaluated} dashboard queries evaluated, {} panels shown",
        shown.len()
    );
    assert!(evaluated > 60, "only {evaluated} queries found");
    assert!(
        failures.is_empty(),
        "dashboard queries failed:\n{}",
        failures.join("\n")
    );
    let (qs, vars, range) = degradation.expect("the degradation dashboard");
    let story = Story {
        mp: &mp,
        quiet: &quiet,
        dev: &dev,
        quiet_dev: &quiet_dev,
        start: prom_started,
        end,
        restarted_at,
    };
    the_host_dashboard_tells_the_story(&shown, &story);
    the_time_series_have_the_storys_shape(&shown, &story, discard_time(&prom, &dev));
    the_annotations_mark_the_events(&events, &story, &prom);
    the_degradation_dashboard_tells_the_story(&prom, &qs, &vars, &range, &story, &shown);

    // The alert rules are loaded and evaluated without errors.
    let (_, rules_json) = get(&format!("{}/api/v1/rules", prom.base)).expect("rules API");
    let j: Json = serde_json::from_str(&rules_json).unwrap();
    let groups = j["data"]["groups"].as_array().expect("rule groups");
    assert!(
        groups.len() >= 8,
        "only {} rule groups loaded",
        groups.len()
    );
    for g in groups {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(
                r["health"], "ok",
                "rule {} unhealthy: {}",
                r["name"], r["lastError"]
            );
        }
    }
}

/// A table panel's value columns as it shows them: `Value #<refId>` per query (`Value` for a
/// single query), renamed as its organize step says, less the hidden ones.
fn value_columns(panel: &Json) -> Vec<String> {
    let targets = panel["targets"].as_array().unwrap();
    let organize = (panel["transformations"].as_array().into_iter().flatten())
        .find(|t| t["id"] == "organize")
        .map(|t| t["options"].clone())
        .unwrap_or_default();
    targets
        .iter()
        .map(|t| match targets.len() {
            1 => "Value".to_string(),
            _ => format!("Value #{}", t["refId"].as_str().unwrap()),
        })
        .filter(|c| organize["excludeByName"][c.as_str()] != true)
        .map(|c| {
            organize["renameByName"][c.as_str()]
                .as_str()
                .map(str::to_string)
                .unwrap_or(c)
        })
        .collect()
}

/// (time, value) of each point of the one series of `r` whose labels match every pair.
fn points(r: &[Json], want: &[(&str, &str)]) -> Vec<(f64, f64)> {
    r.iter()
        .filter(|s| want.iter().all(|(k, v)| s["metric"][*k] == *v))
        .flat_map(|s| s["values"].as_array().cloned().unwrap_or_default())
        .map(|p| {
            (
                p[0].as_f64().unwrap_or(f64::NAN),
                p[1].as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
            )
        })
        .collect()
}

const LAST_LATENCY: &str = "ssdwatch_probe_last_latency_seconds";

/// What the live run did: `mp` probed every second, deleted from and trimmed; `quiet` probed
/// every 3 s; `dev` and `quiet_dev` their drives; Prometheus up since `start`, the dashboards
/// looked at `end`; the daemon restarted at `restarted_at`, after the TRIM.
struct Story<'a> {
    mp: &'a str,
    quiet: &'a str,
    dev: &'a str,
    quiet_dev: &'a str,
    start: f64,
    end: f64,
    restarted_at: f64,
}

/// The panel shown for (dashboard, title, repeated value).
fn panel<'a>(
    shown: &'a BTreeMap<(String, String, String), Shown>,
    file: &str,
    title: &str,
    value: &str,
) -> &'a Shown {
    shown
        .get(&(file.to_string(), title.to_string(), value.to_string()))
        .unwrap_or_else(|| panic!("{file} / {title} ({value}) was not shown"))
}

/// The one line of a time series panel named `name`.
fn line<'a>(
    shown: &'a BTreeMap<(String, String, String), Shown>,
    file: &str,
    title: &str,
    name: &str,
) -> &'a Line {
    let Shown::Series(lines) = panel(shown, file, title, "") else {
        panic!("{title}: a time series");
    };
    let named: Vec<&Line> = lines.iter().filter(|l| l.name == name).collect();
    match named.as_slice() {
        [one] => one,
        _ => panic!(
            "{file} / {title}: {} lines named '{name}' in {:?}",
            named.len(),
            lines.iter().map(|l| &l.name).collect::<Vec<_>>()
        ),
    }
}

/// The time series panels against the story, each by the line the story is about: the delete
/// lowers the used space, the fstrim is a burst of discards after it, the drive's writes grow,
/// the quiet drive rests and works in turn, the time since the TRIM grows after it, runs go on
/// across the restart.
fn the_time_series_have_the_storys_shape(
    shown: &BTreeMap<(String, String, String), Shown>,
    story: &Story,
    d: f64,
) {
    let (host, deg) = ("ssdwatch-host.json", "ssdwatch-degradation.json");
    let values = |l: &Line| l.points.iter().map(|p| p.1).collect::<Vec<f64>>();
    let used = values(line(shown, host, "Used space", story.mp));
    assert!(
        used[0] > used[used.len() - 1] + 0.05,
        "Used space falls with the delete of 32 MiB: {used:?}"
    );
    let rate = &line(shown, host, "Discard rate", story.dev).points;
    let peak = rate
        .iter()
        .copied()
        .fold((0.0, 0.0), |a, p| if p.1 > a.1 { p } else { a });
    assert!(
        peak.1 > 0.0 && peak.0 >= d - 1.0,
        "Discard rate: a burst with the fstrim at {d}: {rate:?}"
    );
    let written = values(line(
        shown,
        host,
        "Bytes written per day (block layer)",
        story.dev,
    ));
    assert!(
        written[written.len() - 1] > written[0],
        "Bytes written per day grows with the probes' writes: {written:?}"
    );
    let idle = values(line(shown, deg, "Drive idle time", story.quiet_dev));
    assert!(
        idle.contains(&0.0) && idle.iter().any(|v| *v >= 1.0),
        "Drive idle time of the quiet drive: busy (0) and resting in turn: {idle:?}"
    );
    let since = &line(
        shown,
        deg,
        "Probe context at the last run",
        &format!("{} since discard", story.mp),
    )
    .points;
    let after: Vec<f64> = since.iter().filter(|p| p.0 > d).map(|p| p.1).collect();
    assert!(
        after.len() > 1 && after[after.len() - 1] > after[0],
        "the time since the TRIM grows after it: {since:?}"
    );
    let runs = &line(
        shown,
        deg,
        "Probe runs and skips",
        &format!("{} runs", story.mp),
    )
    .points;
    assert!(
        runs.iter().any(|p| p.0 > story.restarted_at && p.1 > 0.0),
        "runs go on after the restart: {runs:?}"
    );
}

/// The host dashboard over a run with a restart: one "time since last discard" tile per drive
/// (not one per way the time was known), reading the TRIM's age; its probe targets table lists
/// the two mounts, never a configured path.
fn the_host_dashboard_tells_the_story(
    shown: &BTreeMap<(String, String, String), Shown>,
    story: &Story,
) {
    let host = "ssdwatch-host.json";
    let Shown::Series(tiles) = panel(shown, host, "Time since last discard", "") else {
        panic!("a stat panel");
    };
    let names: Vec<&str> = tiles.iter().map(|l| l.name.as_str()).collect();
    let of_dev: Vec<&Line> = tiles.iter().filter(|l| l.name == story.dev).collect();
    assert_eq!(of_dev.len(), 1, "one tile for {}: {names:?}", story.dev);
    let (at, age) = *of_dev[0].points.last().unwrap();
    assert!(
        at > story.restarted_at,
        "the tile is current after the restart: {at}"
    );
    assert!(age >= 0.0 && age < at - story.start, "{age}");
    let Shown::Table(rows) = panel(shown, host, "Probe targets", "") else {
        panic!("a table");
    };
    let mounts: BTreeSet<&str> = rows.iter().map(|r| r["mountpoint"].as_str()).collect();
    assert_eq!(
        mounts,
        BTreeSet::from([story.mp, story.quiet]),
        "one row per target, by its mount: {rows:?}"
    );
    for r in rows {
        assert_eq!(r["failing"], "0", "{r:?}");
        let since: f64 = r["since last run (s)"].parse().unwrap();
        assert!(since >= 0.0, "{r:?}");
    }
    let Shown::Series(lines) = panel(shown, host, "Probe latency per run", "") else {
        panic!("a time series");
    };
    assert!(
        lines.iter().any(|l| l.labels["mountpoint"] == story.quiet),
        "{:?}",
        lines.iter().map(|l| &l.name).collect::<Vec<_>>()
    );
}

/// The degradation dashboard's annotations: the fstrim is one event on its drive (not one
/// before and one after the restart); idle periods mark only the probed targets' drives.
fn the_annotations_mark_the_events(
    events: &BTreeMap<String, Vec<(Line, f64, f64)>>,
    story: &Story,
    prom: &Prom,
) {
    let d = discard_time(prom, story.dev);
    let trims: Vec<&(Line, f64, f64)> = events["TRIM events"]
        .iter()
        .filter(|(l, _, _)| l.labels["device"] == story.dev)
        .collect();
    assert_eq!(
        trims.len(),
        1,
        "one TRIM event for one fstrim across the restart: {:?}",
        trims.iter().map(|(_, a, b)| (a, b)).collect::<Vec<_>>()
    );
    assert!(
        trims[0].1 >= d - 1.0,
        "the TRIM event starts with the discard at {d}: {:?}",
        trims[0].1
    );
    let idle = &events["Idle periods"];
    let devices: BTreeSet<&str> = idle
        .iter()
        .filter_map(|(l, _, _)| l.labels["device"].as_str())
        .collect();
    assert!(
        devices.contains(story.quiet_dev),
        "the quiet drive's rests: {devices:?}"
    );
    assert!(
        devices.is_subset(&BTreeSet::from([story.dev, story.quiet_dev])),
        "only the probed drives: {devices:?}"
    );
}

/// The drive's latest discard as the daemon knows it, before or after its restart.
fn discard_time(prom: &Prom, dev: &str) -> f64 {
    let r = prom
        .query(&format!(
            r#"max(ssdwatch_disk_last_discard_timestamp_seconds{{device="{dev}", source=~"observed|state"}})"#
        ))
        .expect("discard time");
    r.first().map(val).expect("the fstrim is known")
}

/// `t` down to a whole step of the rule evaluation interval: where a subquery's steps fall.
fn on_step(t: f64) -> f64 {
    (t / f64::from(EVAL_SECONDS)).floor() * f64::from(EVAL_SECONDS)
}

/// The degradation dashboard's pictures against what happened on the loop filesystems: four
/// probe kinds ran all along on `mp`, 32 MiB were deleted, then fstrim ran, then the daemon was
/// restarted; `quiet` rested between its runs.
fn the_degradation_dashboard_tells_the_story(
    prom: &Prom,
    qs: &[Query],
    vars: &[(String, Vec<String>)],
    range: &str,
    story: &Story,
    shown: &BTreeMap<(String, String, String), Shown>,
) {
    let Story {
        mp,
        quiet,
        dev,
        start,
        end,
        ..
    } = *story;
    let deg = "ssdwatch-degradation.json";
    let kinds = BTreeSet::from([
        "rand_read_4k".to_string(),
        "rand_write_4k".to_string(),
        "seq_write".to_string(),
        "sync_write_4k".to_string(),
    ]);
    let var = |n: &str| {
        vars.iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        var("probe").into_iter().collect::<BTreeSet<_>>(),
        kinds,
        "$probe"
    );
    // The two mounts, and nothing else: not the quiet target's configured path (a phantom
    // mount with a row of empty panels).
    assert_eq!(
        var("mountpoint").into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([mp.to_string(), quiet.to_string()]),
        "$mountpoint"
    );
    // The repeated XY panels are looked at for this target alone.
    let one = with_value(vars, "mountpoint", mp);
    let instant = |title: &str, legend: &str| -> Vec<Json> {
        let e = substitute(&target(qs, title, legend).expr, &one, range);
        prom.query_at(&e, end)
            .unwrap_or_else(|err| panic!("{title}: {err}\n{e}"))
    };
    let by_probe = |r: &[Json]| -> BTreeMap<String, f64> {
        r.iter()
            .filter(|s| s["metric"]["mountpoint"] == mp)
            .map(|s| {
                (
                    s["metric"]["probe"].as_str().unwrap_or("").to_string(),
                    val(s),
                )
            })
            .collect()
    };

    // The latency panels show every probe kind, each its own series.
    for (title, legend) in [
        ("Probe latency per run with fill ratio", "p50 (run)"),
        ("Probe latency per run with fill ratio", "max (run)"),
        ("Latency distribution (histogram)", "p50"),
        ("Latency over the time range (histogram)", "p99"),
    ] {
        let got = by_probe(&instant(title, legend));
        assert_eq!(
            got.keys().cloned().collect::<BTreeSet<_>>(),
            kinds,
            "{title} {legend}: {got:?}"
        );
        assert!(
            got.values().all(|v| *v > 0.0 && *v < 10.0),
            "{title} {legend}: {got:?}"
        );
    }

    // A p99 only where the window holds 100 I/Os of the kind, as a run's own p99: at the
    // dashboard's 5 s windows (a few runs of 8 writes or 16 reads) and at 60 s windows, the
    // panel's p99 is there for exactly the kinds with 100 I/Os in the window, and never below
    // the p50. Both cases must occur, or the check proves nothing.
    let dist = "Latency distribution (histogram)";
    let at_window = |legend: &str, window: &str| -> BTreeMap<String, f64> {
        let e = substitute(&target(qs, dist, legend).expr, &one, range)
            .replace("[5s]", &format!("[{window}]"));
        by_probe(
            &prom
                .query_at(&e, end)
                .unwrap_or_else(|err| panic!("{dist} {legend}: {err}\n{e}")),
        )
    };
    let (mut with_p99, mut without) = (0, 0);
    for window in ["5s", "60s"] {
        let e = format!(
            r#"sum by (probe, mountpoint) (increase(ssdwatch_probe_latency_seconds_count{{mountpoint="{mp}"}}[{window}]))"#
        );
        let ios = by_probe(
            &prom
                .query_at(&e, end)
                .unwrap_or_else(|err| panic!("{err}\n{e}")),
        );
        let (p50, p99) = (at_window("p50", window), at_window("p99", window));
        for (k, n) in &ios {
            match p99.get(k) {
                Some(v) => {
                    with_p99 += 1;
                    assert!(*n >= 100.0, "{dist}: {k} p99 {v} of {n} I/Os in {window}");
                    assert!(
                        p50.get(k).is_some_and(|m| v >= m),
                        "{dist}: {k} p99 {v} below p50 {p50:?}"
                    );
                }
                None => {
                    without += usize::from(*n > 0.0);
                    assert!(
                        *n < 100.0,
                        "{dist}: {k} has no p99 with {n} I/Os in {window}"
                    );
                }
            }
        }
        assert!(
            p99.keys().all(|k| ios.contains_key(k)),
            "{dist}: {p99:?} {ios:?}"
        );
    }
    assert!(
        with_p99 > 0 && without > 0,
        "{dist}: windows with a p99 ({with_p99}) and without ({without})"
    );

    // The TRIM, looked at after the restart: the daemon knows it from its state only.
    assert_eq!(
        prom.query(&format!(
            r#"ssdwatch_disk_last_discard_timestamp_seconds{{device="{dev}", source="observed"}}"#
        ))
        .map(|r| r.len()),
        Ok(0),
        "after the restart the TRIM is known from the state"
    );
    let d = discard_time(prom, dev);
    // Every step of a subquery, as the panels' subqueries step (whole evaluation intervals).
    let step = f64::from(EVAL_SECONDS);
    let series = |e: &str| {
        prom.query_range_every(e, on_step(start) + step, end, step)
            .unwrap_or_else(|err| panic!("{e}: {err}"))
    };
    // A per-run gauge of one target, at every step of the run.
    let of = |metric: &str, target: &str, more: &str| {
        series(&format!(r#"{metric}{{mountpoint="{target}"{more}}}"#))
    };
    // The recovery panels compare the run before the TRIM with the run after it, as the runs'
    // own gauges say at the steps the panels see.
    let runs = points(
        &of("ssdwatch_probe_last_run_timestamp_seconds", mp, ""),
        &[],
    );
    let p50s = of(LAST_LATENCY, mp, r#", quantile="0.5""#);
    let before = instant("Latest TRIM: last run before, first run after", "before");
    let after = instant("Latest TRIM: last run before, first run after", "after");
    let ratio = instant("Latency after the latest TRIM / before it", "{{probe}}");
    let (before, after, ratio) = (by_probe(&before), by_probe(&after), by_probe(&ratio));
    for k in &kinds {
        let p50 = points(&p50s, &[("probe", k)]);
        let at = |t: f64| p50.iter().find(|(pt, _)| *pt == t).map(|(_, v)| *v);
        // (run start, its p50) at every step the run was shown.
        let shown: Vec<(f64, f64)> = runs
            .iter()
            .filter_map(|(t, r)| Some((*r, at(*t)?)))
            .collect();
        let want_before = shown
            .iter()
            .filter(|(r, _)| *r < d)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let want_after = shown
            .iter()
            .filter(|(r, _)| *r >= d)
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let (Some(wb), Some(wa)) = (want_before, want_after) else {
            panic!("{k}: no runs around the discard at {d}: {shown:?}");
        };
        let b = before.get(k).copied().unwrap_or(f64::NAN);
        assert!(
            (b - wb.1).abs() <= 1e-6 * wb.1,
            "{k}: last run before the TRIM (run at {}): {b}, want {}",
            wb.0,
            wb.1
        );
        // Decoded from a key (see the generator): exact to the key's float rounding, which is
        // about 1e-9 of the value (one part in 2^53 of the key, not of the value).
        let a = after.get(k).copied().unwrap_or(f64::NAN);
        assert!(
            (a - wa.1).abs() <= 1e-6 * wa.1,
            "{k}: first run after the TRIM (run at {}): {a}, want {}",
            wa.0,
            wa.1
        );
        let r = ratio.get(k).copied().unwrap_or(f64::NAN);
        assert!(
            (r - wa.1 / wb.1).abs() <= 1e-6 * r.abs(),
            "{k}: ratio {r}, want {}",
            wa.1 / wb.1
        );
    }

    // Idle: true whenever it is looked at, not only at a moment between two given scrapes:
    // asked at the end and at three earlier moments a second apart (each with the range from
    // the start), the table pairs the run after the latest long rest with the run before it.
    for back in [0.0, 1.0, 2.0, 3.0] {
        idle_table_is_true_at(prom, qs, vars, story, end - back);
    }

    // The fill view as Grafana joins it: runs while the 32 MiB were deleted and not trimmed
    // are their own series, and end with the TRIM; runs after it are "trimmed". (An inner join
    // of the two, which never have a run at the same time, showed nothing at all.)
    let xy = "Run p50 vs fill ratio: trimmed vs deleted, not trimmed";
    let Shown::Xy(fields) = panel(shown, deg, xy, mp) else {
        panic!("{xy}: an XY chart");
    };
    for k in &kinds {
        let u = &fields[&format!("{k} p50, deleted not trimmed")];
        let t = &fields[&format!("{k} p50, trimmed")];
        assert!(
            !u.is_empty(),
            "{xy}: no {k} runs while deleted and not trimmed"
        );
        // The trimmed curve is not a mixed one: no trimmed run among the untrimmed ones (from
        // the first to the last run while the delete was not trimmed).
        let (u0, u1) = (u.iter().map(|(at, _, _)| *at))
            .fold((f64::MAX, f64::MIN), |(lo, hi), at| {
                (lo.min(at), hi.max(at))
            });
        assert!(
            t.iter().all(|(at, _, _)| *at < u0 || *at > u1),
            "{xy}: {k} 'trimmed' runs between {u0} and {u1}, while deleted and not trimmed: {t:?}"
        );
        // Once a run after the TRIM is "trimmed", no later one is "deleted not trimmed".
        let first_trimmed = (t.iter().map(|(at, _, _)| *at))
            .filter(|at| *at > d)
            .fold(f64::MAX, f64::min);
        assert!(
            u.iter().all(|(at, _, _)| *at < first_trimmed),
            "{xy}: {k} 'deleted not trimmed' after the first trimmed run after the TRIM at {d}: {u:?}"
        );
        assert!(
            u.iter()
                .chain(t)
                .all(|(_, x, y)| (0.0..1.0).contains(x) && *y > 0.0),
            "{xy}: {k} fill ratios and latencies: {u:?} {t:?}"
        );
        let last_untrimmed = u.iter().map(|(at, _, _)| *at).fold(f64::MIN, f64::max);
        assert!(
            t.iter().any(|(at, _, _)| *at > last_untrimmed && *at > d),
            "{xy}: no {k} 'trimmed' runs after the TRIM at {d} (last untrimmed {last_untrimmed}): {t:?}"
        );
    }
    // Idle time before the run: on the drive probed every second, busy in most of the
    // collector's intervals, a run after a busy interval is a point at 0 s, not a missing one.
    let xy = "Run p50 vs idle time before the run";
    let Shown::Xy(fields) = panel(shown, deg, xy, mp) else {
        panic!("{xy}: an XY chart");
    };
    let pts: Vec<&(f64, f64, f64)> = fields.values().flatten().collect();
    assert!(
        pts.iter().any(|(_, x, _)| *x == 0.0),
        "{xy} ({mp}): no run after a busy interval at 0 s idle: {pts:?}"
    );
    let Shown::Xy(fields) = panel(shown, deg, xy, quiet) else {
        panic!("{xy}: an XY chart");
    };
    assert!(
        fields.values().flatten().any(|(_, x, _)| *x > 1.0),
        "{xy} ({quiet}): the rests between runs: {fields:?}"
    );
    for xy in [
        "Run p50 vs bytes written since TRIM",
        "Run p50 vs time since TRIM",
    ] {
        let Shown::Xy(fields) = panel(shown, deg, xy, mp) else {
            panic!("{xy}: an XY chart");
        };
        for k in &kinds {
            let p = &fields[&format!("{k} p50")];
            assert!(
                p.iter().any(|(at, _, _)| *at > story.restarted_at),
                "{xy}: {k}: runs after the restart, with the TRIM known from the state: {p:?}"
            );
        }
    }
}

/// The idle-recovery table looked at `at` (its range from the run's start): the run after the
/// latest rest at least half as long as the longest one a run saw, with that rest's length, and
/// the run shown right before it, as the runs' own gauges say at the steps the panel sees.
fn idle_table_is_true_at(
    prom: &Prom,
    qs: &[Query],
    vars: &[(String, Vec<String>)],
    story: &Story,
    at: f64,
) {
    let Story { quiet, start, .. } = *story;
    let idle_t = "Idle recovery: last run before a long rest, the run after";
    let range = format!("{}s", (at - start).ceil() as u64);
    let quiet_kinds = ["rand_read_4k", "sync_write_4k"];
    let on_quiet = with_value(vars, "mountpoint", quiet);
    let quiet_table = |legend: &str| -> BTreeMap<String, f64> {
        let e = substitute(&target(qs, idle_t, legend).expr, &on_quiet, &range);
        prom.query_at(&e, at)
            .unwrap_or_else(|err| panic!("{idle_t}: {err}\n{e}"))
            .iter()
            .filter(|s| s["metric"]["mountpoint"] == quiet)
            .map(|s| {
                (
                    s["metric"]["probe"].as_str().unwrap_or("").to_string(),
                    val(s),
                )
            })
            .collect()
    };
    let rest = quiet_table("idle before");
    let (ib, ia) = (quiet_table("before"), quiet_table("after"));
    let step = f64::from(EVAL_SECONDS);
    let of = |metric: &str, more: &str| {
        let e = format!(r#"{metric}{{mountpoint="{quiet}"{more}}}"#);
        prom.query_range_every(&e, on_step(start) + step, at, step)
            .unwrap_or_else(|err| panic!("{e}: {err}"))
    };
    let runs = points(&of("ssdwatch_probe_last_run_timestamp_seconds", ""), &[]);
    let idles = points(&of("ssdwatch_probe_context_idle_seconds", ""), &[]);
    let p50s = of(LAST_LATENCY, r#", quantile="0.5""#);
    // The longest rest a run saw in the range's length before each step.
    let e = format!(
        r#"max_over_time(ssdwatch_probe_context_idle_seconds{{mountpoint="{quiet}"}}[{range}])"#
    );
    let longest = points(
        &prom
            .query_range_every(&e, on_step(start) + step, at, step)
            .unwrap_or_else(|err| panic!("{e}: {err}")),
        &[],
    );
    let longest_at = |t: f64| longest.iter().find(|(lt, _)| *lt == t).map(|(_, v)| *v);
    // The run after the rest: the latest shown at a step with a rest of at least half the
    // longest before it (a rest: no run follows none).
    let idle_at = |t: f64| idles.iter().find(|(it, _)| *it == t).map(|(_, v)| *v);
    let after_run = runs
        .iter()
        .filter(
            |(t, _)| matches!((idle_at(*t), longest_at(*t)), (Some(i), Some(l)) if l > 0.0 && i >= 0.5 * l),
        )
        .map(|(_, r)| *r)
        .fold(f64::MIN, f64::max);
    assert!(
        after_run > start,
        "{idle_t} at {at}: no run after a rest: {idles:?}"
    );
    for k in quiet_kinds {
        let p50 = points(&p50s, &[("probe", k)]);
        let p50_at = |t: f64| p50.iter().find(|(pt, _)| *pt == t).map(|(_, v)| *v);
        let last_shown = |keep: &dyn Fn(f64) -> bool| {
            runs.iter()
                .filter(|(t, r)| keep(*r) && p50_at(*t).is_some())
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(t, _)| (p50_at(*t).unwrap(), idle_at(*t)))
        };
        let want_after = last_shown(&|r| r == after_run).expect("the run after the rest");
        let want_before = last_shown(&|r| r < after_run).map(|(p, _)| p);
        eprintln!(
            "{idle_t} at {at:.1}: {k}: rest {:?} s, before {:?}, after {:?}",
            rest.get(k),
            ib.get(k),
            ia.get(k)
        );
        assert_eq!(
            ia.get(k).copied(),
            Some(want_after.0),
            "{idle_t} at {at}: {k}: the run after the rest"
        );
        assert_eq!(
            rest.get(k).copied(),
            want_after.1,
            "{idle_t} at {at}: {k}: the rest before it"
        );
        assert_eq!(
            ib.get(k).copied(),
            want_before,
            "{idle_t} at {at}: {k}: the run before the rest"
        );
    }
}

/// The generated layers host (benches/gen_layers_host.py) at its test size: 2 thin pools with
/// 2 thin volumes each (ext4 on each), 2 btrfs (the first with every byte in chunks), 2 ZFS
/// pools (the second DEGRADED) with 2 datasets each, 2 md arrays (md0 degraded, rebuilding).
fn gen_layers_host(dir: &Path, pool0_used: f64, layers_only: bool) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args: Vec<String> = [
        "--pools",
        "2",
        "--volumes",
        "4",
        "--btrfs",
        "2",
        "--zpools",
        "2",
        "--datasets",
        "4",
        "--md",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--pool0-used".into());
    args.push(format!("{pool0_used}"));
    if layers_only {
        args.push("--layers-only".into());
    }
    let st = Command::new("python3")
        .arg(repo.join("benches/gen_layers_host.py"))
        .arg(dir)
        .args(&args)
        .status()
        .expect("python3");
    assert!(st.success(), "gen_layers_host.py failed");
}

/// (time, value) of the one series of a range query whose labels match.
fn range_of(prom: &Prom, expr: &str, from: f64, want: &[(&str, &str)]) -> Vec<(f64, f64)> {
    let r = prom
        .query_range(expr, from, unix_now())
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    points(&r, want)
}

/// The instant value of the one series of a query whose labels match.
fn value_of(prom: &Prom, expr: &str, want: &[(&str, &str)]) -> Option<f64> {
    let r = prom.query(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    r.iter()
        .find(|s| want.iter().all(|(k, v)| s["metric"][*k] == *v))
        .map(val)
}

/// The host dashboard's "Layers below filesystems" row on a fixture host with every kind of
/// layer, scraped by a real Prometheus while the first thin pool fills from 50 % to 95 % under
/// the ext4 on one of its volumes: each panel's own query (its variables substituted) has data,
/// the effective free space falls while statvfs stays flat, the limiting layer becomes the
/// pool, the pool's data fill rises and its metadata stays flat; the ZFS, btrfs and md panels
/// show the host's fixed story. The reports (the daemon's /report from its history, and
/// `report --prometheus` from this Prometheus) show the same stack and say the pool runs out
/// first.
#[test]
fn the_layers_row_tells_a_thin_pool_filling_under_an_ext4() {
    let name = "layers row";
    if !require_cmd(name, "prometheus", "prometheus") || !require_cmd(name, "python3", "python3") {
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let host = work.path().join("host");
    gen_layers_host(&host, 0.5, false);
    let port = free_port();
    let fake = repo.join("tests/fake-layers");
    let cfg = work.path().join("ssdwatch.yaml");
    std::fs::write(
        &cfg,
        format!(
            "web:\n  listen_address: \"127.0.0.1:{port}\"\nstate_dir: {state}\nhistory:\n  raw_interval: 1s\n  flush_interval: 1s\ncollectors:\n  smart: {{enabled: false}}\n  probe: {{enabled: false}}\n  filesystem: {{interval: 1s}}\n  layers:\n    interval: 1s\n    dmsetup_path: {f}/dmsetup\n    zpool_path: {f}/zpool\n    zfs_path: {f}/zfs\n",
            state = work.path().join("state").display(),
            f = fake.display(),
        ),
    )
    .unwrap();
    let mut daemon = Proc::spawn(
        "ssdwatch",
        Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
            .env("FAKE_LAYERS", host.join("layers"))
            .args(["--config", cfg.to_str().unwrap(), "--log.level", "warn"])
            .args(fixture_host_flags(&host))
            .arg("serve"),
        work.path().join("ssdwatch.log"),
    );
    let instance = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        daemon.assert_running();
        if let Some((200, m)) = get(&format!("http://{instance}/metrics"))
            && m.contains("ssdwatch_thin_pool_data_size_bytes{")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ssdwatch did not read the layers"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let pport = free_port();
    let rules = repo.join("packaging/prometheus");
    let pcfg = work.path().join("prometheus.yml");
    std::fs::write(
        &pcfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n  - {}\n\
             scrape_configs:\n  - job_name: ssdwatch\n    static_configs:\n      - targets: ['{instance}']\n",
            rules.join("ssdwatch.rules.yml").display(),
            rules.join("ssdwatch.alerts.yml").display(),
        ),
    )
    .unwrap();
    let mut prometheus = Proc::spawn(
        "prometheus",
        Command::new("prometheus").args([
            &format!("--config.file={}", pcfg.display()),
            &format!("--storage.tsdb.path={}", work.path().join("tsdb").display()),
            &format!("--web.listen-address=127.0.0.1:{pport}"),
            "--log.level=warn",
        ]),
        work.path().join("prometheus.log"),
    );
    let prom = Prom {
        base: format!("http://127.0.0.1:{pport}"),
    };
    let started = unix_now().floor();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(get(&format!("{}/-/ready", prom.base)), Some((200, _))) {
        prometheus.assert_running();
        assert!(Instant::now() < deadline, "prometheus did not become ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    prom.wait_for(
        "three scrapes with the thin pools",
        r#"count_over_time(ssdwatch_thin_pool_data_size_bytes{pool="vg0-pool-tpool"}[1m]) >= 3"#,
        Duration::from_secs(60),
    );
    // The first pool fills under its volumes' ext4 (whose statvfs doesn't change).
    for step in 1..=9 {
        gen_layers_host(&host, 0.5 + 0.05 * step as f64, true);
        std::thread::sleep(Duration::from_millis(1500));
    }
    prom.wait_for(
        "the pool to limit its volumes' mounts",
        r#"ssdwatch_filesystem_limiting_layer_info{mountpoint="/srv/thin/vg0-db000",layer="thin_pool",name="vg0-pool-tpool"}"#,
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_secs(3));
    daemon.assert_running();
    prometheus.assert_running();

    let d: Json = serde_json::from_str(
        &std::fs::read_to_string(repo.join("dashboards/ssdwatch-host.json")).unwrap(),
    )
    .unwrap();
    let mut failures = Vec::new();
    let vars = variables(
        &prom,
        "ssdwatch-host.json",
        &d,
        started,
        unix_now(),
        &mut failures,
    );
    assert!(failures.is_empty(), "{failures:?}");
    // The row's panels: those after its row header, up to the next.
    let mut in_row = false;
    let mut titles = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            in_row = p["title"] == "Layers below filesystems";
        } else if in_row {
            titles.insert(p["title"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(titles.len(), 11, "{titles:?}");
    let qs: Vec<Query> = queries(&d)
        .into_iter()
        .filter(|q| titles.contains(&q.what))
        .collect();
    let range = format!("{}s", (unix_now() - started).ceil() as u64);
    let e = |q: &Query| substitute(&q.expr, &vars, &range);
    for q in &qs {
        let r = prom
            .query(&e(q))
            .unwrap_or_else(|err| panic!("{}: {err}", q.what));
        assert!(!r.is_empty(), "{}: no data\n    {}", q.what, e(q));
    }
    let vol = [("mountpoint", "/srv/thin/vg0-db000")];
    let eff = range_of(
        &prom,
        &e(target(&qs, "Effective vs statvfs free space", "effective")),
        started,
        &vol,
    );
    let df = range_of(
        &prom,
        &e(target(&qs, "Effective vs statvfs free space", "statvfs")),
        started,
        &vol,
    );
    let (e0, e1) = (eff[0].1, eff[eff.len() - 1].1);
    assert!(
        e1 < e0 * 0.5,
        "effective space falls as the pool fills: {eff:?}"
    );
    assert!(df.iter().all(|p| p.1 == df[0].1), "statvfs is flat: {df:?}");
    assert!(
        e1 < df[df.len() - 1].1,
        "effective under statvfs at the end"
    );
    // The pool's free space: 5 % of 1 TiB.
    let limiting = e(target(&qs, "Limiting layer", ""));
    let pool_free = value_of(
        &prom,
        &limiting,
        &[
            ("mountpoint", "/srv/thin/vg0-db000"),
            ("layer", "thin_pool"),
            ("name", "vg0-pool-tpool"),
        ],
    )
    .expect("the pool limits the volume's mount");
    assert!(
        (pool_free / (1u64 << 40) as f64 - 0.05).abs() < 0.001,
        "{pool_free}"
    );
    assert_eq!(
        value_of(
            &prom,
            &limiting,
            &[("mountpoint", "/srv/btrfs1"), ("layer", "btrfs")]
        )
        .map(|v| v > 0.0),
        Some(true)
    );
    assert!(
        value_of(
            &prom,
            &limiting,
            &[("mountpoint", "/tank0/db00"), ("layer", "zfs_dataset")]
        )
        .is_some()
    );
    let fill = e(target(&qs, "Thin pool data and metadata fill", "data"));
    let data = range_of(&prom, &fill, started, &[("pool", "vg0-pool-tpool")]);
    assert!((data[0].1 - 0.5).abs() < 0.01, "{data:?}");
    assert!((data[data.len() - 1].1 - 0.95).abs() < 0.01, "{data:?}");
    assert!(
        data.windows(2).all(|w| w[1].1 >= w[0].1),
        "rising: {data:?}"
    );
    let meta = e(target(&qs, "Thin pool data and metadata fill", "metadata"));
    let meta = range_of(&prom, &meta, started, &[("pool", "vg0-pool-tpool")]);
    assert!(
        meta.iter().all(|p| p.1 == meta[0].1),
        "metadata flat: {meta:?}"
    );
    let cap = e(target(&qs, "ZFS pool capacity", ""));
    assert_eq!(value_of(&prom, &cap, &[("pool", "tank0")]), Some(0.5));
    assert_eq!(value_of(&prom, &cap, &[("pool", "tank1")]), Some(0.62));
    let health = e(target(&qs, "ZFS pool health", ""));
    assert!(value_of(&prom, &health, &[("pool", "tank1"), ("state", "DEGRADED")]).is_some());
    assert!(value_of(&prom, &health, &[("pool", "tank0"), ("state", "ONLINE")]).is_some());
    let full = "6f1c2a9e-0b6a-4c1e-8d55-a3e1f2b7c900";
    let roomy = "6f1c2a9e-0b6a-4c1e-8d55-a3e1f2b7c901";
    let grow = e(target(&qs, "btrfs: metadata can grow", "can grow"));
    assert_eq!(value_of(&prom, &grow, &[("uuid", full)]), Some(0.0));
    assert_eq!(value_of(&prom, &grow, &[("uuid", roomy)]), Some(1.0));
    let unalloc = e(target(&qs, "btrfs unallocated", ""));
    assert_eq!(value_of(&prom, &unalloc, &[("uuid", full)]), Some(0.0));
    assert!(value_of(&prom, &unalloc, &[("uuid", roomy)]).unwrap() > 100.0 * (1u64 << 30) as f64);
    let missing = e(target(&qs, "md missing disks", ""));
    assert_eq!(value_of(&prom, &missing, &[("device", "md0")]), Some(1.0));
    assert_eq!(value_of(&prom, &missing, &[("device", "md1")]), Some(0.0));
    let sync = e(target(&qs, "md sync progress", ""));
    assert_eq!(
        value_of(&prom, &sync, &[("device", "md0"), ("action", "recover")]),
        Some(0.25)
    );
    assert_eq!(value_of(&prom, &sync, &[("device", "md1")]), None, "idle");
    // The degraded pool's faulted disk came with 37 read errors and one damaged block: the
    // damage shows in the table; the errors it had before the run are no new errors (0).
    let data_errors = e(target(&qs, "ZFS pools: permanent data errors", ""));
    assert_eq!(
        value_of(&prom, &data_errors, &[("pool", "tank1")]),
        Some(1.0)
    );
    assert_eq!(
        value_of(&prom, &data_errors, &[("pool", "tank0")]),
        Some(0.0)
    );
    let new_errors = e(target(
        &qs,
        "Errors under the filesystem, new per day",
        "zfs {{pool}} {{vdev}} {{type}}",
    ));
    let sdd = range_of(
        &prom,
        &new_errors,
        started,
        &[("pool", "tank1"), ("vdev", "sdd"), ("type", "read")],
    );
    assert!(
        !sdd.is_empty(),
        "the faulted disk's read errors are plotted"
    );
    assert!(sdd.iter().all(|p| p.1 == 0.0), "flat at 0: {sdd:?}");

    // report --prometheus: the same stack from this Prometheus.
    let api = ssdwatch::report::prometheus::Api::new(&prom.base);
    let r = ssdwatch::report::prometheus::build(&api, &instance, unix_now() as i64, &[])
        .expect("report --prometheus");
    let fs = r
        .filesystems
        .iter()
        .find(|f| f.mountpoint == "/srv/thin/vg0-db000")
        .unwrap_or_else(|| panic!("the volume's mount in {:?}", r.filesystems));
    let titles: Vec<String> = fs.layers.iter().map(|l| l.title()).collect();
    assert_eq!(titles, ["filesystem", "thin pool vg0-pool-tpool"]);
    let first = fs.runs_out_first().expect("a layer runs out first");
    assert_eq!(first.title(), "thin pool vg0-pool-tpool");
    assert!(
        (first.fill_ratio.unwrap() - 0.95).abs() < 0.001,
        "{first:?}"
    );
    let zfs = r
        .filesystems
        .iter()
        .find(|f| f.mountpoint == "/tank1/db00")
        .unwrap();
    let titles: Vec<String> = zfs.layers.iter().map(|l| l.title()).collect();
    assert_eq!(
        titles,
        ["filesystem", "ZFS dataset tank1/db00", "ZFS pool tank1"]
    );
    assert!(zfs.layers.iter().all(|l| l.fill_ratio.is_some()), "{zfs:?}");

    // The daemon's /report, from its history: the newest stack.
    let (status, json) = get(&format!("http://{instance}/report?format=json")).unwrap();
    assert_eq!(status, 200, "{json}");
    let v: Json = serde_json::from_str(&json).unwrap();
    let f = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == "/srv/thin/vg0-db000")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(f["layers"][1]["layer"], "thin_pool", "{f}");
    assert_eq!(f["layers"][1]["limiting"], true, "{f}");
    assert!(
        (f["layers"][1]["fill_ratio"].as_f64().unwrap() - 0.95).abs() < 0.001,
        "{f}"
    );
    let (_, text) = get(&format!("http://{instance}/report?format=text")).unwrap();
    assert!(
        text.contains("layers below (runs out first: thin pool vg0-pool-tpool"),
        "{text}"
    );
}
