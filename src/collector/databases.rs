//! Databases collector: what is filling the disk, by database component. Finds PostgreSQL and
//! MySQL/MariaDB servers from /proc (and takes paths named in the config), then looks at their
//! files without a login: every sample the cheap parts (pg_wal, the archiver's backlog, slots,
//! temporary files), and the big trees (relations, logs, tablespaces) in bounded passes resumed
//! from sample to sample. All file access runs off the async workers with a deadline, so a hung
//! or slow filesystem costs only its own database's series.

use crate::catalogue;
use crate::collector::{Collector, Context, ItemError, Sample};
use crate::databases::mysql;
use crate::databases::postgres::{self, Wal};
use crate::databases::walk::{Progress, Root, Total, Walk};
use crate::databases::{Database, locate, mount_of};
use crate::door::Unanswered;
use crate::history::service::Record;
use crate::history::{ComponentSize, DatabaseFacts, DatabaseSample};
use crate::metrics::{MetricFamily, MetricSet};
use crate::procfs::mountinfo::{MountInfo, read_mountinfo, strip_rootfs};
use crate::procfs::processes::{ServerKind, read_server, server_candidates};
use crate::validate::{
    Invalid, check_absolute_path, check_duration, check_entries, check_interval, check_range,
    check_timeout,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The most paths watched by name.
const MAX_WATCH: usize = 64;
/// Entries the cheap pass sizes in `pgsql_tmp` or `pg_replslot` before it gives up on them
/// (temporary files are few and large; logical slots spill a file per transaction).
const CHEAP_MAX_ENTRIES: u64 = 20_000;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DatabasesConfig {
    pub enabled: bool,
    /// How often the cheap parts are looked at and a sizing pass is taken.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Find PostgreSQL and MySQL/MariaDB servers from their processes.
    pub discover: bool,
    /// How often the big trees are sized from scratch.
    #[serde(with = "humantime_serde")]
    pub size_interval: Duration,
    /// Entries one sizing pass of a database takes at most; the next sample resumes.
    pub size_entries_per_pass: u64,
    /// Time one sizing pass of a database takes at most.
    #[serde(with = "humantime_serde")]
    pub size_time_per_pass: Duration,
    /// How long MySQL keeps binary logs here, where the server's own setting
    /// (binlog_expire_logs_seconds, expire_logs_days, read from its command line and option
    /// files) is not to be believed; unset, the server's setting is used (30 days where it says
    /// none or "never"). Exported beside the oldest log's age, for the alert on logs kept past it.
    #[serde(with = "humantime_serde::option")]
    pub mysql_binlog_retention: Option<Duration>,
    /// How long a database's cheap look (or the search of /proc) may take before it is
    /// reported stuck; a sizing pass gets this on top of `size_time_per_pass`.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Other paths to size by name (a Redis AOF, a Kafka log directory, backups).
    pub watch: Vec<WatchConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    pub name: String,
    pub path: PathBuf,
}

impl Default for DatabasesConfig {
    fn default() -> Self {
        DatabasesConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            discover: true,
            size_interval: Duration::from_secs(15 * 60),
            size_entries_per_pass: 100_000,
            size_time_per_pass: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            mysql_binlog_retention: None,
            watch: Vec::new(),
        }
    }
}

impl DatabasesConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        check_duration(
            &format!("{key}.size_interval"),
            self.size_interval,
            Duration::from_secs(1),
            crate::validate::MAX_INTERVAL,
        )?;
        check_range(
            &format!("{key}.size_entries_per_pass"),
            self.size_entries_per_pass,
            100,
            100_000_000,
        )?;
        check_duration(
            &format!("{key}.size_time_per_pass"),
            self.size_time_per_pass,
            Duration::from_millis(10),
            Duration::from_secs(600),
        )?;
        check_timeout(key, self.timeout)?;
        if let Some(r) = self.mysql_binlog_retention {
            check_duration(
                &format!("{key}.mysql_binlog_retention"),
                r,
                Duration::from_secs(3600),
                Duration::from_secs(3660 * 86400),
            )?;
        }
        check_entries(&format!("{key}.watch"), self.watch.len(), MAX_WATCH)?;
        for (i, w) in self.watch.iter().enumerate() {
            let k = format!("{key}.watch[{i}]");
            if w.name.trim().is_empty() || w.name.len() > 128 {
                return Err(Invalid::new(
                    format!("{k}.name"),
                    "must be 1 to 128 bytes, not blank",
                ));
            }
            if w.name.starts_with('/') {
                return Err(Invalid::new(
                    format!("{k}.name"),
                    "must not start with / (discovered databases are labelled by their path)",
                ));
            }
            check_absolute_path(&format!("{k}.path"), &w.path)?;
            if self.watch[..i].iter().any(|o| o.name == w.name) {
                return Err(Invalid::new(format!("{k}.name"), "listed twice"));
            }
        }
        Ok(())
    }
}

/// A directory looked at: a discovered server's data directory or a watched path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// Whether its server process runs; None for a watched path.
    up: Option<bool>,
    /// MySQL: how long the server says it keeps binary logs.
    binlog_expiry: Option<u64>,
    /// The `database` label: the data directory (discovered) or the configured name.
    label: String,
    kind: &'static str,
    version: String,
    /// Under the rootfs, for reading.
    path: PathBuf,
    /// As the host sees it, for the mount point.
    host: PathBuf,
    engine: Engine,
    /// MySQL: the binary log index the server was told of, under the rootfs.
    binlog_index: Option<PathBuf>,
    /// PostgreSQL: the server log's directory, (host path, under the rootfs).
    log_dir: Option<(PathBuf, PathBuf)>,
    /// Parts outside the data directory (a log directory or log files elsewhere): component,
    /// host path (for the mount), path under the rootfs.
    elsewhere: Vec<(String, PathBuf, PathBuf)>,
}

/// What a target's files are laid out as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Postgres,
    Mysql,
    /// A watched path: one tree, sized as `all`.
    Tree,
}

/// Figures of a finished sizing.
#[derive(Debug, Clone)]
struct Sized {
    components: Vec<(String, Total)>,
    /// Tablespace oid → (link target as the host sees it, total).
    tablespaces: Vec<(String, PathBuf, Total)>,
    /// The target's parts outside the data directory (PostgreSQL's `log_directory`, MySQL's
    /// error and slow logs elsewhere), by their index in `Target::elsewhere`: labelled with
    /// the mount holding them rather than the data directory's.
    elsewhere: Vec<(usize, Total)>,
    completed: SystemTime,
}

/// Tablespaces: oid and link target.
type Spaces = Vec<(String, PathBuf)>;

/// A sizing in progress and the last finished one, shared with the thread taking a pass.
#[derive(Debug, Default)]
struct SizeSlot {
    walk: Option<(Walk<String>, Spaces)>,
    done: Option<Sized>,
}

/// What the collector keeps of each target between samples. Its cheap look and sizing pass
/// go through the door (items `<label> cheap`, `<label> size`): a hung one is not started
/// again until it returns, so at most one thread of each is held per target.
struct TargetState {
    size: Arc<Mutex<SizeSlot>>,
    next_size: Instant,
}

impl TargetState {
    fn new() -> Self {
        TargetState {
            size: Arc::default(),
            next_size: Instant::now(),
        }
    }
}

pub struct DatabasesCollector {
    cfg: DatabasesConfig,
    targets: BTreeMap<String, TargetState>,
    /// The last search's result: used again while a search hangs (reading a command line
    /// waits on a process's memory lock), so the databases already found keep their series.
    last_found: Option<Found>,
    /// Servers found running before, by data directory: while its directory is still a data
    /// directory, a server that stopped (or crashed on a full disk) stays watched, `up` 0, its
    /// WAL, slots and archive backlog still read from disk.
    known: BTreeMap<PathBuf, Database>,
    /// When the components last went to the history store (Unix seconds).
    history_sent: Option<f64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The door's name for this collector's calls.
const NAME: &str = "databases";

/// What the search of /proc found.
#[derive(Clone)]
struct Found {
    databases: Vec<Database>,
    errors: Vec<(u32, String)>,
    mounts: Vec<MountInfo>,
    /// Watched paths that exist: (name, host path, path under the rootfs).
    watched: Vec<(String, PathBuf, PathBuf)>,
    watch_errors: Vec<(String, String)>,
    /// The rootfs, canonical: a path read under it, less this, is the host's path.
    rootfs: PathBuf,
}

impl Found {
    /// The mount holding `inside` (a path under the rootfs), as the filesystem collector
    /// labels it; "" when none is known.
    fn mount_of_inside(&self, inside: &Path) -> &str {
        let host = match inside.strip_prefix(&self.rootfs) {
            Ok(rel) if self.rootfs != Path::new("/") => Path::new("/").join(rel),
            _ => inside.to_path_buf(),
        };
        mount_of(&self.mounts, &host).unwrap_or("")
    }
}

/// Why the process table could not be searched at all.
enum Search {
    /// `/proc` can't be listed: the collector's sample fails.
    Unreadable(String),
    /// The listing gave no answer: the databases found before are kept.
    Unanswered(Unanswered),
}

/// The search: the process table's candidates in one call (from `stat`, which no hung mount or
/// memory lock holds up), then each candidate's command line and data directory, and each
/// watched path, in a call of its own, side by side: a process whose directory is on a hung
/// mount costs only its own item, never the search.
async fn discover(
    ctx: &Context,
    on: bool,
    watch: &[WatchConfig],
    deadline: tokio::time::Instant,
) -> Result<Found, Search> {
    let roots = ctx.roots.clone();
    let mut found = Found {
        databases: Vec::new(),
        errors: Vec::new(),
        mounts: Vec::new(),
        watched: Vec::new(),
        watch_errors: Vec::new(),
        rootfs: std::fs::canonicalize(&roots.rootfs).unwrap_or_else(|_| roots.rootfs.clone()),
    };
    let mut located = tokio::task::JoinSet::new();
    if on {
        let proc = roots.proc.clone();
        let candidates = ctx
            .door
            .call(NAME, "process search", deadline, move || {
                server_candidates(&proc)
            })
            .await
            .map_err(Search::Unanswered)?
            .map_err(|e| Search::Unreadable(format!("{}: {e}", roots.proc.display())))?;
        for c in candidates {
            let (door, roots) = (ctx.door.clone(), roots.clone());
            located.spawn(async move {
                let pid = c.pid;
                let r = door
                    .call(NAME, format!("pid {pid}"), deadline, move || {
                        read_server(&roots.proc, &c).map(|p| locate(&roots, &p))
                    })
                    .await;
                (pid, r)
            });
        }
    }
    let mut watched = tokio::task::JoinSet::new();
    for (i, w) in watch.iter().enumerate() {
        let (door, roots, w) = (ctx.door.clone(), roots.clone(), w.clone());
        // Resolved as a data directory is: a watched link (/var/lib/redis -> /data/redis) is
        // sized where it points; a link loop is an error.
        watched.spawn(async move {
            let item = format!("watch {}", w.name);
            let path = w.path.clone();
            let r = door
                .call(NAME, item, deadline, move || roots.canonical(&path))
                .await;
            (i, w, r)
        });
    }
    let mut located = located.join_all().await;
    located.sort_by_key(|(pid, _)| *pid);
    for (pid, r) in located {
        match r {
            // Ended meanwhile, or not a server after all.
            Ok(None) => {}
            Ok(Some(Ok(d))) => {
                if !found.databases.iter().any(|o| o.dir == d.dir) {
                    found.databases.push(d);
                }
            }
            Ok(Some(Err(e))) => found.errors.push((pid, e.to_string())),
            Err(why) => found.errors.push((
                pid,
                format!("pid {pid}: reading its command line and data directory: {why}"),
            )),
        }
    }
    let mut watched = watched.join_all().await;
    watched.sort_by_key(|(i, _, _)| *i);
    for (_, w, r) in watched {
        match r {
            Ok(Ok((host, inside))) => found.watched.push((w.name.clone(), host, inside)),
            Ok(Err(e)) => found
                .watch_errors
                .push((w.name.clone(), format!("{}: {e}", w.path.display()))),
            Err(why) => found
                .watch_errors
                .push((w.name.clone(), format!("{}: {why}", w.path.display()))),
        }
    }
    if let Ok(mut t) = read_mountinfo(&roots.proc) {
        strip_rootfs(&mut t.mounts, &roots.rootfs);
        found.mounts = t.mounts;
    }
    Ok(found)
}

/// The cheap look at a PostgreSQL data directory.
#[derive(Debug, Default)]
struct PgCheap {
    wal: Option<Wal>,
    /// Where pg_wal is (under the rootfs, links resolved): `initdb -X` puts it on another
    /// filesystem.
    wal_dir: Option<PathBuf>,
    /// `pg_replslot` (logical slots spill decoded changes there) and `pgsql_tmp` sizes.
    components: Vec<(String, Total)>,
    errors: Vec<String>,
}

/// A cheap look's result, by engine.
enum Cheap {
    Postgres(PgCheap),
    Mysql(Result<mysql::Cheap, String>),
}

/// The roots of a MySQL sizing: each schema's directory under `schemas`, every other entry
/// not counted by the cheap look (logs, InnoDB's files) under `other`.
fn mysql_size_roots(dir: &Path, rootfs: &Path, binlog_index: Option<&Path>) -> Vec<Root<String>> {
    let counted = mysql::read_cheap(dir, rootfs, binlog_index)
        .map(|c| c.counted)
        .unwrap_or_default();
    let mut roots = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut entries: Vec<(String, PathBuf, bool)> = rd
            .flatten()
            .map(|e| {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.path(),
                    is_dir,
                )
            })
            .collect();
        entries.sort();
        for (name, path, is_dir) in entries {
            let part = mysql::classify(&name, is_dir);
            if mysql::is_cheap(part) || counted.contains(&path) {
                continue;
            }
            roots.push(Root {
                component: part.label().into(),
                path,
            });
        }
    }
    roots
}

/// The binary log retention expected: the config's where set, else the server's own setting,
/// else (none, or "never purged") 30 days, the default of MySQL 8.
fn binlog_retention(config: Option<Duration>, server: Option<u64>) -> Duration {
    config.unwrap_or_else(|| {
        Duration::from_secs(
            server
                .filter(|&s| s > 0)
                .unwrap_or(30 * crate::time::DAY as u64),
        )
    })
}

fn mysql_cheap_metrics(
    s: &mut Sample,
    label: &str,
    c: &mysql::Cheap,
    (found, mount): (&Found, &str),
    now: SystemTime,
    retention: Duration,
) {
    // Logs may live elsewhere (log_bin=/var/log/mysql/mysql-bin): counted on their own mount.
    let logs_mount = |l: &mysql::Logs| {
        l.first
            .as_deref()
            .and_then(Path::parent)
            .map_or(mount, |d| found.mount_of_inside(d))
    };
    for e in &c.errors {
        s.error(ItemError::new(
            format!("{label} logs"),
            format!("{label}: {e}"),
        ));
    }
    let l = [("database", label)];
    let age = |t: Option<SystemTime>| {
        t.map(|t| now.duration_since(t).unwrap_or_default().as_secs_f64())
            .unwrap_or(0.0)
    };
    // No index file, no binary logging: no series rather than zeros.
    if c.binlog.files > 0
        || c.counted
            .iter()
            .any(|p| p.extension().is_some_and(|x| x == "index"))
    {
        let set = &mut s.metrics;
        component_bytes(set, label, "binlog", logs_mount(&c.binlog), c.binlog.bytes);
        set.family(&catalogue::MYSQL_BINLOG_FILES)
            .push(&l, c.binlog.files as f64);
        set.family(&catalogue::MYSQL_BINLOG_OLDEST_AGE_SECONDS)
            .push(&l, age(c.binlog.oldest));
        set.family(&catalogue::MYSQL_BINLOG_RETENTION_SECONDS)
            .push(&l, retention.as_secs_f64());
    }
    if c.relay_log.files > 0 {
        let m = logs_mount(&c.relay_log);
        component_bytes(&mut s.metrics, label, "relay_log", m, c.relay_log.bytes);
    }
    for (part, bytes) in &c.innodb {
        component_bytes(&mut s.metrics, label, part.label(), mount, *bytes);
    }
}

/// `dir` is the data directory under the rootfs, `wal_dir` where its pg_wal resolves to
/// (inside the host's root: an absolute link is the host's path).
fn pg_cheap(dir: &Path, wal_dir: Option<PathBuf>, deadline: Instant) -> PgCheap {
    let mut out = PgCheap {
        wal_dir,
        ..PgCheap::default()
    };
    let redo = match postgres::read_control(dir) {
        Ok(c) => Some(c.redo_lsn),
        Err(e) => {
            out.errors
                .push(format!("{e} (slots' retained WAL not computed)"));
            None
        }
    };
    let slots = match postgres::read_slots(dir) {
        Ok((slots, errors)) => {
            out.errors.extend(errors.iter().map(|e| e.to_string()));
            slots
        }
        Err(e) => {
            out.errors.push(e.to_string());
            Vec::new()
        }
    };
    match postgres::read_wal(dir, slots, redo) {
        Ok(w) => out.wal = Some(w),
        Err(e) => out.errors.push(e.to_string()),
    }
    let mut temp = vec![Root {
        component: "temp".into(),
        path: dir.join("base/pgsql_tmp"),
    }];
    // Each tablespace's temporary files: <link>/PG_<version>_<catversion>/pgsql_tmp.
    if let Ok(spaces) = postgres::read_tablespaces(dir) {
        for (oid, _) in spaces {
            let link = dir.join("pg_tblspc").join(oid);
            if let Ok(rd) = std::fs::read_dir(&link) {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().starts_with("PG_") {
                        temp.push(Root {
                            component: "temp".into(),
                            path: e.path().join("pgsql_tmp"),
                        });
                    }
                }
            }
        }
    }
    temp.push(Root {
        component: "replication_slots".into(),
        path: dir.join("pg_replslot"),
    });
    out.components = Walk::new(temp, Vec::new()).run_capped(CHEAP_MAX_ENTRIES, deadline);
    out
}

/// The component name of a sizing root outside the data directory: taken apart again when
/// the sizing completes.
const ELSEWHERE: &str = "elsewhere ";

/// The roots of a PostgreSQL sizing: `base` and `global` are the relations, `log` the server
/// log (`log`, `pg_log`, or the top-level directory `log_directory` names; one outside the
/// data directory is a root of the target's own), each tablespace its own, and every other
/// top-level entry but the cheap parts (pg_wal, pg_replslot) "other".
fn pg_size_roots(dir: &Path, log_dir: Option<&Path>) -> (Vec<Root<String>>, Vec<PathBuf>, Spaces) {
    let mut roots = Vec::new();
    let cheap = ["pg_wal", "pg_replslot", "pg_tblspc"];
    // log_directory inside the data directory: its top-level entry is the log.
    let log_top = log_dir
        .and_then(|l| l.strip_prefix(dir).ok())
        .and_then(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names {
            let component = match n.as_str() {
                "base" | "global" => "relations",
                c if cheap.contains(&c) => continue,
                "log" | "pg_log" => "log",
                c if log_top.as_deref() == Some(c) => "log",
                _ => "other",
            };
            roots.push(Root {
                component: component.into(),
                path: dir.join(&n),
            });
        }
    }
    let mut spaces = Vec::new();
    for (oid, target) in postgres::read_tablespaces(dir).unwrap_or_default() {
        roots.push(Root {
            component: format!("tablespace {oid}"),
            // Through the link: the tree beyond it is walked, the link itself not followed
            // again inside.
            path: dir.join("pg_tblspc").join(&oid).join(""),
        });
        spaces.push((oid, target));
    }
    (roots, vec![dir.join("base/pgsql_tmp")], spaces)
}

/// Takes one sizing pass: starts a sizing when none is in progress, finishes it when its last
/// entry is taken.
/// Where a target's files are and how they are laid out.
struct Layout<'a> {
    dir: &'a Path,
    engine: Engine,
    rootfs: &'a Path,
    binlog_index: Option<&'a Path>,
    /// PostgreSQL's log directory, under the rootfs.
    log_dir: Option<&'a Path>,
    /// The target's parts outside its directory, under the rootfs.
    elsewhere: &'a [PathBuf],
}

fn size_pass(slot: &Mutex<SizeSlot>, layout: &Layout, max_entries: u64, deadline: Instant) {
    let Layout {
        dir,
        engine,
        rootfs,
        binlog_index,
        log_dir,
        elsewhere,
    } = *layout;
    let mut s = lock(slot);
    if s.walk.is_none() {
        let (mut roots, skip, spaces) = match engine {
            Engine::Postgres => pg_size_roots(dir, log_dir),
            Engine::Mysql => (
                mysql_size_roots(dir, rootfs, binlog_index),
                Vec::new(),
                Vec::new(),
            ),
            Engine::Tree => (
                vec![Root {
                    component: "all".into(),
                    path: dir.to_path_buf(),
                }],
                Vec::new(),
                Vec::new(),
            ),
        };
        roots.extend(elsewhere.iter().enumerate().map(|(i, p)| Root {
            component: format!("{ELSEWHERE}{i}"),
            path: p.clone(),
        }));
        let declared: &[&str] = match engine {
            Engine::Postgres => &["relations", "log", "other"],
            Engine::Mysql => &["schemas", "other"],
            Engine::Tree => &["all"],
        };
        let declared: Vec<String> = declared.iter().map(|c| c.to_string()).collect();
        s.walk = Some((Walk::new(roots, skip).declare(&declared), spaces));
    }
    let Some((walk, _)) = s.walk.as_mut() else {
        return;
    };
    if walk.step(max_entries, deadline) == Progress::Done
        && let Some((walk, spaces)) = s.walk.take()
    {
        let mut components = Vec::new();
        let mut tablespaces = Vec::new();
        let mut elsewhere = Vec::new();
        for (c, t) in walk.components {
            if let Some(i) = c.strip_prefix(ELSEWHERE).and_then(|i| i.parse().ok()) {
                elsewhere.push((i, t));
                continue;
            }
            match c.strip_prefix("tablespace ") {
                Some(oid) => {
                    let target = spaces
                        .iter()
                        .find(|(o, _)| o == oid)
                        .map(|(_, t)| t.clone())
                        .unwrap_or_default();
                    tablespaces.push((oid.to_string(), target, t));
                }
                None => components.push((c, t)),
            }
        }
        s.done = Some(Sized {
            components,
            tablespaces,
            elsewhere,
            completed: SystemTime::now(),
        });
    }
}

/// Servers remembered once stopped: a host's data directories, never more.
const MAX_KNOWN: usize = 64;

impl DatabasesCollector {
    /// The databases found before whose server is gone but whose directory is still a data
    /// directory (`PG_VERSION`, MySQL's `mysql` schema): watched with `up` 0 until the server
    /// is back or the directory goes. Each directory is looked at through the door.
    async fn stopped(
        &mut self,
        ctx: &Context,
        found: &Found,
        deadline: tokio::time::Instant,
    ) -> Vec<Database> {
        for d in &found.databases {
            if self.known.len() < MAX_KNOWN || self.known.contains_key(&d.dir) {
                self.known.insert(d.dir.clone(), d.clone());
            }
        }
        let gone: Vec<Database> = (self.known.values())
            .filter(|k| !found.databases.iter().any(|d| d.dir == k.dir))
            .cloned()
            .collect();
        let mut out = Vec::new();
        for d in gone {
            let path = d.path.clone();
            let kind = d.kind;
            let still = ctx
                .door
                .call(
                    NAME,
                    format!("{} stopped", d.dir.display()),
                    deadline,
                    move || match kind {
                        ServerKind::Postgres => path.join("PG_VERSION").is_file(),
                        ServerKind::Mysql => path.join("mysql").is_dir(),
                    },
                )
                .await;
            match still {
                Ok(true) => out.push(d),
                Ok(false) => {
                    self.known.remove(&d.dir);
                }
                // Its filesystem hangs: kept, and looked at again next time.
                Err(_) => {}
            }
        }
        out
    }

    pub fn new(cfg: &DatabasesConfig) -> Self {
        DatabasesCollector {
            cfg: cfg.clone(),
            targets: BTreeMap::new(),
            last_found: None,
            known: BTreeMap::new(),
            history_sent: None,
        }
    }
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[async_trait::async_trait]
impl Collector for DatabasesCollector {
    fn name(&self) -> &'static str {
        "databases"
    }

    fn next_delay(&mut self) -> Duration {
        self.cfg.interval
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        let mut s = Sample::default();
        if !self.cfg.discover && self.cfg.watch.is_empty() {
            return Ok(s);
        }
        let deadline = tokio::time::Instant::now() + self.cfg.timeout;
        let found = match discover(ctx, self.cfg.discover, &self.cfg.watch, deadline).await {
            Ok(f) => {
                self.last_found = Some(f.clone());
                f
            }
            Err(Search::Unreadable(e)) => anyhow::bail!("reading the processes: {e}"),
            Err(Search::Unanswered(why)) => {
                s.error(ItemError::new(
                    "process search",
                    format!(
                        "process search: reading the processes under {}: {why}; the databases found before are kept",
                        ctx.roots.proc.display()
                    ),
                ));
                match &self.last_found {
                    Some(f) => f.clone(),
                    None => return Ok(s),
                }
            }
        };
        for (pid, e) in &found.errors {
            s.error(ItemError::new(format!("pid {pid}"), e.clone()));
        }
        for (name, e) in &found.watch_errors {
            s.error(ItemError::new(name.clone(), format!("{name}: {e}")));
        }
        let stopped = self.stopped(ctx, &found, deadline).await;
        let mut targets: Vec<Target> = found
            .databases
            .iter()
            .map(|d| (d, true))
            .chain(stopped.iter().map(|d| (d, false)))
            .map(|(d, up)| Target {
                up: Some(up),
                binlog_expiry: d.binlog_expiry_seconds,
                label: d.dir.to_string_lossy().into_owned(),
                kind: d.kind.as_str(),
                version: d.version.clone(),
                path: d.path.clone(),
                host: d.dir.clone(),
                engine: match d.kind {
                    ServerKind::Postgres => Engine::Postgres,
                    ServerKind::Mysql => Engine::Mysql,
                },
                binlog_index: d.binlog_index.clone(),
                log_dir: d.log_dir.clone(),
                elsewhere: d
                    .log_dir
                    .iter()
                    // Inside the data directory it is sized there; one holding the data
                    // directory (log_directory = '/') would size it twice, and more.
                    .filter(|(host, _)| !host.starts_with(&d.dir) && !d.dir.starts_with(host))
                    .chain(&d.log_files)
                    .map(|(host, inside)| ("log".to_string(), host.clone(), inside.clone()))
                    .collect(),
            })
            .collect();
        targets.extend(found.watched.iter().map(|(name, host, path)| Target {
            up: None,
            binlog_expiry: None,
            label: name.clone(),
            kind: "watch",
            version: String::new(),
            path: path.clone(),
            host: host.clone(),
            engine: Engine::Tree,
            binlog_index: None,
            log_dir: None,
            elsewhere: Vec::new(),
        }));
        // Targets gone (a server stopped): their state goes; a thread still held keeps only
        // what it holds.
        self.targets
            .retain(|k, _| targets.iter().any(|t| &t.label == k));

        // Start every target's jobs, then collect them: they run side by side.
        let cheap_deadline = tokio::time::Instant::now() + self.cfg.timeout;
        let size_deadline = cheap_deadline + self.cfg.size_time_per_pass;
        let mut jobs = Vec::new();
        for t in &targets {
            let st = self
                .targets
                .entry(t.label.clone())
                .or_insert_with(TargetState::new);
            let dir = t.path.clone();
            let (door, cheap_item) = (ctx.door.clone(), format!("{} cheap", t.label));
            let cheap = match t.engine {
                Engine::Postgres => {
                    let pass_deadline = Instant::now() + self.cfg.timeout;
                    let (roots, host) = (ctx.roots.clone(), t.host.clone());
                    Some(tokio::spawn(async move {
                        door.call(NAME, cheap_item, cheap_deadline, move || {
                            let wal = roots.canonical(&host.join("pg_wal")).ok().map(|(_, w)| w);
                            Cheap::Postgres(pg_cheap(&dir, wal, pass_deadline))
                        })
                        .await
                    }))
                }
                Engine::Mysql => {
                    let rootfs = ctx.roots.rootfs.clone();
                    let index = t.binlog_index.clone();
                    Some(tokio::spawn(async move {
                        door.call(NAME, cheap_item, cheap_deadline, move || {
                            Cheap::Mysql(
                                mysql::read_cheap(&dir, &rootfs, index.as_deref())
                                    .map_err(|e| format!("{}: {e}", dir.display())),
                            )
                        })
                        .await
                    }))
                }
                Engine::Tree => None,
            };
            // Never waited for: a pass held by a hung filesystem keeps the lock.
            let in_progress = match st.size.try_lock() {
                Ok(g) => g.walk.is_some(),
                Err(_) => true,
            };
            let size = if in_progress || Instant::now() >= st.next_size {
                if !in_progress {
                    st.next_size = Instant::now() + self.cfg.size_interval;
                }
                let (slot, dir, engine) = (st.size.clone(), t.path.clone(), t.engine);
                let rootfs = ctx.roots.rootfs.clone();
                let index = t.binlog_index.clone();
                let log_dir = t.log_dir.as_ref().map(|(_, inside)| inside.clone());
                let elsewhere: Vec<PathBuf> = t
                    .elsewhere
                    .iter()
                    .map(|(_, _, inside)| inside.clone())
                    .collect();
                let (max, time) = (self.cfg.size_entries_per_pass, self.cfg.size_time_per_pass);
                let (door, size_item) = (ctx.door.clone(), format!("{} size", t.label));
                Some(tokio::spawn(async move {
                    door.call(NAME, size_item, size_deadline, move || {
                        let layout = Layout {
                            dir: &dir,
                            engine,
                            rootfs: &rootfs,
                            binlog_index: index.as_deref(),
                            log_dir: log_dir.as_deref(),
                            elsewhere: &elsewhere,
                        };
                        size_pass(&slot, &layout, max, Instant::now() + time)
                    })
                    .await
                }))
            } else {
                None
            };
            jobs.push((cheap, size));
        }
        for (t, (cheap, size)) in targets.iter().zip(jobs) {
            let mountpoint = mount_of(&found.mounts, &t.host).unwrap_or("");
            if let Some(up) = t.up {
                s.metrics.family(&catalogue::DATABASE_UP).push(
                    &[("database", t.label.as_str())],
                    if up { 1.0 } else { 0.0 },
                );
            }
            s.metrics.family(&catalogue::DATABASE_INFO).push(
                &[
                    ("database", t.label.as_str()),
                    ("kind", t.kind),
                    ("version", t.version.as_str()),
                    ("mountpoint", mountpoint),
                ],
                1.0,
            );
            if let Some(job) = cheap {
                match job.await {
                    Ok(Ok(Cheap::Postgres(c))) => {
                        pg_cheap_metrics(&mut s, &t.label, &c, &found, mountpoint)
                    }
                    Ok(Ok(Cheap::Mysql(Ok(c)))) => mysql_cheap_metrics(
                        &mut s,
                        &t.label,
                        &c,
                        (&found, mountpoint),
                        SystemTime::now(),
                        binlog_retention(self.cfg.mysql_binlog_retention, t.binlog_expiry),
                    ),
                    Ok(Ok(Cheap::Mysql(Err(e)))) => s.error(ItemError::new(
                        format!("{} cheap", t.label),
                        format!("{}: logs and InnoDB files: {e}", t.label),
                    )),
                    Ok(Err(why)) => s.error(ItemError::new(
                        format!("{} cheap", t.label),
                        format!("{}: the every-sample look: {why}", t.label),
                    )),
                    Err(e) => s.error(ItemError::new(
                        format!("{} cheap", t.label),
                        format!("{}: the every-sample look: {e}", t.label),
                    )),
                }
            }
            if let Some(job) = size
                && let Ok(Err(why)) = job.await
            {
                s.error(ItemError::new(
                    format!("{} size", t.label),
                    format!("{}: sizing pass: {why}", t.label),
                ));
            }
            let Some(st) = self.targets.get(&t.label) else {
                continue;
            };
            // The slot is locked only between passes: a pass held by a hung filesystem keeps
            // it, and the last figures are then not shown (try_lock, never a wait).
            let done = match st.size.try_lock() {
                Ok(g) => g.done.clone(),
                Err(_) => None,
            };
            if let Some(d) = done {
                let elsewhere: Vec<(&str, &str)> = t
                    .elsewhere
                    .iter()
                    .map(|(c, host, _)| (c.as_str(), mount_of(&found.mounts, host).unwrap_or("")))
                    .collect();
                sized_metrics(
                    &mut s,
                    &t.label,
                    &d,
                    &found.mounts,
                    (mountpoint, &elsewhere),
                );
            }
        }
        let now = unix(SystemTime::now());
        if let Some(h) = &ctx.history
            && self
                .history_sent
                .is_none_or(|t| now - t >= h.raw_interval().as_secs_f64())
        {
            self.history_sent = Some(now);
            let kinds: Vec<(&str, &str)> =
                targets.iter().map(|t| (t.label.as_str(), t.kind)).collect();
            s.records.extend(
                history_samples(&s.metrics, &kinds, now as i64)
                    .into_iter()
                    .map(Record::Database),
            );
        }
        Ok(s)
    }
}

/// What the history store keeps of a sample: each database's components and facts, read back
/// from the series the sample published (what is stored is what was exported). A database
/// without a component figure yet (its first sizing still running) sends its facts only.
fn history_samples(set: &MetricSet, databases: &[(&str, &str)], t: i64) -> Vec<DatabaseSample> {
    let family = |name: &str| set.families().iter().find(|f| f.name == name);
    let label = |f: &MetricFamily, s: &crate::metrics::Sample, k: &str| {
        f.label(s, k).unwrap_or("").to_string()
    };
    let of =
        |f: &MetricFamily, s: &crate::metrics::Sample, db: &str| f.label(s, "database") == Some(db);
    let fact = |name: &str, db: &str| {
        let f = family(name)?;
        (f.samples.iter())
            .find(|s| of(f, s, db))
            .map(|s| s.value.max(0.0) as u64)
    };
    databases
        .iter()
        .map(|&(db, kind)| {
            let components = family(catalogue::DATABASE_COMPONENT_BYTES.name)
                .map(|f| {
                    f.samples
                        .iter()
                        .filter(|s| of(f, s, db))
                        .map(|s| ComponentSize {
                            component: label(f, s, "component"),
                            mountpoint: label(f, s, "mountpoint"),
                            bytes: s.value.max(0.0) as u64,
                        })
                        .collect()
                })
                .unwrap_or_default();
            let slot =
                family(catalogue::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES.name).and_then(|f| {
                    f.samples
                        .iter()
                        .filter(|s| of(f, s, db))
                        .max_by(|a, b| a.value.total_cmp(&b.value))
                        .map(|s| (label(f, s, "slot"), s.value.max(0.0) as u64))
                });
            DatabaseSample {
                database: db.to_string(),
                kind: kind.to_string(),
                t,
                components,
                facts: DatabaseFacts {
                    archive_ready_segments: fact(
                        catalogue::POSTGRES_ARCHIVE_READY_SEGMENTS.name,
                        db,
                    ),
                    archive_oldest_ready_age_seconds: fact(
                        catalogue::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS.name,
                        db,
                    ),
                    slot,
                    binlog_files: fact(catalogue::MYSQL_BINLOG_FILES.name, db),
                    binlog_oldest_age_seconds: fact(
                        catalogue::MYSQL_BINLOG_OLDEST_AGE_SECONDS.name,
                        db,
                    ),
                    binlog_retention_seconds: fact(
                        catalogue::MYSQL_BINLOG_RETENTION_SECONDS.name,
                        db,
                    ),
                },
            }
        })
        .collect()
}

fn component_metric(s: &mut Sample, label: &str, component: &str, mount: &str, t: &Total) {
    match &t.error {
        // A figure with a hole is not published: an unknown value gives no series.
        Some(e) => s.error(ItemError::new(
            format!("{label} {component}"),
            format!(
                "{label}: {component}: {e}{}",
                if t.problems > 1 {
                    format!(" (and {} more)", t.problems - 1)
                } else {
                    String::new()
                }
            ),
        )),
        None => component_bytes(&mut s.metrics, label, component, mount, t.bytes),
    }
}

fn component_bytes(set: &mut MetricSet, label: &str, component: &str, mount: &str, bytes: u64) {
    set.family(&catalogue::DATABASE_COMPONENT_BYTES).push(
        &[
            ("database", label),
            ("component", component),
            ("mountpoint", mount),
        ],
        bytes as f64,
    );
}

fn pg_cheap_metrics(s: &mut Sample, label: &str, c: &PgCheap, found: &Found, mount: &str) {
    for e in &c.errors {
        s.error(ItemError::new(
            format!("{label} pg_wal"),
            format!("{label}: {e}"),
        ));
    }
    if let Some(w) = &c.wal {
        let wal_mount = c
            .wal_dir
            .as_deref()
            .map_or(mount, |d| found.mount_of_inside(d));
        pg_wal_metrics(&mut s.metrics, label, w, wal_mount, SystemTime::now());
    }
    for (component, t) in &c.components {
        component_metric(s, label, component, mount, t);
    }
}

/// The WAL, the archiver's backlog and the slots' retained WAL of one PostgreSQL.
fn pg_wal_metrics(set: &mut MetricSet, label: &str, w: &Wal, mount: &str, now: SystemTime) {
    let l = [("database", label)];
    component_bytes(set, label, "wal", mount, w.bytes);
    set.family(&catalogue::POSTGRES_WAL_SEGMENTS)
        .push(&l, w.segments as f64);
    set.family(&catalogue::POSTGRES_ARCHIVE_READY_SEGMENTS)
        .push(&l, w.ready as f64);
    // Nothing waiting is an age of 0, not an unknown.
    let age = w
        .oldest_ready
        .map(|t| now.duration_since(t).unwrap_or_default().as_secs_f64())
        .unwrap_or(0.0);
    set.family(&catalogue::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS)
        .push(&l, age);
    for slot in &w.slots {
        set.family(&catalogue::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES)
            .push(
                &[
                    ("database", label),
                    ("slot", slot.state.name.as_str()),
                    ("type", slot.state.kind()),
                ],
                slot.retained_bytes as f64,
            );
    }
}

/// The figures of a finished sizing; `mount` holds the data directory, `elsewhere` names the
/// component and mount of each part sized outside it (by index: a server log elsewhere).
fn sized_metrics(
    s: &mut Sample,
    label: &str,
    d: &Sized,
    mounts: &[MountInfo],
    (mount, elsewhere): (&str, &[(&str, &str)]),
) {
    let mut entries = 0;
    // A log directory outside the data directory but on its mount adds to the same series.
    let mut series: Vec<(&str, &str, Total)> = Vec::new();
    let inside = d.components.iter().map(|(c, t)| (c.as_str(), mount, t));
    // A part whose target changed since its sizing began has no name: left out.
    let outside = d
        .elsewhere
        .iter()
        .filter_map(|(i, t)| elsewhere.get(*i).map(|(c, m)| (*c, *m, t)));
    for (component, m, t) in inside.chain(outside) {
        entries += t.entries;
        match series
            .iter_mut()
            .find(|(c, sm, _)| *c == component && *sm == m)
        {
            Some((_, _, sum)) => {
                sum.bytes += t.bytes;
                sum.entries += t.entries;
                sum.problems += t.problems;
                if sum.error.is_none() {
                    sum.error.clone_from(&t.error);
                }
            }
            None => series.push((component, m, t.clone())),
        }
    }
    for (component, m, t) in &series {
        component_metric(s, label, component, m, t);
    }
    for (oid, target, t) in &d.tablespaces {
        match &t.error {
            Some(e) => s.error(ItemError::new(
                format!("{label} tablespace {oid}"),
                format!("{label}: tablespace {oid}: {e}"),
            )),
            None => s
                .metrics
                .family(&catalogue::POSTGRES_TABLESPACE_BYTES)
                .push(
                    &[
                        ("database", label),
                        ("tablespace", oid.as_str()),
                        ("location", target.to_string_lossy().as_ref()),
                        ("mountpoint", mount_of(mounts, target).unwrap_or("")),
                    ],
                    t.bytes as f64,
                ),
        }
    }
    let l = [("database", label)];
    s.metrics
        .family(&catalogue::DATABASE_SIZE_COMPLETED_TIMESTAMP_SECONDS)
        .push(&l, unix(d.completed));
    s.metrics
        .family(&catalogue::DATABASE_SIZE_ENTRIES)
        .push(&l, entries as f64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::postgres::tests::{control_file, slot_file};

    const SEG: u64 = 1 << 20;

    fn write(p: &Path, data: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }

    /// A host tree: a postmaster (pid 812) of /srv/pg with 6 WAL segments of 1 MiB, 2 waiting
    /// for the archiver, slot s1 holding segments 2 and 3; a postmaster (pid 900) whose
    /// directory's postmaster.pid names another pid; its checkpointer child.
    fn host(t: &Path) -> crate::Roots {
        let proc = t.join("proc");
        let rootfs = t.join("rootfs");
        write(&proc.join("812/comm"), b"postgres\n");
        write(
            &proc.join("812/cmdline"),
            b"/usr/lib/postgresql/15/bin/postgres\0-D\0/srv/pg\0",
        );
        write(&proc.join("813/comm"), b"postgres\n");
        write(&proc.join("813/cmdline"), b"postgres: checkpointer ");
        write(&proc.join("900/comm"), b"postgres\n");
        write(&proc.join("900/cmdline"), b"postgres\0-D\0/srv/stale\0");
        let pg = rootfs.join("srv/pg");
        write(&pg.join("PG_VERSION"), b"15\n");
        write(
            &pg.join("postmaster.pid"),
            b"812\n/srv/pg\n1700000000\n5432\n",
        );
        write(&pg.join("global/pg_control"), &control_file(4 * SEG + 0x28));
        for i in 1..=6u64 {
            let name = format!("00000001{:08X}{:08X}", 0, i);
            write(&pg.join("pg_wal").join(&name), &vec![1u8; SEG as usize]);
            if i <= 2 {
                write(
                    &pg.join("pg_wal/archive_status")
                        .join(format!("{name}.ready")),
                    b"",
                );
            }
        }
        write(
            &pg.join("pg_replslot/s1/state"),
            &slot_file("s1", 0, 2 * SEG + 8),
        );
        write(&pg.join("base/5/16384"), &vec![2u8; 3 * 8192]);
        write(&pg.join("base/pgsql_tmp/pgsql_tmp812.0"), &vec![3u8; 8192]);
        write(&pg.join("log/postgresql.log"), &vec![4u8; 4096]);
        let stale = rootfs.join("srv/stale");
        write(&stale.join("PG_VERSION"), b"15\n");
        write(&stale.join("postmaster.pid"), b"4444\n/srv/stale\n");
        write(&rootfs.join("srv/backups/dump.sql"), &vec![5u8; 10_000]);
        crate::Roots {
            proc,
            rootfs,
            ..crate::Roots::default()
        }
    }

    fn value(s: &Sample, family: &Family, labels: &[(&str, &str)]) -> Option<f64> {
        s.metrics.value(family.name, labels)
    }

    use crate::catalogue::{self as c, Family};

    #[tokio::test]
    async fn a_postgres_found_from_its_process_shows_its_wal_backlog_slot_and_components() {
        let t = tempfile::tempdir().unwrap();
        let ctx = Context::new(host(t.path()), Duration::from_secs(60));
        let cfg = DatabasesConfig {
            watch: vec![
                WatchConfig {
                    name: "backups".into(),
                    path: "/srv/backups".into(),
                },
                WatchConfig {
                    name: "gone".into(),
                    path: "/srv/gone".into(),
                },
            ],
            ..DatabasesConfig::default()
        };
        let mut col = DatabasesCollector::new(&cfg);
        let s = col.sample(&ctx).await.unwrap();
        let db = [("database", "/srv/pg")];
        assert_eq!(value(&s, &c::POSTGRES_WAL_SEGMENTS, &db), Some(6.0));
        assert_eq!(
            value(&s, &c::POSTGRES_ARCHIVE_READY_SEGMENTS, &db),
            Some(2.0)
        );
        assert!(value(&s, &c::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS, &db).unwrap() < 600.0);
        assert_eq!(
            value(
                &s,
                &c::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES,
                &[
                    ("database", "/srv/pg"),
                    ("slot", "s1"),
                    ("type", "physical")
                ]
            ),
            Some((2 * SEG) as f64)
        );
        let comp = |s: &Sample, db: &str, c: &str| {
            value(
                s,
                &c::DATABASE_COMPONENT_BYTES,
                &[("database", db), ("component", c)],
            )
        };
        assert!(comp(&s, "/srv/pg", "wal").unwrap() >= (6 * SEG) as f64);
        assert!(comp(&s, "/srv/pg", "temp").unwrap() >= 8192.0);
        assert!(comp(&s, "/srv/pg", "relations").unwrap() >= 3.0 * 8192.0);
        assert!(comp(&s, "/srv/pg", "log").unwrap() >= 4096.0);
        // The temporary file is counted once, under temp, not also under relations.
        let rel = comp(&s, "/srv/pg", "relations").unwrap();
        assert!(rel < (3 * 8192 + 8192 + 5 * 4096) as f64, "{rel}");
        assert!(comp(&s, "backups", "all").unwrap() >= 10_000.0);
        assert_eq!(
            value(
                &s,
                &c::DATABASE_INFO,
                &[
                    ("database", "/srv/pg"),
                    ("kind", "postgresql"),
                    ("version", "15"),
                    ("mountpoint", "")
                ]
            ),
            Some(1.0)
        );
        // The stale directory and the missing watched path are their own errors; nothing else
        // is lost, and the checkpointer is not taken for a server.
        let errors: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("pid 900") && e.contains("names pid \"4444\", not 900")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("gone") && e.contains("/srv/gone")),
            "{errors:?}"
        );
        assert!(!s.metrics.families().iter().any(|f| {
            f.samples
                .iter()
                .any(|x| f.labels(x).any(|(_, v)| v == "/srv/stale"))
        }));
    }

    #[tokio::test]
    async fn the_archiver_fixed_and_the_slot_dropped_clear_the_series() {
        let t = tempfile::tempdir().unwrap();
        let roots = host(t.path());
        let pg = roots.rootfs.join("srv/pg");
        let ctx = Context::new(roots, Duration::from_secs(60));
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        col.sample(&ctx).await.unwrap();
        for e in std::fs::read_dir(pg.join("pg_wal/archive_status")).unwrap() {
            let p = e.unwrap().path();
            std::fs::rename(&p, p.with_extension("done")).unwrap();
        }
        std::fs::remove_dir_all(pg.join("pg_replslot/s1")).unwrap();
        let s = col.sample(&ctx).await.unwrap();
        let db = [("database", "/srv/pg")];
        assert_eq!(
            value(&s, &c::POSTGRES_ARCHIVE_READY_SEGMENTS, &db),
            Some(0.0)
        );
        assert_eq!(
            value(&s, &c::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS, &db),
            Some(0.0)
        );
        assert!(s.metrics.families().iter().all(|f| f.name
            != c::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES.name
            || f.samples.is_empty()));
    }

    #[tokio::test]
    async fn a_big_tree_is_sized_over_several_samples_and_the_last_figure_kept_meanwhile() {
        let t = tempfile::tempdir().unwrap();
        let roots = host(t.path());
        let base = roots.rootfs.join("srv/pg/base/5");
        for i in 0..450 {
            write(&base.join(format!("{}", 20000 + i)), b"x");
        }
        let ctx = Context::new(roots, Duration::from_secs(60));
        let cfg = DatabasesConfig {
            size_entries_per_pass: 100,
            ..DatabasesConfig::default()
        };
        let mut col = DatabasesCollector::new(&cfg);
        let rel = |s: &Sample| {
            value(
                s,
                &c::DATABASE_COMPONENT_BYTES,
                &[("database", "/srv/pg"), ("component", "relations")],
            )
        };
        let mut samples = 0;
        let first = loop {
            let s = col.sample(&ctx).await.unwrap();
            samples += 1;
            // The cheap parts are there from the first sample on.
            assert!(value(&s, &c::POSTGRES_WAL_SEGMENTS, &[("database", "/srv/pg")]).is_some());
            if let Some(r) = rel(&s) {
                assert_eq!(
                    value(&s, &c::DATABASE_SIZE_ENTRIES, &[("database", "/srv/pg")]),
                    Some(455.0)
                );
                break r;
            }
            assert!(samples < 10);
        };
        assert_eq!(samples, 5, "450 files and a few more at 100 a pass");
        // Not due again for size_interval: the figure stays without a new pass.
        let s = col.sample(&ctx).await.unwrap();
        assert_eq!(rel(&s), Some(first));
        assert!(lock(&col.targets["/srv/pg"].size).walk.is_none());
    }

    #[tokio::test]
    async fn a_mariadb_shows_its_binlogs_innodb_files_and_schemas() {
        let t = tempfile::tempdir().unwrap();
        let proc = t.path().join("proc");
        let rootfs = t.path().join("rootfs");
        write(&proc.join("700/comm"), b"mariadbd\n");
        write(
            &proc.join("700/cmdline"),
            b"/usr/sbin/mariadbd\0--datadir=/srv/mysql\0--user=mysql\0",
        );
        let my = rootfs.join("srv/mysql");
        write(&my.join("mysql/db.opt"), b"x");
        write(&my.join("shop/orders.ibd"), &vec![1u8; 64 << 10]);
        write(&my.join("ibdata1"), &vec![0u8; 12 << 10]);
        write(&my.join("undo001"), &vec![0u8; 8 << 10]);
        write(&my.join("ib_logfile0"), &vec![0u8; 16 << 10]);
        write(&my.join("ibtmp1"), &vec![0u8; 4 << 10]);
        write(&my.join("mysql-bin.000001"), &vec![0u8; 20 << 10]);
        write(&my.join("mysql-bin.000002"), &vec![0u8; 4 << 10]);
        write(
            &my.join("mysql-bin.index"),
            b"./mysql-bin.000001\n./mysql-bin.000002\n",
        );
        // Its last write ten days ago.
        let old = SystemTime::now() - Duration::from_secs(10 * 86400);
        std::fs::File::options()
            .write(true)
            .open(my.join("mysql-bin.000001"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let ctx = Context::new(
            crate::Roots {
                proc,
                rootfs,
                ..crate::Roots::default()
            },
            Duration::from_secs(60),
        );
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        let db = [("database", "/srv/mysql")];
        assert_eq!(value(&s, &c::MYSQL_BINLOG_FILES, &db), Some(2.0));
        let age = value(&s, &c::MYSQL_BINLOG_OLDEST_AGE_SECONDS, &db).unwrap();
        assert!((age - 864_000.0).abs() < 600.0, "{age}");
        assert_eq!(
            value(&s, &c::MYSQL_BINLOG_RETENTION_SECONDS, &db),
            Some(30.0 * 86400.0)
        );
        let comp = |c: &str| {
            value(
                &s,
                &c::DATABASE_COMPONENT_BYTES,
                &[("database", "/srv/mysql"), ("component", c)],
            )
        };
        assert!(comp("binlog").unwrap() >= (24 << 10) as f64);
        assert!(comp("innodb_system").unwrap() >= (12 << 10) as f64);
        assert!(comp("innodb_undo").unwrap() >= (8 << 10) as f64);
        assert!(comp("innodb_redo").unwrap() >= (16 << 10) as f64);
        assert!(comp("innodb_temp").unwrap() >= (4 << 10) as f64);
        let schemas = comp("schemas").unwrap();
        assert!(schemas >= (64 << 10) as f64, "{schemas}");
        // The logs and InnoDB's files are not counted again under other.
        let other = comp("other").unwrap();
        assert!(other < (20 << 10) as f64, "{other}");
        assert_eq!(comp("relay_log"), None);
    }

    #[tokio::test]
    async fn each_component_is_labelled_with_the_mount_holding_it() {
        let t = tempfile::tempdir().unwrap();
        let roots = host(t.path());
        // pg_wal moved to its own filesystem (initdb -X), linked from the data directory.
        let pg = roots.rootfs.join("srv/pg");
        let wal = roots.rootfs.join("srv/wal/pg_wal");
        std::fs::create_dir_all(wal.parent().unwrap()).unwrap();
        std::fs::rename(pg.join("pg_wal"), &wal).unwrap();
        // Relative, so it resolves inside the fixture's rootfs.
        std::os::unix::fs::symlink("../wal/pg_wal", pg.join("pg_wal")).unwrap();
        write(
            &roots.proc.join("self/mountinfo"),
            b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /srv/wal rw - xfs /dev/sdb1 rw\n",
        );
        let ctx = Context::new(roots, Duration::from_secs(60));
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        let at = |component: &str, mount: &str| {
            value(
                &s,
                &c::DATABASE_COMPONENT_BYTES,
                &[
                    ("database", "/srv/pg"),
                    ("component", component),
                    ("mountpoint", mount),
                ],
            )
        };
        assert!(at("wal", "/srv/wal").is_some_and(|b| b >= (6 * SEG) as f64));
        assert!(at("relations", "/").is_some());
        assert!(at("temp", "/").is_some());
        assert_eq!(
            value(&s, &c::POSTGRES_WAL_SEGMENTS, &[("database", "/srv/pg")]),
            Some(6.0)
        );
    }

    #[tokio::test]
    async fn a_server_log_outside_the_data_directory_is_counted_on_its_own_mount() {
        let t = tempfile::tempdir().unwrap();
        let roots = host(t.path());
        let pg = roots.rootfs.join("srv/pg");
        // ALTER SYSTEM SET log_directory: postgresql.auto.conf, read after postgresql.conf.
        write(&pg.join("postgresql.conf"), b"log_directory = 'log'\n");
        write(
            &pg.join("postgresql.auto.conf"),
            b"log_directory = '/var/log/postgresql/main'\n",
        );
        write(
            &roots
                .rootfs
                .join("var/log/postgresql/main/postgresql-Fri.log"),
            &vec![6u8; 64 << 10],
        );
        write(
            &roots.proc.join("self/mountinfo"),
            b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /var/log rw - xfs /dev/sdb1 rw\n",
        );
        let ctx = Context::new(roots.clone(), Duration::from_secs(60));
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        let at = |s: &Sample, component: &str, mount: &str| {
            value(
                s,
                &c::DATABASE_COMPONENT_BYTES,
                &[
                    ("database", "/srv/pg"),
                    ("component", component),
                    ("mountpoint", mount),
                ],
            )
        };
        let outside = at(&s, "log", "/var/log").unwrap();
        assert!(outside >= (64 << 10) as f64, "{outside}");
        // The old log directory inside keeps its own series, on the data directory's mount.
        let inside = at(&s, "log", "/").unwrap();
        assert!((4096.0..(64 << 10) as f64).contains(&inside), "{inside}");

        // The same directory on the data directory's mount: one series, the sum of both.
        write(
            &roots.proc.join("self/mountinfo"),
            b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
        );
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        assert_eq!(at(&s, "log", "/"), Some(inside + outside));

        // A relative log_directory names a top-level directory of the data directory: the log,
        // not "other".
        write(
            &pg.join("postgresql.auto.conf"),
            b"log_directory = 'logs'\n",
        );
        write(&pg.join("logs/postgresql.log"), &vec![7u8; 256 << 10]);
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        let log = at(&s, "log", "/").unwrap();
        assert!(log >= ((256 << 10) + 4096) as f64, "{log}");
        assert!(at(&s, "other", "/").unwrap() < (256 << 10) as f64);

        // A log_directory holding the data directory (a mistake, or '/') is not walked: the
        // data directory would count twice, and the whole tree with it.
        write(
            &pg.join("postgresql.auto.conf"),
            b"log_directory = '/srv'\n",
        );
        let mut col = DatabasesCollector::new(&DatabasesConfig::default());
        let s = col.sample(&ctx).await.unwrap();
        assert_eq!(at(&s, "log", "/"), Some(inside));
    }

    #[test]
    fn the_binlog_retention_is_the_configs_else_the_servers_else_30_days() {
        let day = Duration::from_secs(86_400);
        assert_eq!(binlog_retention(Some(7 * day), Some(86_400)), 7 * day);
        assert_eq!(binlog_retention(None, Some(3 * 86_400)), 3 * day);
        assert_eq!(binlog_retention(None, Some(0)), 30 * day, "never purged");
        assert_eq!(binlog_retention(None, None), 30 * day);
    }
}
