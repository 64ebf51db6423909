//! Rules that can never produce a sample from the replayed series are left out of the rule
//! files promtool evaluates: every rule costs the engine time at every step (a 6-month trace is
//! 262,800 steps at 1 min), and the shipped files hold drive, probe and database rules a fill
//! trace has no series for. Leaving out a rule whose result is always empty changes no other
//! rule's result, so the alerts that remain fire exactly as with the whole files. Pure.
//!
//! A rule is kept when its expression names any series the replay writes or any kept
//! recording rule's name (to a fixed point), and always when it could answer without any
//! input (`absent`, `vector`, `time`, `scalar`), selects by `__name__` or reads `ALERTS`.

use serde_yaml_ng::Value;
use std::collections::BTreeSet;

/// What could make an expression answer without any series named in it: a call of a function
/// that answers from nothing, a selection by name, the alerts' own series.
const ALWAYS_LIVE: &str =
    r"\b(absent|absent_over_time|vector|time|scalar|pi)\s*\(|__name__|\bALERTS";

/// The metric names an expression reads (a superset: label names in `by (...)` lists and
/// keywords come along, which can only keep a rule, never drop one).
pub(crate) fn names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    let ident_start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':';
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    while i < b.len() {
        let c = b[i];
        match c {
            // Strings, label matchers and ranges hold no metric name.
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    if b[i] == b'\\' && c != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'{' | b'[' => {
                let close = if c == b'{' { b'}' } else { b']' };
                while i < b.len() && b[i] != close {
                    if b[i] == b'"' {
                        i += 1;
                        while i < b.len() && b[i] != b'"' {
                            if b[i] == b'\\' {
                                i += 1;
                            }
                            i += 1;
                        }
                    }
                    i += 1;
                }
                i += 1;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == b'.' => {
                // A number or a duration (6h, 1e3): no name.
                while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                    i += 1;
                }
            }
            c if ident_start(c) => {
                let start = i;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                let word = &expr[start..i];
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                // A function or an aggregation is followed by its parenthesis.
                if j >= b.len() || b[j] != b'(' {
                    out.insert(word.to_string());
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn always_live(expr: &str) -> bool {
    static RE: std::sync::OnceLock<Option<regex_lite::Regex>> = std::sync::OnceLock::new();
    // A pattern that did not compile keeps every rule (nothing is left out by mistake).
    RE.get_or_init(|| regex_lite::Regex::new(ALWAYS_LIVE).ok())
        .as_ref()
        .is_none_or(|re| re.is_match(expr))
}

/// A rule file that could not be read or written back; `file` is its place in the list (1 the first).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PruneError {
    #[error("{0}")]
    NotYaml(#[from] super::NotYaml),
    #[error("rule file {file} of the list: writing it back without the rules left out: {error}")]
    Write {
        file: usize,
        error: serde_yaml_ng::Error,
    },
}

/// Rule files with the rules that can never fire or record left out, given the series names
/// the input has; each file's text comes back with how many rules it kept and had.
pub(crate) fn prune(
    files: &[String],
    series: &BTreeSet<String>,
) -> Result<Vec<(String, usize, usize)>, PruneError> {
    let mut docs: Vec<Value> = files
        .iter()
        .map(|t| serde_yaml_ng::from_str(t).map_err(|e| super::NotYaml(e.to_string())))
        .collect::<Result<_, _>>()?;
    let rules_of = |d: &Value| -> Vec<(Option<String>, String)> {
        d["groups"]
            .as_sequence()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
            .map(|r| {
                (
                    r["record"].as_str().map(str::to_string),
                    expr_text(&r["expr"]),
                )
            })
            .collect()
    };
    let all: Vec<(Option<String>, String)> = docs.iter().flat_map(rules_of).collect();
    let mut available = series.clone();
    let live = |e: &str, available: &BTreeSet<String>| {
        always_live(e) || {
            let n = names(e);
            n.is_empty() || n.iter().any(|x| available.contains(x))
        }
    };
    // Recording rules that can produce something, to a fixed point.
    loop {
        let before = available.len();
        for (record, expr) in &all {
            if let Some(r) = record
                && live(expr, &available)
            {
                available.insert(r.clone());
            }
        }
        if available.len() == before {
            break;
        }
    }
    let mut out = Vec::new();
    for (file, d) in docs.iter_mut().enumerate() {
        let (mut kept, mut had) = (0, 0);
        if let Some(groups) = d.get_mut("groups").and_then(Value::as_sequence_mut) {
            for g in groups.iter_mut() {
                if let Some(rules) = g.get_mut("rules").and_then(Value::as_sequence_mut) {
                    had += rules.len();
                    rules.retain(|r| live(&expr_text(&r["expr"]), &available));
                    kept += rules.len();
                }
            }
            groups.retain(|g| g["rules"].as_sequence().is_some_and(|r| !r.is_empty()));
        }
        let text = serde_yaml_ng::to_string(d).map_err(|error| PruneError::Write {
            file: file + 1,
            error,
        })?;
        out.push((text, kept, had));
    }
    Ok(out)
}

/// An `expr` as text (YAML may give a number: `expr: 1`).
fn expr_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_names_an_expression_reads() {
        assert_eq!(
            names(
                r#"predict_linear(node_filesystem_avail_bytes{job="node",x="a{b"}[6h], 24*60*60) < 0 and on (instance) node_filesystem_readonly == 0"#
            ),
            set(&[
                "and",
                "instance",
                "node_filesystem_avail_bytes",
                "node_filesystem_readonly"
            ])
        );
        assert_eq!(
            names("sum by (job) (rate(x_total[5m] offset 1d)) / ignoring(a) y:rec # note z\n"),
            set(&["a", "job", "offset", "sum", "x_total", "y:rec"])
        );
        assert!(names("1e3 + 0.5").is_empty());
    }

    #[test]
    fn rules_without_any_input_are_left_out_and_chains_are_followed() {
        let rules = r#"groups:
  - name: fs
    rules:
      - record: a:ratio
        expr: node_x / node_y
      - record: b:late
        expr: a:ratio > 0.5
      - alert: Fill
        expr: b:late
      - alert: Drive
        expr: smart_wear > 90
      - alert: Missing
        expr: absent(up{job="node"})
      - alert: Stale
        expr: time() - smart_last_success_timestamp_seconds > 3600
  - name: drives
    rules:
      - record: c:wear
        expr: deriv(smart_wear[7d])
"#;
        let out = prune(&[rules.to_string()], &set(&["node_x"])).unwrap();
        let (text, kept, had) = &out[0];
        assert_eq!((*kept, *had), (5, 7));
        for kept in ["a:ratio", "b:late", "Fill", "Missing", "Stale"] {
            assert!(text.contains(kept), "{kept}: {text}");
        }
        for gone in ["Drive", "c:wear", "drives"] {
            assert!(!text.contains(gone), "{gone}: {text}");
        }
        // Without `time()` called, a name that merely contains "time" keeps nothing alive.
        let rules = "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x_timestamp_seconds > 1\n";
        let (text, kept, _) = &prune(&[rules.to_string()], &set(&[])).unwrap()[0];
        assert_eq!(*kept, 0, "{text}");
        assert!(!text.contains("alert: A"), "{text}");
    }
}
