//! `ssdwatch backtest`: the thin I/O around src/backtest/: reads the trace, replays it into a
//! temporary history store, evaluates the rules (Prometheus' query engine in a server of its
//! own, or promtool's rule manager) and prints the report.

use crate::backtest::prometheus::{self as promsrc, Exporter};
use crate::backtest::replay::{self, Volume};
use crate::backtest::series::{self, Grid, Labels};
use crate::backtest::{self, Report, chunk, engine, prune, rules, server, trace};
use crate::query::{Api, QueryError};
use crate::time::DAY;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The rule files the package ships, as built into this binary: `--rules shipped`, and the
/// default.
const SHIPPED: [(&str, &str); 2] = [
    (
        "ssdwatch.rules.yml",
        include_str!("../../packaging/prometheus/ssdwatch.rules.yml"),
    ),
    (
        "ssdwatch.alerts.yml",
        include_str!("../../packaging/prometheus/ssdwatch.alerts.yml"),
    ),
];

/// The word that stands for the shipped rule files among `--rules`.
pub const SHIPPED_WORD: &str = "shipped";

/// Arguments of `ssdwatch backtest`.
#[derive(Debug, Clone)]
pub struct BacktestArgs {
    pub source: Source,
    pub rules: Vec<String>,
    pub json: bool,
    pub eval_interval: Duration,
    pub check_interval: Option<Duration>,
    /// The volume's mount point (the CSV trace's label; the Prometheus source's selection).
    pub mountpoint: String,
    /// The device label [default: the series' own, or sda1 for a CSV trace].
    pub device: Option<String>,
    pub promtool: Option<PathBuf>,
    pub keep: Option<PathBuf>,
    /// Evaluate every rule, also those that read no series the replay writes.
    pub all_rules: bool,
    /// promtool runs at once, each over a piece of the trace, or range queries at once
    /// [default: the CPUs].
    pub jobs: Option<usize>,
    pub engine: EngineChoice,
    /// The `prometheus` binary of the query engine [default: beside promtool, else on PATH].
    pub prometheus_binary: Option<PathBuf>,
}

/// Which of Prometheus' engines evaluates the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EngineChoice {
    /// The query engine where the rules allow it and `prometheus` is found, else the rule
    /// manager.
    #[default]
    Auto,
    /// The query engine: each rule over the whole trace by range queries, in a `prometheus`
    /// server of the backtest's own.
    Query,
    /// The rule manager: `promtool test rules`, every rule at every step.
    Rules,
}

/// Where the trace comes from.
#[derive(Debug, Clone)]
pub enum Source {
    Csv(PathBuf),
    Prometheus(PrometheusSource),
}

/// `--prometheus`: a range of one instance's and mount point's filesystem series.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    pub url: String,
    pub instance: String,
    /// Unix seconds; `None`: now.
    pub end: Option<i64>,
    /// Unix seconds; `None`: `range` before the end.
    pub start: Option<i64>,
    pub range: Duration,
    /// The trace's interval: the range queries' step.
    pub step: Duration,
    pub http_config_file: Option<PathBuf>,
}

/// The longest range read from a server.
pub const MAX_RANGE_DAYS: i64 = 400;

/// `--start`/`--end`: Unix seconds or an RFC 3339 instant.
pub fn parse_instant(s: &str) -> Result<i64, String> {
    if let Ok(t) = s.trim().parse::<i64>() {
        return Ok(t);
    }
    let t = humantime::parse_rfc3339_weak(s.trim())
        .map_err(|e| format!("{s:?}: not Unix seconds nor an RFC 3339 time ({e})"))?;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .map_err(|_| format!("{s:?}: before 1970"))
}

/// The trace from a server: its name for the report, the trace, the series' device label.
fn fetch(
    src: &PrometheusSource,
    mountpoint: &str,
) -> Result<(String, trace::Trace, Option<String>), String> {
    let step = secs(src.step, "--step")?;
    if step < trace::MIN_INTERVAL_SECONDS {
        return Err(format!(
            "--step {step}s: at least {}s",
            trace::MIN_INTERVAL_SECONDS
        ));
    }
    let end = src.end.unwrap_or_else(|| crate::time::unix_now() as i64);
    let start = match src.start {
        Some(s) => s,
        None => end.saturating_sub(src.range.as_secs().min(i64::MAX as u64) as i64),
    };
    if start >= end {
        return Err(format!(
            "the range is empty: --start {} is not before --end {}",
            backtest::human_time(start),
            backtest::human_time(end)
        ));
    }
    if end - start > MAX_RANGE_DAYS * DAY {
        return Err(format!("the range is longer than {MAX_RANGE_DAYS} days"));
    }
    if (end - start) / step > series::MAX_SLOTS as i64 {
        return Err(format!(
            "{} steps of {step} s: at most {}; a longer --step",
            (end - start) / step,
            series::MAX_SLOTS
        ));
    }
    let api =
        Api::with_config(&src.url, src.http_config_file.as_deref()).map_err(|e| e.to_string())?;
    let windows = promsrc::windows(start, end, step);
    let ask = |sel: &str| -> Result<_, String> {
        let answers = windows
            .iter()
            .map(|(a, b)| {
                api.query_range(sel, *a, *b, step).map_err(|e| match e {
                    // The client names the server; the query is this one.
                    QueryError::Http { .. } => format!("{e} (query {sel})"),
                    e => e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        promsrc::one_series(sel, &answers).map_err(|e| format!("{}: {e}", api.base()))
    };
    let mut tried = Vec::new();
    for exporter in Exporter::IN_ORDER {
        let [size_sel, avail_sel] = promsrc::selectors(exporter, &src.instance, mountpoint);
        let Some((labels, avail)) = ask(&avail_sel)? else {
            tried.push(avail_sel);
            continue;
        };
        let Some((_, size)) = ask(&size_sel)? else {
            return Err(format!(
                "{}: {avail_sel} has a series but {size_sel} has none from {} to {}",
                api.base(),
                backtest::human_time(start),
                backtest::human_time(end)
            ));
        };
        let name = format!("{avail_sel} at {} ({})", api.base(), exporter.who());
        let trace = promsrc::trace_of(&size, &avail, &name).map_err(|e| e.to_string())?;
        return Ok((name, trace, labels.get("device").cloned()));
    }
    Err(format!(
        "{}: no series from {} to {} for the queries {}: check --instance (the instance label, such as db7:10150 or db7:9100) and --mountpoint",
        api.base(),
        backtest::human_time(start),
        backtest::human_time(end),
        tried.join(" and ")
    ))
}

/// The most pieces a trace is cut into: more runs at once than this only share the same cores.
pub const MAX_JOBS: usize = 64;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p =
            std::env::temp_dir().join(format!("ssdwatch-backtest-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&p).map_err(|e| format!("creating {}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// promtool: the one given, else the first on PATH.
fn find_promtool(given: &Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    crate::exe::find(Path::new("promtool"))
        .ok_or_else(|| {
            "promtool not found on PATH: the alert rules are evaluated by Prometheus' own rule engine \
             (`promtool test rules`); install it (Debian/Ubuntu: apt-get install prometheus) or give --promtool"
                .to_string()
        })
}

fn secs(d: Duration, what: &str) -> Result<i64, String> {
    let s = d.as_secs() as i64;
    if d.subsec_nanos() != 0 || !(1..=DAY).contains(&s) {
        return Err(format!("{what} must be whole seconds from 1s to 1d"));
    }
    Ok(s)
}

/// The rule files as given must load in Prometheus (`promtool check rules`): a rule left out
/// for want of input would otherwise hide a file that does not load at all.
fn check_rules(promtool: &Path, files: &[PathBuf]) -> Result<(), String> {
    let out = Command::new(promtool)
        .arg("check")
        .arg("rules")
        .args(files)
        .output()
        .map_err(|e| format!("running {}: {e}", promtool.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "the rule files do not load (promtool check rules):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Runs the backtest; the report, or an error for the user.
pub fn backtest(args: &BacktestArgs) -> Result<Report, String> {
    let eval = secs(args.eval_interval, "--eval-interval")?;
    let check = match args.check_interval {
        Some(c) => secs(c, "--check-interval")?,
        None => eval,
    };
    if check % eval != 0 {
        return Err(format!(
            "--check-interval ({check}s) must be a multiple of --eval-interval ({eval}s): alerts change only at evaluations"
        ));
    }
    let (name, trace, device) = match &args.source {
        Source::Csv(path) => {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| format!("reading {name}: {e}"))?;
            let trace = trace::parse_trace(&text, &name).map_err(|e| e.to_string())?;
            (name, trace, None)
        }
        Source::Prometheus(src) => fetch(src, &args.mountpoint)?,
    };
    let grid = Grid::of(&trace).map_err(|e| format!("{name}: {e}"))?;
    let promtool = find_promtool(&args.promtool)?;

    let tmp = TempDir::new()?;
    let work = args.keep.clone().unwrap_or_else(|| tmp.0.clone());
    std::fs::create_dir_all(&work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    let volume = Volume {
        mountpoint: args.mountpoint.clone(),
        device: args
            .device
            .clone()
            .or(device)
            .unwrap_or_else(|| "sda1".to_string()),
    };
    let store_dir = tmp.0.join("store");
    let forecast = replay::replay(&trace, &volume, &store_dir)
        .map_err(|e| format!("replaying {name} through the history store: {e}"))?;

    let (sources, sets, given) = rule_sets(&args.rules, &work)?;
    let input = series::input_series(&trace, &forecast, &volume, &Labels::default(), &grid);
    check_rules(&promtool, &given)?;
    let texts: Vec<String> = sources.iter().map(|(_, t)| t.clone()).collect();
    let (texts, rules_kept, rules_total) = if args.all_rules {
        let n = prune::prune(&texts, &Default::default())
            .map_err(|e| format!("reading the rule files: {e}"))?
            .iter()
            .map(|(_, _, had)| had)
            .sum();
        (texts, n, n)
    } else {
        let names = input
            .iter()
            .map(|s| s.selector.split('{').next().unwrap_or_default().to_string())
            .collect();
        let pruned =
            prune::prune(&texts, &names).map_err(|e| format!("reading the rule files: {e}"))?;
        let kept = pruned.iter().map(|(_, k, _)| k).sum();
        let had = pruned.iter().map(|(_, _, h)| h).sum();
        (pruned.into_iter().map(|(t, _, _)| t).collect(), kept, had)
    };
    let mut group_order: Vec<String> = Vec::new();
    for t in &texts {
        for g in backtest::group_names(t).map_err(|e| format!("reading the rule files: {e}"))? {
            if !group_order.contains(&g) {
                group_order.push(g);
            }
        }
    }
    let mut rule_files = Vec::new();
    for (i, ((base, _), text)) in sources.iter().zip(&texts).enumerate() {
        let p = work.join(format!("{i:02}-{base}"));
        std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
        rule_files.push(p.display().to_string());
    }
    let jobs = match args.jobs {
        Some(j) if !(1..=MAX_JOBS).contains(&j) => {
            return Err(format!("--jobs {j}: from 1 to {MAX_JOBS}"));
        }
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_JOBS)),
    };
    let checks = series::checks(&trace, &grid, check);
    let parsed =
        rules::parse(&texts, &group_order).map_err(|e| format!("reading the rule files: {e}"))?;
    let (bin, engine_note) = choose_engine(args, &parsed, &promtool)?;
    let engine_used = if bin.is_some() { "query" } else { "rules" };
    let (observed, pieces, warmup_seconds) = match bin {
        Some(bin) => (
            run_query_engine(&bin, &tmp.0, &input, &grid, &parsed, eval, &checks, jobs)?,
            1,
            None,
        ),
        None => run_rule_manager(
            &promtool,
            &work,
            &trace,
            &forecast,
            &volume,
            &grid,
            &texts,
            &rule_files,
            &group_order,
            [eval, check],
            &checks,
            jobs,
        )?,
    };
    let episodes = backtest::episodes(&checks, &observed, grid.shift);
    let full_at = trace.full_at();
    Ok(Report {
        trace: name,
        samples: trace.samples.len(),
        interval_seconds: grid.step,
        start: trace.start(),
        end: trace.end(),
        full_at,
        rule_files: sets.iter().map(|(r, _)| r.clone()).collect(),
        eval_interval_seconds: eval,
        rules_evaluated: rules_kept,
        rules_total,
        check_interval_seconds: check,
        engine: engine_used.to_string(),
        engine_note,
        pieces,
        warmup_seconds,
        rule_sets: sets
            .into_iter()
            .map(|(r, names)| backtest::RuleSet::of(r, names, &episodes, full_at, trace.end()))
            .collect(),
        episodes,
        date_checks: backtest::date_checks(&forecast, full_at),
        forecast,
    })
}

/// Each `--rules` (the shipped files for the word, the default) with the alerts its files
/// define; every file's name and text; the files as given (the shipped ones written out into
/// `work`), for promtool to check.
#[allow(clippy::type_complexity)]
fn rule_sets(
    args_rules: &[String],
    work: &Path,
) -> Result<
    (
        Vec<(String, String)>,
        Vec<(String, Vec<String>)>,
        Vec<PathBuf>,
    ),
    String,
> {
    let rules: Vec<String> = if args_rules.is_empty() {
        vec![SHIPPED_WORD.to_string()]
    } else {
        args_rules.to_vec()
    };
    // Each --rules with the alerts its files define, and every file's text.
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut sets: Vec<(String, Vec<String>)> = Vec::new();
    // The files as given (the shipped ones written out), for promtool to check.
    let mut given: Vec<PathBuf> = Vec::new();
    for r in &rules {
        let mut names = Vec::new();
        if r == SHIPPED_WORD {
            for (file, text) in SHIPPED {
                names.extend(backtest::alertnames(text).map_err(|e| format!("{file}: {e}"))?);
                sources.push((file.to_string(), text.to_string()));
                let p = work.join(file);
                std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
                given.push(p);
            }
            sets.push((
                "shipped (ssdwatch.rules.yml, ssdwatch.alerts.yml)".to_string(),
                names,
            ));
        } else {
            let text =
                std::fs::read_to_string(r).map_err(|e| format!("reading rule file {r}: {e}"))?;
            names.extend(backtest::alertnames(&text).map_err(|e| format!("{r}: {e}"))?);
            let base = Path::new(r)
                .file_name()
                .map_or("rules.yml".into(), |b| b.to_string_lossy().into_owned());
            sources.push((base, text));
            given.push(PathBuf::from(r));
            sets.push((r.clone(), names));
        }
    }
    Ok((sources, sets, given))
}

/// The query engine's `prometheus` binary when it evaluates the rules (`None`: the rule
/// manager), and why not where `auto` could not use it.
fn choose_engine(
    args: &BacktestArgs,
    parsed: &[rules::Rule],
    promtool: &Path,
) -> Result<(Option<PathBuf>, Option<String>), String> {
    let found = server::find_prometheus(args.prometheus_binary.as_deref(), promtool);
    Ok(match (args.engine, rules::range_evaluable(parsed), found) {
        (EngineChoice::Rules, _, _) => (None, None),
        (_, Ok(()), Some(bin)) => (Some(bin), None),
        (EngineChoice::Query, Err(why), _) => return Err(format!("--engine query: {why}")),
        (EngineChoice::Query, Ok(()), None) => {
            return Err(
                "--engine query: prometheus not found beside promtool or on PATH (Debian/Ubuntu: apt-get install prometheus), or give --prometheus-binary"
                    .into(),
            );
        }
        (EngineChoice::Auto, Err(why), _) => (None, Some(why.to_string())),
        (EngineChoice::Auto, Ok(()), None) => (
            None,
            Some("prometheus not found beside promtool or on PATH".to_string()),
        ),
    })
}

/// The rules through Prometheus' query engine, in a server of the backtest's own over a TSDB
/// in `tmp`: what fired at each check.
#[allow(clippy::too_many_arguments)]
fn run_query_engine(
    bin: &Path,
    tmp: &Path,
    input: &[engine::Series],
    grid: &Grid,
    parsed: &[rules::Rule],
    eval: i64,
    checks: &[i64],
    jobs: usize,
) -> Result<engine::Observed, String> {
    let end = checks.last().copied().unwrap_or(0);
    let dir = tmp.join("engine");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let span = end.max(grid.step * grid.slots as i64);
    let srv = server::Server::start(bin, &dir, span).map_err(|e| e.to_string())?;
    srv.write(&server::input(input, grid.step).map_err(|e| e.to_string())?)
        .map_err(|e| format!("writing the replayed series: {e}"))?;
    server::evaluate(&srv, parsed, end, eval, checks, jobs).map_err(|e| e.to_string())
}

/// The rules through promtool's rule manager, the trace cut into pieces run at once: what fired
/// at each check, the pieces and their warm-up.
#[allow(clippy::too_many_arguments)]
fn run_rule_manager(
    promtool: &Path,
    work: &Path,
    trace: &trace::Trace,
    forecast: &[replay::ForecastPoint],
    volume: &Volume,
    grid: &Grid,
    texts: &[String],
    rule_files: &[String],
    group_order: &[String],
    [eval, check]: [i64; 2],
    checks: &[i64],
    jobs: usize,
) -> Result<(engine::Observed, usize, Option<i64>), String> {
    let warm = chunk::warmup(texts, eval).map_err(|e| format!("reading the rule files: {e}"))?;
    let pieces = chunk::plan(
        grid.shift,
        trace.start(),
        trace.end(),
        [grid.step, eval, check],
        &warm,
        jobs,
    );
    let run = |k: usize, piece: &chunk::Piece| -> Result<engine::Observed, String> {
        // The piece's samples from its origin (the warm-up) to its end; its own checks.
        let last = k + 1 == pieces.len();
        let sub = trace::Trace {
            samples: trace
                .samples
                .iter()
                .filter(|s| s.t >= piece.origin && s.t <= piece.to)
                .copied()
                .collect(),
        };
        let g = Grid {
            shift: piece.origin,
            step: grid.step,
            slots: ((piece.to - piece.origin) / grid.step + 2) as usize,
        };
        let own: Vec<i64> = checks
            .iter()
            .map(|c| c + grid.shift)
            .filter(|t| *t >= piece.from && (*t < piece.to || last))
            .map(|t| t - piece.origin)
            .collect();
        let spec = engine::TestSpec {
            rule_files: rule_files.to_vec(),
            eval_interval: eval,
            group_order: group_order.to_vec(),
            grid: grid.step,
            series: series::input_series(&sub, forecast, volume, &Labels::default(), &g),
            checks: own,
        };
        let name = if pieces.len() == 1 {
            "backtest.test.yml".to_string()
        } else {
            format!("backtest-{k:02}.test.yml")
        };
        let observed = run_promtool(promtool, work, &name, &spec)?;
        // Back to the whole run's origin.
        Ok(observed
            .into_iter()
            .map(|(t, f)| (t + piece.origin - grid.shift, f))
            .collect())
    };
    let results: Vec<Result<engine::Observed, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let run = &run;
                scope.spawn(move || run(k, p))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a promtool run's thread panicked".into()))
            })
            .collect()
    });
    let mut observed = engine::Observed::new();
    for r in results {
        observed.extend(r?);
    }
    Ok((
        observed,
        pieces.len(),
        match warm {
            chunk::Warmup::Seconds { memory, .. } => Some(memory),
            chunk::Warmup::Whole(_) => None,
        },
    ))
}

/// Writes one piece's unit test, runs promtool on it and reads back what fired.
fn run_promtool(
    promtool: &Path,
    work: &Path,
    name: &str,
    spec: &engine::TestSpec,
) -> Result<engine::Observed, String> {
    let test_path = work.join(name);
    std::fs::write(&test_path, engine::test_file(spec))
        .map_err(|e| format!("writing {}: {e}", test_path.display()))?;
    let out = Command::new(promtool)
        .arg("test")
        .arg("rules")
        .arg(&test_path)
        .current_dir(work)
        .output()
        .map_err(|e| format!("running {}: {e}", promtool.display()))?;
    // Exit 0: nothing fired; 1: something fired (or promtool failed, which the output says).
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!(
            "{} test rules ended with {}: {}",
            promtool.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let observed = engine::parse_output(&said).map_err(|e| e.to_string())?;
    if out.status.code() == Some(1) && observed.is_empty() {
        return Err(format!("{} test rules failed: {said}", promtool.display()));
    }
    Ok(observed)
}

/// `ssdwatch backtest`: the table (or `--json`) on stdout; exit 1 with the error on stderr.
pub fn run(args: &BacktestArgs) -> i32 {
    match backtest(args) {
        Ok(r) => {
            let text = if args.json {
                match serde_json::to_string_pretty(&r) {
                    Ok(s) => s + "\n",
                    Err(e) => {
                        eprintln!("ssdwatch backtest: {e}");
                        return 1;
                    }
                }
            } else {
                r.table()
            };
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("ssdwatch backtest: {e}");
            1
        }
    }
}
