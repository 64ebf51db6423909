//! The work done on a target's files, each run inside one door call: the every-sample look
//! (pg_wal, slots, temporary files; MySQL's logs and InnoDB files) and one bounded sizing pass.
//! The listings are taken here; which path is which component is `databases::layout`'s.

use crate::Roots;
use crate::databases::component::{Component, Kind};
use crate::databases::layout::{self, Entry, Part, SizePlan, Tablespace};
use crate::databases::mysql;
use crate::databases::postgres::{self, Wal};
use crate::databases::walk::{Progress, Total, Walk};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// Entries the cheap pass sizes in `pgsql_tmp` or `pg_replslot` before it gives up on them
/// (temporary files are few and large; logical slots spill a file per transaction).
const CHEAP_MAX_ENTRIES: u64 = 20_000;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cheap look at a PostgreSQL data directory.
#[derive(Debug, Default)]
pub(super) struct PgCheap {
    pub(super) wal: Option<Wal>,
    /// Where pg_wal is (under the rootfs, links resolved): `initdb -X` puts it on another
    /// filesystem.
    pub(super) wal_dir: Option<PathBuf>,
    /// `pg_replslot` (logical slots spill decoded changes there) and `pgsql_tmp` sizes.
    pub(super) components: Vec<(Component, Total)>,
    pub(super) errors: Vec<String>,
}

/// A cheap look's result, by kind.
pub(super) enum Cheap {
    Postgres(PgCheap),
    Mysql(Result<mysql::Cheap, String>),
}

/// A directory's entries, by the entry's own type (no link followed); an unreadable directory
/// lists nothing.
fn list(dir: &Path) -> Vec<Entry> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| Entry {
            name: e.file_name(),
            is_dir: e.file_type().is_ok_and(|t| t.is_dir()),
        })
        .collect()
}

/// `dir` is the data directory under the rootfs, `wal_dir` where its pg_wal resolves to
/// and `spaces` its tablespaces (inside the host's root: an absolute link is the host's path).
pub(super) fn pg_cheap(
    dir: &Path,
    wal_dir: Option<PathBuf>,
    spaces: &[Tablespace],
    deadline: Instant,
) -> PgCheap {
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
    // Each tablespace's directory lists its version directories, which hold its temporary
    // files.
    let spaces: Vec<(PathBuf, Vec<OsString>)> = spaces
        .iter()
        .map(|t| {
            let names = std::fs::read_dir(&t.path)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            (t.path.clone(), names)
        })
        .collect();
    let roots = layout::postgres_cheap(dir, &spaces);
    out.components = Walk::new(roots, Vec::new()).run_capped(CHEAP_MAX_ENTRIES, deadline);
    out
}

/// The cheap look at a MySQL data directory: its logs (by their index files, `binlog_index`
/// too) and InnoDB's files.
pub(super) fn mysql_cheap(dir: &Path, rootfs: &Path, binlog_index: Option<&Path>) -> Cheap {
    Cheap::Mysql(
        mysql::read_cheap(dir, rootfs, binlog_index).map_err(|e| format!("{}: {e}", dir.display())),
    )
}

/// Figures of a finished sizing.
#[derive(Debug, Clone)]
pub(super) struct Sized {
    pub(super) components: Vec<(Component, Total)>,
    /// Each tablespace: oid, link target as the host sees it, total.
    pub(super) tablespaces: Vec<(String, PathBuf, Total)>,
    /// The target's parts outside the data directory (PostgreSQL's `log_directory`, MySQL's
    /// error and slow logs elsewhere), by their index in `Target::elsewhere`: labelled with
    /// the mount holding them rather than the data directory's.
    pub(super) elsewhere: Vec<(usize, Total)>,
    pub(super) completed: SystemTime,
}

impl Sized {
    /// A finished walk's totals, by what each part is.
    fn of(parts: Vec<(Part, Total)>) -> Sized {
        let mut s = Sized {
            components: Vec::new(),
            tablespaces: Vec::new(),
            elsewhere: Vec::new(),
            completed: SystemTime::now(),
        };
        for (part, t) in parts {
            match part {
                Part::Component(c) => s.components.push((c, t)),
                Part::Tablespace { oid, location } => s.tablespaces.push((oid, location, t)),
                Part::Elsewhere(i) => s.elsewhere.push((i, t)),
            }
        }
        s
    }
}

/// A sizing in progress and the last finished one, shared with the thread taking a pass.
#[derive(Debug, Default)]
pub(super) struct SizeSlot {
    pub(super) walk: Option<Walk<Part>>,
    pub(super) done: Option<Sized>,
}

/// Where a target's files are and how they are laid out.
pub(super) struct Layout<'a> {
    pub(super) dir: &'a Path,
    pub(super) kind: Kind,
    pub(super) roots: &'a Roots,
    /// The data directory as the host sees it.
    pub(super) host: &'a Path,
    pub(super) binlog_index: Option<&'a Path>,
    /// PostgreSQL's log directory, under the rootfs.
    pub(super) log_dir: Option<&'a Path>,
    /// The target's parts outside its directory, under the rootfs.
    pub(super) elsewhere: &'a [PathBuf],
}

/// What a sizing of `l` walks, from the listings taken now.
fn size_plan(l: &Layout) -> SizePlan {
    let plan = match l.kind {
        Kind::Postgres => {
            let spaces = crate::databases::tablespaces(l.roots, l.host, l.dir);
            layout::postgres_sizing(l.dir, &list(l.dir), l.log_dir, &spaces)
        }
        Kind::Mysql => {
            let counted = mysql::read_cheap(l.dir, &l.roots.rootfs, l.binlog_index)
                .map(|c| c.counted)
                .unwrap_or_default();
            layout::mysql_sizing(l.dir, &list(l.dir), &counted)
        }
        Kind::Watch => layout::tree_sizing(l.dir),
    };
    plan.with_elsewhere(l.elsewhere)
}

/// Takes one sizing pass: starts a sizing when none is in progress, finishes it when its last
/// entry is taken.
pub(super) fn size_pass(
    slot: &Mutex<SizeSlot>,
    layout: &Layout,
    max_entries: u64,
    deadline: Instant,
) {
    let mut s = lock(slot);
    if s.walk.is_none() {
        let plan = size_plan(layout);
        s.walk = Some(Walk::new(plan.roots, plan.skip).declare(&plan.declared));
    }
    let Some(walk) = s.walk.as_mut() else {
        return;
    };
    if walk.step(max_entries, deadline) == Progress::Done
        && let Some(walk) = s.walk.take()
    {
        s.done = Some(Sized::of(walk.components));
    }
}
