//! Database servers' files, read without a login or a client library: where a server's data
//! directory is (from its process, checked against what the directory itself says), the
//! components its files are counted as (`component`) and which path is which (`layout`,
//! pure), and the readers and decoders of PostgreSQL's directory (`postgres`) and of bounded
//! tree sizing (`walk`). No scheduling, config or metrics here.

pub mod component;
pub mod layout;
pub mod mycnf;
pub mod mysql;
pub mod pgconf;
pub mod postgres;
pub mod walk;

use crate::Roots;
use crate::procfs::processes::{ServerKind, ServerProcess};
use crate::small_file::{self, Links, read_small_text};
use std::path::{Path, PathBuf};

/// `PG_VERSION` holds a major version and a newline ("15\n").
const MAX_PG_VERSION_BYTES: u64 = 64;
/// `postmaster.pid` holds eight short lines (pid, directory, start time, port, socket
/// directory, listen address, shared memory key, status): a few hundred bytes.
const MAX_PID_FILE_BYTES: u64 = 8 * 1024;

/// The reading of a server's configuration files and what they include: each file at most
/// `max_bytes`, at most 64 files and 8 levels of includes (a loop of includes or a directory of
/// thousands of files stops there). Files that are missing, unreadable or too big are skipped:
/// a file the daemon may not read tells nothing.
pub(crate) struct ConfigFiles<'a> {
    rootfs: &'a Path,
    max_bytes: u64,
    seen: usize,
}

impl<'a> ConfigFiles<'a> {
    const MAX_FILES: usize = 64;
    const MAX_DEPTH: usize = 8;

    pub(crate) fn new(rootfs: &'a Path, max_bytes: u64) -> Self {
        ConfigFiles {
            rootfs,
            max_bytes,
            seen: 0,
        }
    }

    /// Where `host` (an option file or include directory as the server names it) is here: its
    /// links resolved inside the host's root (Debian's `/etc/mysql/my.cnf` is an absolute link
    /// through `/etc/alternatives`, which must not lead into the daemon's own root).
    /// `None` where the server would find nothing (a missing file, a link loop).
    fn inside(&self, host: &Path) -> Option<PathBuf> {
        crate::roots::canonical(self.rootfs, host)
            .ok()
            .map(|(_, inside)| inside)
    }

    /// The text of `file` (a host path) at include depth `depth`, while the limits allow.
    pub(crate) fn read(&mut self, file: &Path, depth: usize) -> Option<String> {
        if depth > Self::MAX_DEPTH || self.seen >= Self::MAX_FILES {
            return None;
        }
        let inside = self.inside(file)?;
        let text = small_file::read_small_text(&inside, self.max_bytes, Links::Follow).ok()?;
        self.seen += 1;
        Some(text)
    }

    /// The files of an include directory (a host path) that `keep` accepts by name, in name
    /// order, as the servers read them.
    pub(crate) fn dir(&self, dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
        let Some(Ok(rd)) = self.inside(dir).map(std::fs::read_dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| keep(n))
            .collect();
        names.sort();
        names.into_iter().map(|n| dir.join(n)).collect()
    }
}

/// A data directory to watch: found from a running server, or named in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    pub kind: ServerKind,
    /// The directory as the host sees it (the `database` label): canonical, symlinks resolved.
    pub dir: PathBuf,
    /// The same under the rootfs the daemon reads (`--path.rootfs`).
    pub path: PathBuf,
    /// PostgreSQL's `PG_VERSION` ("15"); empty for MySQL.
    pub version: String,
    pub pid: u32,
    /// MySQL: the binary log index its `--log-bin` or option files name (under the rootfs),
    /// which may be outside the data directory.
    pub binlog_index: Option<PathBuf>,
    /// PostgreSQL: the server log's directory (`log_directory`) when it exists, as (host
    /// path, path under the rootfs), canonical: it may be outside the data directory, on
    /// another mount.
    pub log_dir: Option<(PathBuf, PathBuf)>,
    /// MySQL: the error log and slow query log when they exist outside the data directory, as
    /// (host path, path under the rootfs), canonical.
    pub log_files: Vec<(PathBuf, PathBuf)>,
    /// MySQL: how long the server keeps binary logs, from its command line and option files
    /// ([`mycnf::binlog_expiry`]); None when they don't say.
    pub binlog_expiry_seconds: Option<u64>,
}

/// Why a server's data directory was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error(
        "{kind} pid {pid}: data directory unknown (no {flag} on its command line and /proc/{pid}/cwd unreadable); watch it by path in the config"
    )]
    Unknown {
        kind: &'static str,
        pid: u32,
        flag: &'static str,
    },
    #[error("{kind} pid {pid}: data directory {}: {cause}", dir.display())]
    Unreadable {
        kind: &'static str,
        pid: u32,
        dir: PathBuf,
        cause: std::io::Error,
    },
    #[error("{kind} pid {pid}: {} is not its data directory: {why}", dir.display())]
    NotDataDir {
        kind: &'static str,
        pid: u32,
        dir: PathBuf,
        why: String,
    },
    #[error("postgresql pid {pid}: {}/postmaster.pid {what}: a stale file, or another server's; not trusted", dir.display())]
    LyingPidFile {
        pid: u32,
        dir: PathBuf,
        what: String,
    },
}

/// Finds and checks the data directory of a server process: PostgreSQL's must hold
/// `PG_VERSION` and a `postmaster.pid` naming this very process and directory (a file that
/// names another pid or directory is refused, never believed); MySQL's must hold the `mysql`
/// system schema.
pub fn locate(roots: &Roots, p: &ServerProcess) -> Result<Database, LocateError> {
    let kind = p.args.kind.as_str();
    let pid = p.pid;
    // PostgreSQL's -D may be the configuration directory (Debian's layout puts the data
    // elsewhere and sets data_directory in postgresql.conf); the postmaster changes into the
    // data directory, so its working directory decides then.
    // mysqld started bare (Debian's mariadbd) was told in its option files.
    let options = match p.args.kind {
        ServerKind::Mysql => mycnf::read(&roots.rootfs, &option_files(p)),
        ServerKind::Postgres => mycnf::Options::default(),
    };
    let candidates: Vec<PathBuf> = [p.args.data_directory.as_deref(), p.args.dir.as_deref()]
        .into_iter()
        .flatten()
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .chain(p.cwd.clone())
        .chain(options.datadir.as_deref().map(PathBuf::from))
        // Said nowhere: the server's own default (checked like any other, below).
        .chain(
            (p.args.kind == ServerKind::Mysql && options.datadir.is_none())
                .then(|| PathBuf::from(mycnf::COMPILED_DATADIR)),
        )
        .filter(|d| d.is_absolute())
        .collect();
    let flag = match p.args.kind {
        ServerKind::Postgres => "-D",
        ServerKind::Mysql => "--datadir",
    };
    let Some(first) = candidates.first() else {
        return Err(LocateError::Unknown { kind, pid, flag });
    };
    let pick = match p.args.kind {
        ServerKind::Postgres => candidates
            .iter()
            .find(|d| {
                roots
                    .canonical(d)
                    .is_ok_and(|(_, inside)| inside.join("PG_VERSION").exists())
            })
            .unwrap_or(first),
        ServerKind::Mysql => first,
    };
    let (dir, path) = roots
        .canonical(pick)
        .map_err(|cause| LocateError::Unreadable {
            kind,
            pid,
            dir: pick.clone(),
            cause,
        })?;
    let not = |why: String| LocateError::NotDataDir {
        kind,
        pid,
        dir: dir.clone(),
        why,
    };
    match p.args.kind {
        ServerKind::Postgres => {
            let version = read_small_text(
                &path.join("PG_VERSION"),
                MAX_PG_VERSION_BYTES,
                Links::Refuse,
            )
            .map_err(|e| not(format!("PG_VERSION: {e}")))?
            .trim()
            .to_string();
            if version.is_empty() || version.len() > 8 {
                return Err(not(format!("PG_VERSION holds {version:?}")));
            }
            check_pid_file(roots, pid, &dir, &path)?;
            let log_dir = pg_log_dir(roots, p, &dir);
            let log_files = pg_stderr_logs(roots, p, &version)
                .into_iter()
                .filter(|(host, _)| !host.starts_with(&dir))
                .collect();
            Ok(Database {
                kind: p.args.kind,
                dir,
                path,
                version,
                pid,
                binlog_index: None,
                log_dir,
                log_files,
                binlog_expiry_seconds: None,
            })
        }
        ServerKind::Mysql => {
            match std::fs::symlink_metadata(path.join("mysql")) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(not("its mysql entry is not a directory".into())),
                Err(e) => return Err(not(format!("no mysql system schema: {e}"))),
            }
            let binlog_index = p
                .args
                .log_bin
                .as_deref()
                .or(options.log_bin.as_deref())
                .map(|b| mycnf::binlog_index(b, &dir))
                .map(|host| roots.in_rootfs(&host));
            // A relative name is the data directory's; inside it, the file is counted there.
            let log_files = [
                p.args.log_error.as_ref().or(options.log_error.as_ref()),
                p.args
                    .slow_query_log_file
                    .as_ref()
                    .or(options.slow_query_log_file.as_ref()),
            ]
            .into_iter()
            .flatten()
            .filter_map(|f| roots.canonical(&dir.join(f)).ok())
            .filter(|(host, inside)| !host.starts_with(&dir) && inside.is_file())
            .collect();
            Ok(Database {
                kind: p.args.kind,
                dir,
                path,
                version: String::new(),
                pid,
                binlog_index,
                log_dir: None,
                log_files,
                binlog_expiry_seconds: mycnf::binlog_expiry(
                    (p.args.binlog_expire_logs_seconds.as_deref())
                        .or(options.binlog_expire_logs_seconds.as_deref()),
                    (p.args.expire_logs_days.as_deref()).or(options.expire_logs_days.as_deref()),
                ),
            })
        }
    }
}

/// The option files a mysqld reads: none with `--no-defaults`, `--defaults-file` alone, else
/// the default files and `--defaults-extra-file`.
fn option_files(p: &ServerProcess) -> Vec<PathBuf> {
    if p.args.no_defaults {
        return Vec::new();
    }
    if let Some(f) = &p.args.defaults_file {
        return vec![PathBuf::from(f)];
    }
    mycnf::DEFAULT_FILES
        .iter()
        .map(PathBuf::from)
        .chain(p.args.defaults_extra_file.as_deref().map(PathBuf::from))
        .collect()
}

/// Where a postmaster writes its log files: `-c log_directory=` on its command line, else the
/// last `log_directory` of its configuration file (`-c config_file=`, else `postgresql.conf`
/// of `-D`) and then of `postgresql.auto.conf` (ALTER SYSTEM's) in the data directory, else
/// `log`; relative to the data directory. None when it does not exist (no log written yet,
/// or the log goes to syslog).
fn pg_log_dir(roots: &Roots, p: &ServerProcess, data_dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let conf = match (&p.args.config_file, &p.args.dir) {
        (Some(f), _) => PathBuf::from(f),
        (None, Some(d)) if Path::new(d).is_absolute() => Path::new(d).join("postgresql.conf"),
        _ => data_dir.join("postgresql.conf"),
    };
    let files = [conf, data_dir.join("postgresql.auto.conf")];
    let value = p
        .args
        .log_directory
        .clone()
        .or_else(|| pgconf::read_setting(&roots.rootfs, &files, "log_directory"))
        .unwrap_or_else(|| "log".into());
    // An absolute value replaces the data directory in the join.
    let (host, inside) = roots.canonical(&data_dir.join(value)).ok()?;
    std::fs::metadata(&inside)
        .is_ok_and(|m| m.is_dir())
        .then_some((host, inside))
}

/// Most files of one server log (the file and its rotations) counted.
const MAX_LOG_FILES: usize = 64;

/// Where a postmaster's standard error goes, the log Debian's `pg_ctlcluster` writes (the
/// server's own messages, when `logging_collector` is off): the file its descriptor 2 is open
/// on, where the daemon may read that link; else Debian's layout, found from the
/// `config_file` on its command line (`/etc/postgresql/V/C/postgresql.conf`): the target of
/// `/etc/postgresql/V/C/log` when that link exists, else `/var/log/postgresql/postgresql-V-C.log`.
/// With its rotations (`.1`, `.2.gz`, ... beside it). As (host path, path under the rootfs).
fn pg_stderr_logs(roots: &Roots, p: &ServerProcess, version: &str) -> Vec<(PathBuf, PathBuf)> {
    let from_fd = std::fs::read_link(roots.proc.join(p.pid.to_string()).join("fd/2"))
        .ok()
        .filter(|t| t.is_absolute() && !t.starts_with("/dev"));
    let debian = || {
        let conf = PathBuf::from(p.args.config_file.as_deref()?);
        let rel = conf.strip_prefix("/etc/postgresql").ok()?;
        let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        let [v, cluster, "postgresql.conf"] = parts.as_slice() else {
            return None;
        };
        if *v != version {
            return None;
        }
        let link = Path::new("/etc/postgresql")
            .join(v)
            .join(cluster)
            .join("log");
        Some(match roots.canonical(&link) {
            Ok((host, _)) => host,
            Err(_) => PathBuf::from(format!("/var/log/postgresql/postgresql-{v}-{cluster}.log")),
        })
    };
    let Some(log) = from_fd.or_else(debian) else {
        return Vec::new();
    };
    let (Some(parent), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let Ok((parent_host, parent_inside)) = roots.canonical(parent) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(&parent_inside) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, PathBuf)> = rd
        .flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n == name || n.strip_prefix(name).is_some_and(|r| r.starts_with('.'))
            })
        })
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| (parent_host.join(e.file_name()), e.path()))
        .collect();
    files.sort();
    files.truncate(MAX_LOG_FILES);
    files
}

/// `postmaster.pid`'s first two lines: the postmaster's pid and its data directory (the
/// lines after them, port, socket directory and status, are not read). An error says what the
/// file names instead.
pub fn parse_pid_file(text: &str) -> Result<(u32, &str), String> {
    let mut lines = text.lines();
    let named = lines.next().unwrap_or("").trim();
    let pid = (named.parse::<u32>().ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("names pid {named:?}"))?;
    let dir = lines.next().unwrap_or("").trim();
    if dir.is_empty() {
        return Err("names no data directory".to_string());
    }
    Ok((pid, dir))
}

/// `postmaster.pid` must name this very postmaster and data directory.
fn check_pid_file(roots: &Roots, pid: u32, dir: &Path, path: &Path) -> Result<(), LocateError> {
    let lie = |what: String| LocateError::LyingPidFile {
        pid,
        dir: dir.to_path_buf(),
        what,
    };
    let text = read_small_text(
        &path.join("postmaster.pid"),
        MAX_PID_FILE_BYTES,
        Links::Refuse,
    )
    .map_err(|e| lie(format!("can't be read ({e})")))?;
    let (named, said) = parse_pid_file(&text).map_err(|e| lie(format!("{e}, not pid {pid}")))?;
    if named != pid {
        return Err(lie(format!("names pid \"{named}\", not {pid}")));
    }
    let same = roots
        .canonical(Path::new(said))
        .is_ok_and(|(host, _)| host == dir);
    if !same {
        return Err(lie(format!("names data directory {said:?}")));
    }
    Ok(())
}

/// A PostgreSQL's tablespaces: the `pg_tblspc/<oid>` links of its data directory (`host_dir`
/// as the host sees it, `data_dir` under the rootfs), each resolved inside the host's root.
/// PostgreSQL writes absolute links: followed as they are, they would lead into the daemon's
/// own root (a container's), not the host's. A link that leads nowhere keeps its target as
/// written (its walk then counts nothing, as for any missing root); unreadable `pg_tblspc`,
/// none.
pub fn tablespaces(roots: &Roots, host_dir: &Path, data_dir: &Path) -> Vec<layout::Tablespace> {
    let links = host_dir.join(layout::POSTGRES_TABLESPACES);
    postgres::read_tablespaces(data_dir)
        .unwrap_or_default()
        .into_iter()
        .map(|(oid, target)| {
            let (location, path) = roots.canonical(&links.join(&oid)).unwrap_or_else(|_| {
                // An absolute target replaces the links' directory in the join.
                let host = links.join(&target);
                let inside = roots.in_rootfs(&host);
                (host, inside)
            });
            layout::Tablespace {
                oid,
                location,
                path,
            }
        })
        .collect()
}

/// The mount point (as the filesystem collector labels it) holding `path` (a host path): the
/// longest mount path that is a prefix of it.
pub fn mount_of<'a>(
    mounts: &'a [crate::procfs::mountinfo::MountInfo],
    path: &Path,
) -> Option<&'a str> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.as_os_str().len())
        .map(|m| m.mount_point.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::processes::ServerArgs;

    fn roots(dir: &Path) -> Roots {
        Roots {
            rootfs: dir.to_path_buf(),
            ..Roots::default()
        }
    }

    fn pg(pid: u32, d: Option<&str>, cwd: Option<&str>) -> ServerProcess {
        ServerProcess {
            pid,
            args: ServerArgs {
                dir: d.map(str::to_string),
                ..ServerArgs::new(ServerKind::Postgres)
            },
            cwd: cwd.map(PathBuf::from),
            ppid: None,
        }
    }

    fn cluster(root: &Path, rel: &str, pid_file: &str) {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(d.join("postmaster.pid"), pid_file).unwrap();
    }

    #[test]
    fn a_postmaster_is_placed_by_its_d_flag_and_its_pid_file() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        cluster(
            t.path(),
            "var/lib/postgresql/15/main",
            "812\n/var/lib/postgresql/15/main\n1700000000\n5432\n",
        );
        let db = locate(&r, &pg(812, Some("/var/lib/postgresql/15/main"), None)).unwrap();
        assert_eq!(db.dir, Path::new("/var/lib/postgresql/15/main"));
        assert_eq!(db.version, "15");
        // Debian's -D is the data directory; a config directory there falls back to cwd.
        std::fs::create_dir_all(t.path().join("etc/postgresql/15/main")).unwrap();
        let db = locate(
            &r,
            &pg(
                812,
                Some("/etc/postgresql/15/main"),
                Some("/var/lib/postgresql/15/main"),
            ),
        )
        .unwrap();
        assert_eq!(db.dir, Path::new("/var/lib/postgresql/15/main"));
        // Started with PGDATA: only the working directory tells.
        let db = locate(&r, &pg(812, None, Some("/var/lib/postgresql/15/main"))).unwrap();
        assert_eq!(db.pid, 812);
    }

    #[test]
    fn the_server_logs_directory_is_found_where_the_server_was_told() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        let data = "var/lib/postgresql/15/main";
        cluster(t.path(), data, "812\n/var/lib/postgresql/15/main\n");
        for d in [
            "var/log/postgresql/main",
            "srv/logs",
            "etc/postgresql/15/main",
        ] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
        }
        let host = |p: &str| Some(PathBuf::from(p));
        let data_host = format!("/{data}");
        // Debian's layout: -D the configuration directory, its postgresql.conf saying where.
        std::fs::write(
            t.path().join("etc/postgresql/15/main/postgresql.conf"),
            "log_directory = '/var/log/postgresql/main'\n",
        )
        .unwrap();
        let p = pg(
            812,
            Some("/etc/postgresql/15/main"),
            Some(data_host.as_str()),
        );
        let db = locate(&r, &p).unwrap();
        assert_eq!(
            db.log_dir.as_ref().map(|l| l.0.clone()),
            host("/var/log/postgresql/main")
        );
        assert_eq!(
            db.log_dir.map(|l| l.1),
            Some(
                t.path()
                    .join("var/log/postgresql/main")
                    .canonicalize()
                    .unwrap()
            )
        );
        // -c config_file names the file; the command line's log_directory wins over it.
        let mut p = pg(812, Some(data_host.as_str()), None);
        p.args.config_file = Some("/etc/postgresql/15/main/postgresql.conf".into());
        let db = locate(&r, &p).unwrap();
        assert_eq!(db.log_dir.map(|l| l.0), host("/var/log/postgresql/main"));
        p.args.log_directory = Some("/srv/logs".into());
        let db = locate(&r, &p).unwrap();
        assert_eq!(db.log_dir.map(|l| l.0), host("/srv/logs"));
        // Said nowhere: `log` of the data directory, when there is one.
        let p = pg(812, Some(data_host.as_str()), None);
        assert_eq!(locate(&r, &p).unwrap().log_dir, None);
        std::fs::create_dir_all(t.path().join(data).join("log")).unwrap();
        let db = locate(&r, &p).unwrap();
        assert_eq!(
            db.log_dir.map(|l| l.0),
            host("/var/lib/postgresql/15/main/log")
        );
    }

    #[test]
    fn a_postmaster_pid_that_lies_is_refused_naming_what_it_says() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        // A stale file left by another server (a copied directory, a restored backup).
        cluster(t.path(), "srv/pg", "4444\n/srv/pg\n");
        let e = locate(&r, &pg(812, Some("/srv/pg"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names pid \"4444\", not 812"), "{e}");
        assert!(e.contains("/srv/pg/postmaster.pid"), "{e}");
        // The right pid, another directory.
        cluster(t.path(), "srv/pg", "812\n/srv/other\n");
        let e = locate(&r, &pg(812, Some("/srv/pg"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names data directory \"/srv/other\""), "{e}");
        // None at all.
        std::fs::remove_file(t.path().join("srv/pg/postmaster.pid")).unwrap();
        let e = locate(&r, &pg(812, Some("/srv/pg"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("can't be read"), "{e}");
    }

    #[test]
    fn a_pid_file_gives_its_pid_and_directory_or_says_what_it_names() {
        // PostgreSQL 15's layout: pid, data directory, start time, port, socket directory,
        // listen address, shared memory key, status.
        let real = "812\n/var/lib/postgresql/15/main\n1764201600\n5432\n/var/run/postgresql\nlocalhost\n  5432001    196608\nready   \n";
        assert_eq!(
            parse_pid_file(real),
            Ok((812, "/var/lib/postgresql/15/main"))
        );
        assert_eq!(parse_pid_file(""), Err("names pid \"\"".to_string()));
        assert_eq!(
            parse_pid_file("0\n/srv\n"),
            Err("names pid \"0\"".to_string())
        );
        assert_eq!(
            parse_pid_file("-1\n/srv\n"),
            Err("names pid \"-1\"".to_string())
        );
        assert_eq!(
            parse_pid_file("4294967296\n/srv\n"),
            Err("names pid \"4294967296\"".to_string())
        );
        assert_eq!(
            parse_pid_file("812\n   \n"),
            Err("names no data directory".to_string())
        );
    }

    #[test]
    fn a_symlink_loop_or_a_missing_directory_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        std::os::unix::fs::symlink("loop", t.path().join("loop")).unwrap();
        let e = locate(&r, &pg(9, Some("/loop"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/loop") && e.contains("symbolic links"), "{e}");
        let e = locate(&r, &pg(9, Some("/nosuch"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nosuch") && e.contains("No such file"), "{e}");
        let e = locate(&r, &pg(9, None, None)).unwrap_err().to_string();
        assert!(e.contains("no -D"), "{e}");
        std::fs::create_dir_all(t.path().join("tmp/empty")).unwrap();
        let e = locate(&r, &pg(9, Some("/tmp/empty"), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PG_VERSION"), "{e}");
    }

    /// Debian's pg_ctlcluster sends the server's standard error to
    /// /var/log/postgresql/postgresql-15-main.log (rotated by logrotate beside it): that log
    /// is the database's, on whatever mount holds it.
    #[test]
    fn a_debian_clusters_log_in_var_log_postgresql_is_the_databases() {
        let t = tempfile::tempdir().unwrap();
        let r = Roots {
            proc: t.path().join("proc"),
            ..roots(t.path())
        };
        let data = t.path().join("var/lib/postgresql/15/main");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(
            data.join("postmaster.pid"),
            "812\n/var/lib/postgresql/15/main\n",
        )
        .unwrap();
        std::fs::create_dir_all(t.path().join("etc/postgresql/15/main")).unwrap();
        let logs = t.path().join("var/log/postgresql");
        std::fs::create_dir_all(&logs).unwrap();
        for f in [
            "postgresql-15-main.log",
            "postgresql-15-main.log.1",
            "postgresql-15-main.log.2.gz",
            "postgresql-15-other.log",
            "postgresql-15-main.logx",
        ] {
            std::fs::write(logs.join(f), "LOG:  database system is ready\n").unwrap();
        }
        let mut p = pg(812, Some("/var/lib/postgresql/15/main"), None);
        p.args.config_file = Some("/etc/postgresql/15/main/postgresql.conf".into());
        let db = locate(&r, &p).unwrap();
        let names: Vec<String> = db
            .log_files
            .iter()
            .map(|(host, _)| host.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "/var/log/postgresql/postgresql-15-main.log",
                "/var/log/postgresql/postgresql-15-main.log.1",
                "/var/log/postgresql/postgresql-15-main.log.2.gz",
            ]
        );
        assert_eq!(db.log_files[0].1, logs.join("postgresql-15-main.log"));
        // A cluster whose `log` link in /etc points elsewhere.
        let elsewhere = t.path().join("srv/pglogs");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("main.log"), "x").unwrap();
        std::os::unix::fs::symlink(
            "/srv/pglogs/main.log",
            t.path().join("etc/postgresql/15/main/log"),
        )
        .unwrap();
        let db = locate(&r, &p).unwrap();
        assert_eq!(db.log_files.len(), 1);
        assert_eq!(db.log_files[0].0, Path::new("/srv/pglogs/main.log"));
        // No Debian layout, no readable descriptor: none.
        p.args.config_file = None;
        assert!(locate(&r, &p).unwrap().log_files.is_empty());
    }

    /// The Debian and container layout: `/srv/pgdata -> /data/pg15` on the host, the host at
    /// the rootfs path: found under the host's `/data/pg15`, never the daemon's own.
    #[test]
    fn a_data_directory_behind_an_absolute_symlink_is_resolved_inside_the_hosts_root() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        let real = t.path().join("data/pg15");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(t.path().join("srv")).unwrap();
        std::os::unix::fs::symlink("/data/pg15", t.path().join("srv/pgdata")).unwrap();
        std::fs::write(real.join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(real.join("postmaster.pid"), "812\n/srv/pgdata\n").unwrap();
        let db = locate(&r, &pg(812, Some("/srv/pgdata"), None)).unwrap();
        assert_eq!(db.dir, Path::new("/data/pg15"));
        assert_eq!(db.path, real);
        assert_eq!(db.version, "15");
    }

    /// Debian's option file is an absolute link through /etc/alternatives: under
    /// `--path.rootfs` it is followed inside the host's root, never into the daemon's own
    /// /etc (which may hold a MariaDB of its own, as on a test machine).
    #[test]
    fn an_option_file_behind_absolute_links_is_read_inside_the_hosts_root() {
        let t = tempfile::tempdir().unwrap();
        let etc = t.path().join("etc");
        std::fs::create_dir_all(etc.join("mysql")).unwrap();
        std::fs::create_dir_all(etc.join("alternatives")).unwrap();
        std::fs::write(
            etc.join("mysql/mariadb.cnf"),
            "[mysqld]\ndatadir = /srv/host-mysql\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/mysql/mariadb.cnf", etc.join("alternatives/my.cnf"))
            .unwrap();
        std::os::unix::fs::symlink("/etc/alternatives/my.cnf", etc.join("mysql/my.cnf")).unwrap();
        let opts = mycnf::read(t.path(), &[PathBuf::from("/etc/mysql/my.cnf")]);
        assert_eq!(opts.datadir.as_deref(), Some("/srv/host-mysql"));
        // A link that leaves nothing to read reads nothing (no fall back to the daemon's /etc).
        std::fs::remove_file(etc.join("mysql/mariadb.cnf")).unwrap();
        let opts = mycnf::read(t.path(), &[PathBuf::from("/etc/mysql/my.cnf")]);
        assert_eq!(opts.datadir, None);
    }

    /// A binary log named by its absolute path in the index, in a directory reached through
    /// an absolute link: counted from the host's file.
    #[test]
    fn a_binlog_named_absolutely_through_a_link_is_counted_inside_the_hosts_root() {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("var/lib/mysql");
        let logs = t.path().join("srv/binlogs");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        std::os::unix::fs::symlink("/srv/binlogs", t.path().join("var/log-bin")).unwrap();
        std::fs::write(logs.join("mysql-bin.000001"), vec![1u8; 8192]).unwrap();
        std::fs::write(
            data.join("mysql-bin.index"),
            "/var/log-bin/mysql-bin.000001\n/var/log-bin/mysql-bin.000002\n",
        )
        .unwrap();
        let cheap = mysql::read_cheap(&data, t.path(), None).unwrap();
        assert_eq!(cheap.binlog.files, 1, "the purged one is not counted");
        assert_eq!(cheap.binlog.first, Some(logs.join("mysql-bin.000001")));
        assert!(cheap.errors.is_empty(), "{:?}", cheap.errors);
    }

    #[test]
    fn a_mysql_data_directory_must_hold_its_system_schema() {
        let t = tempfile::tempdir().unwrap();
        let r = roots(t.path());
        let p = |d: &str| ServerProcess {
            pid: 900,
            args: ServerArgs::new(ServerKind::Mysql),
            cwd: Some(PathBuf::from(d)),
            ppid: None,
        };
        std::fs::create_dir_all(t.path().join("var/lib/mysql/mysql")).unwrap();
        assert_eq!(
            locate(&r, &p("/var/lib/mysql")).unwrap().dir,
            Path::new("/var/lib/mysql")
        );
        std::fs::create_dir_all(t.path().join("var/empty")).unwrap();
        let e = locate(&r, &p("/var/empty")).unwrap_err().to_string();
        assert!(e.contains("no mysql system schema"), "{e}");
        // Debian's mariadbd: no flag, its working directory unreadable to the daemon; the
        // option files tell, binary logs outside the data directory included.
        std::fs::create_dir_all(t.path().join("etc/mysql/mariadb.conf.d")).unwrap();
        std::fs::write(
            t.path().join("etc/mysql/my.cnf"),
            "!includedir /etc/mysql/mariadb.conf.d/\n",
        )
        .unwrap();
        std::fs::write(
            t.path().join("etc/mysql/mariadb.conf.d/50-server.cnf"),
            "[mysqld]\ndatadir = /var/lib/mysql\nlog_bin = /var/log/mysql/mysql-bin.log\n",
        )
        .unwrap();
        let bare = ServerProcess {
            pid: 900,
            args: ServerArgs::new(ServerKind::Mysql),
            cwd: None,
            ppid: None,
        };
        let db = locate(&r, &bare).unwrap();
        assert_eq!(db.dir, Path::new("/var/lib/mysql"));
        assert_eq!(
            db.binlog_index,
            Some(t.path().join("var/log/mysql/mysql-bin.index"))
        );
        // Debian 12 as installed: its option files say nothing; the compiled-in directory.
        std::fs::remove_file(t.path().join("etc/mysql/mariadb.conf.d/50-server.cnf")).unwrap();
        let db = locate(&r, &bare).unwrap();
        assert_eq!(db.dir, Path::new("/var/lib/mysql"));
        assert_eq!(db.binlog_index, None);
    }
}
