//! The process's own figures from procfs (`self/stat`, `self/limits`, `self/fd`, `stat`'s
//! btime): pure parsers and a thin reader under a given root. No metrics here.

use std::path::{Path, PathBuf};

/// What `<proc>/self/stat` says about this process, in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfStat {
    /// User and system CPU time, in clock ticks (`sysconf(_SC_CLK_TCK)`).
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time after boot, in clock ticks.
    pub start_ticks: u64,
    pub vsize_bytes: u64,
    /// Resident set, in pages.
    pub rss_pages: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ProcError {
    pub path: String,
    pub problem: String,
}

/// What is wrong with the text of a `stat` or `statm` file (the reader adds its path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelfStatError {
    #[error("no ')' closing the command name")]
    NoCommandEnd,
    #[error("{fields} fields; {name} is field {field}")]
    MissingField {
        fields: usize,
        name: &'static str,
        field: usize,
    },
    #[error("{name} (field {field}) {value:?} is not a count")]
    NotACount {
        name: &'static str,
        field: usize,
        value: String,
    },
    #[error("{text:?} does not start with two page counts")]
    NotStatm { text: String },
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<SelfStat, SelfStatError> {
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or(SelfStatError::NoCommandEnd)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    let num = |field: usize, name: &'static str| -> Result<u64, SelfStatError> {
        let v = f.get(field - 3).ok_or(SelfStatError::MissingField {
            fields: f.len() + 2,
            name,
            field,
        })?;
        v.parse::<u64>().map_err(|_| SelfStatError::NotACount {
            name,
            field,
            value: v.to_string(),
        })
    };
    Ok(SelfStat {
        utime_ticks: num(14, "utime")?,
        stime_ticks: num(15, "stime")?,
        start_ticks: num(22, "starttime")?,
        vsize_bytes: num(23, "vsize")?,
        rss_pages: num(24, "rss")?,
    })
}

/// `/proc/<pid>/statm`: (total program size, resident set), both in pages.
pub fn parse_statm(text: &str) -> Result<(u64, u64), SelfStatError> {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>());
    match (f.next(), f.next()) {
        (Some(Ok(size)), Some(Ok(resident))) => Ok((size, resident)),
        _ => Err(SelfStatError::NotStatm {
            text: text.trim().to_string(),
        }),
    }
}

/// Reads `<proc_root>/self/statm`: (virtual size, resident set) in pages. Cheaper for the
/// kernel to produce than `stat`, so it is what a scrape reads.
pub fn read_statm(proc_root: &Path) -> Result<(u64, u64), ProcError> {
    let path = proc_root.join("self/statm");
    let text = read(path.clone())?;
    parse_statm(&text).map_err(|problem| ProcError {
        path: path.display().to_string(),
        problem: problem.to_string(),
    })
}

/// The soft "Max open files" of `/proc/<pid>/limits`; `None` when absent or unlimited.
pub fn parse_max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time (`btime`, Unix seconds) of `/proc/stat`.
pub fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn read(path: PathBuf) -> Result<String, ProcError> {
    std::fs::read_to_string(&path).map_err(|e| ProcError {
        path: path.display().to_string(),
        problem: e.to_string(),
    })
}

/// Reads `<proc_root>/self/stat`.
pub fn read_stat(proc_root: &Path) -> Result<SelfStat, ProcError> {
    let path = proc_root.join("self/stat");
    let text = read(path.clone())?;
    parse_stat(&text).map_err(|problem| ProcError {
        path: path.display().to_string(),
        problem: problem.to_string(),
    })
}

/// Reads the soft open-files limit from `<proc_root>/self/limits`: the tests' check that it
/// is the limit the daemon takes from getrlimit (src/process.rs).
#[cfg(test)]
pub fn read_max_open_files(proc_root: &Path) -> Result<Option<u64>, ProcError> {
    Ok(parse_max_open_files(&read(proc_root.join("self/limits"))?))
}

/// Counts the entries of `<proc_root>/self/fd` (the directory's own descriptor included, as
/// every Prometheus client library counts).
pub fn count_open_fds(proc_root: &Path) -> Result<u64, ProcError> {
    let dir = proc_root.join("self/fd");
    let entries = std::fs::read_dir(&dir).map_err(|e| ProcError {
        path: dir.display().to_string(),
        problem: e.to_string(),
    })?;
    Ok(entries.filter(|e| e.is_ok()).count() as u64)
}

/// Reads the boot time from `<proc_root>/stat`.
pub fn read_btime(proc_root: &Path) -> Result<Option<u64>, ProcError> {
    Ok(parse_btime(&read(proc_root.join("stat"))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line of a running ssdwatch (kernel 6.1), with a command name made awkward.
    const STAT: &str = "4242 (ssd) (watch)) S 1 4242 4242 0 -1 4194560 1936 0 0 0 37 12 0 0 30 10 \
        5 0 8812345 611102720 3211 18446744073709551615 1 1 0 0 0 0 0 4096 17610 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(
            s,
            SelfStat {
                utime_ticks: 37,
                stime_ticks: 12,
                start_ticks: 8812345,
                vsize_bytes: 611102720,
                rss_pages: 3211,
            }
        );
    }

    #[test]
    fn a_short_or_garbled_stat_names_the_field() {
        let e = parse_stat("1 (x) S 1 2 3").unwrap_err().to_string();
        assert!(e.contains("utime is field 14"), "{e}");
        let e = parse_stat("no parenthesis").unwrap_err().to_string();
        assert!(e.contains("')'"), "{e}");
        let bad = STAT.replace(" 37 12 ", " 37 x ");
        let e = parse_stat(&bad).unwrap_err().to_string();
        assert!(e.contains("stime (field 15) \"x\""), "{e}");
    }

    #[test]
    fn statm_gives_size_and_resident_pages() {
        assert_eq!(
            parse_statm("26716 3211 1520 2209 0 3975 0\n"),
            Ok((26716, 3211))
        );
        assert!(parse_statm("").is_err());
        assert!(
            parse_statm("12 x 3")
                .unwrap_err()
                .to_string()
                .contains("two page counts")
        );
        let (size, rss) = read_statm(Path::new("/proc")).unwrap();
        assert!(rss > 0 && size >= rss);
    }

    #[test]
    fn limits_and_btime_are_read_and_unlimited_is_unknown() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
            Max cpu time              unlimited            unlimited            seconds   \n\
            Max open files            8192                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(8192));
        assert_eq!(
            parse_max_open_files(&limits.replace("8192 ", "unlimited ")),
            None
        );
        assert_eq!(parse_max_open_files("nothing"), None);
        assert_eq!(
            parse_btime("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_btime("cpu 1\n"), None);
    }

    #[test]
    fn this_process_reads_as_itself() {
        let root = Path::new("/proc");
        let s = read_stat(root).unwrap();
        assert!(s.rss_pages > 0 && s.vsize_bytes > 0);
        // stdin, stdout, stderr and the fd directory itself at least (other test threads
        // open and close files meanwhile, so no exact count).
        assert!(count_open_fds(root).unwrap() >= 4);
        assert!(read_max_open_files(root).unwrap().is_some());
        assert!(read_btime(root).unwrap().is_some());
        let e = read_stat(Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/self/stat"), "{e}");
    }
}
