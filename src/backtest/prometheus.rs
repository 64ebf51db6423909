//! A trace from a Prometheus-compatible server: one instance's and mount point's filesystem
//! size and avail over a range, ssdwatch's own series preferred, node_exporter's otherwise.
//! Pure: the queries to ask and the answers made into the trace the CSV path builds (checked
//! the same way). The asking is src/cli/backtest.rs's, through the one query client.

use super::trace::{MIN_INTERVAL_SECONDS, Sample, Trace};
use crate::catalogue;
use std::collections::BTreeMap;

/// The most points a range query asks for per series: Prometheus refuses more than 11,000.
pub(crate) const MAX_POINTS_PER_QUERY: i64 = 10_000;

/// Whose series a trace is read from, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exporter {
    Ssdwatch,
    NodeExporter,
}

impl Exporter {
    pub(crate) const IN_ORDER: [Exporter; 2] = [Exporter::Ssdwatch, Exporter::NodeExporter];

    /// The size and avail families.
    pub(crate) fn names(self) -> [&'static str; 2] {
        match self {
            Exporter::Ssdwatch => [
                catalogue::FILESYSTEM_SIZE_BYTES.name,
                catalogue::FILESYSTEM_AVAIL_BYTES.name,
            ],
            // node_exporter's names (declared by node_exporter, not ssdwatch's families).
            Exporter::NodeExporter => ["node_filesystem_size_bytes", "node_filesystem_avail_bytes"],
        }
    }

    pub(crate) fn who(self) -> &'static str {
        match self {
            Exporter::Ssdwatch => "ssdwatch's own series",
            Exporter::NodeExporter => "node_exporter's series",
        }
    }
}

/// The two selectors (size, avail) of one exporter for an instance and a mount point.
pub(crate) fn selectors(exporter: Exporter, instance: &str, mountpoint: &str) -> [String; 2] {
    let q = crate::query::quote;
    exporter.names().map(|n| {
        format!(
            "{n}{{instance={},mountpoint={}}}",
            q(instance),
            q(mountpoint)
        )
    })
}

/// The range queries' windows: `start..=end` at `step`, each at most
/// [`MAX_POINTS_PER_QUERY`] points, on instants that are multiples of `step`.
pub(crate) fn windows(start: i64, end: i64, step: i64) -> Vec<(i64, i64)> {
    let step = step.max(1);
    let first = start.div_euclid(step) * step + if start.rem_euclid(step) == 0 { 0 } else { step };
    let last = end.div_euclid(step) * step;
    let mut out = Vec::new();
    let mut from = first;
    while from <= last {
        let to = (from + (MAX_POINTS_PER_QUERY - 1) * step).min(last);
        out.push((from, to));
        from = to + step;
    }
    out
}

type Labels = BTreeMap<String, String>;
/// One series' points by time.
pub(crate) type Points = BTreeMap<i64, f64>;

/// One series of an answer, for naming it in an error: `{k="v", ...}`.
fn show(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Why a Prometheus source gives no trace; `origin` names the server and the volume, `at` the
/// instant (RFC 3339).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SourceError {
    #[error(
        "query {query}: {} series match, one is needed: {}; make --instance and --mountpoint name one volume",
        series.len(),
        series.join(", ")
    )]
    SeveralSeries { query: String, series: Vec<String> },
    #[error("{origin}: {what} {value} at {at} is not a whole number of bytes")]
    NotBytes {
        origin: String,
        what: &'static str,
        value: f64,
        at: String,
    },
    #[error("{origin}: size is 0 at {at}")]
    ZeroSize { origin: String, at: String },
    #[error("{origin}: avail {avail} is more than size {size} at {at}")]
    AvailAboveSize {
        origin: String,
        avail: u64,
        size: u64,
        at: String,
    },
    #[error(
        "{origin}: samples {apart} s apart at {at}: at least {MIN_INTERVAL_SECONDS} s (a longer --step)"
    )]
    TooClose {
        origin: String,
        apart: i64,
        at: String,
    },
    #[error("{origin}: fewer than 2 instants with both size and avail in the range")]
    TooFew { origin: String },
}

/// What the answers hold for one selector: the one series' points by time, its labels; an
/// error naming every series when more than one matched (two jobs scraping the host, a
/// device renamed during the range).
pub(crate) fn one_series(
    query: &str,
    answers: &[crate::query::Answer],
) -> Result<Option<(Labels, Points)>, SourceError> {
    let mut by_labels: BTreeMap<Labels, Points> = BTreeMap::new();
    for a in answers {
        for (labels, points) in a {
            by_labels
                .entry(labels.clone())
                .or_default()
                .extend(points.iter().copied());
        }
    }
    if by_labels.len() > 1 {
        return Err(SourceError::SeveralSeries {
            query: query.to_string(),
            series: by_labels.keys().map(show).collect(),
        });
    }
    Ok(by_labels.into_iter().next())
}

/// The trace from the size and avail points (joined on time: an instant one of them lacks is a
/// gap), checked as a CSV trace is; `source` names it in errors.
pub(crate) fn trace_of(size: &Points, avail: &Points, source: &str) -> Result<Trace, SourceError> {
    let bytes = |v: f64, what: &'static str, t: i64| -> Result<u64, SourceError> {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= (1u64 << 53) as f64 {
            Ok(v as u64)
        } else {
            Err(SourceError::NotBytes {
                origin: source.to_string(),
                what,
                value: v,
                at: super::human_time(t),
            })
        }
    };
    let mut samples: Vec<Sample> = Vec::new();
    for (&t, &a) in avail {
        let Some(&s) = size.get(&t) else {
            continue;
        };
        let (size_bytes, avail_bytes) = (bytes(s, "size", t)?, bytes(a, "avail", t)?);
        let at = super::human_time(t);
        if size_bytes == 0 {
            return Err(SourceError::ZeroSize {
                origin: source.to_string(),
                at,
            });
        }
        if avail_bytes > size_bytes {
            return Err(SourceError::AvailAboveSize {
                origin: source.to_string(),
                avail: avail_bytes,
                size: size_bytes,
                at,
            });
        }
        if let Some(prev) = samples.last()
            && t - prev.t < MIN_INTERVAL_SECONDS
        {
            return Err(SourceError::TooClose {
                origin: source.to_string(),
                apart: t - prev.t,
                at,
            });
        }
        samples.push(Sample {
            t,
            size_bytes,
            avail_bytes,
        });
    }
    if samples.len() < 2 {
        return Err(SourceError::TooFew {
            origin: source.to_string(),
        });
    }
    Ok(Trace { samples })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_stay_under_the_servers_point_limit_on_whole_steps() {
        assert_eq!(windows(0, 120, 60), vec![(0, 120)]);
        assert_eq!(windows(30, 150, 60), vec![(60, 120)]);
        assert!(windows(61, 110, 60).is_empty());
        let w = windows(0, 25_000 * 60, 60);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0], (0, 9_999 * 60));
        assert_eq!(w[1].0, 10_000 * 60);
        assert_eq!(w[2].1, 25_000 * 60);
        for (a, b) in &w {
            assert!((b - a) / 60 < MAX_POINTS_PER_QUERY);
        }
    }

    #[test]
    fn selectors_quote_what_they_match() {
        let [size, avail] = selectors(Exporter::NodeExporter, "db7:9100", "/srv/\"x\"");
        assert_eq!(
            size,
            r#"node_filesystem_size_bytes{instance="db7:9100",mountpoint="/srv/\"x\""}"#
        );
        assert!(avail.starts_with("node_filesystem_avail_bytes{"));
        assert!(
            selectors(Exporter::Ssdwatch, "a", "/")[1]
                .starts_with("ssdwatch_filesystem_avail_bytes{")
        );
    }

    #[test]
    fn two_series_are_named_and_refused() {
        let l =
            |job: &str| -> Labels { [("job".to_string(), job.to_string())].into_iter().collect() };
        let answers = vec![vec![
            (l("node"), vec![(0, 1.0)]),
            (l("node2"), vec![(0, 1.0)]),
        ]];
        let e = one_series("q{}", &answers).unwrap_err().to_string();
        assert!(
            e.contains("q{}: 2 series match")
                && e.contains(r#"{job="node"}"#)
                && e.contains(r#"{job="node2"}"#),
            "{e}"
        );
        // One series over several windows is one.
        let answers = vec![
            vec![(l("node"), vec![(0, 1.0)])],
            vec![(l("node"), vec![(60, 2.0)])],
        ];
        let (_, pts) = one_series("q", &answers).unwrap().unwrap();
        assert_eq!(pts.len(), 2);
        assert!(one_series("q", &[vec![]]).unwrap().is_none());
    }

    #[test]
    fn the_trace_is_checked_as_a_csv_trace_is() {
        let m = |v: &[(i64, f64)]| v.iter().copied().collect::<BTreeMap<i64, f64>>();
        let size = m(&[(0, 100.0), (60, 100.0), (120, 100.0), (180, 100.0)]);
        // A gap where avail is missing at 120.
        let t = trace_of(&size, &m(&[(0, 50.0), (60, 40.0), (180, 0.0)]), "src").unwrap();
        assert_eq!(t.samples.len(), 3);
        assert_eq!(t.full_at(), Some(180));
        for (avail, want) in [
            (
                m(&[(0, 50.0), (60, 140.0)]),
                "avail 140 is more than size 100 at 1970-01-01T00:01:00Z",
            ),
            (
                m(&[(0, 50.0), (60, 4.5)]),
                "avail 4.5 at 1970-01-01T00:01:00Z is not a whole number",
            ),
            (m(&[(0, 50.0)]), "fewer than 2 instants"),
        ] {
            let e = trace_of(&size, &avail, "src").unwrap_err().to_string();
            assert!(e.starts_with("src: ") && e.contains(want), "{e}");
        }
        let close = m(&[(0, 100.0), (5, 100.0)]);
        let e = trace_of(&close, &close, "src").unwrap_err().to_string();
        assert!(e.contains("5 s apart"), "{e}");
    }
}
