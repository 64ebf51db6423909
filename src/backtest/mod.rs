//! `ssdwatch backtest`: a volume's fill history replayed through the daemon's own forecast and
//! through alert rules evaluated by Prometheus' rule engine, judged by lead time and false
//! alarms. Two engines evaluate the rules: Prometheus' query engine in a server of the
//! backtest's own ([`server`]: one range query a rule, the alert states replayed by
//! [`alerting`]), and the rule manager itself (`promtool test rules`, [`engine`]), used where the
//! rules need it ([`rules::range_evaluable`]) or when asked. This module's parts are pure but
//! [`server`] (the server child) and [`replay`] (a temporary store); the promtool child and
//! the command line are src/cli/backtest.rs.

use crate::time::{DAY, HOUR, MINUTE};
pub(crate) mod alerting;
pub(crate) mod chunk;
pub(crate) mod engine;
pub(crate) mod prometheus;
pub(crate) mod prune;
pub(crate) mod remote_write;
pub(crate) mod replay;
pub(crate) mod rules;
pub(crate) mod series;
pub(crate) mod server;
pub(crate) mod trace;

use engine::{Firing, Observed};
use replay::ForecastPoint;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One firing episode of an alert (its name and severity): from the first check instant it was
/// seen firing to the first one it was not (`None`: still firing at the trace's end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Episode {
    pub alertname: String,
    pub severity: String,
    pub start: i64,
    pub end: Option<i64>,
}

/// The episodes of each alert from what the checks saw (`checks` in order, relative to the
/// shifted origin; times returned are Unix seconds: `shift` added back). Series of one
/// alertname and severity (several rules of one name) count as one alert.
pub(crate) fn episodes(checks: &[i64], observed: &Observed, shift: i64) -> Vec<Episode> {
    let empty = Default::default();
    let mut open: BTreeMap<Firing, i64> = BTreeMap::new();
    let mut out = Vec::new();
    for &c in checks {
        let now = observed.get(&c).unwrap_or(&empty);
        let ended: Vec<Firing> = open.keys().filter(|f| !now.contains(*f)).cloned().collect();
        for f in ended {
            if let Some(start) = open.remove(&f) {
                out.push(Episode {
                    alertname: f.alertname,
                    severity: f.severity,
                    start: start + shift,
                    end: Some(c + shift),
                });
            }
        }
        for f in now {
            open.entry(f.clone()).or_insert(c);
        }
    }
    for (f, start) in open {
        out.push(Episode {
            alertname: f.alertname,
            severity: f.severity,
            start: start + shift,
            end: None,
        });
    }
    out.sort_by(|a, b| {
        (a.start, &a.alertname, &a.severity).cmp(&(b.start, &b.alertname, &b.severity))
    });
    out
}

/// One severity's record over the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeveritySummary {
    pub severity: String,
    /// Episodes of all alerts of this severity.
    pub episodes: usize,
    /// Episodes that ended before the volume was full without leading up to it (the alert
    /// went quiet again and was not part of the unbroken run that reached the full instant),
    /// and every episode on a trace that never fills.
    pub false_alarms: usize,
    /// How long before the full instant an alert of this severity had been firing without a
    /// break (alerts of the severity together): the start of the last such run that began at
    /// or before full. `None`: the trace never fills, or nothing of the severity fired by then.
    pub lead_seconds: Option<i64>,
}

/// Runs of time covered by any of `eps` (merged), in order.
fn covered(eps: &[&Episode], end_of_trace: i64) -> Vec<(i64, i64)> {
    let mut spans: Vec<(i64, i64)> = eps
        .iter()
        .map(|e| (e.start, e.end.unwrap_or(end_of_trace + 1)))
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Each severity's episodes, false alarms and lead time.
pub(crate) fn summarize(
    eps: &[Episode],
    full_at: Option<i64>,
    end_of_trace: i64,
) -> Vec<SeveritySummary> {
    let mut severities: Vec<&str> = eps.iter().map(|e| e.severity.as_str()).collect();
    severities.sort_unstable();
    severities.dedup();
    severities
        .into_iter()
        .map(|sev| {
            let mine: Vec<&Episode> = eps.iter().filter(|e| e.severity == sev).collect();
            let runs = covered(&mine, end_of_trace);
            let (false_alarms, lead_seconds) = match full_at {
                None => (mine.len(), None),
                Some(full) => {
                    // The run that reaches the full instant, if any: its episodes warned.
                    let last_run = runs
                        .iter()
                        .rev()
                        .find(|(s, _)| *s <= full)
                        .filter(|(_, e)| *e > full);
                    let false_alarms = mine
                        .iter()
                        .filter(|e| e.end.is_some_and(|end| end <= full))
                        .filter(|e| last_run.is_none_or(|(s, _)| e.start < *s))
                        .count();
                    (false_alarms, last_run.map(|(s, _)| full - s))
                }
            };
            SeveritySummary {
                severity: sev.to_string(),
                episodes: mine.len(),
                false_alarms,
                lead_seconds,
            }
        })
        .collect()
}

/// The daemon's date some days before the trace fills: its error and whether its band holds the
/// true instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DateCheck {
    pub days_before: i64,
    /// The forecast pass read: the last one at or before `full_at - days_before`.
    pub at: Option<i64>,
    /// predicted − true, seconds (negative: too early); `None` when the pass had no date.
    pub error_seconds: Option<i64>,
    /// earliest ≤ true ≤ latest (a missing latest bound is "not in sight": open-ended).
    pub band_covers: Option<bool>,
}

/// The horizons the benchmark reads the daemon's date at.
pub(crate) const DATE_CHECK_DAYS: [i64; 3] = [7, 3, 1];

pub(crate) fn date_checks(forecast: &[ForecastPoint], full_at: Option<i64>) -> Vec<DateCheck> {
    let Some(full) = full_at else {
        return Vec::new();
    };
    DATE_CHECK_DAYS
        .iter()
        .map(|&d| {
            let when = full - d * DAY;
            let pass = forecast.iter().rev().find(|p| p.t <= when);
            DateCheck {
                days_before: d,
                at: pass.map(|p| p.t),
                error_seconds: pass.and_then(|p| p.predicted_full).map(|p| p - full),
                band_covers: pass.and_then(|p| {
                    p.earliest
                        .map(|e| e <= full && p.latest.is_none_or(|l| full <= l))
                }),
            }
        })
        .collect()
}

/// A rule file's text that is not YAML, with the parser's words (which give the line).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NotYaml(pub String);

/// The alert names a rule file defines (`groups[].rules[].alert`), in order, each once.
pub(crate) fn alertnames(rule_file_text: &str) -> Result<Vec<String>, NotYaml> {
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(rule_file_text).map_err(|e| NotYaml(e.to_string()))?;
    let mut out: Vec<String> = Vec::new();
    for g in doc["groups"].as_sequence().into_iter().flatten() {
        for r in g["rules"].as_sequence().into_iter().flatten() {
            if let Some(a) = r["alert"].as_str()
                && !out.iter().any(|x| x == a)
            {
                out.push(a.to_string());
            }
        }
    }
    Ok(out)
}

/// The rule groups' names of a rule file, in order.
pub(crate) fn group_names(rule_file_text: &str) -> Result<Vec<String>, NotYaml> {
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(rule_file_text).map_err(|e| NotYaml(e.to_string()))?;
    Ok(doc["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|g| g["name"].as_str().map(str::to_string))
        .collect())
}

/// One rule set's record: the rule files given as one `--rules` (the shipped pair is one).
#[derive(Debug, Clone, Serialize)]
pub struct RuleSet {
    pub rules: String,
    pub alertnames: Vec<String>,
    pub summary: Vec<SeveritySummary>,
}

impl RuleSet {
    /// The set's summary from the episodes of its own alerts.
    pub fn of(
        rules: String,
        alertnames: Vec<String>,
        eps: &[Episode],
        full_at: Option<i64>,
        end_of_trace: i64,
    ) -> RuleSet {
        let mine: Vec<Episode> = eps
            .iter()
            .filter(|e| alertnames.contains(&e.alertname))
            .cloned()
            .collect();
        RuleSet {
            summary: summarize(&mine, full_at, end_of_trace),
            rules,
            alertnames,
        }
    }
}

/// Everything a backtest found: what `--json` prints and the table shows.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub trace: String,
    pub samples: usize,
    pub interval_seconds: i64,
    pub start: i64,
    pub end: i64,
    pub full_at: Option<i64>,
    pub rule_files: Vec<String>,
    pub eval_interval_seconds: i64,
    /// Rules promtool evaluated, of all the files hold: those that read no series the replay
    /// writes can never fire or record and are left out (see `prune`).
    pub rules_evaluated: usize,
    pub rules_total: usize,
    pub check_interval_seconds: i64,
    /// `query`: Prometheus' query engine, a range query a rule; `rules`: the rule manager
    /// (promtool), every rule at every step.
    pub engine: String,
    /// Why the rule manager was used where the query engine was not asked against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_note: Option<String>,
    /// promtool runs the trace was cut into (evaluated at once), each after a warm-up of
    /// `warmup_seconds` (`None`: the rules can't be cut, see `chunk`).
    pub pieces: usize,
    pub warmup_seconds: Option<i64>,
    pub episodes: Vec<Episode>,
    /// Each `--rules` given, with its own summary (lead times of its alerts alone).
    pub rule_sets: Vec<RuleSet>,
    pub date_checks: Vec<DateCheck>,
    pub forecast: Vec<ForecastPoint>,
}

/// A duration for people: `3d 4h`, `5h 20m`, `12m`, with a sign when negative.
pub(crate) fn human_duration(s: i64) -> String {
    let sign = if s < 0 { "-" } else { "" };
    let s = s.unsigned_abs();
    let (day, hour, minute) = (DAY as u64, HOUR as u64, MINUTE as u64);
    let (d, h, m) = (s / day, s % day / hour, s % hour / minute);
    let body = if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{s}s")
    };
    format!("{sign}{body}")
}

/// An instant for people: UTC, RFC 3339 to the second.
pub(crate) fn human_time(t: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64),
    )
    .to_string()
}

impl Report {
    /// The readable form: the trace, the episodes, each severity's record, the daemon's dates.
    pub fn table(&self) -> String {
        let mut o = String::new();
        self.table_header(&mut o);
        o.push('\n');
        self.table_episodes(&mut o);
        o.push('\n');
        self.table_rule_sets(&mut o);
        self.table_forecast(&mut o);
        o
    }

    /// The trace, the rules and the engine that ran them.
    fn table_header(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "trace {}: {} samples every {} s, {} to {} ({})",
            self.trace,
            self.samples,
            self.interval_seconds,
            human_time(self.start),
            human_time(self.end),
            human_duration(self.end - self.start)
        );
        let _ = writeln!(
            o,
            "full at: {}",
            self.full_at.map_or("never".into(), human_time)
        );
        let _ = writeln!(
            o,
            "rules: {} ({} of {} rules can read this trace's series; evaluated every {} s, read every {} s)",
            self.rule_files.join(", "),
            self.rules_evaluated,
            self.rules_total,
            self.eval_interval_seconds,
            self.check_interval_seconds
        );
        let _ = writeln!(
            o,
            "engine: {}{}",
            if self.engine == "query" {
                "Prometheus' query engine (each rule over the whole trace)"
            } else {
                "Prometheus' rule manager (promtool test rules)"
            },
            self.engine_note
                .as_ref()
                .map_or(String::new(), |n| format!("; not the query engine: {n}"))
        );
        if self.pieces > 1 {
            let _ = writeln!(
                o,
                "evaluated in {} pieces at once, each after a warm-up of {}",
                self.pieces,
                self.warmup_seconds.map_or("-".into(), human_duration)
            );
        }
    }

    /// Each alert's episodes: when it fired, how long, how long before the volume was full.
    fn table_episodes(&self, o: &mut String) {
        if self.episodes.is_empty() {
            o.push_str("episodes: none (no alert fired)\n");
        } else {
            let _ = writeln!(
                o,
                "{:<40} {:<9} {:<20} {:<20} {:>10} {:>12}",
                "ALERT", "SEVERITY", "START", "END", "LASTED", "BEFORE FULL"
            );
            for e in &self.episodes {
                let _ = writeln!(
                    o,
                    "{:<40} {:<9} {:<20} {:<20} {:>10} {:>12}",
                    e.alertname,
                    e.severity,
                    human_time(e.start),
                    e.end.map_or("(firing)".into(), human_time),
                    human_duration(e.end.unwrap_or(self.end) - e.start),
                    self.full_at
                        .map_or("-".into(), |f| human_duration(f - e.start))
                );
            }
        }
    }

    /// Each `--rules` set's record per severity.
    fn table_rule_sets(&self, o: &mut String) {
        for set in &self.rule_sets {
            let _ = writeln!(o, "{}:", set.rules);
            if set.summary.is_empty() {
                o.push_str("  no alert fired\n");
            }
            for s in &set.summary {
                let _ = writeln!(
                    o,
                    "  {}: {} episode(s), {} false alarm(s), lead time {}",
                    s.severity,
                    s.episodes,
                    s.false_alarms,
                    s.lead_seconds.map_or(
                        if self.full_at.is_some() {
                            "none (missed)"
                        } else {
                            "-"
                        }
                        .into(),
                        human_duration
                    )
                );
            }
        }
    }

    /// The daemon's own forecast: its passes, the last dated one, the first of each day, and
    /// how far its date was from the truth some days before full.
    fn table_forecast(&self, o: &mut String) {
        let dated = self
            .forecast
            .iter()
            .filter(|p| p.predicted_full.is_some())
            .count();
        let _ = writeln!(
            o,
            "daemon forecast: {} hourly passes, {} with a date",
            self.forecast.len(),
            dated
        );
        if let Some(p) = self
            .forecast
            .iter()
            .rev()
            .find(|p| p.predicted_full.is_some())
        {
            let _ = writeln!(
                o,
                "  last dated pass {}: full {} (band {} .. {})",
                human_time(p.t),
                p.predicted_full.map_or("-".into(), human_time),
                p.earliest.map_or("-".into(), human_time),
                p.latest.map_or("not in sight".into(), human_time)
            );
        }
        // The forecast over time: the first pass of each UTC day.
        let mut day = None;
        let daily: Vec<&ForecastPoint> = self
            .forecast
            .iter()
            .filter(|p| {
                let d = p.t.div_euclid(DAY);
                let first = day != Some(d);
                day = Some(d);
                first
            })
            .collect();
        if !daily.is_empty() {
            o.push_str("  PASS                 PREDICTED FULL       EARLIEST             LATEST\n");
            for p in daily {
                let show = |v: Option<i64>| v.map_or("-".to_string(), human_time);
                let line = format!(
                    "  {:<20} {:<20} {:<20} {}",
                    human_time(p.t),
                    show(p.predicted_full),
                    show(p.earliest),
                    show(p.latest)
                );
                let _ = writeln!(o, "{}", line.trim_end());
            }
        }
        for c in &self.date_checks {
            let _ = writeln!(
                o,
                "  {} d before full: date error {}, band {}",
                c.days_before,
                c.error_seconds.map_or("no date".into(), human_duration),
                match c.band_covers {
                    Some(true) => "covers the true instant",
                    Some(false) => "misses the true instant",
                    None => "none",
                }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(a: &str, s: &str) -> Firing {
        Firing {
            alertname: a.into(),
            severity: s.into(),
        }
    }

    fn ep(a: &str, s: &str, start: i64, end: Option<i64>) -> Episode {
        Episode {
            alertname: a.into(),
            severity: s.into(),
            start,
            end,
        }
    }

    #[test]
    fn episodes_open_and_close_at_check_instants() {
        let checks: Vec<i64> = (0..10).map(|k| k * 60).collect();
        let mut o = Observed::new();
        for k in [2, 3, 4, 7, 8, 9] {
            o.entry(k * 60).or_default().insert(f("A", "warning"));
        }
        for k in [3, 4] {
            o.entry(k * 60).or_default().insert(f("A", "critical"));
        }
        let e = episodes(&checks, &o, 1000);
        assert_eq!(
            e,
            [
                ep("A", "warning", 1120, Some(1300)),
                ep("A", "critical", 1180, Some(1300)),
                ep("A", "warning", 1420, None),
            ]
        );
    }

    #[test]
    fn lead_time_is_the_unbroken_run_before_full_and_false_alarms_ended_before_it() {
        let eps = [
            ep("A", "warning", 100, Some(200)),
            ep("B", "warning", 900, Some(1100)),
            ep("A", "warning", 1000, None),
            ep("C", "critical", 1190, None),
        ];
        let s = summarize(&eps, Some(1200), 5000);
        assert_eq!(s[0].severity, "critical");
        assert_eq!(s[0].lead_seconds, Some(10));
        assert_eq!((s[1].episodes, s[1].false_alarms), (3, 1));
        assert_eq!(s[1].lead_seconds, Some(300), "B and A together from 900");
        // Never full: every episode is a false alarm, no lead time.
        let s = summarize(&eps, None, 5000);
        assert_eq!((s[1].false_alarms, s[1].lead_seconds), (3, None));
        // A warning that ended before full gives no lead time.
        let s = summarize(&[ep("A", "warning", 100, Some(200))], Some(1200), 5000);
        assert_eq!((s[0].false_alarms, s[0].lead_seconds), (1, None));
    }

    #[test]
    fn date_checks_read_the_last_pass_before_each_horizon() {
        let day = DAY;
        let full = 100 * day;
        let p = |t, d: Option<i64>, e: Option<i64>, l: Option<i64>| ForecastPoint {
            t,
            predicted_full: d,
            earliest: e,
            latest: l,
        };
        let fc = [
            p(92 * day, Some(full + day), Some(full - day), None),
            p(
                93 * day,
                Some(full + day),
                Some(full - day),
                Some(full + 2 * day),
            ),
            p(
                97 * day - 1,
                Some(full - HOUR),
                Some(full + 1),
                Some(full + 2),
            ),
            p(99 * day, None, None, None),
        ];
        let c = date_checks(&fc, Some(full));
        assert_eq!(c[0].at, Some(93 * day));
        assert_eq!(
            (c[0].error_seconds, c[0].band_covers),
            (Some(day), Some(true))
        );
        assert_eq!(
            (c[1].error_seconds, c[1].band_covers),
            (Some(-HOUR), Some(false))
        );
        assert_eq!((c[2].error_seconds, c[2].band_covers), (None, None));
        assert!(date_checks(&fc, None).is_empty());
    }

    #[test]
    fn the_alerts_a_rule_file_defines() {
        let text = "groups:\n  - name: a\n    rules:\n      - record: x\n        expr: y\n      - alert: A\n        expr: y\n      - alert: B\n        expr: y\n  - name: b\n    rules:\n      - alert: A\n        expr: z\n";
        assert_eq!(alertnames(text).unwrap(), ["A", "B"]);
        assert!(alertnames("groups: [").is_err());
    }

    #[test]
    fn durations_and_times_for_people() {
        assert_eq!(human_duration(3 * DAY + 4 * HOUR + 5), "3d 4h");
        assert_eq!(human_duration(-(5 * HOUR + 20 * 60)), "-5h 20m");
        assert_eq!(human_duration(720), "12m");
        assert_eq!(human_duration(7), "7s");
        assert_eq!(human_time(1_767_225_600 + 3_660), "2026-01-01T01:01:00Z");
    }
}
