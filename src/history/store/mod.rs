//! The history store: one SQLite file that takes plain records, keeps and rolls them up, and
//! reads series back; it schedules nothing and renders no metric. Its schema: docs/history.md.

mod events;
mod identity;
mod import;
mod layer_errors;
mod layout;
mod migrate;
mod open;
mod read;
mod rollup;
mod schema;
mod timeline;
mod write;

pub use import::{DriveImportHour, DriveImportMark, ImportHour, ImportMark, ImportWritten};
pub use timeline::FutureRows;

pub use schema::SCHEMA_VERSION;

use super::record::{DriveKey, FsKey};
use rusqlite::{Connection, ErrorCode};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The file name inside the state directory.
pub const FILE_NAME: &str = "history.db";

use crate::time::{DAY, HOUR};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("history store {path}: the file is damaged or not a database ({detail})")]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "history store {path}: schema version {found} was written by a newer ssdwatch (this one knows {SCHEMA_VERSION})"
    )]
    NewerSchema { path: PathBuf, found: i64 },
    #[error(
        "history store {path}: schema version {found} is older than this ssdwatch's ({SCHEMA_VERSION}); the daemon upgrades it in place when it opens it (restart ssdwatch), then read it again"
    )]
    OlderSchema { path: PathBuf, found: i64 },
    #[error(
        "history store {path}: series id {id} is beyond the 16,777,215 series the store keeps a kind of"
    )]
    TooManySeries { path: PathBuf, id: i64 },
    #[error("history store {path}: {op}: {source}")]
    Sqlite {
        path: PathBuf,
        op: &'static str,
        source: rusqlite::Error,
    },
    #[error("history store {path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    #[error("history store {path}: a drive needs a WWN or a serial number to be recorded")]
    NoDriveIdentity { path: PathBuf },
    #[error(
        "history store {path}: no such file or no tables yet (the daemon creates it when the history is enabled)"
    )]
    NotCreated { path: PathBuf },
}

impl StoreError {
    /// True when the file itself is damaged ([`Store::open_or_recover`] moves it aside).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, StoreError::Corrupt { .. })
    }
}

fn classify(path: &Path, op: &'static str, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            op,
            source: e,
        },
    }
}

/// What one [`Store::downsample`] pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Maintenance {
    /// Raw rows rolled into hourly rows (and deleted).
    pub raw_rolled: usize,
    /// Hourly rows written (new or merged).
    pub hours_written: usize,
    /// Hourly rows dropped by retention.
    pub hours_dropped: usize,
    /// Probe results, discard events and idle periods dropped by retention.
    pub events_dropped: usize,
    /// Finished raw days of filesystems whose extremes were written to `fs_day`.
    pub days_summarized: usize,
    /// Drive-health and component-size rows dropped: thinned to a day's last, or by retention.
    pub hourly_thinned: usize,
}

/// The history store. Not `Sync`: the daemon owns it on one blocking thread (SQLite calls block).
pub struct Store {
    path: PathBuf,
    conn: Connection,
    retention_raw: i64,
    retention_hourly: i64,
    raw_interval: i64,
    fs_ids: HashMap<FsKey, (i64, String)>,
    drive_ids: HashMap<DriveKey, (i64, String)>,
    target_ids: HashMap<String, i64>,
    /// Last raw sample time per series, for the `raw_interval` gate.
    last_raw: HashMap<(u8, i64), i64>,
    /// Each raw day's extremes of avail and last size per filesystem, once asked for.
    raw_days: std::cell::RefCell<Option<RawDays>>,
    /// The file's device and inode when it was opened: a file replaced or removed under the
    /// running daemon would otherwise take every later write into the deleted inode.
    identity: Option<(u64, u64)>,
    /// Samples refused since the last [`Store::take_refused_older`] for being older than their
    /// series' newest row.
    refused_older: u64,
}

/// The (device, inode) of the file at `path`, if there is one.
fn file_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Store {
    /// `Err` with what happened when the file this store writes is no longer the one at its
    /// path (replaced, moved away or deleted while the daemon ran): the caller reopens.
    pub fn still_at_its_path(&self) -> Result<(), String> {
        match (self.identity, file_identity(&self.path)) {
            (Some(a), Some(b)) if a == b => Ok(()),
            (Some(_), Some(_)) => Err(format!(
                "{}: replaced by another file while the daemon ran; the new file is opened",
                self.path.display()
            )),
            (Some(_), None) => Err(format!(
                "{}: removed while the daemon ran; a new store is created",
                self.path.display()
            )),
            (None, _) => Ok(()),
        }
    }

    /// Closes a store whose file is no longer at its path ([`Store::still_at_its_path`]): its
    /// write-ahead log is emptied into the old file first. SQLite does not remove the log of a
    /// file renamed while open, and a log left at the path would be replayed into whatever file
    /// is opened there next (a restored copy would come back with the old pages over it).
    pub fn close_replaced(self) {
        if let Err(e) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        {
            tracing::debug!("{}: checkpoint before closing: {e}", self.path.display());
        }
    }
}

/// (filesystem, day) -> (avail min, avail max, size at the day's last sample).
type RawDays = BTreeMap<(i64, i64), (i64, i64, i64)>;

fn note_raw_day(days: &mut RawDays, fs: i64, t: i64, avail: i64, size: i64) {
    days.entry((fs, t.div_euclid(DAY)))
        .and_modify(|(lo, hi, sz)| {
            *lo = (*lo).min(avail);
            *hi = (*hi).max(avail);
            *sz = size;
        })
        .or_insert((avail, avail, size));
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| classify(&self.path, op, e)
    }
}

#[cfg(test)]
mod tests;
