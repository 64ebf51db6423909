//! The plain records the history store takes and gives back: no SQL, no collector types.
//! Times are Unix seconds (UTC); sizes are bytes; ratios are 0..1.

use crate::databases::component::{Component, Kind};
use crate::probe::ProbeKind;

/// What identifies a filesystem across reboots: its mount point and, when known, its UUID.
/// The device name is not part of it, so a remount under another device name (dm-3 becoming
/// dm-5) continues the same series; a new UUID at the same mount point (a reformat) starts one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FsKey {
    pub mountpoint: String,
    pub uuid: Option<String>,
}

/// What identifies a drive: its WWN, else its serial number (with the model when known), never
/// the kernel name (nvme0n1 and sda are reassigned at boot).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DriveKey {
    pub wwn: Option<String>,
    pub serial: Option<String>,
    pub model: Option<String>,
}

impl DriveKey {
    /// The identity /sys gives a block device (WWN, serial, model); None for a device without
    /// one (dm, md, loop), which the history cannot follow across kernel names.
    pub fn of(d: &crate::sysfs::topology::BlockDevice) -> Option<DriveKey> {
        let nonempty = |s: &Option<String>| s.clone().filter(|v| !v.is_empty());
        let key = DriveKey {
            wwn: nonempty(&d.wwn),
            serial: nonempty(&d.serial),
            model: nonempty(&d.model),
        };
        (key.wwn.is_some() || key.serial.is_some()).then_some(key)
    }
}

/// The store's integer id of a filesystem series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FsId(pub i64);

/// The store's integer id of a drive series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DriveId(pub i64);

/// One statvfs reading of a filesystem.
#[derive(Debug, Clone, PartialEq)]
pub struct FsSample {
    pub key: FsKey,
    /// The device it is mounted from now (informational; updated on every insert).
    pub device: String,
    pub t: i64,
    pub size_bytes: u64,
    pub avail_bytes: u64,
    pub free_bytes: u64,
    /// Unknown on filesystems without a fixed inode table (btrfs reports 0).
    pub files_free: Option<u64>,
}

/// One layer of a filesystem's stack as last seen: the filesystem itself or a layer under it
/// (`layer` is the `layer` label of `ssdwatch_filesystem_layer_avail_bytes`).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRow {
    pub layer: String,
    /// The layer's own name: a thin pool, a btrfs UUID, a ZFS dataset or pool; empty for the
    /// filesystem.
    pub name: String,
    pub avail_bytes: u64,
    /// Its capacity on the scale of `avail_bytes`, where it has one.
    pub size_bytes: Option<u64>,
    /// Whether it is what limits the mount's effective free space (runs out first).
    pub limiting: bool,
}

/// A layer's use over time, as the forecast reads it (`Store::layer_uses`): one layer below
/// a filesystem with a capacity of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerUse {
    /// The `layer` label's value (`thin_pool`, `btrfs`, `zfs_dataset`, `zfs_pool`, ...).
    pub layer: String,
    pub name: String,
    /// Its daily extremes of use (size − avail), in day order.
    pub days: Vec<crate::history::forecast::DayUse>,
    /// Its raw points as (time, used bytes), in time order.
    pub recent: Vec<(i64, f64)>,
}

/// A filesystem's stack of layers at one sample, the filesystem first; empty when nothing
/// under it has a capacity of its own. The store keeps the newest stack of each filesystem.
#[derive(Debug, Clone, PartialEq)]
pub struct FsLayers {
    pub key: FsKey,
    pub device: String,
    pub t: i64,
    pub layers: Vec<LayerRow>,
}

/// A stack of layers as the store takes it, borrowing its key (see [`FsSampleRef`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsLayersRef<'a> {
    pub key: &'a FsKey,
    pub device: &'a str,
    pub t: i64,
    pub layers: &'a [LayerRow],
}

impl<'a> From<&'a FsLayers> for FsLayersRef<'a> {
    fn from(s: &'a FsLayers) -> Self {
        FsLayersRef {
            key: &s.key,
            device: &s.device,
            t: s.t,
            layers: &s.layers,
        }
    }
}

/// A filesystem sample as the store takes it, borrowing its key: a caller holding many samples
/// of few filesystems (the daemon's queue between commits) keeps each key once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsSampleRef<'a> {
    pub key: &'a FsKey,
    pub device: &'a str,
    pub t: i64,
    pub size_bytes: u64,
    pub avail_bytes: u64,
    pub free_bytes: u64,
    pub files_free: Option<u64>,
}

impl<'a> From<&'a FsSample> for FsSampleRef<'a> {
    fn from(s: &'a FsSample) -> Self {
        FsSampleRef {
            key: &s.key,
            device: &s.device,
            t: s.t,
            size_bytes: s.size_bytes,
            avail_bytes: s.avail_bytes,
            free_bytes: s.free_bytes,
            files_free: s.files_free,
        }
    }
}

/// One SMART reading of a drive, normalized. An unknown value stays `None`, never 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriveSample {
    pub key: DriveKey,
    /// The kernel name it has now (informational; updated on every insert).
    pub kernel_name: String,
    pub capacity_bytes: Option<u64>,
    pub t: i64,
    pub wear_used_ratio: Option<f64>,
    pub spare_ratio: Option<f64>,
    pub host_written_bytes: Option<u64>,
    pub nand_written_bytes: Option<u64>,
    pub media_errors: Option<u64>,
    pub power_on_hours: Option<u64>,
    pub temperature_celsius: Option<f64>,
    pub discarded_bytes: Option<u64>,
    /// What the drive's own logs and the durability check said at this reading: the store
    /// keeps the last of each hour, for the report's health table.
    pub health: DriveHealthRecord,
}

/// A drive's error log, newest self-test, temperature limit and durability at one reading.
/// Unknown stays `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriveHealthRecord {
    /// Error-information log entries over the drive's life (NVMe; the ATA error-log count).
    pub error_log_entries: Option<u64>,
    /// The newest self-test's type and result, e.g. "extended failed".
    pub self_test: Option<String>,
    /// Power-on time since the newest self-test ran, at this reading.
    pub self_test_age_seconds: Option<u64>,
    pub temperature_warning_celsius: Option<f64>,
    /// Time the drive counted above its warning temperature over its life.
    pub above_warning_seconds: Option<u64>,
    /// `ssdwatch_device_durability_risk_info`'s reason, when the check could be made.
    pub durability: Option<String>,
}

impl DriveHealthRecord {
    pub fn is_empty(&self) -> bool {
        *self == DriveHealthRecord::default()
    }
}

/// One stored health reading of a drive: the last of its hour.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveHealthPoint {
    pub t: i64,
    pub health: DriveHealthRecord,
}

/// Which layer under filesystems keeps an error counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LayerErrorKind {
    /// A btrfs filesystem's device (`ssdwatch_btrfs_device_errors_total`).
    BtrfsDevice,
    /// A ZFS pool's vdev, leaf or interior (`ssdwatch_zfs_vdev_errors_total`).
    ZfsVdev,
    /// An md array's member (`ssdwatch_md_member_corrected_read_errors_total`).
    MdMember,
}

impl LayerErrorKind {
    pub const ALL: [LayerErrorKind; 3] = [
        LayerErrorKind::BtrfsDevice,
        LayerErrorKind::ZfsVdev,
        LayerErrorKind::MdMember,
    ];

    /// Its name in the store and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            LayerErrorKind::BtrfsDevice => "btrfs_device",
            LayerErrorKind::ZfsVdev => "zfs_vdev",
            LayerErrorKind::MdMember => "md_member",
        }
    }

    pub fn parse(s: &str) -> Option<LayerErrorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One component under filesystems that counts errors, and its counters at one reading (over
/// its life, as the layer keeps them). A counter the layer does not have is `None`, never 0.
/// The store keeps the last reading of each hour.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerErrorsSample {
    pub kind: LayerErrorKind,
    /// The filesystem UUID, pool or array it belongs to.
    pub container: String,
    /// Its device, vdev or member name, as the series' label has it.
    pub member: String,
    /// The kernel name of the one drive under it, when the topology places it on one.
    pub drive: Option<String>,
    pub t: i64,
    pub counts: LayerErrorCounts,
}

/// A component's error counters, grouped the same way for every layer: btrfs' read, write,
/// corruption (checksum) and the rest (flush, generation); ZFS's read, write and checksum;
/// md's corrected read errors as reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerErrorCounts {
    pub read: Option<u64>,
    pub write: Option<u64>,
    pub checksum: Option<u64>,
    pub other: Option<u64>,
}

impl LayerErrorCounts {
    /// Every known counter summed; None when none is known.
    pub fn total(&self) -> Option<u64> {
        [self.read, self.write, self.checksum, self.other]
            .into_iter()
            .flatten()
            .fold(None, |acc: Option<u64>, n| {
                Some(acc.unwrap_or(0).saturating_add(n))
            })
    }
}

/// A component's stored readings (the last of each hour), oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerErrorsSeries {
    pub kind: LayerErrorKind,
    pub container: String,
    pub member: String,
    /// The drive under it as of its newest reading.
    pub drive: Option<String>,
    pub points: Vec<(i64, LayerErrorCounts)>,
}

/// What a database's files held at one sample, by component, with the facts that say why a
/// component grows (the archiver's backlog, the slot holding WAL back, the oldest binary log).
/// The store keeps each component's last size of every hour and the newest facts.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseSample {
    /// The data directory (or a watched path's name), as the `database` label says.
    pub database: String,
    /// What is watched (the `kind` label of `ssdwatch_database_info`).
    pub kind: Kind,
    pub t: i64,
    pub components: Vec<ComponentSize>,
    pub facts: DatabaseFacts,
}

/// One component's bytes on the mount that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentSize {
    pub component: Component,
    pub mountpoint: String,
    pub bytes: u64,
}

/// Why a database's components grow, as last seen; unknown is `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DatabaseFacts {
    pub archive_ready_segments: Option<u64>,
    pub archive_oldest_ready_age_seconds: Option<u64>,
    /// The replication slot holding back the most WAL, and how much.
    pub slot: Option<(String, u64)>,
    pub binlog_files: Option<u64>,
    pub binlog_oldest_age_seconds: Option<u64>,
    pub binlog_retention_seconds: Option<u64>,
}

/// A component as the store knows it, with its sizes over the time asked for. The kind and
/// component are the labels as stored ([`Kind::label`], [`Component::label`]): a store written
/// by another version may hold one this version does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentSeries {
    pub database: String,
    pub kind: String,
    pub component: String,
    pub mountpoint: String,
    /// (time, bytes): the last size of each stored hour (of each day, for days older than the
    /// raw retention), oldest first.
    pub sizes: Vec<(i64, u64)>,
}

/// One probe kind's result with the context it ran in, kept at full resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRecord {
    /// The configured target directory.
    pub target: String,
    /// The drive the target sits on, when known.
    pub drive: Option<DriveKey>,
    pub t: i64,
    pub kind: ProbeKind,
    pub ops: u64,
    /// Latencies are stored in whole nanoseconds.
    pub p50_seconds: f64,
    /// Only for a run of 100 I/Os or more (`crate::probe::measurable`): a shorter run has a
    /// maximum, not a p99.
    pub p99_seconds: Option<f64>,
    pub max_seconds: f64,
    pub throughput_bytes_per_second: Option<f64>,
    /// Ratios are stored in parts per million.
    pub fill_ratio: Option<f64>,
    pub since_discard_seconds: Option<f64>,
    pub idle_seconds: Option<f64>,
    pub utilization_ratio: Option<f64>,
    pub utilization_before_ratio: Option<f64>,
    pub written_since_discard_bytes: Option<u64>,
    /// The share of the filesystem's size deleted but not trimmed when the run ran
    /// (`ssdwatch_filesystem_freed_untrimmed_bytes` ÷ size, as the filesystem collector last
    /// sampled it); unknown before its first sample and in rows of older versions.
    pub untrimmed_ratio: Option<f64>,
}

/// One stored probe run as curves and recoveries read it: ids, not names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeRun {
    /// The store's id of the target (see `Store::probe_targets`).
    pub target: i64,
    pub kind: ProbeKind,
    pub drive: Option<DriveId>,
    pub t: i64,
    pub fill_ratio: Option<f64>,
    pub p50_seconds: f64,
    /// None for a run of fewer than 100 I/Os (its stored figure is not a p99).
    pub p99_seconds: Option<f64>,
    pub untrimmed_ratio: Option<f64>,
}

/// A burst of discards seen on a drive: when it started and how many bytes it discarded.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscardEvent {
    pub drive: DriveKey,
    pub t: i64,
    pub bytes: u64,
}

/// A stretch of time in which a drive did no I/O.
#[derive(Debug, Clone, PartialEq)]
pub struct IdlePeriod {
    pub drive: DriveKey,
    pub start: i64,
    pub seconds: u64,
}

/// Min, max, mean and last of a value over a point's span; all four equal for a raw sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub last: f64,
}

impl Stat {
    pub fn one(v: f64) -> Stat {
        Stat {
            min: v,
            max: v,
            mean: v,
            last: v,
        }
    }
}

/// A filesystem series point: a raw sample, or an hour (`t` = the hour's start).
#[derive(Debug, Clone, PartialEq)]
pub struct FsPoint {
    pub t: i64,
    pub hourly: bool,
    pub size: Stat,
    pub avail: Stat,
    pub free: Stat,
    pub files_free: Option<Stat>,
}

/// A drive series point. Gauges carry min/max/mean/last; counters only their last value (an
/// hour's increase is the difference of two lasts).
#[derive(Debug, Clone, PartialEq)]
pub struct DrivePoint {
    pub t: i64,
    pub hourly: bool,
    pub wear_used_ratio: Option<Stat>,
    pub spare_ratio: Option<Stat>,
    pub temperature_celsius: Option<Stat>,
    pub host_written_bytes: Option<f64>,
    pub nand_written_bytes: Option<f64>,
    pub media_errors: Option<f64>,
    pub power_on_hours: Option<f64>,
    pub discarded_bytes: Option<f64>,
}

/// A filesystem series as the store knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FsInfo {
    pub id: FsId,
    pub key: FsKey,
    pub device: Option<String>,
    pub first_seen: i64,
}

/// A drive series as the store knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveInfo {
    pub id: DriveId,
    pub key: DriveKey,
    pub kernel_name: Option<String>,
    pub capacity_bytes: Option<u64>,
    pub first_seen: i64,
}
