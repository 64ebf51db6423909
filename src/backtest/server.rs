//! The backtest's query engine: a Prometheus server of its own (the `prometheus` binary, on a
//! free loopback port, over a TSDB in the backtest's work directory), into which the replayed
//! series are written by remote write. Each rule, in the rule manager's order, is evaluated
//! over the whole trace by range queries at the evaluation interval: a recording rule's results
//! are written back (with the staleness markers the rule manager writes when a series stops),
//! so the rules after it read them as they would; an alert's answers are replayed through the
//! rule manager's state machine (src/backtest/alerting.rs).
//!
//! The rule manager evaluates every rule at every step, one instant query at a time (about
//! 0.1 ms a rule a step: a quarter of an hour for six months at one minute); the query engine
//! evaluates a rule over ten thousand steps in one query. Where the two could differ
//! ([`super::rules::range_evaluable`]) the backtest runs the rule manager instead.
//!
//! The server's head block spans the whole trace (`--storage.tsdb.min-block-duration` at twice
//! the trace): any series may be written at any time in it, each in its own time order. The
//! server is stopped, by its own process handle, when [`Server`] is dropped.

use super::alerting;
use super::engine::{Observed, Series, Slot, selector_labels};
use super::remote_write::{WriteSeries, bodies, stale_marker};
use super::rules::{Kind, Rule};
use crate::query::{Answer, Api, QueryError};
use crate::time::HOUR;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Steps in one range query: Prometheus answers at most 11,000 points a series.
pub(crate) const STEPS_PER_QUERY: i64 = 10_000;
/// How long the server may take to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// The largest answer read from the server (a range query of [`STEPS_PER_QUERY`] steps).
const MAX_ANSWER_BYTES: u64 = 512 << 20;
/// The log lines quoted when the server fails.
const LOG_TAIL_BYTES: usize = 2_000;

/// `prometheus`: the one given, else the one beside `promtool`, else the first on PATH.
pub(crate) fn find_prometheus(given: Option<&Path>, promtool: &Path) -> Option<PathBuf> {
    if let Some(g) = given {
        return Some(g.to_path_buf());
    }
    promtool
        .parent()
        .and_then(|d| crate::exe::find(&d.join("prometheus")))
        .or_else(|| crate::exe::find(Path::new("prometheus")))
}

/// A running server of the backtest's own.
pub(crate) struct Server {
    child: Child,
    base: String,
    api: Api,
    agent: ureq::Agent,
    log: PathBuf,
}

/// What went wrong with the rule engine's server, naming the file, the binary, the URL or the
/// rule.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerError {
    #[error("writing {}: {error}", path.display())]
    WriteConfig {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("creating {}: {error}", path.display())]
    CreateLog {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("running {}: {error}", bin.display())]
    Spawn { bin: PathBuf, error: std::io::Error },
    /// `log_tail` says where its log is and how it ends.
    #[error("{} exited ({status}) before it was ready: {log_tail}", bin.display())]
    Exited {
        bin: PathBuf,
        status: std::process::ExitStatus,
        log_tail: String,
    },
    #[error("{} was not ready in {secs} s: {log_tail}", bin.display())]
    NotReady {
        bin: PathBuf,
        secs: u64,
        log_tail: String,
    },
    #[error("finding a free port for the rule engine's server: {0}")]
    FreePort(std::io::Error),
    #[error("{url}: {error}")]
    Send {
        url: String,
        error: Box<ureq::Error>,
    },
    #[error("{url}: the server refused the replayed series ({status}): {said}")]
    Refused {
        url: String,
        status: String,
        said: String,
    },
    #[error("{0}")]
    Query(QueryError),
    #[error("a range query's thread panicked")]
    Panicked,
    #[error("series {0} is not a selector")]
    NotASelector(String),
    #[error(
        "rule {rule}: at {t} s its results hold two series of one label set once its labels are applied"
    )]
    TwoSeries { rule: String, t: i64 },
    /// A query or a write of the rule's results failed.
    #[error("rule {rule}: {error}")]
    Rule {
        rule: String,
        error: Box<ServerError>,
    },
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `bin` over a new TSDB in `dir`, its head able to hold `span` seconds, and waits
    /// until it is ready.
    pub(crate) fn start(bin: &Path, dir: &Path, span: i64) -> Result<Server, ServerError> {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            "# Written by `ssdwatch backtest`: no scrapes, no rules.\n",
        )
        .map_err(|error| ServerError::WriteConfig {
            path: config.clone(),
            error,
        })?;
        let log = dir.join("prometheus.log");
        // Twice the trace (the head accepts samples down to half its block span before its
        // newest), and at least the default retention's worth.
        let block_hours = (2 * span.max(0) / HOUR + 48).max(360);
        let mut last_err = None;
        // A port found free may be taken before the server binds it: try another.
        for _ in 0..3 {
            let port = free_port()?;
            let log_file = std::fs::File::create(&log).map_err(|error| ServerError::CreateLog {
                path: log.clone(),
                error,
            })?;
            let child = Command::new(bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("tsdb").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--web.enable-remote-write-receiver")
                .arg(format!("--storage.tsdb.min-block-duration={block_hours}h"))
                .arg(format!("--storage.tsdb.max-block-duration={block_hours}h"))
                .arg("--query.timeout=10m")
                .arg("--log.level=warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file)
                .spawn()
                .map_err(|error| ServerError::Spawn {
                    bin: bin.to_path_buf(),
                    error,
                })?;
            let base = format!("http://127.0.0.1:{port}");
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(600)))
                .build()
                .into();
            let mut server = Server {
                child,
                api: Api::new(&base).with_max_answer_bytes(MAX_ANSWER_BYTES),
                base,
                agent,
                log: log.clone(),
            };
            match server.wait_ready(bin) {
                Ok(()) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        // Three tries, so always set; the fallback is never seen.
        Err(last_err.unwrap_or(ServerError::Panicked))
    }

    fn wait_ready(&mut self, bin: &Path) -> Result<(), ServerError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(ServerError::Exited {
                    bin: bin.to_path_buf(),
                    status,
                    log_tail: self.log_tail(),
                });
            }
            if let Ok(r) = self.agent.get(format!("{}/-/ready", self.base)).call()
                && r.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ServerError::NotReady {
                    bin: bin.to_path_buf(),
                    secs: READY_TIMEOUT.as_secs(),
                    log_tail: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let from = text.len().saturating_sub(LOG_TAIL_BYTES);
        let from = (from..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!(
            "its log ({}) ends: {}",
            self.log.display(),
            text[from..].trim()
        )
    }

    /// Writes `series` by remote write.
    pub(crate) fn write(&self, series: &[WriteSeries]) -> Result<(), ServerError> {
        let url = format!("{}/api/v1/write", self.base);
        for body in bodies(series) {
            let mut r = self
                .agent
                .post(&url)
                .header("Content-Encoding", "snappy")
                .header("Content-Type", "application/x-protobuf")
                .header("X-Prometheus-Remote-Write-Version", "0.1.0")
                .send(&body[..])
                .map_err(|e| ServerError::Send {
                    url: url.clone(),
                    error: Box::new(e),
                })?;
            if !r.status().is_success() {
                let mut said = String::new();
                let _ = r
                    .body_mut()
                    .as_reader()
                    .take(LOG_TAIL_BYTES as u64)
                    .read_to_string(&mut said);
                return Err(ServerError::Refused {
                    url,
                    status: r.status().to_string(),
                    said: said.trim().to_string(),
                });
            }
        }
        Ok(())
    }

    /// `expr` at every `step` from 0 to `end` (seconds), by range queries of at most
    /// [`STEPS_PER_QUERY`] steps, `jobs` at once; each series' points in time order.
    pub(crate) fn range(
        &self,
        expr: &str,
        end: i64,
        step: i64,
        jobs: usize,
    ) -> Result<Answer, ServerError> {
        let span = STEPS_PER_QUERY * step;
        let pieces: Vec<(i64, i64)> = (0..=end / span)
            .map(|k| (k * span, ((k + 1) * span - step).min(end)))
            .filter(|(a, b)| a <= b)
            .collect();
        let next = AtomicUsize::new(0);
        let answers: Mutex<Vec<Option<Result<Answer, QueryError>>>> =
            Mutex::new((0..pieces.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..jobs.clamp(1, pieces.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(a, b)) = pieces.get(k) else {
                            break;
                        };
                        let r = self.api.query_range(expr, a, b, step);
                        let failed = r.is_err();
                        if let Ok(mut all) = answers.lock() {
                            all[k] = Some(r);
                        }
                        if failed {
                            // The others' work would be thrown away.
                            next.store(pieces.len(), Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let answers = answers.into_inner().map_err(|_| ServerError::Panicked)?;
        let mut merged: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>> = BTreeMap::new();
        // Pieces left unasked after one failed are `None`; the failure is what is reported.
        for a in answers.into_iter().flatten() {
            for (labels, points) in a.map_err(ServerError::Query)? {
                merged.entry(labels).or_default().extend(points);
            }
        }
        Ok(merged.into_iter().collect())
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> Result<u16, ServerError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(ServerError::FreePort)
}

/// The replayed series as written: `grid` seconds between slots from time 0, a staleness
/// marker where a series ended.
pub(crate) fn input(series: &[Series], grid: i64) -> Result<Vec<WriteSeries>, ServerError> {
    series
        .iter()
        .map(|s| {
            let labels = selector_labels(&s.selector)
                .ok_or_else(|| ServerError::NotASelector(s.selector.clone()))?;
            let samples = s
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, slot)| {
                    let t = i as i64 * grid * 1000;
                    match slot {
                        Slot::Missing => None,
                        Slot::Stale => Some((t, stale_marker())),
                        Slot::Value(v) => Some((t, *v)),
                    }
                })
                .collect();
            Ok(WriteSeries { labels, samples })
        })
        .collect()
}

/// A recording rule's results as the rule manager writes them: each series renamed, with the
/// rule's labels, a sample at each step it answered and a staleness marker at the first step
/// it did not after one it did.
pub(crate) fn recorded(
    rule: &Rule,
    steps: &[i64],
    answer: &Answer,
) -> Result<Vec<WriteSeries>, ServerError> {
    // Result series that become one once renamed (`a or b` answers with `a`'s name at some
    // steps and `b`'s at others) are one series; two at one step are what the rule manager
    // refuses too.
    let mut merged: BTreeMap<BTreeMap<String, String>, BTreeMap<i64, f64>> = BTreeMap::new();
    for (labels, points) in answer {
        let mut l = labels.clone();
        for (k, v) in &rule.labels {
            l.insert(k.clone(), v.clone());
        }
        l.insert("__name__".into(), rule.name.clone());
        let at = merged.entry(l).or_default();
        for &(t, v) in points {
            if at.insert(t, v).is_some() {
                return Err(ServerError::TwoSeries {
                    rule: rule.name.clone(),
                    t,
                });
            }
        }
    }
    Ok(merged
        .into_iter()
        .map(|(l, points)| {
            let mut samples = Vec::with_capacity(points.len() + 8);
            let mut seen_last = false;
            for &t in steps {
                match points.get(&t) {
                    Some(&v) => {
                        samples.push((t * 1000, v));
                        seen_last = true;
                    }
                    None => {
                        if seen_last {
                            samples.push((t * 1000, stale_marker()));
                        }
                        seen_last = false;
                    }
                }
            }
            WriteSeries {
                labels: l.into_iter().collect(),
                samples,
            }
        })
        .collect())
}

/// Every rule over the steps from 0 to `end` at `every` seconds, in order: what fired at each
/// of `checks`.
pub(crate) fn evaluate(
    server: &Server,
    rules: &[Rule],
    end: i64,
    every: i64,
    checks: &[i64],
    jobs: usize,
) -> Result<Observed, ServerError> {
    let steps: Vec<i64> = (0..=end / every).map(|k| k * every).collect();
    let checks: BTreeSet<i64> = checks.iter().copied().collect();
    let mut observed = Observed::new();
    for rule in rules {
        let in_rule = |e: ServerError| ServerError::Rule {
            rule: rule.name.clone(),
            error: Box::new(e),
        };
        let answer = server
            .range(&rule.expr, end, every, jobs)
            .map_err(in_rule)?;
        match rule.kind {
            Kind::Record => server
                .write(&recorded(rule, &steps, &answer)?)
                .map_err(in_rule)?,
            Kind::Alert { .. } => {
                alerting::replay(rule, &steps, &answer, &checks, &mut observed);
            }
        }
    }
    Ok(observed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_gets_the_rules_labels_its_name_and_a_staleness_marker_where_it_stops() {
        let rule = Rule {
            name: "a:b".into(),
            expr: "x".into(),
            labels: vec![("kind".into(), "k".into())],
            kind: Kind::Record,
        };
        let labels: BTreeMap<String, String> = [
            ("__name__".to_string(), "x".to_string()),
            ("m".to_string(), "/".to_string()),
        ]
        .into();
        let answer = vec![(labels, vec![(0, 1.0), (60, 2.0), (180, 4.0)])];
        let out = recorded(&rule, &[0, 60, 120, 180, 240], &answer).unwrap();
        assert_eq!(out.len(), 1);
        let l = &out[0].labels;
        assert!(l.contains(&("__name__".into(), "a:b".into())));
        assert!(l.contains(&("kind".into(), "k".into())));
        let s = &out[0].samples;
        assert_eq!(s.len(), 5);
        assert_eq!((s[0], s[1]), ((0, 1.0), (60_000, 2.0)));
        assert_eq!(s[2].0, 120_000);
        assert_eq!(s[2].1.to_bits(), super::super::remote_write::STALE_NAN_BITS);
        assert_eq!(s[3], (180_000, 4.0));
        assert_eq!(s[4].1.to_bits(), super::super::remote_write::STALE_NAN_BITS);
        // Two results that are one series once renamed: at different steps one series (`a or
        // b`), at one step what the rule manager refuses too.
        let name = |n: &str| -> BTreeMap<String, String> {
            [("__name__".to_string(), n.to_string())].into()
        };
        let two = vec![(name("x"), vec![(0, 1.0)]), (name("y"), vec![(60, 2.0)])];
        let one = recorded(&rule, &[0, 60, 120], &two).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].samples[..2], [(0, 1.0), (60_000, 2.0)]);
        let clash = vec![(name("x"), vec![(0, 1.0)]), (name("y"), vec![(0, 1.0)])];
        assert!(
            recorded(&rule, &[0], &clash)
                .unwrap_err()
                .to_string()
                .contains("two series")
        );
    }

    #[test]
    fn input_series_keep_their_gaps_and_end_with_a_staleness_marker() {
        let s = Series {
            selector: r#"x{m="/"}"#.into(),
            slots: vec![Slot::Value(1.0), Slot::Missing, Slot::Stale],
        };
        let w = input(&[s], 60).unwrap();
        assert_eq!(w[0].samples.len(), 2);
        assert_eq!(w[0].samples[1].0, 120_000);
        assert!(w[0].samples[1].1.is_nan());
        let bad = Series {
            selector: "x".into(),
            slots: vec![],
        };
        assert!(input(&[bad], 60).is_err());
    }
}
