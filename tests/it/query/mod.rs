//! The query client against a real Prometheus, and a real VictoriaMetrics, locked the way a
//! fleet's long-term store is: TLS and basic auth by the server's own flags (Prometheus'
//! `--web.config.file`, VictoriaMetrics' `-tls` and `-httpAuth.*`), and a multi-tenant gateway
//! in front (tenant_proxy.py, as Mimir's or Cortex's) that wants `X-Scope-OrgID`. The server
//! holds 60 days of a simulated database host's node_exporter filesystem series, loaded with
//! `promtool tsdb create-blocks-from openmetrics` (Prometheus) or through
//! `/api/v1/import/prometheus` (VictoriaMetrics).

mod daemon;
mod import;

use crate::support::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const HOUR: i64 = 3600;
pub const DAY: i64 = 86400;
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// The simulated host's node_exporter and ssdwatch instances.
pub const NODE: &str = "db7:9100";
pub const SSDWATCH: &str = "db7:10150";
pub const DB_MOUNT: &str = "/var/lib/postgresql";
pub const DB_SIZE: f64 = 100.0 * GIB;
/// The database mount's used bytes: 40 GiB at the start, 0.5 GiB more a day: full 120 days
/// after the start, 60 days after the history's end.
pub fn db_used(t: i64, start: i64) -> f64 {
    40.0 * GIB + 0.5 * GIB * (t - start) as f64 / DAY as f64
}
pub const ROOT_SIZE: f64 = 20.0 * GIB;
pub const ROOT_USED: f64 = 6.0 * GIB;
/// The history's step.
pub const STEP: i64 = 30 * 60;
/// The simulated host's drive, as ssdwatch's SMART series name it (and its store would).
pub const DRIVE_DEV: &str = "nvme0n1";
pub const DRIVE_SERIAL: &str = "S5GXNX0R812345";
pub const DRIVE_WWN: &str = "eui.002538b811b2a1c4";
pub const DRIVE_MODEL: &str = "Samsung SSD 980 PRO 1TB";
/// Its wear in whole percents as NVMe reports it: 10 % at the start, a point more every 6
/// days (20 % at the history's end): worn out (100 %) 540 days after the start.
pub fn drive_wear(t: i64, start: i64) -> f64 {
    (10.0 + ((t - start) as f64 / DAY as f64 / 6.0).floor()) / 100.0
}
/// Its host bytes written: 50 TB at the start, 200 GB a day more.
pub fn drive_host_written(t: i64, start: i64) -> f64 {
    50e12 + 200e9 * (t - start) as f64 / DAY as f64
}

/// A Prometheus behind TLS and basic auth, a tenant gateway in front, and the files a client
/// needs. Both processes are killed and reaped on drop.
pub struct Secured {
    pub dir: tempfile::TempDir,
    /// The server (Prometheus or VictoriaMetrics).
    prometheus: Child,
    proxy: Child,
    /// The gateway's URL (https).
    pub url: String,
    /// The history's first and last sample times.
    pub start: i64,
    pub end: i64,
}

pub const TENANT: &str = "dbfleet";
pub const PASSWORD: &str = "correct horse";

impl Drop for Secured {
    fn drop(&mut self) {
        for c in [&mut self.prometheus, &mut self.proxy] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// 60 days of node_exporter's filesystem series of NODE (the database mount filling, `/`
/// flat, a tmpfs) ending at `end`, and ssdwatch's forecast gauge of the database mount.
fn openmetrics(start: i64, end: i64) -> String {
    let mut s = String::new();
    let mounts = [
        (DB_MOUNT, "/dev/nvme0n1p1", "ext4", DB_SIZE),
        ("/", "/dev/nvme0n1p2", "ext4", ROOT_SIZE),
        ("/run", "tmpfs", "tmpfs", GIB),
    ];
    for (family, which) in [
        ("node_filesystem_avail_bytes", 0),
        ("node_filesystem_free_bytes", 0),
        ("node_filesystem_size_bytes", 1),
    ] {
        writeln!(s, "# TYPE {family} gauge").unwrap();
        for (mp, dev, fstype, size) in mounts {
            let mut t = start;
            while t <= end {
                let used = match mp {
                    DB_MOUNT => db_used(t, start),
                    "/" => ROOT_USED,
                    _ => 0.0,
                };
                let v = if which == 1 { size } else { size - used };
                writeln!(
                    s,
                    "{family}{{instance=\"{NODE}\",job=\"node\",mountpoint=\"{mp}\",device=\"{dev}\",fstype=\"{fstype}\"}} {v} {t}"
                )
                .unwrap();
                t += STEP;
            }
        }
        // Another host, whose database mount is twice as large: a wrong --instance.
        let mut t = start;
        while t <= end {
            let v = if which == 1 { 2.0 * DB_SIZE } else { DB_SIZE };
            writeln!(
                s,
                "{family}{{instance=\"db8:9100\",job=\"node\",mountpoint=\"{DB_MOUNT}\",device=\"/dev/sdb1\",fstype=\"xfs\"}} {v} {t}"
            )
            .unwrap();
            t += 6 * HOUR;
        }
    }
    // ssdwatch's own SMART series of the drive (its instance, not node_exporter's).
    let drive = format!(
        "instance=\"{SSDWATCH}\",job=\"ssdwatch\",device=\"{DRIVE_DEV}\",serial=\"{DRIVE_SERIAL}\",wwn=\"{DRIVE_WWN}\""
    );
    type Figure = fn(i64, i64) -> f64;
    let figures: [(&str, Figure); 7] = [
        ("ssdwatch_device_wear_used_ratio", drive_wear),
        ("ssdwatch_device_spare_available_ratio", |_, _| 1.0),
        ("ssdwatch_device_temperature_celsius", |_, _| 41.0),
        (
            "ssdwatch_device_host_written_bytes_total",
            drive_host_written,
        ),
        ("ssdwatch_device_nand_written_bytes_total", |t, s| {
            1.1 * drive_host_written(t, s)
        }),
        ("ssdwatch_device_media_errors_total", |_, _| 0.0),
        ("ssdwatch_device_power_on_seconds_total", |t, s| {
            (1000 * HOUR + t - s) as f64
        }),
    ];
    for (family, v) in figures {
        let kind = if family.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let name = family.strip_suffix("_total").unwrap_or(family);
        writeln!(s, "# TYPE {name} {kind}").unwrap();
        let mut t = start;
        while t <= end {
            writeln!(s, "{family}{{{drive}}} {} {t}", v(t, start)).unwrap();
            t += STEP;
        }
    }
    writeln!(s, "# TYPE ssdwatch_device_info gauge").unwrap();
    let mut t = start;
    while t <= end {
        writeln!(
            s,
            "ssdwatch_device_info{{{drive},model=\"{DRIVE_MODEL}\",firmware=\"5B2QGXA7\"}} 1 {t}"
        )
        .unwrap();
        t += STEP;
    }
    let f = "ssdwatch_filesystem_predicted_full_timestamp_seconds";
    writeln!(s, "# TYPE {f} gauge").unwrap();
    let mut t = end - 6 * HOUR;
    while t <= end {
        writeln!(
            s,
            "{f}{{instance=\"{SSDWATCH}\",job=\"ssdwatch\",mountpoint=\"{DB_MOUNT}\"}} {} {t}",
            start + 120 * DAY
        )
        .unwrap();
        t += STEP;
    }
    s.push_str("# EOF\n");
    s
}

fn wait_for(child: &mut Child, what: &str, log: &Path, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "{what} exited ({st}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if ready() {
            return;
        }
        assert!(Instant::now() < deadline, "{what} did not become ready");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The known history's span as of `now`: 60 days ending an hour before, on a step (the newest block is whole).
fn history_span(now: i64) -> (i64, i64) {
    let end = (now - HOUR).div_euclid(STEP) * STEP;
    (end - 60 * DAY, end)
}

impl Secured {
    /// None (after saying why) when prometheus, promtool or python3 is missing.
    pub fn start(test: &str) -> Option<Secured> {
        if !require_cmd(test, "promtool", "prometheus")
            || !require_cmd(test, "prometheus", "prometheus")
            || !require_cmd(test, "python3", "python3")
        {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        crate::support::binary::make_certs(d);
        let now = crate::support::unix_now() as i64;
        let (start, end) = history_span(now);
        std::fs::write(d.join("history.om"), openmetrics(start, end)).unwrap();
        let tsdb = d.join("tsdb");
        let (ok, out) = run_status(
            "promtool",
            &[
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                d.join("history.om").to_str().unwrap(),
                tsdb.to_str().unwrap(),
            ],
        );
        assert!(ok, "promtool: {out}");
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        std::fs::write(
            d.join("web.yml"),
            format!(
                "tls_server_config:\n  cert_file: {0}/server.crt\n  key_file: {0}/server.key\n\
                 basic_auth_users:\n  ssdwatch: {hash}\n",
                d.display()
            ),
        )
        .unwrap();
        std::fs::write(d.join("prometheus.yml"), "global: {}\n").unwrap();
        let port = free_port();
        let log = d.join("prometheus.log");
        let out = std::fs::File::create(&log).unwrap();
        let mut prometheus = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                d.join("prometheus.yml").display()
            ))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--web.config.file={}", d.join("web.yml").display()))
            .arg("--storage.tsdb.retention.time=10y")
            .arg("--log.level=warn")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("start prometheus");
        let upstream = format!("https://127.0.0.1:{port}");
        let direct = write_http_config(d, "direct.yml", TENANT, PASSWORD, "ca.crt");
        wait_for(&mut prometheus, "prometheus", &log, || {
            ssdwatch::query::Api::with_config(&upstream, Some(&direct))
                .and_then(|a| a.query("1", now))
                .is_ok()
        });
        Some(Secured::with_gateway(
            dir, prometheus, &upstream, start, end,
        ))
    }

    /// The same history in a VictoriaMetrics single-node server (Debian's `victoria-metrics`)
    /// behind its own TLS and basic auth, with the same gateway in front; None (after saying
    /// why) when it or python3 is missing. Its response cache is on, as in production.
    pub fn start_victoria_metrics(test: &str) -> Option<Secured> {
        if !require_cmd(test, "victoria-metrics", "victoria-metrics")
            || !require_cmd(test, "python3", "python3")
            || !require_cmd(test, "curl", "curl")
        {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        crate::support::binary::make_certs(d);
        let now = crate::support::unix_now() as i64;
        let (start, end) = history_span(now);
        // Prometheus' text format with times in milliseconds, as its import endpoint takes.
        let text: String = openmetrics(start, end)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}000\n"))
            .collect();
        std::fs::write(d.join("history.prom"), text).unwrap();
        let port = free_port();
        let log = d.join("victoria-metrics.log");
        let out = std::fs::File::create(&log).unwrap();
        let mut vm = Command::new("victoria-metrics")
            .arg(format!("-storageDataPath={}", d.join("vm").display()))
            .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            // Samples older than the retention are refused: far beyond the 60 days.
            .arg("-retentionPeriod=10y")
            .arg("-tls")
            .arg(format!("-tlsCertFile={}", d.join("server.crt").display()))
            .arg(format!("-tlsKeyFile={}", d.join("server.key").display()))
            .arg("-httpAuth.username=ssdwatch")
            .arg(format!("-httpAuth.password={PASSWORD}"))
            .arg("-loggerLevel=WARN")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("start victoria-metrics");
        let upstream = format!("https://127.0.0.1:{port}");
        let direct = write_http_config(d, "direct.yml", TENANT, PASSWORD, "ca.crt");
        wait_for(&mut vm, "victoria-metrics", &log, || {
            ssdwatch::query::Api::with_config(&upstream, Some(&direct))
                .and_then(|a| a.query("1", now))
                .is_ok()
        });
        let curl = |path: &str, data: Option<&Path>| {
            let mut c = Command::new("curl");
            c.args(["-sS", "--fail", "--cacert"])
                .arg(d.join("ca.crt"))
                .args(["-u", &format!("ssdwatch:{PASSWORD}")]);
            if let Some(f) = data {
                c.arg("--data-binary").arg(format!("@{}", f.display()));
            }
            let out = c.arg(format!("{upstream}{path}")).output().unwrap();
            assert!(
                out.status.success(),
                "{path}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        curl("/api/v1/import/prometheus", Some(&d.join("history.prom")));
        // Ingested rows become searchable at the next flush: made now.
        curl("/internal/force_flush", None);
        let s = Secured::with_gateway(dir, vm, &upstream, start, end);
        // Every sample in: the database mount's avail over the whole range, counted.
        let api = ssdwatch::query::Api::with_config(
            &s.url,
            Some(&s.config("good.yml", TENANT, PASSWORD, "ca.crt")),
        )
        .unwrap();
        let q = format!(
            "count_over_time(node_filesystem_avail_bytes{{instance=\"{NODE}\",mountpoint=\"{DB_MOUNT}\"}}[61d])"
        );
        let want = (60 * DAY / STEP + 1) as f64;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let n = api
                .query(&q, now)
                .ok()
                .and_then(|a| a.first()?.1.first().map(|p| p.1));
            if n == Some(want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "victoria-metrics holds {n:?} of {want} samples"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        Some(s)
    }

    /// The tenant gateway in front of the server at `upstream` (https, the test CA), started
    /// and ready.
    fn with_gateway(
        dir: tempfile::TempDir,
        server: Child,
        upstream: &str,
        start: i64,
        end: i64,
    ) -> Secured {
        let now = crate::support::unix_now() as i64;
        let d = dir.path();
        let pport = free_port();
        let plog = d.join("proxy.log");
        let out = std::fs::File::create(&plog).unwrap();
        let proxy = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/it/query/tenant_proxy.py"
            ))
            .arg(pport.to_string())
            .arg(d.join("server.crt"))
            .arg(d.join("server.key"))
            .arg(upstream)
            .arg(d.join("ca.crt"))
            .arg(TENANT)
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("start the tenant gateway");
        let mut s = Secured {
            dir,
            prometheus: server,
            proxy,
            url: format!("https://localhost:{pport}"),
            start,
            end,
        };
        let good = s.config("good.yml", TENANT, PASSWORD, "ca.crt");
        let url = s.url.clone();
        wait_for(&mut s.proxy, "the tenant gateway", &plog, || {
            ssdwatch::query::Api::with_config(&url, Some(&good))
                .and_then(|a| a.query("1", now))
                .is_ok()
        });
        s
    }

    /// An http config file: basic auth with a password file, the CA file, the tenant header.
    pub fn config(&self, name: &str, tenant: &str, password: &str, ca: &str) -> PathBuf {
        write_http_config(self.dir.path(), name, tenant, password, ca)
    }
}

fn write_http_config(dir: &Path, name: &str, tenant: &str, password: &str, ca: &str) -> PathBuf {
    let pass = dir.join(format!("{name}.pass"));
    std::fs::write(&pass, format!("{password}\n")).unwrap();
    let mut text = format!(
        "basic_auth:\n  username: ssdwatch\n  password_file: {}\ntls_config:\n  ca_file: {ca}\n",
        pass.file_name().unwrap().to_str().unwrap()
    );
    if !tenant.is_empty() {
        write!(
            text,
            "http_headers:\n  X-Scope-OrgID:\n    values: [{tenant}]\n"
        )
        .unwrap();
    }
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs the ssdwatch binary with `args`.
pub fn ssdwatch(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// Its one line of error: exit status 1 and a single stderr line, returned.
pub fn one_error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn the_fleet_report_reaches_a_prometheus_behind_tls_basic_auth_and_a_tenant_gateway() {
    let test = "the_fleet_report_reaches_a_prometheus_behind_tls_basic_auth_and_a_tenant_gateway";
    let Some(s) = Secured::start(test) else {
        return;
    };
    let good = s.config("good.yml", TENANT, PASSWORD, "ca.crt");
    let out = ssdwatch(&[
        "report",
        "--prometheus",
        &s.url,
        "--fleet",
        "--json",
        "--http.config.file",
        good.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fs = v["filesystems"].as_array().unwrap();
    assert_eq!(fs.len(), 1, "{text}");
    assert_eq!(fs[0]["instance"], SSDWATCH);
    assert_eq!(fs[0]["what"], DB_MOUNT);
    assert_eq!(fs[0]["when_unix"], s.start + 120 * DAY);
}

#[test]
fn a_wrong_password_ca_or_tenant_and_a_50mb_answer_each_give_one_clear_error() {
    let test = "a_wrong_password_ca_or_tenant_and_a_50mb_answer_each_give_one_clear_error";
    if let Some(s) = Secured::start(test) {
        each_refusal_is_one_clear_error(&s);
    }
}

/// The same refusals from VictoriaMetrics: its own basic auth answers a wrong password (as
/// Prometheus' web config does), the gateway the rest.
#[test]
fn a_wrong_password_ca_or_tenant_and_a_50mb_answer_from_victoria_metrics_each_give_one_clear_error()
{
    let test = "a_wrong_password_ca_or_tenant_and_a_50mb_answer_from_victoria_metrics_each_give_one_clear_error";
    if let Some(s) = Secured::start_victoria_metrics(test) {
        each_refusal_is_one_clear_error(&s);
    }
}

/// `report --prometheus --fleet` with a wrong password, a CA that signed nothing the server
/// shows, no tenant header and a tenant whose answer is 50 MB: one error line each, naming the
/// server and what it said, never the password.
fn each_refusal_is_one_clear_error(s: &Secured) {
    for (cfg, says) in refusals(s) {
        let out = ssdwatch(&[
            "report",
            "--prometheus",
            &s.url,
            "--fleet",
            "--http.config.file",
            cfg.to_str().unwrap(),
        ]);
        let err = one_error_line(&out);
        assert!(
            err.contains(&s.url) && err.contains(says),
            "{}: {err}",
            cfg.display()
        );
        assert!(!err.contains(PASSWORD), "a secret in an error: {err}");
    }
}

/// The client configs a locked server refuses, each with what its error says: a wrong
/// password, a wrong CA, no tenant, the 50 MB tenant.
pub fn refusals(s: &Secured) -> [(PathBuf, &'static str); 4] {
    // Another CA, which signed nothing the server shows.
    let other = s.dir.path().join("other");
    if !other.join("ca.crt").exists() {
        std::fs::create_dir_all(&other).unwrap();
        crate::support::binary::make_certs(&other);
    }
    [
        (s.config("badpass.yml", TENANT, "wrong", "ca.crt"), "401"),
        (
            s.config("badca.yml", TENANT, PASSWORD, "other/ca.crt"),
            "certificate",
        ),
        (
            s.config("notenant.yml", "", PASSWORD, "ca.crt"),
            "no org id",
        ),
        (
            s.config("huge.yml", "huge", PASSWORD, "ca.crt"),
            "larger than 32 MiB",
        ),
    ]
}
