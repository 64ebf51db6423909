//! Bench tool, not shipped: creates a new history store under STATE_DIR holding DAYS of
//! synthetic samples of the series another store holds (benches/history_io.sh's steady
//! state). It refuses a directory that already has a store: synthetic rows never mix with a
//! host's real history.
//!
//! Usage: history_fill --state-dir DIR --like STORE [--days N] [--raw-interval SECONDS]

use ssdwatch::history::fill::fill_new;
use ssdwatch::history::{HistoryConfig, Store};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const USAGE: &str =
    "usage: history_fill --state-dir DIR --like STORE [--days N] [--raw-interval SECONDS]";

struct Args {
    state_dir: PathBuf,
    like: PathBuf,
    days: i64,
    raw_interval: u64,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut state_dir, mut like, mut days, mut raw_interval) = (None, None, 14, 300);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--state-dir" => state_dir = Some(PathBuf::from(value()?)),
            "--like" => like = Some(PathBuf::from(value()?)),
            "--days" => {
                days = value()?
                    .parse::<i64>()
                    .ok()
                    .filter(|d| (1..=800).contains(d))
                    .ok_or("--days: a whole number from 1 to 800")?
            }
            "--raw-interval" => {
                raw_interval = value()?
                    .parse::<u64>()
                    .ok()
                    .filter(|s| (1..=86_400).contains(s))
                    .ok_or("--raw-interval: seconds from 1 to 86400")?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        state_dir: state_dir.ok_or("--state-dir is required")?,
        like: like.ok_or("--like is required")?,
        days,
        raw_interval,
    })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("history_fill: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cfg = HistoryConfig {
        enabled: true,
        raw_interval: Duration::from_secs(args.raw_interval),
        ..HistoryConfig::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let until = now - args.raw_interval as i64;
    let result = Store::open_read_only(&args.like)
        .map_err(|e| e.to_string())
        .and_then(|like| {
            fill_new(&args.state_dir, &cfg, &like, args.days, until).map_err(|e| e.to_string())
        });
    match result {
        Ok(f) => {
            eprintln!(
                "history_fill: {} samples of {} filesystems and {} drives in {} transactions, {} days to {until}",
                f.samples, f.filesystems, f.drives, f.commits, args.days
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("history_fill: {e}");
            ExitCode::from(1)
        }
    }
}
