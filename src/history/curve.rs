//! Degradation curves and recovery figures from stored probe results: probe latency binned by
//! fill ratio, and latency in the hour after a discard burst or an idle period against the hour
//! before. Pure functions of what they are given: no SQL, no metrics.
//!
//! Latencies are folded into a [`Sketch`] (log-spaced buckets, 1 % relative accuracy) so that a
//! curve over two years of results (~630,000 rows per target) is built in one streaming pass
//! with memory bounded by the buckets used, not by the rows.

use std::collections::BTreeMap;

/// Fill bins: 10 % wide up to 80 %, then 5 % wide (where drives get slow, finer bins).
pub const FILL_BINS: [(f64, f64); 12] = [
    (0.0, 0.1),
    (0.1, 0.2),
    (0.2, 0.3),
    (0.3, 0.4),
    (0.4, 0.5),
    (0.5, 0.6),
    (0.6, 0.7),
    (0.7, 0.8),
    (0.8, 0.85),
    (0.85, 0.9),
    (0.9, 0.95),
    (0.95, 1.0),
];

/// The `fill_bin` label of each bin: its bounds, `0.80-0.85`.
pub const FILL_BIN_LABELS: [&str; 12] = [
    "0.00-0.10",
    "0.10-0.20",
    "0.20-0.30",
    "0.30-0.40",
    "0.40-0.50",
    "0.50-0.60",
    "0.60-0.70",
    "0.70-0.80",
    "0.80-0.85",
    "0.85-0.90",
    "0.90-0.95",
    "0.95-1.00",
];

/// An event's "before" and "after" windows: one hour each at most, cut at the neighbouring
/// events ([`windows`]).
pub const RECOVERY_WINDOW_SECONDS: i64 = crate::time::HOUR;
/// A run counts as made on a "deleted, not trimmed" filesystem when more than this share of the
/// filesystem's size was freed and not yet trimmed (`ssdwatch_filesystem_freed_untrimmed_bytes`
/// ÷ size): the threshold the Degradation dashboard's "trimmed vs deleted, not trimmed" panel
/// uses too.
pub const UNTRIMMED_RATIO_MIN: f64 = 0.01;

/// Whether a run's untrimmed share makes it a "deleted, not trimmed" run; unknown (older rows,
/// no filesystem sample yet) counts as trimmed.
pub fn not_trimmed(untrimmed_ratio: Option<f64>) -> bool {
    untrimmed_ratio.is_some_and(|r| r > UNTRIMMED_RATIO_MIN)
}
/// An idle period counts for idle recovery from this long on (10 minutes).
pub const IDLE_MIN_SECONDS: u64 = 600;

/// The bin a fill ratio falls in (lower bound inclusive; 1.0 is in the last bin); `None` for
/// a value outside 0..=1 or not a number.
pub fn fill_bin(fill: f64) -> Option<usize> {
    if !(0.0..=1.0).contains(&fill) {
        return None;
    }
    // Parts per million, as the store keeps them: no float edge at 0.8 or 0.85.
    let ppm = (fill * 1e6).round() as i64;
    FILL_BINS.iter().position(|&(lo, hi)| {
        let (lo, hi) = ((lo * 1e6).round() as i64, (hi * 1e6).round() as i64);
        ppm >= lo && (ppm < hi || hi == 1_000_000)
    })
}

/// Relative width of a bucket: a value is reported within (GAMMA-1)/(GAMMA+1) ≈ 1 % of itself.
const GAMMA: f64 = 1.02;

/// A quantile sketch of positive values (seconds): counts per log-spaced bucket.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sketch {
    buckets: BTreeMap<i32, u64>,
    /// Values ≤ 0 (a result of 0 ns: below the clock's resolution).
    zeros: u64,
    n: u64,
}

impl Sketch {
    pub fn add(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.n += 1;
        if v <= 0.0 {
            self.zeros += 1;
            return;
        }
        let i = (v.ln() / GAMMA.ln()).ceil().clamp(-2000.0, 2000.0) as i32;
        *self.buckets.entry(i).or_insert(0) += 1;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    /// The value at rank ⌊q·(n−1)⌋ (the lower median for q = 0.5), within 1 %.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = (q * (self.n - 1) as f64).floor() as u64;
        if rank < self.zeros {
            return Some(0.0);
        }
        let mut seen = self.zeros;
        for (&i, &c) in &self.buckets {
            seen += c;
            if seen > rank {
                // The bucket (γ^(i-1), γ^i]: its point of least relative error.
                return Some(2.0 * GAMMA.powi(i) / (GAMMA + 1.0));
            }
        }
        None
    }
}

/// One bin of a curve: how many runs it holds and their typical p50 and p99.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CurveBin {
    pub bin: usize,
    pub runs: u64,
    /// Median of the runs' p50 latency, seconds.
    pub p50_seconds: f64,
    /// Median of the p99 of the runs that had one (100 I/Os or more, docs/metrics.md): a run
    /// of 16 or 64 writes has only a maximum, which is not a p99. None when no run in the bin
    /// could measure one.
    pub p99_seconds: Option<f64>,
}

/// Latency by fill ratio of one (target, probe kind), built from runs one at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Curve {
    bins: BTreeMap<usize, (Sketch, Sketch)>,
}

impl Curve {
    /// Adds one run: its fill ratio when it ran, its p50 and its p99 when it had one. A run
    /// without a fill ratio (the target's filesystem was unknown) has no place on the curve.
    pub fn add(&mut self, fill: Option<f64>, p50: f64, p99: Option<f64>) {
        let Some(bin) = fill.and_then(fill_bin) else {
            return;
        };
        let (a, b) = self.bins.entry(bin).or_default();
        a.add(p50);
        if let Some(p99) = p99 {
            b.add(p99);
        }
    }

    /// The bins that hold runs, in fill order.
    pub fn bins(&self) -> Vec<CurveBin> {
        self.bins
            .iter()
            .filter_map(|(&bin, (p50, p99))| {
                Some(CurveBin {
                    bin,
                    runs: p50.count(),
                    p50_seconds: p50.quantile(0.5)?,
                    p99_seconds: p99.quantile(0.5),
                })
            })
            .collect()
    }
}

/// Latency around one event: the median p50 of the runs in the hour before it began and in the
/// hour after it ended (each cut at the neighbouring events), and their ratio (after ÷ before:
/// 0.6 means 40 % faster after).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Recovery {
    /// When the event began (Unix seconds).
    pub start: i64,
    /// When it ended (the start for a discard burst).
    pub end: i64,
    pub runs_before: usize,
    pub runs_after: usize,
    pub before_seconds: f64,
    pub after_seconds: f64,
    pub ratio: f64,
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The span of an event's "before" and "after" windows, `(from, to)`: `window` seconds before
/// its start and after its end, cut where a neighbouring event (`others`: every other event of
/// the drive, discard bursts and idle periods alike, as (start, end)) ended before it or starts
/// after it. An fstrim 40 s after a rest is not the rest's "after", nor is the rest the
/// fstrim's "before". The event itself may be among `others` (it is skipped).
pub fn windows(start: i64, end: i64, others: &[(i64, i64)], window: i64) -> (i64, i64) {
    let mut from = start.saturating_sub(window);
    let mut to = end.saturating_add(window);
    for &(s, e) in others {
        if (s, e) == (start, end) {
            continue;
        }
        if s < start {
            // Ended before ours began, or still going when ours began (then nothing before
            // ours is clean of it).
            from = from.max(e.min(start));
        } else if s > start {
            to = to.min(s.max(end));
        }
    }
    (from, to)
}

/// The recovery around an event from `runs` (time, p50 seconds; any order): runs at
/// `start - window ..< start` are before, runs at `end ..= end + window` after (a run at the
/// event's start is in neither: it may have raced it). `None` without a run on either side or
/// with a zero latency before.
pub fn recovery(runs: &[(i64, f64)], start: i64, end: i64, window: i64) -> Option<Recovery> {
    recovery_within(
        runs,
        start,
        end,
        (start.saturating_sub(window), end.saturating_add(window)),
    )
}

/// [`recovery`] with the windows' span `(from, to)` given ([`windows`]): before is
/// `from ..< start`, after `end <.. to` (a run at `from` ended the event before: it counts; a run
/// at `to` raced the next event: it does not, unless `to` is a plain window's end).
pub fn recovery_within(
    runs: &[(i64, f64)],
    start: i64,
    end: i64,
    (from, to): (i64, i64),
) -> Option<Recovery> {
    let mut before: Vec<f64> = runs
        .iter()
        .filter(|(t, _)| *t >= from && *t < start)
        .map(|r| r.1)
        .collect();
    let mut after: Vec<f64> = runs
        .iter()
        .filter(|(t, _)| *t > end.max(start) && *t <= to)
        .map(|r| r.1)
        .collect();
    let b = median(&mut before)?;
    let a = median(&mut after)?;
    (b > 0.0).then(|| Recovery {
        start,
        end,
        runs_before: before.len(),
        runs_after: after.len(),
        before_seconds: b,
        after_seconds: a,
        ratio: a / b,
    })
}

/// The recoveries around `events` (start, end), oldest first, leaving out events without runs
/// on both sides; each window is cut at the neighbouring events among `events` and `others`
/// ([`windows`]).
pub fn recoveries(
    runs: &[(i64, f64)],
    events: &[(i64, i64)],
    others: &[(i64, i64)],
    window: i64,
) -> Vec<Recovery> {
    let all: Vec<(i64, i64)> = events.iter().chain(others).copied().collect();
    let mut out: Vec<Recovery> = events
        .iter()
        .filter_map(|&(s, e)| recovery_within(runs, s, e, windows(s, e, &all, window)))
        .collect();
    out.sort_by_key(|r| r.start);
    out
}

/// Idle periods long enough to count, as (start, end).
pub fn long_idle(periods: &[(i64, u64)]) -> Vec<(i64, i64)> {
    periods
        .iter()
        .filter(|(_, s)| *s >= IDLE_MIN_SECONDS)
        .map(|&(start, s)| (start, start.saturating_add(s.min(i64::MAX as u64) as i64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_bins_are_ten_percent_wide_then_five_above_eighty() {
        let cases = [
            (0.0, Some(0)),
            (0.0999, Some(0)),
            (0.1, Some(1)),
            (0.7999, Some(7)),
            (0.8, Some(8)),
            (0.8499, Some(8)),
            (0.85, Some(9)),
            (0.9, Some(10)),
            (0.95, Some(11)),
            (1.0, Some(11)),
            (1.01, None),
            (-0.01, None),
            (f64::NAN, None),
        ];
        for (fill, want) in cases {
            assert_eq!(fill_bin(fill), want, "fill {fill}");
        }
        assert_eq!(FILL_BIN_LABELS.len(), FILL_BINS.len());
        for ((lo, hi), l) in FILL_BINS.iter().zip(FILL_BIN_LABELS) {
            assert_eq!(format!("{lo:.2}-{hi:.2}"), l);
        }
    }

    #[test]
    fn sketch_quantiles_are_within_one_percent() {
        let mut s = Sketch::default();
        // 1..=1000 µs: the median (rank 499) is 500 µs, p99 (rank 989) 990 µs.
        for i in 1..=1000 {
            s.add(i as f64 * 1e-6);
        }
        let close = |got: f64, want: f64| (got / want - 1.0).abs() <= 0.0100;
        assert!(
            close(s.quantile(0.5).unwrap(), 500e-6),
            "{:?}",
            s.quantile(0.5)
        );
        assert!(close(s.quantile(0.99).unwrap(), 990e-6));
        assert!(close(s.quantile(0.0).unwrap(), 1e-6));
        assert!(close(s.quantile(1.0).unwrap(), 1000e-6));
        assert_eq!(s.count(), 1000);
        assert_eq!(Sketch::default().quantile(0.5), None);
        let mut z = Sketch::default();
        z.add(0.0);
        z.add(f64::NAN);
        assert_eq!((z.quantile(0.5), z.count()), (Some(0.0), 1));
    }

    /// A drive that gets slow as it fills: 100 µs below 80 %, 200 µs at 80-85 %, 800 µs at
    /// 95 %+, with p99 four times p50 and one outlier run per bin that the median ignores.
    #[test]
    fn a_recorded_sequence_gives_the_known_curve() {
        let mut c = Curve::default();
        let runs: &[(f64, f64, usize)] = &[
            (0.05, 100e-6, 5),
            (0.45, 100e-6, 5),
            (0.82, 200e-6, 5),
            (0.96, 800e-6, 5),
        ];
        for &(fill, p50, n) in runs {
            for i in 0..n {
                c.add(Some(fill), p50, Some(4.0 * p50));
                // Slightly different fills land in the same bin.
                c.add(Some(fill + 0.001 * i as f64), p50, Some(4.0 * p50));
            }
            c.add(Some(fill), 50.0 * p50, Some(100.0 * p50));
        }
        c.add(None, 1.0, Some(1.0));
        let bins = c.bins();
        let got: Vec<(usize, u64)> = bins.iter().map(|b| (b.bin, b.runs)).collect();
        assert_eq!(got, vec![(0, 11), (4, 11), (8, 11), (11, 11)]);
        for (b, &(_, p50, _)) in bins.iter().zip(runs) {
            assert!((b.p50_seconds / p50 - 1.0).abs() < 0.01, "{b:?}");
            let p99 = b.p99_seconds.unwrap();
            assert!((p99 / (4.0 * p50) - 1.0).abs() < 0.01, "{b:?}");
        }
        // Rising with fill where the story says so.
        assert!(bins[2].p50_seconds > 1.9 * bins[1].p50_seconds);
        assert!(bins[3].p50_seconds > 3.9 * bins[2].p50_seconds);
    }

    #[test]
    fn trim_recovery_compares_the_hour_before_with_the_hour_after() {
        const T: i64 = 1_800_000_000;
        // Runs every 5 min: 400 µs in the hour before the burst, 200 µs after it; one run
        // exactly at the burst and runs beyond the windows are left out.
        let mut runs = Vec::new();
        for i in -24..=24 {
            let t = T + i * 300;
            let p50 = match i {
                ..=-13 => 9e-3,
                -12..=-1 => 400e-6,
                0 => 5.0,
                1..=12 => 200e-6,
                _ => 9e-3,
            };
            runs.push((t, p50));
        }
        let r = recovery(&runs, T, T, RECOVERY_WINDOW_SECONDS).unwrap();
        assert_eq!((r.runs_before, r.runs_after), (12, 12));
        assert_eq!((r.before_seconds, r.after_seconds), (400e-6, 200e-6));
        assert_eq!(r.ratio, 0.5);
        // No run after (the probes stopped): no figure, not a 0.
        let cut: Vec<_> = runs.iter().copied().filter(|r| r.0 <= T).collect();
        assert_eq!(recovery(&cut, T, T, RECOVERY_WINDOW_SECONDS), None);
        assert_eq!(recovery(&[], T, T, RECOVERY_WINDOW_SECONDS), None);
        // A zero latency before has no ratio.
        assert_eq!(recovery(&[(T - 1, 0.0), (T + 1, 1.0)], T, T, 3600), None);
    }

    #[test]
    fn idle_recovery_counts_long_periods_from_their_end() {
        const T: i64 = 1_800_000_000;
        let periods = [(T, 300), (T + 10_000, 1800), (T + 20_000, 600)];
        let long = long_idle(&periods);
        assert_eq!(
            long,
            vec![(T + 10_000, T + 11_800), (T + 20_000, T + 20_600)]
        );
        // Runs: 1 ms before the 30-min idle, 250 µs after it; none around the last one.
        let runs = [
            (T + 9_000, 1e-3),
            (T + 9_900, 1e-3),
            (T + 11_900, 250e-6),
            (T + 12_000, 350e-6),
        ];
        let rs = recoveries(&runs, &long, &[], RECOVERY_WINDOW_SECONDS);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].start, T + 10_000);
        assert_eq!(rs[0].end, T + 11_800);
        assert!((rs[0].ratio - 0.3).abs() < 1e-12, "{:?}", rs[0]);
    }

    /// Runs of 16 writes have a maximum, not a p99: a bin of such runs has a p50 and no p99;
    /// a bin mixing both takes the p99 of the runs that had one.
    #[test]
    fn a_bin_of_short_runs_has_no_p99() {
        let mut c = Curve::default();
        for _ in 0..5 {
            c.add(Some(0.05), 100e-6, None);
            c.add(Some(0.55), 100e-6, None);
        }
        c.add(Some(0.55), 100e-6, Some(900e-6));
        let bins = c.bins();
        assert_eq!(bins[0].p99_seconds, None, "{bins:?}");
        assert_eq!(bins[0].runs, 5);
        let p99 = bins[1].p99_seconds.unwrap();
        assert!((p99 / 900e-6 - 1.0).abs() < 0.01, "{bins:?}");
    }

    /// A rest, an fstrim 40 s after it ended, a rest again 20 min later: each event's windows
    /// stop at its neighbours, so the rest's "after" holds no run of the trimmed drive and the
    /// fstrim's "before" none of the resting one.
    #[test]
    fn an_events_windows_stop_at_its_neighbours() {
        const T: i64 = 1_800_000_000;
        let rest = (T, T + 1800);
        let trim = (T + 1840, T + 1840);
        let rest2 = (T + 3040, T + 3640);
        let all = [rest, trim, rest2];
        assert_eq!(windows(rest.0, rest.1, &all, 3600), (T - 3600, T + 1840));
        assert_eq!(windows(trim.0, trim.1, &all, 3600), (T + 1800, T + 3040));
        assert_eq!(
            windows(rest2.0, rest2.1, &all, 3600),
            (T + 1840, T + 3640 + 3600)
        );
        // Alone, an event has its full hour on each side.
        assert_eq!(windows(trim.0, trim.1, &[trim], 3600), (T - 1760, T + 5440));
        // An event still going when this one began leaves no clean "before".
        assert_eq!(windows(T + 100, T + 100, &[(T, T + 200)], 3600).0, T + 100);

        // Runs: 1 ms before the rest, 300 µs right after it (20 s, the one run before the
        // fstrim), 100 µs after the fstrim.
        let runs = [
            (T - 600, 1e-3),
            (T - 300, 1e-3),
            (T + 1820, 300e-6),
            (T + 2100, 100e-6),
            (T + 2400, 100e-6),
        ];
        let rs = recoveries(&runs, &[rest], &[trim, rest2], 3600);
        assert_eq!(rs.len(), 1);
        assert!(
            (rs[0].ratio - 0.3).abs() < 1e-12,
            "the fstrim's runs left out: {rs:?}"
        );
        let rs = recoveries(&runs, &[trim], &[rest, rest2], 3600);
        assert_eq!((rs[0].runs_before, rs[0].runs_after), (1, 2), "{rs:?}");
        assert!((rs[0].ratio - 1.0 / 3.0).abs() < 1e-12, "{rs:?}");
    }
}
