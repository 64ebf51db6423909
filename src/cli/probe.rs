//! `ssdwatch probe run`: one probe now, through the daemon's own engine and safety gates.

use crate::Roots;
use crate::config::Config;
use crate::probe::{MIB, Outcome, ProbeKind, RunInputs, run_target};
use std::path::PathBuf;

/// Arguments of `ssdwatch probe run`.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub target: PathBuf,
    pub kind: Option<String>,
    pub json: bool,
}

/// `ssdwatch probe run`: one probe now, same safety rules and code path as the daemon.
/// The target's settings come from the config when it lists that path, else the defaults.
/// Returns the exit code: 0 ran, 1 skipped, 2 bad arguments.
pub fn run(args: &RunArgs, config: &Config, roots: &Roots) -> i32 {
    let mut t = config
        .collectors
        .probe
        .targets
        .iter()
        .find(|t| t.path == args.target)
        .cloned()
        .unwrap_or_default();
    t.path = match std::path::absolute(&args.target) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "ssdwatch probe run: --target {}: {e}",
                args.target.display()
            );
            return 2;
        }
    };
    let kinds = match &args.kind {
        Some(k) => match ProbeKind::parse(k) {
            Some(k) => vec![k],
            None => {
                eprintln!(
                    "ssdwatch probe run: --kind {k}: unknown (one of sync_write_4k, rand_read_4k, rand_write_4k, seq_write)"
                );
                return 2;
            }
        },
        None => t.kinds.clone(),
    };
    if let Err(e) = t.validate("--target") {
        eprintln!("ssdwatch probe run: {}: {}", e.key, e.message);
        return 2;
    }
    let inputs = RunInputs {
        roots,
        state_dir: &config.state_dir,
        shared: None,
        topology: None,
        kinds,
        busy_window: config.collectors.probe.busy_window,
    };
    let outcome = run_target(&t, &inputs);
    if args.json {
        match serde_json::to_string_pretty(&outcome) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("ssdwatch probe run: {e}"),
        }
    } else {
        print_human(&outcome);
    }
    match outcome {
        Outcome::Ran(_) => 0,
        Outcome::Skipped(_) => 1,
    }
}

fn opt(v: Option<f64>, scale: f64, unit: &str) -> String {
    v.map(|x| format!("{:.1}{unit}", x * scale))
        .unwrap_or_else(|| "unknown".to_string())
}

fn print_human(o: &Outcome) {
    match o {
        Outcome::Skipped(s) => {
            println!("skipped ({}): {}", s.reason.as_str(), s.detail);
        }
        Outcome::Ran(r) => {
            println!(
                "target {} on {} (drive {}), {:.2} s, {} bytes written{}",
                r.target.display(),
                r.placement.mountpoint,
                r.placement.drives.join(","),
                r.duration_seconds,
                r.written_bytes,
                if r.file_created_bytes > 0 {
                    " (probe file created)"
                } else {
                    ""
                }
            );
            let c = &r.context;
            println!(
                "context: fill {}, since discard {}, idle {}, utilization before {}, during {}",
                opt(c.fill_ratio, 100.0, "%"),
                opt(c.since_discard_seconds, 1.0, " s"),
                opt(c.idle_seconds, 1.0, " s"),
                opt(c.utilization_before_ratio, 100.0, "%"),
                opt(c.utilization_ratio, 100.0, "%"),
            );
            for k in &r.results {
                // A quantile the run is too short to measure is left out (see probe::measurable).
                let q = |name: &str, v: Option<f64>| match v {
                    Some(v) => format!("  {name} {:>9.1} us", v * 1e6),
                    None => format!("  {name} {:>9}   ", "-"),
                };
                print!(
                    "{:<14} {:>5} ops{}{}{}",
                    k.probe.as_str(),
                    k.ops,
                    q("p50", k.p50_seconds),
                    q("p99", k.p99_seconds),
                    q("max", Some(k.max_seconds)),
                );
                match k.throughput_bytes_per_second {
                    Some(t) => println!("  {:.1} MiB/s", t / MIB as f64),
                    None => println!(),
                }
            }
            for k in &r.budget_skipped {
                println!("{:<14} skipped (budget)", k.as_str());
            }
        }
    }
}
