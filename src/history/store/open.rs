//! Opening the file: for the daemon (pragmas, an integrity check, the schema made or upgraded,
//! a damaged file moved aside) and read-only beside it for the tools.

use super::{FILE_NAME, Store, StoreError, classify, schema};
use crate::history::HistoryConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl Store {
    /// Opens (or creates) `<state_dir>/history.db`. A damaged file is [`StoreError::Corrupt`];
    /// a read-only or full directory is an error naming the file.
    pub fn open(state_dir: &Path, cfg: &HistoryConfig) -> Result<Store, StoreError> {
        let path = state_dir.join(FILE_NAME);
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::Io {
            path: path.clone(),
            op: "creating the state directory",
            source,
        })?;
        let conn = Connection::open(&path).map_err(|e| classify(&path, "opening", e))?;
        let mut store = Store {
            path,
            conn,
            retention_raw: cfg.retention_raw.as_secs() as i64,
            retention_hourly: cfg.retention_hourly.as_secs() as i64,
            raw_interval: cfg.raw_interval.as_secs().max(1) as i64,
            fs_ids: HashMap::new(),
            drive_ids: HashMap::new(),
            target_ids: HashMap::new(),
            last_raw: HashMap::new(),
            raw_days: Default::default(),
            identity: None,
            refused_older: 0,
        };
        store.prepare()?;
        store.identity = super::file_identity(&store.path);
        Ok(store)
    }

    /// Opens the store; when the file is damaged, moves it aside as
    /// `history.db.corrupt-<unix time>` (its WAL alongside) and starts a new one.
    /// Returns where the damaged file went, for the daemon to log.
    pub fn open_or_recover(
        state_dir: &Path,
        cfg: &HistoryConfig,
        now: i64,
    ) -> Result<(Store, Option<PathBuf>), StoreError> {
        match Store::open(state_dir, cfg) {
            Err(e) if e.is_corrupt() => {
                let path = state_dir.join(FILE_NAME);
                let aside = state_dir.join(format!("{FILE_NAME}.corrupt-{now}"));
                let io = |op, source| StoreError::Io {
                    path: path.clone(),
                    op,
                    source,
                };
                std::fs::rename(&path, &aside)
                    .map_err(|s| io("moving the damaged file aside", s))?;
                let wal = state_dir.join(format!("{FILE_NAME}-wal"));
                if wal.exists() {
                    let to = state_dir.join(format!("{FILE_NAME}.corrupt-{now}-wal"));
                    std::fs::rename(&wal, to).map_err(|s| io("moving the damaged WAL aside", s))?;
                }
                let shm = state_dir.join(format!("{FILE_NAME}-shm"));
                if shm.exists() {
                    std::fs::remove_file(&shm).map_err(|s| io("removing the old shm file", s))?;
                }
                Ok((Store::open(state_dir, cfg)?, Some(aside)))
            }
            other => other.map(|s| (s, None)),
        }
    }

    /// Opens an existing store file for reading only, beside a daemon that writes it (WAL lets
    /// one writer and readers work at once): no pragma is changed, no table created, nothing
    /// checked beyond the schema version. A missing file or one without tables yet is
    /// [`StoreError::NotCreated`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let not_created = || StoreError::NotCreated {
            path: path.to_path_buf(),
        };
        if !path.exists() {
            return Err(not_created());
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, "opening read-only", e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| classify(path, "setting busy timeout", e))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| classify(path, "reading the schema version", e))?;
        schema::readable(path, version)?;
        let cfg = HistoryConfig::default();
        Ok(Store {
            path: path.to_path_buf(),
            conn,
            retention_raw: cfg.retention_raw.as_secs() as i64,
            retention_hourly: cfg.retention_hourly.as_secs() as i64,
            raw_interval: cfg.raw_interval.as_secs() as i64,
            fs_ids: HashMap::new(),
            drive_ids: HashMap::new(),
            target_ids: HashMap::new(),
            last_raw: HashMap::new(),
            raw_days: Default::default(),
            identity: None,
            refused_older: 0,
        })
    }

    /// Pragmas, an integrity check and the schema.
    fn prepare(&mut self) -> Result<(), StoreError> {
        self.set_pragmas()?;
        self.check_integrity()?;
        self.make_or_upgrade_schema()
    }

    /// The busy timeout, WAL mode, `synchronous` and the page cache. The first read of the
    /// header is here: a file of garbage fails in this step.
    fn set_pragmas(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let path = &path;
        let e = |op| move |err| classify(path, op, err);
        // First, so that another process opening the file at the same moment (the daemon and
        // a tool) is waited for rather than failing with "database is locked".
        self.conn
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(e("setting busy timeout"))?;
        // The first read of the header: a file of garbage fails here.
        // Switching a new file to WAL takes an exclusive lock without calling the busy
        // handler: a second opener racing the first is told "locked" and tries again.
        let mut tries = 0;
        let mode: String = loop {
            match self
                .conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            {
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == ErrorCode::DatabaseBusy && tries < 50 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                other => break other.map_err(e("setting WAL mode"))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Sqlite {
                path: self.path.clone(),
                op: "setting WAL mode",
                source: rusqlite::Error::InvalidParameterName(format!("journal_mode is {mode}")),
            });
        }
        // WAL with NORMAL loses at most the last transactions on power loss, never on a crash
        // of the process, and never corrupts the file.
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(e("setting synchronous"))?;
        // A small page cache (512 KiB, SQLite's default is 2 MiB): the daemon writes once a
        // minute and reads for a forecast once an hour; its memory matters more than the I/O.
        self.conn
            .pragma_update(None, "cache_size", -512)
            .map_err(e("setting the cache size"))
    }

    /// A truncated file passes the header read; quick_check walks every page (~0.1 s for
    /// 50 MiB, once at start).
    fn check_integrity(&self) -> Result<(), StoreError> {
        let check: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(self.err("checking integrity"))?;
        if check != "ok" {
            return Err(StoreError::Corrupt {
                path: self.path.clone(),
                detail: check,
            });
        }
        Ok(())
    }
}
