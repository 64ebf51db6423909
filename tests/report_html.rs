//! The HTML report as a browser shows it: a page made from a store with a known story is
//! opened in headless Chromium, which must find the charts' paths in its DOM and paint them
//! (the screenshot holds the measured lines' and the dashed forecast lines' colours).

#[path = "support/story.rs"]
mod story;
mod support;

use ssdwatch::history::store::FILE_NAME;
use std::path::Path;
use std::process::Command;
use story::Story;
use support::*;

/// Pixels of each (r, g, b) colour in a PNG, decoded with Python's zlib (8-bit RGB or RGBA,
/// non-interlaced: what Chromium writes).
fn count_colours(png: &Path, colours: &[(u8, u8, u8)]) -> Vec<usize> {
    let script = r#"
import sys, zlib, struct
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos+8]); body = data[pos+8:pos+8+n]; pos += 12 + n
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        bpp = 3 if ctype == 2 else 4
    elif kind == b'IDAT':
        idat += body
raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = []
for y in range(h):
    f = raw[y*(stride+1)]; line = bytearray(raw[y*(stride+1)+1:(y+1)*(stride+1)])
    for i in range(stride):
        a = line[i-bpp] if i >= bpp else 0; b = prev[i]; c = prev[i-bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p-a), abs(p-b), abs(p-c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    out.append(bytes(line)); prev = line
want = [tuple(int(x) for x in c.split(',')) for c in sys.argv[2:]]
counts = [0] * len(want)
for line in out:
    for i in range(0, len(line), bpp):
        px = tuple(line[i:i+3])
        for k, c in enumerate(want):
            if px == c: counts[k] += 1
print(' '.join(map(str, counts)))
"#;
    let mut args = vec![
        "-c".to_string(),
        script.to_string(),
        png.display().to_string(),
    ];
    args.extend(colours.iter().map(|(r, g, b)| format!("{r},{g},{b}")));
    let out = run(
        system_python(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    out.split_whitespace()
        .map(|n| n.parse().expect("a count"))
        .collect()
}

fn chromium(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", home.path().display()))
        .args(args)
        .env("HOME", home.path())
        .output()
        .expect("run chromium")
}

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
