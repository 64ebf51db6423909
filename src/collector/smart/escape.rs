//! Finds and kills what a smartctl run left behind, even processes that left its process group
//! with `setsid`: each run's processes carry a tag in their environment, and anything still
//! holding the run's output pipe is its too. No scheduling and no parsing here.
//!
//! Why not a subreaper or a cgroup: a subreaper makes the daemon the parent of every orphan of
//! every child it ever starts (it would have to reap them all, or keep zombies), and a cgroup of
//! its own needs a delegated cgroup tree the daemon can't count on. The tag and the pipe find a
//! run's processes wherever they were reparented, and a pidfd makes the kill race-free.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that marks a smartctl run's processes; children inherit it.
pub const TAG_VAR: &str = "SSDWATCH_SMARTCTL_RUN";

/// The live processes of the kernel, always: a run's processes are real ones whatever
/// `--path.procfs` says (fixture trees describe hosts, not this daemon's children).
const PROC: &str = "/proc";

/// One run's marks: its environment tag and the inode of its output pipe.
#[derive(Debug, Clone)]
pub struct Marks {
    pub tag: String,
    pub pipe_inode: Option<u64>,
}

impl Marks {
    /// A tag unique to this run of this daemon.
    pub fn new_run() -> Marks {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        Marks {
            tag: format!("{}-{n}", std::process::id()),
            pipe_inode: None,
        }
    }

    /// True when process `pid` belongs to this run: it carries the tag or holds the pipe.
    fn owns(&self, proc_dir: &Path) -> bool {
        let want = format!("{TAG_VAR}={}", self.tag);
        if std::fs::read(proc_dir.join("environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        {
            return true;
        }
        let Some(ino) = self.pipe_inode else {
            return false;
        };
        let pipe = format!("pipe:[{ino}]");
        std::fs::read_dir(proc_dir.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == pipe.as_str()))
    }
}

/// The inode of a pipe end (both ends share it; /proc/PID/fd shows `pipe:[INODE]`).
pub fn pipe_inode(fd: &impl std::os::fd::AsFd) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|st| st.st_ino)
}

/// What a sweep found and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Swept {
    /// Processes of the run that were still there and were sent SIGKILL.
    pub killed: usize,
    /// Processes of the run that could not be signalled (another user's, or gone mid-way in
    /// a way the kernel did not tell).
    pub failed: usize,
}

/// Kills every process of the run except this one. Repeats a few times: a process may fork
/// between the scan and the kill. Each kill goes through a pidfd opened before the ownership
/// check, so a reused pid can never be hit.
pub fn sweep(marks: &Marks) -> Swept {
    let me = std::process::id();
    let mut total = Swept::default();
    // Killed ones may not have died yet when the next round looks: signalled once is enough.
    let mut signalled = std::collections::HashSet::new();
    for _ in 0..4 {
        let mut round = 0;
        for pid in pids() {
            if pid == me || signalled.contains(&pid) {
                continue;
            }
            let Some(pidfd) = pidfd_open(pid) else {
                continue;
            };
            // Checked after the pidfd is open: it names the process we looked at, or a dead one.
            let dir = Path::new(PROC).join(pid.to_string());
            if exited(&dir) || !marks.owns(&dir) {
                continue;
            }
            if pidfd_kill(&pidfd) {
                signalled.insert(pid);
                round += 1;
            } else {
                total.failed += 1;
            }
        }
        total.killed += round;
        if round == 0 {
            break;
        }
    }
    total
}

/// A zombie (killed, not yet reaped by its parent) is done: signalling it again would count it
/// twice.
fn exited(proc_dir: &Path) -> bool {
    std::fs::read_to_string(proc_dir.join("stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
    })
}

fn pids() -> Vec<u32> {
    std::fs::read_dir(PROC)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// SIGKILL through the pidfd. A process already gone (exited, a zombie) counts as done.
fn pidfd_kill(pidfd: &OwnedFd) -> bool {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_process_that_left_the_group_is_found_and_killed() {
        let marks = Marks::new_run();
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .env(TAG_VAR, &marks.tag)
            .spawn()
            .expect("spawn setsid sleep");
        // A child of ours leads no group, so setsid calls setsid(2) and execs sleep: no fork.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let swept = sweep(&marks);
        assert_eq!(
            swept,
            Swept {
                killed: 1,
                failed: 0
            }
        );
        use std::os::unix::process::ExitStatusExt;
        let status = child.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert_eq!(sweep(&marks), Swept::default(), "nothing left");
        // Another run's tag finds nothing of this one.
        assert_eq!(sweep(&Marks::new_run()), Swept::default());
    }
}
