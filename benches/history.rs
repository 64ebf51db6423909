//! The history store at its design load: 10 drives and 50 filesystems over 2 years at the
//! defaults, then the file size (target ≤ 50 MiB) and one forecast pass over every series
//! (target ≤ 50 ms).
//!
//! What is simulated, per the defaults: a filesystem sample kept every 5 min (`raw_interval`;
//! the collector's 15 s samples in between are not stored), a SMART sample every 15 min,
//! `downsample` every simulated hour, 14 days raw and 2 years hourly. 10 of the filesystems are
//! busy databases (GBs a day, a weekly log sawtooth, a big delete when they pass 85%), 40 are
//! quiet (MBs a day). Each drive gets a weekly fstrim burst (two also hourly discards) and 8
//! idle periods a day. Probes are measured apart: one target at the probe defaults (3 kinds
//! every 5 min, seq_write daily), since their full resolution scales with the targets a user
//! configures.
//!
//! `cargo bench --bench history` simulates 730 days; `cargo test --bench history` (criterion's
//! test mode runs each benchmark once) simulates 16; HISTORY_BENCH_DAYS overrides both.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use ssdwatch::history::curve::CurveBin;
use ssdwatch::history::forecast::{
    Endurance, band_points, forecast_drive, forecast_filesystem_days, theil_sen_band,
};
use ssdwatch::history::{
    DiscardEvent, DriveKey, DriveSample, FsKey, FsSample, HistoryConfig, IdlePeriod, ProbeRecord,
    Store,
};
use ssdwatch::probe::ProbeKind;
use std::time::{Duration, Instant};

const DAY: i64 = 86_400;
const NOW: i64 = 1_893_456_000; // 2030-01-01T00:00:00Z
const GB: f64 = 1e9;

fn full_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn days() -> i64 {
    std::env::var("HISTORY_BENCH_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(if full_mode() { 730 } else { 16 })
}

/// xorshift64*: deterministic noise without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in -1..1.
    fn sym(&mut self) -> f64 {
        self.next() * 2.0 - 1.0
    }
}

struct Fs {
    key: FsKey,
    size: f64,
    data: f64,
    growth_per_s: f64,
    logs_per_s: f64,
    noise: f64,
    files_free: f64,
}

struct Drive {
    key: DriveKey,
    host: f64,
    nand: f64,
    per_s: f64,
    wa: f64,
    discarded: f64,
}

fn filesystems() -> Vec<Fs> {
    (0..50)
        .map(|i| {
            let busy = i < 10;
            Fs {
                key: FsKey {
                    mountpoint: if busy {
                        format!("/srv/db{i}")
                    } else {
                        format!("/var/lib/app{i}")
                    },
                    uuid: Some(format!("6f1c2d3e-0000-4000-8000-{i:012}")),
                },
                size: if busy {
                    3.84e12
                } else {
                    50e9 + i as f64 * 10e9
                },
                data: if busy { 1e12 } else { 10e9 },
                growth_per_s: if busy { (2.0 + i as f64) * GB } else { 50e6 } / DAY as f64,
                logs_per_s: if busy { 20.0 * GB / DAY as f64 } else { 0.0 },
                noise: if busy { 50e6 } else { 1e6 },
                files_free: 10e6,
            }
        })
        .collect()
}

fn drives() -> Vec<Drive> {
    (0..10)
        .map(|i| Drive {
            key: DriveKey {
                wwn: Some(format!("eui.0025388b91b2c0{i:02x}")),
                serial: Some(format!("S6EWNA0R{i:07}")),
                model: Some("SAMSUNG MZQL23T8HCLS-00A07".into()),
            },
            host: 100e12,
            nand: 250e12,
            per_s: (50.0 + 15.0 * i as f64) * GB / DAY as f64,
            wa: 2.0 + 0.1 * i as f64,
            discarded: 10e12,
        })
        .collect()
}

struct Sim {
    store: Store,
    ingest: Duration,
    downsample: Duration,
}

/// Runs the daemon's writes from `NOW - days` to `NOW`, an hour of samples per transaction.
fn simulate(dir: &std::path::Path, days: i64) -> Sim {
    let cfg = HistoryConfig::default();
    let mut store = Store::open(dir, &cfg).expect("open");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut fss = filesystems();
    let mut drs = drives();
    let (mut ingest, mut downsample) = (Duration::ZERO, Duration::ZERO);
    let start = NOW - days * DAY;
    let mut t = start;
    while t < NOW {
        let hour_end = t + 3600;
        let (mut fs_batch, mut drive_batch) = (Vec::new(), Vec::new());
        let (mut discards, mut idles) = (Vec::new(), Vec::new());
        while t < hour_end {
            for f in &mut fss {
                f.data += f.growth_per_s * 300.0 * (1.0 + 0.5 * rng.sym());
                let logs = f.logs_per_s * ((t - start) % (7 * DAY)) as f64;
                if f.data + logs > 0.85 * f.size {
                    f.data *= 0.6; // the DBA drops an old partition
                }
                let used = (f.data + logs + f.noise * rng.sym()).clamp(0.0, f.size);
                f.files_free = (f.files_free - 10.0 * rng.next()).max(0.0);
                fs_batch.push(FsSample {
                    key: f.key.clone(),
                    device: "dm-0".into(),
                    t,
                    size_bytes: f.size as u64,
                    avail_bytes: (f.size * 0.95 - used).max(0.0) as u64,
                    free_bytes: (f.size - used) as u64,
                    files_free: Some(f.files_free as u64),
                });
            }
            if t % 900 == 0 {
                for (i, d) in drs.iter_mut().enumerate() {
                    let w = d.per_s * 900.0 * (1.0 + 0.3 * rng.sym());
                    d.host += w;
                    d.nand += w * d.wa;
                    d.discarded += w * 0.7;
                    drive_batch.push(DriveSample {
                        key: d.key.clone(),
                        kernel_name: format!("nvme{i}n1"),
                        capacity_bytes: Some(3_840_000_000_000),
                        t,
                        wear_used_ratio: Some((d.nand / 28e15 * 100.0).floor() / 100.0),
                        spare_ratio: Some(1.0),
                        host_written_bytes: Some(d.host as u64),
                        nand_written_bytes: Some(d.nand as u64),
                        media_errors: Some(0),
                        power_on_hours: Some(((t - start) / 3600 + 20_000) as u64),
                        temperature_celsius: Some(38.0 + 5.0 * rng.sym()),
                        discarded_bytes: Some(d.discarded as u64),
                        // What a healthy NVMe drive's logs say (a row an hour in the store).
                        health: ssdwatch::history::DriveHealthRecord {
                            error_log_entries: Some(14),
                            self_test: Some("short passed".into()),
                            self_test_age_seconds: Some(86_400),
                            temperature_warning_celsius: Some(70.0),
                            above_warning_seconds: Some(0),
                            durability: Some("none".into()),
                        },
                    });
                }
            }
            t += 300;
        }
        for (i, d) in drs.iter().enumerate() {
            let weekly = (t - start) % (7 * DAY) == 0;
            if weekly || i < 2 {
                discards.push(DiscardEvent {
                    drive: d.key.clone(),
                    t: t - 1800,
                    bytes: if weekly { 200e9 as u64 } else { 2e9 as u64 },
                });
            }
            if (t / 3600) % 3 == 0 {
                idles.push(IdlePeriod {
                    drive: d.key.clone(),
                    start: t - 2400,
                    seconds: 600 + (rng.next() * 1200.0) as u64,
                });
            }
        }
        let w = Instant::now();
        store.record_fs(&fs_batch).expect("fs");
        store.record_drives(&drive_batch).expect("drives");
        store.record_discards(&discards).expect("discards");
        store.record_idle(&idles).expect("idle");
        ingest += w.elapsed();
        let d = Instant::now();
        store.downsample(t).expect("downsample");
        downsample += d.elapsed();
    }
    Sim {
        store,
        ingest,
        downsample,
    }
}

/// One probe target at the probe defaults, alone in a store: bytes per result.
fn probe_cost(dir: &std::path::Path, days: i64) -> (u64, usize) {
    let mut store = Store::open(dir, &HistoryConfig::default()).expect("open");
    let mut rng = Rng(7);
    let mut n = 0;
    let drive = drives()[0].key.clone();
    for day in 0..days {
        let mut batch = Vec::new();
        for slot in 0..288 {
            let t = NOW - (days - day) * DAY + slot * 300;
            let mut kinds = vec![
                ProbeKind::SyncWrite4k,
                ProbeKind::RandRead4k,
                ProbeKind::RandWrite4k,
            ];
            if slot == 0 {
                kinds.push(ProbeKind::SeqWrite);
            }
            for kind in kinds {
                let p50 = 60e-6 * (1.0 + rng.next());
                batch.push(ProbeRecord {
                    target: "/srv/db0".into(),
                    drive: Some(drive.clone()),
                    t,
                    kind,
                    ops: 16,
                    p50_seconds: p50,
                    // 16 writes: no p99 (docs/metrics.md), as the daemon records them.
                    p99_seconds: None,
                    max_seconds: p50 * (5.0 + 20.0 * rng.next()),
                    throughput_bytes_per_second: (kind == ProbeKind::SeqWrite)
                        .then(|| 1.5e9 * (1.0 + 0.2 * rng.sym())),
                    fill_ratio: Some(0.4 + 0.3 * rng.next()),
                    since_discard_seconds: Some((t % (7 * DAY)) as f64),
                    idle_seconds: Some(30.0 * rng.next()),
                    utilization_ratio: Some(0.2 * rng.next()),
                    utilization_before_ratio: Some(0.2 * rng.next()),
                    written_since_discard_bytes: Some((rng.next() * 500e9) as u64),
                    untrimmed_ratio: Some(0.02 * rng.next()),
                });
                n += 1;
            }
        }
        store.record_probes(&batch).expect("probes");
    }
    (store.size_bytes().expect("size"), n)
}

/// Where the bytes go: pages per table and kind, their unused bytes, rows and payload.
fn page_report(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).expect("open for the page report");
    let mut st = conn
        .prepare(
            "SELECT name, pagetype, count(*), sum(pgsize), sum(unused), sum(ncell), sum(payload) \
             FROM dbstat GROUP BY name, pagetype ORDER BY sum(pgsize) DESC LIMIT 12",
        )
        .expect("dbstat");
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .expect("dbstat rows");
    for (name, kind, pages, bytes, unused, cells, payload) in rows {
        eprintln!(
            "history:   {name:<14} {kind:<9} {pages:>7} pages {:>7.2} MiB, {:>3.0}% unused, {cells:>8} cells, {:>6.1} B payload/cell",
            bytes as f64 / (1 << 20) as f64,
            100.0 * unused as f64 / bytes.max(1) as f64,
            payload as f64 / cells.max(1) as f64
        );
    }
}

/// Reads every series' daily summaries and forecasts it, as the daemon would every
/// `forecast_interval`.
fn forecast_pass(store: &Store) -> usize {
    let mut n = 0;
    for f in store.filesystems().expect("filesystems") {
        let days = store.fs_days(f.id, NOW - 60 * DAY, NOW).expect("fs days");
        std::hint::black_box(forecast_filesystem_days(&days, NOW));
        n += 1;
    }
    for d in store.drives().expect("drives") {
        let pts = store.drive_days(d.id, 0, NOW).expect("drive days");
        let e = Endurance::Dwpd {
            dwpd: 1.0,
            capacity_bytes: 3.84e12,
            warranty_years: 5.0,
        };
        std::hint::black_box(forecast_drive(&pts, NOW, Some(e)));
        n += 1;
    }
    n
}

/// CPU time of the work forecast bands and performance-full add to a forecast pass, done
/// alone on the same inputs (the pass computes them inline, so "without" is the pass less
/// this): Sen's interval over each filesystem's last 30 days and each drive's wear window
/// (60 days, doubled until the wear took 4 levels, as the forecast picks it, thinned to 64
/// days), and the
/// performance-full assessment of 8 probe targets with all 12 fill bins.
fn added_work(store: &Store) -> (f64, f64, usize) {
    let mut inputs: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for f in store.filesystems().expect("filesystems") {
        let days = store.fs_days(f.id, NOW - 30 * DAY, NOW).expect("fs days");
        inputs.push(days.iter().map(|d| (d.day as f64, d.low)).unzip());
    }
    for d in store.drives().expect("drives") {
        let pts = store.drive_days(d.id, 0, NOW).expect("drive days");
        let mut daily: Vec<(f64, f64)> = Vec::new();
        for p in &pts {
            let Some(w) = p.wear_used_ratio else { continue };
            let day = p.t.div_euclid(DAY) as f64;
            match daily.last_mut() {
                Some(l) if l.0 == day => l.1 = w.last,
                _ => daily.push((day, w.last)),
            }
        }
        let (Some(first), Some(last)) = (daily.first(), daily.last()) else {
            continue;
        };
        let (first, last) = (first.0, last.0);
        let mut window = 60.0;
        let w = loop {
            let w: Vec<(f64, f64)> = daily
                .iter()
                .copied()
                .filter(|p| p.0 > last - window)
                .collect();
            let mut levels: Vec<f64> = w.iter().map(|p| p.1).collect();
            levels.dedup();
            if levels.len() >= 4 || last - window <= first {
                break w;
            }
            window *= 2.0;
        };
        inputs.push(band_points(&w));
    }
    // The median of 21 rounds: one cold round on a shared machine says more about the machine.
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let bands = median(
        (0..21)
            .map(|_| {
                let t = Instant::now();
                for (xs, ys) in &inputs {
                    std::hint::black_box(theil_sen_band(xs, ys));
                }
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    use ssdwatch::history::degradation::Group;
    use ssdwatch::history::slow;
    let groups: Vec<Group> = (0..8)
        .map(|i| Group {
            target: format!("/srv/db{i}"),
            mountpoint: Some(format!("/srv/db{i}")),
            device: Some(format!("nvme{i}n1")),
            drive: None,
            probe: ProbeKind::SyncWrite4k,
            runs: 12 * 1000,
            first_run: NOW - 730 * DAY,
            last_run: NOW,
            curve: (0..12)
                .map(|b| CurveBin {
                    bin: b,
                    runs: 1000,
                    p50_seconds: 1e-4 * (1.0 + b as f64 * 0.1),
                    p99_seconds: None,
                })
                .collect(),
            curve_max_fill: Some(0.99),
            curve_untrimmed: Vec::new(),
            trim: Vec::new(),
            idle: Vec::new(),
        })
        .collect();
    let forecasts = std::collections::BTreeMap::new();
    let slow = median(
        (0..21)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(slow::assess(&groups, &forecasts, &[], NOW));
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    (bands, slow, groups.len())
}

fn history(c: &mut Criterion) {
    let days = days();
    let dir = tempfile::tempdir().unwrap();
    let wall = Instant::now();
    let sim = simulate(dir.path(), days);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let file = std::fs::metadata(dir.path().join("history.db"))
        .unwrap()
        .len();
    eprintln!(
        "history: {days} days simulated in {:.1} s (ingest {:.1} s, downsample {:.1} s)",
        wall.elapsed().as_secs_f64(),
        sim.ingest.as_secs_f64(),
        sim.downsample.as_secs_f64()
    );
    eprintln!(
        "history: store {:.1} MiB in use, file {:.1} MiB (target ≤ 50 MiB at 730 days)",
        mib(sim.store.size_bytes().unwrap()),
        mib(file)
    );
    page_report(&dir.path().join("history.db"));
    let reopen = Instant::now();
    drop(Store::open(dir.path(), &HistoryConfig::default()).expect("reopen"));
    eprintln!(
        "history: opening it again (integrity check included): {:.0} ms",
        reopen.elapsed().as_secs_f64() * 1e3
    );
    let pdir = tempfile::tempdir().unwrap();
    let (pbytes, pn) = probe_cost(pdir.path(), days.min(if full_mode() { 60 } else { 2 }));
    eprintln!(
        "history: probe results {:.1} bytes each; one target at defaults (≈866 a day) takes {:.1} MiB over 730 days",
        pbytes as f64 / pn as f64,
        mib((pbytes as f64 / pn as f64 * 866.0 * 730.0) as u64)
    );
    let (mut fs_read, mut drive_read, mut compute) = (0.0, 0.0, 0.0);
    let mut points = 0;
    for f in sim.store.filesystems().unwrap() {
        let t = Instant::now();
        let pts = sim.store.fs_days(f.id, NOW - 60 * DAY, NOW).unwrap();
        fs_read += t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::hint::black_box(forecast_filesystem_days(&pts, NOW));
        compute += t.elapsed().as_secs_f64();
        points += pts.len();
    }
    for d in sim.store.drives().unwrap() {
        let t = Instant::now();
        let pts = sim.store.drive_days(d.id, 0, NOW).unwrap();
        drive_read += t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::hint::black_box(forecast_drive(&pts, NOW, None));
        compute += t.elapsed().as_secs_f64();
        points += pts.len();
    }
    eprintln!(
        "history: forecast pass parts: filesystem days {:.1} ms, drive days {:.1} ms, forecasts {:.1} ms ({points} days)",
        fs_read * 1e3,
        drive_read * 1e3,
        compute * 1e3
    );
    let t = Instant::now();
    let mut all_points = 0;
    for f in sim.store.filesystems().unwrap() {
        all_points += sim
            .store
            .fs_series(f.id, NOW - 60 * DAY, NOW)
            .unwrap()
            .len();
    }
    for d in sim.store.drives().unwrap() {
        all_points += sim.store.drive_series(d.id, 0, NOW).unwrap().len();
    }
    eprintln!(
        "history: reading every point instead (60 days a filesystem, all of a drive): {:.1} ms ({all_points} points)",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let n = forecast_pass(&sim.store);
    eprintln!(
        "history: one forecast pass over {n} series: {:.1} ms (target ≤ 50 ms)",
        t.elapsed().as_secs_f64() * 1e3
    );
    // After a start the raw days' extremes are not in memory yet: the first pass reads the
    // finished days' summaries and scans the raw rows since the last of them.
    let reopened = Store::open(dir.path(), &HistoryConfig::default()).expect("reopen");
    let t = Instant::now();
    let n = forecast_pass(&reopened);
    eprintln!(
        "history: the first forecast pass after a start, over {n} series: {:.1} ms (target ≤ 50 ms)",
        t.elapsed().as_secs_f64() * 1e3
    );
    drop(reopened);
    let (bands, slow, n) = added_work(&sim.store);
    eprintln!(
        "history: what the bands and performance-full add to that pass (median of 21 rounds): Sen's interval {:.2} ms, performance-full of {n} targets {:.3} ms (target ≤ 5 ms together)",
        bands * 1e3,
        slow * 1e3
    );
    c.bench_function("history forecast pass (50 filesystems, 10 drives)", |b| {
        b.iter(|| forecast_pass(&sim.store))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = history
}
criterion_main!(benches);
