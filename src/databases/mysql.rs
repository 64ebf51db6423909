//! MySQL/MariaDB's data directory read without a login: the binary and relay logs (from their
//! `.index` files, which name every log the server still keeps, wherever it is), and InnoDB's
//! system, undo, redo and temporary files by their names. The schemas and everything else are
//! left to the sizing walk. Classification is pure; the readers only list and stat.

use super::component::Component;
use super::postgres::allocated;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Whether a component of a MySQL data directory is read every sample (few, named files);
/// the rest are sized by the walk.
pub fn is_cheap(c: Component) -> bool {
    !matches!(c, Component::Schemas | Component::Other)
}

/// Classifies a top-level entry by name: `ibdata1` (system tablespace), `undo_001` (MySQL 8)
/// or `undo001` (MariaDB), `ib_logfile0` or `#innodb_redo/` (8.0.30 on), `ibtmp1` or
/// `#innodb_temp/`. A directory is a schema unless InnoDB's; any other file is other.
pub fn classify(name: &str, is_dir: bool) -> Component {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if is_dir {
        return match name {
            "#innodb_redo" => Component::InnodbRedo,
            "#innodb_temp" => Component::InnodbTemp,
            n if n.starts_with('#') || n.starts_with('.') => Component::Other,
            _ => Component::Schemas,
        };
    }
    if name.strip_prefix("ibdata").is_some_and(digits) {
        Component::InnodbSystem
    } else if name
        .strip_prefix("undo_")
        .or_else(|| name.strip_prefix("undo"))
        .is_some_and(digits)
    {
        Component::InnodbUndo
    } else if name.strip_prefix("ib_logfile").is_some_and(digits) {
        Component::InnodbRedo
    } else if name.strip_prefix("ibtmp").is_some_and(digits) {
        Component::InnodbTemp
    } else {
        Component::Other
    }
}

/// Whether an index file is a relay log's (`host-relay-bin.index`, `relay-log.index`,
/// `mysqld-relay-bin.index`) rather than the binary log's.
pub fn is_relay_index(name: &str) -> bool {
    name.ends_with(".index") && name.contains("relay")
}

/// The log files an index names, one a line (`./binlog.000042`, `/var/log/mysql/mysql-bin.000042`).
pub fn parse_index(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// One kind of log, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Logs {
    pub files: u64,
    pub bytes: u64,
    /// Modification time of the oldest log kept: its last write, so its age is how long the
    /// server has kept it since it was closed.
    pub oldest: Option<SystemTime>,
    /// The first log found (under the rootfs): where the logs are kept.
    pub first: Option<PathBuf>,
}

/// What the cheap look at a MySQL data directory found.
#[derive(Debug, Default)]
pub struct Cheap {
    pub binlog: Logs,
    pub relay_log: Logs,
    /// InnoDB's files by part (bytes).
    pub innodb: Vec<(Component, u64)>,
    /// Every file counted here (the logs, their index files, InnoDB's), for the walk to skip.
    pub counted: HashSet<PathBuf>,
    pub errors: Vec<String>,
}

/// Index files bigger than this are not read (a binlog index of 1 MiB names ~40,000 logs).
const MAX_INDEX_BYTES: u64 = 1 << 20;
/// Entries sized under `#innodb_redo` or `#innodb_temp` (a few dozen in practice).
const MAX_INNODB_DIR_ENTRIES: usize = 10_000;

/// Lists the data directory's top level once: the index files' logs (paths under `rootfs` when
/// absolute, else under the data directory) and InnoDB's files. `binlog_index` is the index
/// the server was told of (under the rootfs), read too when it lies elsewhere.
pub fn read_cheap(
    dir: &Path,
    rootfs: &Path,
    binlog_index: Option<&Path>,
) -> Result<Cheap, std::io::Error> {
    let mut out = Cheap::default();
    let mut totals: std::collections::BTreeMap<Component, u64> = Default::default();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(m) = e.metadata() else { continue };
        if m.is_file() && name.ends_with(".index") {
            out.counted.insert(e.path());
            let logs = if is_relay_index(&name) {
                &mut out.relay_log
            } else {
                &mut out.binlog
            };
            read_logs(
                dir,
                rootfs,
                &e.path(),
                logs,
                &mut out.counted,
                &mut out.errors,
            );
            continue;
        }
        let part = classify(&name, m.is_dir());
        if !is_cheap(part) {
            continue;
        }
        let mut bytes = allocated(&m);
        if m.is_dir()
            && let Ok(rd) = std::fs::read_dir(e.path())
        {
            for f in rd.flatten().take(MAX_INNODB_DIR_ENTRIES) {
                if let Ok(fm) = f.metadata() {
                    bytes = bytes.saturating_add(allocated(&fm));
                }
            }
        }
        out.counted.insert(e.path());
        *totals.entry(part).or_default() += bytes;
    }
    if let Some(index) = binlog_index
        && !out.counted.contains(index)
    {
        match std::fs::metadata(index) {
            Ok(_) => {
                out.counted.insert(index.to_path_buf());
                read_logs(
                    dir,
                    rootfs,
                    index,
                    &mut out.binlog,
                    &mut out.counted,
                    &mut out.errors,
                );
            }
            // Binary logging configured but no log written yet.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.errors.push(format!("{}: {e}", index.display())),
        }
    }
    out.innodb = totals.into_iter().collect();
    Ok(out)
}

fn read_logs(
    dir: &Path,
    rootfs: &Path,
    index: &Path,
    logs: &mut Logs,
    counted: &mut HashSet<PathBuf>,
    errors: &mut Vec<String>,
) {
    let text = match crate::small_file::read_small_text(
        index,
        MAX_INDEX_BYTES,
        crate::small_file::Links::Follow,
    ) {
        Ok(t) => t,
        Err(e) => {
            errors.push(format!("{}: {e}; not read", index.display()));
            return;
        }
    };
    for name in parse_index(&text) {
        let p = Path::new(&name);
        // An absolute name is the host's: resolved inside its root, as the server opens it.
        let path = if p.is_absolute() {
            crate::roots::canonical(rootfs, p).map(|(_, inside)| inside)
        } else {
            Ok(dir.join(p))
        };
        match path.and_then(|path| std::fs::symlink_metadata(&path).map(|m| (path, m))) {
            Ok((path, m)) => {
                logs.files += 1;
                logs.bytes = logs.bytes.saturating_add(allocated(&m));
                if let Ok(t) = m.modified() {
                    logs.oldest = Some(logs.oldest.map_or(t, |o| o.min(t)));
                }
                if logs.first.is_none() {
                    logs.first = Some(path.clone());
                }
                counted.insert(path);
            }
            // Purged between the index's write and our look.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("{} (in {}): {e}", name, index.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_entries_are_told_apart_by_name() {
        for (name, dir, part) in [
            ("ibdata1", false, Component::InnodbSystem),
            ("ibdata12", false, Component::InnodbSystem),
            ("undo_001", false, Component::InnodbUndo),
            ("undo002", false, Component::InnodbUndo),
            ("ib_logfile0", false, Component::InnodbRedo),
            ("#innodb_redo", true, Component::InnodbRedo),
            ("ibtmp1", false, Component::InnodbTemp),
            ("#innodb_temp", true, Component::InnodbTemp),
            ("shop", true, Component::Schemas),
            ("mysql", true, Component::Schemas),
            ("#ib_16384_0.dblwr", false, Component::Other),
            ("aria_log.00000001", false, Component::Other),
            ("undo_log_notes.txt", false, Component::Other),
            ("ibdata", false, Component::Other),
            ("#sql-temp", true, Component::Other),
        ] {
            assert_eq!(classify(name, dir), part, "{name}");
        }
        assert!(is_relay_index("db1-relay-bin.index"));
        assert!(!is_relay_index("mysql-bin.index"));
        assert_eq!(
            parse_index("./binlog.000001\n./binlog.000002\n\n"),
            ["./binlog.000001", "./binlog.000002"]
        );
    }

    #[test]
    fn logs_are_found_through_their_index_inside_and_outside_the_data_directory() {
        let t = tempfile::tempdir().unwrap();
        let rootfs = t.path();
        let dir = rootfs.join("var/lib/mysql");
        let logdir = rootfs.join("var/log/mysql");
        std::fs::create_dir_all(dir.join("shop")).unwrap();
        std::fs::create_dir_all(dir.join("#innodb_redo")).unwrap();
        std::fs::create_dir_all(&logdir).unwrap();
        std::fs::write(dir.join("ibdata1"), vec![0u8; 12 << 10]).unwrap();
        std::fs::write(dir.join("undo_001"), vec![0u8; 8 << 10]).unwrap();
        std::fs::write(dir.join("#innodb_redo/#ib_redo9"), vec![0u8; 16 << 10]).unwrap();
        std::fs::write(dir.join("binlog.000001"), vec![0u8; 4096]).unwrap();
        std::fs::write(dir.join("binlog.000002"), vec![0u8; 8192]).unwrap();
        std::fs::write(
            dir.join("binlog.index"),
            "./binlog.000001\n./binlog.000002\n./binlog.000000\n",
        )
        .unwrap();
        std::fs::write(logdir.join("relay.000007"), vec![0u8; 4096]).unwrap();
        std::fs::write(
            dir.join("db1-relay-bin.index"),
            "/var/log/mysql/relay.000007\n",
        )
        .unwrap();
        let c = read_cheap(&dir, rootfs, None).unwrap();
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        // binlog.000000 was purged after the index was written: not counted, no error.
        assert_eq!(c.binlog.files, 2);
        assert!(c.binlog.bytes >= 12288);
        assert!(c.binlog.oldest.is_some());
        assert_eq!(c.relay_log.files, 1);
        let part = |p: Component| c.innodb.iter().find(|(x, _)| *x == p).map(|(_, b)| *b);
        assert!(part(Component::InnodbSystem).unwrap() >= 12 << 10);
        assert!(part(Component::InnodbUndo).unwrap() >= 8 << 10);
        assert!(part(Component::InnodbRedo).unwrap() >= 16 << 10);
        assert_eq!(part(Component::InnodbTemp), None);
        assert!(c.counted.contains(&dir.join("binlog.000002")));
        assert!(!c.counted.contains(&dir.join("shop")));
        // Debian's log_bin = /var/log/mysql/mysql-bin.log: the index is there, not here.
        std::fs::remove_file(dir.join("binlog.index")).unwrap();
        std::fs::write(logdir.join("mysql-bin.000003"), vec![0u8; 4096]).unwrap();
        std::fs::write(
            logdir.join("mysql-bin.index"),
            "/var/log/mysql/mysql-bin.000003\n",
        )
        .unwrap();
        let c = read_cheap(&dir, rootfs, Some(&logdir.join("mysql-bin.index"))).unwrap();
        assert_eq!(c.binlog.files, 1);
        assert_eq!(c.binlog.first, Some(logdir.join("mysql-bin.000003")));
    }
}
