//! The collector trait, the registry of collectors and the scheduler that runs each on its own
//! interval in the background. A collector never runs on the scrape path.

pub mod diskstats;
pub mod filesystem;
pub mod probe;
pub mod smart;
pub mod topology;

use crate::Roots;
use crate::config::Config;
use crate::metrics::MetricSet;
use crate::snapshot::{Published, Shared, Store};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What every collector is given: where to read from and the state collectors share.
#[derive(Clone)]
pub struct Context {
    pub roots: Arc<Roots>,
    pub shared: Arc<Shared>,
}

/// One sample's result. `errors` lists per-device problems that did not fail the whole sample:
/// each is logged and counted in `ssdwatch_collector_errors_total`.
#[derive(Debug, Default)]
pub struct Sample {
    pub metrics: MetricSet,
    pub errors: Vec<String>,
}

#[async_trait]
pub trait Collector: Send + 'static {
    /// The `collector` label value and config section name.
    fn name(&self) -> &'static str;

    /// How long to wait after a sample before the next one. Collectors may jitter it.
    fn next_delay(&mut self) -> Duration;

    /// Takes one sample. Must not block the async runtime: blocking work goes to
    /// `spawn_blocking` with a bound (see the filesystem collector's stuck-mount guard).
    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample>;
}

/// Builds every collector enabled in the config, in a fixed order.
pub fn build(config: &Config) -> anyhow::Result<Vec<Box<dyn Collector>>> {
    let c = &config.collectors;
    let mut out: Vec<Box<dyn Collector>> = Vec::new();
    if c.topology.enabled {
        out.push(Box::new(topology::TopologyCollector::new(&c.topology)?));
    }
    if c.diskstats.enabled {
        out.push(Box::new(diskstats::DiskstatsCollector::new(&c.diskstats)?));
    }
    if c.filesystem.enabled {
        out.push(Box::new(filesystem::FilesystemCollector::new(
            &c.filesystem,
        )?));
    }
    if c.smart.enabled {
        out.push(Box::new(smart::SmartCollector::new(&c.smart)?));
    }
    if c.probe.enabled {
        out.push(Box::new(probe::ProbeCollector::new(
            &c.probe,
            &config.state_dir,
        )?));
    }
    Ok(out)
}

/// Runs one sample of `c` and publishes it; returns whether it succeeded.
pub async fn sample_once(c: &mut dyn Collector, ctx: &Context, store: &Store) -> bool {
    let name = c.name();
    let start = Instant::now();
    let result = c.sample(ctx).await;
    let duration = start.elapsed();
    match result {
        Ok(s) => {
            for e in &s.errors {
                tracing::warn!(collector = name, "{e}");
            }
            store.publish(
                name,
                Published {
                    metrics: Some(s.metrics),
                    duration,
                    errors: s.errors.len() as u64,
                },
            );
            true
        }
        Err(e) => {
            tracing::error!(collector = name, "sample failed: {e:#}");
            store.publish(
                name,
                Published {
                    metrics: None,
                    duration,
                    errors: 1,
                },
            );
            false
        }
    }
}

/// Spawns one background task per collector. Each loops: sample, publish, wait, until shutdown.
pub fn spawn_all(
    collectors: Vec<Box<dyn Collector>>,
    ctx: Context,
    store: Arc<Store>,
    shutdown: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    for c in &collectors {
        store.register(c.name());
    }
    collectors
        .into_iter()
        .map(|mut c| {
            let ctx = ctx.clone();
            let store = store.clone();
            let mut shutdown = shutdown.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = sample_once(c.as_mut(), &ctx, &store) => {}
                        _ = shutdown.changed() => break,
                    }
                    let delay = c.next_delay();
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.changed() => break,
                    }
                }
            })
        })
        .collect()
}
