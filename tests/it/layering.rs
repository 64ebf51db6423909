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
        (&["snapshot", "space", "notify"], UPPER),
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
