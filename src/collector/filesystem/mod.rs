//! Filesystem collector: its config, one sample (the selected mounts, each statvfs'd through the
//! stuck-mount guard, `statfs::guard`, mapped through the block stack to its drives) and the
//! series it builds. statvfs never runs on the async workers here: it can hang forever.

pub mod select;
pub mod thresholds;
pub mod untrimmed;

use crate::catalogue;
use crate::collector::{Collector, Context, ItemError, Sample};
use crate::door::{MAX_STATFS_THREADS, reserved_tasks};
use crate::history::service::Record;
use crate::history::{FsKey, FsLayers, FsSample, LayerRow};
use crate::layers::{Layer, Layers, Limit, StackDevice};
use crate::metrics::MetricSet;
use crate::procfs::mountinfo::{read_mountinfo, strip_rootfs};
use crate::space::{MountSpace, SpaceInput};
use crate::statfs::guard::{
    MAX_HUNG_STATFS, MAX_STALLED_STATFS, STATFS_WORKERS, Shortage, StatGuard, StatResult,
    StatvfsError,
};
use crate::statfs::{FsStat, StatSource};
use crate::sysfs::cgroup::{TaskLimit, read_task_limit};
use crate::sysfs::topology::Topology;
use crate::time::unix_now;
use crate::validate::{Invalid, MAX_ENTRIES, check_duration, check_entries, check_interval};
use anyhow::Context as _;
use regex_lite::Regex;
use select::{
    DEFAULT_FS_TYPES_EXCLUDE, DEFAULT_MOUNT_POINTS_EXCLUDE, Filters, SelectedMount, select_mounts,
};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FilesystemConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long one statvfs may take before its mount is reported stuck.
    #[serde(with = "humantime_serde")]
    pub statfs_timeout: Duration,
    /// Mount points to leave out: regular expressions, searched in the path (anchor them); one
    /// match excludes. A single string is accepted too (node_exporter's form).
    #[serde(deserialize_with = "one_or_many")]
    pub mount_points_exclude: Vec<String>,
    /// When set, only mount points matching one of these regular expressions are reported.
    #[serde(deserialize_with = "opt_one_or_many")]
    pub mount_points_include: Option<Vec<String>>,
    /// Filesystem types to leave out.
    pub fs_types_exclude: Vec<String>,
    /// When set, only these filesystem types are reported (exclusion still applies).
    pub fs_types_include: Option<Vec<String>>,
    /// Low-space alert thresholds, exported per mount for the alert rules to join on.
    pub alert_thresholds: thresholds::AlertThresholds,
}

impl Default for FilesystemConfig {
    fn default() -> Self {
        FilesystemConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            statfs_timeout: Duration::from_secs(5),
            mount_points_exclude: DEFAULT_MOUNT_POINTS_EXCLUDE
                .iter()
                .map(|s| s.to_string())
                .collect(),
            mount_points_include: None,
            fs_types_exclude: DEFAULT_FS_TYPES_EXCLUDE
                .iter()
                .map(|s| s.to_string())
                .collect(),
            fs_types_include: None,
            alert_thresholds: thresholds::AlertThresholds::default(),
        }
    }
}

impl FilesystemConfig {
    /// The compiled mount filters (`validate` has checked the patterns, naming the bad key).
    pub fn filters(&self) -> Result<Filters, regex_lite::Error> {
        Filters::new(
            &self.mount_points_exclude,
            self.mount_points_include.as_deref(),
            &self.fs_types_exclude,
            self.fs_types_include.as_deref(),
        )
    }

    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        check_duration(
            &format!("{key}.statfs_timeout"),
            self.statfs_timeout,
            Duration::from_millis(10),
            Duration::from_secs(300),
        )?;
        for (field, list) in [
            ("mount_points_exclude", Some(&self.mount_points_exclude)),
            ("mount_points_include", self.mount_points_include.as_ref()),
            ("fs_types_exclude", Some(&self.fs_types_exclude)),
            ("fs_types_include", self.fs_types_include.as_ref()),
        ] {
            if let Some(list) = list {
                check_entries(&format!("{key}.{field}"), list.len(), MAX_ENTRIES)?;
            }
        }
        check_regexes(key, "mount_points_exclude", &self.mount_points_exclude)?;
        if let Some(inc) = &self.mount_points_include {
            check_regexes(key, "mount_points_include", inc)?;
        }
        self.alert_thresholds
            .validate(&format!("{key}.alert_thresholds"))
    }
}

fn check_regexes(key: &str, field: &str, list: &[String]) -> Result<(), Invalid> {
    for (i, re) in list.iter().enumerate() {
        Regex::new(re).map_err(|e| {
            Invalid::new(
                format!("{key}.{field}[{i}]"),
                format!("bad regular expression {re:?}: {e}"),
            )
        })?;
    }
    Ok(())
}

/// A regular expression or a list of them (the single form is node_exporter's).
struct Patterns(Vec<String>);

impl<'de> Deserialize<'de> for Patterns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Patterns;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a regular expression or a list of them")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Patterns, E> {
                Ok(Patterns(vec![v.to_string()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Patterns, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(Patterns(out))
            }
        }
        d.deserialize_any(V)
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Patterns::deserialize(d)?.0)
}

fn opt_one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    Ok(Option::<Patterns>::deserialize(d)?.map(|p| p.0))
}

pub struct FilesystemCollector {
    cfg: FilesystemConfig,
    filters: Filters,
    guard: StatGuard,
    source: Option<StatSource>,
    thresholds: thresholds::Compiled,
    /// Per mount point: when a sample last went to the history store.
    history_sent: std::collections::HashMap<String, f64>,
    /// Per mount point: the "freed but not trimmed" estimate's state.
    untrimmed: std::collections::HashMap<String, untrimmed::Untrimmed>,
}

impl FilesystemCollector {
    pub fn new(cfg: &FilesystemConfig) -> anyhow::Result<Self> {
        Ok(FilesystemCollector {
            cfg: cfg.clone(),
            filters: cfg
                .filters()
                .context("collectors.filesystem: a mount point pattern does not compile")?,
            guard: StatGuard::new(STATFS_WORKERS, MAX_HUNG_STATFS, MAX_STALLED_STATFS),
            source: None,
            untrimmed: Default::default(),
            history_sent: Default::default(),
            thresholds: cfg.alert_thresholds.compile()?,
        })
    }
}

#[async_trait::async_trait]
impl Collector for FilesystemCollector {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn next_delay(&mut self) -> Duration {
        self.cfg.interval
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        if self.source.is_none() {
            self.source = Some(StatSource::from_roots(
                ctx.roots.statvfs_fixture.as_deref(),
            )?);
        }
        let source = self.source.clone().unwrap_or(StatSource::Kernel);
        // Only the history keys on UUIDs: no directory walk when it is off.
        let (table, uuids, limit) = read_tables(ctx.roots.clone(), ctx.history.is_some()).await?;
        // A bad line is a fault of the table, not of a mount: one item, the file.
        let path = table.path.display().to_string();
        let mut errors: Vec<ItemError> = table
            .errors
            .iter()
            .map(|e| ItemError::new(path.clone(), format!("{path}: {e}")))
            .collect();
        // Without /sys the mounts are still worth reporting, just not mapped to drives.
        let topo = ctx.topology().await.unwrap_or_else(|e| {
            errors.push(ItemError::new(
                "block topology",
                format!("block topology (mounts not mapped to drives): {e:#}"),
            ));
            Arc::new(Topology::default())
        });
        // Unreadable, the limit is unknown: the guard's own bounds still hold.
        let limit = limit.unwrap_or_else(|e| {
            errors.push(ItemError::new(
                TASK_LIMIT_ITEM,
                format!("{TASK_LIMIT_ITEM}: {e} (statfs threads not budgeted against it)"),
            ));
            None
        });
        let mounts = table.mounts;
        let selected = select_mounts(&mounts, &self.filters, &topo);
        // Block-device filesystems first, network and FUSE ones last: on a first sample nothing
        // is known of any mount, and the guard tries new mounts in this order.
        let mut order: Vec<&SelectedMount> = selected.iter().collect();
        order.sort_by_key(|m| m.device.is_none());
        let jobs = order
            .into_iter()
            .map(|m| {
                (
                    m.info.mount_point.clone(),
                    ctx.roots.in_rootfs(&m.info.mount_path),
                )
            })
            .collect();
        let batch = self
            .guard
            .run(&ctx.door, &source, jobs, self.cfg.statfs_timeout)
            .await;
        let mut results = batch.results;
        let mut s = Sample::default();
        let held = self.guard.outstanding().len();
        let no_thread = results
            .values()
            .filter(|r| matches!(r, StatResult::NoThread))
            .count();
        thread_metrics(&mut s.metrics, held, no_thread);
        // One fault for all the mounts left without a thread, not one per mount: it is one
        // cause, and its count changes from sample to sample.
        if let Some(shortage) = &batch.shortage {
            errors.push(ItemError::new(
                TASK_LIMIT_ITEM,
                shortage_message(shortage, no_thread, held, limit.as_ref()),
            ));
        }
        let layers = ctx.shared.layers();
        let mut spaces = Vec::with_capacity(selected.len());
        let mut untrimmed = std::collections::HashMap::with_capacity(selected.len());
        let mut untrimmed_ratios = std::collections::HashMap::with_capacity(selected.len());
        for m in &selected {
            let r = results
                .remove(&m.info.mount_point)
                .unwrap_or(StatResult::NotStarted);
            if let StatResult::Done(Ok(st)) = &r {
                let own = Limit {
                    layer: Layer::Filesystem,
                    name: String::new(),
                    avail_bytes: st.avail_bytes(),
                    size_bytes: Some(st.df_size_bytes()),
                };
                let space = mount_space(m, own, &topo);
                let (avail, stack) = history_layers(&space, layers.as_deref());
                spaces.push(space);
                let now_unix = unix_now();
                if self.history_due(ctx, &m.info.mount_point, now_unix) {
                    let uuid = m.device.as_ref().and_then(|d| uuids.get(d).cloned());
                    s.records
                        .extend(fs_records(m, st, uuid, avail, stack, now_unix as i64));
                }
                let newest = newest_discard(ctx, &topo, m);
                let used = st.size_bytes().saturating_sub(st.free_bytes());
                let (state, estimate) =
                    untrimmed::advance(self.untrimmed.get(&m.info.mount_point), newest, used);
                untrimmed.insert(m.info.mount_point.clone(), state);
                if st.size_bytes() > 0 {
                    untrimmed_ratios.insert(
                        m.info.mount_point.clone(),
                        estimate as f64 / st.size_bytes() as f64,
                    );
                }
                untrimmed_metric(&mut s.metrics, m, estimate);
            }
            threshold_metrics(
                &mut s.metrics,
                &m.info.mount_point,
                self.thresholds.for_mount(&m.info.mount_point),
            );
            match filesystem_metrics(&mut s.metrics, m, r, &topo) {
                Err(StatvfsError::NoThread { .. }) | Ok(()) => {} // in the one fault above
                Err(e) => errors.push(ItemError::new(m.info.mount_point.clone(), e.to_string())),
            }
        }
        // The effective free space is rendered as this sample is published, from these mounts
        // and the layers' latest reading then (see `space`).
        s.space = Some(SpaceInput::Mounts(Arc::new(spaces)));
        self.untrimmed = untrimmed;
        ctx.shared.set_untrimmed_ratios(untrimmed_ratios);
        self.history_sent
            .retain(|mp, _| selected.iter().any(|m| &m.info.mount_point == mp));
        s.errors = errors;
        Ok(s)
    }
}

impl FilesystemCollector {
    /// Whether a sample of this mount goes to the history store now (a raw interval since the
    /// last one, and a store at all); if so, the time is noted as sent.
    fn history_due(&mut self, ctx: &Context, mount_point: &str, now_unix: f64) -> bool {
        let due = ctx.history.as_ref().is_some_and(|h| {
            self.history_sent
                .get(mount_point)
                .is_none_or(|t| now_unix - t >= h.raw_interval().as_secs_f64())
        });
        if due {
            self.history_sent.insert(mount_point.to_string(), now_unix);
        }
        due
    }
}

/// The mount table, the filesystem UUIDs (when `want_uuids`) and the daemon's task limit.
/// /proc is in-memory and does not hang, unlike statvfs: a plain blocking task, not the door
/// (the statvfs calls that can hang go through the guard). So is /dev/disk/by-uuid (udev's
/// links), which gives the filesystem UUIDs the history keys on. The task limit (the cgroup's
/// pids.max) is read each sample for the fault that names it (the door budgets the guard's
/// threads against it).
async fn read_tables(
    roots: Arc<crate::Roots>,
    want_uuids: bool,
) -> anyhow::Result<(
    crate::procfs::mountinfo::MountTable,
    std::collections::HashMap<String, String>,
    Result<Option<TaskLimit>, crate::sysfs::cgroup::CgroupError>,
)> {
    // Not the door: in-memory reads (see above) that cannot hang.
    let tables = tokio::task::spawn_blocking(move || {
        let mut table = read_mountinfo(&roots.proc)?;
        strip_rootfs(&mut table.mounts, &roots.rootfs);
        let uuids = if want_uuids {
            fs_uuids(&roots.in_rootfs(std::path::Path::new("/dev/disk/by-uuid")))
        } else {
            Default::default()
        };
        let limit = read_task_limit(&roots.proc, &roots.sys);
        Ok::<_, crate::procfs::mountinfo::ReadError>((table, uuids, limit))
    })
    .await??;
    Ok(tables)
}

/// The guard's own gauges: threads held by hung calls, mounts left without a thread.
fn thread_metrics(metrics: &mut MetricSet, held: usize, no_thread: usize) {
    metrics
        .family(&catalogue::FILESYSTEM_STATFS_HUNG_THREADS)
        .push(&[], held as f64);
    metrics
        .family(&catalogue::FILESYSTEM_STATFS_NO_THREAD_MOUNTS)
        .push(&[], no_thread as f64);
}

/// What one sample of a mount sends to the history store: its figures, and the stack under
/// it for the report (sent with every sample so a layer gone, a mount moved off a thin
/// volume, leaves the store too). `avail` is the effective figure: a thin pool filling under
/// a half-empty ext4 fills the mount's forecast too.
fn fs_records(
    m: &SelectedMount,
    st: &FsStat,
    uuid: Option<String>,
    avail: u64,
    stack: Vec<LayerRow>,
    t: i64,
) -> [Record; 2] {
    let key = FsKey {
        mountpoint: m.info.mount_point.clone(),
        uuid,
    };
    let device = m.device.clone().unwrap_or_else(|| m.info.source.clone());
    [
        Record::Fs(FsSample {
            key: key.clone(),
            device: device.clone(),
            t,
            size_bytes: st.size_bytes(),
            avail_bytes: avail,
            free_bytes: st.free_bytes(),
            files_free: (st.files > 0).then_some(st.ffree),
        }),
        Record::FsLayers(FsLayers {
            key,
            device,
            t,
            layers: stack,
        }),
    ]
}

/// The newest discard any drive under the mount's filesystem received (diskstats).
fn newest_discard(ctx: &Context, topo: &Topology, m: &SelectedMount) -> Option<f64> {
    m.device.as_deref().and_then(|d| {
        topo.physical_drives(d)
            .iter()
            .filter_map(|drive| ctx.shared.disk_activity(&drive.name))
            .filter_map(|a| a.last_discard_unix)
            .reduce(f64::max)
    })
}

/// The "freed but not trimmed" estimate of a mount, in bytes.
fn untrimmed_metric(metrics: &mut MetricSet, m: &SelectedMount, estimate: u64) {
    metrics
        .family(&catalogue::FILESYSTEM_FREED_UNTRIMMED_BYTES)
        .push_opt(
            &[
                ("mountpoint", m.info.mount_point.as_str()),
                (
                    "device",
                    m.device.as_deref().unwrap_or(m.info.source.as_str()),
                ),
                ("fstype", m.info.fstype.as_str()),
            ],
            Some(estimate as f64),
        );
}

/// The item of the fault "statfs threads short under the task limit".
const TASK_LIMIT_ITEM: &str = "statfs task limit";

/// What the fault of mounts left without a thread says: how many, the limit, and why.
fn shortage_message(
    shortage: &Shortage,
    mounts: usize,
    held: usize,
    limit: Option<&TaskLimit>,
) -> String {
    let why = match shortage {
        Shortage::Limit => format!(
            "no thread left for them (statvfs calls may hold {MAX_STATFS_THREADS} threads at most)"
        ),
        Shortage::Refused(e) => format!("no thread for them: {e}"),
    };
    let limit = match limit {
        Some(l) => format!(
            "{l}; {} tasks kept free for the rest of the daemon",
            reserved_tasks(l.max)
        ),
        None => "task limit unknown".to_string(),
    };
    format!(
        "{TASK_LIMIT_ITEM}: {mounts} mounts not sampled, {why} ({limit}; {held} hung statvfs calls hold a thread each)"
    )
}

/// Filesystem UUIDs by the kernel name of the device they are on, from udev's
/// `/dev/disk/by-uuid` links; empty where there is none (a container without /dev, a fixture).
fn fs_uuids(dir: &std::path::Path) -> std::collections::HashMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            let dev = target.file_name()?.to_str()?.to_string();
            Some((dev, e.file_name().to_str()?.to_string()))
        })
        .collect()
}

/// The low-space thresholds of one mount point, one series per severity.
pub fn threshold_metrics(
    set: &mut MetricSet,
    mount_point: &str,
    (warning, critical): (thresholds::Threshold, thresholds::Threshold),
) {
    for (severity, t) in [("warning", warning), ("critical", critical)] {
        let l = [("mountpoint", mount_point), ("severity", severity)];
        set.family(&catalogue::FILESYSTEM_ALERT_THRESHOLD_RATIO)
            .push(&l, t.used_ratio);
        set.family(&catalogue::FILESYSTEM_ALERT_THRESHOLD_AVAIL_BYTES)
            .push(&l, t.avail_bytes as f64);
        set.family(&catalogue::FILESYSTEM_ALERT_THRESHOLD_FULL_SECONDS)
            .push(&l, t.full_within.as_secs_f64());
    }
}

/// A mount whose statvfs answered, as the mounts' effective free space is made from it.
fn mount_space(m: &SelectedMount, own: Limit, topo: &Topology) -> MountSpace {
    MountSpace {
        mountpoint: m.info.mount_point.clone(),
        device: m.device.clone().unwrap_or_else(|| m.info.source.clone()),
        fstype: m.info.fstype.clone(),
        source: m.info.source.clone(),
        stack: m
            .device
            .as_deref()
            .map(|d| topo.layers(d).into_iter().map(StackDevice::from).collect())
            .unwrap_or_default(),
        own,
    }
}

/// The mount's effective free space and its stack of layers (the filesystem first) as the
/// history keeps them, from the layers collector's last reading; the filesystem's own figure
/// when there is none. The stack is empty when no layer is under the mount.
fn history_layers(m: &MountSpace, layers: Option<&Layers>) -> (u64, Vec<LayerRow>) {
    let (limits, e) = m.limits(layers);
    let rows = if limits.is_empty() {
        Vec::new()
    } else {
        std::iter::once(&m.own)
            .chain(&limits)
            .map(|l| LayerRow {
                layer: l.layer.as_str().to_string(),
                name: l.name.clone(),
                avail_bytes: l.avail_bytes,
                size_bytes: l.size_bytes,
                limiting: l.layer == e.layer && l.name == e.name,
            })
            .collect()
    };
    (e.avail_bytes, rows)
}

/// Builds one mount's series; the sizes only when its statvfs answered, else the reason.
pub fn filesystem_metrics(
    set: &mut MetricSet,
    m: &SelectedMount,
    r: StatResult,
    topo: &Topology,
) -> Result<(), StatvfsError> {
    let mp = m.info.mount_point.as_str();
    let device = m.device.as_deref().unwrap_or(m.info.source.as_str());
    let l = [
        ("mountpoint", mp),
        ("device", device),
        ("fstype", m.info.fstype.as_str()),
    ];
    set.family(&catalogue::FILESYSTEM_INFO).push(
        &[
            ("mountpoint", mp),
            ("device", device),
            ("fstype", m.info.fstype.as_str()),
            ("mount_source", m.info.source.as_str()),
        ],
        1.0,
    );
    let stuck = matches!(r, StatResult::Stuck);
    set.family(&catalogue::FILESYSTEM_STUCK)
        .push(&l, if stuck { 1.0 } else { 0.0 });
    let failed = !matches!(r, StatResult::Done(Ok(_)));
    set.family(&catalogue::FILESYSTEM_DEVICE_ERROR)
        .push(&l, if failed { 1.0 } else { 0.0 });
    set.family(&catalogue::FILESYSTEM_DISCARD_MOUNT_OPTION)
        .push(
            &l,
            if m.info.has_option("discard") {
                1.0
            } else {
                0.0
            },
        );
    if let Some(dev) = &m.device {
        set.family(&catalogue::FILESYSTEM_TRIM_CAPABLE).push_opt(
            &l,
            topo.trim_capable(dev).map(|b| if b { 1.0 } else { 0.0 }),
        );
        for d in topo.physical_drives(dev) {
            set.family(&catalogue::FILESYSTEM_DRIVE_INFO).push(
                &[
                    ("mountpoint", mp),
                    ("device", device),
                    ("fstype", m.info.fstype.as_str()),
                    ("drive", d.name.as_str()),
                ],
                1.0,
            );
        }
    }
    let st = r.into_stat(mp)?;
    let f = st.frsize as f64;
    set.family(&catalogue::FILESYSTEM_SIZE_BYTES)
        .push(&l, st.blocks as f64 * f);
    set.family(&catalogue::FILESYSTEM_FREE_BYTES)
        .push(&l, st.bfree as f64 * f);
    set.family(&catalogue::FILESYSTEM_AVAIL_BYTES)
        .push(&l, st.bavail as f64 * f);
    set.family(&catalogue::FILESYSTEM_FILES)
        .push(&l, st.files as f64);
    set.family(&catalogue::FILESYSTEM_FILES_FREE)
        .push(&l, st.ffree as f64);
    // From the host's mount table, not statvfs's ST_RDONLY: a sandboxed unit
    // (`ProtectSystem=strict`) sees every mount read-only. "ro" in the superblock options is also
    // what errors=remount-ro leaves after an I/O error.
    let ro = m.info.has_option("ro");
    set.family(&catalogue::FILESYSTEM_READONLY)
        .push(&l, if ro { 1.0 } else { 0.0 });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::mountinfo::parse_mountinfo;
    use std::path::Path;

    #[test]
    fn mount_point_filters_take_a_string_or_a_list() {
        let one: FilesystemConfig =
            serde_yaml_ng::from_str("mount_points_include: '^/data$'\n").unwrap();
        assert_eq!(one.mount_points_include, Some(vec!["^/data$".to_string()]));
        let many: FilesystemConfig = serde_yaml_ng::from_str(
            "mount_points_exclude: ['^/boot($|/)', '^/snap/']\nmount_points_include: ['^/srv/', '^/$']\n",
        )
        .unwrap();
        assert_eq!(many.mount_points_exclude.len(), 2);
        let f = many.filters().unwrap();
        let (m, _) = parse_mountinfo(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /boot rw - ext4 /dev/sda2 rw\n\
             3 1 8:3 / /srv/db rw - xfs /dev/sdb1 rw\n4 1 8:4 / /home rw - ext4 /dev/sda4 rw\n",
        );
        let sel = select_mounts(&m, &f, &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/", "/srv/db"]);
    }

    #[test]
    fn bad_regex_is_a_config_error_naming_the_key() {
        let cfg = FilesystemConfig {
            mount_points_exclude: vec!["^/ok".into(), "(".into()],
            ..Default::default()
        };
        let e = cfg.validate("collectors.filesystem").unwrap_err();
        assert_eq!(e.key, "collectors.filesystem.mount_points_exclude[1]");
    }

    fn write(path: &Path, text: &str) {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    /// Ten 4 KiB blocks, half free: a statvfs answer where the sizes are not the point.
    const SMALL: &str =
        "  frsize: 4096\n  blocks: 10\n  bfree: 5\n  bavail: 5\n  files: 1\n  ffree: 1\n";

    /// A fixture host: its mount table, what statvfs answers there (else the kernel, under
    /// `rootfs`) and an empty /sys/block.
    fn host(mountinfo: &str, statvfs: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("proc/self/mountinfo"), mountinfo);
        if let Some(st) = statvfs {
            write(&dir.path().join("statvfs.yaml"), st);
        }
        std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
        dir
    }

    async fn sample_tree(dir: &Path, cfg: FilesystemConfig) -> Sample {
        let roots = crate::Roots::fixture(dir);
        let ctx = Context::new(roots, std::time::Duration::from_secs(60));
        let mut c = FilesystemCollector::new(&cfg).unwrap();
        c.sample(&ctx).await.unwrap()
    }

    #[tokio::test]
    async fn a_mount_whose_statvfs_fails_loses_only_its_sizes() {
        let dir = host(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:60 / /denied rw - fuse.sshfs db@backup:/x rw\n\
             3 1 0:61 / /gone rw - nfs4 nas:/export rw\n\
             4 1 0:62 / /hung rw - nfs4 nas:/dead rw\n",
            Some(
                "/:\n  frsize: 4096\n  blocks: 1000\n  bfree: 500\n  bavail: 400\n  files: 64\n  \
                 ffree: 60\n/denied:\n  errno: 13\n/hung:\n  hang: true\n",
            ),
        );
        let cfg = FilesystemConfig {
            statfs_timeout: Duration::from_millis(300),
            ..Default::default()
        };
        let s = sample_tree(dir.path(), cfg).await;
        let m = &s.metrics;
        let size = |mp: &str| m.value("ssdwatch_filesystem_size_bytes", &[("mountpoint", mp)]);
        assert_eq!(size("/"), Some(4096.0 * 1000.0));
        assert_eq!(
            m.value("ssdwatch_filesystem_avail_bytes", &[("mountpoint", "/")]),
            Some(4096.0 * 400.0)
        );
        for mp in ["/denied", "/gone", "/hung"] {
            assert_eq!(size(mp), None, "{mp} has no size");
            assert_eq!(
                m.value("ssdwatch_filesystem_device_error", &[("mountpoint", mp)]),
                Some(1.0)
            );
        }
        let stuck = |mp: &str| m.value("ssdwatch_filesystem_stuck", &[("mountpoint", mp)]);
        assert_eq!(stuck("/hung"), Some(1.0));
        assert_eq!(
            m.value("ssdwatch_filesystem_statfs_hung_threads", &[]),
            Some(1.0)
        );
        assert_eq!(stuck("/denied"), Some(0.0));
        assert_eq!(stuck("/"), Some(0.0));
        let errs: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
        let errs = errs.join("\n");
        assert!(
            errs.contains("statvfs /denied: Permission denied"),
            "{errs}"
        );
        assert!(
            errs.contains("statvfs /gone: No such file or directory"),
            "{errs}"
        );
        assert!(errs.contains("statvfs /hung: stuck"), "{errs}");
        assert_eq!(s.errors.len(), 3, "{errs}");
    }

    #[tokio::test]
    async fn real_statvfs_under_the_rootfs_path_and_enoent_for_a_missing_mount_point() {
        let dir = host(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /vanished rw - ext4 /dev/sda2 rw\n",
            None,
        );
        std::fs::create_dir_all(dir.path().join("rootfs")).unwrap();
        let s = sample_tree(dir.path(), FilesystemConfig::default()).await;
        // "/" is <dir>/rootfs: whatever filesystem the temp dir lives on, as statvfs(2) says.
        let st = nix::sys::statvfs::statvfs(&dir.path().join("rootfs")).unwrap();
        let m = &s.metrics;
        assert_eq!(
            m.value("ssdwatch_filesystem_size_bytes", &[("mountpoint", "/")]),
            Some(st.blocks() as f64 * st.fragment_size() as f64)
        );
        assert_eq!(
            m.value("ssdwatch_filesystem_files", &[("mountpoint", "/")]),
            Some(st.files() as f64)
        );
        assert_eq!(
            m.value(
                "ssdwatch_filesystem_size_bytes",
                &[("mountpoint", "/vanished")]
            ),
            None
        );
        assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
        assert_eq!(s.errors[0].item, "/vanished");
        assert!(s.errors[0].message.contains("/vanished"), "{:?}", s.errors);
    }

    #[tokio::test]
    async fn read_only_comes_from_the_mount_table_not_from_our_own_sandboxed_view() {
        // statvfs answers alike for all three (a unit with ProtectSystem=strict would see ST_RDONLY
        // everywhere, which is why that flag is not read at all).
        let dir = host(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 8:2 / /data rw - ext4 /dev/sda2 ro,errors=remount-ro\n\
             3 1 8:3 / /ro rw,ro - ext4 /dev/sda3 rw\n",
            Some(&format!("/:\n{SMALL}/data:\n{SMALL}/ro:\n{SMALL}")),
        );
        let s = sample_tree(dir.path(), FilesystemConfig::default()).await;
        let ro = |mp: &str| {
            s.metrics
                .value("ssdwatch_filesystem_readonly", &[("mountpoint", mp)])
        };
        assert_eq!(
            (ro("/"), ro("/data"), ro("/ro")),
            (Some(0.0), Some(1.0), Some(1.0))
        );
    }

    #[tokio::test]
    async fn bad_mountinfo_lines_are_one_fault_of_the_table_naming_file_and_line() {
        let dir = host(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\ngarbage\n3 1 x:1 / /a rw - ext4 /dev/sdb rw\n",
            Some(&format!("/:\n{SMALL}")),
        );
        let s = sample_tree(dir.path(), FilesystemConfig::default()).await;
        let file = dir.path().join("proc/self/mountinfo").display().to_string();
        let msgs: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
        assert!(s.errors.iter().all(|e| e.item == file), "{msgs:?}");
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs[0].starts_with(&format!("{file}: line 2: ")),
            "{msgs:?}"
        );
        assert!(
            msgs[1].contains("line 3: major is not a number"),
            "{msgs:?}"
        );
        let size = s
            .metrics
            .value("ssdwatch_filesystem_size_bytes", &[("mountpoint", "/")]);
        assert_eq!(size, Some(40960.0), "the good line is still reported");
    }

    #[tokio::test]
    async fn the_info_series_carries_the_mount_source_node_exporter_calls_device() {
        // The NFS server is gone: the mount keeps its identity all the same.
        let dir = host(
            "1 0 254:1 / / rw - ext4 /dev/vda1 rw\n\
             2 1 253:0 / /srv/db rw - xfs /dev/mapper/vg0-data rw\n\
             3 1 0:61 / /mnt/nas rw - nfs4 server:/export rw\n",
            Some(&format!(
                "/:\n{SMALL}/srv/db:\n{SMALL}/mnt/nas:\n  errno: 107\n"
            )),
        );
        let block = dir.path().join("sys/block");
        write(&block.join("vda/dev"), "254:0\n");
        write(&block.join("vda/vda1/partition"), "1\n");
        write(&block.join("vda/vda1/dev"), "254:1\n");
        write(&block.join("dm-0/dev"), "253:0\n");
        write(&block.join("dm-0/dm/name"), "vg0-data\n");
        let s = sample_tree(dir.path(), FilesystemConfig::default()).await;
        let info = |mp: &str, device: &str, fstype: &str, source: &str| {
            s.metrics.value(
                "ssdwatch_filesystem_info",
                &[
                    ("mountpoint", mp),
                    ("device", device),
                    ("fstype", fstype),
                    ("mount_source", source),
                ],
            )
        };
        assert_eq!(info("/", "vda1", "ext4", "/dev/vda1"), Some(1.0));
        assert_eq!(
            info("/srv/db", "dm-0", "xfs", "/dev/mapper/vg0-data"),
            Some(1.0)
        );
        // Not block-backed: device falls back to the source, as on the other series.
        assert_eq!(
            info("/mnt/nas", "server:/export", "nfs4", "server:/export"),
            Some(1.0)
        );
        // device on the info series is the one the other series carry, so they join.
        assert_eq!(
            s.metrics.value(
                "ssdwatch_filesystem_size_bytes",
                &[("mountpoint", "/srv/db"), ("device", "dm-0")]
            ),
            Some(40960.0)
        );
    }

    #[test]
    fn a_mounts_history_records_carry_its_effective_free_space_and_its_stack() {
        let (m, _) = parse_mountinfo(
            "1 0 8:1 / /srv/db rw - xfs /dev/sdb1 rw\n2 0 0:40 / /mnt/nfs rw - nfs4 srv:/x rw\n",
        );
        let mount = |i: usize, device: Option<&str>| SelectedMount {
            info: m[i].clone(),
            device: device.map(str::to_string),
        };
        let st = FsStat {
            frsize: 4096,
            blocks: 1000,
            bfree: 400,
            bavail: 300,
            files: 0,
            ffree: 0,
            readonly: false,
        };
        let pool = LayerRow {
            layer: "thin_pool".into(),
            name: "vg0-pool".into(),
            avail_bytes: 1 << 20,
            size_bytes: Some(1 << 30),
            limiting: true,
        };
        let [fs, layers] = fs_records(
            &mount(0, Some("dm-3")),
            &st,
            Some("u-1".into()),
            1 << 20,
            vec![pool.clone()],
            1_800_000_000,
        );
        let Record::Fs(fs) = fs else { panic!("{fs:?}") };
        assert_eq!(fs.key.mountpoint, "/srv/db");
        assert_eq!(fs.key.uuid.as_deref(), Some("u-1"));
        assert_eq!(fs.device, "dm-3");
        assert_eq!((fs.size_bytes, fs.free_bytes), (4096 * 1000, 4096 * 400));
        // The pool's figure, not the filesystem's own 300 blocks.
        assert_eq!(fs.avail_bytes, 1 << 20);
        // No inodes (files 0): unknown, not 0 free.
        assert_eq!(fs.files_free, None);
        let Record::FsLayers(layers) = layers else {
            panic!("{layers:?}")
        };
        assert_eq!((layers.key, layers.t), (fs.key, 1_800_000_000));
        assert_eq!(layers.layers, [pool]);
        // Not block-backed: the mount's source names it.
        let [Record::Fs(nfs), _] = fs_records(&mount(1, None), &st, None, 0, Vec::new(), 0) else {
            panic!("not an Fs record first")
        };
        assert_eq!(nfs.device, "srv:/x");
    }
}
