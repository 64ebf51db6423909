//! Runs smartctl once: its argv, the spawn in its own process group, the timeout that kills the
//! whole group, the output cap and how it ended. No parsing and no scheduling here.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, Interest};

use super::escape::{self, Marks, Signalled, Swept};

/// The smartctl argv for one drive. Cheap options only: identity, overall health and the
/// attribute table / NVMe health log. No `-x`. Once the drive's protocol is known (from its
/// first run) the small logs of that protocol are added to the same run, never a second run:
/// ATA the device-statistics log (the standard endurance indicator), the SMART error log's
/// count, the self-test log, the SMART capabilities (self-test status) and the write-cache
/// setting; NVMe the identify data's temperature limits (`--capabilities`) and the self-test
/// log; SCSI the error counter pages and the self-test log. Never NVMe's `--log=error`: reading
/// the NVMe error log makes some drives count more entries (its count is in the health log
/// anyway). A sub-log a drive rejects only sets an exit bit: the rest of the output is still
/// used, and the drive is not asked that log again (`Asks`). The OCP SMART log (NVMe C0h),
/// when asked (hourly, where configured), is one more log of the same run: smartctl only
/// dumps it as text, so the run then asks for its text output inside the JSON (`--json=co`).
pub fn smartctl_args(
    path: &str,
    dev_type: Option<&str>,
    protocol: Option<&str>,
    asks: Asks,
    nocheck_standby: bool,
) -> Vec<String> {
    let ocp = asks.ocp && protocol == Some("NVMe");
    let json = if ocp { "--json=co" } else { "--json=c" };
    let mut a: Vec<String> = [json, "--info", "--health", "--attributes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if nocheck_standby {
        a.push("--nocheck=standby".into());
    }
    let logs: &[&str] = match protocol {
        Some("ATA") => &[
            "--capabilities",
            "--log=error",
            "--log=selftest",
            "--get=wcache",
        ],
        Some("NVMe") => &["--capabilities", "--log=selftest"],
        Some("SCSI") => &["--log=error", "--log=selftest"],
        _ => &[],
    };
    if asks.logs {
        a.extend(logs.iter().map(|s| s.to_string()));
    }
    if asks.devstat && protocol == Some("ATA") {
        a.push("--log=devstat".into());
    }
    if ocp {
        // smartctl 7.3 reads both numbers of `nvmelog,N,SIZE` as hex: 0x200 is 512 bytes.
        a.push("--log=nvmelog,0xc0,0x200".into());
    }
    if let Some(t) = dev_type {
        a.push("-d".into());
        a.push(t.into());
    }
    a.push(path.into());
    a
}

/// smartctl's argv for RAID port discovery: every device it can find, each opened to tell its
/// type (`smart::scan` keeps the RAID ports).
pub(super) fn scan_args() -> Vec<String> {
    vec!["--scan-open".into(), "--json=c".into()]
}

/// Which of its protocol's extra logs a drive is asked for: each is dropped once the drive
/// refused it (a bridge that rejects the self-test log still gives the device statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Asks {
    /// ATA's device statistics log (the standard endurance indicator).
    pub devstat: bool,
    /// The error log's count, the self-test log, `--capabilities` and the write cache.
    pub logs: bool,
    /// NVMe's OCP SMART log (C0h): only on its slower schedule, where configured.
    #[serde(default)]
    pub ocp: bool,
}

impl Asks {
    pub const ALL: Asks = Asks {
        devstat: true,
        logs: true,
        ocp: false,
    };
}

/// How a smartctl process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this status (smartctl's bit mask).
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// Neither could be told.
    Unknown,
}

impl Exit {
    pub fn from_status(s: std::process::ExitStatus) -> Exit {
        match (s.code(), s.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(sig)) => Exit::Signal(sig),
            (None, None) => Exit::Unknown,
        }
    }

    /// The exit status as smartctl's bit mask; None when it did not exit by itself.
    pub fn bits(self) -> Option<u64> {
        match self {
            Exit::Code(c) => u64::try_from(c).ok(),
            Exit::Signal(_) | Exit::Unknown => None,
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => match nix::sys::signal::Signal::try_from(s) {
                Ok(name) => write!(f, "killed by signal {s} ({name})"),
                Err(_) => write!(f, "killed by signal {s}"),
            },
            Exit::Unknown => f.write_str("exit status unknown"),
        }
    }
}

/// A run that gave no output to read.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run {}: {source}", bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("waiting for {}: {source}", bin.display())]
    Wait {
        bin: PathBuf,
        source: std::io::Error,
    },
    /// Killed with its process group at the deadline.
    #[error("timed out after {}; killed", humantime::format_duration(*after))]
    TimedOut { after: Duration },
    /// No process could be started for the run (fork refused with EAGAIN: the daemon's task
    /// limit, or the kernel's): no run took place, and it is not the drive's fault.
    #[error("{message}")]
    NoTask { message: String },
    /// The SMART helper failed the run; its message, as it told it.
    #[error("{message}")]
    Remote { message: String },
    /// The SMART helper could not be asked, refused, or went away.
    #[error("{message}")]
    Helper { message: String },
    /// The task that ran it did not complete (it panicked or was cancelled).
    #[error("the smartctl task did not complete: {cause}")]
    Task { cause: String },
    /// Killed at the deadline but still not gone, smartctl or a process it started: stuck in
    /// the kernel (uninterruptible sleep on a failing drive or controller, or any I/O that
    /// doesn't return). Watched in the background until it ends; no other run of that drive
    /// starts meanwhile.
    #[error(
        "timed out after {}, killed, and still not gone after {}: stuck in the kernel (D state); no new run of this drive until it ends",
        humantime::format_duration(*after),
        humantime::format_duration(REAP_GRACE)
    )]
    Stuck { after: Duration },
    /// The libatasmart backend failed a step.
    #[error(transparent)]
    Atasmart(#[from] super::atasmart::AtaError),
    /// A libatasmart call did not return in time: the thread stays blocked in the kernel.
    #[cfg_attr(not(feature = "atasmart"), allow(dead_code))]
    #[error(
        "libatasmart did not answer within {}: the call is stuck in the kernel (D state); no new read of this drive until it returns",
        humantime::format_duration(*after)
    )]
    AtasmartStuck { after: Duration },
}

/// How long a killed smartctl may take to go before it counts as stuck in the kernel. A
/// SIGKILLed process that is not in the kernel is gone within milliseconds; the sample that
/// first finds a drive stuck waits this long once (every other drive's values in it are then
/// this much older, and say so in their age), later samples not at all.
pub(super) const REAP_GRACE: Duration = Duration::from_secs(1);

/// The outcome of one smartctl run.
#[derive(Debug)]
pub enum RunOutcome {
    Output {
        stdout: Vec<u8>,
        exit: Exit,
        /// Processes the run left behind (escaped its group with setsid), found and killed.
        escaped: Swept,
    },
    Failed(RunError),
}

/// Output beyond this is garbage, not smartctl JSON (a full `-x` is under 100 KiB).
pub(crate) const MAX_OUTPUT: u64 = 4 << 20;

/// After smartctl exited, what it wrote is already in the pipe: a read that waits longer than
/// this finds an empty pipe some descendant still holds open, not more output.
const DRAIN_IDLE: Duration = Duration::from_millis(200);

/// Kills the run's process group and every process the run left anywhere (setsid escapes
/// included) when dropped: at the end of a run, and when the run is cancelled (the daemon
/// stopping on SIGTERM drops the running sample).
struct Cleanup {
    /// Its `pgid` is smartctl's pid while smartctl is not yet reaped: until then no other
    /// process can be given it, so the group is signalled by it and its members are the run's.
    /// None afterwards: the sweep goes by tag and pipe then.
    marks: Marks,
    done: bool,
}

impl Cleanup {
    /// Sweeps the run's processes; `group_first` SIGKILLs its group as a whole before (at a
    /// timeout: a process forking in a loop can't outrun one signal to the group).
    fn now(&mut self, group_first: bool) -> (Swept, Signalled) {
        self.done = true;
        if group_first {
            kill_group(self.marks.pgid);
        }
        escape::sweep(&self.marks)
    }

    /// smartctl has been reaped: its group id may be reused from now on.
    fn leader_reaped(&mut self) {
        self.marks.pgid = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.done {
            kill_group(self.marks.pgid);
            escape::sweep(&self.marks);
        }
    }
}

/// How smartctl was seen to end.
enum Ended {
    /// Its pidfd said it ended; it is not reaped yet, so its pid (the group id) is still its.
    Exited,
    /// Reaped (no pidfd to watch it by).
    Reaped(std::io::Result<std::process::ExitStatus>),
}

/// Waits for smartctl to end: through its pidfd, which tells without reaping it, else by
/// reaping it.
async fn ended(child: &mut tokio::process::Child, leader: Option<&AsyncFd<OwnedFd>>) -> Ended {
    if let Some(fd) = leader
        && fd.readable().await.is_ok()
    {
        return Ended::Exited;
    }
    Ended::Reaped(child.wait().await)
}

/// Runs smartctl once in its own process group; on timeout the whole group is killed and
/// reaped, so nothing it started survives. Once smartctl itself has exited, its output is
/// parsed from what the pipe held, without waiting for an end-of-file that a descendant (one
/// that left the group with setsid) may hold back; such descendants are found and killed, and
/// counted. smartctl is reaped only after that sweep, so its group id names the run's
/// processes throughout. Never waits on the run longer than `timeout` plus [`REAP_GRACE`]: when
/// smartctl or any process of the run won't die (stuck in the kernel), they are left to a
/// background watcher and `in_kernel` stays set until every one of them is gone.
pub(crate) async fn run_smartctl(
    bin: &Path,
    args: &[String],
    timeout: Duration,
    in_kernel: &Arc<AtomicBool>,
) -> RunOutcome {
    let mut marks = Marks::new_run();
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("LC_ALL", "C")
        .env(escape::TAG_VAR, &marks.tag)
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(source) if source.raw_os_error() == Some(libc::EAGAIN) => {
            return RunOutcome::Failed(RunError::NoTask {
                message: format!("cannot run {}: {source}", bin.display()),
            });
        }
        Err(source) => {
            return RunOutcome::Failed(RunError::Spawn {
                bin: bin.to_path_buf(),
                source,
            });
        }
    };
    let mut stdout = child.stdout.take();
    marks.pipe_inode = stdout.as_ref().and_then(escape::pipe_inode);
    marks.pgid = child.id();
    // smartctl is not reaped yet, so its /proc entry is still there (a zombie at worst).
    marks.started = child.id().and_then(escape::start_ticks);
    // Without a pidfd (a kernel before 5.3) smartctl is reaped when it ends, and the sweep
    // goes by tag and pipe only.
    let leader = child
        .id()
        .and_then(escape::pidfd_open)
        // SAFETY: the watch owns the pidfd, which stays open and the same until it is dropped.
        .and_then(|fd| unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok());
    let mut cleanup = Cleanup { marks, done: false };
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 8192];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Read while smartctl runs (its output can exceed the pipe's buffer).
    let end = loop {
        tokio::select! {
            r = read_some(&mut stdout, &mut chunk) => keep(&mut got, &mut stdout, r, &chunk),
            e = ended(&mut child, leader.as_ref()) => break Some(e),
            _ = &mut deadline => break None,
        }
    };
    let Some(end) = end else {
        let (_, killed) = cleanup.now(true);
        drop(stdout);
        // Reap: no zombie is left behind. A process stuck in the kernel ignores even SIGKILL
        // until its I/O returns, and so may any process smartctl started: hand them to a
        // watcher instead of waiting on them.
        let by = tokio::time::Instant::now() + REAP_GRACE;
        let reaped = tokio::time::timeout_at(by, child.wait()).await.is_ok();
        let left = killed.left_at(by).await;
        if reaped && left.is_empty() {
            return RunOutcome::Failed(RunError::TimedOut { after: timeout });
        }
        watch_stuck(in_kernel, (!reaped).then_some(child), left);
        return RunOutcome::Failed(RunError::Stuck { after: timeout });
    };
    let status = match end {
        Ended::Exited => None,
        Ended::Reaped(Ok(status)) => {
            cleanup.leader_reaped();
            Some(status)
        }
        Ended::Reaped(Err(source)) => {
            cleanup.now(true);
            let _ = child.wait().await;
            return RunOutcome::Failed(RunError::Wait {
                bin: bin.to_path_buf(),
                source,
            });
        }
    };
    // smartctl has exited: all it wrote is in the pipe. Take that, and stop at the first
    // pause rather than at an end-of-file a leftover process may never give.
    while stdout.is_some() {
        match tokio::time::timeout(DRAIN_IDLE, read_some(&mut stdout, &mut chunk)).await {
            Ok(r) => keep(&mut got, &mut stdout, r, &chunk),
            Err(_) => break,
        }
    }
    drop(stdout);
    // Members of the group are found by it (smartctl is not reaped yet) and by the tag, like
    // those that left it.
    let (mut escaped, killed) = tokio::task::spawn_blocking(move || cleanup.now(false))
        .await
        .unwrap_or_default();
    // Now smartctl may be reaped: the sweep no longer needs its group id.
    let status = match status {
        Some(s) => s,
        None => match child.wait().await {
            Ok(s) => s,
            Err(source) => {
                return RunOutcome::Failed(RunError::Wait {
                    bin: bin.to_path_buf(),
                    source,
                });
            }
        },
    };
    // What was killed must also go: a process of the run stuck in the kernel would otherwise
    // be left behind by every run, one more each time.
    let left = killed
        .left_at(tokio::time::Instant::now() + REAP_GRACE)
        .await;
    if !left.is_empty() {
        escaped.stuck = left.len();
        watch_stuck(in_kernel, None, left);
    }
    RunOutcome::Output {
        stdout: got,
        exit: Exit::from_status(status),
        escaped,
    }
}

/// Sets `in_kernel` until smartctl (when given, unreaped) and every process left are gone:
/// no new run of the drive starts meanwhile. The watcher holds no thread.
fn watch_stuck(in_kernel: &Arc<AtomicBool>, child: Option<tokio::process::Child>, left: Signalled) {
    in_kernel.store(true, Ordering::Release);
    let flag = in_kernel.clone();
    tokio::spawn(async move {
        if let Some(mut child) = child {
            let _ = child.wait().await;
        }
        left.all_gone().await;
        flag.store(false, Ordering::Release);
    });
}

/// One read from the pipe; pending forever once it is closed (so `select!` ignores it).
async fn read_some(
    out: &mut Option<tokio::process::ChildStdout>,
    chunk: &mut [u8],
) -> std::io::Result<usize> {
    match out {
        Some(o) => o.read(chunk).await,
        None => std::future::pending().await,
    }
}

/// Appends a read's bytes; closes our end at end-of-file, on an error, or past the cap (the
/// writer then gets EPIPE instead of filling memory).
fn keep(
    got: &mut Vec<u8>,
    out: &mut Option<tokio::process::ChildStdout>,
    r: std::io::Result<usize>,
    chunk: &[u8],
) {
    match r {
        Ok(n) if n > 0 && got.len() as u64 + n as u64 <= MAX_OUTPUT => {
            got.extend_from_slice(&chunk[..n]);
        }
        _ => *out = None,
    }
}

/// Reads an ATA drive through libatasmart off the async threads, within `timeout`; the
/// reading goes on in smartctl's JSON shape, so the same step and model take it. A call that
/// does not return is left to finish, with `in_kernel` set until it does.
#[cfg(feature = "atasmart")]
pub(super) async fn run_atasmart(
    path: &str,
    nocheck_standby: bool,
    timeout: Duration,
    in_kernel: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> RunOutcome {
    let p = path.to_string();
    let mut call = tokio::task::spawn_blocking(move || super::atasmart::read(&p, nocheck_standby));
    match tokio::time::timeout(timeout, &mut call).await {
        Ok(Ok(Ok(reading))) => RunOutcome::Output {
            stdout: super::atasmart::to_json(path, &reading)
                .to_string()
                .into_bytes(),
            // Not smartctl: there are no exit bits to show.
            exit: Exit::Unknown,
            escaped: Swept::default(),
        },
        Ok(Ok(Err(e))) => RunOutcome::Failed(RunError::Atasmart(e)),
        Ok(Err(e)) => RunOutcome::Failed(RunError::Task {
            cause: e.to_string(),
        }),
        Err(_) => {
            in_kernel.store(true, std::sync::atomic::Ordering::Release);
            let flag = in_kernel.clone();
            tokio::spawn(async move {
                let _ = call.await;
                flag.store(false, std::sync::atomic::Ordering::Release);
            });
            RunOutcome::Failed(RunError::AtasmartStuck { after: timeout })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_cheap_and_never_reads_the_nvme_error_log() {
        let base = [
            "--json=c",
            "--info",
            "--health",
            "--attributes",
            "--nocheck=standby",
        ];
        let a = smartctl_args("/dev/nvme0n1", None, None, Asks::ALL, true);
        assert_eq!(a[..5], base);
        assert_eq!(a.len(), 6, "an unknown protocol gets the base set: {a:?}");
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), Asks::ALL, true);
        assert_eq!(a[..5], base);
        assert_eq!(
            a[5..],
            ["--capabilities", "--log=selftest", "/dev/nvme0n1"],
            "no NVMe error log"
        );
        let a = smartctl_args(
            "/dev/bus/0",
            Some("megaraid,3"),
            Some("ATA"),
            Asks::ALL,
            true,
        );
        for x in [
            "--log=devstat",
            "--log=error",
            "--log=selftest",
            "--get=wcache",
        ] {
            assert!(a.contains(&x.to_string()), "{x}: {a:?}");
        }
        assert!(a.windows(2).any(|w| w == ["-d", "megaraid,3"]));
        // A drive that refused the logs keeps the device statistics, and the reverse.
        let only = |asks| smartctl_args("/dev/sda", None, Some("ATA"), asks, true);
        let a = only(Asks {
            devstat: true,
            logs: false,
            ocp: false,
        });
        assert!(a.contains(&"--log=devstat".to_string()), "{a:?}");
        assert!(
            !a.iter()
                .any(|x| x.contains("selftest") || x == "--log=error"),
            "{a:?}"
        );
        let a = only(Asks {
            devstat: false,
            logs: true,
            ocp: false,
        });
        assert!(!a.contains(&"--log=devstat".to_string()), "{a:?}");
        assert!(a.contains(&"--log=selftest".to_string()), "{a:?}");
        let a = smartctl_args("/dev/sdb", None, Some("SCSI"), Asks::ALL, false);
        assert!(a.contains(&"--log=error".to_string()), "{a:?}");
        for p in [None, Some("ATA"), Some("NVMe"), Some("SCSI")] {
            let a = smartctl_args("/dev/sda", None, p, Asks::ALL, true);
            assert!(
                !a.iter()
                    .any(|x| x == "-x" || x == "-a" || x.starts_with("--xall")),
                "{a:?}"
            );
            assert!(
                !a.iter()
                    .any(|x| x.contains("xerror") || x.contains("test=")),
                "reads, never starts a test: {a:?}"
            );
        }
    }

    #[test]
    fn the_ocp_log_is_asked_of_nvme_drives_only_and_in_the_same_run() {
        let ocp = Asks {
            ocp: true,
            ..Asks::ALL
        };
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), ocp, true);
        assert_eq!(
            a[0], "--json=co",
            "the dump is text: the run carries its text output"
        );
        assert_eq!(
            a[a.len() - 2..],
            ["--log=nvmelog,0xc0,0x200", "/dev/nvme0n1"]
        );
        assert!(a.contains(&"--log=selftest".to_string()), "{a:?}");
        // Not an NVMe drive, or one whose protocol is not known yet: never asked.
        for p in [None, Some("ATA"), Some("SCSI")] {
            let a = smartctl_args("/dev/sda", None, p, ocp, true);
            assert_eq!(a[0], "--json=c", "{a:?}");
            assert!(!a.iter().any(|x| x.contains("nvmelog")), "{a:?}");
        }
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), Asks::ALL, true);
        assert!(!a.iter().any(|x| x.contains("nvmelog") || x == "--json=co"));
    }

    /// The argument as built is one this machine's smartctl takes (7.3 refuses `nvmelog,0xc0,512`:
    /// it reads the size as hex, past its limit).
    #[test]
    fn smartctl_accepts_the_ocp_log_argument() {
        let Ok(out) = std::process::Command::new("smartctl")
            .args(["-d", "nvme", "--log=nvmelog,0xc0,0x200", "/dev/null"])
            .output()
        else {
            eprintln!("smartctl not installed: skipped");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("smartctl"), "{text}");
        assert!(!text.contains("INVALID ARGUMENT"), "{text}");
    }

    #[test]
    fn an_exit_by_signal_is_named_not_taken_for_status_0() {
        use std::process::ExitStatus;
        // Raw wait statuses: exit code in bits 8..15, a terminating signal in bits 0..6.
        let killed = Exit::from_status(ExitStatus::from_raw(9));
        assert_eq!(killed, Exit::Signal(9));
        assert_eq!(killed.bits(), None);
        assert_eq!(killed.to_string(), "killed by signal 9 (SIGKILL)");
        let exited = Exit::from_status(ExitStatus::from_raw(4 << 8));
        assert_eq!((exited, exited.bits()), (Exit::Code(4), Some(4)));
        assert_eq!(exited.to_string(), "exit status 4");
        assert_eq!(Exit::Unknown.to_string(), "exit status unknown");
    }
}
