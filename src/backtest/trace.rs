//! A fill trace from a CSV file (`unix_seconds,size_bytes,avail_bytes`, one row per sample, an
//! optional header row): parsed and checked, nothing else. Errors name the file and the line.

use std::fmt;

/// The smallest interval between two samples: node_exporter scrapes are 15 s and up, and a
/// finer trace would only cost replay time.
pub(crate) const MIN_INTERVAL_SECONDS: i64 = 10;

/// One sample of a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub t: i64,
    pub size_bytes: u64,
    pub avail_bytes: u64,
}

/// A trace: samples in strictly increasing time, at least [`MIN_INTERVAL_SECONDS`] apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trace {
    pub samples: Vec<Sample>,
}

/// What is wrong with a trace, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceError {
    pub file: String,
    /// 1-based; 0 for the file as a whole.
    pub line: usize,
    pub what: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.what)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.what)
        }
    }
}

impl std::error::Error for TraceError {}

/// The last second of year 9999: any later time is a unit mistake (milliseconds).
const MAX_UNIX_SECONDS: i64 = 253_402_300_799;

const COLUMNS: [&str; 3] = ["unix_seconds", "size_bytes", "avail_bytes"];

/// Parses a CSV trace; `file` names it in errors. Blank lines are skipped; the first row may be a
/// header (any row whose first field is not a number).
pub(crate) fn parse_trace(text: &str, file: &str) -> Result<Trace, TraceError> {
    let err = |line: usize, what: String| TraceError {
        file: file.to_string(),
        line,
        what,
    };
    let mut samples: Vec<Sample> = Vec::new();
    let mut seen_row = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let row = raw.trim();
        if row.is_empty() {
            continue;
        }
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        let first_row = !seen_row;
        seen_row = true;
        if first_row
            && fields
                .first()
                .is_some_and(|f| f.parse::<f64>().is_err() && !f.is_empty())
        {
            // A header: it must name the three columns in order, so a file of another layout
            // is not read as this one.
            let names: Vec<String> = fields.iter().map(|f| f.to_ascii_lowercase()).collect();
            if names != COLUMNS {
                return Err(err(
                    line,
                    format!(
                        "header {row:?}: expected {:?} (or no header)",
                        COLUMNS.join(",")
                    ),
                ));
            }
            continue;
        }
        if fields.len() != 3 {
            return Err(err(
                line,
                format!(
                    "{} field(s), expected 3 ({})",
                    fields.len(),
                    COLUMNS.join(",")
                ),
            ));
        }
        let t: i64 = fields[0].parse().map_err(|_| {
            err(
                line,
                format!("unix_seconds {:?} is not a whole number", fields[0]),
            )
        })?;
        let bytes = |k: usize| -> Result<u64, TraceError> {
            parse_bytes(fields[k]).ok_or_else(|| {
                err(
                    line,
                    format!(
                        "{} {:?} is not a whole number of bytes",
                        COLUMNS[k], fields[k]
                    ),
                )
            })
        };
        let (size_bytes, avail_bytes) = (bytes(1)?, bytes(2)?);
        if !(0..=MAX_UNIX_SECONDS).contains(&t) {
            return Err(err(line, format!("unix_seconds {t} is out of range")));
        }
        if size_bytes == 0 {
            return Err(err(line, "size_bytes is 0".into()));
        }
        if avail_bytes > size_bytes {
            return Err(err(
                line,
                format!("avail_bytes {avail_bytes} is more than size_bytes {size_bytes}"),
            ));
        }
        if let Some(prev) = samples.last() {
            if t <= prev.t {
                return Err(err(
                    line,
                    format!(
                        "time {t} does not increase (the row before is at {})",
                        prev.t
                    ),
                ));
            }
            if t - prev.t < MIN_INTERVAL_SECONDS {
                return Err(err(
                    line,
                    format!(
                        "{} s after the row before: samples must be at least {MIN_INTERVAL_SECONDS} s apart",
                        t - prev.t
                    ),
                ));
            }
        }
        samples.push(Sample {
            t,
            size_bytes,
            avail_bytes,
        });
    }
    if samples.len() < 2 {
        return Err(err(0, "fewer than 2 samples".into()));
    }
    Ok(Trace { samples })
}

/// A byte count: a whole number, also written as a float (`1.2e+12`, as a Prometheus export
/// writes values) when it is whole and within 2^53 (exact in a float).
fn parse_bytes(s: &str) -> Option<u64> {
    if let Ok(v) = s.parse::<u64>() {
        return Some(v);
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= (1u64 << 53) as f64).then_some(v as u64)
}

impl Trace {
    /// The first instant the volume is full (nothing left for unprivileged writers: avail 0).
    pub(crate) fn full_at(&self) -> Option<i64> {
        self.samples
            .iter()
            .find(|s| s.avail_bytes == 0)
            .map(|s| s.t)
    }

    /// The trace's usual interval: the median of the gaps between samples.
    pub(crate) fn interval(&self) -> i64 {
        let mut gaps: Vec<i64> = self.samples.windows(2).map(|w| w[1].t - w[0].t).collect();
        gaps.sort_unstable();
        gaps.get(gaps.len() / 2).copied().unwrap_or(60)
    }

    pub(crate) fn start(&self) -> i64 {
        self.samples.first().map_or(0, |s| s.t)
    }

    pub(crate) fn end(&self) -> i64 {
        self.samples.last().map_or(0, |s| s.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Trace, TraceError> {
        parse_trace(text, "x.csv")
    }

    #[test]
    fn a_trace_with_and_without_a_header_and_blank_lines() {
        let a =
            parse("unix_seconds,size_bytes,avail_bytes\n100,1000,900\n\n160,1000,800\n").unwrap();
        let b = parse("100, 1000, 900\n160,1000,8e2\n").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.samples[1].avail_bytes, 800);
        assert_eq!((a.start(), a.end(), a.interval()), (100, 160, 60));
        assert_eq!(a.full_at(), None);
        let full = parse("0,10,5\n60,10,0\n120,10,0\n").unwrap();
        assert_eq!(full.full_at(), Some(60));
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let cases = [
            (
                "0,10,5\n60,10,x\n",
                2,
                "avail_bytes \"x\" is not a whole number",
            ),
            ("0,10,5\n6o,10,5\n", 2, "unix_seconds \"6o\""),
            ("0,10,5\n60,10,5\n60,10,4\n", 3, "does not increase"),
            ("0,10,5\n60,10,5\n30,10,4\n", 3, "does not increase"),
            ("0,10,5\n5,10,4\n", 2, "at least 10 s apart"),
            (
                "0,10,5\n60,10,11\n",
                2,
                "avail_bytes 11 is more than size_bytes 10",
            ),
            ("0,10,5\n60,10\n", 2, "2 field(s), expected 3"),
            ("time,avail\n0,10,5\n", 1, "header"),
            ("0,-10,5\n", 1, "size_bytes \"-10\""),
            ("0,10,5.5\n", 1, "avail_bytes \"5.5\""),
            ("0,0,0\n", 1, "size_bytes is 0"),
            ("0,10,5\n", 0, "fewer than 2 samples"),
        ];
        for (text, line, what) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(what), "{text:?}: {e}");
            assert!(e.to_string().starts_with("x.csv"), "{e}");
        }
        assert_eq!(
            parse("0,10,5\n60,10,x\n").unwrap_err().to_string(),
            "x.csv:2: avail_bytes \"x\" is not a whole number of bytes"
        );
    }
}
