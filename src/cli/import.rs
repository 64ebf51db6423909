//! `ssdwatch history import`: the import engine (`crate::import`) on the store the flags or the
//! config name, its mapping printed on stdout, an error as one line on stderr.

use crate::config::Config;
use crate::history::store::FILE_NAME;
use crate::import::{ImportArgs, import};
use crate::time::unix_now;
use std::path::{Path, PathBuf};

/// `ssdwatch history import`; exit code 0, or 1 with one line on stderr.
pub(crate) fn run(args: &ImportArgs, store: Option<&Path>, config: &Config) -> i32 {
    let dir = match store {
        Some(f) if f.file_name().is_some_and(|n| n == FILE_NAME) => {
            f.parent().map(PathBuf::from).unwrap_or_default()
        }
        Some(f) => {
            eprintln!(
                "ssdwatch history import: --store {}: the store's file is named {FILE_NAME}",
                f.display()
            );
            return 1;
        }
        None => config.state_dir.clone(),
    };
    let mut say = |line: String| println!("{line}");
    match import(args, &dir, &config.history, unix_now() as i64, &mut say) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("ssdwatch history import: {e}");
            1
        }
    }
}
