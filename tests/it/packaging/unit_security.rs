//! The systemd unit as systemd itself judges it, offline: `systemd-analyze security` rates its
//! exposure at 2.5 or less and every item still marked ✗ has its reason in docs/packaging.md;
//! `systemd-analyze verify` finds nothing to say; and every system call the daemon makes in a
//! real run (probes, smartctl, SQLite, a reload, a stop) is one the unit's filter allows.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TARGET: f64 = 2.5;

fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/systemd/ssdwatch.service")
}

fn analyze(args: &[&str]) -> (bool, String) {
    support::run_status("systemd-analyze", args)
}

#[test]
fn the_unit_exposure_is_at_most_2_5_and_every_remaining_item_is_explained() {
    if !support::require_cmd("unit exposure", "systemd-analyze", "systemd") {
        return;
    }
    let unit = unit_path();
    let (ok, text) = analyze(&["security", "--offline=true", unit.to_str().unwrap()]);
    assert!(ok, "systemd-analyze security failed:\n{text}");
    let overall = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for ssdwatch.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no overall exposure in:\n{text}"));
    assert!(
        overall <= TARGET,
        "exposure {overall} > {TARGET}; what systemd-analyze says:\n{text}"
    );
    // Each ✗ item by its name (`PrivateNetwork=`, `SystemCallFilter=~@resources`), which
    // docs/packaging.md must name in its table of what remains and why.
    let remaining: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("✗ "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        remaining.contains(&"PrivateNetwork="),
        "an exporter keeps the network: the parse sees the ✗ items ({remaining:?})"
    );
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/packaging.md"))
            .unwrap();
    let unexplained: Vec<&&str> = (remaining.iter())
        // A `|` inside a table cell is written `\|`.
        .filter(|name| !doc.contains(&format!("| `{}` |", name.replace('|', "\\|"))))
        .collect();
    assert!(
        unexplained.is_empty(),
        "docs/packaging.md has no line on why these remain: {unexplained:?}"
    );
}

#[test]
fn systemd_analyze_verify_has_nothing_to_say_about_the_unit() {
    if !support::require_cmd("unit verify", "systemd-analyze", "systemd") {
        return;
    }
    // verify checks that ExecStart's program exists: the unit as installed, pointing at the binary
    // this build made instead of /usr/bin/ssdwatch.
    let text = std::fs::read_to_string(unit_path()).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/ssdwatch "), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("ssdwatch.service");
    // And ExecStartPre's script, at its place in the source tree.
    let raid_nodes = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/deb/raid-nodes");
    assert!(
        text.contains("ExecStartPre=+/usr/libexec/ssdwatch/raid-nodes\n"),
        "{text}"
    );
    std::fs::write(
        &unit,
        text.replace("/usr/bin/ssdwatch", support::bin())
            .replace("/usr/libexec/ssdwatch/raid-nodes", raid_nodes),
    )
    .unwrap();
    let (ok, said) = analyze(&["verify", "--man=no", unit.to_str().unwrap()]);
    // Unknown keys and bad values are warnings with exit status 0: nothing may be said at all.
    assert!(
        ok && said.trim().is_empty(),
        "systemd-analyze verify:\n{said}"
    );
}

/// The system calls a filter set names (`@system-service`), its nested sets included.
fn expand(set: &str, seen: &mut BTreeSet<String>) -> BTreeSet<String> {
    if !set.starts_with('@') {
        return BTreeSet::from([set.to_string()]);
    }
    if !seen.insert(set.to_string()) {
        return BTreeSet::new();
    }
    let (ok, text) = analyze(&["syscall-filter", set]);
    assert!(ok, "systemd-analyze syscall-filter {set}: {text}");
    let mut out = BTreeSet::new();
    for l in text.lines().skip(1) {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        out.extend(expand(t, seen));
    }
    out
}

/// What the unit's SystemCallFilter= lines allow, read as systemd does: the first line is an allow
/// list; later ones add to it, or take away with `~`.
fn allowed_by_unit() -> BTreeSet<String> {
    let text = std::fs::read_to_string(unit_path()).unwrap();
    let mut allowed: Option<BTreeSet<String>> = None;
    for line in text.lines() {
        let Some(v) = line.strip_prefix("SystemCallFilter=") else {
            continue;
        };
        let (deny, v) = match v.strip_prefix('~') {
            Some(rest) => (true, rest),
            None => (false, v),
        };
        let mut names = BTreeSet::new();
        for tok in v.split_whitespace() {
            names.extend(expand(tok, &mut BTreeSet::new()));
        }
        let set = allowed.get_or_insert_with(BTreeSet::new);
        assert!(
            !(deny && set.is_empty()),
            "the unit's first SystemCallFilter= must be an allow list: {line}"
        );
        if deny {
            set.retain(|s| !names.contains(s));
        } else {
            set.extend(names);
        }
    }
    allowed.expect("the unit has a SystemCallFilter=")
}

#[test]
fn every_system_call_of_a_real_run_is_allowed_by_the_units_filter() {
    const T: &str = "unit syscall filter";
    if !support::require_root(T)
        || !support::require_cmd(T, "systemd-analyze", "systemd")
        || !support::require_cmd(T, "strace", "strace")
        || !support::require_cmd(T, "setpriv", "util-linux")
        || !support::require_cmd(T, "smartctl", "smartmontools")
    {
        return;
    }
    let allowed = allowed_by_unit();
    // A real filesystem for the probes, owned by the unprivileged user the daemon runs as, as
    // the unit's User= makes it (SQLite calls fchown only as root, which the unit never is).
    let fs = support::LoopFs::no_reserve(64);
    // Each SMART backend in its own run: smartctl (a child process) and libatasmart (in the
    // daemon, through libudev), when this build has it.
    let mut used = run_traced(&fs, "smartctl");
    if cfg!(feature = "atasmart") {
        used.extend(run_traced(&fs, "libatasmart"));
    }
    assert!(
        [
            "fdatasync",
            "fallocate",
            "ioprio_set",
            "ioctl",
            "execve",
            "statfs",
            "sendto"
        ]
        .iter()
        .all(|s| used.contains(*s)),
        "the run made the probes', smartctl's, statfs and notify calls: {used:?}"
    );
    let refused: Vec<&String> = used.iter().filter(|s| !allowed.contains(*s)).collect();
    assert!(
        refused.is_empty(),
        "system calls of a real run the unit's SystemCallFilter= refuses: {refused:?}\n(all: {used:?})"
    );
}

/// Runs the daemon as the unit would, with the SMART backend `backend`, under `strace -f`: its
/// probes on `fs`, SMART of `fs`'s loop device, the history, a reload and a stop. Returns the
/// system calls it made.
fn run_traced(fs: &support::LoopFs, backend: &str) -> BTreeSet<String> {
    let target = fs.mountpoint.join(format!("probe-{backend}"));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for d in [&target, &state] {
        std::fs::create_dir(d).unwrap();
        support::run("chown", &["nobody:", d.to_str().unwrap()]);
    }
    // The daemon must read its config and reach its binary as nobody.
    support::run("chmod", &["755", dir.path().to_str().unwrap()]);
    let port = support::free_port();
    let cfg = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &cfg,
        format!(
            "state_dir: {state}\nweb:\n  listen_address: 127.0.0.1:{port}\ncollectors:\n  topology: {{interval: 1s}}\n  diskstats: {{interval: 1s}}\n  filesystem: {{interval: 1s}}\n  smart:\n    interval: 2s\n    backend: {backend}\n    devices: [{{path: {dev}, type: sat}}]\n  probe:\n    interval: 2s\n    jitter_ratio: 0\n    targets:\n      - {{path: {target}, file_size_bytes: 4194304, seq_write_bytes: 2097152, free_floor_bytes: 8388608, free_floor_ratio: 0}}\nhistory:\n  raw_interval: 2s\n  flush_interval: 2s\n",
            state = state.display(),
            dev = fs.device,
            target = target.display(),
        ),
    )
    .unwrap();
    support::run("chmod", &["644", cfg.to_str().unwrap()]);
    let counts = state.join("strace.txt");
    let notify = dir.path().join("notify.sock");
    let _manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    support::run("chmod", &["777", notify.to_str().unwrap()]);
    // The daemon's pid (the shell execs it): strace blocks SIGTERM while it runs a command, so
    // the stop goes to the daemon itself.
    let pid_file = state.join("daemon.pid");
    // As the unit runs it: its user, the disk group, the two capabilities smartctl inherits
    // (ambient), UMask=0077, NOTIFY_SOCKET and a watchdog. systemd sets the credentials before
    // it applies the filter: setpriv does that here, with strace below it, so only the calls
    // made under those credentials count.
    let child = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--groups=disk"])
        .args([
            "--inh-caps=+sys_rawio,+sys_admin",
            "--ambient-caps=+sys_rawio,+sys_admin",
        ])
        .args(["strace", "-f", "-qq", "-c", "-U", "name", "-o"])
        .arg(&counts)
        .args(["sh", "-c", "echo $$ > \"$0\"; umask 077; exec \"$@\""])
        .arg(&pid_file)
        .arg(support::bin())
        .arg("--config")
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "1000000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start strace");
    let mut child = support::KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        let got = agent
            .get(&format!("http://127.0.0.1:{port}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok());
        match got {
            Some(m) if m.contains("ssdwatch_probe_runs_total{") => break m,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            other => panic!("{backend}: no probe run within 30 s: {other:?}"),
        }
    };
    assert!(metrics.contains("ssdwatch_build_info"), "{metrics}");
    std::thread::sleep(Duration::from_secs(3)); // a history flush, a SMART run or two
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SIGHUP first: the reload path (config read, notify) is part of the run.
    for sig in [
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    let status = child.0.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(
        status.success(),
        "{backend}: strace/ssdwatch exit {status}:\n{err}"
    );
    let text = std::fs::read_to_string(&counts).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("syscall") && !l.starts_with('-') && *l != "total"
        })
        .map(str::to_string)
        .collect()
}
