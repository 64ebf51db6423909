//! The series a Prometheus would hold for a replayed volume: the daemon's (`ssdwatch_*`, its
//! forecast dates from the replay included) and node_exporter's (`node_filesystem_*`), on one
//! grid at the trace's interval, as promtool input. Pure.

use crate::catalogue;
use crate::time::DAY;

use super::engine::{Series, Slot, selector};
use super::replay::{ForecastPoint, Volume};
use super::trace::Trace;
use crate::collector::filesystem::thresholds::AlertThresholds;

/// A grid longer than this many steps is refused (a 10 s trace over a year is 3.2 million).
pub(crate) const MAX_SLOTS: usize = 5_000_000;

/// A trace longer than [`MAX_SLOTS`] steps of its interval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the trace spans {slots} steps of {step} s (at most {MAX_SLOTS}): use a coarser trace")]
pub(crate) struct GridTooLong {
    pub slots: usize,
    pub step: i64,
}

/// Where the series sit: the shift of the origin and the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    /// Unix seconds of the promtool test's time 0: the trace's first UTC midnight.
    pub shift: i64,
    /// Seconds between steps: the trace's usual interval.
    pub step: i64,
    pub slots: usize,
}

impl Grid {
    pub(crate) fn of(trace: &Trace) -> Result<Grid, GridTooLong> {
        let shift = trace.start().div_euclid(DAY) * DAY;
        let step = trace.interval().max(1);
        let slots = ((trace.end() - shift) / step + 2) as usize;
        if slots > MAX_SLOTS {
            return Err(GridTooLong { slots, step });
        }
        Ok(Grid { shift, step, slots })
    }

    /// The step a sample at `t` (Unix seconds) falls on.
    fn slot(&self, t: i64) -> usize {
        (((t - self.shift) as f64 / self.step as f64).round() as usize).min(self.slots - 1)
    }
}

/// The labels of the volume's series as each exporter has them.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    pub ssdwatch_instance: String,
    pub node_instance: String,
    pub fstype: String,
}

impl Default for Labels {
    fn default() -> Self {
        Labels {
            ssdwatch_instance: "backtest:10150".into(),
            node_instance: "backtest:9100".into(),
            fstype: "ext4".into(),
        }
    }
}

/// Every input series of the test.
pub(crate) fn input_series(
    trace: &Trace,
    forecast: &[ForecastPoint],
    volume: &Volume,
    labels: &Labels,
    grid: &Grid,
) -> Vec<Series> {
    let slots = Slots::of(trace, grid);
    let mut out = filesystem_series(&slots, volume, labels);
    out.extend(threshold_series(&slots, volume, labels));
    out.extend(forecast_series(&slots, forecast, volume, labels));
    out.extend(health_series(&slots, labels));
    out.extend(node_series(&slots, volume, labels));
    out
}

/// The trace's samples placed on the grid: which steps have one, and the series built from them.
struct Slots<'a> {
    present: Vec<Option<super::trace::Sample>>,
    grid: &'a Grid,
}

impl<'a> Slots<'a> {
    fn of(trace: &Trace, grid: &'a Grid) -> Self {
        let mut present = vec![None; grid.slots];
        for s in &trace.samples {
            present[grid.slot(s.t)] = Some(*s);
        }
        Slots { present, grid }
    }

    /// A figure of each sample, missing where the trace has none.
    fn at(&self, f: &dyn Fn(&super::trace::Sample) -> f64) -> Vec<Slot> {
        self.present
            .iter()
            .map(|p| p.as_ref().map_or(Slot::Missing, |s| Slot::Value(f(s))))
            .collect()
    }

    /// `v` wherever the trace has a sample.
    fn constant(&self, v: f64) -> Vec<Slot> {
        self.at(&|_| v)
    }

    /// The daemon's forecast dates: each pass's until the next pass, gone (stale) when a pass
    /// has none. Shifted like every timestamp of the test.
    fn dated(
        &self,
        forecast: &[ForecastPoint],
        pick: &dyn Fn(&ForecastPoint) -> Option<i64>,
    ) -> Vec<Slot> {
        let grid = self.grid;
        let mut k = 0;
        let mut had = false;
        self.present
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.is_none() {
                    return Slot::Missing;
                }
                let t = grid.shift + i as i64 * grid.step;
                while k < forecast.len() && forecast[k].t <= t {
                    k += 1;
                }
                let v = k.checked_sub(1).and_then(|j| pick(&forecast[j]));
                match v {
                    Some(v) => {
                        had = true;
                        Slot::Value((v - grid.shift) as f64)
                    }
                    None if had => {
                        had = false;
                        Slot::Stale
                    }
                    None => Slot::Missing,
                }
            })
            .collect()
    }
}

fn series(selector: String, slots: Vec<Slot>) -> Series {
    Series { selector, slots }
}

/// The volume's selector under the daemon's or node_exporter's instance and job.
fn fs_selector(name: &str, instance: &str, job: &str, volume: &Volume, labels: &Labels) -> String {
    selector(
        name,
        &[
            ("instance", instance),
            ("job", job),
            ("mountpoint", &volume.mountpoint),
            ("device", &volume.device),
            ("fstype", &labels.fstype),
        ],
    )
}

/// The daemon's filesystem series: size, avail, free, and its health flags at 0.
fn filesystem_series(slots: &Slots, volume: &Volume, labels: &Labels) -> Vec<Series> {
    let ss_fs =
        |name: &str| fs_selector(name, &labels.ssdwatch_instance, "ssdwatch", volume, labels);
    vec![
        series(
            ss_fs(catalogue::FILESYSTEM_SIZE_BYTES.name),
            slots.at(&|s| s.size_bytes as f64),
        ),
        series(
            ss_fs(catalogue::FILESYSTEM_AVAIL_BYTES.name),
            slots.at(&|s| s.avail_bytes as f64),
        ),
        // No reserved blocks in a trace: free is avail.
        series(
            ss_fs(catalogue::FILESYSTEM_FREE_BYTES.name),
            slots.at(&|s| s.avail_bytes as f64),
        ),
        series(
            ss_fs(catalogue::FILESYSTEM_READONLY.name),
            slots.constant(0.0),
        ),
        series(ss_fs(catalogue::FILESYSTEM_STUCK.name), slots.constant(0.0)),
        series(
            ss_fs(catalogue::FILESYSTEM_DEVICE_ERROR.name),
            slots.constant(0.0),
        ),
    ]
}

/// The thresholds the daemon exports at its defaults, per severity.
fn threshold_series(slots: &Slots, volume: &Volume, labels: &Labels) -> Vec<Series> {
    let t = AlertThresholds::default();
    let mut out = Vec::new();
    for (sev, th) in [("warning", t.warning), ("critical", t.critical)] {
        let l = [
            ("instance", labels.ssdwatch_instance.as_str()),
            ("job", "ssdwatch"),
            ("mountpoint", volume.mountpoint.as_str()),
            ("severity", sev),
        ];
        out.push(series(
            selector(catalogue::FILESYSTEM_ALERT_THRESHOLD_RATIO.name, &l),
            slots.constant(th.used_ratio),
        ));
        out.push(series(
            selector(catalogue::FILESYSTEM_ALERT_THRESHOLD_AVAIL_BYTES.name, &l),
            slots.constant(th.avail_bytes as f64),
        ));
        out.push(series(
            selector(catalogue::FILESYSTEM_ALERT_THRESHOLD_FULL_SECONDS.name, &l),
            slots.constant(th.full_within.as_secs() as f64),
        ));
    }
    out
}

/// The daemon's forecast of the volume: the predicted full date and its two bounds.
fn forecast_series(
    slots: &Slots,
    forecast: &[ForecastPoint],
    volume: &Volume,
    labels: &Labels,
) -> Vec<Series> {
    let fc_labels = [
        ("instance", labels.ssdwatch_instance.as_str()),
        ("job", "ssdwatch"),
        ("mountpoint", volume.mountpoint.as_str()),
        ("device", volume.device.as_str()),
    ];
    let mut out = vec![series(
        selector(
            catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS.name,
            &fc_labels,
        ),
        slots.dated(forecast, &|p| p.predicted_full),
    )];
    for (bound, pick) in [
        (
            "earliest",
            (|p: &ForecastPoint| p.earliest) as fn(&ForecastPoint) -> Option<i64>,
        ),
        ("latest", |p: &ForecastPoint| p.latest),
    ] {
        let mut l = fc_labels.to_vec();
        l.push(("bound", bound));
        out.push(series(
            selector(
                catalogue::FILESYSTEM_PREDICTED_FULL_BOUND_TIMESTAMP_SECONDS.name,
                &l,
            ),
            slots.dated(forecast, &pick),
        ));
    }
    out
}

/// The daemon up, its filesystem and history collectors succeeding.
fn health_series(slots: &Slots, labels: &Labels) -> Vec<Series> {
    let mut out = Vec::new();
    for collector in ["filesystem", "history"] {
        out.push(series(
            selector(
                catalogue::COLLECTOR_SUCCESS.name,
                &[
                    ("instance", &labels.ssdwatch_instance),
                    ("job", "ssdwatch"),
                    ("collector", collector),
                ],
            ),
            slots.constant(1.0),
        ));
    }
    out.push(series(
        selector(
            "up",
            &[("instance", &labels.ssdwatch_instance), ("job", "ssdwatch")],
        ),
        slots.constant(1.0),
    ));
    out
}

/// node_exporter's names for the same volume, and it up.
fn node_series(slots: &Slots, volume: &Volume, labels: &Labels) -> Vec<Series> {
    let node_fs = |name: &str| fs_selector(name, &labels.node_instance, "node", volume, labels);
    vec![
        series(
            node_fs("node_filesystem_size_bytes"),
            slots.at(&|s| s.size_bytes as f64),
        ),
        series(
            node_fs("node_filesystem_avail_bytes"),
            slots.at(&|s| s.avail_bytes as f64),
        ),
        series(
            node_fs("node_filesystem_free_bytes"),
            slots.at(&|s| s.avail_bytes as f64),
        ),
        series(node_fs("node_filesystem_readonly"), slots.constant(0.0)),
        series(node_fs("node_filesystem_device_error"), slots.constant(0.0)),
        series(
            selector(
                "up",
                &[("instance", &labels.node_instance), ("job", "node")],
            ),
            slots.constant(1.0),
        ),
    ]
}

/// The check instants (relative to the grid's origin): every `every` seconds (a multiple of
/// the evaluation interval, so each is an evaluation) from the trace's start to its end.
pub(crate) fn checks(trace: &Trace, grid: &Grid, every: i64) -> Vec<i64> {
    let (from, to) = (trace.start() - grid.shift, trace.end() - grid.shift);
    let first = (from + every - 1).div_euclid(every) * every;
    (0..)
        .map(|k| first + k * every)
        .take_while(|c| *c <= to)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backtest::trace::{Sample, Trace};

    fn trace(ts: &[i64]) -> Trace {
        Trace {
            samples: ts
                .iter()
                .map(|&t| Sample {
                    t,
                    size_bytes: 100,
                    avail_bytes: 50,
                })
                .collect(),
        }
    }

    #[test]
    fn samples_land_on_the_grid_and_gaps_are_missing() {
        let day = DAY;
        let tr = trace(&[day + 120, day + 180, day + 240, day + 360]);
        let g = Grid::of(&tr).unwrap();
        assert_eq!((g.shift, g.step), (day, 60));
        let v = Volume {
            mountpoint: "/srv/db".into(),
            device: "sda1".into(),
        };
        let fc = [ForecastPoint {
            t: day + 170,
            predicted_full: Some(day + 1000),
            earliest: None,
            latest: None,
        }];
        let s = input_series(&tr, &fc, &v, &Labels::default(), &g);
        let size = &s[0];
        assert!(size.selector.starts_with("ssdwatch_filesystem_size_bytes{instance=\"backtest:10150\",job=\"ssdwatch\",mountpoint=\"/srv/db\""));
        assert_eq!(
            &size.slots[..7],
            &[
                Slot::Missing,
                Slot::Missing,
                Slot::Value(100.0),
                Slot::Value(100.0),
                Slot::Value(100.0),
                Slot::Missing,
                Slot::Value(100.0)
            ]
        );
        let pred = s
            .iter()
            .find(|x| {
                x.selector
                    .starts_with("ssdwatch_filesystem_predicted_full_timestamp")
            })
            .unwrap();
        assert_eq!(
            &pred.slots[2..7],
            &[
                Slot::Missing,
                Slot::Value(1000.0),
                Slot::Value(1000.0),
                Slot::Missing,
                Slot::Value(1000.0)
            ]
        );
        assert_eq!(checks(&tr, &g, 60), vec![120, 180, 240, 300, 360]);
        assert_eq!(checks(&tr, &g, 300), vec![300]);
        assert_eq!(checks(&tr, &g, 120), vec![120, 240, 360]);
    }
}
