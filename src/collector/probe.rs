//! Probe collector: schedules budgeted probe runs per target with jitter, on a dedicated thread
//! each, and turns their results into metrics. The I/O and the safety gates live in `crate::probe`.

use crate::catalogue;
use crate::collector::{Collector, Context, ItemError, Sample, no_task_fault};
use crate::history::service::Record;
use crate::history::{DriveKey, ProbeRecord};
use crate::metrics::MetricSet;
use crate::probe::{
    BUCKET_COUNT, KindResult, Outcome, Placement, ProbeKind, RunContext, RunInputs, SkipReason,
    TargetConfig, placement_from_mount_table, run_target,
};
use crate::sysfs::topology::Topology;
use crate::validate::{Invalid, check_entries, check_interval};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);

/// Attempts in a row without a completed run after which a target counts as failing
/// (`ssdwatch_probe_target_failing`): one skip is a gate doing its job, three are a target that
/// has stopped being measured.
pub const FAILING_AFTER: u32 = 3;

/// The most probe targets: one per database filesystem is the use; each has its own schedule,
/// budget file entry and series.
pub const MAX_TARGETS: usize = 64;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    pub enabled: bool,
    /// Default interval between runs of a target.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Each wait is the interval times a random factor in 1 ± jitter, so a fleet drifts apart.
    pub jitter_ratio: f64,
    /// How long to watch each drive right before a run (the busy gate; 0 = only the diskstats
    /// collector's view).
    #[serde(with = "humantime_serde")]
    pub busy_window: Duration,
    pub targets: Vec<TargetConfig>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            jitter_ratio: 0.1,
            busy_window: Duration::from_secs(1),
            targets: Vec::new(),
        }
    }
}

impl ProbeConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        if !(0.0..=0.5).contains(&self.jitter_ratio) {
            return Err(Invalid::new(
                format!("{key}.jitter_ratio"),
                "must be in 0..0.5",
            ));
        }
        if self.busy_window > Duration::from_secs(10) {
            return Err(Invalid::new(
                format!("{key}.busy_window"),
                "must be at most 10s",
            ));
        }
        check_entries(&format!("{key}.targets"), self.targets.len(), MAX_TARGETS)?;
        for (i, t) in self.targets.iter().enumerate() {
            let k = format!("{key}.targets[{i}]");
            t.validate(&k)?;
            if let Some(iv) = t.interval {
                check_interval(&k, iv, Duration::from_secs(1))?;
            }
            if self.targets[..i].iter().any(|o| o.path == t.path) {
                return Err(Invalid::new(format!("{k}.path"), "listed twice"));
            }
        }
        Ok(())
    }
}

/// Cumulative histogram of one probe kind.
#[derive(Debug, Clone)]
struct Hist {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: vec![0; BUCKET_COUNT],
            sum: 0.0,
            count: 0,
        }
    }
}

impl Hist {
    fn observe(&mut self, v: f64) {
        // Cumulative: every bucket from the first bound at or above v.
        let first = crate::probe::buckets().partition_point(|le| *le < v);
        for b in &mut self.buckets[first..] {
            *b += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}

struct TargetState {
    cfg: TargetConfig,
    next_due: Instant,
    last_seq: Option<Instant>,
    /// Set while a run's thread is alive; a hung filesystem keeps it set and no second thread
    /// is started for that target.
    running: Arc<AtomicBool>,
    placement: Option<Placement>,
    hist: BTreeMap<ProbeKind, Hist>,
    last: BTreeMap<ProbeKind, KindResult>,
    context: Option<RunContext>,
    runs: u64,
    skipped: BTreeMap<SkipReason, u64>,
    written: u64,
    last_run_unix: Option<f64>,
    unsafe_now: bool,
    /// Attempts since the last completed run, and why the latest one didn't run.
    missed: u32,
    last_reason: Option<SkipReason>,
    /// The earlier target whose filesystem and drive this one shares (so its series are not
    /// shown), as last logged.
    hidden_behind: Option<PathBuf>,
}

impl TargetState {
    /// An attempt that didn't run, for `reason`.
    fn missed(&mut self, reason: SkipReason) {
        *self.skipped.entry(reason).or_default() += 1;
        self.missed = self.missed.saturating_add(1);
        self.last_reason = Some(reason);
    }

    /// The reason the target is failing for, once it has missed [`FAILING_AFTER`] attempts.
    fn failing(&self) -> Option<SkipReason> {
        self.last_reason.filter(|_| self.missed >= FAILING_AFTER)
    }
}

/// What carries out one run on one target: [`run_target`] unless a test records its own outcomes.
pub type Runner = dyn Fn(&TargetConfig, &RunInputs) -> Outcome + Send + Sync;

pub struct ProbeCollector {
    runner: Arc<Runner>,
    interval: Duration,
    jitter: f64,
    busy_window: Duration,
    state_dir: PathBuf,
    targets: Vec<TargetState>,
}

fn random_unit() -> f64 {
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (r >> 11) as f64 / (1u64 << 53) as f64
}

impl ProbeCollector {
    pub fn new(cfg: &ProbeConfig, state_dir: &std::path::Path) -> anyhow::Result<Self> {
        Self::with_runner(cfg, state_dir, |t, inp| match &inp.roots.probe_fixture {
            Some(f) => crate::probe::replay::recorded(f, &t.path),
            None => run_target(t, inp),
        })
    }

    /// A collector whose runs are `runner`'s (tests feed recorded outcomes; the scheduling,
    /// timeouts and metrics are the real ones).
    pub fn with_runner(
        cfg: &ProbeConfig,
        state_dir: &std::path::Path,
        runner: impl Fn(&TargetConfig, &RunInputs) -> Outcome + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let now = Instant::now();
        let targets = cfg
            .targets
            .iter()
            .map(|t| {
                let iv = t.interval.unwrap_or(cfg.interval);
                TargetState {
                    cfg: t.clone(),
                    // First run soon after start, spread over the jitter window.
                    next_due: now + iv.mul_f64(cfg.jitter_ratio * random_unit()),
                    last_seq: None,
                    running: Arc::new(AtomicBool::new(false)),
                    placement: None,
                    hist: BTreeMap::new(),
                    last: BTreeMap::new(),
                    context: None,
                    runs: 0,
                    skipped: BTreeMap::new(),
                    written: 0,
                    last_run_unix: None,
                    unsafe_now: false,
                    missed: 0,
                    last_reason: None,
                    hidden_behind: None,
                }
            })
            .collect();
        Ok(ProbeCollector {
            runner: Arc::new(runner),
            interval: cfg.interval,
            jitter: cfg.jitter_ratio,
            busy_window: cfg.busy_window,
            state_dir: state_dir.to_path_buf(),
            targets,
        })
    }

    fn jittered(&self, iv: Duration) -> Duration {
        iv.mul_f64(1.0 + self.jitter * (2.0 * random_unit() - 1.0))
    }

    /// Starts a run of `t` for `kinds` on a thread of its own (a hung filesystem may hold it
    /// forever); its outcome comes through the receiver. The target counts as running until
    /// the thread ends.
    fn spawn_run(
        &self,
        t: &TargetState,
        kinds: Vec<ProbeKind>,
        ctx: &Context,
        topology: Option<Arc<Topology>>,
    ) -> std::io::Result<tokio::sync::oneshot::Receiver<Outcome>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let cfg = t.cfg.clone();
        let roots = ctx.roots.clone();
        let shared = ctx.shared.clone();
        let state_dir = self.state_dir.clone();
        let busy_window = self.busy_window;
        let running = t.running.clone();
        let runner = self.runner.clone();
        running.store(true, Ordering::Release);
        // Not the door: a probe holds its thread for the whole probe (seconds of I/O by design)
        // under the probe budget (`probe::budget`), one per target, never started again while
        // `running` is set: the door's rule by the probe's own bookkeeping.
        let spawned = std::thread::Builder::new()
            .name("ssdwatch-probe".into())
            .spawn(move || {
                let running = Running(running);
                let inputs = RunInputs {
                    roots: &roots,
                    state_dir: &state_dir,
                    shared: Some(&shared),
                    topology,
                    kinds,
                    busy_window,
                    hand: false,
                };
                let o = runner(&cfg, &inputs);
                drop(running);
                let _ = tx.send(o);
            });
        if let Err(e) = spawned {
            t.running.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(rx)
    }

    /// Every target's metrics, from its state (a target not run this time shows its last).
    /// A target is labelled by its filesystem and drive, so it has no series until it is placed
    /// (at its first attempt, from the mount table, then by each run): its configured path is
    /// not a mount point, and labelling it so would give it a second set of series and the mount
    /// pickers a phantom mount. Two targets on one
    /// filesystem would give the same series twice, which makes the scrape invalid: the first
    /// configured is shown.
    fn metrics(&self) -> MetricSet {
        let mut m = MetricSet::new();
        let hidden = hidden_behind(&self.targets);
        for (t, hidden) in self.targets.iter().zip(hidden) {
            let Some(p) = &t.placement else { continue };
            if hidden.is_some() {
                continue;
            }
            let (mp, dev) = (p.mountpoint.as_str(), p.device());
            let base = [("mountpoint", mp), ("device", dev)];
            for (k, h) in &t.hist {
                let buckets: Vec<(f64, u64)> = crate::probe::buckets()
                    .iter()
                    .copied()
                    .zip(h.buckets.iter().copied())
                    .collect();
                m.family(&catalogue::PROBE_LATENCY_SECONDS).push_histogram(
                    &[("probe", k.as_str()), base[0], base[1]],
                    &buckets,
                    h.sum,
                    h.count,
                );
            }
            for (k, r) in &t.last {
                let fam = m.family(&catalogue::PROBE_LAST_LATENCY_SECONDS);
                // Only what the run could measure: a p99 of 16 I/Os would be their maximum.
                for (q, v) in [
                    ("0.5", r.p50_seconds),
                    ("0.99", r.p99_seconds),
                    ("1", Some(r.max_seconds)),
                ] {
                    fam.push_opt(
                        &[("probe", k.as_str()), base[0], base[1], ("quantile", q)],
                        v,
                    );
                }
                m.family(&catalogue::PROBE_THROUGHPUT_BYTES_PER_SECOND)
                    .push_opt(
                        &[("probe", k.as_str()), base[0], base[1]],
                        r.throughput_bytes_per_second,
                    );
            }
            m.family(&catalogue::PROBE_RUNS_TOTAL)
                .push(&base, t.runs as f64);
            let fam = m.family(&catalogue::PROBE_SKIPPED_TOTAL);
            for r in SkipReason::ALL {
                let n = t.skipped.get(&r).copied().unwrap_or(0);
                fam.push(&[base[0], base[1], ("reason", r.as_str())], n as f64);
            }
            m.family(&catalogue::PROBE_WRITTEN_BYTES_TOTAL)
                .push(&base, t.written as f64);
            m.family(&catalogue::PROBE_LAST_RUN_TIMESTAMP_SECONDS)
                .push_opt(&base, t.last_run_unix);
            m.family(&catalogue::PROBE_TARGET_UNSAFE)
                .push(&base, if t.unsafe_now { 1.0 } else { 0.0 });
            let failing = t.failing();
            let fam = m.family(&catalogue::PROBE_TARGET_FAILING);
            for r in SkipReason::ALL {
                let v = if failing == Some(r) { 1.0 } else { 0.0 };
                fam.push(&[base[0], base[1], ("reason", r.as_str())], v);
            }
            if let Some(c) = &t.context {
                m.family(&catalogue::PROBE_CONTEXT_FILL_RATIO)
                    .push_opt(&base, c.fill_ratio);
                m.family(&catalogue::PROBE_CONTEXT_SINCE_DISCARD_SECONDS)
                    .push_opt(&base, c.since_discard_seconds);
                m.family(&catalogue::PROBE_CONTEXT_WRITTEN_SINCE_DISCARD_BYTES)
                    .push_opt(&base, c.written_since_discard_bytes.map(|b| b as f64));
                m.family(&catalogue::PROBE_CONTEXT_IDLE_SECONDS)
                    .push_opt(&base, c.idle_seconds);
                m.family(&catalogue::PROBE_CONTEXT_UTILIZATION_RATIO)
                    .push_opt(&base, c.utilization_ratio);
            }
        }
        m
    }
}

/// The kinds a run of `t` at `now` measures: all configured, the sequential write only once
/// its own interval has passed.
fn due_kinds(t: &TargetState, now: Instant) -> Vec<ProbeKind> {
    let seq_due = t
        .last_seq
        .is_none_or(|s| now.duration_since(s) >= t.cfg.seq_write_interval);
    t.cfg
        .kinds
        .iter()
        .copied()
        .filter(|k| *k != ProbeKind::SeqWrite || seq_due)
        .collect()
}

/// Clears a target's running flag when its run's thread ends, by a panic too: a flag left set
/// would keep the target from ever running again.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Applies a run's outcome to a target's state; returns an error for a skip worth logging.
/// What the history store keeps of a run: each kind's figures with the run's context, and the
/// drive it ran on by its identity (WWN, serial), not its kernel name.
fn history_records(
    r: &crate::probe::RunReport,
    topo: Option<&Topology>,
    shared: &crate::shared::Shared,
) -> Vec<Record> {
    let drive = topo
        .and_then(|t| t.get(r.placement.device()))
        .and_then(DriveKey::of);
    let c = &r.context;
    r.results
        .iter()
        .map(|k| {
            Record::Probe(ProbeRecord {
                target: r.target.to_string_lossy().into_owned(),
                drive: drive.clone(),
                t: r.started_unix as i64,
                kind: k.probe,
                ops: k.ops as u64,
                p50_seconds: k.p50_seconds.unwrap_or(k.max_seconds),
                // A run too short for a p99 (docs/metrics.md) has none: its maximum is not one.
                p99_seconds: k.p99_seconds,
                max_seconds: k.max_seconds,
                throughput_bytes_per_second: k.throughput_bytes_per_second,
                fill_ratio: c.fill_ratio,
                since_discard_seconds: c.since_discard_seconds,
                idle_seconds: c.idle_seconds,
                utilization_ratio: c.utilization_ratio,
                utilization_before_ratio: c.utilization_before_ratio,
                written_since_discard_bytes: c.written_since_discard_bytes,
                untrimmed_ratio: shared.untrimmed_ratio(&r.placement.mountpoint),
            })
        })
        .collect()
}

fn apply(t: &mut TargetState, o: Outcome) -> Option<ItemError> {
    match o {
        Outcome::Ran(r) => {
            t.unsafe_now = false;
            t.missed = 0;
            t.last_reason = None;
            t.runs += 1;
            t.written += r.written_bytes;
            t.last_run_unix = Some(r.started_unix);
            t.context = Some(r.context);
            t.placement = Some(r.placement);
            for k in r.results {
                let h = t.hist.entry(k.probe).or_default();
                for v in &k.latencies {
                    h.observe(*v);
                }
                t.last.insert(k.probe, k);
            }
            if !r.budget_skipped.is_empty() {
                *t.skipped.entry(SkipReason::Budget).or_default() += 1;
            }
            None
        }
        Outcome::Skipped(s) => {
            t.unsafe_now = s.reason == SkipReason::Unsafe;
            if s.placement.is_some() {
                t.placement = s.placement;
            }
            // The same skip again, with no run in between: said once at info, then at debug.
            let repeat = t.missed > 0 && t.last_reason == Some(s.reason);
            t.missed(s.reason);
            match s.reason {
                // A budget that can't be recorded stops every write of the target: a fault of
                // the state directory, logged as one (the detail names the budget file).
                SkipReason::Unsafe | SkipReason::Error | SkipReason::BudgetUnrecorded => {
                    Some(ItemError::new(t.cfg.path.to_string_lossy(), s.detail))
                }
                _ if repeat => {
                    tracing::debug!("probe skipped ({}): {}", s.reason.as_str(), s.detail);
                    None
                }
                _ => {
                    tracing::info!(
                        "probe skipped ({}): {} (said once until the target runs or is skipped for another reason)",
                        s.reason.as_str(),
                        s.detail
                    );
                    None
                }
            }
        }
    }
}

/// For each target, the first one before it placed on the same filesystem and drive: a target
/// that has one is run but not shown, since the same series twice would make the scrape invalid.
fn hidden_behind(targets: &[TargetState]) -> Vec<Option<usize>> {
    let key = |t: &TargetState| {
        (t.placement.as_ref()).map(|p| (p.mountpoint.clone(), p.device().to_string()))
    };
    let mut first: BTreeMap<(String, String), usize> = BTreeMap::new();
    (targets.iter().enumerate())
        .map(|(i, t)| {
            let k = key(t)?;
            let f = *first.entry(k).or_insert(i);
            (f != i).then_some(f)
        })
        .collect()
}

impl ProbeCollector {
    /// Says once, at WARN, that a target is hidden behind another on its filesystem (and at
    /// info when it no longer is): without it, a second target on a shared filesystem has no
    /// series and nothing says why.
    fn log_hidden(&mut self) {
        let hidden = hidden_behind(&self.targets);
        for (i, h) in hidden.into_iter().enumerate() {
            let behind = h.map(|j| self.targets[j].cfg.path.clone());
            let t = &self.targets[i];
            if behind == t.hidden_behind {
                continue;
            }
            match (&behind, t.placement.as_ref()) {
                (Some(shown), Some(p)) => tracing::warn!(
                    "probe target {} is on the same filesystem as probe target {} ({}, drive {}): only {}'s series are shown; {} is still probed (point it at another filesystem or remove it)",
                    t.cfg.path.display(),
                    shown.display(),
                    p.mountpoint,
                    if p.device().is_empty() {
                        "none"
                    } else {
                        p.device()
                    },
                    shown.display(),
                    t.cfg.path.display(),
                ),
                _ => {
                    if let Some(old) = &t.hidden_behind {
                        tracing::info!(
                            "probe target {} no longer shares a filesystem with probe target {}: its series are shown",
                            t.cfg.path.display(),
                            old.display()
                        );
                    }
                }
            }
            self.targets[i].hidden_behind = behind;
        }
    }
}

#[async_trait::async_trait]
impl Collector for ProbeCollector {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        self.targets
            .iter()
            .map(|t| t.next_due.saturating_duration_since(now))
            .min()
            .unwrap_or(self.interval)
            .max(Duration::from_secs(1))
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        let mut errors = Vec::new();
        let now = Instant::now();
        let topology = if self.targets.iter().any(|t| t.next_due <= now) {
            ctx.topology().await.ok()
        } else {
            None
        };
        let mut records = Vec::new();
        let mut unsampled = Vec::new();
        // Targets whose thread could not be started for want of a task (EAGAIN: the daemon's
        // task limit): one fault for all of them, not one per target.
        let mut no_task: Vec<String> = Vec::new();
        let mut no_task_cause = None;
        for i in 0..self.targets.len() {
            let now = Instant::now();
            if self.targets[i].next_due > now {
                // Not looked at in this sample: its fault, if any, stays as it is.
                unsampled.push(self.targets[i].cfg.path.to_string_lossy().into_owned());
                continue;
            }
            let iv = self.targets[i].cfg.interval.unwrap_or(self.interval);
            let next = now + self.jittered(iv);
            let t = &mut self.targets[i];
            t.next_due = next;
            // Per-target errors are faults of the target path (which may itself hold ": ").
            let item = t.cfg.path.to_string_lossy().into_owned();
            let fault = |what: &str| ItemError::new(&item, format!("{item}: {what}"));
            if t.running.load(Ordering::Acquire) {
                t.missed(SkipReason::Error);
                errors.push(fault(
                    "previous probe run still hasn't returned; not starting another",
                ));
                continue;
            }
            if t.placement.is_none() {
                // Labelled by its real mount from its first attempt on, also when that attempt
                // hangs or fails before placing it (a missing path).
                t.placement =
                    placement_from_mount_table(&t.cfg.path, &ctx.roots, topology.as_deref());
            }
            let kinds = due_kinds(t, now);
            let rx = match self.spawn_run(&self.targets[i], kinds, ctx, topology.clone()) {
                Ok(rx) => rx,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    // Tried again at its next turn; its own fault neither clears nor repeats.
                    unsampled.push(item.clone());
                    no_task.push(item);
                    no_task_cause = Some(e);
                    continue;
                }
                Err(e) => {
                    errors.push(fault(&format!("cannot start probe thread: {e}")));
                    continue;
                }
            };
            let t = &mut self.targets[i];
            match tokio::time::timeout(t.cfg.timeout, rx).await {
                Ok(Ok(o)) => {
                    if let Outcome::Ran(r) = &o {
                        if r.results.iter().any(|k| k.probe == ProbeKind::SeqWrite) {
                            t.last_seq = Some(now);
                        }
                        // The durability check of the SMART collector compares it with what
                        // the drive's medium can do.
                        let p50 = r.results.iter().find_map(|k| {
                            (k.probe == ProbeKind::SyncWrite4k).then_some(k.p50_seconds)?
                        });
                        if let Some(p50) = p50 {
                            for d in &r.placement.drives {
                                ctx.shared.set_sync_write_p50(d, p50);
                            }
                        }
                        records.extend(history_records(r, topology.as_deref(), &ctx.shared));
                    }
                    if let Some(e) = apply(t, o) {
                        errors.push(e);
                    }
                }
                Ok(Err(_)) => {
                    t.missed(SkipReason::Error);
                    errors.push(fault("probe thread ended without a result"));
                }
                Err(_) => {
                    t.missed(SkipReason::Error);
                    errors.push(fault(&format!(
                        "probe run not finished after {}; left to finish in the background",
                        humantime::format_duration(t.cfg.timeout)
                    )));
                }
            }
        }
        if let Some(e) = no_task_cause {
            errors.push(no_task_fault(
                "probe",
                "probe thread",
                &no_task,
                &e,
                &ctx.roots,
            ));
        }
        self.log_hidden();
        Ok(Sample {
            metrics: self.metrics(),
            errors,
            records,
            unsampled,
            space: None,
        })
    }
}
