//! Database servers among the processes under a /proc root: PostgreSQL's postmaster and
//! MySQL/MariaDB's mysqld, with what their command lines say of the data directory and where
//! their working directory points. No validation of the directories here (that is
//! `databases::locate`) and no metrics.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The kinds of server found by their process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServerKind {
    Postgres,
    Mysql,
}

impl ServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Postgres => "postgresql",
            ServerKind::Mysql => "mysql",
        }
    }
}

/// What a server's command line says of its data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerArgs {
    pub kind: ServerKind,
    /// `-D DIR` (PostgreSQL: the data directory, or the configuration directory when
    /// `data_directory` is set elsewhere), `--datadir=DIR` (mysqld).
    pub dir: Option<String>,
    /// `-c data_directory=DIR` or `--data-directory=DIR` (PostgreSQL only): wins over `-D`.
    pub data_directory: Option<String>,
    /// PostgreSQL only: `-c config_file=FILE` (else `postgresql.conf` of `-D`) and
    /// `-c log_directory=DIR` (wins over the configuration files).
    pub config_file: Option<String>,
    pub log_directory: Option<String>,
    /// mysqld only: `--defaults-file=FILE` (then no other option file is read) and
    /// `--defaults-extra-file=FILE`.
    pub defaults_file: Option<String>,
    pub defaults_extra_file: Option<String>,
    /// mysqld only: `--no-defaults`, no option file read at all.
    pub no_defaults: bool,
    /// mysqld only: `--log-bin=BASE`, where the binary logs and their index go.
    pub log_bin: Option<String>,
    /// mysqld only: `--binlog-expire-logs-seconds=N` and `--expire-logs-days=N`.
    pub binlog_expire_logs_seconds: Option<String>,
    pub expire_logs_days: Option<String>,
    /// mysqld only: `--log-error=FILE` and `--slow-query-log-file=FILE`, logs that may be
    /// on another mount.
    pub log_error: Option<String>,
    pub slow_query_log_file: Option<String>,
}

impl ServerArgs {
    /// A server of `kind` whose command line says nothing.
    pub fn new(kind: ServerKind) -> Self {
        ServerArgs {
            kind,
            dir: None,
            data_directory: None,
            config_file: None,
            log_directory: None,
            defaults_file: None,
            defaults_extra_file: None,
            no_defaults: false,
            log_bin: None,
            binlog_expire_logs_seconds: None,
            expire_logs_days: None,
            log_error: None,
            slow_query_log_file: None,
        }
    }
}

/// One server process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerProcess {
    pub pid: u32,
    pub args: ServerArgs,
    /// Where `/proc/PID/cwd` points (the postmaster and mysqld both change into their data
    /// directory); None when it can't be read (another user's process without CAP_SYS_PTRACE).
    pub cwd: Option<PathBuf>,
    /// The parent's pid (`/proc/PID/stat`'s fourth field), when it could be read.
    pub ppid: Option<u32>,
}

/// The parent pid in a `/proc/PID/stat` line: the field after the state, which follows the
/// last `)` (a command name may hold spaces and parentheses).
pub fn parse_stat_ppid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// `/proc/PID/cmdline`: arguments separated (and ended) by NUL bytes.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Whether `comm` (`/proc/PID/comm`, at most 15 bytes) may be a server's: only these get their
/// command line read.
pub fn is_server_comm(comm: &str) -> bool {
    matches!(
        comm.trim_end(),
        "postgres" | "postmaster" | "mysqld" | "mariadbd"
    )
}

/// The server a process is, from its `comm` and arguments; None for anything else, including
/// PostgreSQL's own children (the checkpointer, backends...), which rewrite their command line
/// to `postgres: ...` and are not the server.
pub fn classify(comm: &str, args: &[String]) -> Option<ServerArgs> {
    let first = args.first()?;
    match comm.trim_end() {
        "postgres" | "postmaster" => {
            if first.starts_with("postgres:") || first.starts_with("postmaster:") {
                return None;
            }
            let mut out = ServerArgs::new(ServerKind::Postgres);
            let mut it = args.iter().skip(1);
            while let Some(a) = it.next() {
                if a == "-D" {
                    out.dir = it.next().cloned();
                } else if let Some(d) = a.strip_prefix("-D") {
                    out.dir = Some(d.to_string());
                } else {
                    let kv = if a == "-c" {
                        it.next().map(String::as_str)
                    } else {
                        a.strip_prefix("-c").or_else(|| a.strip_prefix("--"))
                    };
                    match kv.and_then(pg_setting) {
                        Some((k, v)) if k == "data_directory" => out.data_directory = Some(v),
                        Some((k, v)) if k == "config_file" => out.config_file = Some(v),
                        Some((k, v)) if k == "log_directory" => out.log_directory = Some(v),
                        _ => {}
                    }
                }
            }
            Some(out)
        }
        "mysqld" | "mariadbd" => {
            let mut out = ServerArgs::new(ServerKind::Mysql);
            let mut it = args.iter().skip(1);
            while let Some(a) = it.next() {
                if let Some(d) = a.strip_prefix("--datadir=") {
                    out.dir = Some(d.to_string());
                } else if a == "--no-defaults" {
                    out.no_defaults = true;
                } else if let Some(f) = a.strip_prefix("--defaults-file=") {
                    out.defaults_file = Some(f.to_string());
                } else if let Some(f) = a.strip_prefix("--defaults-extra-file=") {
                    out.defaults_extra_file = Some(f.to_string());
                } else if let Some(b) = a
                    .strip_prefix("--log-bin=")
                    .or_else(|| a.strip_prefix("--log_bin="))
                {
                    out.log_bin = Some(b.to_string());
                } else if let Some((k, v)) = a.strip_prefix("--").and_then(|kv| kv.split_once('='))
                    && matches!(
                        k.replace('-', "_").as_str(),
                        "log_error"
                            | "slow_query_log_file"
                            | "binlog_expire_logs_seconds"
                            | "expire_logs_days"
                    )
                {
                    let v = Some(v.to_string());
                    match k.replace('-', "_").as_str() {
                        "log_error" => out.log_error = v,
                        "slow_query_log_file" => out.slow_query_log_file = v,
                        "binlog_expire_logs_seconds" => out.binlog_expire_logs_seconds = v,
                        _ => out.expire_logs_days = v,
                    }
                } else if a == "--datadir" || a == "-h" {
                    out.dir = it.next().cloned();
                } else if let Some(d) = a.strip_prefix("-h").filter(|d| !d.is_empty()) {
                    out.dir = Some(d.to_string());
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// `name=value` of a `-c`/`--` setting, the name with `_` for `-` (PostgreSQL accepts both
/// spellings) and lower-cased.
fn pg_setting(kv: &str) -> Option<(String, String)> {
    let (k, v) = kv.split_once('=')?;
    Some((
        k.replace('-', "_").to_ascii_lowercase(),
        v.trim_matches('\'').to_string(),
    ))
}

/// The server kind a `comm` names, if any.
fn kind_of_comm(comm: &str) -> Option<ServerKind> {
    match comm.trim_end() {
        "postgres" | "postmaster" => Some(ServerKind::Postgres),
        "mysqld" | "mariadbd" => Some(ServerKind::Mysql),
        _ => None,
    }
}

/// The command name in a `/proc/PID/stat` line: between the first `(` and the last `)`.
fn parse_stat_comm(stat: &str) -> Option<&str> {
    let (_, rest) = stat.split_once('(')?;
    Some(rest.rsplit_once(')')?.0)
}

/// A process that may be a server: its name is a server's, and its parent is not a server of
/// the same kind (a postmaster's backends, and a backend just forked that still carries the
/// postmaster's command line, are its children). Found from `stat` alone, which no hung mount
/// or memory lock holds up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub pid: u32,
    pub comm: String,
    pub ppid: Option<u32>,
}

/// The server candidates under `proc_root`; only an unreadable `proc_root` is an error.
pub fn server_candidates(proc_root: &Path) -> std::io::Result<Vec<Candidate>> {
    let mut all: Vec<(Candidate, ServerKind)> = Vec::new();
    for e in std::fs::read_dir(proc_root)? {
        let Ok(e) = e else { continue };
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let (comm, ppid) = match std::fs::read_to_string(dir.join("stat")) {
            Ok(st) => (
                parse_stat_comm(&st).map(str::to_string),
                parse_stat_ppid(&st),
            ),
            Err(_) => (std::fs::read_to_string(dir.join("comm")).ok(), None),
        };
        let Some(comm) = comm else { continue };
        let Some(kind) = kind_of_comm(&comm) else {
            continue;
        };
        all.push((
            Candidate {
                pid,
                comm: comm.trim_end().to_string(),
                ppid,
            },
            kind,
        ));
    }
    let kinds: HashMap<u32, ServerKind> = all.iter().map(|(c, k)| (c.pid, *k)).collect();
    let mut out: Vec<Candidate> = all
        .into_iter()
        .filter(|(c, k)| c.ppid.and_then(|pp| kinds.get(&pp)) != Some(k))
        .map(|(c, _)| c)
        .collect();
    out.sort_by_key(|c| c.pid);
    Ok(out)
}

/// A candidate's command line and working directory: None when it ended meanwhile or is not a
/// server after all. Reading a command line may wait on the process's memory map lock: the
/// caller runs this per process, off the async workers, with a deadline.
pub fn read_server(proc_root: &Path, c: &Candidate) -> Option<ServerProcess> {
    let dir = proc_root.join(c.pid.to_string());
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let args = classify(&c.comm, &parse_cmdline(&cmdline))?;
    let cwd = std::fs::read_link(dir.join("cwd")).ok();
    Some(ServerProcess {
        pid: c.pid,
        args,
        cwd,
        ppid: c.ppid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every server process under `proc_root` (see [`server_candidates`]). A process that ends
    /// while being read is skipped; only an unreadable `proc_root` is an error.
    fn read_servers(proc_root: &Path) -> std::io::Result<Vec<ServerProcess>> {
        Ok(server_candidates(proc_root)?
            .iter()
            .filter_map(|c| read_server(proc_root, c))
            .collect())
    }

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn command_lines_split_on_nul_bytes() {
        assert_eq!(
            parse_cmdline(b"/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/pg\0"),
            ["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/pg"]
        );
        assert!(parse_cmdline(b"").is_empty());
        // A child's rewritten title: one argument, padded.
        assert_eq!(
            parse_cmdline(b"postgres: 15/main: checkpointer "),
            ["postgres: 15/main: checkpointer "]
        );
    }

    #[test]
    fn servers_are_told_from_their_children_and_other_processes() {
        // Debian's pg_ctlcluster start.
        let debian = classify(
            "postgres",
            &args(&[
                "/usr/lib/postgresql/15/bin/postgres",
                "-D",
                "/var/lib/postgresql/15/main",
                "-c",
                "config_file=/etc/postgresql/15/main/postgresql.conf",
            ]),
        )
        .unwrap();
        assert_eq!(debian.kind, ServerKind::Postgres);
        assert_eq!(debian.dir.as_deref(), Some("/var/lib/postgresql/15/main"));
        assert_eq!(debian.data_directory, None);
        assert_eq!(
            debian.config_file.as_deref(),
            Some("/etc/postgresql/15/main/postgresql.conf")
        );
        // The server log's directory given on the command line.
        let a = classify(
            "postgres",
            &args(&["postgres", "-c", "Log-Directory=/var/log/pg", "-D", "/d"]),
        )
        .unwrap();
        assert_eq!(a.log_directory.as_deref(), Some("/var/log/pg"));
        assert_eq!(a.data_directory, None);
        // -DDIR, and data_directory given as a setting (wins over -D, a config directory).
        let a = classify(
            "postmaster",
            &args(&["postmaster", "-D/etc/pg", "--data-directory=/srv/pg"]),
        )
        .unwrap();
        assert_eq!(a.dir.as_deref(), Some("/etc/pg"));
        assert_eq!(a.data_directory.as_deref(), Some("/srv/pg"));
        let a = classify(
            "postgres",
            &args(&["postgres", "-c", "data_directory='/srv/x'"]),
        )
        .unwrap();
        assert_eq!(a.data_directory.as_deref(), Some("/srv/x"));
        // Started with PGDATA set: no -D at all (the working directory tells).
        let a = classify("postgres", &args(&["/usr/bin/postgres"])).unwrap();
        assert_eq!(a.dir, None);
        // The postmaster's children.
        assert_eq!(
            classify("postgres", &args(&["postgres: 15/main: checkpointer "])),
            None
        );
        assert_eq!(
            classify("postgres", &args(&["postgres: walwriter   "])),
            None
        );
        // mysqld and mariadbd.
        let m = classify(
            "mariadbd",
            &args(&["/usr/sbin/mariadbd", "--datadir=/srv/mysql", "--user=mysql"]),
        )
        .unwrap();
        assert_eq!(m.kind, ServerKind::Mysql);
        assert_eq!(m.dir.as_deref(), Some("/srv/mysql"));
        let m = classify("mysqld", &args(&["/usr/sbin/mysqld"])).unwrap();
        assert_eq!(m.dir, None);
        let m = classify(
            "mysqld",
            &args(&[
                "mysqld",
                "--defaults-file=/etc/my-3307.cnf",
                "--log-bin=/srv/binlog/b",
                "--log_error=/var/log/mysql/error.log",
                "--slow-query-log-file=/srv/slow.log",
            ]),
        )
        .unwrap();
        assert_eq!(m.log_error.as_deref(), Some("/var/log/mysql/error.log"));
        assert_eq!(m.slow_query_log_file.as_deref(), Some("/srv/slow.log"));
        assert_eq!(m.defaults_file.as_deref(), Some("/etc/my-3307.cnf"));
        assert_eq!(m.log_bin.as_deref(), Some("/srv/binlog/b"));
        assert!(
            classify("mariadbd", &args(&["mariadbd", "--no-defaults"]))
                .unwrap()
                .no_defaults
        );
        assert_eq!(
            classify("mysqld", &args(&["mysqld", "--datadir", "/d"]))
                .unwrap()
                .dir
                .as_deref(),
            Some("/d")
        );
        // Anything else, and a kernel thread (no command line).
        assert_eq!(classify("bash", &args(&["bash"])), None);
        assert_eq!(classify("postgres", &[]), None);
        assert!(is_server_comm("postgres\n"));
        assert!(!is_server_comm("postgres_fdw"));
    }

    #[test]
    fn servers_are_read_from_a_proc_tree() {
        let d = tempfile::tempdir().unwrap();
        let p = |pid: &str, comm: &str, cmdline: &[u8], cwd: Option<&str>| {
            let dir = d.path().join(pid);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("comm"), comm).unwrap();
            std::fs::write(dir.join("cmdline"), cmdline).unwrap();
            if let Some(c) = cwd {
                std::os::unix::fs::symlink(c, dir.join("cwd")).unwrap();
            }
        };
        p(
            "812",
            "postgres\n",
            b"/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/postgresql/15/main\0",
            Some("/var/lib/postgresql/15/main"),
        );
        p(
            "813",
            "postgres\n",
            b"postgres: 15/main: checkpointer ",
            None,
        );
        p(
            "900",
            "mariadbd\n",
            b"/usr/sbin/mariadbd\0",
            Some("/var/lib/mysql"),
        );
        p("1", "systemd\n", b"/sbin/init\0", None);
        std::fs::create_dir_all(d.path().join("self")).unwrap();
        let found = read_servers(d.path()).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].pid, 812);
        assert_eq!(
            found[0].cwd.as_deref(),
            Some(Path::new("/var/lib/postgresql/15/main"))
        );
        assert_eq!(found[1].args.kind, ServerKind::Mysql);
        assert_eq!(found[1].cwd.as_deref(), Some(Path::new("/var/lib/mysql")));
        assert!(read_servers(&d.path().join("nosuch")).is_err());
    }

    #[test]
    fn a_child_still_carrying_the_postmasters_command_line_is_not_a_server() {
        assert_eq!(
            parse_stat_ppid("4242 (postgres) S 4100 4100 4100 0 -1 4194560 310 0 0 0"),
            Some(4100)
        );
        assert_eq!(parse_stat_ppid("7 (a) b) (c) R 1 7 7"), Some(1));
        assert_eq!(parse_stat_comm("7 (a) b) (c) R 1 7 7"), Some("a) b) (c"));
        assert_eq!(parse_stat_ppid("garbage"), None);
        let dir = tempfile::tempdir().unwrap();
        let p = |pid: u32, comm: &str, ppid: u32| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            let stat = format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 31 0 0 0\n");
            std::fs::write(d.join("stat"), stat).unwrap();
            std::fs::write(d.join("cmdline"), b"postgres\0-D\0/var/lib/pg\0").unwrap();
        };
        p(100, "postgres", 1);
        p(101, "postgres", 100); // a backend just forked
        p(200, "mariadbd", 100); // started by a postmaster?! still a server of its own kind
        p(300, "bash", 1);
        let c = server_candidates(dir.path()).unwrap();
        let pids: Vec<u32> = c.iter().map(|c| c.pid).collect();
        assert_eq!(pids, vec![100, 200]);
        let s = read_server(dir.path(), &c[0]).unwrap();
        assert_eq!(s.args.dir.as_deref(), Some("/var/lib/pg"));
        assert_eq!(s.ppid, Some(1));
    }
}
