//! `ssdwatch probe run`: one probe now, through the daemon's own engine and safety gates.

use crate::Roots;
use crate::config::Config;
use crate::probe::{MIB, Outcome, ProbeKind, RunInputs, budget, fsafe, run_target};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Arguments of `ssdwatch probe run`.
#[derive(Debug, Clone)]
pub(super) struct RunArgs {
    pub target: PathBuf,
    pub kind: Option<String>,
    pub json: bool,
}

/// `ssdwatch probe run`: one probe now, same safety rules and code path as the daemon.
/// The target's settings come from the config when it lists that path, else the defaults.
/// Returns the exit code: 0 ran, 1 skipped, 2 bad arguments.
pub(super) fn run(args: &RunArgs, config: &Config, roots: &Roots) -> i32 {
    let listed = config
        .collectors
        .probe
        .targets
        .iter()
        .find(|t| t.path == args.target);
    let mut t = listed.cloned().unwrap_or_default();
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
    // As root on a target the daemon probes: run as the daemon's user, or the probe directory
    // made now would be root's (0700) and refuse the daemon for good.
    if listed.is_some()
        && let Some((uid, gid)) = daemon_user(config)
    {
        if let Err(e) = become_user(uid, gid) {
            eprintln!(
                "ssdwatch probe run: cannot switch to {}, the owner of {} (the daemon's user): {e}; refusing to run as root, which would leave {}/{} owned by root",
                fsafe::who(uid),
                config.state_dir.display(),
                t.path.display(),
                fsafe::PROBE_DIR
            );
            return 1;
        }
        eprintln!(
            "ssdwatch probe run: running as {}, the owner of {}, as the daemon does",
            fsafe::who(uid),
            config.state_dir.display()
        );
    }
    let inputs = RunInputs {
        roots,
        state_dir: &config.state_dir,
        shared: None,
        topology: None,
        kinds,
        busy_window: config.collectors.probe.busy_window,
        hand: true,
    };
    let outcome = run_target(&t, &inputs);
    if args.json {
        match serde_json::to_string_pretty(&outcome) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("ssdwatch probe run: {e}"),
        }
    } else {
        print_human(&outcome);
        print_budget(config, &t);
    }
    match outcome {
        Outcome::Ran(_) => 0,
        Outcome::Skipped(_) => 1,
    }
}

/// The daemon's user, when this runs as root: the owner of the state directory (the shipped
/// unit's `StateDirectory=` gives it to `User=`), if that is not root.
fn daemon_user(config: &Config) -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let m = std::fs::metadata(&config.state_dir).ok()?;
    (m.uid() != 0).then_some((m.uid(), m.gid()))
}

/// Drops root for `uid`/`gid` (supplementary groups too), for good.
fn become_user(uid: u32, gid: u32) -> nix::Result<()> {
    use nix::unistd::{Gid, Uid, setgid, setgroups, setuid};
    setgroups(&[Gid::from_raw(gid)])?;
    setgid(Gid::from_raw(gid))?;
    setuid(Uid::from_raw(uid))
}

/// What runs by hand have spent today: they have a budget of their own, apart from the daemon's.
fn print_budget(config: &Config, t: &crate::probe::TargetConfig) {
    let key = budget::key(&t.path.display().to_string(), true);
    if let Ok(b) = budget::load(&config.state_dir) {
        let u = b
            .targets
            .get(&key)
            .cloned()
            .unwrap_or_default()
            .at(crate::time::unix_now());
        println!(
            "budget: runs by hand wrote {} of their {} bytes today (kept apart from the daemon's)",
            u.written_bytes, t.budget_bytes_per_day
        );
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
