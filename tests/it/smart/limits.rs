//! The SMART collector's limits, against the fake smartctl (tests/fake-smartctl/smartctl): an
//! output that never ends is cut at the 4 MiB cap (not at the timeout) and costs only its own
//! drive, with an error naming it, while the daemon keeps serving; and with `parallelism: N`
//! no more than N smartctl run at once (the fake records how many are under way).

use crate::support;

use crate::support::smart::{Fake, sample, smart_fixture as fixture};

use ssdwatch::collector::smart::SmartCollector;
use std::time::{Duration, Instant};

/// The runner's output cap (src/privileged/runner.rs).
const CAP: u64 = 4 << 20;

fn sample_ok(m: &str, dev: &str) -> Option<f64> {
    support::value_matching(
        m,
        "ssdwatch_device_smart_sample_ok",
        &format!("device=\"{dev}\""),
    )
}

fn alive(pid: &str) -> bool {
    // A zombie is gone for our purpose only once reaped; /proc/PID exists until then.
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

#[test]
fn an_endless_smartctl_output_is_cut_at_the_cap_and_fails_only_its_own_drive() {
    let fake = Fake::new();
    fake.mode("sda", "flood");
    fake.mode(
        "sdb",
        &format!("ok {}", fixture("ata-samsung-860evo.json").display()),
    );
    // A long timeout: the run must end because of the cap, well before it.
    let timeout = Duration::from_secs(20);
    let devs = ["sda".to_string(), "sdb".to_string()];
    let mut c = SmartCollector::new(&fake.config(&devs, timeout, 2)).expect("collector");
    let t0 = Instant::now();
    let (m, errors) = sample(&mut c);
    let took = t0.elapsed();
    assert!(
        took < timeout / 2,
        "the flood ended by the timeout, not the cap: {took:?}"
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    assert!(
        e.starts_with("device sda:") && e.contains("unusable"),
        "the error names the drive and says its output is unusable: {e}"
    );
    assert!(e.contains("the output was cut short"), "{e}");
    // What was kept is no more than the cap (and most of it: the cut came from the cap).
    let kept: u64 = e
        .split("after ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {e}"));
    assert!(
        kept > CAP / 2 && kept <= CAP,
        "kept {kept} bytes, cap {CAP}"
    );
    assert_eq!(sample_ok(&m, "sda"), Some(0.0));
    assert_eq!(sample_ok(&m, "sdb"), Some(1.0));
    assert_eq!(
        support::value_matching(&m, "ssdwatch_device_wear_used_ratio", "device=\"sdb\""),
        Some(0.19)
    );
    // The writer got SIGPIPE once the pipe was closed; nothing keeps writing.
    let pid = fake.file("sda.flood");
    assert!(!pid.trim().is_empty(), "the flood started");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(&pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(&pid), "flood writer {} still running", pid.trim());
}

#[test]
fn the_daemon_stays_healthy_and_serves_while_a_drive_floods_its_output() {
    let fake = Fake::new();
    fake.mode("sda", "flood");
    fake.mode(
        "sdb",
        &format!(
            "ok {}",
            fixture("ata-intel-s4510-ssdsc2kb480g8.json").display()
        ),
    );
    let mut config = ssdwatch::config::Config::default();
    let devs = ["sda".to_string(), "sdb".to_string()];
    let mut smart = fake.config(&devs, Duration::from_secs(20), 2);
    smart.interval = Duration::from_secs(1);
    config.collectors.smart = smart;
    config.collectors.probe.enabled = false;
    let state = tempfile::tempdir().expect("state dir");
    config.state_dir = state.path().to_path_buf();
    let daemon = support::Daemon::start(config, ssdwatch::Roots::default());
    let m = daemon.wait_metrics("both drives sampled", Duration::from_secs(30), |m| {
        sample_ok(m, "sda").is_some() && sample_ok(m, "sdb").is_some()
    });
    assert_eq!(sample_ok(&m, "sda"), Some(0.0), "{m}");
    assert_eq!(sample_ok(&m, "sdb"), Some(1.0), "{m}");
    assert!(
        support::value_matching(&m, "ssdwatch_collector_errors_total", "collector=\"smart\"")
            .is_some_and(|n| n >= 1.0),
        "the cut output is counted as the smart collector's error"
    );
    // Several more floods later, the daemon still answers (a request that hangs fails the
    // helper's own deadline; how fast it answers is the benches' business).
    std::thread::sleep(Duration::from_secs(3));
    for _ in 0..5 {
        let health = daemon.get("/-/healthy");
        let m = daemon.get("/metrics");
        assert!(!health.is_empty());
        assert_eq!(sample_ok(&m, "sdb"), Some(1.0));
    }
    let argv = fake.file("sda.argv");
    assert!(argv.lines().count() >= 2, "sda was run again: {argv}");
}

/// How long each fake run takes: long enough that runs let through together overlap even
/// when starting a process takes a while on a loaded machine.
const RUN_SECS: f64 = 1.0;

#[test]
fn with_parallelism_n_no_more_than_n_smartctl_run_at_once() {
    let devs: Vec<String> = (0..6)
        .map(|i| format!("sd{}", (b'a' + i) as char))
        .collect();
    for n in [1usize, 3] {
        let fake = Fake::new();
        let file = fixture("ata-samsung-860evo.json");
        for d in &devs {
            fake.mode(d, &format!("slow {RUN_SECS} {}", file.display()));
        }
        let mut c =
            SmartCollector::new(&fake.config(&devs, Duration::from_secs(10), n)).expect("new");
        let t0 = Instant::now();
        let (m, errors) = sample(&mut c);
        let took = t0.elapsed();
        assert!(errors.is_empty(), "{errors:?}");
        for d in &devs {
            assert_eq!(sample_ok(&m, d), Some(1.0), "{d}");
        }
        let seen: Vec<usize> = fake
            .file("concurrency")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert_eq!(seen.len(), devs.len(), "one record per run: {seen:?}");
        let most = seen.iter().copied().max().unwrap_or(0);
        assert!(most <= n, "parallelism {n}: {most} ran at once ({seen:?})");
        // And the bound is used: with 6 drives of RUN_SECS each, N run together.
        assert_eq!(
            most, n,
            "parallelism {n}: at most {most} ran at once ({seen:?})"
        );
        // 6 runs in batches of N take at least ceil(6/N) x RUN_SECS.
        let batches = devs.len().div_ceil(n) as f64;
        assert!(
            took.as_secs_f64() >= batches * RUN_SECS * 0.95,
            "parallelism {n}: {took:?} for {batches} batches"
        );
    }
}
