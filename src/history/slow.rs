//! "Performance-full": the fill at which a probe target's commits get slow, read off its
//! latency-by-fill curve, and when the mount's fill forecast reaches it. Pure functions of a
//! curve and a forecast: no SQL, no metrics, and never a guess beyond the fill the curve has seen.
//!
//! The commit-latency probe is `sync_write_4k` (a 4 KiB write and fdatasync, as a database
//! commit does). Only the trimmed curve is read: runs made while much was deleted and not yet
//! trimmed show what a missing TRIM costs, not what the fill costs.

use super::curve::{CurveBin, FILL_BINS};
use super::degradation::Group;
use super::forecast::FsForecast;
use crate::catalogue;
use crate::metrics::MetricSet;
use crate::probe::ProbeKind;
use std::collections::BTreeMap;

/// The probe whose p50 says "commits are slow".
pub const SLOW_PROBE: ProbeKind = ProbeKind::SyncWrite4k;

/// A bin counts only with at least this many runs: a median of fewer is one bad minute.
pub const MIN_BIN_RUNS: u64 = 10;

/// The level a target's commits are slow above: an absolute latency when configured, else
/// `factor` × the curve's low-fill baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowLevel {
    pub factor: f64,
    pub absolute_seconds: Option<f64>,
}

impl Default for SlowLevel {
    fn default() -> Self {
        SlowLevel {
            factor: 3.0,
            absolute_seconds: None,
        }
    }
}

/// What the curve says about the slow fill.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SlowFill {
    /// The p50 of the bin starting at `fill` is the first above the level.
    Reached {
        /// The lower bound of that bin (0..1): from this fill on, commits were slow.
        fill: f64,
        /// The p50 of the lowest-fill bin with enough runs, seconds.
        baseline_seconds: f64,
        level_seconds: f64,
        /// The p50 of the bin that crossed, seconds.
        p50_seconds: f64,
    },
    /// No bin with enough runs is above the level, up to `max_fill` (the highest fill a
    /// trimmed run was made at): nothing is known beyond it.
    NotReached {
        max_fill: f64,
        baseline_seconds: f64,
        level_seconds: f64,
    },
    /// The curve can't tell (too few runs): `reason` says why.
    Unknown { reason: &'static str },
}

impl SlowFill {
    pub fn baseline_seconds(&self) -> Option<f64> {
        match self {
            SlowFill::Reached {
                baseline_seconds, ..
            }
            | SlowFill::NotReached {
                baseline_seconds, ..
            } => Some(*baseline_seconds),
            SlowFill::Unknown { .. } => None,
        }
    }

    pub fn level_seconds(&self) -> Option<f64> {
        match self {
            SlowFill::Reached { level_seconds, .. }
            | SlowFill::NotReached { level_seconds, .. } => Some(*level_seconds),
            SlowFill::Unknown { .. } => None,
        }
    }
}

/// The slow fill of a trimmed `sync_write_4k` curve (bins in fill order, as
/// [`super::curve::Curve::bins`] gives them) whose highest run was at `max_fill`. The baseline
/// is the lowest-fill bin with [`MIN_BIN_RUNS`] runs; the level is the absolute one when set,
/// else `factor` × baseline; the slow fill is the lower bound of the first such bin above the
/// level. With a factor, at least two such bins are needed (one is only its own baseline).
pub fn slow_fill(curve: &[CurveBin], max_fill: Option<f64>, level: SlowLevel) -> SlowFill {
    let bins: Vec<&CurveBin> = curve
        .iter()
        .filter(|b| b.runs >= MIN_BIN_RUNS && b.bin < FILL_BINS.len())
        .collect();
    let Some(base) = bins.first() else {
        return SlowFill::Unknown {
            reason: "no fill bin has 10 runs yet",
        };
    };
    let baseline = base.p50_seconds;
    let level_seconds = match level.absolute_seconds {
        Some(a) => a,
        None if bins.len() < 2 => {
            return SlowFill::Unknown {
                reason: "only one fill bin has 10 runs: no fill to compare with the baseline",
            };
        }
        None => level.factor * baseline,
    };
    if !(level_seconds.is_finite() && level_seconds > 0.0 && baseline.is_finite()) {
        return SlowFill::Unknown {
            reason: "the baseline latency is not a positive number",
        };
    }
    if let Some(b) = bins.iter().find(|b| b.p50_seconds > level_seconds) {
        return SlowFill::Reached {
            fill: FILL_BINS[b.bin].0,
            baseline_seconds: baseline,
            level_seconds,
            p50_seconds: b.p50_seconds,
        };
    }
    let top = bins.last().map_or(0.0, |b| FILL_BINS[b.bin].1);
    SlowFill::NotReached {
        // The real highest fill when known (it lies in a bin, maybe one with too few runs);
        // the top of the highest counted bin otherwise.
        max_fill: max_fill
            .filter(|f| f.is_finite())
            .unwrap_or(top)
            .clamp(0.0, 1.0),
        baseline_seconds: baseline,
        level_seconds,
    }
}

/// When the filesystem's fill reaches `fill` (0..1) at its forecast growth: `now` when it is
/// there already, `None` when the forecast has no growing trend (no full date) or the fill is
/// more than 10 years away. Fill here is the forecast's own, `(size − avail) / size`: it counts
/// the root reserve as used, so it is at least df's and the date errs early.
pub fn fill_reached_unix(fc: &FsForecast, fill: f64, now: i64) -> Option<i64> {
    fc.predicted_full_unix?;
    let slope = fc.growth_30d_bytes_per_day?;
    let top = fc.top_now_bytes?;
    let size = fc.size_bytes?;
    if !(slope > 0.0 && size > 0.0 && (0.0..=1.0).contains(&fill)) {
        return None;
    }
    let days = ((fill * size - top) / slope).max(0.0);
    (days <= super::forecast::HORIZON_DAYS)
        .then(|| now.saturating_add((days * crate::time::DAY_F64) as i64))
}

/// Performance-full of one probe target: its slow fill and, when the mount's forecast dates
/// it, when that fill is reached.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Assessment {
    pub target: String,
    pub mountpoint: Option<String>,
    pub device: Option<String>,
    pub slow: SlowFill,
    /// When the fill forecast reaches the slow fill (Unix time); `None` when not crossed, not
    /// growing or beyond 10 years.
    pub slow_at_unix: Option<i64>,
    /// The mount's predicted full date, to put the slow date in context.
    pub full_at_unix: Option<i64>,
    /// When this was assessed (Unix time).
    pub as_of_unix: i64,
}

/// The assessment of every `sync_write_4k` group, with the level configured for its target
/// (`levels`, by target path; the default for a target no longer configured) and the current
/// filesystem forecasts by mount point.
pub fn assess(
    groups: &[Group],
    forecasts: &BTreeMap<String, FsForecast>,
    levels: &[(String, SlowLevel)],
    now: i64,
) -> Vec<Assessment> {
    groups
        .iter()
        .filter(|g| g.probe == SLOW_PROBE)
        .map(|g| {
            let level = levels
                .iter()
                .find(|(t, _)| *t == g.target)
                .map_or_else(SlowLevel::default, |l| l.1);
            let slow = slow_fill(&g.curve, g.curve_max_fill, level);
            let fc = g.mountpoint.as_ref().and_then(|m| forecasts.get(m));
            let slow_at_unix = match (&slow, fc) {
                (SlowFill::Reached { fill, .. }, Some(fc)) => fill_reached_unix(fc, *fill, now),
                _ => None,
            };
            Assessment {
                target: g.target.clone(),
                mountpoint: g.mountpoint.clone(),
                device: g.device.clone(),
                slow,
                slow_at_unix,
                full_at_unix: fc.and_then(|f| f.predicted_full_unix),
                as_of_unix: now,
            }
        })
        .collect()
}

/// The performance-full gauges of `assessed`: at most 5 series per commit-probe target.
pub fn push_metrics(assessed: &[Assessment], m: &mut MetricSet) {
    for a in assessed {
        let l = [
            ("device", a.device.as_deref().unwrap_or("")),
            ("mountpoint", a.mountpoint.as_deref().unwrap_or("")),
        ];
        let (fill, max_fill) = match a.slow {
            SlowFill::Reached { fill, .. } => (Some(fill), None),
            SlowFill::NotReached { max_fill, .. } => (None, Some(max_fill)),
            SlowFill::Unknown { .. } => (None, None),
        };
        m.family(&catalogue::PROBE_SLOW_FILL_RATIO)
            .push_opt(&l, fill);
        m.family(&catalogue::PROBE_SLOW_BASELINE_SECONDS)
            .push_opt(&l, a.slow.baseline_seconds());
        m.family(&catalogue::PROBE_SLOW_LEVEL_SECONDS)
            .push_opt(&l, a.slow.level_seconds());
        m.family(&catalogue::PROBE_CURVE_MAX_FILL_RATIO)
            .push_opt(&l, max_fill);
        m.family(&catalogue::PROBE_PREDICTED_SLOW_TIMESTAMP_SECONDS)
            .push_opt(&l, a.slow_at_unix.map(|t| t as f64));
    }
}

/// The level a target's commits are slow above, as its config sets it.
pub fn level_of(t: &crate::probe::TargetConfig) -> SlowLevel {
    SlowLevel {
        factor: t.slow_latency_factor,
        absolute_seconds: t.slow_latency.map(|d| d.as_secs_f64()),
    }
}

/// Each configured target's slow level, by its path as the store keeps it.
pub fn levels_of(targets: &[crate::probe::TargetConfig]) -> Vec<(String, SlowLevel)> {
    targets
        .iter()
        .map(|t| (t.path.to_string_lossy().into_owned(), level_of(t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(bin: usize, runs: u64, p50_ms: f64) -> CurveBin {
        CurveBin {
            bin,
            runs,
            p50_seconds: p50_ms / 1000.0,
            p99_seconds: None,
        }
    }

    /// A drive whose commits take 0.2 ms up to 60 % full, 0.3 ms at 60-80 %, 0.7 ms at 85-90 %.
    fn curve() -> Vec<CurveBin> {
        vec![
            bin(2, 40, 0.2),
            bin(3, 40, 0.21),
            bin(5, 40, 0.2),
            bin(6, 40, 0.3),
            bin(7, 40, 0.5),
            bin(8, 40, 0.55),
            bin(9, 40, 0.7),
        ]
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn commits_triple_at_the_first_bin_above_three_times_the_baseline() {
        // Baseline 0.2 ms (the 20-30 % bin), level 0.6 ms: the 85-90 % bin (0.7 ms) crosses.
        match slow_fill(&curve(), Some(0.87), SlowLevel::default()) {
            SlowFill::Reached {
                fill,
                baseline_seconds,
                level_seconds,
                p50_seconds,
            } => {
                assert!(close(fill, 0.85), "{fill}");
                assert!(close(baseline_seconds, 0.0002));
                assert!(close(level_seconds, 0.0006));
                assert!(close(p50_seconds, 0.0007));
            }
            other => panic!("{other:?}"),
        }
        // An absolute level of 0.4 ms: the 70-80 % bin (0.5 ms) crosses first.
        let abs = SlowLevel {
            factor: 3.0,
            absolute_seconds: Some(0.0004),
        };
        assert!(matches!(
            slow_fill(&curve(), None, abs),
            SlowFill::Reached { fill, .. } if close(fill, 0.7)
        ));
        // A factor of 2: 0.4 ms, the same bin.
        let two = SlowLevel {
            factor: 2.0,
            absolute_seconds: None,
        };
        assert!(matches!(
            slow_fill(&curve(), None, two),
            SlowFill::Reached { fill, .. } if close(fill, 0.7)
        ));
    }

    #[test]
    fn a_curve_that_never_crosses_says_up_to_which_fill() {
        let c: Vec<CurveBin> = curve().into_iter().take(4).collect();
        assert_eq!(
            slow_fill(&c, Some(0.62), SlowLevel::default()),
            SlowFill::NotReached {
                max_fill: 0.62,
                baseline_seconds: 0.0002,
                level_seconds: 0.0002 * 3.0,
            }
        );
        // Without the highest fill: the top of the highest bin with runs (60-70 %).
        assert!(matches!(
            slow_fill(&c, None, SlowLevel::default()),
            SlowFill::NotReached { max_fill, .. } if close(max_fill, 0.7)
        ));
    }

    #[test]
    fn too_few_runs_or_bins_give_no_fill_and_a_reason() {
        // A slow bin of 3 runs does not count; what is left is one bin.
        let c = vec![bin(2, 40, 0.2), bin(9, 3, 5.0)];
        assert!(matches!(
            slow_fill(&c, Some(0.9), SlowLevel::default()),
            SlowFill::Unknown { reason } if reason.contains("only one fill bin")
        ));
        assert!(matches!(
            slow_fill(&[], None, SlowLevel::default()),
            SlowFill::Unknown { reason } if reason.contains("no fill bin")
        ));
        // With an absolute level one bin is enough: it is either above it or not.
        let abs = SlowLevel {
            factor: 3.0,
            absolute_seconds: Some(0.001),
        };
        assert!(matches!(
            slow_fill(&c[..1], Some(0.25), abs),
            SlowFill::NotReached { max_fill, .. } if close(max_fill, 0.25)
        ));
    }

    fn forecast(top: f64, slope: Option<f64>, full: bool) -> FsForecast {
        FsForecast {
            growth_30d_bytes_per_day: slope,
            predicted_full_unix: full.then_some(1),
            top_now_bytes: Some(top),
            size_bytes: Some(1000.0),
            ..FsForecast::default()
        }
    }

    #[test]
    fn the_slow_fill_is_dated_by_the_fill_forecast_only_while_it_grows() {
        let now = 1_767_225_600;
        // 620 of 1000 used, 10 a day: 85 % in 23 days.
        let fc = forecast(620.0, Some(10.0), true);
        assert_eq!(fill_reached_unix(&fc, 0.85, now), Some(now + 23 * 86_400));
        // Past it already: now, not a date in the past.
        assert_eq!(fill_reached_unix(&fc, 0.5, now), Some(now));
        // Flat or shrinking (no full date) and negative slopes: no date.
        assert_eq!(
            fill_reached_unix(&forecast(620.0, Some(0.0), false), 0.85, now),
            None
        );
        assert_eq!(
            fill_reached_unix(&forecast(620.0, Some(-5.0), true), 0.85, now),
            None
        );
        assert_eq!(
            fill_reached_unix(&forecast(620.0, None, false), 0.85, now),
            None
        );
        // Beyond 10 years: no date.
        assert_eq!(
            fill_reached_unix(&forecast(0.0, Some(0.01), true), 0.85, now),
            None
        );
    }
}
