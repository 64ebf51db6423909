//! The collector trait and the scheduler that runs each collector on its own interval in the
//! background (the table of collectors is `registry.rs`). A collector never runs on the scrape
//! path.

pub mod databases;
pub mod device_filter;
pub mod diskstats;
pub mod filesystem;
pub mod layers;
pub mod probe;
pub mod smart;
pub mod topology;

use crate::Roots;
use crate::fault::Faults;
pub use crate::fault::ItemError;
use crate::metrics::MetricSet;
use crate::shared::Shared;
use crate::snapshot::{Published, Snapshots};
use crate::sysfs::topology::Topology;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What every collector is given: where to read from and the state collectors share.
#[derive(Clone)]
pub struct Context {
    pub roots: Arc<Roots>,
    pub shared: Arc<Shared>,
    /// How old a shared block topology may be before a collector reads /sys again: the
    /// topology collector's interval, so /sys/block is walked once per cycle, not once per
    /// collector.
    pub topology_max_age: Duration,
    /// Where collectors hand records to the history store, when it is on.
    pub history: Option<crate::history::service::Sink>,
    /// The one way to make a call that may hang (src/door.rs).
    pub door: crate::door::Door,
}

impl Context {
    pub fn new(roots: Roots, topology_max_age: Duration) -> Self {
        Context {
            door: crate::door::Door::new(roots.proc.clone(), roots.sys.clone()),
            roots: Arc::new(roots),
            shared: Arc::new(Shared::default()),
            topology_max_age,
            history: None,
        }
    }

    /// The block topology of this cycle: the shared one while it is fresh, else read now (off
    /// the async workers) and shared.
    pub async fn topology(&self) -> anyhow::Result<Arc<Topology>> {
        if let Some(t) = self.shared.topology(self.topology_max_age) {
            return Ok(t);
        }
        self.read_topology().await
    }

    /// Reads the block topology now and shares it (the topology collector's every sample).
    pub async fn read_topology(&self) -> anyhow::Result<Arc<Topology>> {
        let sys = self.roots.sys.clone();
        // Not the door: a walk of /sys (the kernel's memory, no device asked) that cannot hang;
        // CPU work kept off the async workers.
        let t = tokio::task::spawn_blocking(move || Topology::read(&sys))
            .await
            .map_err(|e| anyhow::anyhow!("reading the block topology: {e}"))??;
        let t = Arc::new(t);
        self.shared.set_topology(t.clone());
        Ok(t)
    }
}

/// One sample's result. `errors` lists per-item problems that did not fail the whole sample:
/// each is counted in `ssdwatch_collector_errors_total` and logged when it starts and clears.
#[derive(Debug, Default)]
pub struct Sample {
    pub metrics: MetricSet,
    pub errors: Vec<ItemError>,
    /// What the history store keeps of this sample (handed over, never waited on).
    pub records: Vec<crate::history::service::Record>,
    /// Items this sample did not look at (a probe target or a drive not due in it): an open
    /// fault of theirs stays open, neither cleared nor told again.
    pub unsampled: Vec<String>,
    /// What it gives towards each mount's effective free space (the filesystem's mounts, the
    /// layers' reading): published with it, so the two land together (see `space`).
    pub space: Option<crate::space::SpaceInput>,
}

impl Sample {
    /// Records a per-item error.
    pub fn error(&mut self, e: impl Into<ItemError>) {
        self.errors.push(e.into());
    }
}

/// One fault for everything of a sample that could not start for want of a task (a thread or a
/// process refused with EAGAIN: the daemon's cgroup is at its task limit, systemd's
/// `TasksMax=`): item `"<collector> task limit"`, naming how many were affected, which, and the
/// limit as the cgroup tells it. One cause, so one fault, whatever its count from sample to
/// sample. Reads the limit inline: a blocking-pool thread may be what can't be had.
pub fn no_task_fault(
    collector: &str,
    what: &str,
    affected: &[String],
    cause: &dyn std::fmt::Display,
    roots: &crate::Roots,
) -> ItemError {
    let item = format!("{collector} task limit");
    let limit = match crate::sysfs::cgroup::read_task_limit(&roots.proc, &roots.sys) {
        Ok(Some(l)) => l.to_string(),
        Ok(None) => "no task limit found in the daemon's cgroup; the kernel's threads-max or pid_max may be reached".into(),
        Err(e) => format!("task limit unknown: {e}"),
    };
    ItemError::new(
        item.clone(),
        format!(
            "{item}: cannot start a {what} for {} ({}): {cause} ({limit}); tried again at their next turn",
            affected.len(),
            affected.join(", ")
        ),
    )
}

#[async_trait]
pub trait Collector: Send + 'static {
    /// The `collector` label value and config section name.
    fn name(&self) -> &'static str;

    /// How long to wait after a sample before the next one. Collectors may jitter it.
    fn next_delay(&mut self) -> Duration;

    /// Takes one sample. Must not block the async runtime: a call that may hang goes through
    /// the door (`ctx.door`, src/door.rs), a child process through `privileged::run_bounded`;
    /// only work that cannot hang (reads of /sys and /proc) goes to `spawn_blocking`.
    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample>;
}

/// Runs one sample of `c` and publishes it; returns whether it succeeded. `faults` carries the
/// collector's open faults from one sample to the next, so each is logged once when it starts
/// and once when it clears (repeats at debug level).
pub async fn sample_and_publish(
    c: &mut dyn Collector,
    ctx: &Context,
    store: &Snapshots,
    faults: &mut Faults,
) -> bool {
    let name = c.name();
    let start = Instant::now();
    let result = c.sample(ctx).await;
    let duration = start.elapsed();
    let ok = publish(name, result, duration, ctx, store, faults);
    release_freed_memory();
    ok
}

/// Hands a sample's records to the history and its metrics to the store.
fn publish(
    name: &'static str,
    result: anyhow::Result<Sample>,
    duration: std::time::Duration,
    ctx: &Context,
    store: &Snapshots,
    faults: &mut Faults,
) -> bool {
    match result {
        Ok(mut s) => {
            if let Some(h) = &ctx.history {
                for r in s.records.drain(..) {
                    h.send(r);
                }
            }
            faults.sample_failed(name, None);
            let failing = faults.items(name, &s.errors, &s.unsampled);
            store.publish_with_space(
                name,
                Published {
                    metrics: Some(s.metrics),
                    kept: MetricSet::new(),
                    duration,
                    errors: s.errors.len() as u64,
                    failing_items: failing,
                },
                s.space,
            );
            true
        }
        Err(e) => {
            faults.sample_failed(name, Some(&format!("{e:#}")));
            store.publish(
                name,
                Published {
                    metrics: None,
                    kept: MetricSet::new(),
                    duration,
                    errors: 1,
                    failing_items: 0,
                },
            );
            false
        }
    }
}

/// Returns the pages a sample freed to the kernel. A sample of a large host allocates a few
/// MB of small blocks (label strings of thousands of series) and frees them when published;
/// glibc keeps such pages inside its heap (only the top is trimmed on free), so the resident
/// memory would stay at the peak of the largest sample between samples. `malloc_trim` gives
/// back every whole free page in the heap: about 0.1 ms on a 5 MB heap, once per sample.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own heap to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Spawns one background task per collector. Each loops: sample, publish, wait, until shutdown.
pub fn spawn_all(
    collectors: Vec<Box<dyn Collector>>,
    ctx: Context,
    store: Arc<Snapshots>,
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
                let mut faults = Faults::default();
                loop {
                    tokio::select! {
                        _ = sample_and_publish(c.as_mut(), &ctx, &store, &mut faults) => {}
                        _ = shutdown.changed() => break,
                    }
                    let delay = c.next_delay();
                    store.expect_next(c.name(), delay);
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.changed() => break,
                    }
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    /// A collector whose items fail as a script says, sample by sample.
    struct Scripted {
        samples: Vec<Vec<&'static str>>,
    }

    #[async_trait]
    impl Collector for Scripted {
        fn name(&self) -> &'static str {
            "filesystem"
        }
        fn next_delay(&mut self) -> Duration {
            Duration::from_secs(15)
        }
        async fn sample(&mut self, _: &Context) -> anyhow::Result<Sample> {
            let mut s = Sample::default();
            for item in self.samples.remove(0) {
                s.error(ItemError::new(
                    item,
                    format!("{item}: statvfs: Input/output error"),
                ));
            }
            Ok(s)
        }
    }

    #[test]
    fn a_persistent_mount_fault_is_logged_when_it_starts_and_clears_not_every_sample() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // 100 samples with /a failing throughout and /b failing in the middle: 2 starts, 1 clear.
        let mut samples: Vec<Vec<&str>> = vec![vec!["/a"]; 100];
        for s in &mut samples[40..60] {
            s.push("/b");
        }
        let mut c = Scripted { samples };
        let ctx = Context::new(Roots::default(), Duration::from_secs(60));
        let store = Snapshots::new();
        store.register("filesystem");
        let mut faults = Faults::recording();
        let mut failing = Vec::new();
        for _ in 0..100 {
            rt.block_on(sample_and_publish(&mut c, &ctx, &store, &mut faults));
            let text = store.render();
            let line = text
                .lines()
                .find(|l| l.starts_with("ssdwatch_collector_failing_items{"))
                .unwrap()
                .to_string();
            failing.push(line.rsplit(' ').next().unwrap().to_string());
        }
        // What was logged at INFO and above: the lines the daemon's log shows by default.
        let lines = faults.journal();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let (level, line) = &lines[0];
        assert!(
            *level == Level::WARN && line.contains("/a: statvfs"),
            "{lines:?}"
        );
        let (level, line) = &lines[1];
        assert!(
            *level == Level::WARN && line.contains("/b: statvfs"),
            "{lines:?}"
        );
        let (level, line) = &lines[2];
        assert!(
            *level == Level::INFO && line.contains("/b: recovered"),
            "{lines:?}"
        );
        assert_eq!(failing[0], "1");
        assert_eq!(failing[50], "2");
        assert_eq!(failing[99], "1");
        // Every failing sample is still counted as an error.
        assert!(
            store
                .render()
                .contains("ssdwatch_collector_errors_total{collector=\"filesystem\"} 120\n")
        );
    }
}
