//! One drive's state between samples and the pure step that takes a smartctl run's outcome to
//! the next state and the errors to publish. No processes and no clock here: time is an input.

use crate::catalogue;
use crate::collector::ItemError;
use crate::privileged::escape::Swept;
use crate::privileged::runner::{Exit, RunError, RunOutcome};
use crate::smart::{Health, ParseError};
use crate::sysfs::topology::DeviceKind;
use crate::time::{DAY_F64, HOUR_DURATION};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// One drive to query: its label, node and optional `-d` type.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Target {
    pub label: String,
    pub path: String,
    pub dev_type: Option<String>,
    pub kind: Option<DeviceKind>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    /// The model /sys reports, for drives smartctl cannot identify (virtio, RAID volumes).
    pub model: Option<String>,
}

/// What the collector remembers of one drive between samples.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct DriveState {
    /// Last sample that had health data.
    pub last: Option<Health>,
    pub last_ok_unix: Option<f64>,
    /// Exit status of the last run (standby runs excluded).
    pub exit_status: Option<u64>,
    pub in_standby: bool,
    pub ok: bool,
    pub protocol: Option<String>,
    /// The drive rejected the device statistics log once: not asked for again.
    pub no_devstat: bool,
    /// The drive rejected one of the other logs (error log, self-test log, capabilities,
    /// write cache) once: none of them is asked for again.
    pub no_logs: bool,
    /// The drive refused the OCP SMART log (C0h), or gave one of another layout: not asked
    /// again.
    pub no_ocp: bool,
    /// When the OCP log is next due (it is read at its own slower pace, `OCP_LOG_EVERY`);
    /// None: at the drive's next run.
    pub ocp_due: Option<Instant>,
    /// The run under way asks for the OCP log.
    pub ocp_asked: bool,
    pub next_due: Option<Instant>,
    /// (unix time, host written, NAND written) of recent samples, for the 1-day WAF.
    pub history: VecDeque<(f64, u64, u64)>,
    /// Processes smartctl runs left behind (escaped their group with setsid) and that were
    /// killed, over the daemon's life.
    pub escaped_total: u64,
    /// The drive was last found to have no SMART (told once, when it is first found).
    pub unsupported: bool,
    /// The backend that read it last.
    pub backend: crate::privileged::atasmart::Used,
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

/// How often a drive's OCP SMART log is read: flash writes change slowly, and each read is a
/// vendor log page the drive assembles; the regular runs in between carry the last value.
pub(super) const OCP_LOG_EVERY: Duration = HOUR_DURATION;

impl DriveState {
    /// Whether the run starting at `now` asks for the OCP log (where configured).
    pub(super) fn wants_ocp(&self, configured: bool, now: Instant) -> bool {
        configured
            && !self.no_ocp
            && self.protocol.as_deref() == Some("NVMe")
            && self.ocp_due.is_none_or(|due| due <= now)
    }

    /// `fresh_nand`: the NAND figure was read in this run (not carried from an earlier one),
    /// so it pairs with this run's host writes in the write-amplification history.
    fn record(&mut self, h: Health, now: f64, fresh_nand: bool) {
        self.protocol = h.protocol.clone().or(self.protocol.take());
        if let (Some(host), Some(nand), true) =
            (h.host_written_bytes, h.nand_written_bytes, fresh_nand)
        {
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
                && self
                    .history
                    .get(1)
                    .is_some_and(|&(t, _, _)| t <= now - DAY_F64)
            {
                self.history.pop_front();
            }
        }
        self.last = Some(h);
        self.last_ok_unix = Some(now);
    }
}

/// A problem with one drive's run; every message names the device.
#[derive(Debug, thiserror::Error)]
pub(super) enum DriveError {
    #[error("device {device}: smartctl on {path} {source}")]
    TimedOut {
        device: String,
        path: String,
        source: RunError,
    },
    #[error("device {device}: {source}")]
    Run { device: String, source: RunError },
    #[error("device {device}: smartctl on {path}: {source}")]
    Task {
        device: String,
        path: String,
        source: RunError,
    },
    #[error("device {device}: smartctl: {message}{}", hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Smartctl {
        device: String,
        message: String,
        hint: Option<String>,
    },
    #[error(
        "device {device}: smartctl on {path} left {count} process(es) behind that could not be killed"
    )]
    Escaped {
        device: String,
        path: String,
        count: usize,
    },
    #[error(
        "device {device}: smartctl on {path} left {count} process(es) stuck in the kernel (D state), killed but not gone until their I/O returns; no new run of this drive until they are gone"
    )]
    StuckLeftovers {
        device: String,
        path: String,
        count: usize,
    },
    #[error("device {device}: smartctl returned no usable data ({exit})")]
    NoData { device: String, exit: String },
    #[error("device {device}: smartctl output on {path} is unusable: {source}")]
    Unusable {
        device: String,
        path: String,
        source: ParseError,
    },
}

impl DriveError {
    fn device(&self) -> &str {
        match self {
            DriveError::TimedOut { device, .. }
            | DriveError::Run { device, .. }
            | DriveError::Task { device, .. }
            | DriveError::Smartctl { device, .. }
            | DriveError::NoData { device, .. }
            | DriveError::Escaped { device, .. }
            | DriveError::StuckLeftovers { device, .. }
            | DriveError::Unusable { device, .. } => device,
        }
    }
}

/// A per-device fault, tracked under the device label.
impl From<DriveError> for ItemError {
    fn from(e: DriveError) -> Self {
        ItemError::new(e.device(), e.to_string())
    }
}

/// The drive a run was for.
pub(super) struct Run<'a> {
    pub label: &'a str,
    pub path: &'a str,
}

/// What a step decided: the drive's next state and the errors to publish for it.
#[derive(Debug)]
pub(super) struct Step {
    pub state: DriveState,
    pub errors: Vec<DriveError>,
    /// Facts worth one log line when they first become true (not faults).
    pub notes: Vec<String>,
}

fn looks_like_standby(stdout: &[u8]) -> bool {
    let s = String::from_utf8_lossy(stdout).to_ascii_lowercase();
    s.contains("device is in standby") || s.contains("device is in sleep")
}

fn is_denial(e: &str) -> bool {
    let e = e.to_ascii_lowercase();
    e.contains("permission denied") || e.contains("operation not permitted")
}

/// smartctl's error for a refused device statistics log ("Read Device Statistics page 0x00
/// failed").
fn refuses_devstat(e: &str) -> bool {
    e.to_ascii_lowercase().contains("device statistics")
}

/// smartctl's error for one of the other logs the drive refused ("Read SMART Self-test Log
/// failed", "Read SMART Error Log failed", "Read Self-test Log failed", "Self-tests not
/// supported", an error counter page or a write-cache query refused).
fn refuses_a_log(e: &str) -> bool {
    let e = e.to_ascii_lowercase();
    ["self-test", "error log", "error counter", "write cache"]
        .iter()
        .any(|k| e.contains(k))
}

/// smartctl's error for a refused log page dump ("Read NVMe Log 0xc0 failed: ...").
fn refuses_ocp(e: &str) -> bool {
    e.to_ascii_lowercase().contains("nvme log 0xc0")
}

fn denied(h: &Health) -> bool {
    h.errors.iter().any(|e| is_denial(e))
}

/// One drive's next state after a run. `now` is when the run ended (`unix` the same instant
/// on the wall clock); `every` gives the drive's interval for a protocol, which this run's
/// output may have told for the first time. `why_denied` names the cause of a refusal
/// (permission denied / not permitted), from what can be observed of smartctl's access.
pub(super) fn step(
    prev: DriveState,
    run: &Run,
    outcome: RunOutcome,
    now: Instant,
    unix: f64,
    every: &dyn Fn(Option<&str>) -> Duration,
    why_denied: &dyn Fn() -> String,
) -> Step {
    let mut out = Step {
        state: prev,
        errors: Vec::new(),
        notes: Vec::new(),
    };
    let device = run.label.to_string();
    let path = run.path.to_string();
    match outcome {
        RunOutcome::Failed(source @ RunError::Task { .. }) => {
            // No run took place: nothing is known of the drive, and it is due again at once.
            out.errors.push(DriveError::Task {
                device,
                path,
                source,
            });
            return out;
        }
        RunOutcome::Failed(RunError::NoTask { .. }) => {
            // No process could be started: nothing is known of the drive, it is due again at
            // once, and the fault is the daemon's task limit, told once by the collector for
            // every drive it hit.
            return out;
        }
        RunOutcome::Failed(source @ RunError::TimedOut { .. }) => {
            out.state.ok = false;
            out.errors.push(DriveError::TimedOut {
                device,
                path,
                source,
            });
        }
        RunOutcome::Failed(source) => {
            out.state.ok = false;
            out.errors.push(DriveError::Run { device, source });
        }
        RunOutcome::Output {
            stdout,
            exit,
            escaped,
        } => {
            escaped_processes(&mut out, run, escaped);
            let text = String::from_utf8_lossy(&stdout);
            match crate::smart::parse(&text) {
                Ok(h) if h.in_standby => {
                    // Asleep: not woken, last values kept with their age.
                    out.state.in_standby = true;
                    out.state.ok = true;
                }
                Ok(h) => health(&mut out, run, h, exit, now, unix, why_denied),
                Err(_) if looks_like_standby(&stdout) => {
                    out.state.in_standby = true;
                    out.state.ok = true;
                }
                Err(source) => {
                    out.state.ok = false;
                    out.state.exit_status = exit.bits();
                    out.errors.push(DriveError::Unusable {
                        device,
                        path,
                        source,
                    });
                }
            }
        }
    }
    out.state.next_due = Some(now + every(out.state.protocol.as_deref()));
    out
}

/// Processes a run left behind: the killed ones counted (and told the first time), the ones
/// that could not be signalled or are stuck in the kernel as faults. What smartctl printed
/// is still used.
fn escaped_processes(out: &mut Step, run: &Run, escaped: Swept) {
    let (device, path) = (run.label, run.path);
    if escaped.killed > 0 {
        if out.state.escaped_total == 0 {
            out.notes.push(format!(
                "device {device}: smartctl on {path} left {} process(es) running after it exited (they left its process group, e.g. with setsid); killed. Counted in {}",
                escaped.killed,
                catalogue::DEVICE_SMARTCTL_ESCAPED_PROCESSES_TOTAL.name
            ));
        }
        out.state.escaped_total = out
            .state
            .escaped_total
            .saturating_add(escaped.killed as u64);
    }
    if escaped.failed > 0 {
        out.errors.push(DriveError::Escaped {
            device: device.to_string(),
            path: path.to_string(),
            count: escaped.failed,
        });
    }
    if escaped.stuck > 0 {
        // The runner keeps the drive marked stuck until they are gone.
        out.errors.push(DriveError::StuckLeftovers {
            device: device.to_string(),
            path: path.to_string(),
            count: escaped.stuck,
        });
    }
}

/// A run that gave a readable output of an awake drive: what it tells of the drive's SMART
/// support, its logs and its health.
fn health(
    out: &mut Step,
    run: &Run,
    mut h: Health,
    exit: Exit,
    now: Instant,
    unix: f64,
    why_denied: &dyn Fn() -> String,
) {
    let (device, path) = (run.label, run.path);
    let st = &mut out.state;
    st.in_standby = false;
    let has_data = h.smart_supported.is_some();
    // A drive without SMART (virtio, RAID volume) is one fact, told once:
    // ssdwatch_device_smart_supported 0. smartctl's "command failed" exit bit
    // and its "Unable to detect device type" say the same thing again, so
    // neither becomes a series or an error; the log says it when first found.
    let unsupported = h.smart_supported == Some(false);
    st.exit_status = if unsupported {
        None
    } else {
        h.smartctl_exit_status.or(exit.bits())
    };
    if unsupported && !st.unsupported {
        let why = h
            .errors
            .first()
            .map(String::as_str)
            .unwrap_or("no SMART data");
        out.notes.push(format!(
            "device {device}: no SMART on this device type (smartctl on {path}: {why}); shown as {} 0",
            catalogue::DEVICE_SMART_SUPPORTED.name
        ));
    }
    st.unsupported = unsupported;
    let carried = ocp_answer(st, &mut h, device, now, &mut out.notes);
    refused_logs(st, &mut h);
    if !unsupported {
        // The cause of a refusal is examined once per run, and told with it.
        let hint = denied(&h).then(why_denied);
        out.errors
            .extend(h.errors.iter().map(|e| DriveError::Smartctl {
                device: device.to_string(),
                message: e.clone(),
                hint: hint.clone().filter(|_| is_denial(e)),
            }));
    }
    st.ok = has_data;
    if has_data {
        st.record(h, unix, !carried);
    } else if h.errors.is_empty() {
        // The status smartctl reported, else how the process ended.
        let exit = match h.smartctl_exit_status {
            Some(s) => format!("exit status {s}"),
            None => exit.to_string(),
        };
        out.errors.push(DriveError::NoData {
            device: device.to_string(),
            exit,
        });
    }
}

/// The OCP SMART log's part of a run: when it was asked, it is next due a slow interval later,
/// and an answer of another layout (another vendor's C0h log) means it is not asked again.
/// Between its reads, its last NAND figure stands (a counter read an hour ago is still a
/// lower bound of the flash writes): returns whether `h` carries the last one's figure.
fn ocp_answer(
    st: &mut DriveState,
    h: &mut Health,
    device: &str,
    now: Instant,
    notes: &mut Vec<String>,
) -> bool {
    let asked_ocp = std::mem::take(&mut st.ocp_asked);
    if asked_ocp {
        st.ocp_due = Some(now + OCP_LOG_EVERY);
        if h.ocp_log.is_none() && !h.errors.iter().any(|e| refuses_ocp(e)) {
            st.no_ocp = true;
            let why = (h.warnings.iter())
                .find(|w| w.contains("0xc0"))
                .map(String::as_str)
                .unwrap_or("no log 0xc0 in smartctl's output");
            notes.push(format!(
                "device {device}: {why}; the OCP SMART log is not asked of it again"
            ));
        }
    }
    let carried = !asked_ocp
        && h.nand_written_bytes.is_none()
        && h.ocp_log.is_none()
        && st.last.as_ref().is_some_and(|l| l.ocp_log.is_some());
    if carried && let Some(l) = &st.last {
        h.ocp_log = l.ocp_log;
        h.nand_written_bytes = l.nand_written_bytes;
    }
    carried
}

/// A refused log is reported once; later runs leave it out (its error is dropped from `h`),
/// and the rest of the output is still used.
fn refused_logs(st: &mut DriveState, h: &mut Health) {
    for (refused, known) in [
        (refuses_devstat as fn(&str) -> bool, &mut st.no_devstat),
        (refuses_a_log, &mut st.no_logs),
        (refuses_ocp, &mut st.no_ocp),
    ] {
        if h.errors.iter().any(|e| refused(e)) {
            if *known {
                h.errors.retain(|e| !refused(e));
            }
            *known = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{DAY_DURATION, HOUR};

    #[test]
    fn waf_over_a_day_uses_the_newest_baseline_at_least_a_day_old() {
        let mut h = VecDeque::new();
        h.push_back((0.0, 1000, 1500));
        h.push_back((HOUR as f64, 2000, 3000));
        assert_eq!(
            waf_over_window(&h, DAY_F64),
            None,
            "no baseline a day old yet"
        );
        h.push_back((DAY_F64 + HOUR as f64, 4000, 6000));
        // Baseline is the 3600 s sample: (6000-3000)/(4000-2000).
        assert_eq!(waf_over_window(&h, DAY_F64), Some(1.5));
        let mut flat = VecDeque::new();
        flat.push_back((0.0, 10, 10));
        flat.push_back((DAY_F64, 10, 20));
        assert_eq!(
            waf_over_window(&flat, DAY_F64),
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
            st.record(
                h(100 * (i + 1), 200 * (i + 1)),
                i as f64 * HOUR as f64,
                true,
            );
        }
        assert!(st.history.len() <= 26, "{}", st.history.len());
        assert_eq!(waf_over_window(&st.history, DAY_F64), Some(2.0));
        st.record(h(5, 5), (51 * HOUR) as f64, true);
        assert_eq!(st.history.len(), 1);
    }

    const NVME: &str = r#"{"smartctl": {"exit_status": 0}, "device": {"protocol": "NVMe"},
        "nvme_smart_health_information_log": {"percentage_used": 3}}"#;
    const STANDBY: &str = r#"{"smartctl": {"exit_status": 2, "messages":
        [{"string": "Device is in STANDBY mode, exit(2)", "severity": "information"}]}}"#;
    const DENIED: &str = r#"{"smartctl": {"exit_status": 2, "messages": [{"string":
        "Smartctl open device: /dev/sda failed: Permission denied", "severity": "error"}]}}"#;
    const DEVSTAT_REFUSED: &str = r#"{"smartctl": {"exit_status": 4, "messages": [{"string":
        "Read Device Statistics page 0x00 failed", "severity": "error"}]}, "device": {"protocol": "ATA"},
        "smart_status": {"passed": true}}"#;

    fn out(json: &str, exit: Exit) -> RunOutcome {
        RunOutcome::Output {
            stdout: json.as_bytes().to_vec(),
            exit,
            escaped: Swept::default(),
        }
    }

    /// What smartctl 7.3 prints for a virtio disk (this machine's /dev/vda).
    const VIRTIO: &str = r#"{"smartctl": {"exit_status": 1, "messages": [{"string":
        "/dev/vda: Unable to detect device type", "severity": "error"}]}}"#;

    #[test]
    fn no_smart_on_a_device_type_is_one_fact_told_once() {
        let (st, errors, _) = go(DriveState::default(), out(VIRTIO, Exit::Code(1)));
        assert!(errors.is_empty(), "not an error: {errors:?}");
        assert!(st.ok && st.unsupported);
        assert_eq!(
            st.exit_status, None,
            "the failed command is the same fact: no exit-bit series"
        );
        assert_eq!(
            st.last.as_ref().and_then(|h| h.smart_supported),
            Some(false)
        );
        let run = Run {
            label: "vda",
            path: "/dev/vda",
        };
        let every = |_: Option<&str>| Duration::from_secs(60);
        let first = step(
            DriveState::default(),
            &run,
            out(VIRTIO, Exit::Code(1)),
            Instant::now(),
            1.0,
            &every,
            &|| "cause".into(),
        );
        assert_eq!(
            first.notes,
            [
                "device vda: no SMART on this device type (smartctl on /dev/vda: /dev/vda: Unable to detect device type); shown as ssdwatch_device_smart_supported 0"
            ]
        );
        let again = step(
            first.state,
            &run,
            out(VIRTIO, Exit::Code(1)),
            Instant::now(),
            2.0,
            &every,
            &|| "cause".into(),
        );
        assert!(
            again.notes.is_empty() && again.errors.is_empty(),
            "told once"
        );
    }

    #[test]
    fn processes_left_behind_are_counted_told_once_and_unkillable_ones_are_errors() {
        let run = |prev, killed, failed, stuck| {
            go(
                prev,
                RunOutcome::Output {
                    stdout: NVME.as_bytes().to_vec(),
                    exit: Exit::Code(0),
                    escaped: Swept {
                        killed,
                        failed,
                        stuck,
                    },
                },
            )
        };
        let (st, errors, _) = run(DriveState::default(), 2, 0, 0);
        assert!(errors.is_empty() && st.ok, "{errors:?}");
        assert_eq!(st.escaped_total, 2);
        let (st, errors, _) = run(st, 1, 1, 0);
        assert_eq!(st.escaped_total, 3);
        assert_eq!(
            errors,
            ["device sda: smartctl on /dev/sda left 1 process(es) behind that could not be killed"]
        );
        assert!(st.ok, "the output is still used");
        // Killed but stuck in the kernel: counted, an error of the drive, the output used.
        let (st, errors, _) = run(st, 1, 0, 1);
        assert_eq!(st.escaped_total, 4);
        assert_eq!(
            errors,
            [
                "device sda: smartctl on /dev/sda left 1 process(es) stuck in the kernel (D state), killed but not gone until their I/O returns; no new run of this drive until they are gone"
            ]
        );
        assert!(st.ok, "the output is still used");
    }

    /// One step of drive "sda" at t0 + 10 s (unix 1000), with 60 s for NVMe, 600 s otherwise.
    /// smartctl refused a process (EAGAIN under the task limit): no run took place, so the
    /// drive keeps what it had, is due again at once, and has no fault of its own (the
    /// collector tells the task limit once for all drives).
    #[test]
    fn a_smartctl_not_started_for_want_of_a_task_changes_nothing_of_the_drive() {
        let (read, _, _) = go(DriveState::default(), out(NVME, Exit::Code(0)));
        let no_task = || {
            RunOutcome::Failed(RunError::NoTask {
                message: "cannot run smartctl: Resource temporarily unavailable (os error 11)"
                    .into(),
            })
        };
        let (st, errors, _) = go(read.clone(), no_task());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(st.next_due, read.next_due);
        assert_eq!((st.ok, st.last_ok_unix), (read.ok, read.last_ok_unix));
        let (st, errors, _) = go(DriveState::default(), no_task());
        assert!(errors.is_empty() && st.next_due.is_none(), "{errors:?}");
    }

    fn go(prev: DriveState, outcome: RunOutcome) -> (DriveState, Vec<String>, Instant) {
        let now = Instant::now() + Duration::from_secs(10);
        let every = |p: Option<&str>| Duration::from_secs(if p == Some("NVMe") { 60 } else { 600 });
        let run = Run {
            label: "sda",
            path: "/dev/sda",
        };
        let why = || "smartctl needs CAP_SYS_RAWIO here".to_string();
        let s = step(prev, &run, outcome, now, 1000.0, &every, &why);
        let errors = s
            .errors
            .into_iter()
            .map(ItemError::from)
            .inspect(|e| assert_eq!(e.item, "sda", "{e}"))
            .map(|e| e.message)
            .collect();
        (s.state, errors, now)
    }

    #[test]
    fn a_good_run_records_the_values_and_schedules_by_the_protocol_it_told() {
        let (st, errors, now) = go(DriveState::default(), out(NVME, Exit::Code(0)));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(st.ok && !st.in_standby);
        assert_eq!(st.exit_status, Some(0));
        assert_eq!(st.last_ok_unix, Some(1000.0));
        assert_eq!(st.last.as_ref().and_then(|h| h.wear_used_ratio), Some(0.03));
        assert_eq!(st.next_due, Some(now + Duration::from_secs(60)));
    }

    #[test]
    fn standby_keeps_the_last_values_and_their_age() {
        let (awake, _, _) = go(DriveState::default(), out(NVME, Exit::Code(0)));
        let (st, errors, _) = go(awake.clone(), out(STANDBY, Exit::Code(2)));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(st.ok && st.in_standby);
        assert_eq!((st.last, st.last_ok_unix), (awake.last, awake.last_ok_unix));
        assert_eq!(
            st.exit_status,
            Some(0),
            "a standby run's status is not shown"
        );
        // Plain text saying standby (an old smartctl) is standby too.
        let (st, errors, _) = go(
            DriveState::default(),
            out("Device is in STANDBY mode, exit(2)\n", Exit::Code(2)),
        );
        assert!(errors.is_empty() && st.in_standby && st.ok, "{errors:?}");
    }

    #[test]
    fn failures_name_the_device_and_keep_the_last_values() {
        let (awake, _, _) = go(DriveState::default(), out(NVME, Exit::Code(0)));
        let cases: [(RunOutcome, &str); 5] = [
            (
                RunOutcome::Failed(RunError::TimedOut {
                    after: Duration::from_secs(30),
                }),
                "device sda: smartctl on /dev/sda timed out after 30s; killed",
            ),
            (
                RunOutcome::Failed(RunError::Spawn {
                    bin: "/nonexistent/smartctl".into(),
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                }),
                "device sda: cannot run /nonexistent/smartctl: entity not found",
            ),
            (
                out("Segmentation fault", Exit::Signal(11)),
                "device sda: smartctl output on /dev/sda is unusable: not valid JSON",
            ),
            (
                out(DENIED, Exit::Code(2)),
                "device sda: smartctl: Smartctl open device: /dev/sda failed: Permission denied (smartctl needs CAP_SYS_RAWIO",
            ),
            (
                out(r#"{"smartctl": {"messages": []}}"#, Exit::Signal(9)),
                "device sda: smartctl returned no usable data (killed by signal 9 (SIGKILL))",
            ),
        ];
        for (outcome, want) in cases {
            let (st, errors, now) = go(awake.clone(), outcome);
            assert!(
                errors.len() == 1 && errors[0].starts_with(want),
                "{want}: {errors:?}"
            );
            assert!(!st.ok, "{want}");
            assert_eq!(st.last, awake.last, "{want}");
            assert_eq!(st.next_due, Some(now + Duration::from_secs(60)), "{want}");
        }
    }

    #[test]
    fn a_task_that_did_not_complete_is_named_and_retried_at_the_next_wake() {
        let (awake, _, _) = go(DriveState::default(), out(NVME, Exit::Code(0)));
        let (st, errors, _) = go(
            awake.clone(),
            RunOutcome::Failed(RunError::Task {
                cause: "task 7 panicked".into(),
            }),
        );
        assert_eq!(
            errors,
            [
                "device sda: smartctl on /dev/sda: the smartctl task did not complete: task 7 panicked"
            ]
        );
        assert_eq!(st, awake, "nothing learnt, nothing changed");
    }

    /// A real NVMe capture (Samsung PM9A3) as one run gives it: with a hand-made OCP log dump
    /// of `nand` flash bytes when `nand` is set, and smartctl's refusal when `refused`.
    fn pm9a3(host_scale: u64, nand: Option<u64>, guid: [u8; 16], refused: bool) -> RunOutcome {
        use crate::smart::ocp::tests::{dump, log};
        let path = format!(
            "{}/tests/fixtures/smart/nvme-samsung-pm9a3-mzql23t8hcls.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let log_v = &mut v["nvme_smart_health_information_log"]["data_units_written"];
        *log_v = serde_json::json!(log_v.as_u64().unwrap_or(0) * host_scale);
        if let Some(n) = nand {
            v["smartctl"]["output"] = serde_json::json!(dump(&log(u128::from(n), 0, 3, guid)));
        }
        if refused {
            v["smartctl"]["messages"] = serde_json::json!([{"severity": "error",
                "string": "Read NVMe Log 0xc0 failed: NVMe Status 0x4109 (Invalid Log Page)"}]);
        }
        out(&v.to_string(), Exit::Code(if refused { 4 } else { 0 }))
    }

    fn go_at(prev: DriveState, outcome: RunOutcome, now: Instant, unix: f64) -> Step {
        let every = |_: Option<&str>| Duration::from_secs(600);
        let run = Run {
            label: "nvme0n1",
            path: "/dev/nvme0n1",
        };
        step(prev, &run, outcome, now, unix, &every, &|| String::new())
    }

    #[test]
    fn the_ocp_log_is_read_hourly_and_its_nand_writes_stand_between_reads() {
        use crate::smart::ocp::tests::OCP_GUID;
        let t0 = Instant::now();
        let mut st = DriveState::default();
        // The protocol is not known before the first run, and the key is off by default.
        assert!(!st.wants_ocp(true, t0));
        st = go_at(st, pm9a3(1, None, OCP_GUID, false), t0, 0.0).state;
        assert!(st.wants_ocp(true, t0) && !st.wants_ocp(false, t0));
        let host0 = st
            .last
            .as_ref()
            .and_then(|h| h.host_written_bytes)
            .expect("host");

        // The hourly read: flash writes twice the host's.
        st.ocp_asked = true;
        let s = go_at(st, pm9a3(1, Some(2 * host0), OCP_GUID, false), t0, 0.0);
        assert!(s.errors.is_empty() && s.notes.is_empty(), "{:?}", s.notes);
        st = s.state;
        assert_eq!(
            st.last.as_ref().and_then(|h| h.nand_written_bytes),
            Some(2 * host0)
        );
        assert_eq!(st.ocp_due, Some(t0 + OCP_LOG_EVERY));
        assert!(!st.wants_ocp(true, t0 + Duration::from_secs(3599)));
        assert!(st.wants_ocp(true, t0 + OCP_LOG_EVERY));
        assert_eq!(st.history.len(), 1);

        // Ten minutes later, a regular run: the figure stands, the history is not fed a pair
        // of a new host count and an old flash count.
        let t1 = t0 + Duration::from_secs(600);
        st = go_at(st, pm9a3(2, None, OCP_GUID, false), t1, 600.0).state;
        let h = st.last.as_ref().expect("last");
        assert_eq!(h.nand_written_bytes, Some(2 * host0));
        assert_eq!(h.ocp_log.map(|l| l.version), Some(3));
        assert_eq!(st.history.len(), 1, "no pair with a carried flash count");

        // A day later, the next read: the window's write amplification is (4-2)/(3-1) = 1.
        let t2 = t0 + DAY_DURATION;
        st.ocp_asked = st.wants_ocp(true, t2);
        assert!(st.ocp_asked);
        st = go_at(st, pm9a3(3, Some(4 * host0), OCP_GUID, false), t2, DAY_F64).state;
        assert_eq!(st.history.len(), 2);
        let waf = waf_over_window(&st.history, DAY_F64).expect("a day's window");
        assert!((waf - 1.0).abs() < 1e-9, "{waf}");
    }

    #[test]
    fn a_drive_without_the_ocp_log_is_told_once_and_not_asked_again() {
        use crate::smart::ocp::tests::OCP_GUID;
        let t0 = Instant::now();
        let first = go_at(
            DriveState::default(),
            pm9a3(1, None, OCP_GUID, false),
            t0,
            0.0,
        )
        .state;

        // Refused by the drive: one error naming the device, then never asked.
        let mut st = first.clone();
        st.ocp_asked = true;
        let s = go_at(st, pm9a3(1, None, OCP_GUID, true), t0, 0.0);
        assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
        let e = ItemError::from(s.errors.into_iter().next().expect("error"));
        assert!(
            e.message.contains("nvme0n1") && e.message.contains("0xc0"),
            "{}",
            e.message
        );
        assert!(s.state.no_ocp && s.state.ok);
        assert!(!s.state.wants_ocp(true, t0 + DAY_DURATION));
        assert!(
            s.state
                .last
                .as_ref()
                .and_then(|h| h.wear_used_ratio)
                .is_some(),
            "the rest of the run is used"
        );

        // Answered with another vendor's C0h layout: a note, nothing taken, never asked again.
        let mut other = OCP_GUID;
        other[3] ^= 1;
        let mut st = first;
        st.ocp_asked = true;
        let s = go_at(st, pm9a3(1, Some(1 << 50), other, false), t0, 0.0);
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
        assert!(
            s.notes[0].contains("GUID") && s.notes[0].contains("nvme0n1"),
            "{:?}",
            s.notes
        );
        assert!(s.state.no_ocp);
        assert_eq!(
            s.state.last.as_ref().and_then(|h| h.nand_written_bytes),
            None
        );
    }

    #[test]
    fn every_refused_sub_log_is_recognised_and_other_errors_are_not() {
        assert!(refuses_devstat("Read Device Statistics page 0x00 failed"));
        assert!(!refuses_a_log("Read Device Statistics page 0x00 failed"));
        for e in [
            "Read SMART Self-test Log failed: scsi error badly formed scsi parameters",
            "Read Self-test Log failed: Invalid Field in Command (0x002)",
            "Self-tests not supported",
            "Read SMART Error Log failed: scsi error aborted command",
            "Read Error Counter log page failed",
            "Write cache is unavailable",
        ] {
            assert!(
                refuses_a_log(e) && !refuses_devstat(e) && !refuses_ocp(e),
                "{e}"
            );
        }
        for e in [
            "Smartctl open device: /dev/sda failed: Permission denied",
            "/dev/vda: Unable to detect device type",
            "Read NVMe SMART/Health Information failed: NVMe Status 0x02",
        ] {
            assert!(!refuses_a_log(e) && !refuses_devstat(e), "{e}");
        }
    }

    #[test]
    fn a_refused_device_statistics_log_is_reported_once_and_not_asked_again() {
        let (st, errors, _) = go(DriveState::default(), out(DEVSTAT_REFUSED, Exit::Code(4)));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(st.no_devstat && st.ok && !st.no_logs);
        assert_eq!(st.protocol.as_deref(), Some("ATA"));
        assert!(st.next_due.is_some());
        let (st, errors, _) = go(st, out(DEVSTAT_REFUSED, Exit::Code(4)));
        assert!(errors.is_empty(), "reported once: {errors:?}");
        assert!(st.no_devstat);
    }
}
