//! The statvfs seam: what statvfs(2) says about a filesystem, from the kernel or from a fixture
//! file, for the filesystem collector and the probes alike. No threads or timeouts here (the
//! stuck-mount guard in `guard` wraps it), and no metrics.

pub mod guard;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What statvfs(2) says about a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FsStat {
    pub frsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    /// ST_RDONLY as this process sees it: what the probes' read-only gate needs (a sandboxed
    /// unit with `ProtectSystem=strict` can write nowhere else, whatever the mount says). Not
    /// what `ssdwatch_filesystem_readonly` reports: that comes from the mount table.
    #[serde(default)]
    pub readonly: bool,
}

/// One entry of a `statvfs.yaml` fixture: an answer, a failure, or a call that never returns.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum FixtureEntry {
    Hang { hang: bool },
    Errno { errno: i32 },
    Stat(FsStat),
}

/// A fixture's answer for one mount point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureAnswer {
    Stat(FsStat),
    /// statvfs fails with this errno (13 = EACCES, 2 = ENOENT, 107 = ENOTCONN).
    Errno(i32),
    /// statvfs never returns.
    Hang,
    /// statvfs answers (with zeros) after this many milliseconds: a slow mount that comes back.
    SlowMs(u64),
}

/// A `statvfs.yaml` fixture that can't be used; names the file (and the mount point).
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("reading {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: {cause}", path.display())]
    Parse {
        path: PathBuf,
        cause: serde_yaml_ng::Error,
    },
    #[error("{}: {mount_point}: `hang: false` means nothing; give the statvfs fields instead", path.display())]
    HangFalse { path: PathBuf, mount_point: String },
}

/// Where statvfs answers come from: the kernel, or a fixture file (test seam).
#[derive(Debug, Clone)]
pub enum StatSource {
    Kernel,
    Fixture(Arc<BTreeMap<String, FixtureAnswer>>),
}

impl StatSource {
    pub fn from_roots(fixture: Option<&Path>) -> Result<Self, FixtureError> {
        let Some(p) = fixture else {
            return Ok(StatSource::Kernel);
        };
        let path = || p.to_path_buf();
        let text = std::fs::read_to_string(p).map_err(|cause| FixtureError::Read {
            path: path(),
            cause,
        })?;
        let raw: BTreeMap<String, FixtureEntry> =
            serde_yaml_ng::from_str(&text).map_err(|cause| FixtureError::Parse {
                path: path(),
                cause,
            })?;
        let mut out = BTreeMap::new();
        for (k, v) in raw {
            let a = match v {
                FixtureEntry::Hang { hang: true } => FixtureAnswer::Hang,
                FixtureEntry::Hang { hang: false } => {
                    return Err(FixtureError::HangFalse {
                        path: path(),
                        mount_point: k,
                    });
                }
                FixtureEntry::Errno { errno } => FixtureAnswer::Errno(errno),
                FixtureEntry::Stat(s) => FixtureAnswer::Stat(s),
            };
            out.insert(k, a);
        }
        Ok(StatSource::Fixture(Arc::new(out)))
    }

    /// Blocking: may never return (that is the point of the guard around it).
    pub fn statvfs(&self, mount_point: &str, path: &Path) -> std::io::Result<FsStat> {
        match self {
            StatSource::Kernel => {
                let s = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
                Ok(FsStat::from(&s))
            }
            StatSource::Fixture(map) => match map.get(mount_point) {
                Some(FixtureAnswer::Stat(s)) => Ok(*s),
                Some(FixtureAnswer::Errno(e)) => Err(std::io::Error::from_raw_os_error(*e)),
                Some(FixtureAnswer::Hang) => loop {
                    std::thread::park();
                },
                Some(FixtureAnswer::SlowMs(ms)) => {
                    std::thread::sleep(std::time::Duration::from_millis(*ms));
                    Ok(FsStat::default())
                }
                None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            },
        }
    }
}

impl From<&nix::sys::statvfs::Statvfs> for FsStat {
    fn from(s: &nix::sys::statvfs::Statvfs) -> Self {
        FsStat {
            frsize: s.fragment_size(),
            blocks: s.blocks(),
            bfree: s.blocks_free(),
            bavail: s.blocks_available(),
            files: s.files(),
            ffree: s.files_free(),
            readonly: s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
        }
    }
}

impl FsStat {
    /// Size of the filesystem in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.frsize)
    }

    /// Bytes available to unprivileged users (what `df` shows as Avail).
    pub fn avail_bytes(&self) -> u64 {
        self.bavail.saturating_mul(self.frsize)
    }

    /// The filesystem's fill as df shows it (Use%): used / (used + avail), used = size − free.
    /// Root's reserved blocks count neither as used nor as available, so a filesystem users can
    /// write nothing more to reads 1.0. The one definition of fill: the probe context, the
    /// `ssdwatch:filesystem_used_ratio` rule and the dashboards all use it. None for an empty
    /// filesystem.
    pub fn fill_ratio(&self) -> Option<f64> {
        df_fill_ratio(
            self.size_bytes() as f64,
            self.free_bytes() as f64,
            self.avail_bytes() as f64,
        )
    }

    /// df's size for users: used + avail (root's reserved blocks are no one's room), the scale
    /// of the filesystem layer's fill (the layers module's `layer_fill_ratio`).
    pub fn df_size_bytes(&self) -> u64 {
        self.size_bytes()
            .saturating_sub(self.free_bytes())
            .saturating_add(self.avail_bytes())
    }

    /// Free bytes, the root-reserved blocks included.
    pub fn free_bytes(&self) -> u64 {
        self.bfree.saturating_mul(self.frsize)
    }
}

/// The one definition of fill, df's Use%: used / (used + avail) with used = size − free, from a
/// filesystem's size, free bytes (root's reserve included) and bytes available to users. The
/// reserve counts neither as used nor as available. [`FsStat::fill_ratio`], the report (live and
/// from the history) and the `ssdwatch:filesystem_used_ratio` rule agree on it; None for an
/// empty filesystem or figures that are not numbers.
pub fn df_fill_ratio(size_bytes: f64, free_bytes: f64, avail_bytes: f64) -> Option<f64> {
    let used = (size_bytes - free_bytes).max(0.0);
    let denom = used + avail_bytes.max(0.0);
    (denom > 0.0 && denom.is_finite()).then(|| used / denom)
}

/// statvfs of an open file or directory (the probes hold their target open). Not guarded:
/// call it off the async workers.
pub fn fstatvfs(fd: impl AsFd) -> std::io::Result<FsStat> {
    let s = nix::sys::statvfs::fstatvfs(fd).map_err(std::io::Error::from)?;
    Ok(FsStat::from(&s))
}

/// A filesystem's type as statfs(2) gives it in `f_type` (the magic numbers of linux/magic.h).
/// The probes' space gate is to tell copy-on-write filesystems from overwrite-in-place ones by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FsType(pub u32);

impl FsType {
    /// ext2, ext3 and ext4 share one magic number.
    pub const EXT4: FsType = FsType(0xEF53);
    pub const XFS: FsType = FsType(0x5846_5342);
    pub const BTRFS: FsType = FsType(0x9123_683E);
    pub const F2FS: FsType = FsType(0xF2F5_2010);
    pub const BCACHEFS: FsType = FsType(0xCA45_1A4E);
    pub const ZFS: FsType = FsType(0x2FC1_2FC1);
    pub const TMPFS: FsType = FsType(0x0102_1994);

    /// The usual name of a type this module knows, else None.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            FsType::EXT4 => "ext4",
            FsType::XFS => "xfs",
            FsType::BTRFS => "btrfs",
            FsType::F2FS => "f2fs",
            FsType::BCACHEFS => "bcachefs",
            FsType::ZFS => "zfs",
            FsType::TMPFS => "tmpfs",
            _ => return None,
        })
    }
}

/// The type of the filesystem an open file or directory is on (fstatfs(2) `f_type`).
pub fn fs_type(fd: impl AsFd) -> std::io::Result<FsType> {
    let s = nix::sys::statfs::fstatfs(fd).map_err(std::io::Error::from)?;
    // f_type is a signed word on some architectures; the magic numbers are 32 bits.
    Ok(FsType(s.filesystem_type().0 as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_df_use_percent_with_the_root_reserve_left_out() {
        let st = |blocks, bfree, bavail| FsStat {
            frsize: 4096,
            blocks,
            bfree,
            bavail,
            ..FsStat::default()
        };
        // 1000 blocks, 148 free of which 98 available: df says 852 / 950.
        assert_eq!(st(1000, 148, 98).fill_ratio(), Some(852.0 / 950.0));
        // Nothing left for users, root's reserve remains: 100 %, as df says.
        assert_eq!(st(1000, 50, 0).fill_ratio(), Some(1.0));
        assert_eq!(st(1000, 1000, 1000).fill_ratio(), Some(0.0));
        assert_eq!(st(0, 0, 0).fill_ratio(), None);
        // The same from stored figures (bytes as f64), never (size − avail) / size: a 25 %
        // reserve with 70 % of the rest used is 70 %, not 77.5 %.
        assert_eq!(df_fill_ratio(1000.0, 148.0, 98.0), Some(852.0 / 950.0));
        assert_eq!(df_fill_ratio(100.0, 52.5, 27.5), Some(47.5 / 75.0));
        assert_eq!(df_fill_ratio(0.0, 0.0, 0.0), None);
        assert_eq!(df_fill_ratio(f64::NAN, 0.0, 0.0), None);
    }

    #[test]
    fn statvfs_fixture_errors_name_the_file_and_mount() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("statvfs.yaml");
        std::fs::write(&p, "/x:\n  hang: false\n").unwrap();
        let e = StatSource::from_roots(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("statvfs.yaml") && e.contains("/x"), "{e}");
        std::fs::write(&p, "/x:\n  frsize: many\n").unwrap();
        let e = StatSource::from_roots(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("statvfs.yaml"), "{e}");
    }
}
