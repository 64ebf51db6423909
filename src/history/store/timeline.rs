//! The store's own timeline against the wall clock: retention counts the days that hold data
//! (a clock run years ahead deletes nothing it did not replace), and rows stamped after a
//! believable "now" (written while the clock was ahead) are removed so they don't hold back
//! the right clock's samples.

use super::layout::{Kind, MAX_T, SERIES_MASK, chunk_id, raw_key};
use super::{DAY, HOUR, Store, StoreError};

/// What [`Store::drop_future`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FutureRows {
    /// Rows of every table stamped after the limit.
    pub rows: usize,
    /// The newest time they had.
    pub newest: i64,
}

impl Store {
    /// The newest sample time of filesystems and drives (raw or rolled), if any.
    pub fn newest_t(&self) -> Result<Option<i64>, StoreError> {
        let mut newest: Option<i64> = None;
        for kind in [Kind::Fs, Kind::Drive] {
            let raw: Option<i64> = self
                .conn
                .prepare_cached(&format!("SELECT max(id) >> 24 FROM {}", kind.raw_table()))
                .and_then(|mut st| st.query_row([], |r| r.get(0)))
                .map_err(self.err("reading the newest row"))?;
            // A rolled day counts as its last hour (its rows are older than the raw ones).
            let day: Option<i64> = self
                .conn
                .prepare_cached(&format!(
                    "SELECT max(id) >> 24 FROM {}",
                    kind.hourly_table()
                ))
                .and_then(|mut st| st.query_row([], |r| r.get(0)))
                .map_err(self.err("reading the newest row"))?;
            for t in [raw, day.map(|d| d * DAY + DAY - HOUR)]
                .into_iter()
                .flatten()
            {
                newest = Some(newest.map_or(t, |n| n.max(t)));
            }
        }
        Ok(newest)
    }

    /// The first day of the `keep` newest days that hold samples (raw or rolled, filesystems
    /// or drives); None when fewer days than that hold any. Retention drops nothing from this
    /// day on, whatever the clock says: a daemon started under a clock years ahead keeps what
    /// it stored before, until as many days of new samples replace it.
    pub(super) fn recorded_floor(&self, keep: i64) -> Result<Option<i64>, StoreError> {
        let keep = keep.max(1) as usize;
        let mut days = Vec::new();
        for kind in [Kind::Fs, Kind::Drive] {
            days.extend(self.newest_days(kind.raw_table(), true, keep)?);
            days.extend(self.newest_days(kind.hourly_table(), false, keep)?);
        }
        days.sort_unstable_by(|a, b| b.cmp(a));
        days.dedup();
        Ok(days.get(keep - 1).copied())
    }

    /// Up to `n` newest distinct days of `table`'s rows, newest first: one index seek a day.
    /// Raw rows are keyed by time, day chunks by day.
    fn newest_days(&self, table: &str, raw: bool, n: usize) -> Result<Vec<i64>, StoreError> {
        let e = self.err("reading the days that hold samples");
        let mut st = self
            .conn
            .prepare_cached(&format!("SELECT max(id) >> 24 FROM {table} WHERE id < ?1"))
            .map_err(&e)?;
        let mut out = Vec::new();
        let mut below = i64::MAX;
        while out.len() < n {
            let Some(k) = st
                .query_row([below], |r| r.get::<_, Option<i64>>(0))
                .map_err(&e)?
            else {
                break;
            };
            let day = if raw { k.div_euclid(DAY) } else { k };
            out.push(day);
            if day <= 0 {
                break;
            }
            below = if raw {
                raw_key(day * DAY, 0)
            } else {
                chunk_id(0, day)
            };
        }
        Ok(out)
    }

    /// Removes every row stamped after `limit` (seconds): samples a clock that was ahead
    /// wrote. The series' newest rows then are the right clock's again, and its samples are
    /// stored. One transaction.
    pub fn drop_future(&mut self, limit: i64) -> Result<FutureRows, StoreError> {
        let limit = limit.clamp(0, MAX_T);
        let Some(newest) = self.newest_t()? else {
            return Ok(FutureRows::default());
        };
        if newest <= limit {
            return Ok(FutureRows::default());
        }
        let raw_after = raw_key(limit, 0) | SERIES_MASK;
        let day_after = chunk_id(0, limit.div_euclid(DAY) + 1) - 1;
        let hour = limit.div_euclid(HOUR);
        let out = self.in_tx("removing rows stamped in the future", |s| {
            let mut rows = 0;
            let exec = |sql: &str, v: i64| {
                s.conn
                    .prepare_cached(sql)
                    .and_then(|mut st| st.execute([v]))
                    .map_err(s.err("removing rows stamped in the future"))
            };
            for (sql, v) in [
                ("DELETE FROM fs_raw WHERE id > ?1", raw_after),
                ("DELETE FROM drive_raw WHERE id > ?1", raw_after),
                ("DELETE FROM fs_hourly WHERE id > ?1", day_after),
                ("DELETE FROM drive_hourly WHERE id > ?1", day_after),
                ("DELETE FROM fs_day WHERE id > ?1", day_after),
                ("DELETE FROM fs_layer WHERE t > ?1", limit),
                ("DELETE FROM layer_raw WHERE t > ?1", limit),
                ("DELETE FROM layer_day WHERE t > ?1", limit),
                ("DELETE FROM drive_health WHERE hour > ?1", hour),
                ("DELETE FROM component_size WHERE hour > ?1", hour),
                ("DELETE FROM layer_errors WHERE hour > ?1", hour),
                ("DELETE FROM database_state WHERE t > ?1", limit),
                ("DELETE FROM probe WHERE t > ?1", limit),
                ("DELETE FROM discard WHERE t > ?1", limit),
                ("DELETE FROM idle WHERE start > ?1", limit),
            ] {
                rows += exec(sql, v)?;
            }
            // A layer's day that the clock ahead also wrote to goes whole with it above: its
            // extremes are built again from the raw rows the right clock wrote.
            exec(
                "INSERT OR IGNORE INTO layer_day (day, layer, t, avail_min, avail_max, size) \
                 SELECT t / 86400, layer, max(t), min(avail), max(avail), size FROM layer_raw \
                 WHERE t >= ?1 / 86400 * 86400 GROUP BY t / 86400, layer",
                limit,
            )?;
            // A series first seen under that clock was seen, at the latest, now.
            for table in ["fs", "drive", "component", "layer", "layer_member"] {
                exec(
                    &format!("UPDATE {table} SET first_seen = ?1 WHERE first_seen > ?1"),
                    limit,
                )?;
            }
            Ok(rows)
        })?;
        self.last_raw.clear();
        *self.raw_days.get_mut() = None;
        Ok(FutureRows { rows: out, newest })
    }
}
