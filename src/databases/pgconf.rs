//! PostgreSQL's configuration files (`postgresql.conf`, `postgresql.auto.conf`), for the one
//! setting the collector needs from them: `log_directory`, which may put the server log on
//! another mount. `include`, `include_if_exists` and `include_dir` are followed to a bounded
//! depth. No login, no metrics here.

use super::ConfigFiles;
use std::path::{Path, PathBuf};

/// A configuration file bigger than this is not read (see [`ConfigFiles`] for the other limits).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One line of a configuration file that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// `name = value` (name lower-cased, value unquoted).
    Set(String, String),
    /// `include 'file'` or `include_if_exists 'file'` (a missing file is skipped either way:
    /// the server, running, found what it needed).
    Include(String),
    /// `include_dir 'dir'`.
    IncludeDir(String),
}

/// A value: a single-quoted string (`''` and `\'` stand for a quote) or a bare word.
fn value(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    if let Some(q) = rest.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = q.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    out.push('\'');
                }
                '\'' => return Some(out),
                '\\' => out.push(chars.next()?),
                c => out.push(c),
            }
        }
        // An unterminated string: the server refuses the file; so does this reader.
        None
    } else {
        let v: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '#')
            .collect();
        (!v.is_empty()).then_some(v)
    }
}

/// The settings and includes of one file's text, in order. A line that does not parse is
/// skipped (the server would refuse the file and not be running on it).
pub fn parse(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let end = line
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(line.len());
        let (name, rest) = line.split_at(end);
        let rest = rest.trim_start();
        let rest = rest.strip_prefix('=').unwrap_or(rest);
        let Some(v) = value(rest) else { continue };
        let name = name.to_ascii_lowercase();
        out.push(match name.as_str() {
            "include" | "include_if_exists" => Line::Include(v),
            "include_dir" => Line::IncludeDir(v),
            _ => Line::Set(name, v),
        });
    }
    out
}

/// `setting` as the server would read it from `files` (host paths, read under `rootfs`) in
/// order: the last setting wins, includes read where they stand. A relative include is
/// relative to the including file's directory.
pub fn read_setting(rootfs: &Path, files: &[PathBuf], setting: &str) -> Option<String> {
    let mut found = None;
    let mut conf = ConfigFiles::new(rootfs, MAX_FILE_BYTES);
    for f in files {
        read_one(&mut conf, f, setting, &mut found, 0);
    }
    found
}

fn read_one(
    conf: &mut ConfigFiles<'_>,
    file: &Path,
    setting: &str,
    found: &mut Option<String>,
    depth: usize,
) {
    let Some(text) = conf.read(file, depth) else {
        return;
    };
    let here = file.parent().unwrap_or(Path::new("/"));
    for line in parse(&text) {
        match line {
            Line::Set(name, v) if name == setting => *found = Some(v),
            Line::Set(..) => {}
            Line::Include(f) => read_one(conf, &here.join(f), setting, found, depth + 1),
            Line::IncludeDir(d) => {
                // The server reads the directory's `.conf` files in name order, hidden ones
                // skipped.
                for f in conf.dir(&here.join(d), |n| {
                    n.ends_with(".conf") && !n.starts_with('.')
                }) {
                    read_one(conf, &f, setting, found, depth + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_as_the_server_reads_them() {
        let l = parse(
            "# comment\n\
             log_directory = '/var/log/pg'\t# where\n\
             Log_Directory '/a b/it''s'\n\
             log_destination=stderr\n\
             port = 5433 # trailing\n\
             broken = 'unterminated\n\
             include_dir 'conf.d'\n\
             include_if_exists = 'extra.conf'\n",
        );
        assert_eq!(
            l,
            vec![
                Line::Set("log_directory".into(), "/var/log/pg".into()),
                Line::Set("log_directory".into(), "/a b/it's".into()),
                Line::Set("log_destination".into(), "stderr".into()),
                Line::Set("port".into(), "5433".into()),
                Line::IncludeDir("conf.d".into()),
                Line::Include("extra.conf".into()),
            ]
        );
    }

    #[test]
    fn the_last_setting_wins_across_includes_and_the_auto_file() {
        let t = tempfile::tempdir().unwrap();
        let etc = t.path().join("etc/postgresql/15/main");
        std::fs::create_dir_all(etc.join("conf.d")).unwrap();
        std::fs::write(
            etc.join("postgresql.conf"),
            "log_directory = 'log'\ninclude_dir = 'conf.d'\ninclude 'missing.conf'\n",
        )
        .unwrap();
        std::fs::write(etc.join("conf.d/10-a.conf"), "log_directory = '/a'\n").unwrap();
        std::fs::write(etc.join("conf.d/20-b.conf"), "log_directory = '/b'\n").unwrap();
        std::fs::write(etc.join("conf.d/30-c.txt"), "log_directory = '/c'\n").unwrap();
        let conf = PathBuf::from("/etc/postgresql/15/main/postgresql.conf");
        assert_eq!(
            read_setting(t.path(), std::slice::from_ref(&conf), "log_directory").as_deref(),
            Some("/b")
        );
        // postgresql.auto.conf (ALTER SYSTEM) is read after, and wins.
        let data = t.path().join("srv/pg");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(
            data.join("postgresql.auto.conf"),
            "log_directory = '/var/log/pg'\n",
        )
        .unwrap();
        let files = [conf, PathBuf::from("/srv/pg/postgresql.auto.conf")];
        assert_eq!(
            read_setting(t.path(), &files, "log_directory").as_deref(),
            Some("/var/log/pg")
        );
        assert_eq!(read_setting(t.path(), &files, "data_directory"), None);
    }

    #[test]
    fn a_file_including_itself_ends() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("pg.conf"),
            "include 'pg.conf'\nlog_directory = 'x'\n",
        )
        .unwrap();
        assert_eq!(
            read_setting(t.path(), &[PathBuf::from("/pg.conf")], "log_directory").as_deref(),
            Some("x")
        );
    }
}
