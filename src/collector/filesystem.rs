//! Filesystem collector: statvfs of every real mount, mapped through the block stack to its drives.
//! statvfs can hang forever (dead NFS, a wedged FUSE server), so it never runs on the async
//! workers: a few short-lived threads take the mounts, a call past the timeout marks the mount
//! stuck, and a stuck mount is not retried until its hung call returns, so threads never pile up.

use crate::collector::{Collector, Context, ItemError, Sample};
use crate::metrics::MetricSet;
use crate::procfs::mountinfo::{MountInfo, read_mountinfo};
use crate::statfs::{FsStat, StatSource};
use crate::sysfs::topology::Topology;
use crate::validate::{Invalid, check_interval};
use regex::{Regex, RegexSet};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// node_exporter's default, one alternative per entry so users can append to it.
const DEFAULT_MOUNT_POINTS_EXCLUDE: &[&str] = &[
    "^/(dev|proc|sys)($|/)",
    "^/run/credentials/.+",
    "^/var/lib/docker/.+",
    "^/var/lib/containers/storage/.+",
];

/// Filesystems that hold no user data, excluded by default.
const DEFAULT_FS_TYPES_EXCLUDE: &[&str] = &[
    "autofs",
    "binfmt_misc",
    "bpf",
    "cgroup",
    "cgroup2",
    "configfs",
    "debugfs",
    "devpts",
    "devtmpfs",
    "efivarfs",
    "fusectl",
    "hugetlbfs",
    "iso9660",
    "mqueue",
    "nsfs",
    "overlay",
    "proc",
    "procfs",
    "pstore",
    "ramfs",
    "rpc_pipefs",
    "securityfs",
    "selinuxfs",
    "squashfs",
    "sysfs",
    "tmpfs",
    "tracefs",
];

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
        }
    }
}

impl FilesystemConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        if self.statfs_timeout < Duration::from_millis(10) {
            return Err(Invalid::new(
                format!("{key}.statfs_timeout"),
                "must be at least 10ms",
            ));
        }
        check_regexes(key, "mount_points_exclude", &self.mount_points_exclude)?;
        if let Some(inc) = &self.mount_points_include {
            check_regexes(key, "mount_points_include", inc)?;
        }
        Ok(())
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

/// Result of one mount's statvfs in a batch.
#[derive(Debug)]
pub enum StatResult {
    Done(std::io::Result<FsStat>),
    /// The call (this one or an earlier one) has not returned within the timeout.
    Stuck,
    /// Never started: every worker was held by a hung call until the deadline, or the limit of
    /// hung calls is reached.
    NotStarted,
}

/// Runs statvfs on many mounts with bounded threads and a deadline, never blocking the caller's
/// runtime worker: the waiting is async. `outstanding` holds mounts whose call hasn't returned.
///
/// Threads: at most `max_workers` per batch, and they end with the batch unless a call hangs.
/// A hung thread stays with its mount (one per mount, never retried meanwhile); once `max_hung`
/// calls hang no new one starts, so even a flood of dead NFS mounts costs a bounded number of
/// threads (a systemd unit's TasksMax counts them).
pub struct StatGuard {
    outstanding: Arc<Mutex<HashSet<String>>>,
    max_workers: usize,
    max_hung: usize,
}

/// Threads taking mounts in one sample.
pub const STATFS_WORKERS: usize = 8;
/// Hung statvfs calls tolerated before no new call is started.
pub const MAX_HUNG_STATFS: usize = 32;

impl StatGuard {
    pub fn new(max_workers: usize, max_hung: usize) -> Self {
        StatGuard {
            outstanding: Arc::new(Mutex::new(HashSet::new())),
            max_workers: max_workers.max(1),
            max_hung: max_hung.max(1),
        }
    }

    /// Mount points whose statvfs call is still running.
    pub fn outstanding(&self) -> HashSet<String> {
        self.outstanding
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub async fn run(
        &self,
        source: &StatSource,
        jobs: Vec<(String, PathBuf)>,
        timeout: Duration,
    ) -> HashMap<String, StatResult> {
        let mut results = HashMap::with_capacity(jobs.len());
        let busy = self.outstanding();
        let mut queue = VecDeque::new();
        for (mp, path) in jobs {
            if busy.contains(&mp) {
                results.insert(mp, StatResult::Stuck); // not retried until the hung call returns
            } else {
                queue.push_back((mp, path));
            }
        }
        let n = queue.len();
        // Each worker of this batch may hang too: never more than max_hung threads in all.
        let workers = self
            .max_workers
            .min(n)
            .min(self.max_hung.saturating_sub(busy.len()));
        if workers == 0 {
            for (mp, _) in queue {
                results.insert(mp, StatResult::NotStarted);
            }
            return results;
        }
        let queue = Arc::new(Mutex::new(queue));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..workers {
            let queue = queue.clone();
            let tx = tx.clone();
            let outstanding = self.outstanding.clone();
            let source = source.clone();
            let spawned = std::thread::Builder::new()
                .name("ssdwatch-statfs".into())
                .spawn(move || {
                    loop {
                        // Taking a job and marking it outstanding happen under the queue lock,
                        // so the deadline sweep finds every mount either queued or running.
                        let job = {
                            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                            let job = q.pop_front();
                            if let Some((mp, _)) = &job {
                                outstanding
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .insert(mp.clone());
                            }
                            job
                        };
                        let Some((mp, path)) = job else { break };
                        let r = source.statvfs(&mp, &path);
                        // Send and clear under the outstanding lock: whoever looks sees the mount
                        // either running or answered, never neither. A send fails once the batch
                        // is over (its answer is then dropped; the next sample asks again).
                        let sent = {
                            let mut o = outstanding.lock().unwrap_or_else(|e| e.into_inner());
                            let sent = tx.send((mp.clone(), r)).is_ok();
                            o.remove(&mp);
                            sent
                        };
                        if !sent {
                            break;
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("cannot start a statfs thread: {e}");
            }
        }
        drop(tx);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut got = 0;
        while got < n {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((mp, r))) => {
                    results.insert(mp, StatResult::Done(r));
                    got += 1;
                }
                Ok(None) | Err(_) => break,
            }
        }
        // Whatever is left: still queued (never started) or running past the deadline (stuck).
        let left: Vec<(String, PathBuf)> = queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for (mp, _) in left {
            results.insert(mp, StatResult::NotStarted);
        }
        for mp in self.outstanding() {
            results.entry(mp).or_insert(StatResult::Stuck);
        }
        // Calls that finished between the deadline and now.
        while let Ok((mp, r)) = rx.try_recv() {
            results.insert(mp, StatResult::Done(r));
        }
        results
    }
}

/// A mount selected for reporting.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedMount {
    pub info: MountInfo,
    /// Kernel name of the block device behind it, when it is block-backed.
    pub device: Option<String>,
}

/// Compiled mount filters.
pub struct Filters {
    exclude: RegexSet,
    include: Option<RegexSet>,
    fs_exclude: HashSet<String>,
    fs_include: Option<HashSet<String>>,
}

impl Filters {
    pub fn new(cfg: &FilesystemConfig) -> anyhow::Result<Self> {
        Ok(Filters {
            exclude: RegexSet::new(&cfg.mount_points_exclude)?,
            include: cfg
                .mount_points_include
                .as_ref()
                .map(RegexSet::new)
                .transpose()?,
            fs_exclude: cfg.fs_types_exclude.iter().cloned().collect(),
            fs_include: cfg
                .fs_types_include
                .as_ref()
                .map(|v| v.iter().cloned().collect()),
        })
    }

    pub fn wants(&self, m: &MountInfo) -> bool {
        if self.exclude.is_match(&m.mount_point) || self.fs_exclude.contains(&m.fstype) {
            return false;
        }
        if let Some(inc) = &self.include
            && !inc.is_match(&m.mount_point)
        {
            return false;
        }
        if let Some(fs) = &self.fs_include
            && !fs.contains(&m.fstype)
        {
            return false;
        }
        true
    }
}

/// Picks the mounts to report: filtered, and each filesystem once (bind mounts share major:minor;
/// the mount of the filesystem's root wins, then the shortest mount point).
pub fn select_mounts(
    mounts: &[MountInfo],
    filters: &Filters,
    topo: &Topology,
) -> Vec<SelectedMount> {
    // A mount over another at the same path hides it: statvfs on the path sees the later (top)
    // one only, so the hidden one is not reported (not even when the top one is filtered out).
    let mut top: HashMap<&str, usize> = HashMap::new();
    for (i, m) in mounts.iter().enumerate() {
        top.insert(m.mount_point.as_str(), i);
    }
    let visible = mounts
        .iter()
        .enumerate()
        .filter(|(i, m)| top.get(m.mount_point.as_str()) == Some(i))
        .map(|(_, m)| m);
    let mut best: BTreeMap<(u32, u32), &MountInfo> = BTreeMap::new();
    for m in visible.filter(|m| filters.wants(m)) {
        let key = (m.major, m.minor);
        let better = match best.get(&key) {
            None => true,
            Some(cur) => {
                fn rank(x: &MountInfo) -> (bool, usize, &str) {
                    (x.root != "/", x.mount_point.len(), x.mount_point.as_str())
                }
                rank(m) < rank(cur)
            }
        };
        if better {
            best.insert(key, m);
        }
    }
    let mut out: Vec<SelectedMount> = best
        .into_values()
        .map(|m| SelectedMount {
            device: resolve_device(m, topo),
            info: m.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.info.mount_point.cmp(&b.info.mount_point));
    out
}

/// The kernel name of the block device behind a mount: by major:minor, else by the source path
/// (btrfs reports an anonymous device number; /dev/mapper names map to dm devices).
pub fn resolve_device(m: &MountInfo, topo: &Topology) -> Option<String> {
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

pub struct FilesystemCollector {
    cfg: FilesystemConfig,
    filters: Filters,
    guard: StatGuard,
    source: Option<StatSource>,
}

impl FilesystemCollector {
    pub fn new(cfg: &FilesystemConfig) -> anyhow::Result<Self> {
        Ok(FilesystemCollector {
            cfg: cfg.clone(),
            filters: Filters::new(cfg)?,
            guard: StatGuard::new(STATFS_WORKERS, MAX_HUNG_STATFS),
            source: None,
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
        let roots = ctx.roots.clone();
        // /proc is in-memory and does not hang, unlike statvfs: a plain blocking task.
        let table = tokio::task::spawn_blocking(move || read_mountinfo(&roots.proc)).await??;
        let mut errors: Vec<ItemError> = table.errors.into_iter().map(Into::into).collect();
        // Without /sys the mounts are still worth reporting, just not mapped to drives.
        let topo = ctx.topology().await.unwrap_or_else(|e| {
            errors.push(ItemError::new(
                "block topology",
                format!("block topology (mounts not mapped to drives): {e:#}"),
            ));
            Arc::new(Topology::default())
        });
        let mounts = table.mounts;
        let selected = select_mounts(&mounts, &self.filters, &topo);
        let jobs = selected
            .iter()
            .map(|m| {
                (
                    m.info.mount_point.clone(),
                    ctx.roots.in_rootfs(Path::new(&m.info.mount_point)),
                )
            })
            .collect();
        let mut results = self.guard.run(&source, jobs, self.cfg.statfs_timeout).await;
        let mut s = Sample::default();
        s.metrics
            .gauge(
                "ssdwatch_filesystem_statfs_hung_threads",
                "Threads blocked in a statvfs call past the timeout (one per hung mount at most).",
            )
            .push(&[], self.guard.outstanding().len() as f64);
        for m in &selected {
            let r = results
                .remove(&m.info.mount_point)
                .unwrap_or(StatResult::NotStarted);
            if let Some(e) = filesystem_metrics(&mut s.metrics, m, &r, &topo) {
                errors.push(ItemError::new(m.info.mount_point.clone(), e));
            }
        }
        s.errors = errors;
        Ok(s)
    }
}

/// Renders one mount's series; returns an error message when its statvfs failed.
pub fn filesystem_metrics(
    set: &mut MetricSet,
    m: &SelectedMount,
    r: &StatResult,
    topo: &Topology,
) -> Option<String> {
    let mp = m.info.mount_point.as_str();
    let device = m.device.as_deref().unwrap_or(m.info.source.as_str());
    let l = [
        ("mountpoint", mp),
        ("device", device),
        ("fstype", m.info.fstype.as_str()),
    ];
    let stuck = matches!(r, StatResult::Stuck);
    set.gauge(
        "ssdwatch_filesystem_stuck",
        "Whether statvfs on the mount has not returned within the timeout (a hung NFS/FUSE mount).",
    )
    .push(&l, if stuck { 1.0 } else { 0.0 });
    let failed = !matches!(r, StatResult::Done(Ok(_)));
    set.gauge(
        "ssdwatch_filesystem_device_error",
        "Whether the last statvfs of the mount failed, hung or could not run.",
    )
    .push(&l, if failed { 1.0 } else { 0.0 });
    set.gauge(
        "ssdwatch_filesystem_discard_mount_option",
        "Whether the filesystem is mounted with the discard option (online TRIM).",
    )
    .push(
        &l,
        if m.info.has_option("discard") {
            1.0
        } else {
            0.0
        },
    );
    if let Some(dev) = &m.device {
        set.gauge(
            "ssdwatch_filesystem_trim_capable",
            "Whether every layer from the filesystem's device down to each drive passes discards.",
        )
        .push_opt(
            &l,
            topo.trim_capable(dev).map(|b| if b { 1.0 } else { 0.0 }),
        );
        for d in topo.physical_drives(dev) {
            set.gauge(
                "ssdwatch_filesystem_drive_info",
                "The filesystem lives (in part) on this physical drive; always 1. Join drive to device of drive metrics.",
            )
            .push(
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
    let st = match r {
        StatResult::Done(Ok(st)) => st,
        StatResult::Done(Err(e)) => return Some(format!("statvfs {mp}: {e}")),
        StatResult::Stuck => {
            return Some(format!(
                "statvfs {mp}: stuck (no answer within the timeout)"
            ));
        }
        StatResult::NotStarted => {
            return Some(format!(
                "statvfs {mp}: not run (statfs threads held by hung calls on other mounts)"
            ));
        }
    };
    let f = st.frsize as f64;
    set.gauge(
        "ssdwatch_filesystem_size_bytes",
        "Filesystem size in bytes.",
    )
    .push(&l, st.blocks as f64 * f);
    set.gauge(
        "ssdwatch_filesystem_free_bytes",
        "Free bytes, including those reserved for root.",
    )
    .push(&l, st.bfree as f64 * f);
    set.gauge(
        "ssdwatch_filesystem_avail_bytes",
        "Bytes available to unprivileged users.",
    )
    .push(&l, st.bavail as f64 * f);
    set.gauge("ssdwatch_filesystem_files", "Inodes in the filesystem.")
        .push(&l, st.files as f64);
    set.gauge("ssdwatch_filesystem_files_free", "Free inodes.")
        .push(&l, st.ffree as f64);
    // From the host's mount table, not ST_RDONLY: see FsStat::readonly. "ro" in the superblock
    // options is also what errors=remount-ro leaves after an I/O error.
    let ro = m.info.has_option("ro");
    set.gauge(
        "ssdwatch_filesystem_readonly",
        "Whether the filesystem is mounted read-only (mount or superblock option ro).",
    )
    .push(&l, if ro { 1.0 } else { 0.0 });
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::mountinfo::parse_mountinfo;
    use crate::statfs::FixtureAnswer;

    fn mounts(text: &str) -> Vec<MountInfo> {
        parse_mountinfo(text).0
    }

    #[test]
    fn pseudo_filesystems_are_left_out_and_bind_mounts_reported_once() {
        let m = mounts(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:5 / /proc rw - proc proc rw\n\
             3 1 0:22 / /run rw - tmpfs tmpfs rw\n\
             4 1 8:1 /srv/data /srv/data-bind rw - ext4 /dev/sda1 rw\n\
             5 1 8:17 / /var/lib/postgresql rw - xfs /dev/sdb1 rw,discard\n",
        );
        let f = Filters::new(&FilesystemConfig::default()).unwrap();
        let sel = select_mounts(&m, &f, &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/", "/var/lib/postgresql"]);
    }

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
        let f = Filters::new(&many).unwrap();
        let m = mounts(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /boot rw - ext4 /dev/sda2 rw\n\
             3 1 8:3 / /srv/db rw - xfs /dev/sdb1 rw\n4 1 8:4 / /home rw - ext4 /dev/sda4 rw\n",
        );
        let sel = select_mounts(&m, &f, &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/", "/srv/db"]);
        // The default list keeps node_exporter's meaning.
        let d = Filters::new(&FilesystemConfig::default()).unwrap();
        let m = mounts(
            "1 0 8:1 / /devices rw - ext4 /dev/sda1 rw\n2 1 8:2 / /dev/x rw - ext4 /dev/sda2 rw\n\
             3 1 8:3 / /var/lib/docker/overlay2/a rw - ext4 /dev/sda3 rw\n\
             4 1 8:4 / /var/lib/docker rw - ext4 /dev/sda4 rw\n\
             5 1 8:5 / /run/credentials/x.service rw - ext4 /dev/sda5 rw\n",
        );
        let sel = select_mounts(&m, &d, &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/devices", "/var/lib/docker"]);
    }

    #[test]
    fn a_mount_hidden_under_another_at_the_same_path_is_not_reported() {
        let m = mounts(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 8:17 / /srv/db rw - xfs /dev/sdb1 rw\n\
             3 2 8:33 / /srv/db rw - ext4 /dev/sdc1 rw\n\
             4 1 8:49 / /scratch rw - ext4 /dev/sdd1 rw\n\
             5 4 0:40 / /scratch rw - tmpfs tmpfs rw\n",
        );
        let f = Filters::new(&FilesystemConfig::default()).unwrap();
        let sel = select_mounts(&m, &f, &Topology::default());
        let got: Vec<_> = sel
            .iter()
            .map(|s| (s.info.mount_point.as_str(), s.info.source.as_str()))
            .collect();
        assert_eq!(got, vec![("/", "/dev/sda1"), ("/srv/db", "/dev/sdc1")]);
    }

    #[test]
    fn include_filters_narrow_the_selection() {
        let m =
            mounts("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n5 1 8:17 / /data rw - xfs /dev/sdb1 rw\n");
        let cfg = FilesystemConfig {
            mount_points_include: Some(vec!["^/data$".into()]),
            ..Default::default()
        };
        let sel = select_mounts(&m, &Filters::new(&cfg).unwrap(), &Topology::default());
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].info.mount_point, "/data");
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

    #[tokio::test]
    async fn hung_mount_is_stuck_and_not_retried_while_others_answer() {
        let mut map = BTreeMap::new();
        map.insert(
            "/ok".to_string(),
            FixtureAnswer::Stat(FsStat {
                frsize: 4096,
                blocks: 10,
                ..Default::default()
            }),
        );
        map.insert("/hung".to_string(), FixtureAnswer::Hang);
        let src = StatSource::Fixture(Arc::new(map));
        let guard = StatGuard::new(4, 32);
        let jobs = || {
            vec![
                ("/ok".to_string(), PathBuf::from("/ok")),
                ("/hung".to_string(), PathBuf::from("/hung")),
            ]
        };
        let r = guard.run(&src, jobs(), Duration::from_millis(300)).await;
        assert!(matches!(r["/ok"], StatResult::Done(Ok(_))));
        assert!(matches!(r["/hung"], StatResult::Stuck));
        // Second round: the hung call is still outstanding, so no new thread is started for it.
        let r = guard.run(&src, jobs(), Duration::from_millis(300)).await;
        assert!(matches!(r["/hung"], StatResult::Stuck));
        assert!(matches!(r["/ok"], StatResult::Done(Ok(_))));
        assert_eq!(guard.outstanding().len(), 1);
    }

    #[tokio::test]
    async fn more_hung_mounts_than_workers_leave_the_rest_not_started_then_stuck() {
        let mut map = BTreeMap::new();
        for i in 0..5 {
            map.insert(format!("/hung{i}"), FixtureAnswer::Hang);
        }
        let src = StatSource::Fixture(Arc::new(map));
        let guard = StatGuard::new(2, 32);
        let jobs: Vec<_> = (0..5)
            .map(|i| (format!("/hung{i}"), PathBuf::from(format!("/hung{i}"))))
            .collect();
        let mut stuck_rounds = Vec::new();
        for _ in 0..4 {
            let r = guard
                .run(&src, jobs.clone(), Duration::from_millis(300))
                .await;
            assert_eq!(r.len(), 5, "every mount gets an answer: {r:?}");
            stuck_rounds.push(
                r.values()
                    .filter(|v| matches!(v, StatResult::Stuck))
                    .count(),
            );
        }
        // Two new workers per round are taken by mounts not yet hung; never more than one per mount.
        assert_eq!(stuck_rounds, vec![2, 4, 5, 5]);
        assert_eq!(guard.outstanding().len(), 5);
    }

    #[tokio::test]
    async fn once_the_hung_limit_is_reached_no_new_call_starts() {
        let mut map = BTreeMap::new();
        for i in 0..6 {
            map.insert(format!("/hung{i}"), FixtureAnswer::Hang);
        }
        let src = StatSource::Fixture(Arc::new(map));
        let guard = StatGuard::new(8, 3);
        let jobs: Vec<_> = (0..6)
            .map(|i| (format!("/hung{i}"), PathBuf::from(format!("/hung{i}"))))
            .collect();
        for _ in 0..3 {
            let r = guard
                .run(&src, jobs.clone(), Duration::from_millis(300))
                .await;
            let stuck = r
                .values()
                .filter(|v| matches!(v, StatResult::Stuck))
                .count();
            let not_started = r
                .values()
                .filter(|v| matches!(v, StatResult::NotStarted))
                .count();
            assert_eq!((stuck, not_started), (3, 3));
        }
        assert_eq!(guard.outstanding().len(), 3);
    }

    fn write(path: &Path, text: &str) {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    async fn sample_tree(dir: &Path, cfg: FilesystemConfig) -> Sample {
        let roots = crate::Roots::fixture(dir);
        let ctx = Context {
            roots: Arc::new(roots),
            shared: Arc::new(crate::snapshot::Shared::default()),
            topology_max_age: std::time::Duration::from_secs(60),
        };
        let mut c = FilesystemCollector::new(&cfg).unwrap();
        c.sample(&ctx).await.unwrap()
    }

    #[tokio::test]
    async fn a_mount_whose_statvfs_fails_loses_only_its_sizes() {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("proc/self/mountinfo"),
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:60 / /denied rw - fuse.sshfs db@backup:/x rw\n\
             3 1 0:61 / /gone rw - nfs4 nas:/export rw\n\
             4 1 0:62 / /hung rw - nfs4 nas:/dead rw\n",
        );
        write(
            &dir.path().join("statvfs.yaml"),
            "/:\n  frsize: 4096\n  blocks: 1000\n  bfree: 500\n  bavail: 400\n  files: 64\n  ffree: 60\n\
             /denied:\n  errno: 13\n/hung:\n  hang: true\n",
        );
        std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("proc/self/mountinfo"),
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /vanished rw - ext4 /dev/sda2 rw\n",
        );
        std::fs::create_dir_all(dir.path().join("rootfs")).unwrap();
        std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("proc/self/mountinfo"),
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 8:2 / /data rw - ext4 /dev/sda2 ro,errors=remount-ro\n\
             3 1 8:3 / /ro rw,ro - ext4 /dev/sda3 rw\n",
        );
        // As a unit with ProtectSystem=strict sees it: ST_RDONLY everywhere.
        let st = "  frsize: 4096\n  blocks: 10\n  bfree: 5\n  bavail: 5\n  files: 1\n  ffree: 1\n  readonly: true\n";
        write(
            &dir.path().join("statvfs.yaml"),
            &format!("/:\n{st}/data:\n{st}/ro:\n{st}"),
        );
        std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
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

    #[test]
    fn statvfs_fixture_errors_name_the_file_and_mount() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("statvfs.yaml");
        write(&p, "/x:\n  hang: false\n");
        let e = StatSource::from_roots(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("statvfs.yaml") && e.contains("/x"), "{e}");
        write(&p, "/x:\n  frsize: many\n");
        let e = StatSource::from_roots(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("statvfs.yaml"), "{e}");
    }
}
