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

#[test]
fn a_hung_fuse_mount_does_not_stall_the_scrape_or_pile_up_threads() {
    if !require_root("hung FUSE mount") {
        return;
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        skip(
            "hung FUSE mount",
            "no /dev/fuse (FUSE not available in this kernel/container)",
        );
        return;
    }
    if Command::new(system_python()).args([
            "-c",
            "import importlib.util as u, sys; sys.exit(0 if u.find_spec('fusepy') or u.find_spec('fuse') else 1)",
        ]).status().map(|s| !s.success()).unwrap_or(true) {
        skip("hung FUSE mount", "python3 fusepy missing (apt-get install python3-fusepy)");
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
        regex::escape(healthy.mp()),
        regex::escape(hung_mp.to_str().unwrap())
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

use std::process::Command;
