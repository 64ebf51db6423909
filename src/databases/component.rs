//! The parts a database's files are counted as (the `component` label) and the kinds of
//! database they belong to (the `kind` label), with the words people read for each: the one
//! place those words are written. Pure: no I/O, no metrics.

use crate::procfs::processes::ServerKind;

/// What is watched: a server's data directory or a path named in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Postgres,
    Mysql,
    /// A watched path (`collectors.databases.watch`): one tree, sized as [`Component::All`].
    Watch,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Postgres, Kind::Mysql, Kind::Watch];

    /// The `kind` label of `ssdwatch_database_info`.
    pub fn label(self) -> &'static str {
        match self {
            // A server's kind is named where its process is recognised.
            Kind::Postgres => ServerKind::Postgres.as_str(),
            Kind::Mysql => ServerKind::Mysql.as_str(),
            Kind::Watch => "watch",
        }
    }

    /// The kind a `kind` label names; None for a label this version does not know.
    pub fn from_label(label: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.label() == label)
    }
}

impl From<ServerKind> for Kind {
    fn from(k: ServerKind) -> Kind {
        match k {
            ServerKind::Postgres => Kind::Postgres,
            ServerKind::Mysql => Kind::Mysql,
        }
    }
}

/// A part of a database's files, as `ssdwatch_database_component_bytes` labels it. The order
/// is the order MySQL's InnoDB files are published in (system, undo, redo, temporary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// PostgreSQL: every file under `pg_wal`.
    Wal,
    /// PostgreSQL: `pg_replslot`.
    ReplicationSlots,
    /// PostgreSQL: `base/pgsql_tmp` and each tablespace's `pgsql_tmp`.
    Temp,
    /// PostgreSQL: `base` (less `pgsql_tmp`) and `global`.
    Relations,
    /// MySQL: the binary logs its index names.
    Binlog,
    /// MySQL: the relay logs a relay index names.
    RelayLog,
    InnodbSystem,
    InnodbUndo,
    InnodbRedo,
    InnodbTemp,
    /// MySQL: each schema's directory.
    Schemas,
    /// The server's log files, inside the data directory or elsewhere.
    Log,
    /// Every other entry of the data directory.
    Other,
    /// A watched path, whole.
    All,
}

impl Component {
    pub const ALL: [Component; 14] = [
        Component::Wal,
        Component::ReplicationSlots,
        Component::Temp,
        Component::Relations,
        Component::Binlog,
        Component::RelayLog,
        Component::InnodbSystem,
        Component::InnodbUndo,
        Component::InnodbRedo,
        Component::InnodbTemp,
        Component::Schemas,
        Component::Log,
        Component::Other,
        Component::All,
    ];

    /// The `component` label.
    pub fn label(self) -> &'static str {
        match self {
            Component::Wal => "wal",
            Component::ReplicationSlots => "replication_slots",
            Component::Temp => "temp",
            Component::Relations => "relations",
            Component::Binlog => "binlog",
            Component::RelayLog => "relay_log",
            Component::InnodbSystem => "innodb_system",
            Component::InnodbUndo => "innodb_undo",
            Component::InnodbRedo => "innodb_redo",
            Component::InnodbTemp => "innodb_temp",
            Component::Schemas => "schemas",
            Component::Log => "log",
            Component::Other => "other",
            Component::All => "all",
        }
    }

    /// The component a `component` label names; None for a label this version does not know
    /// (a store or a Prometheus written by another version).
    pub fn from_label(label: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.label() == label)
    }

    /// What a reader calls it in a database of `kind` (`pg_wal (WAL)`, `binary logs`); None
    /// where that kind of database has no such component.
    pub fn title(self, kind: Kind) -> Option<&'static str> {
        use Component as C;
        Some(match (kind, self) {
            (Kind::Postgres, C::Wal) => "pg_wal (WAL)",
            (Kind::Postgres, C::ReplicationSlots) => "pg_replslot (replication slots)",
            (Kind::Postgres, C::Temp) => "temporary files (pgsql_tmp)",
            (Kind::Postgres, C::Relations) => "tables and indexes (base, global)",
            (Kind::Postgres | Kind::Mysql, C::Log) => "server logs",
            (Kind::Postgres, C::Other) => "other files and tablespaces",
            (Kind::Mysql, C::Binlog) => "binary logs",
            (Kind::Mysql, C::RelayLog) => "relay logs",
            (Kind::Mysql, C::InnodbSystem) => "InnoDB system tablespace",
            (Kind::Mysql, C::InnodbUndo) => "InnoDB undo logs",
            (Kind::Mysql, C::InnodbRedo) => "InnoDB redo log",
            (Kind::Mysql, C::InnodbTemp) => "InnoDB temporary tablespace",
            (Kind::Mysql, C::Schemas) => "schemas (tables and indexes)",
            (Kind::Mysql, C::Other) => "other files",
            (Kind::Watch, C::All) => "all of it",
            _ => return None,
        })
    }

    /// The components a database of `kind` has.
    pub fn of(kind: Kind) -> impl Iterator<Item = Component> {
        Component::ALL
            .into_iter()
            .filter(move |c| c.title(kind).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    #[test]
    fn every_label_names_one_component_and_every_component_belongs_to_a_kind() {
        for c in Component::ALL {
            assert_eq!(Component::from_label(c.label()), Some(c));
            assert!(Kind::ALL.iter().any(|k| c.title(*k).is_some()), "{c:?}");
        }
        for k in Kind::ALL {
            assert_eq!(Kind::from_label(k.label()), Some(k));
        }
        assert_eq!(Component::from_label("tablespace 16400"), None);
        assert_eq!(Kind::from_label("oracle"), None);
    }

    /// The `component` values a file writes in a selector (`component="wal"`, `component=~"wal|log"`,
    /// JSON-escaped quotes included).
    fn component_values(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (i, _) in text.match_indices("component") {
            let rest = text[i + "component".len()..].trim_start();
            let Some(rest) = ["=~", "!~", "!=", "="]
                .iter()
                .find_map(|op| rest.strip_prefix(op))
            else {
                continue;
            };
            let rest = rest.trim_start();
            let rest = rest.strip_prefix("\\\"").or_else(|| rest.strip_prefix('"'));
            let Some(rest) = rest else { continue };
            let end = rest.find(['"', '\\']).unwrap_or(rest.len());
            out.extend(
                rest[..end]
                    .split('|')
                    .filter(|v| !v.is_empty())
                    .map(str::to_string),
            );
        }
        out
    }

    fn files(dir: &str, ext: &[&str]) -> Vec<std::path::PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut out: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| ext.iter().any(|x| n.ends_with(x)))
            })
            .collect();
        out.sort();
        out
    }

    /// The rule files, their tests, the dashboards and the docs write the label values as
    /// strings (PromQL can't name a Rust enum): each must be one a Component publishes.
    #[test]
    fn every_component_the_rules_dashboards_and_docs_select_is_one_the_collector_publishes() {
        let known: BTreeSet<&str> = Component::ALL.iter().map(|c| c.label()).collect();
        let mut seen = 0;
        for f in [
            files("packaging/prometheus", &[".yml"]),
            files("packaging/prometheus/tests", &[".yml"]),
            files("dashboards", &[".json"]),
            files("docs", &[".md"]),
        ]
        .concat()
        {
            let text = std::fs::read_to_string(&f).unwrap();
            for v in component_values(&text) {
                seen += 1;
                assert!(
                    known.contains(v.as_str()),
                    "{}: component=\"{v}\" is no component's label",
                    f.display()
                );
            }
        }
        assert!(seen > 0, "the rules select components by label");
        assert_eq!(
            component_values(r#"x{component="wal"} y{component=~\"log|temp\"}"#),
            ["wal", "log", "temp"]
        );
    }

    /// docs/databases.md lists each kind's components in a table: the same set as here.
    #[test]
    fn the_docs_tables_list_each_kinds_components() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/databases.md"),
        )
        .unwrap();
        for (kind, heading) in [
            (Kind::Postgres, "## PostgreSQL components"),
            (Kind::Mysql, "## MySQL/MariaDB components"),
        ] {
            let section = text.split(heading).nth(1).unwrap();
            let table: BTreeSet<String> = section
                .lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .skip(2)
                .flat_map(|l| {
                    let first = l.split('|').nth(1).unwrap_or("");
                    first
                        .split('`')
                        .skip(1)
                        .step_by(2)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect();
            let ours: BTreeSet<String> =
                Component::of(kind).map(|c| c.label().to_string()).collect();
            assert_eq!(table, ours, "{heading}");
        }
        assert!(text.contains(&format!(
            "sized as one component `{}`",
            Component::All.label()
        )));
    }
}
