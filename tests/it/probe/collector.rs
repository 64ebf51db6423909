//! The probe collector on a real loop-mounted ext4 (root): what its metrics say agrees with what
//! the probes did, and with what the kernel saw written to the drive.

use crate::support;

use crate::support::unix_now;
use crate::support::*;
use ssdwatch::collector::probe::{ProbeCollector, ProbeConfig};
use ssdwatch::collector::{Collector, Context};
use ssdwatch::probe::{
    KindResult, Outcome, Placement, ProbeKind, RunContext, RunReport, Skip, SkipReason,
};
use ssdwatch::shared::{DiskActivity, Idle, Shared};
use std::sync::Arc;
use std::time::Duration;

/// One sample of a fresh probe collector: the collector (for its schedule), the sample's errors
/// and its exposition.
async fn sample_with(
    cfg: &ProbeConfig,
    state: &std::path::Path,
    shared: Arc<Shared>,
) -> (ProbeCollector, Vec<String>, String) {
    let ctx = Context {
        roots: Arc::new(ssdwatch::Roots::default()),
        shared,
        topology_max_age: std::time::Duration::from_secs(60),
        history: None,
        door: Default::default(),
    };
    let mut c = ProbeCollector::new(cfg, state).unwrap();
    let s = c.sample(&ctx).await.unwrap();
    let text = exposition(&s);
    (c, s.errors.iter().map(|e| e.to_string()).collect(), text)
}

/// The probe config of these tests: one small target, no jitter.
fn config(target: &std::path::Path, busy_window: Duration) -> ProbeConfig {
    ProbeConfig {
        jitter_ratio: 0.0,
        busy_window,
        targets: vec![small_target(target)],
        ..ProbeConfig::default()
    }
}

/// One sample on `target` with no history of the drive and a fresh state directory.
async fn sample_once(
    target: &std::path::Path,
    busy_window: Duration,
) -> (ProbeCollector, Vec<String>, String) {
    let state = tempfile::tempdir().unwrap();
    sample_with(&config(target, busy_window), state.path(), Arc::default()).await
}

/// The value of `ssdwatch_probe_skipped_total` for one reason.
fn skipped(text: &str, reason: &str) -> Option<f64> {
    value_matching(
        text,
        "ssdwatch_probe_skipped_total",
        &format!("reason=\"{reason}\""),
    )
}

/// Seconds spent in the serial probe I/Os so far (the latency histograms' sums, less
/// rand_write_4k's: its I/Os overlap at queue depth > 1, so their sum exceeds the time taken).
fn latency_sum(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("ssdwatch_probe_latency_seconds_sum{"))
        .filter(|l| !l.contains("probe=\"rand_write_4k\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histogram_counts_and_written_bytes_agree_with_what_the_probes_did() {
    if !require_root("probe collector") {
        return;
    }
    let fs = LoopFs::no_reserve(128);
    let state = tempfile::tempdir().unwrap();
    let target = small_target(&fs.mountpoint);
    let cfg = ProbeConfig {
        interval: Duration::from_secs(1),
        jitter_ratio: 0.0,
        busy_window: Duration::ZERO,
        targets: vec![target.clone()],
        ..ProbeConfig::default()
    };
    let dev = fs.kernel_name();
    let shared = Arc::new(Shared::default());
    let now = unix_now();
    shared.set_disk_activity(
        &dev,
        DiskActivity {
            last_discard_unix: Some(now - 100.0),
            discarding: false,
            written_since_discard_bytes: None,
            idle: Idle::Since(now - 50.0),
            utilization_ratio: Some(0.0),
            discarded_bytes: None,
            updated_unix: now,
        },
    );
    let ctx = Context {
        roots: Arc::new(ssdwatch::Roots::default()),
        shared,
        topology_max_age: std::time::Duration::from_secs(60),
        history: None,
        door: Default::default(),
    };
    let mut c = ProbeCollector::new(&cfg, state.path()).unwrap();
    let sectors_before = block_stat(&dev).write_sectors;
    let first = c.sample(&ctx).await.unwrap();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    tokio::time::sleep(c.next_delay()).await;
    let watch = BusyWatch::start(&dev);
    let second = c.sample(&ctx).await.unwrap();
    let kernel = watch.stop();
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    let kernel_bytes = (block_stat(&dev).write_sectors - sectors_before) * 512;

    let first_text = exposition(&first);
    let text = exposition(&second);
    let mp = fs.mountpoint.to_str().unwrap();
    let labels = format!("mountpoint=\"{mp}\",device=\"{dev}\"");
    let count = |probe: &str| {
        value(
            &text,
            &format!("ssdwatch_probe_latency_seconds_count{{probe=\"{probe}\",{labels}}}"),
        )
    };
    let w = f64::from(target.write_ops);
    // Two runs of the 4 KiB kinds; seq_write once (at most daily by default).
    assert_eq!(count("sync_write_4k"), Some(2.0 * w), "{text}");
    assert_eq!(count("rand_write_4k"), Some(2.0 * w));
    assert_eq!(
        count("rand_read_4k"),
        Some(2.0 * f64::from(target.read_ops))
    );
    let seq_ops = (target.seq_write_bytes / target.seq_write_block_bytes) as f64;
    assert_eq!(count("seq_write"), Some(seq_ops));
    let inf = value(
        &text,
        &format!(
            "ssdwatch_probe_latency_seconds_bucket{{probe=\"sync_write_4k\",{labels},le=\"+Inf\"}}"
        ),
    );
    assert_eq!(inf, Some(2.0 * w));
    assert_eq!(
        value(&text, &format!("ssdwatch_probe_runs_total{{{labels}}}")),
        Some(2.0)
    );

    // The probe file as sized for this filesystem (at most 1/32 of it).
    let v = nix::sys::statvfs::statvfs(&fs.mountpoint).unwrap();
    let fs_bytes = v.blocks() as u64 * v.fragment_size() as u64;
    let expected = ssdwatch::probe::probe_file_bytes(&target, fs_bytes)
        + 2 * 2 * u64::from(target.write_ops) * 4096
        + target.seq_write_bytes;
    let written = value(
        &text,
        &format!("ssdwatch_probe_written_bytes_total{{{labels}}}"),
    )
    .unwrap();
    assert_eq!(written as u64, expected);
    // The kernel saw at least that much written to the loop device (plus the journal's share).
    assert!(
        kernel_bytes >= expected,
        "kernel {kernel_bytes} < probe {expected}"
    );
    let saved = ssdwatch::probe::budget::load(state.path()).unwrap();
    assert_eq!(saved.targets[mp].written_bytes, expected);

    // Context: what diskstats published, and our own utilization and fill figures.
    let since = value(
        &text,
        &format!("ssdwatch_probe_context_since_discard_seconds{{{labels}}}"),
    )
    .unwrap();
    assert!((100.0..200.0).contains(&since), "{since}");
    let idle = value(
        &text,
        &format!("ssdwatch_probe_context_idle_seconds{{{labels}}}"),
    )
    .unwrap();
    assert!((50.0..150.0).contains(&idle), "{idle}");
    let fill = value(
        &text,
        &format!("ssdwatch_probe_context_fill_ratio{{{labels}}}"),
    )
    .unwrap();
    assert!(fill > 0.0 && fill < 0.5, "{fill}");
    let util = value(
        &text,
        &format!("ssdwatch_probe_context_utilization_ratio{{{labels}}}"),
    )
    .unwrap();
    // The kernel counts busy time in jiffies, and only for I/Os that span a tick: a short run on
    // a fast disk can honestly read 0. What must hold is agreement with the kernel's own count
    // over a window that contains the run. The probe's window lies inside the test's and lasts
    // at least as long as the run's serial I/Os (their latency sum).
    assert!((0.0..=1.0).contains(&util), "{util}");
    let second_run_io_seconds = latency_sum(&text) - latency_sum(&first_text);
    assert!(second_run_io_seconds > 0.0);
    let (lo, hi) = kernel.bounds_inside(Duration::from_secs_f64(second_run_io_seconds));
    eprintln!(
        "utilization {util}, kernel {:?} busy in {:?}, run I/O {second_run_io_seconds:.3} s: bounds {lo:.3}..{hi:.3}",
        kernel.ticks, kernel.wall
    );
    assert!(
        (lo - 1e-9..=hi + 1e-9).contains(&util),
        "utilization {util} outside {lo}..{hi}: run I/O {second_run_io_seconds} s in {:?} \
         in which the kernel counted {:?} busy",
        kernel.wall,
        kernel.ticks
    );
    let p50 = value(&text, &format!("ssdwatch_probe_last_latency_seconds{{probe=\"sync_write_4k\",{labels},quantile=\"0.5\"}}")).unwrap();
    let max = value(
        &text,
        &format!(
            "ssdwatch_probe_last_latency_seconds{{probe=\"sync_write_4k\",{labels},quantile=\"1\"}}"
        ),
    )
    .unwrap();
    assert!(p50 > 0.0 && p50 <= max);
    assert!(
        value_matching(
            &text,
            "ssdwatch_probe_throughput_bytes_per_second",
            "probe=\"seq_write\""
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        value(&text, &format!("ssdwatch_probe_target_unsafe{{{labels}}}")),
        Some(0.0)
    );

    if require_cmd("promtool check", "promtool", "prometheus") {
        assert_promtool_clean("probe collector", &text);
    }

    // The drive was busy in diskstats' last interval: the run's context says 0 s idle, as
    // ssdwatch_disk_idle_seconds does, not nothing.
    ctx.shared.set_disk_activity(
        &dev,
        DiskActivity {
            idle: Idle::Busy,
            updated_unix: unix_now(),
            ..DiskActivity::default()
        },
    );
    tokio::time::sleep(c.next_delay()).await;
    let third = exposition(&c.sample(&ctx).await.unwrap());
    assert_eq!(
        value(
            &third,
            &format!("ssdwatch_probe_context_idle_seconds{{{labels}}}")
        ),
        Some(0.0),
        "{third}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_probe_directory_shows_as_a_metric_and_a_collector_error() {
    if !require_root("probe collector unsafe") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let victim = fs.mountpoint.join("elsewhere");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, fs.probe_dir()).unwrap();
    let (mut c, errors, text) = sample_once(&fs.mountpoint, Duration::ZERO).await;
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains(".ssdwatch-probe"), "{errors:?}");
    assert_eq!(
        value_matching(&text, "ssdwatch_probe_target_unsafe", ""),
        Some(1.0),
        "{text}"
    );
    assert_eq!(skipped(&text, "unsafe"), Some(1.0), "{text}");
    assert!(names_in(&victim).is_empty());
    // The interval of a run: five minutes by default, jittered.
    assert!(
        c.next_delay() >= Duration::from_secs(200),
        "{:?}",
        c.next_delay()
    );
}

/// A drive whose I/O accounting is turned off (`queue/iostats` 0, a common tuning on database
/// hosts) has frozen counters: the probe still runs and measures, but reports no utilization
/// rather than a false 0, and the busy gate does not hold it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drive_without_io_accounting_gets_no_utilization_context() {
    if !require_root("probe collector without iostats") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let dev = fs.kernel_name();
    /// Turns accounting back on however the test ends: the loop device outlives it.
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, "1");
        }
    }
    let iostats = Restore(format!("/sys/block/{dev}/queue/iostats"));
    std::fs::write(&iostats.0, "0").unwrap();
    let (_, errors, text) = sample_once(&fs.mountpoint, Duration::from_millis(200)).await;
    drop(iostats);
    assert!(errors.is_empty(), "{errors:?}");
    let labels = format!(
        "mountpoint=\"{}\",device=\"{dev}\"",
        fs.mountpoint.to_str().unwrap()
    );
    assert_eq!(
        value(&text, &format!("ssdwatch_probe_runs_total{{{labels}}}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("ssdwatch_probe_context_utilization_ratio{{{labels}}}")
        ),
        None,
        "{text}"
    );
    assert!(
        value(
            &text,
            &format!("ssdwatch_probe_context_fill_ratio{{{labels}}}")
        )
        .is_some()
    );
}

/// The gates the root safety tests reach only through `probe run`, seen through the collector:
/// this hour's probing time used up, a corrupt budget file, and the drive busy by the diskstats
/// collector's last reading. None of them creates the probe file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_budget_corrupt_budget_file_and_a_busy_drive_skip_the_run() {
    if !require_root("probe collector gates") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let probe_file = fs.probe_dir().join("probe.dat");
    let cfg = config(&fs.mountpoint, Duration::ZERO);

    // A minute of probing this hour already (the default cap). Redone if the hour turned
    // between recording it and the run, which starts a new hour's count.
    for _ in 0..2 {
        let state = tempfile::tempdir().unwrap();
        let hour = (unix_now() / 3600.0) as u64;
        ssdwatch::probe::budget::record(state.path(), fs.mp(), unix_now(), 0, 60.0).unwrap();
        let (_, errors, text) = sample_with(&cfg, state.path(), Arc::default()).await;
        if (unix_now() / 3600.0) as u64 != hour {
            continue;
        }
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(skipped(&text, "budget"), Some(1.0), "{text}");
        assert!(!probe_file.exists());
        break;
    }

    // A budget file that can't be read stops the probes (they can't know what they may write)
    // with an error naming the file.
    let state = tempfile::tempdir().unwrap();
    let budget_file = state.path().join(ssdwatch::probe::budget::BUDGET_FILE);
    std::fs::write(&budget_file, "{not json").unwrap();
    let (_, errors, text) = sample_with(&cfg, state.path(), Arc::default()).await;
    assert_eq!(skipped(&text, "error"), Some(1.0), "{text}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains(ssdwatch::probe::budget::BUDGET_FILE)),
        "{errors:?}"
    );
    assert!(!probe_file.exists());

    // The diskstats collector saw the drive 90% busy a moment ago: no window of our own needed.
    let shared = Arc::new(Shared::default());
    shared.set_disk_activity(
        &fs.kernel_name(),
        DiskActivity {
            last_discard_unix: None,
            discarding: false,
            written_since_discard_bytes: None,
            idle: Idle::Unknown,
            utilization_ratio: Some(0.9),
            discarded_bytes: None,
            updated_unix: unix_now(),
        },
    );
    let state = tempfile::tempdir().unwrap();
    let (_, errors, text) = sample_with(&cfg, state.path(), shared).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(skipped(&text, "busy"), Some(1.0), "{text}");
    assert!(!probe_file.exists());
}

/// Bytes the budget file holds for the target (0 before any run returned).
fn budget_bytes(state: &std::path::Path, mp: &str) -> u64 {
    ssdwatch::probe::budget::load(state)
        .unwrap()
        .targets
        .get(mp)
        .map_or(0, |u| u.written_bytes)
}

/// Waits until a run left in the background has returned and recorded more than `than` bytes.
async fn budget_grows_past(state: &std::path::Path, mp: &str, than: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let b = budget_bytes(state, mp);
        if b > than {
            return b;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run left in the background never returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A run that outlives its timeout (here: a busy window longer than the timeout, where a hung
/// filesystem would block) counts as an error, no second run is started for the target while
/// it is out, and its bytes reach the budget file but not the written-bytes counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_timeout_is_an_error_and_no_second_run_starts() {
    if !require_root("probe collector timeout") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let state = tempfile::tempdir().unwrap();
    let mut cfg = config(&fs.mountpoint, Duration::from_secs(2));
    cfg.interval = Duration::from_secs(1);
    cfg.targets[0].timeout = Duration::from_millis(200);
    // The other tests' I/O on a shared machine must not make the drive look busy: a busy skip
    // would write nothing and this test is about a run that does.
    cfg.targets[0].busy_threshold = 1.0;
    let ctx = Context {
        roots: Arc::new(ssdwatch::Roots::default()),
        shared: Arc::default(),
        topology_max_age: std::time::Duration::from_secs(60),
        history: None,
        door: Default::default(),
    };
    let mut c = ProbeCollector::new(&cfg, state.path()).unwrap();
    let first = c.sample(&ctx).await.unwrap();
    assert!(
        first
            .errors
            .iter()
            .any(|e| e.message.contains("not finished after 200ms")),
        "{:?}",
        first.errors
    );
    // Due again while the first run is still in its busy window: not started.
    tokio::time::sleep(c.next_delay()).await;
    let second = c.sample(&ctx).await.unwrap();
    assert!(
        second.errors.iter().any(|e| e
            .message
            .contains("still hasn't returned; not starting another")),
        "{:?}",
        second.errors
    );
    assert_eq!(skipped(&exposition(&second), "error"), Some(2.0));
    // No run has placed it yet: its series are under its real mount and drive all the same.
    assert_eq!(
        probe_label_sets(&exposition(&second)),
        std::collections::BTreeSet::from([(
            fs.mountpoint.to_string_lossy().into_owned(),
            fs.kernel_name()
        )])
    );

    // Once it returns, its bytes are in the budget but not in the counter, and runs resume.
    let late = budget_grows_past(state.path(), fs.mp(), 0).await;
    tokio::time::sleep(c.next_delay()).await;
    let third = c.sample(&ctx).await.unwrap();
    assert!(
        third
            .errors
            .iter()
            .any(|e| e.message.contains("not finished after")),
        "a new run started: {:?}",
        third.errors
    );
    let text = exposition(&third);
    assert_eq!(skipped(&text, "error"), Some(3.0));
    assert!(
        value_matching(&text, "ssdwatch_probe_written_bytes_total", "").unwrap_or(0.0) == 0.0,
        "no run the collector saw finish wrote anything, the late one's {late} bytes: {text}"
    );
    // Let the third run finish before the filesystem is unmounted.
    budget_grows_past(state.path(), fs.mp(), late).await;
}

/// The outcomes a test feeds in place of real runs: a run on /data (the probe file made, one
/// kind run, seq_write left out for budget) and an unsafe skip on /logs.
fn recorded(target: &std::path::Path) -> Outcome {
    let placement = |mp: &str, drive: &str| Placement {
        mountpoint: mp.into(),
        drives: vec![drive.into()],
    };
    if target == std::path::Path::new("/logs") {
        return Outcome::Skipped(Skip {
            target: target.into(),
            placement: Some(placement("/logs", "sda")),
            reason: SkipReason::Unsafe,
            detail: "/logs/.ssdwatch-probe is a symlink or not a directory; refusing it".into(),
        });
    }
    Outcome::Ran(RunReport {
        target: target.into(),
        placement: placement("/data", "nvme0n1"),
        context: RunContext {
            fill_ratio: Some(0.5),
            since_discard_seconds: Some(3600.0),
            written_since_discard_bytes: Some(1 << 30),
            idle_seconds: Some(2.0),
            utilization_before_ratio: Some(0.125),
            utilization_ratio: Some(0.25),
        },
        started_unix: 1_700_000_000.0,
        duration_seconds: 0.5,
        written_bytes: (32 << 20) + 4 * 4096,
        file_created_bytes: 32 << 20,
        removed_leftovers: vec![],
        results: vec![KindResult {
            probe: ProbeKind::SyncWrite4k,
            ops: 4,
            bytes_written: 4 * 4096,
            p50_seconds: Some(0.0002),
            p99_seconds: None,
            max_seconds: 0.002,
            throughput_bytes_per_second: None,
            latencies: vec![0.0001, 0.0002, 0.0004, 0.002],
        }],
        budget_skipped: vec![ProbeKind::SeqWrite],
    })
}

/// What the collector shows of those two outcomes, in full: checked by hand against `recorded`
/// (`UPDATE_GOLDEN=1` rewrites it; review the diff).
const RECORDED_EXPOSITION: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/probe-recorded.prom"
));

/// A collector fed recorded outcomes (no root, no disk, no clock in what it shows): the
/// exposition of a run and of a skip is exactly the reviewed one, and the skip that refuses the
/// target is a fault of that target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_outcomes_of_a_run_and_a_skip_show_as_reviewed() {
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let cfg = ProbeConfig {
        jitter_ratio: 0.0,
        busy_window: Duration::ZERO,
        targets: ["/data", "/logs"]
            .iter()
            .map(|p| small_target(std::path::Path::new(p)))
            .collect(),
        ..ProbeConfig::default()
    };
    let mut c = ProbeCollector::with_runner(&cfg, state.path(), |t, _| recorded(&t.path)).unwrap();
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let s = c.sample(&ctx).await.unwrap();
    let text = exposition(&s);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/probe-recorded.prom"
        );
        std::fs::write(path, &text).unwrap();
    }
    assert_eq!(text, RECORDED_EXPOSITION, "got:\n{text}");
    let errors: Vec<(&str, String)> = s
        .errors
        .iter()
        .map(|e| (e.item.as_str(), e.to_string()))
        .collect();
    assert_eq!(
        errors,
        [(
            "/logs",
            "/logs/.ssdwatch-probe is a symlink or not a directory; refusing it".to_string()
        )]
    );
    if require_cmd("promtool check", "promtool", "prometheus") {
        assert_promtool_clean("recorded probe outcomes", &text);
    }
}

/// A collector of one target, /data, due every second, whose runs are `run(n, target)` for the
/// n-th call (from 0); and the count of calls so far.
fn numbered_runs(
    state: &std::path::Path,
    run: impl Fn(u32, &ssdwatch::probe::TargetConfig) -> Outcome + Send + Sync + 'static,
) -> (ProbeCollector, Arc<std::sync::atomic::AtomicU32>) {
    let mut cfg = config(std::path::Path::new("/data"), Duration::ZERO);
    cfg.interval = Duration::from_secs(1);
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = calls.clone();
    let c = ProbeCollector::with_runner(&cfg, state, move |t, _| {
        run(counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst), t)
    })
    .unwrap();
    (c, calls)
}

/// A run whose thread panics is an error of its target, and the target runs again when next due
/// (nothing is left believing the run is still out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_panics_is_an_error_and_the_target_runs_again_when_due() {
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut c, calls) = numbered_runs(state.path(), |n, t| {
        if n == 0 {
            panic!("a bug in the run");
        }
        recorded(&t.path)
    });
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let first = c.sample(&ctx).await.unwrap();
    let errors: Vec<String> = first.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors, ["/data: probe thread ended without a result"]);
    tokio::time::sleep(c.next_delay()).await;
    let second = c.sample(&ctx).await.unwrap();
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    let text = exposition(&second);
    assert_eq!(skipped(&text, "error"), Some(1.0), "{text}");
    assert_eq!(
        value_matching(&text, "ssdwatch_probe_runs_total", "/data"),
        Some(1.0),
        "{text}"
    );
}

/// The value of `ssdwatch_probe_target_failing` for one reason.
fn failing(text: &str, reason: &str) -> Option<f64> {
    value_matching(
        text,
        "ssdwatch_probe_target_failing",
        &format!("reason=\"{reason}\""),
    )
}

/// A typo'd target path: every attempt is an error. After three attempts in a row the target
/// shows as failing, with the reason, and only that reason; once the path is fixed and a run
/// completes it clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_keeps_failing_shows_as_failing_with_its_reason_until_it_runs() {
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut c, _) = numbered_runs(state.path(), |n, t| {
        if n < 3 {
            // As the runner places a missing path: on the mount it would be on.
            return Outcome::Skipped(Skip {
                target: t.path.clone(),
                placement: Some(Placement {
                    mountpoint: "/".into(),
                    drives: vec!["vda".into()],
                }),
                reason: SkipReason::Error,
                detail: "/data: No such file or directory (os error 2)".into(),
            });
        }
        recorded(&t.path)
    });
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let mut texts = Vec::new();
    for i in 0..4 {
        if i > 0 {
            tokio::time::sleep(c.next_delay()).await;
        }
        texts.push(exposition(&c.sample(&ctx).await.unwrap()));
    }
    for (i, text) in texts.iter().enumerate().take(2) {
        assert_eq!(
            failing(text, "error"),
            Some(0.0),
            "attempt {}: {text}",
            i + 1
        );
    }
    assert_eq!(failing(&texts[2], "error"), Some(1.0), "{}", texts[2]);
    for r in SkipReason::ALL.iter().filter(|r| **r != SkipReason::Error) {
        assert_eq!(failing(&texts[2], r.as_str()), Some(0.0), "{r:?}");
    }
    assert_eq!(failing(&texts[3], "error"), Some(0.0), "{}", texts[3]);
}

/// A target on a read-only filesystem is skipped on every attempt: the log says so once at
/// info, not every interval; after a run, the next skip is said again.
#[tokio::test]
async fn a_repeated_skip_is_logged_once_until_the_target_runs() {
    let log = support::logs::capture();
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut c, _) = numbered_runs(state.path(), |n, t| {
        if n == 3 {
            return recorded(&t.path);
        }
        Outcome::Skipped(Skip {
            target: t.path.clone(),
            placement: None,
            reason: SkipReason::Readonly,
            detail: "/data: read-only filesystem".into(),
        })
    });
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    // Attempts 0-2 skipped, 3 ran, 4-5 skipped.
    for i in 0..6 {
        if i > 0 {
            tokio::time::sleep(c.next_delay()).await;
        }
        c.sample(&ctx).await.unwrap();
    }
    let text = log.text();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("probe skipped (readonly)"))
        .collect();
    assert_eq!(said.len(), 2, "once before the run, once after: {text}");
    assert!(said.iter().all(|l| l.contains("INFO")), "{text}");
}

/// Two targets, /data every second and /logs (refused each time) every three: most samples run
/// /data alone. The log says /logs' fault once, at WARN, and never "recovered" in the samples
/// that don't run it (before: a false "recovered" line and a new WARN every cycle).
#[tokio::test]
async fn a_failing_target_not_due_in_a_sample_is_neither_recovered_nor_warned_again() {
    use ssdwatch::fault::Faults;
    use ssdwatch::snapshot::Snapshots;
    let log = support::logs::capture();
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cfg = ProbeConfig {
        interval: Duration::from_secs(1),
        jitter_ratio: 0.0,
        busy_window: Duration::ZERO,
        targets: ["/data", "/logs"]
            .iter()
            .map(|p| small_target(std::path::Path::new(p)))
            .collect(),
        ..ProbeConfig::default()
    };
    cfg.targets[1].interval = Some(Duration::from_secs(3));
    let logs_runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = logs_runs.clone();
    let mut c = ProbeCollector::with_runner(&cfg, state.path(), move |t, _| {
        if t.path == std::path::Path::new("/logs") {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        recorded(&t.path)
    })
    .unwrap();
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let store = Snapshots::new();
    store.register("probe");
    let mut faults = Faults::default();
    // Until /logs has run three times and at least three samples went without it: counted in
    // samples, not seconds.
    let (mut samples, mut without_logs) = (0, 0);
    while logs_runs.load(std::sync::atomic::Ordering::SeqCst) < 3 || without_logs < 3 {
        if samples > 0 {
            tokio::time::sleep(c.next_delay()).await;
        }
        let before = logs_runs.load(std::sync::atomic::Ordering::SeqCst);
        ssdwatch::collector::sample_and_publish(&mut c, &ctx, &store, &mut faults).await;
        if logs_runs.load(std::sync::atomic::Ordering::SeqCst) == before {
            without_logs += 1;
        }
        samples += 1;
        assert!(samples < 100, "{samples} samples");
        // /logs is failing in every sample, run or not.
        let text = store.render();
        assert!(
            text.contains("ssdwatch_collector_failing_items{collector=\"probe\"} 1\n"),
            "sample {samples}:\n{text}"
        );
    }
    let text = log.text();
    let about_logs: Vec<&str> = text.lines().filter(|l| l.contains("/logs")).collect();
    assert_eq!(about_logs.len(), 1, "{samples} samples:\n{text}");
    assert!(about_logs[0].contains("WARN"), "{text}");
    assert!(!text.contains("recovered"), "{text}");
}

/// Two targets on one filesystem, /data/pg and /data/wal (both on /data, nvme0n1): the scrape
/// shows the first configured, and the log says once, at WARN, which target is hidden behind
/// which and on what filesystem, not at every sample.
#[tokio::test]
async fn a_second_target_on_a_shared_filesystem_is_logged_once_naming_both() {
    let log = support::logs::capture();
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let cfg = ProbeConfig {
        interval: Duration::from_secs(1),
        jitter_ratio: 0.0,
        busy_window: Duration::ZERO,
        targets: ["/data/pg", "/data/wal"]
            .iter()
            .map(|p| small_target(std::path::Path::new(p)))
            .collect(),
        ..ProbeConfig::default()
    };
    // Runs of each target, /data/pg's first.
    let runs: Arc<[std::sync::atomic::AtomicU32; 2]> = Arc::default();
    let counted = runs.clone();
    let mut c = ProbeCollector::with_runner(&cfg, state.path(), move |t, _| {
        let i = usize::from(t.path.ends_with("wal"));
        counted[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        recorded(&t.path)
    })
    .unwrap();
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let ran = |i: usize| runs[i].load(std::sync::atomic::Ordering::SeqCst);
    // Until each has run three times: counted in runs, not seconds.
    let (mut text, mut samples) = (String::new(), 0);
    while ran(0) < 3 || ran(1) < 3 {
        if samples > 0 {
            tokio::time::sleep(c.next_delay()).await;
        }
        text = exposition(&c.sample(&ctx).await.unwrap());
        samples += 1;
        assert!(samples < 100, "{samples} samples");
    }
    // Both are probed; one set of series, the valid scrape the hiding is for: the first's.
    assert_eq!(
        probe_label_sets(&text),
        std::collections::BTreeSet::from([("/data".to_string(), "nvme0n1".to_string())])
    );
    assert_eq!(
        value_matching(&text, "ssdwatch_probe_runs_total", "mountpoint=\"/data\""),
        Some(f64::from(ran(0))),
        "the first target's runs: {text}"
    );
    let logged = log.text();
    let said: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("same filesystem"))
        .collect();
    assert_eq!(said.len(), 1, "said once in {samples} samples:\n{logged}");
    assert!(said[0].contains("WARN"), "{logged}");
    assert!(
        said[0].contains(
            "probe target /data/wal is on the same filesystem as probe target /data/pg (/data, drive nvme0n1)"
        ),
        "names both targets and the filesystem: {logged}"
    );
}

/// Every probe series' (mountpoint, device) labels in an exposition.
fn probe_label_sets(text: &str) -> std::collections::BTreeSet<(String, String)> {
    let re =
        regex_lite::Regex::new(r#"^ssdwatch_probe_\w+\{.*mountpoint="([^"]*)",device="([^"]*)""#)
            .unwrap();
    text.lines()
        .filter_map(|l| re.captures(l))
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect()
}

/// Before its first attempt has placed it, a target has no series at all (not one labelled with
/// its configured path and no device, to be replaced by the real mount's a run later); an
/// attempt that could not place it shows nothing either; from its first placed attempt on, the
/// target has one set of series, under its real mount and drive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_has_one_set_of_series_under_its_real_mount_from_its_first_placed_attempt() {
    let fixture = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut c, _) = numbered_runs(state.path(), |n, t| match n {
        0 => Outcome::Skipped(Skip {
            target: t.path.clone(),
            placement: None,
            reason: SkipReason::Error,
            detail: "/data: probe run not placed".into(),
        }),
        _ => recorded(&t.path),
    });
    let ctx = Context::new(
        ssdwatch::Roots::fixture(fixture.path()),
        Duration::from_secs(60),
    );
    let mut sets = Vec::new();
    for i in 0..3 {
        if i > 0 {
            tokio::time::sleep(c.next_delay()).await;
        }
        sets.push(probe_label_sets(&exposition(
            &c.sample(&ctx).await.unwrap(),
        )));
    }
    assert!(sets[0].is_empty(), "not placed yet: {:?}", sets[0]);
    let real = std::collections::BTreeSet::from([("/data".to_string(), "nvme0n1".to_string())]);
    assert_eq!(sets[1], real);
    assert_eq!(sets[2], real);
}

/// A bind mount made by a test, unmounted (lazily, so a failed assertion can't leave it busy)
/// when dropped.
struct Bind(std::path::PathBuf);

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A target reached through a symlink (/tmp/x/link -> <ext4>/pg) and one inside a bind mount of
/// that directory (/tmp/x/bind): each is labelled by its real mount from its first attempt
/// (placed from the mount table alone), and its runs keep that label. Before, the symlinked one
/// was labelled by the mount holding the link's own path, then by the link's path after a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_through_a_symlink_or_a_bind_mount_keeps_one_label_from_its_first_attempt() {
    if !require_root("bind mount") {
        return;
    }
    let fs = LoopFs::no_reserve(64);
    let dev = fs.kernel_name();
    let pg = fs.mountpoint.join("pg");
    std::fs::create_dir(&pg).unwrap();
    let top = tempfile::tempdir().unwrap();
    let link = top.path().join("link");
    std::os::unix::fs::symlink(&pg, &link).unwrap();
    let bind = top.path().join("bind");
    std::fs::create_dir(&bind).unwrap();
    let st = std::process::Command::new("mount")
        .arg("--bind")
        .arg(&pg)
        .arg(&bind)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "mount --bind {} {}",
        pg.display(),
        bind.display()
    );
    let _bound = Bind(bind.clone());
    // A symlink into the bind mount, under a directory that is itself a symlink.
    let via = top.path().join("via");
    std::os::unix::fs::symlink(top.path(), &via).unwrap();
    let cases = [
        (link.clone(), fs.mountpoint.clone()),
        (bind.join("."), bind.clone()),
        (via.join("bind"), bind.clone()),
    ];
    for (target, real) in cases {
        let want = (real.display().to_string(), dev.clone());
        let first =
            ssdwatch::probe::placement_from_mount_table(&target, &ssdwatch::Roots::default(), None)
                .unwrap_or_else(|| panic!("{}: not placed", target.display()));
        assert_eq!(
            (first.mountpoint.clone(), first.device().to_string()),
            want,
            "{}: placed before its first run",
            target.display()
        );
        let (_, errors, text) = sample_once(&target, Duration::ZERO).await;
        assert!(
            value_matching(&text, "ssdwatch_probe_runs_total", "") == Some(1.0),
            "{}: no run: {errors:?}\n{text}",
            target.display()
        );
        assert_eq!(
            probe_label_sets(&text),
            std::collections::BTreeSet::from([want.clone()]),
            "{}: labelled after its run",
            target.display()
        );
    }
}

/// Before any run, a target is placed from the mount table: a path that does not exist is shown
/// on the mount it would be on (here /proc, on no block device: no drive), never under its own
/// path.
#[test]
fn a_missing_target_path_is_placed_on_the_mount_it_would_be_on() {
    let p = ssdwatch::probe::placement_from_mount_table(
        std::path::Path::new("/proc/no-such-dir/ssdwatch-target"),
        &ssdwatch::Roots::default(),
        None,
    )
    .expect("/proc exists");
    assert_eq!(p.mountpoint, "/proc");
    assert_eq!(p.device(), "");
}
