//! /metrics render time on a large host: 64 drives with 8 partitions each and 500 filesystems.
//! A scrape copies pre-rendered collector output, so this should stay far under 1 ms.
//! Also measures one background sample of each collector on that host (not on the scrape path).
//! benches/rss.sh measures the daemon's memory on the same generated host.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use ssdwatch::Roots;
use ssdwatch::collector::diskstats::DiskstatsCollector;
use ssdwatch::collector::filesystem::FilesystemCollector;
use ssdwatch::collector::topology::TopologyCollector;
use ssdwatch::collector::{self, Collector, Context};
use ssdwatch::config::Config;
use ssdwatch::fault::Faults;
use ssdwatch::metrics::MetricSet;
use ssdwatch::registry::{self, BuildEnv};
use ssdwatch::snapshot::{Published, Snapshots};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn generate(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gen_big_host.py");
    let ok = Command::new("python3")
        .arg(script)
        .arg(dir)
        .status()
        .expect("python3")
        .success();
    assert!(ok, "fixture generator failed");
}

/// Samples the host once through every collector (smart and probe off) into a store.
fn sampled_store(dir: &Path) -> Arc<Snapshots> {
    let mut config = Config::default();
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = Arc::new(Snapshots::new());
    let ctx = Context::new(Roots::fixture(dir), Duration::from_secs(60));
    rt.block_on(async {
        let env = BuildEnv {
            state_dir: &config.state_dir,
            persist_state: false,
            helper: None,
        };
        for mut c in registry::build(&config.collectors, &env).unwrap() {
            store.register(c.name());
            assert!(
                collector::sample_and_publish(c.as_mut(), &ctx, &store, &mut Faults::default())
                    .await
            );
        }
    });
    store
}

fn render(c: &mut Criterion, dir: &Path) {
    let store = sampled_store(dir);
    let text = store.render();
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    assert!(text.contains("ssdwatch_filesystem_avail_bytes{mountpoint=\"/srv/db499\""));
    let e = store.exposition();
    let gzip: usize = e.parts.iter().map(|p| p.deflate().len()).sum();
    eprintln!(
        "exposition: {} bytes, {series} series; compressed at publish: {gzip} bytes ({:.1} bytes a series)",
        text.len(),
        gzip as f64 / series as f64
    );
    c.bench_function(
        "render /metrics as text, the parts inflated (64 drives, 500 mounts)",
        |b| b.iter(|| std::hint::black_box(store.render())),
    );
}

/// What a publish costs the collector's task (src/snapshot.rs; never a scrape's work):
/// rendering its families and compressing those whose text changed. Twice per collector: the
/// same sample again (every family's segment reused: a quiet host), and into a new store
/// (every family compressed: the worst case, as if every value had moved).
fn publish(c: &mut Criterion, dir: &Path) {
    let mut config = Config::default();
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ctx = Context::new(Roots::fixture(dir), Duration::from_secs(60));
    let env = BuildEnv {
        state_dir: &config.state_dir,
        persist_state: false,
        helper: None,
    };
    let store = Snapshots::new();
    for mut col in registry::build(&config.collectors, &env).unwrap() {
        let metrics = rt.block_on(col.sample(&ctx)).unwrap().metrics;
        let name = col.name();
        store.register(name);
        let published = || Published {
            metrics: Some(metrics.clone()),
            kept: MetricSet::new(),
            duration: Duration::from_millis(1),
            errors: 0,
            failing_items: 0,
        };
        c.bench_function(&format!("publish {name} (render, nothing changed)"), |b| {
            b.iter(|| store.publish(name, published()))
        });
        c.bench_function(
            &format!("publish {name} (render + gzip of every family)"),
            |b| {
                b.iter(|| {
                    let fresh = Snapshots::new();
                    fresh.publish(name, published());
                    fresh
                })
            },
        );
    }
}

fn sample(c: &mut Criterion, dir: &Path) {
    let config = Config::default();
    let ctx = Context::new(Roots::fixture(dir), Duration::from_secs(60));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut collectors: Vec<Box<dyn Collector>> = vec![
        Box::new(TopologyCollector::new(&config.collectors.topology).unwrap()),
        Box::new(
            DiskstatsCollector::new(&config.collectors.diskstats, &config.state_dir, false)
                .unwrap(),
        ),
        Box::new(FilesystemCollector::new(&config.collectors.filesystem).unwrap()),
    ];
    for col in collectors.iter_mut() {
        let name = format!(
            "sample {} (64 drives, 576 block devices, 500 mounts)",
            col.name()
        );
        c.bench_function(&name, |b| {
            b.iter(|| {
                let s = rt.block_on(col.sample(&ctx)).unwrap();
                assert!(s.errors.is_empty(), "{:?}", s.errors);
                std::hint::black_box(s)
            })
        });
    }
}

/// One generated host for all benchmarks (writing ~10,000 files takes seconds).
fn on_big_host(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    render(c, dir.path());
    publish(c, dir.path());
    sample(c, dir.path());
}

criterion_group!(benches, on_big_host);
criterion_main!(benches);
