//! Forecasts from history series: filesystem growth and when it fills, drive wear rate and
//! wear-out, host writes, write amplification and rated endurance. Pure functions of the
//! points they are given and `now`: no SQL, no clock.
//!
//! ## Filesystems: Theil–Sen over a 7-day low envelope, since the last big drop
//! A database filesystem's usage is not a line: WAL and logs grow and are rotated or vacuumed
//! (a sawtooth), bulk loads start and stop, and a big `DROP`/`DELETE` moves the level down once.
//! What fills the disk is the floor under the sawtooth rising, so:
//! 1. Each UTC day gives its low point (min of used) and high point (max of used); used is
//!    `size - avail`, so "full" means nothing left for unprivileged writers.
//! 2. A day whose low falls below every low of the 14 days before it by more than 5% of the
//!    size is a big drop: the trend restarts there. A sawtooth's trough never undercuts the
//!    troughs before it unless the floor itself shrinks, so rotation is not taken for a drop.
//! 3. A running 7-day minimum of the lows (the envelope) turns a weekly sawtooth into a
//!    staircase with the floor's slope; on a plain line it is the line, 6 days late. Only
//!    days with 7 days of the trend behind them count (after a restart the first days would
//!    read as flat); until 7 such days exist, the lows themselves are fitted.
//! 4. Theil–Sen (the median of all pairwise slopes) fits the envelope: it ignores up to ~29%
//!    of outlying points, where least squares is pulled by every rotation and by the end of a
//!    bulk load. The growth figures are its slopes over the last 7 days (lows) and 30 days
//!    (envelope); with fewer than 4 or 7 days since the trend start there is no figure.
//! 5. A date is predicted only when the envelope still rises over the last 14 days (a bulk
//!    load that ended is flat) by at least 1e-5 of the size a day, from the fitted floor now
//!    plus the largest excursion above it in the last 7 days (the sawtooth's teeth fill the
//!    disk first), and only within 10 years: flat or shrinking usage has no date, never one in
//!    the past and never year 9999.
//!
//! ## Drives: least squares over a recent window that widens until the counter has moved
//! SMART's percentage used moves in whole percent steps, where Theil–Sen on a few weeks sees
//! mostly flat pairs and answers 0. Least squares over the daily values of a window is the
//! better fit for a monotone, noise-free staircase, provided the window holds several steps:
//! it starts at 60 days and doubles until the value has taken at least 4 levels. Acceleration
//! (wear speeding up as a drive ages or its workload grows) is followed because only that
//! recent window is fitted, so the date moves earlier as the rate rises; the acceleration
//! itself is not extrapolated (a curve fitted to a few 1% steps would be noise).
//!
//! ## Bands: earliest and latest dates from the slope's confidence interval
//! Theil–Sen comes with a distribution-free interval for its slope (Sen 1968): of the N
//! pairwise slopes of n points, sorted, the interval runs from the slope of rank (N − C)/2 to
//! that of rank (N + C)/2, where C = z·√(n(n−1)(2n+5)/18) and z = 1.96 (95 %); see
//! [`theil_sen_band`]. A filesystem's earliest full date divides its headroom by the upper
//! slope, its latest by the lower one (none when the lower slope is not growth: "not in
//! sight"). A drive's wear-out band takes the same interval over the window its least-squares
//! rate is fitted on (thinned to 64 evenly spaced days: n² slopes of a years-long window would
//! cost tens of milliseconds a pass), widened if need be to contain that rate. The points are daily and
//! serially correlated (an envelope is a running minimum), so the interval is narrower than a
//! calibrated 95 % would be: read it as the spread the recent days allow, not a guarantee.

use super::record::{DrivePoint, FsPoint};
use crate::time::{DAY, DAY_F64, HOUR};

/// Predictions beyond this many days are "not in sight" (no date).
pub const HORIZON_DAYS: f64 = 3652.5;

/// Median of pairwise slopes and the median intercept; `None` with fewer than 2 distinct xs.
pub fn theil_sen(xs: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    let mut slopes = Vec::with_capacity(xs.len() * xs.len() / 2);
    for i in 0..xs.len() {
        for j in i + 1..xs.len() {
            let dx = xs[j] - xs[i];
            if dx != 0.0 {
                slopes.push((ys[j] - ys[i]) / dx);
            }
        }
    }
    let slope = median(&mut slopes)?;
    let mut icepts: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| y - slope * x).collect();
    Some((slope, median(&mut icepts)?))
}

/// A slope's confidence interval: (lower, upper).
pub type SlopeBand = (f64, f64);

/// The normal quantile of a two-sided 95 % interval.
const BAND_Z: f64 = 1.96;

/// Sen's confidence interval of the Theil–Sen slope, `(lower, upper)`: the pairwise slopes of
/// ranks (N − C)/2 and (N + C)/2 (rounded outwards), C = z·√(n(n−1)(2n+5)/18), z = 1.96.
/// `None` with fewer than 3 points or no pair of distinct xs. O(n² log n): a 30-day window is
/// 435 slopes.
pub fn theil_sen_band(xs: &[f64], ys: &[f64]) -> Option<SlopeBand> {
    let n = xs.len();
    if n < 3 {
        return None;
    }
    let mut slopes = Vec::with_capacity(n * n / 2);
    for i in 0..n {
        for j in i + 1..n {
            let dx = xs[j] - xs[i];
            if dx != 0.0 {
                slopes.push((ys[j] - ys[i]) / dx);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let big_n = slopes.len() as f64;
    let nf = n as f64;
    let c = BAND_Z * (nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0).sqrt();
    // Ranks are 1-based in Sen's formula; the index is the rank minus one.
    let lo = ((((big_n - c) / 2.0).floor() - 1.0).max(0.0) as usize).min(slopes.len() - 1);
    let hi = (((big_n + c) / 2.0).ceil()).min(big_n) as usize - 1;
    // Two selections instead of a sort: linear in the number of slopes.
    let (_, &mut upper, _) = slopes.select_nth_unstable_by(hi, f64::total_cmp);
    let (_, &mut lower, _) = slopes[..=hi].select_nth_unstable_by(lo, f64::total_cmp);
    Some((lower, upper))
}

/// At most this many points go into a band: Sen's interval costs n² slopes, and a drive's wear
/// window can hold years of days.
pub const BAND_MAX_POINTS: usize = 64;

/// `points` thinned to at most [`BAND_MAX_POINTS`], evenly by index, the first and the last
/// kept: fewer points give a wider (more cautious) interval, never a narrower one.
pub fn band_points(points: &[(f64, f64)]) -> (Vec<f64>, Vec<f64>) {
    let n = points.len();
    if n <= BAND_MAX_POINTS {
        return points.iter().copied().unzip();
    }
    (0..BAND_MAX_POINTS)
        .map(|i| points[i * (n - 1) / (BAND_MAX_POINTS - 1)])
        .unzip()
}

/// Ordinary least squares: slope and intercept; `None` with fewer than 2 distinct xs.
pub fn least_squares(xs: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return None;
    }
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// `now + days`, to the nearest second, or `None` when not finite, negative or beyond the
/// horizon. Rounded, not truncated: the same line asked at two moments gives the same date,
/// where `now + days` lands a hair either side of a whole second (a fit's exact crossing, as on
/// data sampled every 5 minutes) and truncation would flip it by a second.
fn date_in(now: i64, days: f64) -> Option<i64> {
    (days.is_finite() && (0.0..=HORIZON_DAYS).contains(&days))
        .then(|| now.saturating_add((days * DAY_F64).round() as i64))
}

/// One UTC day of a filesystem: low and high of used bytes, and the size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DayUse {
    pub day: i64,
    pub low: f64,
    pub high: f64,
    pub size: f64,
}

/// Daily low and high of used (`size - avail`) from raw and hourly points, in day order.
pub fn daily_use(points: &[FsPoint]) -> Vec<DayUse> {
    let mut out: Vec<DayUse> = Vec::new();
    for p in points {
        let day = p.t.div_euclid(DAY);
        let low = p.size.last - p.avail.max;
        let high = p.size.last - p.avail.min;
        match out.last_mut() {
            Some(d) if d.day == day => {
                d.low = d.low.min(low);
                d.high = d.high.max(high);
                d.size = p.size.last;
            }
            _ => out.push(DayUse {
                day,
                low,
                high,
                size: p.size.last,
            }),
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct FsForecast {
    /// Growth of the daily lows over the last 7 days (Theil–Sen), bytes a day.
    pub growth_7d_bytes_per_day: Option<f64>,
    /// Growth of the 7-day low envelope over the last 30 days (Theil–Sen), bytes a day.
    pub growth_30d_bytes_per_day: Option<f64>,
    /// When avail is predicted to reach 0 (Unix seconds); `None` when not growing or beyond
    /// 10 years.
    pub predicted_full_unix: Option<i64>,
    /// Start of the day the trend starts at (after the last big drop).
    pub trend_since_unix: Option<i64>,
    /// The band around `predicted_full_unix` from the slope's confidence interval: the
    /// earliest date (upper slope), only when there is a predicted date.
    pub full_earliest_unix: Option<i64>,
    /// The latest date (lower slope); `None` when the lower slope is not growth or beyond 10
    /// years, although `predicted_full_unix` has a date.
    pub full_latest_unix: Option<i64>,
    /// Used bytes the forecast counts from now: the fitted floor plus the last week's largest
    /// excursion above it; only with a predicted date (what dates any other fill too).
    pub top_now_bytes: Option<f64>,
    /// The filesystem's size at its last day.
    pub size_bytes: Option<f64>,
    /// A runaway: the fill rate of the last hours (bytes a day) where the volume climbs past
    /// anything its last two weeks held and fills within a week at that rate; the date is then
    /// the earlier of the two legs.
    pub runaway_bytes_per_day: Option<f64>,
    /// The layer below the filesystem whose date this is, when one runs out before it (the
    /// mount's date is the earliest of its layers': `current::earliest_of`): its `layer`
    /// label's value (`thin_pool`, `zfs_pool`, ...) and its name.
    pub full_layer: Option<(String, String)>,
}

/// How far a day's low may rise above the day before's, as a share of the size, before the
/// rise counts as a new level (a bulk load, a restore) rather than growth: one day of growth
/// that fast fills a volume from half full in five days, which the runaway leg dates anyway.
const STEP_UP_RATIO: f64 = 0.10;

/// The index of the first day of the current trend: after the last big drop, or after the last
/// step up (a day whose low is above the day before's by [`STEP_UP_RATIO`] of the size). A
/// step is a level, not a slope: fitted across, a bulk load that ended reads as growth for
/// weeks after it (a 300 GB load on 1 TB dated the volume full 12 days later, two weeks after
/// the load had stopped).
fn trend_start(days: &[DayUse]) -> usize {
    let mut start = 0;
    for i in 1..days.len() {
        let from = i.saturating_sub(14).max(start);
        let prior = days[from..i]
            .iter()
            .map(|d| d.low)
            .fold(f64::INFINITY, f64::min);
        let dropped = days[i].low < prior - 0.05 * days[i].size;
        let stepped = days[i].low > days[i - 1].low + STEP_UP_RATIO * days[i].size;
        if dropped || stepped {
            start = i;
        }
    }
    start
}

/// Running minimum of the lows over the 7 days ending at each day, for days with 7 days of
/// the trend behind them (a trend's first days would read as flat); when fewer than 7 days
/// have that, the lows themselves.
fn envelope(days: &[DayUse]) -> (Vec<DayUse>, Vec<f64>) {
    let full: Vec<(DayUse, f64)> = (0..days.len())
        .filter(|&i| days[i].day - days[0].day >= 6)
        .map(|i| {
            let low = days[..=i]
                .iter()
                .rev()
                .take_while(|d| d.day > days[i].day - 7)
                .map(|d| d.low)
                .fold(f64::INFINITY, f64::min);
            (days[i], low)
        })
        .collect();
    if full.len() >= 7 {
        full.into_iter().unzip()
    } else {
        (days.to_vec(), days.iter().map(|d| d.low).collect())
    }
}

/// Theil–Sen of `ys` over the days within `window` days before `today`, if at least `min` days.
fn slope_over(days: &[DayUse], ys: &[f64], today: i64, window: i64, min: usize) -> Option<f64> {
    let (xs, ys): (Vec<f64>, Vec<f64>) = days
        .iter()
        .zip(ys)
        .filter(|(d, _)| d.day > today - window)
        .map(|(d, y)| (d.day as f64, *y))
        .unzip();
    (xs.len() >= min).then(|| theil_sen(&xs, &ys).map(|f| f.0))?
}

/// Growth and predicted full date of one filesystem from its points (raw and hourly, in time
/// order), as of `now`. Only the last 60 days are used; pass at least those. (The daemon and
/// the report read the store's daily rows and call [`forecast_filesystem_days`].)
#[cfg(test)]
pub fn forecast_filesystem(points: &[FsPoint], now: i64) -> FsForecast {
    forecast_filesystem_days(&daily_use(points), now)
}

/// [`forecast_filesystem`] from daily lows and highs (as [`daily_use`] or the store's
/// `fs_days` give them, in day order).
pub fn forecast_filesystem_days(days: &[DayUse], now: i64) -> FsForecast {
    let all = days.to_vec();
    let today = now.div_euclid(DAY);
    let all: Vec<DayUse> = all
        .into_iter()
        .filter(|d| d.day <= today && d.day > today - 60)
        .collect();
    if all.is_empty() {
        return FsForecast::default();
    }
    let days = &all[trend_start(&all)..];
    let lows: Vec<f64> = days.iter().map(|d| d.low).collect();
    let (env_days, env) = envelope(days);
    let growth_7d = slope_over(days, &lows, today, 7, 4);
    let growth_30d = slope_over(&env_days, &env, today, 30, 7);
    let size = days[days.len() - 1].size;
    let min_slope = size * 1e-5;
    let recent = slope_over(&env_days, &env, today, 14, 7);
    let predicted_full = match (growth_30d, recent) {
        (Some(slope), Some(r)) if slope >= min_slope && r >= min_slope => {
            let in_window: Vec<(f64, f64)> = env_days
                .iter()
                .zip(&env)
                .filter(|(d, _)| d.day > today - 30)
                .map(|(d, e)| (d.day as f64, *e))
                .collect();
            let mut icepts: Vec<f64> = in_window.iter().map(|(x, y)| y - slope * x).collect();
            let icept = median(&mut icepts).unwrap_or(0.0);
            let floor_at = |day: f64| icept + slope * day;
            // A day's high is reached by its end: measured against the floor then, a straight
            // line has no excursion (against the day's start it had a whole day's growth, and
            // every date came a day early).
            let excursion = days
                .iter()
                .filter(|d| d.day > today - 7)
                .map(|d| d.high - floor_at((d.day + 1) as f64))
                .fold(0.0, f64::max);
            let now_days = now as f64 / DAY_F64;
            let headroom = (size - floor_at(now_days) - excursion).max(0.0);
            let (xs, ys): (Vec<f64>, Vec<f64>) = in_window.into_iter().unzip();
            let band = theil_sen_band(&xs, &ys);
            let date = date_in(now, headroom / slope);
            // The band: the slope's interval, widened by the floor's own scatter around its
            // line (1.96 standard deviations of the envelope's residuals, in days of growth)
            // and by an hour at least (the passes are an hour apart).
            let resid: Vec<f64> = xs.iter().zip(&ys).map(|(x, y)| y - floor_at(*x)).collect();
            let sd = (resid.iter().map(|r| r * r).sum::<f64>() / resid.len().max(1) as f64).sqrt();
            let margin = ((BAND_Z * sd / slope) * DAY_F64).max(HOUR as f64) as i64;
            date.map(|d| {
                let (lo, hi) = band.unwrap_or((slope, slope));
                let earliest = date_in(now, headroom / hi.max(slope))
                    .map_or(d, |e| e.min(d))
                    .min(d - margin)
                    .max(now);
                let latest = (lo >= min_slope)
                    .then(|| date_in(now, headroom / lo.min(slope)))
                    .flatten()
                    .map(|l| l.max(d + margin));
                (d, earliest, latest, size - headroom)
            })
        }
        _ => None,
    };
    FsForecast {
        growth_7d_bytes_per_day: growth_7d,
        growth_30d_bytes_per_day: growth_30d,
        predicted_full_unix: predicted_full.map(|p| p.0),
        trend_since_unix: Some(days[0].day * DAY),
        full_earliest_unix: predicted_full.map(|p| p.1),
        full_latest_unix: predicted_full.and_then(|p| p.2),
        top_now_bytes: predicted_full.map(|p| p.3),
        size_bytes: Some(size),
        runaway_bytes_per_day: None,
        full_layer: None,
    }
}

/// How far back the runaway leg looks at raw points.
pub const RUNAWAY_WINDOW_SECONDS: i64 = 6 * HOUR;
/// A runaway that would take longer than this to fill the volume is the long-term leg's.
const RUNAWAY_MAX_DAYS: f64 = 7.0;
/// The runaway must still be climbing over this last stretch of its points.
const RUNAWAY_STILL_CLIMBING_SECONDS: i64 = HOUR;
/// How much faster than the long-term leg's 7-day growth the climb must be: a volume growing
/// steadily also climbs past everything its last two weeks held, and is the long-term leg's
/// (its last hours' rate, the daily cycle in it, would move its date with the time of day).
const RUNAWAY_OVER_TREND: f64 = 2.0;
/// How far above the last two weeks' highest use the volume must be: a recurring peak (a
/// weekly dump, a nightly batch) climbs to where it has been before and is not a runaway.
const RUNAWAY_MARGIN_RATIO: f64 = 0.02;

/// The short-term leg: from the last [`RUNAWAY_WINDOW_SECONDS`] of `recent` points (time, used
/// bytes, in time order) of a volume of `size` bytes whose earlier days are `days`. A runaway
/// when the latest use is above every high of the 14 days before today by
/// [`RUNAWAY_MARGIN_RATIO`] of the size, rising, and full within [`RUNAWAY_MAX_DAYS`] at the
/// Theil–Sen rate of those points: (rate a day, full date, earliest, latest) from the rate's
/// 95 % interval.
pub fn runaway(
    days: &[DayUse],
    recent: &[(i64, f64)],
    size: f64,
    now: i64,
) -> Option<(f64, i64, i64, Option<i64>)> {
    let recent: Vec<(i64, f64)> = recent
        .iter()
        .copied()
        .filter(|(t, _)| *t > now - RUNAWAY_WINDOW_SECONDS && *t <= now)
        .collect();
    let today = now.div_euclid(DAY);
    let earlier: Vec<&DayUse> = days
        .iter()
        .filter(|d| d.day < today && d.day >= today - 14)
        .collect();
    // Without two days before today nothing says what the volume's range is: a new host's
    // first climb is as likely its daily batch as a runaway.
    if earlier.len() < 2 {
        return None;
    }
    let before = earlier
        .iter()
        .map(|d| d.high)
        .fold(f64::NEG_INFINITY, f64::max);
    // The climb since the volume left the range it held: a rate over hours that mix the flat
    // part in would be too slow.
    let from = recent.iter().rposition(|(_, u)| *u <= before).unwrap_or(0);
    let recent = &recent[from..];
    let (&(t0, _), &(t1, used)) = (recent.first()?, recent.last()?);
    if recent.len() < 6 || t1 - t0 < 1800 || size <= 0.0 {
        return None;
    }
    if used <= before + RUNAWAY_MARGIN_RATIO * size {
        return None;
    }
    let pts: Vec<(f64, f64)> = recent
        .iter()
        .map(|(t, u)| ((t - t0) as f64 / DAY_F64, *u))
        .collect();
    let (xs, ys) = band_points(&pts);
    let (rate, _) = theil_sen(&xs, &ys)?;
    if rate <= 0.0 {
        return None;
    }
    // Still climbing: the last hour rises at half the climb's rate or more. A bulk load or a
    // dump that stopped an hour ago is no runaway, however fast it was (its rate over the
    // climb would date the volume full for hours after it ended).
    let last_hour: Vec<(f64, f64)> = pts
        .iter()
        .copied()
        .filter(|(x, _)| *x >= (t1 - t0 - RUNAWAY_STILL_CLIMBING_SECONDS) as f64 / DAY_F64)
        .collect();
    let (hx, hy) = band_points(&last_hour);
    if hx.len() < 3 || theil_sen(&hx, &hy).is_none_or(|(r, _)| r < 0.5 * rate) {
        return None;
    }
    let left = (size - used).max(0.0);
    let days_left = left / rate;
    if days_left > RUNAWAY_MAX_DAYS {
        return None;
    }
    // Counted from the last point, not from `now`: the date of a climb that has not moved
    // since stays where it was (an export and a report a minute apart agree), never earlier
    // than now.
    let at = |r: f64| date_in(t1, left / r).map(|d| d.max(now));
    let full = at(rate)?;
    let (lo, hi) = theil_sen_band(&xs, &ys).unwrap_or((rate, rate));
    let earliest = at(hi.max(rate)).map_or(full, |e| e.min(full));
    let latest = (lo > 0.0).then(|| at(lo.min(rate))).flatten();
    Some((rate, full, earliest, latest))
}

/// `fc` with the runaway leg applied: its date and band where it is earlier than the long-term
/// leg's (or the long-term leg has none).
pub fn with_runaway(
    mut fc: FsForecast,
    days: &[DayUse],
    recent: &[(i64, f64)],
    now: i64,
) -> FsForecast {
    let Some(size) = fc.size_bytes else {
        return fc;
    };
    let Some((rate, full, earliest, latest)) = runaway(days, recent, size, now) else {
        return fc;
    };
    if fc
        .growth_7d_bytes_per_day
        .is_some_and(|g| g > 0.0 && rate < RUNAWAY_OVER_TREND * g)
    {
        return fc;
    }
    if fc.predicted_full_unix.is_none_or(|d| full < d) {
        fc.predicted_full_unix = Some(full);
        fc.full_earliest_unix = Some(earliest);
        fc.full_latest_unix = latest;
        fc.runaway_bytes_per_day = Some(rate);
    }
    fc
}

/// A drive's rated write endurance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Endurance {
    /// Terabytes written, in bytes.
    Tbw { bytes: f64 },
    /// Drive writes per day over the warranty.
    Dwpd {
        dwpd: f64,
        capacity_bytes: f64,
        warranty_years: f64,
    },
}

impl Endurance {
    pub fn rated_bytes(self) -> f64 {
        match self {
            Endurance::Tbw { bytes } => bytes,
            Endurance::Dwpd {
                dwpd,
                capacity_bytes,
                warranty_years,
            } => dwpd * capacity_bytes * warranty_years * 365.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriveForecast {
    /// Wear used ratio a day.
    pub wear_rate_per_day: Option<f64>,
    /// When the wear used ratio is predicted to reach 1.0.
    pub predicted_wear_out_unix: Option<i64>,
    /// The band around `predicted_wear_out_unix` (see the module's "Bands"): earliest, only
    /// with a predicted date.
    pub wear_out_earliest_unix: Option<i64>,
    /// The latest wear-out date; `None` when the lower rate is not wear or beyond 10 years.
    pub wear_out_latest_unix: Option<i64>,
    pub host_bytes_per_day_1d: Option<f64>,
    pub host_bytes_per_day_30d: Option<f64>,
    /// NAND bytes written / host bytes written over the window, where NAND is reported.
    pub write_amplification_1d: Option<f64>,
    pub write_amplification_30d: Option<f64>,
    /// Host bytes written / rated endurance.
    pub endurance_consumed_ratio: Option<f64>,
    /// When host writes are predicted to reach the rated endurance (30-day rate).
    pub predicted_endurance_exhausted_unix: Option<i64>,
}

/// Wear rate (ratio a day) and the fitted level now, from (t, wear) points in time order, and
/// the Theil–Sen interval of the rate over the same window, widened to contain the
/// least-squares rate (`None` with fewer than 3 days).
fn wear_fit_band(points: &[(i64, f64)], now: i64) -> Option<(f64, f64, Option<SlopeBand>)> {
    // The last value of each day.
    let mut daily: Vec<(f64, f64)> = Vec::new();
    for &(t, w) in points {
        let d = t.div_euclid(DAY) as f64;
        match daily.last_mut() {
            Some(last) if last.0 == d => last.1 = w,
            _ => daily.push((d, w)),
        }
    }
    let last_day = daily.last()?.0;
    let first_day = daily.first()?.0;
    let mut window = 60.0;
    let in_window = loop {
        let w: Vec<(f64, f64)> = daily
            .iter()
            .copied()
            .filter(|(d, _)| *d > last_day - window)
            .collect();
        let mut levels: Vec<f64> = w.iter().map(|p| p.1).collect();
        levels.dedup();
        if levels.len() >= 4 || last_day - window <= first_day {
            break w;
        }
        window *= 2.0;
    };
    let (bx, by) = band_points(&in_window);
    let (xs, ys): (Vec<f64>, Vec<f64>) = in_window.into_iter().unzip();
    let (slope, icept) = least_squares(&xs, &ys)?;
    let band = theil_sen_band(&bx, &by).map(|(lo, hi)| (lo.min(slope), hi.max(slope)));
    Some((slope, icept + slope * (now as f64 / DAY_F64), band))
}

/// Increase of a counter per day over the `window_days` before its last point, from the
/// point at or before the window's start; `None` without such a point or across a reset.
fn counter_delta(points: &[(i64, f64)], window_days: f64) -> Option<(f64, f64)> {
    let &(t1, v1) = points.last()?;
    let start = t1 - (window_days * DAY_F64) as i64;
    let &(t0, v0) = points.iter().rev().find(|(t, _)| *t <= start)?;
    let span = points.iter().filter(|(t, _)| *t >= t0);
    let monotone = span.clone().zip(span.skip(1)).all(|(a, b)| b.1 >= a.1);
    (monotone && t1 > t0).then(|| (v1 - v0, (t1 - t0) as f64 / DAY_F64))
}

/// Wear, host writes, write amplification and endurance of one drive as of `now`.
pub fn forecast_drive(
    points: &[DrivePoint],
    now: i64,
    endurance: Option<Endurance>,
) -> DriveForecast {
    let wear: Vec<(i64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.t, p.wear_used_ratio?.last)))
        .collect();
    let host: Vec<(i64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.t, p.host_written_bytes?)))
        .collect();
    let both: Vec<(i64, f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.t, p.host_written_bytes?, p.nand_written_bytes?)))
        .collect();
    let mut f = DriveForecast::default();
    if let Some((rate, level, band)) = wear_fit_band(&wear, now) {
        f.wear_rate_per_day = Some(rate);
        let level = level.max(wear.last().map(|w| w.1).unwrap_or(level));
        let left = (1.0 - level).max(0.0);
        if rate > 1e-7 {
            f.predicted_wear_out_unix = date_in(now, left / rate);
        }
        if let Some(d) = f.predicted_wear_out_unix {
            let (lo, hi) = band.unwrap_or((rate, rate));
            f.wear_out_earliest_unix = Some(date_in(now, left / hi).map_or(d, |e| e.min(d)));
            f.wear_out_latest_unix = (lo > 1e-7).then(|| date_in(now, left / lo)).flatten();
        }
    }
    let rate = |w: f64| counter_delta(&host, w).map(|(d, days)| d / days);
    f.host_bytes_per_day_1d = rate(1.0);
    f.host_bytes_per_day_30d = rate(30.0);
    let wa = |w: f64| {
        let h: Vec<(i64, f64)> = both.iter().map(|x| (x.0, x.1)).collect();
        let n: Vec<(i64, f64)> = both.iter().map(|x| (x.0, x.2)).collect();
        let (dh, _) = counter_delta(&h, w)?;
        let (dn, _) = counter_delta(&n, w)?;
        (dh > 0.0).then(|| dn / dh)
    };
    f.write_amplification_1d = wa(1.0);
    f.write_amplification_30d = wa(30.0);
    if let (Some(e), Some(&(_, written))) = (endurance, host.last()) {
        let rated = e.rated_bytes();
        if rated > 0.0 {
            f.endurance_consumed_ratio = Some(written / rated);
            if let Some(r) = f.host_bytes_per_day_30d.filter(|r| *r > 0.0) {
                f.predicted_endurance_exhausted_unix = date_in(now, (rated - written) / r);
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::record::Stat;

    const G: f64 = 1e9;
    const SIZE: f64 = 1000.0 * G;
    const NOW_DAY: f64 = 60.0;
    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn at(d: f64) -> i64 {
        T0 + (d * DAY_F64) as i64
    }

    /// Hourly points of used bytes `used(day)` for days 0..60, with a ±2 GB daily cycle.
    fn series(used: impl Fn(f64) -> f64) -> Vec<FsPoint> {
        (0..(NOW_DAY as i64 * 24))
            .map(|h| {
                let d = h as f64 / 24.0;
                let u = used(d) + 2.0 * G * (2.0 * std::f64::consts::PI * d).sin();
                FsPoint {
                    t: at(d),
                    hourly: true,
                    size: Stat::one(SIZE),
                    avail: Stat::one(SIZE - u),
                    free: Stat::one(SIZE - u),
                    files_free: None,
                }
            })
            .collect()
    }

    /// The first hour after now at which the shape (cycle included) reaches the size.
    fn truth(used: &dyn Fn(f64) -> f64) -> Option<i64> {
        (0..(HORIZON_DAYS as i64 * 24))
            .map(|h| NOW_DAY + h as f64 / 24.0)
            .find(|&d| used(d) + 2.0 * G * (2.0 * std::f64::consts::PI * d).sin() >= SIZE)
            .map(at)
    }

    /// The plain alternative: least squares over every point of the last 30 days.
    fn least_squares_full(points: &[FsPoint], now: i64) -> (Option<f64>, Option<i64>) {
        let (xs, ys): (Vec<f64>, Vec<f64>) = points
            .iter()
            .filter(|p| p.t > now - 30 * DAY)
            .map(|p| (p.t as f64 / DAY_F64, p.size.last - p.avail.last))
            .unzip();
        let Some((slope, icept)) = least_squares(&xs, &ys) else {
            return (None, None);
        };
        let level = icept + slope * now as f64 / DAY_F64;
        let date = (slope > 0.0)
            .then(|| date_in(now, ((SIZE - level) / slope).max(0.0)))
            .flatten();
        (Some(slope), date)
    }

    /// Error of a predicted date in days; a date where none comes (or none where one does)
    /// counts as the whole horizon.
    fn err_days(pred: Option<i64>, truth: Option<i64>) -> f64 {
        match (pred, truth) {
            (None, None) => 0.0,
            (Some(p), Some(t)) => (p - t).abs() as f64 / DAY_F64,
            _ => HORIZON_DAYS,
        }
    }

    struct Case {
        name: &'static str,
        used: Box<dyn Fn(f64) -> f64>,
        /// The floor's true growth now, bytes a day.
        growth: f64,
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "linear growth",
                used: Box::new(|d| 200.0 * G + 10.0 * G * d),
                growth: 10.0 * G,
            },
            Case {
                name: "weekly delete sawtooth",
                // Data grows 5 GB a day; logs add 20 GB a day and are deleted every 7 days.
                used: Box::new(|d| 300.0 * G + 5.0 * G * d + 20.0 * G * d.rem_euclid(7.0)),
                growth: 5.0 * G,
            },
            Case {
                name: "bulk load then flat",
                used: Box::new(|d| 100.0 * G + 40.0 * G * (d.clamp(20.0, 35.0) - 20.0)),
                growth: 0.0,
            },
            Case {
                name: "big delete then slow growth",
                used: Box::new(|d| {
                    if d < 40.0 {
                        200.0 * G + 10.0 * G * d
                    } else {
                        150.0 * G + 2.0 * G * (d - 40.0)
                    }
                }),
                growth: 2.0 * G,
            },
            Case {
                name: "flat",
                used: Box::new(|_| 500.0 * G),
                growth: 0.0,
            },
            Case {
                name: "shrinking",
                used: Box::new(|d| 800.0 * G - 3.0 * G * d),
                growth: -3.0 * G,
            },
        ]
    }

    #[test]
    fn a_date_a_hair_short_of_a_whole_second_is_that_second() {
        // A day less a float's error from a 5-minute-aligned time: the same second however
        // the sum lands.
        assert_eq!(date_in(1_800, 1.0 - 1e-12), Some(1_800 + DAY));
        assert_eq!(date_in(1_800, 1.0 + 1e-12), Some(1_800 + DAY));
        assert_eq!(date_in(1_800, -1.0), None);
    }

    #[test]
    fn filesystem_forecasts_against_least_squares_on_known_shapes() {
        let now = at(NOW_DAY);
        eprintln!(
            "{:<28} {:>10} {:>10} {:>10} {:>12} {:>12}",
            "shape", "true GB/d", "ours GB/d", "LS GB/d", "ours err d", "LS err d"
        );
        for c in cases() {
            let pts = series(&c.used);
            let f = forecast_filesystem(&pts, now);
            let t = truth(&c.used);
            let (ls_slope, ls_date) = least_squares_full(&pts, now);
            let ours = err_days(f.predicted_full_unix, t);
            let ls = err_days(ls_date, t);
            let g30 = f.growth_30d_bytes_per_day.unwrap_or(f64::NAN);
            eprintln!(
                "{:<28} {:>10.2} {:>10.2} {:>10.2} {:>12.1} {:>12.1}",
                c.name,
                c.growth / G,
                g30 / G,
                ls_slope.unwrap_or(f64::NAN) / G,
                ours,
                ls
            );
            if let Some(p) = f.predicted_full_unix {
                assert!(p >= now, "{}: a date in the past", c.name);
            }
            match c.name {
                "linear growth" => {
                    assert!((g30 - c.growth).abs() < 0.02 * c.growth, "{}", g30 / G);
                    let g7 = f.growth_7d_bytes_per_day.unwrap();
                    assert!((g7 - c.growth).abs() < 0.02 * c.growth, "{}", g7 / G);
                    assert!(ours <= 2.0, "{ours}");
                    assert!(ls <= 2.0, "{ls}");
                }
                "weekly delete sawtooth" => {
                    assert!((g30 - c.growth).abs() < 0.2 * c.growth, "{}", g30 / G);
                    // The disk fills at the top of a tooth, so the true date moves in weekly
                    // steps: within one tooth is as close as a trend can be.
                    assert!(ours <= 7.0, "{ours}");
                    assert!(ours < ls, "ours {ours} LS {ls}");
                }
                "bulk load then flat" => {
                    assert_eq!(t, None);
                    assert_eq!(f.predicted_full_unix, None);
                    // The 30-day figure still holds the load's last days; the week is flat.
                    let g7 = f.growth_7d_bytes_per_day.unwrap();
                    assert!(g7.abs() < 0.1 * G, "{}", g7 / G);
                    assert!(ls > ours, "least squares still sees the load: {ls}");
                }
                "big delete then slow growth" => {
                    assert_eq!(f.trend_since_unix, Some(at(40.0)));
                    assert!((g30 - c.growth).abs() < 0.1 * c.growth, "{}", g30 / G);
                    let horizon = (t.unwrap() - now) as f64 / DAY_F64;
                    assert!(ours <= 0.05 * horizon, "{ours} of {horizon}");
                    assert!(ours < ls, "ours {ours} LS {ls}");
                }
                "flat" | "shrinking" => {
                    assert_eq!(t, None);
                    assert_eq!(f.predicted_full_unix, None, "{}", c.name);
                    assert!((g30 - c.growth).abs() < 0.1 * G, "{}", g30 / G);
                }
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn a_full_filesystem_is_full_now_not_in_the_past() {
        let now = at(NOW_DAY);
        let pts = series(|d| 400.0 * G + 12.0 * G * d);
        let f = forecast_filesystem(&pts, now);
        assert_eq!(f.predicted_full_unix, Some(now));
        assert_eq!(forecast_filesystem(&[], now), FsForecast::default());
        assert_eq!(
            forecast_filesystem(&pts[..24 * 3], at(3.0)).predicted_full_unix,
            None,
            "three days are too few for a date"
        );
    }

    fn drive_points(days: i64, wear: impl Fn(f64) -> f64) -> Vec<DrivePoint> {
        (0..=days * 24)
            .map(|h| {
                let d = h as f64 / 24.0;
                // SMART reports whole percents.
                let w = (wear(d) * 100.0).floor() / 100.0;
                DrivePoint {
                    t: at(d),
                    hourly: true,
                    wear_used_ratio: Some(Stat::one(w)),
                    spare_ratio: None,
                    temperature_celsius: None,
                    host_written_bytes: Some(100e12 + 100.0 * G * d),
                    nand_written_bytes: Some(250e12 + 250.0 * G * d),
                    media_errors: Some(0.0),
                    power_on_hours: Some(h as f64),
                    discarded_bytes: None,
                }
            })
            .collect()
    }

    /// Wear-out from least squares over the whole history, for comparison.
    fn wear_least_squares(points: &[DrivePoint], now: i64) -> Option<i64> {
        let (xs, ys): (Vec<f64>, Vec<f64>) = points
            .iter()
            .map(|p| (p.t as f64 / DAY_F64, p.wear_used_ratio.unwrap().last))
            .unzip();
        let (slope, icept) = least_squares(&xs, &ys)?;
        date_in(now, (1.0 - icept - slope * now as f64 / DAY_F64) / slope)
    }

    #[test]
    fn wear_out_on_linear_and_accelerating_series_against_least_squares() {
        let now_day = 400.0;
        let now = at(now_day);
        let wear_truth = |w: &dyn Fn(f64) -> f64| {
            (0..HORIZON_DAYS as i64 * 24)
                .map(|h| now_day + h as f64 / 24.0)
                .find(|&d| w(d) >= 1.0)
                .map(at)
        };
        let linear = |d: f64| 0.05 + 0.001 * d;
        let accelerating = |d: f64| 0.05 + 0.0003 * d + 0.000_002 * d * d;
        eprintln!(
            "{:<14} {:>12} {:>12} {:>12}",
            "wear", "truth d", "ours err d", "LS err d"
        );
        for (name, w) in [
            ("linear", &linear as &dyn Fn(f64) -> f64),
            ("accelerating", &accelerating),
        ] {
            let pts = drive_points(now_day as i64, w);
            let f = forecast_drive(&pts, now, None);
            let t = wear_truth(w);
            let ours = err_days(f.predicted_wear_out_unix, t);
            let ls = err_days(wear_least_squares(&pts, now), t);
            let horizon = (t.unwrap() - now) as f64 / DAY_F64;
            eprintln!("{name:<14} {horizon:>12.0} {ours:>12.1} {ls:>12.1}");
            if name == "linear" {
                let rate = f.wear_rate_per_day.unwrap();
                assert!((rate - 0.001).abs() < 0.000_05, "{rate}");
                assert!(ours <= 10.0, "{ours}");
                assert!(ls <= 10.0, "{ls}");
            } else {
                assert!(ours < 0.35 * horizon, "{ours} of {horizon}");
                assert!(ours < ls / 2.0, "ours {ours} LS {ls}");
            }
        }
    }

    #[test]
    fn host_writes_write_amplification_and_endurance() {
        let now = at(100.0);
        let pts = drive_points(100, |_| 0.1);
        let f = forecast_drive(
            &pts,
            now,
            Some(Endurance::Tbw {
                bytes: 200e12 - 100.0 * G * 100.0,
            }),
        );
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-6 * b.abs().max(1.0);
        assert!(close(f.host_bytes_per_day_1d, 100.0 * G), "{f:?}");
        assert!(close(f.host_bytes_per_day_30d, 100.0 * G), "{f:?}");
        assert!(close(f.write_amplification_1d, 2.5), "{f:?}");
        assert!(close(f.write_amplification_30d, 2.5), "{f:?}");
        // Written 110 TB of 190 TB: 800 days at 100 GB a day.
        assert!(close(f.endurance_consumed_ratio, 110.0 / 190.0), "{f:?}");
        assert_eq!(
            f.predicted_endurance_exhausted_unix,
            Some(now + 800 * 86_400)
        );
        assert_eq!(f.wear_rate_per_day, Some(0.0));
        assert_eq!(f.predicted_wear_out_unix, None, "flat wear: no date");
        let dwpd = Endurance::Dwpd {
            dwpd: 1.0,
            capacity_bytes: 3.84e12,
            warranty_years: 5.0,
        };
        assert!((dwpd.rated_bytes() - 7008e12).abs() < 1e6);
        // Exhausted already: the ratio says so, no date in the past.
        let f = forecast_drive(&pts, now, Some(Endurance::Tbw { bytes: 50e12 }));
        assert!(f.endurance_consumed_ratio.unwrap() > 1.0);
        assert_eq!(f.predicted_endurance_exhausted_unix, None);
    }

    #[test]
    fn a_counter_reset_or_missing_nand_gives_no_rate() {
        let mut pts = drive_points(40, |_| 0.1);
        let n = pts.len();
        pts[n - 5].host_written_bytes = Some(1.0);
        for p in &mut pts {
            p.nand_written_bytes = None;
        }
        let f = forecast_drive(&pts, at(40.0), None);
        assert_eq!(f.host_bytes_per_day_1d, None);
        assert_eq!(f.host_bytes_per_day_30d, None);
        assert_eq!(f.write_amplification_30d, None);
    }

    #[test]
    fn sens_interval_of_the_slope_by_hand() {
        // n = 5, N = 10 slopes, sorted: -1, 0.5, 0.5, 2/3, 1, 1, 1, 1.5, 2, 2. C = 1.96 ·
        // √(5·4·15/18) = 8.0017: ranks (10 − C)/2 = 0.999 → 1 (floor, at least 1) and
        // (10 + C)/2 = 9.0008 → 10 (ceil): the first and the last slope.
        let xs = [0.0, 1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            theil_sen_band(&xs, &[0.0, 2.0, 1.0, 3.0, 4.0]),
            Some((-1.0, 2.0))
        );
        // 20 points on a line with two outliers: N = 190, C = 1.96·√(20·19·45/18) = 60.4,
        // ranks 64 and 126 of slopes that are 3 but for the 37 pairs with an outlier (34 lower,
        // 3 higher).
        let xs: Vec<f64> = (0..20).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|x| 3.0 * x + 1.0).collect();
        assert_eq!(theil_sen_band(&xs, &ys), Some((3.0, 3.0)));
        ys[19] = -100.0;
        ys[3] = 500.0;
        assert_eq!(theil_sen_band(&xs, &ys), Some((3.0, 3.0)));
        // Thinned to 64 points, first and last kept; a short list untouched.
        let many: Vec<(f64, f64)> = (0..730)
            .map(|d| (f64::from(d), 0.001 * f64::from(d)))
            .collect();
        let (tx, _) = band_points(&many);
        assert_eq!(tx.len(), BAND_MAX_POINTS);
        assert_eq!((tx[0], tx[63]), (0.0, 729.0));
        assert_eq!(band_points(&many[..10]).0.len(), 10);
        // Too few points, or no two distinct xs: no interval.
        assert_eq!(theil_sen_band(&[0.0, 1.0], &[0.0, 1.0]), None);
        assert_eq!(theil_sen_band(&[1.0; 4], &[0.0, 1.0, 2.0, 3.0]), None);
    }

    /// Days 0..60 of a filesystem whose daily low is `low(day)`, high 1 GB above it.
    fn days_of(low: impl Fn(i64) -> f64) -> Vec<DayUse> {
        (0..60)
            .map(|d| DayUse {
                day: T0 / DAY + d,
                low: low(d),
                high: low(d) + G,
                size: SIZE,
            })
            .collect()
    }

    #[test]
    fn full_date_bands_contain_the_date_and_widen_with_noise() {
        let now = at(NOW_DAY);
        // A clean line: every pairwise slope is 10 GB a day and no point strays from it, so the
        // band is the date give or take the hour between passes.
        let clean = forecast_filesystem_days(&days_of(|d| 200.0 * G + 10.0 * G * d as f64), now);
        let p = clean.predicted_full_unix.unwrap();
        assert_eq!(clean.full_earliest_unix, Some(p - 3600));
        assert_eq!(clean.full_latest_unix, Some(p + 3600));
        // The same growth with up to ±10 GB of irregular day-to-day noise (no period the 7-day
        // envelope would smooth out): a band around the date.
        let noise = |d: i64| ((d * d * 7919) % 101) as f64 / 101.0 - 0.5;
        let noisy = forecast_filesystem_days(
            &days_of(|d| 200.0 * G + 10.0 * G * d as f64 + 20.0 * G * noise(d)),
            now,
        );
        let (e, p, l) = (
            noisy.full_earliest_unix.unwrap(),
            noisy.predicted_full_unix.unwrap(),
            noisy.full_latest_unix.unwrap(),
        );
        assert!(e < p && p < l, "{e} {p} {l}");
        // Headroom ~ 190 days at 10 GB a day: the band is days wide, not months.
        assert!((l - e) as f64 / DAY_F64 > 1.0, "{}", (l - e) / DAY);
        assert!((l - e) as f64 / DAY_F64 < 60.0, "{}", (l - e) / DAY);
    }

    #[test]
    fn flat_shrinking_or_barely_growing_have_no_bogus_bounds() {
        let now = at(NOW_DAY);
        for (name, low) in [
            ("flat", Box::new(|_| 500.0 * G) as Box<dyn Fn(i64) -> f64>),
            ("shrinking", Box::new(|d| 800.0 * G - 3.0 * G * d as f64)),
        ] {
            let f = forecast_filesystem_days(&days_of(low), now);
            assert_eq!(f.predicted_full_unix, None, "{name}");
            assert_eq!(f.full_earliest_unix, None, "{name}");
            assert_eq!(f.full_latest_unix, None, "{name}");
        }
        // Slow growth (0.05 GB a day) under ±3 GB of noise: a date from the median slope, an
        // earliest date, but the lower slope is not growth, so no latest date (not a year 9999).
        let noise = |d: i64| ((d * d * 7919) % 101) as f64 / 101.0 - 0.5;
        let f = forecast_filesystem_days(
            &days_of(|d| 900.0 * G + 0.05 * G * d as f64 + 6.0 * G * noise(d)),
            now,
        );
        let p = f.predicted_full_unix.expect("the median slope is growth");
        assert!(f.full_earliest_unix.unwrap() < p, "{f:?}");
        assert_eq!(f.full_latest_unix, None, "{f:?}");
        let f = forecast_filesystem_days(&days_of(|d| 900.0 * G + 6.0 * G * noise(d)), now);
        assert_eq!(f.full_latest_unix, None, "no growth: no latest date");
    }

    #[test]
    fn wear_out_band_contains_the_least_squares_date() {
        let now_day = 400.0;
        let now = at(now_day);
        let f = forecast_drive(&drive_points(400, |d| 0.05 + 0.001 * d), now, None);
        let p = f.predicted_wear_out_unix.unwrap();
        let (e, l) = (
            f.wear_out_earliest_unix.unwrap(),
            f.wear_out_latest_unix.unwrap(),
        );
        assert!(e <= p && p <= l, "{e} {p} {l}");
        // Whole-percent steps every 10 days: the pairwise slopes spread, the band with them,
        // but around 550 days left the band stays within a few months.
        assert!(l > e, "{e} {l}");
        assert!(((l - e) as f64 / DAY_F64) < 120.0, "{}", (l - e) / DAY);
        // Flat wear: no date and no band.
        let f = forecast_drive(&drive_points(100, |_| 0.1), at(100.0), None);
        assert_eq!(f.wear_out_earliest_unix, None);
        assert_eq!(f.wear_out_latest_unix, None);
    }

    #[test]
    fn theil_sen_ignores_outliers_that_pull_least_squares() {
        let xs: Vec<f64> = (0..20).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|x| 3.0 * x + 1.0).collect();
        ys[19] = -100.0;
        ys[3] = 500.0;
        let (s, i) = theil_sen(&xs, &ys).unwrap();
        assert!((s - 3.0).abs() < 1e-9 && (i - 1.0).abs() < 1e-9, "{s} {i}");
        let (ls, _) = least_squares(&xs, &ys).unwrap();
        assert!((ls - 3.0).abs() > 1.0, "{ls}");
        assert_eq!(theil_sen(&[1.0], &[1.0]), None);
        assert_eq!(least_squares(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    /// Flat at 55 % for weeks, then +40 GB an hour (a WAL runaway): the long-term leg has no
    /// date (it fits daily lows); the runaway leg dates it within the hour, the true instant
    /// inside its band.
    #[test]
    fn a_runaway_from_a_flat_volume_is_dated_from_its_last_hours() {
        let days = days_of(|_| 550.0 * G);
        let start = at(NOW_DAY) - 3 * 3600;
        let per_hour = 40.0 * G;
        let recent: Vec<(i64, f64)> = (0..=36)
            .map(|i| (start + i * 300, 551.0 * G + per_hour * (i as f64) / 12.0))
            .collect();
        let now = start + 36 * 300;
        let used = recent.last().unwrap().1;
        let truth = now + ((SIZE - used) / per_hour * 3600.0) as i64;
        let long = forecast_filesystem_days(&days, now);
        assert_eq!(long.predicted_full_unix, None);
        let fc = with_runaway(long, &days, &recent, now);
        let full = fc.predicted_full_unix.unwrap();
        assert!((full - truth).abs() < 600, "{full} vs {truth}");
        assert!(fc.full_earliest_unix.unwrap() <= truth);
        assert!(fc.full_latest_unix.unwrap() >= truth);
        assert!((fc.runaway_bytes_per_day.unwrap() - 24.0 * per_hour).abs() < G);
        // Asked again a minute later with no new point, the date stays where it was.
        let later = with_runaway(
            forecast_filesystem_days(&days, now + 60),
            &days,
            &recent,
            now + 60,
        );
        assert_eq!(later.predicted_full_unix, Some(full));
        assert_eq!(later.full_earliest_unix, fc.full_earliest_unix);
    }

    /// Steady growth of 3 % a day with a daily cycle climbs past every earlier high, but at its
    /// own pace: the long-term leg dates it, whatever the time of day.
    #[test]
    fn steady_growth_is_no_runaway_at_any_time_of_day() {
        let per_day = 30.0 * G;
        let used = |t: i64| {
            300.0 * G
                + per_day * (t - T0) as f64 / DAY_F64
                + 2.0 * G * (2.0 * std::f64::consts::PI * (t % DAY) as f64 / DAY_F64).sin()
        };
        let day0 = T0 / DAY;
        for hour in 0..24 {
            let now = at(20.0) + hour * 3600;
            let days: Vec<DayUse> = (day0..=now / DAY)
                .map(|d| {
                    let ts = (d * DAY..((d + 1) * DAY).min(now)).step_by(300);
                    let v: Vec<f64> = ts.map(used).collect();
                    DayUse {
                        day: d,
                        low: v.iter().copied().fold(f64::INFINITY, f64::min),
                        high: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                        size: SIZE,
                    }
                })
                .collect();
            let recent: Vec<(i64, f64)> = (0..=36)
                .map(|i| now - 3 * 3600 + i * 300)
                .map(|t| (t, used(t)))
                .collect();
            let long = forecast_filesystem_days(&days, now);
            let fc = with_runaway(long.clone(), &days, &recent, now);
            assert_eq!(fc.runaway_bytes_per_day, None, "hour {hour}");
            assert_eq!(
                fc.predicted_full_unix, long.predicted_full_unix,
                "hour {hour}"
            );
        }
    }

    /// A weekly dump climbing to where it climbed last week is no runaway, nor is slow growth
    /// that would take over a week, nor a volume shrinking.
    #[test]
    fn a_recurring_peak_or_slow_growth_is_no_runaway() {
        let now = at(NOW_DAY) + 3 * 3600;
        let climb = |from: f64, per_hour: f64| -> Vec<(i64, f64)> {
            (0..=36)
                .map(|i| (now - 3 * 3600 + i * 300, from + per_hour * i as f64 / 12.0))
                .collect()
        };
        // Last week's peak was 850 GB: climbing 700 -> 820 GB now is within it.
        let weekly: Vec<DayUse> = days_of(|_| 700.0 * G)
            .into_iter()
            .map(|mut d| {
                if (d.day - T0 / DAY) % 7 == 3 {
                    d.high = 850.0 * G;
                }
                d
            })
            .collect();
        assert_eq!(
            runaway(&weekly, &climb(700.0 * G, 40.0 * G), SIZE, now),
            None
        );
        // Past every earlier high, but at 1 GB an hour 300 GB takes 12 days.
        let flat = days_of(|_| 550.0 * G);
        assert_eq!(runaway(&flat, &climb(690.0 * G, 1.0 * G), SIZE, now), None);
        assert_eq!(
            runaway(&flat, &climb(700.0 * G, -10.0 * G), SIZE, now),
            None
        );
        // A climb that stopped an hour ago: 3 hours at 40 GB an hour, then flat.
        let stopped: Vec<(i64, f64)> = (0..=48)
            .map(|i| {
                let climbed = (i.min(36) as f64) / 12.0;
                (now - 4 * 3600 + i * 300, 600.0 * G + 40.0 * G * climbed)
            })
            .collect();
        assert_eq!(runaway(&flat, &stopped, SIZE, now), None);
        // Still climbing at its end, the same climb is one.
        assert!(runaway(&flat, &stopped[..=36], SIZE, now - 3600).is_some());
        // Too few points, or too short a span.
        assert_eq!(
            runaway(&flat, &climb(700.0 * G, 40.0 * G)[..4], SIZE, now),
            None
        );
    }

    /// A bulk load of 300 GB on a flat 1 TB volume, then flat: a new level, never a date,
    /// however many days later; growth after the step is dated from the step on.
    #[test]
    fn a_step_up_is_a_new_level_not_growth() {
        let step_day = 20;
        let loaded = days_of(|d| if d < step_day { 400.0 * G } else { 700.0 * G });
        for after in 0..40 {
            let now = at(step_day as f64 + after as f64) + 12 * 3600;
            let fc = forecast_filesystem_days(&loaded, now);
            assert_eq!(fc.predicted_full_unix, None, "{after} days after the load");
        }
        // Growth of 10 GB a day after the step: dated once a week of it is there.
        let growing = days_of(|d| {
            if d < step_day {
                400.0 * G
            } else {
                700.0 * G + 10.0 * G * (d - step_day) as f64
            }
        });
        let now = at((step_day + 20) as f64) + 12 * 3600;
        let fc = forecast_filesystem_days(&growing, now);
        assert!(fc.predicted_full_unix.is_some(), "{fc:?}");
        assert_eq!(fc.trend_since_unix, Some((T0 / DAY + step_day) * DAY));
        // Steady growth of 5 % of the size a day is growth, not a step a day.
        let fast = days_of(|d| 100.0 * G + 50.0 * G * d as f64);
        let fc = forecast_filesystem_days(&fast, at(14.0));
        assert_eq!(fc.trend_since_unix, Some(T0 / DAY * DAY));
    }
}
