//! A page before PostgreSQL stops, on real parts: two real servers on loop ext4 filesystems of
//! their own fill them with WAL, one behind a failing archive_command, one behind a physical slot
//! nobody consumes, until each PANICs for want of space. The daemon watches them and a real
//! Prometheus scrapes it with the shipped rule files; the page naming the cause must come first.
//!
//! The fill is throttled to a rate (the filesystem's free space over `SSDWATCH_TEST_FILL_MINUTES`,
//! 6 by default so CI runs it in one sitting; the issue's realistic 15 to 60 minutes by hand), and
//! it advances only as far as the monitor has seen: a machine too slow to keep up makes the fill
//! slower, which gives the page more lead, never less. No duration is asserted: the lead is
//! printed, and its sign is what the test holds.

use super::postgres::{Postgres, setup};
use crate::support::prometheus::{Prom, start_prometheus};
use crate::support::unix_now;
use crate::support::{self, Daemon, LoopFs, value};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fill time the test aims at, in minutes, when the environment does not set one.
const DEFAULT_FILL_MINUTES: f64 = 6.0;
/// The variable that sets it (1 to 120 minutes).
const FILL_MINUTES_ENV: &str = "SSDWATCH_TEST_FILL_MINUTES";
/// The loop filesystems' size: a few hundred MiB, so the WAL of minutes fills it.
const FS_MIB: u64 = 384;
/// How far behind the writer the monitor may be: a batch goes only once the daemon has sampled
/// (and Prometheus stored) the filesystem and the databases as they were this long ago. With
/// 1 s samples and 1 s scrapes the monitor is 1 to 3 s behind, so this throttles only a machine
/// that cannot keep up.
const MONITOR_LAG: Duration = Duration::from_secs(5);
/// How far behind its schedule the writer may be and still catch up: the free space drops in
/// steps of a WAL segment (1 MiB: a second or two of the default fill), so a writer a batch or two
/// behind is on schedule; beyond this the schedule moves instead, with no burst.
const CATCH_UP: Duration = Duration::from_secs(3);
/// A guard against a broken set-up, not a measure of speed: this long without the monitor
/// catching up at all means it has stopped.
const STALLED: Duration = Duration::from_secs(600);

/// The fill time of this run, from the environment or the default.
fn fill_time() -> Duration {
    let minutes = match std::env::var(FILL_MINUTES_ENV) {
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .unwrap_or_else(|e| panic!("{FILL_MINUTES_ENV}={v:?}: not a number of minutes ({e})")),
        Err(_) => DEFAULT_FILL_MINUTES,
    };
    assert!(
        (1.0..=120.0).contains(&minutes),
        "{FILL_MINUTES_ENV}={minutes}: must be 1 to 120 minutes"
    );
    Duration::from_secs_f64(minutes * 60.0)
}

/// One server whose filesystem is being filled, and the page that must name its cause.
struct Case {
    /// What fills it, as the output says it.
    what: &'static str,
    /// The alert that names the cause.
    page: &'static str,
    /// The other cause's alert, which must not fire for this server.
    not: &'static str,
    // Dropped in this order: the server is stopped before its filesystem is unmounted.
    pg: Postgres,
    fs: LoopFs,
    label: String,
}

/// How a server stopped, by its own log (`log_line_prefix = '%n '`: Unix time with ms).
#[derive(Debug)]
struct Crash {
    /// The first PANIC line's time and text.
    panic_at: f64,
    panic_line: String,
    /// "database system is shut down", when it says so.
    shut_down_at: Option<f64>,
    /// When the writer began, and the bytes of free space it consumed.
    started: f64,
    consumed: u64,
    /// Seconds the writer waited for the monitor beyond its schedule.
    waited_for_monitor: f64,
}

fn avail(mp: &Path) -> u64 {
    let v = nix::sys::statvfs::statvfs(mp).expect("statvfs");
    v.blocks_available() as u64 * v.fragment_size() as u64
}

/// A server's postmaster is alive (signal 0; it is not our child, so no zombie lingers).
fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// The newest value of a series in Prometheus, if it has one.
fn newest(prom: &Prom, expr: &str) -> Option<f64> {
    let r = prom
        .query(expr)
        .unwrap_or_else(|e| panic!("query {expr}: {e}"));
    r.first()?["value"][1].as_str()?.parse().ok()
}

/// The time the daemon last completed a sample of both collectors, as Prometheus stored it:
/// what the monitor has seen.
fn monitor_seen(prom: &Prom) -> Option<f64> {
    newest(
        prom,
        r#"min(ssdwatch_collector_last_success_timestamp_seconds{collector=~"filesystem|databases"})"#,
    )
}

/// Writes WAL into `case`'s server at a rate that fills its filesystem in `fill`, each batch
/// only once the monitor has seen the state of MONITOR_LAG ago, until the server stops.
fn fill_until_the_server_stops(case: &Case, prom: &Prom, fill: Duration) -> Crash {
    let mp = case.fs.mountpoint.as_path();
    let pid = case.pg.postmaster_pid().expect("postmaster.pid");
    let avail0 = avail(mp);
    let rate = avail0 as f64 / fill.as_secs_f64();
    // About two batches a second: one psql each.
    let batch = ((rate / 2.0) as u64).clamp(64 << 10, 8 << 20);
    let sql =
        format!("select pg_logical_emit_message(false, 'ssdwatch-fill', repeat('x', {batch}))");
    let started = unix_now();
    let mut t0 = Instant::now();
    // (when, wall clock) after each batch not yet known seen, oldest first.
    let mut written: std::collections::VecDeque<(Instant, f64)> = Default::default();
    let mut waited = Duration::ZERO;
    loop {
        // Lock-step with the monitor: the state of MONITOR_LAG ago must have been seen.
        let mut due_seen = None;
        while written
            .front()
            .is_some_and(|(at, _)| at.elapsed() >= MONITOR_LAG)
        {
            due_seen = written.pop_front().map(|(_, wall)| wall);
        }
        if let Some(wall) = due_seen {
            let wait_from = Instant::now();
            while !monitor_seen(prom).is_some_and(|t| t >= wall) {
                assert!(
                    wait_from.elapsed() < STALLED,
                    "{}: the monitor has not sampled the state at {wall:.1} in {STALLED:?}",
                    case.what
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            // Time spent waiting moves the schedule: the writer never catches up in a burst.
            let lag = wait_from.elapsed();
            t0 += lag;
            waited += lag;
        }
        match case.pg.try_sql(&sql) {
            Ok(_) => {}
            Err(e) => {
                // The server stopped (PANIC, then a failed recovery), or restarted after one
                // and takes writes again: write on until its postmaster is gone.
                let gone = support::wait_for(
                    "the server gone or back after a failed write",
                    STALLED,
                    || {
                        if !alive(pid) {
                            Some(true)
                        } else if case.pg.try_sql("select 1").is_ok() {
                            Some(false)
                        } else {
                            None
                        }
                    },
                );
                if gone {
                    let why = e.lines().next().unwrap_or_default();
                    println!("{}: the server is gone ({why})", case.what);
                    break;
                }
                continue;
            }
        }
        written.push_back((Instant::now(), unix_now()));
        let consumed = avail0.saturating_sub(avail(mp));
        let due = t0 + Duration::from_secs_f64(consumed as f64 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > CATCH_UP {
            // Slower than the schedule (the machine, psql) by more than the space goes in
            // steps of: the schedule waits for it.
            t0 += now - due - CATCH_UP;
        }
    }
    let log = std::fs::read_to_string(&case.pg.log).expect("the server's log");
    let stamp = |l: &str| -> Option<f64> { l.split_whitespace().next()?.parse().ok() };
    let panic_line = log
        .lines()
        .find(|l| l.contains(" PANIC: "))
        .unwrap_or_else(|| panic!("{}: no PANIC in the server's log:\n{log}", case.what))
        .to_string();
    Crash {
        panic_at: stamp(&panic_line).expect("a %n time stamp"),
        panic_line,
        shut_down_at: log
            .lines()
            .find(|l| l.contains("database system is shut down"))
            .and_then(stamp),
        started,
        consumed: avail0.saturating_sub(avail(mp)),
        waited_for_monitor: waited.as_secs_f64(),
    }
}

/// A server of its own on a loop ext4 of its own, with its log stamped in Unix time.
fn case(bin: &Path, what: &'static str, page: &'static str, not: &'static str, conf: &str) -> Case {
    let fs = LoopFs::new(FS_MIB);
    for p in [fs.dir.path(), fs.mountpoint.as_path()] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let pg = Postgres::start_in(
        bin.to_path_buf(),
        &fs.mountpoint,
        &format!("log_line_prefix = '%n [%p] '\n{conf}"),
    );
    let label = pg.label();
    Case {
        what,
        page,
        not,
        pg,
        fs,
        label,
    }
}

/// The daemon with only the filesystem and databases collectors, sampling every second.
fn daemon(mps: &[&str]) -> Daemon {
    let mut cfg = ssdwatch::config::Config::default();
    for e in ssdwatch::registry::COLLECTORS {
        cfg.collectors
            .set_enabled(e.name, e.name == "databases" || e.name == "filesystem");
    }
    cfg.collectors.filesystem.interval = Duration::from_secs(1);
    cfg.collectors.filesystem.mount_points_include = Some(
        mps.iter()
            .map(|m| format!("^{}$", regex_lite::escape(m)))
            .collect(),
    );
    cfg.collectors.databases.interval = Duration::from_secs(1);
    cfg.collectors.databases.size_interval = Duration::from_secs(5);
    cfg.history.enabled = false;
    Daemon::start(cfg, ssdwatch::Roots::default())
}

/// The first instant (Unix seconds, 1 s steps) `alertname` was in `state` for `database`.
fn first(prom: &Prom, alertname: &str, state: &str, database: &str, from: f64) -> Option<f64> {
    let expr = format!(
        "ALERTS{{alertname=\"{alertname}\",alertstate=\"{state}\",database=\"{database}\"}}"
    );
    let r = prom
        .query_range(&expr, from.floor(), unix_now().ceil())
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    (r.iter())
        .filter_map(|s| s["values"].as_array()?.first()?[0].as_f64())
        .reduce(f64::min)
}

/// The firing alerts of Prometheus, keyed by (alertname, database), with their annotations.
fn firing(prom: &Prom) -> BTreeMap<(String, String), Json> {
    let (status, body) = crate::support::prometheus::get(&format!("{}/api/v1/alerts", prom.base))
        .expect("the alerts API");
    assert_eq!(status, 200, "{body}");
    let j: Json = serde_json::from_str(&body).unwrap();
    (j["data"]["alerts"].as_array().cloned().unwrap_or_default())
        .into_iter()
        .filter(|a| a["state"] == "firing")
        .filter_map(|a| {
            let l = &a["labels"];
            Some((
                (
                    l["alertname"].as_str()?.to_string(),
                    l["database"].as_str()?.to_string(),
                ),
                a.clone(),
            ))
        })
        .collect()
}

#[test]
fn a_failing_archiver_or_an_inactive_slot_pages_before_postgresql_panics_on_its_full_filesystem() {
    let test = "a_failing_archiver_or_an_inactive_slot_pages_before_postgresql_panics_on_its_full_filesystem";
    let Some(bin) = setup(test) else { return };
    if !support::require_cmd(test, "prometheus", "prometheus") {
        return;
    }
    let fill = fill_time();
    let archiver = case(
        &bin,
        "failing archiver",
        "SsdwatchPostgresArchiverFillingFilesystem",
        "SsdwatchPostgresSlotFillingFilesystem",
        "",
    );
    // Archiving works here: only the slot holds WAL back.
    let slot = case(
        &bin,
        "inactive slot",
        "SsdwatchPostgresSlotFillingFilesystem",
        "SsdwatchPostgresArchiverFillingFilesystem",
        "archive_command = '/bin/true'\n",
    );
    slot.pg
        .sql("select pg_create_physical_replication_slot('standby1', true)");
    let cases = [&archiver, &slot];

    let d = daemon(&[archiver.fs.mp(), slot.fs.mp()]);
    let work = tempfile::tempdir().unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/prometheus");
    let rule_files: Vec<PathBuf> = ["ssdwatch.rules.yml", "ssdwatch.alerts.yml"]
        .iter()
        .map(|f| rules.join(f))
        .collect();
    let (mut prometheus, prom) = start_prometheus(
        work.path(),
        &rule_files,
        d.base.trim_start_matches("http://"),
    );
    for c in cases {
        prom.wait_for(
            &format!("{}: its server and filesystem in Prometheus", c.what),
            &format!(
                "ssdwatch_database_up{{database=\"{}\"}} == 1 and on (instance) ssdwatch_filesystem_avail_bytes{{mountpoint=\"{}\"}}",
                c.label,
                c.fs.mp()
            ),
            Duration::from_secs(120),
        );
    }
    println!(
        "filling {} MiB ext4 filesystems in {:.1} min each ({FILL_MINUTES_ENV})",
        FS_MIB,
        fill.as_secs_f64() / 60.0
    );

    // Both fill at once; the main thread notes each page as Prometheus serves it.
    let (crashes, seen) = std::thread::scope(|s| {
        let prom = &prom;
        let writers: Vec<_> = cases
            .iter()
            .map(|&c| s.spawn(move || fill_until_the_server_stops(c, prom, fill)))
            .collect();
        let mut seen: BTreeMap<(String, String), (f64, Json)> = BTreeMap::new();
        while !writers.iter().all(|w| w.is_finished()) {
            prometheus.assert_running();
            for (k, a) in firing(prom) {
                seen.entry(k).or_insert((unix_now(), a));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let crashes: Vec<Crash> = writers
            .into_iter()
            .map(|w| w.join().expect("a writer panicked"))
            .collect();
        (crashes, seen)
    });

    // After the crash: the server is down on its full filesystem, and still watched.
    for c in cases {
        prom.wait_for(
            &format!("{}: SsdwatchDatabaseDownOnFullFilesystem", c.what),
            &format!(
                "ALERTS{{alertname=\"SsdwatchDatabaseDownOnFullFilesystem\",alertstate=\"firing\",database=\"{}\",mountpoint=\"{}\"}}",
                c.label,
                c.fs.mp()
            ),
            STALLED,
        );
        let m = d.get("/metrics");
        let up = format!("ssdwatch_database_up{{database=\"{}\"}}", c.label);
        assert_eq!(value(&m, &up), Some(0.0), "{}: {m}", c.what);
        assert_eq!(newest(&prom, &up), Some(0.0), "{}", c.what);
        assert!(
            m.contains(&format!(
                "ssdwatch_database_info{{database=\"{}\",kind=\"postgresql\"",
                c.label
            )),
            "{}: the data directory is no longer watched: {m}",
            c.what
        );
        assert!(
            c.pg.postmaster_pid().is_none_or(|p| !alive(p)),
            "{}: the server runs again",
            c.what
        );
    }

    let mut report = Vec::new();
    for (c, crash) in cases.iter().zip(&crashes) {
        let page = first(&prom, c.page, "firing", &c.label, crash.started).unwrap_or_else(|| {
            panic!(
                "{}: {} never fired; PANIC at {:.1}: {}",
                c.what, c.page, crash.panic_at, crash.panic_line
            )
        });
        let pending = first(&prom, c.page, "pending", &c.label, crash.started);
        let line = format!(
            "{}: {} MiB consumed in {:.0} s ({:.0} s waiting for the monitor); {} pending at +{:.0} s, \
             page at +{:.0} s, PANIC at +{:.0} s{}: the page {:.0} s before the PANIC",
            c.what,
            crash.consumed >> 20,
            crash.panic_at - crash.started,
            crash.waited_for_monitor,
            c.page,
            pending.map_or(f64::NAN, |p| p - crash.started),
            page - crash.started,
            crash.panic_at - crash.started,
            crash
                .shut_down_at
                .map(|t| format!(" (shut down at +{:.0} s)", t - crash.started))
                .unwrap_or_default(),
            crash.panic_at - page
        );
        println!("{line}");
        println!("{}: {}", c.what, crash.panic_line);
        report.push(line);
        assert!(
            crash.panic_line.contains("No space left on device"),
            "{}: {}",
            c.what,
            crash.panic_line
        );
        assert!(
            page < crash.panic_at,
            "{}: the page came after the server's PANIC\n{}",
            c.what,
            report.join("\n")
        );
        // The page names the cause and the filesystem.
        let (_, alert) = seen
            .get(&(c.page.to_string(), c.label.clone()))
            .unwrap_or_else(|| panic!("{}: {} not seen firing in the alerts API", c.what, c.page));
        assert_eq!(alert["labels"]["mountpoint"], c.fs.mp(), "{alert}");
        assert_eq!(alert["labels"]["severity"], "critical", "{alert}");
        let summary = alert["annotations"]["summary"].as_str().unwrap_or_default();
        assert!(summary.contains(c.fs.mp()), "{summary}");
        // And only that cause.
        assert_eq!(
            first(&prom, c.not, "firing", &c.label, crash.started),
            None,
            "{}: {} fired too",
            c.what,
            c.not
        );
    }
    let (_, a) = &seen[&(archiver.page.to_string(), archiver.label.clone())];
    let summary = a["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("WAL waiting for the archiver"),
        "{summary}"
    );
    let (_, a) = &seen[&(slot.page.to_string(), slot.label.clone())];
    assert_eq!(a["labels"]["slot"], "standby1", "{a}");
    prometheus.stop();
    drop(d);
}
