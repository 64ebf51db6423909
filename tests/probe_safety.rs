//! Probe safety on real loop-mounted ext4 filesystems (root): every gate that protects a
//! production database host, checked against what actually lands on the filesystem.

mod support;

use ssdwatch::probe::{Outcome, ProbeKind, RunInputs, SkipReason, run_target};
use std::time::Duration;
use support::*;

fn probe_once(
    t: &ssdwatch::probe::TargetConfig,
    state: &std::path::Path,
    window: Duration,
) -> Outcome {
    let roots = host_roots();
    run_target(
        t,
        &RunInputs {
            roots: &roots,
            state_dir: state,
            shared: None,
            kinds: t.kinds.clone(),
            busy_window: window,
        },
    )
}

fn reason(o: &Outcome) -> Option<SkipReason> {
    match o {
        Outcome::Skipped(s) => Some(s.reason),
        Outcome::Ran(_) => None,
    }
}

#[test]
fn a_nearly_full_tiny_filesystem_is_skipped_for_low_space_and_never_goes_below_the_floor() {
    if !require_root("low_space") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    let mut t = small_target(&fs.mountpoint);
    t.file_size_bytes = 16 << 20;
    // Under the floor before the first run: not even the probe directory is made.
    let above = ssdwatch::probe::TargetConfig {
        free_floor_bytes: fs.avail() + (1 << 20),
        ..t.clone()
    };
    let o = probe_once(&above, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    assert!(!fs.probe_dir().exists(), "no probe directory created");
    // Leave 20 MiB: a 16 MiB probe file would take the filesystem under the 8 MiB floor.
    let filler = fs.avail() - (20 << 20);
    run(
        "fallocate",
        &[
            "-l",
            &filler.to_string(),
            fs.mountpoint.join("db").to_str().unwrap(),
        ],
    );
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    assert!(
        !fs.probe_dir().join("probe.dat").exists(),
        "no probe file created"
    );
    assert!(fs.avail() >= t.free_floor_bytes);

    // With a small enough file it fits, and stays above the floor.
    t.file_size_bytes = 4 << 20;
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), None, "{o:?}");
    assert!(fs.avail() >= t.free_floor_bytes, "avail {}", fs.avail());

    // The database grows past the floor: even the existing file is no longer exercised.
    let more = fs.avail() - (4 << 20);
    run(
        "fallocate",
        &[
            "-l",
            &more.to_string(),
            fs.mountpoint.join("db2").to_str().unwrap(),
        ],
    );
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
}

#[test]
fn a_probe_directory_replaced_by_a_symlink_is_refused_and_nothing_is_written_at_its_target() {
    if !require_root("symlink") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    let victim = fs.mountpoint.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, fs.probe_dir()).unwrap();
    let t = small_target(&fs.mountpoint);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::Unsafe), "{o:?}");
    assert!(names_in(&victim).is_empty(), "{:?}", names_in(&victim));

    // The probe file itself as a symlink, or with a second hard link, is refused too.
    std::fs::remove_file(fs.probe_dir()).unwrap();
    assert_eq!(reason(&probe_once(&t, state.path(), Duration::ZERO)), None);
    let pf = fs.probe_dir().join("probe.dat");
    std::fs::hard_link(&pf, victim.join("linked")).unwrap();
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::Unsafe), "{o:?}");
    std::fs::remove_file(victim.join("linked")).unwrap();
    std::fs::remove_file(&pf).unwrap();
    std::fs::write(victim.join("data"), b"precious").unwrap();
    std::os::unix::fs::symlink(victim.join("data"), &pf).unwrap();
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::Unsafe), "{o:?}");
    assert_eq!(std::fs::read(victim.join("data")).unwrap(), b"precious");
}

#[test]
fn a_read_only_remount_is_skipped_as_readonly() {
    if !require_root("readonly") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    let t = small_target(&fs.mountpoint);
    run(
        "mount",
        &["-o", "remount,ro", fs.mountpoint.to_str().unwrap()],
    );
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::Readonly), "{o:?}");
}

#[test]
fn an_exhausted_budget_is_skipped_as_budget_and_survives_a_restart() {
    if !require_root("budget") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    // Room for the probe file and one run of the 4 KiB writers, not two.
    let mut t = small_target(&fs.mountpoint);
    t.kinds = vec![ProbeKind::SyncWrite4k, ProbeKind::RandWrite4k];
    t.budget_bytes_per_day = t.file_size_bytes + 3 * 16 * 4096;
    let cfg = format!(
        "state_dir: {}\ncollectors:\n  probe:\n    targets:\n      - path: {}\n        kinds: [sync_write_4k, rand_write_4k]\n        file_size_bytes: {}\n        free_floor_bytes: {}\n        free_floor_ratio: 0.0\n        budget_bytes_per_day: {}\n",
        state.path().display(),
        fs.mountpoint.display(),
        t.file_size_bytes,
        t.free_floor_bytes,
        t.budget_bytes_per_day
    );
    let cfg_path = state.path().join("config.yaml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let probe_run = || {
        std::process::Command::new(bin())
            .args([
                "--config",
                cfg_path.to_str().unwrap(),
                "probe",
                "run",
                "--json",
                "--target",
            ])
            .arg(&fs.mountpoint)
            .output()
            .unwrap()
    };
    // Each invocation is a new process: only the state file carries the budget over.
    let first = probe_run();
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{text}");
    let v: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(v["outcome"], "ran");
    assert_eq!(v["budget_skipped"].as_array().unwrap().len(), 0, "{text}");
    // The second run can afford only one of the two kinds.
    let second: serde_json::Value = serde_json::from_slice(&probe_run().stdout).unwrap();
    assert_eq!(second["outcome"], "ran");
    assert_eq!(
        second["budget_skipped"],
        serde_json::json!(["rand_write_4k"])
    );
    let third = probe_run();
    assert_eq!(third.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&third.stdout).unwrap();
    assert_eq!(v["reason"], "budget", "{v}");
    let saved = ssdwatch::probe::budget::load(state.path()).unwrap();
    let key = fs.mountpoint.to_str().unwrap();
    assert_eq!(
        saved.targets[key].written_bytes,
        t.file_size_bytes + 3 * 16 * 4096
    );
    // The library path (the daemon's) sees the same state.
    assert_eq!(
        reason(&probe_once(&t, state.path(), Duration::ZERO)),
        Some(SkipReason::Budget)
    );
}

#[test]
fn a_probe_killed_mid_run_leaves_leftovers_that_the_next_start_removes() {
    if !require_root("kill -9") {
        return;
    }
    let fs = LoopFs::no_reserve(1024);
    let state = tempfile::tempdir().unwrap();
    let cfg_path = state.path().join("config.yaml");
    // A big probe file makes its creation long enough to kill in the middle.
    std::fs::write(
        &cfg_path,
        format!(
            "state_dir: {}\ncollectors:\n  probe:\n    targets:\n      - path: {}\n        file_size_bytes: {}\n        budget_bytes_per_day: {}\n        free_floor_bytes: 8388608\n        free_floor_ratio: 0.0\n",
            state.path().display(),
            fs.mountpoint.display(),
            768u64 << 20,
            4u64 << 30
        ),
    )
    .unwrap();
    let child = std::process::Command::new(bin())
        .args([
            "--config",
            cfg_path.to_str().unwrap(),
            "probe",
            "run",
            "--target",
        ])
        .arg(&fs.mountpoint)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let partial = fs.probe_dir().join("probe.dat.partial");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Killed once the file is allocated (fallocate sets its full size) and being filled.
    let allocated = |p: &std::path::Path| p.metadata().is_ok_and(|m| m.len() == 768 << 20);
    while !allocated(&partial) {
        assert!(
            std::time::Instant::now() < deadline,
            "probe file creation never started"
        );
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "probe run ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let left = names_in(&fs.probe_dir());
    assert!(left.contains(&"running".to_string()), "{left:?}");
    assert!(left.contains(&"probe.dat.partial".to_string()), "{left:?}");

    // The half-created file holds the filesystem under this floor; it is removed before the
    // space gate judges, so it can't keep every later run out as low_space.
    let mut t = small_target(&fs.mountpoint);
    t.kinds = vec![ProbeKind::RandRead4k];
    t.free_floor_bytes = 400 << 20;
    assert!(
        fs.avail() < t.free_floor_bytes,
        "the leftover holds the filesystem under the floor: {} bytes available",
        fs.avail()
    );
    let o = probe_once(&t, state.path(), Duration::ZERO);
    let Outcome::Ran(r) = o else { panic!("{o:?}") };
    assert_eq!(r.removed_leftovers, vec!["probe.dat.partial", "running"]);
    assert_eq!(names_in(&fs.probe_dir()), vec!["probe.dat"]);
    assert!(fs.avail() > t.free_floor_bytes);
}

#[test]
fn a_drive_kept_busy_by_a_background_fio_is_skipped_as_busy() {
    if !require_root("busy") || !require_cmd("busy", "fio", "fio") {
        return;
    }
    let fs = LoopFs::no_reserve(256);
    let state = tempfile::tempdir().unwrap();
    let fio = std::process::Command::new("fio")
        .args([
            "--name=bg",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--fsync=1",
            "--size=64m",
            "--time_based",
            "--runtime=30",
            "--numjobs=2",
        ])
        .arg(format!("--directory={}", fs.mountpoint.display()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _fio = KillOnDrop(fio);
    std::thread::sleep(Duration::from_millis(1500));
    let t = small_target(&fs.mountpoint);
    let o = probe_once(&t, state.path(), Duration::from_secs(1));
    assert_eq!(reason(&o), Some(SkipReason::Busy), "{o:?}");
    assert!(!fs.probe_dir().join("probe.dat").exists());
}

#[test]
fn a_second_run_on_a_target_in_use_is_skipped_as_busy_and_leaves_its_files_alone() {
    if !require_root("concurrent run") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    let mut t = small_target(&fs.mountpoint);
    t.kinds = vec![ProbeKind::RandRead4k];
    assert_eq!(reason(&probe_once(&t, state.path(), Duration::ZERO)), None);
    // Another process's run in progress: it holds the probe directory's lock and its marker.
    std::fs::write(fs.probe_dir().join("running"), b"4242\n").unwrap();
    let held = std::fs::File::open(fs.probe_dir()).unwrap();
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::Busy), "{o:?}");
    let Outcome::Skipped(sk) = &o else {
        unreachable!()
    };
    assert!(sk.detail.contains("another probe run"), "{}", sk.detail);
    assert_eq!(names_in(&fs.probe_dir()), vec!["probe.dat", "running"]);
    // Once that run is over, the next one cleans up after it as usual.
    drop(held);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    let Outcome::Ran(r) = o else { panic!("{o:?}") };
    assert_eq!(r.removed_leftovers, vec!["running"]);
}
