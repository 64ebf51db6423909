//! Least privilege, for real: the daemon binary started the way the unit starts it (an
//! unprivileged user holding CAP_SYS_RAWIO and CAP_SYS_ADMIN as ambient capabilities, through
//! util-linux's setpriv) holds no capability once it serves; its privileged helper holds exactly the
//! two; SMART data and probes still work; a helper killed by pid is replaced; and the helper
//! refuses what the config does not allow, over its own socket.

use crate::support::{self, wait_for};

use crate::support::smart::{Fake, smart_fixture};
use ssdwatch::privsep::SMART_CAPS;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: cargo's, or the one `SSDWATCH` names (as for the bench scripts).
fn bin() -> String {
    std::env::var("SSDWATCH").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ssdwatch").to_string())
}
const FIXTURE: &str = "ata-crucial-m4-mtfddak128mam.json";

/// The capability sets of one task (/proc/PID/task/TID/status).
fn caps_of(status: &Path) -> ssdwatch::privsep::CapState {
    ssdwatch::privsep::caps::read(status).unwrap_or_else(|e| panic!("{e}"))
}

/// Every thread of `pid`: the daemon's runtime threads must hold nothing either.
fn thread_caps(pid: u32) -> Vec<(String, ssdwatch::privsep::CapState)> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|t| {
            (
                t.file_name().to_string_lossy().to_string(),
                caps_of(&t.path().join("status")),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|x| x.1.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// The daemon binary as a child process, stopped (SIGTERM, then SIGKILL) by its pid on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
    addr: String,
}

impl Daemon {
    /// Starts `prefix... ssdwatch --config CONFIG` and waits until it serves.
    fn start(prefix: &[&str], config: &Path, log: PathBuf) -> Daemon {
        let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        argv.extend([
            bin(),
            "--config".into(),
            config.display().to_string(),
            "--web.listen-address".into(),
            "127.0.0.1:0".into(),
        ]);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let mut d = Daemon {
            child,
            log,
            addr: String::new(),
        };
        d.addr = wait_for("the daemon serves", Duration::from_secs(20), || {
            if let Ok(Some(s)) = d.child.try_wait() {
                panic!("ssdwatch exited with {s}:\n{}", d.log_text());
            }
            crate::support::binary::serving_addresses(&d.log_text())
                .first()
                .map(|a| a.to_string())
        });
        d
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn metrics(&self) -> String {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        agent
            .get(&format!("http://{}/metrics", self.addr))
            .call()
            .unwrap_or_else(|e| panic!("GET /metrics: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap()
    }

    fn wait_metrics(&self, what: &str, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        let last = loop {
            let m = self.metrics();
            if pred(&m) {
                return m;
            }
            if Instant::now() >= deadline {
                break m;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        panic!(
            "{what}: not within {within:?}\nlast scrape:\n{last}\nlog:\n{}",
            self.log_text()
        );
    }

    /// The keeper (the daemon's child) and the helper worker (the keeper's child).
    fn helper(&self) -> (u32, u32) {
        wait_for(
            "the privileged helper runs",
            Duration::from_secs(10),
            || {
                let keeper = children_of(self.pid())
                    .into_iter()
                    .find(|p| cmdline(*p).contains("smart-helper"))?;
                let worker = children_of(keeper)
                    .into_iter()
                    .find(|p| cmdline(*p).contains("smart-helper --worker"))?;
                Some((keeper, worker))
            },
        )
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        support::stop_child(&mut self.child, Duration::from_secs(5));
    }
}

/// setpriv's arguments for the unit's credentials: user nobody, no supplementary group, the two
/// capabilities inheritable and ambient, a bounding set of just those, no_new_privs.
const AS_THE_UNIT: &[&str] = &[
    "setpriv",
    "--reuid=nobody",
    "--regid=nogroup",
    "--clear-groups",
    "--inh-caps=-all,+sys_rawio,+sys_admin",
    "--ambient-caps=-all,+sys_rawio,+sys_admin",
    "--bounding-set=-all,+sys_rawio,+sys_admin",
    "--no-new-privs",
];

fn uid_of(name: &str) -> u32 {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no user {name}"))
        .uid
        .as_raw()
}

/// A directory an unprivileged user can work in (temp dirs are 0700 root).
fn open_dir(dir: &Path, owner: Option<u32>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if let Some(uid) = owner {
        std::os::unix::fs::chown(dir, Some(uid), None).expect("chown");
    }
}

/// A fake smartctl the user nobody can run and leave its records with.
fn fake_for_nobody() -> Fake {
    let fake = Fake::new();
    open_dir(fake.dir.path(), Some(uid_of("nobody")));
    fake
}

fn unit_prerequisites(test: &str) -> bool {
    support::require_root(test) && support::require_cmd(test, "setpriv", "util-linux")
}

/// The daemon started through `wrapper` (empty: as this test runs) with probes off and
/// `collectors` (YAML lines indented under `collectors:`), its state in a new directory; that
/// directory (state, config, log: keep it while the daemon runs) and the daemon.
fn start_daemon(wrapper: &[&str], collectors: &str) -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}\ncollectors:\n  probe:\n    enabled: false\n{collectors}",
            dir.path().display()
        ),
    )
    .unwrap();
    let d = Daemon::start(wrapper, &config, dir.path().join("daemon.log"));
    (dir, d)
}

/// [`start_daemon`] reading SMART of `/dev/fake0` through `fake` every second.
fn start_on_fake0(fake: &Fake) -> (tempfile::TempDir, Daemon) {
    start_daemon(
        &[],
        &format!(
            "  smart:\n    interval: 1s\n    discover: false\n    smartctl_path: {}\n    devices:\n      - path: /dev/fake0\n",
            fake.bin().display()
        ),
    )
}

#[test]
fn under_the_units_credentials_the_http_process_holds_no_capability_and_smart_and_probes_still_work()
 {
    let test = "under_the_units_credentials_the_http_process_holds_no_capability_and_smart_and_probes_still_work";
    if !unit_prerequisites(test) {
        return;
    }
    let nobody = uid_of("nobody");
    let fake = fake_for_nobody();
    fake.ok("fake0", FIXTURE);
    let fs = support::LoopFs::no_reserve(128);
    open_dir(fs.dir.path(), None);
    let target = fs.mountpoint.join("db");
    std::fs::create_dir(&target).unwrap();
    open_dir(&target, Some(nobody));
    let dir = tempfile::tempdir().unwrap();
    open_dir(dir.path(), None);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    open_dir(&state, Some(nobody));
    let config = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}
collectors:
  smart:
    interval: 1s
    discover: false
    smartctl_path: {}
    devices:
      - path: /dev/fake0
  probe:
    interval: 1s
    jitter_ratio: 0
    busy_window: 0s
    targets:
      - path: {}
        kinds: [sync_write_4k, rand_read_4k]
        write_ops: 8
        read_ops: 100
        file_size_bytes: 2097152
",
            state.display(),
            fake.bin().display(),
            target.display()
        ),
    )
    .unwrap();
    let d = Daemon::start(AS_THE_UNIT, &config, dir.path().join("daemon.log"));
    let m = d.wait_metrics("SMART data and a probe run", Duration::from_secs(30), |m| {
        support::value_matching(m, "ssdwatch_device_smart_sample_ok", "device=\"fake0\"")
            == Some(1.0)
            && support::value_matching(
                m,
                "ssdwatch_probe_latency_seconds_count",
                "probe=\"sync_write_4k\"",
            )
            .is_some_and(|n| n >= 8.0)
    });
    // The HTTP process, every thread of it: nothing effective, permitted, inheritable or ambient.
    for (tid, c) in thread_caps(d.pid()) {
        assert_eq!(
            (c.eff, c.prm, c.inh, c.amb),
            (0, 0, 0, 0),
            "daemon thread {tid}: {c:?}\n{}",
            d.log_text()
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // The keeper and the helper: exactly CAP_SYS_RAWIO and CAP_SYS_ADMIN, passed on to smartctl.
    let (keeper, worker) = d.helper();
    for pid in [keeper, worker] {
        for (tid, c) in thread_caps(pid) {
            assert_eq!(
                (c.eff, c.prm, c.amb),
                (SMART_CAPS, SMART_CAPS, SMART_CAPS),
                "{} thread {tid}: {c:?}",
                cmdline(pid)
            );
        }
    }
    // smartctl was run by the helper with the fixed argument set.
    assert_eq!(
        fake.argv("fake0").lines().next(),
        Some("--json=c --info --health --attributes --nocheck=standby /dev/fake0"),
    );
    // The probe files belong to the unprivileged user: the daemon wrote them, uncapable.
    use std::os::unix::fs::MetadataExt;
    let probe_dir = target.join(".ssdwatch-probe");
    let owner = std::fs::metadata(&probe_dir)
        .unwrap_or_else(|e| panic!("{}: {e}\n{m}", probe_dir.display()))
        .uid();
    assert_eq!(owner, nobody);
}

/// The privileged helper is started when a collector needs it and named for what it is: with
/// SMART and layers off the daemon starts none (no keeper, no worker, no word of one in the
/// log); with layers on and SMART off (dmsetup's ioctls need CAP_SYS_ADMIN) it starts one and
/// logs it as the privileged helper, not as SMART's.
#[test]
fn the_privileged_helper_runs_only_when_smart_or_layers_needs_it_and_is_logged_neutrally() {
    let test =
        "the_privileged_helper_runs_only_when_smart_or_layers_needs_it_and_is_logged_neutrally";
    if !support::require_root(test) {
        return;
    }
    // The keeper is started before the daemon serves: once it serves, there is one or none.
    let (_dir, d) = start_daemon(
        &[],
        "  smart:\n    enabled: false\n  layers:\n    enabled: false\n",
    );
    let children: Vec<String> = children_of(d.pid()).into_iter().map(cmdline).collect();
    assert!(
        !children.iter().any(|c| c.contains("smart-helper")),
        "a helper with no client: {children:?}"
    );
    let log = d.log_text();
    assert!(!log.contains("helper"), "{log}");
    drop(d);

    let (_dir, d) = start_daemon(
        &[],
        "  smart:\n    enabled: false\n  layers:\n    interval: 1s\n",
    );
    let (keeper, worker) = d.helper();
    let log = wait_for(
        "the helper's worker is taken",
        Duration::from_secs(10),
        || {
            let log = d.log_text();
            log.contains(&format!("msg=\"privileged helper ready\" pid={worker}"))
                .then_some(log)
        },
    );
    assert!(
        log.contains(&format!(
            "privileged helper started (smartctl, libatasmart and dmsetup run under it)\" keeper={keeper}"
        )),
        "{log}"
    );
    assert!(!log.contains("SMART helper"), "{log}");
}

/// Root without the unit: everything dropped, the bounding set emptied (root may), so nothing
/// comes back at exec; the helper cuts its own bounding set to the two, so smartctl run as root
/// gets those two and no more.
#[test]
fn started_as_root_by_hand_the_daemon_keeps_no_capability_and_the_helper_only_two() {
    let test = "started_as_root_by_hand_the_daemon_keeps_no_capability_and_the_helper_only_two";
    if !support::require_root(test) {
        return;
    }
    let fake = Fake::new();
    fake.ok("fake0", FIXTURE);
    let (_dir, d) = start_on_fake0(&fake);
    d.wait_metrics("a reading", Duration::from_secs(20), |m| {
        support::value_matching(m, "ssdwatch_device_smart_sample_ok", "device=\"fake0\"")
            == Some(1.0)
    });
    for (tid, c) in thread_caps(d.pid()) {
        assert_eq!(
            c,
            ssdwatch::privsep::CapState::default(),
            "daemon thread {tid}"
        );
    }
    let (keeper, worker) = d.helper();
    for pid in [keeper, worker] {
        let c = caps_of(Path::new(&format!("/proc/{pid}/status")));
        assert_eq!(
            c,
            ssdwatch::privsep::CapState {
                eff: SMART_CAPS,
                prm: SMART_CAPS,
                inh: SMART_CAPS,
                amb: SMART_CAPS,
                bnd: SMART_CAPS
            },
            "{}",
            cmdline(pid)
        );
    }
}

#[test]
fn a_refusal_through_the_helper_still_names_its_cause() {
    let test = "a_refusal_through_the_helper_still_names_its_cause";
    if !unit_prerequisites(test) || !support::require_cmd(test, "smartctl", "smartmontools") {
        return;
    }
    // A loop device (root's, at most group-readable), and the unit's user here is in no group.
    // smartctl opens it
    // as a SAT drive (without a type it would not open a loop device at all).
    let fs = support::LoopFs::new(16);
    let dir = tempfile::tempdir().unwrap();
    open_dir(dir.path(), None);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    open_dir(&state, Some(uid_of("nobody")));
    let config = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}\ncollectors:\n  probe:\n    enabled: false\n  smart:\n    interval: 1s\n    discover: false\n    devices:\n      - path: {}\n        type: sat\n",
            state.display(),
            fs.device
        ),
    )
    .unwrap();
    let d = Daemon::start(AS_THE_UNIT, &config, dir.path().join("daemon.log"));
    // The node as this machine has it (0660 root:disk with udev; 0600 root:root without).
    use std::os::unix::fs::MetadataExt;
    let node = std::fs::metadata(&fs.device).expect("stat the loop device");
    let owner = nix::unistd::User::from_uid(node.uid().into())
        .ok()
        .flatten()
        .map_or(node.uid().to_string(), |u| u.name);
    let group = nix::unistd::Group::from_gid(node.gid().into())
        .ok()
        .flatten()
        .map_or(node.gid().to_string(), |g| g.name);
    let want = format!(
        "{} is {:04o} {owner}:{group} and smartctl runs as uid {} gid {} without read access to it",
        fs.device,
        node.mode() & 0o7777,
        uid_of("nobody"),
        nix::unistd::Group::from_name("nogroup")
            .ok()
            .flatten()
            .expect("group nogroup")
            .gid
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = loop {
        let log = d.log_text();
        if log.contains(&want) {
            break log;
        }
        assert!(Instant::now() < deadline, "no {want:?} in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(log.contains("Permission denied"), "{log}");
    let m = d.metrics();
    let dev = fs.kernel_name();
    assert_eq!(
        support::value_matching(
            &m,
            "ssdwatch_device_smart_sample_ok",
            &format!("device=\"{dev}\"")
        ),
        Some(0.0),
        "{m}"
    );
}

#[test]
fn discovered_drives_are_read_through_the_helper_with_the_real_smartctl() {
    let test = "discovered_drives_are_read_through_the_helper_with_the_real_smartctl";
    if !unit_prerequisites(test) || !support::require_cmd(test, "smartctl", "smartmontools") {
        return;
    }
    use ssdwatch::sysfs::topology::DeviceKind;
    let drives = support::smart_drives();
    if drives.is_empty() {
        support::skip(test, "no NVMe, sd or virtio drive on this machine");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    open_dir(dir.path(), None);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    open_dir(&state, Some(uid_of("nobody")));
    let config = dir.path().join("ssdwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {}\ncollectors:\n  probe:\n    enabled: false\n  smart:\n    interval: 1s\n",
            state.display()
        ),
    )
    .unwrap();
    // The packaged unit's user is in group disk (SupplementaryGroups=disk).
    let mut as_unit: Vec<&str> = AS_THE_UNIT.to_vec();
    as_unit.retain(|a| *a != "--clear-groups");
    as_unit.insert(1, "--groups=disk");
    let d = Daemon::start(&as_unit, &config, dir.path().join("daemon.log"));
    let m = d.wait_metrics(
        "every discovered drive read",
        Duration::from_secs(60),
        |m| {
            drives.iter().all(|(name, _)| {
                support::value_matching(
                    m,
                    "ssdwatch_device_smart_sample_ok",
                    &format!("device=\"{name}\""),
                )
                .is_some()
            })
        },
    );
    for (name, kind) in &drives {
        let has = |family: &str| support::value_matching(&m, family, &format!("device=\"{name}\""));
        if *kind == DeviceKind::Virtio {
            // smartctl ran (through the helper, which let the drive through) and said so.
            assert_eq!(
                has("ssdwatch_device_smart_supported"),
                Some(0.0),
                "{name}\n{m}"
            );
            assert_eq!(
                has("ssdwatch_device_smart_sample_ok"),
                Some(1.0),
                "{name}\n{m}"
            );
        }
    }
    assert!(
        !d.log_text().contains("refused"),
        "no discovered drive is refused by the helper:\n{}",
        d.log_text()
    );
}

/// The helper builds smartctl's arguments: the OCP log is read through it, once in the first
/// hour, only where the config allows it.
#[test]
fn through_the_helper_the_ocp_log_is_read_hourly_and_only_where_configured() {
    let ocp = crate::support::smart::OcpCapture::new();
    for on in [true, false] {
        let fake = Fake::new();
        fake.mode("fake0", &ocp.mode());
        let (_dir, d) = start_daemon(
            &[],
            &format!(
                "  smart:\n    interval: 1s\n    discover: false\n    nvme_ocp_log: {on}\n    smartctl_path: {}\n    devices:\n      - path: /dev/fake0\n",
                fake.bin().display()
            ),
        );
        // Four runs: the first tells the protocol, the second may read the log, two more
        // within the hour.
        wait_for("four smartctl runs", Duration::from_secs(120), || {
            (fake.argv("fake0").lines().count() >= 4).then_some(())
        });
        let nand = wait_for(
            "a SMART sample after the fourth run",
            Duration::from_secs(60),
            || {
                let m = d.metrics();
                m.contains("ssdwatch_device_host_written_bytes_total{")
                    .then(|| {
                        support::value_matching(&m, "ssdwatch_device_nand_written_bytes_total", "")
                    })
            },
        );
        let argv = fake.argv("fake0");
        let reads = argv.lines().filter(|l| l.contains("nvmelog")).count();
        if on {
            assert_eq!(reads, 1, "{argv}");
            assert_eq!(nand, Some(ocp.nand as f64), "{}", d.metrics());
        } else {
            assert_eq!(reads, 0, "{argv}");
            assert_eq!(nand, None);
        }
    }
}

/// RAID discovery through the helper: it runs the scan and accepts the ports it found, which
/// are read like configured ones.
#[test]
fn through_the_helper_raid_ports_a_scan_found_are_read() {
    let fake = Fake::new();
    let scan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(scan.path(), crate::support::smart::RAID_SCAN).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(scan.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    fake.mode("--json=c", &format!("ok {}", scan.path().display()));
    fake.ok("bus_0", FIXTURE);
    let (_dir, d) = start_daemon(
        &[],
        &format!(
            "  smart:\n    interval: 1s\n    discover: false\n    discover_raid: true\n    smartctl_path: {}\n",
            fake.bin().display()
        ),
    );
    wait_for("both ports read", Duration::from_secs(120), || {
        let m = d.metrics();
        ["bus/0:megaraid,8", "bus/0:sat+megaraid,9"]
            .iter()
            .all(|dev| {
                support::value_matching(
                    &m,
                    "ssdwatch_device_smart_sample_ok",
                    &format!("device=\"{dev}\""),
                ) == Some(1.0)
            })
            .then_some(())
    });
    assert_eq!(
        fake.file("--json=c.argv").lines().count(),
        1,
        "one scan in the hour"
    );
    assert!(!d.log_text().contains("refused a read"), "{}", d.log_text());
}

#[test]
fn killing_the_smart_helper_fails_its_read_as_a_smart_error_and_another_takes_over() {
    let fake = Fake::new();
    // Each run takes a while, so the kill lands while the helper has a read in flight.
    fake.mode(
        "fake0",
        &format!("slow 2 {}", smart_fixture(FIXTURE).display()),
    );
    let (_dir, d) = start_on_fake0(&fake);
    let sample_ok =
        |m: &str| support::value_matching(m, "ssdwatch_device_smart_sample_ok", "device=\"fake0\"");
    let errors = |m: &str| {
        support::value(m, "ssdwatch_collector_errors_total{collector=\"smart\"}").unwrap_or(0.0)
    };
    let m = d.wait_metrics("a first reading", Duration::from_secs(20), |m| {
        sample_ok(m) == Some(1.0)
    });
    let errors_before = errors(&m);
    let (keeper, worker) = d.helper();
    // Wait for the next run to be under way (the fake marks it), then kill the helper.
    let running = fake.dir.path().join("running");
    wait_for("a run under way", Duration::from_secs(10), || {
        std::fs::read_dir(&running)
            .ok()
            .and_then(|mut r| r.next())
            .map(|_| ())
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the helper");
    let m = d.wait_metrics(
        "the failed read shown by the SMART health series",
        Duration::from_secs(10),
        |m| sample_ok(m) == Some(0.0) && errors(m) > errors_before,
    );
    let log = d.log_text();
    assert!(
        log.contains(&format!(
            "device fake0: the privileged helper (pid {worker}) ended before it answered for /dev/fake0"
        )),
        "{log}"
    );
    // The rest of the daemon goes on: the other collectors still succeed.
    assert_eq!(
        support::value(&m, "ssdwatch_collector_success{collector=\"diskstats\"}"),
        Some(1.0),
        "{m}"
    );
    // Another helper, under the same keeper, and SMART data again.
    let (keeper2, worker2) = d.helper_other_than(worker);
    assert_eq!(keeper2, keeper, "the keeper stays");
    assert!(!alive(worker));
    d.wait_metrics("SMART data again", Duration::from_secs(20), |m| {
        sample_ok(m) == Some(1.0)
    });
    assert!(
        d.log_text()
            .contains(&format!("msg=\"privileged helper ready\" pid={worker2}")),
        "{}",
        d.log_text()
    );
}

/// A smartctl stuck in the kernel under the helper: the helper reports it stuck, the daemon shows
/// it and starts no other run of that drive, and when the stuck process is gone at last the
/// helper says so and the drive is read again. Made real with a FUSE mount whose statfs never
/// returns.
#[test]
fn a_smartctl_stuck_in_the_kernel_under_the_helper_is_shown_until_the_helper_reports_it_gone() {
    let test =
        "a_smartctl_stuck_in_the_kernel_under_the_helper_is_shown_until_the_helper_reports_it_gone";
    if !support::fuse_available(test) {
        return;
    }
    let mut hung = support::HungFuse::new();
    let fake = Fake::new();
    fake.mode("sda", &format!("dstate {}", hung.mountpoint.display()));
    fake.ok("sdb", FIXTURE);
    let (_dir, d) = start_daemon(
        &[],
        &format!(
            "  filesystem:\n    enabled: false\n  smart:\n    interval: 1s\n    timeout: 3s\n    discover: false\n    smartctl_path: {}\n    devices:\n      - path: /dev/sda\n      - path: /dev/sdb\n",
            fake.bin().display()
        ),
    );
    let stuck = |m: &str, dev: &str| {
        support::value_matching(
            m,
            "ssdwatch_device_smartctl_stuck",
            &format!("device=\"{dev}\""),
        )
    };
    // 3 s timeout + 1 s grace in the helper, then it reports the run stuck. The timeout gives
    // the FUSE server time to take the request even on a busy machine: SIGKILL still ends a
    // process whose request the server has not read yet, and then nothing is stuck.
    let m = d.wait_metrics("sda shown stuck", Duration::from_secs(40), |m| {
        stuck(m, "sda") == Some(1.0)
    });
    assert_eq!(stuck(&m, "sdb"), Some(0.0), "{m}");
    let runs_sdb = fake.argv("sdb").lines().count();
    // sdb goes on being read (twice more: at least one whole interval passes), and no other
    // run of sda starts meanwhile.
    wait_for("sdb read again", Duration::from_secs(30), || {
        (fake.argv("sdb").lines().count() >= runs_sdb + 2).then_some(())
    });
    assert_eq!(fake.argv("sda").lines().count(), 1, "no second run of sda");
    assert!(
        d.log_text().contains("device sda: timed out after 3s, killed, and still not gone after 1s: stuck in the kernel"),
        "{}",
        d.log_text()
    );
    // The drive's I/O returns (the FUSE server dies): the helper reports the process gone.
    hung.kill_server();
    d.wait_metrics("sda no longer stuck", Duration::from_secs(20), |m| {
        stuck(m, "sda") == Some(0.0)
    });
    wait_for("sda read again", Duration::from_secs(10), || {
        (fake.argv("sda").lines().count() >= 2).then_some(())
    });
}

/// Ctrl-C in a terminal signals the daemon's whole process group, its helper included: the
/// helper does not die first and orphan a smartctl mid-run; it ends when the daemon has gone,
/// after killing the run and what the run left.
#[test]
fn a_ctrl_c_to_the_daemons_process_group_leaves_no_smartctl_behind() {
    let fake = Fake::new();
    fake.mode("fake0", "escape-hang");
    // setsid: the daemon leads its own process group, as a shell's foreground job does.
    let (_dir, mut d) = start_daemon(
        &["setsid"],
        &format!(
            "  smart:\n    timeout: 5m\n    discover: false\n    smartctl_path: {}\n    devices:\n      - path: /dev/fake0\n",
            fake.bin().display()
        ),
    );
    let (keeper, worker) = d.helper();
    let running = fake.dir.path().join("fake0.running");
    let smartctl: u32 = wait_for("smartctl running", Duration::from_secs(20), || {
        std::fs::read_to_string(&running).ok()?.trim().parse().ok()
    });
    let escapee: u32 = wait_for("its escapee", Duration::from_secs(5), || {
        std::fs::read_to_string(fake.dir.path().join("fake0.escapees"))
            .ok()?
            .lines()
            .next()?
            .parse()
            .ok()
    });
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(d.pid() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT to the daemon's group");
    wait_for("the daemon exits", Duration::from_secs(10), || {
        d.child.try_wait().ok().flatten()
    });
    wait_for(
        "smartctl, its escapee, the helper and the keeper gone",
        Duration::from_secs(10),
        || {
            [smartctl, escapee, worker, keeper]
                .iter()
                .all(|p| !alive(*p))
                .then_some(())
        },
    );
}

#[test]
fn when_the_keeper_dies_the_helper_serves_on_and_after_it_smart_errors_name_the_cause() {
    let fake = Fake::new();
    fake.ok("fake0", FIXTURE);
    let (_dir, d) = start_on_fake0(&fake);
    let sample_ok =
        |m: &str| support::value_matching(m, "ssdwatch_device_smart_sample_ok", "device=\"fake0\"");
    d.wait_metrics("a first reading", Duration::from_secs(20), |m| {
        sample_ok(m) == Some(1.0)
    });
    let (keeper, worker) = d.helper();
    let kill = |pid: u32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill")
    };
    kill(keeper);
    wait_for("the keeper's end noticed", Duration::from_secs(10), || {
        d.log_text()
            .contains(&format!(
                "the privileged helper's keeper (pid {keeper}) is gone"
            ))
            .then_some(())
    });
    // The helper it started still serves: new readings keep coming.
    let runs = || fake.argv("fake0").lines().count();
    let before = runs();
    wait_for(
        "a read after the keeper died",
        Duration::from_secs(10),
        || (runs() > before).then_some(()),
    );
    kill(worker);
    let m = d.wait_metrics(
        "SMART errors once the last helper is gone",
        Duration::from_secs(10),
        |m| sample_ok(m) == Some(0.0),
    );
    assert!(
        d.log_text()
            .contains("no new privileged helper until ssdwatch restarts"),
        "{}",
        d.log_text()
    );
    // Nothing restarts it, and the rest of the daemon goes on.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        children_of(d.pid()).is_empty(),
        "{:?}",
        children_of(d.pid())
    );
    assert_eq!(
        support::value(&m, "ssdwatch_collector_success{collector=\"diskstats\"}"),
        Some(1.0),
        "{m}"
    );
}

impl Daemon {
    fn helper_other_than(&self, old: u32) -> (u32, u32) {
        wait_for("another privileged helper", Duration::from_secs(10), || {
            let (k, w) = self.helper();
            (w != old).then_some((k, w))
        })
    }
}

/// Writes one frame: a 4-byte big-endian length, then the bytes.
fn send(sock: &mut std::os::unix::net::UnixStream, body: &str) {
    let mut buf = (body.len() as u32).to_be_bytes().to_vec();
    buf.extend_from_slice(body.as_bytes());
    sock.write_all(&buf).expect("write a request");
}

fn recv(sock: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).expect("a reply");
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    sock.read_exact(&mut buf).expect("its body");
    buf
}

#[test]
fn the_smart_helper_refuses_over_its_socket_what_the_config_does_not_allow() {
    let fake = Fake::new();
    fake.ok("fake0", FIXTURE);
    let spec = serde_json::json!({
        "smartctl": fake.bin(),
        "timeout_ms": 1_000,
        "nocheck_standby": true,
        "sys": "/sys",
        "discover": true,
        "include": null,
        "exclude": "^sdz$",
        "devices": [["/dev/fake0", null], ["/dev/bus/0", "megaraid,3"], ["/dev/hang0", null], ["/dev/flood0", null], ["/dev/ssdwatch-no-disk", null]],
    })
    .to_string();
    let args: Vec<std::ffi::OsString> = ["smart-helper", "--worker", "--spec", &spec]
        .iter()
        .map(Into::into)
        .collect();
    let (child, mut sock) = ssdwatch::privsep::keeper::spawn_with_socket(Path::new(&bin()), &args)
        .expect("start the helper");
    let mut child = support::KillOnDrop(child);
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let cases = [
        (
            r#"{"op":"smartctl","id":1,"path":"/etc/shadow","dev_type":null,"protocol":null,"asks":{"devstat":true,"logs":true}}"#,
            "/etc/shadow is neither a configured device nor a kernel drive name under /dev/",
        ),
        (
            r#"{"op":"smartctl","id":2,"path":"/dev/bus/0","dev_type":"megaraid,4","protocol":null,"asks":{"devstat":true,"logs":true}}"#,
            "/dev/bus/0 with -d megaraid,4 is not a device of collectors.smart.devices (discover_raid is off)",
        ),
        (
            r#"{"op":"scan_raid","id":6}"#,
            "RAID discovery is off (collectors.smart.discover_raid)",
        ),
        (
            r#"{"op":"smartctl","id":3,"path":"/dev/sdz","dev_type":null,"protocol":null,"asks":{"devstat":true,"logs":true}}"#,
            "/dev/sdz is left out by device_include/device_exclude",
        ),
        (
            r#"{"op":"atasmart","id":4,"path":"/dev/loop0"}"#,
            "/dev/loop0: /sys/block/loop0/device does not exist: not a drive the kernel found",
        ),
    ];
    for (req, why) in cases {
        send(&mut sock, req);
        let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
        assert_eq!(reply["reply"], "refused", "{req}: {reply}");
        assert_eq!(reply["reason"], why, "{req}");
    }
    // Nothing refused ever reached smartctl.
    assert_eq!(fake.file("etc_shadow.argv"), "");
    assert_eq!(fake.file("bus_0.argv"), "");
    assert_eq!(fake.file("--json=c.argv"), "", "no scan");
    // A request asking for the OCP log of a helper whose spec does not allow it: the run
    // without it.
    send(
        &mut sock,
        r#"{"op":"smartctl","id":7,"path":"/dev/fake0","dev_type":null,"protocol":"NVMe","asks":{"devstat":true,"logs":true,"ocp":true}}"#,
    );
    let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
    assert_eq!(reply["reply"], "output", "{reply}");
    let _ = recv(&mut sock);
    let argv = fake.argv("fake0");
    assert!(
        argv.starts_with("--json=c ") && !argv.contains("nvmelog"),
        "{argv}"
    );
    std::fs::remove_file(fake.dir.path().join("fake0.argv")).unwrap();
    // An allowed device: the output of the fixed argument set, byte for byte.
    send(
        &mut sock,
        r#"{"op":"smartctl","id":5,"path":"/dev/fake0","dev_type":null,"protocol":"ATA","asks":{"devstat":true,"logs":true}}"#,
    );
    let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
    assert_eq!(reply["reply"], "output", "{reply}");
    assert_eq!(reply["id"], 5);
    assert_eq!(reply["exit"], serde_json::json!({"code": 0}));
    let out = recv(&mut sock);
    assert_eq!(out, std::fs::read(smart_fixture(FIXTURE)).unwrap());
    assert_eq!(reply["len"], out.len() as u64);
    assert_eq!(
        fake.argv("fake0").trim(),
        "--json=c --info --health --attributes --nocheck=standby --capabilities --log=error --log=selftest --get=wcache --log=devstat /dev/fake0"
    );
    // The runner's limits hold in the helper: a smartctl that hangs is killed at the timeout,
    // with what it started...
    fake.mode("hang0", "hang");
    send(
        &mut sock,
        r#"{"op":"smartctl","id":6,"path":"/dev/hang0","dev_type":null,"protocol":null,"asks":{"devstat":true,"logs":true}}"#,
    );
    let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
    assert_eq!(
        (&reply["reply"], &reply["kind"], &reply["after_ms"]),
        (
            &serde_json::json!("failed"),
            &serde_json::json!("timed_out"),
            &serde_json::json!(1000)
        ),
        "{reply}"
    );
    let child_pid: u32 = fake
        .file("hang0.child")
        .trim()
        .parse()
        .expect("the hang's child");
    wait_for("the hang's child killed", Duration::from_secs(5), || {
        (!alive(child_pid)).then_some(())
    });
    // ... and output that never ends is cut at the 4 MiB cap, its writer killed.
    fake.mode("flood0", "flood");
    send(
        &mut sock,
        r#"{"op":"smartctl","id":7,"path":"/dev/flood0","dev_type":null,"protocol":null,"asks":{"devstat":true,"logs":true}}"#,
    );
    let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
    assert_eq!(reply["reply"], "output", "{reply}");
    // Our end closed at the cap: the writer got SIGPIPE.
    assert_eq!(reply["exit"], serde_json::json!({"signal": 13}), "{reply}");
    let out = recv(&mut sock);
    assert_eq!(reply["len"], out.len() as u64);
    assert!(
        out.len() <= 4 << 20 && out.len() > (4 << 20) - 8192,
        "{} bytes",
        out.len()
    );
    let flood: u32 = fake
        .file("flood0.flood")
        .trim()
        .parse()
        .expect("the flood's pid");
    wait_for("the flood's writer gone", Duration::from_secs(5), || {
        (!alive(flood)).then_some(())
    });
    // A libatasmart read is the helper's too, and its failure comes back as it was told.
    send(
        &mut sock,
        r#"{"op":"atasmart","id":9,"path":"/dev/ssdwatch-no-disk"}"#,
    );
    let reply: serde_json::Value = serde_json::from_slice(&recv(&mut sock)).unwrap();
    assert_eq!(reply["reply"], "failed", "{reply}");
    let want = if cfg!(feature = "atasmart") {
        "libatasmart open on /dev/ssdwatch-no-disk: No such file or directory (os error 2)"
    } else {
        "this build has no libatasmart support"
    };
    assert_eq!(reply["message"], want, "{reply}");
    // A request with an argument list is not a request: the helper stops (its keeper would
    // start a fresh one) rather than guess.
    send(
        &mut sock,
        r#"{"op":"smartctl","id":8,"path":"/dev/fake0","dev_type":null,"devstat":false,"args":["-x"]}"#,
    );
    let status = wait_for("the helper stops", Duration::from_secs(10), || {
        child.0.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(1));
    assert_eq!(fake.argv("fake0").lines().count(), 1, "not run again");
}
