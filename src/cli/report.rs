//! `ssdwatch report` and `ssdwatch history export`: read the history store beside a running
//! daemon (read-only; WAL lets a reader in while the daemon writes) and print what it holds.

use crate::Roots;
use crate::config::Config;
use crate::history::{Store, export, store::FILE_NAME};
use crate::report;
use crate::time::unix_now;
use std::path::{Path, PathBuf};

/// Arguments of `ssdwatch report`.
#[derive(Debug, Clone)]
pub struct ReportArgs {
    pub json: bool,
    pub html: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub prometheus: Option<String>,
    pub instance: Option<String>,
    pub fleet: bool,
    pub http_config_file: Option<PathBuf>,
}

/// Rows of the fleet's view listed at most (per list).
const FLEET_ROWS: usize = 50;

/// The host name, as the kernel has it (under `--path.procfs`).
pub fn host_name(roots: &Roots) -> String {
    report::host_name(&roots.proc)
}

fn store_path(arg: &Option<PathBuf>, config: &Config) -> PathBuf {
    arg.clone()
        .unwrap_or_else(|| config.state_dir.join(FILE_NAME))
}

/// Builds the report of the store at `path` as of `now`; a store not created yet gives a
/// report that says so.
pub fn report_of(
    path: &Path,
    host: &str,
    now: i64,
    config: &Config,
) -> Result<report::Report, String> {
    let rules = config
        .history
        .endurance_rules()
        .map_err(|e| format!("history.endurance: {e}"))?;
    // The config this command read may not be the daemon's: its targets count only when it
    // has some (the report then says runs are to come, not to configure one).
    let probe = &config.collectors.probe;
    let targets = (probe.enabled && !probe.targets.is_empty()).then_some(probe.targets.len());
    let levels = crate::history::slow::levels_of(&probe.targets);
    report::from_store(path, host, now, &rules, targets, &levels).map_err(|e| e.to_string())
}

/// `ssdwatch report`: text (or `--json`) on stdout, and `--html FILE`. Exit code 0, or 1 when
/// the store can't be read or the page can't be written.
pub fn run(args: &ReportArgs, config: &Config, roots: &Roots) -> i32 {
    let path = store_path(&args.store, config);
    let now = unix_now() as i64;
    let http_config = args.http_config_file.as_deref();
    let built = match (&args.prometheus, &args.instance, args.fleet) {
        (Some(url), _, true) => return fleet(url, http_config, now, args.json),
        (Some(url), Some(instance), false) => match config.history.endurance_rules() {
            Ok(rules) => crate::query::Api::with_config(url, http_config)
                .and_then(|api| report::prometheus::build(&api, instance, now, &rules))
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("history.endurance: {e}")),
        },
        (Some(_), None, false) => {
            eprintln!("ssdwatch report: --prometheus needs --instance HOST or --fleet");
            return 2;
        }
        _ => report_of(&path, &host_name(roots), now, config),
    };
    let r = match built {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ssdwatch report: {e}");
            return 1;
        }
    };
    if let Some(file) = &args.html
        && let Err(e) = std::fs::write(file, report::html::render(&r))
    {
        eprintln!("ssdwatch report: --html {}: {e}", file.display());
        return 1;
    }
    if args.json {
        println!("{}", report::json(&r));
    } else {
        print!("{}", report::text::render(&r));
    }
    0
}

/// `ssdwatch report --prometheus URL --fleet`.
fn fleet(url: &str, http_config: Option<&Path>, now: i64, json: bool) -> i32 {
    let listed = crate::query::Api::with_config(url, http_config)
        .and_then(|api| report::prometheus::fleet(&api, now, FLEET_ROWS));
    let (fs, drives) = match listed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("ssdwatch report: {e}");
            return 1;
        }
    };
    if json {
        let v = serde_json::json!({ "filesystems": fs, "drives": drives });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return 0;
    }
    println!("FILESYSTEMS BY PREDICTED-FULL DATE (soonest {FLEET_ROWS})");
    for r in &fs {
        println!(
            "  {}  {:<24} {}",
            report::date(r.when_unix),
            r.instance,
            r.what
        );
    }
    println!("\nDRIVES BY PREDICTED WEAR-OUT DATE (soonest {FLEET_ROWS})");
    for r in &drives {
        println!(
            "  {}  {:<24} {}",
            report::date(r.when_unix),
            r.instance,
            r.what
        );
    }
    0
}

/// `ssdwatch history export --openmetrics`: the store's series to `output` (stdout when absent).
/// Exit code 0, or 1 when the store can't be read or the output written.
pub fn export(
    store: &Option<PathBuf>,
    output: &Option<PathBuf>,
    instance: Option<&str>,
    config: &Config,
) -> i32 {
    let path = store_path(store, config);
    let s = match Store::open_read_only(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ssdwatch history export: {e}");
            return 1;
        }
    };
    let now = unix_now() as i64;
    let result = match output {
        Some(file) => std::fs::File::create(file)
            .map_err(|e| format!("{}: {e}", file.display()))
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                let n = export::export(&s, now, instance, &mut w)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
                std::io::Write::flush(&mut w).map_err(|e| format!("{}: {e}", file.display()))?;
                Ok(n)
            }),
        None => {
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            export::export(&s, now, instance, &mut w)
                .map_err(|e| e.to_string())
                .and_then(|n| {
                    std::io::Write::flush(&mut w)
                        .map(|_| n)
                        .map_err(|e| e.to_string())
                })
        }
    };
    match result {
        Ok(n) => {
            eprintln!(
                "ssdwatch history export: {n} samples from {}",
                path.display()
            );
            0
        }
        Err(e) => {
            eprintln!("ssdwatch history export: {e}");
            1
        }
    }
}
