//! The README as a newcomer reads it first: its feature list names every collector, its
//! documentation table links every page of docs/, and every link it gives leads to a file of
//! the checkout. (Its alert table is checked against the rule files in prometheus::rules.)

use std::collections::BTreeSet;
use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The text between `## {title}` and the next `## ` heading (or, with `None`, before the
/// first one).
fn section<'a>(text: &'a str, title: Option<&str>) -> &'a str {
    let start = match title {
        Some(t) => {
            let head = format!("\n## {t}\n");
            text.find(&head)
                .unwrap_or_else(|| panic!("README.md has no `## {t}` section"))
                + head.len()
        }
        None => 0,
    };
    let rest = &text[start..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// Relative link targets of a Markdown text: `](target)` and `](target#anchor)`.
fn links(text: &str) -> BTreeSet<String> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            let target = &rest[..rest.find(')')?];
            let path = target.split('#').next().unwrap_or("");
            (!path.is_empty() && !path.contains("://")).then(|| path.to_string())
        })
        .collect()
}

#[test]
fn the_feature_list_names_every_collector() {
    let text = readme();
    let intro = section(&text, None);
    let missing: Vec<&str> = ssdwatch::registry::COLLECTORS
        .iter()
        .map(|c| c.name)
        .filter(|n| !intro.contains(&format!("(collector `{n}`)")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's feature list (before the first `## `) names no bullet `(collector `NAME`)` for {missing:?}"
    );
}

#[test]
fn the_documentation_table_links_every_page_of_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = readme();
    let table = links(section(&text, Some("Documentation")));
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !table.contains(&format!("docs/{name}")) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "README.md's `## Documentation` table does not link docs/{missing:?}"
    );
}

#[test]
fn every_link_of_the_readme_leads_to_a_file_of_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dead: Vec<String> = links(&readme())
        .into_iter()
        .filter(|l| !root.join(l).exists())
        .collect();
    assert!(
        dead.is_empty(),
        "README.md links files that do not exist: {dead:?}"
    );
}

#[test]
fn the_link_reader_finds_relative_targets_only() {
    let t = "see [a](docs/a.md#x), [b](https://example.org/b.md) and ![c](docs/c.png)";
    let got: Vec<String> = links(t).into_iter().collect();
    assert_eq!(got, ["docs/a.md", "docs/c.png"]);
    assert_eq!(section("intro\n## A\nbody\n## B\nmore", Some("A")), "body");
    assert_eq!(section("intro\n## A\nbody", None), "intro");
}
