//! Runs a child once (smartctl, dmsetup, zpool, zfs): the spawn in its own process group, the
//! timeout that kills the whole group, the output cap and how it ended, and a child that stays
//! stuck in the kernel after the kill. No argument lists, no parsing and no scheduling here.

use crate::door::Pass;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, Interest};

use super::escape::{self, Marks, Signalled, Swept};

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this status (smartctl's bit mask, for smartctl).
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
    /// The privileged helper failed the run; its message, as it told it.
    #[error("{message}")]
    Remote { message: String },
    /// The privileged helper could not be asked, refused, or went away.
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
pub(crate) const REAP_GRACE: Duration = Duration::from_secs(1);

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
/// background watcher, and the item's door mark (`pass`) is held, stuck, until every one of
/// them is gone: the same mark, metrics and refusals as a call on one of the door's threads.
pub(crate) async fn run_bounded(
    bin: &Path,
    args: &[String],
    timeout: Duration,
    mut pass: Pass,
) -> RunOutcome {
    pass.set_deadline(tokio::time::Instant::now() + timeout + REAP_GRACE);
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
        let (_, killed) = sweep(&pass, cleanup, true).await;
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
        watch_stuck(pass, (!reaped).then_some(child), left);
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
    let (mut escaped, killed) = sweep(&pass, cleanup, false).await;
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
        watch_stuck(pass, None, left);
    }
    RunOutcome::Output {
        stdout: got,
        exit: Exit::from_status(status),
        escaped,
    }
}

/// Holds the run's door mark, stuck, until the child (when given, unreaped) and every process
/// left are gone: the item is refused meanwhile. The watcher holds no thread.
fn watch_stuck(mut pass: Pass, child: Option<tokio::process::Child>, left: Signalled) {
    pass.timed_out();
    tokio::spawn(async move {
        if let Some(mut child) = child {
            let _ = child.wait().await;
        }
        left.all_gone().await;
        drop(pass);
    });
}

/// How long the sweep of a run's processes may take: it reads /proc of every process, and a
/// read of a process's environment waits for its memory map, which one stuck in the kernel
/// may hold.
const SWEEP_DEADLINE: Duration = Duration::from_secs(10);

/// Sweeps the run's processes on one of the door's threads (`<item> sweep`); a sweep that
/// can't be run or does not return in time kills nothing more and counts nothing.
async fn sweep(pass: &Pass, mut cleanup: Cleanup, group_first: bool) -> (Swept, Signalled) {
    let item = format!("{} sweep", pass.item());
    let deadline = tokio::time::Instant::now() + SWEEP_DEADLINE;
    match (pass.door())
        .call(pass.owner(), item, deadline, move || {
            cleanup.now(group_first)
        })
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!("sweeping the processes of {}: {e}", pass.item());
            (Swept::default(), Signalled::default())
        }
    }
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

/// Reads an ATA drive through libatasmart on one of the door's threads under the drive's mark
/// (`pass`), within `timeout`; the reading goes on in smartctl's JSON shape, so the same step
/// and model take it. A call that does not return keeps the mark, stuck, until it does.
#[cfg(feature = "atasmart")]
pub(crate) async fn run_atasmart(
    path: &str,
    nocheck_standby: bool,
    timeout: Duration,
    pass: Pass,
) -> RunOutcome {
    let p = path.to_string();
    let deadline = tokio::time::Instant::now() + timeout;
    match pass
        .call(deadline, move || super::atasmart::read(&p, nocheck_standby))
        .await
    {
        Ok(Ok(reading)) => RunOutcome::Output {
            stdout: super::atasmart::to_json(path, &reading)
                .to_string()
                .into_bytes(),
            // Not smartctl: there are no exit bits to show.
            exit: Exit::Unknown,
            escaped: Swept::default(),
        },
        Ok(Err(e)) => RunOutcome::Failed(RunError::Atasmart(e)),
        Err(crate::door::Unanswered::TimedOut(_)) => {
            RunOutcome::Failed(RunError::AtasmartStuck { after: timeout })
        }
        Err(crate::door::Unanswered::NoThread(message)) => RunOutcome::Failed(RunError::NoTask {
            message: format!("cannot read {path} through libatasmart: {message}"),
        }),
        Err(e) => RunOutcome::Failed(RunError::Task {
            cause: e.to_string(),
        }),
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
