//! The probe runner: gathers what [`plan`] judges, asks it for each next step and carries that
//! out (the probe directory, its lock, leftovers, the probe file, the timed I/O, the budget).
//! No decisions here: a gate added anywhere but in `plan` can't be tested without root.

use super::plan::{
    Observed, Plan, ProbeDir, ProbeFile, RunPlan, Spec, overwrites_in_place, plan,
    space_after_allocation, space_before_allocation,
};
use super::{
    KindResult, Outcome, Placement, ProbeKind, RunContext, RunReport, Skip, SkipReason,
    TargetConfig, WARM_UP_READS, budget, fsafe, io, measurable, quantile,
};
use crate::Roots;
use crate::procfs::mountinfo::MountInfo;
use crate::roots::MAX_SYMLINKS;
use crate::shared::Shared;
use crate::statfs;
use crate::statfs::FsStat;
use crate::sysfs::topology::{Topology, resolve_device};
use crate::time::unix_now;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The inputs of a run that don't come from the config.
pub struct RunInputs<'a> {
    pub roots: &'a Roots,
    pub state_dir: &'a Path,
    /// The diskstats collector's view of each drive, when running in the daemon.
    pub shared: Option<&'a Shared>,
    /// This cycle's block topology, when the daemon has one; read from /sys otherwise.
    pub topology: Option<Arc<Topology>>,
    pub kinds: Vec<ProbeKind>,
    /// How long to watch the drive before the run for the busy gate.
    pub busy_window: Duration,
    /// A run by hand (`ssdwatch probe run`): budgeted apart from the daemon's ([`budget::key`]).
    pub hand: bool,
}

/// Why a target could not be placed on its drives.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error("{}: reading block topology: {source}", sys.display())]
    Topology {
        sys: PathBuf,
        source: crate::sysfs::topology::SysfsError,
    },
    #[error("{}: filesystem on device {major}:{minor}, which is not a block device in {}", dir.display(), sys.display())]
    NotBlock {
        dir: PathBuf,
        major: u32,
        minor: u32,
        sys: PathBuf,
    },
    #[error("{}: no physical drive found under {dev}", dir.display())]
    NoDrive { dir: PathBuf, dev: String },
}

/// A system call of a run that failed (the run is skipped as `error`); each names its file.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{target}: {source}")]
    Target {
        target: String,
        source: std::io::Error,
    },
    #[error("{target}: statvfs: {source}")]
    Statvfs {
        target: String,
        source: std::io::Error,
    },
    #[error("{target}: statfs: {source}")]
    Statfs {
        target: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error("{dir}: flock: {source}")]
    Flock { dir: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Path {
        path: String,
        source: std::io::Error,
    },
    /// `what`: the step (create, fallocate, filling, rename, warm-up read) or the probe kind.
    #[error("{file}: {what}: {source}")]
    File {
        file: String,
        what: &'static str,
        source: std::io::Error,
    },
}

/// Maps a directory to its mount point (walking up while the device stays the same) and to the
/// physical drives under that filesystem.
pub fn place(
    dir: &Path,
    st_dev: u64,
    roots: &Roots,
    topology: Option<&Topology>,
) -> Result<Placement, PlaceError> {
    let major = libc::major(st_dev);
    let minor = libc::minor(st_dev);
    // Labelled as before its first run (`placement_from_mount_table`): by the mount holding the
    // real path, symlinks resolved (the directory was just opened, so its filesystem answers).
    // When the table disagrees with what the open directory is on (a btrfs subvolume's own
    // device number; a mount made since), by walking up while the device stays the same.
    let mp = (std::fs::canonicalize(dir).ok())
        .and_then(|real| labelled_mount(&real, roots, (major, minor)))
        .unwrap_or_else(|| mount_point_of(dir, st_dev));
    let read;
    let topo = match topology {
        Some(t) => t,
        None => {
            read = Topology::read(&roots.sys).map_err(|source| PlaceError::Topology {
                sys: roots.sys.clone(),
                source,
            })?;
            &read
        }
    };
    let not_block = || PlaceError::NotBlock {
        dir: dir.to_path_buf(),
        major,
        minor,
        sys: roots.sys.clone(),
    };
    let by_mount;
    let dev = match topo.by_devnum(major, minor) {
        Some(d) => d,
        // btrfs gives its files an anonymous device number (0:N, one per subvolume): the block
        // device is the source of the mount the directory is on.
        None => {
            by_mount = mount_device(dir, roots, topo).ok_or_else(not_block)?;
            topo.get(&by_mount).ok_or_else(not_block)?
        }
    };
    let drives: Vec<String> = topo
        .physical_drives(&dev.name)
        .into_iter()
        .map(|d| d.name.clone())
        .collect();
    if drives.is_empty() {
        return Err(PlaceError::NoDrive {
            dir: dir.to_path_buf(),
            dev: dev.name.clone(),
        });
    }
    Ok(Placement {
        mountpoint: mp.to_string_lossy().into_owned(),
        drives,
    })
}

/// The mount point holding `dir` (whose device is `st_dev`): walking up while the device stays
/// the same.
fn mount_point_of(dir: &Path, st_dev: u64) -> PathBuf {
    let mut mp = dir.to_path_buf();
    while let Some(parent) = mp.parent() {
        match std::fs::metadata(parent) {
            Ok(m) if std::os::unix::fs::MetadataExt::dev(&m) == st_dev => mp = parent.to_path_buf(),
            _ => break,
        }
    }
    mp
}

/// The mounts as seen from here (`--path.rootfs` stripped).
fn mount_table(roots: &Roots) -> Option<Vec<MountInfo>> {
    let mut table = crate::procfs::mountinfo::read_mountinfo(&roots.proc).ok()?;
    crate::procfs::mountinfo::strip_rootfs(&mut table.mounts, &roots.rootfs);
    Some(table.mounts)
}

/// The mount that holds `real` (a path whose symlinks are resolved) and the path of its mount
/// point from here: the deepest, and of mounts at one path the latest (it hides the others).
/// What a target is labelled by, before its first run and after each: one rule, so a path through
/// a symlink or into a bind mount keeps one label from its first attempt on.
fn deepest_mount<'a>(
    real: &Path,
    mounts: &'a [MountInfo],
    roots: &Roots,
) -> Option<(&'a MountInfo, PathBuf)> {
    (mounts.iter())
        .map(|m| (m, roots.in_rootfs(&m.mount_path)))
        .filter(|(_, mp)| real.starts_with(mp))
        .max_by_key(|(_, mp)| mp.components().count())
}

/// [`deepest_mount`]'s mount point, from the mount table read now, if that mount is of the
/// filesystem `dev` (major, minor).
fn labelled_mount(real: &Path, roots: &Roots, dev: (u32, u32)) -> Option<PathBuf> {
    let mounts = mount_table(roots)?;
    let (m, mp) = deepest_mount(real, &mounts, roots)?;
    ((m.major, m.minor) == dev).then_some(mp)
}

/// Filesystems where a lookup can wait on a server or a user-space daemon for ever.
fn may_hang(fstype: &str) -> bool {
    matches!(
        fstype,
        "nfs" | "nfs4" | "cifs" | "smb3" | "smbfs" | "9p" | "ceph" | "glusterfs" | "afs"
    ) || fstype.starts_with("fuse")
}

/// `path` with its symlinks resolved as the kernel would, reading links only on local
/// filesystems (by `mounts`): below a network or FUSE mount, or past a missing component, the
/// rest is kept as written. A mount point is never read (mounted on, it is no link), so no
/// lookup touches a filesystem that may hang.
fn resolve_symlinks(path: &Path, mounts: &[MountInfo], roots: &Roots) -> PathBuf {
    use crate::roots::push_components as push_all;
    let mut todo = std::collections::VecDeque::new();
    let mut out = PathBuf::from("/");
    push_all(&mut todo, path, false);
    let (mut links, mut literal) = (0, false);
    while let Some(c) = todo.pop_front() {
        match c.to_str() {
            Some("/") => out = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => {
                let next = out.join(&c);
                let is_mount = mounts
                    .iter()
                    .any(|m| roots.in_rootfs(&m.mount_path) == next);
                let on = deepest_mount(&out, mounts, roots).map(|(m, _)| m.fstype.as_str());
                literal |= on.is_some_and(may_hang);
                if literal || is_mount || links >= MAX_SYMLINKS {
                    out = next;
                    continue;
                }
                match std::fs::read_link(&next) {
                    Ok(target) => {
                        links += 1;
                        push_all(&mut todo, &target, true);
                    }
                    Err(e) => {
                        // Not a link (EINVAL), or missing: the rest is as written.
                        literal = e.kind() == std::io::ErrorKind::NotFound;
                        out = next;
                    }
                }
            }
        }
    }
    out
}

/// Where a target is before a run has placed it, from the mount table (no system call on a
/// filesystem that may hang: [`resolve_symlinks`]): the mount holding its real path (the mount a
/// missing path would be on), and the drives under that mount's device (none for a filesystem
/// on no block device). Agrees with [`place`], which labels by the same rule, also for a path
/// through a symlink or into a bind mount.
pub fn placement_from_mount_table(
    path: &Path,
    roots: &Roots,
    topology: Option<&Topology>,
) -> Option<Placement> {
    let mounts = mount_table(roots)?;
    let real = resolve_symlinks(path, &mounts, roots);
    let (m, mp) = deepest_mount(&real, &mounts, roots)?;
    let read;
    let topo = match topology {
        Some(t) => Some(t),
        None => {
            read = Topology::read(&roots.sys).ok();
            read.as_ref()
        }
    };
    let drives = topo
        .and_then(|t| Some((t, t.get(&resolve_device(m, t)?)?)))
        .map(|(t, d)| {
            (t.physical_drives(&d.name).into_iter())
                .map(|d| d.name.clone())
                .collect()
        })
        .unwrap_or_default();
    Some(Placement {
        mountpoint: mp.to_string_lossy().into_owned(),
        drives,
    })
}

/// The kernel name of the block device behind the deepest mount holding `dir`, by the mount
/// table's source (see [`resolve_device`]).
fn mount_device(dir: &Path, roots: &Roots, topo: &Topology) -> Option<String> {
    let mut table = crate::procfs::mountinfo::read_mountinfo(&roots.proc).ok()?;
    crate::procfs::mountinfo::strip_rootfs(&mut table.mounts, &roots.rootfs);
    let dir = std::fs::canonicalize(dir).ok()?;
    table
        .mounts
        .iter()
        .filter(|m| dir.starts_with(roots.in_rootfs(&m.mount_path)))
        .max_by_key(|m| m.mount_point.len())
        .and_then(|m| resolve_device(m, topo))
}

/// A run's place against the drive's discards, from what the diskstats collector last saw when
/// the run started at `start` (Unix time): the time and bytes written since the last discard.
/// A run counts as after a discard only if it started after the discard ended; one that starts
/// while a burst is still going (an fstrim: its latest sample saw discards grow) shares the drive
/// with it and is neither before nor after, so it claims no time since a discard (unknown, not 0).
pub(crate) fn discard_context(
    a: &crate::shared::DiskActivity,
    start: f64,
) -> (Option<f64>, Option<u64>) {
    if a.discarding {
        return (None, None);
    }
    (
        a.last_discard_unix.map(|t| (start - t).max(0.0)),
        a.written_since_discard_bytes,
    )
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

/// Points of a run where another writer on the filesystem could act: [`run_target_with`] calls
/// its hook there, so a test can be that writer at exactly that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Every gate passed and the intent is in the budget; the first write comes next. The
    /// plan's space check is a busy window old by now.
    Writing,
    /// The space was judged again on a fresh statvfs; the allocation (fallocate) comes next.
    Allocating,
}

/// One run on one target, every gate judged by [`plan`]. Blocking: call it from a dedicated
/// thread.
pub fn run_target(t: &TargetConfig, inp: &RunInputs) -> Outcome {
    run_target_with(t, inp, &|_| {})
}

/// [`run_target`], calling `at` at each [`Stage`] of the run.
pub fn run_target_with(t: &TargetConfig, inp: &RunInputs, at: &dyn Fn(Stage)) -> Outcome {
    let spec = Spec {
        target: t,
        kinds: &inp.kinds,
    };
    let mut run = match Run::observe(t, inp) {
        Ok(r) => r,
        Err((e, placement)) => return error(t, placement, e),
    };
    let mut measured = false;
    // Each step changes what was seen (or fails), so the plan moves on and the loop ends.
    loop {
        let step = match plan(&run.seen, &spec) {
            Ok(s) => s,
            Err(skip) => return Outcome::Skipped(skip),
        };
        let done = match step {
            Plan::Enter => run.enter(inp.state_dir),
            Plan::RemoveStale => run.remove_stale(),
            Plan::GiveBack => {
                tracing::info!(
                    "{}: too full for a probe run; the probe file is removed to give its space back (made again once it fits above the floor)",
                    run.file_shown()
                );
                run.remove_stale()
            }
            // Every other gate passed: worth the busy gate's look (a second by default).
            Plan::Record { .. } | Plan::Run(_) if !measured => {
                measured = true;
                run.measure_busy(inp);
                Ok(())
            }
            Plan::Record { bytes } => {
                let recorded = budget::begin(inp.state_dir, &run.budget_key, run.now, bytes);
                run.seen.intent = Some(recorded.map(|_| ()));
                Ok(())
            }
            Plan::Run(p) => return run.carry_out(t, inp, p, at),
        };
        if let Err(e) = done {
            return error(t, Some(run.seen.placement), e);
        }
    }
}

fn error(t: &TargetConfig, placement: Option<Placement>, e: RunError) -> Outcome {
    Outcome::Skipped(Skip {
        target: t.path.clone(),
        placement,
        reason: SkipReason::Error,
        detail: e.to_string(),
    })
}

/// A run in progress: what it holds open and what it has seen.
struct Run {
    shown: String,
    /// Where this run's budget usage is kept.
    budget_key: String,
    target: OwnedFd,
    /// The probe directory, opened and locked (the lock goes with it).
    dir: Option<OwnedFd>,
    /// The existing probe file, opened and checked.
    file: Option<OwnedFd>,
    removed: Vec<String>,
    now: f64,
    context: RunContext,
    seen: Observed,
}

impl Run {
    fn dir_shown(&self) -> String {
        format!("{}/{}", self.shown, fsafe::PROBE_DIR)
    }

    fn file_shown(&self) -> String {
        format!("{}/{}", self.dir_shown(), fsafe::PROBE_FILE)
    }

    /// What can be seen without touching the probe directory; a failure comes with the
    /// placement when it was known by then.
    fn observe(t: &TargetConfig, inp: &RunInputs) -> Result<Run, (RunError, Option<Placement>)> {
        let shown = t.path.display().to_string();
        let target_err = |source| {
            let target = shown.clone();
            (RunError::Target { target, source }, None)
        };
        let target = fsafe::open_dir(&t.path).map_err(target_err)?;
        let st = fsafe::fstat(target.as_raw_fd()).map_err(target_err)?;
        let placement = place(&t.path, st.st_dev, inp.roots, inp.topology.as_deref())
            .map_err(|e| (e.into(), None))?;
        let placed = |e| (e, Some(placement.clone()));
        let stat = statfs::fstatvfs(&target).map_err(|source| {
            placed(RunError::Statvfs {
                target: shown.clone(),
                source,
            })
        })?;
        let fs_type = statfs::fs_type(&target).map_err(|source| {
            placed(RunError::Statfs {
                target: shown.clone(),
                source,
            })
        })?;
        let exists = fsafe::exists_at(&target, fsafe::PROBE_DIR);
        Ok(Run {
            seen: Observed {
                placement,
                fs_type,
                stat,
                dir: ProbeDir::Unopened { exists },
                utilization_before: None,
                intent: None,
            },
            budget_key: budget::key(&shown, inp.hand),
            shown,
            target,
            dir: None,
            file: None,
            removed: Vec::new(),
            now: unix_now(),
            context: RunContext::default(),
        })
    }

    /// Opens (creating it) and locks the probe directory, removes leftovers and looks inside,
    /// at the probe file and at the budget.
    fn enter(&mut self, state_dir: &Path) -> Result<(), RunError> {
        let dir = match fsafe::open_probe_dir(&self.target, &self.shown) {
            Ok(d) => d,
            Err(e) => {
                self.seen.dir = ProbeDir::Refused(e);
                return Ok(());
            }
        };
        let dir_shown = self.dir_shown();
        // So the package's purge finds it (and its probe file) again.
        if let Err(e) = super::dirs::remember(state_dir, &dir_shown) {
            tracing::debug!("{}: {e}", super::dirs::path(state_dir).display());
        }
        // One run per target at a time, across processes (the daemon and `probe run`): held
        // until `dir` is closed at the end of this run. Without it a second run would take the
        // first one's live files for leftovers, and both could pass the space gate for one file.
        match fsafe::flock_exclusive(dir.as_raw_fd(), false) {
            Ok(true) => {}
            Ok(false) => {
                self.seen.dir = ProbeDir::Locked;
                return Ok(());
            }
            Err(source) => {
                return Err(RunError::Flock {
                    dir: dir_shown,
                    source,
                });
            }
        }
        // (Where freeing is deferred, as on XFS and btrfs, statvfs may not show the space yet:
        // the run is then skipped as low_space and the next one sees it. The safe side.)
        self.removed = match fsafe::remove_leftovers(&dir, &dir_shown) {
            Ok(r) => r,
            Err(e) => {
                self.seen.dir = ProbeDir::Uncleared(e);
                return Ok(());
            }
        };
        let stat = if self.removed.is_empty() {
            self.seen.stat
        } else {
            tracing::info!(target = %self.shown, "removed leftovers of an interrupted probe run: {:?}", self.removed);
            statfs::fstatvfs(&self.target).map_err(|source| RunError::Statvfs {
                target: self.shown.clone(),
                source,
            })?
        };
        let file_shown = self.file_shown();
        let file = match fsafe::openat(&dir, fsafe::PROBE_FILE, libc::O_RDWR | libc::O_DIRECT, 0) {
            Ok(fd) => match fsafe::check_file(&file_shown, &fd) {
                Ok(st) => {
                    self.file = Some(fd);
                    ProbeFile::Sound {
                        size: st.st_size as u64,
                        // st_blocks counts 512-byte units whatever the filesystem's block size.
                        allocated: (st.st_blocks as u64).saturating_mul(512),
                    }
                }
                Err(e) => ProbeFile::Refused(e),
            },
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => ProbeFile::Absent,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => ProbeFile::Symlink,
            Err(e) => ProbeFile::Unopenable(e),
        };
        let usage = budget::load(state_dir).map(|b| {
            let u = b.targets.get(&self.budget_key).cloned().unwrap_or_default();
            u.at(self.now)
        });
        self.dir = Some(dir);
        self.seen.dir = ProbeDir::Ready { stat, file, usage };
        Ok(())
    }

    /// Removes the probe file: of another size than configured, or given back on a filesystem
    /// too full for a run.
    fn remove_stale(&mut self) -> Result<(), RunError> {
        self.file = None;
        let path = self.file_shown();
        let (Some(dir), ProbeDir::Ready { file, .. }) = (&self.dir, &mut self.seen.dir) else {
            unreachable!("plan removes a probe file only in an entered directory");
        };
        fsafe::unlinkat(dir, fsafe::PROBE_FILE)
            .map_err(|source| RunError::Path { path, source })?;
        *file = ProbeFile::Absent;
        Ok(())
    }

    /// The busy gate's figure: what the diskstats collector saw recently, and our own short
    /// look right now; also the drive's recent history for the run's context.
    fn measure_busy(&mut self, inp: &RunInputs) {
        let max = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => Some(f64::max(x, y)),
            (x, y) => x.or(y),
        };
        let placement = &self.seen.placement;
        let now = self.now;
        let mut util = None;
        if let Some(shared) = inp.shared {
            for d in &placement.drives {
                if let Some(a) = shared.disk_activity(d) {
                    if d == placement.device() {
                        let (since, written) = discard_context(&a, now);
                        self.context.since_discard_seconds = since;
                        self.context.idle_seconds = a.idle.seconds_at(now);
                        self.context.written_since_discard_bytes = written;
                    }
                    if now - a.updated_unix < 600.0 {
                        util = max(util, a.utilization_ratio);
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
                util = max(util, utilization(&b, &a, t0.elapsed().as_secs_f64()));
            }
        }
        self.seen.utilization_before = util;
        self.context.utilization_before_ratio = util;
    }

    /// A fresh statvfs of the target.
    fn statvfs(&self) -> Result<FsStat, RunError> {
        statfs::fstatvfs(&self.target).map_err(|source| RunError::Statvfs {
            target: self.shown.clone(),
            source,
        })
    }

    /// Writes: the probe file when the plan says so, then the kinds; settles the budget the
    /// plan had the intent of recorded.
    fn carry_out(
        mut self,
        t: &TargetConfig,
        inp: &RunInputs,
        p: RunPlan,
        at: &dyn Fn(Stage),
    ) -> Outcome {
        let placement = self.seen.placement.clone();
        let pl = Some(placement.clone());
        let (Some(dir), ProbeDir::Ready { stat, .. }) = (&self.dir, &self.seen.dir) else {
            unreachable!("plan runs only in an entered directory");
        };
        self.context.fill_ratio = stat.fill_ratio();
        let file_shown = self.file_shown();
        let in_place = overwrites_in_place(self.seen.fs_type);
        let t0 = Instant::now();
        // From here on what was written is settled in the budget, whatever the way out.
        let settle = |written: u64| {
            let secs = t0.elapsed().as_secs_f64();
            if let Err(e) = budget::finish(
                inp.state_dir,
                &self.budget_key,
                self.now,
                p.planned_bytes,
                written,
                secs,
            ) {
                // The intent stays counted in full: an overcount, on the safe side.
                tracing::warn!(
                    target = %self.shown,
                    "probe budget: the run's completion not saved, its planned {} bytes stay counted: {e}",
                    p.planned_bytes
                );
            }
        };
        at(Stage::Writing);
        // From here on we write: a marker tells the next start that this run didn't finish.
        let _marker = match fsafe::MarkerGuard::create(dir) {
            Ok(m) => m,
            Err(source) => {
                settle(0);
                let path = format!("{}/{}", self.dir_shown(), fsafe::RUN_MARKER);
                return error(t, pl, RunError::Path { path, source });
            }
        };
        if t.idle_priority
            && let Err(e) = io::set_idle_priority()
        {
            tracing::debug!("ioprio_set: {e}");
        }
        let started = unix_now();
        let ticks_before = io_ticks_ms(inp.roots, &placement.drives);
        let mut rng = io::Rng::seeded();
        let mut written = 0u64;
        let fd = match self.file.take() {
            Some(fd) => fd,
            None => match self.create_probe_file(t, &p, dir, &file_shown, &mut rng, at) {
                Ok(fd) => {
                    written += p.create_bytes;
                    fd
                }
                Err((failed, wrote)) => {
                    settle(wrote);
                    return match failed {
                        Failed::Skip(s) => Outcome::Skipped(s),
                        Failed::Error(e) => error(t, pl, e),
                    };
                }
            },
        };
        let mut results = Vec::new();
        let io_err = |what, source| RunError::File {
            file: file_shown.clone(),
            what,
            source,
        };
        // A few untimed reads first: the first I/Os of a process that was idle pay for waking
        // the I/O path up, which a busy database does not (fio's ramp_time serves the same end).
        let mut failure = io::rand_read(&fd, p.file_bytes, WARM_UP_READS, &mut rng)
            .err()
            .map(|e| Failed::Error(io_err("warm-up read", e)));
        for k in p.kinds.into_iter() {
            if failure.is_some() {
                break;
            }
            // Where every write allocates, each writing kind is an allocation of its own: the
            // space is judged again right before it.
            let bytes = t.planned_bytes(k);
            if !in_place && bytes > 0 {
                let fresh = match self.statvfs() {
                    Ok(s) => s,
                    Err(e) => {
                        failure = Some(Failed::Error(e));
                        break;
                    }
                };
                if let Err(s) = space_before_allocation(t, &placement, &fresh, k.as_str(), bytes) {
                    failure = Some(Failed::Skip(s));
                    break;
                }
            }
            match run_kind(t, p.file_bytes, k, &fd, dir, &mut rng) {
                Ok(r) => {
                    written += r.bytes_written;
                    results.push(r);
                }
                Err(e) => {
                    // Part of its writes may have landed: counted in full.
                    written += bytes;
                    failure = Some(Failed::Error(io_err(k.as_str(), e)));
                }
            }
        }
        let duration = t0.elapsed().as_secs_f64();
        if let Some(b) = ticks_before
            && let Some(a) = io_ticks_ms(inp.roots, &placement.drives)
        {
            self.context.utilization_ratio = utilization(&b, &a, duration);
        }
        settle(written);
        match failure {
            Some(Failed::Skip(s)) => return Outcome::Skipped(s),
            Some(Failed::Error(e)) => return error(t, pl, e),
            None => {}
        }
        Outcome::Ran(RunReport {
            target: t.path.clone(),
            placement,
            context: self.context,
            started_unix: started,
            duration_seconds: duration,
            written_bytes: written,
            file_created_bytes: p.create_bytes,
            removed_leftovers: self.removed,
            results,
            budget_skipped: p.budget_skipped,
        })
    }

    /// Creates the probe file under a temporary name, allocates it in one call and fills it,
    /// then renames it: a crash leaves only the partial file, which the next start removes. The
    /// space is judged again right before the allocation and right after it; an allocation that
    /// took the filesystem under the floor (another writer was quicker) is given back. On
    /// failure, also the bytes that may have been written.
    fn create_probe_file(
        &self,
        t: &TargetConfig,
        p: &RunPlan,
        dir: &OwnedFd,
        file_shown: &str,
        rng: &mut io::Rng,
        at: &dyn Fn(Stage),
    ) -> Result<OwnedFd, (Failed, u64)> {
        let err = |what, source| {
            let file = file_shown.to_string();
            (Failed::Error(RunError::File { file, what, source }), 0)
        };
        let placement = &self.seen.placement;
        let what = format!("creating the {}-byte probe file", p.file_bytes);
        let fresh = self.statvfs().map_err(|e| (Failed::Error(e), 0))?;
        space_before_allocation(t, placement, &fresh, &what, p.file_bytes)
            .map_err(|s| (Failed::Skip(s), 0))?;
        at(Stage::Allocating);
        let partial = fsafe::PARTIAL_FILE;
        let fd = fsafe::openat(
            dir,
            partial,
            libc::O_RDWR | libc::O_DIRECT | libc::O_CREAT | libc::O_EXCL,
            0o600,
        )
        .map_err(|e| err("create", e))?;
        // Given back: the descriptor is closed with the name, or the blocks stay taken.
        let roll_back = |fd: OwnedFd| {
            drop(fd);
            let _ = fsafe::unlinkat(dir, partial);
        };
        // One call, all or nothing: posix_fallocate would fall back to writing zeros block by
        // block where the filesystem can't, taking space piecemeal past any check.
        // SAFETY: valid fd.
        let r = unsafe { libc::fallocate(fd.as_raw_fd(), 0, 0, p.file_bytes as libc::off_t) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            roll_back(fd);
            if e.raw_os_error() == Some(libc::ENOSPC) {
                // Another writer took the room since the re-check: nothing was allocated.
                let s = Skip {
                    target: t.path.clone(),
                    placement: Some(placement.clone()),
                    reason: SkipReason::LowSpace,
                    detail: format!("{file_shown}: fallocate: {e}; nothing allocated"),
                };
                return Err((Failed::Skip(s), 0));
            }
            return Err(err("fallocate", e));
        }
        let after = match self.statvfs() {
            Ok(s) => s,
            Err(e) => {
                roll_back(fd);
                return Err((Failed::Error(e), 0));
            }
        };
        if let Err(s) = space_after_allocation(t, placement, &after, &what) {
            roll_back(fd);
            return Err((Failed::Skip(s), 0));
        }
        if let Err(e) = io::fill(&fd, p.file_bytes, rng) {
            roll_back(fd);
            // Part of it may be on the drive: counted in full.
            return Err((err("filling", e).0, p.create_bytes));
        }
        fsafe::renameat(dir, partial, fsafe::PROBE_FILE)
            .map_err(|e| (err("rename", e).0, p.create_bytes))?;
        fsafe::fsync_dir(dir);
        Ok(fd)
    }
}

/// How a run that had begun to write ended early.
enum Failed {
    /// A gate judged again said no (the space, re-checked before an allocation).
    Skip(Skip),
    Error(RunError),
}

fn run_kind(
    t: &TargetConfig,
    size: u64,
    k: ProbeKind,
    fd: &OwnedFd,
    dir: &OwnedFd,
    rng: &mut io::Rng,
) -> std::io::Result<KindResult> {
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
        p50_seconds: measurable(sorted.len(), 0.5).then(|| quantile(&sorted, 0.5)),
        p99_seconds: measurable(sorted.len(), 0.99).then(|| quantile(&sorted, 0.99)),
        max_seconds: quantile(&sorted, 1.0),
        throughput_bytes_per_second: throughput,
        latencies: lat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An fstrim from 100,000 to 100,010, sampled by diskstats every second: the drive's activity as
    /// a run starting at each moment finds it, and what the run's context says.
    #[test]
    fn a_run_counts_as_after_a_discard_only_if_it_started_after_the_discard_ended() {
        use crate::shared::DiskActivity;
        let seen = |last: Option<f64>, discarding: bool| DiskActivity {
            last_discard_unix: last,
            discarding,
            written_since_discard_bytes: last.map(|_| 4096),
            ..DiskActivity::default()
        };
        let cases = [
            // Before the fstrim: the previous discard, a day earlier.
            (
                "before the trim",
                seen(Some(13_600.0), false),
                99_999.5,
                Some(86_399.5),
                Some(4096),
            ),
            // Its first sample saw discards grow: the run shares the drive with the trim.
            (
                "the trim's first second",
                seen(Some(100_001.0), true),
                100_001.5,
                None,
                None,
            ),
            (
                "the trim's last second",
                seen(Some(100_010.0), true),
                100_010.5,
                None,
                None,
            ),
            // The next sample saw no growth: the burst ended at its last growth, 100,010.
            (
                "after the trim ended",
                seen(Some(100_010.0), false),
                100_011.5,
                Some(1.5),
                Some(4096),
            ),
            (
                "no discard ever seen",
                seen(None, false),
                100_011.5,
                None,
                None,
            ),
        ];
        for (what, a, start, since, written) in cases {
            assert_eq!(discard_context(&a, start), (since, written), "{what}");
        }
    }

    /// Symlinks resolved as the kernel would, except on a filesystem that may hang: a directory
    /// the mount table says is an NFS mount has a link inside that is not read (as the
    /// mount table tells, whatever is really there).
    #[test]
    fn symlinks_are_resolved_except_below_a_mount_that_may_hang() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(d.join("real/sub")).unwrap();
        std::fs::create_dir_all(d.join("nfs")).unwrap();
        symlink(d.join("real"), d.join("abs")).unwrap();
        symlink("real/sub", d.join("rel")).unwrap();
        symlink("nfs", d.join("to-nfs")).unwrap();
        symlink(d.join("real"), d.join("nfs/inner")).unwrap();
        symlink(d.join("loop"), d.join("loop")).unwrap();
        let table = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:50 / {nfs} rw - nfs4 srv:/export rw\n",
            nfs = d.join("nfs").display()
        );
        let mounts = crate::procfs::mountinfo::parse_mountinfo(&table).0;
        let roots = Roots::default();
        let r = |p: &str| resolve_symlinks(&d.join(p), &mounts, &roots);
        assert_eq!(r("abs/pg"), d.join("real/pg"));
        assert_eq!(r("rel/../sub/./x"), d.join("real/sub/x"));
        assert_eq!(r("to-nfs/inner/x"), d.join("nfs/inner/x"), "read on NFS");
        assert_eq!(r("missing/x"), d.join("missing/x"));
        // A loop ends at the kernel's limit, as written from there.
        assert!(r("loop/x").starts_with(&d), "{:?}", r("loop/x"));
        // Labelled by the deepest mount of the real path: the NFS mount for the link into it.
        let (m, _) = deepest_mount(&r("to-nfs/inner/x"), &mounts, &roots).unwrap();
        assert_eq!(m.fstype, "nfs4");
        let (m, _) = deepest_mount(&r("abs/pg"), &mounts, &roots).unwrap();
        assert_eq!(m.mount_point, "/");
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
}
