//! Databases collector: what is filling the disk, by database component. Finds PostgreSQL and
//! MySQL/MariaDB servers from /proc (and takes paths named in the config), then looks at their
//! files without a login: every sample the cheap parts (pg_wal, the archiver's backlog, slots,
//! temporary files), and the big trees (relations, logs, tablespaces) in bounded passes resumed
//! from sample to sample. All file access runs off the async workers with a deadline, so a hung
//! or slow filesystem costs only its own database's series. This module only schedules and
//! publishes: `discover` finds, `jobs` reads, `write` publishes, `databases::layout` decides
//! which path is which component.

mod config;
mod discover;
mod jobs;
mod write;

pub use config::{DEFAULT_INTERVAL, DatabasesConfig, WatchConfig};

use crate::collector::{Collector, Context, ItemError, Sample};
use crate::databases::component::{Component, Kind};
use crate::databases::{Database, mount_of};
use crate::history::DatabaseSample;
use crate::history::service::Record;
use discover::{Found, Search, discover};
use jobs::{Cheap, Layout, SizeSlot, mysql_cheap, pg_cheap, size_pass};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinHandle;
use write::{Out, binlog_retention, unix};

/// The door's name for this collector's calls.
const NAME: &str = "databases";

/// A directory looked at: a discovered server's data directory or a watched path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// Whether its server process runs; None for a watched path.
    up: Option<bool>,
    /// MySQL: how long the server says it keeps binary logs.
    binlog_expiry: Option<u64>,
    /// The `database` label: the data directory (discovered) or the configured name.
    label: String,
    /// What its files are laid out as.
    kind: Kind,
    version: String,
    /// Under the rootfs, for reading.
    path: PathBuf,
    /// As the host sees it, for the mount point.
    host: PathBuf,
    /// MySQL: the binary log index the server was told of, under the rootfs.
    binlog_index: Option<PathBuf>,
    /// PostgreSQL: the server log's directory, (host path, under the rootfs).
    log_dir: Option<(PathBuf, PathBuf)>,
    /// Parts outside the data directory (a log directory or log files elsewhere): component,
    /// host path (for the mount), path under the rootfs.
    elsewhere: Vec<(Component, PathBuf, PathBuf)>,
}

impl Target {
    /// A server's data directory, `up` when its process runs.
    fn server(d: &Database, up: bool) -> Target {
        Target {
            up: Some(up),
            binlog_expiry: d.binlog_expiry_seconds,
            label: d.dir.to_string_lossy().into_owned(),
            kind: d.kind.into(),
            version: d.version.clone(),
            path: d.path.clone(),
            host: d.dir.clone(),
            binlog_index: d.binlog_index.clone(),
            log_dir: d.log_dir.clone(),
            elsewhere: d
                .log_dir
                .iter()
                // Inside the data directory it is sized there; one holding the data
                // directory (log_directory = '/') would size it twice, and more.
                .filter(|(host, _)| !host.starts_with(&d.dir) && !d.dir.starts_with(host))
                .chain(&d.log_files)
                .map(|(host, inside)| (Component::Log, host.clone(), inside.clone()))
                .collect(),
        }
    }

    /// A watched path: (name, host path, path under the rootfs).
    fn watched((name, host, path): &(String, PathBuf, PathBuf)) -> Target {
        Target {
            up: None,
            binlog_expiry: None,
            label: name.clone(),
            kind: Kind::Watch,
            version: String::new(),
            path: path.clone(),
            host: host.clone(),
            binlog_index: None,
            log_dir: None,
            elsewhere: Vec::new(),
        }
    }
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

/// A door call's answer: the job's result, or why it gave none (timed out, its item stuck).
type DoorResult<T> = Result<T, crate::door::Unanswered>;

/// A target's jobs of this sample, started side by side.
struct Jobs {
    cheap: Option<JoinHandle<DoorResult<Cheap>>>,
    size: Option<JoinHandle<DoorResult<()>>>,
}

impl DatabasesCollector {
    pub fn new(cfg: &DatabasesConfig) -> Self {
        DatabasesCollector {
            cfg: cfg.clone(),
            targets: BTreeMap::new(),
            last_found: None,
            known: BTreeMap::new(),
            history_sent: None,
        }
    }

    /// The search of this sample, or the last one while the process table gives no answer;
    /// None when there is nothing to look at.
    async fn find(
        &mut self,
        ctx: &Context,
        s: &mut Sample,
        deadline: tokio::time::Instant,
    ) -> anyhow::Result<Option<Found>> {
        match discover(ctx, self.cfg.discover, &self.cfg.watch, deadline).await {
            Ok(f) => {
                self.last_found = Some(f.clone());
                Ok(Some(f))
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
                Ok(self.last_found.clone())
            }
        }
    }

    /// Starts a target's cheap look and, when one is due or in progress, its sizing pass.
    fn start(&mut self, ctx: &Context, t: &Target, cheap_deadline: tokio::time::Instant) -> Jobs {
        let st = self
            .targets
            .entry(t.label.clone())
            .or_insert_with(TargetState::new);
        let dir = t.path.clone();
        let (door, cheap_item) = (ctx.door.clone(), format!("{} cheap", t.label));
        let cheap = match t.kind {
            Kind::Postgres => {
                let pass_deadline = Instant::now() + self.cfg.timeout;
                let (roots, host) = (ctx.roots.clone(), t.host.clone());
                let wal = crate::databases::layout::POSTGRES_WAL;
                Some(tokio::spawn(async move {
                    door.call(NAME, cheap_item, cheap_deadline, move || {
                        let wal = roots.canonical(&host.join(wal)).ok().map(|(_, w)| w);
                        let spaces = crate::databases::tablespaces(&roots, &host, &dir);
                        Cheap::Postgres(pg_cheap(&dir, wal, &spaces, pass_deadline))
                    })
                    .await
                }))
            }
            Kind::Mysql => {
                let rootfs = ctx.roots.rootfs.clone();
                let index = t.binlog_index.clone();
                Some(tokio::spawn(async move {
                    door.call(NAME, cheap_item, cheap_deadline, move || {
                        mysql_cheap(&dir, &rootfs, index.as_deref())
                    })
                    .await
                }))
            }
            Kind::Watch => None,
        };
        // Never waited for: a pass held by a hung filesystem keeps the lock.
        let in_progress = match st.size.try_lock() {
            Ok(g) => g.walk.is_some(),
            Err(_) => true,
        };
        if !in_progress && Instant::now() < st.next_size {
            return Jobs { cheap, size: None };
        }
        if !in_progress {
            st.next_size = Instant::now() + self.cfg.size_interval;
        }
        let (slot, dir, kind) = (st.size.clone(), t.path.clone(), t.kind);
        let (roots, host) = (ctx.roots.clone(), t.host.clone());
        let index = t.binlog_index.clone();
        let log_dir = t.log_dir.as_ref().map(|(_, inside)| inside.clone());
        let elsewhere: Vec<PathBuf> = (t.elsewhere.iter())
            .map(|(_, _, inside)| inside.clone())
            .collect();
        let (max, time) = (self.cfg.size_entries_per_pass, self.cfg.size_time_per_pass);
        let (door, size_item) = (ctx.door.clone(), format!("{} size", t.label));
        let size_deadline = cheap_deadline + self.cfg.size_time_per_pass;
        let size = tokio::spawn(async move {
            door.call(NAME, size_item, size_deadline, move || {
                let layout = Layout {
                    dir: &dir,
                    kind,
                    roots: &roots,
                    host: &host,
                    binlog_index: index.as_deref(),
                    log_dir: log_dir.as_deref(),
                    elsewhere: &elsewhere,
                };
                size_pass(&slot, &layout, max, Instant::now() + time)
            })
            .await
        });
        Jobs {
            cheap,
            size: Some(size),
        }
    }

    /// Waits for a target's jobs and publishes what it shows: its identity, the cheap look's
    /// figures and the last finished sizing's. Returns the history record of the same.
    async fn publish(
        &self,
        s: &mut Sample,
        t: &Target,
        jobs: Jobs,
        found: &Found,
    ) -> DatabaseSample {
        let mountpoint = mount_of(&found.mounts, &t.host).unwrap_or("");
        let mut out = Out::new(s, &t.label, t.kind);
        out.identity(t.up, &t.version, mountpoint);
        let (cheap_item, size_item) = (format!("{} cheap", t.label), format!("{} size", t.label));
        let label = &t.label;
        if let Some(job) = jobs.cheap {
            match job.await {
                Ok(Ok(Cheap::Postgres(c))) => out.pg_cheap(&c, found, mountpoint),
                Ok(Ok(Cheap::Mysql(Ok(c)))) => out.mysql_cheap(
                    &c,
                    (found, mountpoint),
                    SystemTime::now(),
                    binlog_retention(self.cfg.mysql_binlog_retention, t.binlog_expiry),
                ),
                Ok(Ok(Cheap::Mysql(Err(e)))) => {
                    out.error(cheap_item, format!("{label}: logs and InnoDB files: {e}"))
                }
                Ok(Err(why)) => {
                    out.error(cheap_item, format!("{label}: the every-sample look: {why}"))
                }
                Err(e) => out.error(cheap_item, format!("{label}: the every-sample look: {e}")),
            }
        }
        if let Some(job) = jobs.size
            && let Ok(Err(why)) = job.await
        {
            out.error(size_item, format!("{label}: sizing pass: {why}"));
        }
        // The slot is locked only between passes: a pass held by a hung filesystem keeps it,
        // and the last figures are then not shown (try_lock, never a wait).
        let done = (self.targets.get(&t.label)).and_then(|st| match st.size.try_lock() {
            Ok(g) => g.done.clone(),
            Err(_) => None,
        });
        if let Some(d) = done {
            let elsewhere: Vec<(Component, &str)> = (t.elsewhere.iter())
                .map(|(c, host, _)| (*c, mount_of(&found.mounts, host).unwrap_or("")))
                .collect();
            out.sized(&d, &found.mounts, (mountpoint, &elsewhere));
        }
        out.finish()
    }
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
        // Nothing looked at: no record either.
        let Some(records) = self.sample_into(ctx, &mut s).await? else {
            return Ok(s);
        };
        let now = unix(SystemTime::now());
        if let Some(h) = &ctx.history
            && self
                .history_sent
                .is_none_or(|t| now - t >= h.raw_interval().as_secs_f64())
        {
            self.history_sent = Some(now);
            s.records.extend(records.into_iter().map(|mut r| {
                r.t = now as i64;
                Record::Database(r)
            }));
        }
        Ok(s)
    }
}

impl DatabasesCollector {
    /// One sample's series into `s`, and the history record of each target's (their time
    /// unset); None when there was nothing to look at.
    async fn sample_into(
        &mut self,
        ctx: &Context,
        s: &mut Sample,
    ) -> anyhow::Result<Option<Vec<DatabaseSample>>> {
        if !self.cfg.discover && self.cfg.watch.is_empty() {
            return Ok(None);
        }
        let deadline = tokio::time::Instant::now() + self.cfg.timeout;
        let Some(found) = self.find(ctx, s, deadline).await? else {
            return Ok(None);
        };
        for (pid, e) in &found.errors {
            s.error(ItemError::new(format!("pid {pid}"), e.clone()));
        }
        for (name, e) in &found.watch_errors {
            s.error(ItemError::new(name.clone(), format!("{name}: {e}")));
        }
        let stopped = discover::stopped(&mut self.known, ctx, &found, deadline).await;
        let targets: Vec<Target> = (found.databases.iter().map(|d| Target::server(d, true)))
            .chain(stopped.iter().map(|d| Target::server(d, false)))
            .chain(found.watched.iter().map(Target::watched))
            .collect();
        // Targets gone (a server stopped): their state goes; a thread still held keeps only
        // what it holds.
        self.targets
            .retain(|k, _| targets.iter().any(|t| &t.label == k));
        // Start every target's jobs, then collect them: they run side by side.
        let cheap_deadline = tokio::time::Instant::now() + self.cfg.timeout;
        let jobs: Vec<Jobs> = (targets.iter())
            .map(|t| self.start(ctx, t, cheap_deadline))
            .collect();
        let mut records = Vec::with_capacity(targets.len());
        for (t, j) in targets.iter().zip(jobs) {
            records.push(self.publish(s, t, j, &found).await);
        }
        Ok(Some(records))
    }
}

#[cfg(test)]
mod tests;
