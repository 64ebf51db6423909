//! 130 hung FUSE mounts with the daemon in a pids cgroup of 128 tasks (a unit's `TasksMax=`):
//! the statfs guard keeps a margin of the limit free, so SMART and the other collectors go on
//! sampling, the hung mounts are reported stuck or not started, and the fault is logged once at
//! WARN, not as a flood of errors.

use crate::support::binary::{self, Daemon};
use crate::support::cgroup::PidsCgroup;
use crate::support::smart::Fake;
use crate::support::*;
use std::time::{Duration, Instant};

const HUNG: usize = 130;
const TASKS_MAX: u64 = 128;

/// Distinct values of `series` seen so far: how many samples a collector has published.
#[derive(Default)]
struct Seen(Vec<f64>);

impl Seen {
    fn see(&mut self, v: Option<f64>) -> usize {
        if let Some(v) = v
            && self.0.last() != Some(&v)
        {
            self.0.push(v);
        }
        self.0.len()
    }
}

fn last_success(m: &str, collector: &str) -> Option<f64> {
    value(
        m,
        &format!("ssdwatch_collector_last_success_timestamp_seconds{{collector=\"{collector}\"}}"),
    )
}

#[test]
fn with_130_hung_mounts_in_a_128_task_cgroup_smart_keeps_sampling_and_the_fault_is_one_warning() {
    let test = "130 hung FUSE mounts in a 128-task pids cgroup";
    if !require_root(test) || !fuse_device_available(test) {
        return;
    }
    let cg = match PidsCgroup::create(TASKS_MAX) {
        Ok(cg) => cg,
        Err(why) => {
            not_applicable(test, &why);
            return;
        }
    };
    // The database's filesystem (a block device: tried first of the new mounts), then the 130.
    let db = LoopFs::new(32);
    let hung = HungFuseSet::mount(HUNG);
    let base = hung.dir.path().canonicalize().unwrap();
    let healthy = db.mp().to_string();
    let fake = Fake::new();
    let drives = ["sda", "sdb", "nvme0n1"];
    for d in drives {
        fake.ok(d, "nvme-corsair-mp510.json");
    }

    let dir = binary::host();
    let p = dir.path();
    let devices: String = drives
        .iter()
        .map(|d| format!("      - path: /dev/{d}\n"))
        .collect();
    std::fs::write(
        p.join("ssdwatch.yaml"),
        format!(
            "state_dir: {state}\n\
             collectors:\n  \
               probe:\n    enabled: false\n  \
               filesystem:\n    interval: 1s\n    statfs_timeout: 1s\n    fs_types_exclude: []\n    \
                 mount_points_include: ['^{base}/hung[0-9]{{3}}$', '^{db}$']\n  \
               smart:\n    smartctl_path: {smartctl}\n    backend: smartctl\n    interval: 1s\n    \
                 timeout: 30s\n    discover: false\n    devices:\n{devices}",
            state = p.join("state").display(),
            base = regex_lite::escape(base.to_str().unwrap()),
            db = regex_lite::escape(db.mp()),
            smartctl = fake.bin().display(),
        ),
    )
    .unwrap();
    // The host's own /proc and /sys: the mounts are real, and so is the cgroup.
    let roots = roots_seeing(&[&db.mountpoint]);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ssdwatch"));
    cmd.arg("--config")
        .arg(p.join("ssdwatch.yaml"))
        .arg("--path.procfs")
        .arg(&roots.proc)
        .args(["--web.listen-address", "127.0.0.1:0"]);
    cg.enter_on_start(&mut cmd);
    let mut d = Daemon::spawn(dir, cmd);

    let metrics = || d.metrics();
    let label = |mp: &str| format!("mountpoint=\"{mp}\"");
    // Each hung mount is either stuck (holding a thread) or not started (no thread left for it
    // under the limit): either way it has no size and says it failed.
    let accounted = |m: &str| {
        hung.mps()
            .filter(|mp| {
                value_matching(m, "ssdwatch_filesystem_device_error", &label(mp)) == Some(1.0)
                    && value_matching(m, "ssdwatch_filesystem_size_bytes", &label(mp)).is_none()
            })
            .count()
    };
    let stuck = |m: &str| {
        hung.mps()
            .filter(|mp| value_matching(m, "ssdwatch_filesystem_stuck", &label(mp)) == Some(1.0))
            .count()
    };
    // Settled: every hung mount accounted for. Counted in samples, with a wall-clock bound far
    // beyond them only for a machine that stops sampling altogether.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut fs_samples = Seen::default();
    let m = loop {
        let m = metrics();
        let n = fs_samples.see(last_success(&m, "filesystem"));
        if accounted(&m) == HUNG && n >= 2 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the hung mounts never all showed as failing ({} of {HUNG} after {n} samples)\n\
             last scrape:\n{m}\nlog:\n{}",
            accounted(&m),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let held = value(&m, "ssdwatch_filesystem_statfs_hung_threads").unwrap_or(-1.0);
    eprintln!(
        "settled after {} filesystem samples: {} stuck, {} not started, {held} hung statfs \
         threads, {} tasks in the cgroup",
        fs_samples.0.len(),
        stuck(&m),
        HUNG - stuck(&m),
        cg.current()
    );

    // From here on: SMART samples each second and reads every drive, the healthy mount has its
    // size, the filesystem collector goes on sampling; over ten SMART samples.
    let mut smart_samples = Seen::default();
    let mut fs_after = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut last = String::new();
    while smart_samples.0.len() < 10 || fs_after.0.len() < 10 {
        let m = metrics();
        smart_samples.see(last_success(&m, "smart"));
        fs_after.see(last_success(&m, "filesystem"));
        for drive in drives {
            let age = value_matching(
                &m,
                "ssdwatch_device_smart_sample_age_seconds",
                &format!("device=\"{drive}\""),
            );
            assert!(
                age.is_some_and(|a| a < 30.0),
                "{drive}: SMART sample age {age:?}\nlog:\n{}",
                d.log_text()
            );
        }
        assert!(
            value_matching(&m, "ssdwatch_filesystem_size_bytes", &label(&healthy))
                .is_some_and(|v| v > 0.0),
            "the database's filesystem lost its size\n{m}\nlog:\n{}",
            d.log_text()
        );
        assert_eq!(accounted(&m), HUNG);
        // Each hung mount is stuck or was given no thread.
        let no_thread = value(&m, "ssdwatch_filesystem_statfs_no_thread_mounts").unwrap_or(0.0);
        assert_eq!(stuck(&m) + no_thread as usize, HUNG, "{m}");
        assert!(
            Instant::now() < deadline,
            "{} SMART and {} filesystem samples in 180 s\nlog:\n{}",
            smart_samples.0.len(),
            fs_after.0.len(),
            d.log_text()
        );
        last = m;
        std::thread::sleep(Duration::from_millis(300));
    }
    let held = value(&last, "ssdwatch_filesystem_statfs_hung_threads").unwrap_or(-1.0);
    assert!(
        held < (TASKS_MAX - 16) as f64,
        "{held} hung statfs threads leave too little of the {TASKS_MAX} tasks"
    );
    let log = d.log_text();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("level=ERROR")).collect();
    let about_limit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("level=WARN") && l.contains("task limit"))
        .collect();
    eprintln!(
        "{} stuck, {} not started, {held} hung statfs threads, {} tasks in the cgroup, {} \
         refusals of a task; log: {} lines, {} ERROR, {} WARN about the task limit",
        stuck(&last),
        HUNG - stuck(&last),
        cg.current(),
        cg.refusals().map_or("?".into(), |n| n.to_string()),
        log.lines().count(),
        errors.len(),
        about_limit.len()
    );
    assert!(errors.is_empty(), "ERROR lines:\n{}", errors.join("\n"));
    assert!(
        (1..=3).contains(&about_limit.len()),
        "WARN lines about the task limit:\n{}\nlog:\n{log}",
        about_limit.join("\n")
    );
    // Each mount's own fault is logged once, never again every sample.
    for mp in hung.mps() {
        let n = log
            .lines()
            .filter(|l| l.contains("level=WARN") && l.contains(&format!("{mp}:")))
            .count();
        assert!(n <= 1, "{mp} warned {n} times:\n{log}");
    }
    for l in &about_limit {
        eprintln!("  {l}");
    }

    // The limit reached outright (pids.max lowered to what the cgroup holds, as when other
    // processes of the unit take the rest): smartctl can't be started, the statfs thread of the
    // database's filesystem neither. One WARN each, the daemon lives on, and when the limit is
    // raised again each fault clears once.
    let before = log.lines().count();
    cg.set_max(cg.current());
    let full = Instant::now();
    let deadline = full + Duration::from_secs(120);
    while !d
        .log_text()
        .contains("smart task limit: cannot start a smartctl process")
    {
        assert!(
            Instant::now() < deadline,
            "no SMART task-limit fault at the limit\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Five more SMART samples at the limit: the fault is not told again.
    let mut at_limit = Seen::default();
    while at_limit.0.len() < 5 {
        assert!(
            Instant::now() < deadline,
            "SMART stopped sampling at the limit"
        );
        at_limit.see(last_success(&metrics(), "smart"));
        std::thread::sleep(Duration::from_millis(300));
    }
    cg.set_max(TASKS_MAX);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !d.log_text().contains("smart task limit: recovered") {
        assert!(
            Instant::now() < deadline,
            "the SMART task-limit fault never cleared\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = d.log_text();
    let phase: Vec<&str> = log.lines().skip(before).collect();
    eprintln!("at the limit for {:?}; logged meanwhile:", full.elapsed());
    for l in &phase {
        eprintln!("  {l}");
    }
    let smart_warns = phase
        .iter()
        .filter(|l| l.contains("level=WARN") && l.contains("smart task limit"))
        .count();
    assert_eq!(smart_warns, 1, "{}", phase.join("\n"));
    let errors: Vec<&&str> = phase.iter().filter(|l| l.contains("level=ERROR")).collect();
    assert!(errors.is_empty(), "ERROR lines at the limit:\n{errors:?}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon died at the limit:\n{log}"
    );
    drop(d); // killed and reaped before the cgroup goes
    drop(hung);
}
