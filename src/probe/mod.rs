//! The probe I/O engine: one run on one target with every safety gate, its context, its result.
//! No scheduling here (that is the probe collector's job) and no metrics, only plain results.

pub mod budget;
pub mod fsafe;
pub mod io;

use crate::Roots;
use crate::snapshot::{Shared, unix_now};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const MIB: u64 = 1 << 20;

/// Untimed 4 KiB reads at the start of each run.
pub const WARM_UP_READS: u32 = 8;

/// Probe kinds; the names are the `probe` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum ProbeKind {
    #[serde(rename = "sync_write_4k")]
    SyncWrite4k,
    #[serde(rename = "rand_read_4k")]
    RandRead4k,
    #[serde(rename = "rand_write_4k")]
    RandWrite4k,
    #[serde(rename = "seq_write")]
    SeqWrite,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 4] = [
        ProbeKind::SyncWrite4k,
        ProbeKind::RandRead4k,
        ProbeKind::RandWrite4k,
        ProbeKind::SeqWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::SyncWrite4k => "sync_write_4k",
            ProbeKind::RandRead4k => "rand_read_4k",
            ProbeKind::RandWrite4k => "rand_write_4k",
            ProbeKind::SeqWrite => "seq_write",
        }
    }

    pub fn parse(s: &str) -> Option<ProbeKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One probe target in the config (`collectors.probe.targets[]`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TargetConfig {
    /// A directory on the filesystem to watch; the daemon works only in `<path>/.ssdwatch-probe/`.
    pub path: PathBuf,
    pub kinds: Vec<ProbeKind>,
    /// Between runs of this target; the collector's interval when absent.
    #[serde(with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// seq_write runs at most this often (it writes the most).
    #[serde(with = "humantime_serde")]
    pub seq_write_interval: Duration,
    /// 4 KiB writes per run of sync_write_4k and of rand_write_4k.
    pub write_ops: u32,
    /// 4 KiB reads per run of rand_read_4k.
    pub read_ops: u32,
    /// Writes in flight for rand_write_4k (one thread each).
    pub queue_depth: u32,
    pub seq_write_bytes: u64,
    pub seq_write_block_bytes: u64,
    /// Size of the preallocated probe file.
    pub file_size_bytes: u64,
    /// Cap on bytes written per UTC day (probe file creation included).
    pub budget_bytes_per_day: u64,
    /// Cap on time spent probing per hour.
    #[serde(with = "humantime_serde")]
    pub budget_time_per_hour: Duration,
    /// Skip (reason busy) when the drive was busier than this (0..1).
    pub busy_threshold: f64,
    /// Free-space floor: the larger of this fraction of the filesystem and `free_floor_bytes`.
    pub free_floor_ratio: f64,
    pub free_floor_bytes: u64,
    /// Use the idle I/O scheduling class.
    pub idle_priority: bool,
    /// A run not finished by then is reported as an error and its thread left to finish alone.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            path: PathBuf::new(),
            kinds: ProbeKind::ALL.to_vec(),
            interval: None,
            seq_write_interval: Duration::from_secs(24 * 3600),
            write_ops: 16,
            read_ops: 64,
            queue_depth: 4,
            seq_write_bytes: 16 * MIB,
            seq_write_block_bytes: MIB,
            file_size_bytes: 32 * MIB,
            budget_bytes_per_day: 64 * MIB,
            budget_time_per_hour: Duration::from_secs(60),
            busy_threshold: 0.5,
            free_floor_ratio: 0.05,
            free_floor_bytes: 1 << 30,
            idle_priority: true,
            timeout: Duration::from_secs(120),
        }
    }
}

impl TargetConfig {
    pub fn validate(&self, key: &str) -> Result<(), crate::validate::Invalid> {
        use crate::validate::Invalid;
        if !self.path.is_absolute() {
            return Err(Invalid::new(
                format!("{key}.path"),
                "must be an absolute path",
            ));
        }
        if self.kinds.is_empty() {
            return Err(Invalid::new(
                format!("{key}.kinds"),
                "must list at least one kind",
            ));
        }
        let align = io::ALIGN as u64;
        if self.file_size_bytes < MIB || !self.file_size_bytes.is_multiple_of(align) {
            return Err(Invalid::new(
                format!("{key}.file_size_bytes"),
                "must be at least 1 MiB and a multiple of 4096",
            ));
        }
        if !self.seq_write_block_bytes.is_multiple_of(align)
            || self.seq_write_block_bytes == 0
            || self.seq_write_block_bytes > self.file_size_bytes
        {
            return Err(Invalid::new(
                format!("{key}.seq_write_block_bytes"),
                "must be a multiple of 4096, at most file_size_bytes",
            ));
        }
        if !(0.0..=1.0).contains(&self.busy_threshold) {
            return Err(Invalid::new(
                format!("{key}.busy_threshold"),
                "must be in 0..1",
            ));
        }
        if !(0.0..1.0).contains(&self.free_floor_ratio) {
            return Err(Invalid::new(
                format!("{key}.free_floor_ratio"),
                "must be in 0..1",
            ));
        }
        if self.queue_depth == 0 || self.queue_depth > 64 {
            return Err(Invalid::new(format!("{key}.queue_depth"), "must be 1..64"));
        }
        Ok(())
    }

    /// Bytes a run of `kind` writes.
    pub fn planned_bytes(&self, kind: ProbeKind) -> u64 {
        match kind {
            ProbeKind::SyncWrite4k | ProbeKind::RandWrite4k => {
                u64::from(self.write_ops) * io::ALIGN as u64
            }
            ProbeKind::RandRead4k => 0,
            ProbeKind::SeqWrite => {
                self.seq_write_bytes.div_ceil(self.seq_write_block_bytes)
                    * self.seq_write_block_bytes
            }
        }
    }
}

/// Why a run did not happen (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Budget,
    Busy,
    LowSpace,
    Readonly,
    Unsafe,
    Error,
}

impl SkipReason {
    pub const ALL: [SkipReason; 6] = [
        SkipReason::Budget,
        SkipReason::Busy,
        SkipReason::LowSpace,
        SkipReason::Readonly,
        SkipReason::Unsafe,
        SkipReason::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Budget => "budget",
            SkipReason::Busy => "busy",
            SkipReason::LowSpace => "low_space",
            SkipReason::Readonly => "readonly",
            SkipReason::Unsafe => "unsafe",
            SkipReason::Error => "error",
        }
    }
}

/// Where a target lives: its mount point and the physical drive(s) under it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Placement {
    pub mountpoint: String,
    /// Physical drives, sorted; the first is the `device` label.
    pub drives: Vec<String>,
}

impl Placement {
    pub fn device(&self) -> &str {
        self.drives.first().map(String::as_str).unwrap_or("")
    }
}

/// What the drive and filesystem were doing around the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunContext {
    pub fill_ratio: Option<f64>,
    pub since_discard_seconds: Option<f64>,
    pub idle_seconds: Option<f64>,
    /// Utilization measured just before the run (the busy gate).
    pub utilization_before_ratio: Option<f64>,
    /// Utilization of the drive during the run (io_ticks delta / wall time).
    pub utilization_ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindResult {
    pub probe: ProbeKind,
    pub ops: usize,
    pub bytes_written: u64,
    pub p50_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    pub throughput_bytes_per_second: Option<f64>,
    /// Every operation's latency, for histograms; not printed.
    #[serde(skip)]
    pub latencies: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub target: PathBuf,
    pub placement: Placement,
    pub context: RunContext,
    pub started_unix: f64,
    pub duration_seconds: f64,
    /// Bytes written by this run, probe file creation included.
    pub written_bytes: u64,
    /// Bytes of which went to creating the probe file.
    pub file_created_bytes: u64,
    pub removed_leftovers: Vec<String>,
    pub results: Vec<KindResult>,
    /// Kinds not run for lack of budget (the rest ran).
    pub budget_skipped: Vec<ProbeKind>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skip {
    pub target: PathBuf,
    pub placement: Option<Placement>,
    pub reason: SkipReason,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Ran(RunReport),
    Skipped(Skip),
}

/// Histogram upper bounds: 10 µs to 10 s, 1-2.5-5 per decade.
pub const BUCKETS: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Nearest-rank quantile of a sorted slice.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The inputs of a run that don't come from the config.
pub struct RunInputs<'a> {
    pub roots: &'a Roots,
    pub state_dir: &'a Path,
    /// The diskstats collector's view of each drive, when running in the daemon.
    pub shared: Option<&'a Shared>,
    /// This cycle's block topology, when the daemon has one; read from /sys otherwise.
    pub topology: Option<std::sync::Arc<crate::sysfs::topology::Topology>>,
    pub kinds: Vec<ProbeKind>,
    /// How long to watch the drive before the run for the busy gate.
    pub busy_window: Duration,
}

/// Maps a directory to its mount point (walking up while the device stays the same) and to the
/// physical drives under that filesystem.
pub fn place(
    dir: &Path,
    st_dev: u64,
    roots: &Roots,
    topology: Option<&crate::sysfs::topology::Topology>,
) -> Result<Placement, String> {
    let major = libc::major(st_dev);
    let minor = libc::minor(st_dev);
    let mut mp = dir.to_path_buf();
    while let Some(parent) = mp.parent() {
        match std::fs::metadata(parent) {
            Ok(m) if std::os::unix::fs::MetadataExt::dev(&m) == st_dev => mp = parent.to_path_buf(),
            _ => break,
        }
    }
    let read;
    let topo = match topology {
        Some(t) => t,
        None => {
            read = crate::sysfs::topology::Topology::read(&roots.sys)
                .map_err(|e| format!("{}: reading block topology: {e}", roots.sys.display()))?;
            &read
        }
    };
    let dev = topo.by_devnum(major, minor).ok_or_else(|| {
        format!(
            "{}: filesystem on device {major}:{minor}, which is not a block device in {}",
            dir.display(),
            roots.sys.display()
        )
    })?;
    let drives: Vec<String> = topo
        .physical_drives(&dev.name)
        .into_iter()
        .map(|d| d.name.clone())
        .collect();
    if drives.is_empty() {
        return Err(format!(
            "{}: no physical drive found under {}",
            dir.display(),
            dev.name
        ));
    }
    Ok(Placement {
        mountpoint: mp.to_string_lossy().into_owned(),
        drives,
    })
}

/// io_ticks (ms the drive had I/O in flight) of each drive; None when any can't be read or
/// has I/O accounting turned off (`queue/iostats` 0: its counters don't move).
pub fn io_ticks_ms(roots: &Roots, drives: &[String]) -> Option<Vec<u64>> {
    drives
        .iter()
        .map(|d| {
            crate::sysfs::blockstat::read_one(&roots.sys, d)
                .ok()
                .filter(|d| d.iostats)
                .map(|d| d.stat.io_time_ms)
        })
        .collect()
}

/// The busiest drive's utilization between two io_ticks readings over `wall` seconds.
pub fn utilization(before: &[u64], after: &[u64], wall: f64) -> Option<f64> {
    if wall <= 0.0 || before.len() != after.len() {
        return None;
    }
    before
        .iter()
        .zip(after)
        .map(|(b, a)| (a.saturating_sub(*b) as f64 / 1000.0 / wall).min(1.0))
        .reduce(f64::max)
}

fn skip(
    t: &TargetConfig,
    placement: Option<&Placement>,
    reason: SkipReason,
    detail: String,
) -> Outcome {
    Outcome::Skipped(Skip {
        target: t.path.clone(),
        placement: placement.cloned(),
        reason,
        detail,
    })
}

/// The space floor of a filesystem of `total` bytes.
pub fn floor_bytes(t: &TargetConfig, total: u64) -> u64 {
    ((total as f64 * t.free_floor_ratio) as u64).max(t.free_floor_bytes)
}

/// One run on one target, with every gate. Blocking: call it from a dedicated thread.
pub fn run_target(t: &TargetConfig, inp: &RunInputs) -> Outcome {
    let shown = t.path.display().to_string();
    let target_fd = match fsafe::open_dir(&t.path) {
        Ok(fd) => fd,
        Err(e) => return skip(t, None, SkipReason::Error, format!("{shown}: {e}")),
    };
    let st = match fsafe::fstat(target_fd.as_raw_fd()) {
        Ok(s) => s,
        Err(e) => return skip(t, None, SkipReason::Error, format!("{shown}: {e}")),
    };
    let placement = match place(&t.path, st.st_dev, inp.roots, inp.topology.as_deref()) {
        Ok(p) => p,
        Err(e) => return skip(t, None, SkipReason::Error, e),
    };
    let pl = Some(&placement);
    let vfs = match fsafe::fstatvfs(target_fd.as_raw_fd()) {
        Ok(v) => v,
        Err(e) => return skip(t, pl, SkipReason::Error, format!("{shown}: statvfs: {e}")),
    };
    if vfs.f_flag & libc::ST_RDONLY != 0 {
        return skip(
            t,
            pl,
            SkipReason::Readonly,
            format!("{shown}: read-only filesystem"),
        );
    }
    let frsize = vfs.f_frsize as u64;
    let total = vfs.f_blocks as u64 * frsize;
    let floor = floor_bytes(t, total);
    let low_space = |avail: u64| {
        skip(
            t,
            pl,
            SkipReason::LowSpace,
            format!("{shown}: {avail} bytes available, under the floor of {floor}"),
        )
    };
    let avail_of = |v: &libc::statvfs| v.f_bavail * frsize;
    // Short of space and no probe directory: nothing of ours to clean up, and not even a
    // directory gets created.
    if avail_of(&vfs) < floor && !fsafe::exists_at(&target_fd, fsafe::PROBE_DIR) {
        return low_space(avail_of(&vfs));
    }

    let dir = match fsafe::open_probe_dir(&target_fd, &shown) {
        Ok(d) => d,
        Err(fsafe::SafetyError::Io { path, source })
            if source.raw_os_error() == Some(libc::EROFS) =>
        {
            return skip(t, pl, SkipReason::Readonly, format!("{path}: {source}"));
        }
        Err(e @ fsafe::SafetyError::Io { .. }) => {
            return skip(t, pl, SkipReason::Error, e.to_string());
        }
        Err(e) => return skip(t, pl, SkipReason::Unsafe, e.to_string()),
    };
    let dir_shown = format!("{shown}/{}", fsafe::PROBE_DIR);
    // One run per target at a time, across processes (the daemon and `probe run`): held until
    // `dir` is closed at the end of this run. Without it a second run would take the first one's
    // live files for leftovers, and both could pass the space gate for one probe file.
    match fsafe::flock_exclusive(dir.as_raw_fd(), false) {
        Ok(true) => {}
        Ok(false) => {
            return skip(
                t,
                pl,
                SkipReason::Busy,
                format!("{dir_shown}: another probe run on this target is in progress"),
            );
        }
        Err(e) => return skip(t, pl, SkipReason::Error, format!("{dir_shown}: flock: {e}")),
    }
    let removed = match fsafe::remove_leftovers(&dir, &dir_shown) {
        Ok(r) => r,
        Err(e) => return skip(t, pl, SkipReason::Unsafe, e),
    };
    // Leftovers go before the space gate: a half-created probe file may be what filled it.
    // (Where freeing is deferred, as on XFS and btrfs, statvfs may not show the space yet: this
    // run is then skipped as low_space and the next one sees it. The safe side.)
    let vfs = if removed.is_empty() {
        vfs
    } else {
        tracing::info!(target = %shown, "removed leftovers of an interrupted probe run: {removed:?}");
        match fsafe::fstatvfs(target_fd.as_raw_fd()) {
            Ok(v) => v,
            Err(e) => return skip(t, pl, SkipReason::Error, format!("{shown}: statvfs: {e}")),
        }
    };
    let avail = avail_of(&vfs);
    let fill_ratio = (total > 0).then(|| 1.0 - vfs.f_bfree as f64 * frsize as f64 / total as f64);
    if avail < floor {
        return low_space(avail);
    }

    // The existing probe file, if it is sound and of the configured size.
    let file_shown = format!("{dir_shown}/{}", fsafe::PROBE_FILE);
    let flags = libc::O_RDWR | libc::O_DIRECT;
    let existing = match fsafe::openat(&dir, fsafe::PROBE_FILE, flags, 0) {
        Ok(fd) => match fsafe::check_file(&file_shown, &fd) {
            Ok(st) if st.st_size as u64 == t.file_size_bytes => Some(fd),
            Ok(_) => {
                // Resized in the config: recreate it (space is checked below as for a new file).
                drop(fd);
                if let Err(e) = fsafe::unlinkat(&dir, fsafe::PROBE_FILE) {
                    return skip(t, pl, SkipReason::Error, format!("{file_shown}: {e}"));
                }
                None
            }
            Err(e) => return skip(t, pl, SkipReason::Unsafe, e.to_string()),
        },
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return skip(
                t,
                pl,
                SkipReason::Unsafe,
                format!("{file_shown} is a symlink; refusing it"),
            );
        }
        Err(e) => return skip(t, pl, SkipReason::Error, format!("{file_shown}: {e}")),
    };
    let create_bytes = if existing.is_some() {
        0
    } else {
        t.file_size_bytes
    };
    if create_bytes > 0 && avail.saturating_sub(create_bytes) < floor {
        return skip(
            t,
            pl,
            SkipReason::LowSpace,
            format!(
                "{shown}: creating the {create_bytes}-byte probe file would leave {} bytes, under the floor of {floor}",
                avail.saturating_sub(create_bytes)
            ),
        );
    }

    // Budget: bytes per day and time per hour.
    let now = unix_now();
    let usage = match budget::load(inp.state_dir) {
        Ok(b) => b.targets.get(&shown).cloned().unwrap_or_default().at(now),
        Err(e) => return skip(t, pl, SkipReason::Error, e),
    };
    if usage.seconds >= t.budget_time_per_hour.as_secs_f64() {
        return skip(
            t,
            pl,
            SkipReason::Budget,
            format!(
                "{shown}: {:.1} s of probing this hour already",
                usage.seconds
            ),
        );
    }
    let mut left = t.budget_bytes_per_day.saturating_sub(usage.written_bytes);
    if create_bytes > left {
        return skip(
            t,
            pl,
            SkipReason::Budget,
            format!(
                "{shown}: creating the probe file ({create_bytes} bytes) exceeds today's write budget ({left} bytes left)"
            ),
        );
    }
    left -= create_bytes;
    let mut kinds = Vec::new();
    let mut budget_skipped = Vec::new();
    for k in &inp.kinds {
        let b = t.planned_bytes(*k);
        if b <= left {
            left -= b;
            kinds.push(*k);
        } else {
            budget_skipped.push(*k);
        }
    }
    if kinds.is_empty() {
        return skip(
            t,
            pl,
            SkipReason::Budget,
            format!(
                "{shown}: today's write budget is spent ({} of {} bytes)",
                usage.written_bytes, t.budget_bytes_per_day
            ),
        );
    }

    // Busy gate: what the diskstats collector saw recently, and our own short look right now.
    let mut ctx = RunContext {
        fill_ratio,
        ..RunContext::default()
    };
    let mut util_before = None;
    if let Some(shared) = inp.shared {
        for d in &placement.drives {
            if let Some(a) = shared.disk_activity(d) {
                if d == placement.device() {
                    ctx.since_discard_seconds = a.last_discard_unix.map(|t| (now - t).max(0.0));
                    ctx.idle_seconds = a.idle_since_unix.map(|t| (now - t).max(0.0));
                }
                if now - a.updated_unix < 600.0 {
                    util_before = match (util_before, a.utilization_ratio) {
                        (Some(x), Some(y)) => Some(f64::max(x, y)),
                        (x, y) => x.or(y),
                    };
                }
            }
        }
    }
    if !inp.busy_window.is_zero()
        && let Some(b) = io_ticks_ms(inp.roots, &placement.drives)
    {
        let t0 = Instant::now();
        std::thread::sleep(inp.busy_window);
        if let Some(a) = io_ticks_ms(inp.roots, &placement.drives) {
            let u = utilization(&b, &a, t0.elapsed().as_secs_f64());
            util_before = match (util_before, u) {
                (Some(x), Some(y)) => Some(f64::max(x, y)),
                (x, y) => x.or(y),
            };
        }
    }
    ctx.utilization_before_ratio = util_before;
    if let Some(u) = util_before
        && u > t.busy_threshold
    {
        return skip(
            t,
            pl,
            SkipReason::Busy,
            format!(
                "{}: drive {} {:.0}% busy, above the {:.0}% threshold",
                shown,
                placement.device(),
                u * 100.0,
                t.busy_threshold * 100.0
            ),
        );
    }

    // From here on we write: a marker tells the next start that this run didn't finish.
    let _marker = match fsafe::MarkerGuard::create(&dir) {
        Ok(m) => m,
        Err(e) => {
            return skip(
                t,
                pl,
                SkipReason::Error,
                format!("{dir_shown}/{}: {e}", fsafe::RUN_MARKER),
            );
        }
    };
    if t.idle_priority
        && let Err(e) = io::set_idle_priority()
    {
        tracing::debug!("ioprio_set: {e}");
    }
    let started = unix_now();
    let t0 = Instant::now();
    let ticks_before = io_ticks_ms(inp.roots, &placement.drives);
    let mut rng = io::Rng::seeded();
    let mut written = 0u64;
    let fd = match existing {
        Some(fd) => fd,
        None => match create_probe_file(t, &dir, &file_shown, &mut rng) {
            Ok(fd) => {
                written += create_bytes;
                fd
            }
            Err(e) => {
                let _ = budget::record(inp.state_dir, &shown, now, 0, t0.elapsed().as_secs_f64());
                return skip(t, pl, SkipReason::Error, e);
            }
        },
    };
    let mut results = Vec::new();
    let mut failure = None;
    // A few untimed reads first: the first I/Os of a process that was idle pay for waking the
    // I/O path up, which a busy database does not (fio's ramp_time serves the same end).
    if let Err(e) = io::rand_read(&fd, t.file_size_bytes, WARM_UP_READS, &mut rng) {
        failure = Some(format!("{file_shown}: warm-up read: {e}"));
    }
    for k in kinds.into_iter().filter(|_| failure.is_none()) {
        match run_kind(t, k, &fd, &dir, &mut rng) {
            Ok(r) => {
                written += r.bytes_written;
                results.push(r);
            }
            Err(e) => {
                failure = Some(format!("{file_shown}: {}: {e}", k.as_str()));
                break;
            }
        }
    }
    let duration = t0.elapsed().as_secs_f64();
    if let Some(b) = ticks_before
        && let Some(a) = io_ticks_ms(inp.roots, &placement.drives)
    {
        ctx.utilization_ratio = utilization(&b, &a, duration);
    }
    if let Err(e) = budget::record(inp.state_dir, &shown, now, written, duration) {
        tracing::warn!("probe budget not saved: {e}");
    }
    if let Some(f) = failure {
        return skip(t, pl, SkipReason::Error, f);
    }
    Outcome::Ran(RunReport {
        target: t.path.clone(),
        placement,
        context: ctx,
        started_unix: started,
        duration_seconds: duration,
        written_bytes: written,
        file_created_bytes: create_bytes,
        removed_leftovers: removed,
        results,
        budget_skipped,
    })
}

/// Creates the probe file under a temporary name, preallocates and fills it, then renames it:
/// a crash leaves only the partial file, which the next start removes.
fn create_probe_file(
    t: &TargetConfig,
    dir: &OwnedFd,
    file_shown: &str,
    rng: &mut io::Rng,
) -> Result<OwnedFd, String> {
    let partial = fsafe::PARTIAL_FILE;
    let fd = fsafe::openat(
        dir,
        partial,
        libc::O_RDWR | libc::O_DIRECT | libc::O_CREAT | libc::O_EXCL,
        0o600,
    )
    .map_err(|e| format!("{file_shown}: create: {e}"))?;
    let len = t.file_size_bytes as libc::off_t;
    // SAFETY: valid fd.
    let r = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len) };
    if r != 0 {
        let _ = fsafe::unlinkat(dir, partial);
        return Err(format!(
            "{file_shown}: fallocate: {}",
            std::io::Error::from_raw_os_error(r)
        ));
    }
    if let Err(e) = io::fill(&fd, t.file_size_bytes, rng) {
        let _ = fsafe::unlinkat(dir, partial);
        return Err(format!("{file_shown}: filling: {e}"));
    }
    fsafe::renameat(dir, partial, fsafe::PROBE_FILE)
        .map_err(|e| format!("{file_shown}: rename: {e}"))?;
    fsafe::fsync_dir(dir);
    Ok(fd)
}

fn run_kind(
    t: &TargetConfig,
    k: ProbeKind,
    fd: &OwnedFd,
    dir: &OwnedFd,
    rng: &mut io::Rng,
) -> std::io::Result<KindResult> {
    let size = t.file_size_bytes;
    let (lat, throughput) = match k {
        ProbeKind::SyncWrite4k => {
            // A second descriptor with O_DSYNC on the same checked file: a durable write each time.
            let sfd = fsafe::openat(
                dir,
                fsafe::PROBE_FILE,
                libc::O_RDWR | libc::O_DIRECT | libc::O_DSYNC,
                0,
            )?;
            fsafe::check_file(fsafe::PROBE_FILE, &sfd).map_err(std::io::Error::other)?;
            (io::sync_write(&sfd, size, t.write_ops, rng)?, None)
        }
        ProbeKind::RandRead4k => (io::rand_read(fd, size, t.read_ops, rng)?, None),
        ProbeKind::RandWrite4k => (
            io::rand_write(fd, size, t.write_ops, t.queue_depth, t.idle_priority)?,
            None,
        ),
        ProbeKind::SeqWrite => {
            let (lat, secs) =
                io::seq_write(fd, size, t.seq_write_bytes, t.seq_write_block_bytes, rng)?;
            let bytes = t.planned_bytes(k) as f64;
            (lat, (secs > 0.0).then(|| bytes / secs))
        }
    };
    let mut sorted = lat.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(KindResult {
        probe: k,
        ops: lat.len(),
        bytes_written: t.planned_bytes(k),
        p50_seconds: quantile(&sorted, 0.5),
        p99_seconds: quantile(&sorted, 0.99),
        max_seconds: quantile(&sorted, 1.0),
        throughput_bytes_per_second: throughput,
        latencies: lat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_and_max_is_quantile_one() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn utilization_is_the_busiest_drive_capped_at_one() {
        assert_eq!(utilization(&[0, 100], &[500, 200], 1.0), Some(0.5));
        assert_eq!(utilization(&[0], &[3000], 1.0), Some(1.0));
        assert_eq!(utilization(&[0], &[10], 0.0), None);
    }

    #[test]
    fn io_ticks_are_unknown_for_a_drive_without_io_accounting() {
        let dir = tempfile::tempdir().unwrap();
        for (dev, iostats) in [("sda", "1"), ("sdb", "0")] {
            let d = dir.path().join("sys/block").join(dev);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            std::fs::create_dir_all(d.join("mq")).unwrap();
            std::fs::write(d.join("stat"), "1 0 8 1 2 0 16 1 0 3 4\n").unwrap();
            std::fs::write(d.join("queue/iostats"), iostats).unwrap();
        }
        let roots = Roots::fixture(dir.path());
        assert_eq!(io_ticks_ms(&roots, &["sda".into()]), Some(vec![3]));
        assert_eq!(io_ticks_ms(&roots, &["sda".into(), "sdb".into()]), None);
    }

    #[test]
    fn floor_is_the_larger_of_ratio_and_bytes() {
        let t = TargetConfig::default();
        assert_eq!(floor_bytes(&t, 10 << 30), 1 << 30);
        assert_eq!(floor_bytes(&t, 100 << 30), 5 << 30);
    }

    #[test]
    fn default_daily_writes_fit_the_default_budget() {
        let t = TargetConfig::default();
        let per_run =
            t.planned_bytes(ProbeKind::SyncWrite4k) + t.planned_bytes(ProbeKind::RandWrite4k);
        let runs = 86400 / 300;
        // Steady state; the probe file's one-time creation comes on top on the first day.
        let day = per_run * runs + t.planned_bytes(ProbeKind::SeqWrite);
        assert!(day <= t.budget_bytes_per_day, "{day}");
        assert_eq!(BUCKETS.first(), Some(&1e-5));
        assert_eq!(BUCKETS.last(), Some(&10.0));
    }

    #[test]
    fn target_config_rejects_bad_values_naming_the_key() {
        let t = TargetConfig {
            path: "/data".into(),
            busy_threshold: 2.0,
            ..TargetConfig::default()
        };
        assert_eq!(t.validate("x").unwrap_err().key, "x.busy_threshold");
        let t = TargetConfig {
            path: "rel".into(),
            ..TargetConfig::default()
        };
        assert_eq!(t.validate("x").unwrap_err().key, "x.path");
    }
}
