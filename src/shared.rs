//! What collectors learn and other collectors need, shared between their tasks (never with a
//! scrape, which reads only the published snapshots): each drive's disk activity, the block
//! topology, SMART's rotation rates, the layers under the filesystems, the commit probe's
//! latency and each mount's untrimmed share.

use crate::sysfs::topology::Topology;
use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// What the disk-activity collector learns about each drive and other collectors (probes) need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskActivity {
    /// Last sample (Unix time) in which the drive's discarded bytes grew.
    pub last_discard_unix: Option<f64>,
    /// The latest sample saw the discarded bytes grow: a burst (an fstrim) may still be going,
    /// so `last_discard_unix` is not yet its end.
    pub discarding: bool,
    /// Bytes written to the drive since that discard.
    pub written_since_discard_bytes: Option<u64>,
    /// How long the drive had been idle at that sample.
    pub idle: Idle,
    /// Fraction of the last sampling interval the drive was busy (io_ticks delta / wall time).
    pub utilization_ratio: Option<f64>,
    /// Bytes discarded since boot, as the kernel counts them (absent on kernels before 4.18).
    pub discarded_bytes: Option<u64>,
    /// When this entry was last updated (Unix time).
    pub updated_unix: f64,
}

/// How long a drive had been idle at its latest diskstats sample: the probe's context takes it
/// from here, so it must say what `ssdwatch_disk_idle_seconds` says (0 when busy, not absent).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Idle {
    /// Its first sample, or I/O accounting off: nothing says how long it was idle.
    #[default]
    Unknown,
    /// Its io time moved during the last interval.
    Busy,
    /// Its io time has not moved since this Unix time.
    Since(f64),
}

impl Idle {
    /// Seconds idle at `now`: 0 for a drive busy in its last interval.
    pub fn seconds_at(self, now: f64) -> Option<f64> {
        match self {
            Idle::Unknown => None,
            Idle::Busy => Some(0.0),
            Idle::Since(t) => Some((now - t).max(0.0)),
        }
    }
}

/// State that collectors share with each other (never with a scrape).
#[derive(Debug, Default)]
pub struct Shared {
    /// Keyed by kernel device name (`sda`, `nvme0n1`, `loop3`).
    pub disk_activity: RwLock<HashMap<String, DiskActivity>>,
    /// The block topology last read from /sys, and when.
    topology: RwLock<Option<(Arc<Topology>, Instant)>>,
    /// SMART's rotation rate per kernel name (0 = solid state), as the SMART collector last read it.
    rotation_rates: RwLock<HashMap<String, u64>>,
    /// The layers under the filesystems as the layers collector last read them, and until
    /// when they count.
    layers: RwLock<Option<(Arc<crate::layers::Layers>, Instant)>>,
    /// The median latency of the last `sync_write_4k` probe run per physical drive (kernel
    /// name), in seconds, as the probe collector last measured it.
    sync_write_p50: RwLock<HashMap<String, f64>>,
    /// Per mount point, the share of its size deleted but not trimmed
    /// (`ssdwatch_filesystem_freed_untrimmed_bytes` ÷ size) as the filesystem collector last
    /// sampled it: the history keeps it with each probe run.
    untrimmed_ratio: RwLock<HashMap<String, f64>>,
}

impl Shared {
    pub fn rotation_rate(&self, device: &str) -> Option<u64> {
        let g = read(&self.rotation_rates);
        g.get(device).copied()
    }

    pub fn sync_write_p50(&self, device: &str) -> Option<f64> {
        let g = read(&self.sync_write_p50);
        g.get(device).copied()
    }

    pub fn set_sync_write_p50(&self, device: &str, seconds: f64) {
        let mut g = write(&self.sync_write_p50);
        g.insert(device.to_string(), seconds);
    }

    pub fn untrimmed_ratio(&self, mountpoint: &str) -> Option<f64> {
        let g = read(&self.untrimmed_ratio);
        g.get(mountpoint).copied()
    }

    /// Replaces every mount's share (a mount no longer sampled leaves).
    pub fn set_untrimmed_ratios(&self, ratios: HashMap<String, f64>) {
        let mut g = write(&self.untrimmed_ratio);
        *g = ratios;
    }

    pub fn set_rotation_rate(&self, device: &str, rpm: u64) {
        let mut g = write(&self.rotation_rates);
        g.insert(device.to_string(), rpm);
    }

    /// The shared topology when it was read less than `max_age` ago.
    pub fn topology(&self, max_age: Duration) -> Option<Arc<Topology>> {
        let g = read(&self.topology);
        g.as_ref()
            .filter(|(_, at)| at.elapsed() < max_age)
            .map(|(t, _)| t.clone())
    }

    /// The layers under the filesystems while fresh (a stopped layers collector's last read is
    /// not used for ever).
    pub fn layers(&self) -> Option<Arc<crate::layers::Layers>> {
        let g = read(&self.layers);
        g.as_ref()
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(l, _)| l.clone())
    }

    /// Shares the layers, good for `valid_for`.
    pub fn set_layers(&self, l: Arc<crate::layers::Layers>, valid_for: Duration) {
        let mut g = write(&self.layers);
        *g = Some((l, Instant::now() + valid_for));
    }

    pub fn set_topology(&self, t: Arc<Topology>) {
        let mut g = write(&self.topology);
        *g = Some((t, Instant::now()));
    }

    pub fn disk_activity(&self, device: &str) -> Option<DiskActivity> {
        let g = read(&self.disk_activity);
        g.get(device).cloned()
    }

    pub fn set_disk_activity(&self, device: &str, a: DiskActivity) {
        let mut g = write(&self.disk_activity);
        g.insert(device.to_string(), a);
    }
}

/// A shared value to read. A writer that panicked left it whole (each write is one insert or
/// one replacement), so a poisoned lock is read as it is.
fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// A shared value to write; a poisoned lock as in [`read`].
fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
