//! The backfill round trip: a store's `ssdwatch history export --openmetrics` loaded with the
//! real `promtool tsdb create-blocks-from openmetrics` into a real Prometheus holds every
//! stored sample, at its time, with its value; `ssdwatch report --prometheus` on it agrees with
//! `ssdwatch report` on the store figure by figure, and `--fleet` lists two hosts in order.

use crate::support;
use crate::support::story;

use crate::support::story::Story;
use crate::support::*;
use serde_json::Value as Json;
use ssdwatch::history::store::FILE_NAME;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prometheus, killed (and reaped) when the test ends, also on panic.
struct Prometheus {
    child: Child,
    base: String,
    log: std::path::PathBuf,
}

impl Prometheus {
    fn start(tsdb: &std::path::Path, log: std::path::PathBuf) -> Prometheus {
        let port = support::free_port();
        let cfg = tsdb.with_extension("yml");
        std::fs::write(&cfg, "global: {}\n").unwrap();
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=10y")
            .arg("--log.level=warn")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("start prometheus");
        let mut p = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(st)) = p.child.try_wait() {
                panic!(
                    "prometheus exited ({st}): {}",
                    std::fs::read_to_string(&p.log).unwrap_or_default()
                );
            }
            if p.get("/-/ready").is_some_and(|(s, _)| s == 200) {
                return p;
            }
            assert!(Instant::now() < deadline, "prometheus did not become ready");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn get(&mut self, path: &str) -> Option<(u16, String)> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .http_status_as_error(false)
            .build()
            .new_agent();
        let mut r = agent.get(&format!("{}{path}", self.base)).call().ok()?;
        Some((r.status().as_u16(), r.body_mut().read_to_string().ok()?))
    }

    /// One instant query's result vector (or matrix).
    fn query(&mut self, expr: &str, at: i64) -> Vec<Json> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .new_agent();
        let body = agent
            .get(&format!("{}/api/v1/query", self.base))
            .query("query", expr)
            .query("time", at.to_string())
            .call()
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap();
        let j: Json = serde_json::from_str(&body).unwrap();
        assert_eq!(j["status"], "success", "{expr}: {body}");
        j["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    fn scalar(&mut self, expr: &str, at: i64) -> f64 {
        let r = self.query(expr, at);
        assert_eq!(r.len(), 1, "{expr}: {r:?}");
        r[0]["value"][1].as_str().unwrap().parse().unwrap()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_stores_export_loads_into_a_real_prometheus_with_every_sample() {
    let test = "a_stores_export_loads_into_a_real_prometheus_with_every_sample";
    if !require_cmd(test, "promtool", "prometheus")
        || !require_cmd(test, "prometheus", "prometheus")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 20 days: 14 raw (5-minute samples) and 6 downsampled to hours.
    let s = Story::small(20);
    let store = s.store(dir.path());
    let export = dir.path().join("export.om");
    let out = Command::new(bin())
        .args([
            "history",
            "export",
            "--openmetrics",
            "--instance",
            "db1",
            "--store",
        ])
        .arg(dir.path().join(FILE_NAME))
        .arg("--output")
        .arg(&export)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A second host, 35 days old, filling more slowly: its full date is later.
    let dir2 = tempfile::tempdir().unwrap();
    drop(Story::small(35).store(dir2.path()));
    let out = Command::new(bin())
        .args([
            "history",
            "export",
            "--openmetrics",
            "--instance",
            "db2",
            "--store",
        ])
        .arg(dir2.path().join(FILE_NAME))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut text = std::fs::read_to_string(&export).unwrap();
    // One file: both hosts' families, the first's `# EOF` dropped.
    text = text.trim_end().trim_end_matches("# EOF").to_string();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    std::fs::write(&export, text).unwrap();
    let tsdb = dir.path().join("tsdb");
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&export)
        .arg(&tsdb)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool refused the export: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut prom = Prometheus::start(&tsdb, dir.path().join("prometheus.log"));
    let at = s.end;
    let span = format!("{}d", s.days + 2);

    // Every filesystem point the store holds, hourly and raw, at its time and value.
    let fs = store.filesystems().unwrap();
    let db = fs
        .iter()
        .find(|f| f.key.mountpoint == story::DB_MOUNT)
        .unwrap();
    let points = store.fs_series(db.id, 0, at).unwrap();
    assert!(points.iter().any(|p| p.hourly) && points.iter().any(|p| !p.hourly));
    let sel = format!(
        "ssdwatch_filesystem_avail_bytes{{instance=\"db1\",mountpoint=\"{}\"}}",
        story::DB_MOUNT
    );
    let got = prom.query(&format!("{sel}[{span}]"), at);
    assert_eq!(got.len(), 1, "{got:?}");
    let samples = got[0]["values"].as_array().unwrap();
    assert_eq!(samples.len(), points.len());
    for (s, p) in samples.iter().zip(&points) {
        assert_eq!(s[0].as_f64().unwrap() as i64, p.t);
        assert_eq!(s[1].as_str().unwrap().parse::<f64>().unwrap(), p.avail.last);
    }
    assert_eq!(got[0]["metric"]["device"], "nvme0n1p1");

    // Drives: wear and the host-written counter.
    let d = &store.drives().unwrap()[0];
    let dp = store.drive_series(d.id, 0, at).unwrap();
    let n = prom.scalar(
        &format!("count_over_time(ssdwatch_device_host_written_bytes_total{{instance=\"db1\",device=\"nvme0n1\"}}[{span}])"),
        at,
    );
    assert_eq!(n as usize, dp.len());
    let last_wear = dp
        .iter()
        .rev()
        .find_map(|p| p.wear_used_ratio)
        .unwrap()
        .last;
    assert_eq!(
        prom.scalar(
            "last_over_time(ssdwatch_device_wear_used_ratio{instance=\"db1\"}[1h])",
            at
        ),
        last_wear
    );

    // Probe runs: one sample per run and quantile, and the latency-by-fill curve rebuilt from
    // Prometheus' samples equals the store's.
    let mut runs = 0usize;
    store.for_each_probe_run(0, at, |_| runs += 1).unwrap();
    let n = prom.scalar(
        &format!(
            "count_over_time(ssdwatch_probe_last_latency_seconds{{instance=\"db1\",quantile=\"0.5\"}}[{span}])"
        ),
        at,
    );
    assert_eq!(n as usize, runs);
    let p50 = prom.query(
        &format!(
            "ssdwatch_probe_last_latency_seconds{{instance=\"db1\",quantile=\"0.5\"}}[{span}]"
        ),
        at,
    );
    let fill = prom.query(
        &format!("ssdwatch_probe_run_fill_ratio{{instance=\"db1\"}}[{span}]"),
        at,
    );
    let untrimmed = prom.query(
        &format!("ssdwatch_probe_run_untrimmed_ratio{{instance=\"db1\"}}[{span}]"),
        at,
    );
    let (p50, fill, untrimmed) = (
        p50[0]["values"].as_array().unwrap(),
        fill[0]["values"].as_array().unwrap(),
        untrimmed[0]["values"].as_array().unwrap(),
    );
    assert_eq!(p50.len(), fill.len());
    assert_eq!(p50.len(), untrimmed.len(), "every run's untrimmed share");
    // The curve of the runs on a trimmed filesystem, as the store's.
    let mut curve = ssdwatch::history::curve::Curve::default();
    for ((l, f), u) in p50.iter().zip(fill).zip(untrimmed) {
        assert_eq!(l[0], f[0], "fill and latency at the same time");
        assert_eq!(l[0], u[0], "the untrimmed share at the run's time");
        let v = |x: &Json| x[1].as_str().unwrap().parse::<f64>().unwrap();
        if !ssdwatch::history::curve::not_trimmed(Some(v(u))) {
            curve.add(Some(v(f)), v(l), Some(v(l)));
        }
    }
    let groups = ssdwatch::history::degradation::analyse(&store, 0, at).unwrap();
    let from_prom = curve.bins();
    assert_eq!(from_prom.len(), groups[0].curve.len());
    for (a, b) in from_prom.iter().zip(&groups[0].curve) {
        assert_eq!(
            (a.bin, a.runs, a.p50_seconds),
            (b.bin, b.runs, b.p50_seconds)
        );
    }

    // The report from Prometheus agrees with the store's, figure by figure, under the same
    // rated endurance (the story's drive is a 3.84 TB SAMSUNG MZQL2: 1 DWPD for 5 years).
    let cfg = dir.path().join("endurance.yaml");
    std::fs::write(
        &cfg,
        "history:\n  endurance:\n    - {models: \"^SAMSUNG MZQL23T8\", dwpd: 1, warranty_years: 5}\n",
    )
    .unwrap();
    let json = |args: &[&str]| -> Json {
        let out = Command::new(bin())
            .args(["--config", cfg.to_str().unwrap(), "report", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let base = prom.base.clone();
    let local = json(&["--store", dir.path().join(FILE_NAME).to_str().unwrap()]);
    let remote = json(&["--prometheus", &base, "--instance", "db1"]);
    let find = |r: &Json, mp: &str| -> Json {
        r["filesystems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["mountpoint"] == mp)
            .cloned()
            .unwrap_or_else(|| panic!("{mp} in {r}"))
    };
    let num = |v: &Json, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    for mp in [story::DB_MOUNT, "/"] {
        let (a, b) = (find(&local, mp), find(&remote, mp));
        assert_eq!(num(&a, "fill_ratio"), num(&b, "fill_ratio"), "{mp}");
        assert_eq!(num(&a, "size_bytes"), num(&b, "size_bytes"));
        for k in ["growth_7d_bytes_per_day", "growth_30d_bytes_per_day"] {
            // Daily lows from hourly lasts (Prometheus) vs hourly minimums (the store).
            let (x, y) = (num(&a, k), num(&b, k));
            assert!(
                (x - y).abs() <= 0.01 * x.abs().max(1e6),
                "{mp} {k}: {x} vs {y}"
            );
        }
    }
    let (a, b) = (
        find(&local, story::DB_MOUNT),
        find(&remote, story::DB_MOUNT),
    );
    // What fills it: the same components, growth and top contributor through the export (the
    // store's hourly sizes, its database's newest facts).
    assert!(
        a["top_contributor"]
            .as_str()
            .is_some_and(|t| t.contains("segments wait for the archiver")),
        "{a}"
    );
    assert_eq!(a["top_contributor"], b["top_contributor"]);
    assert_eq!(a["filling"], b["filling"], "what fills {}", story::DB_MOUNT);
    assert_eq!(a["used_growth_1d_bytes"], b["used_growth_1d_bytes"]);
    let full = num(&a, "predicted_full_unix");
    let y = num(&b, "predicted_full_unix");
    assert!((full - y).abs() <= 6.0 * 3600.0, "full dates {full} vs {y}");
    let (a, b) = (&local["drives"][0], &remote["drives"][0]);
    assert_eq!(b["device"], "nvme0n1");
    for k in ["wear_used_ratio", "host_written_bytes"] {
        assert_eq!(num(a, k), num(b, k), "{k}");
    }
    // The drive's health: the store's hourly readings give Prometheus' figures.
    assert_eq!(a["health"]["error_log_entries_new_7d"], 2.0, "{a}");
    // Prometheus' increase() extrapolates to the window's edges: the two 7-day counts within
    // 1 %, the rest equal.
    let (mut ha, mut hb) = (a["health"].clone(), b["health"].clone());
    for k in ["error_log_entries_new_7d", "above_warning_seconds_7d"] {
        let (x, y) = (num(&ha, k), num(&hb, k));
        assert!((x - y).abs() <= 0.01 * x, "{k}: {x} vs {y}");
        ha[k] = Json::Null;
        hb[k] = Json::Null;
    }
    assert_eq!(ha, hb, "the drive's health");
    // A figure the store can't give (no wear step in 20 days: no date) Prometheus can't either.
    let agree = |k: &str, tolerance: f64| match (a[k].as_f64(), b[k].as_f64()) {
        (Some(x), Some(y)) => assert!((x - y).abs() <= tolerance * x.abs(), "{k}: {x} vs {y}"),
        (x, y) => assert_eq!(x, y, "{k}"),
    };
    agree("wear_rate_per_day", 0.01);
    agree("write_amplification_30d", 0.01);
    agree("host_bytes_per_day_30d", 0.01);
    // Dates within two days in ~5 years.
    agree("predicted_wear_out_unix", 2.0 * 86_400.0 / 1.9e9);
    assert_eq!(
        local["degradation"][0]["curve"], remote["degradation"][0]["curve"],
        "latency by fill"
    );
    // The runs made before each fstrim on a filesystem with deleted data not trimmed: their
    // own curve, through the export's per-run share.
    assert!(
        local["degradation"][0]["curve_untrimmed"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{local}"
    );
    assert_eq!(
        local["degradation"][0]["curve_untrimmed"], remote["degradation"][0]["curve_untrimmed"],
        "latency by fill, deleted and not trimmed"
    );
    // The drive's identity and its share of the rated endurance.
    assert_eq!(b["model"], "SAMSUNG MZQL23T8HCLS-00A07", "{b}");
    assert_eq!(a["model"], b["model"]);
    assert_eq!(a["capacity_bytes"], b["capacity_bytes"]);
    assert!(num(a, "endurance_used_ratio") > 0.0, "{a}");
    agree("endurance_used_ratio", 1e-9);
    agree("predicted_endurance_exhausted_unix", 2.0 * 86_400.0 / 1.9e9);
    // The recovery history: every TRIM's start, ratio and latencies before and after.
    let events = |r: &Json| -> Vec<(i64, f64, f64, f64)> {
        r["degradation"][0]["trim"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["start"].as_i64().unwrap(),
                    num(e, "ratio"),
                    num(e, "before_seconds"),
                    num(e, "after_seconds"),
                )
            })
            .collect()
    };
    let (le, re) = (events(&local), events(&remote));
    assert!(le.len() >= 2, "the story's weekly TRIMs: {le:?}");
    assert_eq!(le, re, "TRIM recoveries");

    // The fleet: db1 fills first (20 days to 90 %), then db2; drives by wear-out date.
    let fleet = json(&["--fleet", "--prometheus", &base]);
    let rows: Vec<(&str, &str)> = fleet["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["instance"].as_str().unwrap(), r["what"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [("db1", story::DB_MOUNT), ("db2", story::DB_MOUNT)],
        "{fleet}"
    );
    assert_eq!(num(&fleet["filesystems"][0], "when_unix"), full);
    // db1's drive has not taken a wear step in 20 days: no date, so only db2's is listed.
    let drives = fleet["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 1, "{fleet}");
    assert_eq!(drives[0]["instance"], "db2");
}

/// The fleet bench in miniature (20 hosts, 15 s), so the script that measures the fleet
/// queries' cost on 1,000 hosts can't rot: `report --prometheus --fleet` and `--instance`
/// answer from a real Prometheus scraping the simulated fleet.
#[test]
fn the_fleet_bench_runs_the_fleet_and_host_reports_against_a_real_prometheus() {
    if require_cmd("fleet bench", "prometheus", "prometheus")
        && require_cmd("fleet bench", "python3", "python3")
    {
        fleet_bench_short("prometheus");
    }
}

/// The same through VictoriaMetrics (Debian's single node) scraping the simulated fleet, the
/// long-term store a fleet's reports go through.
#[test]
fn the_fleet_bench_runs_the_fleet_and_host_reports_against_a_real_victoria_metrics() {
    if require_cmd("fleet bench", "victoria-metrics", "victoria-metrics")
        && require_cmd("fleet bench", "python3", "python3")
    {
        fleet_bench_short("victoria-metrics");
    }
}

/// The fleet bench's short form (20 hosts, 15 s) against `server`: the queries' and the
/// reports' row counts are the simulated fleet's.
fn fleet_bench_short(server: &str) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus/bench/fleet.py"
    );
    let out = Command::new("python3")
        .args([
            script,
            "--hosts",
            "20",
            "--seconds",
            "15",
            "--ssdwatch",
            bin(),
            "--server",
            server,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = |prefix: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {stdout}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // 20 hosts × 2 drives, each with a wear-out date; about 80 % of their 100 filesystems
    // with a full date.
    assert_eq!(rows("FLEET_QUERY device_predicted_wearout"), 40, "{stdout}");
    let fs = rows("FLEET_QUERY filesystem_predicted_full");
    assert!((50..=100).contains(&fs), "{stdout}");
    assert_eq!(rows("FLEET_REPORT --fleet"), 40 + fs.min(50), "{stdout}");
    // One host: its 5 filesystems and 2 drives.
    assert_eq!(rows("FLEET_REPORT --instance"), 7, "{stdout}");
}
