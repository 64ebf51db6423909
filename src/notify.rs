//! systemd's notify protocol: READY, RELOADING, STOPPING and STATUS, and a watchdog petted only
//! while every enabled collector keeps finishing samples. It reads the snapshot store's counts
//! and nothing else: it never touches a collector or a device. Without $NOTIFY_SOCKET it does nothing.

use crate::snapshot::Snapshots;
use sd_notify::NotifyState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A collector counts as stalled once this many of its intervals have passed without it
/// finishing a sample, or one WatchdogSec if that is longer. A cycle is a sample plus the
/// interval after it. The slow parts of a sample have bounds of their own: the statvfs
/// timeout, smartctl's timeout and the probe timeout. Three intervals leave room for
/// them, and for a SMART pass over many drives at the default 15 minutes.
pub(crate) const STALL_INTERVALS: u32 = 3;

/// How often the status line is refreshed when systemd runs no watchdog.
const STATUS_PERIOD: Duration = Duration::from_secs(10);

/// A collector that has not finished a sample for longer than its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stall {
    pub collector: &'static str,
    /// Since its last finished sample, or since the daemon started if it has finished none.
    pub stuck_for: Duration,
    pub limit: Duration,
}

/// How long a collector with this interval may go without finishing a sample.
pub(crate) fn stall_limit(interval: Duration, watchdog: Option<Duration>) -> Duration {
    interval
        .saturating_mul(STALL_INTERVALS)
        .max(watchdog.unwrap_or_default())
}

/// When each enabled collector last finished a sample, as the store's counts show it.
#[derive(Debug)]
pub(crate) struct Progress {
    tracks: BTreeMap<&'static str, Track>,
}

#[derive(Debug)]
struct Track {
    limit: Duration,
    cycles: u64,
    since: Instant,
}

impl Progress {
    /// Every collector in `intervals` (name, configured interval), none of them sampled yet.
    pub(crate) fn new(
        intervals: &[(&'static str, Duration)],
        watchdog: Option<Duration>,
        now: Instant,
    ) -> Self {
        let tracks = intervals
            .iter()
            .map(|&(name, iv)| {
                let t = Track {
                    limit: stall_limit(iv, watchdog),
                    cycles: 0,
                    since: now,
                };
                (name, t)
            })
            .collect();
        Progress { tracks }
    }

    /// Takes each collector's count of finished samples at `now` and returns the stalled ones
    /// (none: the watchdog may be petted). A collector missing from `counts` has finished none.
    pub(crate) fn observe(&mut self, now: Instant, counts: &[(&'static str, u64)]) -> Vec<Stall> {
        let mut stalls = Vec::new();
        for (name, t) in &mut self.tracks {
            let cycles = counts
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |&(_, c)| c);
            if cycles != t.cycles {
                t.cycles = cycles;
                t.since = now;
            }
            let stuck_for = now.saturating_duration_since(t.since);
            if stuck_for > t.limit {
                stalls.push(Stall {
                    collector: name,
                    stuck_for,
                    limit: t.limit,
                });
            }
        }
        stalls
    }
}

/// Which stalls are new since the last look and which collectors came back: a stall is logged
/// when it starts and when it ends, never on every tick.
pub(crate) fn changes<'a>(
    logged: &BTreeSet<&'static str>,
    stalls: &'a [Stall],
) -> (Vec<&'a Stall>, Vec<&'static str>) {
    let started = stalls
        .iter()
        .filter(|s| !logged.contains(s.collector))
        .collect();
    let cleared = logged
        .iter()
        .filter(|n| !stalls.iter().any(|s| s.collector == **n))
        .copied()
        .collect();
    (started, cleared)
}

/// The line `systemctl status` shows: where the daemon serves and how its collectors are doing.
/// `progress` is the store's (name, finished samples, last sample succeeded).
pub(crate) fn status_line(
    serving: &str,
    progress: &[(&'static str, u64, Option<bool>)],
    stalls: &[Stall],
) -> String {
    let mut line = format!("serving {serving}; ");
    if !stalls.is_empty() {
        let stuck: Vec<String> = stalls
            .iter()
            .map(|s| format!("{} for {}", s.collector, whole_seconds(s.stuck_for)))
            .collect();
        line.push_str(&format!(
            "STALLED (no sample finished): {}; watchdog not petted",
            stuck.join(", ")
        ));
        return line;
    }
    let waiting: Vec<&str> = (progress.iter())
        .filter(|(_, _, ok)| ok.is_none())
        .map(|(n, _, _)| *n)
        .collect();
    let failing: Vec<&str> = (progress.iter())
        .filter(|(_, _, ok)| *ok == Some(false))
        .map(|(n, _, _)| *n)
        .collect();
    line.push_str(&format!("{} collectors sampling", progress.len()));
    if !waiting.is_empty() {
        line.push_str(&format!("; first sample pending: {}", waiting.join(", ")));
    }
    if !failing.is_empty() {
        line.push_str(&format!("; last sample failed: {}", failing.join(", ")));
    }
    line
}

fn whole_seconds(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

/// Whether a service manager listens for notifications.
pub(crate) fn enabled() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some_and(|s| !s.is_empty())
}

/// Set while sending fails, so a broken socket is logged once, not at every pet.
static SEND_FAILING: AtomicBool = AtomicBool::new(false);

/// Sends one notification, never waiting: a manager whose queue is full (it reads late, or not
/// at all) loses this datagram instead of stalling a runtime thread. sd-notify's own `notify`
/// sends on a blocking socket, so only its states and environment parsing are used here.
fn send(states: &[NotifyState]) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty()) else {
        return;
    };
    let msg: String = states.iter().map(|s| format!("{s}\n")).collect();
    match send_nonblocking(&path, msg.as_bytes()) {
        Ok(()) => {
            if SEND_FAILING.swap(false, Ordering::Relaxed) {
                tracing::info!("notifying systemd works again");
            }
        }
        Err(e) => {
            if SEND_FAILING.swap(true, Ordering::Relaxed) {
                tracing::debug!("notifying systemd still fails: {e}");
            } else {
                tracing::warn!(
                    "notifying systemd through NOTIFY_SOCKET={}: {e} (logged again when it works)",
                    path.to_string_lossy()
                );
            }
        }
    }
}

fn send_nonblocking(path: &std::ffi::OsStr, msg: &[u8]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = std::os::unix::net::UnixDatagram::unbound()?;
    sock.set_nonblocking(true)?;
    // `@name` is a socket in the abstract namespace (sd_notify(3)).
    match path.as_bytes().strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.connect_addr(&addr)?;
        }
        None => sock.connect(path)?,
    }
    let n = sock.send(msg)?;
    if n != msg.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("sent {n} of {} bytes", msg.len()),
        ));
    }
    Ok(())
}

/// The status line in two parts: what the watchdog task sees, and the outcome of the last
/// SIGHUP, which stays on the line until the next one.
#[derive(Default)]
struct Status {
    base: String,
    reload: Option<String>,
    sent: String,
}

static STATUS: Mutex<Option<Status>> = Mutex::new(None);

/// Updates one part of the status line and returns the whole line when it changed.
fn update_status(f: impl FnOnce(&mut Status)) -> Option<String> {
    let mut g = STATUS.lock().unwrap_or_else(|e| e.into_inner());
    let st = g.get_or_insert_with(Status::default);
    f(st);
    let line = match &st.reload {
        Some(r) => format!("{}; last SIGHUP: {r}", st.base),
        None => st.base.clone(),
    };
    (line != st.sent).then(|| {
        st.sent = line.clone();
        line
    })
}

/// SIGHUP received: the unit shows "reloading" until [`reloaded`].
pub(crate) fn reloading() {
    if !enabled() {
        return;
    }
    let mut states = vec![
        NotifyState::Reloading,
        NotifyState::Status("reloading the config (SIGHUP)"),
    ];
    // Type=notify-reload (systemd 253) needs the reload's start time; older ones ignore it.
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    send(&states);
    // The next status line is sent in full.
    update_status(|s| s.sent.clear());
}

/// The reload is over (applied or refused, as `outcome` says): ready again.
pub(crate) fn reloaded(outcome: &str) {
    if !enabled() {
        return;
    }
    let line = update_status(|s| s.reload = Some(outcome.to_string()));
    match line {
        Some(l) => send(&[NotifyState::Ready, NotifyState::Status(&l)]),
        None => send(&[NotifyState::Ready]),
    }
}

/// Shutdown has begun (a signal came); sent before the web layer drains its connections.
pub(crate) fn stopping() {
    if !enabled() {
        return;
    }
    send(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping: draining connections, flushing the history"),
    ]);
}

/// Tells systemd the daemon is ready: the config is loaded and checked, the listener bound (a
/// scrape connecting now is answered) and the collectors started. It does not wait for their
/// first samples; /-/ready says when those are in. Then a task keeps the status line current
/// and pets the watchdog while no collector is stalled, until `stop` turns true. Without
/// $NOTIFY_SOCKET: nothing.
pub(crate) fn start(
    store: Arc<Snapshots>,
    serving: String,
    intervals: Vec<(&'static str, Duration)>,
    mut stop: watch::Receiver<bool>,
) {
    if !enabled() {
        return;
    }
    let watchdog = sd_notify::watchdog_enabled().filter(|w| !w.is_zero());
    let line = status_line(&serving, &store.progress(), &[]);
    let full = update_status(|s| s.base = line.clone()).unwrap_or(line);
    send(&[NotifyState::Ready, NotifyState::Status(&full)]);
    match watchdog {
        Some(w) => tracing::info!(
            "systemd watchdog every {}: petted while every collector finishes a sample within {STALL_INTERVALS} of its intervals",
            humantime::format_duration(w)
        ),
        None => tracing::debug!("systemd notify without a watchdog"),
    }
    // sd_watchdog_enabled(3): notify every half of the watchdog time.
    let period = watchdog.map_or(STATUS_PERIOD, |w| (w / 2).max(Duration::from_millis(10)));
    let mut progress = Progress::new(&intervals, watchdog, Instant::now());
    let intervals: BTreeMap<_, _> = intervals.into_iter().collect();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut logged = BTreeSet::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
            let seen = store.progress();
            let counts: Vec<_> = seen.iter().map(|&(n, c, _)| (n, c)).collect();
            let stalls = progress.observe(Instant::now(), &counts);
            let (started, cleared) = changes(&logged, &stalls);
            for s in started {
                let interval = intervals.get(s.collector).copied().unwrap_or_default();
                let consequence = if watchdog.is_some() {
                    "the systemd watchdog is no longer petted, so systemd restarts the daemon"
                } else {
                    "no systemd watchdog is set, so the daemon keeps running"
                };
                tracing::error!(
                    collector = s.collector,
                    "collector {} stuck: no sample finished for {} (limit {}: {STALL_INTERVALS} of its {} intervals, at least WatchdogSec); {consequence}",
                    s.collector,
                    whole_seconds(s.stuck_for),
                    humantime::format_duration(s.limit),
                    humantime::format_duration(interval),
                );
                logged.insert(s.collector);
            }
            for c in cleared {
                tracing::info!(
                    collector = c,
                    "collector {c} finishes samples again; petting the watchdog"
                );
                logged.remove(c);
            }
            if watchdog.is_some() && stalls.is_empty() {
                send(&[NotifyState::Watchdog]);
            }
            let line = status_line(&serving, &seen, &stalls);
            if let Some(l) = update_status(|s| s.base = line) {
                send(&[NotifyState::Status(&l)]);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_stall_limit_is_three_intervals_and_never_under_the_watchdog_time() {
        assert_eq!(stall_limit(15 * S, Some(60 * S)), 60 * S);
        assert_eq!(stall_limit(60 * S, Some(60 * S)), 180 * S);
        assert_eq!(stall_limit(900 * S, Some(60 * S)), 2700 * S);
        assert_eq!(stall_limit(15 * S, None), 45 * S);
        // A huge configured interval saturates instead of overflowing.
        assert_eq!(stall_limit(Duration::MAX, Some(S)), Duration::MAX);
    }

    #[test]
    fn a_collector_that_keeps_finishing_samples_is_never_stalled_even_when_they_fail() {
        let t0 = Instant::now();
        let mut p = Progress::new(&[("filesystem", 15 * S)], Some(20 * S), t0);
        // One finished sample every 40 s: slower than the interval, within three of them.
        for i in 1..=10u64 {
            let now = t0 + 40 * S * i as u32;
            assert_eq!(p.observe(now, &[("filesystem", i)]), [], "at sample {i}");
        }
    }

    #[test]
    fn a_collector_whose_sample_never_ends_is_stalled_after_its_limit_and_named() {
        let t0 = Instant::now();
        let mut p = Progress::new(
            &[("topology", 60 * S), ("filesystem", 15 * S)],
            Some(30 * S),
            t0,
        );
        let counts = |fs: u64, topo: u64| [("topology", topo), ("filesystem", fs)];
        assert_eq!(p.observe(t0 + 10 * S, &counts(1, 1)), []);
        // filesystem's sample that began at 10 s never ends; topology goes on.
        assert_eq!(p.observe(t0 + 30 * S, &counts(1, 2)), []);
        // 45 s since its last finished sample is its limit, not yet a stall.
        assert_eq!(p.observe(t0 + 55 * S, &counts(1, 3)), []);
        let stalls = p.observe(t0 + 56 * S, &counts(1, 3));
        assert_eq!(
            stalls,
            [Stall {
                collector: "filesystem",
                stuck_for: 46 * S,
                limit: 45 * S
            }]
        );
        // It finishes one after all: no longer stalled.
        assert_eq!(p.observe(t0 + 120 * S, &counts(2, 3)), []);
    }

    #[test]
    fn a_collector_that_never_finished_its_first_sample_is_counted_from_the_start() {
        let t0 = Instant::now();
        let mut p = Progress::new(&[("smart", 60 * S)], Some(30 * S), t0);
        assert_eq!(p.observe(t0 + 180 * S, &[]), []);
        let s = p.observe(t0 + 181 * S, &[]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].stuck_for, 181 * S);
        // Counts of collectors it does not watch (disabled ones) change nothing.
        assert_eq!(p.observe(t0 + 182 * S, &[("probe", 9)]).len(), 1);
    }

    #[test]
    fn a_stall_is_logged_when_it_starts_and_when_it_ends_not_every_tick() {
        let st = |c| Stall {
            collector: c,
            stuck_for: S,
            limit: S,
        };
        let mut logged = BTreeSet::new();
        let now = [st("filesystem")];
        let (started, cleared) = changes(&logged, &now);
        assert_eq!(started, [&now[0]]);
        assert!(cleared.is_empty());
        logged.insert("filesystem");
        let (started, cleared) = changes(&logged, &now);
        assert!(started.is_empty() && cleared.is_empty());
        let smart = [st("smart")];
        let (started, cleared) = changes(&logged, &smart);
        assert_eq!(started.len(), 1);
        assert_eq!(cleared, ["filesystem"]);
    }

    #[test]
    fn a_manager_that_does_not_read_loses_datagrams_instead_of_blocking_the_sender() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let manager = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // The queue holds net.unix.max_dgram_qlen datagrams (10 by default); then EAGAIN.
        let results: Vec<_> = (0..1000)
            .map(|_| send_nonblocking(path.as_os_str(), b"WATCHDOG=1\n"))
            .collect();
        let full = results
            .iter()
            .find_map(|r| r.as_ref().err())
            .expect("a full queue");
        assert_eq!(full.kind(), std::io::ErrorKind::WouldBlock, "{full}");
        let mut buf = [0u8; 64];
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1\n");
        // In the abstract namespace too (a name no one else uses).
        let name = format!("ssdwatch-notify-test-{}", std::process::id());
        let addr = <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes()).unwrap();
        let abs = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
        send_nonblocking(std::ffi::OsStr::new(&format!("@{name}")), b"READY=1\n").unwrap();
        let n = abs.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }

    #[test]
    fn the_status_line_says_where_it_serves_and_names_waiting_failing_and_stalled_collectors() {
        let serving = "http on 0.0.0.0:10150";
        let all_ok = [("diskstats", 3, Some(true)), ("filesystem", 3, Some(true))];
        assert_eq!(
            status_line(serving, &all_ok, &[]),
            "serving http on 0.0.0.0:10150; 2 collectors sampling"
        );
        let mixed = [
            ("diskstats", 3, Some(true)),
            ("smart", 1, Some(false)),
            ("probe", 0, None),
        ];
        assert_eq!(
            status_line(serving, &mixed, &[]),
            "serving http on 0.0.0.0:10150; 3 collectors sampling; first sample pending: probe; last sample failed: smart"
        );
        let stall = Stall {
            collector: "filesystem",
            stuck_for: Duration::from_millis(125_400),
            limit: 60 * S,
        };
        let line = status_line(serving, &all_ok, &[stall]);
        assert_eq!(
            line,
            "serving http on 0.0.0.0:10150; STALLED (no sample finished): filesystem for 2m 5s; watchdog not petted"
        );
        assert!(!line.contains('\n'));
    }
}
