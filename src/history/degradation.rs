//! Degradation curves and TRIM / idle recoveries of every (probe target, probe kind) in a
//! store: the store's queries fed to the pure math of [`super::curve`]. Shared by the daemon's
//! forecast pass (its metrics are made here) and `ssdwatch report`.

use super::curve::{
    Curve, CurveBin, FILL_BIN_LABELS, RECOVERY_WINDOW_SECONDS, Recovery, long_idle, recovery,
};
use super::{DriveId, Store, StoreError};
use crate::catalogue::{self, Family};
use crate::metrics::MetricSet;
use crate::probe::ProbeKind;
use std::collections::BTreeMap;

/// Recoveries kept per group and kind of event (the newest): the report's table and chart
/// stay one page however long the history.
pub const MAX_EVENTS: usize = 50;
/// Events looked at per group and kind before giving up on finding [`MAX_EVENTS`] with runs on
/// both sides (bounds the queries when probes were off for a long time).
const MAX_TRIED: usize = 4 * MAX_EVENTS;

/// What the history says about one probe target and kind.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Group {
    /// The configured target directory.
    pub target: String,
    /// The filesystem the target is on: the longest stored mount point that contains it.
    pub mountpoint: Option<String>,
    /// The drive's kernel name when last seen.
    pub device: Option<String>,
    #[serde(skip)]
    pub drive: Option<DriveId>,
    pub probe: ProbeKind,
    pub runs: u64,
    pub first_run: i64,
    pub last_run: i64,
    /// Latency by fill ratio, bins with runs only.
    pub curve: Vec<CurveBin>,
    /// Recoveries around discard bursts, oldest first (the newest [`MAX_EVENTS`]).
    pub trim: Vec<Recovery>,
    /// Recoveries around idle periods of at least [`super::curve::IDLE_MIN_SECONDS`].
    pub idle: Vec<Recovery>,
}

/// The recovery gauges (name, help) of TRIM (first) and idle (second), in the order of
/// [`recovery_values`]. `ssdwatch history export` writes them too, one sample per event.
pub static RECOVERY_FAMILIES: [[&Family; 4]; 2] = [
    [
        &catalogue::TRIM_RECOVERY_RATIO,
        &catalogue::TRIM_RECOVERY_EVENT_TIMESTAMP_SECONDS,
        &catalogue::TRIM_RECOVERY_BEFORE_SECONDS,
        &catalogue::TRIM_RECOVERY_AFTER_SECONDS,
    ],
    [
        &catalogue::IDLE_RECOVERY_RATIO,
        &catalogue::IDLE_RECOVERY_EVENT_TIMESTAMP_SECONDS,
        &catalogue::IDLE_RECOVERY_BEFORE_SECONDS,
        &catalogue::IDLE_RECOVERY_AFTER_SECONDS,
    ],
];

/// An event's values for the four [`RECOVERY_FAMILIES`] gauges.
pub fn recovery_values(r: &Recovery) -> [f64; 4] {
    [r.ratio, r.start as f64, r.before_seconds, r.after_seconds]
}

/// The curve and recovery gauges of `groups`. Series: one per fill bin with runs (12 bins) ×
/// 2 quantiles × probe kind (4) × target, so at most 96 per target; and 2 × 4 recovery gauges
/// (ratio, event time, latency before and after) per target and kind.
pub fn push_metrics(groups: &[Group], m: &mut MetricSet) {
    for g in groups {
        let dev = g.device.as_deref().unwrap_or("");
        let mp = g.mountpoint.as_deref().unwrap_or("");
        let base = [
            ("device", dev),
            ("mountpoint", mp),
            ("probe", g.probe.as_str()),
        ];
        for b in &g.curve {
            for (q, v) in [("0.5", b.p50_seconds), ("0.99", b.p99_seconds)] {
                // A summary (quantiles only), as ssdwatch_probe_last_latency_seconds: promtool
                // refuses a `quantile` label on a gauge.
                m.family(&catalogue::DEGRADATION_LATENCY_SECONDS).push(
                    &[
                        base[0],
                        base[1],
                        base[2],
                        ("fill_bin", FILL_BIN_LABELS[b.bin]),
                        ("quantile", q),
                    ],
                    v,
                );
            }
        }
        for (events, families) in [
            (&g.trim, &RECOVERY_FAMILIES[0]),
            (&g.idle, &RECOVERY_FAMILIES[1]),
        ] {
            if let Some(r) = events.last() {
                for (family, v) in families.iter().zip(recovery_values(r)) {
                    m.family(family).push(&base, v);
                }
            }
        }
    }
}

/// The mount point among `mounts` that contains `path` (whole components), longest first.
pub fn mountpoint_of<'a>(path: &str, mounts: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    mounts
        .filter(|m| {
            let m = m.trim_end_matches('/');
            m.is_empty() || path == m || path.strip_prefix(m).is_some_and(|r| r.starts_with('/'))
        })
        .max_by_key(|m| m.len())
}

/// Curves and recoveries of every target and kind with runs in `from..=now`, in target, kind
/// order.
pub fn analyse(store: &Store, from: i64, now: i64) -> Result<Vec<Group>, StoreError> {
    struct Acc {
        curve: Curve,
        drive: Option<DriveId>,
        runs: u64,
        first: i64,
        last: i64,
    }
    let mut acc: BTreeMap<(i64, usize), Acc> = BTreeMap::new();
    store.for_each_probe_run(from, now, |r| {
        let k = ProbeKind::ALL
            .iter()
            .position(|x| *x == r.kind)
            .unwrap_or(0);
        let a = acc.entry((r.target, k)).or_insert(Acc {
            curve: Curve::default(),
            drive: None,
            runs: 0,
            first: r.t,
            last: r.t,
        });
        a.curve.add(r.fill_ratio, r.p50_seconds, r.p99_seconds);
        a.runs += 1;
        a.last = r.t;
        if r.drive.is_some() {
            a.drive = r.drive;
        }
    })?;
    if acc.is_empty() {
        return Ok(Vec::new());
    }
    let targets: BTreeMap<i64, String> = store.probe_targets()?.into_iter().collect();
    let fss = store.filesystems()?;
    let drives: BTreeMap<i64, Option<String>> = store
        .drives()?
        .into_iter()
        .map(|d| (d.id.0, d.kernel_name))
        .collect();
    let mut discards: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut idles: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut out = Vec::new();
    for ((target, k), a) in acc {
        let kind = ProbeKind::ALL[k];
        let path = targets.get(&target).cloned().unwrap_or_default();
        let mountpoint =
            mountpoint_of(&path, fss.iter().map(|f| f.key.mountpoint.as_str())).map(String::from);
        let (mut trim, mut idle) = (Vec::new(), Vec::new());
        if let Some(d) = a.drive {
            if let std::collections::btree_map::Entry::Vacant(e) = discards.entry(d.0) {
                let ev = store.discard_events(d, from, now)?;
                e.insert(ev.into_iter().map(|(t, _)| (t, t)).collect());
                idles.insert(d.0, long_idle(&store.idle_periods(d, from, now)?));
            }
            trim = newest_recoveries(store, target, kind, &discards[&d.0])?;
            idle = newest_recoveries(store, target, kind, &idles[&d.0])?;
        }
        out.push(Group {
            target: path,
            mountpoint,
            device: a.drive.and_then(|d| drives.get(&d.0).cloned().flatten()),
            drive: a.drive,
            probe: kind,
            runs: a.runs,
            first_run: a.first,
            last_run: a.last,
            curve: a.curve.bins(),
            trim,
            idle,
        });
    }
    Ok(out)
}

/// The newest [`MAX_EVENTS`] recoveries among `events` (start, end; in time order), oldest
/// first, each judged on one query of the runs around it.
fn newest_recoveries(
    store: &Store,
    target: i64,
    kind: ProbeKind,
    events: &[(i64, i64)],
) -> Result<Vec<Recovery>, StoreError> {
    let w = RECOVERY_WINDOW_SECONDS;
    let mut out = Vec::new();
    for &(start, end) in events.iter().rev().take(MAX_TRIED) {
        let runs =
            store.probe_p50s(target, kind, start.saturating_sub(w), end.saturating_add(w))?;
        if let Some(r) = recovery(&runs, start, end, w) {
            out.push(r);
            if out.len() == MAX_EVENTS {
                break;
            }
        }
    }
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{
        DiscardEvent, DriveKey, DriveSample, FsKey, FsSample, HistoryConfig, IdlePeriod,
        ProbeRecord,
    };

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn key() -> DriveKey {
        DriveKey {
            wwn: Some("eui.0025388b91c0e4d1".into()),
            serial: Some("S4EVNX0R123456".into()),
            model: Some("Samsung SSD 980 PRO 1TB".into()),
        }
    }

    fn run(t: i64, fill: f64, p50: f64) -> ProbeRecord {
        ProbeRecord {
            target: "/data/pg".into(),
            drive: Some(key()),
            t,
            kind: ProbeKind::SyncWrite4k,
            ops: 256,
            p50_seconds: p50,
            p99_seconds: 3.0 * p50,
            max_seconds: 10.0 * p50,
            throughput_bytes_per_second: None,
            fill_ratio: Some(fill),
            since_discard_seconds: None,
            idle_seconds: None,
            utilization_ratio: None,
            utilization_before_ratio: None,
            written_since_discard_bytes: None,
        }
    }

    /// A drive filled from 50 % to 97 % over ten days with a run every 5 minutes: 100 µs below
    /// 80 %, 300 µs from 80 %, 900 µs from 90 %. On day 9 an fstrim halves the latency for the
    /// hour after it; on day 8 a 30-minute rest takes it to a third.
    #[test]
    fn a_stored_story_gives_its_curve_recoveries_and_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        store
            .record_fs(&[FsSample {
                key: FsKey {
                    mountpoint: "/data".into(),
                    uuid: None,
                },
                device: "nvme0n1p1".into(),
                t: T0,
                size_bytes: 1 << 40,
                avail_bytes: 1 << 39,
                free_bytes: 1 << 39,
                files_free: None,
            }])
            .unwrap();
        store
            .record_drives(&[DriveSample {
                key: key(),
                kernel_name: "nvme0n1".into(),
                t: T0,
                ..Default::default()
            }])
            .unwrap();
        let trim = T0 + 9 * 86_400;
        let rest = T0 + 8 * 86_400;
        let mut runs = Vec::new();
        let n = 10 * 288;
        for i in 0..n {
            let t = T0 + i * 300;
            let fill = 0.5 + 0.47 * i as f64 / n as f64;
            let mut p50 = match fill {
                f if f < 0.8 => 100e-6,
                f if f < 0.9 => 300e-6,
                _ => 900e-6,
            };
            if t > trim && t <= trim + 3600 {
                p50 /= 2.0;
            }
            if t >= rest + 1800 && t <= rest + 1800 + 3600 {
                p50 /= 3.0;
            }
            if t > rest && t < rest + 1800 {
                continue; // resting: no probe runs either
            }
            runs.push(run(t, fill, p50));
        }
        store.record_probes(&runs).unwrap();
        store
            .record_discards(&[DiscardEvent {
                drive: key(),
                t: trim,
                bytes: 100 << 30,
            }])
            .unwrap();
        store
            .record_idle(&[
                IdlePeriod {
                    drive: key(),
                    start: rest,
                    seconds: 1800,
                },
                // Too short to count.
                IdlePeriod {
                    drive: key(),
                    start: rest + 86_400 / 2,
                    seconds: 120,
                },
            ])
            .unwrap();
        let now = T0 + 10 * 86_400;
        let groups = analyse(&store, 0, now).unwrap();
        assert_eq!(groups.len(), 1, "{groups:#?}");
        let g = &groups[0];
        assert_eq!(g.mountpoint.as_deref(), Some("/data"));
        assert_eq!(g.device.as_deref(), Some("nvme0n1"));
        assert_eq!(g.runs, runs.len() as u64);
        let bins: Vec<usize> = g.curve.iter().map(|b| b.bin).collect();
        assert_eq!(bins, vec![5, 6, 7, 8, 9, 10, 11]);
        for b in &g.curve {
            let want = [100e-6, 100e-6, 100e-6, 300e-6, 300e-6, 900e-6, 900e-6][b.bin - 5];
            assert!((b.p50_seconds / want - 1.0).abs() < 0.01, "{b:?}");
            assert!((b.p99_seconds / (3.0 * want) - 1.0).abs() < 0.01, "{b:?}");
        }
        assert_eq!(g.trim.len(), 1, "{:?}", g.trim);
        assert_eq!(g.trim[0].start, trim);
        assert!((g.trim[0].ratio - 0.5).abs() < 1e-9, "{:?}", g.trim);
        assert_eq!(g.idle.len(), 1, "{:?}", g.idle);
        assert_eq!((g.idle[0].start, g.idle[0].end), (rest, rest + 1800));
        assert!((g.idle[0].ratio - 1.0 / 3.0).abs() < 1e-9, "{:?}", g.idle);

        let mut m = MetricSet::new();
        push_metrics(&groups, &mut m);
        let l = [
            ("device", "nvme0n1"),
            ("mountpoint", "/data"),
            ("probe", "sync_write_4k"),
        ];
        let v = m
            .value(
                "ssdwatch_degradation_latency_seconds",
                &[
                    l[0],
                    l[1],
                    l[2],
                    ("fill_bin", "0.90-0.95"),
                    ("quantile", "0.99"),
                ],
            )
            .unwrap();
        assert!((v / 2.7e-3 - 1.0).abs() < 0.01, "{v}");
        assert_eq!(
            m.value("ssdwatch_trim_recovery_ratio", &l),
            Some(g.trim[0].ratio)
        );
        assert_eq!(
            m.value("ssdwatch_idle_recovery_event_timestamp_seconds", &l),
            Some(rest as f64)
        );
        // A bin without runs has no series, never a 0.
        assert_eq!(
            m.value(
                "ssdwatch_degradation_latency_seconds",
                &[
                    l[0],
                    l[1],
                    l[2],
                    ("fill_bin", "0.00-0.10"),
                    ("quantile", "0.5")
                ],
            ),
            None
        );
    }

    #[test]
    fn an_empty_store_has_no_groups() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        assert_eq!(analyse(&store, 0, T0).unwrap(), Vec::new());
    }

    #[test]
    fn a_target_belongs_to_the_longest_mount_point_that_contains_it() {
        let mounts = ["/", "/var", "/var/lib/pg", "/var/lib/pgdata"];
        let of = |p: &str| mountpoint_of(p, mounts.iter().copied());
        assert_eq!(of("/var/lib/pgdata/main"), Some("/var/lib/pgdata"));
        assert_eq!(of("/var/lib/pg"), Some("/var/lib/pg"));
        assert_eq!(of("/var/lib/pgx"), Some("/var"));
        assert_eq!(of("/srv"), Some("/"));
        assert_eq!(mountpoint_of("/srv", ["/var"].into_iter()), None);
    }
}
