//! The error counters of the layers under filesystems (btrfs devices, ZFS vdevs, md members):
//! the last reading of each component's hour, as `drive_health` keeps a drive's. One row per
//! component and hour, never per file; thinned and dropped with the other hourly tables.

use super::layout::{MAX_T, to_i64};
use super::{HOUR, Store, StoreError};
use crate::history::record::{
    LayerErrorCounts, LayerErrorKind, LayerErrorsSample, LayerErrorsSeries,
};
use rusqlite::params;

impl Store {
    /// Records components' error counters in one transaction, each reading as its hour's (a
    /// later reading of the same hour replaces it); returns how many were stored. A reading
    /// before 1970 or too far ahead is left out; the component's drive is updated to the
    /// newest reading's.
    pub fn record_layer_errors(
        &mut self,
        samples: &[LayerErrorsSample],
    ) -> Result<usize, StoreError> {
        self.in_tx("recording layer error counters", |s| {
            let e = s.err("recording layer error counters");
            let mut n = 0;
            for x in samples {
                if !(0..=MAX_T).contains(&x.t) || x.counts == LayerErrorCounts::default() {
                    continue;
                }
                let kind = x.kind.as_str();
                s.conn
                    .prepare_cached(
                        "INSERT INTO layer_member (kind, container, member, drive, first_seen) \
                         VALUES (?1, ?2, ?3, ?4, ?5) \
                         ON CONFLICT (kind, container, member) DO UPDATE SET drive = excluded.drive",
                    )
                    .and_then(|mut st| st.execute(params![kind, x.container, x.member, x.drive, x.t]))
                    .map_err(&e)?;
                let id: i64 = s
                    .conn
                    .prepare_cached(
                        "SELECT id FROM layer_member WHERE kind = ?1 AND container = ?2 \
                         AND member = ?3",
                    )
                    .and_then(|mut st| {
                        st.query_row(params![kind, x.container, x.member], |r| r.get(0))
                    })
                    .map_err(&e)?;
                // The hour's row keeps its latest reading, whatever order they come in.
                let c = &x.counts;
                s.conn
                    .prepare_cached(
                        "INSERT INTO layer_errors (member, hour, t, read_errs, write_errs, \
                         checksum_errs, other_errs) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                         ON CONFLICT (hour, member) DO UPDATE SET t = excluded.t, \
                         read_errs = excluded.read_errs, write_errs = excluded.write_errs, \
                         checksum_errs = excluded.checksum_errs, other_errs = excluded.other_errs \
                         WHERE excluded.t >= layer_errors.t",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            id,
                            x.t.div_euclid(HOUR),
                            x.t,
                            c.read.map(to_i64),
                            c.write.map(to_i64),
                            c.checksum.map(to_i64),
                            c.other.map(to_i64),
                        ])
                    })
                    .map_err(&e)?;
                n += 1;
            }
            Ok(n)
        })
    }

    /// Every component's stored readings with `from <= t <= to`, oldest first (an hour's
    /// last; a day's last before the raw retention); components without one there are left
    /// out. Ordered by kind, container and member.
    pub fn layer_errors(&self, from: i64, to: i64) -> Result<Vec<LayerErrorsSeries>, StoreError> {
        let e = self.err("reading layer error counters");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT m.kind, m.container, m.member, m.drive, x.t, x.read_errs, x.write_errs, \
                 x.checksum_errs, x.other_errs \
                 FROM layer_errors AS x JOIN layer_member AS m ON m.id = x.member \
                 WHERE x.hour >= ?1 AND x.hour <= ?2 AND x.t >= ?3 AND x.t <= ?4 \
                 ORDER BY m.kind, m.container, m.member, x.hour",
            )
            .map_err(&e)?;
        let mut rows = st
            .query(params![
                from.div_euclid(HOUR),
                to.div_euclid(HOUR),
                from,
                to
            ])
            .map_err(&e)?;
        let u = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        let mut out: Vec<LayerErrorsSeries> = Vec::new();
        while let Some(r) = rows.next().map_err(&e)? {
            let kind: String = r.get(0).map_err(&e)?;
            // A kind a newer ssdwatch wrote: not this one's to show.
            let Some(kind) = LayerErrorKind::parse(&kind) else {
                continue;
            };
            let (container, member, drive): (String, String, Option<String>) = (
                r.get(1).map_err(&e)?,
                r.get(2).map_err(&e)?,
                r.get(3).map_err(&e)?,
            );
            let point = (
                r.get(4).map_err(&e)?,
                LayerErrorCounts {
                    read: u(r.get(5).map_err(&e)?),
                    write: u(r.get(6).map_err(&e)?),
                    checksum: u(r.get(7).map_err(&e)?),
                    other: u(r.get(8).map_err(&e)?),
                },
            );
            match out.last_mut() {
                Some(s) if s.kind == kind && s.container == container && s.member == member => {
                    s.points.push(point)
                }
                _ => out.push(LayerErrorsSeries {
                    kind,
                    container,
                    member,
                    drive,
                    points: vec![point],
                }),
            }
        }
        Ok(out)
    }
}
