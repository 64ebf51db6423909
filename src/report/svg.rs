//! Line charts as inline SVG, written by hand: axes with a few ticks, polylines, dashed
//! forecast lines and labelled vertical markers. No script, no external reference; a chart is
//! a few kilobytes whatever the history's length (series are thinned to [`MAX_POINTS`]).

use crate::time::DAY_F64;
use std::fmt::Write;

/// Points drawn per series at most: two years of days fit; longer series keep each bucket's
/// extremes so a spike is not thinned away.
pub const MAX_POINTS: usize = 400;

const W: f64 = 720.0;
const H: f64 = 260.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 36.0;

/// How a series is drawn; the class names are what the page's style and its tests use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Style {
    /// A measured series: a solid line.
    Measured,
    /// A second measured series (p99, "after"): a solid line in another colour.
    Second,
    /// A forecast: dashed.
    Forecast,
    /// A limit (the size, 100 %): thin and grey.
    Limit,
    /// Runs made while the filesystem had deleted space not trimmed yet.
    Untrimmed,
}

impl Style {
    fn class(self) -> &'static str {
        match self {
            Style::Measured => "measured",
            Style::Second => "second",
            Style::Forecast => "forecast",
            Style::Limit => "limit",
            Style::Untrimmed => "untrimmed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
    /// Draw a dot at each point (few points: curve bins, events).
    pub dots: bool,
}

/// How an axis's values are printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Axis {
    /// Unix seconds, printed as dates.
    Time,
    Bytes,
    Seconds,
    Ratio,
}

impl Axis {
    /// `v` printed for a tick on an axis spanning `span` (a time axis shorter than 4 days
    /// prints the hour too: a new host's first day is not five ticks of one date).
    fn fmt(self, v: f64, span: f64) -> String {
        match self {
            Axis::Time if span < 4.0 * DAY_F64 => super::datetime(v as i64),
            Axis::Time => super::date(v as i64),
            Axis::Bytes => super::bytes(v),
            Axis::Seconds => super::latency(v),
            Axis::Ratio => format!("{:.0} %", v * 100.0),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Vertical markers: (x, label), e.g. the predicted-full date.
    pub markers: Vec<(f64, String)>,
    /// Start the y axis at 0 (usage, wear); otherwise at the data's low.
    pub y_from_zero: bool,
    /// A fixed x range (a fill ratio's 0-1); otherwise the data's, widened to
    /// [`MIN_TIME_SPAN`] on a time axis.
    pub x_range: Option<(f64, f64)>,
}

/// The narrowest time axis: a first day's single sample or 15 minutes of them are drawn on 20
/// minutes, so its 5 ticks fall on 5 different minutes (never one time printed five times).
pub const MIN_TIME_SPAN: f64 = 1200.0;

/// Text made safe in HTML and SVG, between tags and inside a quoted attribute: the one HTML
/// escaper of the report.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// At most [`MAX_POINTS`] points: each bucket keeps its lowest and highest point, in x order.
pub fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let per = points.len().div_ceil(MAX_POINTS / 2);
    let mut out = Vec::with_capacity(MAX_POINTS);
    for chunk in points.chunks(per) {
        let lo = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(&lo), Some(&hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    }
    out.dedup();
    out
}

/// The chart as an `<svg>` element, or a short note when no series has a point.
pub fn render(c: &Chart) -> String {
    let pts = c
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    for (x, _) in &c.markers {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
    }
    if x0 > x1 {
        return format!("<p class=\"nochart\">{}: no data yet</p>", esc(&c.title));
    }
    if c.y_from_zero {
        y0 = y0.min(0.0);
    }
    let min_span = match c.x {
        Axis::Time => MIN_TIME_SPAN,
        _ => 0.0,
    };
    if let Some((lo, hi)) = c.x_range.filter(|(lo, hi)| lo < hi) {
        (x0, x1) = (lo, hi);
    } else if x1 - x0 < min_span.max(f64::MIN_POSITIVE) {
        // One point (or a span too short to tell its ticks apart): centred on a readable span.
        let (mid, half) = ((x0 + x1) / 2.0, min_span.max(2.0) / 2.0);
        (x0, x1) = (mid - half, mid + half);
    }
    if y1 - y0 <= 0.0 {
        y1 = y0 + y0.abs().max(1e-9);
    }
    y1 += (y1 - y0) * 0.05;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\"><title>{}</title>",
        esc(&c.title)
    );
    let _ = write!(
        o,
        "<text class=\"title\" x=\"{LEFT}\" y=\"18\">{}</text>",
        esc(&c.title)
    );
    // Axes and 5 ticks each.
    let _ = write!(
        o,
        "<path class=\"axis\" d=\"M{LEFT} {TOP}V{:.1}H{:.1}\"/>",
        TOP + ph,
        LEFT + pw
    );
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let (xv, yv) = (x0 + f * (x1 - x0), y0 + f * (y1 - y0));
        let (x, y) = (sx(xv), sy(yv));
        let _ = write!(
            o,
            "<path class=\"grid\" d=\"M{LEFT} {y:.1}H{:.1}\"/><text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 4.0,
            y + 4.0,
            esc(&c.y.fmt(yv, y1 - y0))
        );
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            o,
            "<text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            TOP + ph + 16.0,
            esc(&c.x.fmt(xv, x1 - x0))
        );
    }
    for (x, label) in &c.markers {
        let x = sx(*x);
        let _ = write!(
            o,
            "<path class=\"marker\" d=\"M{x:.1} {TOP}V{:.1}\"/><text class=\"mlabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            TOP + ph,
            x - 3.0,
            TOP + 12.0,
            esc(label)
        );
    }
    let mut legend_x = LEFT + pw;
    for s in c.series.iter().rev() {
        let p: Vec<(f64, f64)> = thin(&s.points)
            .into_iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        if p.is_empty() {
            continue;
        }
        let mut d = String::new();
        // A limit seen at one time only (a first day's size) is still a limit: across the plot.
        let p = match (s.style, p.first()) {
            (Style::Limit, Some(&(x, y))) if p.iter().all(|q| q.0 == x) => vec![(x0, y), (x1, y)],
            _ => p,
        };
        for (i, (x, y)) in p.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if i == 0 { "M" } else { "L" },
                sx(*x),
                sy(*y)
            );
        }
        let _ = write!(
            o,
            "<path class=\"{}\" d=\"{d}\"><title>{}</title></path>",
            s.style.class(),
            esc(&s.name)
        );
        // A single point is a path of no length: drawn as a dot, or nothing would show.
        if s.dots || (p.len() == 1 && s.style != Style::Limit) {
            for (x, y) in &p {
                let _ = write!(
                    o,
                    "<circle class=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"/>",
                    s.style.class(),
                    sx(*x),
                    sy(*y)
                );
            }
        }
        legend_x -= 8.0 + 6.5 * s.name.chars().count() as f64;
        let _ = write!(
            o,
            "<text class=\"legend {}\" x=\"{legend_x:.1}\" y=\"34\">{}</text>",
            s.style.class(),
            esc(&s.name)
        );
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_draws_each_series_scaled_into_the_plot() {
        let c = Chart {
            title: "used <bytes>".into(),
            x: Axis::Time,
            y: Axis::Bytes,
            series: vec![
                Series {
                    name: "used".into(),
                    style: Style::Measured,
                    points: vec![(0.0, 0.0), (DAY_F64, 50.0), (2.0 * DAY_F64, 100.0)],
                    dots: false,
                },
                Series {
                    name: "forecast".into(),
                    style: Style::Forecast,
                    points: vec![(172_800.0, 100.0), (259_200.0, 200.0)],
                    dots: false,
                },
            ],
            markers: vec![(259_200.0, "full".into())],
            y_from_zero: true,
            x_range: None,
        };
        let s = render(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("used &lt;bytes&gt;"), "titles are escaped");
        // The first point at the plot's bottom-left corner; the forecast ends at the right edge.
        assert!(
            s.contains("<path class=\"measured\" d=\"M78.0 224.0L"),
            "{s}"
        );
        assert!(s.contains("<path class=\"forecast\" d=\"M"), "{s}");
        assert!(s.contains("L704.0 "), "{s}");
        assert!(s.contains("class=\"marker\""));
        assert!(s.contains("1970-01-04"), "time ticks are dates: {s}");
        let empty = Chart {
            series: vec![],
            markers: vec![],
            ..c
        };
        assert!(render(&empty).contains("no data yet"));
    }

    #[test]
    fn long_series_are_thinned_keeping_their_extremes() {
        let p: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (i as f64, if i == 5_003 { 1e6 } else { i as f64 }))
            .collect();
        let t = thin(&p);
        assert!(t.len() <= MAX_POINTS, "{}", t.len());
        assert!(t.contains(&(5_003.0, 1e6)), "the spike is kept");
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0), "in x order");
        assert_eq!(t.first(), Some(&(0.0, 0.0)));
    }

    /// A first day: one sample is a dot on a 20-minute axis whose ticks are 5 different times;
    /// a fill chart with one bin keeps its 0-100 % axis.
    #[test]
    fn a_single_point_is_drawn_on_readable_axes() {
        let t = 1_800_000_000.0;
        let one = Chart {
            title: "used".into(),
            x: Axis::Time,
            y: Axis::Bytes,
            series: vec![Series {
                name: "used".into(),
                style: Style::Measured,
                points: vec![(t, 5e9)],
                dots: false,
            }],
            markers: vec![],
            y_from_zero: true,
            x_range: None,
        };
        let mut with_size = one.clone();
        with_size.series.push(Series {
            name: "size".into(),
            style: Style::Limit,
            points: vec![(t, 10e9), (t, 10e9)],
            dots: false,
        });
        let s = render(&with_size);
        assert!(s.contains("<circle class=\"measured\" cx=\"391.0\""), "{s}");
        assert!(
            s.contains("<path class=\"limit\" d=\"M78.0 ") && s.contains("L704.0 "),
            "the size across the plot: {s}"
        );
        let ticks: Vec<&str> = s
            .match_indices("text-anchor=\"")
            .filter_map(|(i, _)| {
                let rest = &s[i..];
                let v = &rest[rest.find('>')? + 1..];
                Some(&v[..v.find('<')?])
            })
            .filter(|v| v.contains(':'))
            .collect();
        assert_eq!(ticks.len(), 5, "{ticks:?}");
        let mut distinct = ticks.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 5, "five different times: {ticks:?}");

        let fill = Chart {
            x: Axis::Ratio,
            y: Axis::Seconds,
            series: vec![Series {
                name: "p50".into(),
                style: Style::Measured,
                points: vec![(0.05, 1e-3)],
                dots: true,
            }],
            x_range: Some((0.0, 1.0)),
            ..one
        };
        let s = render(&fill);
        for want in [">0 %<", ">25 %<", ">50 %<", ">75 %<", ">100 %<"] {
            assert!(s.contains(want), "{want}: {s}");
        }
        assert!(!s.contains(">-"), "no negative tick: {s}");
        assert!(!s.contains("NaN"), "{s}");
    }
}
