//! Publishing one target's figures: each series goes to the sample and, typed, to the record
//! the history store keeps of it, written in the same call so what is stored is what was
//! exported. No file access here; the jobs read, this only writes.

use super::discover::Found;
use super::jobs::{PgCheap, Sized};
use crate::catalogue;
use crate::collector::{ItemError, Sample};
use crate::databases::component::{Component, Kind};
use crate::databases::mount_of;
use crate::databases::mysql;
use crate::databases::postgres::Wal;
use crate::databases::walk::Total;
use crate::history::{ComponentSize, DatabaseFacts, DatabaseSample};
use crate::procfs::mountinfo::MountInfo;
use std::path::Path;
use std::time::{Duration, SystemTime};

pub(super) fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Seconds since `t`; none (nothing waiting, no log kept) is 0, not an unknown.
fn age(t: Option<SystemTime>, now: SystemTime) -> f64 {
    t.map(|t| now.duration_since(t).unwrap_or_default().as_secs_f64())
        .unwrap_or(0.0)
}

/// A published figure as the history keeps it: whole units, never negative.
fn whole(v: f64) -> u64 {
    v.max(0.0) as u64
}

/// The binary log retention expected: the config's where set, else the server's own setting,
/// else (none, or "never purged") 30 days, the default of MySQL 8.
pub(super) fn binlog_retention(config: Option<Duration>, server: Option<u64>) -> Duration {
    config.unwrap_or_else(|| {
        Duration::from_secs(
            server
                .filter(|&s| s > 0)
                .unwrap_or(30 * crate::time::DAY as u64),
        )
    })
}

/// One target's series being written, and the history record of the same figures.
pub(super) struct Out<'a> {
    s: &'a mut Sample,
    label: &'a str,
    record: DatabaseSample,
}

impl<'a> Out<'a> {
    pub(super) fn new(s: &'a mut Sample, label: &'a str, kind: Kind) -> Self {
        Out {
            s,
            label,
            record: DatabaseSample {
                database: label.to_string(),
                kind,
                t: 0,
                components: Vec::new(),
                facts: DatabaseFacts::default(),
            },
        }
    }

    /// The history record of what was written (its time is the caller's to set).
    pub(super) fn finish(self) -> DatabaseSample {
        self.record
    }

    pub(super) fn error(&mut self, item: String, message: String) {
        self.s.error(ItemError::new(item, message));
    }

    /// `ssdwatch_database_up` and `ssdwatch_database_info`.
    pub(super) fn identity(&mut self, up: Option<bool>, version: &str, mount: &str) {
        let label = self.label;
        if let Some(up) = up {
            self.s
                .metrics
                .family(&catalogue::DATABASE_UP)
                .push(&[("database", label)], if up { 1.0 } else { 0.0 });
        }
        self.s.metrics.family(&catalogue::DATABASE_INFO).push(
            &[
                ("database", label),
                ("kind", self.record.kind.label()),
                ("version", version),
                ("mountpoint", mount),
            ],
            1.0,
        );
    }

    fn component_bytes(&mut self, component: Component, mount: &str, bytes: u64) {
        self.s
            .metrics
            .family(&catalogue::DATABASE_COMPONENT_BYTES)
            .push(
                &[
                    ("database", self.label),
                    ("component", component.label()),
                    ("mountpoint", mount),
                ],
                bytes as f64,
            );
        self.record.components.push(ComponentSize {
            component,
            mountpoint: mount.to_string(),
            bytes: whole(bytes as f64),
        });
    }

    /// A walked total: published when whole, else an item error (an unknown value gives no
    /// series, and a figure with a hole would read as the truth).
    fn component_total(&mut self, component: Component, mount: &str, t: &Total) {
        let label = self.label;
        match &t.error {
            Some(e) => self.error(
                format!("{label} {}", component.label()),
                format!(
                    "{label}: {}: {e}{}",
                    component.label(),
                    if t.problems > 1 {
                        format!(" (and {} more)", t.problems - 1)
                    } else {
                        String::new()
                    }
                ),
            ),
            None => self.component_bytes(component, mount, t.bytes),
        }
    }

    /// A database-wide gauge (`{database=...}`), its value as written.
    fn gauge(&mut self, family: &'static catalogue::Family, value: f64) -> f64 {
        self.s
            .metrics
            .family(family)
            .push(&[("database", self.label)], value);
        value
    }

    /// A PostgreSQL's cheap look: its WAL on the mount holding pg_wal, its temporary files and
    /// slots' directory on the data directory's `mount`.
    pub(super) fn pg_cheap(&mut self, c: &PgCheap, found: &Found, mount: &str) {
        for e in &c.errors {
            let label = self.label;
            self.error(format!("{label} pg_wal"), format!("{label}: {e}"));
        }
        if let Some(w) = &c.wal {
            let wal_mount = c
                .wal_dir
                .as_deref()
                .map_or(mount, |d| found.mount_of_inside(d));
            self.pg_wal(w, wal_mount, SystemTime::now());
        }
        for (component, t) in &c.components {
            self.component_total(*component, mount, t);
        }
    }

    /// The WAL, the archiver's backlog and the slots' retained WAL of one PostgreSQL.
    fn pg_wal(&mut self, w: &Wal, mount: &str, now: SystemTime) {
        self.component_bytes(Component::Wal, mount, w.bytes);
        self.gauge(&catalogue::POSTGRES_WAL_SEGMENTS, w.segments as f64);
        let ready = self.gauge(&catalogue::POSTGRES_ARCHIVE_READY_SEGMENTS, w.ready as f64);
        self.record.facts.archive_ready_segments = Some(whole(ready));
        let oldest = self.gauge(
            &catalogue::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS,
            age(w.oldest_ready, now),
        );
        self.record.facts.archive_oldest_ready_age_seconds = Some(whole(oldest));
        // The history keeps the slot holding back the most (the last of equals).
        let mut top: Option<(&str, f64)> = None;
        for slot in &w.slots {
            let retained = slot.retained_bytes as f64;
            self.s
                .metrics
                .family(&catalogue::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES)
                .push(
                    &[
                        ("database", self.label),
                        ("slot", slot.state.name.as_str()),
                        ("type", slot.state.kind()),
                    ],
                    retained,
                );
            if top.is_none_or(|(_, b)| retained.total_cmp(&b).is_ge()) {
                top = Some((slot.state.name.as_str(), retained));
            }
        }
        self.record.facts.slot = top.map(|(name, b)| (name.to_string(), whole(b)));
    }

    /// A MySQL's cheap look: its logs on the mount holding them, InnoDB's files on the data
    /// directory's `mount`.
    pub(super) fn mysql_cheap(
        &mut self,
        c: &mysql::Cheap,
        (found, mount): (&Found, &str),
        now: SystemTime,
        retention: Duration,
    ) {
        // Logs may live elsewhere (log_bin=/var/log/mysql/mysql-bin): counted on their own mount.
        let logs_mount = |l: &mysql::Logs| {
            l.first
                .as_deref()
                .and_then(Path::parent)
                .map_or(mount, |d| found.mount_of_inside(d))
        };
        for e in &c.errors {
            let label = self.label;
            self.error(format!("{label} logs"), format!("{label}: {e}"));
        }
        // No index file, no binary logging: no series rather than zeros.
        if c.binlog.files > 0
            || c.counted
                .iter()
                .any(|p| p.extension().is_some_and(|x| x == "index"))
        {
            self.component_bytes(Component::Binlog, logs_mount(&c.binlog), c.binlog.bytes);
            let f = self.gauge(&catalogue::MYSQL_BINLOG_FILES, c.binlog.files as f64);
            self.record.facts.binlog_files = Some(whole(f));
            let oldest = self.gauge(
                &catalogue::MYSQL_BINLOG_OLDEST_AGE_SECONDS,
                age(c.binlog.oldest, now),
            );
            self.record.facts.binlog_oldest_age_seconds = Some(whole(oldest));
            let r = self.gauge(
                &catalogue::MYSQL_BINLOG_RETENTION_SECONDS,
                retention.as_secs_f64(),
            );
            self.record.facts.binlog_retention_seconds = Some(whole(r));
        }
        if c.relay_log.files > 0 {
            let m = logs_mount(&c.relay_log);
            self.component_bytes(Component::RelayLog, m, c.relay_log.bytes);
        }
        for (component, bytes) in &c.innodb {
            self.component_bytes(*component, mount, *bytes);
        }
    }

    /// The figures of a finished sizing; `mount` holds the data directory, `elsewhere` names the
    /// component and mount of each part sized outside it (by index: a server log elsewhere).
    pub(super) fn sized(
        &mut self,
        d: &Sized,
        mounts: &[MountInfo],
        (mount, elsewhere): (&str, &[(Component, &str)]),
    ) {
        let label = self.label;
        let mut entries = 0;
        // A log directory outside the data directory but on its mount adds to the same series.
        let mut series: Vec<(Component, &str, Total)> = Vec::new();
        let inside = d.components.iter().map(|(c, t)| (*c, mount, t));
        // A part whose target changed since its sizing began has no name: left out.
        let outside = d
            .elsewhere
            .iter()
            .filter_map(|(i, t)| elsewhere.get(*i).map(|(c, m)| (*c, *m, t)));
        for (component, m, t) in inside.chain(outside) {
            entries += t.entries;
            match series
                .iter_mut()
                .find(|(c, sm, _)| *c == component && *sm == m)
            {
                Some((_, _, sum)) => {
                    sum.bytes += t.bytes;
                    sum.entries += t.entries;
                    sum.problems += t.problems;
                    if sum.error.is_none() {
                        sum.error.clone_from(&t.error);
                    }
                }
                None => series.push((component, m, t.clone())),
            }
        }
        for (component, m, t) in &series {
            self.component_total(*component, m, t);
        }
        for (oid, location, t) in &d.tablespaces {
            match &t.error {
                Some(e) => self.error(
                    format!("{label} tablespace {oid}"),
                    format!("{label}: tablespace {oid}: {e}"),
                ),
                None => self
                    .s
                    .metrics
                    .family(&catalogue::POSTGRES_TABLESPACE_BYTES)
                    .push(
                        &[
                            ("database", label),
                            ("tablespace", oid.as_str()),
                            ("location", location.to_string_lossy().as_ref()),
                            ("mountpoint", mount_of(mounts, location).unwrap_or("")),
                        ],
                        t.bytes as f64,
                    ),
            }
        }
        self.gauge(
            &catalogue::DATABASE_SIZE_COMPLETED_TIMESTAMP_SECONDS,
            unix(d.completed),
        );
        self.gauge(&catalogue::DATABASE_SIZE_ENTRIES, entries as f64);
    }
}
