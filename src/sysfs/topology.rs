//! The block-device graph from /sys: every disk, partition, dm, md and loop device, its identity,
//! queue limits and holder/slave edges, and the walks a collector needs (mount → physical drives,
//! "does TRIM reach the flash"). It reads only under the sysfs root it is given.

use super::{read_attr, read_u64};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceKind {
    Nvme,
    /// sd: SATA, SAS, USB and RAID-controller disks through the SCSI layer.
    Scsi,
    Virtio,
    Dm,
    Md,
    Loop,
    Partition,
    Zram,
    Other,
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Nvme => "nvme",
            DeviceKind::Scsi => "scsi",
            DeviceKind::Virtio => "virtio",
            DeviceKind::Dm => "dm",
            DeviceKind::Md => "md",
            DeviceKind::Loop => "loop",
            DeviceKind::Partition => "partition",
            DeviceKind::Zram => "zram",
            DeviceKind::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockDevice {
    pub name: String,
    pub kind: Option<DeviceKind>,
    pub major: u32,
    pub minor: u32,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    pub wwn: Option<String>,
    pub size_bytes: Option<u64>,
    pub rotational: Option<bool>,
    pub logical_block_size: Option<u64>,
    pub physical_block_size: Option<u64>,
    pub discard_max_bytes: Option<u64>,
    pub discard_granularity: Option<u64>,
    /// device-mapper name (`vg0-data`, `luks-…`) and uuid (`CRYPT-LUKS2-…`, `LVM-…`).
    pub dm_name: Option<String>,
    pub dm_uuid: Option<String>,
    /// md RAID level (`raid1`).
    pub md_level: Option<String>,
    /// Backing file of a loop device.
    pub loop_backing_file: Option<String>,
    /// Whole disk of a partition.
    pub parent: Option<String>,
    /// Devices this one is built on (dm, md); sorted.
    pub slaves: Vec<String>,
    /// Devices built on this one; sorted.
    pub holders: Vec<String>,
}

impl BlockDevice {
    pub fn kind(&self) -> DeviceKind {
        self.kind.unwrap_or(DeviceKind::Other)
    }

    /// The dm target type guessed from the uuid prefix set by cryptsetup / LVM.
    pub fn dm_target(&self) -> Option<&'static str> {
        let u = self.dm_uuid.as_deref()?;
        Some(if u.starts_with("CRYPT-") {
            "crypt"
        } else if u.starts_with("LVM-") {
            "lvm"
        } else if u.starts_with("mpath-") {
            "multipath"
        } else {
            "other"
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub devices: BTreeMap<String, BlockDevice>,
    /// Devices that could not be read completely (named, with the reason).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Classifies a whole-disk block device by its kernel name and the driver directories present.
pub fn classify(name: &str, has_dm: bool, has_md: bool) -> DeviceKind {
    if has_dm || name.starts_with("dm-") {
        DeviceKind::Dm
    } else if has_md || name.starts_with("md") {
        DeviceKind::Md
    } else if name.starts_with("nvme") {
        DeviceKind::Nvme
    } else if name.starts_with("sd") {
        DeviceKind::Scsi
    } else if name.starts_with("vd") {
        DeviceKind::Virtio
    } else if name.starts_with("loop") {
        DeviceKind::Loop
    } else if name.starts_with("zram") {
        DeviceKind::Zram
    } else {
        DeviceKind::Other
    }
}

/// Parses a `dev` attribute (`259:3`).
pub fn parse_devnum(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Cleans an identity string: trims padding, drops empty values.
fn ident(s: Option<String>) -> Option<String> {
    let s = s?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn list_dir(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl Topology {
    /// Reads every block device under `<sys>/block`. A device that can't be read is recorded in
    /// `warnings`; only an unreadable `<sys>/block` itself is an error.
    pub fn read(sys: &Path) -> Result<Topology, SysfsError> {
        let block = sys.join("block");
        let rd = std::fs::read_dir(&block).map_err(|source| SysfsError::Io {
            path: block.clone(),
            source,
        })?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut topo = Topology::default();
        for name in names {
            let dir = block.join(&name);
            match read_disk(&dir, &name) {
                Some((disk, parts)) => {
                    // Unused loop devices (no backing file, size 0) are noise, not devices.
                    if disk.kind() == DeviceKind::Loop && disk.size_bytes.unwrap_or(0) == 0 {
                        continue;
                    }
                    topo.devices.insert(name.clone(), disk);
                    for p in parts {
                        topo.devices.insert(p.name.clone(), p);
                    }
                }
                None => topo
                    .warnings
                    .push(format!("{}: no readable dev attribute", dir.display())),
            }
        }
        Ok(topo)
    }

    pub fn get(&self, name: &str) -> Option<&BlockDevice> {
        self.devices.get(name)
    }

    pub fn by_devnum(&self, major: u32, minor: u32) -> Option<&BlockDevice> {
        self.devices
            .values()
            .find(|d| d.major == major && d.minor == minor)
    }

    /// Every device on the paths from `name` down to the physical drives, `name` first.
    /// Cycle-safe: a malformed tree can't make it loop.
    pub fn layers(&self, name: &str) -> Vec<&BlockDevice> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut stack = vec![name.to_string()];
        while let Some(n) = stack.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            let Some(d) = self.devices.get(&n) else {
                continue;
            };
            out.push(d);
            if let Some(p) = &d.parent {
                stack.push(p.clone());
            }
            for s in d.slaves.iter().rev() {
                stack.push(s.clone());
            }
        }
        out
    }

    /// The bottom devices under `name`: whole disks with no slaves (NVMe namespaces, sd, virtio,
    /// loop). A partition resolves to its disk; dm and md resolve through their slaves.
    pub fn physical_drives(&self, name: &str) -> Vec<&BlockDevice> {
        let mut out: Vec<&BlockDevice> = self
            .layers(name)
            .into_iter()
            .filter(|d| d.kind() != DeviceKind::Partition && d.slaves.is_empty())
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        out
    }

    /// Whether discards issued at `name` reach every physical drive under it: every layer must
    /// pass them (`discard_max_bytes > 0`; a partition uses its disk's queue). `None` when a layer's
    /// support can't be read and no layer is known to drop them.
    pub fn trim_capable(&self, name: &str) -> Option<bool> {
        let layers = self.layers(name);
        if layers.is_empty() {
            return None;
        }
        let mut unknown = false;
        for d in layers {
            if d.kind() == DeviceKind::Partition {
                continue; // the parent disk is in the walk and carries the queue limits
            }
            match d.discard_max_bytes {
                Some(0) => return Some(false),
                Some(_) => {}
                None => unknown = true,
            }
        }
        if unknown { None } else { Some(true) }
    }

    /// The layer that stops discards under `name`, if any (for messages and dashboards).
    pub fn discard_blocker(&self, name: &str) -> Option<&BlockDevice> {
        self.layers(name)
            .into_iter()
            .find(|d| d.kind() != DeviceKind::Partition && d.discard_max_bytes == Some(0))
    }

    /// All physical drives on the host (bottom devices), sorted by name.
    pub fn drives(&self) -> Vec<&BlockDevice> {
        self.devices
            .values()
            .filter(|d| d.kind() != DeviceKind::Partition && d.slaves.is_empty())
            .collect()
    }
}

fn read_queue(dir: &Path, d: &mut BlockDevice) {
    let q = dir.join("queue");
    d.rotational = read_u64(&q.join("rotational")).map(|v| v != 0);
    d.logical_block_size = read_u64(&q.join("logical_block_size"));
    d.physical_block_size = read_u64(&q.join("physical_block_size"));
    d.discard_max_bytes = read_u64(&q.join("discard_max_bytes"));
    d.discard_granularity = read_u64(&q.join("discard_granularity"));
}

/// Reads one whole device and its partitions.
fn read_disk(dir: &Path, name: &str) -> Option<(BlockDevice, Vec<BlockDevice>)> {
    let (major, minor) = parse_devnum(&read_attr(&dir.join("dev"))?)?;
    let has_dm = dir.join("dm").is_dir();
    let has_md = dir.join("md").is_dir();
    let kind = classify(name, has_dm, has_md);
    let mut d = BlockDevice {
        name: name.to_string(),
        kind: Some(kind),
        major,
        minor,
        // `size` is in 512-byte sectors regardless of the logical block size.
        size_bytes: read_u64(&dir.join("size")).map(|s| s * 512),
        slaves: list_dir(&dir.join("slaves")),
        holders: list_dir(&dir.join("holders")),
        ..Default::default()
    };
    read_queue(dir, &mut d);
    let dev = dir.join("device");
    match kind {
        DeviceKind::Nvme => {
            // Namespace attributes live on the controller (`device` is the nvmeN controller).
            d.model = ident(read_attr(&dev.join("model")));
            d.serial = ident(read_attr(&dev.join("serial")));
            d.firmware = ident(read_attr(&dev.join("firmware_rev")));
            d.wwn = ident(read_attr(&dir.join("wwid")));
        }
        DeviceKind::Scsi => {
            d.vendor = ident(read_attr(&dev.join("vendor")));
            d.model = ident(read_attr(&dev.join("model")));
            d.firmware = ident(read_attr(&dev.join("rev")));
            d.wwn = ident(read_attr(&dev.join("wwid")));
            d.serial = ident(read_attr(&dev.join("serial")))
                .or_else(|| ident(read_vpd_serial(&dev.join("vpd_pg80"))));
        }
        DeviceKind::Virtio => {
            d.serial = ident(read_attr(&dir.join("serial")));
        }
        DeviceKind::Dm => {
            d.dm_name = ident(read_attr(&dir.join("dm/name")));
            d.dm_uuid = ident(read_attr(&dir.join("dm/uuid")));
        }
        DeviceKind::Md => {
            d.md_level = ident(read_attr(&dir.join("md/level")));
        }
        DeviceKind::Loop => {
            d.loop_backing_file = ident(read_attr(&dir.join("loop/backing_file")));
        }
        _ => {}
    }
    let mut parts = Vec::new();
    for entry in list_dir(dir) {
        let pdir = dir.join(&entry);
        if !pdir.join("partition").exists() {
            continue;
        }
        let Some((pmaj, pmin)) = read_attr(&pdir.join("dev")).and_then(|s| parse_devnum(&s)) else {
            continue;
        };
        parts.push(BlockDevice {
            name: entry.clone(),
            kind: Some(DeviceKind::Partition),
            major: pmaj,
            minor: pmin,
            size_bytes: read_u64(&pdir.join("size")).map(|s| s * 512),
            parent: Some(name.to_string()),
            holders: list_dir(&pdir.join("holders")),
            // Partitions share the disk's queue; copy the limits for display.
            rotational: d.rotational,
            logical_block_size: d.logical_block_size,
            physical_block_size: d.physical_block_size,
            discard_max_bytes: d.discard_max_bytes,
            discard_granularity: d.discard_granularity,
            ..Default::default()
        });
    }
    Some((d, parts))
}

/// SCSI VPD page 0x80 (unit serial number): 4 header bytes, then the serial.
fn read_vpd_serial(p: &Path) -> Option<String> {
    let b = std::fs::read(p).ok()?;
    if b.len() <= 4 {
        return None;
    }
    let s: String = b[4..]
        .iter()
        .filter(|c| c.is_ascii_graphic() || **c == b' ')
        .map(|c| *c as char)
        .collect();
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, kind: DeviceKind) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            kind: Some(kind),
            discard_max_bytes: Some(2 << 30),
            ..Default::default()
        }
    }

    fn topo(devs: Vec<BlockDevice>) -> Topology {
        Topology {
            devices: devs.into_iter().map(|d| (d.name.clone(), d)).collect(),
            warnings: vec![],
        }
    }

    #[test]
    fn luks_on_lvm_on_partition_resolves_to_the_disk() {
        let mut sda2 = dev("sda2", DeviceKind::Partition);
        sda2.parent = Some("sda".into());
        let mut dm0 = dev("dm-0", DeviceKind::Dm);
        dm0.slaves = vec!["sda2".into()];
        let mut dm1 = dev("dm-1", DeviceKind::Dm);
        dm1.slaves = vec!["dm-0".into()];
        let t = topo(vec![dev("sda", DeviceKind::Scsi), sda2, dm0, dm1]);
        let drives: Vec<_> = t
            .physical_drives("dm-1")
            .iter()
            .map(|d| d.name.clone())
            .collect();
        assert_eq!(drives, vec!["sda"]);
        assert_eq!(t.layers("dm-1").len(), 4);
        assert_eq!(t.trim_capable("dm-1"), Some(true));
    }

    #[test]
    fn one_layer_dropping_discards_makes_the_path_incapable() {
        let mut md0 = dev("md0", DeviceKind::Md);
        md0.slaves = vec!["nvme0n1".into(), "nvme1n1".into()];
        let mut n1 = dev("nvme1n1", DeviceKind::Nvme);
        n1.discard_max_bytes = Some(0);
        let t = topo(vec![md0, dev("nvme0n1", DeviceKind::Nvme), n1]);
        assert_eq!(t.physical_drives("md0").len(), 2);
        assert_eq!(t.trim_capable("md0"), Some(false));
        assert_eq!(t.discard_blocker("md0").unwrap().name, "nvme1n1");
    }

    #[test]
    fn unknown_support_is_unknown_not_false() {
        let mut d = dev("vda", DeviceKind::Virtio);
        d.discard_max_bytes = None;
        let t = topo(vec![d]);
        assert_eq!(t.trim_capable("vda"), None);
        assert_eq!(t.trim_capable("nope"), None);
    }

    #[test]
    fn cycles_do_not_loop() {
        let mut a = dev("dm-0", DeviceKind::Dm);
        a.slaves = vec!["dm-1".into()];
        let mut b = dev("dm-1", DeviceKind::Dm);
        b.slaves = vec!["dm-0".into()];
        let t = topo(vec![a, b]);
        assert_eq!(t.layers("dm-0").len(), 2);
        assert!(t.physical_drives("dm-0").is_empty());
    }

    #[test]
    fn devnum_and_kinds() {
        assert_eq!(parse_devnum("259:3\n"), Some((259, 3)));
        assert_eq!(parse_devnum("x:3"), None);
        assert_eq!(classify("nvme0n1", false, false), DeviceKind::Nvme);
        assert_eq!(classify("dm-3", false, false), DeviceKind::Dm);
        assert_eq!(classify("vda", false, false), DeviceKind::Virtio);
        assert_eq!(classify("md127", false, true), DeviceKind::Md);
    }

    #[test]
    fn missing_sys_block_is_an_error_naming_the_path() {
        let err = Topology::read(Path::new("/nonexistent-sys")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-sys/block"));
    }
}
