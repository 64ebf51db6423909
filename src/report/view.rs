//! The report's tables as one view model: headers and rows of cells, built once from the
//! [`Report`](super::Report)'s figures, which the text and HTML renderers only encode (JSON
//! serialises the report itself). What an unknown figure or date reads as is decided here,
//! once. Pure: no I/O.

use super::filling::{self, ComponentReport};
use super::{FsReport, UNTRIMMED_TITLE, bytes, date, latency, pct};
use crate::history::curve::FILL_BIN_LABELS;
use crate::history::degradation::Group;

/// What a figure or date the history can't give reads as, in every format.
pub const UNKNOWN: &str = "unknown";

/// One cell of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Words: a name, a title.
    Text(String),
    /// A figure with its unit, written for people (`1.23 TB`, `81.2 %`, `412 µs`).
    Number(String),
    /// A day (UTC), written `2027-03-14`.
    Date(i64),
    /// Not known.
    Unknown,
    /// No figure, for the reason given (`none: runs under 100 I/Os`): known not to exist.
    None(&'static str),
}

impl Cell {
    /// A figure written by `f`, or unknown.
    pub fn number<T>(v: Option<T>, f: impl Fn(T) -> String) -> Cell {
        v.map_or(Cell::Unknown, |v| Cell::Number(f(v)))
    }

    /// A day, or unknown.
    pub fn date(t: Option<i64>) -> Cell {
        t.map_or(Cell::Unknown, Cell::Date)
    }

    /// The cell's words as every format writes them (HTML escapes them and greys what is not a
    /// figure).
    pub fn words(&self) -> String {
        match self {
            Cell::Text(s) | Cell::Number(s) => s.clone(),
            Cell::Date(t) => date(*t),
            Cell::Unknown => UNKNOWN.into(),
            Cell::None(why) => (*why).into(),
        }
    }

    /// Whether it is a note (unknown, or no figure) rather than a figure.
    pub fn is_note(&self) -> bool {
        matches!(self, Cell::Unknown | Cell::None(_))
    }
}

/// One row; `mark` is why it stands out (`runs out first`), when it does.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub mark: Option<&'static str>,
}

/// A table: its column headers and its rows, each a cell per header.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Row>,
}

/// A mount's stack of layers: each layer's free bytes, size and fill, the one that runs out
/// first marked.
pub fn layers(f: &FsReport) -> Table {
    Table {
        headers: vec!["layer", "free", "size", "fill"],
        rows: f
            .layers
            .iter()
            .map(|l| Row {
                cells: vec![
                    Cell::Text(l.title()),
                    Cell::Number(bytes(l.avail_bytes)),
                    Cell::number(l.size_bytes, bytes),
                    Cell::number(l.fill_ratio, pct),
                ],
                mark: l.limiting.then_some("runs out first"),
            })
            .collect(),
    }
}

/// A mount's database components: size, growth over a day and a week, and share of the
/// mount's growth over the day.
pub fn filling(components: &[ComponentReport]) -> Table {
    let signed = filling::signed_bytes;
    Table {
        headers: vec![
            "component",
            "database",
            "size",
            "last day",
            "last 7 days",
            "share of the day's growth",
        ],
        rows: components
            .iter()
            .map(|c| Row {
                cells: vec![
                    Cell::Text(c.title()),
                    Cell::Text(c.database.clone()),
                    Cell::Number(filling::size_text(c, bytes)),
                    Cell::number(c.growth_1d_bytes, signed),
                    Cell::number(c.growth_7d_bytes, signed),
                    Cell::Text(filling::share(c)),
                ],
                mark: None,
            })
            .collect(),
    }
}

/// A probe target's latency by fill bin: the runs and the median p50 and p99 of each bin,
/// trimmed first; with a column saying which where runs were also made while the filesystem
/// held deleted, untrimmed blocks.
pub fn curve(g: &Group) -> Table {
    let split = !g.curve_untrimmed.is_empty();
    let mut headers = vec!["fill"];
    if split {
        headers.push("filesystem");
    }
    headers.extend(["runs", "p50", "p99"]);
    let mut rows = Vec::new();
    for (what, bins) in [("trimmed", &g.curve), (UNTRIMMED_TITLE, &g.curve_untrimmed)] {
        for b in bins {
            let mut cells = vec![Cell::Text(FILL_BIN_LABELS[b.bin].to_string())];
            if split {
                cells.push(Cell::Text(what.to_string()));
            }
            cells.extend([
                Cell::Number(b.runs.to_string()),
                Cell::Number(latency(b.p50_seconds)),
                b.p99_seconds
                    .map_or(Cell::None("none: runs under 100 I/Os"), |s| {
                        Cell::Number(latency(s))
                    }),
            ]);
            rows.push(Row { cells, mark: None });
        }
    }
    Table { headers, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Report, html, text};

    fn component(database: &str, g7: Option<f64>) -> ComponentReport {
        ComponentReport {
            database: database.into(),
            kind: "postgresql".into(),
            component: "wal".into(),
            bytes: 2.1e9,
            growth_1d_bytes: Some(0.9e9),
            growth_7d_bytes: g7,
            share_1d: Some(0.9),
            stale_since: None,
        }
    }

    /// A report whose history holds no date and whose one component has no week of sizes.
    fn report() -> Report {
        Report {
            host: "db1".into(),
            generated_unix: 0,
            source: "test".into(),
            history_since_unix: None,
            filesystems: vec![FsReport {
                mountpoint: "/srv/pg".into(),
                used_growth_1d_bytes: Some(1e9),
                filling: vec![component("/srv/pg/data", None)],
                ..Default::default()
            }],
            drives: Vec::new(),
            degradation: Vec::new(),
            performance_full: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// Where each of `words` first appears in `doc` after the previous one; None when one
    /// is missing or out of order.
    fn in_order(doc: &str, words: &[&str]) -> bool {
        let mut at = 0;
        words.iter().all(|w| match doc[at..].find(w) {
            Some(i) => {
                at += i + w.len();
                true
            }
            None => false,
        })
    }

    #[test]
    fn text_and_html_show_the_same_columns_in_the_same_order_and_the_same_word_for_unknown() {
        let r = report();
        let (t, h) = (text::render(&r), html::render(&r));
        let t = &t[t.find("WHAT IS FILLING IT").expect("the section")..];
        let h = &h[h.find("<h2>What is filling it</h2>").expect("the section")..];
        let headers = filling(&[]).headers;
        assert!(in_order(t, &headers), "{t}");
        let th: Vec<String> = headers
            .iter()
            .map(|x| format!("<th>{}</th>", crate::report::svg::esc(x)))
            .collect();
        let th: Vec<&str> = th.iter().map(String::as_str).collect();
        assert!(in_order(h, &th), "{h}");
        // The row's figures in the headers' order, the unknown week the same word in both.
        let row = ["WAL", "/srv/pg/data", "2.10 GB", "+900.00 MB", UNKNOWN];
        assert!(in_order(t, &row), "{t}");
        assert!(in_order(h, &row), "{h}");
        let (t, h) = (text::render(&r), html::render(&r));
        assert!(t.contains("history since unknown"), "{t}");
        assert!(
            h.contains("history since <span class=\"note\">unknown</span>"),
            "{h}"
        );
        assert!(!h.contains('—'), "{h}");
    }

    #[test]
    fn a_cell_says_unknown_once_for_every_format() {
        assert_eq!(Cell::date(None), Cell::Unknown);
        assert_eq!(Cell::date(None).words(), "unknown");
        assert_eq!(Cell::date(Some(1_767_225_600)).words(), "2026-01-01");
        assert_eq!(
            Cell::number(None::<f64>, crate::report::pct).words(),
            "unknown"
        );
        assert_eq!(
            Cell::number(Some(0.5), crate::report::pct).words(),
            "50.0 %"
        );
        assert!(Cell::Unknown.is_note() && Cell::None("none: no runs").is_note());
        assert!(!Cell::Date(0).is_note());
    }

    /// A curve without p99s (runs under 100 I/Os) says why in the p99 column; a target with
    /// runs on untrimmed blocks gets a column saying which state each bin is.
    #[test]
    fn a_curve_table_has_a_filesystem_column_only_where_runs_were_also_untrimmed() {
        use crate::history::curve::CurveBin;
        let bin = |bin: usize, p99: Option<f64>| CurveBin {
            bin,
            runs: 12,
            p50_seconds: 2e-4,
            p99_seconds: p99,
        };
        let mut g = Group {
            target: "/srv/pg/probe".into(),
            mountpoint: Some("/srv/pg".into()),
            device: Some("nvme0n1".into()),
            drive: None,
            probe: crate::probe::ProbeKind::SyncWrite4k,
            runs: 12,
            first_run: 0,
            last_run: 0,
            curve: vec![bin(3, None)],
            curve_max_fill: Some(0.35),
            curve_untrimmed: Vec::new(),
            trim: Vec::new(),
            idle: Vec::new(),
        };
        let t = curve(&g);
        assert_eq!(t.headers, ["fill", "runs", "p50", "p99"]);
        assert_eq!(t.rows[0].cells[3], Cell::None("none: runs under 100 I/Os"));
        g.curve_untrimmed = vec![bin(3, Some(1e-3))];
        let t = curve(&g);
        assert_eq!(t.headers, ["fill", "filesystem", "runs", "p50", "p99"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].cells[1], Cell::Text("trimmed".into()));
        assert_eq!(t.rows[1].cells[1], Cell::Text(UNTRIMMED_TITLE.into()));
        assert_eq!(t.rows[1].cells[4], Cell::Number("1.00 ms".into()));
    }
}
