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
/// wrote 2.8 MiB on a store holding 14 days of 500 filesystems). Version 2 keys them on
/// (t, series) and `day << 24 | series`, so a commit appends at the right edge.
/// The rows are copied in their new key order into new tables, which take the old names.
pub(super) fn v1_to_v2(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "
CREATE TABLE fs_raw_v2 (
    fs INTEGER NOT NULL,
    t INTEGER NOT NULL,
    size INTEGER NOT NULL,
    avail INTEGER NOT NULL,
    free INTEGER NOT NULL,
    files_free INTEGER,
    PRIMARY KEY (t, fs)
) WITHOUT ROWID;
INSERT INTO fs_raw_v2 SELECT fs, t, size, avail, free, files_free FROM fs_raw ORDER BY t, fs;
DROP TABLE fs_raw;
ALTER TABLE fs_raw_v2 RENAME TO fs_raw;

DROP TABLE fs_raw_day;

CREATE TABLE drive_raw_v2 (
    drive INTEGER NOT NULL,
    t INTEGER NOT NULL,
    wear_ppm INTEGER,
    spare_ppm INTEGER,
    temp_mc INTEGER,
    host_written INTEGER,
    nand_written INTEGER,
    media_errors INTEGER,
    power_on_hours INTEGER,
    discarded INTEGER,
    PRIMARY KEY (t, drive)
) WITHOUT ROWID;
INSERT INTO drive_raw_v2 SELECT drive, t, wear_ppm, spare_ppm, temp_mc, host_written,
    nand_written, media_errors, power_on_hours, discarded FROM drive_raw ORDER BY t, drive;
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
