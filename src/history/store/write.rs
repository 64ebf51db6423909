//! Recording raw samples of filesystems and drives, at most one per series and `raw_interval`,
//! a batch in one transaction; a failed one leaves no cached id or time behind.

use super::layout::{Kind, MAX_T, MILLI, PPM, chunk_id, raw_key, scaled, to_i64};
use super::{DAY, HOUR, Store, StoreError, classify, note_raw_day};
use crate::history::record::{
    DatabaseSample, DriveHealthRecord, DriveSample, FsLayersRef, FsSampleRef,
};
use rusqlite::params;

impl Store {
    /// How many samples were refused since the last call for being older than their series'
    /// newest stored sample (a clock set back), and resets the count.
    pub fn take_refused_older(&mut self) -> u64 {
        std::mem::take(&mut self.refused_older)
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

    /// Keeps each filesystem's newest stack of layers (an older stack than the stored one, from
    /// a clock set back, is left out); an empty stack removes the stored one. Rows are only
    /// written for filesystems with layers: a host without any writes nothing here.
    pub fn record_fs_layers<'a, I>(&mut self, stacks: I) -> Result<usize, StoreError>
    where
        I: IntoIterator,
        I::Item: Into<FsLayersRef<'a>>,
    {
        self.in_tx("recording filesystem layers", |s| {
            let mut n = 0;
            for x in stacks {
                let x: FsLayersRef = x.into();
                if !(0..=MAX_T).contains(&x.t) {
                    continue;
                }
                let id = if x.layers.is_empty() {
                    // Nothing to add: only a stored stack to remove, if the series exists.
                    match s.fs_ids.get(x.key) {
                        Some((id, _)) => *id,
                        None => match s.fs_id_of(x.key)? {
                            Some(id) => id.0,
                            None => continue,
                        },
                    }
                } else {
                    s.fs_id(x.key, x.device, x.t)?
                };
                let stored: Option<i64> = s
                    .conn
                    .prepare_cached("SELECT max(t) FROM fs_layer WHERE fs = ?1")
                    .and_then(|mut st| st.query_row([id], |r| r.get(0)))
                    .map_err(s.err("recording filesystem layers"))?;
                if stored.is_some_and(|t| t > x.t) || (stored.is_none() && x.layers.is_empty()) {
                    continue;
                }
                s.conn
                    .prepare_cached("DELETE FROM fs_layer WHERE fs = ?1")
                    .and_then(|mut st| st.execute([id]))
                    .map_err(s.err("recording filesystem layers"))?;
                for (pos, l) in x.layers.iter().enumerate() {
                    s.conn
                        .prepare_cached(
                            "INSERT INTO fs_layer (fs, pos, t, layer, name, avail, size, limiting) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )
                        .and_then(|mut st| {
                            st.execute(params![
                                id,
                                pos as i64,
                                x.t,
                                l.layer,
                                l.name,
                                to_i64(l.avail_bytes),
                                l.size_bytes.map(to_i64),
                                l.limiting
                            ])
                        })
                        .map_err(s.err("recording filesystem layers"))?;
                }
                for l in x.layers.iter().filter(|l| l.layer != "filesystem") {
                    if let Some(size) = l.size_bytes.filter(|s| *s > 0) {
                        s.record_layer_use(id, x.t, l, size)?;
                    }
                }
                n += 1;
            }
            Ok(n)
        })
    }

    /// Keeps a layer's use over time (`layer_raw`, `layer_day`): a raw row at most once a
    /// `raw_interval` (none older than the layer's newest row: a clock set back), and its
    /// day's extremes widened with it.
    fn record_layer_use(
        &mut self,
        fs: i64,
        t: i64,
        l: &crate::history::LayerRow,
        size: u64,
    ) -> Result<(), StoreError> {
        let e = self.err("recording a layer's use");
        self.conn
            .prepare_cached(
                "INSERT INTO layer (fs, layer, name, first_seen) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT DO NOTHING",
            )
            .and_then(|mut st| st.execute(params![fs, l.layer, l.name, t]))
            .map_err(&e)?;
        let id: i64 = self
            .conn
            .prepare_cached("SELECT id FROM layer WHERE fs = ?1 AND layer = ?2 AND name = ?3")
            .and_then(|mut st| st.query_row(params![fs, l.layer, l.name], |r| r.get(0)))
            .map_err(&e)?;
        // Raw rows are keyed time first: the rows after `t - raw_interval` are the last
        // interval's few, whatever the layer's age.
        let later: Option<i64> = self
            .conn
            .prepare_cached("SELECT max(t) FROM layer_raw WHERE t > ?1 AND layer = ?2")
            .and_then(|mut st| {
                st.query_row(params![t.saturating_sub(self.raw_interval), id], |r| {
                    r.get(0)
                })
            })
            .map_err(&e)?;
        if later.is_some() {
            return Ok(());
        }
        let (avail, size) = (to_i64(l.avail_bytes), to_i64(size));
        self.conn
            .prepare_cached("INSERT INTO layer_raw (t, layer, avail, size) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut st| st.execute(params![t, id, avail, size]))
            .map_err(&e)?;
        self.conn
            .prepare_cached(
                "INSERT INTO layer_day (day, layer, t, avail_min, avail_max, size) \
                 VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT (day, layer) DO UPDATE SET \
                 avail_min = min(avail_min, excluded.avail_min), \
                 avail_max = max(avail_max, excluded.avail_max), \
                 size = CASE WHEN excluded.t >= t THEN excluded.size ELSE size END, \
                 t = max(t, excluded.t)",
            )
            .and_then(|mut st| st.execute(params![t.div_euclid(DAY), id, t, avail, size]))
            .map(drop)
            .map_err(&e)
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
                if !x.health.is_empty() {
                    s.record_drive_health(id, x.t, &x.health)?;
                }
                n += 1;
            }
            Ok(n)
        })
    }

    /// Keeps a drive's health reading as its hour's (a later one of the same hour replaces it).
    fn record_drive_health(
        &mut self,
        drive: i64,
        t: i64,
        h: &DriveHealthRecord,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO drive_health (drive, hour, t, error_log_entries, self_test, \
                 self_test_age_s, temp_warning_mc, above_warning_s, durability) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    drive,
                    t.div_euclid(HOUR),
                    t,
                    h.error_log_entries.map(to_i64),
                    h.self_test,
                    h.self_test_age_seconds.map(to_i64),
                    scaled(h.temperature_warning_celsius, MILLI),
                    h.above_warning_seconds.map(to_i64),
                    h.durability,
                ])
            })
            .map(drop)
            .map_err(self.err("recording a drive's health"))
    }

    /// Records database samples in one transaction: each component's size as its hour's (a
    /// later sample of the same hour replaces it), each database's facts as its newest (an
    /// older sample than the stored facts leaves them). Returns the component sizes stored.
    pub fn record_databases(&mut self, samples: &[DatabaseSample]) -> Result<usize, StoreError> {
        self.in_tx("recording database samples", |s| {
            let e = s.err("recording database samples");
            let mut n = 0;
            for x in samples {
                if !(0..=MAX_T).contains(&x.t) {
                    continue;
                }
                for c in &x.components {
                    s.conn
                        .prepare_cached(
                            "INSERT INTO component (mountpoint, database, kind, name, first_seen) \
                             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                        )
                        .and_then(|mut st| {
                            st.execute(params![
                                c.mountpoint,
                                x.database,
                                x.kind.label(),
                                c.component.label(),
                                x.t
                            ])
                        })
                        .map_err(&e)?;
                    let id: i64 = s
                        .conn
                        .prepare_cached(
                            "SELECT id FROM component WHERE mountpoint = ?1 AND database = ?2 \
                             AND name = ?3",
                        )
                        .and_then(|mut st| {
                            st.query_row(params![c.mountpoint, x.database, c.component.label()], |r| {
                                r.get(0)
                            })
                        })
                        .map_err(&e)?;
                    // The hour's row keeps its latest sample, whatever order they come in.
                    s.conn
                        .prepare_cached(
                            "INSERT INTO component_size (component, hour, t, bytes) \
                             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (hour, component) DO UPDATE \
                             SET t = excluded.t, bytes = excluded.bytes WHERE excluded.t >= t",
                        )
                        .and_then(|mut st| {
                            st.execute(params![id, x.t.div_euclid(HOUR), x.t, to_i64(c.bytes)])
                        })
                        .map_err(&e)?;
                    n += 1;
                }
                let f = &x.facts;
                s.conn
                    .prepare_cached(
                        "INSERT INTO database_state (database, kind, t, archive_ready, \
                         archive_oldest_s, slot, slot_retained, binlog_files, binlog_oldest_s, \
                         binlog_retention_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                         ON CONFLICT (database) DO UPDATE SET kind = excluded.kind, t = excluded.t, \
                         archive_ready = excluded.archive_ready, \
                         archive_oldest_s = excluded.archive_oldest_s, slot = excluded.slot, \
                         slot_retained = excluded.slot_retained, \
                         binlog_files = excluded.binlog_files, \
                         binlog_oldest_s = excluded.binlog_oldest_s, \
                         binlog_retention_s = excluded.binlog_retention_s WHERE excluded.t >= t",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            x.database,
                            x.kind.label(),
                            x.t,
                            f.archive_ready_segments.map(to_i64),
                            f.archive_oldest_ready_age_seconds.map(to_i64),
                            f.slot.as_ref().map(|s| s.0.as_str()),
                            f.slot.as_ref().map(|s| to_i64(s.1)),
                            f.binlog_files.map(to_i64),
                            f.binlog_oldest_age_seconds.map(to_i64),
                            f.binlog_retention_seconds.map(to_i64),
                        ])
                    })
                    .map_err(&e)?;
            }
            Ok(n)
        })
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
        if last.is_some_and(|l| t < l) {
            // Older than the series' newest row: the clock was set back. Counted, so the
            // service reports it as dropped rather than as written.
            self.refused_older += 1;
        }
        if due {
            self.last_raw.insert(k, t);
        } else if let Some(l) = last {
            self.last_raw.insert(k, l);
        }
        Ok(due)
    }

    /// Runs `f` in one transaction; on error rolls back and forgets cached state (ids and
    /// raw times may name rows that were rolled back).
    pub(super) fn in_tx<T>(
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
}
