//! The history store: one SQLite file, `<state_dir>/history.db`, in WAL mode.
//! Takes plain records, keeps raw samples for `retention_raw`, rolls them into hourly
//! min/max/mean/last and reads series back; it schedules nothing and renders no metric.
//!
//! Schema (version 3, in `PRAGMA user_version`; [`super::migrate`] upgrades versions 1 and 2
//! in place):
//! - `fs(id, mountpoint, uuid, device, first_seen)`: one row per filesystem series, keyed by
//!   mount point + UUID ('' when unknown), so a new device name continues the series.
//! - `drive(id, wwn, serial, model, kernel_name, capacity, first_seen)`: keyed by WWN, else serial.
//! - `fs_raw(id, size, avail, free, files_free)` and `drive_raw(id, wear_ppm, spare_ppm,
//!   temp_mc, host_written, nand_written, media_errors, power_on_hours, discarded)`: plain rows
//!   keyed by `id = t << 24 | series`, at most one per series and `raw_interval`.
//!   A forecast needs each raw day's extremes of avail: the store keeps them in memory (built
//!   the first time they are asked for, then kept up as samples arrive), not in a table that
//!   every commit would rewrite (version 1's `fs_raw_day`: today's rows of every filesystem,
//!   rewritten whole by each commit).
//! - `fs_day(id, avail_min, avail_max, size)`: those extremes of each *finished* raw day
//!   (`id = day << 24 | series`), written once when the day is over (by the hourly
//!   maintenance, two hours after midnight UTC) and dropped when the day is rolled into hourly
//!   chunks. Building the extremes in memory after a start then reads a row per filesystem and
//!   finished day plus the raw rows since, not 14 days of raw rows (version 2 scanned them
//!   all: the first forecast pass after a start took 66 ms where the others take 20).
//!   Time-major, because of what a commit writes: one sample of every series each raw
//!   interval. Keyed by series first, each of those rows lands in its own b-tree leaf, and
//!   SQLite's WAL (then the checkpoint) writes whole 4 KiB pages: on a store holding 14 days
//!   of 500 filesystems one commit wrote 2.8 MiB of WAL, and the bytes grew with the store.
//!   Keyed by time first, a commit appends at the right edge of the tree: a few pages. A
//!   rowid rather than `WITHOUT ROWID (t, series)`: SQLite appends to a rowid table by
//!   starting a new page (its "quick balance"), where an index b-tree rebalances the last
//!   three leaves on each split and so writes them again (measured with SQLite alone on 14
//!   days of 500 filesystems: 7.8 WAL frames a commit against 11.6). A series is then read by a time
//!   range (raw) or day by day (summaries, chunks), never by a secondary index, which would
//!   bring the scattered page writes back.
//! - `fs_hourly(id, fs, day, data)` and `drive_hourly(id, drive, day, data)`: one BLOB per
//!   series and UTC day holding that day's hourly rows, packed by [`super::codec`] (see there
//!   why), with `id = day << 24 | series`: day-major, so a day's chunks are written together
//!   once (a day is rolled whole) and dropped together as a prefix. A rowid table, not
//!   `WITHOUT ROWID`: rows of ~1 KiB in a WITHOUT ROWID b-tree are copied into its interior
//!   pages and leave leaves a third empty (measured: 38 MiB where the payload is 31). Each
//!   chunk row also carries the day's summary a forecast needs (`avail_min, avail_max, size`;
//!   `t_last, wear_ppm, host_written, nand_written`), so a forecast pass reads a row a day
//!   instead of decoding every hour.
//! - `probe(target, t, kind, drive, ops, p50_ns, p99_ns, max_ns, throughput, fill_ppm,
//!   since_discard_s, idle_s, util_ppm, util_before_ppm, written_since_discard)`, with
//!   `probe_target(id, path)` and `probe_kind(id, name)`: probe results at full resolution.
//! - `discard(drive, t, bytes)` and `idle(drive, start, seconds)`: events, keyed by time
//!   first (appends fill whole pages; retention deletes a prefix).
//!
//! Ratios are stored as integer parts per million, temperatures in milli-degrees Celsius and
//! latencies in nanoseconds: SQLite stores small integers in 1-4 bytes and a REAL in 8.

use super::HistoryConfig;
use super::codec::{self, Row};
use super::forecast::DayUse;
use super::record::*;
use crate::probe::ProbeKind;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The file name inside the state directory.
pub const FILE_NAME: &str = "history.db";
/// The schema this code writes; a file with a higher version is refused, not downgraded.
pub const SCHEMA_VERSION: i64 = 3;

const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

const SCHEMA: &str = "
CREATE TABLE fs (
    id INTEGER PRIMARY KEY,
    mountpoint TEXT NOT NULL,
    uuid TEXT NOT NULL DEFAULT '',
    device TEXT,
    first_seen INTEGER NOT NULL,
    UNIQUE (mountpoint, uuid)
);
CREATE TABLE drive (
    id INTEGER PRIMARY KEY,
    wwn TEXT UNIQUE,
    serial TEXT,
    model TEXT,
    kernel_name TEXT,
    capacity INTEGER,
    first_seen INTEGER NOT NULL
);
CREATE INDEX drive_serial ON drive (serial);
CREATE TABLE fs_raw (
    id INTEGER PRIMARY KEY,
    size INTEGER NOT NULL,
    avail INTEGER NOT NULL,
    free INTEGER NOT NULL,
    files_free INTEGER
);
CREATE TABLE fs_day (
    id INTEGER PRIMARY KEY,
    avail_min INTEGER NOT NULL,
    avail_max INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE drive_raw (
    id INTEGER PRIMARY KEY,
    wear_ppm INTEGER,
    spare_ppm INTEGER,
    temp_mc INTEGER,
    host_written INTEGER,
    nand_written INTEGER,
    media_errors INTEGER,
    power_on_hours INTEGER,
    discarded INTEGER
);
CREATE TABLE fs_hourly (
    id INTEGER PRIMARY KEY,
    fs INTEGER NOT NULL,
    day INTEGER NOT NULL,
    data BLOB NOT NULL,
    avail_min INTEGER,
    avail_max INTEGER,
    size INTEGER
);
CREATE TABLE drive_hourly (
    id INTEGER PRIMARY KEY,
    drive INTEGER NOT NULL,
    day INTEGER NOT NULL,
    data BLOB NOT NULL,
    t_last INTEGER NOT NULL,
    wear_ppm INTEGER,
    host_written INTEGER,
    nand_written INTEGER
);
CREATE TABLE probe_target (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE probe_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE probe (
    target INTEGER NOT NULL,
    t INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    drive INTEGER,
    ops INTEGER NOT NULL,
    p50_ns INTEGER NOT NULL,
    p99_ns INTEGER NOT NULL,
    max_ns INTEGER NOT NULL,
    throughput INTEGER,
    fill_ppm INTEGER,
    since_discard_s INTEGER,
    idle_s INTEGER,
    util_ppm INTEGER,
    util_before_ppm INTEGER,
    written_since_discard INTEGER,
    PRIMARY KEY (t, target, kind)
) WITHOUT ROWID;
CREATE TABLE discard (
    drive INTEGER NOT NULL,
    t INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (t, drive)
) WITHOUT ROWID;
CREATE TABLE idle (
    drive INTEGER NOT NULL,
    start INTEGER NOT NULL,
    seconds INTEGER NOT NULL,
    PRIMARY KEY (start, drive)
) WITHOUT ROWID;
";

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
}

/// How a field is kept per hour.
#[derive(Clone, Copy, PartialEq)]
enum Agg {
    /// min, max, mean, last: a gauge that moves.
    Full,
    /// last only: a counter (an hour's increase is the difference of two lasts; its min, max
    /// and mean would be its first, last and a midpoint) or a size that changes only on a
    /// resize.
    Last,
}

impl Agg {
    fn width(self) -> usize {
        match self {
            Agg::Full => 4,
            Agg::Last => 1,
        }
    }
}

/// The fields of one kind of series, in raw column order, and their hourly columns.
struct Layout {
    fields: &'static [Agg],
    /// Codec reference columns of the hourly rows.
    refs: &'static [Option<usize>],
}

impl Layout {
    fn fields(&self) -> usize {
        self.fields.len()
    }
    /// The first hourly column of field `f`.
    fn offset(&self, f: usize) -> usize {
        self.fields[..f].iter().map(|a| a.width()).sum()
    }
    /// Hourly columns: 4 per full field, 1 per last-only field, then the sample count.
    fn hourly_cols(&self) -> usize {
        self.offset(self.fields.len()) + 1
    }
}

/// size (last), avail, free, files_free (full). free's aggregates are predicted from
/// avail's: they differ by the root reserve, which is constant.
const FS: Layout = Layout {
    fields: &[Agg::Last, Agg::Full, Agg::Full, Agg::Full],
    refs: &[
        None,
        None,
        None,
        None,
        None,
        Some(1),
        Some(2),
        Some(3),
        Some(4),
        None,
        None,
        None,
        None,
        None,
    ],
};

/// wear, spare, temperature (full); host, NAND, media errors, power-on hours, discarded (last).
const DRIVE: Layout = Layout {
    fields: &[
        Agg::Full,
        Agg::Full,
        Agg::Full,
        Agg::Last,
        Agg::Last,
        Agg::Last,
        Agg::Last,
        Agg::Last,
    ],
    refs: &[],
};

/// Rolls one hour of raw rows (sorted by t) into an hourly row.
fn aggregate(layout: &Layout, hour: i64, rows: &[Vec<Option<i64>>]) -> Row {
    let mut vals = Vec::with_capacity(layout.hourly_cols());
    for (f, agg) in layout.fields.iter().enumerate() {
        let present = || rows.iter().filter_map(|r| r[f]);
        let last = present().next_back();
        if *agg == Agg::Full {
            let n = present().count();
            let mean = (n > 0).then(|| {
                let sum: i128 = present().map(i128::from).sum();
                (sum as f64 / n as f64).round() as i64
            });
            vals.extend([present().min(), present().max(), mean, last]);
        } else {
            vals.push(last);
        }
    }
    vals.push(Some(rows.len() as i64));
    Row { t: hour, vals }
}

/// Combines an existing hourly row with a newer one for the same hour (raw rows that arrived
/// after their hour was rolled): extremes of both, mean weighted by count, the newer last.
fn merge_hour(layout: &Layout, old: &Row, new: &Row) -> Row {
    let n_col = layout.hourly_cols() - 1;
    let (n_old, n_new) = (old.vals[n_col].unwrap_or(0), new.vals[n_col].unwrap_or(0));
    let mut vals = new.vals.clone();
    for (f, agg) in layout.fields.iter().enumerate() {
        let c = layout.offset(f);
        if *agg == Agg::Last {
            vals[c] = new.vals[c].or(old.vals[c]);
            continue;
        }
        let pick = |i: usize, f: fn(i64, i64) -> i64| match (old.vals[i], new.vals[i]) {
            (Some(a), Some(b)) => Some(f(a, b)),
            (a, b) => b.or(a),
        };
        vals[c] = pick(c, i64::min);
        vals[c + 1] = pick(c + 1, i64::max);
        vals[c + 2] = match (old.vals[c + 2], new.vals[c + 2]) {
            (Some(a), Some(b)) if n_old + n_new > 0 => Some(
                ((a as f64 * n_old as f64 + b as f64 * n_new as f64) / (n_old + n_new) as f64)
                    .round() as i64,
            ),
            (a, b) => b.or(a),
        };
        vals[c + 3] = new.vals[c + 3].or(old.vals[c + 3]);
    }
    vals[n_col] = Some(n_old.saturating_add(n_new));
    Row { t: new.t, vals }
}

/// Days are kept below 2^24 (year 47,000).
const MAX_DAY: i64 = (1 << 24) - 1;
/// The latest sample time the store takes: below 2^39 (year 19,400), so a raw row's rowid
/// `t << 24 | series` fits in 63 bits.
const MAX_T: i64 = (1 << 39) - 1;
/// Series ids are below 2^24 in a chunk's rowid (16 million filesystems or drives).
const SERIES_BITS: u32 = 24;
const SERIES_MASK: i64 = (1 << SERIES_BITS) - 1;

/// The rowid of a raw row: time-major, so each commit (one sample per series) appends.
fn raw_key(t: i64, series: i64) -> i64 {
    (t.clamp(0, MAX_T) << SERIES_BITS) | (series & SERIES_MASK)
}

/// The rowids of raw rows with `from <= t <= to`; None when no stored time is in the range.
fn raw_keys(from: i64, to: i64) -> Option<(i64, i64)> {
    let (a, b) = (from.max(0), to.min(MAX_T));
    // Shifted only when in range: `a` may be any i64 beyond MAX_T.
    if a <= b {
        Some((a << SERIES_BITS, (b << SERIES_BITS) | SERIES_MASK))
    } else {
        None
    }
}

/// Days `?1..=?2` as a table `d(day)`: a series' day-keyed rows are read by one statement
/// that looks each day up (`d CROSS JOIN t ON key = day, series`) rather than a statement a day.
const DAYS_CTE: &str =
    "WITH RECURSIVE d(day) AS (SELECT ?1 UNION ALL SELECT day + 1 FROM d WHERE day < ?2) ";

/// The rowid of a series' day chunk: day-major, so a day's chunks of every series are one key
/// range, written together once when that day is rolled, and dropped together as a prefix.
fn chunk_id(series: i64, day: i64) -> i64 {
    (day.clamp(0, MAX_DAY) << SERIES_BITS) | (series & SERIES_MASK)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn scaled(v: Option<f64>, scale: f64) -> Option<i64> {
    v.filter(|x| x.is_finite())
        .map(|x| (x * scale).round() as i64)
}

const PPM: f64 = 1e6;
const MILLI: f64 = 1e3;
const NANO: f64 = 1e9;

fn stat(vals: &[Option<i64>], c: usize, scale: f64) -> Option<Stat> {
    Some(Stat {
        min: vals[c]? as f64 / scale,
        max: vals[c + 1]? as f64 / scale,
        mean: vals[c + 2]? as f64 / scale,
        last: vals[c + 3]? as f64 / scale,
    })
}

fn fs_point(t: i64, hourly: bool, v: &[Option<i64>]) -> Option<FsPoint> {
    Some(FsPoint {
        t,
        hourly,
        size: Stat::one(v[0]? as f64),
        avail: stat(v, 1, 1.0)?,
        free: stat(v, 5, 1.0)?,
        files_free: stat(v, 9, 1.0),
    })
}

fn drive_point(t: i64, hourly: bool, v: &[Option<i64>]) -> DrivePoint {
    let c = |i: usize| v[12 + i].map(|x| x as f64);
    DrivePoint {
        t,
        hourly,
        wear_used_ratio: stat(v, 0, PPM),
        spare_ratio: stat(v, 4, PPM),
        temperature_celsius: stat(v, 8, MILLI),
        host_written_bytes: c(0),
        nand_written_bytes: c(1),
        media_errors: c(2),
        power_on_hours: c(3),
        discarded_bytes: c(4),
    }
}

/// A raw row as hourly-shaped columns (each gauge's four aggregates equal), for reading.
fn raw_as_hourly(layout: &Layout, raw: &[Option<i64>]) -> Vec<Option<i64>> {
    let mut vals = Vec::with_capacity(layout.hourly_cols());
    for (v, agg) in raw.iter().zip(layout.fields) {
        match agg {
            Agg::Full => vals.extend([*v; 4]),
            Agg::Last => vals.push(*v),
        }
    }
    vals.push(Some(1));
    vals
}

/// A point read back: time, whether it is an hourly row, hourly-shaped columns.
type SeriesRow = (i64, bool, Vec<Option<i64>>);

/// The series tables of one kind.
#[derive(Clone, Copy)]
enum Kind {
    Fs,
    Drive,
}

impl Kind {
    fn layout(self) -> &'static Layout {
        match self {
            Kind::Fs => &FS,
            Kind::Drive => &DRIVE,
        }
    }
    fn raw_select(self) -> &'static str {
        match self {
            Kind::Fs => "SELECT id & 16777215, id >> 24, size, avail, free, files_free FROM fs_raw",
            Kind::Drive => {
                "SELECT id & 16777215, id >> 24, wear_ppm, spare_ppm, temp_mc, host_written, \
                 nand_written, media_errors, power_on_hours, discarded FROM drive_raw"
            }
        }
    }
    fn raw_table(self) -> &'static str {
        match self {
            Kind::Fs => "fs_raw",
            Kind::Drive => "drive_raw",
        }
    }
    fn hourly_table(self) -> &'static str {
        match self {
            Kind::Fs => "fs_hourly",
            Kind::Drive => "drive_hourly",
        }
    }
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
    /// Opens (or creates) `<state_dir>/history.db`. A damaged file is [`StoreError::Corrupt`];
    /// a read-only or full directory is an error naming the file.
    pub fn open(state_dir: &Path, cfg: &HistoryConfig) -> Result<Store, StoreError> {
        let path = state_dir.join(FILE_NAME);
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::Io {
            path: path.clone(),
            op: "creating the state directory",
            source,
        })?;
        let conn = Connection::open(&path).map_err(|e| classify(&path, "opening", e))?;
        let mut store = Store {
            path,
            conn,
            retention_raw: cfg.retention_raw.as_secs() as i64,
            retention_hourly: cfg.retention_hourly.as_secs() as i64,
            raw_interval: cfg.raw_interval.as_secs().max(1) as i64,
            fs_ids: HashMap::new(),
            drive_ids: HashMap::new(),
            target_ids: HashMap::new(),
            last_raw: HashMap::new(),
            raw_days: Default::default(),
        };
        store.prepare()?;
        Ok(store)
    }

    /// Opens the store; when the file is damaged, moves it aside as
    /// `history.db.corrupt-<unix time>` (its WAL alongside) and starts a new one.
    /// Returns where the damaged file went, for the daemon to log.
    pub fn open_or_recover(
        state_dir: &Path,
        cfg: &HistoryConfig,
        now: i64,
    ) -> Result<(Store, Option<PathBuf>), StoreError> {
        match Store::open(state_dir, cfg) {
            Err(e) if e.is_corrupt() => {
                let path = state_dir.join(FILE_NAME);
                let aside = state_dir.join(format!("{FILE_NAME}.corrupt-{now}"));
                let io = |op, source| StoreError::Io {
                    path: path.clone(),
                    op,
                    source,
                };
                std::fs::rename(&path, &aside)
                    .map_err(|s| io("moving the damaged file aside", s))?;
                let wal = state_dir.join(format!("{FILE_NAME}-wal"));
                if wal.exists() {
                    let to = state_dir.join(format!("{FILE_NAME}.corrupt-{now}-wal"));
                    std::fs::rename(&wal, to).map_err(|s| io("moving the damaged WAL aside", s))?;
                }
                let shm = state_dir.join(format!("{FILE_NAME}-shm"));
                if shm.exists() {
                    std::fs::remove_file(&shm).map_err(|s| io("removing the old shm file", s))?;
                }
                Ok((Store::open(state_dir, cfg)?, Some(aside)))
            }
            other => other.map(|s| (s, None)),
        }
    }

    /// Opens an existing store file for reading only, beside a daemon that writes it (WAL lets
    /// one writer and readers work at once): no pragma is changed, no table created, nothing
    /// checked beyond the schema version. A missing file or one without tables yet is
    /// [`StoreError::NotCreated`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let not_created = || StoreError::NotCreated {
            path: path.to_path_buf(),
        };
        if !path.exists() {
            return Err(not_created());
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, "opening read-only", e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| classify(path, "setting busy timeout", e))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| classify(path, "reading the schema version", e))?;
        match version {
            0 => return Err(not_created()),
            SCHEMA_VERSION => {}
            found @ 1..SCHEMA_VERSION => {
                return Err(StoreError::OlderSchema {
                    path: path.to_path_buf(),
                    found,
                });
            }
            found if found > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema {
                    path: path.to_path_buf(),
                    found,
                });
            }
            found => {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!("unknown schema version {found}"),
                });
            }
        }
        let cfg = HistoryConfig::default();
        Ok(Store {
            path: path.to_path_buf(),
            conn,
            retention_raw: cfg.retention_raw.as_secs() as i64,
            retention_hourly: cfg.retention_hourly.as_secs() as i64,
            raw_interval: cfg.raw_interval.as_secs() as i64,
            fs_ids: HashMap::new(),
            drive_ids: HashMap::new(),
            target_ids: HashMap::new(),
            last_raw: HashMap::new(),
            raw_days: Default::default(),
        })
    }

    /// Reads in one snapshot: every query until [`Store::end_read`] sees the same state of the
    /// file, however the daemon writes meanwhile (a report's figures agree with each other).
    pub fn begin_read(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN")
            .map_err(self.err("starting a read"))
    }

    /// Ends what [`Store::begin_read`] started.
    pub fn end_read(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("COMMIT")
            .map_err(self.err("ending a read"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| classify(&self.path, op, e)
    }

    /// Pragmas, an integrity check and the schema.
    fn prepare(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let path = &path;
        let e = |op| move |err| classify(path, op, err);
        // First, so that another process opening the file at the same moment (the daemon and
        // a tool) is waited for rather than failing with "database is locked".
        self.conn
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(e("setting busy timeout"))?;
        // The first read of the header: a file of garbage fails here.
        // Switching a new file to WAL takes an exclusive lock without calling the busy
        // handler: a second opener racing the first is told "locked" and tries again.
        let mut tries = 0;
        let mode: String = loop {
            match self
                .conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            {
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == ErrorCode::DatabaseBusy && tries < 50 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                other => break other.map_err(e("setting WAL mode"))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Sqlite {
                path: self.path.clone(),
                op: "setting WAL mode",
                source: rusqlite::Error::InvalidParameterName(format!("journal_mode is {mode}")),
            });
        }
        // WAL with NORMAL loses at most the last transactions on power loss, never on a crash
        // of the process, and never corrupts the file.
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(e("setting synchronous"))?;
        // A small page cache (512 KiB, SQLite's default is 2 MiB): the daemon writes once a
        // minute and reads for a forecast once an hour; its memory matters more than the I/O.
        self.conn
            .pragma_update(None, "cache_size", -512)
            .map_err(e("setting the cache size"))?;
        // A truncated file passes the header read; quick_check walks every page (~0.1 s for
        // 50 MiB, once at start).
        let check: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(e("checking integrity"))?;
        if check != "ok" {
            return Err(StoreError::Corrupt {
                path: self.path.clone(),
                detail: check,
            });
        }
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(e("reading the schema version"))?;
        match version {
            // A new file: the schema made.
            0 => self.under_write_lock(0, "creating the schema", |tx| {
                tx.execute_batch(SCHEMA)?;
                for (i, k) in ProbeKind::ALL.iter().enumerate() {
                    tx.execute(
                        "INSERT INTO probe_kind (id, name) VALUES (?1, ?2)",
                        params![i as i64, k.as_str()],
                    )?;
                }
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            })?,
            // In place, in one transaction: a crash or a full disk mid-way leaves version 1
            // whole.
            1 => self.under_write_lock(1, "upgrading the schema from version 1", |tx| {
                super::migrate::v1_to_v2(tx)?;
                super::migrate::v2_to_v3(tx)
            })?,
            2 => self.under_write_lock(2, "upgrading the schema from version 2", |tx| {
                super::migrate::v2_to_v3(tx)
            })?,
            SCHEMA_VERSION => {}
            found if found > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema {
                    path: self.path.clone(),
                    found,
                });
            }
            found => {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    detail: format!("unknown schema version {found}"),
                });
            }
        }
        Ok(())
    }

    /// Runs `change` in an immediate transaction if the schema version, read again under the
    /// write lock, is still `from`: a second process opening the same file at that moment (the
    /// daemon and a tool) waits (busy timeout), then finds the change made, instead of making it
    /// twice. `what` names the change in an error.
    fn under_write_lock(
        &mut self,
        from: i64,
        what: &'static str,
        change: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<()>,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |op| {
            let path = path.clone();
            move |err| classify(&path, op, err)
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(e(what))?;
        let again: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(e("reading the schema version"))?;
        if again == from {
            change(&tx).map_err(e(what))?;
        }
        tx.commit().map_err(e(what))
    }

    fn fs_id(&mut self, key: &FsKey, device: &str, t: i64) -> Result<i64, StoreError> {
        if let Some((id, dev)) = self.fs_ids.get(key)
            && dev == device
        {
            return Ok(*id);
        }
        let uuid = key.uuid.clone().unwrap_or_default();
        let find = |conn: &Connection, uuid: &str| {
            conn.query_row(
                "SELECT id FROM fs WHERE mountpoint = ?1 AND uuid = ?2",
                params![key.mountpoint, uuid],
                |r| r.get::<_, i64>(0),
            )
            .optional()
        };
        let mut id = find(&self.conn, &uuid).map_err(self.err("looking up a filesystem"))?;
        if id.is_none() && !uuid.is_empty() {
            // Seen before without its UUID: that series is this filesystem's.
            id = find(&self.conn, "").map_err(self.err("looking up a filesystem"))?;
            if let Some(old) = id {
                self.conn
                    .execute("UPDATE fs SET uuid = ?1 WHERE id = ?2", params![uuid, old])
                    .map_err(self.err("updating a filesystem"))?;
            }
        }
        let id = match id {
            Some(id) => {
                self.conn
                    .execute(
                        "UPDATE fs SET device = ?1 WHERE id = ?2",
                        params![device, id],
                    )
                    .map_err(self.err("updating a filesystem"))?;
                id
            }
            None => {
                self.conn
                    .execute(
                        "INSERT INTO fs (mountpoint, uuid, device, first_seen) VALUES (?1, ?2, ?3, ?4)",
                        params![key.mountpoint, uuid, device, t],
                    )
                    .map_err(self.err("adding a filesystem"))?;
                self.conn.last_insert_rowid()
            }
        };
        self.fs_ids.insert(key.clone(), (id, device.to_string()));
        Ok(id)
    }

    fn drive_id(
        &mut self,
        key: &DriveKey,
        kernel_name: &str,
        capacity: Option<u64>,
        t: i64,
    ) -> Result<i64, StoreError> {
        if let Some((id, name)) = self.drive_ids.get(key)
            && (name == kernel_name || kernel_name.is_empty())
        {
            return Ok(*id);
        }
        if key.wwn.is_none() && key.serial.is_none() {
            return Err(StoreError::NoDriveIdentity {
                path: self.path.clone(),
            });
        }
        let mut id = None;
        if let Some(wwn) = &key.wwn {
            id = self
                .conn
                .query_row("SELECT id FROM drive WHERE wwn = ?1", [wwn], |r| r.get(0))
                .optional()
                .map_err(self.err("looking up a drive"))?;
        }
        if id.is_none()
            && let Some(serial) = &key.serial
        {
            // A serial is unique per model; a row without a model (or a key without one)
            // matches on the serial alone.
            id = self
                .conn
                .query_row(
                    "SELECT id FROM drive WHERE serial = ?1 AND (model IS NULL OR ?2 IS NULL OR model = ?2) \
                     AND (wwn IS NULL OR ?3 IS NULL OR wwn = ?3)",
                    params![serial, key.model, key.wwn],
                    |r| r.get(0),
                )
                .optional()
                .map_err(self.err("looking up a drive"))?;
        }
        let id: i64 = match id {
            Some(id) => {
                self.conn
                    .execute(
                        "UPDATE drive SET kernel_name = coalesce(nullif(?1, ''), kernel_name), wwn = coalesce(wwn, ?2), \
                         serial = coalesce(serial, ?3), model = coalesce(model, ?4), \
                         capacity = coalesce(?5, capacity) WHERE id = ?6",
                        params![
                            kernel_name,
                            key.wwn,
                            key.serial,
                            key.model,
                            capacity.map(to_i64),
                            id
                        ],
                    )
                    .map_err(self.err("updating a drive"))?;
                id
            }
            None => {
                self.conn
                    .execute(
                        "INSERT INTO drive (wwn, serial, model, kernel_name, capacity, first_seen) \
                         VALUES (?1, ?2, ?3, nullif(?4, ''), ?5, ?6)",
                        params![
                            key.wwn,
                            key.serial,
                            key.model,
                            kernel_name,
                            capacity.map(to_i64),
                            t
                        ],
                    )
                    .map_err(self.err("adding a drive"))?;
                self.conn.last_insert_rowid()
            }
        };
        self.drive_ids
            .insert(key.clone(), (id, kernel_name.to_string()));
        Ok(id)
    }

    /// Series ids live in the low 24 bits of the raw and chunk rowids.
    fn series_fits(&self, id: i64) -> Result<(), StoreError> {
        if (0..=SERIES_MASK).contains(&id) {
            Ok(())
        } else {
            Err(StoreError::TooManySeries {
                path: self.path.clone(),
                id,
            })
        }
    }

    /// True when a raw sample of this series at `t` is due (the `raw_interval` gate).
    fn raw_due(&mut self, kind: Kind, id: i64, t: i64) -> Result<bool, StoreError> {
        let k = (kind as u8, id);
        // Only a sample later than `t - raw_interval` can hold this one back, so the lookup
        // reads the raw table's newest rows (time-major), not the series' whole past.
        let last = match self.last_raw.get(&k) {
            Some(&l) => Some(l),
            None => self
                .conn
                .prepare_cached(&format!(
                    "SELECT max(id) >> 24 FROM {} WHERE id >= ?1 AND id & 16777215 = ?2",
                    kind.raw_table(),
                ))
                .and_then(|mut st| {
                    let after = t.saturating_sub(self.raw_interval).saturating_add(1);
                    st.query_row([raw_key(after, 0), id], |r| r.get::<_, Option<i64>>(0))
                })
                .map_err(self.err("reading the last sample"))?,
        };
        let due = last.is_none_or(|l| t >= l.saturating_add(self.raw_interval));
        if due {
            self.last_raw.insert(k, t);
        } else if let Some(l) = last {
            self.last_raw.insert(k, l);
        }
        Ok(due)
    }

    /// Records filesystem samples in one transaction; returns how many were stored (samples
    /// closer than `raw_interval` to the series' previous one, or before 1970, are left out).
    pub fn record_fs<'a, I>(&mut self, samples: I) -> Result<usize, StoreError>
    where
        I: IntoIterator,
        I::Item: Into<FsSampleRef<'a>>,
    {
        self.in_tx("recording filesystem samples", |s| {
            let mut n = 0;
            let summarized = s.summarized_through()?;
            for x in samples {
                let x: FsSampleRef = x.into();
                if !(0..=MAX_T).contains(&x.t) {
                    continue;
                }
                let id = s.fs_id(x.key, x.device, x.t)?;
                s.series_fits(id)?;
                if !s.raw_due(Kind::Fs, id, x.t)? {
                    continue;
                }
                s.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO fs_raw (id, size, avail, free, files_free) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            raw_key(x.t, id),
                            to_i64(x.size_bytes),
                            to_i64(x.avail_bytes),
                            to_i64(x.free_bytes),
                            x.files_free.map(to_i64)
                        ])
                    })
                    .map_err(s.err("recording a filesystem sample"))?;
                let day = x.t.div_euclid(DAY);
                if summarized.is_some_and(|d| day <= d) {
                    // A sample of a day already summarized (a late commit, a clock set back):
                    // its extremes widened in place, so a restart reads the same day.
                    s.conn
                        .prepare_cached(
                            "INSERT INTO fs_day (id, avail_min, avail_max, size) VALUES (?1, ?2, ?2, ?3) \
                             ON CONFLICT (id) DO UPDATE SET avail_min = min(avail_min, excluded.avail_min), \
                             avail_max = max(avail_max, excluded.avail_max)",
                        )
                        .and_then(|mut st| {
                            st.execute(params![
                                chunk_id(id, day),
                                to_i64(x.avail_bytes),
                                to_i64(x.size_bytes)
                            ])
                        })
                        .map_err(s.err("recording a filesystem sample"))?;
                }
                if let Some(days) = s.raw_days.get_mut() {
                    note_raw_day(days, id, x.t, to_i64(x.avail_bytes), to_i64(x.size_bytes));
                }
                n += 1;
            }
            Ok(n)
        })
    }

    /// Records drive samples in one transaction; returns how many were stored.
    pub fn record_drives(&mut self, samples: &[DriveSample]) -> Result<usize, StoreError> {
        self.in_tx("recording drive samples", |s| {
            let mut n = 0;
            for x in samples {
                if !(0..=MAX_T).contains(&x.t) {
                    continue;
                }
                let id = s.drive_id(&x.key, &x.kernel_name, x.capacity_bytes, x.t)?;
                s.series_fits(id)?;
                if !s.raw_due(Kind::Drive, id, x.t)? {
                    continue;
                }
                s.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO drive_raw (id, wear_ppm, spare_ppm, temp_mc, \
                         host_written, nand_written, media_errors, power_on_hours, discarded) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            raw_key(x.t, id),
                            scaled(x.wear_used_ratio, PPM),
                            scaled(x.spare_ratio, PPM),
                            scaled(x.temperature_celsius, MILLI),
                            x.host_written_bytes.map(to_i64),
                            x.nand_written_bytes.map(to_i64),
                            x.media_errors.map(to_i64),
                            x.power_on_hours.map(to_i64),
                            x.discarded_bytes.map(to_i64),
                        ])
                    })
                    .map_err(s.err("recording a drive sample"))?;
                n += 1;
            }
            Ok(n)
        })
    }

    /// Records probe results (all kept, at full resolution).
    pub fn record_probes(&mut self, results: &[ProbeRecord]) -> Result<(), StoreError> {
        self.in_tx("recording probe results", |s| {
            for p in results {
                let target = s.target_id(&p.target)?;
                let drive = match &p.drive {
                    Some(k) => Some(s.drive_id_quiet(k, p.t).or_else(|e| match e {
                        StoreError::NoDriveIdentity { .. } => Ok(-1),
                        e => Err(e),
                    })?),
                    None => None,
                }
                .filter(|&d| d >= 0);
                let kind = ProbeKind::ALL.iter().position(|k| *k == p.kind).unwrap_or(0) as i64;
                s.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO probe (target, t, kind, drive, ops, p50_ns, p99_ns, \
                         max_ns, throughput, fill_ppm, since_discard_s, idle_s, util_ppm, \
                         util_before_ppm, written_since_discard) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            target,
                            p.t,
                            kind,
                            drive,
                            to_i64(p.ops),
                            scaled(Some(p.p50_seconds), NANO).unwrap_or(0),
                            scaled(Some(p.p99_seconds), NANO).unwrap_or(0),
                            scaled(Some(p.max_seconds), NANO).unwrap_or(0),
                            scaled(p.throughput_bytes_per_second, 1.0),
                            scaled(p.fill_ratio, PPM),
                            scaled(p.since_discard_seconds, 1.0),
                            scaled(p.idle_seconds, 1.0),
                            scaled(p.utilization_ratio, PPM),
                            scaled(p.utilization_before_ratio, PPM),
                            p.written_since_discard_bytes.map(to_i64),
                        ])
                    })
                    .map_err(s.err("recording a probe result"))?;
            }
            Ok(())
        })
    }

    fn target_id(&mut self, path: &str) -> Result<i64, StoreError> {
        if let Some(&id) = self.target_ids.get(path) {
            return Ok(id);
        }
        self.conn
            .execute(
                "INSERT OR IGNORE INTO probe_target (path) VALUES (?1)",
                [path],
            )
            .map_err(self.err("adding a probe target"))?;
        let id: i64 = self
            .conn
            .query_row("SELECT id FROM probe_target WHERE path = ?1", [path], |r| {
                r.get(0)
            })
            .map_err(self.err("looking up a probe target"))?;
        self.target_ids.insert(path.to_string(), id);
        Ok(id)
    }

    /// Records discard bursts.
    pub fn record_discards(&mut self, events: &[DiscardEvent]) -> Result<(), StoreError> {
        let rows = events.iter().map(|e| (&e.drive, e.t, e.bytes));
        self.record_drive_events(
            "recording discard events",
            "discard (drive, t, bytes)",
            rows,
        )
    }

    /// Records idle periods.
    pub fn record_idle(&mut self, periods: &[IdlePeriod]) -> Result<(), StoreError> {
        let rows = periods.iter().map(|p| (&p.drive, p.start, p.seconds));
        self.record_drive_events(
            "recording idle periods",
            "idle (drive, start, seconds)",
            rows,
        )
    }

    /// (drive, time, value) rows into an event table, in one transaction.
    fn record_drive_events<'a>(
        &mut self,
        op: &'static str,
        table: &str,
        rows: impl Iterator<Item = (&'a DriveKey, i64, u64)>,
    ) -> Result<(), StoreError> {
        self.in_tx(op, |s| {
            for (drive, t, value) in rows {
                let id = s.drive_id_quiet(drive, t)?;
                s.conn
                    .prepare_cached(&format!(
                        "INSERT OR REPLACE INTO {table} VALUES (?1, ?2, ?3)"
                    ))
                    .and_then(|mut st| st.execute(params![id, t, to_i64(value)]))
                    .map_err(s.err(op))?;
            }
            Ok(())
        })
    }

    /// A drive's id from an event, which carries no kernel name: keeps the known one.
    fn drive_id_quiet(&mut self, key: &DriveKey, t: i64) -> Result<i64, StoreError> {
        self.drive_id(key, "", None, t)
    }

    /// Runs `f` in one transaction; on error rolls back and forgets cached state (ids and
    /// raw times may name rows that were rolled back).
    fn in_tx<T>(
        &mut self,
        op: &'static str,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.err(op))?;
        match f(self) {
            Ok(v) => {
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    self.forget();
                    return Err(classify(&self.path, op, e));
                }
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.forget();
                Err(e)
            }
        }
    }

    fn forget(&mut self) {
        self.fs_ids.clear();
        self.drive_ids.clear();
        self.target_ids.clear();
        self.last_raw.clear();
        self.raw_days.replace(None);
    }

    /// Rolls the raw rows of each UTC day wholly older than `retention_raw` into hourly rows and
    /// deletes them; drops the hourly rows of each day wholly older than `retention_hourly`,
    /// and probe results and events older than it. One transaction; run it every few minutes to
    /// an hour. Whole days, so a day's chunks are written once and dropped once (a chunk
    /// rewritten every hour as its day rolls in would write it 24 times): raw rows stay up to a
    /// day longer than `retention_raw`, hourly rows up to a day longer than `retention_hourly`.
    pub fn downsample(&mut self, now: i64) -> Result<Maintenance, StoreError> {
        let raw_cut = now.saturating_sub(self.retention_raw).div_euclid(DAY) * DAY;
        let long_cut = now.saturating_sub(self.retention_hourly);
        self.in_tx("downsampling", |s| {
            let mut m = Maintenance::default();
            for kind in [Kind::Fs, Kind::Drive] {
                s.roll(kind, raw_cut, &mut m)?;
                s.drop_days(kind, long_cut.div_euclid(DAY), &mut m)?;
            }
            // A rolled day's extremes are in its chunk's summary now.
            s.conn
                .prepare_cached("DELETE FROM fs_day WHERE id < ?1")
                .and_then(|mut st| st.execute([chunk_id(0, raw_cut.div_euclid(DAY))]))
                .map_err(s.err("dropping rolled day summaries"))?;
            m.days_summarized += s.summarize_raw_days(now)?;
            for (table, col) in [("probe", "t"), ("discard", "t"), ("idle", "start")] {
                m.events_dropped += s
                    .conn
                    .execute(&format!("DELETE FROM {table} WHERE {col} < ?1"), [long_cut])
                    .map_err(s.err("dropping old events"))?;
            }
            Ok(m)
        })
    }

    /// The last day `fs_day` holds the extremes of, if any.
    fn summarized_through(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached("SELECT max(id) FROM fs_day")
            .and_then(|mut st| st.query_row([], |r| r.get::<_, Option<i64>>(0)))
            .map(|k| k.map(|k| k >> SERIES_BITS))
            .map_err(self.err("reading day summaries"))
    }

    /// Writes the extremes of every finished raw day not yet in `fs_day`: days that ended two
    /// hours before `now` (a commit can come up to `flush_interval`, at most an hour, after
    /// its samples were taken). Reads those days' raw rows once, in key order; returns the rows
    /// written.
    fn summarize_raw_days(&mut self, now: i64) -> Result<usize, StoreError> {
        let through = now.saturating_sub(2 * HOUR).div_euclid(DAY) - 1;
        let first_raw = self
            .conn
            .prepare_cached("SELECT min(id) FROM fs_raw")
            .and_then(|mut st| st.query_row([], |r| r.get::<_, Option<i64>>(0)))
            .map_err(self.err("reading raw rows"))?
            .map(|k| (k >> SERIES_BITS).div_euclid(DAY));
        let Some(first_raw) = first_raw else {
            return Ok(0);
        };
        let from = match self.summarized_through()? {
            Some(d) => (d + 1).max(first_raw),
            None => first_raw,
        };
        if from > through {
            return Ok(0);
        }
        let days = self.raw_day_extremes(from * DAY, (through + 1) * DAY)?;
        // Day-major rowids: written in key order, a run appended at the table's right edge.
        let mut rows: Vec<_> = days.into_iter().collect();
        rows.sort_by_key(|&((fs, day), _)| (day, fs));
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO fs_day (id, avail_min, avail_max, size) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(self.err("writing day summaries"))?;
        for ((fs, day), (lo, hi, size)) in &rows {
            st.execute(params![chunk_id(*fs, *day), lo, hi, size])
                .map_err(self.err("writing day summaries"))?;
        }
        Ok(rows.len())
    }

    /// Every filesystem's raw-day extremes of the raw rows with `from <= t < to`, from one
    /// scan in key (time) order.
    fn raw_day_extremes(&self, from: i64, to: i64) -> Result<RawDays, StoreError> {
        let e = self.err("reading raw rows");
        let mut days = RawDays::new();
        let Some((a, b)) = raw_keys(from, to.saturating_sub(1)) else {
            return Ok(days);
        };
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT id & 16777215, id >> 24, avail, size FROM fs_raw WHERE id >= ?1 AND id <= ?2",
            )
            .map_err(&e)?;
        let mut rows = st.query([a, b]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            note_raw_day(
                &mut days,
                r.get(0).map_err(&e)?,
                r.get(1).map_err(&e)?,
                r.get(2).map_err(&e)?,
                r.get(3).map_err(&e)?,
            );
        }
        Ok(days)
    }

    /// The first and last day a day-keyed table holds, clamped to `from`'s and `to`'s days
    /// (two lookups at the ends of its key), so a read day by day costs the days stored, not
    /// the range asked; `min_sql`/`max_sql` select the key's extremes, `day` maps one to a day.
    fn days_held(
        &self,
        min_sql: &str,
        max_sql: &str,
        day: fn(i64) -> i64,
        from: i64,
        to: i64,
    ) -> Result<Option<(i64, i64)>, StoreError> {
        let one = |sql: &str| {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut st| st.query_row([], |r| r.get::<_, Option<i64>>(0)))
                .map_err(self.err("reading the stored days"))
        };
        let (Some(lo), Some(hi)) = (one(min_sql)?, one(max_sql)?) else {
            return Ok(None);
        };
        let (a, b) = (
            from.div_euclid(DAY).max(day(lo)),
            to.div_euclid(DAY).min(day(hi)),
        );
        Ok((a <= b).then_some((a, b)))
    }

    /// The days of a kind's hourly chunks in `from..=to`'s days that the table can hold.
    fn chunk_days(&self, kind: Kind, from: i64, to: i64) -> Result<Option<(i64, i64)>, StoreError> {
        let t = kind.hourly_table();
        self.days_held(
            &format!("SELECT min(id) FROM {t}"),
            &format!("SELECT max(id) FROM {t}"),
            |id| id >> SERIES_BITS,
            from,
            to,
        )
    }

    /// Rolls the raw rows before `cut` (a day's start) into day chunks, a day at a time, each
    /// day read an hour at a time in key order (time-major: a range scan, no per-series seek),
    /// so memory holds an hour of rows and a day of hourly rows.
    fn roll(&mut self, kind: Kind, cut: i64, m: &mut Maintenance) -> Result<(), StoreError> {
        let layout = kind.layout();
        let nf = layout.fields();
        loop {
            let first: Option<i64> = self
                .conn
                .prepare_cached(&format!("SELECT min(id) FROM {}", kind.raw_table()))
                .and_then(|mut st| st.query_row([], |r| r.get::<_, Option<i64>>(0)))
                .map_err(self.err("reading raw rows"))?
                .map(|k| k >> SERIES_BITS);
            let Some(first) = first.filter(|&t| t < cut) else {
                return Ok(());
            };
            let day = first.div_euclid(DAY);
            let end = (day + 1) * DAY;
            let mut per_series: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
            for hour in (day * DAY..end).step_by(HOUR as usize) {
                let mut rows_of: BTreeMap<i64, Vec<Vec<Option<i64>>>> = BTreeMap::new();
                let mut st = self
                    .conn
                    .prepare_cached(&format!(
                        "{} WHERE id >= ?1 AND id < ?2 ORDER BY id",
                        kind.raw_select()
                    ))
                    .map_err(self.err("reading raw rows"))?;
                let mut rows = st
                    .query([raw_key(hour, 0), raw_key(hour + HOUR, 0)])
                    .map_err(self.err("reading raw rows"))?;
                while let Some(r) = rows.next().map_err(self.err("reading raw rows"))? {
                    let id: i64 = r.get(0).map_err(self.err("reading raw rows"))?;
                    let mut v = Vec::with_capacity(nf);
                    for i in 0..nf {
                        v.push(r.get(2 + i).map_err(self.err("reading raw rows"))?);
                    }
                    rows_of.entry(id).or_default().push(v);
                    m.raw_rolled += 1;
                }
                for (id, rows) in rows_of {
                    per_series
                        .entry(id)
                        .or_default()
                        .push(aggregate(layout, hour, &rows));
                }
            }
            // Ascending series: the day's chunks are one ascending run of rowids.
            for (id, new) in per_series {
                let mut rows = self.load_day(kind, id, day)?;
                for r in new {
                    match rows.iter_mut().find(|o| o.t == r.t) {
                        Some(o) => *o = merge_hour(layout, o, &r),
                        None => rows.push(r),
                    }
                    m.hours_written += 1;
                }
                rows.sort_by_key(|r| r.t);
                self.store_day(kind, id, day, &rows)?;
            }
            self.conn
                .prepare_cached(&format!("DELETE FROM {} WHERE id < ?1", kind.raw_table()))
                .and_then(|mut st| st.execute([raw_key(end, 0)]))
                .map_err(self.err("deleting rolled raw rows"))?;
            if let (Kind::Fs, Some(days)) = (kind, self.raw_days.get_mut()) {
                days.retain(|&(_, d), _| d > day);
            }
        }
    }

    /// Drops the day chunks of days before `cut_day`: a prefix of the day-major rowids.
    fn drop_days(
        &mut self,
        kind: Kind,
        cut_day: i64,
        m: &mut Maintenance,
    ) -> Result<(), StoreError> {
        let table = kind.hourly_table();
        let below = chunk_id(0, cut_day);
        {
            let mut st = self
                .conn
                .prepare_cached(&format!("SELECT id, data FROM {table} WHERE id < ?1"))
                .map_err(self.err("reading old hourly rows"))?;
            let mut rows = st
                .query([below])
                .map_err(self.err("reading old hourly rows"))?;
            while let Some(r) = rows.next().map_err(self.err("reading old hourly rows"))? {
                let id: i64 = r.get(0).map_err(self.err("reading old hourly rows"))?;
                let blob: Vec<u8> = r.get(1).map_err(self.err("reading old hourly rows"))?;
                let (series, day) = (id & ((1 << SERIES_BITS) - 1), id >> SERIES_BITS);
                m.hours_dropped += self.decode_day(kind, series, day, &blob)?.len();
            }
        }
        self.conn
            .prepare_cached(&format!("DELETE FROM {table} WHERE id < ?1"))
            .and_then(|mut st| st.execute([below]))
            .map_err(self.err("dropping old hourly rows"))?;
        Ok(())
    }

    fn load_day(&self, kind: Kind, id: i64, day: i64) -> Result<Vec<Row>, StoreError> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached(&format!(
                "SELECT data FROM {} WHERE id = ?1",
                kind.hourly_table(),
            ))
            .and_then(|mut st| st.query_row([chunk_id(id, day)], |r| r.get(0)).optional())
            .map_err(self.err("reading hourly rows"))?;
        match blob {
            None => Ok(Vec::new()),
            Some(b) => self.decode_day(kind, id, day, &b),
        }
    }

    fn decode_day(&self, kind: Kind, id: i64, day: i64, b: &[u8]) -> Result<Vec<Row>, StoreError> {
        let layout = kind.layout();
        let mut rows = codec::decode(b, layout.hourly_cols(), layout.refs).map_err(|e| {
            StoreError::Corrupt {
                path: self.path.clone(),
                detail: format!("{} row of series {id}, day {day}: {e}", kind.hourly_table()),
            }
        })?;
        for r in &mut rows {
            r.t = day * DAY + r.t * HOUR;
        }
        Ok(rows)
    }

    fn store_day(&self, kind: Kind, id: i64, day: i64, rows: &[Row]) -> Result<(), StoreError> {
        if !(0..1 << SERIES_BITS).contains(&id) {
            return Err(StoreError::TooManySeries {
                path: self.path.clone(),
                id,
            });
        }
        let table = kind.hourly_table();
        if rows.is_empty() {
            self.conn
                .execute(
                    &format!("DELETE FROM {table} WHERE id = ?1"),
                    [chunk_id(id, day)],
                )
                .map_err(self.err("deleting hourly rows"))?;
            return Ok(());
        }
        let rel: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                t: (r.t - day * DAY) / HOUR,
                vals: r.vals.clone(),
            })
            .collect();
        let layout = kind.layout();
        let blob = codec::encode(&rel, layout.hourly_cols(), layout.refs);
        let last = |c: usize| rows.iter().rev().find_map(|r| r.vals[c]);
        let (summary, sql) = match kind {
            Kind::Fs => (
                vec![
                    rows.iter().filter_map(|r| r.vals[1]).min(),
                    rows.iter().filter_map(|r| r.vals[2]).max(),
                    last(0),
                ],
                "INSERT OR REPLACE INTO fs_hourly (id, fs, day, data, avail_min, avail_max, size) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            ),
            Kind::Drive => (
                vec![rows.last().map(|r| r.t), last(3), last(12), last(13)],
                "INSERT OR REPLACE INTO drive_hourly (id, drive, day, data, t_last, wear_ppm, \
                 host_written, nand_written) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            ),
        };
        let mut values: Vec<rusqlite::types::Value> =
            vec![chunk_id(id, day).into(), id.into(), day.into(), blob.into()];
        values.extend(summary.into_iter().map(rusqlite::types::Value::from));
        self.conn
            .prepare_cached(sql)
            .and_then(|mut st| st.execute(rusqlite::params_from_iter(values)))
            .map_err(self.err("writing hourly rows"))?;
        Ok(())
    }

    /// Every filesystem series.
    pub fn filesystems(&self) -> Result<Vec<FsInfo>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, mountpoint, uuid, device, first_seen FROM fs ORDER BY id")
            .map_err(self.err("listing filesystems"))?;
        st.query_map([], |r| {
            let uuid: String = r.get(2)?;
            Ok(FsInfo {
                id: FsId(r.get(0)?),
                key: FsKey {
                    mountpoint: r.get(1)?,
                    uuid: (!uuid.is_empty()).then_some(uuid),
                },
                device: r.get(3)?,
                first_seen: r.get(4)?,
            })
        })
        .and_then(|it| it.collect())
        .map_err(self.err("listing filesystems"))
    }

    /// Every drive series.
    pub fn drives(&self) -> Result<Vec<DriveInfo>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, wwn, serial, model, kernel_name, capacity, first_seen FROM drive ORDER BY id",
            )
            .map_err(self.err("listing drives"))?;
        st.query_map([], |r| {
            Ok(DriveInfo {
                id: DriveId(r.get(0)?),
                key: DriveKey {
                    wwn: r.get(1)?,
                    serial: r.get(2)?,
                    model: r.get(3)?,
                },
                kernel_name: r.get(4)?,
                capacity_bytes: r.get::<_, Option<i64>>(5)?.map(|c| c.max(0) as u64),
                first_seen: r.get(6)?,
            })
        })
        .and_then(|it| it.collect())
        .map_err(self.err("listing drives"))
    }

    /// Hourly rows of one series in `from..=to`, then raw rows, merged in time order (an hour
    /// is left out once raw rows cover it).
    fn series(
        &self,
        kind: Kind,
        id: i64,
        from: i64,
        to: i64,
    ) -> Result<Vec<SeriesRow>, StoreError> {
        let layout = kind.layout();
        let nf = layout.fields();
        let raw: Vec<(i64, Vec<Option<i64>>)> = match raw_keys(from, to) {
            None => Vec::new(),
            Some((lo, hi)) => {
                let mut st = self
                    .conn
                    .prepare_cached(&format!(
                        "{} WHERE id >= ?1 AND id <= ?2 AND id & 16777215 = ?3 ORDER BY id",
                        kind.raw_select(),
                    ))
                    .map_err(self.err("reading raw rows"))?;
                st.query_map([lo, hi, id], |r| {
                    let mut v = Vec::with_capacity(nf);
                    for i in 0..nf {
                        v.push(r.get(2 + i)?);
                    }
                    Ok((r.get(1)?, v))
                })
                .and_then(|it| it.collect())
                .map_err(self.err("reading raw rows"))?
            }
        };
        let first_raw = raw.first().map(|r| r.0).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        // One lookup a stored day: the chunks are day-major.
        if let Some((d0, d1)) = self.chunk_days(kind, from, to)? {
            let chunks: Vec<(i64, Vec<u8>)> = {
                let mut st = self
                    .conn
                    .prepare_cached(&format!(
                        "{DAYS_CTE}SELECT d.day, h.data FROM d CROSS JOIN {} h \
                         ON h.id = (d.day << {SERIES_BITS}) | ?3",
                        kind.hourly_table(),
                    ))
                    .map_err(self.err("reading hourly rows"))?;
                st.query_map([d0, d1, id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .and_then(|it| it.collect())
                    .map_err(self.err("reading hourly rows"))?
            };
            for (day, blob) in chunks {
                for r in self.decode_day(kind, id, day, &blob)? {
                    if r.t >= from && r.t <= to && r.t.saturating_add(HOUR) <= first_raw {
                        out.push((r.t, true, r.vals));
                    }
                }
            }
        }
        for (t, v) in raw {
            out.push((t, false, raw_as_hourly(layout, &v)));
        }
        Ok(out)
    }

    /// A filesystem's series in `from..=to` (Unix seconds): hourly points, then raw samples.
    pub fn fs_series(&self, fs: FsId, from: i64, to: i64) -> Result<Vec<FsPoint>, StoreError> {
        Ok(self
            .series(Kind::Fs, fs.0, from, to)?
            .into_iter()
            .filter_map(|(t, h, v)| fs_point(t, h, &v))
            .collect())
    }

    /// A drive's series in `from..=to`: hourly points, then raw samples.
    pub fn drive_series(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<DrivePoint>, StoreError> {
        Ok(self
            .series(Kind::Drive, drive.0, from, to)?
            .into_iter()
            .map(|(t, h, v)| drive_point(t, h, &v))
            .collect())
    }

    /// A filesystem's daily low and high of used bytes (`size - avail`) and size for the days
    /// from `from`'s to `to`'s (whole days): what
    /// [`super::forecast::forecast_filesystem_days`] needs, read from the hourly chunks' day
    /// summaries and the raw days' extremes kept in memory, instead of every point. Equal to
    /// [`super::forecast::daily_use`] of [`Store::fs_series`] over whole days.
    pub fn fs_days(&self, fs: FsId, from: i64, to: i64) -> Result<Vec<DayUse>, StoreError> {
        let mut days: BTreeMap<i64, DayUse> = BTreeMap::new();
        let e = self.err("reading daily summaries");
        // The chunks are day-major: one lookup a stored day.
        if let Some((d0, d1)) = self.chunk_days(Kind::Fs, from, to)? {
            let mut st = self
                .conn
                .prepare_cached(&format!(
                    "{DAYS_CTE}SELECT d.day, h.avail_min, h.avail_max, h.size FROM d \
                     CROSS JOIN fs_hourly h ON h.id = (d.day << {SERIES_BITS}) | ?3"
                ))
                .map_err(&e)?;
            let rows = st
                .query_map([d0, d1, fs.0], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, Option<i64>>(3)?,
                    ))
                })
                .map_err(&e)?;
            for row in rows {
                if let (day, Some(amin), Some(amax), Some(size)) = row.map_err(&e)? {
                    days.insert(
                        day,
                        DayUse {
                            day,
                            low: (size - amax) as f64,
                            high: (size - amin) as f64,
                            size: size as f64,
                        },
                    );
                }
            }
        }
        if self.raw_days.borrow().is_none() {
            let built = self.scan_raw_days()?;
            self.raw_days.replace(Some(built));
        }
        let raw_days: Vec<DayUse> = self
            .raw_days
            .borrow()
            .iter()
            .flat_map(|m| m.range((fs.0, from.div_euclid(DAY))..=(fs.0, to.div_euclid(DAY))))
            .map(|(&(_, day), &(lo, hi, size))| DayUse {
                day,
                low: (size - hi) as f64,
                high: (size - lo) as f64,
                size: size as f64,
            })
            .collect();
        for d in raw_days {
            days.entry(d.day)
                .and_modify(|h| {
                    h.low = h.low.min(d.low);
                    h.high = h.high.max(d.high);
                    h.size = d.size;
                })
                .or_insert(d);
        }
        Ok(days.into_values().collect())
    }

    /// Every filesystem's raw-day extremes: the finished days' from `fs_day` (a row each),
    /// the days since from the raw rows.
    fn scan_raw_days(&self) -> Result<RawDays, StoreError> {
        let e = self.err("reading day summaries");
        let mut days = RawDays::new();
        let mut st = self
            .conn
            .prepare_cached("SELECT id, avail_min, avail_max, size FROM fs_day")
            .map_err(&e)?;
        let mut rows = st.query([]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            let id: i64 = r.get(0).map_err(&e)?;
            days.insert(
                (id & SERIES_MASK, id >> SERIES_BITS),
                (
                    r.get(1).map_err(&e)?,
                    r.get(2).map_err(&e)?,
                    r.get(3).map_err(&e)?,
                ),
            );
        }
        // The days after the last summarized one: disjoint from those read above.
        let since = self.summarized_through()?.map_or(0, |d| (d + 1) * DAY);
        days.extend(self.raw_day_extremes(since, MAX_T + 1)?);
        Ok(days)
    }

    /// One point a day of a drive (the day's last wear, host and NAND bytes written; the other
    /// fields `None`) for the days from `from`'s to `to`'s: what [`super::forecast::forecast_drive`]
    /// needs over years, without decoding every hour.
    pub fn drive_days(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<DrivePoint>, StoreError> {
        let e = self.err("reading daily summaries");
        let point =
            |t: i64, hourly: bool, w: Option<i64>, h: Option<i64>, n: Option<i64>| DrivePoint {
                t,
                hourly,
                wear_used_ratio: w.map(|w| Stat::one(w as f64 / PPM)),
                spare_ratio: None,
                temperature_celsius: None,
                host_written_bytes: h.map(|x| x as f64),
                nand_written_bytes: n.map(|x| x as f64),
                media_errors: None,
                power_on_hours: None,
                discarded_bytes: None,
            };
        let mut days: BTreeMap<i64, DrivePoint> = BTreeMap::new();
        // One lookup a stored day: the chunks are day-major.
        if let Some((d0, d1)) = self.chunk_days(Kind::Drive, from, to)? {
            let mut st = self
                .conn
                .prepare_cached(&format!(
                    "{DAYS_CTE}SELECT h.t_last, h.wear_ppm, h.host_written, h.nand_written FROM d \
                     CROSS JOIN drive_hourly h ON h.id = (d.day << {SERIES_BITS}) | ?3"
                ))
                .map_err(&e)?;
            let rows = st
                .query_map([d0, d1, drive.0], |r| {
                    Ok(point(r.get(0)?, true, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(&e)?;
            for p in rows {
                let p = p.map_err(&e)?;
                days.insert(p.t.div_euclid(DAY), p);
            }
        }
        // Raw rows are time-major: each day's last row of this drive is found by reading the
        // day backwards from its end (past the other drives' rows of the same moments).
        let held = self.days_held(
            "SELECT min(id) FROM drive_raw",
            "SELECT max(id) FROM drive_raw",
            |k| (k >> SERIES_BITS).div_euclid(DAY),
            from,
            to,
        )?;
        if let Some((d0, d1)) = held {
            let mut st = self
                .conn
                .prepare_cached(
                    "SELECT id >> 24, wear_ppm, host_written, nand_written FROM drive_raw \
                     WHERE id >= ?1 AND id <= ?2 AND id & 16777215 = ?3 ORDER BY id DESC LIMIT 1",
                )
                .map_err(&e)?;
            for day in d0..=d1 {
                let Some((a, b)) = raw_keys((day * DAY).max(from), (day * DAY + DAY - 1).min(to))
                else {
                    continue;
                };
                let p = st
                    .query_row([a, b, drive.0], |r| {
                        Ok(point(r.get(0)?, false, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()
                    .map_err(&e)?;
                if let Some(p) = p {
                    days.insert(day, p);
                }
            }
        }
        Ok(days.into_values().collect())
    }

    /// The id of a filesystem series, if the store has one.
    pub fn fs_id_of(&self, key: &FsKey) -> Result<Option<FsId>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM fs WHERE mountpoint = ?1 AND uuid = ?2",
                params![key.mountpoint, key.uuid.clone().unwrap_or_default()],
                |r| r.get(0).map(FsId),
            )
            .optional()
            .map_err(self.err("looking up a filesystem"))
    }

    /// Probe results in `from..=to`, all targets, in time order.
    pub fn probe_results(&self, from: i64, to: i64) -> Result<Vec<ProbeRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT pt.path, d.wwn, d.serial, d.model, p.t, p.kind, p.ops, p.p50_ns, p.p99_ns, \
                 p.max_ns, p.throughput, p.fill_ppm, p.since_discard_s, p.idle_s, p.util_ppm, \
                 p.util_before_ppm, p.written_since_discard \
                 FROM probe p JOIN probe_target pt ON pt.id = p.target \
                 LEFT JOIN drive d ON d.id = p.drive WHERE p.t >= ?1 AND p.t <= ?2 ORDER BY p.t, pt.path, p.kind",
            )
            .map_err(self.err("reading probe results"))?;
        let f = |v: Option<i64>, s: f64| v.map(|x| x as f64 / s);
        st.query_map([from, to], |r| {
            let wwn: Option<String> = r.get(1)?;
            let serial: Option<String> = r.get(2)?;
            let drive = (wwn.is_some() || serial.is_some()).then(|| DriveKey {
                wwn,
                serial,
                model: r.get(3).ok().flatten(),
            });
            let kind: i64 = r.get(5)?;
            Ok(ProbeRecord {
                target: r.get(0)?,
                drive,
                t: r.get(4)?,
                kind: ProbeKind::ALL
                    .get(kind as usize)
                    .copied()
                    .unwrap_or(ProbeKind::SyncWrite4k),
                ops: r.get::<_, i64>(6)?.max(0) as u64,
                p50_seconds: r.get::<_, i64>(7)? as f64 / NANO,
                p99_seconds: r.get::<_, i64>(8)? as f64 / NANO,
                max_seconds: r.get::<_, i64>(9)? as f64 / NANO,
                throughput_bytes_per_second: f(r.get(10)?, 1.0),
                fill_ratio: f(r.get(11)?, PPM),
                since_discard_seconds: f(r.get(12)?, 1.0),
                idle_seconds: f(r.get(13)?, 1.0),
                utilization_ratio: f(r.get(14)?, PPM),
                utilization_before_ratio: f(r.get(15)?, PPM),
                written_since_discard_bytes: r.get::<_, Option<i64>>(16)?.map(|x| x.max(0) as u64),
            })
        })
        .and_then(|it| it.collect())
        .map_err(self.err("reading probe results"))
    }

    /// Probe targets by id: the configured directory of each.
    pub fn probe_targets(&self) -> Result<Vec<(i64, String)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, path FROM probe_target ORDER BY id")
            .map_err(self.err("listing probe targets"))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|it| it.collect())
            .map_err(self.err("listing probe targets"))
    }

    /// Every probe run in `from..=to` in time order, handed to `f` one at a time (two years of
    /// one target are ~630,000 rows: they are never all in memory).
    pub fn for_each_probe_run(
        &self,
        from: i64,
        to: i64,
        mut f: impl FnMut(ProbeRun),
    ) -> Result<(), StoreError> {
        let e = self.err("reading probe results");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT target, kind, drive, t, fill_ppm, p50_ns, p99_ns FROM probe \
                 WHERE t >= ?1 AND t <= ?2 ORDER BY t",
            )
            .map_err(&e)?;
        let mut rows = st.query([from, to]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            let kind: i64 = r.get(1).map_err(&e)?;
            let Some(kind) = usize::try_from(kind)
                .ok()
                .and_then(|k| ProbeKind::ALL.get(k))
            else {
                continue;
            };
            f(ProbeRun {
                target: r.get(0).map_err(&e)?,
                kind: *kind,
                drive: r.get::<_, Option<i64>>(2).map_err(&e)?.map(DriveId),
                t: r.get(3).map_err(&e)?,
                fill_ratio: r
                    .get::<_, Option<i64>>(4)
                    .map_err(&e)?
                    .map(|x| x as f64 / PPM),
                p50_seconds: r.get::<_, i64>(5).map_err(&e)? as f64 / NANO,
                p99_seconds: r.get::<_, i64>(6).map_err(&e)? as f64 / NANO,
            });
        }
        Ok(())
    }

    /// (time, p50 seconds) of one target's runs of one kind in `from..=to`, in time order.
    pub fn probe_p50s(
        &self,
        target: i64,
        kind: ProbeKind,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let e = self.err("reading probe results");
        let kind = ProbeKind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as i64;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT t, p50_ns FROM probe WHERE t >= ?1 AND t <= ?2 AND target = ?3 AND kind = ?4 \
                 ORDER BY t",
            )
            .map_err(&e)?;
        st.query_map([from, to, target, kind], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as f64 / NANO))
        })
        .and_then(|it| it.collect())
        .map_err(&e)
    }

    /// Discard bursts of one drive in `from..=to`, as (time, bytes).
    pub fn discard_events(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        self.drive_events("discard", "t", "bytes", drive, from, to)
    }

    /// Idle periods of one drive starting in `from..=to`, as (start, seconds).
    pub fn idle_periods(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        self.drive_events("idle", "start", "seconds", drive, from, to)
    }

    /// (time, value) rows of an event table for one drive, in time order.
    fn drive_events(
        &self,
        table: &str,
        t: &str,
        value: &str,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        let e = self.err("reading events");
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {t}, {value} FROM {table} WHERE drive = ?1 AND {t} >= ?2 AND {t} <= ?3 ORDER BY {t}"
            ))
            .map_err(&e)?;
        st.query_map([drive.0, from, to], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })
        .and_then(|it| it.collect())
        .map_err(&e)
    }

    /// Bytes each table and index takes in the file, largest first (SQLite's dbstat).
    pub fn table_sizes(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
            .map_err(self.err("reading table sizes"))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .and_then(|it| it.collect())
            .map_err(self.err("reading table sizes"))
    }

    /// The file's size in bytes (pages in use, WAL excluded).
    pub fn size_bytes(&self) -> Result<u64, StoreError> {
        let pages: i64 = self
            .conn
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .map_err(self.err("reading the size"))?;
        let free: i64 = self
            .conn
            .pragma_query_value(None, "freelist_count", |r| r.get(0))
            .map_err(self.err("reading the size"))?;
        let size: i64 = self
            .conn
            .pragma_query_value(None, "page_size", |r| r.get(0))
            .map_err(self.err("reading the size"))?;
        Ok(((pages - free).max(0) * size) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn cfg() -> HistoryConfig {
        HistoryConfig {
            raw_interval: Duration::from_secs(60),
            ..Default::default()
        }
    }

    fn fs(mp: &str, uuid: Option<&str>, device: &str, t: i64, avail: u64) -> FsSample {
        FsSample {
            key: FsKey {
                mountpoint: mp.into(),
                uuid: uuid.map(Into::into),
            },
            device: device.into(),
            t,
            size_bytes: 1 << 40,
            avail_bytes: avail,
            free_bytes: avail + (50 << 30),
            files_free: Some(1_000_000 - (t - T0) as u64 / 60),
        }
    }

    fn drive(serial: &str, wwn: Option<&str>, name: &str, t: i64, host: u64) -> DriveSample {
        DriveSample {
            key: DriveKey {
                wwn: wwn.map(Into::into),
                serial: Some(serial.into()),
                model: Some("SAMSUNG MZQL23T8HCLS".into()),
            },
            kernel_name: name.into(),
            capacity_bytes: Some(3_840_000_000_000),
            t,
            wear_used_ratio: Some(0.03),
            spare_ratio: Some(1.0),
            host_written_bytes: Some(host),
            nand_written_bytes: None,
            media_errors: Some(0),
            power_on_hours: Some(1000 + (t - T0) as u64 / 3600),
            temperature_celsius: Some(35.0 + ((t - T0) / 60 % 10) as f64),
            discarded_bytes: Some(host / 2),
        }
    }

    #[test]
    fn samples_round_trip_and_the_raw_interval_thins_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let stored = s
            .record_fs(&[
                fs("/srv/pg", Some("u1"), "nvme0n1p1", T0, 500 << 30),
                fs("/srv/pg", Some("u1"), "nvme0n1p1", T0 + 15, 499 << 30),
                fs("/srv/pg", Some("u1"), "nvme0n1p1", T0 + 60, 498 << 30),
            ])
            .unwrap();
        assert_eq!(stored, 2, "the sample 15 s after the first is left out");
        let d = drive("S1", None, "nvme0n1", T0, 1 << 40);
        assert_eq!(s.record_drives(std::slice::from_ref(&d)).unwrap(), 1);
        drop(s);
        let s = Store::open(dir.path(), &cfg()).unwrap();
        let id = s.filesystems().unwrap()[0].id;
        let pts = s.fs_series(id, T0, T0 + 3600).unwrap();
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[1].avail, Stat::one((498u64 << 30) as f64));
        assert_eq!(pts[1].free.last, ((498u64 << 30) + (50 << 30)) as f64);
        assert!(!pts[1].hourly);
        let drives = s.drives().unwrap();
        assert_eq!(drives[0].kernel_name.as_deref(), Some("nvme0n1"));
        let dp = s.drive_series(drives[0].id, T0, T0).unwrap();
        assert_eq!(dp[0].wear_used_ratio.unwrap().last, 0.03);
        assert_eq!(dp[0].temperature_celsius.unwrap().last, 35.0);
        assert_eq!(dp[0].host_written_bytes, Some((1u64 << 40) as f64));
        assert_eq!(dp[0].nand_written_bytes, None, "unknown stays unknown");
        let tables = s.table_sizes().unwrap();
        assert!(
            tables.iter().any(|(n, b)| n == "fs_raw" && *b > 0),
            "{tables:?}"
        );
    }

    #[test]
    fn downsampling_keeps_min_max_mean_last_and_deletes_raw_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        // One hour, a sample a minute: avail falls 1 MiB a minute, with one dip at minute 30.
        let mib = 1u64 << 20;
        let samples: Vec<FsSample> = (0..60)
            .map(|m| {
                let avail = if m == 30 {
                    100 * mib
                } else {
                    1000 * mib - m as u64 * mib
                };
                fs("/srv/pg", Some("u1"), "dm-0", T0 + m * 60, avail)
            })
            .collect();
        s.record_fs(&samples).unwrap();
        let drives: Vec<DriveSample> = (0..4)
            .map(|q| drive("S1", None, "nvme0n1", T0 + q * 900, (q as u64 + 1) << 30))
            .collect();
        s.record_drives(&drives).unwrap();
        // Not yet older than 14 days: nothing rolls.
        assert_eq!(s.downsample(T0 + 3600).unwrap().raw_rolled, 0);
        let m = s.downsample(T0 + 15 * 86_400).unwrap();
        assert_eq!(m.raw_rolled, 64);
        assert_eq!(m.hours_written, 2);
        let raw_left: i64 = s
            .conn
            .query_row("SELECT count(*) FROM fs_raw", [], |r| r.get(0))
            .unwrap();
        assert_eq!(raw_left, 0);
        assert!(
            s.raw_days.borrow().as_ref().is_none_or(|d| d.is_empty()),
            "a rolled day's raw extremes go with its rows"
        );
        let id = s.filesystems().unwrap()[0].id;
        let pts = s.fs_series(id, T0 - 86_400, T0 + 86_400).unwrap();
        assert_eq!(pts.len(), 1);
        let p = &pts[0];
        assert!(p.hourly);
        assert_eq!(p.t, T0);
        let values: Vec<f64> = samples.iter().map(|x| x.avail_bytes as f64).collect();
        let mean = (values.iter().sum::<f64>() / 60.0).round();
        assert_eq!(p.avail.min, (100 * mib) as f64);
        assert_eq!(p.avail.max, (1000 * mib) as f64);
        assert_eq!(p.avail.mean, mean);
        assert_eq!(p.avail.last, (941 * mib) as f64);
        assert_eq!(p.free.min, (100 * mib + (50 << 30)) as f64);
        assert_eq!(p.free.last, (941 * mib + (50 << 30)) as f64);
        assert_eq!(p.size, Stat::one((1u64 << 40) as f64));
        let ff = p.files_free.unwrap();
        assert_eq!(
            (ff.min, ff.max, ff.last),
            (999_941.0, 1_000_000.0, 999_941.0)
        );
        let did = s.drives().unwrap()[0].id;
        let dp = s.drive_series(did, T0, T0 + 86_400).unwrap();
        assert_eq!(dp.len(), 1);
        let t = dp[0].temperature_celsius.unwrap();
        assert_eq!((t.min, t.max, t.last), (35.0, 35.0 + 5.0, 35.0 + 5.0));
        assert_eq!(t.mean, 35.0 + (0.0 + 5.0 + 0.0 + 5.0) / 4.0);
        assert_eq!(
            dp[0].host_written_bytes,
            Some((4u64 << 30) as f64),
            "counter: last"
        );
    }

    #[test]
    fn raw_and_hourly_points_merge_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let day = 86_400;
        let samples: Vec<FsSample> = (0..20 * 24)
            .map(|h| fs("/", None, "sda1", T0 + h * 3600, (900 - h as u64) << 30))
            .collect();
        s.record_fs(&samples).unwrap();
        s.downsample(T0 + 20 * day).unwrap();
        let id = s.filesystems().unwrap()[0].id;
        let pts = s.fs_series(id, T0, T0 + 20 * day).unwrap();
        assert_eq!(pts.len(), 20 * 24);
        assert!(pts.windows(2).all(|w| w[0].t < w[1].t));
        let hourly = pts.iter().filter(|p| p.hourly).count();
        assert_eq!(hourly, 6 * 24, "what is older than 14 days is hourly");
    }

    /// /srv/pg over `days` days from T0, a sample every 10 min, avail shrinking and wandering.
    fn wandering_pg(days: i64) -> Vec<FsSample> {
        (0..days * 144)
            .map(|i| {
                let wobble = (i * 7919 % 1000) as u64 * (1 << 20);
                fs(
                    "/srv/pg",
                    Some("u1"),
                    "dm-0",
                    T0 + i * 600,
                    (800u64 << 30) - ((i as u64) << 24) + wobble,
                )
            })
            .collect()
    }

    #[test]
    fn daily_summaries_equal_what_the_points_say() {
        use crate::history::forecast::{daily_use, forecast_drive, forecast_filesystem};
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let day = 86_400;
        // 20 days, a sample every 10 min, avail wandering; 6 days end up hourly.
        let samples = wandering_pg(20);
        s.record_fs(&samples).unwrap();
        let drives: Vec<DriveSample> = (0..20 * 96)
            .map(|q| drive("S1", None, "nvme0n1", T0 + q * 900, (q as u64 + 1) << 30))
            .collect();
        s.record_drives(&drives).unwrap();
        let now = T0 + 20 * day;
        s.downsample(now).unwrap();
        let id = s.filesystems().unwrap()[0].id;
        let pts = s.fs_series(id, T0, now).unwrap();
        assert!(pts.iter().any(|p| p.hourly) && pts.iter().any(|p| !p.hourly));
        assert_eq!(s.fs_days(id, T0, now).unwrap(), daily_use(&pts));
        assert_eq!(
            forecast_filesystem(&pts, now),
            crate::history::forecast::forecast_filesystem_days(
                &s.fs_days(id, T0, now).unwrap(),
                now
            )
        );
        let did = s.drives().unwrap()[0].id;
        let days = s.drive_days(did, T0, now).unwrap();
        assert_eq!(days.len(), 20);
        let all = s.drive_series(did, T0, now).unwrap();
        for d in &days {
            let last = all
                .iter()
                .rfind(|p| p.t.div_euclid(day) == d.t.div_euclid(day))
                .unwrap();
            assert_eq!(d.host_written_bytes, last.host_written_bytes);
            assert_eq!(
                d.wear_used_ratio.unwrap().last,
                last.wear_used_ratio.unwrap().last
            );
        }
        let (a, b) = (
            forecast_drive(&days, now, None),
            forecast_drive(&all, now, None),
        );
        assert_eq!(a.host_bytes_per_day_30d, b.host_bytes_per_day_30d);
        assert_eq!(a.wear_rate_per_day, b.wear_rate_per_day);
    }

    #[test]
    fn finished_raw_days_are_summarized_once_and_a_restart_reads_the_same_days() {
        use crate::history::forecast::daily_use;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let samples = wandering_pg(20);
        s.record_fs(&samples).unwrap();
        let count = |s: &Store| -> (i64, Option<i64>, Option<i64>) {
            s.conn
                .query_row(
                    "SELECT count(*), min(id) >> 24, max(id) >> 24 FROM fs_day",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .unwrap()
        };
        // 01:00 on day 20: day 19 ended only an hour ago, so it is not summarized yet.
        let now = T0 + 20 * DAY + HOUR;
        let m = s.downsample(now).unwrap();
        let first_raw = T0 / DAY + 6;
        assert_eq!(m.days_summarized, 13, "days 6..=18 of the 14 raw days");
        assert_eq!(count(&s), (13, Some(first_raw), Some(T0 / DAY + 18)));
        assert_eq!(
            s.downsample(now).unwrap().days_summarized,
            0,
            "written once"
        );
        // Three hours later day 19 is over by more than two hours.
        assert_eq!(s.downsample(now + 2 * HOUR).unwrap().days_summarized, 1);
        let id = s.filesystems().unwrap()[0].id;
        let before = s.fs_days(id, T0, now).unwrap();
        assert_eq!(before, daily_use(&s.fs_series(id, T0, now).unwrap()));
        drop(s);

        // After a start the days are read from fs_day and the raw rows since; the same days.
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        assert_eq!(s.fs_days(id, T0, now).unwrap(), before);
        // A sample that arrives for a day already summarized (the raw gate refuses one older
        // than its series' last, so only a series' first can: here a filesystem first seen
        // with a time in day 10) goes into that day's summary too, so a restart reads it.
        let late = fs("/srv/late", None, "sdb1", T0 + 10 * DAY + 300, 1 << 30);
        assert_eq!(s.record_fs(std::slice::from_ref(&late)).unwrap(), 1);
        let late_id = s.fs_id_of(&late.key).unwrap().unwrap();
        let after = s.fs_days(late_id, T0, now).unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(after, daily_use(&s.fs_series(late_id, T0, now).unwrap()));
        drop(s);
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        assert_eq!(s.fs_days(late_id, T0, now).unwrap(), after);
        assert_eq!(s.fs_days(id, T0, now).unwrap(), before);
        // Rolled days leave fs_day with their raw rows.
        s.downsample(now + 3 * DAY).unwrap();
        let (_, lo, _) = count(&s);
        assert_eq!(lo, Some(first_raw + 3));
        assert_eq!(
            s.fs_days(id, T0, now + 3 * DAY).unwrap(),
            daily_use(&s.fs_series(id, T0, now + 3 * DAY).unwrap())
        );
    }

    #[test]
    fn retention_drops_old_hours_probes_and_events() {
        let dir = tempfile::tempdir().unwrap();
        let c = HistoryConfig {
            retention_raw: Duration::from_secs(86_400),
            retention_hourly: Duration::from_secs(10 * 86_400),
            raw_interval: Duration::from_secs(60),
            ..Default::default()
        };
        let mut s = Store::open(dir.path(), &c).unwrap();
        let samples: Vec<FsSample> = (0..30 * 24)
            .map(|h| fs("/", None, "sda1", T0 + h * 3600, 1 << 30))
            .collect();
        s.record_fs(&samples).unwrap();
        let key = DriveKey {
            serial: Some("S1".into()),
            ..Default::default()
        };
        s.record_discards(&[
            DiscardEvent {
                drive: key.clone(),
                t: T0,
                bytes: 1 << 30,
            },
            DiscardEvent {
                drive: key.clone(),
                t: T0 + 25 * 86_400,
                bytes: 2 << 30,
            },
        ])
        .unwrap();
        s.record_idle(&[IdlePeriod {
            drive: key.clone(),
            start: T0,
            seconds: 600,
        }])
        .unwrap();
        let now = T0 + 30 * 86_400;
        let m = s.downsample(now).unwrap();
        assert_eq!(m.raw_rolled, 29 * 24);
        assert_eq!(m.hours_dropped, 20 * 24);
        assert_eq!(m.events_dropped, 2);
        let id = s.filesystems().unwrap()[0].id;
        let pts = s.fs_series(id, 0, now).unwrap();
        assert_eq!(pts.first().unwrap().t, now - 10 * 86_400);
        assert_eq!(pts.len(), 10 * 24);
        let did = s.drives().unwrap()[0].id;
        assert_eq!(
            s.discard_events(did, 0, now).unwrap(),
            vec![(T0 + 25 * 86_400, 2 << 30)]
        );
        assert!(s.idle_periods(did, 0, now).unwrap().is_empty());
    }

    #[test]
    fn probe_results_keep_their_context() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let p = ProbeRecord {
            target: "/srv/pg".into(),
            drive: Some(DriveKey {
                wwn: Some("eui.0025388b91b2c0e5".into()),
                serial: Some("S1".into()),
                model: None,
            }),
            t: T0,
            kind: ProbeKind::SyncWrite4k,
            ops: 16,
            p50_seconds: 0.000_123_456,
            p99_seconds: 0.002,
            max_seconds: 0.0031,
            throughput_bytes_per_second: None,
            fill_ratio: Some(0.873),
            since_discard_seconds: Some(3600.0),
            idle_seconds: Some(12.0),
            utilization_ratio: Some(0.05),
            utilization_before_ratio: Some(0.01),
            written_since_discard_bytes: Some(5 << 30),
        };
        let mut q = p.clone();
        q.kind = ProbeKind::SeqWrite;
        q.drive = None;
        q.written_since_discard_bytes = None;
        q.throughput_bytes_per_second = Some(1.5e9);
        s.record_probes(&[p.clone(), q.clone()]).unwrap();
        assert_eq!(s.probe_results(T0, T0).unwrap(), vec![p, q]);
    }

    #[test]
    fn two_openers_of_a_new_file_make_the_schema_once() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = HistoryConfig::default();
        for _ in 0..20 {
            let _ = std::fs::remove_file(dir.path().join(FILE_NAME));
            let _ = std::fs::remove_file(dir.path().join(format!("{FILE_NAME}-wal")));
            let _ = std::fs::remove_file(dir.path().join(format!("{FILE_NAME}-shm")));
            let openers: Vec<_> = (0..4)
                .map(|_| {
                    let p = dir.path().to_path_buf();
                    let c = cfg.clone();
                    std::thread::spawn(move || Store::open(&p, &c).map(|_| ()))
                })
                .collect();
            for o in openers {
                o.join().unwrap().expect("every opener finds one schema");
            }
        }
    }

    #[test]
    fn a_remounted_filesystem_continues_its_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        s.record_fs(&[fs("/srv/pg", Some("u1"), "dm-3", T0, 10 << 30)])
            .unwrap();
        drop(s);
        // After a reboot the same filesystem comes up as dm-5.
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        s.record_fs(&[fs("/srv/pg", Some("u1"), "dm-5", T0 + 600, 9 << 30)])
            .unwrap();
        // A reformat (new UUID) at the same mount point is another filesystem.
        s.record_fs(&[fs("/srv/pg", Some("u2"), "dm-5", T0 + 1200, 1 << 40)])
            .unwrap();
        let all = s.filesystems().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].device.as_deref(), Some("dm-5"));
        assert_eq!(s.fs_series(all[0].id, 0, i64::MAX).unwrap().len(), 2);
        // Seen first without a UUID, then with one: the same series.
        s.record_fs(&[fs("/boot", None, "sda1", T0, 1 << 30)])
            .unwrap();
        s.record_fs(&[fs("/boot", Some("b1"), "sda1", T0 + 600, 1 << 30)])
            .unwrap();
        let boot = s.fs_id_of(&FsKey {
            mountpoint: "/boot".into(),
            uuid: Some("b1".into()),
        });
        assert_eq!(
            s.fs_series(boot.unwrap().unwrap(), 0, i64::MAX)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn a_drive_under_another_kernel_name_continues_its_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        s.record_drives(&[drive("S1", None, "nvme0n1", T0, 1 << 30)])
            .unwrap();
        drop(s);
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        s.record_drives(&[
            drive("S1", Some("eui.1"), "nvme1n1", T0 + 900, 2 << 30),
            drive("S2", None, "nvme0n1", T0 + 900, 5 << 30),
        ])
        .unwrap();
        // The WWN learnt above is enough from now on.
        let mut by_wwn = drive("ignored", Some("eui.1"), "nvme2n1", T0 + 1800, 3 << 30);
        by_wwn.key.serial = None;
        s.record_drives(&[by_wwn]).unwrap();
        let drives = s.drives().unwrap();
        assert_eq!(drives.len(), 2);
        assert_eq!(drives[0].key.wwn.as_deref(), Some("eui.1"));
        assert_eq!(drives[0].kernel_name.as_deref(), Some("nvme2n1"));
        let series = s.drive_series(drives[0].id, 0, i64::MAX).unwrap();
        let host: Vec<f64> = series.iter().filter_map(|p| p.host_written_bytes).collect();
        assert_eq!(
            host,
            vec![
                (1u64 << 30) as f64,
                (2u64 << 30) as f64,
                (3u64 << 30) as f64
            ]
        );
        let mut anonymous = drive("x", None, "sdz", T0, 0);
        anonymous.key.serial = None;
        let e = s.record_drives(&[anonymous]).unwrap_err();
        assert!(matches!(e, StoreError::NoDriveIdentity { .. }), "{e}");
    }

    fn damaged_file_is_moved_aside(damage: impl Fn(&Path)) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), &cfg()).unwrap();
        let samples: Vec<FsSample> = (0..5000)
            .map(|m| fs("/srv/pg", Some("u1"), "dm-0", T0 + m * 60, 1 << 30))
            .collect();
        s.record_fs(&samples).unwrap();
        drop(s);
        let path = dir.path().join(FILE_NAME);
        damage(&path);
        let e = Store::open(dir.path(), &cfg()).unwrap_err();
        assert!(e.is_corrupt(), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let (mut s, aside) = Store::open_or_recover(dir.path(), &cfg(), 1_800_000_000).unwrap();
        let aside = aside.expect("moved aside");
        assert_eq!(aside, dir.path().join("history.db.corrupt-1800000000"));
        assert!(aside.exists());
        assert_eq!(
            s.record_fs(&samples[..1]).unwrap(),
            1,
            "the new store works"
        );
        assert_eq!(s.filesystems().unwrap().len(), 1);
    }

    #[test]
    fn a_file_of_garbage_is_named_and_moved_aside() {
        damaged_file_is_moved_aside(|p| {
            let garbage: Vec<u8> = (0..100_000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect();
            std::fs::write(p, garbage).unwrap();
        });
    }

    #[test]
    fn a_truncated_file_is_named_and_moved_aside() {
        damaged_file_is_moved_aside(|p| {
            let len = std::fs::metadata(p).unwrap().len();
            assert!(len > 16_384, "{len}");
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(len / 2).unwrap();
        });
    }

    #[test]
    fn a_healthy_store_is_not_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path(), &cfg()).unwrap());
        let (_s, aside) = Store::open_or_recover(dir.path(), &cfg(), 1).unwrap();
        assert_eq!(aside, None);
    }

    /// A read-only filesystem under the state directory: a tmpfs mounted read-only when we are
    /// root (permission bits do not stop root), a mode 0555 directory otherwise.
    struct ReadOnlyDir {
        dir: tempfile::TempDir,
        mounted: bool,
    }

    impl ReadOnlyDir {
        fn new(options: &str) -> Option<ReadOnlyDir> {
            let dir = tempfile::tempdir().unwrap();
            if nix::unistd::geteuid().is_root() {
                let ok = std::process::Command::new("mount")
                    .args(["-t", "tmpfs", "-o", options, "ssdwatch-test"])
                    .arg(dir.path())
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    eprintln!("skipped: cannot mount a tmpfs here");
                    return None;
                }
                Some(ReadOnlyDir { dir, mounted: true })
            } else {
                use std::os::unix::fs::PermissionsExt;
                if options.contains("size") {
                    eprintln!("skipped: a full filesystem needs root to mount");
                    return None;
                }
                std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555))
                    .unwrap();
                Some(ReadOnlyDir {
                    dir,
                    mounted: false,
                })
            }
        }
    }

    impl Drop for ReadOnlyDir {
        fn drop(&mut self) {
            if self.mounted {
                let _ = std::process::Command::new("umount")
                    .arg(self.dir.path())
                    .status();
            }
        }
    }

    #[test]
    fn a_read_only_state_dir_is_an_error_not_a_panic() {
        let Some(ro) = ReadOnlyDir::new("ro,size=1m") else {
            return;
        };
        let e = Store::open(&ro.dir.path().join("state"), &cfg()).unwrap_err();
        assert!(e.to_string().contains("history.db"), "{e}");
        let e = Store::open(ro.dir.path(), &cfg()).unwrap_err();
        assert!(e.to_string().contains("history.db"), "{e}");
        assert!(!e.is_corrupt());
        let e = Store::open_or_recover(ro.dir.path(), &cfg(), 1).unwrap_err();
        assert!(e.to_string().contains("history.db"), "{e}");
    }

    #[test]
    fn a_full_state_dir_is_an_error_not_a_panic() {
        let Some(full) = ReadOnlyDir::new("size=256k") else {
            return;
        };
        let mut s = match Store::open(full.dir.path(), &cfg()) {
            Ok(s) => s,
            Err(e) => {
                assert!(e.to_string().contains("history.db"), "{e}");
                return;
            }
        };
        let mut failed = None;
        for batch in 0..200 {
            let samples: Vec<FsSample> = (0..500)
                .map(|m| {
                    fs(
                        "/srv/pg",
                        Some("u1"),
                        "dm-0",
                        T0 + (batch * 500 + m) * 60,
                        1 << 30,
                    )
                })
                .collect();
            if let Err(e) = s.record_fs(&samples) {
                failed = Some(e);
                break;
            }
        }
        let e = failed.expect("a 256 KiB filesystem fills up");
        assert!(e.to_string().contains("history.db"), "{e}");
        assert!(e.to_string().contains("full"), "{e}");
    }
}
