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
/// (the drive's counters can't tell whose it was). While no discard of its drives is known (a
/// filesystem made without discarding, a daemon that never saw one), it counts from the first
/// sample: a delete since then is still "not trimmed", which is what matters.
pub fn advance(
    prev: Option<&Untrimmed>,
    newest_discard: Option<f64>,
    used: u64,
) -> (Untrimmed, u64) {
    let peak = match prev {
        Some(p) if p.discard_at == newest_discard => p.peak_used.max(used),
        _ => used,
    };
    (
        Untrimmed {
            discard_at: newest_discard,
            peak_used: peak,
        },
        peak - used,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_after_a_trim_shows_until_the_next_trim() {
        const G: u64 = 1 << 30;
        // No discard known: counted from the first sample.
        let (s, e) = advance(None, None, 10 * G);
        assert_eq!(e, 0);
        let (s, _) = advance(Some(&s), None, 30 * G);
        let (s, e) = advance(Some(&s), None, 12 * G);
        assert_eq!(e, 18 * G, "a delete with no discard known is not trimmed");
        // fstrim at t=100 starts over; the database then grows to 80 GiB and deletes 60 GiB.
        let (s, e) = advance(Some(&s), Some(100.0), 10 * G);
        assert_eq!(e, 0);
        let (s, _) = advance(Some(&s), Some(100.0), 80 * G);
        let (s, e) = advance(Some(&s), Some(100.0), 20 * G);
        assert_eq!(e, 60 * G, "deleted, not trimmed");
        // Growth again: the estimate shrinks as freed space is written again.
        let (s, e) = advance(Some(&s), Some(100.0), 50 * G);
        assert_eq!(e, 30 * G);
        // The next fstrim starts over.
        let (_, e) = advance(Some(&s), Some(900.0), 50 * G);
        assert_eq!(e, 0);
    }
}
