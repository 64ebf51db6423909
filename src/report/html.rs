//! The report as one self-contained HTML page: tables and inline SVG charts, no script, no
//! network, no external style. The charts a DBA looks at: usage over time with the forecast
//! line and the predicted-full date, latency by fill ratio, latency around each TRIM, wear over
//! time with its forecast.

use super::svg::{self, Axis, Chart, Series, Style, esc};
use super::view::{self, Cell, Table};
use super::{Report, bytes, date, datetime, latency, pct};
use crate::history::curve::FILL_BINS;
use std::fmt::Write;

/// Filesystems charted (the rest are in the table): those filling first, then the fullest.
pub const MAX_FS_CHARTS: usize = 12;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}
td:first-child,th:first-child{text-align:left}.note{color:#666}.warn{color:#b00}
svg{display:block;margin:8px 0;background:#fff}.title{font-weight:600;font-size:13px}
.tick,.mlabel,.legend{font-size:11px;fill:#444}.axis{stroke:#444;fill:none}.grid{stroke:#eee;fill:none}
path.measured{stroke:#1f77b4;stroke-width:2;fill:none}path.second{stroke:#ff7f0e;stroke-width:2;fill:none}
path.forecast{stroke:#d62728;stroke-width:2;stroke-dasharray:6 4;fill:none}path.limit{stroke:#999;stroke-width:1;fill:none}
path.untrimmed{stroke:#9467bd;stroke-width:2;fill:none}
circle.measured{fill:#1f77b4}circle.second{fill:#ff7f0e}circle.forecast{fill:#d62728}circle.untrimmed{fill:#9467bd}
path.marker{stroke:#d62728;stroke-width:1;stroke-dasharray:2 2;fill:none}.mlabel{fill:#d62728}
.legend.measured{fill:#1f77b4}.legend.second{fill:#ff7f0e}.legend.forecast{fill:#d62728}.legend.untrimmed{fill:#9467bd}";

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| cell(&Cell::Unknown))
}

pub fn render(r: &Report) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ssdwatch report: {}</title><style>{STYLE}</style></head><body>",
        esc(&r.host)
    );
    let _ = write!(
        o,
        "<h1>ssdwatch report: {}</h1><p class=\"note\">Generated {} UTC from {}; history since {}.</p>",
        esc(&r.host),
        datetime(r.generated_unix),
        esc(&r.source),
        cell(&Cell::date(r.history_since_unix))
    );
    filesystems(&mut o, r);
    layers(&mut o, r);
    what_is_filling(&mut o, r);
    drives(&mut o, r);
    degradation(&mut o, r);
    performance_full(&mut o, r);
    if !r.unknown.is_empty() {
        o.push_str("<h2>Not known yet</h2><ul>");
        for u in &r.unknown {
            let _ = write!(o, "<li>{}</li>", esc(u));
        }
        o.push_str("</ul>");
    }
    o.push_str("</body></html>\n");
    o
}

fn filesystems(o: &mut String, r: &Report) {
    o.push_str("<h2>Filesystems</h2>");
    if r.filesystems.is_empty() {
        o.push_str("<p class=\"note\">None recorded yet.</p>");
        return;
    }
    o.push_str("<table><tr><th>mount point</th><th>device</th><th>fill</th><th>used</th><th>size</th><th>growth/day (7 d)</th><th>growth/day (30 d)</th><th>predicted full</th></tr>");
    let mut order: Vec<&super::FsReport> = r.filesystems.iter().collect();
    order.sort_by(|a, b| {
        let key = |f: &super::FsReport| {
            (
                f.predicted_full_unix.unwrap_or(i64::MAX),
                -(f.fill_ratio.unwrap_or(0.0) * 1e6) as i64,
            )
        };
        key(a).cmp(&key(b))
    });
    for f in &order {
        let full = match (f.predicted_full_unix, &f.full_note) {
            (Some(t), note) => format!(
                "<b>{}</b>{}{}{}",
                date(t),
                esc(&f.full_layer_words()),
                esc(&super::band(f.full_earliest_unix, f.full_latest_unix)),
                note.as_ref()
                    .map(|n| format!("<br><span class=\"note\">{}</span>", esc(n)))
                    .unwrap_or_default()
            ),
            (None, Some(n)) => format!("<span class=\"note\">{}</span>", esc(n)),
            _ => cell(&Cell::Unknown),
        };
        let full = match &f.top_contributor {
            Some(t) => format!("{full}<br><span class=\"filling\">{}</span>", esc(t)),
            None => full,
        };
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{full}</td></tr>",
            esc(&f.mountpoint),
            esc(f.device.as_deref().unwrap_or("")),
            esc(&f.fill_words(pct)),
            opt(f.used_bytes, bytes),
            opt(f.size_bytes, bytes),
            opt(f.growth_7d_bytes_per_day, bytes),
            opt(f.growth_30d_bytes_per_day, bytes),
        );
    }
    o.push_str("</table>");
    for f in order.iter().take(MAX_FS_CHARTS) {
        let mut series = vec![Series {
            name: "used (high)".into(),
            style: Style::Measured,
            points: f.usage.iter().map(|&(t, _, hi)| (t as f64, hi)).collect(),
            dots: false,
        }];
        let mut markers = Vec::new();
        // df's scale: what users can fill is the size less root's reserve.
        let limit = f.size_bytes.map(|s| s - f.reserved_bytes.unwrap_or(0.0));
        if let (Some(size), Some(last)) = (limit, f.usage.last()) {
            let end = f.predicted_full_unix.unwrap_or(last.0) as f64;
            series.push(Series {
                name: if f.reserved_bytes.is_some_and(|r| r > 0.0) {
                    "size less reserved blocks"
                } else {
                    "size"
                }
                .into(),
                style: Style::Limit,
                points: vec![(f.usage[0].0 as f64, size), (end.max(last.0 as f64), size)],
                dots: false,
            });
            // The forecast goes on from the chart's own last point to the limit (full is when
            // nothing is left to users). Where a layer below runs out first, the limit is what
            // that layer leaves the mount (the used bytes now and the layer's free bytes), not
            // the filesystem's size: the filesystem is not the one that fills.
            let by_layer = f.full_layer.as_ref().and_then(|name| {
                f.layers
                    .iter()
                    .find(|l| &l.title() == name)
                    .map(|l| (name, (last.2 + l.avail_bytes).min(size)))
            });
            if let (Some(full), Some((name, level))) = (f.predicted_full_unix, by_layer) {
                series.push(Series {
                    name: format!("what the {name} leaves"),
                    style: Style::Limit,
                    points: vec![(last.0 as f64, level), (full as f64, level)],
                    dots: false,
                });
            }
            if let Some(full) = f.predicted_full_unix {
                let level = by_layer.map_or(size, |(_, l)| l);
                series.push(Series {
                    name: "forecast".into(),
                    style: Style::Forecast,
                    points: vec![(last.0 as f64, last.2), (full as f64, level)],
                    dots: false,
                });
                let by = by_layer.map(|(n, _)| format!(" ({n})")).unwrap_or_default();
                markers.push((full as f64, format!("full {}{by}", date(full))));
            }
        }
        o.push_str(&svg::render(&Chart {
            title: format!("{}: used bytes", f.mountpoint),
            x: Axis::Time,
            y: Axis::Bytes,
            series,
            markers,
            y_from_zero: true,
            x_range: None,
        }));
    }
    if order.len() > MAX_FS_CHARTS {
        let _ = write!(
            o,
            "<p class=\"note\">{} more filesystems in the table above, not charted.</p>",
            order.len() - MAX_FS_CHARTS
        );
    }
}

/// A drive's health in one cell: its concerns, else what is known of it.
fn health_cell(h: &super::DriveHealth) -> String {
    let c = h.concerns();
    if !c.is_empty() {
        return c.iter().map(|c| esc(c)).collect::<Vec<_>>().join("<br>");
    }
    let mut ok = Vec::new();
    if h.error_log_entries_new_7d.is_some() {
        ok.push("no new errors".to_string());
    }
    if h.layer_errors_new_7d.is_some() {
        ok.push("no new errors under the filesystem".to_string());
    }
    if let Some(t) = &h.self_test {
        ok.push(format!("self-test {}", esc(t)));
    }
    if h.durability.as_deref() == Some("none") {
        ok.push("fsync: no sign of a risk".to_string());
    }
    ok.join("<br>")
}

/// Each mount with layers below it: its stack, each layer's free bytes and fill, and which
/// runs out first (the layer its effective free space is).
fn layers(o: &mut String, r: &Report) {
    let with: Vec<&super::FsReport> = r
        .filesystems
        .iter()
        .filter(|f| f.runs_out_first().is_some())
        .collect();
    if with.is_empty() {
        return;
    }
    o.push_str("<h2>Layers below the filesystems</h2><p class=\"note\">A thin pool, btrfs chunk allocation or ZFS pool can run out while the filesystem still shows free space: the mount's free space is the least of its stack.</p>");
    for f in with {
        let _ = write!(o, "<h3 class=\"layers\">{}</h3>", esc(&f.mountpoint));
        if let Some(first) = f.runs_out_first() {
            let _ = write!(
                o,
                "<p class=\"runs-out\">Runs out first: <b>{}</b> ({} free)</p>",
                esc(&first.title()),
                bytes(first.avail_bytes)
            );
        }
        table(o, &view::layers(f), Some("layers"));
    }
}

/// Each mount's database components: size, growth over a day and a week, share of the
/// mount's growth over the day.
fn what_is_filling(o: &mut String, r: &Report) {
    let with: Vec<&super::FsReport> = r
        .filesystems
        .iter()
        .filter(|f| !f.filling.is_empty())
        .collect();
    if with.is_empty() {
        return;
    }
    o.push_str("<h2>What is filling it</h2><p class=\"note\">The databases' components on each mount, read from their files (no login), the fastest-growing over the last day first, with their share of the mount's growth.</p>");
    let signed = super::filling::signed_bytes;
    for f in with {
        let _ = write!(
            o,
            "<h3 class=\"filling\">{} <span class=\"note\">(grew {} over the last day)</span></h3>",
            esc(&f.mountpoint),
            opt(f.used_growth_1d_bytes, signed)
        );
        if let Some(t) = &f.top_contributor {
            let _ = write!(o, "<p class=\"filling\">{}</p>", esc(t));
        }
        table(o, &view::filling(&f.filling), Some("filling"));
    }
}

fn drives(o: &mut String, r: &Report) {
    o.push_str("<h2>Drives</h2>");
    if r.drives.is_empty() {
        o.push_str("<p class=\"note\">None recorded yet.</p>");
        return;
    }
    o.push_str("<table><tr><th>device</th><th>model</th><th>serial</th><th>wear used</th><th>predicted wear-out</th><th>written (TBW consumed)</th><th>of rating</th><th>write ampl. (30 d)</th><th>discard bursts</th><th>last TRIM</th><th>health</th></tr>");
    for d in &r.drives {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.name()),
            esc(d.model.as_deref().unwrap_or("")),
            esc(d.serial.as_deref().unwrap_or("")),
            opt(d.wear_used_ratio, pct),
            opt(d.predicted_wear_out_unix, |t| format!(
                "{}{}",
                date(t),
                esc(&super::band(
                    d.wear_out_earliest_unix,
                    d.wear_out_latest_unix
                ))
            )),
            opt(d.host_written_bytes, bytes),
            opt(d.endurance_used_ratio, pct),
            opt(d.write_amplification_30d, |w| format!("{w:.2}")),
            d.discard_bursts,
            opt(d.last_discard_unix, datetime),
            health_cell(&d.health),
        );
    }
    o.push_str("</table>");
    for d in &r.drives {
        if d.wear.is_empty() {
            continue;
        }
        let mut series = vec![Series {
            name: "wear used".into(),
            style: Style::Measured,
            points: d.wear.iter().map(|&(t, w)| (t as f64, w)).collect(),
            dots: false,
        }];
        let mut markers = Vec::new();
        if let (Some(out), Some(&(t, w))) = (d.predicted_wear_out_unix, d.wear.last()) {
            series.push(Series {
                name: "forecast".into(),
                style: Style::Forecast,
                points: vec![(t as f64, w), (out as f64, 1.0)],
                dots: false,
            });
            markers.push((out as f64, format!("worn out {}", date(out))));
        }
        o.push_str(&svg::render(&Chart {
            title: format!(
                "{} ({}): wear used",
                d.name(),
                d.model.as_deref().unwrap_or("")
            ),
            x: Axis::Time,
            y: Axis::Ratio,
            series,
            markers,
            y_from_zero: true,
            x_range: None,
        }));
    }
}

/// One line per commit-probe target: the fill where its commits got slow, and when.
fn performance_full(o: &mut String, r: &Report) {
    if r.performance_full.is_empty() {
        return;
    }
    o.push_str("<h2>Performance-full</h2><p class=\"note\">Where the sync_write_4k probe's median on the trimmed curve first passed the target's slow level (3× its low-fill median, or the target's own slow_latency or slow_latency_factor), and when the fill forecast gets there.</p><ul>");
    for a in &r.performance_full {
        let _ = write!(o, "<li>{}</li>", esc(&super::performance_full_line(a)));
    }
    o.push_str("</ul>");
}

fn degradation(o: &mut String, r: &Report) {
    o.push_str("<h2>Latency by fill, and what TRIM and rest give back</h2>");
    if r.degradation.is_empty() {
        // Why (no target configured, or none has run yet) is under "Not known yet".
        o.push_str("<p class=\"note\">No probe run recorded yet.</p>");
        return;
    }
    for g in &r.degradation {
        let _ = write!(
            o,
            "<h3>{}</h3><p class=\"note\">{} runs from {} to {}; each figure is the median of the runs in the bin; a p99 needs runs of 100 I/Os or more.</p>",
            esc(&super::group_title(g)),
            g.runs,
            datetime(g.first_run),
            datetime(g.last_run)
        );
        let split = !g.curve_untrimmed.is_empty();
        table(o, &view::curve(g), None);
        let mid = |b: usize| (FILL_BINS[b].0 + FILL_BINS[b].1) / 2.0;
        let mut series = vec![
            Series {
                name: if split { "p50 trimmed" } else { "p50" }.into(),
                style: Style::Measured,
                points: g
                    .curve
                    .iter()
                    .map(|b| (mid(b.bin), b.p50_seconds))
                    .collect(),
                dots: true,
            },
            Series {
                name: if split { "p99 trimmed" } else { "p99" }.into(),
                style: Style::Second,
                points: g
                    .curve
                    .iter()
                    .filter_map(|b| Some((mid(b.bin), b.p99_seconds?)))
                    .collect(),
                dots: true,
            },
        ];
        if split {
            series.push(Series {
                name: "p50 deleted, not trimmed".into(),
                style: Style::Untrimmed,
                points: g
                    .curve_untrimmed
                    .iter()
                    .map(|b| (mid(b.bin), b.p50_seconds))
                    .collect(),
                dots: true,
            });
        }
        o.push_str(&svg::render(&Chart {
            title: format!("{}: latency by fill ratio", g.probe.as_str()),
            x: Axis::Ratio,
            y: Axis::Seconds,
            series,
            markers: Vec::new(),
            y_from_zero: true,
            // Always the whole 0-100 %: one bin is not stretched over the axis, and curves of
            // different targets compare at a glance.
            x_range: Some((0.0, 1.0)),
        }));
        for (what, list) in [("TRIM", &g.trim), ("idle ≥ 10 min", &g.idle)] {
            if list.is_empty() {
                let _ = write!(
                    o,
                    "<p class=\"note\">{what}: no event with probe runs before and after it yet (within the hour each side, up to the neighbouring events).</p>"
                );
                continue;
            }
            o.push_str(&svg::render(&Chart {
                title: format!(
                    "{}: p50 before and after each {what} (an hour each side at most)",
                    g.probe.as_str()
                ),
                x: Axis::Time,
                y: Axis::Seconds,
                series: vec![
                    Series {
                        name: "before".into(),
                        style: Style::Second,
                        points: list
                            .iter()
                            .map(|e| (e.start as f64, e.before_seconds))
                            .collect(),
                        dots: true,
                    },
                    Series {
                        name: "after".into(),
                        style: Style::Measured,
                        points: list
                            .iter()
                            .map(|e| (e.start as f64, e.after_seconds))
                            .collect(),
                        dots: true,
                    },
                ],
                markers: Vec::new(),
                y_from_zero: true,
                x_range: None,
            }));
            let last = &list[list.len() - 1];
            let _ = write!(
                o,
                "<p>Last {what} at {}: p50 {} before, {} after (ratio {:.2}); {} events shown.</p>",
                datetime(last.start),
                latency(last.before_seconds),
                latency(last.after_seconds),
                last.ratio,
                list.len()
            );
        }
    }
}

/// A table of the view model: a marked row in the warning colour, a cell that is a note
/// (unknown, or no figure and why) greyed.
fn table(o: &mut String, t: &Table, class: Option<&str>) {
    match class {
        Some(c) => {
            let _ = write!(o, "<table class=\"{c}\"><tr>");
        }
        None => o.push_str("<table><tr>"),
    }
    for h in &t.headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for r in &t.rows {
        o.push_str(if r.mark.is_some() {
            "<tr class=\"warn\">"
        } else {
            "<tr>"
        });
        for c in &r.cells {
            let _ = write!(o, "<td>{}</td>", cell(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

/// A cell's words, escaped; a note greyed.
fn cell(c: &Cell) -> String {
    if c.is_note() {
        format!("<span class=\"note\">{}</span>", esc(&c.words()))
    } else {
        esc(&c.words())
    }
}
