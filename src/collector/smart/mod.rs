//! SMART collector: runs `smartctl --json` (or, for ATA drives, libatasmart) per drive on its
//! own schedule (never on the scrape path), with bounded parallelism. Its config and the sample
//! loop live here; the process runner (timeout, process-group kill, output cap, exit decoding),
//! what a run left behind, the cause of a refusal, the libatasmart backend and the helper that
//! holds the capabilities are the privileged wing's (`crate::privileged`); the per-drive state step (standby, exit bits, schedule)
//! in `drive`, the metrics of a drive in `metrics`. Parsing and unit conversion live in
//! `crate::smart`.

mod drive;
mod durability;
mod metrics;

pub use crate::privileged::atasmart::Backend;
pub use drive::waf_over_window;

use crate::door::Pass;
use crate::privileged::runner::{self, RunError, RunOutcome};
use crate::privileged::{Helper, RequestKind, access, atasmart};
use crate::smart::argv::{self, Asks, smartctl_args};

use crate::catalogue;
use crate::collector::device_filter::{DevicePattern, wanted};
use crate::collector::{Collector, Context, ItemError, Sample, no_task_fault};
use crate::history::service::Record;
use crate::history::{DriveHealthRecord, DriveKey, DriveSample};
use crate::sysfs::topology::{DeviceKind, Topology};
use crate::time::unix_now;
use crate::validate::{
    Invalid, MAX_ENTRIES, check_entries, check_interval, check_range, check_timeout,
};
use drive::{DriveState, Run, Target};
use regex_lite::Regex;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(900);

/// A drive listed in the config: drives behind RAID controllers or USB bridges that the
/// topology cannot see, or that need a `-d TYPE`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    /// Device node under /dev, e.g. /dev/sda or /dev/bus/0.
    pub path: String,
    /// smartctl's `-d TYPE`, e.g. `sat`, `megaraid,3`, `sntasmedia`.
    #[serde(default, rename = "type")]
    pub dev_type: Option<String>,
    /// The `device` label; defaults to the path without /dev/ (plus `:TYPE` for RAID ports).
    #[serde(default)]
    pub label: Option<String>,
}

/// Per device-class sampling intervals; each defaults to `interval`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClassIntervals {
    #[serde(with = "humantime_serde")]
    pub nvme: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub ata: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub scsi: Option<Duration>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SmartConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    pub class_intervals: ClassIntervals,
    pub smartctl_path: PathBuf,
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    pub parallelism: usize,
    pub nocheck_standby: bool,
    /// Ask each drive, once its protocol is known, for its small logs in the same run (error
    /// log count, self-test log, temperature limits, write cache). Off: only the base set and
    /// ATA's device statistics, as before these were read.
    pub read_logs: bool,
    /// Ask NVMe drives for the OCP SMART log (C0h) once an hour, for their NAND writes and
    /// write amplification. Off by default: C0h is a vendor-specific log page on drives not
    /// built to the OCP datacenter spec (what they return is checked and not used then).
    pub nvme_ocp_log: bool,
    /// Which backend reads ATA drives: auto (smartctl if installed, else libatasmart),
    /// smartctl, or libatasmart (builds with the `atasmart` feature). NVMe is smartctl's.
    pub backend: Backend,
    /// Query the drives found in /sys (NVMe, sd, virtio).
    pub discover: bool,
    /// Find drives behind RAID controllers (MegaRAID, aacraid, cciss, 3ware) with
    /// `smartctl --scan-open`, at the first sample and then hourly, and query them as if
    /// listed under `devices`.
    pub discover_raid: bool,
    /// Discovered drives (kernel names) to query: only those matching, when set; and those
    /// left out. `devices` entries are always queried.
    pub device_include: Option<DevicePattern>,
    pub device_exclude: Option<DevicePattern>,
    pub devices: Vec<DeviceEntry>,
}

impl Default for SmartConfig {
    fn default() -> Self {
        SmartConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            class_intervals: ClassIntervals::default(),
            smartctl_path: PathBuf::from("smartctl"),
            timeout: Duration::from_secs(30),
            parallelism: 2,
            nocheck_standby: true,
            read_logs: true,
            nvme_ocp_log: false,
            backend: Backend::Auto,
            discover: true,
            discover_raid: false,
            device_include: None,
            device_exclude: None,
            devices: Vec::new(),
        }
    }
}

#[allow(
    clippy::expect_used,
    reason = "a literal pattern; the config tests compile it"
)]
fn type_re() -> Regex {
    // smartctl -d types: letters, digits, and the separators of `sat+megaraid,N`, `jmb39x-q,0`.
    Regex::new(r"^[a-z][a-z0-9_+,-]{0,40}$").expect("static regex")
}

#[allow(
    clippy::expect_used,
    reason = "a literal pattern; the config tests compile it"
)]
fn path_re() -> Regex {
    Regex::new(r"^/dev/[A-Za-z0-9_][A-Za-z0-9_./-]{0,100}$").expect("static regex")
}

impl SmartConfig {
    /// The sampling interval of a drive: its class's (by smartctl's protocol once known, else by
    /// the /sys kind), else the default.
    fn class_interval(&self, protocol: Option<&str>, kind: Option<DeviceKind>) -> Duration {
        let c = &self.class_intervals;
        let class = match (protocol, kind) {
            (Some("NVMe"), _) | (None, Some(DeviceKind::Nvme)) => c.nvme,
            (Some("ATA"), _) => c.ata,
            (Some("SCSI"), _) => c.scsi,
            _ => None,
        };
        class.unwrap_or(self.interval)
    }

    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        for (class, d) in [
            ("nvme", self.class_intervals.nvme),
            ("ata", self.class_intervals.ata),
            ("scsi", self.class_intervals.scsi),
        ] {
            if let Some(d) = d {
                check_interval(
                    &format!("{key}.class_intervals.{class}"),
                    d,
                    Duration::from_secs(1),
                )?;
            }
        }
        check_timeout(key, self.timeout)?;
        check_entries(&format!("{key}.devices"), self.devices.len(), MAX_ENTRIES)?;
        check_range(
            &format!("{key}.parallelism"),
            self.parallelism as u64,
            1,
            64,
        )?;
        if self.backend == Backend::Libatasmart && !atasmart::BUILT_IN {
            return Err(Invalid::new(
                format!("{key}.backend"),
                "libatasmart: this build has no libatasmart support (built without the `atasmart` feature); use smartctl or auto",
            ));
        }
        if self.smartctl_path.as_os_str().is_empty() {
            return Err(Invalid::new(
                format!("{key}.smartctl_path"),
                "must not be empty",
            ));
        }
        let (pr, tr) = (path_re(), type_re());
        for (i, d) in self.devices.iter().enumerate() {
            if !pr.is_match(&d.path) || d.path.contains("..") {
                return Err(Invalid::new(
                    format!("{key}.devices[{i}].path"),
                    format!("{:?} is not a device node under /dev/", d.path),
                ));
            }
            if let Some(t) = &d.dev_type
                && !tr.is_match(t)
            {
                return Err(Invalid::new(
                    format!("{key}.devices[{i}].type"),
                    format!("{t:?} is not a smartctl device type (like sat, megaraid,3)"),
                ));
            }
            // The label is a label value on every series of the drive: short, printable.
            if let Some(l) = &d.label
                && (l.is_empty() || l.len() > 128 || l.chars().any(char::is_control))
            {
                return Err(Invalid::new(
                    format!("{key}.devices[{i}].label"),
                    format!("{l:?}: must be 1 to 128 bytes without control characters"),
                ));
            }
        }
        Ok(())
    }
}

pub struct SmartCollector {
    cfg: SmartConfig,
    drives: BTreeMap<String, DriveState>,
    /// The privileged helper that reads the drives when the daemon gave up its capabilities;
    /// None: smartctl runs in this process.
    helper: Option<Helper>,
    /// RAID ports the last `--scan-open` found (`discover_raid`).
    raid: Vec<crate::smart::scan::RaidPort>,
    /// When the next scan is due; None: at the next sample.
    raid_due: Option<Instant>,
    /// Why the last scan gave nothing usable, shown every sample until one does.
    raid_error: Option<String>,
    /// Ports a scan left out that the log has told (each once).
    raid_told: std::collections::BTreeSet<String>,
}

/// The collector's name, and its owner name at the door (a drive's mark is its label; the
/// RAID scan's is `raid scan`).
const NAME: &str = "smart";

/// How often RAID ports are looked for: `--scan-open` opens every device it finds, and
/// controllers gain drives rarely.
const RAID_SCAN_EVERY: Duration = crate::time::HOUR_DURATION;

impl SmartCollector {
    /// A collector that runs smartctl (or libatasmart) in this process.
    pub fn new(cfg: &SmartConfig) -> anyhow::Result<Self> {
        Self::with_helper(cfg, None)
    }

    /// A collector that reads the drives through `helper` when given (the daemon gave up the
    /// capabilities a read needs), else in this process.
    pub fn with_helper(cfg: &SmartConfig, helper: Option<Helper>) -> anyhow::Result<Self> {
        Ok(SmartCollector {
            cfg: cfg.clone(),
            drives: BTreeMap::new(),
            helper,
            raid: Vec::new(),
            raid_due: None,
            raid_error: None,
            raid_told: std::collections::BTreeSet::new(),
        })
    }

    /// With `discover_raid`, runs `smartctl --scan-open` when due (through the helper, which
    /// holds the capabilities it needs) and keeps the RAID ports it found. A failed scan keeps
    /// the ports of the last good one.
    async fn scan_raid(&mut self, ctx: &Context, sample: &mut Sample) {
        if !self.cfg.discover_raid {
            return;
        }
        let now = Instant::now();
        if self.raid_due.is_none_or(|due| due <= now) {
            self.raid_due = Some(now + RAID_SCAN_EVERY);
            let outcome = match (ctx.door.enter(NAME, "raid scan"), &self.helper) {
                (Err(e), _) => RunOutcome::Failed(RunError::Task {
                    cause: e.to_string(),
                }),
                (Ok(pass), Some(h)) => h.read(RequestKind::ScanRaid, pass).await.outcome,
                (Ok(pass), None) => {
                    let args = argv::scan_args();
                    runner::run_bounded(&self.cfg.smartctl_path, &args, self.cfg.timeout, pass)
                        .await
                }
            };
            let scanned = match outcome {
                RunOutcome::Output { stdout, .. } => {
                    crate::smart::scan::parse_scan_open(&String::from_utf8_lossy(&stdout))
                        .map_err(|e| e.to_string())
                }
                RunOutcome::Failed(e) => Err(format!("smartctl --scan-open {e}")),
            };
            match scanned {
                Ok(scan) => {
                    for s in scan.skipped {
                        if self.raid_told.insert(s.clone()) {
                            tracing::info!("RAID discovery: left out {s}");
                        }
                    }
                    self.raid = scan.ports;
                    self.raid_error = None;
                }
                Err(e) => self.raid_error = Some(e),
            }
        }
        if let Some(e) = &self.raid_error {
            sample.error(ItemError::new(
                "raid discovery",
                format!("RAID discovery: {e}"),
            ));
        }
    }

    fn targets(&self, topo: Option<&Topology>) -> Vec<Target> {
        let mut out = Vec::new();
        if self.cfg.discover
            && let Some(t) = topo
        {
            #[allow(
                clippy::expect_used,
                reason = "a literal pattern; the discovery tests run it"
            )]
            let name_ok = Regex::new(r"^[A-Za-z0-9_-]{1,64}$").expect("static regex");
            for d in t.drives() {
                let kind = d.kind();
                if !matches!(
                    kind,
                    DeviceKind::Nvme | DeviceKind::Scsi | DeviceKind::Virtio
                ) || !name_ok.is_match(&d.name)
                    || !wanted(
                        self.cfg.device_include.as_ref(),
                        self.cfg.device_exclude.as_ref(),
                        &d.name,
                    )
                {
                    continue;
                }
                out.push(Target {
                    label: d.name.clone(),
                    path: format!("/dev/{}", d.name),
                    dev_type: None,
                    kind: Some(kind),
                    serial: d.serial.clone(),
                    wwn: d.wwn.clone(),
                    model: d.model.clone(),
                });
            }
        }
        for e in &self.cfg.devices {
            let stripped = e.path.trim_start_matches("/dev/");
            let label = e.label.clone().unwrap_or_else(|| match &e.dev_type {
                Some(t) if t.contains(',') => format!("{stripped}:{t}"),
                _ => stripped.to_string(),
            });
            out.retain(|t| t.label != label);
            out.push(Target {
                label,
                path: e.path.clone(),
                dev_type: e.dev_type.clone(),
                kind: None,
                serial: None,
                wwn: None,
                model: None,
            });
        }
        // Found RAID ports, labelled as a configured port is by default; a port listed
        // under `devices` keeps its entry (and its label).
        for p in &self.raid {
            let configured = (self.cfg.devices.iter())
                .any(|e| e.path == p.path && e.dev_type.as_deref() == Some(p.dev_type.as_str()));
            let label = format!("{}:{}", p.path.trim_start_matches("/dev/"), p.dev_type);
            if configured || out.iter().any(|t| t.label == label) {
                continue;
            }
            out.push(Target {
                label,
                path: p.path.clone(),
                dev_type: Some(p.dev_type.clone()),
                kind: None,
                serial: None,
                wwn: None,
                model: None,
            });
        }
        out
    }
}

#[async_trait::async_trait]
impl Collector for SmartCollector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn next_delay(&mut self) -> Duration {
        // Wake often enough to serve the shortest class and to keep sample ages fresh;
        // a drive is only queried when its own interval is due.
        let c = &self.cfg.class_intervals;
        [Some(self.cfg.interval), c.nvme, c.ata, c.scsi]
            .into_iter()
            .flatten()
            .chain([Duration::from_secs(60)])
            .min()
            .unwrap_or(self.cfg.interval)
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        let mut sample = Sample::default();
        let topo = self.discover(ctx, &mut sample).await;
        self.scan_raid(ctx, &mut sample).await;
        let targets = self.targets(topo.as_deref());
        self.forget_gone(&targets);
        let reads = self.start_due(ctx, &targets, &mut sample);
        let read = self.take_results(ctx, &targets, reads, &mut sample).await;
        let topo = topo.or_else(|| ctx.shared.topology(ctx.topology_max_age));
        self.fill_metrics(ctx, topo.as_deref(), &targets, &read, &mut sample);
        Ok(sample)
    }
}

/// What a read hands back: its outcome and, through the helper, the cause of a refusal it
/// observed where smartctl ran.
type Reading = (RunOutcome, Option<String>);

/// The reads one sample started: at most `parallelism` at a time.
struct Reads {
    sem: Arc<Semaphore>,
    set: tokio::task::JoinSet<Reading>,
    /// Which drive each task is for, so a task that did not complete is still named.
    task_label: HashMap<tokio::task::Id, (String, atasmart::Used)>,
}

impl Reads {
    /// Starts the read of one drive by the backend `used`, through the helper when there is
    /// one.
    fn spawn(
        &mut self,
        cfg: &SmartConfig,
        helper: Option<Helper>,
        t: &Target,
        used: atasmart::Used,
        (protocol, asks): (Option<&str>, Asks),
        pass: Pass,
    ) {
        let set = &mut self.set;
        let timeout = cfg.timeout;
        let sem = self.sem.clone();
        let task = match (used, helper) {
            // Through the helper: it builds the same argument set from these facts.
            (atasmart::Used::Smartctl, Some(h)) => {
                let req = RequestKind::Smartctl {
                    path: t.path.clone(),
                    dev_type: t.dev_type.clone(),
                    protocol: protocol.and_then(crate::privileged::Protocol::from_smartctl),
                    asks,
                };
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let a = h.read(req, pass).await;
                    (a.outcome, a.cause)
                })
            }
            // Only chosen when built in (`atasmart::choose`); the helper is the same binary.
            (atasmart::Used::Libatasmart, Some(h)) => {
                let req = RequestKind::Atasmart {
                    path: t.path.clone(),
                };
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let a = h.read(req, pass).await;
                    (a.outcome, a.cause)
                })
            }
            (atasmart::Used::Smartctl, None) => {
                let args = smartctl_args(
                    &t.path,
                    t.dev_type.as_deref(),
                    protocol,
                    asks,
                    cfg.nocheck_standby,
                );
                let bin = cfg.smartctl_path.clone();
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let out = runner::run_bounded(&bin, &args, timeout, pass).await;
                    (out, None)
                })
            }
            #[cfg(feature = "atasmart")]
            (atasmart::Used::Libatasmart, None) => {
                let path = t.path.clone();
                let nocheck = cfg.nocheck_standby;
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let out = runner::run_atasmart(&path, nocheck, timeout, pass).await;
                    (out, None)
                })
            }
            #[cfg(not(feature = "atasmart"))]
            (atasmart::Used::Libatasmart, None) => return,
        };
        self.task_label.insert(task.id(), (t.label.clone(), used));
    }
}

/// The steps of a sample: discover, forget the drives gone, start the reads due, take their
/// results, fill in every drive's metrics.
impl SmartCollector {
    async fn discover(&self, ctx: &Context, sample: &mut Sample) -> Option<Arc<Topology>> {
        if self.cfg.discover {
            match ctx.topology().await {
                Ok(t) => Some(t),
                Err(e) => {
                    sample.error(ItemError::new(
                        "drive discovery",
                        format!("drive discovery: {e:#}"),
                    ));
                    None
                }
            }
        } else {
            None
        }
    }

    fn forget_gone(&mut self, targets: &[Target]) {
        self.drives
            .retain(|label, _| targets.iter().any(|t| &t.label == label));
    }

    /// Whether `auto` finds smartctl to read ATA drives with (else libatasmart does).
    fn smartctl_found(&self) -> bool {
        atasmart::BUILT_IN
            && self.cfg.backend == Backend::Auto
            && crate::exe::find(&self.cfg.smartctl_path).is_some()
    }

    /// Starts a read of each drive whose interval is due and whose last smartctl is not stuck
    /// in the kernel.
    fn start_due(&mut self, ctx: &Context, targets: &[Target], sample: &mut Sample) -> Reads {
        let now = Instant::now();
        let smartctl_found = self.smartctl_found();
        let mut reads = Reads {
            sem: Arc::new(Semaphore::new(self.cfg.parallelism.max(1))),
            set: tokio::task::JoinSet::new(),
            task_label: HashMap::new(),
        };
        for t in targets {
            let st = self.drives.entry(t.label.clone()).or_default();
            if st.next_due.is_some_and(|due| due > now) {
                // Not read in this sample: its fault, if any, stays as it is.
                sample.unsampled.push(t.label.clone());
                continue;
            }
            // The drive's door mark: held while its read runs, and after it while a process of
            // the read is stuck in the kernel.
            let Ok(pass) = ctx.door.enter(NAME, t.label.clone()) else {
                // Its last smartctl is still stuck in the kernel: another would only join it.
                sample.error(ItemError::new(
                    t.label.clone(),
                    format!(
                        "device {}: smartctl on {} is still stuck in the kernel (D state); not starting another",
                        t.label, t.path
                    ),
                ));
                continue;
            };
            // libatasmart speaks ATA only: sd devices, or a configured node without a
            // passthrough type other than sat.
            let may_be_ata = match t.kind {
                Some(kind) => kind == DeviceKind::Scsi,
                None => matches!(t.dev_type.as_deref(), None | Some("sat" | "ata")),
            };
            let used = atasmart::choose(self.cfg.backend, smartctl_found, may_be_ata);
            let protocol = st.protocol.as_deref();
            let asks = Asks {
                devstat: !st.no_devstat,
                logs: self.cfg.read_logs && !st.no_logs,
                ocp: st.wants_ocp(self.cfg.nvme_ocp_log, now),
            };
            st.ocp_asked = asks.ocp;
            reads.spawn(
                &self.cfg,
                self.helper.clone(),
                t,
                used,
                (protocol, asks),
                pass,
            );
        }
        reads
    }

    /// Each read, as it completes, stepped into its drive's state, the drive's errors to the
    /// sample. Returns the drives read, each with its run's time (their fresh readings go to
    /// the history with their metrics).
    async fn take_results(
        &mut self,
        ctx: &Context,
        targets: &[Target],
        mut reads: Reads,
        sample: &mut Sample,
    ) -> Vec<(String, f64)> {
        let mut read = Vec::new();
        // Drives whose smartctl could not be started for want of a task: one fault for all.
        let mut no_task: Vec<String> = Vec::new();
        let mut no_task_cause = String::new();
        while let Some(joined) = reads.set.join_next_with_id().await {
            let (id, (outcome, helper_cause)) = match joined {
                Ok(done) => done,
                Err(e) => {
                    let cause = e.to_string();
                    (e.id(), (RunOutcome::Failed(RunError::Task { cause }), None))
                }
            };
            // Every task was spawned above with its label.
            let Some((label, used)) = reads.task_label.remove(&id) else {
                continue;
            };
            if let RunOutcome::Failed(RunError::NoTask { message }) = &outcome {
                no_task_cause.clone_from(message);
                sample.unsampled.push(label.clone());
                no_task.push(label);
                continue;
            }
            let target = targets.iter().find(|t| t.label == label);
            let kind = target.and_then(|t| t.kind);
            let run = Run {
                label: &label,
                path: target.map(|t| t.path.as_str()).unwrap_or(""),
            };
            let every = |protocol: Option<&str>| self.cfg.class_interval(protocol, kind);
            let st = self.drives.entry(label.clone()).or_default();
            let prev = std::mem::take(st);
            let run_unix = unix_now();
            // What smartctl's access looked like, examined only when it was refused.
            let needed = if matches!(kind, Some(DeviceKind::Nvme)) || run.path.contains("nvme") {
                access::CAP_SYS_ADMIN
            } else {
                access::CAP_SYS_RAWIO
            };
            let smartctl = self.cfg.smartctl_path.clone();
            // Through the helper, the cause it observed where smartctl ran.
            let why_denied = || {
                helper_cause.clone().unwrap_or_else(|| {
                    access::cause(&access::facts(run.path, &smartctl, needed)).to_string()
                })
            };
            let step = drive::step(
                prev,
                &run,
                outcome,
                Instant::now(),
                run_unix,
                &every,
                &why_denied,
            );
            *st = step.state;
            st.backend = used;
            read.push((label.clone(), run_unix));
            // The solid-state decision (topology collector) trusts the drive's own word.
            if let Some(rpm) = st.last.as_ref().and_then(|h| h.rotation_rate_rpm) {
                ctx.shared.set_rotation_rate(&label, rpm);
            }
            for n in step.notes {
                tracing::info!("{n}");
            }
            for e in step.errors {
                sample.error(e);
            }
        }
        if !no_task.is_empty() {
            no_task.sort();
            sample.error(no_task_fault(
                "smart",
                "smartctl process",
                &no_task,
                &no_task_cause,
                &ctx.roots,
            ));
        }
        read
    }

    /// Every drive's metrics, from its state (a drive not read this time shows its last), and
    /// the fresh reading of each drive `read` this time for the history.
    fn fill_metrics(
        &self,
        ctx: &Context,
        topo: Option<&Topology>,
        targets: &[Target],
        read: &[(String, f64)],
        sample: &mut Sample,
    ) {
        let now_unix = unix_now();
        for t in targets {
            let stuck = ctx.door.is_stuck(NAME, &t.label);
            sample
                .metrics
                .family(&catalogue::DEVICE_SMARTCTL_STUCK)
                .push(
                    &[("device", t.label.as_str())],
                    if stuck { 1.0 } else { 0.0 },
                );
            if let Some(st) = self.drives.get(&t.label) {
                let every = self.cfg.class_interval(st.protocol.as_deref(), t.kind);
                let risk = durability_of(ctx, topo, t, st);
                metrics::drive_metrics(t, st, every, now_unix, risk, &mut sample.metrics);
                if let Some(&(_, run_unix)) = read.iter().find(|(l, _)| *l == t.label)
                    && let Some(record) = history_record(ctx, Some(t), &t.label, st, run_unix, risk)
                {
                    sample.records.push(record);
                }
            }
        }
    }
}

/// Whether fsync on the drive may not be durable, from the kernel's queue settings, the drive's
/// own write-cache setting and the last sync-write probe on it; None for a drive the kernel
/// doesn't list under that name (a RAID port read through its controller) or without SMART data.
fn durability_of(
    ctx: &Context,
    topo: Option<&Topology>,
    t: &Target,
    st: &DriveState,
) -> Option<durability::Reason> {
    let h = st.last.as_ref()?;
    let kernel = topo?.get(&t.label)?;
    let e = durability::Evidence {
        kernel_write_back: kernel.write_cache,
        drive_cache_enabled: h.write_cache_enabled,
        rotational: h.rotation_rate_rpm.map(|r| r > 0).or(kernel.rotational),
        sync_write_p50_seconds: ctx.shared.sync_write_p50(&t.label),
    };
    Some(durability::assess(&e))
}

/// A fresh reading for the history store, keyed by the drive's identity: None when the run at
/// `run_unix` did not succeed, the history is off, or the drive has neither serial nor WWN.
fn history_record(
    ctx: &Context,
    target: Option<&Target>,
    label: &str,
    st: &DriveState,
    run_unix: f64,
    risk: Option<durability::Reason>,
) -> Option<Record> {
    if ctx.history.is_some()
        && st.last_ok_unix == Some(run_unix)
        && let Some(h) = &st.last
    {
        let serial = h
            .serial
            .clone()
            .or_else(|| target.and_then(|t| t.serial.clone()));
        let wwn = target.and_then(|t| t.wwn.clone()).or_else(|| h.wwn.clone());
        if serial.is_some() || wwn.is_some() {
            return Some(Record::Drive(DriveSample {
                key: DriveKey {
                    wwn,
                    serial,
                    model: h.model.clone(),
                },
                kernel_name: label.to_string(),
                capacity_bytes: h.capacity_bytes,
                t: run_unix as i64,
                wear_used_ratio: h.wear_used_ratio,
                spare_ratio: h.spare_available_ratio,
                host_written_bytes: h.host_written_bytes,
                nand_written_bytes: h.nand_written_bytes,
                media_errors: h.media_errors,
                power_on_hours: h.power_on_seconds.map(|s| s / crate::time::HOUR as u64),
                temperature_celsius: h.temperature_celsius,
                // The kernel's count (diskstats), since boot: the drive reports none.
                discarded_bytes: ctx
                    .shared
                    .disk_activity(label)
                    .and_then(|a| a.discarded_bytes),
                health: DriveHealthRecord {
                    error_log_entries: h.error_log_entries,
                    self_test: h
                        .self_test
                        .as_ref()
                        .map(|t| format!("{} {}", t.kind.as_str(), t.result.as_str())),
                    self_test_age_seconds: h
                        .self_test
                        .as_ref()
                        .and_then(|t| t.age_power_on_seconds),
                    temperature_warning_celsius: h.temperature_warning_celsius,
                    above_warning_seconds: h.warning_temperature_seconds,
                    durability: risk.map(|r| r.as_str().to_string()),
                },
            }));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_rejects_shell_metacharacters_in_devices() {
        let mut c = SmartConfig::default();
        c.devices.push(DeviceEntry {
            path: "/dev/sda; rm -rf /".into(),
            dev_type: None,
            label: None,
        });
        let e = c.validate("collectors.smart").unwrap_err();
        assert_eq!(e.key, "collectors.smart.devices[0].path");
        c.devices[0] = DeviceEntry {
            path: "/dev/bus/0".into(),
            dev_type: Some("megaraid,3 -x".into()),
            label: None,
        };
        let e = c.validate("collectors.smart").unwrap_err();
        assert_eq!(e.key, "collectors.smart.devices[0].type");
        c.devices[0].dev_type = Some("sat+megaraid,3".into());
        assert!(c.validate("collectors.smart").is_ok());
        c.devices[0].path = "/dev/../etc/passwd".into();
        assert!(c.validate("collectors.smart").is_err());
    }

    #[test]
    fn a_device_label_must_be_a_short_printable_label_value() {
        let mut c = SmartConfig::default();
        c.devices.push(DeviceEntry {
            path: "/dev/sda".into(),
            dev_type: None,
            label: Some("raid0-port3".into()),
        });
        assert!(c.validate("collectors.smart").is_ok());
        for bad in ["", "a\nb", &"x".repeat(129)] {
            c.devices[0].label = Some(bad.into());
            let e = c.validate("collectors.smart").unwrap_err();
            assert_eq!(e.key, "collectors.smart.devices[0].label", "{bad:?}");
        }
    }

    #[test]
    fn the_libatasmart_backend_is_refused_by_a_build_without_it() {
        let c = SmartConfig {
            backend: Backend::Libatasmart,
            ..SmartConfig::default()
        };
        let got = c.validate("collectors.smart");
        assert_eq!(got.is_ok(), atasmart::BUILT_IN, "{got:?}");
        if let Err(e) = got {
            assert_eq!(e.key, "collectors.smart.backend");
            assert!(e.message.contains("`atasmart` feature"), "{}", e.message);
        }
    }

    #[test]
    fn each_device_class_can_have_its_own_interval() {
        let c = SmartCollector::new(&SmartConfig {
            interval: Duration::from_secs(900),
            class_intervals: ClassIntervals {
                nvme: Some(Duration::from_secs(300)),
                ata: Some(Duration::from_secs(3600)),
                scsi: None,
            },
            ..SmartConfig::default()
        })
        .expect("new");
        // Before the first sample only the /sys kind is known; afterwards smartctl's protocol.
        assert_eq!(
            c.cfg.class_interval(None, Some(DeviceKind::Nvme)).as_secs(),
            300
        );
        assert_eq!(
            c.cfg.class_interval(None, Some(DeviceKind::Scsi)).as_secs(),
            900
        );
        assert_eq!(
            c.cfg
                .class_interval(Some("ATA"), Some(DeviceKind::Scsi))
                .as_secs(),
            3600
        );
        assert_eq!(c.cfg.class_interval(Some("SCSI"), None).as_secs(), 900);
        let mut c = c;
        assert_eq!(
            c.next_delay().as_secs(),
            60,
            "wakes each minute for fresh ages"
        );
    }

    #[test]
    fn raid_ports_get_distinct_labels() {
        let mut c = SmartConfig {
            discover: false,
            ..SmartConfig::default()
        };
        for port in ["megaraid,0", "megaraid,1"] {
            c.devices.push(DeviceEntry {
                path: "/dev/bus/0".into(),
                dev_type: Some(port.into()),
                label: None,
            });
        }
        let col = SmartCollector::new(&c).expect("new");
        let labels: Vec<_> = col.targets(None).into_iter().map(|t| t.label).collect();
        assert_eq!(labels, ["bus/0:megaraid,0", "bus/0:megaraid,1"]);
    }
}
