//! ssdwatch: a Prometheus exporter and monitoring daemon for SSDs under databases.
//! `run` boots the whole daemon in-process so tests can drive it like `main` does.

pub(crate) mod catalogue;
pub mod cli;
pub mod collector;
pub mod config;
pub(crate) mod daemon;
pub mod databases;
pub mod fault;
pub(crate) mod gzip;
pub mod history;
pub(crate) mod label;
pub mod layers;
pub(crate) mod listen;
pub(crate) mod logging;
pub(crate) mod memory;
pub mod metrics;
pub(crate) mod notify;
pub mod privsep;
pub mod probe;
pub(crate) mod process;
pub mod procfs;
pub mod registry;
pub mod render;
pub mod report;
pub mod size;
pub mod smart;
pub mod snapshot;
pub mod space;
pub(crate) mod statefile;
pub mod statfs;
pub mod sysfs;
#[cfg(test)]
mod testing;
pub(crate) mod time;
pub(crate) mod validate;
pub(crate) mod web;
pub(crate) mod yaml_guard;
pub(crate) mod yaml_line;

use std::path::{Path, PathBuf};

pub use daemon::{run, run_with_listener, sample_once};

/// Where every reader looks: the `--path.sysfs`, `--path.procfs` and `--path.rootfs` flags
/// (node_exporter's meaning), so the whole daemon runs against a fixture tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Roots {
    pub sys: PathBuf,
    pub proc: PathBuf,
    pub rootfs: PathBuf,
    /// Test seam: statvfs answers read from this YAML file instead of the kernel
    /// (fixture trees have no real filesystems behind their mount points).
    pub statvfs_fixture: Option<PathBuf>,
    /// Test seam: probe outcomes played back from this JSON file instead of running probes.
    pub probe_fixture: Option<PathBuf>,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
            rootfs: PathBuf::from("/"),
            statvfs_fixture: None,
            probe_fixture: None,
        }
    }
}

impl Roots {
    /// A fixture tree laid out as `<dir>/sys`, `<dir>/proc`, `<dir>/statvfs.yaml`.
    pub fn fixture(dir: &Path) -> Self {
        let statvfs = dir.join("statvfs.yaml");
        Roots {
            sys: dir.join("sys"),
            proc: dir.join("proc"),
            rootfs: dir.join("rootfs"),
            statvfs_fixture: statvfs.exists().then_some(statvfs),
            probe_fixture: None,
        }
    }

    /// A path inside the host's root filesystem as seen from here (`--path.rootfs`).
    pub fn in_rootfs(&self, p: &Path) -> PathBuf {
        let rel = p.strip_prefix("/").unwrap_or(p);
        self.rootfs.join(rel)
    }
}
