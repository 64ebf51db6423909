//! The probe I/O engine: aligned O_DIRECT buffers, ioprio, file safety (placeholder).

use std::path::PathBuf;

/// Arguments of `ssdwatch probe run`.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub target: PathBuf,
    pub kind: Option<String>,
    pub json: bool,
}

/// `ssdwatch probe run`: one probe now, same safety rules as the daemon. Returns the exit code.
pub fn run_command(args: &RunArgs, config: &crate::config::Config, roots: &crate::Roots) -> i32 {
    let _ = (config, roots);
    eprintln!("probe run {}: not implemented yet", args.target.display());
    2
}
