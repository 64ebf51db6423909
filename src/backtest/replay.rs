//! The daemon's forecast, replayed over a trace: the samples go into a history store of their
//! own through the store's own writes, at the daemon's cadence (a commit every `flush_interval`,
//! downsampling and the forecast pass every hour), and each pass's date is kept. Nothing here
//! re-implements a forecast: it calls what the daemon's history thread calls
//! (`Store::record_fs`, `Store::downsample`, `current::stored_filesystem`).

use super::trace::Trace;
use crate::history::{FsKey, FsSample, HistoryConfig, Store, StoreError, current};
use serde::Serialize;
use std::path::Path;

/// One forecast pass: its instant and the dates it published (none: no series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ForecastPoint {
    pub t: i64,
    pub predicted_full: Option<i64>,
    pub earliest: Option<i64>,
    pub latest: Option<i64>,
}

/// Where the replayed volume is mounted, as its series are labelled.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    pub mountpoint: String,
    pub device: String,
}

/// Replays `trace` into a new store under `state_dir` (which must not hold one) with the
/// daemon's default history settings; returns every hourly forecast pass, in order.
pub(crate) fn replay(
    trace: &Trace,
    volume: &Volume,
    state_dir: &Path,
) -> Result<Vec<ForecastPoint>, StoreError> {
    let cfg = HistoryConfig::default();
    let mut store = Store::open(state_dir, &cfg)?;
    let key = FsKey {
        mountpoint: volume.mountpoint.clone(),
        uuid: Some("backtest".into()),
    };
    let flush = cfg.flush_interval.as_secs().max(1) as i64;
    let pass_every = cfg.forecast_interval.as_secs().max(60) as i64;
    let start = trace.start();
    // The daemon's timers run from its start: commits every flush_interval, maintenance and the
    // forecast every hour (the forecast right after that hour's commit).
    let mut next_flush = start + flush;
    let mut next_pass = start + pass_every;
    let mut pending: Vec<FsSample> = Vec::new();
    let mut out = Vec::new();
    let mut id = None;
    let samples = &trace.samples;
    let end = trace.end();
    let mut i = 0;
    loop {
        let next_event = next_flush.min(next_pass);
        while i < samples.len() && samples[i].t <= next_event {
            let s = samples[i];
            // free = avail: a trace has no reserved blocks; the forecast reads size and avail.
            pending.push(FsSample {
                key: key.clone(),
                device: volume.device.clone(),
                t: s.t,
                size_bytes: s.size_bytes,
                avail_bytes: s.avail_bytes,
                free_bytes: s.avail_bytes,
                files_free: None,
            });
            i += 1;
        }
        if next_event > end {
            break;
        }
        if next_event == next_flush {
            store.record_fs(pending.iter())?;
            pending.clear();
            next_flush += flush;
        }
        if next_event == next_pass {
            // Maintenance runs hourly in the daemon, as the forecast does at its defaults.
            store.downsample(next_pass)?;
            if id.is_none() {
                id = store.fs_id_of(&key)?;
            }
            let fc = match id {
                Some(id) => {
                    // The last hours too, for the runaway leg, as the daemon's pass reads them.
                    let recent = current::recent_use(&store, &[id], next_pass)?;
                    let r = recent.get(&id).map_or(&[][..], Vec::as_slice);
                    current::stored_filesystem(&store, id, r, next_pass)?
                }
                None => None,
            };
            out.push(ForecastPoint {
                t: next_pass,
                predicted_full: fc.as_ref().and_then(|f| f.predicted_full_unix),
                earliest: fc.as_ref().and_then(|f| f.full_earliest_unix),
                latest: fc.as_ref().and_then(|f| f.full_latest_unix),
            });
            next_pass += pass_every;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backtest::trace::Sample;

    /// Steady growth of 1 % of the size a day for 30 days, from half full: the replayed
    /// daemon dates it once it has a week of days, and the date is the line's.
    #[test]
    fn a_steady_fill_is_dated_by_the_replayed_daemon() {
        let size: u64 = 1 << 40;
        let t0 = 1_767_225_600; // 2026-01-01
        let samples = (0..30 * 288)
            .map(|k| {
                let t = t0 + k * 300;
                let used = size / 2 + (size as f64 * 0.01 * (k as f64 / 288.0)) as u64;
                Sample {
                    t,
                    size_bytes: size,
                    avail_bytes: size - used,
                }
            })
            .collect();
        let trace = Trace { samples };
        let dir = tempfile::tempdir().unwrap();
        let v = Volume {
            mountpoint: "/srv/db".into(),
            device: "sda1".into(),
        };
        let f = replay(&trace, &v, dir.path()).unwrap();
        assert_eq!(f.len(), 30 * 24 - 1, "a pass an hour");
        assert_eq!(f[0].t, t0 + 3600);
        assert!(f[0].predicted_full.is_none(), "{:?}", f[0]);
        let last = f.last().unwrap();
        let truth = t0 + 50 * 86_400;
        let date = last.predicted_full.expect("dated");
        assert!((date - truth).abs() < 2 * 86_400, "{date} vs {truth}");
        assert!(last.earliest.unwrap() <= date);
    }
}
