//! The text format 0.0.4 as ssdwatch writes it, read back into series for the guest suites'
//! checks: one parser, so every suite reads a scrape alike.

use std::collections::BTreeMap;

/// One series of a text-format exposition.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the text format 0.0.4 as ssdwatch writes it (escaped label values, no timestamps).
pub fn parse_exposition(text: &str) -> Vec<Series> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name_labels, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("line {}: no value: {line}", n + 1));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("line {}: bad value {value:?}: {e}", n + 1));
        let (name, labels) = match name_labels.split_once('{') {
            None => (name_labels.to_string(), BTreeMap::new()),
            Some((name, rest)) => (name.to_string(), parse_labels(rest, n + 1)),
        };
        out.push(Series {
            name,
            labels,
            value,
        });
    }
    out
}

fn parse_labels(rest: &str, line: usize) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key.trim_start_matches(',').to_string();
        if key == "}" || key.is_empty() {
            break;
        }
        assert_eq!(
            chars.next(),
            Some('"'),
            "line {line}: label {key} not quoted"
        );
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => panic!("line {line}: dangling escape"),
                },
                Some('"') => break,
                Some(c) => value.push(c),
                None => panic!("line {line}: unterminated label value"),
            }
        }
        labels.insert(key, value);
        if chars.peek() == Some(&'}') {
            break;
        }
    }
    labels
}

/// The value of the one series of `metric` whose labels include all of `want`.
pub fn value(series: &[Series], metric: &str, want: &[(&str, &str)]) -> Option<f64> {
    let hits: Vec<&Series> = series
        .iter()
        .filter(|s| s.name == metric)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(hits.len() <= 1, "{metric} {want:?} matches {hits:?}");
    hits.first().map(|s| s.value)
}

pub fn must(series: &[Series], metric: &str, want: &[(&str, &str)], file: &str) -> f64 {
    value(series, metric, want).unwrap_or_else(|| panic!("{file}: no {metric} with {want:?}"))
}
