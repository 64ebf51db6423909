//! Finding what to watch: servers from the process table (each candidate read in a door call
//! of its own), the watched paths resolved, and servers found before that stopped. Decides
//! nothing about files; the jobs look at them.

use super::NAME;
use super::config::WatchConfig;
use crate::collector::Context;
use crate::databases::{Database, locate, mount_of};
use crate::door::Unanswered;
use crate::procfs::mountinfo::{MountInfo, read_mountinfo, strip_rootfs};
use crate::procfs::processes::{ServerKind, read_server, server_candidates};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the search of /proc found.
#[derive(Clone)]
pub(super) struct Found {
    pub(super) databases: Vec<Database>,
    pub(super) errors: Vec<(u32, String)>,
    pub(super) mounts: Vec<MountInfo>,
    /// Watched paths that exist: (name, host path, path under the rootfs).
    pub(super) watched: Vec<(String, PathBuf, PathBuf)>,
    pub(super) watch_errors: Vec<(String, String)>,
    /// The rootfs, canonical: a path read under it, less this, is the host's path.
    pub(super) rootfs: PathBuf,
}

impl Found {
    /// The mount holding `inside` (a path under the rootfs), as the filesystem collector
    /// labels it; "" when none is known.
    pub(super) fn mount_of_inside(&self, inside: &Path) -> &str {
        let host = match inside.strip_prefix(&self.rootfs) {
            Ok(rel) if self.rootfs != Path::new("/") => Path::new("/").join(rel),
            _ => inside.to_path_buf(),
        };
        mount_of(&self.mounts, &host).unwrap_or("")
    }
}

/// Why the process table could not be searched at all.
pub(super) enum Search {
    /// `/proc` can't be listed: the collector's sample fails.
    Unreadable(String),
    /// The listing gave no answer: the databases found before are kept.
    Unanswered(Unanswered),
}

/// The search: the process table's candidates in one call (from `stat`, which no hung mount or
/// memory lock holds up), then each candidate's command line and data directory, and each
/// watched path, in a call of its own, side by side: a process whose directory is on a hung
/// mount costs only its own item, never the search.
pub(super) async fn discover(
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

/// Servers remembered once stopped: a host's data directories, never more.
const MAX_KNOWN: usize = 64;

/// The databases found before (`known`, which this sample's finds join) whose server is gone
/// but whose directory is still a data directory (`PG_VERSION`, MySQL's `mysql` schema):
/// watched with `up` 0 until the server is back or the directory goes. Each directory is
/// looked at through the door.
pub(super) async fn stopped(
    known: &mut BTreeMap<PathBuf, Database>,
    ctx: &Context,
    found: &Found,
    deadline: tokio::time::Instant,
) -> Vec<Database> {
    for d in &found.databases {
        if known.len() < MAX_KNOWN || known.contains_key(&d.dir) {
            known.insert(d.dir.clone(), d.clone());
        }
    }
    let gone: Vec<Database> = (known.values())
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
                known.remove(&d.dir);
            }
            // Its filesystem hangs: kept, and looked at again next time.
            Err(_) => {}
        }
    }
    out
}
