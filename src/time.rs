//! Time constants, so no module keeps its own: seconds as `i64` (the unit of every timestamp the
//! daemon stores and exports: Unix seconds, UTC days as `t.div_euclid(DAY)`), and the same
//! spans as `f64` for rates per day and as `Duration` for config defaults and ranges.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) const MINUTE: i64 = 60;
pub(crate) const HOUR: i64 = 60 * MINUTE;
pub(crate) const DAY: i64 = 24 * HOUR;

/// [`DAY`] as a float: rates per day, days between timestamps.
pub(crate) const DAY_F64: f64 = DAY as f64;

pub(crate) const HOUR_DURATION: Duration = Duration::from_secs(HOUR as u64);
pub(crate) const DAY_DURATION: Duration = Duration::from_secs(DAY as u64);

/// No true wall clock reads earlier than this (2026-12-01T00:00:00Z, before this release was
/// made): a clock before it is a dead RTC or an unset VM clock, and nothing is stored or
/// deleted by it (systemd's own floor is its build time, the same idea). Raise it with each
/// release.
pub(crate) const CLOCK_FLOOR: i64 = 1_796_083_200;

/// Seconds since the Unix epoch, as Prometheus timestamps are given.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
