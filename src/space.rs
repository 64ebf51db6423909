//! Each mount's effective free space as series, made from what two collectors last read: the
//! filesystem collector's statvfs of each mount and the layers collector's reading of the thin
//! pools, btrfs and ZFS under them. The snapshot store renders these whenever either publishes,
//! with the collector's own series, so a scrape never pairs a mount's effective figure with an
//! older reading of its layers than the layers' own series show. No I/O here.

use crate::catalogue;
use crate::layers::{Layers, Limit, MountView, StackDevice, effective};
use crate::metrics::MetricSet;
use std::sync::Arc;
use std::time::Instant;

/// One mount as the filesystem collector last read it: its labels, the block devices under it
/// (top first) and what statvfs said it has.
#[derive(Debug, Clone, PartialEq)]
pub struct MountSpace {
    pub mountpoint: String,
    /// The `device` label: its block device's kernel name, else the mount's source.
    pub device: String,
    pub fstype: String,
    /// The mount table's source (a ZFS dataset's name for ZFS).
    pub source: String,
    pub stack: Vec<StackDevice>,
    /// The filesystem's own room: statvfs's available bytes and df's size.
    pub own: Limit,
}

impl MountSpace {
    /// Every layer's limit under the mount in `layers` (bottom-most last), and the effective
    /// one: the least of those and the filesystem's own.
    pub fn limits(&self, layers: Option<&Layers>) -> (Vec<Limit>, Limit) {
        let limits = layers
            .map(|l| {
                l.limits(&MountView {
                    fstype: &self.fstype,
                    source: &self.source,
                    stack: &self.stack,
                })
            })
            .unwrap_or_default();
        let e = effective(self.own.avail_bytes, &limits);
        (limits, e)
    }
}

/// What one collector's sample gives towards the effective free space.
#[derive(Debug, Clone)]
pub enum SpaceInput {
    /// The filesystem collector's mounts whose statvfs answered.
    Mounts(Arc<Vec<MountSpace>>),
    /// The layers collector's reading, and until when it counts (a stopped layers collector's
    /// last reading is not used for ever).
    Layers(Arc<Layers>, Instant),
}

/// The latest input of each kind, with the collector that gave it.
#[derive(Debug, Default)]
pub(crate) struct SpaceInputs {
    mounts: Option<(&'static str, Arc<Vec<MountSpace>>)>,
    layers: Option<(&'static str, Arc<Layers>, Instant)>,
}

impl SpaceInputs {
    /// Takes `from`'s newest input in place of its last.
    pub(crate) fn update(&mut self, from: &'static str, input: SpaceInput) {
        match input {
            SpaceInput::Mounts(m) => self.mounts = Some((from, m)),
            SpaceInput::Layers(l, until) => self.layers = Some((from, l, until)),
        }
    }

    /// A failed sample of `from`: what it gave goes, as its own series do. Whether anything
    /// went.
    pub(crate) fn forget(&mut self, from: &'static str) -> bool {
        let mut gone = false;
        if self.mounts.as_ref().is_some_and(|(f, _)| *f == from) {
            self.mounts = None;
            gone = true;
        }
        if self.layers.as_ref().is_some_and(|(f, _, _)| *f == from) {
            self.layers = None;
            gone = true;
        }
        gone
    }

    /// The layers while their reading counts at `now`.
    pub(crate) fn layers(&self, now: Instant) -> Option<&Layers> {
        self.layers
            .as_ref()
            .filter(|(_, _, until)| now < *until)
            .map(|(_, l, _)| l.as_ref())
    }

    /// Each mount's effective free space, the layer that limits it and every layer's room.
    pub(crate) fn metrics(&self, now: Instant) -> MetricSet {
        let mut set = MetricSet::new();
        let layers = self.layers(now);
        for m in self.mounts.iter().flat_map(|(_, m)| m.iter()) {
            let (limits, e) = m.limits(layers);
            let mp = m.mountpoint.as_str();
            set.family(&catalogue::FILESYSTEM_EFFECTIVE_AVAIL_BYTES)
                .push(
                    &[
                        ("mountpoint", mp),
                        ("device", m.device.as_str()),
                        ("fstype", m.fstype.as_str()),
                    ],
                    e.avail_bytes as f64,
                );
            set.family(&catalogue::FILESYSTEM_LIMITING_LAYER_INFO).push(
                &[
                    ("mountpoint", mp),
                    ("layer", e.layer.as_str()),
                    ("name", e.name.as_str()),
                ],
                1.0,
            );
            for l in std::iter::once(&m.own).chain(&limits) {
                set.family(&catalogue::FILESYSTEM_LAYER_AVAIL_BYTES).push(
                    &[
                        ("mountpoint", mp),
                        ("layer", l.layer.as_str()),
                        ("name", l.name.as_str()),
                    ],
                    l.avail_bytes as f64,
                );
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Layer, thin};
    use std::time::Duration;

    fn text(i: &SpaceInputs, now: Instant) -> String {
        let mut out = String::new();
        crate::render::render_families(&mut out, i.metrics(now).families());
        out
    }

    /// A mount on thin volume vg-db, 1 GiB free as its filesystem sees it, and a pool of
    /// 64 KiB blocks with `free` of them free.
    fn inputs(free: u64, valid: Instant) -> SpaceInputs {
        let mut i = SpaceInputs::default();
        i.update(
            "filesystem",
            SpaceInput::Mounts(Arc::new(vec![MountSpace {
                mountpoint: "/srv/db".into(),
                device: "dm-3".into(),
                fstype: "ext4".into(),
                source: "/dev/mapper/vg-db".into(),
                stack: vec![StackDevice {
                    name: "dm-3".into(),
                    dm_name: Some("vg-db".into()),
                }],
                own: Limit {
                    layer: Layer::Filesystem,
                    name: String::new(),
                    avail_bytes: 1 << 30,
                    size_bytes: Some(2 << 30),
                },
            }])),
        );
        let (pools, _) = thin::pools(
            "p: 0 2097152 thin-pool 253:0 253:1 128 0 0\nvg-db: 0 4194304 thin 253:2 1\n",
            &format!(
                "p: 0 2097152 thin-pool 1 1/10 {}/16384 - rw\n",
                16384 - free
            ),
            |_| Some("p".to_string()),
        );
        i.update(
            "layers",
            SpaceInput::Layers(
                Arc::new(Layers {
                    thin_pools: pools,
                    ..Default::default()
                }),
                valid,
            ),
        );
        i
    }

    #[test]
    fn a_stale_or_failed_reading_is_not_used() {
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let i = inputs(100, later);
        let effective = "ssdwatch_filesystem_effective_avail_bytes{mountpoint=\"/srv/db\",device=\"dm-3\",fstype=\"ext4\"}";
        assert!(
            text(&i, now).contains(&format!("{effective} {}", 100 * 65536)),
            "{}",
            text(&i, now)
        );
        // The layers' reading has expired (their collector stopped): the filesystem's own.
        assert!(text(&i, later).contains(&format!("{effective} {}", 1u64 << 30)));
        // A failed layers sample: its reading goes; a failed filesystem sample: the mounts go.
        let mut i = inputs(100, later);
        assert!(i.forget("layers"));
        assert!(text(&i, now).contains(&format!("{effective} {}", 1u64 << 30)));
        assert!(!i.forget("layers"));
        assert!(i.forget("filesystem"));
        assert_eq!(text(&i, now), "");
    }
}
