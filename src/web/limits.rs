//! What the web layer may spend: connections, header bytes, time, concurrent scrapes, file
//! descriptors. The numbers and the decisions on them; the accept loop only carries them out.

use crate::validate::{Invalid, check_duration};
pub(crate) use crate::web::client::client_key;
use std::collections::HashMap;
use std::net::IpAddr;
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

pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 1024;
pub(crate) const DEFAULT_MAX_REQUESTS: usize = 40;
pub(crate) const DEFAULT_READ_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_MAX_HEADER_BYTES: usize = 16 * 1024;
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// hyper refuses a read buffer under 8 KiB; a megabyte of headers is no scrape.
const MIN_HEADER_BYTES: usize = 8 * 1024;
const MAX_HEADER_BYTES: usize = 1024 * 1024;
/// The soft open-files limit is raised to the hard one, but no further than this: smartctl
/// and other children inherit it, and some tools walk every possible descriptor.
pub(crate) const NOFILE_RAISE_CEILING: u64 = 65536;
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
            crate::time::HOUR_DURATION,
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
pub(crate) fn connection_cap(requested: usize, nofile: u64) -> (usize, bool) {
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
pub(crate) fn nofile_target(soft: u64, hard: u64) -> u64 {
    soft.max(hard.min(NOFILE_RAISE_CEILING))
}

/// Raises the soft RLIMIT_NOFILE (see `nofile_target`); returns (before, after).
pub(crate) fn raise_nofile() -> std::io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(std::io::Error::from)?;
    let target = nofile_target(soft, hard);
    if target != soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard).map_err(std::io::Error::from)?;
    }
    Ok((soft, target))
}

/// Whose bucket a request takes a token from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Credentials verified before (their keyed hash): a client sharing Prometheus' address
    /// can't empty Prometheus' bucket.
    Credential(crate::web::auth::Key),
    /// Anything else, by [`client_key`].
    Client(IpAddr),
}

/// Buckets kept at most; a client whose bucket was dropped starts with a full one, so dropping
/// one can let a client through, never shut one out.
const MAX_BUCKETS: usize = 4096;

/// exporter-toolkit's `rate_limit`: a token bucket of `burst` tokens refilled one per
/// `interval`, one bucket per client (one for all let a flood from anywhere answer 429 to
/// Prometheus); an empty bucket answers 429.
#[derive(Debug)]
pub struct RateLimiter {
    interval: Duration,
    burst: u32,
    buckets: Mutex<HashMap<Bucket, (f64, Instant)>>,
}

impl RateLimiter {
    pub fn new(interval: Duration, burst: u32) -> RateLimiter {
        RateLimiter {
            interval,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    pub fn allow(&self, bucket: Bucket) -> bool {
        self.allow_at(bucket, Instant::now())
    }

    fn allow_at(&self, bucket: Bucket, now: Instant) -> bool {
        let burst = f64::from(self.burst);
        let refilled = |(tokens, at): (f64, Instant)| {
            let refill =
                now.saturating_duration_since(at).as_secs_f64() / self.interval.as_secs_f64();
            (tokens + refill).min(burst)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(&bucket) && buckets.len() >= MAX_BUCKETS {
            // A full bucket is the same as none: drop those first, then the one unused longest.
            buckets.retain(|_, b| refilled(*b) < burst);
            if buckets.len() >= MAX_BUCKETS
                && let Some(oldest) = buckets.iter().min_by_key(|(_, b)| b.1).map(|(k, _)| *k)
            {
                buckets.remove(&oldest);
            }
        }
        let b = buckets.entry(bucket).or_insert((burst, now));
        *b = (refilled(*b), now);
        if b.0 >= 1.0 {
            b.0 -= 1.0;
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

    fn v4(a: u8, b: u8, c: u8, d: u8) -> Bucket {
        Bucket::Client(IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d)))
    }

    #[test]
    fn rate_limiter_allows_a_burst_then_one_per_interval() {
        let r = RateLimiter::new(Duration::from_secs(1), 2);
        let t0 = Instant::now();
        let c = v4(192, 0, 2, 1);
        assert!(r.allow_at(c, t0));
        assert!(r.allow_at(c, t0));
        assert!(!r.allow_at(c, t0));
        assert!(!r.allow_at(c, t0 + Duration::from_millis(500)));
        assert!(r.allow_at(c, t0 + Duration::from_millis(1000)));
        assert!(!r.allow_at(c, t0 + Duration::from_millis(1100)));
    }

    #[test]
    fn one_client_emptying_its_bucket_leaves_the_others_theirs() {
        let r = RateLimiter::new(Duration::from_secs(10), 3);
        let t0 = Instant::now();
        let flood = v4(192, 0, 2, 66);
        let allowed = (0..1000).filter(|_| r.allow_at(flood, t0)).count();
        assert_eq!(allowed, 3);
        assert!(r.allow_at(v4(192, 0, 2, 1), t0));
        // Prometheus' verified credentials have their own bucket, even at the flood's address.
        assert!(r.allow_at(Bucket::Credential([7; 32]), t0));
    }

    #[test]
    fn rate_limiter_keeps_a_bounded_number_of_buckets_and_never_shuts_a_client_out_for_it() {
        let r = RateLimiter::new(Duration::from_secs(1), 1);
        let t0 = Instant::now();
        let prometheus = v4(192, 0, 2, 1);
        assert!(r.allow_at(prometheus, t0));
        for n in 0..(2 * MAX_BUCKETS as u32) {
            let c = Bucket::Client(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n)));
            let at = t0 + Duration::from_micros(u64::from(n) + 1);
            assert!(r.allow_at(c, at), "a new client gets its burst");
        }
        assert!(r.buckets.lock().unwrap().len() <= MAX_BUCKETS);
        // Its bucket, the one unused longest, was dropped: it starts full rather than empty
        // (8 ms later, when its own bucket would hold less than a hundredth of a token).
        assert!(r.allow_at(prometheus, t0 + Duration::from_millis(9)));
    }

    #[test]
    fn clients_are_ipv4_addresses_and_ipv6_64s() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let table = [
            ("192.0.2.7", "192.0.2.7"),
            ("::ffff:192.0.2.7", "192.0.2.7"),
            ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"),
            ("2001:db8:1:2:ffff::1", "2001:db8:1:2::"),
            ("2001:db8:1:3::1", "2001:db8:1:3::"),
            ("::1", "::"),
        ];
        for (addr, want) in table {
            assert_eq!(client_key(ip(addr)), ip(want), "{addr}");
        }
    }
}
