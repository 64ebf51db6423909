//! Probe results, discard bursts and idle periods: kept at full resolution, recorded and read
//! back here (retention drops them with the hourly rows, in `rollup`).

use super::layout::{NANO, PPM, scaled, to_i64};
use super::{Store, StoreError};
use crate::history::record::{DiscardEvent, DriveId, DriveKey, IdlePeriod, ProbeRecord, ProbeRun};
use crate::probe::ProbeKind;
use rusqlite::params;

/// Whether a stored run's `p99_ns` is a p99: only for runs of 100 I/Os or more (the rule of
/// docs/metrics.md, [`crate::probe::measurable`]). Shorter runs hold their maximum there.
pub(crate) fn has_p99(ops: u64) -> bool {
    crate::probe::measurable(usize::try_from(ops).unwrap_or(usize::MAX), 0.99)
}

impl Store {
    /// Records probe results (all kept, at full resolution).
    pub fn record_probes(&mut self, results: &[ProbeRecord]) -> Result<(), StoreError> {
        self.in_tx("recording probe results", |s| {
            for p in results {
                let target = s.target_id(&p.target)?;
                let drive = match &p.drive {
                    Some(k) => Some(s.drive_id_quiet(k, p.t).or_else(|e| match e {
                        StoreError::NoDriveIdentity { .. } => Ok(-1),
                        e => Err(e),
                    })?),
                    None => None,
                }
                .filter(|&d| d >= 0);
                let kind = ProbeKind::ALL.iter().position(|k| *k == p.kind).unwrap_or(0) as i64;
                s.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO probe (target, t, kind, drive, ops, p50_ns, p99_ns, \
                         max_ns, throughput, fill_ppm, since_discard_s, idle_s, util_ppm, \
                         util_before_ppm, written_since_discard, untrimmed_ppm) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            target,
                            p.t,
                            kind,
                            drive,
                            to_i64(p.ops),
                            scaled(Some(p.p50_seconds), NANO).unwrap_or(0),
                            // The column is NOT NULL: a run without a p99 keeps its maximum
                            // there, as versions before 5 did; readers go by `ops`.
                            scaled(p.p99_seconds.or(Some(p.max_seconds)), NANO).unwrap_or(0),
                            scaled(Some(p.max_seconds), NANO).unwrap_or(0),
                            scaled(p.throughput_bytes_per_second, 1.0),
                            scaled(p.fill_ratio, PPM),
                            scaled(p.since_discard_seconds, 1.0),
                            scaled(p.idle_seconds, 1.0),
                            scaled(p.utilization_ratio, PPM),
                            scaled(p.utilization_before_ratio, PPM),
                            p.written_since_discard_bytes.map(to_i64),
                            scaled(p.untrimmed_ratio, PPM),
                        ])
                    })
                    .map_err(s.err("recording a probe result"))?;
            }
            Ok(())
        })
    }

    /// Records discard bursts.
    pub fn record_discards(&mut self, events: &[DiscardEvent]) -> Result<(), StoreError> {
        let rows = events.iter().map(|e| (&e.drive, e.t, e.bytes));
        self.record_drive_events(
            "recording discard events",
            "discard (drive, t, bytes)",
            rows,
        )
    }

    /// Records idle periods.
    pub fn record_idle(&mut self, periods: &[IdlePeriod]) -> Result<(), StoreError> {
        let rows = periods.iter().map(|p| (&p.drive, p.start, p.seconds));
        self.record_drive_events(
            "recording idle periods",
            "idle (drive, start, seconds)",
            rows,
        )
    }

    /// (drive, time, value) rows into an event table, in one transaction.
    fn record_drive_events<'a>(
        &mut self,
        op: &'static str,
        table: &str,
        rows: impl Iterator<Item = (&'a DriveKey, i64, u64)>,
    ) -> Result<(), StoreError> {
        self.in_tx(op, |s| {
            for (drive, t, value) in rows {
                let id = s.drive_id_quiet(drive, t)?;
                s.conn
                    .prepare_cached(&format!(
                        "INSERT OR REPLACE INTO {table} VALUES (?1, ?2, ?3)"
                    ))
                    .and_then(|mut st| st.execute(params![id, t, to_i64(value)]))
                    .map_err(s.err(op))?;
            }
            Ok(())
        })
    }

    /// Probe results in `from..=to`, all targets, in time order.
    #[cfg(test)]
    pub fn probe_results(&self, from: i64, to: i64) -> Result<Vec<ProbeRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT pt.path, d.wwn, d.serial, d.model, p.t, p.kind, p.ops, p.p50_ns, p.p99_ns, \
                 p.max_ns, p.throughput, p.fill_ppm, p.since_discard_s, p.idle_s, p.util_ppm, \
                 p.util_before_ppm, p.written_since_discard, p.untrimmed_ppm \
                 FROM probe p JOIN probe_target pt ON pt.id = p.target \
                 LEFT JOIN drive d ON d.id = p.drive WHERE p.t >= ?1 AND p.t <= ?2 ORDER BY p.t, pt.path, p.kind",
            )
            .map_err(self.err("reading probe results"))?;
        let f = |v: Option<i64>, s: f64| v.map(|x| x as f64 / s);
        st.query_map([from, to], |r| {
            let wwn: Option<String> = r.get(1)?;
            let serial: Option<String> = r.get(2)?;
            let drive = (wwn.is_some() || serial.is_some()).then(|| DriveKey {
                wwn,
                serial,
                model: r.get(3).ok().flatten(),
            });
            let kind: i64 = r.get(5)?;
            let ops = r.get::<_, i64>(6)?.max(0) as u64;
            Ok(ProbeRecord {
                target: r.get(0)?,
                drive,
                t: r.get(4)?,
                kind: ProbeKind::ALL
                    .get(kind as usize)
                    .copied()
                    .unwrap_or(ProbeKind::SyncWrite4k),
                ops,
                p50_seconds: r.get::<_, i64>(7)? as f64 / NANO,
                p99_seconds: has_p99(ops).then_some(r.get::<_, i64>(8)? as f64 / NANO),
                max_seconds: r.get::<_, i64>(9)? as f64 / NANO,
                throughput_bytes_per_second: f(r.get(10)?, 1.0),
                fill_ratio: f(r.get(11)?, PPM),
                since_discard_seconds: f(r.get(12)?, 1.0),
                idle_seconds: f(r.get(13)?, 1.0),
                utilization_ratio: f(r.get(14)?, PPM),
                utilization_before_ratio: f(r.get(15)?, PPM),
                written_since_discard_bytes: r.get::<_, Option<i64>>(16)?.map(|x| x.max(0) as u64),
                untrimmed_ratio: f(r.get(17)?, PPM),
            })
        })
        .and_then(|it| it.collect())
        .map_err(self.err("reading probe results"))
    }

    /// Probe targets by id: the configured directory of each.
    pub fn probe_targets(&self) -> Result<Vec<(i64, String)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, path FROM probe_target ORDER BY id")
            .map_err(self.err("listing probe targets"))?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|it| it.collect())
            .map_err(self.err("listing probe targets"))
    }

    /// Every probe run in `from..=to` in time order, handed to `f` one at a time (two years of
    /// one target are ~630,000 rows: they are never all in memory).
    pub fn for_each_probe_run(
        &self,
        from: i64,
        to: i64,
        mut f: impl FnMut(ProbeRun),
    ) -> Result<(), StoreError> {
        let e = self.err("reading probe results");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT target, kind, drive, t, fill_ppm, p50_ns, p99_ns, ops, untrimmed_ppm FROM probe \
                 WHERE t >= ?1 AND t <= ?2 ORDER BY t",
            )
            .map_err(&e)?;
        let mut rows = st.query([from, to]).map_err(&e)?;
        while let Some(r) = rows.next().map_err(&e)? {
            let kind: i64 = r.get(1).map_err(&e)?;
            let Some(kind) = usize::try_from(kind)
                .ok()
                .and_then(|k| ProbeKind::ALL.get(k))
            else {
                continue;
            };
            f(ProbeRun {
                target: r.get(0).map_err(&e)?,
                kind: *kind,
                drive: r.get::<_, Option<i64>>(2).map_err(&e)?.map(DriveId),
                t: r.get(3).map_err(&e)?,
                fill_ratio: r
                    .get::<_, Option<i64>>(4)
                    .map_err(&e)?
                    .map(|x| x as f64 / PPM),
                p50_seconds: r.get::<_, i64>(5).map_err(&e)? as f64 / NANO,
                p99_seconds: has_p99(r.get::<_, i64>(7).map_err(&e)?.max(0) as u64)
                    .then_some(r.get::<_, i64>(6).map_err(&e)? as f64 / NANO),
                untrimmed_ratio: r
                    .get::<_, Option<i64>>(8)
                    .map_err(&e)?
                    .map(|x| x as f64 / PPM),
            });
        }
        Ok(())
    }

    /// (time, p50 seconds) of one target's runs of one kind in `from..=to`, in time order.
    pub fn probe_p50s(
        &self,
        target: i64,
        kind: ProbeKind,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let e = self.err("reading probe results");
        let kind = ProbeKind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as i64;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT t, p50_ns FROM probe WHERE t >= ?1 AND t <= ?2 AND target = ?3 AND kind = ?4 \
                 ORDER BY t",
            )
            .map_err(&e)?;
        st.query_map([from, to, target, kind], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as f64 / NANO))
        })
        .and_then(|it| it.collect())
        .map_err(&e)
    }

    /// Discard bursts of one drive in `from..=to`, as (time, bytes).
    pub fn discard_events(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        self.drive_events("discard", "t", "bytes", drive, from, to)
    }

    /// Idle periods of one drive starting in `from..=to`, as (start, seconds).
    pub fn idle_periods(
        &self,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        self.drive_events("idle", "start", "seconds", drive, from, to)
    }

    /// (time, value) rows of an event table for one drive, in time order.
    fn drive_events(
        &self,
        table: &str,
        t: &str,
        value: &str,
        drive: DriveId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        let e = self.err("reading events");
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {t}, {value} FROM {table} WHERE drive = ?1 AND {t} >= ?2 AND {t} <= ?3 ORDER BY {t}"
            ))
            .map_err(&e)?;
        st.query_map([drive.0, from, to], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })
        .and_then(|it| it.collect())
        .map_err(&e)
    }
}
