//! The daemon's resident memory, on the real binary: once start-up is over it lets go of the
//! code pages only start-up used, and serves on exactly as before. (The figure itself comes
//! from benches/rss.sh on the release build, not from a test.)

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `Key:   1234 kB` of /proc/PID/status, in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

fn get(agent: &ureq::Agent, url: &str) -> Option<String> {
    agent.get(url).call().ok()?.body_mut().read_to_string().ok()
}

/// The series of an exposition without their values: what a scrape shows, not when.
fn series(text: &str) -> Vec<String> {
    let mut s: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(name, _)| name.to_string()))
        .collect();
    s.sort();
    s
}

#[test]
fn after_start_up_the_daemon_lets_go_of_start_up_code_and_serves_on() {
    let host =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/md-raid1-nvme");
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}\ncollectors:\n  smart: {{enabled: false}}\n  probe: {{enabled: false}}\n",
            state.path().display()
        ),
    )
    .unwrap();
    let port = support::free_port();
    let started = Instant::now();
    let child = Command::new(support::bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
        .args(support::fixture_host_flags(&host))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = support::KillOnDrop(child);
    let pid = child.0.id();
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let url = format!("http://127.0.0.1:{port}/metrics");
    while get(&agent, &url).is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the daemon did not answer on port {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Just before the release (20 s after start): every collector has sampled twice or more,
    // and the file pages start-up touched are still mapped.
    std::thread::sleep(Duration::from_secs(18).saturating_sub(started.elapsed()));
    let before_text = get(&agent, &url).expect("a scrape before the release");
    let before = status_kib(pid, "RssFile");
    std::thread::sleep(Duration::from_secs(24).saturating_sub(started.elapsed()));
    // A scrape after the release runs the serving code again, from the page cache.
    let after_text = get(&agent, &url).expect("a scrape after the release");
    let after = status_kib(pid, "RssFile");
    assert!(
        after + 1024 <= before,
        "file-backed resident memory {before} KiB before the release, {after} KiB after"
    );
    let (want, got) = (series(&before_text), series(&after_text));
    assert!(want.len() > 50, "{before_text}");
    let lost: Vec<&String> = want.iter().filter(|s| !got.contains(s)).collect();
    let new: Vec<&String> = got.iter().filter(|s| !want.contains(s)).collect();
    assert!(
        lost.is_empty() && new.is_empty(),
        "series lost after the release: {lost:?}; new: {new:?}"
    );
    // And it still shuts down as it should.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}");
}

/// benches/pss.sh (the whole daemon's memory at its defaults: the daemon, the SMART helper's
/// keeper and the helper, 64 drives read through the helper) in its short mode, so the script
/// can't rot; the figures come from the release run.
#[test]
fn the_whole_daemon_pss_bench_runs_in_its_short_mode() {
    if !support::require_cmd("pss bench", "curl", "curl") {
        return;
    }
    let text = support::run_bench_short(
        "pss.sh",
        std::path::Path::new(env!("CARGO_BIN_EXE_ssdwatch")),
    );
    assert!(
        text.contains("drives read through the helper: 64"),
        "{text}"
    );
    for who in [
        "PSS ssdwatch ",
        "PSS ssdwatch-keeper ",
        "PSS ssdwatch-helper ",
    ] {
        assert!(text.contains(who), "{who}: {text}");
    }
    assert!(text.contains("PSS of the whole daemon over 4 s"), "{text}");
}
