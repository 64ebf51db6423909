//! The probe collector on a real loop-mounted ext4 (root): what its metrics say agrees with what
//! the probes did, and with what the kernel saw written to the drive.

mod support;

use ssdwatch::collector::probe::{ProbeCollector, ProbeConfig};
use ssdwatch::collector::{Collector, Context};
use ssdwatch::snapshot::{DiskActivity, Shared, unix_now};
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn value(text: &str, series_prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn exposition(s: &ssdwatch::collector::Sample) -> String {
    let mut text = String::new();
    ssdwatch::render::render_families(&mut text, s.metrics.families());
    text
}

/// One sample of a fresh probe collector on `target` with no history of the drive: the
/// collector (for its schedule), the sample's errors and its exposition.
async fn sample_once(
    target: &std::path::Path,
    busy_window: Duration,
) -> (ProbeCollector, Vec<String>, String) {
    let state = tempfile::tempdir().unwrap();
    let cfg = ProbeConfig {
        jitter_ratio: 0.0,
        busy_window,
        targets: vec![small_target(target)],
        ..ProbeConfig::default()
    };
    let ctx = Context {
        roots: Arc::new(host_roots()),
        shared: Arc::new(Shared::default()),
    };
    let mut c = ProbeCollector::new(&cfg, state.path()).unwrap();
    let s = c.sample(&ctx).await.unwrap();
    let text = exposition(&s);
    (c, s.errors, text)
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

fn stat(dev: &str) -> ssdwatch::sysfs::blockstat::BlockStat {
    ssdwatch::sysfs::blockstat::read_one(std::path::Path::new("/sys"), dev)
        .unwrap()
        .stat
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
            idle_since_unix: Some(now - 50.0),
            utilization_ratio: Some(0.0),
            updated_unix: now,
        },
    );
    let ctx = Context {
        roots: Arc::new(host_roots()),
        shared,
    };
    let mut c = ProbeCollector::new(&cfg, state.path()).unwrap();
    let sectors_before = stat(&dev).write_sectors;
    let first = c.sample(&ctx).await.unwrap();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    tokio::time::sleep(c.next_delay()).await;
    let ticks_before = stat(&dev).io_time_ms;
    let window = std::time::Instant::now();
    let second = c.sample(&ctx).await.unwrap();
    let kernel_ticks = stat(&dev).io_time_ms - ticks_before;
    let window_seconds = window.elapsed().as_secs_f64();
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    let kernel_bytes = (stat(&dev).write_sectors - sectors_before) * 512;

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

    let expected = target.file_size_bytes
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
    // over a window that contains the run. The probe's window D lies inside the test's W and
    // lasts at least as long as the run's serial I/Os (their latency sum L): its busy time util × D
    // can't exceed the kernel's K (upper bound), and misses at most what fell in W − D ≤ W − L,
    // give or take the kernel's lazy tick accounting (lower bound: util ≥ that over W).
    assert!((0.0..=1.0).contains(&util), "{util}");
    let second_run_io_seconds = latency_sum(&text) - latency_sum(&first_text);
    assert!(second_run_io_seconds > 0.0);
    let k = kernel_ticks as f64 / 1000.0;
    let upper_busy = k;
    let lower = (k - (window_seconds - second_run_io_seconds) - 0.05) / window_seconds;
    eprintln!(
        "utilization {util}, kernel {kernel_ticks} ms busy in {window_seconds:.3} s, run I/O {second_run_io_seconds:.3} s, lower bound {lower:.3}"
    );
    assert!(
        util * second_run_io_seconds <= upper_busy + 1e-9 && util >= lower,
        "utilization {util}: run I/O {second_run_io_seconds} s in a window of {window_seconds} s \
         in which the kernel counted {kernel_ticks} ms busy (so at least {lower})"
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
        value(
            &text,
            "ssdwatch_probe_throughput_bytes_per_second{probe=\"seq_write\""
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        value(&text, &format!("ssdwatch_probe_target_unsafe{{{labels}}}")),
        Some(0.0)
    );

    if require_cmd("promtool check", "promtool", "prometheus")
        && let Err(said) = promtool_check_metrics(&text)
    {
        panic!("promtool check metrics complains:\n{said}");
    }
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
        value(&text, "ssdwatch_probe_target_unsafe{"),
        Some(1.0),
        "{text}"
    );
    assert!(value(&text, "ssdwatch_probe_skipped_total{mountpoint=").is_some());
    let unsafe_line = text
        .lines()
        .find(|l| l.starts_with("ssdwatch_probe_skipped_total") && l.contains("reason=\"unsafe\""))
        .unwrap();
    assert!(unsafe_line.ends_with(" 1"), "{unsafe_line}");
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
