//! A hung FUSE mount (statfs never returns, like a dead NFS server) doesn't stall the scrape:
//! /metrics keeps answering fast, that mount shows as stuck, the others are fine, and the
//! daemon's thread count stays bounded however many samples go by.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support::*;
use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::config::Config;
use std::time::{Duration, Instant};

/// Samples of the filesystem collector seen so far, told apart by their timestamps (a scrape
/// every 100 ms against a 1 s interval sees each).
struct Samples(Vec<f64>);

impl Samples {
    fn see(&mut self, m: &str) -> usize {
        let t = value(
            m,
            "ssdwatch_collector_last_success_timestamp_seconds{collector=\"filesystem\"}",
        );
        if let Some(t) = t
            && self.0.last() != Some(&t)
        {
            self.0.push(t);
        }
        self.0.len()
    }
}

/// Polls /metrics until `pred` holds, at most `samples` filesystem samples after the first
/// one counted by `seen` (and a generous wall-clock deadline, for a machine that is slow to
/// sample at all); returns the exposition and the number of samples it took.
fn within_samples(
    daemon: &Daemon,
    seen: &mut Samples,
    what: &str,
    samples: usize,
    pred: impl Fn(&str) -> bool,
) -> (String, usize) {
    let base = seen.0.len();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = daemon.get("/metrics");
        let n = seen.see(&m) - base;
        if n > 0 && pred(&m) {
            return (m, n);
        }
        assert!(
            n < samples && Instant::now() < deadline,
            "{what}: not after {n} samples; last scrape:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// 50 hung FUSE mounts, more than the guard ever holds threads for mounts that hung before
/// (32) and more than its workers take in a few slices: a healthy filesystem listed after all
/// of them when the daemon starts (a tmpfs: no block device, so the guard tries it last of the
/// new mounts) has its size in the first sample or the second, as has one that appears once the
/// 50 are known to be stuck; the ext4 one never loses its series; each hung mount is stuck and
/// holds one thread.
#[test]
fn fifty_hung_fuse_mounts_never_hide_a_healthy_filesystem() {
    if !fuse_device_available("fifty hung FUSE mounts") {
        return;
    }
    // Within the door's share for statfs (64 threads, 8 of them kept for the workers of mounts
    // that answered before): each hung mount holds a thread and the healthy ones behind them
    // are still reached. Beyond 56, the rest get no thread (the `statfs::guard` unit tests).
    const HUNG: usize = 50;
    let healthy = LoopFs::new(32);
    let hung = HungFuseSet::mount(HUNG);
    let late_dir = tempfile::tempdir().unwrap();
    let late_dir = late_dir.path().canonicalize().unwrap();
    let (behind_mp, late_mp) = (late_dir.join("behind"), late_dir.join("late"));
    // Mounted after the 50: listed after them in the mount table.
    let _behind = Tmpfs::mount(&behind_mp, "size=16m");
    let mut include = vec![format!(
        "^{}/hung[0-9]{{3}}$",
        regex_lite::escape(hung.dir.path().canonicalize().unwrap().to_str().unwrap())
    )];
    for p in [
        healthy.mp(),
        behind_mp.to_str().unwrap(),
        late_mp.to_str().unwrap(),
    ] {
        include.push(format!("^{}$", regex_lite::escape(p)));
    }
    let mut config = Config::default();
    config.state_dir = healthy.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        // 50 hung calls take 7 slices of 1/32 of this, a fifth of it: room for a loaded machine.
        statfs_timeout: Duration::from_secs(1),
        mount_points_include: Some(include),
        fs_types_exclude: vec![],
        ..FilesystemConfig::default()
    };
    let mut seen: Vec<&std::path::Path> = vec![&healthy.mountpoint, &behind_mp];
    seen.extend(hung.mountpoints.iter().map(|p| p.as_path()));
    let daemon = Daemon::start(config, roots_seeing(&seen));
    let label = |mp: &str| format!("mountpoint=\"{mp}\"");
    let has_size = |m: &str, mp: &str| {
        value_matching(m, "ssdwatch_filesystem_size_bytes", &label(mp)).is_some_and(|v| v > 0.0)
            && value_matching(m, "ssdwatch_filesystem_avail_bytes", &label(mp))
                .is_some_and(|v| v > 0.0)
    };
    let stuck = |m: &str| {
        hung.mps()
            .filter(|mp| value_matching(m, "ssdwatch_filesystem_stuck", &label(mp)) == Some(1.0))
            .count()
    };
    let mut samples = Samples(Vec::new());
    let behind = behind_mp.to_str().unwrap();
    let (_, n) = within_samples(
        &daemon,
        &mut samples,
        "the tmpfs listed after 50 new hung mounts has its size",
        2,
        |m| has_size(m, behind) && has_size(m, healthy.mp()),
    );
    eprintln!("the tmpfs behind 50 new hung mounts: sampled in filesystem sample {n}");
    daemon.wait_metrics("every hung mount stuck", Duration::from_secs(60), |m| {
        stuck(m) == HUNG
    });

    // A healthy filesystem that appears while the 50 are hung.
    let _late = Tmpfs::mount(&late_mp, "size=8m");
    let late = late_mp.to_str().unwrap();
    let (_, n) = within_samples(
        &daemon,
        &mut samples,
        "a tmpfs mounted while 50 mounts hang has its size",
        2,
        |m| has_size(m, late),
    );
    eprintln!("the tmpfs mounted while 50 hang: sampled in filesystem sample {n}");

    // From then on, five samples' worth of scrapes: every healthy filesystem has its size every
    // time, every hung mount is stuck and holds one thread.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let m = daemon.get("/metrics");
        for mp in [healthy.mp(), behind, late] {
            assert!(has_size(&m, mp), "{mp} lost its series:\n{m}");
        }
        assert_eq!(stuck(&m), HUNG);
        assert_eq!(
            value(&m, "ssdwatch_filesystem_statfs_hung_threads"),
            Some(HUNG as f64)
        );
        // The door counts them as the filesystem collector's stuck calls.
        assert_eq!(
            value(
                &m,
                "ssdwatch_blocking_stuck_calls{collector=\"filesystem\"}"
            ),
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
    // It counts the whole process's threads, so it runs in a process of its own.
    if !alone(
        module_path!(),
        "a_hung_fuse_mount_does_not_stall_the_scrape_or_pile_up_threads",
    ) {
        return;
    }
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
