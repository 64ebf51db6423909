//! The daemon under a service manager's eyes: the real binary with NOTIFY_SOCKET pointing at a
//! datagram socket this test binds (as systemd's is), WATCHDOG_USEC and WATCHDOG_PID set as
//! systemd sets them. READY once /metrics answers, watchdog pets while the collectors sample,
//! RELOADING/READY around a SIGHUP, STOPPING on SIGTERM; a collector stuck in a blocking read
//! stops the pets and the log names it.

use crate::support;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The service manager's end: a datagram socket the daemon sends its notifications to.
struct Manager {
    sock: UnixDatagram,
    /// Every message received so far, with when it arrived.
    got: Vec<(Instant, String)>,
}

impl Manager {
    fn bind(dir: &Path) -> (Manager, PathBuf) {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        (
            Manager {
                sock,
                got: Vec::new(),
            },
            path,
        )
    }

    /// Receives until `deadline`, or until a message satisfies `pred` (returned).
    fn until(&mut self, deadline: Instant, pred: impl Fn(&str) -> bool) -> Option<String> {
        let mut buf = vec![0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.got.push((Instant::now(), msg.clone()));
                if pred(&msg) {
                    return Some(msg);
                }
            }
        }
        None
    }

    /// Waits up to `within` for a message with the line `line`; panics naming what came.
    fn expect(&mut self, line: &str, within: Duration) -> String {
        let found = self.until(Instant::now() + within, |m| m.lines().any(|l| l == line));
        found.unwrap_or_else(|| panic!("no {line} within {within:?}; got: {:#?}", self.got))
    }

    /// Messages with the line `line` that arrived after `since`.
    fn count_since(&self, since: Instant, line: &str) -> usize {
        (self.got.iter())
            .filter(|(t, m)| *t >= since && m.lines().any(|l| l == line))
            .count()
    }

    /// The last STATUS= line received.
    fn last_status(&self) -> String {
        (self.got.iter().rev())
            .flat_map(|(_, m)| m.lines())
            .find(|l| l.starts_with("STATUS="))
            .expect("a STATUS= line")
            .to_string()
    }
}

/// The daemon as systemd starts it: WATCHDOG_PID is its own pid (the shell execs it), unless
/// `watchdog_pid` names another.
struct Daemon {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

struct Setup<'a> {
    notify_socket: Option<&'a Path>,
    watchdog: Option<Duration>,
    watchdog_pid: Option<u32>,
    /// The procfs root (`--path.procfs`); the fixture host's when None.
    procfs: Option<&'a Path>,
    /// This machine instead of the fixture host, its filesystem collector watching only the
    /// mount points this expression matches.
    real_mounts: Option<&'a str>,
}

fn host() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/virtio")
}

impl Daemon {
    fn start(s: Setup) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let port = support::free_port();
        let cfg = dir.path().join("ssdwatch.yaml");
        // The collectors that read only the fixture tree, each on a 1 s interval; SMART, the
        // probes and the history have nothing to do with the notify protocol.
        let filesystem = match s.real_mounts {
            Some(re) => format!("    mount_points_include: [{re:?}]\n    fs_types_exclude: []\n"),
            None => String::new(),
        };
        std::fs::write(
            &cfg,
            format!(
                "state_dir: {}\nweb:\n  listen_address: 127.0.0.1:{port}\ncollectors:\n  topology:\n    interval: 1s\n  diskstats:\n    interval: 1s\n  filesystem:\n    interval: 1s\n    statfs_timeout: 300ms\n{filesystem}  smart:\n    enabled: false\n  layers:\n    enabled: false\n  probe:\n    enabled: false\nhistory:\n  enabled: false\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let log = dir.path().join("daemon.log");
        let mut flags = match s.real_mounts {
            Some(_) => vec!["--path.procfs".into(), "/proc".into()],
            None => support::fixture_host_flags(&host()),
        };
        if let Some(p) = s.procfs {
            let i = flags.iter().position(|f| f == "--path.procfs").unwrap();
            flags[i + 1] = p.as_os_str().to_owned();
        }
        // `exec` keeps the shell's pid, so WATCHDOG_PID=$$ is the daemon's own pid.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(match s.watchdog_pid {
                Some(pid) => format!("WATCHDOG_PID={pid} exec \"$@\""),
                None => "WATCHDOG_PID=$$ exec \"$@\"".to_string(),
            })
            .arg("sh")
            .arg(support::bin())
            .arg("--config")
            .arg(&cfg)
            .args(flags)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(sock) = s.notify_socket {
            cmd.env("NOTIFY_SOCKET", sock);
        }
        if let Some(w) = s.watchdog {
            cmd.env("WATCHDOG_USEC", w.as_micros().to_string());
        }
        let child = cmd.spawn().expect("start ssdwatch");
        Daemon {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET /metrics once, without waiting for the daemon to come up.
    fn metrics(&self) -> Result<String, String> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        agent
            .get(&format!("http://127.0.0.1:{}/metrics", self.port))
            .call()
            .map_err(|e| e.to_string())?
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())
    }

    /// Waits up to 20 s for READY=1 and returns its message; the panic shows the daemon's log.
    fn ready(&self, mgr: &mut Manager) -> String {
        let found = mgr.until(Instant::now() + Duration::from_secs(20), |m| {
            m.lines().any(|l| l == "READY=1")
        });
        found.unwrap_or_else(|| {
            panic!(
                "no READY=1 within 20 s; got: {:#?}\nthe daemon's log:\n{}",
                mgr.got,
                self.log()
            )
        })
    }

    /// Waits up to `within` for the log to contain `text`.
    fn wait_log(&self, text: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// SIGTERM, then the exit status within 10 s.
    fn stop(&mut self) -> std::process::ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait_exit()
    }

    /// The exit status within 10 s.
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "ssdwatch did not exit within 10 s; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn systemd_hears_ready_watchdog_pets_reload_and_stopping_from_the_real_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (mut mgr, sock) = Manager::bind(dir.path());
    let mut d = Daemon::start(Setup {
        notify_socket: Some(&sock),
        watchdog: Some(Duration::from_secs(2)),
        watchdog_pid: None,
        procfs: None,
        real_mounts: None,
    });
    let ready = d.ready(&mut mgr);
    // Ready means a scrape is answered now, not eventually.
    let scrape = d
        .metrics()
        .unwrap_or_else(|e| panic!("GET /metrics right after READY=1: {e}"));
    assert!(scrape.contains("ssdwatch_build_info"), "{scrape}");
    // How many collectors sample depends on the defaults; that they are named does not.
    let want = format!("STATUS=serving http on 127.0.0.1:{}; ", d.port);
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with(&want) && l.contains(" collectors sampling")),
        "READY=1 comes with a status saying where it serves: {ready:?}"
    );

    // Pets every half of WatchdogSec (1 s) while the collectors sample: 5 s hold 4 or more.
    let t0 = Instant::now();
    mgr.until(t0 + Duration::from_secs(5), |_| false);
    let pets = mgr.count_since(t0, "WATCHDOG=1");
    assert!(
        (4..=7).contains(&pets),
        "{pets} pets in 5 s: {:#?}",
        mgr.got
    );
    let status = mgr.last_status();
    assert!(!status.contains("STALLED"), "{status}");

    // SIGHUP: RELOADING=1 (with the monotonic time Type=notify-reload asks for), then READY=1.
    d.signal(Signal::SIGHUP);
    let reloading = mgr.expect("RELOADING=1", Duration::from_secs(10));
    assert!(
        reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    let ready = mgr.expect("READY=1", Duration::from_secs(10));
    assert!(
        ready.contains("last SIGHUP: config reloaded"),
        "the status says how the reload went: {ready:?}"
    );
    assert!(d.wait_log("SIGHUP: config", Duration::from_secs(5)));

    let status = d.stop();
    assert!(status.success(), "exit {status}; log:\n{}", d.log());
    mgr.until(Instant::now() + Duration::from_millis(300), |_| false);
    let stopping = (mgr.got.iter()).position(|(_, m)| m.lines().any(|l| l == "STOPPING=1"));
    assert!(stopping.is_some(), "no STOPPING=1: {:#?}", mgr.got);
}

#[test]
fn a_collector_stuck_in_a_read_stops_the_watchdog_pets_and_the_log_names_it() {
    // The filesystem collector reads the host's mount table (<procfs>/1/mountinfo) on a blocking
    // thread with no deadline: /proc does not hang. Here it is a FIFO nobody writes to, so its
    // open(2) blocks in the kernel for good: the collector never finishes a sample again, as it
    // would stuck on a wedged device, while the topology and diskstats collectors go on.
    let dir = tempfile::tempdir().unwrap();
    let procfs = dir.path().join("proc");
    std::fs::create_dir_all(procfs.join("1")).unwrap();
    std::fs::create_dir_all(procfs.join("self")).unwrap();
    std::fs::copy(
        host().join("proc/self/mountinfo"),
        procfs.join("self/mountinfo"),
    )
    .unwrap();
    nix::unistd::mkfifo(
        &procfs.join("1/mountinfo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let (mut mgr, sock) = Manager::bind(dir.path());
    let mut d = Daemon::start(Setup {
        notify_socket: Some(&sock),
        watchdog: Some(Duration::from_secs(1)),
        watchdog_pid: None,
        procfs: Some(&procfs),
        real_mounts: None,
    });
    d.ready(&mut mgr);
    // Limit: 3 of its 1 s intervals (longer than WatchdogSec): pets for about 3 s, then none.
    let stuck_line = "collector filesystem stuck: no sample finished for";
    let named = mgr
        .until(Instant::now() + Duration::from_secs(15), |_| {
            d.log().contains(stuck_line)
        })
        .is_some()
        || d.log().contains(stuck_line);
    assert!(
        named,
        "no log line naming the stuck collector:\n{}",
        d.log()
    );
    let log = d.log();
    let line = log.lines().find(|l| l.contains(stuck_line)).unwrap();
    assert!(
        line.contains("ERROR") && line.contains("systemd restarts the daemon"),
        "{line}"
    );
    let pets_before = mgr.count_since(mgr.got[0].0, "WATCHDOG=1");
    assert!(
        pets_before >= 2,
        "pets while it was within its limit: {pets_before}"
    );

    // From now on no pet, for longer than WatchdogSec: systemd would restart the daemon.
    let t0 = Instant::now();
    mgr.until(t0 + Duration::from_secs(3), |_| false);
    assert_eq!(
        mgr.count_since(t0, "WATCHDOG=1"),
        0,
        "pets after the stall: {:#?}",
        mgr.got
    );
    let status = mgr.last_status();
    assert!(
        status.contains("STALLED (no sample finished): filesystem for"),
        "{status}"
    );
    // Logged once when it started, not at every tick.
    assert_eq!(d.log().matches(stuck_line).count(), 1, "{}", d.log());
    // The scrape is not held up by the stuck collector, and the others go on.
    let m = d
        .metrics()
        .expect("/metrics answers while a collector is stuck");
    assert!(
        m.contains("ssdwatch_collector_success{collector=\"diskstats\"} 1"),
        "{m}"
    );
    assert!(
        !m.contains("ssdwatch_collector_success{collector=\"filesystem\"}"),
        "{m}"
    );
    // A thread blocked in open(2) does not hold up the exit.
    let status = d.stop();
    assert!(status.success(), "exit {status}; log:\n{}", d.log());
}

#[test]
fn a_watchdog_meant_for_another_process_is_not_petted_but_ready_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (mut mgr, sock) = Manager::bind(dir.path());
    let d = Daemon::start(Setup {
        notify_socket: Some(&sock),
        watchdog: Some(Duration::from_millis(500)),
        watchdog_pid: Some(1),
        procfs: None,
        real_mounts: None,
    });
    d.ready(&mut mgr);
    let t0 = Instant::now();
    mgr.until(t0 + Duration::from_secs(2), |_| false);
    assert_eq!(mgr.count_since(t0, "WATCHDOG=1"), 0, "{:#?}", mgr.got);
    drop(d);
}

#[test]
fn without_notify_socket_the_daemon_serves_and_stops_as_before() {
    let mut d = Daemon::start(Setup {
        notify_socket: None,
        watchdog: Some(Duration::from_secs(1)),
        watchdog_pid: None,
        procfs: None,
        real_mounts: None,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let m = loop {
        match d.metrics() {
            Ok(m) if m.contains("ssdwatch_collector_success{collector=\"filesystem\"} 1") => {
                break m;
            }
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no successful filesystem sample: {other:?}\n{}", d.log()),
        }
    };
    assert!(m.contains("ssdwatch_build_info"));
    let status = d.stop();
    assert!(status.success(), "exit {status}; log:\n{}", d.log());
    let log = d.log();
    assert!(
        !log.contains("watchdog") && !log.contains("notify"),
        "{log}"
    );
}

#[test]
fn a_hung_mount_the_guard_reports_as_stuck_is_progress_and_the_pets_go_on() {
    const T: &str = "notify with a hung FUSE mount";
    if !support::fuse_available(T) {
        return;
    }
    // statfs on this mount never returns, as on a dead NFS server: the stuck-mount guard gives
    // up on it after statfs_timeout and the sample finishes, reporting the mount as stuck.
    let mut hung = support::HungFuse::new();
    let mp = hung.mountpoint.canonicalize().unwrap();
    let roots = support::roots_seeing(&[&mp]);
    let include = format!("^{}$", regex_lite::escape(mp.to_str().unwrap()));
    let dir = tempfile::tempdir().unwrap();
    let (mut mgr, sock) = Manager::bind(dir.path());
    let mut d = Daemon::start(Setup {
        notify_socket: Some(&sock),
        watchdog: Some(Duration::from_secs(1)),
        watchdog_pid: None,
        procfs: Some(&roots.proc),
        real_mounts: Some(&include),
    });
    d.ready(&mut mgr);
    let stuck = format!("ssdwatch_filesystem_stuck{{mountpoint=\"{}\"", mp.display());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = d.metrics().unwrap_or_default();
        if m.lines()
            .any(|l| l.starts_with(&stuck) && l.ends_with(" 1"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the FUSE mount never showed as stuck:\n{m}\n{}",
            d.log()
        );
        mgr.until(Instant::now() + Duration::from_millis(200), |_| false);
    }
    // Longer than the stall limit (3 s): the pets keep coming every 0.5 s.
    let t0 = Instant::now();
    mgr.until(t0 + Duration::from_secs(5), |_| false);
    let pets = mgr.count_since(t0, "WATCHDOG=1");
    assert!(
        pets >= 7,
        "{pets} pets in 5 s with a hung mount: {:#?}",
        mgr.got
    );
    let log = d.log();
    assert!(!log.contains("stuck: no sample finished"), "{log}");
    assert!(
        !(mgr.got.iter()).any(|(_, m)| m.contains("STALLED")),
        "{:#?}",
        mgr.got
    );
    // SIGTERM: systemd hears STOPPING=1 at once. The process itself ends only once the FUSE
    // server is gone: a thread blocked in statfs on it can't be killed before its call returns.
    d.signal(Signal::SIGTERM);
    mgr.expect("STOPPING=1", Duration::from_secs(10));
    hung.kill_server();
    let status = d.wait_exit();
    assert!(status.success(), "exit {status}; log:\n{}", d.log());
}
