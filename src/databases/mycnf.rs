//! MySQL/MariaDB option files (`my.cnf`), for what a server started without arguments was told:
//! its data directory and where its binary logs go (Debian starts `mariadbd` bare and puts
//! `log_bin = /var/log/mysql/mysql-bin.log` in /etc/mysql/mariadb.conf.d/50-server.cnf). Only
//! the server's sections are read; `!include` and `!includedir` are followed to a bounded depth.

use super::ConfigFiles;
use std::path::{Path, PathBuf};

/// What the server's sections set (the last setting wins, as for the server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub datadir: Option<String>,
    /// `log_bin` / `log-bin` with a value: the base name of the binary logs.
    pub log_bin: Option<String>,
    /// `log_error` and `slow_query_log_file` with a value: logs that may be elsewhere.
    pub log_error: Option<String>,
    pub slow_query_log_file: Option<String>,
    /// `binlog_expire_logs_seconds` and `expire_logs_days`, as they were set (the last of each
    /// wins): see [`binlog_expiry`].
    pub binlog_expire_logs_seconds: Option<String>,
    pub expire_logs_days: Option<String>,
}

/// How long the server keeps binary logs from its two settings: `binlog_expire_logs_seconds`
/// where set and not 0 (MySQL 8, MariaDB 10.6), else `expire_logs_days` (days, decimals
/// allowed in MariaDB). `Some(0)` when they say "never purged"; None when neither is set or
/// readable (the server's built-in default, which differs between MySQL and MariaDB).
pub fn binlog_expiry(seconds: Option<&str>, days: Option<&str>) -> Option<u64> {
    let secs = seconds.and_then(|v| v.trim().parse::<u64>().ok());
    let days = days
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|d| d.is_finite() && *d >= 0.0 && *d <= 100_000.0)
        .map(|d| (d * crate::time::DAY_F64).round() as u64);
    match (secs, days) {
        (Some(s), _) if s > 0 => Some(s),
        (_, Some(d)) => Some(d),
        (s, None) => s,
    }
}

/// Where the server reads its options when not told otherwise (MariaDB's and MySQL's
/// defaults on Linux, in their order).
pub const DEFAULT_FILES: &[&str] = &["/etc/my.cnf", "/etc/mysql/my.cnf"];

/// The data directory the server is built with on Debian, Ubuntu and RHEL's packages and
/// the upstream ones: what it uses when neither its command line nor its option files say.
pub const COMPILED_DATADIR: &str = "/var/lib/mysql";

/// Sections the server reads (`[mysqld-8.0]` and `[mariadb-10.11]` too).
fn server_section(name: &str) -> bool {
    let base = name.split('-').next().unwrap_or(name);
    matches!(
        base,
        "mysqld" | "server" | "mariadb" | "mariadbd" | "galera"
    )
}

/// An `!include FILE` or `!includedir DIR` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Include {
    File(String),
    Dir(String),
}

/// Reads one file's text into `opts`; returns its includes, in order.
pub fn parse(text: &str, opts: &mut Options) -> Vec<Include> {
    let mut includes = Vec::new();
    let mut in_server = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("!includedir") {
            includes.push(Include::Dir(rest.trim().to_string()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("!include") {
            includes.push(Include::File(rest.trim().to_string()));
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_server = server_section(name.trim());
            continue;
        }
        if !in_server {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(unquote(v))),
            None => (line, None),
        };
        match key.replace('-', "_").as_str() {
            "datadir" => opts.datadir = value.filter(|v| !v.is_empty()),
            "log_bin" => opts.log_bin = value.filter(|v| !v.is_empty()),
            "skip_log_bin" | "disable_log_bin" => opts.log_bin = None,
            "log_error" => opts.log_error = value.filter(|v| !v.is_empty()),
            "slow_query_log_file" => opts.slow_query_log_file = value.filter(|v| !v.is_empty()),
            "binlog_expire_logs_seconds" => opts.binlog_expire_logs_seconds = value,
            "expire_logs_days" => opts.expire_logs_days = value,
            _ => {}
        }
    }
    includes
}

/// A value without its quotes, or without its trailing comment when unquoted.
fn unquote(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(rest) = v.strip_prefix(q) {
            return rest.split(q).next().unwrap_or("").to_string();
        }
    }
    let end = v.find(" #").or_else(|| v.find("\t#")).unwrap_or(v.len());
    v[..end].trim().to_string()
}

/// An option file bigger than this is not read (see [`ConfigFiles`] for the other limits).
const MAX_FILE_BYTES: u64 = 256 << 10;

/// Reads `files` (host paths, under `rootfs`) and what they include, in order; files that are
/// missing or unreadable are skipped (an option file the daemon may not read tells nothing).
pub fn read(rootfs: &Path, files: &[PathBuf]) -> Options {
    let mut opts = Options::default();
    let mut conf = ConfigFiles::new(rootfs, MAX_FILE_BYTES);
    for f in files {
        read_one(&mut conf, f, &mut opts, 0);
    }
    opts
}

fn read_one(conf: &mut ConfigFiles<'_>, file: &Path, opts: &mut Options, depth: usize) {
    let Some(text) = conf.read(file, depth) else {
        return;
    };
    for inc in parse(&text, opts) {
        match inc {
            Include::File(f) => read_one(conf, Path::new(&f), opts, depth + 1),
            // The server reads them in name order.
            Include::Dir(d) => {
                for f in conf.dir(Path::new(&d), |n| n.ends_with(".cnf")) {
                    read_one(conf, &f, opts, depth + 1);
                }
            }
        }
    }
}

/// The binary log index a `log_bin` base name gives: `/var/log/mysql/mysql-bin.log` →
/// `/var/log/mysql/mysql-bin.index` (the extension is dropped), relative to the data directory
/// when not absolute.
pub fn binlog_index(log_bin: &str, datadir: &Path) -> PathBuf {
    let p = Path::new(log_bin);
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        datadir.join(p)
    };
    p.with_extension("index")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_sections_are_read_and_the_last_setting_wins() {
        let mut o = Options::default();
        let inc = parse(
            "[client]\ndatadir = /nope\n\n[mysqld]\ndatadir = /srv/a\n\
             # a comment\nlog-bin = \"/var/log/mysql/mysql-bin.log\"  # binlogs\n\
             [mariadb-10.11]\ndatadir=/srv/b\n[mysqldump]\nquick\n\
             !includedir /etc/mysql/conf.d/\n",
            &mut o,
        );
        assert_eq!(o.datadir.as_deref(), Some("/srv/b"));
        assert_eq!(o.log_bin.as_deref(), Some("/var/log/mysql/mysql-bin.log"));
        assert_eq!(inc, [Include::Dir("/etc/mysql/conf.d/".into())]);
        // log_bin without a value: the default name, not a path we know; skip-log-bin: none.
        let mut o = Options::default();
        parse("[server]\nlog_bin\n", &mut o);
        assert_eq!(o.log_bin, None);
        let mut o = Options::default();
        parse("[mysqld]\nlog_bin=/x/b.log\nskip-log-bin\n", &mut o);
        assert_eq!(o.log_bin, None);
        // The error and slow logs, where Debian's 50-server.cnf puts them.
        let mut o = Options::default();
        parse(
            "[mysqld]\nlog-error = /var/log/mysql/error.log\n\
             slow_query_log_file = /var/log/mysql/mariadb-slow.log\n",
            &mut o,
        );
        assert_eq!(o.log_error.as_deref(), Some("/var/log/mysql/error.log"));
        assert_eq!(
            o.slow_query_log_file.as_deref(),
            Some("/var/log/mysql/mariadb-slow.log")
        );
    }

    #[test]
    fn debians_layout_is_followed_through_its_include_directories() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let w = |p: &str, s: &str| {
            let p = r.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w(
            "etc/mysql/my.cnf",
            "[client-server]\nsocket = /run/mysqld/mysqld.sock\n\
             !includedir /etc/mysql/conf.d/\n!includedir /etc/mysql/mariadb.conf.d/\n",
        );
        w("etc/mysql/conf.d/mysql.cnf", "[mysql]\n");
        w(
            "etc/mysql/mariadb.conf.d/50-server.cnf",
            "[server]\n[mysqld]\nuser = mysql\ndatadir = /var/lib/mysql\n\
             log_bin = /var/log/mysql/mysql-bin.log\n",
        );
        w(
            "etc/mysql/mariadb.conf.d/60-local.cnf",
            "[mariadbd]\ndatadir = /srv/mysql\n",
        );
        // An include loop ends at the depth bound.
        w(
            "etc/mysql/conf.d/loop.cnf",
            "!include /etc/mysql/conf.d/loop.cnf\n",
        );
        let o = read(
            r,
            &DEFAULT_FILES.iter().map(PathBuf::from).collect::<Vec<_>>(),
        );
        assert_eq!(o.datadir.as_deref(), Some("/srv/mysql"));
        assert_eq!(
            binlog_index(o.log_bin.as_deref().unwrap(), Path::new("/srv/mysql")),
            Path::new("/var/log/mysql/mysql-bin.index")
        );
        assert_eq!(
            binlog_index("mysql-bin", Path::new("/srv/mysql")),
            Path::new("/srv/mysql/mysql-bin.index")
        );
    }

    #[test]
    fn debian_12s_installed_option_files_set_no_data_directory_and_no_binary_log() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/databases/mariadb-debian12");
        let o = read(&root, &[PathBuf::from("/etc/mysql/my.cnf")]);
        // Its 50-server.cnf keeps binary logs 10 days (should they be turned on).
        assert_eq!(
            o,
            Options {
                expire_logs_days: Some("10".into()),
                ..Options::default()
            }
        );
        assert_eq!(
            binlog_expiry(None, o.expire_logs_days.as_deref()),
            Some(864_000)
        );
    }

    #[test]
    fn binlog_expiry_is_the_servers_own_setting() {
        assert_eq!(binlog_expiry(Some("604800"), None), Some(604_800));
        assert_eq!(binlog_expiry(None, Some("10")), Some(864_000));
        assert_eq!(binlog_expiry(None, Some("0.5")), Some(43_200));
        // seconds win where not 0; 0 seconds leaves the days to say.
        assert_eq!(binlog_expiry(Some("3600"), Some("10")), Some(3_600));
        assert_eq!(binlog_expiry(Some("0"), Some("3")), Some(259_200));
        assert_eq!(binlog_expiry(Some("0"), None), Some(0));
        assert_eq!(binlog_expiry(None, Some("0")), Some(0));
        assert_eq!(binlog_expiry(None, None), None);
        assert_eq!(binlog_expiry(Some("soon"), Some("-1")), None);
        let mut o = Options::default();
        parse(
            "[mysqld]\nexpire_logs_days = 7\n[client]\nexpire-logs-days = 1\n",
            &mut o,
        );
        assert_eq!(o.expire_logs_days.as_deref(), Some("7"));
    }
}
