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
fn the_daemons_binary_has_no_way_to_write_synthetic_samples_into_a_store() {
    // The bench tool that writes synthetic history lives in examples/, outside the binary a
    // host runs: the packaged config's store must never get rows of filesystems that don't
    // exist.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("history.db");
    std::fs::write(&store, b"a host's real history").unwrap();
    let cfg = write_config(&format!("state_dir: {}\n", dir.path().display()));
    let out = ssdwatch()
        .arg("--config")
        .arg(cfg.path())
        .args(["history", "fill", "--like"])
        .arg(&store)
        .args(["--days", "2"])
        .output()
        .expect("run ssdwatch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unrecognized subcommand 'fill'"), "{err}");
    assert_eq!(std::fs::read(&store).unwrap(), b"a host's real history");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing else written"
    );
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

/// The value of `family{file="<file>"}` in a scrape of `d`.
fn reload_series(d: &Daemon, family: &str, file: &str) -> Option<f64> {
    let body = ureq::get(&format!("http://{}/metrics", d.addr))
        .call()
        .expect("scrape")
        .body_mut()
        .read_to_string()
        .unwrap();
    support::value(&body, &format!("{family}{{file=\"{file}\"}}"))
}

/// Waits until `family{file}` reads `want` (a reload is asynchronous to the signal).
fn wait_reload_series(d: &Daemon, family: &str, file: &str, want: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while reload_series(d, family, file) != Some(want) {
        assert!(
            std::time::Instant::now() < deadline,
            "{family}{{file={file:?}}} is {:?}, not {want}\n{}",
            reload_series(d, family, file),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Prometheus' pattern: a reload that fails keeps the old config and says so in a metric, for
/// the config file and the web config alike; a good reload sets it back and moves the time.
#[test]
fn a_failed_reload_shows_in_the_reload_metrics_until_a_good_one() {
    const OK: &str = "ssdwatch_config_last_reload_successful";
    const AT: &str = "ssdwatch_config_last_reload_success_timestamp_seconds";
    let dir = binary::host();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "http_server_config:\n  http2: false\n").unwrap();
    let web_arg = web.display().to_string();
    let d = Daemon::start_in(dir, &["--web.config.file", &web_arg]);
    let cfg = d.dir.path().join("ssdwatch.yaml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    for file in ["config", "web_config"] {
        assert_eq!(reload_series(&d, OK, file), Some(1.0), "{file} after start");
    }
    let started = reload_series(&d, AT, "config").expect("a success time at start");
    assert!(started > 1.5e9, "{started}");

    // A broken config file: 0, the time of the last success stays; the web config is untouched.
    std::fs::write(&cfg, format!("{good}log:\n  colour: yes\n")).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    wait_reload_series(&d, OK, "config", 0.0);
    assert_eq!(reload_series(&d, AT, "config"), Some(started));
    assert_eq!(reload_series(&d, OK, "web_config"), Some(1.0));

    // Mended: 1 again, at a later time.
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&cfg, &good).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    wait_reload_series(&d, OK, "config", 1.0);
    let again = reload_series(&d, AT, "config").unwrap();
    assert!(again > started, "{again} after {started}");

    // The web config broken, then mended: its own series, the config file's untouched.
    std::fs::write(&web, "http_server_config:\n  http3: true\n").unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    wait_reload_series(&d, OK, "web_config", 0.0);
    assert_eq!(reload_series(&d, OK, "config"), Some(1.0));
    std::fs::write(&web, "http_server_config:\n  http2: false\n").unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    wait_reload_series(&d, OK, "web_config", 1.0);
    assert!(reload_series(&d, AT, "web_config").unwrap() > started);
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
    // logfmt escapes the quotes inside its quoted msg value.
    assert!(
        d.wait_log(
            r#"log.level \"info\" -> \"debug\""#,
            Duration::from_secs(10)
        ),
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
            && line.contains(&format!("line {}", base.lines().count() + 3)),
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

/// A logfmt line as key=value pairs (values bare, or quoted with `\` escapes); None when the
/// line is not logfmt.
fn parse_logfmt(line: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        if key.is_empty() || key.contains([' ', '"']) {
            return None;
        }
        let (value, after) = if let Some(q) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = q.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i + 1,
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        'r' => value.push('\r'),
                        'u' => {
                            let hex: String =
                                (0..4).filter_map(|_| chars.next()).map(|c| c.1).collect();
                            value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        }
                        c => value.push(c),
                    },
                    (_, c) => value.push(c),
                }
            };
            (value, &q[end..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        pairs.push((key.to_string(), value));
        rest = match after.strip_prefix(' ') {
            Some(r) => r,
            None if after.is_empty() => after,
            None => return None,
        };
    }
    Some(pairs)
}

/// Runs the real daemon at debug level in `format` (with `env` set), makes it log a request it
/// refuses and a SIGHUP, stops it and returns everything it wrote to stderr.
fn daemon_log(format: &str, env: Option<(&str, String)>, dir: tempfile::TempDir) -> String {
    let mut d = Daemon::start_with(
        dir,
        &["--log.format", format, "--log.level", "debug"],
        |cmd| {
            if let Some((k, v)) = env {
                cmd.env(k, v);
            }
        },
    );
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    std::io::Write::write_all(&mut s, b"NOT-HTTP\r\n\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log("SIGHUP: config", Duration::from_secs(10)),
        "{}",
        d.log_text()
    );
    d.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = d.child.wait();
    d.log_text()
}

/// `--log.format json`: every line the daemon writes is one JSON object with time, level, target
/// and msg, and the event's fields (numbers as numbers).
#[test]
fn with_log_format_json_every_line_is_a_json_object_with_level_and_msg() {
    let log = daemon_log("json", None, binary::host());
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for v in &lines {
        for key in ["time", "level", "target", "msg"] {
            assert!(v[key].is_string(), "no {key}: {v}");
        }
        assert!(
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&v["level"].as_str().unwrap()),
            "{v}"
        );
    }
    let serving = lines
        .iter()
        .find(|v| v["msg"] == "serving /metrics")
        .expect("serving line");
    assert!(
        serving["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"),
        "{serving}"
    );
    assert!(serving["max_connections"].is_u64(), "{serving}");
    assert!(lines.iter().any(|v| v["level"] == "DEBUG"), "{log}");
    assert!(lines.iter().any(|v| v["msg"] == "shutting down"), "{log}");
}

/// `--log.format logfmt` (the default): every line is key=value pairs starting with time, level,
/// target and msg; a message with spaces or quotes is quoted and reads back as it was.
#[test]
fn with_log_format_logfmt_every_line_is_key_value_pairs() {
    let log = daemon_log("logfmt", None, binary::host());
    let mut msgs = Vec::new();
    for l in log.lines() {
        let pairs = parse_logfmt(l).unwrap_or_else(|| panic!("not logfmt: {l}"));
        let keys: Vec<&str> = pairs.iter().take(4).map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["time", "level", "target", "msg"], "{l}");
        assert!(
            !l.starts_with('<'),
            "no priority prefix outside the journal: {l}"
        );
        msgs.push(pairs[3].1.clone());
    }
    assert!(msgs.iter().any(|m| m == "serving /metrics"), "{log}");
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("SIGHUP: config ") || m.starts_with("SIGHUP: no --config")),
        "{log}"
    );
}

/// Under systemd, stderr connected to the journal (`JOURNAL_STREAM` is its device:inode):
/// every line starts with its syslog priority, which journald strips and stores, so
/// `journalctl -p warning` filters. Here stderr is a file whose device and inode the variable
/// names, as systemd sets it.
#[test]
fn when_stderr_is_the_journal_each_line_starts_with_its_syslog_priority() {
    use std::os::unix::fs::MetadataExt;
    let dir = binary::host();
    let log = dir.path().join("daemon.log");
    std::fs::write(&log, "").unwrap();
    let meta = std::fs::metadata(&log).unwrap();
    let stream = format!("{}:{}", meta.dev(), meta.ino());
    let text = daemon_log("logfmt", Some(("JOURNAL_STREAM", stream)), dir);
    let mut seen = std::collections::BTreeSet::new();
    for l in text.lines() {
        let (prio, rest) = l
            .strip_prefix('<')
            .and_then(|r| r.split_once('>'))
            .unwrap_or_else(|| panic!("no priority: {l}"));
        let pairs = parse_logfmt(rest).unwrap_or_else(|| panic!("not logfmt: {l}"));
        let want = match pairs[1].1.as_str() {
            "ERROR" => "3",
            "WARN" => "4",
            "INFO" => "6",
            _ => "7",
        };
        assert_eq!(prio, want, "{l}");
        seen.insert(prio.to_string());
    }
    assert!(seen.contains("6") && seen.contains("7"), "{text}");
    // Another file's device and inode: not the journal, no prefix.
    let text = daemon_log(
        "logfmt",
        Some(("JOURNAL_STREAM", "1:2".into())),
        binary::host(),
    );
    assert!(text.lines().all(|l| l.starts_with("time=")), "{text}");
}
