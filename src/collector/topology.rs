//! Topology collector: identity of every drive (`ssdwatch_disk_info`), block sizes, and the
//! discard support of every layer of the block stack. Reads /sys only; never opens a device.

use crate::catalogue;
use crate::collector::{Collector, Context, ItemError, Sample};
use crate::metrics::MetricSet;
use crate::sysfs::topology::{DeviceKind, Topology};
use crate::validate::{Invalid, MAX_ENTRIES, check_entries, check_interval};
use regex_lite::Regex;
use serde::Deserialize;
use std::time::Duration;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Says which drives are solid-state where the kernel and the drive can't: the first entry
    /// whose `devices` expression matches a drive's kernel name decides.
    pub solid_state: Vec<MediaOverride>,
}

/// One `collectors.topology.solid_state` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MediaOverride {
    /// A regular expression searched in the kernel name (`^vd[a-z]+$`).
    pub devices: String,
    /// Whether those drives are solid-state.
    pub solid_state: bool,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            solid_state: Vec::new(),
        }
    }
}

impl TopologyConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        check_entries(
            &format!("{key}.solid_state"),
            self.solid_state.len(),
            MAX_ENTRIES,
        )?;
        for (i, o) in self.solid_state.iter().enumerate() {
            if let Err(e) = Regex::new(&o.devices) {
                return Err(Invalid::new(
                    format!("{key}.solid_state[{i}].devices"),
                    format!("{:?} is not a regular expression: {e}", o.devices),
                ));
            }
        }
        Ok(())
    }
}

/// How the daemon decided whether a drive is solid-state (the `source` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaSource {
    /// `collectors.topology.solid_state` in the config.
    Config,
    /// The drive's own SMART report: a rotation rate, or "Solid State Device".
    Smart,
    /// An NVMe namespace.
    Nvme,
    /// The kernel's rotational flag.
    Rotational,
    /// A virtual disk (virtio, Xen) that passes discards: its rotational flag means nothing
    /// (virtio reports 1 on SSD-backed hosts), and a thin, TRIM-able volume is treated as flash.
    VirtualDiscard,
}

impl MediaSource {
    pub fn as_str(self) -> &'static str {
        match self {
            MediaSource::Config => "config",
            MediaSource::Smart => "smart",
            MediaSource::Nvme => "nvme",
            MediaSource::Rotational => "rotational",
            MediaSource::VirtualDiscard => "virtual_discard",
        }
    }
}

/// What is known of one drive for the solid-state decision.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MediaClues {
    pub kind: Option<DeviceKind>,
    pub rotational: Option<bool>,
    pub discard_max_bytes: Option<u64>,
    /// SMART's rotation rate: 0 for "Solid State Device", rpm otherwise.
    pub smart_rotation_rate: Option<u64>,
    /// The first matching config entry's answer.
    pub configured: Option<bool>,
    /// The drive is a Xen virtual disk (`xvd*`), which the kernel files under "other".
    pub xen: bool,
}

/// Whether a drive is solid-state, and from what; `None` when nothing says. Pure. The order:
/// the operator's word, then the drive's own, then what its kind implies, then the kernel's flag
/// (believed for real disks; for virtual disks only a 0 is believed, and one that passes
/// discards counts as flash).
pub fn solid_state(c: &MediaClues) -> Option<(bool, MediaSource)> {
    if let Some(v) = c.configured {
        return Some((v, MediaSource::Config));
    }
    if let Some(rpm) = c.smart_rotation_rate {
        return Some((rpm == 0, MediaSource::Smart));
    }
    if c.kind == Some(DeviceKind::Nvme) {
        return Some((true, MediaSource::Nvme));
    }
    let is_virtual = c.kind == Some(DeviceKind::Virtio) || c.xen;
    match c.rotational {
        Some(false) => Some((true, MediaSource::Rotational)),
        _ if is_virtual && c.discard_max_bytes.is_some_and(|b| b > 0) => {
            Some((true, MediaSource::VirtualDiscard))
        }
        Some(true) => Some((false, MediaSource::Rotational)),
        None => None,
    }
}

pub struct TopologyCollector {
    interval: Duration,
    overrides: Vec<(Regex, bool)>,
}

impl TopologyCollector {
    pub fn new(cfg: &TopologyConfig) -> anyhow::Result<Self> {
        let overrides = cfg
            .solid_state
            .iter()
            .map(|o| Ok((Regex::new(&o.devices)?, o.solid_state)))
            .collect::<anyhow::Result<_>>()?;
        Ok(TopologyCollector {
            interval: cfg.interval,
            overrides,
        })
    }
}

/// Builds a topology's series. Pure, so the golden tests and benchmarks can call it.
pub fn topology_metrics(t: &Topology, m: &mut MetricSet) {
    for d in t.devices.values() {
        let dev = d.name.as_str();
        let l = [("device", dev)];
        if d.is_drive() {
            m.family(&catalogue::DISK_INFO).push(
                &[
                    ("device", dev),
                    ("kind", d.kind().as_str()),
                    ("model", d.model.as_deref().unwrap_or("")),
                    ("serial", d.serial.as_deref().unwrap_or("")),
                    ("firmware", d.firmware.as_deref().unwrap_or("")),
                    ("wwn", d.wwn.as_deref().unwrap_or("")),
                    (
                        "rotational",
                        match d.rotational {
                            Some(true) => "1",
                            Some(false) => "0",
                            None => "",
                        },
                    ),
                ],
                1.0,
            );
        } else {
            m.family(&catalogue::DISK_LAYER_INFO).push(
                &[
                    ("device", dev),
                    ("kind", d.kind().as_str()),
                    ("parent", d.parent.as_deref().unwrap_or("")),
                    ("dm_name", d.dm_name.as_deref().unwrap_or("")),
                    ("dm_target", d.dm_target().unwrap_or("")),
                    ("md_level", d.md_level.as_deref().unwrap_or("")),
                ],
                1.0,
            );
        }
        for s in &d.slaves {
            m.family(&catalogue::DISK_LAYER_SLAVE_INFO)
                .push(&[("device", dev), ("slave", s)], 1.0);
        }
        if d.kind() == DeviceKind::Partition {
            continue; // partitions share their disk's queue limits
        }
        m.family(&catalogue::DISK_SIZE_BYTES)
            .push_opt(&l, d.size_bytes.map(|v| v as f64));
        m.family(&catalogue::DISK_ROTATIONAL)
            .push_opt(&l, d.rotational.map(|b| if b { 1.0 } else { 0.0 }));
        m.family(&catalogue::DISK_LOGICAL_BLOCK_SIZE_BYTES)
            .push_opt(&l, d.logical_block_size.map(|v| v as f64));
        m.family(&catalogue::DISK_PHYSICAL_BLOCK_SIZE_BYTES)
            .push_opt(&l, d.physical_block_size.map(|v| v as f64));
        m.family(&catalogue::DISK_DISCARD_MAX_BYTES)
            .push_opt(&l, d.discard_max_bytes.map(|v| v as f64));
        m.family(&catalogue::DISK_DISCARD_GRANULARITY_BYTES)
            .push_opt(&l, d.discard_granularity.map(|v| v as f64));
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        m.family(&catalogue::DISK_WRITE_CACHE_VOLATILE)
            .push_opt(&l, d.write_cache.map(flag));
        m.family(&catalogue::DISK_FUA).push_opt(&l, d.fua.map(flag));
    }
}

#[async_trait::async_trait]
impl Collector for TopologyCollector {
    fn name(&self) -> &'static str {
        "topology"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        // The one reading of /sys/block this cycle; the other collectors share it.
        let t = ctx.read_topology().await?;
        let mut s = Sample::default();
        topology_metrics(&t, &mut s.metrics);
        for d in t.drives() {
            let clues = MediaClues {
                kind: Some(d.kind()),
                rotational: d.rotational,
                discard_max_bytes: d.discard_max_bytes,
                smart_rotation_rate: ctx.shared.rotation_rate(&d.name),
                configured: self
                    .overrides
                    .iter()
                    .find(|(re, _)| re.is_match(&d.name))
                    .map(|(_, v)| *v),
                xen: d.name.starts_with("xvd"),
            };
            if let Some((v, source)) = solid_state(&clues) {
                s.metrics.family(&catalogue::DISK_SOLID_STATE).push(
                    &[("device", d.name.as_str()), ("source", source.as_str())],
                    if v { 1.0 } else { 0.0 },
                );
            }
        }
        s.errors = t
            .warnings
            .iter()
            .map(|w| ItemError::new(w.name.clone(), w.to_string()))
            .collect();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// node_exporter's sysfs fixture has dm-7 ("vg0-root") and md arrays with no `slaves/`
    /// directory: they are layers with their dm name and md level, never physical drives.
    #[test]
    fn dm_and_md_without_slaves_are_layers_with_their_names_not_drives() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("block");
        let file = |p: &str, text: &str| {
            let p = block.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        file("dm-7/dev", "252:7\n");
        file("dm-7/size", "8192\n");
        file("dm-7/dm/name", "vg0-root\n");
        file("dm-7/dm/uuid", "LVM-OHTLKPGhQ\n");
        file("md0/dev", "9:0\n");
        file("md0/size", "8192\n");
        file("md0/md/level", "raid1\n");
        file("sda/dev", "8:0\n");
        file("sda/size", "8192\n");
        let t = Topology::read(dir.path()).unwrap();
        let drives: Vec<&str> = t.drives().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(drives, vec!["sda"]);
        assert!(t.physical_drives("dm-7").is_empty());
        let mut m = MetricSet::new();
        topology_metrics(&t, &mut m);
        let info = &catalogue::DISK_INFO;
        let layer = &catalogue::DISK_LAYER_INFO;
        assert_eq!(m.value(info.name, &[("device", "sda")]), Some(1.0));
        assert_eq!(m.value(info.name, &[("device", "dm-7")]), None);
        assert_eq!(m.value(info.name, &[("device", "md0")]), None);
        assert_eq!(
            m.value(
                layer.name,
                &[
                    ("device", "dm-7"),
                    ("dm_name", "vg0-root"),
                    ("dm_target", "lvm")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(
            m.value(
                layer.name,
                &[("device", "md0"), ("kind", "md"), ("md_level", "raid1")]
            ),
            Some(1.0)
        );
    }

    fn clues(kind: DeviceKind, rotational: Option<bool>, discard: Option<u64>) -> MediaClues {
        MediaClues {
            kind: Some(kind),
            rotational,
            discard_max_bytes: discard,
            ..MediaClues::default()
        }
    }

    #[test]
    fn every_source_of_the_solid_state_decision_in_its_order() {
        use DeviceKind::*;
        use MediaSource as S;
        type Case = (&'static str, MediaClues, Option<(bool, MediaSource)>);
        let cases: Vec<Case> = vec![
            (
                "sata ssd",
                clues(Scsi, Some(false), Some(1)),
                Some((true, S::Rotational)),
            ),
            (
                "sata hdd",
                clues(Scsi, Some(true), Some(0)),
                Some((false, S::Rotational)),
            ),
            (
                "sata hdd passing discards (SMR) is still a disk",
                clues(Scsi, Some(true), Some(1)),
                Some((false, S::Rotational)),
            ),
            (
                "nvme whatever the flag",
                clues(Nvme, Some(true), None),
                Some((true, S::Nvme)),
            ),
            (
                "virtio on an ssd host reports 1 but passes discards",
                clues(Virtio, Some(true), Some(1 << 30)),
                Some((true, S::VirtualDiscard)),
            ),
            (
                "virtio without discard: the flag",
                clues(Virtio, Some(true), Some(0)),
                Some((false, S::Rotational)),
            ),
            (
                "virtio saying 0 is believed",
                clues(Virtio, Some(false), Some(0)),
                Some((true, S::Rotational)),
            ),
            ("nothing known", clues(Other, None, None), None),
            (
                "xen disk passing discards",
                MediaClues {
                    xen: true,
                    ..clues(Other, Some(true), Some(4096))
                },
                Some((true, S::VirtualDiscard)),
            ),
            (
                "smart's rotation rate beats the kernel",
                MediaClues {
                    smart_rotation_rate: Some(7200),
                    ..clues(Scsi, Some(false), Some(1))
                },
                Some((false, S::Smart)),
            ),
            (
                "smart says solid state behind a raid controller reporting 1",
                MediaClues {
                    smart_rotation_rate: Some(0),
                    ..clues(Scsi, Some(true), Some(0))
                },
                Some((true, S::Smart)),
            ),
            (
                "the config beats everything",
                MediaClues {
                    configured: Some(false),
                    smart_rotation_rate: Some(0),
                    ..clues(Nvme, Some(false), Some(1))
                },
                Some((false, S::Config)),
            ),
        ];
        for (what, c, want) in cases {
            assert_eq!(solid_state(&c), want, "{what}");
        }
    }

    #[test]
    fn a_bad_override_expression_names_its_entry() {
        let cfg = TopologyConfig {
            solid_state: vec![
                MediaOverride {
                    devices: "^vd".into(),
                    solid_state: true,
                },
                MediaOverride {
                    devices: "(".into(),
                    solid_state: false,
                },
            ],
            ..TopologyConfig::default()
        };
        let e = cfg.validate("collectors.topology").unwrap_err();
        assert_eq!(e.key, "collectors.topology.solid_state[1].devices");
    }
}
