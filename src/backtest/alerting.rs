//! An alerting rule's states over a run of evaluations, from what its expression answered at
//! each: Prometheus' rule manager's state machine (pending from the first evaluation a label
//! set answers, firing once it has answered for `for`, kept firing `keep_firing_for` after it
//! stops, gone when it stops otherwise). The query engine evaluates the expression over the
//! whole trace at once (a range query at the evaluation interval); this replays the states.
//! Pure.

use super::engine::{Firing, Observed};
use super::rules::{Kind, Rule};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A label set as a query answers it.
pub(crate) type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, Copy)]
struct Active {
    since: i64,
    firing: bool,
    /// The evaluation at which a firing alert's expression first stopped answering.
    keep_since: Option<i64>,
}

/// The alert `rule`'s firing instances at each of `checks` (instants of `steps`), added to
/// `out`. `steps` are the evaluation instants in order; `answer` is the expression's result
/// series, each with the (instant, value) points at which it answered.
pub(crate) fn replay(
    rule: &Rule,
    steps: &[i64],
    answer: &[(Labels, Vec<(i64, f64)>)],
    checks: &BTreeSet<i64>,
    out: &mut Observed,
) {
    let Kind::Alert {
        hold,
        keep_firing_for,
    } = rule.kind
    else {
        return;
    };
    // Each answer's labels as the alert carries them: without the metric name, with the
    // rule's labels and its name. Two answers of one label set are one alert.
    let mut ids: BTreeMap<Labels, usize> = BTreeMap::new();
    let mut at: HashMap<i64, Vec<usize>> = HashMap::new();
    for (labels, points) in answer {
        let mut l = labels.clone();
        l.remove("__name__");
        for (k, v) in &rule.labels {
            l.insert(k.clone(), v.clone());
        }
        l.insert("alertname".into(), rule.name.clone());
        let n = ids.len();
        let id = *ids.entry(l).or_insert(n);
        for (t, _) in points {
            at.entry(*t).or_default().push(id);
        }
    }
    let severity: Vec<String> = {
        let mut v = vec![String::new(); ids.len()];
        for (l, &id) in &ids {
            v[id] = l.get("severity").cloned().unwrap_or_default();
        }
        v
    };
    let mut active: BTreeMap<usize, Active> = BTreeMap::new();
    for &t in steps {
        let now: BTreeSet<usize> = at.get(&t).into_iter().flatten().copied().collect();
        for &id in &now {
            active.entry(id).or_insert(Active {
                since: t,
                firing: false,
                keep_since: None,
            });
        }
        active.retain(|id, a| {
            if now.contains(id) {
                a.keep_since = None;
            } else {
                // Pending: gone. Firing: kept while `keep_firing_for` has not passed since
                // the expression stopped answering, else resolved.
                if !a.firing || keep_firing_for == 0 {
                    return false;
                }
                let since = *a.keep_since.get_or_insert(t);
                if t - since >= keep_firing_for {
                    return false;
                }
            }
            if !a.firing && t - a.since >= hold {
                a.firing = true;
            }
            true
        });
        if checks.contains(&t) {
            for (id, a) in &active {
                if a.firing {
                    out.entry(t).or_default().insert(Firing {
                        alertname: rule.name.clone(),
                        severity: severity[*id].clone(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(hold: i64, keep: i64) -> Rule {
        Rule {
            name: "Full".into(),
            expr: "x > 1".into(),
            labels: vec![("severity".into(), "critical".into())],
            kind: Kind::Alert {
                hold,
                keep_firing_for: keep,
            },
        }
    }

    /// The firing checks of an alert whose expression answers at the given minutes (one label
    /// set), evaluated every minute for 20 minutes and read at each.
    fn firing(hold: i64, keep: i64, answered: &[i64]) -> Vec<i64> {
        let steps: Vec<i64> = (0..20).map(|m| m * 60).collect();
        let checks: BTreeSet<i64> = steps.iter().copied().collect();
        let labels: Labels = [("mountpoint".to_string(), "/".to_string())].into();
        let answer = vec![(labels, answered.iter().map(|m| (m * 60, 2.0)).collect())];
        let mut out = Observed::new();
        replay(&alert(hold, keep), &steps, &answer, &checks, &mut out);
        for set in out.values() {
            assert!(
                set.iter()
                    .all(|f| f.alertname == "Full" && f.severity == "critical")
            );
        }
        out.keys().map(|t| t / 60).collect()
    }

    #[test]
    fn for_holds_from_the_first_answer_and_a_gap_starts_it_again() {
        // No hold: firing at the first answer.
        assert_eq!(firing(0, 0, &[3, 4]), [3, 4]);
        // for: 2m from minute 3: firing at 5 (5 - 3 >= 2), until it stops.
        assert_eq!(firing(120, 0, &[3, 4, 5, 6, 7]), [5, 6, 7]);
        // A gap while pending starts the hold again.
        assert_eq!(firing(120, 0, &[3, 4, 6, 7, 8, 9]), [8, 9]);
        // A gap while firing ends it; the next run holds again.
        assert_eq!(firing(60, 0, &[1, 2, 3, 5, 6, 7]), [2, 3, 6, 7]);
    }

    #[test]
    fn keep_firing_for_bridges_a_gap_shorter_than_it() {
        // Stops answering at 5: kept at 5 and 6 (0 and 1 min into 2 min), resolved at 7.
        assert_eq!(firing(0, 120, &[2, 3, 4]), [2, 3, 4, 5, 6]);
        // Back at 6: never resolved.
        assert_eq!(firing(0, 120, &[2, 3, 4, 6, 7]), [2, 3, 4, 5, 6, 7, 8, 9]);
        // A pending alert is not kept.
        assert_eq!(firing(300, 120, &[2, 3]), Vec::<i64>::new());
    }

    #[test]
    fn label_sets_are_alerts_of_their_own_and_the_metric_name_is_dropped() {
        let steps: Vec<i64> = (0..5).map(|m| m * 60).collect();
        let checks: BTreeSet<i64> = steps.iter().copied().collect();
        let l = |mp: &str, sev: &str| -> Labels {
            [
                ("__name__".to_string(), "x".to_string()),
                ("mountpoint".to_string(), mp.to_string()),
                ("severity".to_string(), sev.to_string()),
            ]
            .into()
        };
        let mut rule = alert(60, 0);
        rule.labels.clear();
        let answer = vec![
            (l("/a", "warning"), vec![(0, 1.0), (60, 1.0)]),
            (l("/b", "critical"), vec![(60, 1.0), (120, 1.0)]),
        ];
        let mut out = Observed::new();
        replay(&rule, &steps, &answer, &checks, &mut out);
        let sev = |t: i64| -> Vec<String> {
            out.get(&t)
                .into_iter()
                .flatten()
                .map(|f| f.severity.clone())
                .collect()
        };
        assert_eq!(sev(60), ["warning"]);
        assert_eq!(sev(120), ["critical"]);
        assert!(sev(180).is_empty());
    }
}
