//! Write and time budgets per target, persisted in the state directory so a restart (or a crash
//! loop) can't reset them. The file is small JSON, replaced atomically (write, fsync, rename).
//! A run records what it means to write before it writes ([`begin`]) and what it wrote once done
//! ([`finish`]): a run killed in between stays counted at its planned bytes, an overcount, never
//! an undercount. A run whose intent can't be recorded doesn't write at all.

use crate::time::{DAY_F64, HOUR};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const BUDGET_FILE: &str = "probe-budget.json";

/// Why the budget could not be read or saved; every message names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: {what}: {source}", path.display())]
    Write {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{}: locking the probe budget: {source}", dir.display())]
    Lock {
        dir: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// UTC day number (Unix seconds / 86400) the byte count belongs to.
    pub day: u64,
    pub written_bytes: u64,
    /// Unix hour number the time count belongs to.
    pub hour: u64,
    pub seconds: f64,
    /// Bytes of a run that recorded its intent ([`begin`]) and has not finished: counted in
    /// `written_bytes` already. Left non-zero by a run that was killed; the next one replaces it.
    #[serde(default)]
    pub in_flight_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Keyed by the configured target path.
    pub targets: BTreeMap<String, Usage>,
}

impl Usage {
    /// This usage as seen at `now` (counts of a past day/hour read as zero).
    pub fn at(&self, now_unix: f64) -> Usage {
        let day = (now_unix / DAY_F64) as u64;
        let hour = (now_unix / HOUR as f64) as u64;
        Usage {
            day,
            written_bytes: if self.day == day {
                self.written_bytes
            } else {
                0
            },
            hour,
            seconds: if self.hour == hour { self.seconds } else { 0.0 },
            in_flight_bytes: if self.day == day {
                self.in_flight_bytes
            } else {
                0
            },
        }
    }
}

/// The key a target's usage is kept under: its configured path for the daemon's runs, the path
/// with ` (probe run)` for runs by hand, which have a budget of their own (the same caps, apart),
/// so trying a target out doesn't spend the day's budget of the daemon's probes.
pub fn key(target: &str, hand: bool) -> String {
    if hand {
        format!("{target} (probe run)")
    } else {
        target.to_string()
    }
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(BUDGET_FILE)
}

/// Loads the budgets; a missing file is an empty budget. A corrupt file is an error (naming it):
/// silently starting from zero would let probes exceed the cap.
pub fn load(state_dir: &Path) -> Result<Budgets, BudgetError> {
    let p = path(state_dir);
    match std::fs::read_to_string(&p) {
        Ok(s) => {
            serde_json::from_str(&s).map_err(|source| BudgetError::Corrupt { path: p, source })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Budgets::default()),
        Err(source) => Err(BudgetError::Read { path: p, source }),
    }
}

pub fn store(state_dir: &Path, b: &Budgets) -> Result<(), BudgetError> {
    let p = path(state_dir);
    let tmp = state_dir.join(format!("{BUDGET_FILE}.tmp"));
    let err = |what: &'static str| {
        let path = p.clone();
        move |source| BudgetError::Write { path, what, source }
    };
    std::fs::create_dir_all(state_dir).map_err(err("creating state dir"))?;
    let text = serde_json::to_string_pretty(b).map_err(|source| BudgetError::Corrupt {
        path: p.clone(),
        source,
    })?;
    let mut f = std::fs::File::create(&tmp).map_err(err("create"))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(err("write"))?;
    std::fs::rename(&tmp, &p).map_err(err("rename"))?;
    if let Ok(d) = std::fs::File::open(state_dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An exclusive lock on the budget: flock on the state directory itself, so that the daemon
/// and a `ssdwatch probe run` updating it at the same time don't lose one of the two updates.
/// (A lock file would do too, but one created by root would lock the daemon's user out.)
struct Lock {
    /// Held open for the lock's lifetime; closing it releases the lock.
    _dir: std::fs::File,
}

impl Lock {
    fn take(state_dir: &Path) -> Result<Lock, BudgetError> {
        use std::os::fd::AsRawFd;
        let err = |source| BudgetError::Lock {
            dir: state_dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(err)?;
        let dir = std::fs::File::open(state_dir).map_err(err)?;
        super::fsafe::flock_exclusive(dir.as_raw_fd(), true).map_err(err)?;
        Ok(Lock { _dir: dir })
    }
}

/// Changes a target's usage as seen at `now_unix` and persists it at once (read, change and
/// replace under the budget lock).
fn update(
    state_dir: &Path,
    target: &str,
    now_unix: f64,
    change: impl FnOnce(&mut Usage),
) -> Result<Usage, BudgetError> {
    let _lock = Lock::take(state_dir)?;
    let mut b = load(state_dir)?;
    let mut u = b
        .targets
        .get(target)
        .cloned()
        .unwrap_or_default()
        .at(now_unix);
    change(&mut u);
    b.targets.insert(target.to_string(), u.clone());
    store(state_dir, &b)?;
    Ok(u)
}

/// Adds bytes and seconds to a target's usage and persists at once.
pub fn record(
    state_dir: &Path,
    target: &str,
    now_unix: f64,
    bytes: u64,
    seconds: f64,
) -> Result<Usage, BudgetError> {
    update(state_dir, target, now_unix, |u| {
        u.written_bytes = u.written_bytes.saturating_add(bytes);
        u.seconds += seconds;
    })
}

/// Records a run's intent before it writes anything: its `planned` bytes count as written from
/// now on. An error means the budget can't be kept, and the run must not write.
pub fn begin(
    state_dir: &Path,
    target: &str,
    now_unix: f64,
    planned: u64,
) -> Result<Usage, BudgetError> {
    update(state_dir, target, now_unix, |u| {
        u.written_bytes = u.written_bytes.saturating_add(planned);
        u.in_flight_bytes = planned;
    })
}

/// Records a run's completion: its planned bytes are replaced by what it wrote (at most as
/// much), and its seconds added. `now_unix` is the one [`begin`] was given, so a run that
/// straddles midnight settles the day it was counted in.
pub fn finish(
    state_dir: &Path,
    target: &str,
    now_unix: f64,
    planned: u64,
    written: u64,
    seconds: f64,
) -> Result<Usage, BudgetError> {
    update(state_dir, target, now_unix, |u| {
        u.written_bytes = u
            .written_bytes
            .saturating_sub(planned)
            .saturating_add(written);
        u.in_flight_bytes = 0;
        u.seconds += seconds;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_day_starts_from_zero_bytes_and_a_new_hour_from_zero_seconds() {
        let u = Usage {
            day: 10,
            written_bytes: 5,
            hour: 240,
            seconds: 3.0,
            in_flight_bytes: 0,
        };
        let same = u.at(10.0 * 86400.0 + 10.0);
        assert_eq!((same.written_bytes, same.seconds), (5, 3.0));
        let next_hour = u.at(10.0 * 86400.0 + 3600.0);
        assert_eq!((next_hour.written_bytes, next_hour.seconds), (5, 0.0));
        let next_day = u.at(11.0 * 86400.0);
        assert_eq!(next_day.written_bytes, 0);
    }

    #[test]
    fn concurrent_updates_from_several_processes_are_all_counted() {
        let d = tempfile::tempdir().unwrap();
        // Threads stand in for processes: flock locks belong to the open file description, so
        // each thread's own open of the state directory contends like another process would.
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..25 {
                        record(d.path(), "/data", 1000.0, 4096, 0.0).unwrap();
                    }
                });
            }
        });
        assert_eq!(
            load(d.path()).unwrap().targets["/data"].written_bytes,
            8 * 25 * 4096
        );
    }

    #[test]
    fn a_run_counts_its_planned_bytes_until_it_finishes_with_what_it_wrote() {
        let d = tempfile::tempdir().unwrap();
        record(d.path(), "/data", 1000.0, 4096, 0.0).unwrap();
        let u = begin(d.path(), "/data", 1000.0, 1 << 20).unwrap();
        assert_eq!(
            (u.written_bytes, u.in_flight_bytes),
            (4096 + (1 << 20), 1 << 20)
        );
        // What a restart after a kill -9 here reads: the planned bytes, counted.
        let saved = &load(d.path()).unwrap().targets["/data"];
        assert_eq!(saved.written_bytes, 4096 + (1 << 20));
        assert_eq!(saved.in_flight_bytes, 1 << 20);
        // A run that stopped halfway settles at what it wrote.
        let u = finish(d.path(), "/data", 1000.0, 1 << 20, 8192, 0.5).unwrap();
        assert_eq!((u.written_bytes, u.in_flight_bytes), (4096 + 8192, 0));
        assert_eq!(u.seconds, 0.5);
        // A killed run's intent stays counted when the next one begins.
        begin(d.path(), "/data", 1001.0, 100).unwrap();
        let u = begin(d.path(), "/data", 1002.0, 200).unwrap();
        assert_eq!(u.written_bytes, 4096 + 8192 + 300);
        assert_eq!(u.in_flight_bytes, 200);
    }

    #[test]
    fn an_intent_that_cant_be_saved_is_an_error_naming_the_state_file() {
        let d = tempfile::tempdir().unwrap();
        // A regular file where the state directory should be: nothing can be created under it
        // (unlike a read-only mode, which root ignores).
        let not_dir = d.path().join("state");
        std::fs::write(&not_dir, b"").unwrap();
        let e = begin(&not_dir, "/data", 1000.0, 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&not_dir.display().to_string()), "{e}");
    }

    #[test]
    fn usage_is_persisted_and_a_corrupt_file_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        record(d.path(), "/data", 1000.0, 4096, 0.5).unwrap();
        let u = record(d.path(), "/data", 1001.0, 4096, 0.5).unwrap();
        assert_eq!(u.written_bytes, 8192);
        assert_eq!(load(d.path()).unwrap().targets["/data"].written_bytes, 8192);
        std::fs::write(path(d.path()), "{not json").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains(BUDGET_FILE), "{e}");
    }
}
