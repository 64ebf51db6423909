//! A long trace cut into pieces promtool evaluates at once, each piece started early by a
//! warm-up long enough that every rule's result in the piece's own span is the one the whole
//! run would have. Pure: how long a warm-up the rules need, and where the pieces are.
//!
//! A rule at an instant reads its series over its range windows, offsets and subquery ranges
//! back from that instant (plus the 5-minute lookback of an instant selector), the recordings it
//! reads over theirs, and an alert carries its `for` and `keep_firing_for`: its state at `t`
//! depends on nothing before `t - memory`. A piece whose evaluation starts `memory` before its
//! own span therefore agrees with the whole run over that span, to the step. What would break
//! this (an `@` modifier or a negative offset reading outside the piece, a recording reading
//! itself, calendar functions over a shift that is not whole years) keeps the trace in one piece.

use super::NotYaml;
use super::engine::parse_duration;
use crate::time::DAY;
use serde_yaml_ng::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Prometheus' lookback of an instant vector selector (`--query.lookback-delta`, which promtool
/// leaves at its default).
pub(crate) const LOOKBACK_SECONDS: i64 = 300;

/// Functions of the calendar that give other answers under a shift of whole weeks.
const CALENDAR_FUNCTIONS: [&str; 5] = [
    "day_of_month",
    "day_of_year",
    "days_in_month",
    "month",
    "year",
];
/// Functions of the calendar that give the same answer under a shift of whole weeks (and of
/// whole days for all but `day_of_week`).
const WEEK_FUNCTIONS: [&str; 3] = ["day_of_week", "hour", "minute"];

/// Why a trace stays in one piece, or how long the warm-up before each piece is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Warmup {
    /// The pieces agree with the whole run after this many seconds; `align` is what every
    /// piece's start is a multiple of from the whole run's origin (a week when a rule reads the
    /// weekday or the hour, so those read the same).
    Seconds { memory: i64, align: i64 },
    /// One piece only, and why.
    Whole(Uncuttable),
}

/// Why the rules can't be cut into pieces, naming the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Uncuttable {
    #[error("rule {rule} calls {function}(), which a shifted piece would answer differently")]
    Calendar {
        rule: String,
        function: &'static str,
    },
    #[error("rule {rule}: duration {text:?} not understood")]
    Duration { rule: String, text: String },
    #[error("rule {rule}: unclosed [")]
    UnclosedRange { rule: String },
    #[error("rule {rule}: an @ modifier reads a fixed instant")]
    FixedInstant { rule: String },
    #[error("rule {rule}: a negative offset reads ahead")]
    NegativeOffset { rule: String },
    #[error("a recording reads itself (through other rules): its memory has no bound")]
    Unbounded,
}

/// One rule as the warm-up sees it.
struct RuleInfo {
    /// Its recording's name, or `None` for an alert.
    record: Option<String>,
    /// The longest span back from the evaluation instant its expression itself reads.
    reach: i64,
    /// `for` + `keep_firing_for` of an alert.
    hold: i64,
    /// The recordings it reads, and whether it reads `ALERTS`.
    reads: BTreeSet<String>,
    reads_alerts: bool,
}

/// An expression with its strings and comments blanked, so no `[`, `offset` or `@` inside a
/// label value is taken for syntax.
fn code_only(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                out.push(' ');
                while let Some(d) = chars.next() {
                    if d == '\\' && c != '`' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '#' => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn duration(text: &str, rule: &str) -> Result<i64, Uncuttable> {
    // Prometheus writes a duration as `1h30m`, `500ms`; promtool's printing is the same form.
    parse_duration(text.trim()).ok_or_else(|| Uncuttable::Duration {
        rule: rule.to_string(),
        text: text.trim().to_string(),
    })
}

/// How far back from its evaluation instant an expression reads (range windows, subquery
/// ranges plus a step for their alignment, offsets; the sum of the longest of each, which is
/// at least what any one selector reads), or why it can't be cut into pieces.
fn reach(expr: &str, rule: &str, eval: i64) -> Result<i64, Uncuttable> {
    let code = code_only(expr);
    let (mut range, mut offset) = (0i64, 0i64);
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' => {
                let end = code[i..].find(']').map(|e| i + e).ok_or_else(|| {
                    Uncuttable::UnclosedRange {
                        rule: rule.to_string(),
                    }
                })?;
                let inner = &code[i + 1..end];
                let r = match inner.split_once(':') {
                    Some((r, step)) => {
                        // No step: the evaluation interval (promtool's subquery default).
                        let step = if step.trim().is_empty() {
                            eval
                        } else {
                            duration(step, rule)?
                        };
                        duration(r, rule)? + step
                    }
                    None => duration(inner, rule)?,
                };
                range = range.max(r);
                i = end + 1;
            }
            b'@' => {
                return Err(Uncuttable::FixedInstant {
                    rule: rule.to_string(),
                });
            }
            _ => i += 1,
        }
    }
    for (k, _) in code.match_indices("offset") {
        let before_ok = k == 0 || !is_ident(b[k - 1]);
        let rest = &code[k + "offset".len()..];
        if !before_ok || !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        if rest.starts_with('-') {
            return Err(Uncuttable::NegativeOffset {
                rule: rule.to_string(),
            });
        }
        let d: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        offset = offset.max(duration(&d, rule)?);
    }
    Ok(range + offset)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// Whether `expr` calls `f` (a word followed by its parenthesis).
fn calls(code: &str, f: &str) -> bool {
    let b = code.as_bytes();
    code.match_indices(f).any(|(k, _)| {
        let before = k == 0 || !is_ident(b[k - 1]);
        let after = code[k + f.len()..].trim_start().starts_with('(');
        before && after && (k + f.len() >= b.len() || !is_ident(b[k + f.len()]))
    })
}

/// The warm-up the rule files need (their texts as promtool evaluates them), `eval` the
/// evaluation interval in seconds.
pub(crate) fn warmup(rule_texts: &[String], eval: i64) -> Result<Warmup, NotYaml> {
    let mut rules: Vec<RuleInfo> = Vec::new();
    let mut week = false;
    for text in rule_texts {
        let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| NotYaml(e.to_string()))?;
        for g in doc["groups"].as_sequence().into_iter().flatten() {
            for r in g["rules"].as_sequence().into_iter().flatten() {
                let name = r["record"]
                    .as_str()
                    .or(r["alert"].as_str())
                    .unwrap_or("?")
                    .to_string();
                let expr = match &r["expr"] {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                let code = code_only(&expr);
                if let Some(f) = CALENDAR_FUNCTIONS.iter().find(|f| calls(&code, f)) {
                    return Ok(Warmup::Whole(Uncuttable::Calendar {
                        rule: name,
                        function: f,
                    }));
                }
                week |= WEEK_FUNCTIONS.iter().any(|f| calls(&code, f));
                let reach = match reach(&expr, &name, eval) {
                    Ok(r) => r,
                    Err(why) => return Ok(Warmup::Whole(why)),
                };
                let held = |k: &str| -> Result<i64, Uncuttable> {
                    r[k].as_str().map_or(Ok(0), |d| duration(d, &name))
                };
                let hold = match (held("for"), held("keep_firing_for")) {
                    (Ok(a), Ok(b)) => a + b,
                    (Err(why), _) | (_, Err(why)) => return Ok(Warmup::Whole(why)),
                };
                rules.push(RuleInfo {
                    record: r["record"].as_str().map(str::to_string),
                    reach,
                    hold,
                    reads: super::prune::names(&expr),
                    reads_alerts: code.contains("ALERTS"),
                });
            }
        }
    }
    // Each recording's memory: its reach, the lookback, a step (a later group's recording is
    // read one evaluation late) and the longest memory of what it reads.
    let mut memory: BTreeMap<String, i64> = BTreeMap::new();
    let recorded: BTreeSet<&str> = rules.iter().filter_map(|r| r.record.as_deref()).collect();
    // To a fixed point; more rounds than rules means a recording reads itself.
    let own = |r: &RuleInfo| r.reach + LOOKBACK_SECONDS + eval;
    let mut alerts_memory = 0;
    for round in 0..=rules.len() + 1 {
        let mut changed = false;
        for r in &rules {
            let mut m = own(r);
            for d in r.reads.iter().filter(|d| recorded.contains(d.as_str())) {
                m = m.max(own(r) + memory.get(d).copied().unwrap_or(0));
            }
            if r.reads_alerts {
                m = m.max(own(r) + alerts_memory);
            }
            match &r.record {
                Some(name) => {
                    if memory.get(name).is_none_or(|old| *old < m) {
                        memory.insert(name.clone(), m);
                        changed = true;
                    }
                }
                None => {
                    if m + r.hold > alerts_memory {
                        alerts_memory = m + r.hold;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
        if round > rules.len() {
            return Ok(Warmup::Whole(Uncuttable::Unbounded));
        }
    }
    let longest = memory
        .values()
        .copied()
        .max()
        .unwrap_or(0)
        .max(alerts_memory);
    let align = if week { 7 * DAY } else { 1 };
    Ok(Warmup::Seconds {
        memory: longest,
        align,
    })
}

/// One piece of the trace: promtool's time 0 is `origin` (Unix seconds); its own span, whose
/// checks it answers, is `from..to` (`to` excluded but for the last piece).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub origin: i64,
    pub from: i64,
    pub to: i64,
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: i64, b: i64) -> Option<i64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// The pieces of a trace from `start` to `end` (Unix seconds) whose whole run starts at
/// `shift`: at most `pieces`, each piece's own span at least as long as the warm-up (a shorter
/// one would cost more than it saves), every origin `shift` plus a multiple of `grid` (the
/// series' step), `eval`, the check interval and the warm-up's alignment, so each piece's
/// samples, evaluations and checks fall where the whole run's do. The first piece is the whole
/// run's own beginning.
pub(crate) fn plan(
    shift: i64,
    start: i64,
    end: i64,
    steps: [i64; 3],
    warmup: &Warmup,
    pieces: usize,
) -> Vec<Piece> {
    let whole = vec![Piece {
        origin: shift,
        from: start,
        to: end,
    }];
    let Warmup::Seconds { memory, align } = *warmup else {
        return whole;
    };
    let Some(unit) = steps
        .iter()
        .try_fold(align.max(1), |acc, s| lcm(acc, (*s).max(1)))
    else {
        return whole;
    };
    let span = end - start;
    let n = (pieces.max(1) as i64).min(span / memory.max(1)).max(1);
    if n == 1 {
        return whole;
    }
    let mut out = Vec::new();
    let mut from = start;
    for k in 1..=n {
        let to = if k == n { end } else { start + span * k / n };
        // The latest aligned origin at least the warm-up before `from`, never before the
        // whole run's.
        let origin = if k == 1 {
            shift
        } else {
            shift + ((from - memory - shift).div_euclid(unit) * unit).max(0)
        };
        if to > from || k == n {
            out.push(Piece { origin, from, to });
        }
        from = to;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::HOUR;

    fn one(rules: &str) -> Warmup {
        let text = format!("groups:\n  - name: g\n    rules:\n{rules}");
        warmup(&[text], 60).unwrap()
    }

    #[test]
    fn the_warm_up_covers_windows_offsets_chains_and_for() {
        // A recording over 6 h, read by an alert over 1 h with `for: 30m`.
        let w = one(
            "      - record: r:deriv\n        expr: deriv(a[6h])\n      - alert: A\n        expr: max_over_time(r:deriv[1h]) < 0\n        for: 30m\n        keep_firing_for: 10m\n",
        );
        let step = LOOKBACK_SECONDS + 60;
        assert_eq!(
            w,
            Warmup::Seconds {
                memory: (6 * HOUR + step) + (HOUR + step) + 40 * 60,
                align: 1
            }
        );
        // Offsets add to the range; a subquery's step counts; strings are not syntax.
        let w =
            one("      - record: r\n        expr: max_over_time(a{x=\"[9d]\"}[1d:1h] offset 2d)\n");
        assert_eq!(
            w,
            Warmup::Seconds {
                memory: DAY + HOUR + 2 * DAY + LOOKBACK_SECONDS + 60,
                align: 1
            }
        );
        // The hour of the day: pieces start whole weeks apart.
        assert!(matches!(
            one("      - alert: A\n        expr: hour() > 3 and a\n"),
            Warmup::Seconds { align: 604_800, .. }
        ));
    }

    #[test]
    fn what_cannot_be_cut_keeps_one_piece() {
        for (rules, why) in [
            ("      - alert: A\n        expr: a @ 100\n", "@ modifier"),
            (
                "      - alert: A\n        expr: a offset -5m\n",
                "negative offset",
            ),
            ("      - alert: A\n        expr: month() == 2\n", "month()"),
            (
                "      - record: r\n        expr: r offset 1h + a\n",
                "reads itself",
            ),
            ("      - alert: A\n        expr: a[5q]\n", "not understood"),
        ] {
            match one(rules) {
                Warmup::Whole(w) => assert!(w.to_string().contains(why), "{rules}: {w}"),
                w => panic!("{rules}: {w:?}"),
            }
        }
        // A metric named like a function is no call.
        assert!(matches!(
            one("      - alert: A\n        expr: year_total > 1\n"),
            Warmup::Seconds { .. }
        ));
    }

    #[test]
    fn pieces_cover_the_trace_once_and_start_aligned() {
        let w = Warmup::Seconds {
            memory: HOUR,
            align: 1,
        };
        let day = DAY;
        let p = plan(day, day + 60, day + 10 * HOUR, [60, 60, 300], &w, 3);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].origin, day);
        assert_eq!(p[0].from, day + 60);
        assert_eq!(p.last().unwrap().to, day + 10 * HOUR);
        for pair in p.windows(2) {
            assert_eq!(pair[0].to, pair[1].from);
        }
        for q in &p[1..] {
            assert!(q.origin <= q.from - HOUR, "{q:?}");
            assert_eq!((q.origin - day) % 300, 0, "{q:?}");
            assert!(q.origin > q.from - HOUR - 300, "{q:?}");
        }
        // Too short for the warm-up: one piece.
        assert_eq!(plan(day, day, day + 3000, [60, 60, 60], &w, 4).len(), 1);
        assert_eq!(
            plan(
                day,
                day,
                day + 9000,
                [60, 60, 60],
                &Warmup::Whole(Uncuttable::Unbounded),
                4
            )
            .len(),
            1
        );
    }
}
