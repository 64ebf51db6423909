//! `ssdwatch report` on the history bench's host after 2 years: 50 filesystems, 10 drives and
//! one probe target (sync_write_4k every 5 minutes, ~210,000 runs), built from a store written
//! as the daemon would (tests/it/support/story.rs). Targets: text and HTML each ≤ 1 s, the HTML
//! page ≤ 1 MiB. Also times the curves and recoveries alone (what the daemon's forecast pass
//! adds) and the OpenMetrics export of the same store.
//!
//! `cargo bench --bench report` simulates 730 days; `cargo test --bench report` 16;
//! REPORT_BENCH_DAYS overrides both.
//!
//! Then the large hosts: 50, 500 and 2,000 filesystems (and a drive per 8 of them) with 14 days
//! of raw rows at the default 5 minutes, written by `ssdwatch history fill`'s code (the store's
//! own writes and downsampling), each reported text and HTML. The report's cost should follow
//! what it shows, not series × stored rows. `cargo test --bench report` writes 20 filesystems
//! over 2 days; REPORT_SCALE_FS (`50,500`) and REPORT_SCALE_DAYS override the sizes.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/support/story.rs"]
mod story;

use criterion::{Criterion, criterion_group, criterion_main};
use ssdwatch::history::store::FILE_NAME;
use ssdwatch::history::{DriveKey, DriveSample, FsKey, FsSample, HistoryConfig, Store};
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
    let n = ssdwatch::history::export::export(&store, now, None, &mut sink).unwrap();
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

/// The sizes of the large hosts: (filesystems, days of raw rows).
fn scales() -> (Vec<usize>, i64) {
    let fs = std::env::var("REPORT_SCALE_FS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| {
            if full_mode() {
                vec![50, 500, 2000]
            } else {
                vec![20]
            }
        });
    let days = std::env::var("REPORT_SCALE_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(if full_mode() { 14 } else { 2 });
    (fs, days)
}

/// A store holding one sample of `n` filesystems and `n / 8` drives at `t`: the series a
/// filled store copies.
fn template(dir: &std::path::Path, n: usize, t: i64) -> Store {
    let mut s = Store::open(dir, &HistoryConfig::default()).unwrap();
    let size: u64 = 1 << 40;
    let fss: Vec<FsSample> = (0..n)
        .map(|i| FsSample {
            key: FsKey {
                mountpoint: format!("/srv/db{i:04}"),
                uuid: Some(format!("uuid-{i}")),
            },
            device: format!("nvme{}n1p{}", i / 8, i % 8 + 1),
            t,
            size_bytes: size,
            // From a quarter to three quarters full, growing 0.1 % a day (fill.rs).
            avail_bytes: size / 4 + (i as u64 % 50) * (size / 100),
            free_bytes: size / 4 + (i as u64 % 50) * (size / 100) + (1 << 30),
            files_free: Some(1_000_000),
        })
        .collect();
    s.record_fs(&fss).unwrap();
    let drives: Vec<DriveSample> = (0..n.div_ceil(8))
        .map(|i| DriveSample {
            key: DriveKey {
                wwn: Some(format!("eui.{i:016x}")),
                serial: Some(format!("S{i:06}")),
                model: Some("SAMSUNG MZQL23T8HCLS-00A07".into()),
            },
            kernel_name: format!("nvme{i}n1"),
            capacity_bytes: Some(3_840_000_000_000),
            t,
            wear_used_ratio: Some(0.2),
            spare_ratio: Some(1.0),
            host_written_bytes: Some(900e12 as u64),
            nand_written_bytes: Some(1200e12 as u64),
            media_errors: Some(0),
            power_on_hours: Some(20_000),
            temperature_celsius: Some(40.0),
            discarded_bytes: Some(100e12 as u64),
            health: Default::default(),
        })
        .collect();
    s.record_drives(&drives).unwrap();
    s
}

fn scale(_: &mut Criterion) {
    let (sizes, days) = scales();
    let now = 1_790_000_000 / 300 * 300;
    // REPORT_SCALE_DIR keeps each store (and reuses it on the next run) with the report's
    // JSON beside it, so two builds' reports of the same store can be compared.
    let keep = std::env::var_os("REPORT_SCALE_DIR").map(std::path::PathBuf::from);
    for n in sizes {
        let tmp = tempfile::tempdir().unwrap();
        let dir = keep.as_ref().map_or(tmp.path().to_path_buf(), |k| {
            k.join(format!("{n}fs-{days}d"))
        });
        let state = dir.join("state");
        let path = state.join(FILE_NAME);
        if !path.exists() {
            let like = template(&dir.join("template"), n, now);
            let mut store = Store::open(&state, &HistoryConfig::default()).unwrap();
            let wall = Instant::now();
            let filled = ssdwatch::history::fill::fill(&mut store, &like, days, 300, now).unwrap();
            eprintln!(
                "report scale: {n} filesystems, {} drives, {days} days: {} samples written in {:.1} s",
                filled.drives,
                filled.samples,
                wall.elapsed().as_secs_f64(),
            );
        }
        eprintln!(
            "report scale: {n} filesystems, {days} days: store {:.1} MiB",
            std::fs::metadata(&path).unwrap().len() as f64 / (1 << 20) as f64
        );
        for html in [false, true] {
            let t = Instant::now();
            let store = Store::open_read_only(&path).unwrap();
            let r = report::build(&store, "big", now, &[], None, &[]).unwrap();
            assert_eq!(r.filesystems.len(), n);
            let out = if html {
                report::html::render(&r)
            } else {
                report::text::render(&r)
            };
            eprintln!(
                "report scale: {n} filesystems, {days} days: {} {:.3} s ({} KiB)",
                if html { "HTML" } else { "text" },
                t.elapsed().as_secs_f64(),
                out.len() / 1024
            );
            if keep.is_some() {
                std::fs::write(dir.join("report.json"), report::json(&r)).unwrap();
            }
        }
    }
}

criterion_group!(benches, bench, scale);
criterion_main!(benches);
