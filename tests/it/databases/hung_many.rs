//! Twenty watched database directories and a btrfs on mounts that never answer (FUSE with no
//! server, as a dead NFS server is), in the real daemon: every other collector keeps sampling (each is seen
//! publishing after the hang began, and reads success 1), the hung items are reported as
//! stuck, never as fresh, the daemon holds one thread per hung item, and SIGTERM still ends it
//! well within the unit's TimeoutStopSec with the history's final flush.

use crate::support;
use crate::support::binary::Daemon;
use std::time::{Duration, Instant};

/// A btrfs on `mp` as the host's /sys and mount table show it (the layers fixture's allocation
/// tree, one device, loop0, 7:0), so the layers collector asks its device ioctl there: the
/// mount never answers, as a wedged btrfs's doesn't.
fn wedged_btrfs(host: &std::path::Path, mp: &std::path::Path) {
    let uuid = "d03506f9-0322-446b-9541-bd330f3a2914";
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/layers/btrfs-sysfs/fs/btrfs")
        .join(uuid);
    let to = host.join("sys/fs/btrfs").join(uuid);
    copy_tree(&from, &to);
    std::fs::create_dir_all(to.join("devinfo/1")).unwrap();
    let loop0 = host.join("sys/devices/virtual/block/loop0");
    std::fs::create_dir_all(&loop0).unwrap();
    std::fs::write(loop0.join("dev"), "7:0\n").unwrap();
    std::fs::write(loop0.join("size"), "2097152\n").unwrap();
    std::os::unix::fs::symlink(
        "../devices/virtual/block/loop0",
        host.join("sys/block/loop0"),
    )
    .unwrap();
    let mut mi = std::fs::read_to_string(host.join("proc/self/mountinfo")).unwrap();
    mi.push_str(&format!(
        "61 1 7:0 / {} rw,relatime - btrfs /dev/loop0 rw,space_cache=v2\n",
        mp.display()
    ));
    std::fs::write(host.join("proc/self/mountinfo"), mi).unwrap();
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if t.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn of(text: &str, family: &str, collector: &str) -> Option<f64> {
    support::value(text, &format!("{family}{{collector=\"{collector}\"}}"))
}

#[test]
fn twenty_hung_database_directories_stop_no_other_collector_and_no_shutdown() {
    let test = "twenty_hung_database_directories_stop_no_other_collector_and_no_shutdown";
    if !support::require_root(test) || !support::fuse_available(test) {
        return;
    }
    // Twenty database directories and one btrfs, each on a mount that never answers.
    let hung = support::HungFuseSet::mount(21);
    let dir = support::binary::host();
    let btrfs_mp = hung.mountpoints[20].clone();
    wedged_btrfs(dir.path(), &btrfs_mp);
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-layers");
    let mut cfg = format!(
        "state_dir: {}\n\
         collectors:\n  smart:\n    enabled: false\n  probe:\n    enabled: false\n\
         \x20 layers:\n    interval: 1s\n    timeout: 500ms\n    dmsetup_path: {}\n    zpool_path: {}\n    zfs_path: {}\n\
         \x20 filesystem:\n    interval: 1s\n  diskstats:\n    interval: 1s\n  topology:\n    interval: 1s\n\
         \x20 databases:\n    discover: false\n    interval: 1s\n    timeout: 500ms\n    watch:\n",
        dir.path().join("state").display(),
        fake.join("dmsetup").display(),
        fake.join("zpool").display(),
        fake.join("zfs").display(),
    );
    for (i, mp) in hung.mps().take(20).enumerate() {
        cfg.push_str(&format!(
            "      - name: db{i:02}\n        path: {mp}/data\n"
        ));
    }
    cfg.push_str("history:\n  enabled: true\n  flush_interval: 1s\n");
    std::fs::write(dir.path().join("ssdwatch.yaml"), cfg).unwrap();
    // The host's own root, where the hung mounts are.
    let mut cmd = support::binary::command(dir.path(), &[]);
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut fixed = std::process::Command::new(cmd.get_program());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        fixed.arg(a);
        if a == "--path.rootfs" {
            it.next();
            fixed.arg("/");
        }
    }
    cmd = fixed;
    cmd.env("FAKE_LAYERS", "/nonexistent");
    let mut d = Daemon::spawn(dir, cmd);

    // Every watched directory is stuck, and the btrfs's device ioctl.
    let deadline = Instant::now() + Duration::from_secs(120);
    let hang_began = loop {
        let m = d.metrics();
        if of(&m, "ssdwatch_blocking_stuck_calls", "databases") == Some(20.0)
            && of(&m, "ssdwatch_blocking_stuck_calls", "layers") == Some(1.0)
        {
            break Instant::now();
        }
        assert!(Instant::now() < deadline, "never 20 stuck calls:\n{m}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Each other collector publishes after that, and reads success 1; the stuck items are
    // failing items of the databases collector, never fresh figures.
    let others = ["filesystem", "diskstats", "topology", "history", "layers"];
    let mut seen_fresh = std::collections::BTreeSet::new();
    let mut last = String::new();
    // And the next samples refuse each hung item instead of stacking a thread on it.
    let refused = |m: &str| of(m, "ssdwatch_blocking_refused_total", "databases").unwrap_or(0.0);
    while seen_fresh.len() < others.len() || refused(&last) < 20.0 {
        let m = d.metrics();
        let since = hang_began.elapsed().as_secs_f64();
        for c in others {
            let age = of(&m, "ssdwatch_collector_sample_age_seconds", c);
            if age.is_some_and(|a| a < since) {
                assert_eq!(
                    of(&m, "ssdwatch_collector_success", c),
                    Some(1.0),
                    "{c}:\n{m}"
                );
                seen_fresh.insert(c);
            }
        }
        assert_eq!(
            of(&m, "ssdwatch_collector_failing_items", "databases"),
            Some(20.0),
            "{m}"
        );
        assert!(
            !m.contains("database=\"db0"),
            "no figure of a hung directory:\n{m}"
        );
        // One thread per hung item, however many samples pass.
        assert!(
            of(&m, "ssdwatch_blocking_threads", "databases").is_some_and(|t| t <= 20.0),
            "{m}"
        );
        last = m;
        assert!(
            Instant::now() < deadline,
            "collectors never seen after the hang began: {seen_fresh:?}\n{last}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let refused = refused(&last);

    // SIGTERM: the daemon ends, its history flushed, well within systemd's TimeoutStopSec=20s.
    let t0 = Instant::now();
    d.signal(nix::sys::signal::Signal::SIGTERM);
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "still running 20 s after SIGTERM:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = t0.elapsed();
    assert!(status.success(), "{status}:\n{}", d.log_text());
    assert!(
        !d.log_text().contains("the final flush"),
        "the final flush failed:\n{}",
        d.log_text()
    );
    println!(
        "20 hung directories and a wedged btrfs: stuck reported, other collectors fresh, {refused} calls refused; SIGTERM to exit {took:?}"
    );
    drop(d);
    drop(hung);
}

/// One process anywhere whose data directory is on a mount that never answers (a `postgres`
/// started on a dead NFS export) costs its own item only: the healthy server beside it is
/// found at every sample, and a cluster created meanwhile is found at the next sample, not
/// minutes later when a whole search stops timing out.
#[test]
fn one_hung_process_never_freezes_the_discovery_of_the_others() {
    use ssdwatch::collector::Collector;
    use ssdwatch::collector::databases::{DatabasesCollector, DatabasesConfig};
    let test = "one_hung_process_never_freezes_the_discovery_of_the_others";
    if !support::require_root(test) || !support::fuse_available(test) {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hung = support::HungFuseSet::mount(1);
    let host = tempfile::tempdir().unwrap();
    let base = host.path().canonicalize().unwrap();
    let proc_root = base.join("proc");
    let postmaster = |pid: u32, dir: &str| {
        let d = proc_root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (postgres) S 1 {pid} {pid} 0 -1 4194560 31 0 0 0\n"),
        )
        .unwrap();
        std::fs::write(d.join("cmdline"), format!("postgres\0-D\0{dir}\0")).unwrap();
    };
    let cluster = |name: &str, pid: u32| {
        let d = base.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(
            d.join("postmaster.pid"),
            format!("{pid}\n{}\n", d.display()),
        )
        .unwrap();
        postmaster(pid, d.to_str().unwrap());
        d.display().to_string()
    };
    let good = cluster("good", 100);
    postmaster(500, &format!("{}/data", hung.mps().next().unwrap()));
    let cfg = DatabasesConfig {
        interval: Duration::from_secs(1),
        size_interval: Duration::from_secs(60),
        timeout: Duration::from_millis(500),
        ..DatabasesConfig::default()
    };
    let roots = ssdwatch::Roots {
        proc: proc_root.clone(),
        ..ssdwatch::Roots::default()
    };
    let ctx = ssdwatch::collector::Context::new(roots, Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    let info = |label: &str| format!("ssdwatch_database_info{{database=\"{label}\"");
    let mut newer = None;
    for round in 0..4 {
        if round == 2 {
            newer = Some(cluster("newer", 200));
        }
        let s = rt.block_on(c.sample(&ctx)).unwrap();
        let text = support::exposition(&s);
        let errors: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
        assert!(
            text.contains(&info(&good)),
            "round {round}: {text}\n{errors:?}"
        );
        if let Some(n) = &newer {
            assert!(
                text.contains(&info(n)),
                "round {round}: the new cluster at once: {text}"
            );
        }
        let hung_errors: Vec<_> = errors.iter().filter(|e| e.contains("pid 500")).collect();
        assert_eq!(hung_errors.len(), 1, "round {round}: {errors:?}");
        let want = if round == 0 {
            "no answer within"
        } else {
            "not started again until it does"
        };
        assert!(
            hung_errors[0].contains(want),
            "round {round}: {hung_errors:?}"
        );
        assert!(
            !errors.iter().any(|e| e.contains("process search")),
            "{errors:?}"
        );
    }
    drop(hung);
    drop(rt);
}
