//! Maintenance: raw days rolled into hourly day chunks, retention, and the finished raw days'
//! extremes (`fs_day`) that spare a forecast after a start from reading every raw row.

use super::layout::{
    Agg, Kind, Layout, MAX_T, SERIES_BITS, SERIES_MASK, chunk_id, raw_key, raw_keys,
};
use super::{DAY, HOUR, Maintenance, RawDays, Store, StoreError, note_raw_day};
use crate::history::codec::{self, Row};
use rusqlite::{OptionalExtension, params};
use std::collections::BTreeMap;

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

impl Store {
    /// Rolls the raw rows of each UTC day wholly older than `retention_raw` into hourly rows and
    /// deletes them; drops the hourly rows of each day wholly older than `retention_hourly`,
    /// and probe results and events older than it. One transaction; run it every few minutes to
    /// an hour. Whole days, so a day's chunks are written once and dropped once (a chunk
    /// rewritten every hour as its day rolls in would write it 24 times): raw rows stay up to a
    /// day longer than `retention_raw`, hourly rows up to a day longer than `retention_hourly`.
    ///
    /// What is dropped outright also waits for days that hold samples: nothing of the newest
    /// `retention_hourly` days with data is deleted, whatever the clock says (a daemon started
    /// under a clock ten years ahead deletes nothing it did not replace). Rolling raw rows into
    /// hours keeps them, so it goes by the clock.
    pub fn downsample(&mut self, now: i64) -> Result<Maintenance, StoreError> {
        let raw_cut = now.saturating_sub(self.retention_raw).div_euclid(DAY) * DAY;
        let kept_days = self.retention_hourly.div_euclid(DAY).max(1);
        let by_data = self
            .recorded_floor(kept_days)?
            .map_or(i64::MIN, |d| d.saturating_mul(DAY));
        let long_cut = now.saturating_sub(self.retention_hourly).min(by_data);
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
            // The layers' use: raw rows as long as the filesystems' raw rows, day rows as long
            // as their hourly rows (their day rows are written as the samples come).
            m.events_dropped += s
                .conn
                .prepare_cached("DELETE FROM layer_raw WHERE t < ?1")
                .and_then(|mut st| st.execute([raw_cut]))
                .map_err(s.err("dropping old layer rows"))?;
            m.hours_dropped += s
                .conn
                .prepare_cached("DELETE FROM layer_day WHERE day < ?1")
                .and_then(|mut st| st.execute([long_cut.div_euclid(DAY)]))
                .map_err(s.err("dropping old layer rows"))?;
            m.days_summarized += s.summarize_raw_days(now)?;
            m.hourly_thinned += s.thin_hourly(raw_cut, long_cut)?;
            for (table, col) in [("probe", "t"), ("discard", "t"), ("idle", "start")] {
                m.events_dropped += s
                    .conn
                    .execute(&format!("DELETE FROM {table} WHERE {col} < ?1"), [long_cut])
                    .map_err(s.err("dropping old events"))?;
            }
            Ok(m)
        })
    }

    /// Drive health, component sizes and layer error counters, a row per series and hour: before `raw_cut` (a
    /// day's start) only each day's last row is kept, and none before `long_cut`. Returns the
    /// rows dropped.
    fn thin_hourly(&mut self, raw_cut: i64, long_cut: i64) -> Result<usize, StoreError> {
        let (cut_hour, long_hour) = (raw_cut.div_euclid(HOUR), long_cut.div_euclid(HOUR));
        let mut n = 0;
        for (table, series) in [
            ("drive_health", "drive"),
            ("component_size", "component"),
            ("layer_errors", "member"),
        ] {
            n += self
                .conn
                .execute(&format!("DELETE FROM {table} WHERE hour < ?1"), [long_hour])
                .map_err(self.err("dropping old hourly rows"))?;
            // Rows of a day before the cut that a later row of the same series and day
            // follows. The days before the cut hold one row each after the first thinning,
            // so this reads each old day once.
            n += self
                .conn
                .execute(
                    &format!(
                        "DELETE FROM {table} AS a WHERE a.hour < ?1 AND EXISTS (SELECT 1 FROM \
                         {table} AS b WHERE b.{series} = a.{series} AND b.hour > a.hour \
                         AND b.hour < (a.hour / 24 + 1) * 24)"
                    ),
                    [cut_hour],
                )
                .map_err(self.err("thinning hourly rows"))?;
        }
        Ok(n)
    }

    /// The last day `fs_day` holds the extremes of, if any.
    pub(super) fn summarized_through(&self) -> Result<Option<i64>, StoreError> {
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

    /// Every filesystem's raw-day extremes: the finished days' from `fs_day` (a row each),
    /// the days since from the raw rows.
    pub(super) fn scan_raw_days(&self) -> Result<RawDays, StoreError> {
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

    pub(super) fn load_day(&self, kind: Kind, id: i64, day: i64) -> Result<Vec<Row>, StoreError> {
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

    pub(super) fn decode_day(
        &self,
        kind: Kind,
        id: i64,
        day: i64,
        b: &[u8],
    ) -> Result<Vec<Row>, StoreError> {
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

    pub(super) fn store_day(
        &self,
        kind: Kind,
        id: i64,
        day: i64,
        rows: &[Row],
    ) -> Result<(), StoreError> {
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
}
