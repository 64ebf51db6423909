//! The metric model a collector fills in: families of samples with labels.
//! It knows nothing of HTTP or of devices; `render` turns it into text.

use crate::catalogue::Family;
pub use crate::catalogue::MetricKind;
use compact_str::CompactString;

/// One line of exposition: `name{suffix}{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Appended to the family name: "" for plain metrics, "_bucket"/"_sum"/"_count" for histograms.
    pub suffix: &'static str,
    /// The values of its family's labels, in the catalogue's order, then a histogram bucket's
    /// `le` or a summary's `quantile` ([`MetricFamily::labels`] pairs them with their names,
    /// which are the family's and not repeated in every series). Values of up to 24 bytes
    /// (device names, most mount points, kinds) are kept inline: a series costs one
    /// allocation, not one per label. A large host's sample holds 10,000 series of 3 labels:
    /// 72 bytes of labels each instead of 120 with the names beside them.
    values: Box<[CompactString]>,
    pub value: f64,
}

/// The series of one family of the [catalogue](crate::catalogue), as a sample filled them in.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricKind,
    /// The label names the catalogue declares, checked on every push in debug builds.
    labels: &'static [&'static str],
    pub samples: Vec<Sample>,
}

impl MetricFamily {
    pub fn new(def: &'static Family) -> Self {
        MetricFamily {
            name: def.name,
            help: def.help,
            kind: def.kind,
            labels: def.labels,
            samples: Vec::new(),
        }
    }

    /// The label names and values of one of its samples, in order.
    pub fn labels<'a>(&self, s: &'a Sample) -> impl Iterator<Item = (&'static str, &'a str)> {
        let extra = match (s.suffix, self.kind) {
            ("_bucket", _) => Some("le"),
            (_, MetricKind::Summary) => Some("quantile"),
            _ => None,
        };
        (self.labels.iter().copied().chain(extra)).zip(s.values.iter().map(|v| v.as_str()))
    }

    /// The value of label `name` of one of its samples.
    pub fn label<'a>(&self, s: &'a Sample, name: &str) -> Option<&'a str> {
        self.labels(s).find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// A series whose label names differ from the catalogue's is a bug in the code that
    /// pushes it: the docs, rules and dashboards would not find it.
    fn check_labels(&self, labels: &[(&'static str, &str)]) {
        debug_assert!(
            labels
                .iter()
                .map(|(k, _)| *k)
                .eq(self.labels.iter().copied()),
            "{}: labels {:?} pushed, the catalogue declares {:?}",
            self.name,
            labels.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            self.labels
        );
    }

    /// Adds one series.
    pub fn push(&mut self, labels: &[(&'static str, &str)], value: f64) {
        let (plain, quantile) = match labels.split_last() {
            Some((("quantile", _), rest)) if self.kind == MetricKind::Summary => (rest, true),
            _ => (labels, false),
        };
        debug_assert!(
            quantile == (self.kind == MetricKind::Summary),
            "{}: a summary's series carry a quantile label, and only a summary's",
            self.name
        );
        self.check_labels(plain);
        self.samples.push(Sample {
            suffix: "",
            values: own_values(labels, None),
            value,
        });
    }

    /// Adds one series when the value is known; an unknown value produces no series, never a 0.
    pub fn push_opt(&mut self, labels: &[(&'static str, &str)], value: Option<f64>) {
        if let Some(v) = value {
            self.push(labels, v);
        }
    }

    /// Adds a whole histogram series: cumulative `buckets` as (upper bound, count), plus sum and count.
    /// The `+Inf` bucket is added from `count`.
    pub fn push_histogram(
        &mut self,
        labels: &[(&'static str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        self.check_labels(labels);
        let base = own_values(labels, None);
        for (le, n) in buckets {
            self.samples.push(Sample {
                suffix: "_bucket",
                values: own_values(labels, Some(&format_value(*le))),
                value: *n as f64,
            });
        }
        self.samples.push(Sample {
            suffix: "_bucket",
            values: own_values(labels, Some("+Inf")),
            value: count as f64,
        });
        self.samples.push(Sample {
            suffix: "_sum",
            values: base.clone(),
            value: sum,
        });
        self.samples.push(Sample {
            suffix: "_count",
            values: base,
            value: count as f64,
        });
    }
}

/// The values of `labels`, then `extra` (a bucket's `le`).
fn own_values(labels: &[(&'static str, &str)], extra: Option<&str>) -> Box<[CompactString]> {
    (labels.iter().map(|(_, v)| *v).chain(extra))
        .map(CompactString::new)
        .collect()
}

/// An ordered set of families, looked up by name so loops over devices can append to the same family.
#[derive(Debug, Default, Clone)]
pub struct MetricSet {
    families: Vec<MetricFamily>,
}

impl MetricSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The family declared as `def` in the [catalogue](crate::catalogue), created empty on first
    /// use, so loops over devices append to one family.
    pub fn family(&mut self, def: &'static Family) -> &mut MetricFamily {
        let i = match self.families.iter().position(|f| f.name == def.name) {
            Some(i) => i,
            None => {
                self.families.push(MetricFamily::new(def));
                self.families.len() - 1
            }
        };
        &mut self.families[i]
    }

    pub fn families(&self) -> &[MetricFamily] {
        &self.families
    }

    /// Looks a series value up (for tests and for collectors that read each other's output).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let fam = self.families.iter().find(|f| f.name == name)?;
        fam.samples
            .iter()
            .find(|s| {
                s.suffix.is_empty()
                    && labels
                        .iter()
                        .all(|(k, v)| fam.labels(s).any(|(lk, lv)| lk == *k && lv == *v))
            })
            .map(|s| s.value)
    }
}

/// Formats a sample value the way Prometheus parses it.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        // Rust's Display for f64 is the shortest representation that round-trips.
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    #[test]
    fn unknown_values_produce_no_series() {
        let mut set = MetricSet::new();
        set.family(&catalogue::DISK_SIZE_BYTES)
            .push_opt(&[("device", "sda")], None);
        assert!(set.families()[0].samples.is_empty());
    }

    #[test]
    fn same_name_appends_to_one_family() {
        let mut set = MetricSet::new();
        let size = &catalogue::DISK_SIZE_BYTES;
        set.family(size).push(&[("device", "sda")], 1.0);
        set.family(size).push(&[("device", "sdb")], 2.0);
        assert_eq!(set.families().len(), 1);
        assert_eq!(set.value(size.name, &[("device", "sdb")]), Some(2.0));
    }

    /// A sample keeps only its label values; the names come from its family: the catalogue's,
    /// then `le` for a histogram's buckets and `quantile` for a summary's series.
    #[test]
    fn a_sample_s_labels_pair_the_family_s_names_with_its_values() {
        let mut set = MetricSet::new();
        let l = [
            ("probe", "fsync"),
            ("mountpoint", "/srv"),
            ("device", "nvme0n1"),
        ];
        set.family(&catalogue::PROBE_LATENCY_SECONDS)
            .push_histogram(&l, &[(0.001, 3)], 0.002, 4);
        let mut q = l.to_vec();
        q.push(("quantile", "0.99"));
        set.family(&catalogue::PROBE_LAST_LATENCY_SECONDS)
            .push(&q, 0.004);
        let [hist, summary] = set.families() else {
            panic!("two families")
        };
        let names = |f: &MetricFamily, i: usize| -> Vec<(&str, String)> {
            f.labels(&f.samples[i])
                .map(|(k, v)| (k, v.to_string()))
                .collect()
        };
        let with = |extra: Option<(&'static str, &str)>| -> Vec<(&str, String)> {
            (l.iter().copied().chain(extra))
                .map(|(k, v)| (k, v.to_string()))
                .collect()
        };
        assert_eq!(names(hist, 0), with(Some(("le", "0.001"))));
        assert_eq!(names(hist, 1), with(Some(("le", "+Inf"))));
        assert_eq!(hist.samples[2].suffix, "_sum");
        assert_eq!(names(hist, 2), with(None));
        assert_eq!(names(summary, 0), with(Some(("quantile", "0.99"))));
        assert_eq!(hist.label(&hist.samples[0], "device"), Some("nvme0n1"));
        assert_eq!(hist.label(&hist.samples[2], "le"), None);
        assert_eq!(
            set.value(summary.name, &[("quantile", "0.99"), ("probe", "fsync")]),
            Some(0.004)
        );
    }

    #[test]
    fn values_format_for_prometheus() {
        assert_eq!(format_value(1.0), "1");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(512000.0 * 1e9), "512000000000000");
    }
}
