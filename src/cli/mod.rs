//! The command line: flags (clap), config loading and the subcommands, each calling an engine
//! (`daemon`, `probe`, `smart`). No engine imports this module; it sits on top of all of them.

pub mod backtest;
mod import;
mod privsep;
mod probe;
mod reload;
pub mod report;
mod smart;

use crate::Roots;
use crate::config::{Config, log_filter};
use crate::registry::COLLECTORS;
use crate::web::{self, Limits, WebSetup};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Parser, Debug)]
#[command(
    name = "ssdwatch",
    version,
    about = "SSD wear, fill, TRIM and latency exporter"
)]
pub struct Cli {
    /// YAML config file; built-in defaults when absent. Every key with its default and a comment:
    /// /etc/ssdwatch/ssdwatch.yaml as the package installs it.
    /// `--config` is the same flag.
    #[arg(
        long = "config.file",
        visible_alias = "config",
        value_name = "FILE",
        global = true
    )]
    config: Option<PathBuf>,
    /// Address to listen on: :PORT (every address), HOST:PORT or [IPv6]:PORT; repeat the flag
    /// to listen on several. Overrides web.listen_address [default: 0.0.0.0:10150].
    #[arg(long = "web.listen-address", value_name = "ADDRESS", action = ArgAction::Append, global = true)]
    listen_address: Vec<String>,
    /// Web config file (exporter-toolkit format): TLS, basic auth users, response headers,
    /// rate limit. Reloaded on SIGHUP and when it or a file it names changes.
    #[arg(long = "web.config.file", global = true)]
    web_config_file: Option<PathBuf>,
    /// Concurrent /metrics requests; more get 503 at once. 0: no cap.
    #[arg(long = "web.max-requests", default_value_t = web::limits::DEFAULT_MAX_REQUESTS, global = true)]
    max_requests: usize,
    /// Open HTTP connections at once; more wait in the kernel's accept queue. Lowered to fit
    /// the open-files limit.
    #[arg(long = "web.max-connections", default_value_t = web::limits::DEFAULT_MAX_CONNECTIONS, global = true)]
    max_connections: usize,
    /// Time for a client to send its request headers (and TLS handshake), from connecting or
    /// from its previous response: an idle keep-alive connection closes after it too.
    #[arg(long = "web.read-header-timeout", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    read_header_timeout: Duration,
    /// A connection where no byte moves either way for this long is closed.
    #[arg(long = "web.idle-timeout", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    idle_timeout: Duration,
    /// Largest request head in bytes; larger gets 431.
    #[arg(long = "web.max-header-bytes", default_value_t = web::limits::DEFAULT_MAX_HEADER_BYTES, global = true)]
    max_header_bytes: usize,
    /// On SIGTERM, open connections get this long to finish before they are dropped.
    #[arg(long = "web.shutdown-timeout", default_value = "3s", value_parser = humantime::parse_duration, global = true)]
    shutdown_timeout: Duration,
    /// Log level: error, warn, info, debug, trace (or a tracing filter); overrides log.level
    /// of the config file [default: info].
    #[arg(long = "log.level", global = true)]
    log_level: Option<String>,
    /// Log line format: logfmt (key=value, as node_exporter) or json (one object a line).
    #[arg(long = "log.format", value_enum, default_value_t = crate::logging::Format::Logfmt, global = true)]
    log_format: crate::logging::Format,
    /// sysfs mount point.
    #[arg(long = "path.sysfs", default_value = "/sys", global = true)]
    sysfs: PathBuf,
    /// procfs mount point.
    #[arg(long = "path.procfs", default_value = "/proc", global = true)]
    procfs: PathBuf,
    /// Root filesystem prefix (when running in a container with the host's / mounted here).
    #[arg(long = "path.rootfs", default_value = "/", global = true)]
    rootfs: PathBuf,
    /// Test seam: read statvfs answers from this YAML file instead of the kernel.
    #[arg(long = "fixture.statvfs", hide = true, global = true)]
    statvfs_fixture: Option<PathBuf>,
    /// Test seam: play back recorded probe outcomes (JSON) instead of running probes.
    #[arg(long = "fixture.probe-outcomes", hide = true, global = true)]
    probe_fixture: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

// Parsed once per run: the size of the largest variant (backtest's flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the daemon (the default).
    Serve,
    /// Collect once, print the exposition to stdout; exit 1 when a collector failed.
    Sample,
    /// SMART tools.
    Smart {
        #[command(subcommand)]
        command: SmartCommand,
    },
    /// Micro-benchmark probes.
    Probe {
        #[command(subcommand)]
        command: ProbeCommand,
    },
    /// One page from the history store: fill, growth and full dates, wear, TRIM, latency by fill.
    Report {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also write a self-contained HTML page (inline SVG charts) to this file.
        #[arg(long)]
        html: Option<PathBuf>,
        /// The history store file; `<state_dir>/history.db` of the config when absent.
        #[arg(long)]
        store: Option<PathBuf>,
        /// Build it from this Prometheus-compatible query API instead of the store.
        #[arg(long, value_name = "URL")]
        prometheus: Option<String>,
        /// With --prometheus: the host (its `instance` label).
        #[arg(long, requires = "prometheus", conflicts_with = "fleet")]
        instance: Option<String>,
        /// With --prometheus: the fleet's filesystems by predicted-full date and drives by
        /// wear-out date.
        #[arg(long, requires = "prometheus")]
        fleet: bool,
        /// With --prometheus: HTTP client config file in Prometheus' `http_config` format, as
        /// promtool's flag of that name (basic_auth, authorization, tls_config, http_headers
        /// such as X-Scope-OrgID, proxy_url); the files it names are read at each use.
        #[arg(
            long = "http.config.file",
            value_name = "FILE",
            requires = "prometheus"
        )]
        http_config_file: Option<PathBuf>,
    },
    /// Replays a volume's fill history (a CSV trace) through the daemon's forecast and through
    /// alert rules evaluated by Prometheus' rule engine (promtool): every alert's firing
    /// episodes, its lead time before the volume filled, and the forecast over time.
    Backtest {
        /// The trace: CSV rows `unix_seconds,size_bytes,avail_bytes` (a header row allowed),
        /// samples at least 10 s apart.
        #[arg(long, value_name = "FILE", required_unless_present = "prometheus")]
        trace: Option<PathBuf>,
        /// Read the trace from this Prometheus-compatible query API instead: the range of
        /// ssdwatch_filesystem_{size,avail}_bytes (else node_exporter's node_filesystem_*) of
        /// --instance at --mountpoint.
        #[arg(long, value_name = "URL", conflicts_with = "trace", requires_all = ["instance", "mountpoint"])]
        prometheus: Option<String>,
        /// With --prometheus: the host's `instance` label.
        #[arg(long, requires = "prometheus")]
        instance: Option<String>,
        /// With --prometheus: the range's end, Unix seconds or RFC 3339 [default: now].
        #[arg(long, requires = "prometheus", value_parser = backtest::parse_instant)]
        end: Option<i64>,
        /// With --prometheus: the range's start, Unix seconds or RFC 3339 [default: --range
        /// before the end].
        #[arg(long, requires = "prometheus", value_parser = backtest::parse_instant)]
        start: Option<i64>,
        /// With --prometheus: how far back from the end (at most 400d).
        #[arg(long, requires = "prometheus", conflicts_with = "start", default_value = "30d", value_parser = humantime::parse_duration)]
        range: Duration,
        /// With --prometheus: the trace's interval (the range queries' step, at least 10s).
        #[arg(long, requires = "prometheus", default_value = "1m", value_parser = humantime::parse_duration)]
        step: Duration,
        /// With --prometheus: HTTP client config file (Prometheus' http_config), as for `report`.
        #[arg(
            long = "http.config.file",
            value_name = "FILE",
            requires = "prometheus"
        )]
        http_config_file: Option<PathBuf>,
        /// A Prometheus rule file to evaluate (repeat for several); `shipped` stands for the
        /// package's ssdwatch.rules.yml and ssdwatch.alerts.yml [default: shipped].
        #[arg(long = "rules", value_name = "FILE")]
        rules: Vec<String>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// The rule groups' evaluation interval (Prometheus' evaluation_interval).
        #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
        eval_interval: Duration,
        /// How often the alerts' states are read (a multiple of the evaluation interval)
        /// [default: the evaluation interval].
        #[arg(long, value_parser = humantime::parse_duration)]
        check_interval: Option<Duration>,
        /// The volume's mount point, as its series are labelled (with --prometheus: the one
        /// read) [default: /srv/db].
        #[arg(long)]
        mountpoint: Option<String>,
        /// The volume's device, as its series are labelled [default: the series' own; sda1].
        #[arg(long)]
        device: Option<String>,
        /// promtool to run [default: the first on PATH].
        #[arg(long, value_name = "FILE")]
        promtool: Option<PathBuf>,
        /// Keep the generated promtool test (and rule files) in this directory.
        #[arg(long, value_name = "DIR", hide = true)]
        keep: Option<PathBuf>,
        /// Evaluate every rule of the files, also those that read none of the replayed series
        /// (slower; the alerts fire the same).
        #[arg(long)]
        all_rules: bool,
        /// Work at once: range queries for the query engine; for the rule manager, promtool
        /// runs, each over a piece of the trace after a warm-up as long as the rules' windows
        /// and `for` (the same episodes) [default: the CPUs].
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Which engine evaluates the rules: `query` (Prometheus' query engine in a server of
        /// the backtest's own, a range query a rule: fast), `rules` (promtool's rule manager,
        /// every rule at every step), `auto`: the query engine where the rules allow it.
        #[arg(long, value_enum, default_value_t = backtest::EngineChoice::Auto)]
        engine: backtest::EngineChoice,
        /// The `prometheus` binary of the query engine [default: beside promtool, else on PATH].
        #[arg(long, value_name = "FILE")]
        prometheus_binary: Option<PathBuf>,
    },
    /// The history store's tools.
    History {
        #[command(subcommand)]
        command: HistoryCommand,
    },
    /// The privileged helper, started by the daemon (docs/threat-model.md).
    #[command(hide = true, name = "smart-helper")]
    SmartHelper {
        #[arg(long)]
        worker: bool,
        #[arg(long)]
        spec: String,
    },
}

#[derive(Subcommand, Debug)]
enum HistoryCommand {
    /// Write the stored series with timestamps, for `promtool tsdb create-blocks-from openmetrics`.
    Export {
        /// OpenMetrics text (the only format).
        #[arg(long, required = true)]
        openmetrics: bool,
        /// The history store file; `<state_dir>/history.db` of the config when absent.
        #[arg(long)]
        store: Option<PathBuf>,
        /// Write here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Add `instance="NAME"` to every series (several hosts backfilled into one Prometheus).
        #[arg(long)]
        instance: Option<String>,
    },
    /// Fill this host's store from a Prometheus-compatible server (Prometheus, Thanos, Mimir,
    /// VictoriaMetrics) that already holds its node_exporter history, so forecasts have
    /// a date from the first hour.
    ///
    /// Mapping: node_exporter's `node_filesystem_{size,avail,free}_bytes` of --instance (else
    /// ssdwatch's own `ssdwatch_filesystem_*`) are matched to the filesystems the store already
    /// knows by mount point (the daemon records them at its first sample: start it once
    /// first), and the mapping is printed. node_exporter's `device` label is the mount source
    /// (/dev/mapper/...), not the kernel name, so it is shown, not matched; a mount renamed or
    /// moved is another series and is not imported. A filesystem whose size differs from the
    /// store's by more than 2% is refused as another filesystem.
    ///
    /// Written: one hourly row (min, max, mean and last of avail and free, the size) for each
    /// hour before the daemon's own first sample, marked as imported; rows the daemon wrote
    /// are never touched and an hour already held is not written again. An empty answer, an
    /// answer over 32 MiB or a server error writes nothing.
    ///
    /// Drives: where the fleet kept ssdwatch's own SMART series (wear, spare, temperature,
    /// bytes written, media errors, power-on time) under the host part of --instance with any
    /// port (db7:10150 beside db7:9100), they are matched to the store's drives by WWN, else
    /// serial and model, never by kernel name, printed, and written the same way; a drive whose
    /// imported wear or bytes written end above the daemon's first reading is refused as
    /// another drive.
    ///
    /// The daemon runs the same import by itself at its first start when the config's
    /// `history.import` names the server.
    Import {
        /// The query API's URL (as `report --prometheus`).
        #[arg(long, value_name = "URL")]
        prometheus: String,
        /// The host's `instance` label there (node_exporter's, such as db7:9100).
        #[arg(long)]
        instance: String,
        /// How far back (at most 400d).
        #[arg(long, default_value = "60d", value_parser = humantime::parse_duration)]
        range: Duration,
        /// The history store file; `<state_dir>/history.db` of the config when absent.
        #[arg(long)]
        store: Option<PathBuf>,
        /// HTTP client config file (Prometheus' http_config), as for `report`.
        #[arg(long = "http.config.file", value_name = "FILE")]
        http_config_file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum SmartCommand {
    /// Print the normalized health model of a saved `smartctl --json` output.
    Inspect { file: PathBuf },
}

#[derive(Subcommand, Debug)]
enum ProbeCommand {
    /// Run one probe now, with the daemon's safety rules.
    Run {
        /// Directory on the filesystem to probe.
        #[arg(long)]
        target: PathBuf,
        /// Probe kind (sync_write_4k, rand_read_4k, rand_write_4k, seq_write); all when absent.
        #[arg(long)]
        kind: Option<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Tunes glibc's malloc for a long-running daemon whose allocations come in bursts (a sample of
/// 500 mounts, a 1 MB exposition), unless the environment sets the same knob:
/// - one arena: glibc otherwise grows up to eight per core, each holding freed memory and its
///   own partly used pages (with two, benches/rss.sh saw the second one hold 1.2-3.0 MiB, and
///   the anonymous memory vary by 0.6 MiB from run to run with where threads landed). The
///   threads that allocate (two runtime workers, the history thread, a sample's blocking
///   threads) mostly take small blocks from their per-thread caches, which need no lock;
/// - a fixed mmap threshold of 128 KiB: glibc raises it (up to 32 MiB) each time a large block
///   is freed, after which every large exposition and sample lands in the heap and leaves holes
///   there instead of going back to the kernel on free;
/// - trimming the heap's top once 128 KiB are free there.
///
/// benches/rss.sh (64 drives, 500 filesystems, history on): with an arena limit (two) alone,
/// the daemon's anonymous memory was 10 MiB for 2.7 MiB of live allocations; see
/// docs/benchmarks.md.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for (var, param, value) in [
        ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, 1),
        ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 128 * 1024),
        ("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, 128 * 1024),
    ] {
        if std::env::var_os(var).is_none() {
            // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
            unsafe { libc::mallopt(param, value) };
        }
    }
}

/// The whole command line: the derived flags plus `--collector.NAME` and `--no-collector.NAME`
/// for every collector of the registry (so a new collector gets its flags, its man page lines
/// and its completions from its registry line).
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for e in COLLECTORS {
        let on = format!("collector.{}", e.name);
        let off = format!("no-collector.{}", e.name);
        cmd = cmd
            .arg(
                Arg::new(on.clone())
                    .long(on.clone())
                    .action(ArgAction::SetTrue)
                    .global(true)
                    .overrides_with(off.clone())
                    .help_heading("Collectors")
                    .help(format!(
                        "Enable the {} collector (overrides collectors.{}.enabled)",
                        e.name, e.name
                    )),
            )
            .arg(
                Arg::new(off.clone())
                    .long(off.clone())
                    .action(ArgAction::SetTrue)
                    .global(true)
                    .overrides_with(on)
                    .help_heading("Collectors")
                    .help(format!("Disable the {} collector", e.name)),
            );
    }
    cmd
}

/// What flags set over the config file: applied at start and again to each reloaded file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Every `--web.listen-address` given; none: the file's.
    pub listen_address: Vec<String>,
    pub log_level: Option<String>,
    /// (collector, enabled) from `--[no-]collector.NAME`; the last of the two given wins.
    pub collectors: Vec<(&'static str, bool)>,
}

impl Overrides {
    fn from_matches(cli: &Cli, m: &ArgMatches) -> Overrides {
        let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
        let collectors = COLLECTORS
            .iter()
            .filter_map(|e| {
                if given(&format!("collector.{}", e.name)) {
                    Some((e.name, true))
                } else if given(&format!("no-collector.{}", e.name)) {
                    Some((e.name, false))
                } else {
                    None
                }
            })
            .collect();
        Overrides {
            listen_address: cli.listen_address.clone(),
            log_level: cli.log_level.clone(),
            collectors,
        }
    }

    /// Flags beat the file. The error names the flag.
    pub fn apply(&self, config: &mut Config) -> Result<(), String> {
        if !self.listen_address.is_empty() {
            config.web.listen_address = self.listen_address.clone();
            if let Err(e) = config.validate() {
                return Err(format!("--web.listen-address: {}", e.message));
            }
        }
        if let Some(level) = &self.log_level {
            config.log.level = level.clone();
        }
        for (name, on) in &self.collectors {
            config.collectors.set_enabled(name, *on);
        }
        Ok(())
    }
}

/// Loads the config file (or the defaults) and applies the flags over it.
fn load_config(path: Option<&std::path::Path>, flags: &Overrides) -> Result<Config, String> {
    let mut config = Config::load(path).map_err(|e| e.to_string())?;
    flags.apply(&mut config)?;
    Ok(config)
}

/// Runs the command line given to the process; returns its exit code.
pub fn main() -> ExitCode {
    tune_malloc();
    let matches = command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let flags = Overrides::from_matches(&cli, &matches);
    let log = match start_logging(&cli) {
        Ok(log) => log,
        Err(code) => return code,
    };
    match &cli.command {
        Some(Command::Smart {
            command: SmartCommand::Inspect { file },
        }) => code(smart::inspect(file)),
        Some(Command::SmartHelper { worker, spec }) => code(privsep::smart_helper(*worker, spec)),
        Some(Command::Probe {
            command: ProbeCommand::Run { target, kind, json },
        }) => {
            let args = probe::RunArgs {
                target: target.clone(),
                kind: kind.clone(),
                json: *json,
            };
            with_config(&cli, &flags, &log, |config, roots| {
                code(probe::run(&args, &config, &roots))
            })
        }
        Some(Command::Report {
            json,
            html,
            store,
            prometheus,
            instance,
            fleet,
            http_config_file,
        }) => {
            let args = report::ReportArgs {
                json: *json,
                html: html.clone(),
                store: store.clone(),
                prometheus: prometheus.clone(),
                instance: instance.clone(),
                fleet: *fleet,
                http_config_file: http_config_file.clone(),
            };
            with_config(&cli, &flags, &log, |config, roots| {
                code(report::run(&args, &config, &roots))
            })
        }
        Some(Command::Backtest {
            trace,
            prometheus,
            instance,
            end,
            start,
            range,
            step,
            http_config_file,
            rules,
            json,
            eval_interval,
            check_interval,
            mountpoint,
            device,
            promtool,
            keep,
            all_rules,
            jobs,
            engine,
            prometheus_binary,
        }) => code(backtest::run(&backtest::BacktestArgs {
            source: match (prometheus, trace) {
                (Some(url), _) => backtest::Source::Prometheus(backtest::PrometheusSource {
                    url: url.clone(),
                    instance: instance.clone().unwrap_or_default(),
                    end: *end,
                    start: *start,
                    range: *range,
                    step: *step,
                    http_config_file: http_config_file.clone(),
                }),
                (None, t) => backtest::Source::Csv(t.clone().unwrap_or_default()),
            },
            rules: rules.clone(),
            json: *json,
            eval_interval: *eval_interval,
            check_interval: *check_interval,
            mountpoint: mountpoint.clone().unwrap_or_else(|| "/srv/db".to_string()),
            device: device.clone(),
            promtool: promtool.clone(),
            keep: keep.clone(),
            all_rules: *all_rules,
            jobs: *jobs,
            engine: *engine,
            prometheus_binary: prometheus_binary.clone(),
        })),
        Some(Command::History { command }) => with_config(&cli, &flags, &log, |config, _| {
            run_history(command, &config)
        }),
        Some(Command::Sample) => with_config(&cli, &flags, &log, run_sample),
        None | Some(Command::Serve) => run_serve(&cli, flags, log),
    }
}

/// Logging to stderr from the start, at `--log.level` (info without it); a level that can't be
/// parsed is exit status 2.
fn start_logging(cli: &Cli) -> Result<reload::LogHandle, ExitCode> {
    // The flag is checked before anything runs; the file's level is applied once it is read.
    let start_level = cli.log_level.as_deref().unwrap_or("info");
    let filter = match log_filter(start_level) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ssdwatch: --log.level {start_level:?}: {e}");
            return Err(ExitCode::from(2));
        }
    };
    Ok(reload::init_logging(filter, cli.log_format))
}

/// The config (the file or the defaults, the flags over it) with its log level applied, and
/// the roots the flags give; a config that can't be loaded is exit status 2.
fn configured(
    cli: &Cli,
    flags: &Overrides,
    log: &reload::LogHandle,
) -> Result<(Config, Roots), ExitCode> {
    let config = match load_config(cli.config.as_deref(), flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ssdwatch: {e}");
            return Err(ExitCode::from(2));
        }
    };
    log.set_level(&config.log.level);
    let roots = Roots {
        sys: cli.sysfs.clone(),
        proc: cli.procfs.clone(),
        rootfs: cli.rootfs.clone(),
        statvfs_fixture: cli.statvfs_fixture.clone(),
        probe_fixture: cli.probe_fixture.clone(),
    };
    Ok((config, roots))
}

/// Runs a subcommand on the config and the roots ([`configured`]).
fn with_config(
    cli: &Cli,
    flags: &Overrides,
    log: &reload::LogHandle,
    run: impl FnOnce(Config, Roots) -> ExitCode,
) -> ExitCode {
    match configured(cli, flags, log) {
        Ok((config, roots)) => run(config, roots),
        Err(code) => code,
    }
}

/// The async runtime of `sample` and of the daemon.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all()
        .build()
    {
        Ok(rt) => Ok(rt),
        Err(e) => {
            eprintln!("ssdwatch: starting the async runtime: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// `history export`.
fn run_history(command: &HistoryCommand, config: &Config) -> ExitCode {
    match command {
        HistoryCommand::Export {
            store,
            output,
            instance,
            ..
        } => code(report::export(store, output, instance.as_deref(), config)),
        HistoryCommand::Import {
            prometheus,
            instance,
            range,
            store,
            http_config_file,
        } => code(import::run(
            &crate::import::ImportArgs {
                prometheus: prometheus.clone(),
                instance: instance.clone(),
                range: *range,
                http_config_file: http_config_file.clone(),
            },
            store.as_deref(),
            config,
        )),
    }
}

/// `sample`: collects once and prints the exposition; exit status 1 when a collector failed.
fn run_sample(config: Config, roots: Roots) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(crate::sample_once(&config, roots)) {
        Ok((text, ok)) => {
            print!("{text}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ssdwatch: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// `serve` (the default): the daemon, until SIGTERM or SIGINT.
fn run_serve(cli: &Cli, flags: Overrides, log: reload::LogHandle) -> ExitCode {
    let (config, roots) = match configured(cli, &flags, &log) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The daemon gives up its capabilities here, before any thread, port or collector exists.
    let started = match privsep::split(&config.collectors.smart, &config.collectors.layers, &roots)
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ssdwatch: {e}");
            return ExitCode::from(1);
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // Both config files are good when the daemon starts (a bad one stops it, exit 2).
    let reloads = crate::snapshot::ConfigReloads::loaded_at_start();
    // SIGHUP is caught from here on, before the web config is loaded.
    let (helper, reload) = {
        let _in_runtime = rt.enter();
        let helper = match started.map(privsep::connect).transpose() {
            Ok(h) => h,
            Err(e) => {
                eprintln!("ssdwatch: {e}");
                return ExitCode::from(1);
            }
        };
        let reload = reload::on_sighup(reload::Reloader {
            path: cli.config.clone(),
            flags,
            current: config.clone(),
            log,
            reloads: reloads.clone(),
        });
        (helper, reload)
    };
    let web = match web_setup(cli, reload, reloads) {
        Ok(w) => w,
        Err(message) => {
            eprintln!("ssdwatch: {message}");
            return ExitCode::from(2);
        }
    };
    rt.spawn(crate::memory::release_after_start_up("the daemon"));
    let result = rt.block_on(crate::run(config, roots, web, helper, shutdown_signal()));
    // A collector's blocking call stuck in the kernel (a hung mount) must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ssdwatch: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The web layer as the flags say: limits checked and fitted to the open-files limit (raised
/// first), the web config loaded and checked. Errors are for exit status 2.
fn web_setup(
    cli: &Cli,
    reload: mpsc::Receiver<()>,
    reloads: std::sync::Arc<crate::snapshot::ConfigReloads>,
) -> Result<WebSetup, String> {
    let mut limits = Limits {
        max_connections: cli.max_connections,
        max_requests: cli.max_requests,
        read_header_timeout: cli.read_header_timeout,
        idle_timeout: cli.idle_timeout,
        max_header_bytes: cli.max_header_bytes,
        shutdown_timeout: cli.shutdown_timeout,
    };
    limits.validate().map_err(|i| i.to_string())?;
    match web::limits::raise_nofile() {
        Ok((before, after)) => {
            if after != before {
                tracing::info!("raised the open-files limit from {before} to {after}");
            }
            let (cap, lowered) = web::limits::connection_cap(limits.max_connections, after);
            if lowered {
                tracing::warn!(
                    "--web.max-connections {} lowered to {cap} to leave file descriptors for the collectors (open-files limit {after})",
                    limits.max_connections
                );
            }
            limits.max_connections = cap;
        }
        Err(e) => tracing::warn!("reading the open-files limit: {e}"),
    }
    let active = match &cli.web_config_file {
        Some(path) => web::load(path).map_err(|e| e.to_string())?,
        None => web::Active::default(),
    };
    Ok(WebSetup {
        config_file: cli.web_config_file.clone(),
        active,
        limits,
        reload,
        reloads,
    })
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(u8::try_from(c).unwrap_or(1))
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
