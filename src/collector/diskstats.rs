//! Disk I/O and discard collector: /sys/block/*/stat as counters in base units, plus what only
//! history tells: when each drive was last trimmed and how long it has been idle.
//! Partitions are left out (their disk carries the same I/O); dm, md and loop devices are in.

use crate::collector::{Collector, Context, ItemError, Sample};
use crate::metrics::MetricSet;
use crate::snapshot::{DiskActivity, unix_now};
use crate::sysfs::blockstat::{BlockStat, DeviceStat, STAT_SECTOR_BYTES, read_one};
use crate::validate::{Invalid, check_interval};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiskstatsConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for DiskstatsConfig {
    fn default() -> Self {
        DiskstatsConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
        }
    }
}

impl DiskstatsConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

/// What the collector remembers of a device between samples.
#[derive(Debug, Clone, PartialEq)]
struct History {
    stat: BlockStat,
    at: f64,
    last_discard: Option<f64>,
    idle_since: Option<f64>,
}

pub struct DiskstatsCollector {
    interval: Duration,
    history: HashMap<String, History>,
}

impl DiskstatsCollector {
    pub fn new(cfg: &DiskstatsConfig) -> anyhow::Result<Self> {
        Ok(DiskstatsCollector {
            interval: cfg.interval,
            history: HashMap::new(),
        })
    }
}

/// Parsed stats of every device, and per-device errors (the item is the device's kernel name).
pub type StatsRead = (Vec<DeviceStat>, Vec<ItemError>);

/// Reads the stat file of every device in `<sys>/block`, skipping unbound loop and
/// uninitialised zram devices (size 0).
pub fn read_all(sys: &Path) -> anyhow::Result<StatsRead> {
    let block = sys.join("block");
    let names = crate::sysfs::dir_names(&block)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", block.display()))?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        if (name.starts_with("loop") || name.starts_with("zram"))
            && crate::sysfs::read_u64(&block.join(&name).join("size")) == Some(0)
        {
            continue; // an unbound loop or uninitialised zram device
        }
        match read_one(sys, &name) {
            Ok(d) => out.push(d),
            Err(e) => errors.push(ItemError::new(name, e.to_string())),
        }
    }
    Ok((out, errors))
}

/// Advances one device's history with a new stat read at `now`; returns the new history and the
/// utilization over the interval (None on the first sample or after a counter reset).
fn advance(prev: Option<&History>, stat: BlockStat, now: f64) -> (History, Option<f64>) {
    let Some(p) = prev else {
        return (
            History {
                stat,
                at: now,
                last_discard: None,
                idle_since: None,
            },
            None,
        );
    };
    // A counter going backwards means the device was re-created: start over.
    if stat.io_time_ms < p.stat.io_time_ms || stat.reads_completed < p.stat.reads_completed {
        return advance(None, stat, now);
    }
    let discarded = |s: &BlockStat| s.discard.map(|d| d.sectors);
    let last_discard = match (discarded(&p.stat), discarded(&stat)) {
        (Some(a), Some(b)) if b > a => Some(now),
        _ => p.last_discard,
    };
    let idle_since = if stat.io_time_ms == p.stat.io_time_ms {
        Some(p.idle_since.unwrap_or(p.at))
    } else {
        None
    };
    let wall = now - p.at;
    let util = (wall > 0.0)
        .then(|| ((stat.io_time_ms - p.stat.io_time_ms) as f64 / 1000.0 / wall).clamp(0.0, 1.0));
    (
        History {
            stat,
            at: now,
            last_discard,
            idle_since,
        },
        util,
    )
}

/// Renders one device's counters (pure: used by tests and benchmarks too).
pub fn stat_metrics(m: &mut MetricSet, device: &str, s: &BlockStat) {
    let l = [("device", device)];
    let ms = |v: u64| v as f64 / 1000.0;
    let bytes = |sectors: u64| (sectors * STAT_SECTOR_BYTES) as f64;
    m.counter("ssdwatch_disk_reads_completed_total", "Reads completed.")
        .push(&l, s.reads_completed as f64);
    m.counter("ssdwatch_disk_reads_merged_total", "Adjacent reads merged.")
        .push(&l, s.reads_merged as f64);
    m.counter("ssdwatch_disk_read_bytes_total", "Bytes read.")
        .push(&l, bytes(s.read_sectors));
    m.counter(
        "ssdwatch_disk_read_time_seconds_total",
        "Time spent by all reads.",
    )
    .push(&l, ms(s.read_time_ms));
    m.counter("ssdwatch_disk_writes_completed_total", "Writes completed.")
        .push(&l, s.writes_completed as f64);
    m.counter(
        "ssdwatch_disk_writes_merged_total",
        "Adjacent writes merged.",
    )
    .push(&l, s.writes_merged as f64);
    m.counter("ssdwatch_disk_written_bytes_total", "Bytes written.")
        .push(&l, bytes(s.write_sectors));
    m.counter(
        "ssdwatch_disk_write_time_seconds_total",
        "Time spent by all writes.",
    )
    .push(&l, ms(s.write_time_ms));
    m.gauge("ssdwatch_disk_io_now", "I/Os currently in flight.")
        .push(&l, s.in_flight as f64);
    m.counter(
        "ssdwatch_disk_io_time_seconds_total",
        "Time the device had I/O in flight (busy time).",
    )
    .push(&l, ms(s.io_time_ms));
    m.counter(
        "ssdwatch_disk_io_time_weighted_seconds_total",
        "Busy time weighted by the number of I/Os in flight.",
    )
    .push(&l, ms(s.weighted_io_time_ms));
    if let Some(d) = s.discard {
        m.counter(
            "ssdwatch_disk_discards_completed_total",
            "Discards (TRIM/UNMAP/deallocate) completed.",
        )
        .push(&l, d.completed as f64);
        m.counter(
            "ssdwatch_disk_discards_merged_total",
            "Adjacent discards merged.",
        )
        .push(&l, d.merged as f64);
        m.counter("ssdwatch_disk_discarded_bytes_total", "Bytes discarded.")
            .push(&l, bytes(d.sectors));
        m.counter(
            "ssdwatch_disk_discard_time_seconds_total",
            "Time spent by all discards.",
        )
        .push(&l, ms(d.time_ms));
    }
    if let Some(f) = s.flush {
        m.counter(
            "ssdwatch_disk_flush_requests_total",
            "Cache flush requests completed.",
        )
        .push(&l, f.completed as f64);
        m.counter(
            "ssdwatch_disk_flush_time_seconds_total",
            "Time spent by all flush requests.",
        )
        .push(&l, ms(f.time_ms));
    }
}

#[async_trait::async_trait]
impl Collector for DiskstatsCollector {
    fn name(&self) -> &'static str {
        "diskstats"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        let sys = ctx.roots.sys.clone();
        let (stats, errors) = tokio::task::spawn_blocking(move || read_all(&sys)).await??;
        let now = unix_now();
        let mut s = Sample {
            errors,
            ..Default::default()
        };
        let mut next = HashMap::with_capacity(stats.len());
        for DeviceStat {
            name,
            stat,
            iostats,
        } in stats
        {
            stat_metrics(&mut s.metrics, &name, &stat);
            let prev = self.history.get(&name);
            let seen_before = prev.is_some();
            // Frozen counters (I/O accounting off) say nothing about discards, idleness or
            // utilization: nothing is derived from them, and no history is kept, so once
            // accounting is back on the next sample is a fresh baseline rather than "idle" for
            // the whole time it was off.
            let derived = iostats.then(|| advance(prev, stat, now));
            let h = derived.as_ref().map(|(h, _)| h);
            let l = [("device", name.as_str())];
            s.metrics
                .gauge(
                    "ssdwatch_disk_iostats_enabled",
                    "1 when the kernel accounts the device's I/O (queue/iostats); 0 when turned off: its counters then stay frozen, so idle time, the last-discard time and the probes' utilization context are absent.",
                )
                .push(&l, if iostats { 1.0 } else { 0.0 });
            s.metrics
                .gauge(
                    "ssdwatch_disk_last_discard_timestamp_seconds",
                    "Last time (Unix) a sample saw the device's discarded bytes grow; absent until seen since the daemon started.",
                )
                .push_opt(&l, h.and_then(|h| h.last_discard));
            s.metrics
                .gauge(
                    "ssdwatch_disk_idle_seconds",
                    "How long the device's busy time has not moved (idle time for garbage collection); 0 when busy in the last interval.",
                )
                .push_opt(
                    &l,
                    h.filter(|_| seen_before)
                        .map(|h| h.idle_since.map(|t| now - t).unwrap_or(0.0)),
                );
            ctx.shared.set_disk_activity(
                &name,
                DiskActivity {
                    last_discard_unix: h.and_then(|h| h.last_discard),
                    idle_since_unix: h.and_then(|h| h.idle_since),
                    utilization_ratio: derived.as_ref().and_then(|(_, u)| *u),
                    updated_unix: now,
                },
            );
            if let Some((h, _)) = derived {
                next.insert(name, h);
            }
        }
        self.history = next;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::blockstat::parse_block_stat;

    /// A collector with default settings over the fixture tree in `dir`.
    fn collector_on(dir: &Path) -> (DiskstatsCollector, Context) {
        let ctx = Context {
            roots: std::sync::Arc::new(crate::Roots::fixture(dir)),
            shared: Default::default(),
            topology_max_age: std::time::Duration::from_secs(60),
        };
        (
            DiskstatsCollector::new(&DiskstatsConfig::default()).unwrap(),
            ctx,
        )
    }

    fn st(io: u64, discard_sectors: u64) -> BlockStat {
        BlockStat {
            io_time_ms: io,
            discard: Some(crate::sysfs::blockstat::DiscardStat {
                sectors: discard_sectors,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn discard_growth_sets_last_discard_time() {
        let (h1, u1) = advance(None, st(100, 0), 1000.0);
        assert_eq!(h1.last_discard, None);
        assert_eq!(u1, None);
        let (h2, _) = advance(Some(&h1), st(200, 0), 1015.0);
        assert_eq!(h2.last_discard, None);
        let (h3, _) = advance(Some(&h2), st(300, 8), 1030.0);
        assert_eq!(h3.last_discard, Some(1030.0));
        let (h4, _) = advance(Some(&h3), st(400, 8), 1045.0);
        assert_eq!(h4.last_discard, Some(1030.0), "kept while no new discards");
    }

    #[test]
    fn idle_time_counts_from_the_last_busy_sample() {
        let (h1, _) = advance(None, st(100, 0), 1000.0);
        let (h2, u2) = advance(Some(&h1), st(100, 0), 1015.0);
        assert_eq!(h2.idle_since, Some(1000.0));
        assert_eq!(u2, Some(0.0));
        let (h3, _) = advance(Some(&h2), st(100, 0), 1030.0);
        assert_eq!(h3.idle_since, Some(1000.0));
        let (h4, u4) = advance(Some(&h3), st(7600, 0), 1045.0);
        assert_eq!(h4.idle_since, None);
        assert_eq!(u4, Some(0.5));
    }

    #[test]
    fn counter_reset_starts_over() {
        let (h1, _) = advance(None, st(1000, 50), 1000.0);
        let (h2, u) = advance(Some(&h1), st(10, 0), 1015.0);
        assert_eq!(h2.last_discard, None);
        assert_eq!(u, None);
    }

    #[test]
    fn sectors_are_512_bytes_and_times_seconds() {
        let mut m = MetricSet::new();
        let s = parse_block_stat("1 0 8 1500 2 0 16 250 0 3000 3100 4 0 4096 20 5 7").unwrap();
        stat_metrics(&mut m, "nvme0n1", &s);
        let v = |n| m.value(n, &[("device", "nvme0n1")]);
        assert_eq!(v("ssdwatch_disk_read_bytes_total"), Some(4096.0));
        assert_eq!(v("ssdwatch_disk_written_bytes_total"), Some(8192.0));
        assert_eq!(
            v("ssdwatch_disk_discarded_bytes_total"),
            Some(4096.0 * 512.0)
        );
        assert_eq!(v("ssdwatch_disk_read_time_seconds_total"), Some(1.5));
        assert_eq!(v("ssdwatch_disk_io_time_seconds_total"), Some(3.0));
        assert_eq!(v("ssdwatch_disk_flush_requests_total"), Some(5.0));
    }

    /// Two real samples over a sysfs tree: an fstrim between them shows as a last-discard time,
    /// a device whose busy time did not move is idle, and the shared state gets both.
    #[tokio::test]
    async fn second_sample_derives_last_discard_and_idle_time() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/block");
        let stat = |dev: &str, text: &str| {
            std::fs::create_dir_all(block.join(dev)).unwrap();
            std::fs::write(block.join(dev).join("stat"), text).unwrap();
        };
        stat("nvme0n1", "10 0 80 5 20 0 160 9 0 700 900 1 0 8 2\n");
        stat("sda", "10 0 80 5 20 0 160 9 0 300 400 0 0 0 0\n");
        std::fs::create_dir_all(block.join("loop0")).unwrap();
        std::fs::write(block.join("loop0/stat"), "0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        std::fs::write(block.join("loop0/size"), "0\n").unwrap();
        let (mut c, ctx) = collector_on(dir.path());
        let first = c.sample(&ctx).await.unwrap();
        assert!(first.errors.is_empty(), "{:?}", first.errors);
        let nvme = [("device", "nvme0n1")];
        assert_eq!(
            first.metrics.value("ssdwatch_disk_idle_seconds", &nvme),
            None
        );
        assert_eq!(
            first.metrics.value(
                "ssdwatch_disk_reads_completed_total",
                &[("device", "loop0")]
            ),
            None,
            "unbound loop devices are skipped"
        );
        // fstrim on nvme0n1 (4096 more sectors discarded, busy 200 ms); sda untouched.
        stat("nvme0n1", "10 0 80 5 20 0 160 9 0 900 1100 2 0 4104 40\n");
        let second = c.sample(&ctx).await.unwrap();
        let sda = [("device", "sda")];
        let last = second
            .metrics
            .value("ssdwatch_disk_last_discard_timestamp_seconds", &nvme);
        assert!(last.is_some_and(|t| t > 1.7e9), "{last:?}");
        assert_eq!(
            second
                .metrics
                .value("ssdwatch_disk_last_discard_timestamp_seconds", &sda),
            None
        );
        assert_eq!(
            second.metrics.value("ssdwatch_disk_idle_seconds", &nvme),
            Some(0.0)
        );
        assert!(
            second
                .metrics
                .value("ssdwatch_disk_idle_seconds", &sda)
                .is_some_and(|v| v >= 0.0)
        );
        assert_eq!(
            second
                .metrics
                .value("ssdwatch_disk_discarded_bytes_total", &nvme),
            Some(4104.0 * 512.0)
        );
        let a = ctx.shared.disk_activity("nvme0n1").unwrap();
        assert_eq!(a.last_discard_unix, last);
        assert_eq!(a.idle_since_unix, None);
        assert!(
            a.utilization_ratio
                .is_some_and(|u| (0.0..=1.0).contains(&u))
        );
        let b = ctx.shared.disk_activity("sda").unwrap();
        assert!(b.idle_since_unix.is_some());
        assert_eq!(b.utilization_ratio, Some(0.0));
    }

    /// A device with I/O accounting turned off keeps its counters but gets no idle time and no
    /// utilization: frozen counters would otherwise read as "idle since the daemon started".
    #[tokio::test]
    async fn a_device_without_io_accounting_has_no_idle_time_or_utilization() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/block/nvme0n1");
        std::fs::create_dir_all(dev.join("queue")).unwrap();
        std::fs::create_dir_all(dev.join("mq")).unwrap();
        std::fs::write(dev.join("stat"), "10 0 80 5 20 0 160 9 0 700 900\n").unwrap();
        std::fs::write(dev.join("queue/iostats"), "0\n").unwrap();
        let (mut c, ctx) = collector_on(dir.path());
        c.sample(&ctx).await.unwrap();
        let second = c.sample(&ctx).await.unwrap();
        let l = [("device", "nvme0n1")];
        let v = |n| second.metrics.value(n, &l);
        assert_eq!(v("ssdwatch_disk_iostats_enabled"), Some(0.0));
        assert_eq!(v("ssdwatch_disk_reads_completed_total"), Some(10.0));
        assert_eq!(v("ssdwatch_disk_idle_seconds"), None);
        let a = ctx.shared.disk_activity("nvme0n1").unwrap();
        assert_eq!((a.idle_since_unix, a.utilization_ratio), (None, None));
        // Turned back on: the first sample is a fresh baseline (the time it was off is not idle
        // time), and the derived figures come back from the next one.
        std::fs::write(dev.join("queue/iostats"), "1\n").unwrap();
        let third = c.sample(&ctx).await.unwrap();
        assert_eq!(
            third.metrics.value("ssdwatch_disk_iostats_enabled", &l),
            Some(1.0)
        );
        assert_eq!(third.metrics.value("ssdwatch_disk_idle_seconds", &l), None);
        let fourth = c.sample(&ctx).await.unwrap();
        let idle = fourth.metrics.value("ssdwatch_disk_idle_seconds", &l);
        assert!(idle.is_some_and(|v| v < 1.0), "{idle:?}");
        let a = ctx.shared.disk_activity("nvme0n1").unwrap();
        assert_eq!(a.utilization_ratio, Some(0.0));
    }

    /// dm and md devices are bio-based: older kernels show `queue/iostats` 0 for them while
    /// counting their I/O all the same, so there the flag is not believed.
    #[test]
    fn a_bio_based_device_reading_iostats_0_still_counts_as_accounted() {
        let dir = tempfile::tempdir().unwrap();
        for (dev, mq) in [("dm-0", false), ("nvme0n1", true)] {
            let d = dir.path().join("block").join(dev);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            if mq {
                std::fs::create_dir_all(d.join("mq")).unwrap();
            }
            std::fs::write(d.join("stat"), "1 0 8 1 2 0 16 1 0 3 4\n").unwrap();
            std::fs::write(d.join("queue/iostats"), "0\n").unwrap();
        }
        let (stats, errors) = read_all(dir.path()).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let accounted: Vec<(&str, bool)> =
            stats.iter().map(|s| (s.name.as_str(), s.iostats)).collect();
        assert_eq!(accounted, vec![("dm-0", true), ("nvme0n1", false)]);
    }

    #[test]
    fn a_bad_stat_file_is_a_named_error_and_the_rest_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("block");
        std::fs::create_dir_all(block.join("sda")).unwrap();
        std::fs::create_dir_all(block.join("sdb")).unwrap();
        std::fs::write(block.join("sda/stat"), "1 2 3\n").unwrap();
        std::fs::write(block.join("sdb/stat"), "1 0 8 1 2 0 16 1 0 3 4\n").unwrap();
        let (stats, errors) = read_all(dir.path()).unwrap();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].name, "sdb");
        assert!(stats[0].iostats, "no queue/iostats attribute: accounted");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].item, "sda");
        assert!(errors[0].message.contains("sda/stat"), "{errors:?}");
        assert!(read_all(&dir.path().join("nope")).is_err());
    }

    proptest::proptest! {
        /// Any sequence of readings (resets, stalls, jumps, clock steps of 0): utilization stays in
        /// 0..=1, derived times never lie in the future and the last discard never goes back.
        #[test]
        fn derived_values_stay_sane(
            steps in proptest::collection::vec((0u64..5000, 0u64..100, 0u64..5000, 0u32..30), 1..40),
        ) {
            let mut h: Option<History> = None;
            let mut now = 1000.0;
            for (io, ds, reads, dt) in steps {
                now += dt as f64;
                let mut stat = st(io, ds);
                stat.reads_completed = reads;
                let prev_discard = h.as_ref().and_then(|p| p.last_discard);
                let (next, util) = advance(h.as_ref(), stat, now);
                if let Some(u) = util {
                    proptest::prop_assert!((0.0..=1.0).contains(&u), "{}", u);
                }
                proptest::prop_assert!(next.idle_since.is_none_or(|t| t <= now));
                proptest::prop_assert!(next.last_discard.is_none_or(|t| t <= now));
                if let (Some(a), Some(b)) = (prev_discard, next.last_discard) {
                    proptest::prop_assert!(b >= a);
                }
                h = Some(next);
            }
        }
    }

    #[test]
    fn old_kernel_has_no_discard_series() {
        let mut m = MetricSet::new();
        let s = parse_block_stat("1 0 8 1500 2 0 16 250 0 3000 3100").unwrap();
        stat_metrics(&mut m, "sda", &s);
        assert!(
            m.value("ssdwatch_disk_discarded_bytes_total", &[])
                .is_none()
        );
        assert!(m.value("ssdwatch_disk_read_bytes_total", &[]).is_some());
    }
}
