//! btrfs' per-device error counters as sysfs prints them (`devinfo/<devid>/error_stats`,
//! kernel 5.14 and later), and the counters' model [`super::device_stats`] fills too. Pure: text
//! in, counters out; reading the file is [`super::sysfs`]'s.

/// The counters the kernel keeps per device (`btrfs device stats`), over the filesystem's life:
/// they are stored on disk and survive remounts until `btrfs device stats -z` zeroes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    /// Writes the device failed (the block layer returned an error).
    pub write: u64,
    pub read: u64,
    /// Cache flushes (barriers) the device failed.
    pub flush: u64,
    /// Blocks whose checksum did not match (silent corruption, or a torn write).
    pub corruption: u64,
    /// Blocks of an unexpected generation (a write the device lost or misplaced).
    pub generation: u64,
}

impl ErrorCounts {
    /// The counters by the `type` label they are exported with, in a fixed order.
    pub fn by_type(&self) -> [(&'static str, u64); 5] {
        [
            ("write", self.write),
            ("read", self.read),
            ("flush", self.flush),
            ("corruption", self.corruption),
            ("generation", self.generation),
        ]
    }
}

/// The five counters' names in `error_stats`, in [`ErrorCounts::by_type`]'s order.
const ERROR_STATS_KEYS: [&str; 5] = [
    "write_errs",
    "read_errs",
    "flush_errs",
    "corruption_errs",
    "generation_errs",
];

/// Why an `error_stats` file was not read: the line (1-based) and what was on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorStatsError {
    #[error("line {line}: {text:?} is not \"name count\"")]
    NotNameCount { line: usize, text: String },
    #[error("line {line}: {key} {value:?} is not a count")]
    NotACount {
        line: usize,
        key: String,
        value: String,
    },
    #[error("line {line}: {key} twice")]
    Twice { line: usize, key: String },
    #[error("{0} missing")]
    Missing(&'static str),
}

/// Parses `error_stats`: lines `write_errs 0`, `read_errs 0`, `flush_errs 0`,
/// `corruption_errs 0`, `generation_errs 0`. Each of the five must be there once with a count;
/// a counter a later kernel adds is passed over; a line not `name count` is an error naming it.
pub fn parse_error_stats(text: &str) -> Result<ErrorCounts, ErrorStatsError> {
    let mut v: [Option<u64>; 5] = [None; 5];
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut f = line.split_whitespace();
        let (Some(key), Some(n), None) = (f.next(), f.next(), f.next()) else {
            return Err(ErrorStatsError::NotNameCount {
                line: i + 1,
                text: line.to_string(),
            });
        };
        let n: u64 = n.parse().map_err(|_| ErrorStatsError::NotACount {
            line: i + 1,
            key: key.to_string(),
            value: n.to_string(),
        })?;
        let Some(slot) = ERROR_STATS_KEYS.iter().position(|k| *k == key) else {
            continue;
        };
        if v[slot].replace(n).is_some() {
            return Err(ErrorStatsError::Twice {
                line: i + 1,
                key: key.to_string(),
            });
        }
    }
    let get = |slot: usize| v[slot].ok_or(ErrorStatsError::Missing(ERROR_STATS_KEYS[slot]));
    Ok(ErrorCounts {
        write: get(0)?,
        read: get(1)?,
        flush: get(2)?,
        corruption: get(3)?,
        generation: get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_stats_must_hold_each_counter_once() {
        let all = "write_errs 1\nread_errs 2\nflush_errs 3\ncorruption_errs 4\ngeneration_errs 5\n";
        let c = parse_error_stats(all).unwrap();
        assert_eq!(
            c.by_type(),
            [
                ("write", 1),
                ("read", 2),
                ("flush", 3),
                ("corruption", 4),
                ("generation", 5)
            ]
        );
        // A counter a later kernel adds is passed over.
        assert_eq!(parse_error_stats(&format!("{all}zoned_errs 9\n")), Ok(c));
        assert_eq!(
            parse_error_stats("write_errs 1\nread_errs 2\n").map_err(|e| e.to_string()),
            Err("flush_errs missing".into())
        );
        assert_eq!(
            parse_error_stats(&format!("{all}read_errs 2\n")).map_err(|e| e.to_string()),
            Err("line 6: read_errs twice".into())
        );
        assert_eq!(
            parse_error_stats("write_errs 1 2\n").map_err(|e| e.to_string()),
            Err("line 1: \"write_errs 1 2\" is not \"name count\"".into())
        );
        assert_eq!(
            parse_error_stats("read_errs -1\n").map_err(|e| e.to_string()),
            Err("line 1: read_errs \"-1\" is not a count".into())
        );
        assert_eq!(
            parse_error_stats("").map_err(|e| e.to_string()),
            Err("write_errs missing".into())
        );
    }
}
