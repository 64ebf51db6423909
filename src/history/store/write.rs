//! Recording raw samples of filesystems and drives, at most one per series and `raw_interval`,
//! a batch in one transaction; a failed one leaves no cached id or time behind.

use super::layout::{Kind, MAX_T, MILLI, PPM, chunk_id, raw_key, scaled, to_i64};
use super::{DAY, Store, StoreError, classify, note_raw_day};
use crate::history::record::{DriveSample, FsLayersRef, FsSampleRef};
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
