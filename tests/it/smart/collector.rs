//! The SMART collector against a fake smartctl (tests/fake-smartctl/smartctl) that hangs,
//! prints garbage or truncated JSON, exits with each error bit or reports standby: the daemon
//! keeps serving, each problem is reported for its own device, and no process is left behind.

use crate::support;

use crate::support::smart::{
    EmptyHost, Fake, OcpCapture, RAID_SCAN, sample, smart_fixture as fixture,
};

use ssdwatch::collector::Collector;
use ssdwatch::collector::smart::{DeviceEntry, SmartCollector, SmartConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The fake's SMART config for this file: a 700 ms timeout, the default parallelism.
fn config<S: AsRef<str>>(fake: &Fake, devs: &[S]) -> SmartConfig {
    fake.config(
        devs,
        Duration::from_millis(700),
        SmartConfig::default().parallelism,
    )
}

/// Wear of the Samsung 860 EVO capture (attribute 177, 81% life left).
const WEAR_860EVO: f64 = 0.19;

fn val(text: &str, family: &str, labels_contain: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels_contain.iter().all(|p| l.contains(p)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Children of this process that are zombies (exited, never reaped).
fn zombie_children() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 1 && f[0] == "Z" && f[1] == me {
            out.push(stat);
        }
    }
    out
}

/// No zombie child lingers: one seen just between another test's child exiting and being
/// reaped is fine, so only zombies that persist for 2 s count.
fn assert_no_lingering_zombies() {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let z = zombie_children();
        if z.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "zombie children: {z:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn process_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|x| x.1.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

#[test]
fn a_hung_smartctl_is_killed_with_its_process_group_and_the_daemon_keeps_serving() {
    let fake = Fake::new();
    fake.mode("sda", "hang");
    fake.ok("sdb", "nvme-samsung-pm9a1-mzvl21t0hclr.json");
    let mut cfg = ssdwatch::config::Config::default();
    cfg.collectors.smart = SmartConfig {
        interval: Duration::from_secs(1),
        ..config(&fake, &["sda", "sdb"])
    };
    cfg.collectors.probe.enabled = false;
    cfg.collectors.filesystem.enabled = false;
    let empty = tempfile::tempdir().expect("tempdir");
    let d = support::Daemon::start(cfg, ssdwatch::Roots::fixture(empty.path()));
    // Scrapes are answered while smartctl hangs: /metrics never waits for it.
    let m = d.wait_metrics("the hung drive reported", Duration::from_secs(20), |m| {
        val(m, "ssdwatch_device_smart_sample_ok", &["device=\"sda\""]) == Some(0.0)
            && val(m, "ssdwatch_device_wear_used_ratio", &["device=\"sdb\""]).is_some()
    });
    assert_eq!(
        val(&m, "ssdwatch_device_wear_used_ratio", &["device=\"sdb\""]),
        Some(0.16),
        "the healthy drive is unaffected"
    );
    let child = std::fs::read_to_string(fake.dir.path().join("sda.child")).expect("child pid");
    let child = child.trim();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while process_alive(child) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !process_alive(child),
        "smartctl's own child {child} survived the timeout"
    );
    assert_no_lingering_zombies();
    assert!(d.get("/-/healthy").len() < 1000);
}

#[test]
fn garbage_and_truncated_output_fail_only_their_own_drive() {
    let fake = Fake::new();
    fake.mode("sda", "garbage");
    fake.mode(
        "sdb",
        &format!("truncated {}", fixture("ata-samsung-860evo.json").display()),
    );
    fake.ok("sdc", "ata-intel-s4510-ssdsc2kb480g8.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda", "sdb", "sdc"])).expect("new");
    let (m, errors) = sample(&mut c);
    for dev in ["sda", "sdb"] {
        assert_eq!(
            val(
                &m,
                "ssdwatch_device_smart_sample_ok",
                &[&format!("device=\"{dev}\"")]
            ),
            Some(0.0)
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains(&format!("device {dev}:")) && e.contains("unusable")),
            "{errors:?}"
        );
    }
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        val(&m, "ssdwatch_device_smart_sample_ok", &["device=\"sdc\""]),
        Some(1.0)
    );
    // Intel S4510: NAND 95488 / host 14308 (both 32 MiB units) over the drive's life.
    let waf = val(
        &m,
        "ssdwatch_device_write_amplification_ratio",
        &["device=\"sdc\"", "window=\"lifetime\""],
    )
    .expect("lifetime WAF");
    assert!((waf - 95488.0 / 14308.0).abs() < 1e-9, "{waf}");
    assert!(
        val(
            &m,
            "ssdwatch_device_smart_attribute_raw",
            &["device=\"sdc\"", "id=\"243\""]
        )
        .is_some()
    );
    assert_no_lingering_zombies();
}

#[test]
fn each_smartctl_exit_bit_is_reported_by_name() {
    let names = [
        "command_failed",
        "device_open_failed",
        "smart_command_failed",
        "smart_status_failing",
        "prefail_threshold_crossed",
        "threshold_crossed_in_past",
        "error_log_has_errors",
        "self_test_log_has_errors",
    ];
    for (bit, name) in names.iter().enumerate() {
        let fake = Fake::new();
        let status = 1u32 << bit;
        fake.mode(
            "sda",
            &format!(
                "exit {status} {}",
                fixture("nvme-intel-p4510-ssdpe2kx010t8-worn73.json").display()
            ),
        );
        let mut c = SmartCollector::new(&config(&fake, &["sda"])).expect("new");
        let (m, _) = sample(&mut c);
        for (other, oname) in names.iter().enumerate() {
            let want = if other == bit { 1.0 } else { 0.0 };
            assert_eq!(
                val(
                    &m,
                    "ssdwatch_device_smartctl_exit_status_bit",
                    &[&format!("bit=\"{oname}\"")]
                ),
                Some(want),
                "exit status {status}: bit {oname}"
            );
        }
        // A non-zero exit is no reason to drop what the output does carry.
        assert_eq!(
            val(&m, "ssdwatch_device_wear_used_ratio", &["device=\"sda\""]),
            Some(0.73),
            "exit status {status} ({name})"
        );
    }
}

#[test]
fn a_drive_in_standby_keeps_its_last_values_and_is_not_woken() {
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda"])).expect("new");
    let (awake, _) = sample(&mut c);
    assert_eq!(
        val(&awake, "ssdwatch_device_in_standby", &["device=\"sda\""]),
        Some(0.0)
    );
    fake.mode("sda", "standby");
    std::thread::sleep(Duration::from_millis(1100));
    let (asleep, errors) = sample(&mut c);
    assert!(errors.is_empty(), "standby is no error: {errors:?}");
    assert_eq!(
        val(&asleep, "ssdwatch_device_in_standby", &["device=\"sda\""]),
        Some(1.0)
    );
    for fam in [
        "ssdwatch_device_wear_used_ratio",
        "ssdwatch_device_host_written_bytes_total",
        "ssdwatch_device_temperature_celsius",
    ] {
        assert_eq!(
            val(&asleep, fam, &["device=\"sda\""]),
            val(&awake, fam, &["device=\"sda\""]),
            "{fam} kept from the awake sample"
        );
    }
    assert_eq!(
        val(
            &asleep,
            "ssdwatch_device_wear_used_ratio",
            &["device=\"sda\""]
        ),
        Some(WEAR_860EVO)
    );
    let age = val(
        &asleep,
        "ssdwatch_device_smart_sample_age_seconds",
        &["device=\"sda\""],
    )
    .expect("age");
    assert!(age >= 1.0, "age grows while asleep: {age}");
    let argv = fake.argv("sda");
    let runs: Vec<&str> = argv.lines().collect();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter().all(|r| r.contains("--nocheck=standby")),
        "{argv}"
    );
    // Once the drive is known to speak ATA, its small logs are asked for in the same run:
    // the device statistics, the SMART error log's count and the self-test log.
    for log in ["--log=devstat", "--log=error", "--log=selftest"] {
        assert!(
            !runs[0].contains(log) && runs[1].contains(log),
            "{log}: {argv}"
        );
    }
}

#[test]
fn permission_denied_names_the_capability_needed() {
    let fake = Fake::new();
    let json = fake.dir.path().join("denied.json");
    std::fs::write(
        &json,
        r#"{"json_format_version":[1,0],"smartctl":{"version":[7,3],"messages":[{"string":"Smartctl open device: /dev/nvme0n1 failed: Permission denied","severity":"error"}],"exit_status": 2}}"#,
    )
    .expect("write");
    fake.mode("nvme0n1", &format!("exit 2 {}", json.display()));
    let mut c = SmartCollector::new(&config(&fake, &["nvme0n1"])).expect("new");
    let (m, errors) = sample(&mut c);
    assert!(
        errors.iter().any(|e| e.contains("device nvme0n1")
            && e.contains("Permission denied")
            && e.contains("CAP_SYS_ADMIN")),
        "{errors:?}"
    );
    assert_eq!(
        val(
            &m,
            "ssdwatch_device_smartctl_exit_status_bit",
            &["bit=\"device_open_failed\""]
        ),
        Some(1.0)
    );
}

#[test]
fn a_missing_smartctl_binary_is_reported_per_device_without_failing_the_sample() {
    let mut cfg = config(&Fake::new(), &["sda"]);
    cfg.smartctl_path = PathBuf::from("/nonexistent/smartctl");
    let mut c = SmartCollector::new(&cfg).expect("new");
    let (m, errors) = sample(&mut c);
    assert!(
        errors.iter().any(|e| e.contains("/nonexistent/smartctl")),
        "{errors:?}"
    );
    assert_eq!(
        val(&m, "ssdwatch_device_smart_sample_ok", &["device=\"sda\""]),
        Some(0.0)
    );
}

#[test]
fn collector_output_passes_promtool() {
    if !support::require_cmd("collector_output_passes_promtool", "promtool", "prometheus") {
        return;
    }
    let fake = Fake::new();
    let devs = ["sda", "sdb", "sdc", "nvme0n1"];
    for (d, f) in devs.iter().zip([
        "ata-kingston-a400-sa400m8120g.json",
        "scsi-samsung-pm1643a-mzilt960hbhq-ssd.json",
        "ata-wd-red-sa500-wds400t1r0a.json",
        "nvme-intel-p3700-ssdpedmd016t4-worn41.json",
    ]) {
        fake.ok(d, f);
    }
    let mut c = SmartCollector::new(&config(&fake, &devs)).expect("new");
    let (m, errors) = sample(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    support::assert_promtool_clean(&m, &m);
    // Every drive carries the same label set, serial included.
    assert!(m.contains("ssdwatch_device_info{device=\"nvme0n1\",serial=\"REDACTED\""));
}

#[test]
fn a_rejected_device_statistics_log_costs_only_its_own_fields_and_is_not_asked_again() {
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda"])).expect("new");
    let _ = sample(&mut c);
    // The bridge rejects the log: smartctl sets exit bit 2 and still prints identity data.
    fake.mode(
        "sda",
        &format!(
            "exit 4 {}",
            fixture("usb-jmb39x-wdc-wd40efrx-info-exit4.json").display()
        ),
    );
    let (m, errors) = sample(&mut c);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("Device Statistics"), "{errors:?}");
    assert!(
        m.contains("model=\"WDC WD40EFRX-68N32N0\""),
        "identity still used\n{m}"
    );
    let (_, errors) = sample(&mut c);
    assert!(errors.is_empty(), "reported once: {errors:?}");
    let argv = fake.argv("sda");
    let runs: Vec<&str> = argv.lines().collect();
    assert_eq!(runs.len(), 3);
    assert!(runs[1].contains("--log=devstat"), "{argv}");
    assert!(!runs[2].contains("--log=devstat"), "{argv}");
    // The other logs are still asked for: only the refused one goes.
    assert!(runs[2].contains("--log=selftest"), "{argv}");
}

#[test]
fn each_drive_exports_its_class_interval_and_is_not_queried_again_before_it() {
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    let mut cfg = config(&fake, &["sda"]);
    cfg.class_intervals.ata = Some(Duration::from_secs(7200));
    let mut c = SmartCollector::new(&cfg).expect("new");
    let (first, errors) = sample(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    // The alert on stale SMART data compares the sample age against this interval.
    assert_eq!(
        val(
            &first,
            "ssdwatch_device_smart_interval_seconds",
            &["device=\"sda\""]
        ),
        Some(7200.0)
    );
    let (second, errors) = sample(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(fake.argv("sda").lines().count(), 1, "not due again yet");
    // The last values are kept meanwhile.
    assert_eq!(
        val(
            &second,
            "ssdwatch_device_wear_used_ratio",
            &["device=\"sda\""]
        ),
        Some(WEAR_860EVO)
    );
}

#[test]
fn a_failing_drive_is_one_fault_under_its_device_label() {
    let mut cfg = config(&Fake::new(), &["sda"]);
    cfg.smartctl_path = PathBuf::from("/nonexistent/smartctl");
    let mut c = SmartCollector::new(&cfg).expect("new");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = rt
        .block_on(c.sample(&EmptyHost::new().ctx))
        .expect("sample never fails");
    // Faults are logged when they start and clear per item: the item is the device label.
    assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
    assert_eq!(s.errors[0].item, "sda");
    assert_eq!(
        s.errors[0].to_string(),
        s.errors[0].message,
        "the message names its device once"
    );
    assert!(
        s.errors[0]
            .message
            .starts_with("device sda: cannot run /nonexistent/smartctl")
    );
}

/// A smartctl stuck in the kernel on one failing drive (uninterruptible: SIGKILL can't end it)
/// delays no other drive: the sample ends after the timeout and a short grace, the drive shows
/// as stuck and is not run again until the stuck process is gone, and its data goes on ageing
/// truthfully. Made real with a FUSE mount whose statfs never returns.
#[test]
fn a_smartctl_stuck_in_the_kernel_freezes_no_other_drive() {
    if !support::fuse_available("smartctl in D state") {
        return;
    }
    let mut hung = support::HungFuse::new();
    let fake = Fake::new();
    fake.mode("sda", &format!("dstate {}", hung.mountpoint.display()));
    fake.ok("sdb", "ata-samsung-860evo.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda", "sdb"])).unwrap();
    let sampler = Sampler::new();
    let run = |c: &mut SmartCollector| sampler.run(c);
    let (text, errors, took) = run(&mut c);
    // 0.7 s timeout + 1 s grace, then the sample goes on without it.
    assert!(
        took < Duration::from_secs(5),
        "the first sample took {took:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("device sda") && e.contains("stuck in the kernel")),
        "{errors:?}"
    );
    assert_eq!(
        val(&text, "ssdwatch_device_smartctl_stuck", &["device=\"sda\""]),
        Some(1.0)
    );
    assert_eq!(
        val(&text, "ssdwatch_device_smartctl_stuck", &["device=\"sdb\""]),
        Some(0.0)
    );
    assert_eq!(
        val(
            &text,
            "ssdwatch_device_wear_used_ratio",
            &["device=\"sdb\""]
        ),
        Some(WEAR_860EVO)
    );
    // The next sample does not start another smartctl on sda, and takes no time for it.
    let (text, errors, took) = run(&mut c);
    assert!(
        took < Duration::from_secs(2),
        "the second sample took {took:?}"
    );
    assert_eq!(
        fake.argv("sda").lines().count(),
        1,
        "no second smartctl on the stuck drive"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("still stuck in the kernel")),
        "{errors:?}"
    );
    assert_eq!(
        val(
            &text,
            "ssdwatch_device_wear_used_ratio",
            &["device=\"sdb\""]
        ),
        Some(WEAR_860EVO)
    );
    assert_eq!(fake.argv("sdb").lines().count(), 2);
    // The drive's I/O returns (the FUSE server dies): the stuck process goes, is reaped, and
    // the drive is run again.
    hung.kill_server_only();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (text, _, _) = run(&mut c);
        if val(&text, "ssdwatch_device_smartctl_stuck", &["device=\"sda\""]) == Some(0.0)
            && fake.argv("sda").lines().count() >= 2
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sda never ran again:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_no_lingering_zombies();
}

/// Samples a SMART collector as the daemon does, on a runtime of two workers: the exposition,
/// the errors and the time the sample took.
struct Sampler {
    rt: tokio::runtime::Runtime,
    host: EmptyHost,
}

impl Sampler {
    fn new() -> Sampler {
        Sampler {
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
            host: EmptyHost::new(),
        }
    }

    fn run(&self, c: &mut SmartCollector) -> (String, Vec<String>, Duration) {
        let t = std::time::Instant::now();
        let s = self.rt.block_on(c.sample(&self.host.ctx)).unwrap();
        (
            support::exposition(&s),
            s.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            t.elapsed(),
        )
    }
}

#[test]
fn a_drive_stuck_after_a_good_read_keeps_its_values_and_their_age_grows_truthfully() {
    let test = "a drive stuck after a good read";
    if !support::fuse_available(test) {
        return;
    }
    let mut hung = support::HungFuse::new();
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    fake.ok("sdb", "ata-samsung-860evo.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda", "sdb"])).unwrap();
    let sampler = Sampler::new();
    let age = |text: &str, dev: &str| {
        val(
            text,
            "ssdwatch_device_smart_sample_age_seconds",
            &[&format!("device=\"{dev}\"")],
        )
        .unwrap_or_else(|| panic!("no age for {dev}:\n{text}"))
    };
    let wear = |text: &str, dev: &str| {
        val(
            text,
            "ssdwatch_device_wear_used_ratio",
            &[&format!("device=\"{dev}\"")],
        )
    };
    let (text, errors, _) = sampler.run(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(wear(&text, "sda"), Some(WEAR_860EVO));
    let good_read = std::time::Instant::now();

    // The drive's next smartctl hangs in the kernel: what is served for it is the good read,
    // aged from when it was taken; the other drive is read afresh every sample.
    fake.mode("sda", &format!("dstate {}", hung.mountpoint.display()));
    let mut last_age = 0.0;
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(1100));
        let (text, errors, _) = sampler.run(&mut c);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("device sda") && e.contains("stuck")),
            "round {round}: {errors:?}"
        );
        assert_eq!(
            val(&text, "ssdwatch_device_smartctl_stuck", &["device=\"sda\""]),
            Some(1.0)
        );
        assert_eq!(wear(&text, "sda"), Some(WEAR_860EVO), "round {round}");
        let a = age(&text, "sda");
        let since = good_read.elapsed().as_secs_f64();
        assert!(
            a >= since - 1.0 && a > last_age,
            "round {round}: sda's age {a} s, {since:.1} s since its good read, {last_age} s before"
        );
        last_age = a;
        // The sample that first finds sda stuck waits for it once (its timeout, 0.7 s, and
        // the reap grace, 1 s): sdb's values in it are that much older, and say so.
        let bound = if round == 0 { 3.0 } else { 1.0 };
        assert!(
            age(&text, "sdb") < bound,
            "round {round}: sdb is read every sample:\n{text}"
        );
        assert_eq!(wear(&text, "sdb"), Some(WEAR_860EVO));
    }
    assert_eq!(
        fake.argv("sda").lines().count(),
        2,
        "one good run, one stuck"
    );
    // The I/O returns: the stuck process is reaped and the drive read again, its age back to 0.
    hung.kill_server_only();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    fake.ok("sda", "ata-samsung-860evo.json");
    loop {
        let (text, _, _) = sampler.run(&mut c);
        if val(&text, "ssdwatch_device_smartctl_stuck", &["device=\"sda\""]) == Some(0.0)
            && age(&text, "sda") < 1.0
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sda never read again:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_no_lingering_zombies();
}

/// A loop device attached for a test; detached, its node's mode and owner put back, when
/// dropped (the node outlives the test).
struct LoopDev(String, Option<std::fs::Metadata>);

impl Drop for LoopDev {
    fn drop(&mut self) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if let Some(m) = &self.1 {
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(m.mode()));
            let _ = std::os::unix::fs::chown(&self.0, Some(m.uid()), Some(m.gid()));
        }
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

#[test]
fn a_refusal_with_the_capabilities_held_names_the_node_mode_not_a_capability() {
    let test = "a_refusal_with_the_capabilities_held_names_the_node_mode_not_a_capability";
    if !support::require_root(test)
        || !support::require_cmd(test, "setpriv", "util-linux")
        || !support::require_cmd(test, "smartctl", "smartmontools")
    {
        return;
    }
    // A real block device made 0600 root:root, and the daemon run as nobody holding
    // CAP_SYS_RAWIO (ambient, as the shipped unit grants it): smartctl's open is refused by the
    // node's mode, and the message must say so instead of blaming the capability.
    let dir = tempfile::tempdir().expect("tempdir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(8 << 20))
        .expect("image");
    let node = support::run(
        "losetup",
        &["-f", "--show", image.to_str().expect("utf-8 path")],
    )
    .trim()
    .to_string();
    let dev = LoopDev(node.clone(), std::fs::metadata(&node).ok());
    std::fs::set_permissions(&dev.0, std::fs::Permissions::from_mode(0o600)).expect("chmod node");
    std::os::unix::fs::chown(&dev.0, Some(0), Some(0)).expect("chown node");
    let config = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}\ncollectors:\n  filesystem:\n    enabled: false\n  probe:\n    enabled: false\n  smart:\n    discover: false\n    devices:\n      - path: {}\n        type: sat\n        label: refused\n",
            dir.path().display(),
            dev.0
        ),
    )
    .expect("config");
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+sys_rawio",
            "--ambient-caps=+sys_rawio",
            support::bin(),
            "--config",
        ])
        .arg(&config)
        .arg("sample")
        .output()
        .expect("run ssdwatch sample as nobody");
    let log = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = log
        .lines()
        .find(|l| l.contains("device refused"))
        .unwrap_or_else(|| panic!("no error for the refused drive:\n{log}"));
    assert!(line.contains("Permission denied"), "{line}");
    assert!(
        line.contains(&format!(
            "{} is 0600 root:root and smartctl runs as uid 65534 gid 65534 without read access",
            dev.0
        )),
        "{line}"
    );
    assert!(
        !line.contains("needs CAP_SYS_RAWIO"),
        "blames a capability it holds: {line}"
    );
    assert_eq!(
        val(
            &text,
            "ssdwatch_device_smart_sample_ok",
            &["device=\"refused\""]
        ),
        Some(0.0)
    );
}

#[test]
fn without_smartctl_auto_hands_ata_drives_to_libatasmart_and_keeps_nvme_on_smartctl() {
    let test = "without_smartctl_auto_hands_ata_drives_to_libatasmart_and_keeps_nvme_on_smartctl";
    if !Path::new("/dev/vda").exists() {
        support::not_applicable(test, "no /dev/vda on this machine to open");
        return;
    }
    let mut cfg = config(&Fake::new(), &["vda"]);
    cfg.backend = ssdwatch::collector::smart::Backend::Auto;
    cfg.smartctl_path = PathBuf::from("/nonexistent/smartctl");
    cfg.devices.push(DeviceEntry {
        path: "/dev/vda".into(),
        dev_type: Some("nvme".into()),
        label: Some("as-nvme".into()),
    });
    let mut c = SmartCollector::new(&cfg).expect("new");
    let (_, errors) = sample(&mut c);
    let of = |dev: &str| {
        errors
            .iter()
            .find(|e| e.starts_with(&format!("device {dev}:")))
            .cloned()
            .unwrap_or_else(|| panic!("no error for {dev}: {errors:?}"))
    };
    // A node without a -d type may be ATA: libatasmart when built in (this virtio disk is not
    // ATA, so it fails, naming the device and the library), else smartctl's missing binary.
    let ata = of("vda");
    if cfg!(feature = "atasmart") {
        assert!(
            ata.contains("libatasmart") && ata.contains("/dev/vda"),
            "{ata}"
        );
    } else {
        assert!(ata.contains("/nonexistent/smartctl"), "{ata}");
    }
    // An NVMe type is never libatasmart's.
    let nvme = of("as-nvme");
    assert!(nvme.contains("/nonexistent/smartctl"), "{nvme}");
}

/// One sample of the SATA SSD `sda` (a real Samsung 860 EVO capture, whose drive reports its
/// write cache on) on a host whose kernel shows `write_cache` for it, after a sync-write probe
/// median of `p50` (when given); what `ssdwatch_device_durability_risk_info` says.
fn durability_with(kernel_cache: &str, p50: Option<f64>) -> String {
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    let mut c = SmartCollector::new(&config(&fake, &["sda"])).expect("new");
    let host = EmptyHost::new();
    let sys = tempfile::tempdir().expect("tempdir");
    let q = sys.path().join("block/sda/queue");
    std::fs::create_dir_all(&q).unwrap();
    std::fs::write(sys.path().join("block/sda/dev"), "8:0\n").unwrap();
    std::fs::write(q.join("rotational"), "0\n").unwrap();
    std::fs::write(q.join("write_cache"), format!("{kernel_cache}\n")).unwrap();
    std::fs::write(q.join("fua"), "0\n").unwrap();
    let topo = ssdwatch::sysfs::topology::Topology::read(sys.path()).expect("topology");
    host.ctx.shared.set_topology(std::sync::Arc::new(topo));
    if let Some(p) = p50 {
        host.ctx.shared.set_sync_write_p50("sda", p);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = rt.block_on(c.sample(&host.ctx)).expect("sample");
    let text = support::exposition(&s);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ssdwatch_device_durability_risk_info{"))
        .collect();
    assert_eq!(lines.len(), 1, "one series per drive: {lines:?}");
    lines[0]
        .split("reason=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a reason")
        .to_string()
}

#[test]
fn fsync_on_a_drive_whose_cache_the_kernel_no_longer_flushes_is_flagged() {
    // A tuning script wrote "write through": no flush reaches the drive's enabled cache.
    assert_eq!(durability_with("write through", None), "cache_flushes_off");
    // The kernel's own setting: flushes are sent, and 900 µs per durable write is what flash
    // without power-loss protection takes.
    assert_eq!(durability_with("write back", Some(0.0009)), "none");
    // Flushes sent, yet 20 µs per durable 4 KiB write: protected buffer or ignored flushes.
    assert_eq!(
        durability_with("write back", Some(0.00002)),
        "sync_faster_than_medium"
    );
}

#[test]
fn with_read_logs_off_a_known_ata_drive_is_asked_the_device_statistics_only() {
    let fake = Fake::new();
    fake.ok("sda", "ata-samsung-860evo.json");
    let cfg = SmartConfig {
        read_logs: false,
        ..config(&fake, &["sda"])
    };
    let mut c = SmartCollector::new(&cfg).expect("new");
    let _ = sample(&mut c);
    let (m, errors) = sample(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    let argv = fake.argv("sda");
    let runs: Vec<&str> = argv.lines().collect();
    assert_eq!(runs.len(), 2, "{argv}");
    assert!(runs[1].contains("--log=devstat"), "{argv}");
    for log in [
        "--log=error",
        "--log=selftest",
        "--capabilities",
        "--get=wcache",
    ] {
        assert!(!argv.contains(log), "{log}: {argv}");
    }
    // What the output carries is still read (this capture holds a self-test log).
    assert!(m.contains("ssdwatch_device_self_test_last_result{"), "{m}");
}

#[test]
fn an_nvme_drive_with_the_ocp_log_gets_nand_writes_from_one_hourly_read_in_its_regular_run() {
    let fake = Fake::new();
    let ocp = OcpCapture::new();
    let (host, nand) = (ocp.host, ocp.nand);
    fake.mode("nvme0n1", &ocp.mode());
    let cfg = SmartConfig {
        nvme_ocp_log: true,
        ..config(&fake, &["nvme0n1"])
    };
    let mut c = SmartCollector::new(&cfg).expect("new");
    // First run: the protocol is not known yet, nothing but the base set.
    let (m, errors) = sample(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        val(&m, "ssdwatch_device_nand_written_bytes_total", &[]),
        None
    );
    // Second: NVMe, the OCP log is due; third and fourth: within the hour, not asked again,
    // and the figure stands.
    for _ in 0..3 {
        let (m, errors) = sample(&mut c);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            val(&m, "ssdwatch_device_nand_written_bytes_total", &[]),
            Some(nand as f64),
            "{m}"
        );
        assert_eq!(
            val(&m, "ssdwatch_device_host_written_bytes_total", &[]),
            Some(host as f64)
        );
        let waf = val(
            &m,
            "ssdwatch_device_write_amplification_ratio",
            &["window=\"lifetime\""],
        )
        .expect("lifetime write amplification");
        assert!((waf - 1.5).abs() < 1e-6, "{waf}");
    }
    let argv = fake.argv("nvme0n1");
    let runs: Vec<&str> = argv.lines().collect();
    assert_eq!(
        runs.len(),
        4,
        "one run per sample, never a second one: {argv}"
    );
    let with_ocp: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].contains("--log=nvmelog,0xc0,0x200"))
        .collect();
    assert_eq!(with_ocp, [1], "{argv}");
    assert!(runs[1].starts_with("--json=co "), "{argv}");

    // The same drive with the key off (the default): never asked.
    let fake = Fake::new();
    fake.mode("nvme0n1", &ocp.mode());
    let mut c = SmartCollector::new(&config(&fake, &["nvme0n1"])).expect("new");
    for _ in 0..2 {
        let (m, _) = sample(&mut c);
        assert_eq!(
            val(&m, "ssdwatch_device_nand_written_bytes_total", &[]),
            None
        );
    }
    assert!(!fake.argv("nvme0n1").contains("nvmelog"));
}

#[test]
fn with_raid_discovery_drives_behind_a_megaraid_controller_are_read_without_being_listed() {
    let fake = Fake::new();
    let scan = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(scan.path(), RAID_SCAN).expect("write");
    // The scan's argv ends in --json=c: the fake keys its answer on that last argument.
    fake.mode("--json=c", &format!("ok {}", scan.path().display()));
    fake.ok("bus_0", "megaraid-sat-wdc-wd4000fyyx.json");
    let no_devices: [&str; 0] = [];
    let cfg = SmartConfig {
        discover_raid: true,
        ..config(&fake, &no_devices)
    };
    let mut c = SmartCollector::new(&cfg).expect("new");
    for _ in 0..3 {
        let (m, errors) = sample(&mut c);
        assert!(errors.is_empty(), "{errors:?}");
        for dev in ["bus/0:megaraid,8", "bus/0:sat+megaraid,9"] {
            assert_eq!(
                val(
                    &m,
                    "ssdwatch_device_smart_sample_ok",
                    &[&format!("device=\"{dev}\"")]
                ),
                Some(1.0),
                "{dev}: {m}"
            );
        }
        assert!(
            !m.contains("megaraid,10"),
            "a port that did not open is not read: {m}"
        );
        assert!(!m.contains("nvme0"), "{m}");
    }
    assert_eq!(
        fake.file("--json=c.argv").lines().collect::<Vec<_>>(),
        ["--scan-open --json=c"],
        "one scan in the hour"
    );
    let argv = fake.argv("bus_0");
    assert_eq!(
        argv.lines()
            .filter(|l| l.contains("-d megaraid,8 "))
            .count(),
        3,
        "{argv}"
    );
    assert_eq!(
        argv.lines()
            .filter(|l| l.contains("-d sat+megaraid,9 "))
            .count(),
        3,
        "{argv}"
    );

    // A scan that gives garbage: the fault is named on every sample, nothing is read.
    let fake = Fake::new();
    fake.mode("--json=c", "garbage");
    let cfg = SmartConfig {
        discover_raid: true,
        ..config(&fake, &no_devices)
    };
    let mut c = SmartCollector::new(&cfg).expect("new");
    for _ in 0..2 {
        let (_, errors) = sample(&mut c);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("RAID discovery") && errors[0].contains("--scan-open"),
            "{errors:?}"
        );
    }

    // Off (the default): no scan.
    let fake = Fake::new();
    fake.mode("--json=c", &format!("ok {}", scan.path().display()));
    let mut c = SmartCollector::new(&config(&fake, &no_devices)).expect("new");
    let (m, _) = sample(&mut c);
    assert!(!m.contains("megaraid"), "{m}");
    assert_eq!(fake.file("--json=c.argv"), "");
}
