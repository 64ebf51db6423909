//! The history store inside the running daemon, on this machine's real filesystems: it keeps
//! what the collectors see (readable with the store's own API while the daemon writes), reports
//! its health as the `history` collector, and a state directory it can't write or a damaged
//! file costs the history only: every other collector goes on.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support;

use crate::support::*;
use ssdwatch::config::Config;
use ssdwatch::history::Store;
use std::time::Duration;

fn config(state_dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.state_dir = state_dir.to_path_buf();
    c.collectors.smart.enabled = false;
    c.collectors.probe.enabled = false;
    c.collectors.filesystem.interval = Duration::from_secs(1);
    c.collectors.diskstats.interval = Duration::from_secs(1);
    c.history.flush_interval = Duration::from_secs(1);
    c.history.raw_interval = Duration::from_secs(1);
    c
}

fn success(m: &str, collector: &str) -> Option<f64> {
    value(
        m,
        &format!("ssdwatch_collector_success{{collector=\"{collector}\"}}"),
    )
}

#[test]
fn the_daemon_keeps_the_filesystems_it_sees_in_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(config(dir.path()), ssdwatch::Roots::default());
    let m = daemon.wait_metrics("records written", Duration::from_secs(20), |m| {
        value(m, "ssdwatch_history_records_written_total").is_some_and(|n| n > 0.0)
    });
    assert_eq!(success(&m, "history"), Some(1.0), "{m}");
    assert!(value(&m, "ssdwatch_history_store_bytes").is_some_and(|b| b > 0.0));
    // Read while the daemon writes (WAL: readers never block the writer). The first records
    // written may be another collector's (a drive's): the root's row comes with the
    // filesystem collector's first commit.
    let store = Store::open(dir.path(), &Default::default()).expect("open the store");
    let mut fs = store.filesystems().unwrap();
    wait_until(
        "the root filesystem's first commit",
        Duration::from_secs(20),
        || {
            fs = store.filesystems().unwrap();
            fs.iter().any(|f| f.key.mountpoint == "/")
        },
    );
    assert!(
        fs.iter().any(|f| f.key.mountpoint == "/"),
        "the root filesystem is kept: {fs:?}"
    );
    let root = fs.iter().find(|f| f.key.mountpoint == "/").unwrap();
    let points = store.fs_series(root.id, 0, i64::MAX).unwrap();
    assert!(!points.is_empty());
    assert!(points.iter().all(|p| p.size.last > 0.0));
}

#[test]
fn a_state_dir_that_cannot_be_written_costs_only_the_history() {
    let dir = tempfile::tempdir().unwrap();
    // A directory under a regular file can't be made, root or not.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let daemon = Daemon::start(config(&file.join("state")), ssdwatch::Roots::default());
    let m = daemon.wait_metrics("the history to report", Duration::from_secs(20), |m| {
        success(m, "history") == Some(0.0) && success(m, "filesystem") == Some(1.0)
    });
    assert!(
        value(&m, "ssdwatch_collector_errors_total{collector=\"history\"}")
            .is_some_and(|n| n >= 1.0),
        "{m}"
    );
    assert!(
        m.contains("ssdwatch_filesystem_size_bytes{mountpoint=\"/\""),
        "{m}"
    );
    assert_eq!(daemon.get("/-/healthy").trim(), "OK");
}

/// The real binary with a state directory it can't create (under a regular file: refused to
/// root too, as a missing directory is to the unprivileged user): the history's fault is said
/// once at WARN, stays open between the once-a-minute retries (flushes every second), and is
/// not said to have recovered when the daemon stops (before: "history.db: recovered" at each
/// flush and at shutdown).
#[test]
fn a_state_dir_that_cannot_be_made_is_never_said_to_have_recovered() {
    use crate::support::binary;
    let dir = binary::host();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let state = blocker.join("state");
    std::fs::write(
        dir.path().join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n  smart:\n    enabled: false\nhistory:\n  flush_interval: 1s\n",
            state.display()
        ),
    )
    .unwrap();
    let mut d = binary::Daemon::start_in(dir, &[]);
    let history_db = state.join("history.db").display().to_string();
    assert!(
        d.wait_log(&history_db, Duration::from_secs(20)),
        "no word of the history store:\n{}",
        d.log_text()
    );
    // Three flushes at least, none of which retries the store (once a minute).
    let seen = |d: &binary::Daemon| {
        let text = d.log_text();
        text.lines().filter(|l| l.contains(&history_db)).count()
    };
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(seen(&d), 1, "{}", d.log_text());
    d.signal(nix::sys::signal::Signal::SIGTERM);
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", d.log_text());
    let log = d.log_text();
    let about: Vec<&str> = log.lines().filter(|l| l.contains(&history_db)).collect();
    assert_eq!(about.len(), 1, "{log}");
    assert!(about[0].contains("level=WARN"), "{log}");
    assert!(!log.contains("recovered"), "{log}");
}

#[test]
fn a_damaged_store_is_moved_aside_and_a_new_one_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("history.db"), vec![0x5a; 64 << 10]).unwrap();
    let daemon = Daemon::start(config(dir.path()), ssdwatch::Roots::default());
    let m = daemon.wait_metrics("a new store", Duration::from_secs(20), |m| {
        value(m, "ssdwatch_history_records_written_total").is_some_and(|n| n > 0.0)
    });
    assert_eq!(success(&m, "history"), Some(1.0), "{m}");
    let aside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("history.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
}

/// benches/history_io.sh (bytes the daemon writes a day with the history on) in its short mode,
/// so the script can't rot; the figure itself comes from the long run (docs/history.md).
#[test]
fn the_history_io_bench_runs_in_its_short_mode() {
    if !require_cmd("history io bench", "curl", "curl") {
        return;
    }
    let text = run_bench_short(
        "history_io.sh",
        std::path::Path::new(env!("CARGO_BIN_EXE_ssdwatch")),
    );
    assert!(text.contains("MiB/day"), "{text}");
}

/// benches/discard_io.sh in its short mode: a real ext4 on a loop device mounted `-o discard`
/// with a churn, the daemon sampling the real /sys every second. The script fails unless the
/// daemon saw discards on that device; the write figure comes from the long run
/// (docs/benchmarks.md).
#[test]
fn the_online_discard_write_bench_runs_in_its_short_mode() {
    if !support::require_root("online discard write bench")
        || !require_cmd("online discard write bench", "curl", "curl")
        || !require_cmd("online discard write bench", "mkfs.ext4", "e2fsprogs")
    {
        return;
    }
    let text = run_bench_short(
        "discard_io.sh",
        std::path::Path::new(env!("CARGO_BIN_EXE_ssdwatch")),
    );
    assert!(text.contains("discards completed on loop"), "{text}");
    assert!(text.contains("MiB/day"), "{text}");
}

/// A drive's row carries the bytes the kernel saw discarded on it (diskstats) beside what its
/// SMART log says: the fixture host's nvme0n1 counts 93,810,688 discarded sectors, its SMART
/// comes from a real capture through the fake smartctl.
#[test]
fn a_drive_row_carries_its_discarded_bytes_and_its_health_reading() {
    let host = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts/nvme-partitions");
    let dir = tempfile::tempdir().unwrap();
    let fake = support::smart::Fake::new();
    // Every drive of the host answers with the same real capture.
    std::fs::write(
        fake.dir.path().join("mode"),
        format!(
            "ok {}\n",
            support::smart::smart_fixture("nvme-samsung-970evoplus.json").display()
        ),
    )
    .unwrap();
    let mut c = config(dir.path());
    c.collectors.filesystem.enabled = false;
    c.collectors.smart.enabled = true;
    c.collectors.smart.smartctl_path = fake.bin();
    let roots = ssdwatch::Roots {
        sys: host.join("sys"),
        proc: host.join("proc"),
        rootfs: host.join("rootfs"),
        statvfs_fixture: Some(host.join("statvfs.yaml")),
        probe_fixture: None,
    };
    let daemon = Daemon::start(c, roots);
    let store = Store::open(dir.path(), &Default::default()).expect("open the store");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let discarded = loop {
        let found = store.drives().unwrap().into_iter().find_map(|d| {
            let points = store.drive_series(d.id, 0, i64::MAX).ok()?;
            points.iter().rev().find_map(|p| p.discarded_bytes)
        });
        if let Some(b) = found {
            break b;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no drive row with discarded bytes: {}",
            daemon.get("/metrics")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(discarded, 93_810_688.0 * 512.0);
    // Beside it, the reading's health as the SMART collector normalized it (the capture's
    // error log holds 22 entries, its drive counted no time above the warning temperature).
    let health = store
        .drives()
        .unwrap()
        .into_iter()
        .find_map(|d| store.drive_health(d.id, 0, i64::MAX).ok()?.pop())
        .expect("a health reading beside the drive row");
    assert_eq!(health.health.error_log_entries, Some(22), "{health:?}");
    assert_eq!(health.health.above_warning_seconds, Some(0), "{health:?}");
}

/// benches/rss.sh (the daemon's resident memory at defaults, history on, on the generated large
/// host) in its short mode, so the script can't rot; the figure comes from the release run.
#[test]
fn the_rss_bench_runs_in_its_short_mode() {
    if !require_cmd("rss bench", "curl", "curl") {
        return;
    }
    let text = run_bench_short(
        "rss.sh",
        std::path::Path::new(env!("CARGO_BIN_EXE_ssdwatch")),
    );
    assert!(text.contains("VmRSS over 4 s"), "{text}");
    assert!(text.contains("series"), "{text}");
}
