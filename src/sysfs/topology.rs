//! The block-device graph from /sys: every disk, partition, dm, md and loop device, its identity,
//! queue limits and holder/slave edges, and the walks a collector needs (mount → physical drives,
//! "does TRIM reach the flash"). It reads only under the sysfs root it is given.

use super::SysDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a block device is, from its kernel name and driver directories (never from the
/// rotational flag: virtio disks report rotational on SSD-backed hosts).
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

/// One block device with its identity, queue limits and stack edges; unknown values are `None`.
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
    /// `queue/write_cache`: true for "write back" (the kernel takes the device for one with a
    /// volatile cache and sends flushes), false for "write through" (it sends none).
    pub write_cache: Option<bool>,
    /// `queue/fua`: the device takes Force Unit Access writes (durable without a flush).
    pub fua: Option<bool>,
    /// device-mapper name (`vg0-data`, `luks-…`) and uuid (`CRYPT-LUKS2-…`, `LVM-…`). The
    /// name is the admin's (a VG and LV name) and in its label form
    /// ([`crate::label::label_form`]), as dmsetup's names and the mount table's `/dev/mapper/`
    /// sources are, so all three meet and a control character never reaches a terminal.
    pub dm_name: Option<String>,
    pub dm_uuid: Option<String>,
    /// md RAID level (`raid1`).
    pub md_level: Option<String>,
    /// Whole disk of a partition.
    pub parent: Option<String>,
    /// Devices this one is built on (dm, md); sorted.
    pub slaves: Vec<String>,
}

impl BlockDevice {
    pub fn kind(&self) -> DeviceKind {
        self.kind.unwrap_or(DeviceKind::Other)
    }

    /// Whether this is a physical drive, the bottom of the stack: a whole disk built on nothing.
    /// A dm or md device is a layer even when its `slaves/` can't be read (a container's /sys,
    /// a fixture copied without it): its drives are unknown, not itself.
    pub fn is_drive(&self) -> bool {
        !matches!(
            self.kind(),
            DeviceKind::Partition | DeviceKind::Dm | DeviceKind::Md
        ) && self.slaves.is_empty()
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

/// Every block device of the host by kernel name, read in one walk of `<sys>/block`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub devices: BTreeMap<String, BlockDevice>,
    /// Devices that could not be read (left out of `devices`).
    pub warnings: Vec<UnreadableDevice>,
    /// `devices` by `major:minor`, built at the first [`Topology::by_devnum`] (every mount and
    /// every thin volume is looked up so, hundreds a sample).
    by_devnum: DevnumIndex,
}

/// A topology's devices by number: derived from `devices`, so it takes no part in equality.
#[derive(Debug, Clone, Default)]
struct DevnumIndex(std::sync::OnceLock<std::collections::HashMap<(u32, u32), String>>);

impl PartialEq for DevnumIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A device under `<sys>/block` left out of the topology: its `dev` attribute can't be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: no readable dev attribute", dir.display())]
pub struct UnreadableDevice {
    /// Kernel name (`sdz`).
    pub name: String,
    pub dir: PathBuf,
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

/// What a `wwid` attribute says about a drive. The kernel prints the SCSI VPD page 0x83
/// designator (`naa.…`, `eui.…`, `t10.…`) for sd disks and the namespace identifier
/// (`eui.…`, `uuid.…`, or a vendor-built `nvme.…` string) for NVMe namespaces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wwid {
    /// A world-wide name (`naa.`, `eui.`, `uuid.` designators); `None` for the vendor-built forms.
    pub wwn: Option<String>,
    /// From a libata `t10.ATA` designator: the full ATA model (40 characters; the SCSI `model`
    /// attribute is cut to 16) and the serial number.
    pub ata_model: Option<String>,
    pub ata_serial: Option<String>,
}

/// Parses a `wwid` attribute. libata builds a T10 designator as `ATA` padded to 8, the model
/// padded to 40 and the serial padded to 20; trailing padding may already be trimmed.
pub fn parse_wwid(s: &str) -> Wwid {
    let s = s.trim();
    let mut w = Wwid::default();
    if ["naa.", "eui.", "uuid."].iter().any(|p| s.starts_with(p)) && s.len() > 5 {
        w.wwn = Some(s.to_string());
    } else if let Some(body) = s.strip_prefix("t10.ATA").and_then(|b| b.get(5..)) {
        let (model, serial) = match (body.get(..40), body.get(40..)) {
            (Some(m), Some(sn)) if !sn.trim().is_empty() && !sn.trim().contains(' ') => {
                (m.trim(), sn.trim())
            }
            // Not padded as libata does it: the serial is the last word.
            _ => match body.trim().rsplit_once(' ') {
                Some((m, sn)) => (m.trim(), sn),
                None => ("", body.trim()),
            },
        };
        w.ata_model = (!model.is_empty()).then(|| model.to_string());
        w.ata_serial = (!serial.is_empty()).then(|| serial.to_string());
    }
    w
}

/// Cleans an identity string: trims padding, drops empty values.
fn ident(s: Option<String>) -> Option<String> {
    let s = s?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

impl Topology {
    /// Reads every block device under `<sys>/block`. A device that can't be read is recorded in
    /// `warnings`; only an unreadable `<sys>/block` itself is an error.
    pub fn read(sys: &Path) -> Result<Topology, SysfsError> {
        let block = sys.join("block");
        let names = super::dir_names(&block).map_err(|source| SysfsError::Io {
            path: block.clone(),
            source,
        })?;
        let mut topo = Topology::default();
        for name in names {
            let dir = block.join(super::name_path(&name));
            match read_disk(&dir, &name) {
                Some((disk, parts)) => {
                    // Unbound loop and uninitialised zram devices (size 0) are noise, not devices.
                    if matches!(disk.kind(), DeviceKind::Loop | DeviceKind::Zram)
                        && disk.size_bytes.unwrap_or(0) == 0
                    {
                        continue;
                    }
                    topo.devices.insert(name.clone(), disk);
                    for p in parts {
                        topo.devices.insert(p.name.clone(), p);
                    }
                }
                None => topo.warnings.push(UnreadableDevice { name, dir }),
            }
        }
        Ok(topo)
    }

    /// The device with this kernel name (`sda2`, `dm-1`).
    pub fn get(&self, name: &str) -> Option<&BlockDevice> {
        self.devices.get(name)
    }

    /// The device with this `major:minor` (from `st_dev` or a mountinfo line).
    pub fn by_devnum(&self, major: u32, minor: u32) -> Option<&BlockDevice> {
        let index = self.by_devnum.0.get_or_init(|| {
            let mut index = std::collections::HashMap::with_capacity(self.devices.len());
            for d in self.devices.values() {
                // The first in name order, as a walk of `devices` finds it.
                index
                    .entry((d.major, d.minor))
                    .or_insert_with(|| d.name.clone());
            }
            index
        });
        self.devices.get(index.get(&(major, minor))?)
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

    /// The bottom devices under `name` ([`BlockDevice::is_drive`]: NVMe namespaces, sd, virtio,
    /// loop). A partition resolves to its disk; dm and md resolve through their slaves (none
    /// when their slaves are unknown).
    pub fn physical_drives(&self, name: &str) -> Vec<&BlockDevice> {
        let mut out: Vec<&BlockDevice> = self
            .layers(name)
            .into_iter()
            .filter(|d| d.is_drive())
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

    /// All physical drives on the host (bottom devices), sorted by name.
    pub fn drives(&self) -> Vec<&BlockDevice> {
        self.devices.values().filter(|d| d.is_drive()).collect()
    }
}

fn read_queue(dir: &SysDir, d: &mut BlockDevice) {
    let Ok(q) = dir.sub("queue") else {
        return;
    };
    d.rotational = q.u64("rotational").map(|v| v != 0);
    d.logical_block_size = q.u64("logical_block_size");
    d.physical_block_size = q.u64("physical_block_size");
    d.discard_max_bytes = q.u64("discard_max_bytes");
    d.discard_granularity = q.u64("discard_granularity");
    d.write_cache = q.attr("write_cache").and_then(|v| parse_write_cache(&v));
    d.fua = q.u64("fua").and_then(|v| match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    });
}

/// `queue/write_cache` ("write back" / "write through", block/blk-sysfs.c) as whether the
/// kernel sends cache flushes to the device; anything else is unknown.
pub fn parse_write_cache(s: &str) -> Option<bool> {
    match s.trim() {
        "write back" => Some(true),
        "write through" => Some(false),
        _ => None,
    }
}

/// Reads one whole device and its partitions. The device's directory is held open and its
/// files read relative to it.
fn read_disk(path: &Path, name: &str) -> Option<(BlockDevice, Vec<BlockDevice>)> {
    let dir = SysDir::open(path).ok()?;
    let (major, minor) = parse_devnum(&dir.attr("dev")?)?;
    let has_dm = dir.sub("dm").is_ok();
    let has_md = dir.sub("md").is_ok();
    let kind = classify(name, has_dm, has_md);
    let mut d = BlockDevice {
        name: name.to_string(),
        kind: Some(kind),
        major,
        minor,
        // `size` is in 512-byte sectors regardless of the logical block size.
        size_bytes: dir.u64("size").map(|s| s * 512),
        slaves: dir
            .sub("slaves")
            .and_then(|s| s.names())
            .unwrap_or_default(),
        ..Default::default()
    };
    read_queue(&dir, &mut d);
    let dev = dir.sub("device").ok();
    let dev_attr = |f: &str| dev.as_ref().and_then(|dev| dev.attr(f));
    match kind {
        DeviceKind::Nvme => {
            // Namespace attributes live on the controller (`device` is the nvmeN controller).
            d.model = ident(dev_attr("model"));
            d.serial = ident(dev_attr("serial"));
            d.firmware = ident(dev_attr("firmware_rev"));
            d.wwn = dir.attr("wwid").and_then(|s| parse_wwid(&s).wwn);
        }
        DeviceKind::Scsi => {
            let wwid = dev_attr("wwid").map(|s| parse_wwid(&s)).unwrap_or_default();
            d.vendor = ident(dev_attr("vendor"));
            d.model = if d.vendor.as_deref() == Some("ATA") && wwid.ata_model.is_some() {
                wwid.ata_model // the SCSI model attribute is cut to 16 characters
            } else {
                ident(dev_attr("model"))
            };
            d.firmware = ident(dev_attr("rev"));
            d.wwn = wwid.wwn;
            d.serial = ident(dev_attr("serial"))
                .or_else(|| ident(read_vpd_serial(&path.join("device").join("vpd_pg80"))))
                .or(wwid.ata_serial);
        }
        DeviceKind::Virtio => {
            d.serial = ident(dir.attr("serial"));
        }
        DeviceKind::Dm => {
            d.dm_name = ident(dir.attr("dm/name")).map(|n| crate::label::label_form(n.as_bytes()));
            d.dm_uuid = ident(dir.attr("dm/uuid"));
        }
        DeviceKind::Md => {
            d.md_level = ident(dir.attr("md/level"));
        }
        _ => {}
    }
    let mut parts = Vec::new();
    // A partition is a subdirectory named after its disk (`sda1`, `nvme0n1p1`) that holds a
    // `partition` file; the device's attributes and its other directories are passed over
    // without a look inside.
    for entry in dir.subdir_names().unwrap_or_default() {
        if !entry.starts_with(name) || entry == name {
            continue;
        }
        let Ok(pdir) = dir.sub(&entry) else {
            continue;
        };
        if pdir.attr("partition").is_none() {
            continue;
        }
        let Some((pmaj, pmin)) = pdir.attr("dev").and_then(|s| parse_devnum(&s)) else {
            continue;
        };
        parts.push(BlockDevice {
            name: entry.clone(),
            kind: Some(DeviceKind::Partition),
            major: pmaj,
            minor: pmin,
            size_bytes: pdir.u64("size").map(|s| s * 512),
            parent: Some(name.to_string()),
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

/// The kernel name of the block device behind a mount: by major:minor, else by the source path
/// (btrfs reports an anonymous device number; /dev/mapper names map to dm devices).
pub fn resolve_device(m: &crate::procfs::mountinfo::MountInfo, topo: &Topology) -> Option<String> {
    if m.major != 0
        && let Some(d) = topo.by_devnum(m.major, m.minor)
    {
        return Some(d.name.clone());
    }
    let src = m.source.strip_prefix("/dev/")?;
    if let Some(dm) = src.strip_prefix("mapper/") {
        return topo
            .devices
            .values()
            .find(|d| d.dm_name.as_deref() == Some(dm))
            .map(|d| d.name.clone());
    }
    topo.get(src).map(|d| d.name.clone())
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
            ..Topology::default()
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
    fn wwid_forms() {
        let w = parse_wwid("naa.5002538e40a1b2c3\n");
        assert_eq!(w.wwn.as_deref(), Some("naa.5002538e40a1b2c3"));
        let t10 = format!(
            "t10.ATA     {:<40}{:<20}",
            "Samsung SSD 860 EVO 1TB", "S3Z9NB0K123456A"
        );
        let w = parse_wwid(&t10);
        assert_eq!(w.wwn, None, "a T10 vendor id is not a world-wide name");
        assert_eq!(w.ata_model.as_deref(), Some("Samsung SSD 860 EVO 1TB"));
        assert_eq!(w.ata_serial.as_deref(), Some("S3Z9NB0K123456A"));
        // A model filling all 40 characters, trailing padding trimmed by the reader.
        let full = format!("t10.ATA     {}S1", "M".repeat(40));
        assert_eq!(parse_wwid(&full).ata_serial.as_deref(), Some("S1"));
        let short = parse_wwid("t10.ATA     INTEL SSDSC2KB48 BTYF1234");
        assert_eq!(short.ata_model.as_deref(), Some("INTEL SSDSC2KB48"));
        assert_eq!(short.ata_serial.as_deref(), Some("BTYF1234"));
        let nvme = parse_wwid("nvme.8086-50484c4e-494e54454c-00000001");
        assert_eq!(nvme, Wwid::default());
        assert_eq!(parse_wwid("t10.ATA"), Wwid::default());
        assert_eq!(parse_wwid(""), Wwid::default());
    }

    proptest::proptest! {
        #[test]
        fn wwid_parser_never_panics(s in "(t10\\.ATA|naa\\.|eui\\.)?.{0,80}") {
            let _ = parse_wwid(&s);
        }

        /// Any slave graph, cycles included: walks end, start at the device asked for, and only
        /// return bottom devices as drives; TRIM is refused exactly when some layer drops it.
        #[test]
        fn walks_terminate_on_any_graph(
            edges in proptest::collection::vec((0usize..8, 0usize..8), 0..20),
            dmax in proptest::collection::vec(proptest::option::of(0u64..3), 8),
        ) {
            let mut devs: Vec<BlockDevice> = (0..8)
                .map(|i| {
                    let mut d = dev(&format!("dm-{i}"), DeviceKind::Dm);
                    d.discard_max_bytes = dmax[i];
                    d
                })
                .collect();
            for (a, b) in &edges {
                let s = format!("dm-{b}");
                if !devs[*a].slaves.contains(&s) {
                    devs[*a].slaves.push(s);
                }
            }
            let t = topo(devs);
            for i in 0..8 {
                let name = format!("dm-{i}");
                let layers = t.layers(&name);
                proptest::prop_assert_eq!(&layers[0].name, &name);
                proptest::prop_assert!(layers.len() <= 8);
                for d in t.physical_drives(&name) {
                    proptest::prop_assert!(d.slaves.is_empty());
                    proptest::prop_assert!(layers.iter().any(|l| l.name == d.name));
                }
                let drops = layers.iter().any(|l| l.discard_max_bytes == Some(0));
                proptest::prop_assert_eq!(t.trim_capable(&name) == Some(false), drops);
            }
        }
    }

    #[test]
    fn reads_a_fixture_tree_through_kernel_style_symlinks() {
        let sys =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/sata-luks-lvm/sys");
        let t = Topology::read(&sys).unwrap();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        let drives: Vec<_> = t
            .physical_drives("dm-2")
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(drives, ["sda"]);
        let layers: Vec<_> = t.layers("dm-2").iter().map(|d| d.name.as_str()).collect();
        assert_eq!(layers, ["dm-2", "dm-0", "sda2", "sda"]);
        assert_eq!(t.by_devnum(8, 2).map(|d| d.name.as_str()), Some("sda2"));
        assert!(t.by_devnum(8, 99).is_none(), "no such device");
        let sda = t.get("sda").unwrap();
        assert_eq!(sda.kind(), DeviceKind::Scsi);
        assert_eq!(sda.model.as_deref(), Some("SAMSUNG MZ7LH1T9HMLT-00005"));
        assert_eq!(sda.serial.as_deref(), Some("S455NY0M812340"));
        assert_eq!(sda.size_bytes, Some(3_750_748_848 * 512));
        assert_eq!(t.get("dm-0").unwrap().dm_target(), Some("crypt"));
        assert_eq!(t.get("dm-2").unwrap().dm_name.as_deref(), Some("vg0-mysql"));
        assert_eq!(t.trim_capable("dm-2"), Some(true));
        let names: Vec<_> = t.drives().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["sda"]);
    }

    #[test]
    fn a_device_without_dev_is_a_warning_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("block");
        std::fs::create_dir_all(block.join("nvme0n1/queue")).unwrap();
        std::fs::write(block.join("nvme0n1/dev"), "259:0\n").unwrap();
        std::fs::create_dir_all(block.join("sdz")).unwrap();
        let t = Topology::read(dir.path()).unwrap();
        assert_eq!(t.devices.len(), 1);
        let nvme = t.get("nvme0n1").unwrap();
        assert_eq!((nvme.model.as_ref(), nvme.discard_max_bytes), (None, None));
        assert_eq!(t.warnings.len(), 1);
        assert_eq!(t.warnings[0].name, "sdz");
        let msg = t.warnings[0].to_string();
        assert!(msg.contains("block/sdz: no readable dev"), "{msg}");
    }

    /// Partitions are the subdirectories named after their disk that hold a `partition` file
    /// (`nvme0n1p1` after a name ending in a digit); the disk's other directories, even one
    /// holding such a file, and a file named like a partition are not partitions.
    #[test]
    fn partitions_are_the_subdirectories_named_after_their_disk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("block/nvme0n1");
        for sub in ["queue", "holders", "nvme0n1p1", "nvme0n1p2", "stray"] {
            std::fs::create_dir_all(disk.join(sub)).unwrap();
        }
        std::fs::write(disk.join("dev"), "259:0\n").unwrap();
        for (part, minor) in [("nvme0n1p1", 1), ("nvme0n1p2", 2), ("stray", 9)] {
            std::fs::write(disk.join(part).join("partition"), "1\n").unwrap();
            std::fs::write(disk.join(part).join("dev"), format!("259:{minor}\n")).unwrap();
        }
        std::fs::write(disk.join("nvme0n1p3"), "not a directory\n").unwrap();
        let t = Topology::read(dir.path()).unwrap();
        let names: Vec<&str> = t.devices.keys().map(String::as_str).collect();
        assert_eq!(names, ["nvme0n1", "nvme0n1p1", "nvme0n1p2"]);
        assert_eq!(
            t.get("nvme0n1p2").unwrap().parent.as_deref(),
            Some("nvme0n1")
        );
        assert_eq!(
            t.by_devnum(259, 2).map(|d| d.name.as_str()),
            Some("nvme0n1p2")
        );
    }

    /// A disk and its partition whose kernel names are not UTF-8: both read through their exact
    /// bytes, keyed by their label form, the partition's parent the disk's label.
    #[test]
    fn device_names_that_are_not_utf8_are_carried_losslessly() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let disk = dir
            .path()
            .join("block")
            .join(std::ffi::OsStr::from_bytes(b"sd\xfe"));
        let part = disk.join(std::ffi::OsStr::from_bytes(b"sd\xfe1"));
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(disk.join("dev"), "8:0\n").unwrap();
        std::fs::write(disk.join("size"), "2048\n").unwrap();
        std::fs::write(part.join("partition"), "1\n").unwrap();
        std::fs::write(part.join("dev"), "8:1\n").unwrap();
        std::fs::write(part.join("size"), "1024\n").unwrap();
        let t = Topology::read(dir.path()).unwrap();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        let d = t.get("sd\\xfe").expect("the disk, by its label form");
        assert_eq!((d.major, d.minor, d.size_bytes), (8, 0, Some(2048 * 512)));
        let p = t.get("sd\\xfe1").expect("the partition");
        assert_eq!(p.parent.as_deref(), Some("sd\\xfe"));
        assert_eq!(t.by_devnum(8, 1).map(|p| p.name.as_str()), Some("sd\\xfe1"));
    }

    #[test]
    fn the_kernels_write_cache_mode_and_fua() {
        // What a virtio disk of this project's test machine shows (write back, no FUA), and
        // what an NVMe drive without a volatile write cache shows.
        assert_eq!(parse_write_cache("write back\n"), Some(true));
        assert_eq!(parse_write_cache("write through\n"), Some(false));
        for bad in ["", "writeback", "write back please", "1"] {
            assert_eq!(parse_write_cache(bad), None, "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("block/vda/queue");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(dir.path().join("block/vda/dev"), "253:0\n").unwrap();
        std::fs::write(q.join("write_cache"), "write back\n").unwrap();
        std::fs::write(q.join("fua"), "0\n").unwrap();
        let t = Topology::read(dir.path()).unwrap();
        let d = t.get("vda").unwrap();
        assert_eq!((d.write_cache, d.fua), (Some(true), Some(false)));
        std::fs::write(q.join("fua"), "7\n").unwrap();
        std::fs::write(q.join("write_cache"), "\u{0}garbage").unwrap();
        let t = Topology::read(dir.path()).unwrap();
        let d = t.get("vda").unwrap();
        assert_eq!((d.write_cache, d.fua), (None, None));
    }

    #[test]
    fn missing_sys_block_is_an_error_naming_the_path() {
        let err = Topology::read(Path::new("/nonexistent-sys")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-sys/block"));
    }
}
