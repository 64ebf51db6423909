//! The command line as a user meets it: bad configs are refused with the key and line named,
//! the one-shot mode prints an exposition, `--[no-]collector.NAME` beats the file, the man
//! page lists every flag, and a SIGHUP re-reads the config without ending the daemon.

use crate::support;
use crate::support::binary;

use crate::support::binary::Daemon;
use std::io::Read;
use std::process::Command;
use std::time::Duration;

fn ssdwatch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
}

/// `ssdwatch --config <text> sample`: a one-shot run's exit code and standard error (the
/// file is returned so its path can be looked for in the message).
fn sample_with_config(text: &str) -> (Option<i32>, String, tempfile::NamedTempFile) {
    let cfg = write_config(text);
    let out = ssdwatch()
        .arg("--config")
        .arg(cfg.path())
        .arg("sample")
        .output()
        .expect("run ssdwatch");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err, cfg)
}

fn write_config(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    std::fs::write(f.path(), text).expect("write config");
    f
}

#[test]
fn unknown_config_key_is_refused_with_key_and_line() {
    let (code, err, cfg) = sample_with_config(
        "web:\n  listen_address: 127.0.0.1:0\ncollectors:\n  diskstats:\n    intervall: 5s\n",
    );
    assert_eq!(code, Some(2));
    assert!(err.contains(&cfg.path().display().to_string()), "{err}");
    assert!(err.contains("intervall"), "{err}");
    assert!(err.contains("line 5"), "{err}");
}

#[test]
fn wrong_type_is_refused_with_key_path_and_line() {
    let (code, err, _cfg) = sample_with_config("collectors:\n  filesystem:\n    interval: often\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("collectors.filesystem.interval"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn a_value_out_of_range_stops_the_start_naming_the_key_and_its_line() {
    let (code, err, cfg) = sample_with_config(
        "# probes on the database volume\ncollectors:\n  probe:\n    targets:\n      - path: /srv/a\n      - path: /srv/b\n        # a typo: one zero too many\n        queue_depth: 640\n",
    );
    assert_eq!(code, Some(2));
    assert!(err.contains(&cfg.path().display().to_string()), "{err}");
    assert!(
        err.contains("collectors.probe.targets[1].queue_depth: 640 is out of range; it must be 1 to 64 at line 8"),
        "{err}"
    );
}

#[test]
fn missing_config_file_is_refused_with_its_path() {
    let out = ssdwatch()
        .args(["--config", "/nonexistent/dir/ssdwatch.yaml", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/dir/ssdwatch.yaml"), "{err}");
}

/// `--config.file` is the flag's name, as Prometheus and blackbox_exporter spell it; `--config`
/// (its name before) still reads the same file.
#[test]
fn config_file_and_its_old_name_config_read_the_same_file() {
    let cfg = write_config("collectors:\n  diskstats:\n    intervall: 5s\n");
    for flag in ["--config.file", "--config"] {
        let out = ssdwatch()
            .arg(flag)
            .arg(cfg.path())
            .arg("sample")
            .output()
            .expect("run ssdwatch");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains(&cfg.path().display().to_string()) && err.contains("intervall"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn bad_listen_flag_is_refused() {
    let out = ssdwatch()
        .args(["--web.listen-address", "localhost", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--web.listen-address"));
}

#[test]
fn a_bad_log_level_is_refused_naming_the_flag_instead_of_becoming_info() {
    let out = ssdwatch()
        .args(["--log.level", "loud", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--log.level \"loud\""), "{err}");
    assert!(out.stdout.is_empty(), "nothing sampled with a bad flag");
}

#[test]
fn example_config_is_accepted() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/ssdwatch.example.yaml");
    let out = ssdwatch()
        .args(["--config", example, "--help"])
        .output()
        .expect("run ssdwatch");
    assert!(out.status.success());
}

#[test]
fn sample_exits_1_when_a_collector_failed_and_still_prints_the_rest() {
    let out = ssdwatch()
        .args(["--path.procfs", "/nonexistent", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ssdwatch_collector_success{collector=\"filesystem\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("ssdwatch_collector_success{collector=\"diskstats\"} 1"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/self/mountinfo"), "{err}");
}

#[test]
fn probe_run_refuses_an_unknown_kind_with_exit_2_and_reports_a_missing_target_as_error() {
    let out = ssdwatch()
        .args(["probe", "run", "--target", "/tmp", "--kind", "bogus"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--kind bogus"), "{err}");
    assert!(
        err.contains("sync_write_4k"),
        "names the valid kinds: {err}"
    );

    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let out = ssdwatch()
        .args(["probe", "run", "--json", "--target"])
        .arg(&missing)
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["outcome"], "skipped");
    assert_eq!(v["reason"], "error");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains(missing.to_str().unwrap())),
        "{v}"
    );
}

/// The collectors a one-shot sample reported on (its `ssdwatch_collector_success` series).
fn sampled_collectors(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("ssdwatch_collector_success{collector=\""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_collector_flag_beats_the_config_file_in_both_directions() {
    let host = binary::host();
    let dir = host.path();
    let state = dir.join("state").display().to_string();
    let all_on = format!("state_dir: {state}\n");
    let names: Vec<&str> = ssdwatch::registry::COLLECTORS
        .iter()
        .map(|e| e.name)
        .collect();
    let mut all_off = format!("state_dir: {state}\ncollectors:\n");
    for n in &names {
        all_off.push_str(&format!("  {n}:\n    enabled: false\n"));
    }
    for n in &names {
        // On in the file, off by flag.
        std::fs::write(dir.join("ssdwatch.yaml"), &all_on).unwrap();
        let out = binary::command(dir, &[&format!("--no-collector.{n}"), "sample"])
            .output()
            .unwrap();
        let got = sampled_collectors(&out);
        assert!(!got.iter().any(|g| g == n), "--no-collector.{n}: {got:?}");
        assert_eq!(got.len(), names.len() - 1, "--no-collector.{n}: {got:?}");
        // Off in the file, on by flag.
        std::fs::write(dir.join("ssdwatch.yaml"), &all_off).unwrap();
        let out = binary::command(dir, &[&format!("--collector.{n}"), "sample"])
            .output()
            .unwrap();
        assert_eq!(sampled_collectors(&out), [n.to_string()], "--collector.{n}");
    }
    // Both given: the last one wins, as with node_exporter's flags.
    let out = binary::command(
        dir,
        &["--collector.probe", "--no-collector.probe", "sample"],
    )
    .output()
    .unwrap();
    assert!(sampled_collectors(&out).is_empty());
    let out = binary::command(
        dir,
        &["--no-collector.probe", "--collector.probe", "sample"],
    )
    .output()
    .unwrap();
    assert_eq!(sampled_collectors(&out), ["probe"]);
}

/// Opens a connection, sends nothing and waits until the daemon closes it (its idle timeout).
fn idle_connection_closed(d: &Daemon) {
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    // 0 bytes: closed by the daemon; an error: reset by it. A timeout would fail below.
    let _ = s.read(&mut buf);
}

#[test]
fn sighup_rereads_the_config_applies_the_log_level_and_never_ends_the_daemon() {
    let mut d = Daemon::start(&["--web.idle-timeout", "1s"]);
    let cfg = d.dir.path().join("ssdwatch.yaml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    // At the default level an idle connection is closed without a word.
    idle_connection_closed(&d);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!d.log_text().contains("closing a connection idle"));

    std::fs::write(&cfg, format!("{base}log:\n  level: debug\n")).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log("log.level \"info\" -> \"debug\"", Duration::from_secs(10)),
        "{}",
        d.log_text()
    );
    idle_connection_closed(&d);
    assert!(
        d.wait_log("closing a connection idle", Duration::from_secs(5)),
        "debug lines appear after the reload:\n{}",
        d.log_text()
    );

    // A broken file: the old config stays, the error names the file and the line.
    std::fs::write(&cfg, format!("{base}log:\n  level: debug\n  colour: yes\n")).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log("config not reloaded", Duration::from_secs(10)),
        "{}",
        d.log_text()
    );
    let log = d.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("config not reloaded"))
        .unwrap();
    assert!(
        line.contains(&cfg.display().to_string())
            && line.contains("colour")
            && line.contains("line 7"),
        "{line}"
    );

    // A change only a restart applies is named as such.
    std::fs::write(
        &cfg,
        format!("{base}  diskstats:\n    interval: 1h\nlog:\n  level: debug\n"),
    )
    .unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log(
            "applied only after a restart: collectors.diskstats",
            Duration::from_secs(10)
        ),
        "{}",
        d.log_text()
    );

    // Same process all along, still serving, with its own process_* figures.
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon survived every SIGHUP:\n{}",
        d.log_text()
    );
    let body = ureq::get(&format!("http://{}/metrics", d.addr))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            body.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name} missing"
        );
    }
    let start: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("process_start_time_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        start <= now && start > now - 120.0,
        "started {start}, now {now}"
    );
}

/// `ssdwatch sample` on a fixture host (tests/fixtures/hosts/NAME) with `collectors` as the
/// config's collectors section and the fake smartctl answering from `fake_state`.
fn sample_fixture(host: &str, collectors: &str, fake_state: &std::path::Path) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(host);
    let state = tempfile::tempdir().unwrap();
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake-smartctl/smartctl");
    let cfg = write_config(&format!(
        "state_dir: {}\ncollectors:\n  smart:\n    smartctl_path: {fake}\n{collectors}",
        state.path().display()
    ));
    let out = ssdwatch()
        .env("FAKE_STATE", fake_state)
        .arg("--config")
        .arg(cfg.path())
        .args(support::fixture_host_flags(&dir))
        .args([
            "--no-collector.probe",
            "--no-collector.filesystem",
            "sample",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn device_filters_leave_drives_out_of_smart_queries_and_disk_statistics() {
    let fake = tempfile::tempdir().unwrap();
    std::fs::write(fake.path().join("mode"), "garbage\n").unwrap();
    // Both NVMe drives of the md RAID1 host, with no filter.
    let text = sample_fixture("md-raid1-nvme", "", fake.path());
    let disks = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("ssdwatch_disk_discarded_bytes_total{device=\""))
            .filter_map(|l| l.split('"').next())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(disks(&text), ["md0", "nvme0n1", "nvme1n1"]);
    assert!(fake.path().join("nvme0n1.argv").exists());
    assert!(fake.path().join("nvme1n1.argv").exists());

    let fake = tempfile::tempdir().unwrap();
    std::fs::write(fake.path().join("mode"), "garbage\n").unwrap();
    let text = sample_fixture(
        "md-raid1-nvme",
        "    device_exclude: '^nvme1'\n  diskstats:\n    device_include: '^nvme'\n    device_exclude: '^nvme1n1$'\n",
        fake.path(),
    );
    assert_eq!(disks(&text), ["nvme0n1"], "{text}");
    assert!(
        fake.path().join("nvme0n1.argv").exists(),
        "nvme0n1 still queried"
    );
    assert!(
        !fake.path().join("nvme1n1.argv").exists(),
        "smartctl never ran on the excluded drive"
    );

    let fake = tempfile::tempdir().unwrap();
    std::fs::write(fake.path().join("mode"), "garbage\n").unwrap();
    sample_fixture(
        "md-raid1-nvme",
        "    device_include: '^nvme1n1$'\n",
        fake.path(),
    );
    assert!(!fake.path().join("nvme0n1.argv").exists());
    assert!(fake.path().join("nvme1n1.argv").exists());
}

#[test]
fn a_bad_device_filter_stops_the_start_naming_the_key_and_line() {
    let cfg = write_config("collectors:\n  diskstats:\n    device_exclude: '^(sd'\n");
    let out = ssdwatch()
        .arg("--config")
        .arg(cfg.path())
        .arg("sample")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("collectors.diskstats.device_exclude")
            && err.contains("line 3")
            && err.contains(&cfg.path().display().to_string()),
        "{err}"
    );
}

#[test]
fn on_sighup_the_log_level_flag_still_beats_the_file() {
    let d = Daemon::start(&["--log.level", "info", "--web.idle-timeout", "1s"]);
    let cfg = d.dir.path().join("ssdwatch.yaml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{base}log:\n  level: debug\n")).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log(
            "log.level stays as --log.level sets it",
            Duration::from_secs(10)
        ),
        "{}",
        d.log_text()
    );
    idle_connection_closed(&d);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !d.log_text().contains("closing a connection idle"),
        "no debug line: the flag's level holds"
    );
}
