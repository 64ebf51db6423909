//! Which series a record belongs to: a filesystem by mount point and UUID, a drive by WWN else
//! serial (never its kernel name), a probe target by its path; a row made at first sight.

use super::layout::{SERIES_MASK, to_i64};
use super::{Store, StoreError};
use crate::history::record::{DriveKey, FsId, FsKey};
use rusqlite::{Connection, OptionalExtension, params};

impl Store {
    pub(super) fn fs_id(&mut self, key: &FsKey, device: &str, t: i64) -> Result<i64, StoreError> {
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

    /// The id of a drive series, its row made at first sight; a known drive's kernel name,
    /// identity and capacity brought up to date.
    pub(super) fn drive_id(
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
        let id: i64 = match self.find_drive(key)? {
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

    /// The stored drive a key names: by WWN, else by serial.
    fn find_drive(&self, key: &DriveKey) -> Result<Option<i64>, StoreError> {
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
        Ok(id)
    }

    /// A drive's id from an event, which carries no kernel name: keeps the known one.
    pub(super) fn drive_id_quiet(&mut self, key: &DriveKey, t: i64) -> Result<i64, StoreError> {
        self.drive_id(key, "", None, t)
    }

    pub(super) fn target_id(&mut self, path: &str) -> Result<i64, StoreError> {
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

    /// Series ids live in the low 24 bits of the raw and chunk rowids.
    pub(super) fn series_fits(&self, id: i64) -> Result<(), StoreError> {
        if (0..=SERIES_MASK).contains(&id) {
            Ok(())
        } else {
            Err(StoreError::TooManySeries {
                path: self.path.clone(),
                id,
            })
        }
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
}
