//! Topology collector: identity of every drive (`ssdwatch_disk_info`), block sizes, and the
//! discard support of every layer of the block stack. Reads /sys only; never opens a device.

use crate::collector::{Collector, Context, ItemError, Sample};
use crate::metrics::MetricSet;
use crate::sysfs::topology::{DeviceKind, Topology};
use crate::validate::{Invalid, check_interval};
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
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
        }
    }
}

impl TopologyConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct TopologyCollector {
    interval: Duration,
}

impl TopologyCollector {
    pub fn new(cfg: &TopologyConfig) -> anyhow::Result<Self> {
        Ok(TopologyCollector {
            interval: cfg.interval,
        })
    }
}

/// Renders a topology into series. Pure, so the golden tests and benchmarks can call it.
pub fn topology_metrics(t: &Topology, m: &mut MetricSet) {
    for d in t.devices.values() {
        let dev = d.name.as_str();
        let l = [("device", dev)];
        if d.kind() != DeviceKind::Partition && d.slaves.is_empty() {
            m.gauge(
                "ssdwatch_disk_info",
                "Identity of a physical drive (bottom of the block stack); always 1. Join on device.",
            )
            .push(
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
            m.gauge(
                "ssdwatch_block_device_info",
                "A layer of the block stack above the drives (partition, dm, md); always 1.",
            )
            .push(
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
            m.gauge(
                "ssdwatch_block_device_slave_info",
                "Edge of the block stack: device is built on slave; always 1.",
            )
            .push(&[("device", dev), ("slave", s)], 1.0);
        }
        if d.kind() == DeviceKind::Partition {
            continue; // partitions share their disk's queue limits
        }
        m.gauge(
            "ssdwatch_disk_size_bytes",
            "Size of the block device in bytes.",
        )
        .push_opt(&l, d.size_bytes.map(|v| v as f64));
        m.gauge(
            "ssdwatch_disk_rotational",
            "Whether the kernel reports the device as rotational (virtio disks report 1 even on SSDs).",
        )
        .push_opt(&l, d.rotational.map(|b| if b { 1.0 } else { 0.0 }));
        m.gauge(
            "ssdwatch_disk_logical_block_size_bytes",
            "Logical block size of the device.",
        )
        .push_opt(&l, d.logical_block_size.map(|v| v as f64));
        m.gauge(
            "ssdwatch_disk_physical_block_size_bytes",
            "Physical block size of the device.",
        )
        .push_opt(&l, d.physical_block_size.map(|v| v as f64));
        m.gauge(
            "ssdwatch_disk_discard_max_bytes",
            "Largest discard the device's queue accepts; 0 means this layer drops discards.",
        )
        .push_opt(&l, d.discard_max_bytes.map(|v| v as f64));
        m.gauge(
            "ssdwatch_disk_discard_granularity_bytes",
            "Discard granularity of the device's queue.",
        )
        .push_opt(&l, d.discard_granularity.map(|v| v as f64));
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
        s.errors = t
            .warnings
            .iter()
            .map(|w| ItemError::new(w.name.clone(), w.to_string()))
            .collect();
        Ok(s)
    }
}
