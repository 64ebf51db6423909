//! Probe safety on real loop-mounted ext4 filesystems (root): every gate that protects a
//! production database host, checked against what actually lands on the filesystem.
//!
//! No test assumes a disk speed or a kernel tick rate: the busy test waits until the kernel's own
//! io_ticks show the drive busy and checks the probe's figure against that count, the kill test
//! stops the run between system calls instead of racing it, the budget test redoes a scenario
//! that straddled UTC midnight, and the loop images are small, with TMPDIR's room checked first
//! (a test that can't get the space says so and skips).

use crate::support::*;
use ssdwatch::probe::{
    Outcome, ProbeKind, RunInputs, SkipReason, Stage, TargetConfig, run_target, run_target_with,
};
use std::path::Path;
use std::time::{Duration, Instant};

fn probe_once(t: &TargetConfig, state: &Path, window: Duration) -> Outcome {
    let roots = ssdwatch::Roots::default();
    run_target(
        t,
        &RunInputs {
            roots: &roots,
            state_dir: state,
            shared: None,
            topology: None,
            kinds: t.kinds.clone(),
            busy_window: window,
            hand: false,
        },
    )
}

fn reason(o: &Outcome) -> Option<SkipReason> {
    match o {
        Outcome::Skipped(s) => Some(s.reason),
        Outcome::Ran(_) => None,
    }
}

/// A loop-mounted ext4 of `size_mib` (no reserved blocks), or None, saying why, when not running
/// as root or when the directory its image goes in (TMPDIR) could not hold the image filled up.
/// The image is sparse, but some tests fill it (low_space fallocates all but a few MiB of it, the
/// kill test writes a 64 MiB probe file), and running short halfway through means ENOSPC, which
/// says nothing about the probe.
fn loop_fs(test: &str, size_mib: u64) -> Option<LoopFs> {
    if !require_root(test) {
        return None;
    }
    let dir = std::env::temp_dir();
    match nix::sys::statvfs::statvfs(&dir) {
        Ok(v) => {
            let free = v.blocks_available() * v.fragment_size();
            if free < size_mib << 20 {
                skip(
                    test,
                    &format!(
                        "{} has {} MiB free, the {size_mib} MiB loop image needs up to {size_mib} MiB (set TMPDIR to a larger filesystem)",
                        dir.display(),
                        free >> 20
                    ),
                );
                return None;
            }
        }
        Err(e) => eprintln!(
            "note: statvfs {}: {e}; free space not checked",
            dir.display()
        ),
    }
    Some(LoopFs::no_reserve(size_mib))
}

/// `probe run --json --target <t.path>` with a config.yaml written into `state` (also the state
/// directory) from `t`: its kinds, probe file size, free-space floors and daily budget. No busy
/// window: whatever else the host is doing must not turn a run that should happen into a busy
/// skip.
fn probe_cli(state: &Path, t: &TargetConfig) -> std::process::Command {
    let kinds: Vec<&str> = t.kinds.iter().map(|k| k.as_str()).collect();
    let cfg = format!(
        "state_dir: {}\ncollectors:\n  probe:\n    busy_window: 0s\n    targets:\n      - path: {}\n        kinds: [{}]\n        file_size_bytes: {}\n        free_floor_bytes: {}\n        free_floor_ratio: {:?}\n        budget_bytes_per_day: {}\n",
        state.display(),
        t.path.display(),
        kinds.join(", "),
        t.file_size_bytes,
        t.free_floor_bytes,
        t.free_floor_ratio,
        t.budget_bytes_per_day
    );
    let cfg_path = state.join("config.yaml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("--config")
        .arg(&cfg_path)
        .args(["probe", "run", "--json", "--target"])
        .arg(&t.path);
    cmd
}

/// The probe's UTC day number (what its daily write budget is kept by).
fn utc_day() -> u64 {
    ssdwatch::probe::budget::Usage::default()
        .at(crate::support::unix_now())
        .day
}

#[test]
fn a_nearly_full_tiny_filesystem_gets_no_probe_file_under_the_floor_and_rewrites_stop_at_the_reserve()
 {
    let Some(fs) = loop_fs("low_space", 64) else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let t = small_target(&fs.mountpoint);
    // A 64 MiB filesystem gets a 1 MiB probe file (at most 1/32 of it, in whole 1 MiB blocks).
    let file = ssdwatch::probe::probe_file_bytes(&t, fs_bytes(&fs));
    assert_eq!(file, 1 << 20);
    // Under the floor before the first run: not even the probe directory is made.
    let above = ssdwatch::probe::TargetConfig {
        free_floor_bytes: fs.avail() + (1 << 20),
        ..t.clone()
    };
    let o = probe_once(&above, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    assert!(!fs.probe_dir().exists(), "no probe directory created");
    // Half the probe file above the 8 MiB floor: making it would go under.
    fill_to(&fs, "db", t.free_floor_bytes + file / 2);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    assert!(
        !fs.probe_dir().join("probe.dat").exists(),
        "no probe file created"
    );
    assert!(fs.avail() >= t.free_floor_bytes);

    // Room for it: made, and the floor still free.
    std::fs::remove_file(fs.mountpoint.join("db")).unwrap();
    fill_to(&fs, "db", t.free_floor_bytes + file + (1 << 20));
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), None, "{o:?}");
    assert!(fs.avail() >= t.free_floor_bytes, "avail {}", fs.avail());

    // The database grows past the floor: the existing file is still rewritten (that takes no
    // space on ext4) down to the 4 MiB reserve, and not under it.
    fill_to(&fs, "db2", t.rewrite_reserve_bytes + (1 << 20));
    let before = fs.avail();
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), None, "{o:?}");
    assert_eq!(fs.avail(), before);
    fill_to(&fs, "db3", t.rewrite_reserve_bytes - (1 << 20));
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
}

/// The race the space gate used to lose: a database grows between the plan's look at free space
/// and the probe file's allocation (the busy window sits in between). Here the database is a
/// `fallocate` run at the very moment in question, through the runner's stage hook: once where
/// the busy window ends (the re-check right before the allocation catches it) and once right
/// after that re-check (the allocation is made, seen to have crossed the floor, and given back).
/// Either way the filesystem is left above the floor, nothing of the probe's stays, and the run
/// says why; without the re-check it would have ended half a probe file under the floor.
#[test]
fn a_database_growing_between_the_space_check_and_the_allocation_never_takes_the_probe_under_the_floor()
 {
    for (stage, said) in [
        (
            Stage::Writing,
            "right before creating the 1048576-byte probe file",
        ),
        (Stage::Allocating, "rolled back"),
    ] {
        let Some(fs) = loop_fs("space race", 64) else {
            return;
        };
        let state = tempfile::tempdir().unwrap();
        let mut t = small_target(&fs.mountpoint);
        t.kinds = vec![ProbeKind::SyncWrite4k];
        let file = ssdwatch::probe::probe_file_bytes(&t, fs_bytes(&fs));
        // Room for the probe file when the plan looks.
        assert!(fs.avail() > t.free_floor_bytes + 2 * file);
        let grew = std::cell::Cell::new(false);
        let database = |now: Stage| {
            if now == stage {
                // Half the probe file above the floor: the database alone stays above it.
                fill_to(&fs, "db", t.free_floor_bytes + file / 2);
                grew.set(true);
            }
        };
        let roots = ssdwatch::Roots::default();
        let inputs = RunInputs {
            roots: &roots,
            state_dir: state.path(),
            shared: None,
            topology: None,
            kinds: t.kinds.clone(),
            busy_window: Duration::ZERO,
            hand: false,
        };
        let o = run_target_with(&t, &inputs, &database);
        assert!(
            grew.get(),
            "{stage:?}: the run never reached that stage: {o:?}"
        );
        let Outcome::Skipped(sk) = &o else {
            panic!("{stage:?}: ran under the floor: {o:?}")
        };
        assert_eq!(sk.reason, SkipReason::LowSpace, "{stage:?}: {}", sk.detail);
        assert!(sk.detail.contains(said), "{stage:?}: {}", sk.detail);
        assert!(
            fs.avail() >= t.free_floor_bytes,
            "{stage:?}: {} bytes available, under the floor of {}",
            fs.avail(),
            t.free_floor_bytes
        );
        let left = names_in(&fs.probe_dir());
        assert!(
            !left.iter().any(|n| n.starts_with("probe.dat")),
            "{stage:?}: {left:?}"
        );
        // The run's intent was recorded, then settled at what it wrote: nothing.
        let b = ssdwatch::probe::budget::load(state.path()).unwrap();
        let u = &b.targets[fs.mp()];
        assert_eq!((u.written_bytes, u.in_flight_bytes), (0, 0), "{stage:?}");
    }
}

#[test]
fn a_probe_directory_replaced_by_a_symlink_is_refused_and_nothing_is_written_at_its_target() {
    let Some(fs) = loop_fs("symlink", 64) else {
        return;
    };
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
    let Some(fs) = loop_fs("readonly", 64) else {
        return;
    };
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
    // The byte budget is per UTC day and starts over at midnight, so runs straddling it prove
    // nothing. A scenario that did is done again on a fresh filesystem: it takes seconds, so
    // the second one falls within one day.
    for _ in 0..2 {
        let day = utc_day();
        let Some(fs) = loop_fs("budget", 64) else {
            return;
        };
        let state = tempfile::tempdir().unwrap();
        // Room for the probe file and one run of the 4 KiB writers, not two.
        let mut t = small_target(&fs.mountpoint);
        t.kinds = vec![ProbeKind::SyncWrite4k, ProbeKind::RandWrite4k];
        t.budget_bytes_per_day = ssdwatch::probe::probe_file_bytes(&t, fs_bytes(&fs))
            + 2 * t.planned_bytes(ProbeKind::SyncWrite4k)
            + t.planned_bytes(ProbeKind::RandWrite4k);
        // Each invocation is a new process: only the state file carries the budget over.
        let mut cli = probe_cli(state.path(), &t);
        let [first, second, third] = std::array::from_fn(|_| cli.output().unwrap());
        let saved = ssdwatch::probe::budget::load(state.path())
            .unwrap()
            .targets
            .remove(&ssdwatch::probe::budget::key(fs.mp(), true));
        let library = probe_once(&t, state.path(), Duration::ZERO);
        if utc_day() != day {
            eprintln!("note: the UTC day changed during the budget scenario; running it again");
            continue;
        }
        let text = String::from_utf8_lossy(&first.stdout);
        assert!(first.status.success(), "{text}");
        let v: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
        assert_eq!(v["outcome"], "ran");
        assert_eq!(v["budget_skipped"].as_array().unwrap().len(), 0, "{text}");
        // The second run can afford only one of the two kinds.
        let second: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
        assert_eq!(second["outcome"], "ran");
        assert_eq!(
            second["budget_skipped"],
            serde_json::json!(["rand_write_4k"])
        );
        assert_eq!(third.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&third.stdout).unwrap();
        assert_eq!(v["reason"], "budget", "{v}");
        let saved = saved.unwrap_or_else(|| panic!("no budget saved for {}", fs.mp()));
        assert_eq!(saved.day, day);
        // All of it spent: the probe file, two runs of sync_write_4k, one of rand_write_4k.
        assert_eq!(saved.written_bytes, t.budget_bytes_per_day);
        // Runs by hand have a budget of their own: the daemon's probes (the library path) still
        // have all of theirs, and what they spend is kept apart.
        assert_eq!(reason(&library), None, "{library:?}");
        let budgets = ssdwatch::probe::budget::load(state.path()).unwrap();
        assert_eq!(
            budgets.targets[fs.mp()].written_bytes,
            2 * t.planned_bytes(ProbeKind::SyncWrite4k),
            "{budgets:?}"
        );
        let hand = &budgets.targets[&ssdwatch::probe::budget::key(fs.mp(), true)];
        assert_eq!(hand.written_bytes, t.budget_bytes_per_day);
        return;
    }
    panic!("the UTC day changed during both runs of the budget scenario");
}

/// Stops a child with SIGSTOP and waits until it is stopped: true then, false if it exited
/// instead (left unreaped, for `Child::wait`). A process stops only on its way back to user
/// space, so while it is stopped no system call of its is half done.
fn stop(child: &std::process::Child) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).is_err() {
        return false;
    }
    let flags = WaitPidFlag::WSTOPPED | WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::Stopped(..)) => return true,
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => return false,
            Err(nix::errno::Errno::EINTR) => {}
            other => panic!("waitid {pid}: {other:?}"),
        }
    }
}

fn resume(child: &std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
}

/// Size of the probe file the killed run was creating.
const KILLED_FILE_BYTES: u64 = 64 << 20;

#[test]
fn a_probe_killed_mid_run_leaves_leftovers_that_the_next_start_removes() {
    // The run is stepped with SIGSTOP/SIGCONT and killed while stopped, so catching it in the
    // middle of creating its probe file needs no file big enough to outlast a polling loop on a
    // fast disk. Should one step still cover the whole creation (this thread descheduled for
    // that long), that attempt proves nothing and is done again.
    for attempt in 1..=3 {
        // Large enough for a 64 MiB probe file (at most 1/32 of the filesystem).
        let Some(fs) = loop_fs("kill -9", 2176) else {
            return;
        };
        let state = tempfile::tempdir().unwrap();
        if killed_mid_creation(&fs, state.path()) {
            check_leftovers_are_removed(&fs, state.path());
            return;
        }
        eprintln!(
            "note: attempt {attempt}: the probe file was complete before the run could be stopped; again"
        );
    }
    panic!("the probe run could not be caught creating its probe file in 3 attempts");
}

/// Starts `probe run` creating a KILLED_FILE_BYTES probe file and SIGKILLs it once the file is
/// allocated (fallocate sets its full size) and not yet renamed into place; false when it could
/// not be caught before the file was complete.
fn killed_mid_creation(fs: &LoopFs, state: &Path) -> bool {
    let t = TargetConfig {
        file_size_bytes: KILLED_FILE_BYTES,
        budget_bytes_per_day: 4 << 30,
        ..small_target(&fs.mountpoint)
    };
    let child = probe_cli(state, &t)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let partial = fs.probe_dir().join("probe.dat.partial");
    let done = fs.probe_dir().join("probe.dat");
    let allocated = |p: &Path| p.metadata().is_ok_and(|m| m.len() == KILLED_FILE_BYTES);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if !stop(&child.0) {
            if done.exists() {
                return false;
            }
            panic!(
                "probe run ended before it could be killed: {:?}",
                child.0.wait()
            );
        }
        if allocated(&partial) {
            child.0.kill().unwrap();
            child.0.wait().unwrap();
            return true;
        }
        if done.exists() {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "probe file creation never started"
        );
        resume(&child.0);
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn check_leftovers_are_removed(fs: &LoopFs, state: &Path) {
    let left = names_in(&fs.probe_dir());
    assert!(left.contains(&"running".to_string()), "{left:?}");
    assert!(left.contains(&"probe.dat.partial".to_string()), "{left:?}");
    let partial = fs.probe_dir().join("probe.dat.partial");
    let held = std::os::unix::fs::MetadataExt::blocks(&partial.metadata().unwrap()) * 512;
    assert!(
        held >= KILLED_FILE_BYTES,
        "the leftover holds its space: {held} bytes"
    );

    // The half-created file holds the filesystem under this floor (half its size above what is
    // available now); it is removed before the space gate judges, so it can't keep every later
    // run out as low_space.
    let mut t = small_target(&fs.mountpoint);
    t.kinds = vec![ProbeKind::RandRead4k];
    t.free_floor_bytes = fs.avail() + KILLED_FILE_BYTES / 2;
    let o = probe_once(&t, state, Duration::ZERO);
    let Outcome::Ran(r) = o else { panic!("{o:?}") };
    assert_eq!(r.removed_leftovers, vec!["probe.dat.partial", "running"]);
    assert_eq!(names_in(&fs.probe_dir()), vec!["probe.dat"]);
    assert!(
        fs.avail() > t.free_floor_bytes,
        "{} bytes available, floor {}",
        fs.avail(),
        t.free_floor_bytes
    );
}

/// How long the busy test's probe watches the drive.
const BUSY_WINDOW: Duration = Duration::from_secs(1);

#[test]
fn a_drive_kept_busy_by_a_background_fio_is_skipped_as_busy() {
    if !require_cmd("busy", "fio", "fio") {
        return;
    }
    let Some(fs) = loop_fs("busy", 128) else {
        return;
    };
    let dev = fs.kernel_name();
    let iostats = std::fs::read_to_string(format!("/sys/block/{dev}/queue/iostats"));
    if iostats.is_ok_and(|s| s.trim() == "0") {
        skip(
            "busy",
            &format!("{dev} has I/O accounting off (queue/iostats 0): no busy time to see"),
        );
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let fio_err = fs.dir.path().join("fio.stderr");
    let fio = std::process::Command::new("fio")
        .args([
            "--name=bg",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--fsync=1",
            "--size=32m",
            "--time_based",
            "--runtime=60",
            "--numjobs=2",
            // Jobs as threads of the one process, so that killing it stops them all: forked
            // jobs outlive a SIGKILLed fio and go on writing after the test.
            "--thread",
        ])
        .arg(format!("--directory={}", fs.mountpoint.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&fio_err).unwrap())
        .spawn()
        .unwrap();
    let mut fio = KillOnDrop(fio);
    let mut t = small_target(&fs.mountpoint);
    // Room for every run the load dipping could let through (the byte budget comes first).
    t.budget_bytes_per_day = 1 << 30;
    let threshold = t.busy_threshold;
    // fio lays out its files before it writes, and how busy its writes keep the drive depends
    // on the disk and on the kernel's tick: wait until the kernel's own count, over a window as
    // long as the probe's, shows the drive above the threshold.
    let deadline = Instant::now() + Duration::from_secs(20);
    let shown_busy =
        regex_lite::Regex::new(r"drive (\S+) (\d+)% busy, above the (\d+)% threshold").unwrap();
    let mut highest = 0.0f64;
    let mut dipped = 0;
    loop {
        // fio was to write for a minute: ending before the drive was busy, whatever its exit
        // status, means the load was never there (a bad option, no O_DIRECT, ENOSPC).
        if let Some(status) = fio.0.try_wait().unwrap() {
            panic!(
                "fio exited ({status}) before the drive was busy: {}",
                std::fs::read_to_string(&fio_err).unwrap_or_default().trim()
            );
        }
        if Instant::now() >= deadline {
            let dipped = if dipped == 0 {
                String::new()
            } else {
                format!(
                    "; above it {dipped} time(s), but each time not in the probe's window that followed, by the kernel's count too"
                )
            };
            skip(
                "busy",
                &format!(
                    "fio never kept {dev} above {:.0}% busy over a {BUSY_WINDOW:?} window in 20 s by the kernel's io_ticks (highest {:.1}%){dipped}: this machine can't keep the drive busy",
                    threshold * 100.0,
                    highest * 100.0
                ),
            );
            return;
        }
        let ((), seen) = Busy::around(&dev, || std::thread::sleep(BUSY_WINDOW));
        highest = highest.max(seen.ratio());
        if seen.ratio() <= threshold {
            continue;
        }
        // Busy by the kernel's count: the probe's look must agree with the kernel over the
        // same span (its window lies inside this one).
        let (o, around) = Busy::around(&dev, || probe_once(&t, state.path(), BUSY_WINDOW));
        let (lo, hi) = around.bounds_inside(BUSY_WINDOW);
        let kernel = format!(
            "kernel: {} ms busy in {:?} around the probe, so {:.1}%..{:.1}% in its window",
            around.ticks.as_millis(),
            around.wall,
            lo * 100.0,
            hi * 100.0
        );
        match o {
            Outcome::Skipped(sk) if sk.reason == SkipReason::Busy => {
                let device = sk.placement.as_ref().map(|p| p.device().to_string());
                assert_eq!(device.as_deref(), Some(dev.as_str()), "{sk:?}");
                let c = shown_busy
                    .captures(&sk.detail)
                    .unwrap_or_else(|| panic!("no utilization in {:?}", sk.detail));
                assert_eq!(&c[1], dev, "{}", sk.detail);
                // Shown rounded to a whole percent.
                let shown: f64 = c[2].parse().unwrap();
                let (min, max) = ((shown - 0.5) / 100.0, (shown + 0.5) / 100.0);
                assert!(max > threshold, "{}", sk.detail);
                assert!(max >= lo && min <= hi, "probe: {}; {kernel}", sk.detail);
                assert!(!fs.probe_dir().join("probe.dat").exists());
                return;
            }
            Outcome::Ran(r) => {
                // fio's load dipped: fine only if the kernel agrees the drive may not have been
                // busy in the probe's window.
                let u = r
                    .context
                    .utilization_before_ratio
                    .unwrap_or_else(|| panic!("the busy gate measured nothing: {r:?}"));
                assert!(
                    (lo - 1e-9..=hi + 1e-9).contains(&u),
                    "probe ran seeing {:.1}% busy; {kernel}",
                    u * 100.0
                );
                eprintln!(
                    "note: the probe ran seeing {dev} {:.1}% busy ({kernel}); waiting for busy again",
                    u * 100.0
                );
                dipped += 1;
                // Start over with no probe file, so that a busy skip is seen to write nothing.
                std::fs::remove_file(fs.probe_dir().join("probe.dat")).unwrap();
            }
            o => panic!("{o:?}"),
        }
    }
}

#[test]
fn a_second_run_on_a_target_in_use_is_skipped_as_busy_and_leaves_its_files_alone() {
    let Some(fs) = loop_fs("concurrent run", 64) else {
        return;
    };
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

/// Bytes of the filesystem (statvfs blocks × fragment size), as the plan sizes the probe file by.
fn fs_bytes(fs: &LoopFs) -> u64 {
    let v = nix::sys::statvfs::statvfs(&fs.mountpoint).unwrap();
    v.blocks() as u64 * v.fragment_size() as u64
}

/// Fills `fs` with a database-like file until `avail` bytes are left (fallocate: allocated, as
/// a database's own files are).
fn fill_to(fs: &LoopFs, name: &str, avail: u64) {
    let more = fs.avail().saturating_sub(avail);
    if more > 0 {
        run(
            "fallocate",
            &[
                "-l",
                &more.to_string(),
                fs.mountpoint.join(name).to_str().unwrap(),
            ],
        );
    }
}

/// Waits (up to a minute) until `fs` shows at least `avail` bytes available: XFS gives a
/// removed file's blocks back in the background (deferred inode inactivation), later on a busy
/// machine.
fn wait_avail(fs: &LoopFs, avail: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fs.avail() < avail && std::time::Instant::now() < deadline {
        run("sync", &[]);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The default target on `fs`: its 64 MiB floor, 4 MiB rewrite reserve and 1/32 file cap.
fn default_target(fs: &LoopFs) -> TargetConfig {
    TargetConfig {
        path: fs.mountpoint.clone(),
        ..TargetConfig::default()
    }
}

/// On a filesystem that overwrites in place, a run that finds its probe file allocated consumes
/// nothing: at 97% used it runs and leaves `avail` exactly as it found it; it stops only under
/// the 4 MiB reserve, and never creates anything under the floor. The 512 MiB filesystem gets a
/// probe file of at most 1/32 of it.
fn full_in_place_filesystem_is_probed_and_loses_no_space(test: &str, fs: LoopFs, slack: u64) {
    let state = tempfile::tempdir().unwrap();
    let t = default_target(&fs);
    let total = fs_bytes(&fs);
    let floor = ssdwatch::probe::floor_bytes(&t, total);
    // At 97% with no probe file yet: making one would go under the floor.
    let nearly_full = total * 3 / 100;
    assert!(nearly_full < floor, "{test}: 3% must be under the floor");
    let filler_name = "db";
    fill_to(&fs, filler_name, nearly_full);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{test}: {o:?}");
    assert!(!fs.probe_dir().exists(), "{test}: nothing created");
    // Room again: the probe file is made, sized to the filesystem.
    std::fs::remove_file(fs.mountpoint.join(filler_name)).unwrap();
    wait_avail(&fs, floor + ssdwatch::probe::probe_file_bytes(&t, total));
    let o = probe_once(&t, state.path(), Duration::ZERO);
    let Outcome::Ran(r) = &o else {
        panic!("{test}: {o:?}")
    };
    let file_bytes = ssdwatch::probe::probe_file_bytes(&t, total);
    // 512 MiB of device is a little less of filesystem: 14-15 MiB, in whole 1 MiB blocks.
    assert!(
        file_bytes <= total / 32 && file_bytes >= 14 << 20,
        "{test}: {file_bytes}"
    );
    assert_eq!(r.file_created_bytes, file_bytes, "{test}");
    let meta = std::fs::metadata(fs.probe_dir().join("probe.dat")).unwrap();
    assert_eq!(meta.len(), file_bytes, "{test}");

    // The database fills the filesystem to 97%: the probes keep running and take nothing.
    fill_to(&fs, filler_name, nearly_full);
    for _ in 0..3 {
        let before = fs.avail();
        let o = probe_once(&t, state.path(), Duration::ZERO);
        let Outcome::Ran(r) = &o else {
            panic!("{test}: {o:?}")
        };
        // Each kind names only the quantiles its I/Os can tell: 64 writes a p50, 128 reads a p99.
        for k in &r.results {
            assert_eq!(k.p50_seconds.is_some(), k.ops >= 2, "{test}: {k:?}");
            assert_eq!(k.p99_seconds.is_some(), k.ops >= 100, "{test}: {k:?}");
        }
        assert!(r.results.iter().any(|k| k.p99_seconds.is_some()), "{test}");
        // Space a run would have taken shows at once (no delayed allocation: O_DIRECT into
        // allocated blocks; the run marker is an empty file).
        let after = fs.avail();
        assert!(
            after + slack >= before,
            "{test}: a rewrite consumed {} bytes",
            before - after
        );
    }
    // Under the reserve: skipped, nothing taken, and the probe file's bytes given back to the
    // database (it is made again only once it fits above the floor).
    fill_to(&fs, "db2", t.rewrite_reserve_bytes - (1 << 20));
    let before = fs.avail();
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{test}: {o:?}");
    assert!(
        !fs.probe_dir().join("probe.dat").exists(),
        "{test}: the probe file was not given back under the reserve"
    );
    wait_avail(&fs, (before + file_bytes).saturating_sub(slack));
    assert!(
        fs.avail() + slack >= before + file_bytes,
        "{test}: {} bytes available after giving back a {file_bytes}-byte file, {before} before",
        fs.avail()
    );
    // The next cycle does not make it again.
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{test}: {o:?}");
    assert!(!fs.probe_dir().join("probe.dat").exists(), "{test}");
}

#[test]
fn ext4_at_97_percent_used_is_still_probed_and_loses_no_space() {
    let Some(fs) = loop_fs("ext4 97%", 512) else {
        return;
    };
    full_in_place_filesystem_is_probed_and_loses_no_space("ext4", fs, 0);
}

#[test]
fn xfs_at_97_percent_used_is_still_probed_and_loses_no_space() {
    if !require_root("xfs 97%") || !require_cmd("xfs 97%", "mkfs.xfs", "xfsprogs") {
        return;
    }
    let fs = LoopFs::of_type(512, "mkfs.xfs", &["-q", "-f"]);
    // XFS moves avail by a few blocks either way on its own: the run marker's inode may need an
    // inode chunk, and inodes are freed by deferred inactivation. Data blocks are never taken.
    full_in_place_filesystem_is_probed_and_loses_no_space("xfs", fs, 64 << 10);
}

/// btrfs copies on write: every probe write lands in new blocks until the old ones are freed, so
/// a run there keeps the floor with its own bytes counted, at any fill, and never takes the
/// filesystem under it.
#[test]
fn btrfs_keeps_the_floor_for_every_run_and_never_goes_under_it() {
    let test = "btrfs floor";
    if !require_root(test) || !require_cmd(test, "mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let fs = LoopFs::of_type(512, "mkfs.btrfs", &["-q", "-f"]);
    let state = tempfile::tempdir().unwrap();
    let t = default_target(&fs);
    let floor = ssdwatch::probe::floor_bytes(&t, fs_bytes(&fs));
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), None, "{o:?}");
    assert!(fs.avail() >= floor, "avail {} under {floor}", fs.avail());
    // A database at 97% (well, under the floor): the existing file is not rewritten.
    fill_to(&fs, "db", fs_bytes(&fs) * 3 / 100);
    run("sync", &[]);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    let Outcome::Skipped(s) = &o else {
        unreachable!()
    };
    assert!(s.detail.contains("under the floor"), "{}", s.detail);
    // Under the floor, the probe file's bytes went back to the database.
    assert!(
        !fs.probe_dir().join("probe.dat").exists(),
        "the probe file was not given back under the floor"
    );
    // Just above the floor, but not by the run's own writes: skipped too, and the file is not
    // made again.
    std::fs::remove_file(fs.mountpoint.join("db")).unwrap();
    run("sync", &[]);
    fill_to(&fs, "db", floor + (1 << 20));
    run("sync", &[]);
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), Some(SkipReason::LowSpace), "{o:?}");
    let Outcome::Skipped(s) = &o else {
        unreachable!()
    };
    assert!(s.detail.contains("creating the"), "{}", s.detail);
    assert!(fs.avail() >= floor, "avail {} under {floor}", fs.avail());
}

/// On btrfs every write allocates, so each writing kind is an allocation of its own: a database
/// that grows while the run is under way (here, right as it starts writing) is seen by the
/// re-check before the next kind, which doesn't run.
#[test]
fn on_btrfs_the_space_is_judged_again_before_each_writing_kind() {
    let test = "btrfs per-kind re-check";
    if !require_root(test) || !require_cmd(test, "mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let fs = LoopFs::of_type(512, "mkfs.btrfs", &["-q", "-f"]);
    let state = tempfile::tempdir().unwrap();
    let mut t = default_target(&fs);
    t.kinds = vec![ProbeKind::RandRead4k, ProbeKind::SyncWrite4k];
    t.write_ops = 256;
    let floor = ssdwatch::probe::floor_bytes(&t, fs_bytes(&fs));
    // The probe file is made first, with room to spare.
    let o = probe_once(&t, state.path(), Duration::ZERO);
    assert_eq!(reason(&o), None, "{o:?}");
    run("sync", &[]);
    let database = |now: Stage| {
        if now == Stage::Writing {
            // 64 KiB above the floor: less than the 1 MiB sync_write_4k is about to write.
            fill_to(&fs, "db", floor + (64 << 10));
            run("sync", &[]);
        }
    };
    let roots = ssdwatch::Roots::default();
    let inputs = RunInputs {
        roots: &roots,
        state_dir: state.path(),
        shared: None,
        topology: None,
        kinds: t.kinds.clone(),
        busy_window: Duration::ZERO,
        hand: false,
    };
    let o = run_target_with(&t, &inputs, &database);
    let Outcome::Skipped(sk) = &o else {
        panic!("wrote under the floor: {o:?}")
    };
    assert_eq!(sk.reason, SkipReason::LowSpace, "{}", sk.detail);
    assert!(
        sk.detail.contains("right before sync_write_4k"),
        "{}",
        sk.detail
    );
    // The reads ran, the writes didn't: the run settled at nothing written, and the budget
    // holds only the first run's bytes (its probe file and its writes).
    let u = &ssdwatch::probe::budget::load(state.path()).unwrap().targets[fs.mp()];
    assert_eq!(u.in_flight_bytes, 0);
    let first = ssdwatch::probe::probe_file_bytes(&t, fs_bytes(&fs))
        + t.planned_bytes(ProbeKind::SyncWrite4k);
    assert_eq!(u.written_bytes, first, "{u:?}");
}

/// The daemon's user in these tests: nobody, so no account needs creating.
const DAEMON_UID: u32 = 65534;

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn owner(path: &Path) -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::symlink_metadata(path).unwrap())
}

/// Following docs/probes.md ("try a target by hand first") as root: the hand run leaves a probe
/// directory the daemon's user can use, not a root-owned one that refuses it for good; a
/// root-owned one left by an older version is reported with its owner and the chown that fixes
/// it; and the hand runs don't spend the daemon's budget.
#[test]
fn a_hand_run_as_root_leaves_the_probe_directory_to_the_daemons_user() {
    let Some(fs) = loop_fs("probe run as root", 64) else {
        return;
    };
    // The daemon's user owns its state directory (systemd's StateDirectory=) and the target.
    std::fs::set_permissions(
        fs.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    chown(&fs.mountpoint, DAEMON_UID);
    let state = tempfile::tempdir().unwrap();
    let t = small_target(&fs.mountpoint);
    let as_daemon = |state: &Path| {
        let mut c = probe_cli(state, &t);
        std::os::unix::process::CommandExt::uid(&mut c, DAEMON_UID);
        std::os::unix::process::CommandExt::gid(&mut c, DAEMON_UID);
        c.output().unwrap()
    };
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();

    // What an older version did: a root-owned .ssdwatch-probe (0700). The daemon's user is told
    // whose it is and how to fix it, not a bare "Permission denied".
    std::fs::create_dir(fs.probe_dir()).unwrap();
    std::fs::set_permissions(
        fs.probe_dir(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let daemon_state = tempfile::tempdir().unwrap();
    chown(daemon_state.path(), DAEMON_UID);
    std::fs::set_permissions(
        daemon_state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = as_daemon(daemon_state.path());
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reason"], "unsafe", "{v}");
    let detail = v["detail"].as_str().unwrap();
    let dir = fs.probe_dir().display().to_string();
    assert!(
        detail.contains(&format!("{dir} is owned by root (uid 0)"))
            && detail.contains(&format!("`chown -R {DAEMON_UID}: {dir}`")),
        "{detail}"
    );
    std::fs::remove_dir(fs.probe_dir()).unwrap();

    // Now by hand, as root, with the state directory the daemon's: the run happens as the
    // daemon's user, so what it makes is the daemon's.
    chown(state.path(), DAEMON_UID);
    let out = probe_cli(state.path(), &t).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("running as"), "{stderr}");
    assert_eq!(owner(&fs.probe_dir()), DAEMON_UID);
    assert_eq!(owner(&fs.probe_dir().join("probe.dat")), DAEMON_UID);
    assert_eq!(
        owner(&ssdwatch::probe::budget::path(state.path())),
        DAEMON_UID
    );
    // And the daemon's user runs there afterwards.
    let out = as_daemon(state.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Both were hand runs: the daemon's own budget is untouched.
    let b = ssdwatch::probe::budget::load(state.path()).unwrap();
    assert!(!b.targets.contains_key(fs.mp()), "{b:?}");
    assert!(b.targets[&ssdwatch::probe::budget::key(fs.mp(), true)].written_bytes > 0);
}

/// benches/probe_runlength.sh (the run-length figures of docs/probes.md) still works: its short mode on a
/// loop device, through this build's binary, gives a coefficient of variation per kind and count
/// and the bytes per day of each count.
#[test]
fn the_run_length_bench_runs_in_its_short_mode() {
    if !require_root("probe_runlength.sh") {
        return;
    }
    let text = run_bench_short("probe_runlength.sh", Path::new(bin()));
    for kind in ["sync_write_4k", "rand_read_4k", "rand_write_4k"] {
        for n in [4, 8] {
            let line = format!("CV {kind} {n} ");
            let cv: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(&line))
                .and_then(|rest| rest.split(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("no {line:?} in\n{text}"));
            assert!(cv.is_finite() && cv >= 0.0, "{line}{cv}");
        }
    }
    // Two 4 KiB writers of 8 I/Os, 288 runs a day, plus one 16 MiB burst.
    let day = 2 * 8 * 4096 * 288 + (16 << 20);
    assert!(text.contains(&format!("BYTES_PER_DAY 8 {day}")), "{text}");
}

/// The daemon (`ssdwatch serve`, a real process) probing one target every second, with its
/// state in `state`, its log in `log`, serving on a free port; SIGKILLed when dropped.
struct Serving {
    child: KillOnDrop,
    port: u16,
    log: std::path::PathBuf,
}

impl Serving {
    /// Probes `t` (its kinds, sizes, floors and daily budget) every second, no jitter, no busy
    /// window; SMART and the history off (not what is under test).
    fn start(work: &Path, state: &Path, t: &TargetConfig) -> Serving {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let kinds: Vec<&str> = t.kinds.iter().map(|k| k.as_str()).collect();
        let cfg = work.join("serve.yaml");
        std::fs::write(
            &cfg,
            format!(
                "web:\n  listen_address: \"127.0.0.1:{port}\"\nstate_dir: {}\nhistory:\n  enabled: false\ncollectors:\n  smart:\n    enabled: false\n  probe:\n    interval: 1s\n    jitter_ratio: 0\n    busy_window: 0s\n    targets:\n      - path: {}\n        kinds: [{}]\n        write_ops: {}\n        file_size_bytes: {}\n        free_floor_bytes: {}\n        free_floor_ratio: {:?}\n        budget_bytes_per_day: {}\n        busy_threshold: 1.0\n",
                state.display(),
                t.path.display(),
                kinds.join(", "),
                t.write_ops,
                t.file_size_bytes,
                t.free_floor_bytes,
                t.free_floor_ratio,
                t.budget_bytes_per_day
            ),
        )
        .unwrap();
        let log = work.join(format!("serve-{port}.log"));
        let child = std::process::Command::new(bin())
            .arg("--config")
            .arg(&cfg)
            .args(["--log.level", "warn", "serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Serving {
            child: KillOnDrop(child),
            port,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The first scrape for which `pred` holds, within 30 s.
    fn wait_metrics(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        loop {
            if let Ok(Some(st)) = self.child.0.try_wait() {
                panic!("the daemon exited ({st}):\n{}", self.log());
            }
            if let Ok(mut r) = agent.get(&url).call() {
                last = r.body_mut().read_to_string().unwrap_or_default();
                if pred(&last) {
                    return last;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last scrape:\n{last}\nlog:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A state directory the probe budget can't be written to, read-only or full: the daemon's
/// probes write nothing, each attempt is skipped as `budget_unrecorded` (and after three the
/// target shows failing for that reason, which the alert reads), and the log names the state
/// file. Before, they probed on with a warning and wrote past their daily budget.
#[test]
fn a_budget_that_cant_be_recorded_stops_the_daemons_probes_and_says_why() {
    for how in ["read-only", "full"] {
        let test = format!("budget unrecorded ({how})");
        let Some(fs) = loop_fs(&test, 64) else {
            return;
        };
        let work = tempfile::tempdir().unwrap();
        let state = work.path().join("state");
        let _tmpfs = match how {
            "read-only" => Tmpfs::mount(&state, "ro,size=1m"),
            _ => {
                let t = Tmpfs::mount(&state, "size=256k");
                // Filled to the last byte by a file that isn't the budget's.
                let _ = std::process::Command::new("dd")
                    .args(["if=/dev/zero", "bs=4k"])
                    .arg(format!("of={}", state.join("filler").display()))
                    .stderr(std::process::Stdio::null())
                    .status();
                t
            }
        };
        let mut t = small_target(&fs.mountpoint);
        t.kinds = vec![ProbeKind::SyncWrite4k, ProbeKind::RandRead4k];
        t.budget_bytes_per_day = 2 << 20;
        let mut d = Serving::start(work.path(), &state, &t);
        let failing = format!(
            "ssdwatch_probe_target_failing{{mountpoint=\"{}\",device=\"{}\",reason=\"budget_unrecorded\"}} 1",
            fs.mp(),
            fs.kernel_name()
        );
        let m = d.wait_metrics(&format!("{test}: the target failing"), |m| {
            m.contains(&failing)
        });
        let skipped = value_matching(
            &m,
            "ssdwatch_probe_skipped_total",
            "reason=\"budget_unrecorded\"",
        );
        assert!(skipped.is_some_and(|n| n >= 3.0), "{test}: {skipped:?}");
        let base = format!(
            "{{mountpoint=\"{}\",device=\"{}\"}}",
            fs.mp(),
            fs.kernel_name()
        );
        assert_eq!(
            value(&m, &format!("ssdwatch_probe_runs_total{base}")),
            Some(0.0),
            "{test}"
        );
        assert_eq!(
            value(&m, &format!("ssdwatch_probe_written_bytes_total{base}")),
            Some(0.0),
            "{test}"
        );
        // Nothing written on the target: no probe file, no partial one, no run marker.
        assert!(
            names_in(&fs.probe_dir()).is_empty(),
            "{test}: {:?}",
            names_in(&fs.probe_dir())
        );
        let budget_file = ssdwatch::probe::budget::path(&state).display().to_string();
        let log = d.log();
        assert!(
            log.lines().any(|l| l.contains("WARN")
                && l.contains(&budget_file)
                && l.contains("not probing")),
            "{test}: no warning naming {budget_file}:\n{log}"
        );
        // One warning when the fault starts, not one per attempt.
        let warned = log.lines().filter(|l| l.contains(&budget_file)).count();
        assert_eq!(warned, 1, "{test}:\n{log}");
    }
}

/// kill -9 of the daemon while it creates its probe file (stepped with SIGSTOP/SIGCONT and
/// killed once the file is allocated): the budget already holds the run's planned bytes, and the
/// restarted daemon, reading it, has too little of the day's budget left to make the file again.
/// Before, the killed run's bytes were never recorded, and every restart wrote them once more.
#[test]
fn a_daemon_killed_mid_probe_has_that_runs_bytes_in_its_budget_after_a_restart() {
    let test = "daemon kill -9 budget";
    for attempt in 1..=3 {
        let Some(fs) = loop_fs(test, 2176) else {
            return;
        };
        let day = utc_day();
        let work = tempfile::tempdir().unwrap();
        let state = work.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let mut t = small_target(&fs.mountpoint);
        t.kinds = vec![ProbeKind::SyncWrite4k];
        t.file_size_bytes = KILLED_FILE_BYTES;
        let planned = KILLED_FILE_BYTES + t.planned_bytes(ProbeKind::SyncWrite4k);
        // One run's worth and half a probe file more: not enough to make the file again.
        t.budget_bytes_per_day = planned + KILLED_FILE_BYTES / 2;
        let d = Serving::start(work.path(), &state, &t);
        let partial = fs.probe_dir().join("probe.dat.partial");
        let allocated = |p: &Path| p.metadata().is_ok_and(|m| m.len() == KILLED_FILE_BYTES);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut caught = false;
        loop {
            if !stop(&d.child.0) {
                panic!("the daemon exited:\n{}", d.log());
            }
            if allocated(&partial) {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(d.child.0.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
                caught = true;
                break;
            }
            if fs.probe_dir().join("probe.dat").exists() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no probe file creation began:\n{}",
                d.log()
            );
            resume(&d.child.0);
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(d);
        if !caught || utc_day() != day {
            eprintln!("note: attempt {attempt}: not caught mid-creation within one UTC day; again");
            continue;
        }
        let b = ssdwatch::probe::budget::load(&state).unwrap();
        let u = &b.targets[fs.mp()];
        assert_eq!(u.day, day);
        assert_eq!(
            (u.written_bytes, u.in_flight_bytes),
            (planned, planned),
            "{u:?}"
        );

        // Restarted: the leftovers go, and the day's budget can't pay for a new probe file.
        let mut d = Serving::start(work.path(), &state, &t);
        let skipped = format!(
            "ssdwatch_probe_skipped_total{{mountpoint=\"{}\",device=\"{}\",reason=\"budget\"}} 1",
            fs.mp(),
            fs.kernel_name()
        );
        d.wait_metrics("a budget skip after the restart", |m| m.contains(&skipped));
        assert!(
            !fs.probe_dir().join("probe.dat").exists(),
            "{:?}",
            names_in(&fs.probe_dir())
        );
        let u = &ssdwatch::probe::budget::load(&state).unwrap().targets[fs.mp()];
        assert!(u.written_bytes >= planned, "{u:?}");
        return;
    }
    panic!("{test}: the daemon could not be caught creating its probe file in 3 attempts");
}
