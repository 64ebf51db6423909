//! Which forecasts are current as of a moment: the one rule that the daemon's forecast pass, the
//! OpenMetrics export and both reports share. It computes; it exports and renders nothing.

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

/// [`filesystem`] of a stored filesystem, reading only the days it needs.
pub fn stored_filesystem(
    store: &Store,
    fs: FsId,
    recent: &[(i64, f64)],
    now: i64,
) -> Result<Option<FsForecast>, StoreError> {
    let days = store.fs_days(fs, filesystem_first_day(now) * DAY, now)?;
    Ok(filesystem(&days, recent, now))
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
