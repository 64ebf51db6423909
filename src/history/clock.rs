//! Whether the wall clock can be believed: it is watched against the monotonic clock, which no
//! one sets. A jump (a VM snapshot restored, a bad RTC corrected by NTP, an admin's `date -s`)
//! stops the history from storing samples stamped by it and from deleting rows by its idea of
//! "old", until the clock is back or has held its new time for an hour. Pure: the caller passes
//! both clocks' readings.

use std::time::{Duration, Instant};

/// A difference between the two clocks' progress smaller than this is drift or an NTP step,
/// not a jump.
pub const TOLERANCE_SECONDS: i64 = 300;

/// A new wall time that holds steady against the monotonic clock this long is believed.
pub const ACCEPT_AFTER: Duration = crate::time::HOUR_DURATION;

/// What [`ClockGuard::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Trusted,
    /// The wall clock is this many seconds ahead (or, negative, behind) of where the monotonic
    /// clock says it should be.
    Jumped {
        by_seconds: i64,
    },
}

#[derive(Debug, Default)]
pub struct ClockGuard {
    /// The last trusted reading of both clocks.
    anchor: Option<(i64, Instant)>,
    /// A jump seen, its size and since when it holds.
    pending: Option<(i64, Instant)>,
}

impl ClockGuard {
    /// A guard whose last trusted reading was `wall` at `mono` (tests set a jump with it).
    #[cfg(test)]
    pub fn anchored(wall: i64, mono: Instant) -> ClockGuard {
        ClockGuard {
            anchor: Some((wall, mono)),
            pending: None,
        }
    }

    pub fn check(&mut self, wall: i64, mono: Instant) -> Verdict {
        let Some((w0, m0)) = self.anchor else {
            self.anchor = Some((wall, mono));
            return Verdict::Trusted;
        };
        let expected = w0.saturating_add(mono.saturating_duration_since(m0).as_secs() as i64);
        let off = wall.saturating_sub(expected);
        if off.abs() <= TOLERANCE_SECONDS {
            self.anchor = Some((wall, mono));
            self.pending = None;
            return Verdict::Trusted;
        }
        match self.pending {
            Some((p, since)) if (p - off).abs() <= TOLERANCE_SECONDS => {
                if mono.saturating_duration_since(since) >= ACCEPT_AFTER {
                    self.anchor = Some((wall, mono));
                    self.pending = None;
                    return Verdict::Trusted;
                }
            }
            _ => self.pending = Some((off, mono)),
        }
        Verdict::Jumped { by_seconds: off }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_is_distrusted_until_it_is_undone_or_has_held_an_hour() {
        let m0 = Instant::now();
        let at = |s: u64| m0 + Duration::from_secs(s);
        let mut g = ClockGuard::default();
        let w0 = 1_767_225_600;
        assert_eq!(g.check(w0, at(0)), Verdict::Trusted);
        assert_eq!(g.check(w0 + 600, at(600)), Verdict::Trusted, "time passing");
        assert_eq!(
            g.check(w0 + 660, at(640)),
            Verdict::Trusted,
            "an NTP step of 20 s"
        );
        // Ten years forward for two minutes, then back.
        let ten_years = 3_650 * 86_400;
        assert_eq!(
            g.check(w0 + 700 + ten_years, at(680)),
            Verdict::Jumped {
                by_seconds: ten_years
            }
        );
        assert!(matches!(
            g.check(w0 + 820 + ten_years, at(800)),
            Verdict::Jumped { .. }
        ));
        assert_eq!(g.check(w0 + 840, at(820)), Verdict::Trusted, "back again");
        // A day back, held: distrusted for an hour, then believed.
        let back = w0 + 900 - 86_400;
        assert_eq!(
            g.check(back, at(880)),
            Verdict::Jumped {
                by_seconds: -86_400
            }
        );
        assert!(matches!(
            g.check(back + 1800, at(2680)),
            Verdict::Jumped { .. }
        ));
        assert_eq!(
            g.check(back + 3600, at(4480)),
            Verdict::Trusted,
            "held an hour"
        );
        assert_eq!(g.check(back + 3660, at(4540)), Verdict::Trusted);
    }
}
