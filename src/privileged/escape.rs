//! Finds and kills what a smartctl run left behind, even processes that left its process group
//! with `setsid`, and watches them until they are gone: a run's processes are those in its
//! process group, those carrying its tag in their environment, and those holding its output
//! pipe for writing (unless they are a fork of this process that has not exec'd yet: another
//! run's smartctl between fork and exec holds a copy of every descriptor here). No scheduling
//! and no parsing here.
//!
//! Why not a subreaper or a cgroup: a subreaper makes the daemon the parent of every orphan of
//! every child it ever starts (it would have to reap them all, or keep zombies), and a cgroup of
//! its own needs a delegated cgroup tree the daemon can't count on. The tag and the pipe find a
//! run's processes wherever they were reparented, and a pidfd makes the kill race-free.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable that marks a smartctl run's processes; children inherit it.
pub(crate) const TAG_VAR: &str = "SSDWATCH_SMARTCTL_RUN";

/// The live processes of the kernel, always: a run's processes are real ones whatever
/// `--path.procfs` says (fixture trees describe hosts, not this daemon's children).
const PROC: &str = "/proc";

/// One run's marks: its environment tag, the inode of its output pipe and its process group.
#[derive(Debug, Clone)]
pub(crate) struct Marks {
    pub tag: String,
    pub pipe_inode: Option<u64>,
    /// The run's process group (smartctl's pid), only while smartctl is not yet reaped: until
    /// then no other process can be given that id, so every member of the group is the run's.
    pub pgid: Option<u32>,
    /// When the run's first process started (clock ticks since boot, /proc/PID/stat): every
    /// process of the run started then or later, so an older one is not looked into. Without it
    /// the sweep reads every process's environment and descriptors, which on a host of busy
    /// processes (a database's backends, each with its files) costs milliseconds a run.
    pub started: Option<u64>,
    /// The last pid the kernel had handed out when the run was about to start: every process
    /// of the run was given a later one (pids are handed out in increasing order, wrapping at
    /// pid_max), so a sweep opens only the pids handed out since, a handful on most hosts,
    /// instead of every process's. None: every process is looked at.
    pub pid_floor: Option<u32>,
}

/// What /proc/PID/stat tells of a process.
struct Stat {
    state: char,
    ppid: u32,
    pgrp: u32,
    /// Start time, clock ticks since boot (the 22nd field).
    start: Option<u64>,
}

fn stat(proc_dir: &Path) -> Option<Stat> {
    let s = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    // After the command name (which may hold spaces and parentheses): state, ppid, pgrp.
    let (_, rest) = s.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    // Fields 6 to 21 (session … itrealvalue), then the start time.
    let start = f.nth(16).and_then(|v| v.parse().ok());
    Some(Stat {
        state,
        ppid,
        pgrp,
        start,
    })
}

/// When process `pid` started (clock ticks since boot), while it exists (a zombie too).
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    stat(&Path::new(PROC).join(pid.to_string()))?.start
}

/// Up to this many pids handed out during a run, a sweep asks for each by number rather than
/// list /proc: a pid that is gone costs one failed system call, a listed process a directory
/// entry built for it.
const MAX_PROBED_PIDS: u32 = 512;

/// The sweeping process: its pid and the (device, inode) of the program it runs.
struct Me {
    pid: u32,
    /// This process's program, looked up the first time a child of it is looked at.
    exe: std::cell::OnceCell<Option<(u64, u64)>>,
}

impl Me {
    fn now() -> Me {
        Me {
            pid: std::process::id(),
            exe: std::cell::OnceCell::new(),
        }
    }

    /// A child of this process still running this process's program: a fork that has not
    /// exec'd yet (another run's smartctl on its way), which holds a copy of every descriptor
    /// of this process, the run's pipe included, until its exec closes them.
    fn unexeced_fork(&self, st: &Stat, proc_dir: &Path) -> bool {
        if st.ppid != self.pid {
            return false;
        }
        let exe = *self.exe.get_or_init(|| exe_of(Path::new("/proc/self")));
        exe.is_some() && exe_of(proc_dir) == exe
    }
}

fn exe_of(proc_dir: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(proc_dir.join("exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Marks {
    /// A tag unique to this run of this daemon.
    pub(crate) fn new_run() -> Marks {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        Marks {
            tag: format!("{}-{n}", std::process::id()),
            pipe_inode: None,
            pgid: None,
            started: None,
            pid_floor: last_pid(),
        }
    }

    /// Whether `pid` may be one of the run's: handed out after the floor and up to `last`
    /// (the last pid handed out now). Without a floor, or when the counter is back where it
    /// was (nothing handed out, or a whole wrap), every pid may be.
    fn may_own_pid(&self, pid: u32, last: Option<u32>) -> bool {
        match (self.pid_floor, last) {
            (Some(floor), Some(last)) if floor < last => pid > floor && pid <= last,
            (Some(floor), Some(last)) if floor > last => pid > floor || pid <= last,
            _ => true,
        }
    }

    /// The pids a sweep looks at. When few were handed out since the run began, each of those
    /// is asked for by number (most are gone or threads, and fail at once); else every process
    /// /proc lists, whose listing builds an entry for each process on the host.
    fn candidates(&self, last: Option<u32>) -> Vec<u32> {
        match (self.pid_floor, last) {
            (Some(floor), Some(last)) if floor < last && last - floor <= MAX_PROBED_PIDS => {
                (floor + 1..=last).collect()
            }
            _ => pids(),
        }
    }

    /// True when the process belongs to this run: it is in the run's group, carries the tag,
    /// or holds the pipe's write end, which only smartctl's descendants were given. Who holds
    /// just the read end is this process or a fork of it; and a fork of this process that has
    /// not exec'd yet may hold both ends of any run's pipe without being that run's.
    fn owns(&self, st: &Stat, proc_dir: &Path, me: &Me) -> bool {
        // Older than the run: neither in its group, nor given its tag or pipe by inheritance.
        // (Only a descriptor passed over a socket could reach one; no smartctl does that.)
        if let (Some(run), Some(start)) = (self.started, st.start)
            && start < run
        {
            return false;
        }
        if self.pgid.is_some_and(|g| g == st.pgrp) {
            return true;
        }
        if carries_tag(proc_dir, &self.tag) {
            return true;
        }
        let Some(ino) = self.pipe_inode else {
            return false;
        };
        holds_for_writing(proc_dir, ino) && !me.unexeced_fork(st, proc_dir)
    }
}

/// Whether the process's environment carries a run's tag.
fn carries_tag(proc_dir: &Path, tag: &str) -> bool {
    let want = format!("{TAG_VAR}={tag}");
    std::fs::read(proc_dir.join("environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
}

/// Whether the process has pipe `ino` open for writing (its fdinfo's access mode).
fn holds_for_writing(proc_dir: &Path, ino: u64) -> bool {
    let pipe = format!("pipe:[{ino}]");
    std::fs::read_dir(proc_dir.join("fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == pipe.as_str()))
        .any(|fd| {
            let info = std::fs::read_to_string(proc_dir.join("fdinfo").join(fd.file_name()));
            info.ok()
                .as_deref()
                .and_then(fdinfo_flags)
                .is_some_and(|f| f & libc::O_ACCMODE != libc::O_RDONLY)
        })
}

/// The `flags:` line of /proc/PID/fdinfo/N, in octal.
fn fdinfo_flags(info: &str) -> Option<i32> {
    let v = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
    i32::from_str_radix(v.trim(), 8).ok()
}

/// The inode of a pipe end (both ends share it; /proc/PID/fd shows `pipe:[INODE]`).
pub(crate) fn pipe_inode(fd: &impl std::os::fd::AsFd) -> Option<u64> {
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
    /// Processes of the run that were killed but were still there after the grace: stuck in
    /// the kernel (uninterruptible sleep), where SIGKILL waits until their I/O returns.
    #[serde(default)]
    pub stuck: usize,
}

/// The processes a sweep signalled, by pidfd, to be watched until they are gone.
#[derive(Debug, Default)]
pub(crate) struct Signalled(Vec<OwnedFd>);

impl Signalled {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a process to watch.
    pub(crate) fn push(&mut self, pidfd: OwnedFd) {
        self.0.push(pidfd);
    }

    /// Waits until every one is gone or `deadline` passes; those still there.
    pub(crate) async fn left_at(self, deadline: tokio::time::Instant) -> Signalled {
        let mut left = Vec::new();
        for fd in self.0 {
            if tokio::time::timeout_at(deadline, exit_of(&fd))
                .await
                .is_err()
            {
                left.push(fd);
            }
        }
        Signalled(left)
    }

    /// Waits until every one is gone, however long that takes.
    pub(crate) async fn all_gone(self) {
        for fd in &self.0 {
            exit_of(fd).await;
        }
    }
}

/// Waits for the process of a pidfd to end (exit or zombie: it no longer runs). A pidfd reads
/// as readable then; it is watched by the runtime's poller, holding no thread.
pub(crate) async fn exit_of(pidfd: &OwnedFd) {
    use tokio::io::{Interest, unix::AsyncFd};
    // SAFETY: the borrowed descriptor stays open, and the same, while the watch (bound to the
    // borrow) lives.
    let watch = unsafe { AsyncFd::register_with_interest(pidfd.as_fd(), Interest::READABLE) };
    if let Ok(watch) = watch
        && watch.readable().await.is_ok()
    {
        return;
    }
    // Not watchable by the poller: ask now and then.
    while !ended_now(pidfd) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether the process of a pidfd has ended, without waiting.
fn ended_now(pidfd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0
}

/// Kills every process of the run except this one. Repeats a few times: a process may fork
/// between the scan and the kill. Each kill goes through a pidfd opened before the ownership
/// check, so a reused pid can never be hit; the pidfds of those killed are returned, to see
/// them gone.
pub(crate) fn sweep(marks: &Marks) -> (Swept, Signalled) {
    let me = Me::now();
    let mut total = Swept::default();
    let mut watch = Signalled::default();
    // Killed ones may not have died yet when the next round looks: signalled once is enough.
    let mut signalled = std::collections::HashSet::new();
    for _ in 0..4 {
        let mut round = 0;
        let last = last_pid();
        for pid in marks.candidates(last) {
            if pid == me.pid || signalled.contains(&pid) || !marks.may_own_pid(pid, last) {
                continue;
            }
            let Some(pidfd) = pidfd_open(pid) else {
                continue;
            };
            // Checked after the pidfd is open: it names the process we looked at, or a dead one.
            let dir = Path::new(PROC).join(pid.to_string());
            // A zombie (killed, not yet reaped by its parent) is done: signalling it again
            // would count it twice.
            let Some(st) = stat(&dir).filter(|st| !matches!(st.state, 'Z' | 'X')) else {
                continue;
            };
            if !marks.owns(&st, &dir, &me) {
                continue;
            }
            if pidfd_kill(&pidfd) {
                signalled.insert(pid);
                watch.push(pidfd);
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
    (total, watch)
}

/// The last pid the kernel handed out in this pid namespace: /proc/loadavg's last field.
fn last_pid() -> Option<u32> {
    let s = std::fs::read_to_string(Path::new(PROC).join("loadavg")).ok()?;
    s.split_whitespace().nth(4)?.parse().ok()
}

fn pids() -> Vec<u32> {
    std::fs::read_dir(PROC)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// A pidfd on a process: it names that process only, whatever later happens to its pid.
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
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
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// Waits (generously: the machine may be busy) until `pid`, a fork of this test, has
    /// exec'd: its program is no longer this test's.
    fn wait_exec(pid: u32) {
        let ours = exe_of(Path::new("/proc/self"));
        wait_until(pid, "exec'd", |dir| exe_of(dir) != ours);
    }

    /// Waits until the process's environment carries the run's tag. The kernel switches a
    /// process's program (its `exe`) before it places the new environment, so for a moment
    /// after `exe` changed /proc/PID/environ reads empty: on a busy machine a sweep then finds
    /// no tag.
    fn wait_tagged(pid: u32, tag: &str) {
        wait_until(pid, "shown its environment", |dir| carries_tag(dir, tag));
    }

    /// Waits (30 s at most) until `done` holds of the process's /proc directory.
    fn wait_until(pid: u32, what: &str, done: impl Fn(&Path) -> bool) {
        let dir = Path::new(PROC).join(pid.to_string());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(&dir) {
            assert!(Instant::now() < deadline, "{pid} never {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn killed(n: usize) -> Swept {
        Swept {
            killed: n,
            ..Swept::default()
        }
    }

    #[test]
    fn a_tagged_process_that_left_the_group_is_found_and_killed() {
        let marks = Marks::new_run();
        let mut child = Command::new("setsid")
            .args(["sleep", "30"])
            .env(TAG_VAR, &marks.tag)
            .spawn()
            .expect("spawn setsid sleep");
        // A child of ours leads no group, so setsid calls setsid(2) and execs sleep: no fork.
        // Wait for sleep itself: between setsid's exec and sleep's, the sweep may find nothing.
        wait_until(child.id(), "exec'd sleep", |dir| {
            std::fs::read_link(dir.join("exe")).is_ok_and(|e| e.ends_with("sleep"))
        });
        wait_tagged(child.id(), &marks.tag);
        let (swept, signalled) = sweep(&marks);
        assert_eq!((swept, signalled.len()), (killed(1), 1));
        let status = child.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert_eq!(sweep(&marks).0, Swept::default(), "nothing left");
        // Another run's tag finds nothing of this one.
        assert_eq!(sweep(&Marks::new_run()).0, Swept::default());
    }

    #[test]
    fn a_process_older_than_the_run_is_not_looked_into() {
        let marks = Marks::new_run();
        // Carrying the run's tag, but started before the run's first process.
        let mut old = Command::new("sleep")
            .arg("30")
            .env(TAG_VAR, &marks.tag)
            .spawn()
            .expect("spawn sleep");
        wait_exec(old.id());
        wait_tagged(old.id(), &marks.tag);
        let old_start = start_ticks(old.id()).expect("its start time");
        let later = Marks {
            started: Some(old_start + 1),
            ..marks.clone()
        };
        assert_eq!(sweep(&later).0, Swept::default(), "older than the run");
        // Started in the same tick as the run (or after): the run's.
        let same = Marks {
            started: Some(old_start),
            ..marks
        };
        assert_eq!(sweep(&same).0, killed(1));
        let status = old.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        // This process's own start time reads too (a zombie's as well: the runner reads
        // smartctl's before reaping it).
        assert!(start_ticks(std::process::id()).is_some());
    }

    #[test]
    fn a_member_of_the_runs_group_is_found_while_its_leader_is_unreaped() {
        // Marked before the run starts, as the runner does: the leader's pid is a later one.
        let run = Marks::new_run();
        let mut leader = Command::new("sleep")
            .arg("30")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        wait_exec(leader.id());
        let marks = Marks {
            pgid: Some(leader.id()),
            ..run
        };
        assert_eq!(sweep(&marks).0, killed(1));
        let status = leader.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }

    /// The race that lost samples: another run's smartctl, forked but not yet exec'd, holds a
    /// copy of every descriptor of the process starting it, this run's pipe included (both
    /// ends, when it was forked while this run was being started). It is not this run's.
    #[test]
    fn a_fork_between_fork_and_exec_holding_the_pipe_is_not_taken_for_the_runs() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let mut marks = Marks::new_run();
        marks.pipe_inode = pipe_inode(&r);
        let ready_fd = ready_w.as_raw_fd();
        // Not the door: a test's own thread, forking beside the run it checks.
        let starting = std::thread::spawn(move || {
            let mut cmd = Command::new("true");
            // SAFETY: only async-signal-safe calls between fork and exec: write and sleep.
            unsafe {
                cmd.pre_exec(move || {
                    libc::write(ready_fd, b"x".as_ptr().cast(), 1);
                    libc::sleep(2);
                    Ok(())
                });
            }
            cmd.spawn()
        });
        let mut byte = [0u8; 1];
        // The fork is between fork and exec once it wrote; `spawn` returns after its exec.
        assert_eq!(nix::unistd::read(&ready_r, &mut byte).expect("read"), 1);
        drop(ready_w);
        let (swept, _) = sweep(&marks);
        let mut child = starting.join().expect("thread").expect("spawn");
        let status = child.wait().expect("wait");
        assert_eq!(swept, Swept::default());
        assert!(status.success(), "the fork was killed: {status:?}");
        drop((r, w));
    }

    /// Only pids handed out since the run was marked are opened, across a wrap too; an older
    /// process carrying the run's tag (it can't, but if it did) is not even looked at.
    #[test]
    fn only_pids_handed_out_since_the_run_began_are_looked_at() {
        let at = |floor| Marks {
            pid_floor: Some(floor),
            ..Marks::new_run()
        };
        assert!(at(100).may_own_pid(101, Some(200)));
        assert!(at(100).may_own_pid(200, Some(200)));
        assert!(!at(100).may_own_pid(100, Some(200)));
        assert!(!at(100).may_own_pid(201, Some(200)));
        // Wrapped at pid_max: above the floor, or up to the last.
        assert!(at(4_000_000).may_own_pid(4_100_000, Some(50)));
        assert!(at(4_000_000).may_own_pid(50, Some(50)));
        assert!(!at(4_000_000).may_own_pid(51, Some(50)));
        assert!(!at(4_000_000).may_own_pid(3_999_999, Some(50)));
        // Unknown, or no pid handed out at all: every pid may be the run's.
        assert!(at(100).may_own_pid(5, None));
        assert!(at(100).may_own_pid(5, Some(100)));
        assert!(
            Marks {
                pid_floor: None,
                ..Marks::new_run()
            }
            .may_own_pid(5, Some(200))
        );

        let mut old = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        wait_exec(old.id());
        let marks = Marks::new_run();
        let tagged_old = Marks {
            tag: marks.tag.clone(),
            pgid: Some(old.id()),
            ..marks
        };
        assert_eq!(sweep(&tagged_old).0, Swept::default(), "older than the run");
        let _ = old.kill();
        let _ = old.wait();
    }

    /// A sweep asks for the few pids handed out during a run by number; after many, or a wrap,
    /// or with no counter, it lists every process.
    #[test]
    fn few_new_pids_are_asked_for_by_number_and_many_or_a_wrap_list_every_process() {
        let at = |floor| Marks {
            pid_floor: Some(floor),
            ..Marks::new_run()
        };
        assert_eq!(at(100).candidates(Some(103)), vec![101, 102, 103]);
        assert_eq!(
            at(100).candidates(Some(100 + MAX_PROBED_PIDS)).len(),
            MAX_PROBED_PIDS as usize
        );
        let me = std::process::id();
        for (floor, last) in [
            (100, Some(101 + MAX_PROBED_PIDS)),
            (4_000_000, Some(50)),
            (100, None),
        ] {
            let listed = at(floor).candidates(last);
            assert!(listed.contains(&me), "{floor} {last:?}: {listed:?}");
        }
    }

    /// An escaped process that also cleared its environment is still the run's while it holds
    /// the pipe for writing; one that only holds the read end never got it from smartctl.
    #[test]
    fn a_writer_of_the_pipe_is_the_runs_and_a_reader_is_not() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let mut marks = Marks::new_run();
        marks.pipe_inode = pipe_inode(&r);
        let mut writer = Command::new("setsid")
            .args(["sleep", "30"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdout(Stdio::from(w))
            .spawn()
            .expect("spawn writer");
        let mut reader = Command::new("sleep")
            .arg("30")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::from(r.try_clone().expect("dup")))
            .spawn()
            .expect("spawn reader");
        wait_exec(writer.id());
        wait_exec(reader.id());
        assert_eq!(sweep(&marks).0, killed(1));
        let status = writer.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert_eq!(
            reader.try_wait().expect("try_wait"),
            None,
            "the reader is not the run's"
        );
        let _ = reader.kill();
        let _ = reader.wait();
        drop(r);
    }

    /// What a run killed and is still there at the grace's end is handed on, and watched until
    /// it ends (a process stuck in the kernel ends when its I/O returns).
    #[tokio::test]
    async fn a_process_still_there_at_the_deadline_is_left_and_watched_until_it_ends() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("spawn");
        let mut watch = Signalled::default();
        watch.push(pidfd_open(child.id()).expect("pidfd"));
        let left = watch
            .left_at(tokio::time::Instant::now() + Duration::from_millis(100))
            .await;
        assert_eq!(left.len(), 1, "still running");
        child.kill().expect("kill");
        // Ended once it is a zombie: its parent need not have reaped it.
        left.all_gone().await;
        assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn fdinfo_flags_are_octal() {
        let info = "pos:\t0\nflags:\t02000001\nmnt_id:\t15\nino:\t123\n";
        assert_eq!(fdinfo_flags(info), Some(0o2000001));
        assert_eq!(
            fdinfo_flags(info).map(|f| f & libc::O_ACCMODE),
            Some(libc::O_WRONLY)
        );
        assert_eq!(fdinfo_flags("pos: 0\n"), None);
    }
}
