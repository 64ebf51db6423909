//! Which paths of a data directory are which component: PostgreSQL's and MySQL's layouts as
//! pure functions over a listing the caller took (entry names, tablespace links). No I/O here:
//! the collector lists the directories through its door and walks the roots given back.

use super::component::Component;
use super::mysql;
use super::walk::Root;
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// PostgreSQL's WAL directory, in the data directory (a link when `initdb -X` put it elsewhere).
pub const POSTGRES_WAL: &str = "pg_wal";
/// PostgreSQL's tablespace links, `<oid> -> location`.
pub const POSTGRES_TABLESPACES: &str = "pg_tblspc";
/// PostgreSQL's replication slots' directory.
const POSTGRES_SLOTS: &str = "pg_replslot";
/// The default tablespace's temporary files; each tablespace has its own under its version
/// directory (`<link>/PG_<version>_<catversion>/pgsql_tmp`).
const POSTGRES_TEMP: &str = "base/pgsql_tmp";
const PGSQL_TMP: &str = "pgsql_tmp";
/// The top-level entries a sizing pass leaves to the every-sample look (or to the tablespaces).
const POSTGRES_CHEAP: [&str; 3] = [POSTGRES_WAL, POSTGRES_SLOTS, POSTGRES_TABLESPACES];

/// A PostgreSQL tablespace: its oid, where its `pg_tblspc` link leads as the host sees it
/// (the `location` label) and that directory as the daemon opens it (under the rootfs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tablespace {
    pub oid: String,
    pub location: PathBuf,
    pub path: PathBuf,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub is_dir: bool,
}

impl Entry {
    pub fn new(name: impl Into<OsString>, is_dir: bool) -> Entry {
        Entry {
            name: name.into(),
            is_dir,
        }
    }

    fn lossy(&self) -> String {
        self.name.to_string_lossy().into_owned()
    }
}

/// What a root of a sizing pass is counted as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Component(Component),
    /// A PostgreSQL tablespace: its oid and where its `pg_tblspc` link points (as the host
    /// sees it), published as its own series.
    Tablespace {
        oid: String,
        location: PathBuf,
    },
    /// The target's part outside its data directory (a server log elsewhere), by its index
    /// among them: labelled with the mount holding it.
    Elsewhere(usize),
}

/// What a sizing pass walks: its roots, the paths it must not enter (sized by the cheap look)
/// and the parts that exist even with nothing under them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizePlan {
    pub roots: Vec<Root<Part>>,
    pub skip: Vec<PathBuf>,
    pub declared: Vec<Part>,
}

impl SizePlan {
    /// With the target's parts outside its directory (`elsewhere`, in their order) as roots.
    pub fn with_elsewhere(mut self, elsewhere: &[PathBuf]) -> SizePlan {
        self.roots
            .extend(elsewhere.iter().enumerate().map(|(i, p)| Root {
                component: Part::Elsewhere(i),
                path: p.clone(),
            }));
        self
    }
}

fn declared(components: &[Component]) -> Vec<Part> {
    components.iter().map(|c| Part::Component(*c)).collect()
}

/// Entries in name order, as a listing is sized (the order of the first series of each part).
fn sorted(top: &[Entry]) -> Vec<&Entry> {
    let mut v: Vec<&Entry> = top.iter().collect();
    v.sort_by_key(|e| e.lossy());
    v
}

/// A PostgreSQL data directory `dir` whose top level holds `top`: `base` and `global` are the
/// relations, `log`, `pg_log` and the top-level directory `log_dir` names (when inside `dir`)
/// the server log, each of `tablespaces` its own, every other entry but the
/// every-sample parts (pg_wal, pg_replslot, pg_tblspc) "other". Temporary files are skipped.
pub fn postgres_sizing(
    dir: &Path,
    top: &[Entry],
    log_dir: Option<&Path>,
    tablespaces: &[Tablespace],
) -> SizePlan {
    let log_top = log_dir
        .and_then(|l| l.strip_prefix(dir).ok())
        .and_then(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let mut roots = Vec::new();
    for e in sorted(top) {
        let name = e.lossy();
        let component = match name.as_str() {
            "base" | "global" => Component::Relations,
            n if POSTGRES_CHEAP.contains(&n) => continue,
            "log" | "pg_log" => Component::Log,
            n if log_top.as_deref() == Some(n) => Component::Log,
            _ => Component::Other,
        };
        roots.push(Root {
            component: Part::Component(component),
            path: dir.join(&e.name),
        });
    }
    for t in tablespaces {
        roots.push(Root {
            component: Part::Tablespace {
                oid: t.oid.clone(),
                location: t.location.clone(),
            },
            // The directory the link leads to, resolved by the caller inside the host's root.
            path: t.path.clone(),
        });
    }
    SizePlan {
        roots,
        skip: vec![dir.join(POSTGRES_TEMP)],
        declared: declared(&[Component::Relations, Component::Log, Component::Other]),
    }
}

/// The every-sample part of a PostgreSQL data directory `dir` (pg_wal aside, read on its own):
/// its temporary files, in `base` and in each tablespace's version directories (`tablespaces`:
/// each tablespace's directory, as the caller resolved its link, with the names in it), and
/// the replication slots' directory.
pub fn postgres_cheap(
    dir: &Path,
    tablespaces: &[(PathBuf, Vec<OsString>)],
) -> Vec<Root<Component>> {
    let mut roots = vec![Root {
        component: Component::Temp,
        path: dir.join(POSTGRES_TEMP),
    }];
    for (space, names) in tablespaces {
        for n in names {
            if n.to_string_lossy().starts_with("PG_") {
                roots.push(Root {
                    component: Component::Temp,
                    path: space.join(n).join(PGSQL_TMP),
                });
            }
        }
    }
    roots.push(Root {
        component: Component::ReplicationSlots,
        path: dir.join(POSTGRES_SLOTS),
    });
    roots
}

/// A MySQL data directory `dir` whose top level holds `top`: each schema's directory is
/// `schemas`, every other entry not already counted by the every-sample look (`counted`: the
/// logs, their indexes, InnoDB's files) `other`.
pub fn mysql_sizing(dir: &Path, top: &[Entry], counted: &HashSet<PathBuf>) -> SizePlan {
    let mut roots = Vec::new();
    for e in sorted(top) {
        let component = mysql::classify(&e.lossy(), e.is_dir);
        let path = dir.join(&e.name);
        if mysql::is_cheap(component) || counted.contains(&path) {
            continue;
        }
        roots.push(Root {
            component: Part::Component(component),
            path,
        });
    }
    SizePlan {
        roots,
        skip: Vec::new(),
        declared: declared(&[Component::Schemas, Component::Other]),
    }
}

/// A watched path: one tree, `all` of it.
pub fn tree_sizing(path: &Path) -> SizePlan {
    SizePlan {
        roots: vec![Root {
            component: Part::Component(Component::All),
            path: path.to_path_buf(),
        }],
        skip: Vec::new(),
        declared: declared(&[Component::All]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(plan: &SizePlan) -> Vec<(Part, String)> {
        plan.roots
            .iter()
            .map(|r| (r.component.clone(), r.path.to_string_lossy().into_owned()))
            .collect()
    }

    fn c(c: Component) -> Part {
        Part::Component(c)
    }

    #[test]
    fn a_postgres_directory_is_relations_log_other_and_its_tablespaces() {
        let dir = Path::new("/srv/pg");
        let top = [
            Entry::new("pg_xact", true),
            Entry::new("base", true),
            Entry::new("global", true),
            Entry::new("pg_wal", true),
            Entry::new("pg_replslot", true),
            Entry::new("pg_tblspc", true),
            Entry::new("logs", true),
            Entry::new("pg_log", true),
            Entry::new("PG_VERSION", false),
        ];
        let spaces = [Tablespace {
            oid: "16500".into(),
            location: "/data/ts".into(),
            path: "/host/data/ts".into(),
        }];
        let plan = postgres_sizing(dir, &top, Some(Path::new("/srv/pg/logs/2024")), &spaces);
        assert_eq!(
            parts(&plan),
            [
                (c(Component::Other), "/srv/pg/PG_VERSION".into()),
                (c(Component::Relations), "/srv/pg/base".into()),
                (c(Component::Relations), "/srv/pg/global".into()),
                (c(Component::Log), "/srv/pg/logs".into()),
                (c(Component::Log), "/srv/pg/pg_log".into()),
                (c(Component::Other), "/srv/pg/pg_xact".into()),
                (
                    Part::Tablespace {
                        oid: "16500".into(),
                        location: "/data/ts".into()
                    },
                    "/host/data/ts".into()
                ),
            ]
        );
        assert_eq!(plan.skip, [PathBuf::from("/srv/pg/base/pgsql_tmp")]);
        // A log directory elsewhere names no top-level entry: `logs` is "other" then.
        let plan = postgres_sizing(dir, &top[6..7], Some(Path::new("/var/log/pg")), &[]);
        assert_eq!(parts(&plan), [(c(Component::Other), "/srv/pg/logs".into())]);
        // A name that is not UTF-8 is walked by its own bytes (it is "other").
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"dump-caf\xe9".to_vec());
        let plan = postgres_sizing(dir, &[Entry::new(odd.clone(), false)], None, &[]);
        assert_eq!(plan.roots[0].path, dir.join(&odd));
        assert_eq!(plan.roots[0].component, c(Component::Other));
        let plan = postgres_sizing(dir, &top[6..7], Some(Path::new("/var/log/pg")), &[]);
        let plan = plan.with_elsewhere(&["/var/log/pg".into()]);
        assert_eq!(parts(&plan)[1], (Part::Elsewhere(0), "/var/log/pg".into()));
    }

    #[test]
    fn postgres_temporary_files_are_in_base_and_each_tablespaces_version_directory() {
        let roots = postgres_cheap(
            Path::new("/srv/pg"),
            &[(
                "/host/data/ts".into(),
                vec!["PG_15_202209061".into(), "lost+found".into()],
            )],
        );
        let got: Vec<(Component, String)> = roots
            .iter()
            .map(|r| (r.component, r.path.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            got,
            [
                (Component::Temp, "/srv/pg/base/pgsql_tmp".into()),
                (
                    Component::Temp,
                    "/host/data/ts/PG_15_202209061/pgsql_tmp".into()
                ),
                (Component::ReplicationSlots, "/srv/pg/pg_replslot".into()),
            ]
        );
    }

    #[test]
    fn a_mysql_directory_is_schemas_and_other_less_what_the_cheap_look_counted() {
        let dir = Path::new("/srv/mysql");
        let top = [
            Entry::new("shop", true),
            Entry::new("ibdata1", false),
            Entry::new("mysql-bin.000001", false),
            Entry::new("aria_log.00000001", false),
            Entry::new("#innodb_redo", true),
            Entry::new("mysql", true),
        ];
        let counted = HashSet::from([PathBuf::from("/srv/mysql/mysql-bin.000001")]);
        let plan = mysql_sizing(dir, &top, &counted);
        assert_eq!(
            parts(&plan),
            [
                (c(Component::Other), "/srv/mysql/aria_log.00000001".into()),
                (c(Component::Schemas), "/srv/mysql/mysql".into()),
                (c(Component::Schemas), "/srv/mysql/shop".into()),
            ]
        );
        assert_eq!(plan.declared, [c(Component::Schemas), c(Component::Other)]);
        assert_eq!(
            parts(&tree_sizing(Path::new("/srv/backups"))),
            [(c(Component::All), "/srv/backups".into())]
        );
    }
}
