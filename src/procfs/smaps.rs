//! The process's memory mappings as `<proc>/self/smaps` lists them: a pure parser and a thin
//! reader under a given root. Deciding what to do with a mapping is not done here.

use super::selfstat::ProcError;
use std::path::Path;

/// One mapping: its address range, permissions, what backs it and the figures that matter for
/// deciding whether its pages may be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
    /// `s` (shared) rather than `p` (private, copy-on-write).
    pub shared: bool,
    /// The file's path, or a pseudo name (`[heap]`, `[stack]`, `[vdso]`); empty when anonymous.
    pub name: String,
    /// Resident pages, in KiB (`Rss:`).
    pub rss_kib: u64,
    /// Pages of the mapping that are anonymous, in KiB (`Anonymous:`): in a private file
    /// mapping, the pages that were written (copied on write) and exist nowhere else.
    pub anonymous_kib: u64,
    /// The two-letter flags of `VmFlags:` (`rd ex mr mw me`, `lo` for locked, `io`, `pf`).
    pub vm_flags: Vec<String>,
}

impl Mapping {
    /// A mapping of a file (not anonymous memory, not a pseudo mapping like `[vdso]`).
    pub fn is_file(&self) -> bool {
        self.name.starts_with('/')
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

/// A line of an smaps file that does not parse: its number (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct SmapsError {
    pub line: usize,
    pub problem: SmapsProblem,
}

/// What is wrong with one line of an smaps file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmapsProblem {
    #[error("{key:?} before any mapping's header line")]
    KeyBeforeHeader { key: String },
    /// `key` is the field (`Rss`, `Anonymous`).
    #[error("{key} {value:?} is not a size in kB")]
    NotKib { key: &'static str, value: String },
    #[error("empty header line")]
    EmptyHeader,
    #[error("no permissions after the address range")]
    NoPermissions,
    /// The field of the header missing (`offset`, `device`, `inode`).
    #[error("no {0} field")]
    MissingField(&'static str),
    #[error("{0:?} is not an address range start-end")]
    NotRange(String),
    #[error("{0:?} is not a permission field like r-xp")]
    NotPermissions(String),
}

/// Parses `/proc/<pid>/smaps`: a header line per mapping
/// (`start-end perms offset dev inode [name]`) followed by `Key: value [kB]` lines. The error
/// names the line (1-based) and what is wrong with it.
pub fn parse_smaps(text: &str) -> Result<Vec<Mapping>, SmapsError> {
    let mut out: Vec<Mapping> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |problem| SmapsError {
            line: i + 1,
            problem,
        };
        if line.trim().is_empty() {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some(key) = first.strip_suffix(':') {
            let Some(current) = out.last_mut() else {
                return Err(at(SmapsProblem::KeyBeforeHeader {
                    key: key.to_string(),
                }));
            };
            let rest = line[first.len()..].trim();
            match key {
                "Rss" => current.rss_kib = kib("Rss", rest).map_err(at)?,
                "Anonymous" => current.anonymous_kib = kib("Anonymous", rest).map_err(at)?,
                "VmFlags" => current.vm_flags = rest.split_whitespace().map(String::from).collect(),
                _ => {}
            }
            continue;
        }
        out.push(parse_header(line).map_err(at)?);
    }
    Ok(out)
}

/// `55fd19d37000-55fd1a178000 r-xp 0018e000 fe:00 1234 /usr/bin/ssdwatch`; the name may hold
/// spaces (and ` (deleted)` once the file is replaced).
fn parse_header(line: &str) -> Result<Mapping, SmapsProblem> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field().ok_or(SmapsProblem::EmptyHeader)?;
    let perms = field().ok_or(SmapsProblem::NoPermissions)?;
    for what in ["offset", "device", "inode"] {
        field().ok_or(SmapsProblem::MissingField(what))?;
    }
    let (start, end) = range
        .split_once('-')
        .and_then(|(a, b)| {
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .filter(|(a, b)| a < b)
        .ok_or_else(|| SmapsProblem::NotRange(range.to_string()))?;
    let p = perms.as_bytes();
    if p.len() != 4 {
        return Err(SmapsProblem::NotPermissions(perms.to_string()));
    }
    Ok(Mapping {
        start,
        end,
        readable: p[0] == b'r',
        writable: p[1] == b'w',
        executable: p[2] == b'x',
        shared: p[3] == b's',
        name: rest.trim().to_string(),
        rss_kib: 0,
        anonymous_kib: 0,
        vm_flags: Vec::new(),
    })
}

/// `1234 kB` → 1234; `key` names the field in the error.
fn kib(key: &'static str, value: &str) -> Result<u64, SmapsProblem> {
    value
        .strip_suffix("kB")
        .map(str::trim)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| SmapsProblem::NotKib {
            key,
            value: value.to_string(),
        })
}

/// Reads and parses `<proc_root>/self/smaps`.
pub fn read_self_smaps(proc_root: &Path) -> Result<Vec<Mapping>, ProcError> {
    let path = proc_root.join("self/smaps");
    let err = |problem: String| ProcError {
        path: path.display().to_string(),
        problem,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
    parse_smaps(&text).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three mappings as a 6.x kernel writes them for the daemon (fields trimmed to the ones
    /// read, plus two that are skipped).
    const SMAPS: &str = "\
55fd19d37000-55fd1a178000 r-xp 0018e000 fe:00 1234                       /usr/bin/ssdwatch
Size:               4356 kB
Rss:                3972 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
55fd1a178000-55fd1a19a000 r--p 005cf000 fe:00 1234                       /usr/bin/ssdwatch
Rss:                 136 kB
Anonymous:           136 kB
VmFlags: rd mr mw me ac
7feffa63f000-7feffa647000 rw-s 00000000 fe:00 99                         /var/lib/ssd watch/history.db-shm
Rss:                  32 kB
Anonymous:             0 kB
VmFlags: rd wr sh mr mw me ms
7feff4000000-7feff43d9000 rw-p 00000000 00:00 0 
Rss:                1264 kB
Anonymous:          1264 kB
Locked:                0 kB
VmFlags: rd wr mr mw me nr
";

    #[test]
    fn each_mapping_has_its_range_permissions_name_and_figures() {
        let m = parse_smaps(SMAPS).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[0],
            Mapping {
                start: 0x55fd19d37000,
                end: 0x55fd1a178000,
                readable: true,
                writable: false,
                executable: true,
                shared: false,
                name: "/usr/bin/ssdwatch".into(),
                rss_kib: 3972,
                anonymous_kib: 0,
                vm_flags: ["rd", "ex", "mr", "mw", "me"].map(String::from).to_vec(),
            }
        );
        assert!(m[0].is_file() && m[0].has_flag("ex") && !m[0].has_flag("lo"));
        assert_eq!((m[1].rss_kib, m[1].anonymous_kib), (136, 136));
        assert_eq!(m[2].name, "/var/lib/ssd watch/history.db-shm");
        assert!(m[2].shared && m[2].writable);
        assert_eq!(m[3].name, "");
        assert!(!m[3].is_file());
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        for (text, want) in [
            ("Rss: 4 kB\n", "line 1: \"Rss\" before any mapping"),
            (
                "zz-10 r-xp 0 fe:00 1 /x\n",
                "line 1: \"zz-10\" is not an address range",
            ),
            (
                "20-10 r-xp 0 fe:00 1 /x\n",
                "line 1: \"20-10\" is not an address range",
            ),
            (
                "10-20 r-x 0 fe:00 1 /x\n",
                "line 1: \"r-x\" is not a permission field",
            ),
            ("10-20 r-xp 0 fe:00\n", "line 1: no inode field"),
            (
                "10-20 r-xp 0 fe:00 1 /x\nRss: many kB\n",
                "line 2: Rss \"many kB\"",
            ),
            (
                "10-20 r-xp 0 fe:00 1 /x\nAnonymous: 4 MB\n",
                "line 2: Anonymous \"4 MB\"",
            ),
        ] {
            let e = parse_smaps(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn this_process_smaps_lists_its_own_code() {
        let maps = read_self_smaps(Path::new("/proc")).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        assert!(
            maps.iter()
                .any(|m| m.executable && m.name == exe && m.rss_kib > 0 && !m.vm_flags.is_empty()),
            "no resident code mapping of {exe}"
        );
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let e = read_self_smaps(Path::new("/nonexistent-proc")).unwrap_err();
        assert_eq!(e.path, "/nonexistent-proc/self/smaps");
    }
}
