//! Disk I/O and discard collector: /sys/block/*/stat as counters in base units, plus what only
//! history tells: when each drive was last trimmed and how long it has been idle.
//! Partitions are left out (their disk carries the same I/O); dm, md and loop devices are in.

use crate::catalogue;
use crate::collector::device_filter::{DevicePattern, wanted};
use crate::collector::{Collector, Context, ItemError, Sample};
use crate::history::service::Record;
use crate::history::{DiscardEvent, DriveKey, IdlePeriod};
use crate::metrics::MetricSet;
use crate::shared::{DiskActivity, Idle};
use crate::sysfs::blockstat::{BlockStat, DeviceStat, STAT_SECTOR_BYTES, read_one};
use crate::sysfs::topology::Topology;
use crate::time::unix_now;
use crate::validate::{Invalid, check_interval};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiskstatsConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Devices (kernel names under /sys/block) to report: only those matching, when set.
    pub device_include: Option<DevicePattern>,
    /// Devices left out.
    pub device_exclude: Option<DevicePattern>,
}

impl Default for DiskstatsConfig {
    fn default() -> Self {
        DiskstatsConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            device_include: None,
            device_exclude: None,
        }
    }
}

impl DiskstatsConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

/// Where a last-discard time comes from (the `source` label of
/// `ssdwatch_disk_last_discard_timestamp_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscardSource {
    /// This daemon saw the device's discarded bytes grow.
    Observed,
    /// An earlier run of the daemon saw it (kept in `state_dir`).
    State,
    /// systemd's `fstrim.timer` last ran then (a hint: the timer trims every filesystem that
    /// supports it, but it is not a reading of this device).
    FstrimTimer,
}

impl DiscardSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DiscardSource::Observed => "observed",
            DiscardSource::State => "state",
            DiscardSource::FstrimTimer => "fstrim_timer",
        }
    }
}

/// What is known of a device's discards.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discards {
    /// When the device last received a discard, and how that is known.
    pub last: Option<(f64, DiscardSource)>,
    /// Bytes of the newest burst: consecutive samples in which discarded bytes grew (one fstrim,
    /// one mkfs, one batch of online discards).
    pub burst_bytes: Option<u64>,
    /// The previous sample saw discards, so the burst may go on.
    burst_open: bool,
    /// Bytes written since the last discard that the write counter no longer covers (an earlier
    /// boot, a re-created device).
    written_base: u64,
    /// The write counter (sectors) when the last discard was seen; `None` when that was before
    /// the counter started (then every write it counts came after the discard).
    write_sectors_at_discard: Option<u64>,
}

impl Discards {
    /// Bytes written to the device since its last discard, when a last discard is known.
    pub fn written_since(&self, write_sectors: u64) -> Option<u64> {
        self.last?;
        let counted = write_sectors.saturating_sub(self.write_sectors_at_discard.unwrap_or(0));
        Some(
            self.written_base
                .saturating_add(counted.saturating_mul(STAT_SECTOR_BYTES)),
        )
    }

    /// The same history, carried over a counter that restarted (device re-created).
    fn across_counter_reset(&self, old_write_sectors: u64) -> Discards {
        Discards {
            written_base: self.written_since(old_write_sectors).unwrap_or(0),
            write_sectors_at_discard: None,
            burst_open: false,
            ..self.clone()
        }
    }
}

/// What the collector remembers of a device between samples.
#[derive(Debug, Clone, PartialEq)]
struct History {
    stat: BlockStat,
    at: f64,
    discards: Discards,
    idle_since: Option<f64>,
}

impl History {
    fn last_discard(&self) -> Option<f64> {
        self.discards.last.map(|(t, _)| t)
    }
}

/// A device's discard history as kept in `state_dir` across restarts and reboots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedDiscards {
    pub last_discard_unix: f64,
    pub burst_bytes: Option<u64>,
    pub written_since_discard_bytes: u64,
    /// The kernel's boot id when saved: the write counter means nothing across a reboot.
    pub boot_id: String,
    /// The write counter (sectors) when saved.
    pub write_sectors: u64,
}

/// The state file of the discard history, keyed by drive identity (`wwn:…`, `serial:…`, or
/// `name:…` for devices without one), so a drive keeps its history under another kernel name.
pub const DISCARD_STATE_FILE: &str = "discards.json";

/// How often the discard history is saved (it also is at once after a discard that follows a
/// quiet spell, [`save_at_once`]): what a reboot can lose of the written-since-discard count. A restart within one
/// boot loses nothing (the count goes on from the drive's own write counter). Hourly: each save
/// rewrites and fsyncs the whole file (32 KiB on a 64-drive host), which every 10 minutes was
/// 4.6 MiB a day written to the drive the daemon watches.
const SAVE_EVERY: f64 = crate::time::HOUR as f64;

/// Whether a drive's discard at `last_discard_unix` is news worth a save now rather than at the
/// next hourly one: the drive's first known discard, or one after an hour without any (an
/// fstrim run). On a filesystem mounted `-o discard` nearly every sample sees a discard; saving
/// each one rewrote and fsynced the file every 15 s (121 MiB a day measured), while the hourly
/// save already keeps what a reboot can lose of such a stream to an hour.
fn save_at_once(saved: Option<&SavedDiscards>, last_discard_unix: f64) -> bool {
    saved.is_none_or(|old| last_discard_unix - old.last_discard_unix >= SAVE_EVERY)
}

/// systemd's stamp of the last `fstrim.timer` run (its mtime), for `Persistent=true` timers.
const FSTRIM_STAMP: &str = "var/lib/systemd/timers/stamp-fstrim.timer";

/// Restores a device's discard history from its saved record, and from the fstrim timer's last
/// run when that is newer (the daemon was down when it ran). Pure.
pub fn restore(
    saved: Option<&SavedDiscards>,
    fstrim_stamp: Option<f64>,
    boot_id: &str,
    write_sectors: u64,
) -> Discards {
    let mut d = Discards::default();
    if let Some(s) = saved {
        // An unknown boot id (no /proc) can't tell a restart from a reboot: take it as a reboot.
        let same_counter =
            !boot_id.is_empty() && s.boot_id == boot_id && write_sectors >= s.write_sectors;
        d = Discards {
            last: Some((s.last_discard_unix, DiscardSource::State)),
            burst_bytes: s.burst_bytes,
            burst_open: false,
            written_base: s.written_since_discard_bytes,
            write_sectors_at_discard: same_counter.then_some(s.write_sectors),
        };
    }
    if let Some(t) = fstrim_stamp
        && d.last.is_none_or(|(last, _)| t > last)
    {
        // All that is known: a trim at that time. Writes since then are the counter's since boot
        // at most; the burst size is unknown.
        d = Discards {
            last: Some((t, DiscardSource::FstrimTimer)),
            ..Discards::default()
        };
    }
    d
}

pub struct DiskstatsCollector {
    interval: Duration,
    include: Option<DevicePattern>,
    exclude: Option<DevicePattern>,
    history: HashMap<String, History>,
    state_file: PathBuf,
    /// Whether to write the history back (not in one-shot `ssdwatch sample`, which may run as
    /// another user than the daemon and must not leave it a file it can't replace).
    persist: bool,
    /// The saved discard history by drive identity; loaded at the first sample.
    saved: Option<BTreeMap<String, SavedDiscards>>,
    /// When `saved` was last written, and whether it changed since.
    saved_at: f64,
    dirty: bool,
}

impl DiskstatsCollector {
    pub fn new(cfg: &DiskstatsConfig, state_dir: &Path, persist: bool) -> anyhow::Result<Self> {
        Ok(DiskstatsCollector {
            interval: cfg.interval,
            include: cfg.device_include.clone(),
            exclude: cfg.device_exclude.clone(),
            history: HashMap::new(),
            state_file: state_dir.join(DISCARD_STATE_FILE),
            persist,
            saved: None,
            saved_at: 0.0,
            dirty: false,
        })
    }
}

/// The key a device's discard history is kept under: its WWN or serial when /sys gives one (so
/// the history follows the drive to another kernel name), else its kernel name.
fn identity(name: &str, topo: Option<&Topology>) -> String {
    match drive_key(name, topo) {
        Some(DriveKey { wwn: Some(w), .. }) => format!("wwn:{w}"),
        Some(DriveKey {
            serial: Some(s), ..
        }) => format!("serial:{s}"),
        _ => format!("name:{name}"),
    }
}

/// A physical drive's identity for the history store; None for devices without one (dm, md,
/// loop), whose events the history does not keep.
fn drive_key(name: &str, topo: Option<&Topology>) -> Option<DriveKey> {
    DriveKey::of(topo?.get(name)?)
}

/// What a sample reads besides the stat files: the boot id and the fstrim timer's last run.
struct HostClues {
    boot_id: String,
    fstrim_stamp: Option<f64>,
}

fn read_clues(roots: &crate::Roots) -> HostClues {
    let boot_id =
        crate::sysfs::read_attr(&roots.proc.join("sys/kernel/random/boot_id")).unwrap_or_default();
    let fstrim_stamp = std::fs::metadata(roots.in_rootfs(Path::new(FSTRIM_STAMP)))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    HostClues {
        boot_id,
        fstrim_stamp,
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
            && crate::sysfs::read_u64(&block.join(crate::sysfs::name_path(&name)).join("size"))
                == Some(0)
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
/// utilization over the interval (None on the first sample or after a counter reset). `start` is
/// what is known of its discards when there is no previous sample (restored from state).
fn advance(
    prev: Option<&History>,
    stat: BlockStat,
    now: f64,
    start: &mut dyn FnMut() -> Discards,
) -> (History, Option<f64>) {
    let Some(p) = prev else {
        return (
            History {
                stat,
                at: now,
                discards: start(),
                idle_since: None,
            },
            None,
        );
    };
    // A counter going backwards means the device was re-created: start over, keeping what is
    // known of its discards.
    if stat.io_time_ms < p.stat.io_time_ms || stat.reads_completed < p.stat.reads_completed {
        let carried = p.discards.across_counter_reset(p.stat.write_sectors);
        return advance(None, stat, now, &mut || carried.clone());
    }
    let discarded = |s: &BlockStat| s.discard.map(|d| d.sectors);
    let mut discards = p.discards.clone();
    match (discarded(&p.stat), discarded(&stat)) {
        (Some(a), Some(b)) if b > a => {
            let bytes = (b - a).saturating_mul(STAT_SECTOR_BYTES);
            discards.burst_bytes = Some(match (discards.burst_open, discards.burst_bytes) {
                (true, Some(sofar)) => sofar.saturating_add(bytes),
                _ => bytes,
            });
            discards.burst_open = true;
            discards.last = Some((now, DiscardSource::Observed));
            discards.written_base = 0;
            discards.write_sectors_at_discard = Some(stat.write_sectors);
        }
        _ => discards.burst_open = false,
    }
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
            discards,
            idle_since,
        },
        util,
    )
}

/// One device's counters as series (pure: used by tests and benchmarks too).
pub fn stat_metrics(m: &mut MetricSet, device: &str, s: &BlockStat) {
    let l = [("device", device)];
    let ms = |v: u64| v as f64 / 1000.0;
    // In floating point: a counter near 2^64 sectors is still a byte count, never a wrap.
    let bytes = |sectors: u64| sectors as f64 * STAT_SECTOR_BYTES as f64;
    m.family(&catalogue::DISK_READS_COMPLETED_TOTAL)
        .push(&l, s.reads_completed as f64);
    m.family(&catalogue::DISK_READS_MERGED_TOTAL)
        .push(&l, s.reads_merged as f64);
    m.family(&catalogue::DISK_READ_BYTES_TOTAL)
        .push(&l, bytes(s.read_sectors));
    m.family(&catalogue::DISK_READ_TIME_SECONDS_TOTAL)
        .push(&l, ms(s.read_time_ms));
    m.family(&catalogue::DISK_WRITES_COMPLETED_TOTAL)
        .push(&l, s.writes_completed as f64);
    m.family(&catalogue::DISK_WRITES_MERGED_TOTAL)
        .push(&l, s.writes_merged as f64);
    m.family(&catalogue::DISK_WRITTEN_BYTES_TOTAL)
        .push(&l, bytes(s.write_sectors));
    m.family(&catalogue::DISK_WRITE_TIME_SECONDS_TOTAL)
        .push(&l, ms(s.write_time_ms));
    m.family(&catalogue::DISK_IO_NOW)
        .push(&l, s.in_flight as f64);
    m.family(&catalogue::DISK_IO_TIME_SECONDS_TOTAL)
        .push(&l, ms(s.io_time_ms));
    m.family(&catalogue::DISK_IO_TIME_WEIGHTED_SECONDS_TOTAL)
        .push(&l, ms(s.weighted_io_time_ms));
    if let Some(d) = s.discard {
        m.family(&catalogue::DISK_DISCARDS_COMPLETED_TOTAL)
            .push(&l, d.completed as f64);
        m.family(&catalogue::DISK_DISCARDS_MERGED_TOTAL)
            .push(&l, d.merged as f64);
        m.family(&catalogue::DISK_DISCARDED_BYTES_TOTAL)
            .push(&l, bytes(d.sectors));
        m.family(&catalogue::DISK_DISCARD_TIME_SECONDS_TOTAL)
            .push(&l, ms(d.time_ms));
    }
    if let Some(f) = s.flush {
        m.family(&catalogue::DISK_FLUSH_REQUESTS_TOTAL)
            .push(&l, f.completed as f64);
        m.family(&catalogue::DISK_FLUSH_TIME_SECONDS_TOTAL)
            .push(&l, ms(f.time_ms));
    }
}

/// What only history tells of a device, as series: whether its I/O is accounted, its last
/// discard (and how that is known), the newest burst's bytes, the bytes written since, and how
/// long it has been idle (not on its first sample: nothing says how long it was idle before).
fn derived_metrics(
    m: &mut MetricSet,
    device: &str,
    iostats: bool,
    h: Option<&History>,
    written_since: Option<u64>,
    seen_before: bool,
    now: f64,
) {
    let l = [("device", device)];
    m.family(&catalogue::DISK_IOSTATS_ENABLED)
        .push(&l, if iostats { 1.0 } else { 0.0 });
    if let Some((t, source)) = h.and_then(|h| h.discards.last) {
        m.family(&catalogue::DISK_LAST_DISCARD_TIMESTAMP_SECONDS)
            .push(&[("device", device), ("source", source.as_str())], t);
    }
    m.family(&catalogue::DISK_LAST_DISCARD_BURST_BYTES)
        .push_opt(&l, h.and_then(|h| h.discards.burst_bytes).map(|b| b as f64));
    m.family(&catalogue::DISK_WRITTEN_SINCE_DISCARD_BYTES)
        .push_opt(&l, written_since.map(|b| b as f64));
    m.family(&catalogue::DISK_IDLE_SECONDS).push_opt(
        &l,
        h.filter(|_| seen_before)
            .map(|h| h.idle_since.map(|t| now - t).unwrap_or(0.0)),
    );
}

/// The history's events of a drive that ended between its previous sample `p` and this one
/// `h`: a discard burst (at the time of its last discard) and an idle stretch.
fn ended_events(p: &History, h: &History, drive: DriveKey, now: f64) -> Vec<Record> {
    let mut records = Vec::new();
    if p.discards.burst_open
        && !h.discards.burst_open
        && let (Some((t, _)), Some(bytes)) = (p.discards.last, p.discards.burst_bytes)
    {
        records.push(Record::Discard(DiscardEvent {
            drive: drive.clone(),
            t: t as i64,
            bytes,
        }));
    }
    if let (Some(start), None) = (p.idle_since, h.idle_since) {
        records.push(Record::Idle(IdlePeriod {
            drive,
            start: start as i64,
            seconds: (now - start).max(0.0) as u64,
        }));
    }
    records
}

/// The saved discard history by drive identity.
type Saved = BTreeMap<String, SavedDiscards>;

/// What a sample reads on the blocking pool: the stat files of the devices the config keeps
/// and their errors, the host's clues and, at the first sample, the saved discard history.
struct Reading {
    stats: Vec<DeviceStat>,
    errors: Vec<ItemError>,
    clues: HostClues,
    loaded: Option<Result<Option<Saved>, crate::statefile::StateError>>,
}

/// What every device of one sample is judged against.
struct Moment<'a> {
    ctx: &'a Context,
    topo: Option<&'a Topology>,
    clues: &'a HostClues,
    now: f64,
}

/// The steps of a sample: read, take the saved history (first sample), one step per device,
/// save the history when due.
impl DiskstatsCollector {
    async fn read(&self, ctx: &Context) -> anyhow::Result<Reading> {
        let roots = ctx.roots.clone();
        let state_file = self.state_file.clone();
        let load_state = self.saved.is_none();
        // Not the door: /sys/block/*/stat and the small state file on the daemon's own state
        // directory; no device or remote mount is asked.
        let (stats, errors, clues, loaded) = tokio::task::spawn_blocking(move || {
            let (stats, errors) = read_all(&roots.sys)?;
            let loaded = load_state.then(|| crate::statefile::load(&state_file));
            anyhow::Ok((stats, errors, read_clues(&roots), loaded))
        })
        .await??;
        // device_include / device_exclude: a filtered device is neither reported nor an error.
        let keep = |name: &str| wanted(self.include.as_ref(), self.exclude.as_ref(), name);
        Ok(Reading {
            stats: stats.into_iter().filter(|d| keep(&d.name)).collect(),
            errors: errors.into_iter().filter(|e| keep(&e.item)).collect(),
            clues,
            loaded,
        })
    }

    fn take_saved(
        &mut self,
        loaded: Result<Option<Saved>, crate::statefile::StateError>,
        s: &mut Sample,
    ) {
        self.saved = Some(match loaded {
            Ok(saved) => saved.unwrap_or_default(),
            Err(e) => {
                // Start afresh (and overwrite it at the next save): the history is a
                // convenience, not worth failing the collector for.
                s.error(ItemError::new(
                    self.state_file.display().to_string(),
                    format!("{e}; discard history starts afresh"),
                ));
                BTreeMap::new()
            }
        });
    }

    /// One device's series, its activity (for the probes' context), the history's events and
    /// its saved discard record; returns what to remember of it until the next sample (nothing
    /// while its I/O accounting is off).
    fn device(
        &mut self,
        name: &str,
        stat: BlockStat,
        iostats: bool,
        at: &Moment,
        s: &mut Sample,
    ) -> Option<History> {
        stat_metrics(&mut s.metrics, name, &stat);
        let saved = self.saved.get_or_insert_with(BTreeMap::new);
        let prev = self.history.get(name);
        let key = identity(name, at.topo);
        let discard_capable = at
            .topo
            .and_then(|t| t.get(name))
            .and_then(|d| d.discard_max_bytes)
            .is_some_and(|b| b > 0);
        let write_sectors = stat.write_sectors;
        // Sectors of 512 bytes, whatever the device's block size (Documentation/block/stat).
        let discarded_bytes = stat
            .discard
            .map(|d| d.sectors.saturating_mul(STAT_SECTOR_BYTES));
        // Frozen counters (I/O accounting off) say nothing about discards, idleness or
        // utilization: nothing is derived from them, and no history is kept, so once
        // accounting is back on the next sample is a fresh baseline rather than "idle" for
        // the whole time it was off.
        let derived = iostats.then(|| {
            advance(prev, stat, at.now, &mut || {
                restore(
                    saved.get(&key),
                    at.clues.fstrim_stamp.filter(|_| discard_capable),
                    &at.clues.boot_id,
                    write_sectors,
                )
            })
        });
        let h = derived.as_ref().map(|(h, _)| h);
        let written_since = h.and_then(|h| h.discards.written_since(h.stat.write_sectors));
        derived_metrics(
            &mut s.metrics,
            name,
            iostats,
            h,
            written_since,
            prev.is_some(),
            at.now,
        );
        at.ctx.shared.set_disk_activity(
            name,
            DiskActivity {
                last_discard_unix: h.and_then(|h| h.last_discard()),
                discarding: h.is_some_and(|h| h.discards.burst_open),
                written_since_discard_bytes: written_since,
                // As ssdwatch_disk_idle_seconds: 0 when busy, unknown on the first sample.
                idle: match h.filter(|_| prev.is_some()).map(|h| h.idle_since) {
                    None => Idle::Unknown,
                    Some(None) => Idle::Busy,
                    Some(Some(t)) => Idle::Since(t),
                },
                utilization_ratio: derived.as_ref().and_then(|(_, u)| *u),
                discarded_bytes,
                updated_unix: at.now,
            },
        );
        // The history keeps each drive's discard bursts and idle stretches once they end.
        if at.ctx.history.is_some()
            && let (Some(p), Some(h)) = (prev, h)
            && let Some(drive) = drive_key(name, at.topo)
        {
            s.records.extend(ended_events(p, h, drive, at.now));
        }
        let (h, _) = derived?;
        if let Some((t, DiscardSource::Observed | DiscardSource::State)) = h.discards.last {
            let record = SavedDiscards {
                last_discard_unix: t,
                burst_bytes: h.discards.burst_bytes,
                written_since_discard_bytes: written_since.unwrap_or(0),
                boot_id: at.clues.boot_id.clone(),
                write_sectors: h.stat.write_sectors,
            };
            self.dirty |= save_at_once(saved.get(&key), t);
            saved.insert(key, record);
        }
        Some(h)
    }

    /// Writes the discard history back when a discard made it news or the hourly save is due.
    async fn save_if_due(&mut self, now: f64, s: &mut Sample) -> anyhow::Result<()> {
        if !(self.persist && (self.dirty || now - self.saved_at >= SAVE_EVERY)) {
            return Ok(());
        }
        let path = self.state_file.clone();
        let snapshot = self.saved.clone().unwrap_or_default();
        // Not the door: a small write to the daemon's own state directory (the history store
        // writes there too); a state directory that hangs stops the daemon's history either way.
        match tokio::task::spawn_blocking(move || crate::statefile::store(&path, &snapshot)).await?
        {
            Ok(()) => {
                self.saved_at = now;
                self.dirty = false;
            }
            Err(e) => s.error(ItemError::new(
                self.state_file.display().to_string(),
                format!("{e} (the discard history will not survive a restart)"),
            )),
        }
        Ok(())
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
        let read = self.read(ctx).await?;
        let now = unix_now();
        let mut s = Sample {
            errors: read.errors,
            ..Default::default()
        };
        if let Some(loaded) = read.loaded {
            self.take_saved(loaded, &mut s);
        }
        let topo = ctx.topology().await.ok();
        let at = Moment {
            ctx,
            topo: topo.as_deref(),
            clues: &read.clues,
            now,
        };
        let mut next = HashMap::with_capacity(read.stats.len());
        for DeviceStat {
            name,
            stat,
            iostats,
        } in read.stats
        {
            if let Some(h) = self.device(&name, stat, iostats, &at, &mut s) {
                next.insert(name, h);
            }
        }
        self.history = next;
        self.save_if_due(now, &mut s).await?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::blockstat::parse_block_stat;

    /// `advance` for a device with no saved discard history.
    fn adv(prev: Option<&History>, stat: BlockStat, now: f64) -> (History, Option<f64>) {
        advance(prev, stat, now, &mut Discards::default)
    }

    /// A collector with default settings over the fixture tree in `dir` (state in `dir/state`).
    fn collector_on(dir: &Path) -> (DiskstatsCollector, Context) {
        let ctx = Context {
            roots: std::sync::Arc::new(crate::Roots::fixture(dir)),
            shared: Default::default(),
            topology_max_age: std::time::Duration::from_secs(60),
            history: None,
            door: Default::default(),
        };
        (
            DiskstatsCollector::new(&DiskstatsConfig::default(), &dir.join("state"), true).unwrap(),
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
        let (h1, u1) = adv(None, st(100, 0), 1000.0);
        assert_eq!(h1.last_discard(), None);
        assert_eq!(u1, None);
        let (h2, _) = adv(Some(&h1), st(200, 0), 1015.0);
        assert_eq!(h2.last_discard(), None);
        let (h3, _) = adv(Some(&h2), st(300, 8), 1030.0);
        assert_eq!(h3.last_discard(), Some(1030.0));
        let (h4, _) = adv(Some(&h3), st(400, 8), 1045.0);
        assert_eq!(
            h4.last_discard(),
            Some(1030.0),
            "kept while no new discards"
        );
    }

    #[test]
    fn idle_time_counts_from_the_last_busy_sample() {
        let (h1, _) = adv(None, st(100, 0), 1000.0);
        let (h2, u2) = adv(Some(&h1), st(100, 0), 1015.0);
        assert_eq!(h2.idle_since, Some(1000.0));
        assert_eq!(u2, Some(0.0));
        let (h3, _) = adv(Some(&h2), st(100, 0), 1030.0);
        assert_eq!(h3.idle_since, Some(1000.0));
        let (h4, u4) = adv(Some(&h3), st(7600, 0), 1045.0);
        assert_eq!(h4.idle_since, None);
        assert_eq!(u4, Some(0.5));
    }

    /// A stat with cumulative written and discarded sectors.
    fn wd(io: u64, write_sectors: u64, discard_sectors: u64) -> BlockStat {
        BlockStat {
            write_sectors,
            ..st(io, discard_sectors)
        }
    }

    #[test]
    fn a_burst_sums_consecutive_discarding_samples_and_a_quiet_sample_ends_it() {
        let (h, _) = adv(None, wd(1, 0, 0), 0.0);
        let (h, _) = adv(Some(&h), wd(2, 0, 100), 15.0);
        let (h, _) = adv(Some(&h), wd(3, 0, 300), 30.0);
        assert_eq!(
            h.discards.burst_bytes,
            Some(300 * 512),
            "one fstrim spanning two samples"
        );
        let (h, _) = adv(Some(&h), wd(4, 0, 300), 45.0);
        assert_eq!(h.discards.burst_bytes, Some(300 * 512), "kept while quiet");
        let (h, _) = adv(Some(&h), wd(5, 0, 310), 60.0);
        assert_eq!(h.discards.burst_bytes, Some(10 * 512), "a new burst");
        assert_eq!(h.discards.last, Some((60.0, DiscardSource::Observed)));
    }

    #[test]
    fn written_since_discard_counts_from_the_discarding_sample() {
        let (h, _) = adv(None, wd(1, 1000, 0), 0.0);
        assert_eq!(h.discards.written_since(1000), None, "no discard known");
        let (h, _) = adv(Some(&h), wd(2, 1200, 8), 15.0);
        assert_eq!(h.discards.written_since(1200), Some(0));
        let (h, _) = adv(Some(&h), wd(3, 1300, 8), 30.0);
        assert_eq!(
            h.discards.written_since(h.stat.write_sectors),
            Some(100 * 512)
        );
        // The device is re-created (counters restart): the count carries on.
        let (h, _) = adv(Some(&h), wd(0, 50, 0), 45.0);
        assert_eq!(
            h.discards.written_since(h.stat.write_sectors),
            Some(150 * 512)
        );
        assert_eq!(h.discards.last, Some((15.0, DiscardSource::Observed)));
    }

    fn saved(at: f64, boot: &str, write_sectors: u64, since: u64) -> SavedDiscards {
        SavedDiscards {
            last_discard_unix: at,
            burst_bytes: Some(4096),
            written_since_discard_bytes: since,
            boot_id: boot.into(),
            write_sectors,
        }
    }

    #[test]
    fn a_restart_in_the_same_boot_continues_the_write_counter_and_a_reboot_adds_to_it() {
        let s = saved(100.0, "boot-a", 1000, 512 * 40);
        // Same boot: writes since the save are the counter's growth.
        let d = restore(Some(&s), None, "boot-a", 1100);
        assert_eq!(d.last, Some((100.0, DiscardSource::State)));
        assert_eq!(d.burst_bytes, Some(4096));
        assert_eq!(d.written_since(1100), Some(512 * 140));
        // Rebooted: the counter restarted, every write it counts came after the discard.
        let d = restore(Some(&s), None, "boot-b", 30);
        assert_eq!(d.written_since(30), Some(512 * 70));
        // No boot id: treated as a reboot, never as a counter that went on.
        let d = restore(Some(&s), None, "", 1100);
        assert_eq!(d.written_since(1100), Some(512 * 40 + 512 * 1100));
    }

    #[test]
    fn the_fstrim_timer_stamp_is_a_hint_used_only_when_newer() {
        let d = restore(None, Some(500.0), "b", 0);
        assert_eq!(d.last, Some((500.0, DiscardSource::FstrimTimer)));
        assert_eq!(d.burst_bytes, None);
        let s = saved(900.0, "b", 0, 0);
        let d = restore(Some(&s), Some(500.0), "b", 0);
        assert_eq!(
            d.last,
            Some((900.0, DiscardSource::State)),
            "older stamp loses"
        );
        let d = restore(Some(&s), Some(1000.0), "b", 0);
        assert_eq!(
            d.last,
            Some((1000.0, DiscardSource::FstrimTimer)),
            "the daemon was down"
        );
        assert_eq!(restore(None, None, "b", 0), Discards::default());
    }

    /// Restart story on a sysfs tree: an fstrim seen by one run of the daemon is still known to
    /// the next (source "state"), a drive it never saw trimmed gets the fstrim timer's hint, a
    /// corrupt state file is an error naming it and not a failed sample, and one-shot mode
    /// writes nothing.
    #[tokio::test]
    async fn the_last_discard_survives_a_restart_and_the_fstrim_timer_is_a_labelled_hint() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/block");
        let dev = |name: &str, stat: &str| {
            let d = block.join(name);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            std::fs::write(d.join("stat"), stat).unwrap();
            std::fs::write(d.join("dev"), "259:0\n").unwrap();
            std::fs::write(d.join("queue/discard_max_bytes"), "2199023255040\n").unwrap();
        };
        dev("nvme0n1", "10 0 80 5 20 0 160 9 0 700 900 1 0 8 2\n");
        dev("sdb", "10 0 80 5 20 0 160 9 0 700 900 0 0 0 0\n");
        let boot_id = dir.path().join("proc/sys/kernel/random/boot_id");
        std::fs::create_dir_all(boot_id.parent().unwrap()).unwrap();
        std::fs::write(&boot_id, "6f1c0a2e-0000-4000-8000-000000000001\n").unwrap();
        let (mut c, ctx) = collector_on(dir.path());
        c.sample(&ctx).await.unwrap();
        // fstrim of nvme0n1 (4096 sectors), then 100 sectors written.
        dev("nvme0n1", "10 0 80 5 20 0 160 9 0 900 1100 2 0 4104 40\n");
        c.sample(&ctx).await.unwrap();
        dev("nvme0n1", "10 0 80 5 30 0 260 9 0 950 1100 2 0 4104 40\n");
        let s = c.sample(&ctx).await.unwrap();
        let nvme = [("device", "nvme0n1")];
        assert_eq!(
            s.metrics
                .value("ssdwatch_disk_last_discard_burst_bytes", &nvme),
            Some(4096.0 * 512.0)
        );
        assert_eq!(
            s.metrics
                .value("ssdwatch_disk_written_since_discard_bytes", &nvme),
            Some(100.0 * 512.0)
        );
        let state = dir.path().join("state").join(DISCARD_STATE_FILE);
        assert!(state.exists(), "saved right after the discard");

        // The fstrim timer ran an hour ago (before the daemon saw anything of sdb).
        let stamp = dir.path().join("rootfs").join(FSTRIM_STAMP);
        std::fs::create_dir_all(stamp.parent().unwrap()).unwrap();
        std::fs::write(&stamp, "").unwrap();
        let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();

        // A restart: a new collector over the same tree and state.
        let (mut c2, ctx2) = collector_on(dir.path());
        let s = c2.sample(&ctx2).await.unwrap();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        let src = |m: &MetricSet, d: &str, source: &str| {
            m.value(
                "ssdwatch_disk_last_discard_timestamp_seconds",
                &[("device", d), ("source", source)],
            )
        };
        assert!(
            src(&s.metrics, "nvme0n1", "state").is_some(),
            "{:?}",
            s.metrics
        );
        assert_eq!(
            s.metrics
                .value("ssdwatch_disk_written_since_discard_bytes", &nvme),
            Some(100.0 * 512.0),
            "same boot: the counter's growth since the discard, no more"
        );
        let hint = src(&s.metrics, "sdb", "fstrim_timer").expect("fstrim timer hint");
        assert!(
            (hint
                - hour_ago
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64())
            .abs()
                < 2.0
        );

        // A corrupt state file: named, history starts afresh, the sample still succeeds.
        std::fs::write(&state, "{garbage").unwrap();
        let (mut c3, ctx3) = collector_on(dir.path());
        let s = c3.sample(&ctx3).await.unwrap();
        assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
        assert!(
            s.errors[0].message.contains("discards.json"),
            "{:?}",
            s.errors
        );
        assert!(
            s.metrics
                .value("ssdwatch_disk_reads_completed_total", &nvme)
                .is_some()
        );

        // One-shot mode reads but never writes.
        std::fs::remove_file(&state).unwrap();
        let mut once = DiskstatsCollector::new(
            &DiskstatsConfig::default(),
            &dir.path().join("state"),
            false,
        )
        .unwrap();
        once.sample(&ctx3).await.unwrap();
        assert!(!state.exists());
    }

    #[test]
    fn counter_reset_starts_over() {
        let (h1, _) = adv(None, st(1000, 50), 1000.0);
        let (h2, u) = adv(Some(&h1), st(10, 0), 1015.0);
        assert_eq!(h2.last_discard(), None);
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

    #[test]
    fn only_a_discard_after_a_quiet_hour_is_saved_at_once() {
        let old = saved(1000.0, "boot-a", 0, 0);
        assert!(save_at_once(None, 1000.0), "a drive's first discard");
        assert!(
            !save_at_once(Some(&old), 1015.0),
            "online discard, 15 s later"
        );
        assert!(!save_at_once(Some(&old), 1000.0 + SAVE_EVERY - 1.0));
        assert!(
            save_at_once(Some(&old), 1000.0 + SAVE_EVERY),
            "an fstrim after a quiet hour"
        );
    }

    #[test]
    fn huge_sector_counters_become_huge_byte_counts_not_zero() {
        let mut m = MetricSet::new();
        let big = 1u64 << 60;
        let s =
            parse_block_stat(&format!("1 0 {big} 0 2 0 {big} 0 0 0 0 4 0 {big} 0 5 7")).unwrap();
        stat_metrics(&mut m, "nvme0n1", &s);
        let v = |n| m.value(n, &[("device", "nvme0n1")]);
        let bytes = (big as f64) * 512.0;
        assert_eq!(v("ssdwatch_disk_read_bytes_total"), Some(bytes));
        assert_eq!(v("ssdwatch_disk_written_bytes_total"), Some(bytes));
        assert_eq!(v("ssdwatch_disk_discarded_bytes_total"), Some(bytes));
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
        // Nothing says how long it was idle before the daemon looked: no context either.
        let a = ctx.shared.disk_activity("nvme0n1").unwrap();
        assert_eq!(a.idle, Idle::Unknown);
        assert_eq!(a.idle.seconds_at(unix_now()), None);
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
        // Busy in the last interval: 0 s idle for the probe's context, as the series says.
        assert_eq!(a.idle, Idle::Busy);
        assert_eq!(a.idle.seconds_at(unix_now()), Some(0.0));
        assert!(
            a.utilization_ratio
                .is_some_and(|u| (0.0..=1.0).contains(&u))
        );
        let b = ctx.shared.disk_activity("sda").unwrap();
        assert!(matches!(b.idle, Idle::Since(_)), "{:?}", b.idle);
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
        assert_eq!((a.idle, a.utilization_ratio), (Idle::Unknown, None));
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

    /// A device whose kernel name is not UTF-8 (`sd` and the byte 0xff): read through its exact
    /// bytes, labelled `sd\\xff` as a mount point would be, and not merged with `sd` 0xfe.
    #[tokio::test]
    async fn a_device_name_that_is_not_utf8_is_read_through_its_bytes_and_escaped_in_labels() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/block");
        // Read lossily, both names would be `sd\u{fffd}`: one series, or none.
        for (dev, reads) in [(&b"sd\xff"[..], 7), (b"sd\xfe", 9)] {
            let d = block.join(std::ffi::OsStr::from_bytes(dev));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stat"), format!("{reads} 0 8 1 2 0 16 1 0 3 4\n")).unwrap();
        }
        let (mut c, ctx) = collector_on(dir.path());
        let s = c.sample(&ctx).await.unwrap();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        let reads = |dev| {
            s.metrics
                .value("ssdwatch_disk_reads_completed_total", &[("device", dev)])
        };
        assert_eq!(reads("sd\\xff"), Some(7.0));
        assert_eq!(reads("sd\\xfe"), Some(9.0));
        let mut text = String::new();
        crate::render::render_families(&mut text, s.metrics.families());
        // The text format escapes the backslash itself: `\\` then `xff`.
        assert!(
            text.contains("ssdwatch_disk_reads_completed_total{device=\"sd\\\\xff\"} 7"),
            "{text}"
        );
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
                let prev_discard = h.as_ref().and_then(|p| p.last_discard());
                let (next, util) = adv(h.as_ref(), stat, now);
                if let Some(u) = util {
                    proptest::prop_assert!((0.0..=1.0).contains(&u), "{}", u);
                }
                proptest::prop_assert!(next.idle_since.is_none_or(|t| t <= now));
                proptest::prop_assert!(next.last_discard().is_none_or(|t| t <= now));
                if let (Some(a), Some(b)) = (prev_discard, next.last_discard()) {
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
