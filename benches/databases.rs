//! The databases collector on a directory of 1,000,000 files (one database directory of a big
//! schema: PostgreSQL keeps every relation of a database in one directory), sized in passes at
//! the defaults (100,000 entries or 5 s a pass, one pass a sample): samples until the figure,
//! wall and CPU time per sample, and the resident memory it costs. Then the cheap look every
//! sample takes at a pg_wal of 10,000 segments with 5,000 waiting for the archiver.
//!
//! `cargo bench --bench databases` makes 1,000,000 files (DB_BENCH_FILES overrides);
//! `cargo test --bench databases` (the suite's smoke run) makes 20,000 with 5,000 a pass and
//! checks the figure and the number of passes, not the time.
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use ssdwatch::collector::databases::{DatabasesCollector, DatabasesConfig, WatchConfig};
use ssdwatch::collector::{Collector, Context};
use std::path::Path;
use std::time::{Duration, Instant};

/// CPU time of this process so far (user + system).
fn cpu() -> Duration {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// A line of /proc/self/status in KiB (VmRSS, VmHWM).
fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap()
}

fn make_files(dir: &Path, n: u64) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        std::fs::File::create(dir.join(format!("{}", 16384 + i))).unwrap();
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let files: u64 = std::env::var("DB_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 1_000_000 } else { 20_000 });
    let per_pass = if full { 100_000 } else { 5_000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let t = Instant::now();
    make_files(&data.join("base/16384"), files);
    println!(
        "made {files} files in {:.1} s under {}",
        t.elapsed().as_secs_f64(),
        data.display()
    );

    let cfg = DatabasesConfig {
        discover: false,
        size_entries_per_pass: per_pass,
        watch: vec![WatchConfig {
            name: "big".into(),
            path: data.clone(),
        }],
        ..DatabasesConfig::default()
    };
    let ctx = Context::new(ssdwatch::Roots::default(), Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    let rss_before = status_kib("VmRSS:");
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let total = loop {
        let (w0, c0) = (Instant::now(), cpu());
        let s = rt.block_on(c.sample(&ctx)).unwrap();
        walls.push(w0.elapsed());
        cpus.push(cpu() - c0);
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        let found = s
            .metrics
            .families()
            .iter()
            .filter(|f| f.name.ends_with("database_component_bytes"))
            .flat_map(|f| f.samples.iter())
            .map(|x| x.value)
            .next();
        if let Some(b) = found {
            break b;
        }
        assert!(walls.len() < 10_000, "the sizing never completed");
    };
    let rss_after = status_kib("VmRSS:");
    let passes = walls.len() as u64;
    // Each pass takes its cap of entries; the last one finishes (the directory itself counts).
    let expected_passes = (files + 1).div_ceil(per_pass);
    assert!(
        passes == expected_passes || passes == expected_passes + 1,
        "{passes} passes for {files} files at {per_pass} a pass"
    );
    assert!(total > 0.0);
    let (wall_sum, cpu_sum): (Duration, Duration) = (walls.iter().sum(), cpus.iter().sum());
    println!(
        "sized {files} files ({total} bytes allocated) in {passes} samples of at most {per_pass} entries"
    );
    println!(
        "per sample: wall median {:.0} ms, max {:.0} ms; CPU median {:.0} ms, max {:.0} ms",
        percentile(&mut walls.clone(), 0.5).as_secs_f64() * 1e3,
        percentile(&mut walls, 1.0).as_secs_f64() * 1e3,
        percentile(&mut cpus.clone(), 0.5).as_secs_f64() * 1e3,
        percentile(&mut cpus, 1.0).as_secs_f64() * 1e3,
    );
    println!(
        "whole sizing: wall {:.2} s, CPU {:.2} s ({:.2} µs CPU an entry)",
        wall_sum.as_secs_f64(),
        cpu_sum.as_secs_f64(),
        cpu_sum.as_secs_f64() * 1e6 / files as f64
    );
    println!(
        "RSS {rss_before} KiB before, {rss_after} KiB after; peak {} KiB",
        status_kib("VmHWM:")
    );

    // The cheap look of every sample: pg_wal with 10,000 segments (1 MiB, sparse), 5,000 of them
    // waiting for the archiver.
    let pg = tmp.path().join("pg");
    std::fs::create_dir_all(pg.join("pg_wal/archive_status")).unwrap();
    std::fs::create_dir_all(pg.join("global")).unwrap();
    std::fs::create_dir_all(pg.join("pg_replslot")).unwrap();
    let segments = if full { 10_000u64 } else { 1_000 };
    for i in 1..=segments {
        let name = format!("00000001{:08X}{:08X}", i / 4096, i % 4096);
        let f = std::fs::File::create(pg.join("pg_wal").join(&name)).unwrap();
        f.set_len(1 << 20).unwrap();
        if i <= segments / 2 {
            std::fs::write(
                pg.join("pg_wal/archive_status")
                    .join(format!("{name}.ready")),
                "",
            )
            .unwrap();
        }
    }
    let mut walls = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (slots, _) = ssdwatch::databases::postgres::read_slots(&pg).unwrap();
        let wal = ssdwatch::databases::postgres::read_wal(&pg, slots, None).unwrap();
        walls.push(t.elapsed());
        assert_eq!(wal.segments, segments);
        assert_eq!(wal.ready, segments / 2);
    }
    println!(
        "pg_wal of {segments} segments, {} waiting: listed in {:.1} ms median, {:.1} ms max",
        segments / 2,
        percentile(&mut walls.clone(), 0.5).as_secs_f64() * 1e3,
        percentile(&mut walls, 1.0).as_secs_f64() * 1e3
    );
    let t = Instant::now();
    drop(tmp);
    println!("removed the files in {:.1} s", t.elapsed().as_secs_f64());
}
