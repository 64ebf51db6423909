//! Readers of /sys under a root path given by the caller (`--path.sysfs`), and their pure parsers.
//! No metrics here: collectors turn what these return into series.

pub mod blockstat;
pub mod cgroup;
pub mod md;
pub mod topology;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Reads a sysfs attribute, trimmed; `None` when absent or unreadable (sysfs attributes come and go
/// with drivers and kernel versions, so a missing one is normal, not an error).
pub fn read_attr(path: &Path) -> Option<String> {
    attr_text(std::fs::File::open(path).ok()?)
}

/// An open attribute's text, trimmed. Read in page-sized pieces until the end, without asking its
/// size first: sysfs says 4096 for every attribute, so `std::fs::read`'s size query is one system
/// call a file that tells nothing.
fn attr_text(mut f: std::fs::File) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    let mut all: Vec<u8> = Vec::new();
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    // Some attributes (e.g. SCSI vpd pages) carry binary bytes; keep the printable part.
    let text = String::from_utf8_lossy(&all);
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    Some(t.to_string())
}

/// A /sys directory held open, its attributes and subdirectories opened relative to it: reading
/// many files of one directory walks its (long) path once, not once a file.
pub struct SysDir {
    fd: std::os::fd::OwnedFd,
    path: std::path::PathBuf,
}

impl SysDir {
    pub fn open(path: &Path) -> std::io::Result<SysDir> {
        Self::at(nix::fcntl::AT_FDCWD, path.as_os_str(), path.to_path_buf())
    }

    fn at<Fd: std::os::fd::AsFd>(
        dir: Fd,
        name: &OsStr,
        path: std::path::PathBuf,
    ) -> std::io::Result<SysDir> {
        let fd = nix::fcntl::openat(dir, name, LIST_FLAGS, nix::sys::stat::Mode::empty())?;
        Ok(SysDir { fd, path })
    }

    /// The subdirectory `name`, a label as [`dir_names`] gives it.
    pub fn sub(&self, name: &str) -> std::io::Result<SysDir> {
        let raw = name_path(name);
        let path = self.path.join(&raw);
        Self::at(&self.fd, &raw, path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The attribute `name`, as [`read_attr`] reads it.
    pub fn attr(&self, name: &str) -> Option<String> {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.fd, name, flags, nix::sys::stat::Mode::empty()).ok()?;
        attr_text(std::fs::File::from(fd))
    }

    pub fn u64(&self, name: &str) -> Option<u64> {
        self.attr(name)?.parse().ok()
    }

    /// Its entries' names, as [`dir_names`] gives them.
    pub fn names(&self) -> std::io::Result<Vec<String>> {
        list(self.listing()?, false, |_| true)
    }

    /// Its subdirectories' names, as [`subdir_names`] gives them.
    pub fn subdir_names(&self) -> std::io::Result<Vec<String>> {
        list(self.listing()?, true, |_| true)
    }

    fn listing(&self) -> nix::Result<nix::dir::Dir> {
        nix::dir::Dir::openat(&self.fd, ".", LIST_FLAGS, nix::sys::stat::Mode::empty())
    }
}

/// Whether the kernel accounts I/O statistics for the block device `name` (`queue/iostats`).
/// Some database hosts turn it off for speed; the device's stat counters then stay frozen, so
/// busy time, idle time and utilization derived from them are unknown rather than zero.
/// Only blk-mq devices (those with an `mq` directory: NVMe, SCSI, virtio, loop) are taken at
/// their word: bio-based dm and md devices read 0 there on older kernels (before 6.5 for dm)
/// while counting all the same. A device without the attribute counts as accounted.
pub fn iostats_enabled(sys: &Path, name: &str) -> bool {
    let dev = sys.join("block").join(name_path(name));
    read_u64(&dev.join("queue").join("iostats")) != Some(0) || !dev.join("mq").is_dir()
}

/// The names of a directory's entries in their label form ([`name_label`]), sorted (the order
/// /sys lists them in is not stable).
pub fn dir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    list(open_listing(dir)?, false, |_| true)
}

/// The names in `dir` that begin with `prefix`, as [`dir_names`] gives them; the others cost no
/// allocation (`md` among hundreds of block devices).
pub fn dir_names_starting(dir: &Path, prefix: &str) -> std::io::Result<Vec<String>> {
    list(open_listing(dir)?, false, |n| {
        n.starts_with(prefix.as_bytes())
    })
}

/// The names of the directories in `dir`, sorted, as [`dir_names`] gives them. The type comes
/// with the directory listing (no stat of each entry, unless the filesystem leaves it out); a
/// symlink is not a directory here.
pub fn subdir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    list(open_listing(dir)?, true, |_| true)
}

const LIST_FLAGS: nix::fcntl::OFlag = nix::fcntl::OFlag::O_RDONLY
    .union(nix::fcntl::OFlag::O_DIRECTORY)
    .union(nix::fcntl::OFlag::O_CLOEXEC);

fn open_listing(dir: &Path) -> nix::Result<nix::dir::Dir> {
    nix::dir::Dir::open(dir, LIST_FLAGS, nix::sys::stat::Mode::empty())
}

/// A listing's names that `keep` takes (their raw bytes), in their label form, sorted; only the
/// directories' when `dirs_only`. The names are borrowed from the listing's buffer (no
/// allocation an entry but the label's).
fn list(
    mut d: nix::dir::Dir,
    dirs_only: bool,
    keep: impl Fn(&[u8]) -> bool,
) -> std::io::Result<Vec<String>> {
    use nix::dir::Type;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&d);
    let mut v = Vec::new();
    for e in d.iter() {
        let e = e?;
        let name = e.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." || !keep(bytes) {
            continue;
        }
        if dirs_only {
            let is_dir = match e.file_type() {
                Some(t) => t == Type::Directory,
                // SAFETY: the listing's descriptor, open for as long as the loop runs.
                None => nix::sys::stat::fstatat(
                    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
                    name,
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
            };
            if !is_dir {
                continue;
            }
        }
        v.push(crate::label::label_form(bytes));
    }
    v.sort();
    Ok(v)
}

/// A /sys entry's name as a label and map key: UTF-8 as is, any byte that is not valid UTF-8 as
/// `\xNN` (as mount points are labelled), and a backslash as `\x5c`, so the label turns back
/// into the exact bytes ([`name_path`]) and two names never share one. Kernel names are ASCII in
/// practice; one that is not (a driver's, a fixture's) must neither lose its device its series
/// (read through a lossy name, its files are not found) nor merge two devices.
pub fn name_label(raw: &OsStr) -> String {
    crate::label::label_form(raw.as_bytes())
}

pub use crate::label::name_path;

/// Reads a sysfs attribute as an unsigned integer.
pub fn read_u64(path: &Path) -> Option<u64> {
    read_attr(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory held open reads its files, lists its entries and its subdirectories, and
    /// opens a subdirectory by its label, as the path-based readers do.
    #[test]
    fn a_directory_held_open_reads_as_the_paths_do() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("data/single")).unwrap();
        std::fs::create_dir_all(d.join(OsStr::from_bytes(b"dev\xff"))).unwrap();
        std::fs::create_dir_all(d.join(OsStr::from_bytes(b"odd\xfe"))).unwrap();
        std::fs::write(d.join(OsStr::from_bytes(b"odd\xfe/size")), "7\n").unwrap();
        std::fs::write(d.join("data/total_bytes"), "8388608\n").unwrap();
        std::fs::write(d.join("label"), "\n").unwrap();
        std::fs::write(d.join("vpd"), b"\0\0ab c\n\0").unwrap();
        std::fs::write(d.join("big"), "x".repeat(10_000)).unwrap();
        std::os::unix::fs::symlink("data", d.join("link")).unwrap();

        let dir = SysDir::open(d).unwrap();
        assert_eq!(dir.path(), d);
        assert_eq!(dir.attr("label").as_deref(), Some(""));
        assert_eq!(dir.attr("vpd").as_deref(), Some("ab c"));
        assert_eq!(
            dir.attr("big").map(|b| b.len()),
            Some(10_000),
            "read past a page"
        );
        assert_eq!(dir.attr("missing"), None);
        assert_eq!(dir.attr("data"), None, "a directory is no attribute");
        for name in [
            "big", "data", "dev\\xff", "label", "link", "odd\\xfe", "vpd",
        ] {
            assert_eq!(
                dir.attr(name),
                read_attr(&d.join(name_path(name))),
                "{name}"
            );
        }
        let names = dir.names().unwrap();
        assert_eq!(names, dir_names(d).unwrap());
        assert_eq!(dir_names_starting(d, "d").unwrap(), ["data", "dev\\xff"]);
        assert!(dir_names_starting(d, "md").unwrap().is_empty());
        assert_eq!(
            names,
            [
                "big", "data", "dev\\xff", "label", "link", "odd\\xfe", "vpd"
            ]
        );
        assert_eq!(
            dir.subdir_names().unwrap(),
            ["data", "dev\\xff", "odd\\xfe"]
        );
        assert_eq!(dir.subdir_names().unwrap(), subdir_names(d).unwrap());
        let data = dir.sub("data").unwrap();
        assert_eq!(data.u64("total_bytes"), Some(8_388_608));
        assert_eq!(data.subdir_names().unwrap(), ["single"]);
        assert_eq!(data.path(), d.join("data"));
        let odd = dir.sub("odd\\xfe").unwrap();
        assert_eq!(odd.u64("size"), Some(7), "opened by its label");
        assert!(dir.sub("missing").is_err());
        assert!(dir.sub("label").is_err(), "a file is no directory");
        assert!(SysDir::open(&d.join("missing")).is_err());
    }

    #[test]
    fn a_name_that_is_not_utf8_is_labelled_with_escapes_and_turns_back_into_its_bytes() {
        for (raw, label) in [
            (&b"sda"[..], "sda"),
            (b"sd\xff", "sd\\xff"),
            (b"nbd\xc3(", "nbd\\xc3("),
            (b"b\\xff", "b\\x5cxff"), // a literal backslash can't pass for an escape
            ("d\u{e9}v".as_bytes(), "d\u{e9}v"),
        ] {
            let os = OsStr::from_bytes(raw);
            assert_eq!(name_label(os), label);
            assert_eq!(name_path(label), os, "{label}");
        }
    }
}
