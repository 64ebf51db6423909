//! "What is filling it": each mount's database components, their growth over a day and a week
//! and their share of the mount's growth, and the sentence that names the top contributor with
//! its cause ("91 % of the last day's growth is pg_wal …; 1,312 segments wait for the archiver,
//! the oldest 5 h"). Pure: the store-backed and the Prometheus-backed reports feed it figures.

use crate::databases::component::{Component, Kind};
use crate::history::DatabaseFacts;
use crate::time::{DAY, HOUR};
use serde::Serialize;
use std::collections::BTreeMap;

/// A component's share of its mount's growth below which the report names no top contributor:
/// the databases then explain too little of it to say "this is what fills the disk".
pub const TOP_SHARE: f64 = 0.1;

/// One database component on a mount.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentReport {
    /// The data directory (or a watched path's name), as the `database` label says.
    pub database: String,
    /// The `kind` label ([`Kind::label`]).
    pub kind: String,
    /// The `component` label ([`Component::label`]).
    pub component: String,
    pub bytes: f64,
    /// Now less a day (a week) ago; unknown when the component was not seen then.
    pub growth_1d_bytes: Option<f64>,
    pub growth_7d_bytes: Option<f64>,
    /// Its growth over the last day as a share of its mount's, where the mount grew.
    pub share_1d: Option<f64>,
    /// When `bytes` was read, where the component could not be sized since while its database
    /// was (a new schema directory the daemon may not read, a part that went unreadable): the
    /// figure is the last one it had, not the current one.
    pub stale_since: Option<i64>,
}

/// A component whose newest size is older than its database's newest sample by more than this
/// is stale: sizes are kept an hour apart, so two hours means at least one missed.
pub const STALE_AFTER: i64 = 2 * HOUR;

/// When `sized_at` is stale against its database's newest sample `seen`: `sized_at` itself.
pub fn stale_since(sized_at: i64, seen: Option<i64>) -> Option<i64> {
    seen.filter(|&t| t - sized_at > STALE_AFTER)
        .map(|_| sized_at)
}

/// A component's size as a reader sees it: the figure, marked when it is not current.
pub fn size_text(c: &ComponentReport, bytes: impl Fn(f64) -> String) -> String {
    match c.stale_since {
        Some(t) => format!(
            "{} (stale: last read {})",
            bytes(c.bytes),
            super::datetime(t)
        ),
        None => bytes(c.bytes),
    }
}

impl ComponentReport {
    /// What a reader calls it: `pg_wal (WAL)`, `binary logs`.
    pub fn title(&self) -> String {
        title(&self.kind, &self.component)
    }
}

/// A component's name for people, by its server's kind; the label itself for a kind or
/// component this version does not know (a store or a Prometheus fed by another version).
pub fn title(kind: &str, component: &str) -> String {
    Kind::from_label(kind)
        .zip(Component::from_label(component))
        .and_then(|(k, c)| c.title(k))
        .unwrap_or(component)
        .to_string()
}

/// A stored component's growth over `span`: its last size less the newest size at or before
/// `now - span`; None when it has no size that old (it did not exist then, or the history is
/// shorter) or none at all. `sizes` are (time, bytes), oldest first.
pub fn growth(sizes: &[(i64, u64)], now: i64, span: i64) -> Option<f64> {
    let last = sizes.last()?;
    let then = sizes.iter().rev().find(|(t, _)| *t <= now - span)?;
    Some(last.1 as f64 - then.1 as f64)
}

/// The mount's components, the fastest-growing over the last day first (then the largest),
/// each with its share of `mount_growth_1d` where the mount grew.
pub fn with_shares(
    mut components: Vec<ComponentReport>,
    mount_growth_1d: Option<f64>,
) -> Vec<ComponentReport> {
    for c in &mut components {
        c.share_1d = match (c.growth_1d_bytes, mount_growth_1d) {
            (Some(g), Some(m)) if m > 0.0 => Some(g / m),
            _ => None,
        };
    }
    components.sort_by(|a, b| {
        let g = |c: &ComponentReport| c.growth_1d_bytes.unwrap_or(f64::NEG_INFINITY);
        g(b).total_cmp(&g(a))
            .then(b.bytes.total_cmp(&a.bytes))
            .then_with(|| (&a.database, &a.component).cmp(&(&b.database, &b.component)))
    });
    components
}

/// The sentence naming what fills the mount: the component with the largest share of its
/// growth over the last day (at least [`TOP_SHARE`]), and why it grows where the database's
/// facts say. None when the mount did not grow or no component explains enough of it. On the
/// first day (no size a day old yet), the facts alone: [`held_back_now`].
pub fn top_contributor(
    components: &[ComponentReport],
    mount_growth_1d: Option<f64>,
    facts: &BTreeMap<String, DatabaseFacts>,
) -> Option<String> {
    if mount_growth_1d.is_none() || components.iter().all(|c| c.growth_1d_bytes.is_none()) {
        return held_back_now(components, facts);
    }
    let m = mount_growth_1d.filter(|m| *m > 0.0)?;
    let top = components
        .iter()
        .filter(|c| c.share_1d.is_some_and(|s| s >= TOP_SHARE))
        .max_by(|a, b| {
            a.share_1d
                .unwrap_or(0.0)
                .total_cmp(&b.share_1d.unwrap_or(0.0))
        })?;
    let share = top.share_1d?;
    let mut s = format!(
        "{} of the last day's growth (+{}) is {} of {}",
        if share > 1.0 {
            "more than all".to_string()
        } else {
            format!("{:.0} %", share * 100.0)
        },
        super::bytes(m),
        top.title(),
        top.database
    );
    if let Some(c) = Component::from_label(&top.component)
        .zip(facts.get(&top.database))
        .and_then(|(c, f)| cause(c, f))
    {
        s.push_str("; ");
        s.push_str(&c);
    }
    Some(s)
}

/// What holds space back now, from the facts alone (no growth a day old to weigh yet): each
/// component with a cause (segments waiting for the archiver, a slot holding WAL back, binary
/// logs past their retention) or a temporary spill, largest first, as one sentence.
pub fn held_back_now(
    components: &[ComponentReport],
    facts: &BTreeMap<String, DatabaseFacts>,
) -> Option<String> {
    let mut found: Vec<(f64, String)> = Vec::new();
    for c in components {
        let why = match Component::from_label(&c.component) {
            Some(Component::Temp) if c.bytes > 0.0 => Some("a query spilling to disk".to_string()),
            Some(Component::Binlog) => facts
                .get(&c.database)
                .filter(|f| {
                    matches!((f.binlog_oldest_age_seconds, f.binlog_retention_seconds),
                        (Some(o), Some(r)) if o > r)
                })
                .and_then(|f| cause(Component::Binlog, f)),
            Some(other) => facts.get(&c.database).and_then(|f| cause(other, f)),
            None => None,
        };
        if let Some(w) = why {
            found.push((
                c.bytes,
                format!(
                    "{} of {} takes {}: {w}",
                    c.title(),
                    c.database,
                    super::bytes(c.bytes)
                ),
            ));
        }
    }
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    (!found.is_empty()).then(|| {
        let all: Vec<String> = found.into_iter().map(|(_, s)| s).collect();
        format!("Holding space now: {}", all.join("; "))
    })
}

/// Why a component grows, from its database's facts: the archiver's backlog or a slot for the
/// WAL, the binary logs kept past their retention.
pub fn cause(component: Component, f: &DatabaseFacts) -> Option<String> {
    match component {
        Component::Wal => {
            let mut parts = Vec::new();
            if let Some(n) = f.archive_ready_segments.filter(|n| *n > 0) {
                parts.push(format!(
                    "{} segment{} wait{} for the archiver, the oldest {}",
                    thousands(n),
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "s" } else { "" },
                    age(f.archive_oldest_ready_age_seconds.unwrap_or(0))
                ));
            }
            if let Some((name, b)) = f.slot.as_ref().filter(|(_, b)| *b > 0) {
                parts.push(format!(
                    "replication slot {name} holds back {}",
                    super::bytes(*b as f64)
                ));
            }
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Component::Binlog => {
            let n = f.binlog_files?;
            let oldest = f.binlog_oldest_age_seconds?;
            let mut s = format!(
                "{} binary log{} kept, the oldest {}",
                thousands(n),
                if n == 1 { "" } else { "s" },
                age(oldest)
            );
            if let Some(r) = f.binlog_retention_seconds.filter(|r| oldest > *r) {
                s.push_str(&format!(", past the expected {} retention", age(r)));
            }
            Some(s)
        }
        _ => None,
    }
}

/// A growth for people: `+910.00 MB`, `-2.00 MB`.
pub fn signed_bytes(g: f64) -> String {
    if g < 0.0 {
        format!("-{}", super::bytes(-g))
    } else {
        format!("+{}", super::bytes(g))
    }
}

/// A share of a mount's growth for people: `91 % of growth`; empty when unknown.
pub fn share(c: &ComponentReport) -> String {
    c.share_1d
        .map(|s| format!("{:.0} % of growth", s * 100.0))
        .unwrap_or_default()
}

/// A count as the report writes it: `1,312`.
pub fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut o = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(c);
    }
    o
}

/// An age for people: `42 s`, `17 min`, `5 h`, `3 d 4 h`.
pub fn age(s: u64) -> String {
    let s = s as i64;
    if s < 60 {
        format!("{s} s")
    } else if s < HOUR {
        format!("{} min", s / 60)
    } else if s < DAY {
        format!("{} h", s / HOUR)
    } else if s % DAY < HOUR {
        format!("{} d", s / DAY)
    } else {
        format!("{} d {} h", s / DAY, s % DAY / HOUR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comp(database: &str, component: Component, bytes: f64, g1: Option<f64>) -> ComponentReport {
        ComponentReport {
            database: database.into(),
            kind: Kind::Postgres.label().into(),
            component: component.label().into(),
            bytes,
            growth_1d_bytes: g1,
            growth_7d_bytes: None,
            share_1d: None,
            stale_since: None,
        }
    }

    #[test]
    fn a_size_not_read_since_its_database_was_is_marked_stale_never_current() {
        let t = 1_796_083_200;
        assert_eq!(stale_since(t, Some(t + HOUR)), None);
        assert_eq!(stale_since(t, Some(t + 3 * HOUR)), Some(t));
        assert_eq!(stale_since(t, None), None);
        let mut c = comp("/var/lib/mysql", Component::Schemas, 4.85e6, None);
        let b = |v: f64| format!("{:.2} MB", v / 1e6);
        assert_eq!(size_text(&c, b), "4.85 MB");
        c.stale_since = Some(t);
        assert_eq!(
            size_text(&c, b),
            "4.85 MB (stale: last read 2026-12-01 00:00)"
        );
    }

    #[test]
    fn growth_is_the_last_size_less_the_newest_one_a_span_ago() {
        let now = 100 * DAY;
        let sizes = [
            (now - 8 * DAY, 100),
            (now - DAY - HOUR, 400),
            (now - HOUR, 900),
            (now, 1000),
        ];
        assert_eq!(growth(&sizes, now, DAY), Some(600.0));
        assert_eq!(growth(&sizes, now, 7 * DAY), Some(900.0));
        // Not seen a month ago: unknown, not "all of it".
        assert_eq!(growth(&sizes, now, 30 * DAY), None);
        assert_eq!(growth(&[], now, DAY), None);
        // Shrinking is negative growth.
        assert_eq!(growth(&[(0, 500), (DAY, 200)], DAY, DAY), Some(-300.0));
    }

    #[test]
    fn the_wal_behind_a_failing_archiver_is_named_with_its_backlog() {
        let db = "/var/lib/postgresql/15/main";
        let comps = with_shares(
            vec![
                comp(db, Component::Relations, 9e9, Some(0.1e9)),
                comp(db, Component::Wal, 2e9, Some(0.91e9)),
                comp(db, Component::Temp, 0.0, None),
            ],
            Some(1e9),
        );
        assert_eq!(
            comps
                .iter()
                .map(|c| c.component.as_str())
                .collect::<Vec<_>>(),
            [Component::Wal, Component::Relations, Component::Temp].map(Component::label)
        );
        assert_eq!(comps[0].share_1d, Some(0.91));
        assert_eq!(comps[2].share_1d, None);
        let facts = BTreeMap::from([(
            db.to_string(),
            DatabaseFacts {
                archive_ready_segments: Some(1312),
                archive_oldest_ready_age_seconds: Some(5 * 3600 + 120),
                ..Default::default()
            },
        )]);
        assert_eq!(
            top_contributor(&comps, Some(1e9), &facts).as_deref(),
            Some(
                "91 % of the last day's growth (+1.00 GB) is pg_wal (WAL) of \
                 /var/lib/postgresql/15/main; 1,312 segments wait for the archiver, the oldest 5 h"
            )
        );
        // The mount shrank, or the databases explain little of its growth: no name.
        assert_eq!(top_contributor(&comps, Some(-1e9), &facts), None);
        let small = with_shares(vec![comp(db, Component::Wal, 1e9, Some(0.05e9))], Some(1e9));
        assert_eq!(top_contributor(&small, Some(1e9), &facts), None);
    }

    /// The first day: no size a day old, so no growth to weigh; the facts alone name what
    /// holds the space (the report said "unknown /1d" and nothing else before).
    #[test]
    fn on_the_first_day_the_facts_alone_name_what_holds_the_space() {
        let db = "/var/lib/postgresql/15/main";
        let comps = vec![
            comp(db, Component::Relations, 9e9, None),
            comp(db, Component::Wal, 2e9, None),
            comp(db, Component::Temp, 5e8, None),
        ];
        let facts = BTreeMap::from([(
            db.to_string(),
            DatabaseFacts {
                archive_ready_segments: Some(120),
                archive_oldest_ready_age_seconds: Some(1800),
                slot: Some(("standby1".into(), 1_500_000_000)),
                ..Default::default()
            },
        )]);
        assert_eq!(
            top_contributor(&comps, None, &facts).as_deref(),
            Some(
                "Holding space now: pg_wal (WAL) of /var/lib/postgresql/15/main takes 2.00 GB: \
                 120 segments wait for the archiver, the oldest 30 min; replication slot \
                 standby1 holds back 1.50 GB; temporary files (pgsql_tmp) of \
                 /var/lib/postgresql/15/main takes 500.00 MB: a query spilling to disk"
            )
        );
        // Nothing held back: nothing said.
        let quiet = vec![comp(db, Component::Relations, 9e9, None)];
        assert_eq!(top_contributor(&quiet, None, &BTreeMap::new()), None);
    }

    #[test]
    fn a_slot_and_binlogs_past_their_retention_are_causes() {
        let f = DatabaseFacts {
            slot: Some(("standby1".into(), 3_000_000_000)),
            ..Default::default()
        };
        assert_eq!(
            cause(Component::Wal, &f).as_deref(),
            Some("replication slot standby1 holds back 3.00 GB")
        );
        assert_eq!(cause(Component::Relations, &f), None);
        let f = DatabaseFacts {
            binlog_files: Some(40),
            binlog_oldest_age_seconds: Some(10 * DAY as u64 + 3 * HOUR as u64),
            binlog_retention_seconds: Some(7 * DAY as u64),
            ..Default::default()
        };
        assert_eq!(
            cause(Component::Binlog, &f).as_deref(),
            Some("40 binary logs kept, the oldest 10 d 3 h, past the expected 7 d retention")
        );
        // Nothing waits and no slot: no cause, not "0 segments".
        assert_eq!(cause(Component::Wal, &DatabaseFacts::default()), None);
    }

    #[test]
    fn ages_and_counts_read_as_people_write_them() {
        assert_eq!(age(42), "42 s");
        assert_eq!(age(17 * 60 + 5), "17 min");
        assert_eq!(age(5 * 3600), "5 h");
        assert_eq!(age(3 * 86_400 + 4 * 3600), "3 d 4 h");
        assert_eq!(age(2 * 86_400), "2 d");
        assert_eq!(thousands(1312), "1,312");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
