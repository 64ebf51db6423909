//! The tables this code writes, made once in a new file (what each holds and why its key:
//! docs/history.md); a file of an older version is upgraded by `migrate`.

use super::{Store, StoreError, classify};
use crate::probe::ProbeKind;
use rusqlite::params;
use std::path::Path;

/// The schema this code writes; a file with a higher version is refused, not downgraded.
pub const SCHEMA_VERSION: i64 = 10;

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
    untrimmed_ppm INTEGER,
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

/// Whether a file of schema `version` can be read as it is, by a tool that opened it read-only
/// (only the daemon makes or upgrades the schema).
pub(super) fn readable(path: &Path, version: i64) -> Result<(), StoreError> {
    let not_created = || StoreError::NotCreated {
        path: path.to_path_buf(),
    };
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
    Ok(())
}

impl Store {
    /// Makes the schema in a new file, upgrades a file of an older version in place, refuses
    /// one of a newer version.
    pub(super) fn make_or_upgrade_schema(&mut self) -> Result<(), StoreError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.err("reading the schema version"))?;
        match version {
            // A new file: the schema made.
            0 => self.under_write_lock(0, "creating the schema", |tx| {
                tx.execute_batch(SCHEMA)?;
                tx.execute_batch(super::migrate::FS_LAYER)?;
                tx.execute_batch(super::migrate::HEALTH_AND_COMPONENTS)?;
                tx.execute_batch(super::migrate::FS_IMPORT)?;
                tx.execute_batch(super::migrate::LAYER_USE)?;
                tx.execute_batch(super::migrate::DRIVE_IMPORT)?;
                tx.execute_batch(super::migrate::LAYER_ERRORS)?;
                for (i, k) in ProbeKind::ALL.iter().enumerate() {
                    tx.execute(
                        "INSERT INTO probe_kind (id, name) VALUES (?1, ?2)",
                        params![i as i64, k.as_str()],
                    )?;
                }
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            })?,
            // In place, in one transaction, each step from the file's version on: a crash or a
            // full disk mid-way leaves the old version whole.
            found @ 1..SCHEMA_VERSION => {
                let what = super::migrate::UPGRADING[(found - 1) as usize];
                self.under_write_lock(found, what, |tx| {
                    for step in &super::migrate::STEPS[(found - 1) as usize..] {
                        step(tx)?;
                    }
                    Ok(())
                })?
            }
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
}
