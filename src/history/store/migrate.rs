//! Schema upgrades of the history store, run in place when the daemon opens an older file,
//! each inside the opener's one transaction (a crash mid-way leaves the old schema whole).
//! It knows the tables' layouts only; what the rows mean is the store's.

use rusqlite::Transaction;

/// Version 1 to 2: the raw tables keyed time-major, the hourly chunks' rowids day-major,
/// `fs_raw_day` dropped (the store keeps the raw days' extremes in memory, from `fs_raw`).
///
/// Version 1 keyed `fs_raw`/`drive_raw` on (series, t), `fs_raw_day` on (series, day) and the
/// hourly chunks' rowid on `series << 24 | day`: every commit of one sample per series
/// dirtied one b-tree page per series, and SQLite's WAL writes whole pages (a 500-row commit
/// wrote 2.8 MiB on a store holding 14 days of 500 filesystems). Version 2 keys raw rows on
/// the rowid `t << 24 | series` and chunks on `day << 24 | series`, so a commit appends at the
/// right edge. (Raw times from year 19,400 on, which version 1 took, are not carried over.)
/// The rows are copied in their new key order into new tables, which take the old names.
pub(super) fn v1_to_v2(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "
CREATE TABLE fs_raw_v2 (
    id INTEGER PRIMARY KEY,
    size INTEGER NOT NULL,
    avail INTEGER NOT NULL,
    free INTEGER NOT NULL,
    files_free INTEGER
);
INSERT INTO fs_raw_v2 SELECT (t << 24) | fs, size, avail, free, files_free FROM fs_raw
    WHERE t >= 0 AND t < 1 << 39 ORDER BY t, fs;
DROP TABLE fs_raw;
ALTER TABLE fs_raw_v2 RENAME TO fs_raw;

DROP TABLE fs_raw_day;

CREATE TABLE drive_raw_v2 (
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
INSERT INTO drive_raw_v2 SELECT (t << 24) | drive, wear_ppm, spare_ppm, temp_mc, host_written,
    nand_written, media_errors, power_on_hours, discarded FROM drive_raw
    WHERE t >= 0 AND t < 1 << 39 ORDER BY t, drive;
DROP TABLE drive_raw;
ALTER TABLE drive_raw_v2 RENAME TO drive_raw;

CREATE TABLE fs_hourly_v2 (
    id INTEGER PRIMARY KEY,
    fs INTEGER NOT NULL,
    day INTEGER NOT NULL,
    data BLOB NOT NULL,
    avail_min INTEGER,
    avail_max INTEGER,
    size INTEGER
);
INSERT INTO fs_hourly_v2 SELECT (day << 24) | fs, fs, day, data, avail_min, avail_max, size
    FROM fs_hourly ORDER BY day, fs;
DROP TABLE fs_hourly;
ALTER TABLE fs_hourly_v2 RENAME TO fs_hourly;

CREATE TABLE drive_hourly_v2 (
    id INTEGER PRIMARY KEY,
    drive INTEGER NOT NULL,
    day INTEGER NOT NULL,
    data BLOB NOT NULL,
    t_last INTEGER NOT NULL,
    wear_ppm INTEGER,
    host_written INTEGER,
    nand_written INTEGER
);
INSERT INTO drive_hourly_v2 SELECT (day << 24) | drive, drive, day, data, t_last, wear_ppm,
    host_written, nand_written FROM drive_hourly ORDER BY day, drive;
DROP TABLE drive_hourly;
ALTER TABLE drive_hourly_v2 RENAME TO drive_hourly;
",
    )?;
    tx.pragma_update(None, "user_version", 2)
}

/// Version 2 to 3: `fs_day`, the extremes of each finished raw day, so the extremes a forecast
/// needs are built after a start from a row per filesystem and day instead of every raw row.
/// The table starts empty: the next maintenance fills it from the raw rows, once.
pub(super) fn v2_to_v3(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "
CREATE TABLE fs_day (
    id INTEGER PRIMARY KEY,
    avail_min INTEGER NOT NULL,
    avail_max INTEGER NOT NULL,
    size INTEGER NOT NULL
);
",
    )?;
    tx.pragma_update(None, "user_version", 3)
}

/// `fs_layer`: each filesystem's newest stack of layers (the filesystem, then the thin pools,
/// btrfs, ZFS dataset and pool under it), one row a layer in stack order (`pos`), for the
/// report. Only the newest stack is kept: a few rows per filesystem, replaced with each sample.
pub(super) const FS_LAYER: &str = "
CREATE TABLE fs_layer (
    fs INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    t INTEGER NOT NULL,
    layer TEXT NOT NULL,
    name TEXT NOT NULL,
    avail INTEGER NOT NULL,
    size INTEGER,
    limiting INTEGER NOT NULL,
    PRIMARY KEY (fs, pos)
) WITHOUT ROWID;
";

/// Version 3 to 4: [`FS_LAYER`], empty until the daemon's next samples.
pub(super) fn v3_to_v4(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(FS_LAYER)?;
    tx.pragma_update(None, "user_version", 4)
}

/// Version 4 to 5: each probe run's untrimmed state, `probe.untrimmed_ppm` (the share of the
/// filesystem deleted but not trimmed when it ran, parts per million), so the report splits
/// its latency-by-fill curve into trimmed and not trimmed. Rows of older versions have none
/// (NULL: unknown, counted as trimmed). Adding a nullable column rewrites no row.
pub(super) fn v4_to_v5(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE probe ADD COLUMN untrimmed_ppm INTEGER;")?;
    tx.pragma_update(None, "user_version", 5)
}

/// Version 6's tables: what the report's drive-health table and its "What is filling it"
/// section read.
/// - `drive_health`: each drive's error log, newest self-test, warning temperature and time
///   above it, and durability, the last reading of each hour (of each day once older than the
///   raw retention), so the report gives the entries new in 7 days and the time above the
///   warning temperature in 7 days as the Prometheus-backed report does.
/// - `component` and `component_size`: each database component (keyed by its mount, database
///   and name: one series per component, never per file) and its last size of each hour (of
///   each day once older than the raw retention): its growth over 1 and 7 days and its share
///   of its mount's.
/// - `database_state`: the newest facts of each database that say why a component grows (the
///   archiver's backlog, the slot holding WAL back, the binary logs kept).
pub(super) const HEALTH_AND_COMPONENTS: &str = "
CREATE TABLE drive_health (
    drive INTEGER NOT NULL,
    hour INTEGER NOT NULL,
    t INTEGER NOT NULL,
    error_log_entries INTEGER,
    self_test TEXT,
    self_test_age_s INTEGER,
    temp_warning_mc INTEGER,
    above_warning_s INTEGER,
    durability TEXT,
    PRIMARY KEY (hour, drive)
) WITHOUT ROWID;
CREATE TABLE component (
    id INTEGER PRIMARY KEY,
    mountpoint TEXT NOT NULL,
    database TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    UNIQUE (mountpoint, database, name)
);
CREATE TABLE component_size (
    component INTEGER NOT NULL,
    hour INTEGER NOT NULL,
    t INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (hour, component)
) WITHOUT ROWID;
CREATE TABLE database_state (
    database TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    t INTEGER NOT NULL,
    archive_ready INTEGER,
    archive_oldest_s INTEGER,
    slot TEXT,
    slot_retained INTEGER,
    binlog_files INTEGER,
    binlog_oldest_s INTEGER,
    binlog_retention_s INTEGER
) WITHOUT ROWID;
";

/// Version 5 to 6: [`HEALTH_AND_COMPONENTS`], empty until the daemon's next samples.
pub(super) fn v5_to_v6(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(HEALTH_AND_COMPONENTS)?;
    tx.pragma_update(None, "user_version", 6)
}

/// `fs_import`: which part of each filesystem's history was imported from a query API
/// (`ssdwatch history import`), not written by the daemon: the hours from `from_t` to
/// `until_t` (exclusive), always before the daemon's own first sample of it, and where from.
/// The imported hours themselves are ordinary hourly rows.
pub(super) const FS_IMPORT: &str = "
CREATE TABLE fs_import (
    fs INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    instance TEXT NOT NULL,
    from_t INTEGER NOT NULL,
    until_t INTEGER NOT NULL,
    hours INTEGER NOT NULL,
    at INTEGER NOT NULL
);
";

/// Version 6 to 7: [`FS_IMPORT`], empty: nothing was imported before.
pub(super) fn v6_to_v7(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(FS_IMPORT)?;
    tx.pragma_update(None, "user_version", 7)
}

/// The use of each filesystem's layers over time (docs/history.md), so the mount's
/// predicted-full date is the earliest of its layers' dates (a thin pool shared with other
/// volumes fills faster than the filesystem on it shows):
/// - `layer`: a layer below a filesystem with a capacity of its own (a thin pool, btrfs, a ZFS
///   dataset or pool), keyed by its filesystem, kind and name: one series per layer.
/// - `layer_raw`: its avail and size at most once a `raw_interval`, kept `retention_raw`; what
///   the forecast's runaway leg reads. Keyed time first, as the other raw rows, so a commit
///   appends.
/// - `layer_day`: each UTC day's extremes of its avail and its size at the day's last sample,
///   kept `retention_hourly`; what the long-term leg reads. Upserted with each raw row: a
///   host holds a few layers, so today's rows are a page.
pub(super) const LAYER_USE: &str = "
CREATE TABLE layer (
    id INTEGER PRIMARY KEY,
    fs INTEGER NOT NULL,
    layer TEXT NOT NULL,
    name TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    UNIQUE (fs, layer, name)
);
CREATE TABLE layer_raw (
    t INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    avail INTEGER NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (t, layer)
) WITHOUT ROWID;
CREATE TABLE layer_day (
    day INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    t INTEGER NOT NULL,
    avail_min INTEGER NOT NULL,
    avail_max INTEGER NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (day, layer)
) WITHOUT ROWID;
";

/// Version 7 to 8: [`LAYER_USE`], empty until the daemon's next samples (the layers' past was
/// not kept: only each filesystem's newest stack). It creates its tables only, whatever
/// version 7 added.
pub(super) fn v7_to_v8(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(LAYER_USE)?;
    tx.pragma_update(None, "user_version", 8)
}

/// `drive_import`: which part of each drive's history was imported (its wear, written bytes and
/// the other drive figures of ssdwatch's own series a server kept), as `fs_import` for
/// filesystems: the hours from `from_t` to `until_t` (exclusive), before the daemon's own first
/// sample of the drive. The hours themselves are ordinary `drive_hourly` rows.
pub(super) const DRIVE_IMPORT: &str = "
CREATE TABLE drive_import (
    drive INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    instance TEXT NOT NULL,
    from_t INTEGER NOT NULL,
    until_t INTEGER NOT NULL,
    hours INTEGER NOT NULL,
    at INTEGER NOT NULL
);
";

/// Version 8 to 9: [`DRIVE_IMPORT`], empty: no drive was imported before.
pub(super) fn v8_to_v9(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(DRIVE_IMPORT)?;
    tx.pragma_update(None, "user_version", 9)
}

/// Version 10's tables: the error counters the layers under filesystems keep of their own,
/// for the report's drive-health table (errors new in 7 days on each drive).
/// - `layer_member`: one component that counts errors (`kind` btrfs_device, zfs_vdev or
///   md_member; `container` its filesystem UUID, pool or array; `member` its device, vdev or
///   member name), with the drive under it when the topology places it on exactly one
///   (`drive`, a kernel name, updated on every reading). Vdevs and members, never files.
/// - `layer_errors`: each component's counters, the last reading of each hour (of each day
///   once older than the raw retention), as `drive_health` keeps a drive's: read, write and
///   checksum errors and the rest (btrfs' flush and generation errors), NULL where the layer
///   has no such counter.
pub(super) const LAYER_ERRORS: &str = "
CREATE TABLE layer_member (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    container TEXT NOT NULL,
    member TEXT NOT NULL,
    drive TEXT,
    first_seen INTEGER NOT NULL,
    UNIQUE (kind, container, member)
);
CREATE TABLE layer_errors (
    member INTEGER NOT NULL,
    hour INTEGER NOT NULL,
    t INTEGER NOT NULL,
    read_errs INTEGER,
    write_errs INTEGER,
    checksum_errs INTEGER,
    other_errs INTEGER,
    PRIMARY KEY (hour, member)
) WITHOUT ROWID;
";

/// Version 9 to 10: [`LAYER_ERRORS`], empty until the daemon's next layers samples.
pub(super) fn v9_to_v10(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(LAYER_ERRORS)?;
    tx.pragma_update(None, "user_version", 10)
}

/// One upgrade step: from version `i + 1` to `i + 2` at index `i`.
pub(super) type Step = fn(&Transaction) -> rusqlite::Result<()>;

/// Every step, in order: a file of version `v` runs `STEPS[v - 1..]`.
pub(super) const STEPS: [Step; 9] = [
    v1_to_v2, v2_to_v3, v3_to_v4, v4_to_v5, v5_to_v6, v6_to_v7, v7_to_v8, v8_to_v9, v9_to_v10,
];

/// What each step's run is called in an error, by the version it starts from.
pub(super) const UPGRADING: [&str; STEPS.len()] = [
    "upgrading the schema from version 1",
    "upgrading the schema from version 2",
    "upgrading the schema from version 3",
    "upgrading the schema from version 4",
    "upgrading the schema from version 5",
    "upgrading the schema from version 6",
    "upgrading the schema from version 7",
    "upgrading the schema from version 8",
    "upgrading the schema from version 9",
];
