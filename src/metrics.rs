//! The metric model a collector fills in: families of samples with labels.
//! It knows nothing of HTTP or of devices; `render` turns it into text.

/// Prometheus metric types we emit (text format 0.0.4 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Gauge,
    Counter,
    Histogram,
    Summary,
}

impl MetricKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Gauge => "gauge",
            MetricKind::Counter => "counter",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
        }
    }
}

/// One line of exposition: `name{suffix}{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Appended to the family name: "" for plain metrics, "_bucket"/"_sum"/"_count" for histograms.
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricKind,
    pub samples: Vec<Sample>,
}

impl MetricFamily {
    pub fn new(name: &'static str, help: &'static str, kind: MetricKind) -> Self {
        MetricFamily {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds one series.
    pub fn push(&mut self, labels: &[(&'static str, &str)], value: f64) {
        self.samples.push(Sample {
            suffix: "",
            labels: own_labels(labels),
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
        let base = own_labels(labels);
        for (le, n) in buckets {
            let mut l = base.clone();
            l.push(("le", format_value(*le)));
            self.samples.push(Sample {
                suffix: "_bucket",
                labels: l,
                value: *n as f64,
            });
        }
        let mut l = base.clone();
        l.push(("le", "+Inf".to_string()));
        self.samples.push(Sample {
            suffix: "_bucket",
            labels: l,
            value: count as f64,
        });
        self.samples.push(Sample {
            suffix: "_sum",
            labels: base.clone(),
            value: sum,
        });
        self.samples.push(Sample {
            suffix: "_count",
            labels: base,
            value: count as f64,
        });
    }
}

fn own_labels(labels: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
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

    fn family(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: MetricKind,
    ) -> &mut MetricFamily {
        if let Some(i) = self.families.iter().position(|f| f.name == name) {
            debug_assert_eq!(self.families[i].kind, kind, "{name} registered twice");
            return &mut self.families[i];
        }
        self.families.push(MetricFamily::new(name, help, kind));
        self.families.last_mut().expect("just pushed")
    }

    pub fn gauge(&mut self, name: &'static str, help: &'static str) -> &mut MetricFamily {
        self.family(name, help, MetricKind::Gauge)
    }

    pub fn counter(&mut self, name: &'static str, help: &'static str) -> &mut MetricFamily {
        self.family(name, help, MetricKind::Counter)
    }

    pub fn histogram(&mut self, name: &'static str, help: &'static str) -> &mut MetricFamily {
        self.family(name, help, MetricKind::Histogram)
    }

    /// Quantile series only (`quantile` label), e.g. of the last probe run.
    pub fn summary(&mut self, name: &'static str, help: &'static str) -> &mut MetricFamily {
        self.family(name, help, MetricKind::Summary)
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
                        .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
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

    #[test]
    fn unknown_values_produce_no_series() {
        let mut set = MetricSet::new();
        set.gauge("ssdwatch_test_ratio", "test")
            .push_opt(&[("device", "sda")], None);
        assert!(set.families()[0].samples.is_empty());
    }

    #[test]
    fn same_name_appends_to_one_family() {
        let mut set = MetricSet::new();
        set.gauge("ssdwatch_a", "a").push(&[("device", "sda")], 1.0);
        set.gauge("ssdwatch_a", "a").push(&[("device", "sdb")], 2.0);
        assert_eq!(set.families().len(), 1);
        assert_eq!(set.value("ssdwatch_a", &[("device", "sdb")]), Some(2.0));
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
