//! A hung FUSE mount (statfs never returns, like a dead NFS server) doesn't stall the scrape:
//! /metrics keeps answering fast, that mount shows as stuck, the others are fine, and the
//! daemon's thread count stays bounded however many samples go by.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

mod support;

use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::config::Config;
use std::time::{Duration, Instant};
use support::*;

/// The tests here count the whole test process's threads: they must not run side by side.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// More hung mounts than the guard ever holds threads for mounts that hung before (32): the
/// healthy filesystem keeps its size in every scrape, each hung mount shows as stuck, and the
/// collector's health counts them.
#[test]
fn forty_hung_fuse_mounts_never_hide_the_healthy_filesystem() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !fuse_available("forty hung FUSE mounts") {
        return;
    }
    const HUNG: usize = 40;
    let healthy = LoopFs::new(32);
    let hung: Vec<HungFuse> = (0..HUNG).map(|_| HungFuse::new()).collect();
    let hung_mps: Vec<std::path::PathBuf> = hung
        .iter()
        .map(|h| h.mountpoint.canonicalize().unwrap_or(h.mountpoint.clone()))
        .collect();
    let mut include = vec![format!("^{}$", regex_lite::escape(healthy.mp()))];
    include.extend(
        hung_mps
            .iter()
            .map(|p| format!("^{}$", regex_lite::escape(p.to_str().unwrap()))),
    );
    let mut config = Config::default();
    config.state_dir = healthy.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        statfs_timeout: Duration::from_millis(200),
        mount_points_include: Some(include),
        fs_types_exclude: vec![],
        ..FilesystemConfig::default()
    };
    let mut seen: Vec<&std::path::Path> = vec![&healthy.mountpoint];
    seen.extend(hung_mps.iter().map(|p| p.as_path()));
    let daemon = Daemon::start(config, roots_seeing(&seen));
    let healthy_label = format!("mountpoint=\"{}\"", healthy.mp());
    let stuck = |m: &str| {
        hung_mps
            .iter()
            .filter(|p| {
                value_matching(
                    m,
                    "ssdwatch_filesystem_stuck",
                    &format!("mountpoint=\"{}\"", p.display()),
                ) == Some(1.0)
            })
            .count()
    };
    daemon.wait_metrics("every hung mount stuck", Duration::from_secs(30), |m| {
        stuck(m) == HUNG
    });
    // From then on, ten seconds of scrapes: the healthy filesystem has its size every time.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let m = daemon.get("/metrics");
        assert!(
            value_matching(&m, "ssdwatch_filesystem_avail_bytes", &healthy_label)
                .is_some_and(|v| v > 0.0),
            "the healthy filesystem lost its series:\n{m}"
        );
        assert_eq!(stuck(&m), HUNG);
        assert_eq!(
            value(&m, "ssdwatch_filesystem_statfs_hung_threads"),
            Some(HUNG as f64)
        );
        assert_eq!(
            value(
                &m,
                "ssdwatch_collector_failing_items{collector=\"filesystem\"}"
            ),
            Some(HUNG as f64)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_hung_fuse_mount_does_not_stall_the_scrape_or_pile_up_threads() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !fuse_available("hung FUSE mount") {
        return;
    }
    let healthy = LoopFs::new(32);
    let mut hung = HungFuse::new();
    let hung_mp = hung
        .mountpoint
        .canonicalize()
        .unwrap_or(hung.mountpoint.clone());
    let include = format!(
        "^({}|{})$",
        regex_lite::escape(healthy.mp()),
        regex_lite::escape(hung_mp.to_str().unwrap())
    );
    let mut config = Config::default();
    config.state_dir = healthy.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        statfs_timeout: Duration::from_millis(300),
        mount_points_include: Some(vec![include]),
        fs_types_exclude: vec![],
        ..FilesystemConfig::default()
    };
    let daemon = Daemon::start(config, roots_seeing(&[&healthy.mountpoint, &hung_mp]));
    let stuck_series = |m: &str| {
        value_matching(
            m,
            "ssdwatch_filesystem_stuck",
            &format!("mountpoint=\"{}\"", hung_mp.display()),
        )
    };
    let m = daemon.wait_metrics(
        "the FUSE mount to show as stuck",
        Duration::from_secs(10),
        |m| stuck_series(m) == Some(1.0),
    );
    // The healthy mount is unaffected.
    let healthy_label = format!("mountpoint=\"{}\"", healthy.mp());
    assert_eq!(
        value_matching(&m, "ssdwatch_filesystem_stuck", &healthy_label),
        Some(0.0)
    );
    assert!(value_matching(&m, "ssdwatch_filesystem_avail_bytes", &healthy_label).unwrap() > 0.0);
    assert_eq!(
        value_matching(
            &m,
            "ssdwatch_filesystem_size_bytes",
            &format!("mountpoint=\"{}\"", hung_mp.display())
        ),
        None,
        "a stuck mount has no (stale) size"
    );
    assert_eq!(
        value(&m, "ssdwatch_filesystem_statfs_hung_threads"),
        Some(1.0),
        "one thread held by the hung mount"
    );

    // Over ten more sample intervals: every scrape is fast, and threads don't pile up.
    let base_threads = thread_count();
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let t = Instant::now();
        let m = daemon.get("/metrics");
        slowest = slowest.max(t.elapsed());
        assert_eq!(stuck_series(&m), Some(1.0));
        assert_eq!(
            value(&m, "ssdwatch_filesystem_statfs_hung_threads"),
            Some(1.0)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let threads = thread_count();
    eprintln!("slowest scrape {slowest:?}; threads {base_threads} -> {threads}");
    // A scrape that waited on the hung mount would never return; the bound only has to be far
    // below that and above what a loaded 2-core machine needs for a fresh connection (here ~2 ms).
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape took {slowest:?}"
    );
    // Piling up would add a thread per sample (ten here); a little slack for the runtime's own
    // blocking pool coming and going.
    assert!(
        threads <= base_threads + 4,
        "threads grew from {base_threads} to {threads}"
    );

    // Killing the server releases the hung call (ENOTCONN). The mount is still listed, so the
    // next sample asks again: no longer stuck, but failing, and still without sizes.
    hung.kill_server_only();
    let hung_label = format!("mountpoint=\"{}\"", hung_mp.display());
    let m = daemon.wait_metrics(
        "the mount to be retried after the server died",
        Duration::from_secs(10),
        |m| stuck_series(m) == Some(0.0),
    );
    assert_eq!(
        value_matching(&m, "ssdwatch_filesystem_device_error", &hung_label),
        Some(1.0),
        "statvfs on a mount with a dead server fails"
    );
    assert_eq!(
        value_matching(&m, "ssdwatch_filesystem_size_bytes", &hung_label),
        None
    );
    assert_eq!(
        value(&m, "ssdwatch_filesystem_statfs_hung_threads"),
        Some(0.0),
        "the released thread is gone"
    );
    assert!(value_matching(&m, "ssdwatch_filesystem_avail_bytes", &healthy_label).unwrap() > 0.0);

    // Unmounted, it leaves the exposition.
    hung.unmount();
    daemon.wait_metrics(
        "the unmounted mount to leave",
        Duration::from_secs(10),
        |m| stuck_series(m).is_none(),
    );
}
