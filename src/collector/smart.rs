//! SMART collector: runs `smartctl --json` per drive on its own schedule (never on the scrape
//! path), with a timeout that kills the whole process group, bounded parallelism, standby
//! awareness and exit-bit decoding. Parsing and unit conversion live in `crate::smart`.

use crate::collector::{Collector, Context, Sample};
use crate::metrics::MetricSet;
use crate::smart::{EXIT_BITS, Health};
use crate::snapshot::unix_now;
use crate::sysfs::topology::{DeviceKind, Topology};
use crate::validate::{Invalid, check_interval};
use regex::Regex;
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

/// A drive listed in the config: drives behind RAID controllers or USB bridges that the
/// topology cannot see, or that need a `-d TYPE`.
/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(900);

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
    /// Query the drives found in /sys (NVMe, sd, virtio).
    pub discover: bool,
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
            discover: true,
            devices: Vec::new(),
        }
    }
}

fn type_re() -> Regex {
    // smartctl -d types: letters, digits, and the separators of `sat+megaraid,N`, `jmb39x-q,0`.
    Regex::new(r"^[a-z][a-z0-9_+,-]{0,40}$").expect("static regex")
}

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
        if self.timeout < Duration::from_millis(100) {
            return Err(Invalid::new(
                format!("{key}.timeout"),
                "must be at least 100ms",
            ));
        }
        if !(1..=64).contains(&self.parallelism) {
            return Err(Invalid::new(
                format!("{key}.parallelism"),
                format!("{} is out of range 1..=64", self.parallelism),
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
        }
        Ok(())
    }
}

/// One drive to query: its label, node and optional `-d` type.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    label: String,
    path: String,
    dev_type: Option<String>,
    kind: Option<DeviceKind>,
    serial: Option<String>,
    wwn: Option<String>,
    /// The model /sys reports, for drives smartctl cannot identify (virtio, RAID volumes).
    model: Option<String>,
}

/// What the collector remembers of one drive between samples.
#[derive(Debug, Default)]
struct DriveState {
    /// Last sample that had health data.
    last: Option<Health>,
    last_ok_unix: Option<f64>,
    /// Exit status of the last run (standby runs excluded).
    exit_status: Option<u64>,
    in_standby: bool,
    ok: bool,
    protocol: Option<String>,
    /// The drive rejected the device statistics log once: not asked for again.
    no_devstat: bool,
    next_due: Option<Instant>,
    /// (unix time, host written, NAND written) of recent samples, for the 1-day WAF.
    history: VecDeque<(f64, u64, u64)>,
}

/// The outcome of one smartctl run.
#[derive(Debug)]
enum RunOutcome {
    Output {
        stdout: Vec<u8>,
        status: Option<i32>,
    },
    TimedOut,
    SpawnFailed(String),
}

pub struct SmartCollector {
    cfg: SmartConfig,
    drives: BTreeMap<String, DriveState>,
}

impl SmartCollector {
    pub fn new(cfg: &SmartConfig) -> anyhow::Result<Self> {
        Ok(SmartCollector {
            cfg: cfg.clone(),
            drives: BTreeMap::new(),
        })
    }

    fn targets(&self, topo: Option<&Topology>) -> Vec<Target> {
        let mut out = Vec::new();
        if self.cfg.discover
            && let Some(t) = topo
        {
            let name_ok = Regex::new(r"^[A-Za-z0-9_-]{1,64}$").expect("static regex");
            for d in t.drives() {
                let kind = d.kind();
                if !matches!(
                    kind,
                    DeviceKind::Nvme | DeviceKind::Scsi | DeviceKind::Virtio
                ) || !name_ok.is_match(&d.name)
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
        out
    }
}

/// The smartctl argv for one drive. Cheap options only: identity, overall health and the
/// attribute table / NVMe health log. No `--log=error` (NVMe error-log reads are counted by
/// some drives) and no `-x`; ATA drives add the device-statistics log, the standard source of
/// the endurance indicator. A sub-log a drive rejects only sets an exit bit: the rest of the
/// output is still used.
pub fn smartctl_args(
    path: &str,
    dev_type: Option<&str>,
    protocol: Option<&str>,
    nocheck_standby: bool,
) -> Vec<String> {
    let mut a: Vec<String> = ["--json=c", "--info", "--health", "--attributes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if nocheck_standby {
        a.push("--nocheck=standby".into());
    }
    if protocol == Some("ATA") {
        a.push("--log=devstat".into());
    }
    if let Some(t) = dev_type {
        a.push("-d".into());
        a.push(t.into());
    }
    a.push(path.into());
    a
}

/// Output beyond this is garbage, not smartctl JSON (a full `-x` is under 100 KiB).
const MAX_OUTPUT: u64 = 4 << 20;

/// Runs smartctl once in its own process group; on timeout the whole group is killed and
/// reaped, so nothing it started survives.
async fn run_smartctl(bin: &std::path::Path, args: &[String], timeout: Duration) -> RunOutcome {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("LC_ALL", "C")
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return RunOutcome::SpawnFailed(format!("cannot run {}: {e}", bin.display())),
    };
    let pid = child.id();
    let stdout = child.stdout.take();
    let reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        if let Some(out) = stdout {
            let _ = out.take(MAX_OUTPUT).read_to_end(&mut buf).await;
        }
        buf
    });
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => {
            // The pipe closes when the last holder exits; a grandchild that keeps it open
            // must not hang us past the deadline either.
            // (Killing the group only here: while a member holds the pipe the group exists, so
            // its id cannot have been reused by an unrelated process.)
            let stdout = match tokio::time::timeout(Duration::from_secs(2), reader).await {
                Ok(Ok(b)) => b,
                _ => {
                    kill_group(pid);
                    Vec::new()
                }
            };
            RunOutcome::Output {
                stdout,
                status: status.code(),
            }
        }
        Ok(Err(e)) => {
            kill_group(pid);
            let _ = child.wait().await;
            RunOutcome::SpawnFailed(format!("waiting for {}: {e}", bin.display()))
        }
        Err(_) => {
            kill_group(pid);
            // Reap: no zombie is left behind.
            let _ = child.wait().await;
            reader.abort();
            RunOutcome::TimedOut
        }
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // The group id is the child's pid (process_group(0)); ESRCH just means all gone.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

fn looks_like_standby(stdout: &[u8]) -> bool {
    let s = String::from_utf8_lossy(stdout).to_ascii_lowercase();
    s.contains("device is in standby") || s.contains("device is in sleep")
}

fn permission_hint(h: &Health) -> Option<&'static str> {
    let denied = h.errors.iter().any(|e| {
        let e = e.to_ascii_lowercase();
        e.contains("permission denied") || e.contains("operation not permitted")
    });
    denied.then_some(
        " (smartctl needs CAP_SYS_RAWIO for ATA/SCSI passthrough and CAP_SYS_ADMIN for NVMe)",
    )
}

/// Write amplification over a window from consecutive samples: ΔNAND / Δhost between the newest
/// sample and the newest one at least `window` older. None without such a baseline or writes.
pub fn waf_over_window(history: &VecDeque<(f64, u64, u64)>, window: f64) -> Option<f64> {
    let &(now, host, nand) = history.back()?;
    let &(_, h0, n0) = history.iter().rev().find(|(t, _, _)| *t <= now - window)?;
    let dh = host.checked_sub(h0)?;
    let dn = nand.checked_sub(n0)?;
    (dh > 0).then(|| dn as f64 / dh as f64)
}

const DAY: f64 = 86_400.0;

impl DriveState {
    fn record(&mut self, h: Health, now: f64) {
        self.protocol = h.protocol.clone().or(self.protocol.take());
        if let (Some(host), Some(nand)) = (h.host_written_bytes, h.nand_written_bytes) {
            // A counter that went backwards means another drive or a reset: start over.
            if self
                .history
                .back()
                .is_some_and(|&(_, h0, n0)| host < h0 || nand < n0)
            {
                self.history.clear();
            }
            self.history.push_back((now, host, nand));
            // Keep one sample older than the window as the baseline, drop the rest.
            while self.history.len() > 2
                && self.history.get(1).is_some_and(|&(t, _, _)| t <= now - DAY)
            {
                self.history.pop_front();
            }
        }
        self.last = Some(h);
        self.last_ok_unix = Some(now);
    }
}

#[async_trait::async_trait]
impl Collector for SmartCollector {
    fn name(&self) -> &'static str {
        "smart"
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
        let mut errors = Vec::new();
        let topo = if self.cfg.discover {
            match ctx.topology().await {
                Ok(t) => Some(t),
                Err(e) => {
                    errors.push(format!("drive discovery: {e:#}"));
                    None
                }
            }
        } else {
            None
        };
        let targets = self.targets(topo.as_deref());
        self.drives
            .retain(|label, _| targets.iter().any(|t| &t.label == label));

        let now = Instant::now();
        let sem = Arc::new(Semaphore::new(self.cfg.parallelism.max(1)));
        let mut set = tokio::task::JoinSet::new();
        for t in &targets {
            let st = self.drives.entry(t.label.clone()).or_default();
            if st.next_due.is_some_and(|due| due > now) {
                continue;
            }
            let args = smartctl_args(
                &t.path,
                t.dev_type.as_deref(),
                st.protocol.as_deref().filter(|_| !st.no_devstat),
                self.cfg.nocheck_standby,
            );
            let bin = self.cfg.smartctl_path.clone();
            let timeout = self.cfg.timeout;
            let sem = sem.clone();
            let label = t.label.clone();
            set.spawn(async move {
                let _permit = sem.acquire_owned().await;
                (label, run_smartctl(&bin, &args, timeout).await)
            });
        }
        while let Some(joined) = set.join_next().await {
            let Ok((label, outcome)) = joined else {
                errors.push("a smartctl task failed to complete".into());
                continue;
            };
            let target = targets.iter().find(|t| t.label == label);
            let kind = target.and_then(|t| t.kind);
            let path = target.map(|t| t.path.as_str()).unwrap_or("");
            let now_unix = unix_now();
            {
                let st = self.drives.entry(label.clone()).or_default();
                match outcome {
                    RunOutcome::TimedOut => {
                        st.ok = false;
                        errors.push(format!(
                            "device {label}: smartctl on {path} timed out after {}; killed",
                            humantime::format_duration(self.cfg.timeout)
                        ));
                    }
                    RunOutcome::SpawnFailed(e) => {
                        st.ok = false;
                        errors.push(format!("device {label}: {e}"));
                    }
                    RunOutcome::Output { stdout, status } => {
                        let text = String::from_utf8_lossy(&stdout);
                        match crate::smart::parse(&text) {
                            Ok(h) if h.in_standby => {
                                // Asleep: not woken, last values kept with their age.
                                st.in_standby = true;
                                st.ok = true;
                            }
                            Ok(mut h) => {
                                st.in_standby = false;
                                st.exit_status = h
                                    .smartctl_exit_status
                                    .or(status.and_then(|s| u64::try_from(s).ok()));
                                let has_data = h.smart_supported.is_some();
                                // A drive without SMART (virtio, RAID volume) is reported by
                                // ssdwatch_device_smart_supported 0, not as an error every time.
                                let unsupported = h.smart_supported == Some(false);
                                if h.errors.iter().any(|e| e.contains("Device Statistics")) {
                                    // Reported once; later runs leave the log out, and the
                                    // rest of this output is still used.
                                    if st.no_devstat {
                                        h.errors.retain(|e| !e.contains("Device Statistics"));
                                    }
                                    st.no_devstat = true;
                                }
                                for e in h.errors.iter().filter(|_| !unsupported) {
                                    errors.push(format!(
                                        "device {label}: smartctl: {e}{}",
                                        permission_hint(&h).unwrap_or("")
                                    ));
                                }
                                st.ok = has_data;
                                if has_data {
                                    st.record(h, now_unix);
                                } else if h.errors.is_empty() {
                                    errors.push(format!(
                                        "device {label}: smartctl returned no usable data (exit status {})",
                                        st.exit_status.unwrap_or(0)
                                    ));
                                }
                            }
                            Err(_) if looks_like_standby(&stdout) => {
                                st.in_standby = true;
                                st.ok = true;
                            }
                            Err(e) => {
                                st.ok = false;
                                st.exit_status = status.and_then(|s| u64::try_from(s).ok());
                                errors.push(format!(
                                    "device {label}: smartctl output on {path} is unusable: {e}"
                                ));
                            }
                        }
                    }
                }
                // After this run: its output may have told the protocol for the first time.
                let every = self.cfg.class_interval(st.protocol.as_deref(), kind);
                st.next_due = Some(Instant::now() + every);
            }
        }

        let mut m = MetricSet::new();
        let now_unix = unix_now();
        for t in &targets {
            if let Some(st) = self.drives.get(&t.label) {
                let every = self.cfg.class_interval(st.protocol.as_deref(), t.kind);
                render_drive(t, st, every, now_unix, &mut m);
            }
        }
        Ok(Sample {
            metrics: m,
            errors: errors.into_iter().map(Into::into).collect(),
        })
    }
}

fn render_drive(t: &Target, st: &DriveState, every: Duration, now: f64, m: &mut MetricSet) {
    let h = st.last.as_ref();
    let serial = h
        .and_then(|h| h.serial.clone())
        .or_else(|| t.serial.clone())
        .unwrap_or_default();
    let wwn = t
        .wwn
        .clone()
        .or_else(|| h.and_then(|h| h.wwn.clone()))
        .unwrap_or_default();
    let dev = t.label.as_str();
    let l = [
        ("device", dev),
        ("serial", serial.as_str()),
        ("wwn", wwn.as_str()),
    ];
    let b = |x: bool| if x { 1.0 } else { 0.0 };

    m.gauge(
        "ssdwatch_device_smart_sample_ok",
        "1 if the last smartctl run on this drive gave usable data (or found it in standby).",
    )
    .push(&l, b(st.ok));
    m.gauge(
        "ssdwatch_device_in_standby",
        "1 if the drive was in standby at the last attempt; values are then from the last awake sample.",
    )
    .push(&l, b(st.in_standby));
    if let Some(s) = st.exit_status {
        let fam = m.gauge(
            "ssdwatch_device_smartctl_exit_status_bit",
            "smartctl exit-status bits of the last run (smartctl(8) RETURN VALUES), 1 when set.",
        );
        for (i, bit) in EXIT_BITS.iter().enumerate() {
            fam.push(
                &[
                    ("device", dev),
                    ("serial", serial.as_str()),
                    ("wwn", wwn.as_str()),
                    ("bit", bit),
                ],
                b(s & (1 << i) != 0),
            );
        }
    }
    let Some(h) = h else { return };
    m.gauge(
        "ssdwatch_device_info",
        "Identity of a drive as smartctl reports it; always 1. Join on device.",
    )
    .push(
        &[
            ("device", dev),
            ("serial", serial.as_str()),
            ("wwn", wwn.as_str()),
            (
                "model",
                h.model.as_deref().or(t.model.as_deref()).unwrap_or(""),
            ),
            ("firmware", h.firmware.as_deref().unwrap_or("")),
            ("model_family", h.model_family.as_deref().unwrap_or("")),
            ("device_type", h.device_type.as_deref().unwrap_or("")),
        ],
        1.0,
    );
    m.gauge(
        "ssdwatch_device_smart_supported",
        "1 if the drive answers SMART/health commands, 0 if it has none (virtio, RAID volume).",
    )
    .push_opt(&l, h.smart_supported.map(b));
    if let Some(t0) = st.last_ok_unix {
        m.gauge(
            "ssdwatch_device_smart_sample_age_seconds",
            "Age of the SMART values shown for this drive.",
        )
        .push(&l, (now - t0).max(0.0));
    }
    m.gauge(
        "ssdwatch_device_smart_interval_seconds",
        "Configured time between smartctl runs for this drive (its device class's interval).",
    )
    .push(&l, every.as_secs_f64());
    let f = |x: Option<u64>| x.map(|v| v as f64);
    m.gauge(
        "ssdwatch_device_wear_used_ratio",
        "Rated endurance used (0..1, may exceed 1): NVMe percentage used, SCSI/ATA endurance indicator or the vendor attribute.",
    )
    .push_opt(&l, h.wear_used_ratio);
    m.gauge(
        "ssdwatch_device_spare_available_ratio",
        "Spare blocks remaining (0..1).",
    )
    .push_opt(&l, h.spare_available_ratio);
    m.gauge(
        "ssdwatch_device_spare_threshold_ratio",
        "Spare level below which the drive reports a critical condition (0..1).",
    )
    .push_opt(&l, h.spare_threshold_ratio);
    m.counter(
        "ssdwatch_device_host_written_bytes_total",
        "Bytes written by the host over the drive's life.",
    )
    .push_opt(&l, f(h.host_written_bytes));
    m.counter(
        "ssdwatch_device_host_read_bytes_total",
        "Bytes read by the host over the drive's life.",
    )
    .push_opt(&l, f(h.host_read_bytes));
    m.counter(
        "ssdwatch_device_nand_written_bytes_total",
        "Bytes written to flash (host plus internal writes), where the vendor reports it.",
    )
    .push_opt(&l, f(h.nand_written_bytes));
    m.gauge(
        "ssdwatch_device_erase_count_avg",
        "Average program/erase cycles per block.",
    )
    .push_opt(&l, f(h.erase_count_avg));
    m.gauge(
        "ssdwatch_device_erase_count_max",
        "Maximum program/erase cycles of any block.",
    )
    .push_opt(&l, f(h.erase_count_max));
    m.counter(
        "ssdwatch_device_media_errors_total",
        "Unrecovered media/data-integrity errors (NVMe media errors, SCSI uncorrected, ATA reported uncorrectable).",
    )
    .push_opt(&l, f(h.media_errors));
    m.gauge(
        "ssdwatch_device_critical_warning",
        "NVMe critical warning bit mask (0 = none).",
    )
    .push_opt(&l, f(h.critical_warning));
    m.gauge(
        "ssdwatch_device_smart_passed",
        "1 if the drive's overall SMART self-assessment passed, 0 if it failed.",
    )
    .push_opt(&l, h.smart_passed.map(b));
    m.gauge(
        "ssdwatch_device_temperature_celsius",
        "Current drive temperature.",
    )
    .push_opt(&l, h.temperature_celsius);
    m.counter(
        "ssdwatch_device_power_on_seconds_total",
        "Power-on time over the drive's life.",
    )
    .push_opt(&l, f(h.power_on_seconds));
    m.counter(
        "ssdwatch_device_power_cycles_total",
        "Power cycles over the drive's life.",
    )
    .push_opt(&l, f(h.power_cycles));
    m.counter(
        "ssdwatch_device_unsafe_shutdowns_total",
        "Power losses without a clean shutdown over the drive's life.",
    )
    .push_opt(&l, f(h.unsafe_shutdowns));
    m.gauge(
        "ssdwatch_device_reallocated_sectors",
        "Reallocated sectors/blocks (ATA attribute 5, SCSI grown defect list).",
    )
    .push_opt(&l, f(h.reallocated_sectors));
    m.gauge(
        "ssdwatch_device_pending_sectors",
        "Sectors waiting for reallocation (ATA attribute 197).",
    )
    .push_opt(&l, f(h.pending_sectors));

    let lifetime = match (h.nand_written_bytes, h.host_written_bytes) {
        (Some(n), Some(w)) if w > 0 => Some(n as f64 / w as f64),
        _ => None,
    };
    let waf = m.gauge(
        "ssdwatch_device_write_amplification_ratio",
        "Flash bytes written per host byte written, over the drive's life or the last day.",
    );
    for (window, v) in [
        ("lifetime", lifetime),
        ("1d", waf_over_window(&st.history, DAY)),
    ] {
        waf.push_opt(
            &[
                ("device", dev),
                ("serial", serial.as_str()),
                ("wwn", wwn.as_str()),
                ("window", window),
            ],
            v,
        );
    }

    let id_buf: Vec<String> = h.attributes.iter().map(|a| a.id.to_string()).collect();
    for (a, id) in h.attributes.iter().zip(&id_buf) {
        let al = [
            ("device", dev),
            ("serial", serial.as_str()),
            ("id", id.as_str()),
            ("name", a.name.as_str()),
        ];
        m.gauge(
            "ssdwatch_smart_attribute_value",
            "ATA SMART attribute normalized value (vendor scale, usually 100 or 200 = new).",
        )
        .push_opt(&al, f(a.value));
        m.gauge(
            "ssdwatch_smart_attribute_raw",
            "ATA SMART attribute raw value (48-bit; meaning and unit depend on the drive family).",
        )
        .push_opt(&al, f(a.raw));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_cheap_and_never_reads_the_error_log() {
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), true);
        assert_eq!(
            a,
            [
                "--json=c",
                "--info",
                "--health",
                "--attributes",
                "--nocheck=standby",
                "/dev/nvme0n1"
            ]
        );
        let a = smartctl_args("/dev/bus/0", Some("megaraid,3"), Some("ATA"), true);
        assert!(a.contains(&"--log=devstat".to_string()));
        assert!(a.windows(2).any(|w| w == ["-d", "megaraid,3"]));
        assert!(
            !a.iter()
                .any(|x| x.contains("error") || x == "-x" || x == "-a")
        );
    }

    #[test]
    fn waf_over_a_day_uses_the_newest_baseline_at_least_a_day_old() {
        let mut h = VecDeque::new();
        h.push_back((0.0, 1000, 1500));
        h.push_back((3600.0, 2000, 3000));
        assert_eq!(waf_over_window(&h, DAY), None, "no baseline a day old yet");
        h.push_back((DAY + 3600.0, 4000, 6000));
        // Baseline is the 3600 s sample: (6000-3000)/(4000-2000).
        assert_eq!(waf_over_window(&h, DAY), Some(1.5));
        let mut flat = VecDeque::new();
        flat.push_back((0.0, 10, 10));
        flat.push_back((DAY, 10, 20));
        assert_eq!(
            waf_over_window(&flat, DAY),
            None,
            "no host writes: no ratio"
        );
    }

    #[test]
    fn history_keeps_one_baseline_and_restarts_on_counter_reset() {
        let mut st = DriveState::default();
        let h = |w, n| Health {
            host_written_bytes: Some(w),
            nand_written_bytes: Some(n),
            ..Health::default()
        };
        for i in 0..50u64 {
            st.record(h(100 * (i + 1), 200 * (i + 1)), i as f64 * 3600.0);
        }
        assert!(st.history.len() <= 26, "{}", st.history.len());
        assert_eq!(waf_over_window(&st.history, DAY), Some(2.0));
        st.record(h(5, 5), 51.0 * 3600.0);
        assert_eq!(st.history.len(), 1);
    }

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
