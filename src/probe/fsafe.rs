//! File safety for probes: everything is opened relative to a directory fd we created and own,
//! with O_NOFOLLOW, and checked for owner, type and link count. Nothing here follows a path.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Name of the directory the daemon keeps inside each target.
pub const PROBE_DIR: &str = ".ssdwatch-probe";
/// The preallocated probe file, reused by every run.
pub const PROBE_FILE: &str = "probe.dat";
/// Created while the probe file is being preallocated and filled; renamed when complete.
pub const PARTIAL_FILE: &str = "probe.dat.partial";
/// Present for the whole duration of a run; a leftover one means a run was killed.
pub const RUN_MARKER: &str = "running";

/// Why a probe directory or file is refused.
#[derive(Debug, thiserror::Error)]
pub enum SafetyError {
    #[error("{0} is a symlink or not a directory; refusing to use it")]
    NotADirectory(String),
    /// Typically left by a `probe run` as root before the daemon's user ran: the fix is named.
    #[error("{path} is owned by {}, but this runs as {}: `chown -R {ours}: {path}` gives it over (or remove it)", who(*uid), who(*ours))]
    WrongOwner { path: String, uid: u32, ours: u32 },
    #[error("{0} is writable by group or others")]
    Permissive(String),
    #[error("{0} is not a regular file")]
    NotRegular(String),
    #[error("{path} has {links} links (expected 1)")]
    Links { path: String, links: u64 },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Why leftovers of an interrupted run could not be cleared.
#[derive(Debug, thiserror::Error)]
pub enum LeftoverError {
    #[error("{dir}: listing: {source}")]
    List { dir: String, source: io::Error },
    #[error("{dir}/{name}: cannot remove leftover: {source}")]
    Remove {
        dir: String,
        name: String,
        source: io::Error,
    },
}

/// A user as a message names it: `ssdwatch (uid 998)`, or `uid 998` when it has no name.
pub fn who(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// `fstatat` of `name` in `dir`, symlinks not followed; None when it can't be seen.
fn lstat_at(dir: &OwnedFd, name: &str) -> Option<libc::stat> {
    let c = cstr(name).ok()?;
    // SAFETY: zeroed stat is a valid out-buffer; valid fd and string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (r == 0).then_some(st)
}

fn cstr(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens a configured target directory (the operator's path; following it is the operator's call).
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: valid NUL-terminated string; the fd is owned on success.
    let fd = cvt(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fd was just returned by open.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open for the caller's lifetime; st is a valid pointer.
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

/// Opens `name` relative to `dir` without following a symlink in its last component.
pub fn openat(dir: &OwnedFd, name: &str, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: valid dir fd and string; the fd is owned on success.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: fd just returned by openat.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn unlinkat(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid fd and string. unlinkat never follows a symlink: it removes the link itself.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) })?;
    Ok(())
}

pub fn renameat(dir: &OwnedFd, from: &str, to: &str) -> io::Result<()> {
    let (a, b) = (cstr(from)?, cstr(to)?);
    // SAFETY: valid fd and strings.
    cvt(unsafe { libc::renameat(dir.as_raw_fd(), a.as_ptr(), dir.as_raw_fd(), b.as_ptr()) })?;
    Ok(())
}

pub fn fsync_dir(dir: &OwnedFd) {
    // SAFETY: valid fd. A failed directory fsync only weakens durability of a rename.
    unsafe { libc::fsync(dir.as_raw_fd()) };
}

/// `flock(LOCK_EX)` on an open file or directory, retried on EINTR; with `wait` false, returns
/// Ok(false) at once when another open file description holds it. Released when the descriptor
/// is closed. flock needs no write access, so a lock taken by root doesn't shut others out.
pub fn flock_exclusive(fd: RawFd, wait: bool) -> io::Result<bool> {
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: plain syscall on a descriptor the caller keeps open.
        if unsafe { libc::flock(fd, op) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Whether `name` exists in `dir` (as anything, symlinks not followed).
pub fn exists_at(dir: &OwnedFd, name: &str) -> bool {
    lstat_at(dir, name).is_some()
}

/// Opens (creating when absent) `<target>/.ssdwatch-probe` relative to the target's fd and checks
/// it: a real directory (not a symlink), owned by us, not writable by others.
pub fn open_probe_dir(target: &OwnedFd, target_name: &str) -> Result<OwnedFd, SafetyError> {
    let shown = format!("{target_name}/{PROBE_DIR}");
    let c = cstr(PROBE_DIR).map_err(|source| SafetyError::Io {
        path: shown.clone(),
        source,
    })?;
    // SAFETY: valid fd and string. mkdirat never follows a symlink in the last component.
    let r = unsafe { libc::mkdirat(target.as_raw_fd(), c.as_ptr(), 0o700) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(SafetyError::Io {
                path: shown,
                source: e,
            });
        }
    }
    let dir = match openat(target, PROBE_DIR, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
        Ok(d) => d,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
            return Err(SafetyError::NotADirectory(shown));
        }
        // Another user's directory we may not even open (root's 0700 one, made by a `probe run`
        // as root): say whose it is and how to fix it, not a bare "Permission denied".
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            // SAFETY: geteuid has no preconditions.
            let ours = unsafe { libc::geteuid() };
            return Err(match lstat_at(target, PROBE_DIR).map(|st| st.st_uid) {
                Some(uid) if uid != ours => SafetyError::WrongOwner {
                    path: shown,
                    uid,
                    ours,
                },
                _ => SafetyError::Io {
                    path: shown,
                    source: e,
                },
            });
        }
        Err(source) => {
            return Err(SafetyError::Io {
                path: shown,
                source,
            });
        }
    };
    let st = fstat(dir.as_raw_fd()).map_err(|source| SafetyError::Io {
        path: shown.clone(),
        source,
    })?;
    check_owner(&shown, &st)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(SafetyError::NotADirectory(shown));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(SafetyError::Permissive(shown));
    }
    Ok(dir)
}

fn check_owner(shown: &str, st: &libc::stat) -> Result<(), SafetyError> {
    // SAFETY: geteuid has no preconditions.
    let ours = unsafe { libc::geteuid() };
    if st.st_uid != ours {
        return Err(SafetyError::WrongOwner {
            path: shown.to_string(),
            uid: st.st_uid,
            ours,
        });
    }
    Ok(())
}

/// Checks an opened probe file: regular, ours, exactly one link (a hard link elsewhere would make
/// us write into someone else's file).
pub fn check_file(shown: &str, fd: &OwnedFd) -> Result<libc::stat, SafetyError> {
    let st = fstat(fd.as_raw_fd()).map_err(|source| SafetyError::Io {
        path: shown.to_string(),
        source,
    })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(SafetyError::NotRegular(shown.to_string()));
    }
    check_owner(shown, &st)?;
    if st.st_nlink != 1 {
        return Err(SafetyError::Links {
            path: shown.to_string(),
            links: st.st_nlink,
        });
    }
    Ok(st)
}

/// Names in the probe directory other than the probe file itself.
pub fn leftovers(dir: &OwnedFd) -> io::Result<Vec<String>> {
    // Listing goes through a duplicate fd so the caller's stays usable.
    // SAFETY: valid fd; dup returns a new owned fd or -1.
    let dup = cvt(unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: dup is a fresh fd we own; fdopendir takes ownership of it on success.
    let d = unsafe { libc::fdopendir(dup) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so dup is still ours to close.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    // SAFETY: d is a valid DIR* until closedir.
    unsafe { libc::rewinddir(d) };
    let mut out = Vec::new();
    loop {
        // SAFETY: d is valid; readdir returns null at the end.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: d_name is NUL-terminated inside the entry.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if name != "." && name != ".." && name != PROBE_FILE {
            out.push(name);
        }
    }
    // SAFETY: d valid, closed once.
    unsafe { libc::closedir(d) };
    out.sort();
    Ok(out)
}

/// Removes what a crashed run left (partial file, run marker, anything else). Only unlinks
/// entries of our own directory; a directory found there is left alone and reported.
pub fn remove_leftovers(dir: &OwnedFd, shown: &str) -> Result<Vec<String>, LeftoverError> {
    let names = leftovers(dir).map_err(|source| LeftoverError::List {
        dir: shown.to_string(),
        source,
    })?;
    let mut removed = Vec::new();
    for name in names {
        if let Err(source) = unlinkat(dir, &name) {
            return Err(LeftoverError::Remove {
                dir: shown.to_string(),
                name,
                source,
            });
        }
        removed.push(name);
    }
    if !removed.is_empty() {
        fsync_dir(dir);
    }
    Ok(removed)
}

/// Removes the run marker when the run ends, whichever way it ends (except a kill, which the next
/// start cleans up).
pub struct MarkerGuard<'a> {
    pub dir: &'a OwnedFd,
}

impl MarkerGuard<'_> {
    pub fn create(dir: &OwnedFd) -> io::Result<MarkerGuard<'_>> {
        let fd = openat(
            dir,
            RUN_MARKER,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o600,
        )?;
        let pid = format!("{}\n", std::process::id());
        // SAFETY: valid fd and buffer.
        unsafe { libc::write(fd.as_raw_fd(), pid.as_ptr().cast(), pid.len()) };
        Ok(MarkerGuard { dir })
    }
}

impl Drop for MarkerGuard<'_> {
    fn drop(&mut self) {
        let _ = unlinkat(self.dir, RUN_MARKER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn target() -> (tempfile::TempDir, OwnedFd) {
        let d = tempfile::tempdir().unwrap();
        let fd = open_dir(d.path()).unwrap();
        (d, fd)
    }

    #[test]
    fn a_fresh_probe_directory_is_created_private_and_accepted() {
        let (d, fd) = target();
        open_probe_dir(&fd, "/t").unwrap();
        let mode = std::fs::metadata(d.path().join(PROBE_DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_group_or_world_writable_probe_directory_is_refused() {
        let (d, fd) = target();
        let p = d.path().join(PROBE_DIR);
        std::fs::create_dir(&p).unwrap();
        for mode in [0o770, 0o707, 0o777] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = open_probe_dir(&fd, "/t").unwrap_err();
            assert!(matches!(e, SafetyError::Permissive(_)), "{mode:o}: {e}");
            assert_eq!(
                e.to_string(),
                format!("/t/{PROBE_DIR} is writable by group or others")
            );
        }
    }

    #[test]
    fn a_probe_directory_that_is_a_file_or_a_symlink_is_refused() {
        let (d, fd) = target();
        std::fs::write(d.path().join(PROBE_DIR), b"x").unwrap();
        let e = open_probe_dir(&fd, "/t").unwrap_err();
        assert!(matches!(e, SafetyError::NotADirectory(_)), "{e}");
        std::fs::remove_file(d.path().join(PROBE_DIR)).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), d.path().join(PROBE_DIR)).unwrap();
        let e = open_probe_dir(&fd, "/t").unwrap_err();
        assert!(matches!(e, SafetyError::NotADirectory(_)), "{e}");
    }

    #[test]
    fn a_probe_file_that_is_not_a_regular_file_is_refused() {
        let (d, fd) = target();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let sub = openat(&fd, "sub", libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
        let e = check_file("/t/sub", &sub).unwrap_err();
        assert!(matches!(e, SafetyError::NotRegular(_)), "{e}");
    }

    /// Needs root to hand the directory to another user; elsewhere says so and passes.
    #[test]
    fn a_probe_directory_owned_by_someone_else_is_refused() {
        if unsafe { libc::geteuid() } != 0 {
            crate::testing::skip("wrong owner", "needs root to chown");
            return;
        }
        let (d, fd) = target();
        let p = d.path().join(PROBE_DIR);
        std::fs::create_dir(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        let e = open_probe_dir(&fd, "/t").unwrap_err();
        assert!(
            matches!(
                e,
                SafetyError::WrongOwner {
                    uid: 65534,
                    ours: 0,
                    ..
                }
            ),
            "{e}"
        );
    }
}
