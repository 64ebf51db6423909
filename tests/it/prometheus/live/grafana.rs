//! A panel as Grafana shows it: its queries run as Grafana's Prometheus data source runs them
//! (range queries over the dashboard's time range, instant ones at its end, table-format frames
//! with a column per label and `Value #<refId>`), then the panel's own transformations (merge,
//! joinByField inner or outer on Time, organize) and what the visualization draws of the result
//! (an XY chart's points where x and y are both present, a stat's last value per series).
//! Grafana is not run here; its semantics are (public/app/plugins/datasource/prometheus and
//! packages/grafana-data/src/transformations/transformers/merge.ts).

use super::{Prom, render_legend, substitute};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// A table's row: column → value.
type Row = BTreeMap<String, String>;
/// A table-format frame: its columns and rows.
type Frame = (Vec<String>, Vec<Row>);
/// An XY chart's points (time, x, y) per y field.
pub(super) type XyPoints = BTreeMap<String, Vec<(f64, f64, f64)>>;

/// What a panel shows.
#[derive(Debug)]
pub(super) enum Shown {
    /// Time series and stat panels: each series by its display name, with its labels and
    /// points. A stat panel draws one tile per series, its last value.
    Series(Vec<Line>),
    /// An XY chart after its join: each y field by name, with its points (time, x, y).
    Xy(XyPoints),
    /// A table after its transformations: rows of column → value.
    Table(Vec<BTreeMap<String, String>>),
}

#[derive(Debug, Clone)]
pub(super) struct Line {
    pub name: String,
    pub labels: Json,
    pub points: Vec<(f64, f64)>,
}

/// The dashboard's time range and variables, as a viewer has them.
pub(super) struct View<'a> {
    pub prom: &'a Prom,
    pub start: f64,
    pub end: f64,
    pub vars: Vec<(String, Vec<String>)>,
}

impl View<'_> {
    /// `$__range` as Grafana fills it in: the dashboard's range in whole seconds.
    pub(super) fn range(&self) -> String {
        format!("{}s", (self.end - self.start).ceil() as u64)
    }

    /// Runs one query of a panel: a range query unless the target says instant.
    fn run(&self, target: &Json) -> Result<Vec<Json>, String> {
        let expr = substitute(
            target["expr"].as_str().ok_or("a target without expr")?,
            &self.vars,
            &self.range(),
        );
        let r = if target["instant"] == true {
            self.prom.query_at(&expr, self.end)
        } else {
            self.prom.query_range(&expr, self.start, self.end)
        };
        r.map_err(|e| format!("{e}\n    {expr}"))
    }

    /// The panel as Grafana draws it.
    pub(super) fn show(&self, panel: &Json) -> Result<Shown, String> {
        let targets = panel["targets"]
            .as_array()
            .ok_or("a panel without targets")?;
        let mut results = Vec::new();
        for t in targets {
            results.push((t, self.run(t)?));
        }
        match panel["type"].as_str() {
            Some("table") => Ok(Shown::Table(table(panel, &results))),
            Some("xychart") => Ok(Shown::Xy(xy(panel, &results)?)),
            _ => Ok(Shown::Series(
                results
                    .iter()
                    .flat_map(|(t, r)| lines(t, r, &self.vars))
                    .collect(),
            )),
        }
    }

    /// An annotation's events: per series, the stretches of consecutive steps (1 s here) where
    /// the query has a value, as (series display name, labels, start, end).
    pub(super) fn events(&self, annotation: &Json) -> Result<Vec<(Line, f64, f64)>, String> {
        let t = serde_json::json!({"expr": annotation["expr"], "legendFormat": annotation["titleFormat"]});
        let r = self.run(&t)?;
        let mut out = Vec::new();
        for l in lines(&t, &r, &self.vars) {
            let mut stretch: Option<(f64, f64)> = None;
            for (at, _) in &l.points {
                stretch = match stretch {
                    Some((a, b)) if *at - b <= 1.0 + 1e-9 => Some((a, *at)),
                    Some((a, b)) => {
                        out.push((l.clone(), a, b));
                        Some((*at, *at))
                    }
                    None => Some((*at, *at)),
                };
            }
            if let Some((a, b)) = stretch {
                out.push((l.clone(), a, b));
            }
        }
        Ok(out)
    }
}

/// A series' display name: its legend with the labels filled in, or (no legend) its name and
/// labels as Grafana writes them.
fn display_name(legend: &str, metric: &Json) -> String {
    if !legend.is_empty() {
        return render_legend(legend, metric);
    }
    let name = metric["__name__"].as_str().unwrap_or("");
    let labels: Vec<String> = (metric.as_object().into_iter().flatten())
        .filter(|(k, _)| *k != "__name__")
        .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or("")))
        .collect();
    format!("{name}{{{}}}", labels.join(", "))
}

/// Each series of a query's result, its NaN points dropped (Grafana draws them as gaps).
fn lines(target: &Json, result: &[Json], vars: &[(String, Vec<String>)]) -> Vec<Line> {
    let legend = substitute(target["legendFormat"].as_str().unwrap_or(""), vars, "");
    result
        .iter()
        .map(|s| {
            let raw: Vec<Json> = match s["values"].as_array() {
                Some(v) => v.clone(),
                None => vec![s["value"].clone()],
            };
            let points = raw
                .iter()
                .filter_map(|p| {
                    let v: f64 = p[1].as_str()?.parse().ok()?;
                    Some((p[0].as_f64()?, v)).filter(|_| !v.is_nan())
                })
                .collect();
            Line {
                name: display_name(&legend, &s["metric"]),
                labels: s["metric"].clone(),
                points,
            }
        })
        .collect()
}

/// A table panel: one frame per query as the data source builds it for the table format (Time,
/// a column per label of any of its series, empty where a series lacks it, then its value as
/// `Value`, or `Value #<refId>` when the panel has several queries), then the panel's
/// transformations.
fn table(panel: &Json, results: &[(&Json, Vec<Json>)]) -> Vec<BTreeMap<String, String>> {
    let many = results.len() > 1;
    let mut frames: Vec<Frame> = Vec::new();
    for (t, r) in results {
        if r.is_empty() {
            continue;
        }
        let value_col = match many {
            true => format!("Value #{}", t["refId"].as_str().unwrap_or("")),
            false => "Value".to_string(),
        };
        let labels: BTreeSet<String> = (r.iter())
            .flat_map(|s| s["metric"].as_object().into_iter().flatten())
            .map(|(k, _)| k.clone())
            .collect();
        let mut cols = vec!["Time".to_string()];
        cols.extend(labels.iter().cloned());
        cols.push(value_col.clone());
        let rows = r
            .iter()
            .map(|s| {
                let mut row = BTreeMap::new();
                row.insert("Time".to_string(), format!("{}", s["value"][0]));
                for l in &labels {
                    row.insert(l.clone(), s["metric"][l].as_str().unwrap_or("").to_string());
                }
                row.insert(
                    value_col.clone(),
                    s["value"][1].as_str().unwrap_or("").to_string(),
                );
                row
            })
            .collect();
        frames.push((cols, rows));
    }
    let mut rows: Vec<BTreeMap<String, String>> = Vec::new();
    let transformations = panel["transformations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let merges = transformations.iter().any(|t| t["id"] == "merge");
    if merges && frames.len() > 1 {
        rows = merge(&frames);
    } else {
        for (_, r) in frames {
            rows.extend(r);
        }
    }
    for t in &transformations {
        if t["id"] != "organize" {
            continue;
        }
        let exclude = &t["options"]["excludeByName"];
        let rename = &t["options"]["renameByName"];
        rows = rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .filter(|(k, _)| exclude[k.as_str()] != true)
                    .map(|(k, v)| match rename[k.as_str()].as_str() {
                        Some(n) if !n.is_empty() => (n.to_string(), v),
                        _ => (k, v),
                    })
                    .collect()
            })
            .collect();
    }
    rows
}

/// Grafana's merge: rows keyed by the columns every frame has; a row joins each earlier row of
/// its key that agrees with it on every column both have.
fn merge(frames: &[Frame]) -> Vec<Row> {
    let key_cols: Vec<&String> = frames[0]
        .0
        .iter()
        .filter(|c| frames.iter().all(|(cols, _)| cols.contains(c)))
        .collect();
    let mut by_key: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut out: Vec<BTreeMap<String, String>> = Vec::new();
    for (_, rows) in frames {
        for row in rows {
            let key: String = key_cols
                .iter()
                .map(|c| format!("{}\u{1}", row[*c]))
                .collect();
            let idx = by_key.entry(key).or_default();
            let mut merged = false;
            for i in idx.iter() {
                let mergeable = row
                    .iter()
                    .all(|(k, v)| out[*i].get(k).is_none_or(|e| e == v));
                if mergeable {
                    out[*i].extend(row.clone());
                    merged = true;
                }
            }
            if !merged {
                out.push(row.clone());
                idx.push(out.len() - 1);
            }
        }
    }
    out
}

/// An XY chart: every series a frame (Time and its value, named by its display name), joined on
/// Time as its joinByField says (inner: only times every frame has; outer: every time), then
/// x is the field `options.dims.x` names and each other field a y: a point wherever a row has
/// both.
fn xy(panel: &Json, results: &[(&Json, Vec<Json>)]) -> Result<XyPoints, String> {
    let frames: Vec<Line> = results.iter().flat_map(|(t, r)| lines(t, r, &[])).collect();
    let join = (panel["transformations"].as_array().into_iter().flatten())
        .find(|t| t["id"] == "joinByField")
        .ok_or("an XY chart without a join on Time")?;
    let inner = match join["options"]["mode"].as_str() {
        Some("inner") => true,
        Some("outer") | None => false,
        Some(m) => return Err(format!("join mode {m} not modelled")),
    };
    let key = |t: f64| (t * 1000.0).round() as i64;
    let by_frame: Vec<BTreeMap<i64, f64>> = frames
        .iter()
        .map(|l| l.points.iter().map(|(t, v)| (key(*t), *v)).collect())
        .collect();
    let mut times: BTreeSet<i64> = by_frame.iter().flat_map(|m| m.keys().copied()).collect();
    if inner {
        times.retain(|t| by_frame.iter().all(|m| m.contains_key(t)));
    }
    let x_name = panel["options"]["dims"]["x"]
        .as_str()
        .ok_or("an XY chart without dims.x")?;
    // No x series (no discard known yet, say): the chart has no points.
    let Some(xi) = frames.iter().position(|l| l.name == x_name) else {
        return Ok(BTreeMap::new());
    };
    let mut out = XyPoints::new();
    for (i, l) in frames.iter().enumerate() {
        if i == xi {
            continue;
        }
        let pts = out.entry(l.name.clone()).or_default();
        for t in &times {
            if let (Some(x), Some(y)) = (by_frame[xi].get(t), by_frame[i].get(t)) {
                pts.push((*t as f64 / 1000.0, *x, *y));
            }
        }
    }
    Ok(out)
}
