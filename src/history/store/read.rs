//! Reading back: the series, listed and as points (hourly chunks, then raw rows), a summary a
//! day for the forecasts, and the file's size; in one snapshot between `begin_read`/`end_read`.

use super::layout::{Agg, Kind, Layout, MILLI, PPM, SERIES_BITS, raw_keys};
use super::{DAY, HOUR, Store, StoreError};
use crate::history::forecast::DayUse;
use crate::history::record::{
    ComponentSeries, DatabaseFacts, DriveHealthPoint, DriveHealthRecord, DriveId, DriveInfo,
    DriveKey, DrivePoint, FsId, FsInfo, FsKey, FsPoint, LayerRow, LayerUse, Stat,
};
use rusqlite::OptionalExtension;
use std::collections::{BTreeMap, HashMap};

/// Days `?1..=?2` as a table `d(day)`: a series' day-keyed rows are read by one statement
/// that looks each day up (`d CROSS JOIN t ON key = day, series`) rather than a statement a day.
const DAYS_CTE: &str =
    "WITH RECURSIVE d(day) AS (SELECT ?1 UNION ALL SELECT day + 1 FROM d WHERE day < ?2) ";

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

/// A raw filesystem row (size, avail, free, files_free) as a point: [`fs_point`] of
/// [`raw_as_hourly`] without building the hourly columns, for scans of every raw row.
fn fs_raw_point(t: i64, v: [Option<i64>; 4]) -> Option<FsPoint> {
    let one = |x: Option<i64>| x.map(|x| Stat::one(x as f64));
    Some(FsPoint {
        t,
        hourly: false,
        size: one(v[0])?,
        avail: one(v[1])?,
        free: one(v[2])?,
        files_free: one(v[3]),
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

/// A raw row read back: time, raw columns.
type RawRow = (i64, Vec<Option<i64>>);

impl Store {
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

    /// A filesystem's newest stack of layers and when it was seen; None when it has none.
    pub fn fs_layers(&self, fs: FsId) -> Result<Option<(i64, Vec<LayerRow>)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT t, layer, name, avail, size, limiting FROM fs_layer WHERE fs = ?1 ORDER BY pos",
            )
            .map_err(self.err("reading filesystem layers"))?;
        let rows: Vec<(i64, LayerRow)> = st
            .query_map([fs.0], |r| {
                Ok((
                    r.get(0)?,
                    LayerRow {
                        layer: r.get(1)?,
                        name: r.get(2)?,
                        avail_bytes: r.get::<_, i64>(3)?.max(0) as u64,
                        size_bytes: r.get::<_, Option<i64>>(4)?.map(|v| v.max(0) as u64),
                        limiting: r.get(5)?,
                    },
                ))
            })
            .and_then(|it| it.collect())
            .map_err(self.err("reading filesystem layers"))?;
        let Some(t) = rows.iter().map(|(t, _)| *t).max() else {
            return Ok(None);
        };
        Ok(Some((t, rows.into_iter().map(|(_, l)| l).collect())))
    }

    /// The use of each layer below filesystem `fs` that the store has rows of: its days from
    /// `from` to `to` (`layer_day`) and its raw points from `recent_from` to `to`
    /// (`layer_raw`), in layer order of first sight. A layer with no day in the range is left
    /// out.
    pub fn layer_uses(
        &self,
        fs: FsId,
        from: i64,
        recent_from: i64,
        to: i64,
    ) -> Result<Vec<LayerUse>, StoreError> {
        let e = self.err("reading the layers' use");
        let layers: Vec<(i64, String, String)> = self
            .conn
            .prepare_cached("SELECT id, layer, name FROM layer WHERE fs = ?1 ORDER BY id")
            .and_then(|mut st| {
                st.query_map([fs.0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .map_err(&e)?;
        let mut out = Vec::new();
        for (id, layer, name) in layers {
            let days: Vec<DayUse> = self
                .conn
                .prepare_cached(
                    "SELECT day, avail_min, avail_max, size FROM layer_day \
                     WHERE day >= ?1 AND day <= ?2 AND layer = ?3 ORDER BY day",
                )
                .and_then(|mut st| {
                    st.query_map([from.div_euclid(DAY), to.div_euclid(DAY), id], |r| {
                        let (amin, amax, size): (i64, i64, i64) = (r.get(1)?, r.get(2)?, r.get(3)?);
                        Ok(DayUse {
                            day: r.get(0)?,
                            low: (size - amax) as f64,
                            high: (size - amin) as f64,
                            size: size as f64,
                        })
                    })?
                    .collect()
                })
                .map_err(&e)?;
            if days.is_empty() {
                continue;
            }
            let recent: Vec<(i64, f64)> = self
                .conn
                .prepare_cached(
                    "SELECT t, size - avail FROM layer_raw WHERE t >= ?1 AND t <= ?2 \
                     AND layer = ?3 ORDER BY t",
                )
                .and_then(|mut st| {
                    st.query_map([recent_from, to, id], |r| {
                        Ok((r.get(0)?, r.get::<_, i64>(1)? as f64))
                    })?
                    .collect()
                })
                .map_err(&e)?;
            out.push(LayerUse {
                layer,
                name,
                days,
                recent,
            });
        }
        Ok(out)
    }

    /// A drive's stored health readings with `from <= t <= to`, oldest first (an hour's last;
    /// a day's last before the raw retention).
    pub fn drive_health(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<DriveHealthPoint>, StoreError> {
        let e = self.err("reading drive health");
        let u = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT t, error_log_entries, self_test, self_test_age_s, temp_warning_mc, \
                 above_warning_s, durability FROM drive_health \
                 WHERE hour >= ?1 AND hour <= ?2 AND drive = ?3 AND t >= ?4 AND t <= ?5 ORDER BY hour",
            )
            .map_err(&e)?;
        st.query_map(
            rusqlite::params![
                from.div_euclid(HOUR),
                to.div_euclid(HOUR),
                drive.0,
                from,
                to
            ],
            |r| {
                Ok(DriveHealthPoint {
                    t: r.get(0)?,
                    health: DriveHealthRecord {
                        error_log_entries: u(r.get(1)?),
                        self_test: r.get(2)?,
                        self_test_age_seconds: u(r.get(3)?),
                        temperature_warning_celsius: r
                            .get::<_, Option<i64>>(4)?
                            .map(|v| v as f64 / MILLI),
                        above_warning_seconds: u(r.get(5)?),
                        durability: r.get(6)?,
                    },
                })
            },
        )
        .and_then(|it| it.collect())
        .map_err(&e)
    }

    /// Every database component with its stored sizes with `from <= t <= to` (the last of each
    /// hour, of each day before the raw retention), oldest first; components without a size in
    /// the range are left out. Ordered by mount, database and component.
    pub fn components(&self, from: i64, to: i64) -> Result<Vec<ComponentSeries>, StoreError> {
        let e = self.err("reading database components");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT c.mountpoint, c.database, c.kind, c.name, s.t, s.bytes \
                 FROM component_size AS s JOIN component AS c ON c.id = s.component \
                 WHERE s.hour >= ?1 AND s.hour <= ?2 AND s.t >= ?3 AND s.t <= ?4 \
                 ORDER BY c.mountpoint, c.database, c.name, s.hour",
            )
            .map_err(&e)?;
        let mut rows = st
            .query(rusqlite::params![
                from.div_euclid(HOUR),
                to.div_euclid(HOUR),
                from,
                to
            ])
            .map_err(&e)?;
        let mut out: Vec<ComponentSeries> = Vec::new();
        while let Some(r) = rows.next().map_err(&e)? {
            let (mountpoint, database, kind, component): (String, String, String, String) = (
                r.get(0).map_err(&e)?,
                r.get(1).map_err(&e)?,
                r.get(2).map_err(&e)?,
                r.get(3).map_err(&e)?,
            );
            let point = (
                r.get(4).map_err(&e)?,
                r.get::<_, i64>(5).map_err(&e)?.max(0) as u64,
            );
            match out.last_mut() {
                Some(c)
                    if c.mountpoint == mountpoint
                        && c.database == database
                        && c.component == component =>
                {
                    c.sizes.push(point)
                }
                _ => out.push(ComponentSeries {
                    database,
                    kind,
                    component,
                    mountpoint,
                    sizes: vec![point],
                }),
            }
        }
        Ok(out)
    }

    /// The newest facts of each database: (kind, when seen, facts), by database.
    pub fn database_facts(
        &self,
    ) -> Result<BTreeMap<String, (String, i64, DatabaseFacts)>, StoreError> {
        let e = self.err("reading database facts");
        let u = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT database, kind, t, archive_ready, archive_oldest_s, slot, slot_retained, \
                 binlog_files, binlog_oldest_s, binlog_retention_s FROM database_state",
            )
            .map_err(&e)?;
        st.query_map([], |r| {
            let slot: Option<String> = r.get(5)?;
            let retained = u(r.get(6)?);
            Ok((
                r.get::<_, String>(0)?,
                (
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    DatabaseFacts {
                        archive_ready_segments: u(r.get(3)?),
                        archive_oldest_ready_age_seconds: u(r.get(4)?),
                        slot: slot.zip(retained),
                        binlog_files: u(r.get(7)?),
                        binlog_oldest_age_seconds: u(r.get(8)?),
                        binlog_retention_seconds: u(r.get(9)?),
                    },
                ),
            ))
        })
        .and_then(|it| it.collect())
        .map_err(&e)
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
        let raw: Vec<RawRow> = match raw_keys(from, to) {
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

    /// The newest raw row of each series of `from` (series -> its range's first time) up to
    /// `to` whose columns `keep` accepts, read backwards from `to`: the scan stops once every
    /// series has its row, so on a live host it reads about one sample of each series, not the
    /// range's rows of all of them (raw rows are time-major: a series has no key range of its
    /// own). A series without such a row costs the scan the rest of the range.
    fn newest_raw(
        &self,
        kind: Kind,
        from: &BTreeMap<i64, i64>,
        to: i64,
        keep: fn(&[Option<i64>]) -> bool,
    ) -> Result<HashMap<i64, RawRow>, StoreError> {
        let e = self.err("reading the newest raw rows");
        let mut found = HashMap::with_capacity(from.len());
        let Some((lo, hi)) = from.values().min().and_then(|&lo| raw_keys(lo, to)) else {
            return Ok(found);
        };
        let nf = kind.layout().fields();
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{} WHERE id >= ?1 AND id <= ?2 ORDER BY id DESC",
                kind.raw_select()
            ))
            .map_err(&e)?;
        let mut rows = st.query([lo, hi]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            let id: i64 = r.get(0).map_err(&e)?;
            let t: i64 = r.get(1).map_err(&e)?;
            if from.get(&id).is_none_or(|&f| t < f) || found.contains_key(&id) {
                continue;
            }
            let mut v = Vec::with_capacity(nf);
            for i in 0..nf {
                v.push(r.get(2 + i).map_err(&e)?);
            }
            if keep(&v) {
                found.insert(id, (t, v));
                if found.len() == from.len() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The newest point of each filesystem of `from` (series -> its range's first time) up to
    /// `to`: the last point [`Store::fs_series`] gives for its range, for many series at once.
    /// Raw rows are newer than any hourly point a range shows, so a series' newest raw row is
    /// its answer; only a series without one, in a range the hourly chunks reach, is read as a
    /// whole series.
    pub(crate) fn fs_newest(
        &self,
        from: &BTreeMap<FsId, i64>,
        to: i64,
    ) -> Result<HashMap<FsId, FsPoint>, StoreError> {
        let Some(&lo) = from.values().min() else {
            return Ok(HashMap::new());
        };
        // Only series with a raw row on their range's days can have one in it: the others
        // would make the scan read the whole range for nothing.
        let want: BTreeMap<i64, i64> = self.with_raw_days(|days| {
            from.iter()
                .filter(|(id, f)| {
                    days.range((id.0, f.div_euclid(DAY))..=(id.0, to.div_euclid(DAY)))
                        .next()
                        .is_some()
                })
                .map(|(id, &f)| (id.0, f))
                .collect()
        })?;
        let mut out: HashMap<FsId, FsPoint> = self
            .newest_raw(Kind::Fs, &want, to, |_| true)?
            .into_iter()
            .filter_map(|(id, (t, v))| Some((FsId(id), fs_raw_point(t, [v[0], v[1], v[2], v[3]])?)))
            .collect();
        if self.chunk_days(Kind::Fs, lo, to)?.is_some() {
            for (id, &f) in from {
                if out.contains_key(id) {
                    continue;
                }
                if let Some(p) = self.fs_series(*id, f, to)?.pop() {
                    out.insert(*id, p);
                }
            }
        }
        Ok(out)
    }

    /// Every point of the filesystems of `from` (series -> its range's first time) up to
    /// `to`, in time order within each series, as [`Store::fs_series`] gives them, handed to
    /// `visit` one at a time: the raw rows of all of them in one scan in key order (the
    /// range's rows read once, not once a series), memory holding one row. In a range the
    /// hourly chunks reach (a short raw retention), each series is read on its own.
    pub(crate) fn fs_series_each(
        &self,
        from: &BTreeMap<FsId, i64>,
        to: i64,
        mut visit: impl FnMut(FsId, FsPoint),
    ) -> Result<(), StoreError> {
        let Some(&lo) = from.values().min() else {
            return Ok(());
        };
        if self.chunk_days(Kind::Fs, lo, to)?.is_some() {
            for (&id, &f) in from {
                for p in self.fs_series(id, f, to)? {
                    visit(id, p);
                }
            }
            return Ok(());
        }
        let Some((a, b)) = raw_keys(lo, to) else {
            return Ok(());
        };
        let e = self.err("reading raw rows");
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{} WHERE id >= ?1 AND id <= ?2 ORDER BY id",
                Kind::Fs.raw_select()
            ))
            .map_err(&e)?;
        let mut rows = st.query([a, b]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            let id = FsId(r.get(0).map_err(&e)?);
            let t: i64 = r.get(1).map_err(&e)?;
            if from.get(&id).is_none_or(|&f| t < f) {
                continue;
            }
            let v = [
                r.get(2).map_err(&e)?,
                r.get(3).map_err(&e)?,
                r.get(4).map_err(&e)?,
                r.get(5).map_err(&e)?,
            ];
            if let Some(p) = fs_raw_point(t, v) {
                visit(id, p);
            }
        }
        Ok(())
    }

    /// The newest temperature of each drive of `ids` with `from <= t <= to`: the last one
    /// [`Store::drive_series`] gives for that range, for many drives at once (as
    /// [`Store::fs_newest`]; a drive that reports none costs the scan the whole range).
    pub(crate) fn drive_temperatures(
        &self,
        ids: &[DriveId],
        from: i64,
        to: i64,
    ) -> Result<HashMap<DriveId, f64>, StoreError> {
        // The temperature is the third raw field (layout::DRIVE).
        const TEMP: usize = 2;
        let want: BTreeMap<i64, i64> = ids.iter().map(|d| (d.0, from)).collect();
        let mut out: HashMap<DriveId, f64> = self
            .newest_raw(Kind::Drive, &want, to, |v| v[TEMP].is_some())?
            .into_iter()
            .filter_map(|(id, (_, v))| Some((DriveId(id), v[TEMP]? as f64 / MILLI)))
            .collect();
        if self.chunk_days(Kind::Drive, from, to)?.is_some() {
            for id in ids {
                if out.contains_key(id) {
                    continue;
                }
                let newest = self
                    .drive_series(*id, from, to)?
                    .iter()
                    .rev()
                    .find_map(|p| p.temperature_celsius.map(|t| t.last));
                if let Some(t) = newest {
                    out.insert(*id, t);
                }
            }
        }
        Ok(out)
    }

    /// `f` of every filesystem's raw-day extremes, read once per store.
    fn with_raw_days<T>(&self, f: impl FnOnce(&super::RawDays) -> T) -> Result<T, StoreError> {
        if self.raw_days.borrow().is_none() {
            let built = self.scan_raw_days()?;
            self.raw_days.replace(Some(built));
        }
        let days = self.raw_days.borrow();
        Ok(f(days.as_ref().unwrap_or(&super::RawDays::new())))
    }

    /// A filesystem's daily low and high of used bytes (`size - avail`) and size for the days
    /// from `from`'s to `to`'s (whole days): what
    /// [`crate::history::forecast::forecast_filesystem_days`] needs, read from the hourly
    /// chunks' day summaries and the raw days' extremes kept in memory, instead of every point.
    /// Equal to [`crate::history::forecast::daily_use`] of [`Store::fs_series`] over whole days.
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
        let raw_days: Vec<DayUse> = self.with_raw_days(|m| {
            m.range((fs.0, from.div_euclid(DAY))..=(fs.0, to.div_euclid(DAY)))
                .map(|(&(_, day), &(lo, hi, size))| DayUse {
                    day,
                    low: (size - hi) as f64,
                    high: (size - lo) as f64,
                    size: size as f64,
                })
                .collect()
        })?;
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

    /// One point a day of a drive (the day's last wear, host and NAND bytes written; the other
    /// fields `None`) for the days from `from`'s to `to`'s: what
    /// [`crate::history::forecast::forecast_drive`] needs over years, without decoding every hour.
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

    /// Bytes each table and index takes in the file, largest first (SQLite's dbstat).
    #[cfg(test)]
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
