//! Imported history (`ssdwatch history import`): hourly rows of a filesystem from before the
//! daemon's first sample of it, written as the store's own hourly rows and marked in
//! `fs_import`; a drive's likewise, in `drive_import`. Never over a row the daemon wrote, never
//! twice the same hour.

use super::layout::{Kind, MAX_T, MILLI, PPM, scaled};
use super::{HOUR, Store, StoreError};
use crate::history::codec::Row;
use crate::history::{DriveId, FsId};
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

/// One imported hour of a drive, in the units of its series (ratios 0..1, degrees Celsius,
/// bytes, hours); None where the server holds no such figure for the hour (a drive that does not
/// report NAND writes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DriveImportHour {
    pub hour: i64,
    /// min, max, mean, last of each gauge.
    pub wear_used_ratio: Option<[f64; 4]>,
    pub spare_ratio: Option<[f64; 4]>,
    pub temperature_celsius: Option<[f64; 4]>,
    /// The counters' last value in the hour.
    pub host_written_bytes: Option<f64>,
    pub nand_written_bytes: Option<f64>,
    pub media_errors: Option<f64>,
    pub power_on_hours: Option<f64>,
    /// Samples the server held in the hour.
    pub samples: i64,
}

impl DriveImportHour {
    /// The hour as a `drive_hourly` row (the layout's columns and integer units; no discarded
    /// bytes: those come from the kernel's diskstats, not from the drive's series).
    fn row(&self) -> Row {
        let gauge = |g: Option<[f64; 4]>, scale: f64| -> [Option<i64>; 4] {
            g.map_or([None; 4], |a| a.map(|v| scaled(Some(v), scale)))
        };
        let count = |v: Option<f64>| {
            v.filter(|x| x.is_finite() && *x >= 0.0)
                .map(|x| x.round() as i64)
        };
        let mut vals = Vec::with_capacity(18);
        vals.extend(gauge(self.wear_used_ratio, PPM));
        vals.extend(gauge(self.spare_ratio, PPM));
        vals.extend(gauge(self.temperature_celsius, MILLI));
        vals.extend([
            count(self.host_written_bytes),
            count(self.nand_written_bytes),
            count(self.media_errors),
            count(self.power_on_hours),
            None,
            Some(self.samples),
        ]);
        Row { t: self.hour, vals }
    }
}

/// The import's attribution, the same on every series it writes.
struct Mark<'a> {
    source: &'a str,
    instance: &'a str,
    at: i64,
}

/// The hours an import wrote per filesystem and per drive.
pub type ImportWritten = (Vec<(FsId, usize)>, Vec<(DriveId, usize)>);

/// Which part of a drive's history was imported, and from where.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveImportMark {
    pub drive: DriveId,
    pub source: String,
    pub instance: String,
    /// The first imported hour's start and the end of the last (exclusive).
    pub from_t: i64,
    pub until_t: i64,
    pub hours: i64,
    pub at: i64,
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

    /// Writes the imported hours of filesystems and drives together, in one transaction (all
    /// or nothing), each series only before the daemon's first sample of it and only hours the
    /// store does not hold yet; returns the hours written per filesystem and per drive.
    pub fn import_hours(
        &mut self,
        fs: &[(FsId, Vec<ImportHour>)],
        drives: &[(DriveId, Vec<DriveImportHour>)],
        source: &str,
        instance: &str,
        at: i64,
    ) -> Result<ImportWritten, StoreError> {
        let mark = Mark {
            source,
            instance,
            at,
        };
        self.in_tx("importing history", |s| {
            let mut written = (Vec::new(), Vec::new());
            for (id, hours) in fs {
                let rows = hours.iter().map(|h| {
                    let mut vals = vec![Some(h.size)];
                    vals.extend(h.avail.iter().map(|v| Some(*v)));
                    vals.extend(h.free.iter().map(|v| Some(*v)));
                    // files_free: node_exporter's inodes are not imported.
                    vals.extend([None, None, None, None]);
                    vals.push(Some(h.samples));
                    Row { t: h.hour, vals }
                });
                let cutoff = s.import_cutoff(*id)?;
                written
                    .0
                    .push((*id, s.import_rows(Kind::Fs, id.0, cutoff, rows, &mark)?));
            }
            for (id, hours) in drives {
                let cutoff = s.drive_import_cutoff(*id)?;
                let rows = hours.iter().map(DriveImportHour::row);
                written
                    .1
                    .push((*id, s.import_rows(Kind::Drive, id.0, cutoff, rows, &mark)?));
            }
            Ok(written)
        })
    }

    /// The start of the hour of the daemon's first sample of `drive`: imported hours end
    /// before it. None for a drive the store does not know.
    pub fn drive_import_cutoff(&self, drive: DriveId) -> Result<Option<i64>, StoreError> {
        let first: Option<i64> = self
            .conn
            .query_row(
                "SELECT first_seen FROM drive WHERE id = ?1",
                [drive.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("reading a drive"))?;
        Ok(first.map(|t| t.div_euclid(HOUR) * HOUR))
    }

    /// One series' imported rows (hourly-shaped, `t` the hour's start) merged into its day
    /// chunks: an hour at or after `cutoff`, off the hour or already held is left out; the
    /// series' mark widened when any was written. Returns how many were.
    fn import_rows(
        &mut self,
        kind: Kind,
        id: i64,
        cutoff: Option<i64>,
        rows: impl Iterator<Item = Row>,
        mark: &Mark,
    ) -> Result<usize, StoreError> {
        let Some(cutoff) = cutoff else {
            return Ok(0);
        };
        let mut by_day: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
        for r in rows {
            if r.t % HOUR == 0 && (0..=MAX_T).contains(&r.t) && r.t < cutoff {
                by_day
                    .entry(r.t.div_euclid(super::DAY))
                    .or_default()
                    .push(r);
            }
        }
        let mut n = 0usize;
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for (day, new) in by_day {
            let mut rows = self.load_day(kind, id, day)?;
            let before = rows.len();
            for r in new {
                if rows.iter().any(|have| have.t == r.t) {
                    continue;
                }
                lo = lo.min(r.t);
                hi = hi.max(r.t + HOUR);
                rows.push(r);
            }
            if rows.len() > before {
                n += rows.len() - before;
                rows.sort_by_key(|r| r.t);
                self.store_day(kind, id, day, &rows)?;
            }
        }
        if n > 0 {
            let (table, col) = match kind {
                Kind::Fs => ("fs_import", "fs"),
                Kind::Drive => ("drive_import", "drive"),
            };
            self.conn
                .prepare_cached(&format!(
                    "INSERT INTO {table} ({col}, source, instance, from_t, until_t, hours, at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT ({col}) DO UPDATE SET \
                     source = excluded.source, instance = excluded.instance, \
                     from_t = min(from_t, excluded.from_t), \
                     until_t = max(until_t, excluded.until_t), \
                     hours = hours + excluded.hours, at = excluded.at"
                ))
                .and_then(|mut st| {
                    st.execute(params![
                        id,
                        mark.source,
                        mark.instance,
                        lo,
                        hi,
                        n as i64,
                        mark.at
                    ])
                })
                .map_err(self.err("marking imported history"))?;
        }
        Ok(n)
    }

    /// Every drive's import mark.
    pub fn drive_imports(&self) -> Result<Vec<DriveImportMark>, StoreError> {
        Ok(self
            .marks("drive_import", "drive")?
            .into_iter()
            .map(|(id, m)| DriveImportMark {
                drive: DriveId(id),
                source: m.source,
                instance: m.instance,
                from_t: m.from_t,
                until_t: m.until_t,
                hours: m.hours,
                at: m.at,
            })
            .collect())
    }

    /// Every filesystem's import mark.
    pub fn fs_imports(&self) -> Result<Vec<ImportMark>, StoreError> {
        Ok(self
            .marks("fs_import", "fs")?
            .into_iter()
            .map(|(id, mut m)| {
                m.fs = FsId(id);
                m
            })
            .collect())
    }

    /// The marks of `table`, keyed by its series column `col`.
    fn marks(&self, table: &str, col: &str) -> Result<Vec<(i64, ImportMark)>, StoreError> {
        let e = self.err("reading import marks");
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {col}, source, instance, from_t, until_t, hours, at FROM {table} ORDER BY {col}"
            ))
            .map_err(&e)?;
        let rows = st
            .query_map([], |r| {
                let id: i64 = r.get(0)?;
                Ok((
                    id,
                    ImportMark {
                        fs: FsId(id),
                        source: r.get(1)?,
                        instance: r.get(2)?,
                        from_t: r.get(3)?,
                        until_t: r.get(4)?,
                        hours: r.get(5)?,
                        at: r.get(6)?,
                    },
                ))
            })
            .map_err(&e)?;
        rows.collect::<Result<_, _>>().map_err(e)
    }
}
