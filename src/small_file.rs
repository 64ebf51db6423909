//! The one way the daemon reads a small file someone else chose: its config files, and what the
//! databases readers take out of a directory a server's user owns. Opened without blocking (a
//! FIFO put in its place), a regular file only (not `/dev/zero`), read to a cap (not a 2 GB
//! sparse file), and without following a final symlink where the file is a server's own.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether a final symlink is followed: a server's own files never are links, while the
/// option files under /etc often are (Debian's `my.cnf` -> `/etc/alternatives/my.cnf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    Refuse,
    Follow,
}

/// Why a small file was not read.
#[derive(Debug, thiserror::Error)]
pub enum SmallFileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    #[error("{size} bytes, larger than the {max} read")]
    TooLarge { size: u64, max: u64 },
}

impl From<SmallFileError> for std::io::Error {
    fn from(e: SmallFileError) -> std::io::Error {
        match e {
            SmallFileError::Io(e) => e,
            other => std::io::Error::other(other.to_string()),
        }
    }
}

/// The bytes of `path`, at most `max`; an error naming what it is when it is not a regular
/// file or is larger.
pub(crate) fn read_small(path: &Path, max: u64, links: Links) -> Result<Vec<u8>, SmallFileError> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(SmallFileError::NotRegular(kind_of(&m.file_type())));
    }
    if m.len() > max {
        return Err(SmallFileError::TooLarge { size: m.len(), max });
    }
    let mut out = Vec::new();
    f.take(max.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        // It grew while being read.
        return Err(SmallFileError::TooLarge {
            size: out.len() as u64,
            max,
        });
    }
    Ok(out)
}

/// [`read_small`] as UTF-8 text.
pub(crate) fn read_small_text(path: &Path, max: u64, links: Links) -> std::io::Result<String> {
    String::from_utf8(read_small(path, max, links)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// What a file that is not a regular one is, for people.
pub(crate) fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_a_huge_file_and_a_symlink_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("postmaster.pid");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_small(&fifo, 64, Links::Refuse).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_small(Path::new("/dev/zero"), 64, Links::Follow).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let big = dir.path().join("PG_VERSION");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(2 << 30).unwrap();
        let e = read_small(&big, 64, Links::Refuse).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = std::io::Error::from(read_small(&link, 64, Links::Refuse).unwrap_err());
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        let e = read_small(&link, 64, Links::Follow).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let ok = dir.path().join("ok");
        std::fs::write(&ok, "15\n").unwrap();
        assert_eq!(read_small_text(&ok, 64, Links::Refuse).unwrap(), "15\n");
        std::fs::write(&ok, [0xff, 0xfe]).unwrap();
        assert!(read_small_text(&ok, 64, Links::Refuse).is_err());
    }
}
