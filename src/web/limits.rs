//! What the web layer may spend: connections, header bytes, time, concurrent scrapes, file
//! descriptors. The numbers and the decisions on them; the accept loop only carries them out.

use crate::validate::{Invalid, check_duration};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Open connections at once; more wait in the kernel's accept queue (no fd of ours).
    pub max_connections: usize,
    /// Concurrent /metrics requests; more get 503 (node_exporter's --web.max-requests). 0: no cap.
    pub max_requests: usize,
    /// From a connection's start, or the end of its previous response, to the end of the
    /// request headers (hyper's header_read_timeout: it covers an idle keep-alive connection
    /// too) and to the end of a TLS handshake.
    pub read_header_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed (a client that
    /// stops reading its response, a stalled body).
    pub idle_timeout: Duration,
    /// Cap on the bytes of a request head (hyper's read buffer); over it: 431 and close.
    pub max_header_bytes: usize,
    /// After SIGTERM, open connections get this long to finish, then are dropped.
    pub shutdown_timeout: Duration,
}

pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
pub const DEFAULT_MAX_REQUESTS: usize = 40;
pub const DEFAULT_READ_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_HEADER_BYTES: usize = 16 * 1024;
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// hyper refuses a read buffer under 8 KiB; a megabyte of headers is no scrape.
const MIN_HEADER_BYTES: usize = 8 * 1024;
const MAX_HEADER_BYTES: usize = 1024 * 1024;
/// The soft open-files limit is raised to the hard one, but no further than this: smartctl
/// and other children inherit it, and some tools walk every possible descriptor.
pub const NOFILE_RAISE_CEILING: u64 = 65536;
/// Descriptors always kept for the collectors (sysfs/procfs reads, smartctl pipes, probe
/// files), the listener and the runtime.
const RESERVED_FDS: u64 = 256;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_requests: DEFAULT_MAX_REQUESTS,
            read_header_timeout: DEFAULT_READ_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

impl Limits {
    /// Every value in its range; the key is the flag.
    pub fn validate(&self) -> Result<(), Invalid> {
        let ms = Duration::from_millis;
        check_duration(
            "--web.read-header-timeout",
            self.read_header_timeout,
            ms(100),
            Duration::from_secs(600),
        )?;
        check_duration(
            "--web.idle-timeout",
            self.idle_timeout,
            ms(100),
            Duration::from_secs(3600),
        )?;
        check_duration(
            "--web.shutdown-timeout",
            self.shutdown_timeout,
            ms(0),
            Duration::from_secs(60),
        )?;
        if !(1..=1_000_000).contains(&self.max_connections) {
            return Err(Invalid::new("--web.max-connections", "must be 1..1000000"));
        }
        if self.max_requests > 1_000_000 {
            return Err(Invalid::new(
                "--web.max-requests",
                "must be 0 (no cap)..1000000",
            ));
        }
        if !(MIN_HEADER_BYTES..=MAX_HEADER_BYTES).contains(&self.max_header_bytes) {
            return Err(Invalid::new(
                "--web.max-header-bytes",
                format!("must be {MIN_HEADER_BYTES}..{MAX_HEADER_BYTES}"),
            ));
        }
        Ok(())
    }
}

/// The connection cap that leaves descriptors for everything else: at most what was asked,
/// and no more than the open-files limit less a reserve (256, or a quarter of a large limit).
/// Returns the cap and whether it had to be lowered.
pub fn connection_cap(requested: usize, nofile: u64) -> (usize, bool) {
    let reserve = RESERVED_FDS.max(nofile / 4);
    let room = usize::try_from(nofile.saturating_sub(reserve))
        .unwrap_or(usize::MAX)
        .max(16);
    if requested > room {
        (room, true)
    } else {
        (requested, false)
    }
}

/// The soft open-files limit to set: the hard limit, up to the ceiling; never lower than now.
pub fn nofile_target(soft: u64, hard: u64) -> u64 {
    soft.max(hard.min(NOFILE_RAISE_CEILING))
}

/// Raises the soft RLIMIT_NOFILE (see `nofile_target`); returns (before, after).
pub fn raise_nofile() -> std::io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(std::io::Error::from)?;
    let target = nofile_target(soft, hard);
    if target != soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard).map_err(std::io::Error::from)?;
    }
    Ok((soft, target))
}

/// exporter-toolkit's `rate_limit`: a token bucket of `burst` tokens refilled one per
/// `interval`, shared by every request; an empty bucket answers 429.
#[derive(Debug)]
pub struct RateLimiter {
    interval: Duration,
    burst: u32,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(interval: Duration, burst: u32) -> RateLimiter {
        RateLimiter {
            interval,
            burst,
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let refill = now.saturating_duration_since(s.1).as_secs_f64() / self.interval.as_secs_f64();
        s.0 = (s.0 + refill).min(f64::from(self.burst));
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_cap_leaves_descriptors_for_the_collectors() {
        // (requested, nofile) → (cap, lowered)
        let table = [
            (1024, 8192, (1024, false)),
            (1024, 1024, (768, true)),
            (100, 1024, (100, false)),
            (100_000, 65536, (49152, true)),
            (1024, 64, (16, true)),
        ];
        for (requested, nofile, want) in table {
            assert_eq!(
                connection_cap(requested, nofile),
                want,
                "{requested} {nofile}"
            );
        }
    }

    #[test]
    fn soft_limit_goes_to_the_hard_limit_up_to_a_ceiling_and_never_down() {
        assert_eq!(nofile_target(1024, 4096), 4096);
        assert_eq!(nofile_target(1024, 1 << 20), NOFILE_RAISE_CEILING);
        assert_eq!(nofile_target(100_000, 1 << 20), 100_000);
        assert_eq!(nofile_target(1024, 1024), 1024);
    }

    #[test]
    fn defaults_are_in_range_and_out_of_range_values_name_their_flag() {
        assert!(Limits::default().validate().is_ok());
        let bad = Limits {
            max_header_bytes: 1024,
            ..Limits::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "--web.max-header-bytes");
        let bad = Limits {
            read_header_timeout: Duration::ZERO,
            ..Limits::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "--web.read-header-timeout");
    }

    #[test]
    fn rate_limiter_allows_a_burst_then_one_per_interval() {
        let r = RateLimiter::new(Duration::from_secs(1), 2);
        let t0 = Instant::now();
        assert!(r.allow_at(t0));
        assert!(r.allow_at(t0));
        assert!(!r.allow_at(t0));
        assert!(!r.allow_at(t0 + Duration::from_millis(500)));
        assert!(r.allow_at(t0 + Duration::from_millis(1000)));
        assert!(!r.allow_at(t0 + Duration::from_millis(1100)));
    }
}
