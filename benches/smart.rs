//! Parse + normalize cost of the whole smartctl fixture corpus (target: <= 200 us per drive),
//! and the CPU cost of one real smartctl spawn on this machine (measured with
//! getrusage(RUSAGE_CHILDREN), printed after the criterion run).
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group};
use std::path::Path;
use std::process::Command;

fn corpus() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smart");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "expected.json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read fixture"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let corpus = corpus();
    let n = corpus.len();
    c.bench_function(&format!("smart parse+normalize corpus ({n} drives)"), |b| {
        b.iter(|| {
            for text in &corpus {
                let h = ssdwatch::smart::parse(std::hint::black_box(text));
                std::hint::black_box(&h);
            }
        })
    });
    // The slowest single capture (the largest `-x` output) on its own.
    let biggest = corpus
        .iter()
        .max_by_key(|t| t.len())
        .cloned()
        .unwrap_or_default();
    c.bench_function("smart parse+normalize largest capture", |b| {
        b.iter(|| std::hint::black_box(ssdwatch::smart::parse(std::hint::black_box(&biggest))))
    });
}

fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU seconds (user + system) of one smartctl run with the collector's options, averaged.
fn smartctl_spawn_cost() {
    let dev = ["/dev/nvme0n1", "/dev/sda", "/dev/vda"]
        .into_iter()
        .find(|d| Path::new(d).exists());
    let Some(dev) = dev else {
        println!("smartctl spawn cost: no drive to query on this machine");
        return;
    };
    let args = ssdwatch::smart::argv::smartctl_args(
        dev,
        None,
        None,
        ssdwatch::smart::argv::Asks::ALL,
        true,
    );
    let runs = 50;
    let before = children_cpu_seconds();
    let wall = std::time::Instant::now();
    for _ in 0..runs {
        match Command::new("smartctl").args(&args).output() {
            Ok(_) => {}
            Err(e) => {
                println!("smartctl spawn cost: cannot run smartctl: {e}");
                return;
            }
        }
    }
    let cpu = (children_cpu_seconds() - before) / runs as f64;
    let wall = wall.elapsed().as_secs_f64() / runs as f64;
    println!(
        "smartctl spawn cost on {dev}: {:.2} ms CPU (user+sys), {:.2} ms wall per run ({runs} runs: smartctl {})",
        cpu * 1e3,
        wall * 1e3,
        args.join(" ")
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Not under `cargo test`, which runs benches once in test mode without `--bench`.
    if std::env::args().any(|a| a == "--bench") {
        smartctl_spawn_cost();
    }
}
