//! The rule files as the query engine evaluates them: every rule in the order the rule manager
//! runs them at each step (groups in the given order, rules in file order), and whether that
//! evaluation can be done one rule at a time over the whole trace with range queries and give
//! what the rule manager gives step by step. Pure.
//!
//! It can when every rule reads only series written before it in that order (the inputs, or
//! recording rules evaluated earlier at the same step), no rule reads `ALERTS` (written by the
//! rule manager's alert state, not by an expression) or selects by `__name__`, and no alert's
//! labels are templates. Otherwise the backtest runs the rule manager itself (promtool).

use super::engine::parse_duration;
use super::prune;
use serde_yaml_ng::Value;
use std::collections::BTreeSet;

/// What a rule produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Record,
    /// An alert held `hold` seconds (`for`) and kept firing `keep_firing_for` seconds after its
    /// expression stops answering.
    Alert {
        hold: i64,
        keep_firing_for: i64,
    },
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The recorded metric's or the alert's name.
    pub name: String,
    pub expr: String,
    /// The rule's own labels, added to (or replacing) those of each result.
    pub labels: Vec<(String, String)>,
    pub kind: Kind,
}

/// A rule file's rule that cannot be evaluated as written, named by its group or its name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum RuleError {
    #[error("{0}")]
    NotYaml(String),
    #[error("group {group}: a rule with neither record nor alert")]
    NeitherRecordNorAlert { group: String },
    #[error("rule {rule}: no expr")]
    NoExpr { rule: String },
    #[error("rule {rule}: {key} {value:?} not understood")]
    Duration {
        rule: String,
        key: String,
        value: String,
    },
}

/// Why range queries would not give what the rule manager gives, naming the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum NotRangeEvaluable {
    #[error("rule {rule} reads ALERTS, which only the rule manager writes")]
    ReadsAlerts { rule: String },
    #[error("rule {rule} selects series by __name__")]
    SelectsByName { rule: String },
    #[error("alert {rule}'s label {label} is a template")]
    TemplateLabel { rule: String, label: String },
    #[error(
        "rule {rule} reads {series}, which is recorded after it: the rule manager would give it the previous step's value"
    )]
    ReadsALaterRecord { rule: String, series: String },
}

/// Every rule of `texts` (rule files' YAML) in evaluation order: groups in `group_order` (a
/// group not named there after those that are, in file order), rules in file order.
pub(crate) fn parse(texts: &[String], group_order: &[String]) -> Result<Vec<Rule>, RuleError> {
    let mut groups: Vec<(usize, String, Vec<Rule>)> = Vec::new();
    for text in texts {
        let doc: Value =
            serde_yaml_ng::from_str(text).map_err(|e| RuleError::NotYaml(e.to_string()))?;
        for g in doc["groups"].as_sequence().into_iter().flatten() {
            let gname = g["name"].as_str().unwrap_or_default().to_string();
            let mut rules = Vec::new();
            for r in g["rules"].as_sequence().into_iter().flatten() {
                rules.push(rule(r, &gname)?);
            }
            let rank = group_order
                .iter()
                .position(|n| *n == gname)
                .unwrap_or(group_order.len());
            groups.push((rank, gname, rules));
        }
    }
    // Stable: groups of one rank keep their file order.
    groups.sort_by_key(|g| g.0);
    Ok(groups.into_iter().flat_map(|g| g.2).collect())
}

fn rule(r: &Value, group: &str) -> Result<Rule, RuleError> {
    let (name, alert) = match (r["record"].as_str(), r["alert"].as_str()) {
        (Some(n), None) => (n.to_string(), false),
        (None, Some(n)) => (n.to_string(), true),
        _ => {
            return Err(RuleError::NeitherRecordNorAlert {
                group: group.to_string(),
            });
        }
    };
    let expr = match &r["expr"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(RuleError::NoExpr { rule: name }),
    };
    let labels = r["labels"]
        .as_mapping()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.as_str()?.to_string(), v))
        })
        .collect();
    let held = |k: &str| -> Result<i64, RuleError> {
        match r[k].as_str() {
            None => Ok(0),
            Some(d) => parse_duration(d.trim()).ok_or_else(|| RuleError::Duration {
                rule: name.clone(),
                key: k.to_string(),
                value: d.to_string(),
            }),
        }
    };
    let kind = if alert {
        Kind::Alert {
            hold: held("for")?,
            keep_firing_for: held("keep_firing_for")?,
        }
    } else {
        Kind::Record
    };
    Ok(Rule {
        name,
        expr,
        labels,
        kind,
    })
}

/// `Ok` when range queries, one rule after another, give what the rule manager gives; else why
/// not.
pub(crate) fn range_evaluable(rules: &[Rule]) -> Result<(), NotRangeEvaluable> {
    let recorded: BTreeSet<&str> = rules
        .iter()
        .filter(|r| r.kind == Kind::Record)
        .map(|r| r.name.as_str())
        .collect();
    let mut written: BTreeSet<&str> = BTreeSet::new();
    for r in rules {
        let code = strip_strings(&r.expr);
        if code.contains("ALERTS") {
            return Err(NotRangeEvaluable::ReadsAlerts {
                rule: r.name.clone(),
            });
        }
        if r.expr.contains("__name__") {
            return Err(NotRangeEvaluable::SelectsByName {
                rule: r.name.clone(),
            });
        }
        if let Kind::Alert { .. } = r.kind
            && let Some((k, _)) = r.labels.iter().find(|(_, v)| v.contains("{{"))
        {
            return Err(NotRangeEvaluable::TemplateLabel {
                rule: r.name.clone(),
                label: k.clone(),
            });
        }
        for n in prune::names(&r.expr) {
            if recorded.contains(n.as_str()) && !written.contains(n.as_str()) {
                return Err(NotRangeEvaluable::ReadsALaterRecord {
                    rule: r.name.clone(),
                    series: n,
                });
            }
        }
        if r.kind == Kind::Record {
            written.insert(&r.name);
        }
    }
    Ok(())
}

/// `expr` without its quoted strings (a label value may say anything).
fn strip_strings(expr: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
groups:
  - name: b
    rules:
      - alert: Late
        expr: x:y > 1
        for: 1h30m
        keep_firing_for: 5m
        labels:
          severity: warning
  - name: a
    rules:
      - record: x:y
        expr: x * 2
        labels:
          kind: doubled
"#;

    #[test]
    fn rules_come_in_group_order_with_their_holds_and_labels() {
        let rules = parse(&[FILE.to_string()], &["a".into(), "b".into()]).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].name, "x:y");
        assert_eq!(
            rules[0].labels,
            [("kind".to_string(), "doubled".to_string())]
        );
        assert_eq!(
            rules[1].kind,
            Kind::Alert {
                hold: 5400,
                keep_firing_for: 300
            }
        );
        assert!(range_evaluable(&rules).is_ok());
        // In file order the alert reads a recording made after it.
        let rules = parse(&[FILE.to_string()], &[]).unwrap();
        let why = range_evaluable(&rules).unwrap_err().to_string();
        assert!(why.contains("x:y") && why.contains("Late"), "{why}");
    }

    #[test]
    fn what_only_the_rule_manager_can_answer_is_named() {
        let one = |rule: &str| -> String {
            let text = format!("groups:\n  - name: g\n    rules:\n{rule}");
            range_evaluable(&parse(&[text], &[]).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(one("      - alert: A\n        expr: ALERTS > 0\n").contains("ALERTS"));
        assert!(
            one("      - record: r\n        expr: '{__name__=~\"x.*\"}'\n").contains("__name__")
        );
        assert!(
            one("      - alert: A\n        expr: x > 0\n        labels:\n          who: '{{ $labels.instance }}'\n")
                .contains("template")
        );
        // A rule reading its own output.
        assert!(one("      - record: r\n        expr: r + 1\n").contains("recorded after"));
        // A label value that says ALERTS is only a string.
        let text = "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: x{note=\"ALERTS\"}\n";
        assert!(range_evaluable(&parse(&[text.into()], &[]).unwrap()).is_ok());
    }

    #[test]
    fn a_rule_without_a_name_or_an_expression_or_with_a_bad_hold_is_an_error() {
        let bad = |rule: &str| {
            parse(&[format!("groups:\n  - name: g\n    rules:\n{rule}")], &[])
                .map_err(|e| e.to_string())
        };
        assert!(bad("      - expr: x\n").unwrap_err().contains("neither"));
        assert!(bad("      - record: r\n").unwrap_err().contains("no expr"));
        assert!(
            bad("      - alert: A\n        expr: x\n        for: soon\n")
                .unwrap_err()
                .contains("for \"soon\"")
        );
    }
}
