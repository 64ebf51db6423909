//! The module layering docs/design.md states, checked on the source: parsers and
//! readers know nothing of collectors, the config or the command line; engines (probe) know no
//! scheduler or config; only the command line and the daemon's wiring read the whole config.
//! (tools/rs-cycles-style file cycles are a separate check; this one is about direction.)

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

#[test]
fn parsers_readers_and_engines_do_not_reach_up_into_collectors_config_or_the_command_line() {
    let edges = edges();
    // (module, modules it must never name)
    let upper = [
        "collector",
        "registry",
        "config",
        "cli",
        "daemon",
        "http",
        "history",
    ];
    let rules: &[(&[&str], &[&str])] = &[
        (
            &[
                "sysfs",
                "procfs",
                "databases",
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
            ],
            &[
                "collector",
                "registry",
                "config",
                "cli",
                "daemon",
                "http",
                "probe",
                "snapshot",
                "history",
            ],
        ),
        (&["probe"], &upper),
        // The capability split holds privileges: it names no collector, config or web code.
        (&["privsep"], &upper),
        (&["snapshot"], &upper),
        (
            &["collector"],
            &["registry", "config", "cli", "daemon", "http"],
        ),
        (&["registry"], &["config", "cli", "daemon", "http"]),
        (&["config"], &["cli", "daemon", "http", "collector"]),
        (&["http", "daemon"], &["cli"]),
    ];
    let mut broken = Vec::new();
    for (modules, forbidden) in rules {
        for m in *modules {
            for to in edges.get(*m).into_iter().flatten() {
                if forbidden.contains(&to.as_str()) {
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
