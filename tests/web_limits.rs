//! Nothing outside can starve or kill the daemon: slow and silent clients are cut off at the
//! header timeout while scrapes go on, a connection flood waits its turn, huge headers are
//! refused without memory growth, SIGTERM exits within its deadline, SIGHUP never kills.

mod web_common;

use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use web_common::{Daemon, http_status};

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
    let out = std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/http_attack.sh"
        ))
        .arg("--short")
        .env("SSDWATCH_BIN", env!("CARGO_BIN_EXE_ssdwatch"))
        .output()
        .expect("run benches/http_attack.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in ["scrape p99", "RSS", "fds", "exit after SIGTERM"] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}
