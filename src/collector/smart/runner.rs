//! Runs smartctl once: its argv, the spawn in its own process group, the timeout that kills the
//! whole group, the output cap and how it ended. No parsing and no scheduling here.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

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

/// How a smartctl process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The task that ran it did not complete (it panicked or was cancelled).
    #[error("the smartctl task did not complete: {cause}")]
    Task { cause: String },
    /// Killed at the deadline but still not gone: stuck in the kernel (uninterruptible sleep on
    /// a failing drive or controller). It is reaped in the background when it ends; no other
    /// run of that drive starts meanwhile.
    #[error(
        "timed out after {}, killed, and still not gone after {}: stuck in the kernel (D state); no new run of this drive until it ends",
        humantime::format_duration(*after),
        humantime::format_duration(REAP_GRACE)
    )]
    Stuck { after: Duration },
}

/// How long a killed smartctl may take to go before it counts as stuck in the kernel.
pub const REAP_GRACE: Duration = Duration::from_secs(5);

/// The outcome of one smartctl run.
#[derive(Debug)]
pub enum RunOutcome {
    Output { stdout: Vec<u8>, exit: Exit },
    Failed(RunError),
}

/// Output beyond this is garbage, not smartctl JSON (a full `-x` is under 100 KiB).
const MAX_OUTPUT: u64 = 4 << 20;

/// Runs smartctl once in its own process group; on timeout the whole group is killed and
/// reaped, so nothing it started survives. Never waits on it longer than `timeout` plus
/// [`REAP_GRACE`]: one that won't die is left to a background reaper and `in_kernel` stays set
/// until it is gone.
pub async fn run_smartctl(
    bin: &Path,
    args: &[String],
    timeout: Duration,
    in_kernel: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> RunOutcome {
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
        Err(source) => {
            return RunOutcome::Failed(RunError::Spawn {
                bin: bin.to_path_buf(),
                source,
            });
        }
    };
    let pid = child.id();
    let stdout = child.stdout.take();
    // What has been read so far, kept outside the reader so that a grandchild holding the pipe
    // (one that left the group with setsid) costs neither the output nor the descriptor.
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = got.clone();
    let reader = tokio::spawn(async move {
        if let Some(mut out) = stdout {
            let mut chunk = [0u8; 8192];
            loop {
                match out.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut g = sink.lock().unwrap_or_else(|e| e.into_inner());
                        if g.len() as u64 + n as u64 > MAX_OUTPUT {
                            break;
                        }
                        g.extend_from_slice(&chunk[..n]);
                    }
                }
            }
        }
    });
    let take = || std::mem::take(&mut *got.lock().unwrap_or_else(|e| e.into_inner()));
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => {
            // The pipe closes when the last holder exits. smartctl wrote everything before it
            // exited; a descendant still holding the pipe gets a short grace, then we keep what
            // was written and close our end (aborting the reader drops it).
            // (Killing the group only here: while a member holds the pipe the group exists, so
            // its id cannot have been reused by an unrelated process.)
            let mut reader = reader;
            if tokio::time::timeout(Duration::from_millis(500), &mut reader)
                .await
                .is_err()
            {
                kill_group(pid);
                reader.abort();
            }
            RunOutcome::Output {
                stdout: take(),
                exit: Exit::from_status(status),
            }
        }
        Ok(Err(source)) => {
            kill_group(pid);
            let _ = child.wait().await;
            RunOutcome::Failed(RunError::Wait {
                bin: bin.to_path_buf(),
                source,
            })
        }
        Err(_) => {
            kill_group(pid);
            reader.abort();
            // Reap: no zombie is left behind. A process stuck in the kernel ignores even
            // SIGKILL until its I/O returns: hand it to a reaper instead of waiting on it.
            if tokio::time::timeout(REAP_GRACE, child.wait()).await.is_ok() {
                return RunOutcome::Failed(RunError::TimedOut { after: timeout });
            }
            in_kernel.store(true, std::sync::atomic::Ordering::Release);
            let flag = in_kernel.clone();
            tokio::spawn(async move {
                let _ = child.wait().await;
                flag.store(false, std::sync::atomic::Ordering::Release);
            });
            RunOutcome::Failed(RunError::Stuck { after: timeout })
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
