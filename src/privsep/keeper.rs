//! The keeper: the one long-lived process that holds the SMART capabilities. It reads nothing
//! from anyone; it starts a worker on a fresh socket pair, hands the daemon its end (SCM_RIGHTS
//! over the control socket, with the worker's pid), waits for the worker, and starts another
//! with backoff when one dies. A worker that exits 0 saw the daemon close its socket: the
//! keeper then ends too. Not the worker's protocol: that belongs to whoever runs the worker.

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The descriptor a keeper or worker finds its socket on.
pub const SOCKET_FD: RawFd = 3;

/// The first wait before a worker is started again, doubled up to `MAX_BACKOFF`; back to the
/// first once a worker has lived `STABLE` (a crash loop costs a start a minute at most).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
const STABLE: Duration = Duration::from_secs(60);

/// Starts `exe args` with one end of a new socket pair as descriptor 3; returns the child and
/// the other end. Whatever capabilities this thread passes on at exec go with it.
pub fn spawn_with_socket(exe: &Path, args: &[OsString]) -> std::io::Result<(Child, UnixStream)> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let raw = theirs.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.args(args).stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let r = if raw == SOCKET_FD {
                libc::fcntl(raw, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, SOCKET_FD)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(theirs);
    Ok((child, UnixStream::from(ours)))
}

/// The socket a keeper or worker was started with (descriptor 3), once.
///
/// # Safety
/// Only for a process started by `spawn_with_socket`, and called once: it takes ownership of
/// descriptor 3.
pub unsafe fn inherited_socket() -> std::io::Result<UnixStream> {
    // Check it is a socket before owning it.
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into the buffer it is given.
    if unsafe { libc::fstat(SOCKET_FD, st.as_mut_ptr()) } < 0 {
        return Err(std::io::Error::other(format!(
            "descriptor {SOCKET_FD}: {} (this command is started by the ssdwatch daemon, not by hand)",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fstat succeeded and filled it.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(std::io::Error::other(format!(
            "descriptor {SOCKET_FD} is not a socket (this command is started by the ssdwatch daemon, not by hand)"
        )));
    }
    // SAFETY: an open socket we were given at exec, owned by nothing else in this process.
    let fd = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    // Not passed on to the programs this process starts.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(UnixStream::from(fd))
}

/// Sends a worker's socket end and pid to the daemon.
fn send_worker(control: &UnixStream, pid: u32, fd: &OwnedFd) -> std::io::Result<()> {
    let bytes = pid.to_le_bytes();
    let fds = [fd.as_raw_fd()];
    sendmsg::<()>(
        control.as_raw_fd(),
        &[IoSlice::new(&bytes)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(std::io::Error::from)?;
    Ok(())
}

/// Waits for the keeper's next worker: its pid and the daemon's end of its socket. None once the
/// keeper is gone.
pub fn recv_worker(control: &UnixStream) -> std::io::Result<Option<(u32, OwnedFd)>> {
    let mut bytes = [0u8; 4];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (n, fd) = {
        let mut iov = [IoSliceMut::new(&mut bytes)];
        let msg = recvmsg::<()>(
            control.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        let mut fd = None;
        for c in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                for raw in fds {
                    // SAFETY: the kernel just installed this descriptor for us.
                    let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                    fd.get_or_insert(owned);
                }
            }
        }
        (msg.bytes, fd)
    };
    if n == 0 {
        return Ok(None);
    }
    match (n, fd) {
        (4, Some(fd)) => Ok(Some((u32::from_le_bytes(bytes), fd))),
        _ => Err(std::io::Error::other(format!(
            "the keeper sent a {n}-byte message without a socket"
        ))),
    }
}

/// The keeper's life: start `exe worker_args` with a fresh socket, hand its other end to the
/// daemon, and start another when it dies. Returns the process exit code.
pub fn run(exe: &Path, worker_args: &[OsString]) -> i32 {
    // SAFETY: this process was started by `spawn_with_socket`; called once.
    let control = match unsafe { inherited_socket() } {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("smart-helper: {e}");
            return 2;
        }
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        match spawn_with_socket(exe, worker_args) {
            Ok((mut child, ours)) => {
                let pid = child.id();
                if let Err(e) = send_worker(&control, pid, &OwnedFd::from(ours)) {
                    // The daemon is gone: so is the reason to run.
                    tracing::debug!("smart-helper: handing over worker {pid}: {e}");
                    let _ = child.kill();
                    let _ = child.wait();
                    return 0;
                }
                // The keeper now only waits: its start-up code (the daemon's binary, argument
                // parsing, the spawn) is let go, as the daemon lets go of its own.
                match crate::memory::release_start_up_pages(Path::new("/proc")) {
                    Ok(r) => tracing::debug!(
                        "smart-helper: released {} KiB of code pages in {} mappings",
                        r.resident_kib,
                        r.mappings
                    ),
                    Err(e) => tracing::debug!("smart-helper: releasing code pages: {e}"),
                }
                let status = child.wait();
                if started.elapsed() >= STABLE {
                    backoff = FIRST_BACKOFF;
                }
                match status {
                    Ok(s) if s.success() => return 0,
                    Ok(s) => tracing::warn!(
                        "the privileged helper (pid {pid}) ended ({s}); starting another in {}",
                        humantime::format_duration(backoff)
                    ),
                    Err(e) => tracing::warn!("waiting for the privileged helper (pid {pid}): {e}"),
                }
            }
            Err(e) => tracing::error!(
                "cannot start the privileged helper ({}): {e}; trying again in {}",
                exe.display(),
                humantime::format_duration(backoff)
            ),
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
