//! The one encoder of the Prometheus text exposition format 0.0.4.
//! Pure string building: it never looks at devices, clocks or collectors.

use crate::metrics::{MetricFamily, format_value};
use std::fmt::Write;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Appends families (sorted by name for a stable, reviewable output) to `out`.
pub fn render_families(out: &mut String, families: &[MetricFamily]) {
    for fam in sorted(families) {
        render_family(out, fam);
    }
}

/// Families in the order they are rendered: by name.
pub fn sorted(families: &[MetricFamily]) -> Vec<&MetricFamily> {
    let mut sorted: Vec<&MetricFamily> = families.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(b.name));
    sorted
}

/// Appends one family. A family without samples is left out entirely (no HELP/TYPE orphan lines).
pub fn render_family(out: &mut String, fam: &MetricFamily) {
    if fam.samples.is_empty() {
        return;
    }
    out.push_str("# HELP ");
    out.push_str(fam.name);
    out.push(' ');
    escape_help(out, fam.help);
    out.push('\n');
    out.push_str("# TYPE ");
    out.push_str(fam.name);
    out.push(' ');
    out.push_str(fam.kind.as_str());
    out.push('\n');
    for s in &fam.samples {
        out.push_str(fam.name);
        out.push_str(s.suffix);
        let mut labels = fam.labels(s).peekable();
        if labels.peek().is_some() {
            out.push('{');
            for (i, (k, v)) in labels.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push_str("=\"");
                escape_label_value(out, v);
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        write_value(out, s.value);
        out.push('\n');
    }
}

/// Appends a sample value as Prometheus parses it ([`format_value`]), without a String of its
/// own: integers (the common case: bytes, counts) by their digits, other values through
/// Display, the shortest text that reads back to the same float.
fn write_value(out: &mut String, v: f64) {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let mut n = v as i64;
        if n < 0 {
            out.push('-');
            n = -n;
        }
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[i..] {
            out.push(d as char);
        }
    } else if v.is_finite() {
        let _ = write!(out, "{v}");
    } else {
        out.push_str(&format_value(v));
    }
}

/// Whether a text needs no escaping (the common case): it is then appended whole.
fn plain(s: &str, label: bool) -> bool {
    !s.bytes()
        .any(|b| b == b'\\' || b == b'\n' || (label && b == b'"'))
}

fn escape_help(out: &mut String, s: &str) {
    if plain(s, false) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Appends a label value escaped as the text format (and OpenMetrics) asks: `\\`, `\\n`, `\\"`.
pub(crate) fn escape_label_value(out: &mut String, s: &str) {
    if plain(s, true) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_written_as_the_string_formatting_wrote_it() {
        let old = |v: f64| {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                (v as i64).to_string()
            } else {
                format_value(v)
            }
        };
        for v in [
            0.0,
            -0.0,
            7.0,
            -7.0,
            1234567890.0,
            999_999_999_999_999.0,
            1e15,
            -3e16,
            0.5,
            -1.25e-9,
            1795751609.3400624,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
        ] {
            let mut out = String::new();
            write_value(&mut out, v);
            assert_eq!(out, old(v), "{v:?}");
        }
    }

    #[test]
    fn text_needing_no_escape_is_appended_whole_and_the_rest_escaped() {
        let mut out = String::new();
        escape_label_value(&mut out, "/srv/pg");
        escape_label_value(&mut out, "a\"b\\c\nd");
        assert_eq!(out, "/srv/pga\\\"b\\\\c\\nd");
        let mut out = String::new();
        escape_help(&mut out, "say \"x\"");
        escape_help(&mut out, "a\\b\nc");
        assert_eq!(out, "say \"x\"a\\\\b\\nc");
    }
    use crate::catalogue::Family;
    use crate::metrics::{MetricKind, MetricSet};

    /// A family as the catalogue declares one, with a help text that needs escaping.
    static AVAIL: Family = Family {
        name: "ssdwatch_filesystem_avail_bytes",
        kind: MetricKind::Gauge,
        unit: "bytes",
        help: "Bytes available.\nTo non-root.",
        labels: &["mountpoint"],
    };

    #[test]
    fn renders_help_type_and_escaped_labels() {
        let mut set = MetricSet::new();
        set.family(&AVAIL)
            .push(&[("mountpoint", "/mnt/a \"b\"\\c")], 1024.0);
        let mut out = String::new();
        render_families(&mut out, set.families());
        assert_eq!(
            out,
            "# HELP ssdwatch_filesystem_avail_bytes Bytes available.\\nTo non-root.\n\
             # TYPE ssdwatch_filesystem_avail_bytes gauge\n\
             ssdwatch_filesystem_avail_bytes{mountpoint=\"/mnt/a \\\"b\\\"\\\\c\"} 1024\n"
        );
    }

    #[test]
    fn histogram_has_inf_bucket_sum_and_count() {
        let mut set = MetricSet::new();
        static LATENCY: Family = Family {
            name: "ssdwatch_probe_latency_seconds",
            kind: MetricKind::Histogram,
            unit: "seconds",
            help: "Latency.",
            labels: &["probe"],
        };
        set.family(&LATENCY).push_histogram(
            &[("probe", "sync_write_4k")],
            &[(0.001, 3), (0.01, 5)],
            0.02,
            6,
        );
        let mut out = String::new();
        render_families(&mut out, set.families());
        assert!(out.contains(
            "ssdwatch_probe_latency_seconds_bucket{probe=\"sync_write_4k\",le=\"0.001\"} 3\n"
        ));
        assert!(out.contains(
            "ssdwatch_probe_latency_seconds_bucket{probe=\"sync_write_4k\",le=\"+Inf\"} 6\n"
        ));
        assert!(out.contains("ssdwatch_probe_latency_seconds_sum{probe=\"sync_write_4k\"} 0.02\n"));
        assert!(out.contains("ssdwatch_probe_latency_seconds_count{probe=\"sync_write_4k\"} 6\n"));
    }

    #[test]
    fn empty_family_renders_nothing() {
        let mut set = MetricSet::new();
        set.family(&AVAIL);
        let mut out = String::new();
        render_families(&mut out, set.families());
        assert!(out.is_empty());
    }
}
