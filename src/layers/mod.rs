//! Capacity below statvfs: the layers under a filesystem that run out on their own (LVM thin
//! pools, btrfs chunk allocation, ZFS pools and datasets), md arrays' state, and a mount's
//! effective free space (the least of what its filesystem and every layer under it still have,
//! and which layer that is). Pure: what the collector read goes in, numbers come out; no I/O
//! and no metrics here.

pub mod thin;
pub mod zfs;
pub mod zpool_status;

use crate::btrfs::{device_stats, sysfs::Btrfs};
use crate::sysfs::md::Array;
use crate::sysfs::topology::BlockDevice;

/// A btrfs with what only its devices tell: their sizes and unallocated space.
#[derive(Debug, Clone, PartialEq)]
pub struct BtrfsSpace {
    pub fs: Btrfs,
    pub devices: Vec<BtrfsDevice>,
}

/// One device of a btrfs.
#[derive(Debug, Clone, PartialEq)]
pub struct BtrfsDevice {
    /// Kernel name (`sdb1`, `dm-2`).
    pub name: String,
    /// Bytes of the device the filesystem may use; None when neither the filesystem nor /sys
    /// told (never 0: a size of 0 reads as "no room for metadata").
    pub size_bytes: Option<u64>,
    /// Raw bytes not allocated to any chunk; None when only the filesystem's total is known.
    pub unallocated_bytes: Option<u64>,
    /// The filesystem's id of the device (what `devinfo/` is keyed by); None where the
    /// filesystem could not be asked.
    pub devid: Option<u64>,
}

impl BtrfsSpace {
    /// The devices' sizes added up; None when a device's size is unknown or no device is known.
    pub fn size_bytes(&self) -> Option<u64> {
        if self.devices.is_empty() {
            return None;
        }
        self.devices
            .iter()
            .try_fold(0u64, |sum, d| Some(sum.saturating_add(d.size_bytes?)))
    }
    /// Raw bytes not allocated to chunks on any device: the devices' own figures where known,
    /// else their sizes less what is allocated in all; None when neither is known.
    pub fn unallocated_bytes(&self) -> Option<u64> {
        if !self.devices.is_empty() && self.devices.iter().all(|d| d.unallocated_bytes.is_some()) {
            Some(
                self.devices
                    .iter()
                    .filter_map(|d| d.unallocated_bytes)
                    .sum(),
            )
        } else {
            self.size_bytes()
                .map(|s| s.saturating_sub(self.fs.allocated_raw_bytes()))
        }
    }
    /// Whether metadata can get another chunk; None when the space to get it from is unknown.
    pub fn metadata_can_grow(&self) -> Option<bool> {
        Some(
            self.fs
                .metadata_can_grow(self.unallocated_bytes()?, self.size_bytes()?),
        )
    }
    /// What data can still get; none when metadata is exhausted (writes fail with ENOSPC
    /// whatever the data chunks hold). None when the unallocated space or the size is unknown:
    /// no limit is decided from a guess.
    pub fn limit(&self) -> Option<Limit> {
        let unallocated = self.unallocated_bytes()?;
        if self.fs.metadata_exhausted(unallocated, self.size_bytes()?) {
            return Some(Limit {
                layer: Layer::BtrfsMetadata,
                name: self.fs.uuid.clone(),
                avail_bytes: 0,
                size_bytes: Some(self.fs.metadata.total_bytes),
            });
        }
        let avail = self.fs.data_allocatable_bytes(unallocated);
        Some(Limit {
            layer: Layer::Btrfs,
            name: self.fs.uuid.clone(),
            avail_bytes: avail,
            // What data holds and could still get: its fill is the share of that in use.
            size_bytes: Some(avail.saturating_add(self.fs.data.used_bytes)),
        })
    }
}

/// Everything the layers collector read in one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layers {
    pub thin_pools: Vec<thin::Pool>,
    pub btrfs: Vec<BtrfsSpace>,
    pub zfs_pools: Vec<zfs::Pool>,
    pub zfs_datasets: Vec<zfs::Dataset>,
    /// Each pool's vdevs' error counters and states, and its data errors (`zpool status`).
    pub zfs_status: Vec<zpool_status::PoolStatus>,
    /// Each leaf vdev's block device and the physical drives under it, where the topology
    /// places it.
    pub vdev_drives: Vec<VdevDrive>,
    /// Each btrfs's device error counters from `btrfs device stats`, by filesystem UUID, where
    /// the kernel has no `error_stats` (before 5.14).
    pub btrfs_device_stats: Vec<(String, Vec<device_stats::DeviceStats>)>,
    pub md: Vec<Array>,
}

/// A leaf vdev placed in the block topology: the block device zpool uses (kernel name) and the
/// physical drives under it (one for a disk or partition; more under a device-mapper device
/// built on several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VdevDrive {
    pub pool: String,
    pub vdev: String,
    pub device: String,
    pub drives: Vec<String>,
}

/// The places a leaf vdev's name may be a link under /dev: zpool status prints the last part
/// of the path the pool was made with (`sda`, a by-id name, a device-mapper name).
pub const VDEV_LINK_DIRS: [&str; 8] = [
    "dev",
    "dev/mapper",
    "dev/disk/by-id",
    "dev/disk/by-path",
    "dev/disk/by-vdev",
    "dev/disk/by-partuuid",
    "dev/disk/by-partlabel",
    "dev/disk/by-uuid",
];

/// Whether a vdev's name can be looked up as a file name under /dev (no path, no `.`/`..`).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Places each leaf vdev of `pools` on its block device and the drives under it: by kernel
/// name, else by device-mapper name, else by `link` (the kernel name a /dev link of that name
/// points to, looked up by the caller). A vdev none of these places (a file vdev, a device
/// this host's topology lacks) gets no row.
pub fn place_vdevs(
    pools: &[zpool_status::PoolStatus],
    topo: &crate::sysfs::topology::Topology,
    link: impl Fn(&str) -> Option<String>,
) -> Vec<VdevDrive> {
    let mut out = Vec::new();
    for p in pools {
        for v in p.vdevs.iter().filter(|v| v.leaf) {
            let device = topo
                .get(&v.name)
                .or_else(|| {
                    topo.devices
                        .values()
                        .find(|d| d.dm_name.as_deref() == Some(v.name.as_str()))
                })
                .map(|d| d.name.clone())
                .or_else(|| link(&v.name).filter(|k| topo.get(k).is_some()));
            let Some(device) = device else { continue };
            let drives = topo
                .physical_drives(&device)
                .into_iter()
                .map(|d| d.name.clone())
                .collect();
            out.push(VdevDrive {
                pool: p.pool.clone(),
                vdev: v.name.clone(),
                device,
                drives,
            });
        }
    }
    out
}

/// A kind of layer that can limit a mount's free space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// The filesystem itself (statvfs).
    Filesystem,
    ThinPool,
    Btrfs,
    /// A btrfs whose metadata can't grow and is all but used.
    BtrfsMetadata,
    ZfsDataset,
    ZfsPool,
}

impl Layer {
    /// The value of the `layer` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Filesystem => "filesystem",
            Layer::ThinPool => "thin_pool",
            Layer::Btrfs => "btrfs",
            Layer::BtrfsMetadata => "btrfs_metadata",
            Layer::ZfsDataset => "zfs_dataset",
            Layer::ZfsPool => "zfs_pool",
        }
    }
}

/// What one layer under a mount still has.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub layer: Layer,
    /// The layer's own name: a pool, a btrfs UUID, a dataset.
    pub name: String,
    pub avail_bytes: u64,
    /// The layer's capacity on the scale of `avail_bytes`, where it has one: a thin pool's
    /// data space, a ZFS pool's size, a dataset's used + available, a btrfs's data used +
    /// what data can still get. Its fill is `1 − avail ÷ size`.
    pub size_bytes: Option<u64>,
}

impl Limit {
    /// The share of the layer taken, 0..1, where its size is known.
    pub fn fill_ratio(&self) -> Option<f64> {
        layer_fill_ratio(self.avail_bytes as f64, self.size_bytes.map(|s| s as f64))
    }
}

/// A layer's fill, `1 − avail ÷ size`, with its size on the scale of its avail; for the
/// filesystem layer that size is df's (used + avail), so this is df's Use%
/// ([`crate::statfs::df_fill_ratio`]). The collector, the store's report and the report from
/// Prometheus all take a layer's fill from here. None without a size.
pub fn layer_fill_ratio(avail_bytes: f64, size_bytes: Option<f64>) -> Option<f64> {
    size_bytes
        .filter(|s| *s > 0.0)
        .map(|s| (1.0 - avail_bytes / s).clamp(0.0, 1.0))
}

/// One device of a mount's stack, as much of it as places the mount on its layers: its kernel
/// name (a btrfs' devices are listed by it) and its device-mapper name (a thin volume's). A
/// mount keeps these, not the whole [`BlockDevice`] with its model, serial and limits: 500
/// mounts on partitions hold a thousand devices between samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StackDevice {
    pub name: String,
    pub dm_name: Option<String>,
}

impl From<&BlockDevice> for StackDevice {
    fn from(d: &BlockDevice) -> Self {
        StackDevice {
            name: d.name.clone(),
            dm_name: d.dm_name.clone(),
        }
    }
}

/// What is known of one mount to place it on its layers.
pub struct MountView<'a> {
    pub fstype: &'a str,
    /// The mount table's source (a ZFS dataset's name for ZFS).
    pub source: &'a str,
    /// Its block device and every device under it (`Topology::layers`), top first.
    pub stack: &'a [StackDevice],
}

impl Layers {
    /// The limits of every layer under a mount, bottom-most last. A thin volume anywhere in the
    /// stack (under dm-crypt, say) puts its pool's free space under the mount: any one volume
    /// can take all of it, and every volume of the pool competes for it.
    pub fn limits(&self, m: &MountView) -> Vec<Limit> {
        let mut out = Vec::new();
        match m.fstype {
            "btrfs" => {
                if let Some(dev) = m.stack.first()
                    && let Some(b) = self.btrfs.iter().find(|b| b.fs.devices.contains(&dev.name))
                    && let Some(limit) = b.limit()
                {
                    out.push(limit);
                }
            }
            "zfs" => {
                if let Some(d) = self.zfs_datasets.iter().find(|d| d.name == m.source) {
                    out.push(Limit {
                        layer: Layer::ZfsDataset,
                        name: d.name.clone(),
                        avail_bytes: d.available_bytes,
                        size_bytes: Some(d.used_bytes.saturating_add(d.available_bytes)),
                    });
                    if let Some(p) = self.zfs_pools.iter().find(|p| p.name == d.pool) {
                        out.push(Limit {
                            layer: Layer::ZfsPool,
                            name: p.name.clone(),
                            avail_bytes: p.free_bytes,
                            size_bytes: Some(p.size_bytes),
                        });
                    }
                }
            }
            _ => {}
        }
        for dev in m.stack {
            let Some(dm) = dev.dm_name.as_deref() else {
                continue;
            };
            for p in &self.thin_pools {
                if p.volumes.iter().any(|v| v.name == dm) {
                    out.push(Limit {
                        layer: Layer::ThinPool,
                        name: p.name.clone(),
                        avail_bytes: p.free_bytes(),
                        size_bytes: Some(p.data_size_bytes()),
                    });
                }
            }
        }
        out
    }
}

/// A mount's effective free space: the least of its filesystem's `avail_bytes` and every
/// layer's; on a tie the lower layer is named (a ZFS filesystem's statvfs tells its dataset's
/// room: the dataset is what runs out).
pub fn effective(fs_avail_bytes: u64, limits: &[Limit]) -> Limit {
    let mut best = Limit {
        layer: Layer::Filesystem,
        name: String::new(),
        avail_bytes: fs_avail_bytes,
        size_bytes: None,
    };
    for l in limits {
        if l.avail_bytes <= best.avail_bytes {
            best = l.clone();
        }
    }
    // A ZFS filesystem's statvfs is its dataset's view (a moment apart from `zfs list`): when
    // the filesystem is the least, its dataset is what runs out.
    if best.layer == Layer::Filesystem
        && let Some(d) = limits.iter().find(|l| l.layer == Layer::ZfsDataset)
    {
        best.layer = Layer::ZfsDataset;
        best.name = d.name.clone();
        best.size_bytes = d.size_bytes;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btrfs::sysfs::Allocation;

    /// The filesystem layer's fill, on df's size (used + avail), is df's Use%.
    #[test]
    fn the_filesystem_layers_fill_is_dfs() {
        // size 1000, free 148, avail 98: df's size is 852 used + 98 avail.
        let layer = layer_fill_ratio(98.0, Some(950.0)).unwrap();
        let df = crate::statfs::df_fill_ratio(1000.0, 148.0, 98.0).unwrap();
        assert!((layer - df).abs() < 1e-12, "{layer} {df}");
        assert_eq!(layer_fill_ratio(98.0, None), None);
    }

    fn dev(name: &str, dm: Option<&str>) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            dm_name: dm.map(str::to_string),
            ..Default::default()
        }
    }

    fn pool(free_blocks: u64, mode: thin::PoolMode) -> thin::Pool {
        thin::Pool {
            name: "vg-pool-tpool".into(),
            data_block_bytes: 65536,
            status: thin::PoolStatus {
                transaction_id: 1,
                metadata_used_blocks: 10,
                metadata_total_blocks: 1024,
                data_used_blocks: 1024 - free_blocks,
                data_total_blocks: 1024,
                mode,
                error_if_no_space: Some(false),
                needs_check: false,
            },
            error_if_no_space: false,
            virtual_bytes: 200 << 20,
            volumes: vec![thin::Volume {
                name: "vg-db".into(),
                size_bytes: 100 << 20,
                mapped_bytes: None,
            }],
        }
    }

    #[test]
    fn a_thin_pool_filling_under_a_half_empty_ext4_limits_the_mount() {
        let layers = Layers {
            thin_pools: vec![pool(16, thin::PoolMode::ReadWrite)],
            ..Default::default()
        };
        // ext4 on dm-crypt on the thin volume.
        let (crypt, thin) = (dev("dm-4", Some("db-crypt")), dev("dm-3", Some("vg-db")));
        let stack = [StackDevice::from(&crypt), StackDevice::from(&thin)];
        let m = MountView {
            fstype: "ext4",
            source: "/dev/mapper/db-crypt",
            stack: &stack,
        };
        let limits = layers.limits(&m);
        assert_eq!(limits.len(), 1);
        let e = effective(50 << 20, &limits);
        assert_eq!(e.layer, Layer::ThinPool);
        assert_eq!(e.name, "vg-pool-tpool");
        assert_eq!(e.avail_bytes, 16 * 65536);
        // Out of data space: nothing, whatever the filesystem says.
        let layers = Layers {
            thin_pools: vec![pool(16, thin::PoolMode::OutOfDataSpace)],
            ..Default::default()
        };
        assert_eq!(effective(50 << 20, &layers.limits(&m)).avail_bytes, 0);
        // The filesystem is the limit while it has less than the pool.
        assert_eq!(effective(512 << 10, &limits).layer, Layer::Filesystem);
        // On a tie the layer below is named: it is what runs out.
        assert_eq!(effective(1 << 20, &limits).layer, Layer::ThinPool);
    }

    #[test]
    fn a_zfs_dataset_is_limited_by_its_quota_or_its_pool() {
        let layers = Layers {
            zfs_pools: vec![zfs::Pool {
                name: "tank".into(),
                size_bytes: 1000,
                allocated_bytes: 900,
                free_bytes: 100,
                fragmentation_ratio: None,
                capacity_ratio: Some(0.9),
                health: "ONLINE".into(),
                checkpoint_bytes: 0,
                expandable_bytes: 0,
            }],
            zfs_datasets: vec![zfs::Dataset {
                name: "tank/pg".into(),
                pool: "tank".into(),
                used_bytes: 500,
                available_bytes: 40,
                referenced_bytes: 500,
                quota_bytes: Some(540),
                reservation_bytes: 0,
                mountpoint: Some("/tank/pg".into()),
            }],
            ..Default::default()
        };
        let m = MountView {
            fstype: "zfs",
            source: "tank/pg",
            stack: &[],
        };
        let e = effective(60, &layers.limits(&m));
        assert_eq!((e.layer, e.avail_bytes), (Layer::ZfsDataset, 40));
        // statvfs a moment apart says a little less: still the dataset, at statvfs's figure.
        let e = effective(39, &layers.limits(&m));
        assert_eq!(
            (e.layer, e.name.as_str(), e.avail_bytes),
            (Layer::ZfsDataset, "tank/pg", 39)
        );
    }

    fn alloc(total: u64, used: u64, copies: u64) -> Allocation {
        Allocation {
            total_bytes: total,
            used_bytes: used,
            disk_total_bytes: total * copies,
            disk_used_bytes: used * copies,
            profiles: vec![],
            chunk_size_bytes: None,
        }
    }

    #[test]
    fn a_btrfs_with_every_byte_in_data_chunks_has_no_room_for_metadata() {
        let gib = 1u64 << 30;
        let mut b = BtrfsSpace {
            fs: Btrfs {
                uuid: "u".into(),
                data: alloc(9 * gib, 5 * gib, 1),
                metadata: alloc(gib / 2, gib / 2 - (8 << 20), 2),
                system: alloc(8 << 20, 16384, 2),
                global_reserve_bytes: 16 << 20,
                devices: vec!["sdb".into()],
                ..Default::default()
            },
            devices: vec![BtrfsDevice {
                name: "sdb".into(),
                size_bytes: Some(10 * gib + (16 << 20)),
                unallocated_bytes: Some(0),
                devid: Some(1),
            }],
        };
        let sdb = dev("sdb", None);
        let stack = [StackDevice::from(&sdb)];
        let m = MountView {
            fstype: "btrfs",
            source: "/dev/sdb",
            stack: &stack,
        };
        let layers = Layers {
            btrfs: vec![b.clone()],
            ..Default::default()
        };
        // statvfs still says 4 GiB free in data chunks.
        let e = effective(4 * gib, &layers.limits(&m));
        assert_eq!((e.layer, e.avail_bytes), (Layer::BtrfsMetadata, 0));
        assert_eq!(b.metadata_can_grow(), Some(false));
        // With 1 GiB unallocated metadata grows, and data gets its free chunks plus that.
        b.devices[0].unallocated_bytes = Some(gib);
        assert_eq!(b.metadata_can_grow(), Some(true));
        assert_eq!(b.limit().map(|l| l.avail_bytes), Some(5 * gib));
    }
}
