//! The probe's safety decisions: a pure function of what the runner observed and what the target
//! asks for, table-tested without root. No system calls here; `run` gathers and carries out.
//!
//! The gates, in order: read-only; short of space with no probe directory yet (not even the
//! directory is made); the probe directory refused, read-only, locked by another run or not
//! cleared of leftovers; the probe file refused or unreadable (one of another size is removed and
//! made anew); space; the budget file unreadable; this hour's time budget; today's byte budget for
//! the probe file, then for each kind; the drive busy; the run's intent recorded in the budget.
//!
//! The space gate guards what a run consumes. Rewriting the existing, fully allocated probe file
//! on a filesystem that overwrites in place (ext4, XFS) consumes nothing: it runs while at least
//! `rewrite_reserve_bytes` stay available, so the probes keep watching a drive at 97% full, where
//! drives degrade most. Anything that allocates (creating the probe file, or every write on a
//! copy-on-write or log-structured filesystem, where an overwrite lands in new blocks) must leave
//! the floor, `max(free_floor_ratio × size, free_floor_bytes)`, free once its bytes are taken.

use super::budget::{BudgetError, Usage};
use super::fsafe::{self, LeftoverError, SafetyError};
use super::{Placement, ProbeKind, Skip, SkipReason, TargetConfig};
use crate::statfs::{FsStat, FsType};
use std::ops::ControlFlow;

/// What a run asks for: the target's config and the kinds due now.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub target: &'a TargetConfig,
    pub kinds: &'a [ProbeKind],
}

/// What the runner saw of the target, filled in as the run goes (see [`ProbeDir`]).
#[derive(Debug)]
pub struct Observed {
    pub placement: Placement,
    /// statfs(2) f_type of the target's filesystem.
    pub fs_type: FsType,
    /// statvfs of the target before anything was touched (the read-only flag included).
    pub stat: FsStat,
    /// The probe directory, and what is in it once it was opened.
    pub dir: ProbeDir,
    /// The busiest drive's utilization just before the run; None when unknown or not measured
    /// yet (the runner measures it, a second's look, only once every other gate has passed).
    pub utilization_before: Option<f64>,
    /// Whether the run's intent (its planned bytes) was recorded in the budget; None until the
    /// runner tried ([`Plan::Record`]).
    pub intent: Option<Result<(), BudgetError>>,
}

/// The probe directory (`<target>/.ssdwatch-probe`).
#[derive(Debug)]
pub enum ProbeDir {
    /// Not opened yet; whether it exists (as anything).
    Unopened { exists: bool },
    /// Opening or creating it failed, or it was refused (symlink, owner, mode).
    Refused(SafetyError),
    /// Another run, of this process or another, holds its lock.
    Locked,
    /// A leftover of an interrupted run could not be removed.
    Uncleared(LeftoverError),
    /// Opened, locked and cleared of leftovers.
    Ready {
        /// statvfs once leftovers were removed (a half-made probe file may have filled it).
        stat: FsStat,
        file: ProbeFile,
        /// This target's budget usage (this UTC day's bytes, this hour's seconds), read under
        /// the lock: a run that held it until a moment ago has recorded what it wrote.
        usage: Result<Usage, BudgetError>,
    },
}

/// The probe file, as opened (without following a symlink) and checked in the locked directory.
#[derive(Debug)]
pub enum ProbeFile {
    Absent,
    /// Regular, ours, one link, of this many bytes, `allocated` of them backed by blocks
    /// (st_blocks × 512).
    Sound {
        size: u64,
        allocated: u64,
    },
    /// A symlink stands in its place.
    Symlink,
    /// Opened but refused (not regular, owner, links).
    Refused(SafetyError),
    /// Could not be opened.
    Unopenable(std::io::Error),
}

/// What the runner does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The gates outside the probe directory passed: open it (creating it when absent), lock it,
    /// remove leftovers, and look inside.
    Enter,
    /// The probe file has another size than configured: remove it; it is made anew.
    RemoveStale,
    /// The filesystem is too full for a run while the probe file holds its bytes: remove it,
    /// so the space goes back to the database. It is made again only once the file fits above
    /// the floor, so it does not come and go.
    GiveBack,
    /// Every gate passed: record in the budget that the run is about to write this many bytes,
    /// before it writes any (a run killed midway is then counted, not forgotten).
    Record { bytes: u64 },
    /// Every gate passed.
    Run(RunPlan),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    /// The kinds to run, in the order asked.
    pub kinds: Vec<ProbeKind>,
    /// The kinds left out for lack of byte budget.
    pub budget_skipped: Vec<ProbeKind>,
    /// Bytes of probe file to create before the run; 0 when the existing one serves.
    pub create_bytes: u64,
    /// The probe file's size on this filesystem ([`probe_file_bytes`]).
    pub file_bytes: u64,
    /// What the run may write at most (the probe file's creation and the kinds'), as recorded
    /// in the budget before it started.
    pub planned_bytes: u64,
}

/// The probe file is at most this fraction (1/FILE_FRACTION) of its filesystem.
pub const FILE_FRACTION: u64 = 32;

/// The space floor, for a run that allocates, of a filesystem of `total` bytes.
pub fn floor_bytes(t: &TargetConfig, total: u64) -> u64 {
    ((total as f64 * t.free_floor_ratio) as u64).max(t.free_floor_bytes)
}

/// The probe file's size on a filesystem of `total` bytes: the configured size, capped at
/// 1/[`FILE_FRACTION`] of the filesystem rounded down to whole `seq_write_block_bytes`, and at
/// least one such block (a sequential burst never writes past the file's end).
pub fn probe_file_bytes(t: &TargetConfig, total: u64) -> u64 {
    let block = t.seq_write_block_bytes.max(1);
    let cap = (total / FILE_FRACTION) / block * block;
    t.file_size_bytes.min(cap.max(block))
}

/// Whether an overwrite of allocated blocks stays in those blocks. ext4 (ext2/3 share its magic)
/// and XFS overwrite in place; btrfs, ZFS and bcachefs copy on write, f2fs is log-structured
/// (overwrites go to new segments), and a filesystem we don't know is taken to allocate too.
/// (XFS with a reflinked copy of the probe file would copy on write; ssdwatch never makes one.)
pub fn overwrites_in_place(fs: FsType) -> bool {
    matches!(fs, FsType::EXT4 | FsType::XFS)
}

/// The next step of a run on what has been observed so far, or why it doesn't happen: the
/// gates in order, each a method of [`Gates`].
pub fn plan(o: &Observed, spec: &Spec) -> Result<Plan, Skip> {
    let g = Gates::new(o, spec);
    g.writable()?;
    let (stat, file, usage) = match g.probe_dir()? {
        ControlFlow::Continue(ready) => ready,
        ControlFlow::Break(next) => return Ok(next),
    };
    let file_bytes = probe_file_bytes(g.t, stat.size_bytes());
    let (create_bytes, allocated) = match g.probe_file(file, file_bytes)? {
        ControlFlow::Continue(sizes) => sizes,
        ControlFlow::Break(next) => return Ok(next),
    };
    if let Err(skip) = g.space(stat, file_bytes, create_bytes, allocated) {
        // The run is refused for space while the file holds its bytes: under the reserve where
        // it is rewritten in place (ext4, XFS probe on under the floor), else under the floor.
        // Not when only the run's own writes would cross the floor: the file, once given back,
        // would be made again at the next run.
        let rewrite_in_place =
            overwrites_in_place(o.fs_type) && create_bytes == 0 && allocated >= file_bytes;
        if skip.reason == SkipReason::LowSpace
            && matches!(file, ProbeFile::Sound { .. })
            && (rewrite_in_place || stat.avail_bytes() < g.floor)
        {
            return Ok(Plan::GiveBack);
        }
        return Err(skip);
    }
    let (kinds, budget_skipped) = g.budget(usage, create_bytes)?;
    g.not_busy()?;
    // The budget is recorded before the first write, or nothing is written: a run that can't
    // be counted would let the probes write without a cap.
    let planned_bytes = create_bytes + kinds.iter().map(|k| g.t.planned_bytes(*k)).sum::<u64>();
    if let ControlFlow::Break(next) = g.intent_recorded(planned_bytes)? {
        return Ok(next);
    }
    Ok(Plan::Run(RunPlan {
        kinds,
        budget_skipped,
        create_bytes,
        file_bytes,
        planned_bytes,
    }))
}

/// What the gates of [`plan`] judge, and how a skip names the target.
struct Gates<'a> {
    o: &'a Observed,
    spec: &'a Spec<'a>,
    t: &'a TargetConfig,
    shown: std::path::Display<'a>,
    dir_shown: String,
    file_shown: String,
    /// The space floor for a run that allocates ([`floor_bytes`]).
    floor: u64,
}

/// The probe directory, opened, locked and cleared: statvfs after the clearing, the probe file,
/// the budget usage.
type Ready<'a> = (&'a FsStat, &'a ProbeFile, &'a Result<Usage, BudgetError>);

impl<'a> Gates<'a> {
    fn new(o: &'a Observed, spec: &'a Spec<'a>) -> Gates<'a> {
        let t = spec.target;
        let shown = t.path.display();
        let dir_shown = format!("{shown}/{}", fsafe::PROBE_DIR);
        let file_shown = format!("{dir_shown}/{}", fsafe::PROBE_FILE);
        Gates {
            o,
            spec,
            t,
            shown,
            dir_shown,
            file_shown,
            floor: floor_bytes(t, o.stat.size_bytes()),
        }
    }

    fn skip(&self, reason: SkipReason, detail: String) -> Skip {
        Skip {
            target: self.t.path.clone(),
            placement: Some(self.o.placement.clone()),
            reason,
            detail,
        }
    }

    fn low_space(&self, avail: u64) -> Skip {
        let (shown, floor) = (&self.shown, self.floor);
        self.skip(
            SkipReason::LowSpace,
            format!("{shown}: {avail} bytes available, under the floor of {floor}"),
        )
    }

    fn writable(&self) -> Result<(), Skip> {
        if self.o.stat.readonly {
            let shown = &self.shown;
            return Err(self.skip(
                SkipReason::Readonly,
                format!("{shown}: read-only filesystem"),
            ));
        }
        Ok(())
    }

    /// The probe directory: entered (made when absent) unless short of space with none yet;
    /// refused, locked by another run or not cleared of leftovers; else ready.
    fn probe_dir(&self) -> Result<ControlFlow<Plan, Ready<'a>>, Skip> {
        let o = self.o;
        let dir_shown = &self.dir_shown;
        let ready = match &o.dir {
            // Short of space and no probe directory: nothing of ours to clean up, and not even a
            // directory gets created.
            ProbeDir::Unopened { exists: false } if o.stat.avail_bytes() < self.floor => {
                return Err(self.low_space(o.stat.avail_bytes()));
            }
            ProbeDir::Unopened { .. } => return Ok(ControlFlow::Break(Plan::Enter)),
            ProbeDir::Refused(SafetyError::Io { path, source })
                if source.raw_os_error() == Some(libc::EROFS) =>
            {
                return Err(self.skip(SkipReason::Readonly, format!("{path}: {source}")));
            }
            ProbeDir::Refused(e @ SafetyError::Io { .. }) => {
                return Err(self.skip(SkipReason::Error, e.to_string()));
            }
            ProbeDir::Refused(e) => return Err(self.skip(SkipReason::Unsafe, e.to_string())),
            ProbeDir::Locked => {
                return Err(self.skip(
                    SkipReason::Busy,
                    format!("{dir_shown}: another probe run on this target is in progress"),
                ));
            }
            ProbeDir::Uncleared(e) => return Err(self.skip(SkipReason::Unsafe, e.to_string())),
            ProbeDir::Ready { stat, file, usage } => (stat, file, usage),
        };
        Ok(ControlFlow::Continue(ready))
    }

    /// The probe file: (bytes to create, bytes already allocated) when it serves or is absent;
    /// removed when of another size than `file_bytes`; refused when not sound.
    fn probe_file(
        &self,
        file: &ProbeFile,
        file_bytes: u64,
    ) -> Result<ControlFlow<Plan, (u64, u64)>, Skip> {
        let file_shown = &self.file_shown;
        let sizes = match file {
            ProbeFile::Absent => (file_bytes, 0),
            ProbeFile::Sound { size, allocated } if *size == file_bytes => (0, *allocated),
            // Resized in the config (or the filesystem): removed, then judged as a new file.
            ProbeFile::Sound { .. } => return Ok(ControlFlow::Break(Plan::RemoveStale)),
            ProbeFile::Symlink => {
                return Err(self.skip(
                    SkipReason::Unsafe,
                    format!("{file_shown} is a symlink; refusing it"),
                ));
            }
            ProbeFile::Refused(e) => return Err(self.skip(SkipReason::Unsafe, e.to_string())),
            ProbeFile::Unopenable(e) => {
                return Err(self.skip(SkipReason::Error, format!("{file_shown}: {e}")));
            }
        };
        Ok(ControlFlow::Continue(sizes))
    }

    /// Judged once leftovers are gone (a half-created probe file may be what filled it), on what
    /// this run would consume.
    fn space(
        &self,
        stat: &FsStat,
        file_bytes: u64,
        create_bytes: u64,
        allocated: u64,
    ) -> Result<(), Skip> {
        let (o, t, spec) = (self.o, self.t, self.spec);
        let (shown, floor) = (&self.shown, self.floor);
        let avail = stat.avail_bytes();
        let in_place = overwrites_in_place(o.fs_type);
        if create_bytes == 0 && in_place && allocated >= file_bytes {
            let reserve = t.rewrite_reserve_bytes;
            if avail < reserve {
                return Err(self.skip(
                    SkipReason::LowSpace,
                    format!(
                        "{shown}: {avail} bytes available, under the reserve of {reserve} kept even for rewriting the probe file in place"
                    ),
                ));
            }
        } else if avail < floor {
            return Err(self.low_space(avail));
        } else if create_bytes > 0 && avail.saturating_sub(create_bytes) < floor {
            return Err(self.skip(
                SkipReason::LowSpace,
                format!(
                    "{shown}: creating the {create_bytes}-byte probe file would leave {} bytes, under the floor of {floor}",
                    avail.saturating_sub(create_bytes)
                ),
            ));
        } else if !in_place {
            // Every write allocates here (until the old blocks are freed after the commit): the
            // run's own bytes count as well as the file's.
            let writes: u64 = spec.kinds.iter().map(|k| t.planned_bytes(*k)).sum();
            let left = avail.saturating_sub(create_bytes + writes);
            if left < floor {
                return Err(self.skip(
                    SkipReason::LowSpace,
                    format!(
                        "{shown}: on {} every write allocates; the run's {} bytes would leave {left} bytes, under the floor of {floor}",
                        fs_name(o.fs_type),
                        create_bytes + writes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Budget: time per hour, then bytes per day; returns the kinds that fit today's bytes and
    /// those left out. A budget that can't be read stops the probes: they can't know what they
    /// may write.
    fn budget(
        &self,
        usage: &Result<Usage, BudgetError>,
        create_bytes: u64,
    ) -> Result<(Vec<ProbeKind>, Vec<ProbeKind>), Skip> {
        let (t, spec, shown) = (self.t, self.spec, &self.shown);
        let usage = match usage {
            Ok(u) => u,
            Err(e) => return Err(self.skip(SkipReason::Error, e.to_string())),
        };
        if usage.seconds >= t.budget_time_per_hour.as_secs_f64() {
            return Err(self.skip(
                SkipReason::Budget,
                format!(
                    "{shown}: {:.1} s of probing this hour already",
                    usage.seconds
                ),
            ));
        }
        let mut left = t.budget_bytes_per_day.saturating_sub(usage.written_bytes);
        if create_bytes > left {
            return Err(self.skip(
                SkipReason::Budget,
                format!(
                    "{shown}: creating the probe file ({create_bytes} bytes) exceeds today's write budget ({left} bytes left)"
                ),
            ));
        }
        left -= create_bytes;
        let mut kinds = Vec::new();
        let mut budget_skipped = Vec::new();
        for k in spec.kinds {
            let b = t.planned_bytes(*k);
            if b <= left {
                left -= b;
                kinds.push(*k);
            } else {
                budget_skipped.push(*k);
            }
        }
        if kinds.is_empty() {
            return Err(self.skip(
                SkipReason::Budget,
                format!(
                    "{shown}: today's write budget is spent ({} of {} bytes)",
                    usage.written_bytes, t.budget_bytes_per_day
                ),
            ));
        }
        Ok((kinds, budget_skipped))
    }

    fn not_busy(&self) -> Result<(), Skip> {
        let (o, t, shown) = (self.o, self.t, &self.shown);
        if let Some(u) = o.utilization_before
            && u > t.busy_threshold
        {
            return Err(self.skip(
                SkipReason::Busy,
                format!(
                    "{shown}: drive {} {:.0}% busy, above the {:.0}% threshold",
                    o.placement.device(),
                    u * 100.0,
                    t.busy_threshold * 100.0
                ),
            ));
        }
        Ok(())
    }

    /// The run's intent of `planned_bytes` in the budget: to be recorded first, recorded, or
    /// not recordable (then nothing is written).
    fn intent_recorded(&self, planned_bytes: u64) -> Result<ControlFlow<Plan>, Skip> {
        let shown = &self.shown;
        match &self.o.intent {
            None => Ok(ControlFlow::Break(Plan::Record {
                bytes: planned_bytes,
            })),
            Some(Err(e)) => Err(self.skip(
                SkipReason::BudgetUnrecorded,
                format!("{e}; not probing {shown}: its writes could not be counted"),
            )),
            Some(Ok(())) => Ok(ControlFlow::Continue(())),
        }
    }
}

/// The space gate judged again on a statvfs taken right before an allocation of `allocating`
/// bytes (creating the probe file; a writing kind on a filesystem that doesn't overwrite in
/// place): what the plan saw may be a busy window old, and a database writing meanwhile must not
/// be the one to find the floor gone.
pub fn space_before_allocation(
    t: &TargetConfig,
    placement: &Placement,
    stat: &FsStat,
    what: &str,
    allocating: u64,
) -> Result<(), Skip> {
    let floor = floor_bytes(t, stat.size_bytes());
    let avail = stat.avail_bytes();
    let left = avail.saturating_sub(allocating);
    if left >= floor {
        return Ok(());
    }
    Err(Skip {
        target: t.path.clone(),
        placement: Some(placement.clone()),
        reason: SkipReason::LowSpace,
        detail: format!(
            "{}: right before {what}, {avail} bytes available; its {allocating} bytes would leave {left}, under the floor of {floor}",
            t.path.display()
        ),
    })
}

/// The space gate once an allocation is made (statvfs right after it): under the floor, another
/// writer took the room between the re-check and the allocation, and what was allocated is given
/// back.
pub fn space_after_allocation(
    t: &TargetConfig,
    placement: &Placement,
    stat: &FsStat,
    what: &str,
) -> Result<(), Skip> {
    let floor = floor_bytes(t, stat.size_bytes());
    let avail = stat.avail_bytes();
    if avail >= floor {
        return Ok(());
    }
    Err(Skip {
        target: t.path.clone(),
        placement: Some(placement.clone()),
        reason: SkipReason::LowSpace,
        detail: format!(
            "{}: after {what}, {avail} bytes available, under the floor of {floor} (another writer took the room meanwhile); rolled back",
            t.path.display()
        ),
    })
}

fn fs_name(fs: FsType) -> String {
    fs.name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("filesystem type {:#x}", fs.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProbeKind::*;
    use std::io::Error as IoError;
    use std::path::Path;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// What a case starts from: a 100 GiB ext4 half full (so a 5 GiB floor), the probe
    /// directory entered with a sound probe file of the configured 32 MiB, nothing spent, the
    /// drive not measured; the default target at /data (but 16 writes per kind and 64 MiB a day)
    /// asking for every kind.
    struct Given {
        o: Observed,
        t: TargetConfig,
        kinds: Vec<ProbeKind>,
    }

    fn stat(avail: u64) -> FsStat {
        stat_of(100 * GIB, avail)
    }

    fn stat_of(total: u64, avail: u64) -> FsStat {
        FsStat {
            frsize: 4096,
            blocks: total / 4096,
            bfree: avail / 4096,
            bavail: avail / 4096,
            ..FsStat::default()
        }
    }

    fn given() -> Given {
        // Round figures for the budget cases: 16 writes per kind, 64 MiB a day.
        let t = TargetConfig {
            path: "/data".into(),
            write_ops: 16,
            budget_bytes_per_day: 64 * MIB,
            ..TargetConfig::default()
        };
        Given {
            o: Observed {
                placement: Placement {
                    mountpoint: "/data".into(),
                    drives: vec!["nvme0n1".into()],
                },
                fs_type: FsType::EXT4,
                stat: stat(50 * GIB),
                dir: ProbeDir::Ready {
                    stat: stat(50 * GIB),
                    file: ProbeFile::Sound {
                        size: t.file_size_bytes,
                        allocated: t.file_size_bytes,
                    },
                    usage: Ok(Usage::default()),
                },
                utilization_before: None,
                // Recorded: the cases judge the gates before it (see the intent cases).
                intent: Some(Ok(())),
            },
            kinds: ProbeKind::ALL.to_vec(),
            t,
        }
    }

    fn file(g: &mut Given, f: ProbeFile) {
        if let ProbeDir::Ready { file, .. } = &mut g.o.dir {
            *file = f;
        }
    }

    fn usage(g: &mut Given) -> &mut Result<Usage, BudgetError> {
        match &mut g.o.dir {
            ProbeDir::Ready { usage, .. } => usage,
            _ => unreachable!("the cases set the usage seen in an entered directory"),
        }
    }

    /// Sets the space available once leftovers were removed.
    fn avail_inside(g: &mut Given, avail: u64) {
        if let ProbeDir::Ready { stat: s, .. } = &mut g.o.dir {
            *s = stat(avail);
        }
    }

    fn io_error(path: &str, errno: i32) -> SafetyError {
        SafetyError::Io {
            path: path.into(),
            source: IoError::from_raw_os_error(errno),
        }
    }

    #[derive(Debug)]
    enum Want {
        Enter,
        RemoveStale,
        GiveBack,
        Record(u64),
        Run {
            kinds: &'static [ProbeKind],
            budget_skipped: &'static [ProbeKind],
            create_bytes: u64,
        },
        /// The reason and a part of the detail.
        Skip(SkipReason, &'static str),
    }

    const ALL_RUN: Want = Want::Run {
        kinds: &ProbeKind::ALL,
        budget_skipped: &[],
        create_bytes: 0,
    };
    const ALL_RUN_CREATING: Want = Want::Run {
        kinds: &ProbeKind::ALL,
        budget_skipped: &[],
        create_bytes: 32 * MIB,
    };

    type Case = (&'static str, fn(&mut Given), Want);

    /// Every gate, and where two apply, which one decides.
    const CASES: &[Case] = &[
        (
            "all is well: every kind runs on the existing file",
            |_| {},
            ALL_RUN,
        ),
        // Read-only.
        (
            "a read-only filesystem",
            |g| g.o.stat.readonly = true,
            Want::Skip(SkipReason::Readonly, "/data: read-only filesystem"),
        ),
        (
            "read-only is judged before space",
            |g| {
                g.o.stat = FsStat {
                    readonly: true,
                    ..stat(0)
                };
                g.o.dir = ProbeDir::Unopened { exists: false };
            },
            Want::Skip(SkipReason::Readonly, "read-only filesystem"),
        ),
        // Space before the probe directory.
        (
            "no probe directory and room: enter",
            |g| g.o.dir = ProbeDir::Unopened { exists: false },
            Want::Enter,
        ),
        (
            "no probe directory and short of space: not even the directory is made",
            |g| {
                g.o.stat = stat(GIB);
                g.o.dir = ProbeDir::Unopened { exists: false };
            },
            Want::Skip(
                SkipReason::LowSpace,
                "/data: 1073741824 bytes available, under the floor of 5368709120",
            ),
        ),
        (
            "short of space with a probe directory: enter, its leftovers may be the cause",
            |g| {
                g.o.stat = stat(GIB);
                g.o.dir = ProbeDir::Unopened { exists: true };
            },
            Want::Enter,
        ),
        (
            "the floor is free_floor_bytes on a small filesystem",
            |g| {
                g.o.stat = stat_of(GIB, 32 * MIB);
                g.o.dir = ProbeDir::Unopened { exists: false };
            },
            Want::Skip(SkipReason::LowSpace, "under the floor of 67108864"),
        ),
        (
            "ext4 at 97% with no probe directory: the file would have to be made, under the floor",
            |g| {
                g.o.stat = stat(3 * GIB);
                g.o.dir = ProbeDir::Unopened { exists: false };
            },
            Want::Skip(SkipReason::LowSpace, "under the floor of 5368709120"),
        ),
        // The probe directory.
        (
            "a probe directory that is a symlink",
            |g| {
                g.o.dir =
                    ProbeDir::Refused(SafetyError::NotADirectory("/data/.ssdwatch-probe".into()))
            },
            Want::Skip(
                SkipReason::Unsafe,
                "/data/.ssdwatch-probe is a symlink or not a directory",
            ),
        ),
        (
            "a probe directory of another owner",
            |g| {
                g.o.dir = ProbeDir::Refused(SafetyError::WrongOwner {
                    path: "/data/.ssdwatch-probe".into(),
                    uid: 54321,
                    ours: 0,
                })
            },
            Want::Skip(
                SkipReason::Unsafe,
                "owned by uid 54321, but this runs as root (uid 0): `chown -R 0: /data/.ssdwatch-probe` gives it over",
            ),
        ),
        (
            "a probe directory writable by others",
            |g| {
                g.o.dir = ProbeDir::Refused(SafetyError::Permissive("/data/.ssdwatch-probe".into()))
            },
            Want::Skip(SkipReason::Unsafe, "writable by group or others"),
        ),
        (
            "a probe directory that can't be made on a read-only mount",
            |g| g.o.dir = ProbeDir::Refused(io_error("/data/.ssdwatch-probe", libc::EROFS)),
            Want::Skip(
                SkipReason::Readonly,
                "/data/.ssdwatch-probe: Read-only file system",
            ),
        ),
        (
            "a probe directory that can't be made for another reason",
            |g| g.o.dir = ProbeDir::Refused(io_error("/data/.ssdwatch-probe", libc::EACCES)),
            Want::Skip(
                SkipReason::Error,
                "/data/.ssdwatch-probe: Permission denied",
            ),
        ),
        (
            "another run holds the probe directory",
            |g| g.o.dir = ProbeDir::Locked,
            Want::Skip(
                SkipReason::Busy,
                "/data/.ssdwatch-probe: another probe run on this target is in progress",
            ),
        ),
        (
            "another run holding the directory is judged before the drive",
            |g| {
                g.o.dir = ProbeDir::Locked;
                g.o.utilization_before = Some(1.0);
            },
            Want::Skip(SkipReason::Busy, "another probe run"),
        ),
        (
            "a leftover that can't be removed",
            |g| {
                g.o.dir = ProbeDir::Uncleared(LeftoverError::Remove {
                    dir: "/data/.ssdwatch-probe".into(),
                    name: "sub".into(),
                    source: IoError::from_raw_os_error(libc::EISDIR),
                })
            },
            Want::Skip(
                SkipReason::Unsafe,
                "/data/.ssdwatch-probe/sub: cannot remove leftover",
            ),
        ),
        (
            "a probe directory that can't be listed",
            |g| {
                g.o.dir = ProbeDir::Uncleared(LeftoverError::List {
                    dir: "/data/.ssdwatch-probe".into(),
                    source: IoError::from_raw_os_error(libc::EIO),
                })
            },
            Want::Skip(SkipReason::Unsafe, "/data/.ssdwatch-probe: listing"),
        ),
        // Space once leftovers are gone.
        (
            "still short of space once leftovers are gone, with no probe file",
            |g| {
                g.o.fs_type = FsType::BTRFS;
                g.o.stat = stat(GIB);
                avail_inside(g, 2 * GIB);
                file(g, ProbeFile::Absent);
            },
            Want::Skip(
                SkipReason::LowSpace,
                "/data: 2147483648 bytes available, under the floor of 5368709120",
            ),
        ),
        (
            "too full for a run while the probe file holds its bytes: the file is given back",
            |g| {
                g.o.fs_type = FsType::BTRFS;
                g.o.stat = stat(GIB);
                avail_inside(g, 2 * GIB);
            },
            Want::GiveBack,
        ),
        (
            "given back, it is not made again until it fits above the floor",
            |g| {
                g.o.fs_type = FsType::BTRFS;
                avail_inside(g, 5 * GIB + 16 * MIB);
                file(g, ProbeFile::Absent);
            },
            Want::Skip(
                SkipReason::LowSpace,
                "creating the 33554432-byte probe file would leave",
            ),
        ),
        (
            "removing leftovers made room",
            |g| g.o.stat = stat(GIB),
            ALL_RUN,
        ),
        (
            "an unsafe probe file is judged before space",
            |g| {
                avail_inside(g, 0);
                file(g, ProbeFile::Symlink);
            },
            Want::Skip(SkipReason::Unsafe, "is a symlink"),
        ),
        // What a run consumes decides the space it needs.
        (
            "ext4 at 97%: rewriting the existing probe file consumes nothing and runs",
            |g| avail_inside(g, 3 * GIB),
            ALL_RUN,
        ),
        (
            "XFS at 97% too",
            |g| {
                g.o.fs_type = FsType::XFS;
                avail_inside(g, 3 * GIB);
            },
            ALL_RUN,
        ),
        (
            "a rewrite runs down to the reserve",
            |g| avail_inside(g, 4 * MIB),
            ALL_RUN,
        ),
        (
            "a rewrite stops under the reserve, and the probe file is given back",
            |g| avail_inside(g, 4 * MIB - 4096),
            Want::GiveBack,
        ),
        (
            "the reserve is the target's",
            |g| {
                g.t.rewrite_reserve_bytes = GIB;
                avail_inside(g, GIB - 4096);
            },
            Want::GiveBack,
        ),
        (
            "a probe file with holes would allocate: it keeps the floor, and is given back under it",
            |g| {
                file(
                    g,
                    ProbeFile::Sound {
                        size: 32 * MIB,
                        allocated: 16 * MIB,
                    },
                );
                avail_inside(g, 3 * GIB);
            },
            Want::GiveBack,
        ),
        (
            "btrfs at 97% keeps the floor: an overwrite lands in new blocks",
            |g| {
                g.o.fs_type = FsType::BTRFS;
                avail_inside(g, 3 * GIB);
            },
            Want::GiveBack,
        ),
        (
            "on btrfs the run's own writes must fit above the floor",
            |g| {
                g.o.fs_type = FsType::BTRFS;
                avail_inside(g, 5 * GIB + 100 * 1024);
            },
            Want::Skip(SkipReason::LowSpace, "every write allocates"),
        ),
        (
            "on a type we don't know the message gives its number",
            |g| {
                g.o.fs_type = FsType(0x1234);
                avail_inside(g, 5 * GIB);
            },
            Want::Skip(
                SkipReason::LowSpace,
                "on filesystem type 0x1234 every write allocates",
            ),
        ),
        (
            "btrfs with room runs",
            |g| g.o.fs_type = FsType::BTRFS,
            ALL_RUN,
        ),
        (
            "a 512 MiB filesystem gets a 16 MiB probe file (1/32 of it)",
            |g| {
                file(g, ProbeFile::Absent);
                g.o.stat = stat_of(512 * MIB, 400 * MIB);
                avail_inside(g, 0);
                if let ProbeDir::Ready { stat: s, .. } = &mut g.o.dir {
                    *s = g.o.stat;
                }
            },
            Want::Run {
                kinds: &ProbeKind::ALL,
                budget_skipped: &[],
                create_bytes: 16 * MIB,
            },
        ),
        (
            "a probe file of the configured size on a 512 MiB filesystem is remade smaller",
            |g| {
                g.o.stat = stat_of(512 * MIB, 400 * MIB);
                avail_inside(g, 0);
                if let ProbeDir::Ready { stat: s, .. } = &mut g.o.dir {
                    *s = g.o.stat;
                }
            },
            Want::RemoveStale,
        ),
        // The probe file.
        (
            "a probe file that is a symlink",
            |g| file(g, ProbeFile::Symlink),
            Want::Skip(
                SkipReason::Unsafe,
                "/data/.ssdwatch-probe/probe.dat is a symlink; refusing it",
            ),
        ),
        (
            "a probe file with a second link",
            |g| {
                file(
                    g,
                    ProbeFile::Refused(SafetyError::Links {
                        path: "/data/.ssdwatch-probe/probe.dat".into(),
                        links: 2,
                    }),
                )
            },
            Want::Skip(SkipReason::Unsafe, "probe.dat has 2 links (expected 1)"),
        ),
        (
            "a probe file that is not a regular file",
            |g| {
                file(
                    g,
                    ProbeFile::Refused(SafetyError::NotRegular(
                        "/data/.ssdwatch-probe/probe.dat".into(),
                    )),
                )
            },
            Want::Skip(SkipReason::Unsafe, "probe.dat is not a regular file"),
        ),
        (
            "a probe file that can't be opened",
            |g| {
                file(
                    g,
                    ProbeFile::Unopenable(IoError::from_raw_os_error(libc::EINVAL)),
                )
            },
            Want::Skip(
                SkipReason::Error,
                "/data/.ssdwatch-probe/probe.dat: Invalid argument",
            ),
        ),
        (
            "an unsafe probe file is judged before the budget",
            |g| {
                file(g, ProbeFile::Symlink);
                *usage(g) = Ok(Usage {
                    seconds: 3600.0,
                    ..Usage::default()
                });
            },
            Want::Skip(SkipReason::Unsafe, "is a symlink"),
        ),
        (
            "a probe file of another size is removed first",
            |g| {
                file(
                    g,
                    ProbeFile::Sound {
                        size: 16 * MIB,
                        allocated: 16 * MIB,
                    },
                )
            },
            Want::RemoveStale,
        ),
        (
            "a probe file of another size is removed even when the budget is spent",
            |g| {
                file(
                    g,
                    ProbeFile::Sound {
                        size: 16 * MIB,
                        allocated: 16 * MIB,
                    },
                );
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB,
                    ..Usage::default()
                });
            },
            Want::RemoveStale,
        ),
        (
            "no probe file: it is created",
            |g| file(g, ProbeFile::Absent),
            ALL_RUN_CREATING,
        ),
        (
            "creating the probe file would go under the floor",
            |g| {
                file(g, ProbeFile::Absent);
                avail_inside(g, 5 * GIB + 16 * MIB);
            },
            Want::Skip(
                SkipReason::LowSpace,
                "/data: creating the 33554432-byte probe file would leave 5351931904 bytes, under the floor of 5368709120",
            ),
        ),
        (
            "an existing probe file needs no room beyond the floor",
            |g| avail_inside(g, 5 * GIB + 16 * MIB),
            ALL_RUN,
        ),
        (
            "creating the probe file just fits",
            |g| {
                file(g, ProbeFile::Absent);
                avail_inside(g, 5 * GIB + 32 * MIB);
            },
            ALL_RUN_CREATING,
        ),
        (
            "space for the probe file is judged before the budget",
            |g| {
                file(g, ProbeFile::Absent);
                avail_inside(g, 5 * GIB);
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB,
                    ..Usage::default()
                });
            },
            Want::Skip(
                SkipReason::LowSpace,
                "creating the 33554432-byte probe file",
            ),
        ),
        // Budget.
        (
            "the budget file unreadable",
            |g| {
                *usage(g) = Err(BudgetError::Corrupt {
                    path: "/var/lib/ssdwatch/probe-budget.json".into(),
                    source: serde_json::from_str::<Usage>("{not json").unwrap_err(),
                })
            },
            Want::Skip(SkipReason::Error, "/var/lib/ssdwatch/probe-budget.json: "),
        ),
        (
            "this hour's time spent",
            |g| {
                *usage(g) = Ok(Usage {
                    seconds: 60.0,
                    ..Usage::default()
                })
            },
            Want::Skip(
                SkipReason::Budget,
                "/data: 60.0 s of probing this hour already",
            ),
        ),
        (
            "this hour's time nearly spent still runs",
            |g| {
                *usage(g) = Ok(Usage {
                    seconds: 59.9,
                    ..Usage::default()
                })
            },
            ALL_RUN,
        ),
        (
            "time is judged before bytes",
            |g| {
                *usage(g) = Ok(Usage {
                    seconds: 61.0,
                    written_bytes: 64 * MIB,
                    ..Usage::default()
                })
            },
            Want::Skip(SkipReason::Budget, "61.0 s of probing this hour already"),
        ),
        (
            "creating the probe file would exceed today's bytes",
            |g| {
                file(g, ProbeFile::Absent);
                *usage(g) = Ok(Usage {
                    written_bytes: 40 * MIB,
                    ..Usage::default()
                });
            },
            Want::Skip(
                SkipReason::Budget,
                "/data: creating the probe file (33554432 bytes) exceeds today's write budget (25165824 bytes left)",
            ),
        ),
        (
            "only the kinds that fit run, in the order asked",
            |g| {
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB - 100 * 1024,
                    ..Usage::default()
                })
            },
            Want::Run {
                kinds: &[SyncWrite4k, RandRead4k],
                budget_skipped: &[RandWrite4k, SeqWrite],
                create_bytes: 0,
            },
        ),
        (
            "the probe file's bytes come out of the day's before the kinds'",
            |g| {
                file(g, ProbeFile::Absent);
                *usage(g) = Ok(Usage {
                    written_bytes: 16 * MIB,
                    ..Usage::default()
                });
            },
            Want::Run {
                kinds: &[SyncWrite4k, RandRead4k, RandWrite4k],
                budget_skipped: &[SeqWrite],
                create_bytes: 32 * MIB,
            },
        ),
        (
            "a spent byte budget still lets reads run",
            |g| {
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB,
                    ..Usage::default()
                })
            },
            Want::Run {
                kinds: &[RandRead4k],
                budget_skipped: &[SyncWrite4k, RandWrite4k, SeqWrite],
                create_bytes: 0,
            },
        ),
        (
            "a spent byte budget and only writers asked for",
            |g| {
                g.kinds = vec![SyncWrite4k, RandWrite4k];
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB,
                    ..Usage::default()
                });
            },
            Want::Skip(
                SkipReason::Budget,
                "/data: today's write budget is spent (67108864 of 67108864 bytes)",
            ),
        ),
        (
            "a budget skip is judged before the drive",
            |g| {
                *usage(g) = Ok(Usage {
                    seconds: 60.0,
                    ..Usage::default()
                });
                g.o.utilization_before = Some(0.9);
            },
            Want::Skip(SkipReason::Budget, "of probing this hour already"),
        ),
        // The budget's record of the run's intent.
        (
            "every gate passed: the run's bytes are recorded before it writes",
            |g| g.o.intent = None,
            // 16 × 4 KiB for each 4 KiB writer, and a 16 MiB sequential burst.
            Want::Record(2 * 16 * 4096 + 16 * MIB),
        ),
        (
            "the probe file's creation is in the recorded intent",
            |g| {
                file(g, ProbeFile::Absent);
                g.kinds = vec![RandRead4k];
                g.o.intent = None;
            },
            Want::Record(32 * MIB),
        ),
        (
            "only the kinds the byte budget lets run are in the intent",
            |g| {
                g.o.intent = None;
                *usage(g) = Ok(Usage {
                    written_bytes: 64 * MIB - 100 * 1024,
                    ..Usage::default()
                });
            },
            Want::Record(16 * 4096),
        ),
        (
            "a busy drive is judged before the intent is recorded",
            |g| {
                g.o.intent = None;
                g.o.utilization_before = Some(0.9);
            },
            Want::Skip(SkipReason::Busy, "90% busy"),
        ),
        (
            "an intent that could not be recorded: nothing is written",
            |g| {
                g.o.intent = Some(Err(BudgetError::Write {
                    path: "/var/lib/ssdwatch/probe-budget.json".into(),
                    what: "create",
                    source: IoError::from_raw_os_error(libc::EROFS),
                }))
            },
            Want::Skip(
                SkipReason::BudgetUnrecorded,
                "/var/lib/ssdwatch/probe-budget.json: create: Read-only file system (os error 30); not probing /data: its writes could not be counted",
            ),
        ),
        // The drive.
        (
            "a busy drive",
            |g| g.o.utilization_before = Some(0.9),
            Want::Skip(
                SkipReason::Busy,
                "/data: drive nvme0n1 90% busy, above the 50% threshold",
            ),
        ),
        (
            "a drive exactly at the threshold runs",
            |g| g.o.utilization_before = Some(0.5),
            ALL_RUN,
        ),
        (
            "a busy drive gets no probe file either",
            |g| {
                file(g, ProbeFile::Absent);
                g.o.utilization_before = Some(1.0);
            },
            Want::Skip(SkipReason::Busy, "drive nvme0n1 100% busy"),
        ),
        (
            "the busy threshold is the target's",
            |g| {
                g.t.busy_threshold = 0.95;
                g.o.utilization_before = Some(0.9);
            },
            ALL_RUN,
        ),
    ];

    fn check(name: &str, got: Result<Plan, Skip>, want: &Want) {
        match (got, want) {
            (Ok(Plan::Enter), Want::Enter)
            | (Ok(Plan::RemoveStale), Want::RemoveStale)
            | (Ok(Plan::GiveBack), Want::GiveBack) => {}
            (Ok(Plan::Record { bytes }), Want::Record(want)) => assert_eq!(bytes, *want, "{name}"),
            (
                Ok(Plan::Run(p)),
                Want::Run {
                    kinds,
                    budget_skipped,
                    create_bytes,
                },
            ) => {
                assert_eq!(p.kinds, *kinds, "{name}");
                assert_eq!(p.budget_skipped, *budget_skipped, "{name}");
                assert_eq!(p.create_bytes, *create_bytes, "{name}");
            }
            (Err(s), Want::Skip(reason, detail)) => {
                assert_eq!(s.reason, *reason, "{name}: {}", s.detail);
                assert!(s.detail.contains(detail), "{name}: {:?}", s.detail);
                assert_eq!(s.target, Path::new("/data"), "{name}");
                assert_eq!(s.placement.as_ref().map(|p| p.device()), Some("nvme0n1"));
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn each_gate_decides_in_its_turn() {
        for (name, setup, want) in CASES {
            let mut g = given();
            setup(&mut g);
            let spec = Spec {
                target: &g.t,
                kinds: &g.kinds,
            };
            check(name, plan(&g.o, &spec), want);
        }
    }

    #[test]
    fn every_skip_reason_is_decided_by_some_case() {
        for r in SkipReason::ALL {
            assert!(
                CASES
                    .iter()
                    .any(|(_, _, w)| matches!(w, Want::Skip(x, _) if *x == r)),
                "no case for {r:?}"
            );
        }
    }

    #[test]
    fn every_filesystem_but_ext4_and_xfs_keeps_the_floor_at_97_percent() {
        // Copy-on-write (btrfs, ZFS, bcachefs), log-structured (f2fs) or unknown: an overwrite
        // may land in new blocks, so even rewriting the existing file allocates.
        for fs in [
            FsType::BTRFS,
            FsType::ZFS,
            FsType::BCACHEFS,
            FsType::F2FS,
            FsType::TMPFS,
            FsType(0x1234),
        ] {
            let mut g = given();
            g.o.fs_type = fs;
            avail_inside(&mut g, 3 * GIB);
            let spec = Spec {
                target: &g.t,
                kinds: &g.kinds,
            };
            check(&format!("{fs:?}"), plan(&g.o, &spec), &Want::GiveBack);
            file(&mut g, ProbeFile::Absent);
            let spec = Spec {
                target: &g.t,
                kinds: &g.kinds,
            };
            let want = Want::Skip(SkipReason::LowSpace, "under the floor of 5368709120");
            check(&format!("{fs:?}"), plan(&g.o, &spec), &want);
        }
    }

    #[test]
    fn the_space_is_judged_again_right_before_and_after_an_allocation() {
        let g = given();
        let p = &g.o.placement;
        // 100 GiB, so a 5 GiB floor; a 32 MiB probe file.
        let before = |avail| space_before_allocation(&g.t, p, &stat(avail), "creating", 32 * MIB);
        assert!(before(5 * GIB + 32 * MIB).is_ok());
        let s = before(5 * GIB + 16 * MIB).unwrap_err();
        assert_eq!(s.reason, SkipReason::LowSpace);
        assert!(
            s.detail.contains("/data: right before creating, 5385486336 bytes available; its 33554432 bytes would leave 5351931904, under the floor of 5368709120"),
            "{}",
            s.detail
        );
        assert_eq!(s.placement.as_ref().map(|p| p.device()), Some("nvme0n1"));
        // Less than the allocation itself: no underflow, nothing left.
        assert!(before(MIB).unwrap_err().detail.contains("would leave 0,"));
        let after = |avail| space_after_allocation(&g.t, p, &stat(avail), "allocating");
        assert!(after(5 * GIB).is_ok());
        let s = after(5 * GIB - 4096).unwrap_err();
        assert_eq!(s.reason, SkipReason::LowSpace);
        assert!(s.detail.ends_with("rolled back"), "{}", s.detail);
    }

    #[test]
    fn floor_is_the_larger_of_ratio_and_bytes() {
        let t = TargetConfig::default();
        assert_eq!(floor_bytes(&t, GIB), 64 * MIB);
        assert_eq!(floor_bytes(&t, 100 * GIB), 5 * GIB);
    }

    #[test]
    fn the_probe_file_is_at_most_a_32nd_of_its_filesystem_in_whole_blocks() {
        let t = TargetConfig::default();
        assert_eq!(probe_file_bytes(&t, 100 * GIB), 32 * MIB);
        assert_eq!(probe_file_bytes(&t, GIB), 32 * MIB);
        assert_eq!(probe_file_bytes(&t, 512 * MIB), 16 * MIB);
        assert_eq!(probe_file_bytes(&t, 100 * MIB), 3 * MIB);
        // Never under one sequential-write block, so a burst stays inside the file.
        assert_eq!(probe_file_bytes(&t, 8 * MIB), MIB);
    }
}
