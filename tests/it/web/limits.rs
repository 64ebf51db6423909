//! Nothing outside can starve or kill the daemon: slow and silent clients are cut off at the
//! header timeout while scrapes go on, a client that stops reading is cut off at the idle
//! timeout, a connection flood waits its turn, huge headers are refused without memory growth,
//! SIGTERM exits within its deadline, SIGHUP never kills. As root, the attacks the daemon must
//! survive as a service runs it: inside a 128 MiB memory cgroup, and with the open-files limit a
//! shell gives (soft 1,024) under more idle connections than that.

use crate::support;
use crate::support::binary;

use crate::support::binary::{Daemon, http_status};
use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Opens a connection that sends the start of a request and never finishes its headers.
fn slowloris(d: &Daemon) -> TcpStream {
    let mut s = TcpStream::connect(d.addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .expect("partial headers");
    s
}

/// How long until the server closes `s` (EOF or reset), up to `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {} // e.g. a 408 before the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn slowloris_connections_are_closed_at_the_header_timeout_while_scrapes_keep_succeeding() {
    let d = Daemon::start(&["--web.read-header-timeout", "1s"]);
    let mut slow: Vec<TcpStream> = (0..100).map(|_| slowloris(&d)).collect();
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(d.get_status("/metrics"), 200);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "scrape took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for s in &mut slow {
        let closed = closed_within(s, Duration::from_secs(4));
        assert!(
            closed.is_some(),
            "a slowloris connection outlived the header timeout"
        );
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_at_the_header_timeout() {
    // What hyper's header_read_timeout covers, checked rather than assumed: it starts when
    // the connection is ready for the next request, so it bounds an idle keep-alive too.
    let d = Daemon::start(&[
        "--web.read-header-timeout",
        "1s",
        "--web.idle-timeout",
        "60s",
    ]);
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let closed = closed_within(&mut s, Duration::from_secs(5)).expect("idle connection kept open");
    assert!(
        closed > Duration::from_millis(500) && closed < Duration::from_millis(2500),
        "{closed:?}"
    );

    // A connection that never sends a byte is bounded the same way.
    let mut silent = TcpStream::connect(d.addr).unwrap();
    let closed =
        closed_within(&mut silent, Duration::from_secs(5)).expect("silent connection kept open");
    assert!(closed < Duration::from_millis(2500), "{closed:?}");
}

#[test]
fn more_connections_than_the_cap_wait_their_turn_and_a_scrape_still_completes() {
    let d = Daemon::start(&[
        "--web.max-connections",
        "20",
        "--web.read-header-timeout",
        "1s",
    ]);
    let _flood: Vec<TcpStream> = (0..60)
        .filter_map(|_| TcpStream::connect(d.addr).ok())
        .collect();
    let t = Instant::now();
    assert_eq!(
        http_status(d.addr, "/metrics", Duration::from_secs(10)),
        200
    );
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "scrape took {:?}",
        t.elapsed()
    );
    let fds = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .count();
    assert!(
        fds < 20 + 64,
        "{fds} descriptors open with a cap of 20 connections"
    );
    assert_eq!(d.get_status("/-/healthy"), 200);
}

#[test]
fn a_huge_header_is_refused_with_431_and_memory_stays_flat() {
    let d = Daemon::start(&[]);
    assert_eq!(d.get_status("/metrics"), 200);
    let before = rss_kib(d.pid());
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(256 * 1024)
    );
    let mut refused = 0;
    for _ in 0..50 {
        let mut s = TcpStream::connect(d.addr).unwrap();
        let _ = s.write_all(big.as_bytes()); // may fail once the server has closed
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        if text.is_empty() || text.starts_with("HTTP/1.1 431") {
            refused += 1;
        }
    }
    assert_eq!(refused, 50);
    let after = rss_kib(d.pid());
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    assert_eq!(d.get_status("/metrics"), 200);
}

#[test]
fn sigterm_with_half_sent_requests_exits_within_the_deadline() {
    let mut d = Daemon::start(&["--web.read-header-timeout", "60s"]);
    let _slow: Vec<TcpStream> = (0..50).map(|_| slowloris(&d)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    d.signal(Signal::SIGTERM);
    loop {
        if let Some(status) = d.child.try_wait().unwrap() {
            assert!(status.success(), "{status}:\n{}", d.log_text());
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        d.log_text().contains("dropping connections still open"),
        "{}",
        d.log_text()
    );
}

#[test]
fn sighup_keeps_the_daemon_running_with_the_same_pid_and_logs_it() {
    let mut d = Daemon::start(&[]);
    let pid = d.pid();
    d.signal(Signal::SIGHUP);
    assert!(
        d.wait_log("SIGHUP", Duration::from_secs(5)),
        "{}",
        d.log_text()
    );
    d.signal(Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "SIGHUP ended the daemon"
    );
    assert_eq!(d.pid(), pid);
    assert_eq!(d.get_status("/-/healthy"), 200);
}

#[test]
fn the_attack_bench_runs_in_short_mode() {
    // On a port of the caller's choosing: a free one, found the way the daemon would.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let out = std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/http_attack.sh"
        ))
        .args(["--short", "--port", &port.to_string()])
        .env("SSDWATCH_BIN", env!("CARGO_BIN_EXE_ssdwatch"))
        .output()
        .expect("run benches/http_attack.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "scrape p99",
        "RSS",
        "fds",
        "exit after SIGTERM",
        "right password every",
        "scrapes under 1,100 idle connections",
        &format!("daemon at 127.0.0.1:{port}"),
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}

#[test]
fn a_client_that_stops_reading_its_responses_is_closed_at_the_idle_timeout() {
    // The header timeout is out of the way (60 s): only the idle timer can close it in time.
    let d = Daemon::start(&[
        "--log.level",
        "debug",
        "--web.idle-timeout",
        "1s",
        "--web.read-header-timeout",
        "60s",
    ]);
    let s = TcpStream::connect(d.addr).unwrap();
    // Thousands of pipelined scrapes and not a byte read: the responses fill both socket buffers,
    // the server's writes stall, and nothing moves either way.
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000);
        let _ = w.write_all(&req); // fails once the server has closed
    });
    assert!(
        d.wait_log("closing a connection idle", Duration::from_secs(30)),
        "a connection whose client stopped reading stayed open:\n{}",
        d.log_text()
    );
    let mut s = s;
    assert!(
        closed_within(&mut s, Duration::from_secs(30)).is_some(),
        "the socket is still open"
    );
    writer.join().unwrap();
    assert_eq!(d.get_status("/metrics"), 200);
}

/// A memory cgroup of one test, made under this process's own cgroup (so whatever limits the
/// test also limits the daemon), in the cgroup v2 hierarchy where it has the memory controller,
/// else in the v1 memory hierarchy; removed on drop (after the daemon in it is gone).
struct MemCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemCgroup {
    /// Where the v2 hierarchy, or failing that the v1 memory hierarchy, is mounted, with this
    /// process's cgroup in it; or why there is none.
    fn locate() -> Result<(PathBuf, bool), String> {
        let table = std::fs::read("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let (mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo_bytes(&table);
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        // v2: "0::/path", usable when the hierarchy offers the memory controller.
        if let (Some(m), Some(path)) = (
            mounts.iter().find(|m| m.fstype == "cgroup2"),
            own.lines().find_map(|l| l.strip_prefix("0::")),
        ) {
            let dir = m.mount_path.join(path.trim_start_matches('/'));
            let offered =
                std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
            if offered.split_whitespace().any(|c| c == "memory")
                || std::fs::write(dir.join("cgroup.subtree_control"), "+memory").is_ok()
            {
                return Ok((dir, true));
            }
        }
        // v1: "N:memory:/path" (or memory among other controllers of one hierarchy).
        let v1 = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|c| c == "memory").then_some(path)
        });
        if let (Some(m), Some(path)) = (
            mounts
                .iter()
                .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "memory")),
            v1,
        ) {
            return Ok((m.mount_path.join(path.trim_start_matches('/')), false));
        }
        Err(
            "no cgroup hierarchy with the memory controller usable from this process's cgroup"
                .into(),
        )
    }

    fn create(limit_bytes: u64) -> Result<MemCgroup, String> {
        let (parent, v2) = Self::locate()?;
        let dir = parent.join(format!("ssdwatch-test-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("creating cgroup {}: {e}", dir.display()))?;
        let cg = MemCgroup { dir, v2 };
        let (file, swap) = if v2 {
            ("memory.max", "memory.swap.max")
        } else {
            ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
        };
        cg.write(file, &limit_bytes.to_string())?;
        // No swap to spill into either, where the kernel has swap accounting.
        if cg.dir.join(swap).exists() {
            let no_swap = if v2 {
                "0".to_string()
            } else {
                limit_bytes.to_string()
            };
            let _ = cg.write(swap, &no_swap);
        }
        Ok(cg)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|e| format!("writing {value} to {}: {e}", p.display()))
    }

    fn read(&self, file: &str) -> String {
        let p = self.dir.join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Makes `cmd`'s process join this cgroup before it runs the daemon, so all its memory is
    /// charged here.
    fn enter_on_start(&self, cmd: &mut std::process::Command) {
        crate::support::cgroup::enter_on_start(&self.dir, cmd);
    }

    fn pids(&self) -> Vec<i32> {
        self.read("cgroup.procs")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// OOM kills in this cgroup so far.
    fn oom_kills(&self) -> u64 {
        let text = self.read(if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        });
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no oom_kill count in {}:\n{text}", self.dir.display()))
    }

    /// The cgroup's peak memory use, when the kernel records it.
    fn peak_bytes(&self) -> Option<u64> {
        let f = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(self.dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("removing cgroup {}: {e}", self.dir.display());
        }
    }
}

/// Opens a connection that sends the start of a request with a `pad`-byte header line and
/// never finishes it.
fn unfinished_head(d: &Daemon, pad: usize) -> TcpStream {
    let mut s = TcpStream::connect(d.addr)
        .unwrap_or_else(|e| panic!("connect: {e} (is the daemon alive?)"));
    let head = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}",
        "a".repeat(pad)
    );
    s.write_all(head.as_bytes()).expect("partial headers");
    s
}

/// The attack on a daemon run as a unit with `MemoryMax=128M`: 300 connections each
/// holding an unfinished 15 KiB head (just under the 16 KiB cap, so each is held to the header
/// timeout) while 20 more send 4 MiB heads. The daemon is not OOM-killed, stays under 64 MiB of
/// RSS, and answers a scrape.
#[test]
fn in_a_128_mib_memory_cgroup_300_unfinished_big_heads_and_oversized_ones_kill_nothing() {
    let test = "the header attack inside a 128 MiB memory cgroup";
    if !support::require_root(test) {
        return;
    }
    let cg = match MemCgroup::create(128 << 20) {
        Ok(cg) => cg,
        Err(why) => {
            support::not_applicable(test, &why);
            return;
        }
    };
    let mut d = Daemon::start_with(
        binary::host(),
        &[
            "--web.read-header-timeout",
            "120s",
            "--web.idle-timeout",
            "120s",
        ],
        |cmd| cg.enter_on_start(cmd),
    );
    assert_eq!(
        cg.pids(),
        vec![d.pid()],
        "the daemon runs in {}",
        cg.dir.display()
    );
    assert_eq!(d.get_status("/metrics"), 200);
    let held: Vec<TcpStream> = (0..300).map(|_| unfinished_head(&d, 15 * 1024)).collect();
    let oversized: Vec<_> = (0..20)
        .map(|_| {
            let addr = d.addr;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                let head = format!(
                    "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                    "b".repeat(4 << 20)
                );
                let _ = s.write_all(head.as_bytes()); // fails once the server has closed
                let mut buf = Vec::new();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let _ = s.read_to_end(&mut buf);
                String::from_utf8_lossy(&buf).into_owned()
            })
        })
        .collect();
    for t in oversized {
        let answer = t.join().unwrap();
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "an oversized head got {answer:?}"
        );
    }
    // Every unfinished head is still held (none was refused or dropped).
    let fds = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .count();
    assert!(
        fds >= 300,
        "{fds} descriptors: the 300 connections are not all held"
    );
    assert_eq!(d.get_status("/metrics"), 200);
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon died:\n{}",
        d.log_text()
    );
    let rss = rss_kib(d.pid());
    assert_eq!(cg.oom_kills(), 0, "OOM kills in {}", cg.dir.display());
    eprintln!(
        "under 300 unfinished 15 KiB heads and 20 x 4 MiB heads: RSS {:.1} MiB, cgroup peak {}",
        rss as f64 / 1024.0,
        cg.peak_bytes().map_or("not recorded".into(), |b| format!(
            "{:.1} MiB",
            b as f64 / 1048576.0
        ))
    );
    assert!(rss < 64 * 1024, "RSS {rss} KiB under the attack");
    drop(held);
    drop(d); // killed and reaped: the cgroup is empty and can go
}

/// A config for `host()` with every collector sampling each second, so "a fresh sample" is soon.
fn fast_host() -> tempfile::TempDir {
    let dir = binary::host();
    let p = dir.path();
    std::fs::write(
        p.join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n  smart:\n    enabled: false\n  layers:\n    enabled: false\n  topology:\n    interval: 1s\n  diskstats:\n    interval: 1s\n  filesystem:\n    interval: 1s\n  probe:\n    interval: 1s\n  databases:\n    interval: 1s\nhistory:\n  flush_interval: 1s\n",
            p.join("state").display()
        ),
    )
    .unwrap();
    dir
}

/// Each collector's last-success time in an exposition.
fn last_successes(m: &str) -> Vec<(String, f64)> {
    m.lines()
        .filter_map(|l| {
            let rest =
                l.strip_prefix("ssdwatch_collector_last_success_timestamp_seconds{collector=\"")?;
            let (name, value) = rest.split_once("\"} ")?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn scrape(d: &Daemon) -> String {
    let mut s = TcpStream::connect(d.addr).expect("connect for a scrape");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "scrape: {text}");
    text
}

/// Started from a shell's limits (soft RLIMIT_NOFILE 1,024, hard 8,192, as a unit without
/// `LimitNOFILE` or a cron job gets), the daemon raises its soft limit to the hard one, so 1,100
/// idle connections (more than the old soft limit) leave it the descriptors its collectors need:
/// after a fresh sample every collector has succeeded, and a scrape answers.
#[test]
fn with_a_soft_limit_of_1024_descriptors_1100_idle_connections_starve_no_collector() {
    use std::os::unix::process::CommandExt;
    if !support::require_root("the descriptor attack from a soft limit of 1024") {
        return;
    }
    let d = Daemon::start_with(
        fast_host(),
        &[
            "--web.max-connections",
            "2000",
            "--web.read-header-timeout",
            "120s",
            "--web.idle-timeout",
            "120s",
        ],
        |cmd| {
            // SAFETY: setrlimit is async-signal-safe and touches nothing of the parent.
            unsafe {
                cmd.pre_exec(|| {
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_NOFILE,
                        1024,
                        8192,
                    )
                    .map_err(std::io::Error::from)
                });
            }
        },
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files in /proc/PID/limits")
        .split_whitespace()
        .collect();
    assert_eq!(
        open_files[3..5],
        ["8192", "8192"],
        "the soft limit raised to the hard one: {limits}"
    );
    assert!(
        d.log_text()
            .contains("raised the open-files limit from 1024 to 8192")
    );

    let idle: Vec<TcpStream> = (0..1100)
        .map(|i| TcpStream::connect(d.addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // All of them held by the daemon, past the soft limit it started with.
    let deadline = Instant::now() + Duration::from_secs(30);
    let fds = loop {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
            .unwrap()
            .count();
        if fds > 1100 || Instant::now() > deadline {
            break fds;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        fds > 1100,
        "{fds} descriptors open: the connections are not all accepted"
    );
    // A fresh sample of every collector, each a success.
    let before = last_successes(&scrape(&d));
    assert!(before.len() >= 3, "{before:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let m = loop {
        let m = scrape(&d);
        let now = last_successes(&m);
        let fresh = before
            .iter()
            .all(|(name, t)| now.iter().any(|(n, t2)| n == name && t2 > t));
        if fresh {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "no fresh sample of every collector:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for (name, _) in &before {
        assert!(
            m.contains(&format!(
                "ssdwatch_collector_success{{collector=\"{name}\"}} 1"
            )),
            "{name} failed with {fds} descriptors open:\n{m}\n{}",
            d.log_text()
        );
    }
    eprintln!(
        "{fds} descriptors open in the daemon; collectors {:?} all sampled",
        before.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    assert!(
        !d.log_text().contains("Too many open files"),
        "{}",
        d.log_text()
    );
    drop(idle);
}
