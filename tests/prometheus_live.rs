//! The dashboards work against the real thing: a real Prometheus (Debian's `prometheus`) loads the
//! rule files and scrapes the real `ssdwatch` binary every second, on a host with a loop-mounted
//! ext4 that was written, cleaned and fstrim'd and is being probed. Then every query of every
//! panel, annotation and template variable of every dashboard is evaluated through Prometheus'
//! HTTP API: none may error, and none may come back empty unless it is in the short list below
//! of panels this machine can't fill (with the reason).
//!
//! The machine's own disks (virtio, loop) have no SMART, so the daemon's smartctl is the
//! project's test stand-in replaying real captures (tests/fixtures/smart: a worn Intel P4510
//! NVMe and a worn Intel S4500 SATA SSD): the SMART panels are checked for data too.

mod support;

use serde_json::Value as Json;
use ssdwatch::snapshot::unix_now;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// Panels (by dashboard file and title) that may legitimately be empty on the test machine.
const MAY_BE_EMPTY: &[(&str, &str, &str)] = &[
    ("ssdwatch-host.json", "Days to full (forecast)", NOT_FILLING),
    (
        "ssdwatch-host.json",
        "Predicted wear-out (days)",
        NO_WEAR_TREND,
    ),
    (
        "ssdwatch-degradation.json",
        "Run maximum more than 1 day after a TRIM",
        "needs probe runs more than a day after a discard",
    ),
    (
        "ssdwatch-degradation.json",
        "annotation: Idle periods",
        "needs a drive idle for 10 minutes",
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
const NO_WEAR_TREND: &str = "needs wear to grow over days of SMART samples";

/// A child process killed (and reaped) when the test ends, also on panic.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, cmd: &mut Command, log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc { name, child, log }
    }

    fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!("{} exited early ({st}):\n{log}", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding a free port")
        .port()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .new_agent()
}

fn get(url: &str) -> Option<(u16, String)> {
    let mut r = agent().get(url).call().ok()?;
    let status = r.status().as_u16();
    Some((status, r.body_mut().read_to_string().ok()?))
}

struct Prom {
    base: String,
}

/// Calls a Prometheus HTTP API endpoint; Err carries Prometheus' own error message.
fn api(req: ureq::RequestBuilder<ureq::typestate::WithoutBody>) -> Result<Json, String> {
    let mut r = req.call().map_err(|e| format!("HTTP: {e}"))?;
    let body = r
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("body: {e}"))?;
    let j: Json = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if j["status"] != "success" {
        return Err(format!("{}: {}", j["errorType"], j["error"]));
    }
    Ok(j)
}

impl Prom {
    /// Instant query; Err carries Prometheus' error message.
    fn query(&self, expr: &str) -> Result<Vec<Json>, String> {
        let j = api(agent()
            .get(&format!("{}/api/v1/query", self.base))
            .query("query", expr))?;
        match j["data"]["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(j["data"]["result"].as_array().cloned().unwrap_or_default())
            }
            Some("scalar") | Some("string") => Ok(vec![j["data"]["result"].clone()]),
            other => Err(format!("unexpected result type {other:?}")),
        }
    }

    /// A range query, as Grafana evaluates annotations over the dashboard's time range.
    fn query_range(&self, expr: &str, start: f64, end: f64) -> Result<Vec<Json>, String> {
        let j = api(agent()
            .get(&format!("{}/api/v1/query_range", self.base))
            .query("query", expr)
            .query("start", format!("{start:.3}"))
            .query("end", format!("{end:.3}"))
            .query("step", "1"))?;
        Ok(j["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    fn wait_for(&self, what: &str, expr: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            match self.query(expr) {
                Ok(r) if !r.is_empty() => return,
                Ok(_) => {}
                Err(e) => panic!("waiting for {what}: query {expr} failed: {e}"),
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} ({expr})"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Every query of a dashboard: (what, expr), for panels, annotations and template variables.
fn queries(d: &Json) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("title").to_string();
        for t in p["targets"].as_array().expect("targets") {
            out.push((title.clone(), t["expr"].as_str().expect("expr").to_string()));
        }
    }
    for a in d["annotations"]["list"].as_array().expect("annotations") {
        if let Some(e) = a["expr"].as_str() {
            out.push((
                format!("annotation: {}", a["name"].as_str().unwrap()),
                e.to_string(),
            ));
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] != "query" {
            continue;
        }
        // label_values(<selector>, <label>): the selector must find series.
        let def = v["definition"].as_str().expect("definition");
        let inner = def
            .strip_prefix("label_values(")
            .and_then(|s| s.rsplit_once(','))
            .map(|(sel, _)| sel.to_string())
            .unwrap_or_else(|| panic!("unexpected variable query {def}"));
        out.push((format!("variable: {}", v["name"].as_str().unwrap()), inner));
    }
    out
}

fn substitute(expr: &str, instance: &str) -> String {
    let s = expr
        .replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
        .replace("$__range", "300s")
        .replace("$instance", instance)
        .replace("$probe", ".*")
        .replace("$mountpoint", ".*")
        .replace("$topn", "10");
    assert!(
        !s.contains('$') || s.contains("\"$1\""),
        "unsubstituted variable in {s}"
    );
    s
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

fn write_config(path: &Path, port: u16, state: &Path, mp: &str, smartctl: &Path) {
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
    mount_points_include: '^(/|{mp_re})$'
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
"#,
        state = state.display(),
        mp_re = regex::escape(mp),
        smartctl = smartctl.display(),
    )
    .expect("writing config");
}

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
    // Garbage for fstrim: 32 MiB written, flushed, deleted.
    {
        let mut f = std::fs::File::create(fs.mountpoint.join("data")).unwrap();
        let chunk = vec![0x5Au8; 1 << 20];
        for _ in 0..32 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    std::fs::remove_file(fs.mountpoint.join("data")).unwrap();
    run("sync", &[]);

    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = work.path().join("ssdwatch.yaml");
    let smartctl = fake_smartctl(&repo, work.path());
    write_config(&cfg, port, &work.path().join("state"), &mp, &smartctl);
    let mut daemon = Proc::spawn(
        "ssdwatch",
        Command::new(env!("CARGO_BIN_EXE_ssdwatch")).args([
            "--config",
            cfg.to_str().unwrap(),
            "--log.level",
            "warn",
            "serve",
        ]),
        work.path().join("ssdwatch.log"),
    );
    let instance = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        daemon.assert_running();
        if let Some((200, m)) = get(&format!("http://{instance}/metrics"))
            && m.contains(&format!("mountpoint=\"{mp}\""))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ssdwatch did not serve the loop filesystem"
        );
        std::thread::sleep(Duration::from_millis(100));
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        prometheus.assert_running();
        if matches!(get(&format!("{}/-/ready", prom.base)), Some((200, _))) {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus did not become ready");
        std::thread::sleep(Duration::from_millis(200));
    }

    // A few scrapes before the TRIM, so the daemon and Prometheus see the counter move.
    prom.wait_for(
        "three scrapes",
        r#"count_over_time(up{job="ssdwatch"}[1m]) >= 3"#,
        Duration::from_secs(20),
    );
    let trimmed_at = unix_now();
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
    prom.wait_for(
        "SMART samples of both drives",
        r#"count(ssdwatch_device_wear_used_ratio) == 2"#,
        Duration::from_secs(20),
    );
    prom.wait_for(
        "recording rules",
        r#"ssdwatch:probe_latency_seconds:p99_regression_ratio"#,
        Duration::from_secs(10),
    );
    daemon.assert_running();
    prometheus.assert_running();
    // Series that just appeared are not yet visible to subqueries (their steps are aligned to
    // whole seconds): give them a few more scrapes.
    std::thread::sleep(Duration::from_secs(3));

    let allowed: BTreeMap<(&str, &str), &str> = MAY_BE_EMPTY
        .iter()
        .map(|(d, t, why)| ((*d, *t), *why))
        .collect();
    let mut failures = Vec::new();
    let mut evaluated = 0;
    for file in [
        "ssdwatch-host.json",
        "ssdwatch-degradation.json",
        "ssdwatch-fleet.json",
    ] {
        let path = repo.join("dashboards").join(file);
        let d: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A panel has data when any of its queries returns something.
        let mut has_data: BTreeMap<String, bool> = BTreeMap::new();
        for (what, expr) in queries(&d) {
            let q = substitute(&expr, &instance);
            evaluated += 1;
            // Annotations are range queries over the dashboard's window (here: since the
            // fstrim, however long the waits above took); panels are instant queries.
            let r = if what.starts_with("annotation: ") {
                prom.query_range(&q, trimmed_at, unix_now())
            } else {
                prom.query(&q)
            };
            match r {
                Ok(r) => *has_data.entry(what).or_default() |= !r.is_empty(),
                Err(e) => failures.push(format!("{file} / {what}: query error {e}\n    {q}")),
            }
        }
        for (what, data) in has_data {
            match (data, allowed.get(&(file, what.as_str()))) {
                (true, _) => {}
                (false, Some(why)) => eprintln!("{file} / {what}: empty, as expected here ({why})"),
                (false, None) => failures.push(format!("{file} / {what}: no data")),
            }
        }
    }
    eprintln!("{evaluated} dashboard queries evaluated");
    assert!(evaluated > 60, "only {evaluated} queries found");
    assert!(
        failures.is_empty(),
        "dashboard queries failed:\n{}",
        failures.join("\n")
    );

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
