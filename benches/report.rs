//! `ssdwatch report` on the history bench's host after 2 years: 50 filesystems, 10 drives and
//! one probe target (sync_write_4k every 5 minutes, ~210,000 runs), built from a store written
//! as the daemon would (tests/it/support/story.rs). Targets: text and HTML each ≤ 1 s, the HTML
//! page ≤ 1 MiB. Also times the curves and recoveries alone (what the daemon's forecast pass
//! adds) and the OpenMetrics export of the same store.
//!
//! `cargo bench --bench report` simulates 730 days; `cargo test --bench report` 16;
//! REPORT_BENCH_DAYS overrides both.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/support/story.rs"]
mod story;

use criterion::{Criterion, criterion_group, criterion_main};
use ssdwatch::history::Store;
use ssdwatch::history::store::FILE_NAME;
use ssdwatch::report;
use std::time::Instant;
use story::Story;

fn full_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn days() -> i64 {
    std::env::var("REPORT_BENCH_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(if full_mode() { 730 } else { 16 })
}

fn bench(c: &mut Criterion) {
    let days = days();
    let dir = tempfile::tempdir().unwrap();
    let s = Story {
        extra_fs: 48,
        extra_drives: 9,
        fs_every: 300,
        ..Story::small(days)
    };
    let wall = Instant::now();
    drop(s.store(dir.path()));
    let path = dir.path().join(FILE_NAME);
    eprintln!(
        "report: {days} days of 50 filesystems, 10 drives and a probe target written in {:.1} s; store {:.1} MiB",
        wall.elapsed().as_secs_f64(),
        std::fs::metadata(&path).unwrap().len() as f64 / (1 << 20) as f64
    );
    let now = s.end;
    let once = |html: bool| {
        let t = Instant::now();
        let store = Store::open_read_only(&path).unwrap();
        let r = report::build(&store, "db1", now, &[], None, &[]).unwrap();
        let out = if html {
            report::html::render(&r)
        } else {
            report::text::render(&r)
        };
        (t.elapsed().as_secs_f64(), out.len())
    };
    let (text_s, text_len) = once(false);
    let (html_s, html_len) = once(true);
    eprintln!(
        "report: text {:.3} s ({} KiB), HTML {:.3} s ({:.1} KiB; targets ≤ 1 s, ≤ 1 MiB)",
        text_s,
        text_len / 1024,
        html_s,
        html_len as f64 / 1024.0
    );
    // What the daemon's forecast pass adds for the curve and recovery gauges.
    let store = Store::open_read_only(&path).unwrap();
    let t = Instant::now();
    let groups = ssdwatch::history::degradation::analyse(&store, 0, now).unwrap();
    eprintln!(
        "report: curves and recoveries of {} group(s) (the forecast pass's share) in {:.3} s",
        groups.len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let mut sink = std::io::sink();
    let n = report::openmetrics::export(&store, now, None, &mut sink).unwrap();
    eprintln!(
        "report: OpenMetrics export of {n} samples in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let mut g = c.benchmark_group("report");
    g.sample_size(10);
    g.bench_function("text", |b| b.iter(|| once(false)));
    g.bench_function("html", |b| b.iter(|| once(true)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
