//! Degradation curves and TRIM / idle recoveries of every (probe target, probe kind) in a
//! store: the store's queries fed to the pure math of [`super::curve`]. Shared by the daemon's
//! forecast pass (its metrics are made here) and `ssdwatch report`.

use super::curve::{
    Curve, CurveBin, FILL_BIN_LABELS, RECOVERY_WINDOW_SECONDS, Recovery, long_idle, not_trimmed,
    recovery_within, windows,
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
    /// The drive's kernel name when last seen; for a drive the history can't follow (a loop
    /// or dm device without a serial or WWN) the device the target's filesystem is mounted
    /// from.
    pub device: Option<String>,
    #[serde(skip)]
    pub drive: Option<DriveId>,
    pub probe: ProbeKind,
    pub runs: u64,
    pub first_run: i64,
    pub last_run: i64,
    /// Latency by fill ratio of the runs made on a trimmed filesystem (or one whose state is
    /// unknown), bins with runs only: what the drive does with its free space known to it.
    pub curve: Vec<CurveBin>,
    /// The highest fill ratio a run on `curve` was made at: how far the curve has seen.
    pub curve_max_fill: Option<f64>,
    /// The same of the runs made while more than 1 % of the filesystem was deleted but not
    /// trimmed ([`super::curve::UNTRIMMED_RATIO_MIN`]): the drive still holds that as live data.
    pub curve_untrimmed: Vec<CurveBin>,
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
/// (ratio, event time, latency before and after) per target and kind. The curve is the trimmed
/// runs' (`Group::curve`); a bin whose runs were too short for a p99 has no `0.99` series.
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
            for (q, v) in [("0.5", Some(b.p50_seconds)), ("0.99", b.p99_seconds)] {
                let Some(v) = v else { continue };
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
        max_fill: Option<f64>,
        untrimmed: Curve,
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
            max_fill: None,
            untrimmed: Curve::default(),
            drive: None,
            runs: 0,
            first: r.t,
            last: r.t,
        });
        let curve = if not_trimmed(r.untrimmed_ratio) {
            &mut a.untrimmed
        } else {
            if let Some(f) = r.fill_ratio.filter(|f| (0.0..=1.0).contains(f)) {
                a.max_fill = Some(a.max_fill.map_or(f, |m: f64| m.max(f)));
            }
            &mut a.curve
        };
        curve.add(r.fill_ratio, r.p50_seconds, r.p99_seconds);
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
    // Every event of a drive, both kinds, in time order: what cuts each one's windows.
    let mut events: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut out = Vec::new();
    for ((target, k), a) in acc {
        let kind = ProbeKind::ALL[k];
        let path = targets.get(&target).cloned().unwrap_or_default();
        let fs =
            mountpoint_of(&path, fss.iter().map(|f| f.key.mountpoint.as_str())).and_then(|m| {
                // The newest series at that mount point (a reformat starts another).
                fss.iter()
                    .filter(|f| f.key.mountpoint == m)
                    .max_by_key(|f| f.first_seen)
            });
        let mountpoint = fs.map(|f| f.key.mountpoint.clone());
        let (mut trim, mut idle) = (Vec::new(), Vec::new());
        if let Some(d) = a.drive {
            if let std::collections::btree_map::Entry::Vacant(e) = discards.entry(d.0) {
                let ev = store.discard_events(d, from, now)?;
                let bursts: Vec<(i64, i64)> = ev.into_iter().map(|(t, _)| (t, t)).collect();
                let rests = long_idle(&store.idle_periods(d, from, now)?);
                let mut all: Vec<(i64, i64)> = bursts.iter().chain(&rests).copied().collect();
                all.sort_unstable();
                e.insert(bursts);
                idles.insert(d.0, rests);
                events.insert(d.0, all);
            }
            let all = &events[&d.0];
            trim = newest_recoveries(store, target, kind, &discards[&d.0], all)?;
            idle = newest_recoveries(store, target, kind, &idles[&d.0], all)?;
        }
        out.push(Group {
            target: path,
            mountpoint,
            device: a
                .drive
                .and_then(|d| drives.get(&d.0).cloned().flatten())
                .or_else(|| fs.and_then(|f| f.device.clone())),
            drive: a.drive,
            probe: kind,
            runs: a.runs,
            first_run: a.first,
            last_run: a.last,
            curve: a.curve.bins(),
            curve_max_fill: a.max_fill,
            curve_untrimmed: a.untrimmed.bins(),
            trim,
            idle,
        });
    }
    Ok(out)
}

/// The newest [`MAX_EVENTS`] recoveries among `events` (start, end; in time order), oldest
/// first, each judged on one query of the runs around it, its windows cut at its neighbours
/// among `all` (the drive's events of both kinds).
fn newest_recoveries(
    store: &Store,
    target: i64,
    kind: ProbeKind,
    events: &[(i64, i64)],
    all: &[(i64, i64)],
) -> Result<Vec<Recovery>, StoreError> {
    let mut out = Vec::new();
    for &(start, end) in events.iter().rev().take(MAX_TRIED) {
        // Only the events near this one can cut its windows: found by binary search, so a
        // long history's thousands of events cost no quadratic scan. One that began more than
        // 2 days earlier and still reaches near this one is an idle period that long, during
        // which the drive ran no probe: leaving it out moves no run across a window.
        let w = RECOVERY_WINDOW_SECONDS;
        let lo = all.partition_point(|e| e.0 < start.saturating_sub(w.saturating_mul(48)));
        let hi = all.partition_point(|e| e.0 <= end.saturating_add(w));
        let span = windows(start, end, &all[lo..hi], w);
        let runs = store.probe_p50s(target, kind, span.0, span.1)?;
        if let Some(r) = recovery_within(&runs, start, end, span) {
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
            p99_seconds: Some(3.0 * p50),
            max_seconds: 10.0 * p50,
            throughput_bytes_per_second: None,
            fill_ratio: Some(fill),
            since_discard_seconds: None,
            idle_seconds: None,
            utilization_ratio: None,
            utilization_before_ratio: None,
            written_since_discard_bytes: None,
            untrimmed_ratio: None,
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
            let p99 = b.p99_seconds.unwrap();
            assert!((p99 / (3.0 * want) - 1.0).abs() < 0.01, "{b:?}");
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

    /// The first-day story of a deleted-but-not-trimmed drive: 28 runs of 16 writes at 5 %
    /// fill, 7 of them while 20 % of the filesystem was deleted and not trimmed (11 ms), 21
    /// after the fstrim (700 µs). The curve of trimmed runs reads 700 µs, the untrimmed one
    /// 11 ms, and neither has a p99 (16 writes have a maximum, not a p99): no `0.99` series.
    #[test]
    fn untrimmed_runs_are_their_own_curve_and_short_runs_have_no_p99() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        let runs: Vec<ProbeRecord> = (0..28)
            .map(|i| {
                let untrimmed = i < 7;
                let mut r = run(T0 + i * 60, 0.05, if untrimmed { 11e-3 } else { 700e-6 });
                r.ops = 16;
                r.p99_seconds = None;
                r.untrimmed_ratio = Some(if untrimmed { 0.2 } else { 0.0 });
                r
            })
            .collect();
        store.record_probes(&runs).unwrap();
        let groups = analyse(&store, 0, T0 + 3600).unwrap();
        let g = &groups[0];
        assert_eq!(g.runs, 28);
        assert_eq!(g.curve.len(), 1, "{g:#?}");
        assert_eq!(g.curve[0].runs, 21);
        assert!(
            (g.curve[0].p50_seconds / 700e-6 - 1.0).abs() < 0.01,
            "{g:#?}"
        );
        assert_eq!(g.curve[0].p99_seconds, None);
        assert_eq!(g.curve_untrimmed.len(), 1, "{g:#?}");
        assert_eq!(g.curve_untrimmed[0].runs, 7);
        assert!((g.curve_untrimmed[0].p50_seconds / 11e-3 - 1.0).abs() < 0.01);

        let mut m = MetricSet::new();
        push_metrics(&groups, &mut m);
        let l = |q| {
            [
                // No drive sample, no filesystem: neither name is known.
                ("device", ""),
                ("mountpoint", ""),
                ("probe", "sync_write_4k"),
                ("fill_bin", "0.00-0.10"),
                ("quantile", q),
            ]
        };
        let p50 = m.value("ssdwatch_degradation_latency_seconds", &l("0.5"));
        assert!(
            p50.is_some_and(|v| (v / 700e-6 - 1.0).abs() < 0.01),
            "{p50:?}"
        );
        assert_eq!(
            m.value("ssdwatch_degradation_latency_seconds", &l("0.99")),
            None,
            "a maximum is never exported as quantile 0.99"
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
