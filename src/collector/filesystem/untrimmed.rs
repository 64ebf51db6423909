//! "Deleted but not trimmed": an estimate of the bytes a filesystem freed since the last discard
//! reached its drives. Until a TRIM tells the drive, freed blocks still hold data the drive must
//! carry through garbage collection, which is why latency stays high after a big delete. Pure.

/// What is remembered of one filesystem between samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Untrimmed {
    /// The newest discard of the filesystem's drives this estimate counts from.
    discard_at: Option<f64>,
    /// The highest used bytes seen since then.
    peak_used: u64,
}

/// Advances the estimate with the newest discard time of the filesystem's drives and its used
/// bytes now (size − free); returns the new state and the estimate: the fall in used bytes from
/// their highest point since that discard. Conservative by design: space freed and then written
/// again is not counted (the drive sees those blocks overwritten), nor what was freed before the
/// daemon started watching. A discard on any filesystem of the same drive counts as a new start
/// (the drive's counters can't tell whose it was). Unknown (None) while no discard is known.
pub fn advance(
    prev: Option<&Untrimmed>,
    newest_discard: Option<f64>,
    used: u64,
) -> (Untrimmed, Option<u64>) {
    let Some(at) = newest_discard else {
        return (Untrimmed::default(), None);
    };
    let peak = match prev {
        Some(p) if p.discard_at == Some(at) => p.peak_used.max(used),
        _ => used,
    };
    (
        Untrimmed {
            discard_at: Some(at),
            peak_used: peak,
        },
        Some(peak - used),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_after_a_trim_shows_until_the_next_trim() {
        const G: u64 = 1 << 30;
        // No discard known: no estimate.
        let (s, e) = advance(None, None, 10 * G);
        assert_eq!(e, None);
        // fstrim at t=100, the database then grows to 80 GiB and deletes 60 GiB.
        let (s, e) = advance(Some(&s), Some(100.0), 10 * G);
        assert_eq!(e, Some(0));
        let (s, _) = advance(Some(&s), Some(100.0), 80 * G);
        let (s, e) = advance(Some(&s), Some(100.0), 20 * G);
        assert_eq!(e, Some(60 * G), "deleted, not trimmed");
        // Growth again: the estimate shrinks as freed space is written again.
        let (s, e) = advance(Some(&s), Some(100.0), 50 * G);
        assert_eq!(e, Some(30 * G));
        // The next fstrim starts over.
        let (_, e) = advance(Some(&s), Some(900.0), 50 * G);
        assert_eq!(e, Some(0));
    }
}
