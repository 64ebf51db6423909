//! The module layering docs/design.md states, checked on the source: parsers and
//! readers know nothing of collectors, the config or the command line; engines (probe) know no
//! scheduler or config; only the command line and the daemon's wiring read the whole config.
//! Modules whose doc calls them pure (parsers, layouts, models, encoders) do no I/O of their own.
//! The rules name today's modules: a module of src/ the rules do not know fails the test, so a
//! new one is placed on purpose. (File cycles are a separate check; this one is about direction.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module of a source file: src/probe/run.rs → "probe", src/lib.rs → "lib".
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Which top-level modules each module's code (tests excluded) refers to through `crate::`.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in all {
        let from = module_of(&src, &f);
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may reach anywhere; the layering is about the code they test.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let targets = out.entry(from.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `crate::Roots` and other items of lib.rs are the root's.
            let to = if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                "lib".to_string()
            } else {
                name
            };
            if to != from && !to.is_empty() {
                targets.insert(to);
            }
        }
    }
    out
}

/// Top-level modules of src/ (files and directories), as `module_of` names them.
fn modules() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| module_of(&src, &p))
        .collect()
}

/// Modules that decide and wire: they may name anything below them. Known here so that every
/// module of src/ is placed by some rule or by this list.
const WIRING: &[&str] = &["lib", "main", "cli", "daemon", "web", "testing"];

/// Pure modules: parsers and readers over a root path, models, encoders, leaf helpers.
const LEAVES: &[&str] = &[
    "sysfs",
    // btrfs' sysfs reader, its one ioctl and its two counter parsers: below every collector.
    "btrfs",
    "procfs",
    "databases",
    "layers",
    "statfs",
    "smart",
    "metrics",
    "render",
    "validate",
    "fault",
    "statefile",
    "catalogue",
    "label",
    "listen",
    "logging",
    "time",
    "yaml_guard",
    "yaml_line",
    "size",
    "gzip",
    "small_file",
    "roots",
    "process",
    "memory",
    "door",
    "exe",
];

/// What the leaves never name: the layers above them.
const ABOVE_LEAVES: &[&str] = &[
    "collector",
    "registry",
    "config",
    "cli",
    "daemon",
    "web",
    "probe",
    "snapshot",
    "history",
    "report",
    "backtest",
    "query",
];

/// What engines and the privilege split never name.
const UPPER: &[&str] = &[
    "collector",
    "registry",
    "config",
    "cli",
    "daemon",
    "web",
    "history",
    "report",
    "backtest",
];

/// Edges that break a rule today, each with why it stands; a candidate for moving the shared
/// piece down rather than a licence for more.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "privileged",
        "collector",
        "the helper refuses devices with the same filter (collector::device_filter) the SMART collector applies",
    ),
    (
        "query",
        "web",
        "the Prometheus client reads its PEM files with the web layer's TLS helpers (web::tls)",
    ),
];

#[test]
fn parsers_readers_and_engines_do_not_reach_up_into_collectors_config_or_the_command_line() {
    let edges = edges();
    // (modules, modules they must never name)
    let rules: &[(&[&str], &[&str])] = &[
        (LEAVES, ABOVE_LEAVES),
        (&["probe"], UPPER),
        // The capability split holds privileges: it names no collector, config or web code.
        (&["privsep", "privileged"], UPPER),
        (&["snapshot", "shared", "space", "notify"], UPPER),
        (
            &["collector"],
            &[
                "registry", "config", "cli", "daemon", "web", "report", "backtest",
            ],
        ),
        (&["registry"], &["config", "cli", "daemon", "web"]),
        (&["config"], &["cli", "daemon", "web", "collector"]),
        // The store and its readers and writers (the report, the backtest, the Prometheus
        // client, the import from it) run without the daemon: none names the web layer, the daemon or the command line.
        (
            &["history", "report", "backtest", "query", "import"],
            &["cli", "daemon", "web", "registry"],
        ),
        (&["web", "daemon"], &["cli"]),
        // The store is below its readers: the history (its export included) names none of
        // them.
        (&["history"], &["report", "backtest", "query", "import"]),
    ];
    let placed: BTreeSet<&str> = rules
        .iter()
        .flat_map(|(m, _)| m.iter().copied())
        .chain(WIRING.iter().copied())
        .collect();
    let unplaced: Vec<String> = modules()
        .into_iter()
        .filter(|m| !placed.contains(m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules of src/ no layering rule places (add them to a rule or to WIRING): {unplaced:?}"
    );
    let gone: Vec<&&str> = placed.iter().filter(|m| !modules().contains(**m)).collect();
    assert!(
        gone.is_empty(),
        "the rules name modules src/ no longer has: {gone:?}"
    );
    let mut broken = Vec::new();
    for (modules, forbidden) in rules {
        for m in *modules {
            for to in edges.get(*m).into_iter().flatten() {
                if forbidden.contains(&to.as_str())
                    && !EXCEPTIONS.iter().any(|(f, t, _)| f == m && t == to)
                {
                    broken.push(format!("{m} → {to}"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "layering broken: {broken:?}\nall edges: {edges:#?}"
    );
    // The check sees what it should: the known modules are there and have edges.
    assert!(edges["collector"].contains("sysfs"), "{edges:#?}");
    assert!(edges["cli"].contains("config"), "{edges:#?}");
}

/// Paths under src/ (a directory or a file) whose doc says they are pure: parsers of text a
/// caller read, layouts over a listing it took, models and encoders. The I/O belongs to their
/// callers (readers, collectors), which the doors and deadlines govern.
const PURE: &[&str] = &[
    "layers",
    "btrfs/error_stats.rs",
    "btrfs/device_stats.rs",
    "smart",
    "databases/layout.rs",
    "databases/component.rs",
    "databases/mycnf.rs",
    "databases/pgconf.rs",
    "render.rs",
    "metrics.rs",
    "catalogue.rs",
    "label.rs",
    "space.rs",
    "validate.rs",
    "yaml_line.rs",
    "size.rs",
    "backtest/trace.rs",
    "report/text.rs",
    "report/view.rs",
    "report/html.rs",
    "report/svg.rs",
];

/// The I/O a file's code (tests excluded) names: `std::fs`, `std::process`, `std::net` and
/// tokio's, written out or inside a `use std::{…}` group.
fn io_named(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for root in ["std", "tokio"] {
        for module in ["fs", "process", "net"] {
            let path = format!("{root}::{module}");
            if code.match_indices(&path).any(|(i, _)| {
                !code[i + path.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            }) {
                out.push(path.clone());
            }
        }
        let group = format!("{root}::{{");
        for (i, _) in code.match_indices(&group) {
            let inner = &code[i + group.len()..];
            let inner = &inner[..inner.find('}').unwrap_or(inner.len())];
            for item in inner.split(',') {
                let first = item.trim().split("::").next().unwrap_or("");
                if ["fs", "process", "net"].contains(&first) {
                    out.push(format!("{root}::{first}"));
                }
            }
        }
    }
    out
}

#[test]
fn modules_documented_as_pure_do_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for p in PURE {
        let path = src.join(p);
        assert!(path.exists(), "{p}: no such path under src/ (update PURE)");
        let mut all = Vec::new();
        if path.is_dir() {
            files(&path, &mut all);
        } else {
            all.push(path);
        }
        for f in all {
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for io in io_named(code) {
                broken.push(format!("{}: {io}", f.strip_prefix(&src).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "pure modules doing I/O: {broken:?}");
    // The check sees I/O where there is some.
    assert_eq!(io_named("use std::{fs, io};"), ["std::fs"]);
    assert_eq!(
        io_named("tokio::process::Command::new(p)"),
        ["tokio::process"]
    );
    assert!(io_named("use std::fmt;").is_empty());
}

/// The longest a function of src/ may be, in lines from `fn` to its closing brace: past it a
/// function does several things, and is cut into named steps. Tests are not held to it.
const MAX_FN_LINES: usize = 150;

/// Functions allowed past [`MAX_FN_LINES`], each with why: (file under src/, name). None today.
const LONG_FN_ALLOWED: &[(&str, &str)] = &[];

/// `text` with the contents of comments, string, byte-string, raw-string and char literals
/// blanked to spaces (newlines kept, so lines still count), so braces and words inside them
/// are not seen as code. Lifetimes (`'a`) are left as they are.
fn code_only(text: &str) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to.min(c.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < c.len() {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(hashes) = raw_string_at(&c, i) {
            // r"…", r#"…"#, br"…": ends at a quote followed by as many hashes.
            let mut j = i + 2 + hashes;
            while j < c.len()
                && !(c[j] == '"' && c[j + 1..].iter().take_while(|&&h| h == '#').count() >= hashes)
            {
                j += 1;
            }
            let end = (j + 1 + hashes).min(c.len());
            blank(&mut out, i + 1, end);
            i = end;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a, 'static).
            if next == Some('\\') {
                // Past the escaped character, which may itself be a quote.
                let mut j = i + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                blank(&mut out, i, j + 1);
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                blank(&mut out, i, i + 3);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The number of hashes of a raw string (`r"`, `r#"`, `br"`) starting at `i`, if one does.
fn raw_string_at(c: &[char], i: usize) -> Option<usize> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let word_start = |k: usize| k == 0 || !ident(c[k - 1]);
    if c[i] != 'r' || !(word_start(i) || (c[i - 1] == 'b' && word_start(i - 1))) {
        return None;
    }
    let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
    (c.get(i + 1 + hashes) == Some(&'"')).then_some(hashes)
}

/// Index of the brace closing the one at `open`, in code from [`code_only`].
fn closing_brace(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &ch) in code.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the word `word` starts at `i` of `code` (not inside a longer identifier).
fn word_at(code: &[char], i: usize, word: &str) -> bool {
    let ident = |ch: &char| ch.is_alphanumeric() || *ch == '_';
    let w: Vec<char> = word.chars().collect();
    code[i..].starts_with(&w)
        && (i == 0 || !ident(&code[i - 1]))
        && code.get(i + w.len()).is_none_or(|ch| !ident(ch))
}

/// A function of a source file, as [`functions`] finds it.
#[derive(Debug, PartialEq)]
struct FnSpan {
    name: String,
    /// 1-based line of its `fn`.
    line: usize,
    /// Lines from `fn` to its closing brace, both counted.
    lines: usize,
}

/// The functions with a body in `text` outside items marked `#[cfg(test)]` (test modules,
/// test-only helpers), and the names of modules declared `#[cfg(test)] mod name;` (whose
/// files are tests too).
fn functions(text: &str) -> (Vec<FnSpan>, Vec<String>) {
    let code = code_only(text);
    let line_of = |i: usize| 1 + code[..i].iter().filter(|&&ch| ch == '\n').count();
    let ident = |ch: &char| ch.is_alphanumeric() || *ch == '_';
    let skip_ws = |mut j: usize| {
        while j < code.len() && code[j].is_whitespace() {
            j += 1;
        }
        j
    };
    // Ranges of items under #[cfg(test)]: from the attribute to the item's closing brace or `;`.
    let attr: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut test_ranges = Vec::new();
    let mut test_mods = Vec::new();
    for i in 0..code.len() {
        if !code[i..].starts_with(&attr) {
            continue;
        }
        let start = skip_ws(i + attr.len());
        let end = (start..code.len()).find(|&j| code[j] == '{' || code[j] == ';');
        match end {
            Some(j) if code[j] == ';' => {
                let decl: String = code[start..j].iter().collect();
                if let Some(name) = decl
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .as_slice()
                    .strip_prefix(&["mod"])
                {
                    test_mods.extend(name.first().map(|n| n.to_string()));
                }
                test_ranges.push((i, j));
            }
            Some(j) => test_ranges.push((i, closing_brace(&code, j).unwrap_or(code.len()))),
            None => {}
        }
    }
    let mut out = Vec::new();
    for i in 0..code.len() {
        if !word_at(&code, i, "fn") || test_ranges.iter().any(|&(a, b)| a <= i && i <= b) {
            continue;
        }
        // `fn name`; a pointer type `fn(u8)` has no name and no body.
        let start = skip_ws(i + 2);
        let name: String = code[start..].iter().take_while(|ch| ident(ch)).collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first brace outside the signature's brackets; `;` first means none.
        let mut depth = 0i64;
        let mut open = None;
        for (j, &ch) in code.iter().enumerate().skip(start) {
            match ch {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(close) = open.and_then(|o| closing_brace(&code, o)) else {
            continue;
        };
        out.push(FnSpan {
            name,
            line: line_of(i),
            lines: line_of(close) - line_of(i) + 1,
        });
    }
    (out, test_mods)
}

#[test]
fn the_function_scanner_skips_strings_comments_chars_and_test_code() {
    let sample = r###"
fn short() {
    let s = "}}} fn fake() {";
    let r = r#"a "}" fn raw() { "#;
    let c = '}';
    let e = '\'';
    let b = b'{';
    // fn commented() { }
    /* fn blocked() { /* nested } */ } */
    let f: fn(u8) -> u8 = id;
}
impl<'a> T<'a> {
    pub(crate) fn method(&'a self) -> Result<(), String> where Self: Sized {
        if x { y() } else { z() }
        Ok(())
    }
    fn declared(&self);
}
#[cfg(test)]
mod tests {
    fn helper() {
    }
}
#[cfg(test)]
mod more;
fn last() { }
"###;
    let (fns, test_mods) = functions(sample);
    let got: Vec<(&str, usize, usize)> = fns
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(got, [("short", 2, 10), ("method", 13, 4), ("last", 26, 1)]);
    assert_eq!(test_mods, ["more"]);
    // Blanking keeps the lines and the code around literals.
    let blanked: String = code_only("a(\"{\n}\") // }\n'x' 'a").into_iter().collect();
    assert_eq!(blanked, "a(  \n  )     \n    'a");
}

#[test]
fn no_function_outside_tests_is_longer_than_150_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    // Files of modules declared `#[cfg(test)] mod name;`, and every tests.rs.
    let mut test_files: BTreeSet<PathBuf> = BTreeSet::new();
    let mut scanned = Vec::new();
    for f in &all {
        let text = std::fs::read_to_string(f).unwrap();
        let (fns, test_mods) = functions(&text);
        // A module's children live in its own directory: src/a/mod.rs and src/lib.rs hold
        // theirs beside them, src/a.rs in src/a/.
        let stem = f.file_stem().unwrap().to_string_lossy();
        let dir = if ["mod", "lib", "main"].contains(&stem.as_ref()) {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_files.insert(dir.join(format!("{m}.rs")));
            test_files.insert(dir.join(&m).join("mod.rs"));
        }
        scanned.push((f.clone(), fns));
    }
    let mut long = Vec::new();
    let mut count = 0;
    for (f, fns) in scanned {
        if f.file_name().is_some_and(|n| n == "tests.rs") || test_files.contains(&f) {
            continue;
        }
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        for func in fns {
            count += 1;
            if func.lines <= MAX_FN_LINES {
                continue;
            }
            if LONG_FN_ALLOWED.contains(&(rel.as_str(), func.name.as_str())) {
                continue;
            }
            long.push(format!(
                "src/{rel}:{}: fn {} is {} lines",
                func.line, func.name, func.lines
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions longer than {MAX_FN_LINES} lines (cut them into named steps):\n{}",
        long.join("\n")
    );
    // The scan saw the crate, and the test-only module it knows of.
    assert!(count > 1000, "only {count} functions found under src/");
    assert!(
        test_files.contains(&src.join("testing.rs")),
        "{test_files:?}"
    );
}

/// Where code of src/ starts a thread or a blocking task: `spawn_blocking`, `thread::spawn`,
/// `thread::Builder`. Calls that may hang go through the door (src/door.rs); each other place
/// says why it is not the door in a `// Not the door: …` comment just above it.
fn threads_started_outside_the_door() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut out = Vec::new();
    for f in all {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        if rel == "door.rs" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let lines: Vec<&str> = code.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if t.starts_with("//") {
                continue;
            }
            if [
                "spawn_blocking(",
                "thread::spawn(",
                "thread::Builder::new()",
            ]
            .iter()
            .any(|s| t.contains(s))
            {
                let above = &lines[i.saturating_sub(6)..i];
                if !above.iter().any(|a| a.contains("// Not the door:")) {
                    out.push(format!("src/{rel}:{}", i + 1));
                }
            }
        }
    }
    out
}

#[test]
fn every_thread_started_outside_the_door_says_why() {
    let unexplained = threads_started_outside_the_door();
    assert!(
        unexplained.is_empty(),
        "threads or blocking tasks started outside src/door.rs without a `// Not the door: why` comment above them: {unexplained:?}"
    );
}
