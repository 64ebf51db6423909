//! Which forecasts are current as of a moment: the one rule that the daemon's forecast pass, the
//! OpenMetrics export and both reports share. It computes; it exports and renders nothing.
//!
//! A mount is full when the first of its layers is: a thin pool shared with other volumes, a
//! ZFS pool, btrfs's unallocated space can run out while the filesystem on them shows room. So
//! a mount's date is the earliest of its own and its layers' ([`earliest_of`]), each forecast by
//! the same code from its own history.

use super::forecast::{
    DayUse, DriveForecast, Endurance, FsForecast, RUNAWAY_WINDOW_SECONDS, forecast_drive,
    forecast_filesystem_days, with_runaway,
};
use super::{DrivePoint, FsId, Store, StoreError};
use crate::time::DAY;
use std::collections::{BTreeMap, HashMap};

/// A filesystem or drive not seen for this long has no forecast: a mount point that went away,
/// or a drive that was pulled, has no future.
pub const STALE_SECONDS: i64 = 2 * DAY;

/// How many days back a filesystem's forecast reads (its trend since the last big drop within
/// them). A drive's reads its whole history: wear moves slowly.
pub const FILESYSTEM_DAYS: i64 = 60;

/// Whether a series last seen at `last_seen` still gets a forecast at `now`.
pub fn seen_recently(last_seen: Option<i64>, now: i64) -> bool {
    last_seen.is_some_and(|t| t >= now - STALE_SECONDS)
}

/// The first UTC day a filesystem forecast as of `now` reads.
pub fn filesystem_first_day(now: i64) -> i64 {
    (now - FILESYSTEM_DAYS * DAY).div_euclid(DAY)
}

/// The filesystem's forecast as of `now` from its daily use (in day order; days before
/// [`filesystem_first_day`] are left out), or `None` when it was not seen in the last
/// [`STALE_SECONDS`].
///
/// `recent` are its raw points of the last hours as (time, used bytes), in time order: the
/// runaway leg ([`with_runaway`]) dates a volume climbing past anything its last two weeks
/// held from them.
pub fn filesystem(days: &[DayUse], recent: &[(i64, f64)], now: i64) -> Option<FsForecast> {
    let first = filesystem_first_day(now);
    let days = &days[days.partition_point(|d| d.day < first)..];
    seen_recently(days.last().map(|d| d.day * DAY), now)
        .then(|| with_runaway(forecast_filesystem_days(days, now), days, recent, now))
}

/// The raw points of the last [`RUNAWAY_WINDOW_SECONDS`] of every filesystem in `ids`, as
/// (time, used bytes): what [`filesystem`]'s runaway leg reads, in one pass over the store.
pub fn recent_use(
    store: &Store,
    ids: &[FsId],
    now: i64,
) -> Result<HashMap<FsId, Vec<(i64, f64)>>, StoreError> {
    let from: BTreeMap<FsId, i64> = ids
        .iter()
        .map(|&id| (id, now - RUNAWAY_WINDOW_SECONDS))
        .collect();
    let mut out: HashMap<FsId, Vec<(i64, f64)>> = HashMap::new();
    store.fs_series_each(&from, now, |id, p| {
        if !p.hourly {
            out.entry(id)
                .or_default()
                .push((p.t, p.size.last - p.avail.last));
        }
    })?;
    Ok(out)
}

/// [`filesystem`] of a stored filesystem, reading only the days it needs, with the date of
/// the earliest of its layers ([`with_layers`]).
pub fn stored_filesystem(
    store: &Store,
    fs: FsId,
    recent: &[(i64, f64)],
    now: i64,
) -> Result<Option<FsForecast>, StoreError> {
    let days = store.fs_days(fs, filesystem_first_day(now) * DAY, now)?;
    filesystem(&days, recent, now)
        .map(|fc| with_layers(store, fs, fc, now))
        .transpose()
}

/// `fc`, the forecast of filesystem `fs` as of `now`, made the mount's: each layer below it
/// the store has a history of is forecast as a filesystem is ([`filesystem`]: the long-term
/// leg from its days, the runaway leg from its raw points), and the earliest date wins
/// ([`earliest_of`]). A layer not seen lately has no forecast and no say.
pub fn with_layers(
    store: &Store,
    fs: FsId,
    fc: FsForecast,
    now: i64,
) -> Result<FsForecast, StoreError> {
    let layers = store.layer_uses(
        fs,
        filesystem_first_day(now) * DAY,
        now - RUNAWAY_WINDOW_SECONDS,
        now,
    )?;
    Ok(earliest_of(
        fc,
        layers
            .into_iter()
            .filter_map(|l| filesystem(&l.days, &l.recent, now).map(|f| (l.layer, l.name, f))),
    ))
}

/// The mount's forecast from its filesystem's (`fs`) and its layers' (`(layer, name,
/// forecast)`): the earliest predicted-full date of them all, with `full_layer` naming the
/// layer when it is one. The band is the mount's: its earliest the earliest of any, its latest
/// the earliest of the latest dates (the mount is full when the first layer is; a layer with
/// no latest date bounds nothing). The growth figures and the used bytes stay the
/// filesystem's: they describe what its users write, and the fill it dates
/// ([`super::slow::fill_reached_unix`]) is its own.
pub fn earliest_of(
    fs: FsForecast,
    layers: impl IntoIterator<Item = (String, String, FsForecast)>,
) -> FsForecast {
    let mut out = fs;
    let mut earliest = out.full_earliest_unix;
    let mut latest = out.full_latest_unix;
    let min = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    for (layer, name, f) in layers {
        let Some(date) = f.predicted_full_unix else {
            continue;
        };
        earliest = min(earliest, f.full_earliest_unix.or(Some(date)));
        latest = min(latest, f.full_latest_unix);
        if out.predicted_full_unix.is_none_or(|d| date < d) {
            out.predicted_full_unix = Some(date);
            out.runaway_bytes_per_day = f.runaway_bytes_per_day;
            out.full_layer = Some((layer, name));
        }
    }
    if let Some(d) = out.predicted_full_unix {
        out.full_earliest_unix = earliest.map(|e| e.min(d));
        out.full_latest_unix = latest.map(|l| l.max(d));
    }
    out
}

/// The drive's forecast as of `now` from its points (in time order), or `None` when it was not
/// seen in the last [`STALE_SECONDS`].
pub fn drive(
    points: &[DrivePoint],
    now: i64,
    endurance: Option<Endurance>,
) -> Option<DriveForecast> {
    seen_recently(points.last().map(|p| p.t), now).then(|| forecast_drive(points, now, endurance))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_083_200; // 2026-12-01

    fn dated(full: i64, earliest: i64, latest: Option<i64>) -> FsForecast {
        FsForecast {
            growth_30d_bytes_per_day: Some(10e9),
            predicted_full_unix: Some(full),
            full_earliest_unix: Some(earliest),
            full_latest_unix: latest,
            top_now_bytes: Some(900e9),
            size_bytes: Some(1e12),
            ..FsForecast::default()
        }
    }

    fn pool(fc: FsForecast) -> (String, String, FsForecast) {
        ("thin_pool".into(), "vg0-pool-tpool".into(), fc)
    }

    #[test]
    fn a_thin_pool_that_runs_out_before_its_filesystem_gives_the_mounts_date() {
        let fs = dated(NOW + 10 * DAY, NOW + 9 * DAY, Some(NOW + 11 * DAY));
        let out = earliest_of(
            fs.clone(),
            [pool(dated(
                NOW + 4 * DAY,
                NOW + 3 * DAY,
                Some(NOW + 5 * DAY),
            ))],
        );
        assert_eq!(out.predicted_full_unix, Some(NOW + 4 * DAY));
        assert_eq!(out.full_earliest_unix, Some(NOW + 3 * DAY));
        assert_eq!(out.full_latest_unix, Some(NOW + 5 * DAY));
        assert_eq!(
            out.full_layer,
            Some(("thin_pool".into(), "vg0-pool-tpool".into()))
        );
        // What its users write and what it holds stay the filesystem's.
        assert_eq!(out.growth_30d_bytes_per_day, fs.growth_30d_bytes_per_day);
        assert_eq!(out.top_now_bytes, fs.top_now_bytes);
        assert_eq!(out.size_bytes, fs.size_bytes);
    }

    #[test]
    fn a_layer_that_runs_out_later_leaves_the_date_but_bounds_the_band() {
        let fs = dated(NOW + 10 * DAY, NOW + 8 * DAY, None);
        // The pool's central date is later, but it may run out sooner than the filesystem's
        // earliest, and it is full by its latest whatever the filesystem does.
        let out = earliest_of(
            fs,
            [pool(dated(
                NOW + 12 * DAY,
                NOW + 7 * DAY,
                Some(NOW + 20 * DAY),
            ))],
        );
        assert_eq!(out.predicted_full_unix, Some(NOW + 10 * DAY));
        assert_eq!(out.full_layer, None);
        assert_eq!(out.full_earliest_unix, Some(NOW + 7 * DAY));
        assert_eq!(out.full_latest_unix, Some(NOW + 20 * DAY));
    }

    #[test]
    fn a_filesystem_without_a_date_takes_its_layers_and_layers_without_one_say_nothing() {
        let flat = FsForecast {
            growth_30d_bytes_per_day: Some(0.0),
            size_bytes: Some(1e12),
            ..FsForecast::default()
        };
        let out = earliest_of(flat.clone(), [pool(flat.clone())]);
        assert_eq!(out, flat);
        let mut runaway = dated(NOW + DAY / 2, NOW + DAY / 3, None);
        runaway.runaway_bytes_per_day = Some(80e9);
        let out = earliest_of(
            flat,
            [
                (
                    "zfs_pool".into(),
                    "tank".into(),
                    dated(NOW + 30 * DAY, NOW + 25 * DAY, None),
                ),
                pool(runaway),
            ],
        );
        assert_eq!(out.predicted_full_unix, Some(NOW + DAY / 2));
        assert_eq!(out.full_earliest_unix, Some(NOW + DAY / 3));
        assert_eq!(out.full_latest_unix, None);
        assert_eq!(out.runaway_bytes_per_day, Some(80e9));
        assert_eq!(out.full_layer.map(|l| l.0), Some("thin_pool".into()));
    }

    #[test]
    fn of_two_layers_the_one_that_runs_out_first_is_named() {
        let fs = dated(NOW + 10 * DAY, NOW + 9 * DAY, Some(NOW + 11 * DAY));
        let out = earliest_of(
            fs,
            [
                (
                    "zfs_dataset".into(),
                    "tank/db".into(),
                    dated(NOW + 6 * DAY, NOW + 5 * DAY, Some(NOW + 8 * DAY)),
                ),
                (
                    "zfs_pool".into(),
                    "tank".into(),
                    dated(NOW + 3 * DAY, NOW + 2 * DAY, Some(NOW + 9 * DAY)),
                ),
            ],
        );
        assert_eq!(out.predicted_full_unix, Some(NOW + 3 * DAY));
        assert_eq!(out.full_layer, Some(("zfs_pool".into(), "tank".into())));
        assert_eq!(out.full_earliest_unix, Some(NOW + 2 * DAY));
        // Full by the dataset's latest, whatever the pool does.
        assert_eq!(out.full_latest_unix, Some(NOW + 8 * DAY));
    }
}
