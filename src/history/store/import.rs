//! Imported history (`ssdwatch history import`): hourly rows of a filesystem from before the
//! daemon's first sample of it, written as the store's own hourly rows and marked in
//! `fs_import`. Never over a row the daemon wrote, never twice the same hour.

use super::layout::{Kind, MAX_T};
use super::{HOUR, Store, StoreError};
use crate::history::FsId;
use crate::history::codec::Row;
use rusqlite::{OptionalExtension, params};
use std::collections::BTreeMap;

/// One imported hour of a filesystem: the hour's start and its figures in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportHour {
    pub hour: i64,
    pub size: i64,
    /// min, max, mean, last of the available bytes.
    pub avail: [i64; 4],
    /// min, max, mean, last of the free bytes.
    pub free: [i64; 4],
    /// Samples the server held in the hour.
    pub samples: i64,
}

/// Which part of a filesystem's history was imported, and from where.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportMark {
    pub fs: FsId,
    pub source: String,
    pub instance: String,
    /// The first imported hour's start and the end of the last (exclusive).
    pub from_t: i64,
    pub until_t: i64,
    pub hours: i64,
    pub at: i64,
}

impl Store {
    /// The start of the first hour the daemon wrote of `fs` (its first sample's hour): imported
    /// hours end before it. None for a filesystem the store does not know.
    pub fn import_cutoff(&self, fs: FsId) -> Result<Option<i64>, StoreError> {
        let first: Option<i64> = self
            .conn
            .query_row("SELECT first_seen FROM fs WHERE id = ?1", [fs.0], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err("reading a filesystem"))?;
        Ok(first.map(|t| t.div_euclid(HOUR) * HOUR))
    }

    /// Writes each filesystem's imported hours in one transaction: only hours that end
    /// before the daemon's first sample of it and that the store does not hold yet. Returns
    /// how many hours were written per filesystem; a filesystem with none written keeps its
    /// mark as it was.
    pub fn import_fs_hours(
        &mut self,
        batches: &[(FsId, Vec<ImportHour>)],
        source: &str,
        instance: &str,
        at: i64,
    ) -> Result<Vec<(FsId, usize)>, StoreError> {
        self.in_tx("importing filesystem history", |s| {
            let mut written = Vec::new();
            for (fs, hours) in batches {
                let Some(cutoff) = s.import_cutoff(*fs)? else {
                    written.push((*fs, 0));
                    continue;
                };
                let mut by_day: BTreeMap<i64, Vec<&ImportHour>> = BTreeMap::new();
                for h in hours {
                    if h.hour % HOUR == 0 && (0..=MAX_T).contains(&h.hour) && h.hour < cutoff {
                        by_day.entry(h.hour.div_euclid(super::DAY)).or_default().push(h);
                    }
                }
                let mut n = 0usize;
                let (mut lo, mut hi) = (i64::MAX, i64::MIN);
                for (day, new) in by_day {
                    let mut rows = s.load_day(Kind::Fs, fs.0, day)?;
                    let before = rows.len();
                    for h in new {
                        if rows.iter().any(|r| r.t == h.hour) {
                            continue;
                        }
                        let mut vals = vec![Some(h.size)];
                        vals.extend(h.avail.iter().map(|v| Some(*v)));
                        vals.extend(h.free.iter().map(|v| Some(*v)));
                        // files_free: node_exporter's inodes are not imported.
                        vals.extend([None, None, None, None]);
                        vals.push(Some(h.samples));
                        rows.push(Row { t: h.hour, vals });
                        lo = lo.min(h.hour);
                        hi = hi.max(h.hour + HOUR);
                    }
                    if rows.len() > before {
                        n += rows.len() - before;
                        rows.sort_by_key(|r| r.t);
                        s.store_day(Kind::Fs, fs.0, day, &rows)?;
                    }
                }
                if n > 0 {
                    s.conn
                        .prepare_cached(
                            "INSERT INTO fs_import (fs, source, instance, from_t, until_t, hours, at) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (fs) DO UPDATE SET \
                             source = excluded.source, instance = excluded.instance, \
                             from_t = min(from_t, excluded.from_t), \
                             until_t = max(until_t, excluded.until_t), \
                             hours = hours + excluded.hours, at = excluded.at",
                        )
                        .and_then(|mut st| {
                            st.execute(params![fs.0, source, instance, lo, hi, n as i64, at])
                        })
                        .map_err(s.err("marking imported history"))?;
                }
                written.push((*fs, n));
            }
            Ok(written)
        })
    }

    /// Every filesystem's import mark.
    pub fn fs_imports(&self) -> Result<Vec<ImportMark>, StoreError> {
        let e = self.err("reading import marks");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT fs, source, instance, from_t, until_t, hours, at FROM fs_import ORDER BY fs",
            )
            .map_err(&e)?;
        let rows = st
            .query_map([], |r| {
                Ok(ImportMark {
                    fs: FsId(r.get(0)?),
                    source: r.get(1)?,
                    instance: r.get(2)?,
                    from_t: r.get(3)?,
                    until_t: r.get(4)?,
                    hours: r.get(5)?,
                    at: r.get(6)?,
                })
            })
            .map_err(&e)?;
        rows.collect::<Result<_, _>>().map_err(e)
    }
}
