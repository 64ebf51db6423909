//! The HTML report as a browser shows it: a page made from a store with a known story is
//! opened in headless Chromium, which must find the charts' paths in its DOM and paint them
//! (the screenshot holds the measured lines' and the dashed forecast lines' colours).

use crate::support::browser::{chromium, count_colours};
use crate::support::story::Story;
use crate::support::*;
use ssdwatch::history::store::FILE_NAME;
use std::process::Command;

#[test]
fn the_html_report_draws_its_charts_in_a_real_browser() {
    let test = "the_html_report_draws_its_charts_in_a_real_browser";
    if !require_cmd(test, "chromium", "chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    drop(Story::small(60).store(dir.path()));
    let page = dir.path().join("report.html");
    let out = Command::new(bin())
        .args(["report", "--store"])
        .arg(dir.path().join(FILE_NAME))
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch).
    assert!(!html.contains("<script"), "no JavaScript");
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    assert!(
        !html.contains(" src=") && !html.contains("<link"),
        "no external resource"
    );

    // The DOM Chromium built: every chart an <svg> with non-empty paths, the usage and wear
    // charts each with a dashed forecast line.
    let dom = chromium(&["--dump-dom", &format!("file://{}", page.display())]);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    let svgs = dom.matches("<svg").count();
    // 2 filesystems, 1 drive's wear, the latency curve, TRIM and idle recoveries.
    assert_eq!(svgs, 6, "{dom}");
    let paths_with = |class: &str| {
        dom.match_indices(&format!("<path class=\"{class}\" d=\"M"))
            .map(|(i, _)| {
                let d = &dom[i..];
                let d = &d[d.find("d=\"").unwrap() + 3..];
                d[..d.find('"').unwrap()].matches('L').count()
            })
            .collect::<Vec<_>>()
    };
    let measured = paths_with("measured");
    assert_eq!(measured.len(), 6, "{measured:?}");
    assert!(
        measured.iter().all(|&n| n >= 3),
        "each line has points: {measured:?}"
    );
    let forecast = paths_with("forecast");
    assert_eq!(forecast, vec![1, 1], "usage and wear forecasts");
    assert!(dom.contains("full 20"), "the predicted-full marker");
    // The stack under the database filesystem, the thin pool marked as what runs out first.
    let layers = &dom[dom
        .find("<table class=\"layers\">")
        .expect("the layers table")..];
    let layers = &layers[..layers.find("</table>").unwrap()];
    assert_eq!(
        layers.matches("<tr").count(),
        3,
        "header, filesystem, pool: {layers}"
    );
    assert!(
        layers.contains("<tr class=\"warn\"><td>thin pool vg0-pool-tpool</td><td>40.00 GB</td><td>1.20 TB</td><td>96.7 %</td></tr>"),
        "{layers}"
    );
    assert!(dom.contains("Runs out first: <b>thin pool vg0-pool-tpool</b>"));

    // The pixels: Chromium painted the measured lines and the forecast lines.
    let shot = dir.path().join("report.png");
    let s = chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1000,2700",
        &format!("file://{}", page.display()),
    ]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let counts = count_colours(
        &shot,
        &[(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0xff, 0x7f, 0x0e)],
    );
    assert!(counts[0] > 500, "measured lines painted: {counts:?}");
    assert!(counts[1] > 100, "forecast lines painted: {counts:?}");
    assert!(
        counts[2] > 100,
        "p99 and before-event lines painted: {counts:?}"
    );
    if let Some(to) = std::env::var_os("SSDWATCH_REPORT_EXAMPLE_PNG") {
        std::fs::copy(&shot, to).unwrap();
    }
}
