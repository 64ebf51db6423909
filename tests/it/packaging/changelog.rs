//! CHANGELOG.md as a release reads it: Keep a Changelog's form, every release dated, each kind of
//! change under one heading per release, and the newest release the version the binary and the
//! Debian package carry (packaging/deb/build.sh takes the package version from `--version`).

use std::collections::BTreeSet;
use std::path::Path;

/// The kinds of change a section may hold, in the order they are written.
const KINDS: &[&str] = &[
    "Added",
    "Changed",
    "Deprecated",
    "Removed",
    "Fixed",
    "Security",
    "Tests",
];

struct Section {
    title: String,
    line: usize,
    kinds: Vec<(String, usize)>,
}

fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if let Some(t) = l.strip_prefix("## ") {
            out.push(Section {
                title: t.to_string(),
                line: i + 1,
                kinds: Vec::new(),
            });
        } else if let Some(k) = l.strip_prefix("### ") {
            let s = out
                .last_mut()
                .unwrap_or_else(|| panic!("CHANGELOG.md:{}: `### {k}` before any release", i + 1));
            s.kinds.push((k.to_string(), i + 1));
        }
    }
    out
}

/// `[1.2.3] - 2026-12-08` → ("1.2.3", "2026-12-08").
fn release(title: &str) -> Option<(&str, &str)> {
    let (version, date) = title.split_once(" - ")?;
    let version = version.strip_prefix('[')?.strip_suffix(']')?;
    Some((version, date))
}

fn is_date(d: &str) -> bool {
    let b = d.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && d.chars()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[test]
fn the_changelog_has_one_heading_per_kind_and_its_newest_release_is_the_package_version() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let all = sections(&text);
    assert_eq!(
        all.first().map(|s| s.title.as_str()),
        Some("[Unreleased]"),
        "CHANGELOG.md: the first section is [Unreleased]"
    );
    let mut problems = Vec::new();
    for s in &all {
        let mut seen = BTreeSet::new();
        let mut last = 0;
        for (k, line) in &s.kinds {
            let Some(rank) = KINDS.iter().position(|x| x == k) else {
                problems.push(format!(
                    "CHANGELOG.md:{line}: unknown kind `### {k}` (one of {KINDS:?})"
                ));
                continue;
            };
            if !seen.insert(k.clone()) {
                problems.push(format!(
                    "CHANGELOG.md:{line}: a second `### {k}` in {}",
                    s.title
                ));
            }
            if rank < last {
                problems.push(format!(
                    "CHANGELOG.md:{line}: `### {k}` out of order in {}",
                    s.title
                ));
            }
            last = rank;
        }
        if s.title != "[Unreleased]" {
            match release(&s.title) {
                Some((_, date)) if is_date(date) => {}
                _ => problems.push(format!(
                    "CHANGELOG.md:{}: `## {}` is not `## [version] - YYYY-MM-DD`",
                    s.line, s.title
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let newest = all
        .iter()
        .find_map(|s| release(&s.title))
        .expect("CHANGELOG.md has a release");
    assert_eq!(
        newest.0,
        env!("CARGO_PKG_VERSION"),
        "the newest release in CHANGELOG.md is the version in Cargo.toml (and so the package's)"
    );
}

#[test]
fn the_checks_see_a_repeated_kind_and_a_release_without_a_date() {
    let s = sections("## [Unreleased]\n### Added\n- a\n### Added\n- b\n## [0.1.0]\n");
    assert_eq!(s[0].kinds.len(), 2);
    assert_eq!(release(&s[1].title), None);
    assert_eq!(
        release("[0.2.0] - 2026-12-08"),
        Some(("0.2.0", "2026-12-08"))
    );
    assert!(is_date("2026-12-08"));
    assert!(!is_date("2026-1-08"));
}
