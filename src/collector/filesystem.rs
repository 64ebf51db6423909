//! Filesystem collector: statvfs of every real mount, mapped through the block stack to its drives.
//! statvfs can hang forever (dead NFS, a wedged FUSE server), so it never runs on the async
//! workers: a few short-lived threads take the mounts, a call past the timeout marks the mount
//! stuck, and a stuck mount is not retried until its hung call returns, so threads never pile up.

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use crate::metrics::MetricSet;
use crate::procfs::mountinfo::{MountInfo, read_mountinfo};
use crate::sysfs::topology::Topology;
use regex::Regex;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DEFAULT_MOUNT_POINTS_EXCLUDE: &str =
    "^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)";

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

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FilesystemConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long one statvfs may take before its mount is reported stuck.
    #[serde(with = "humantime_serde")]
    pub statfs_timeout: Duration,
    /// Mount points to leave out (regular expression, matched against the whole path).
    pub mount_points_exclude: String,
    /// When set, only mount points matching this regular expression are reported.
    pub mount_points_include: Option<String>,
    /// Filesystem types to leave out.
    pub fs_types_exclude: Vec<String>,
    /// When set, only these filesystem types are reported (exclusion still applies).
    pub fs_types_include: Option<Vec<String>>,
}

impl Default for FilesystemConfig {
    fn default() -> Self {
        FilesystemConfig {
            enabled: true,
            interval: Duration::from_secs(15),
            statfs_timeout: Duration::from_secs(5),
            mount_points_exclude: DEFAULT_MOUNT_POINTS_EXCLUDE.to_string(),
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
        Regex::new(&self.mount_points_exclude).map_err(|e| {
            Invalid::new(
                format!("{key}.mount_points_exclude"),
                format!("bad regular expression: {e}"),
            )
        })?;
        if let Some(inc) = &self.mount_points_include {
            Regex::new(inc).map_err(|e| {
                Invalid::new(
                    format!("{key}.mount_points_include"),
                    format!("bad regular expression: {e}"),
                )
            })?;
        }
        Ok(())
    }
}

/// What statvfs(2) says about a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FsStat {
    pub frsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    #[serde(default)]
    pub readonly: bool,
}

/// One entry of a `statvfs.yaml` fixture: an answer, or a call that never returns.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum FixtureEntry {
    Hang {
        #[allow(dead_code)]
        hang: bool,
    },
    Stat(FsStat),
}

/// Where statvfs answers come from: the kernel, or a fixture file (test seam).
#[derive(Debug, Clone)]
pub enum StatSource {
    Kernel,
    Fixture(Arc<BTreeMap<String, Option<FsStat>>>),
}

impl StatSource {
    pub fn from_roots(fixture: Option<&Path>) -> anyhow::Result<Self> {
        let Some(p) = fixture else {
            return Ok(StatSource::Kernel);
        };
        let text = std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
        let raw: BTreeMap<String, FixtureEntry> =
            serde_yaml_ng::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        Ok(StatSource::Fixture(Arc::new(
            raw.into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        match v {
                            FixtureEntry::Hang { .. } => None,
                            FixtureEntry::Stat(s) => Some(s),
                        },
                    )
                })
                .collect(),
        )))
    }

    /// Blocking: may never return (that is the point of the guard around it).
    fn statvfs(&self, mount_point: &str, path: &Path) -> std::io::Result<FsStat> {
        match self {
            StatSource::Kernel => {
                let s = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
                Ok(FsStat {
                    frsize: s.fragment_size(),
                    blocks: s.blocks(),
                    bfree: s.blocks_free(),
                    bavail: s.blocks_available(),
                    files: s.files(),
                    ffree: s.files_free(),
                    readonly: s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
                })
            }
            StatSource::Fixture(map) => match map.get(mount_point) {
                Some(Some(s)) => Ok(*s),
                Some(None) => loop {
                    std::thread::park();
                },
                None => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
            },
        }
    }
}

/// Result of one mount's statvfs in a batch.
#[derive(Debug)]
pub enum StatResult {
    Done(std::io::Result<FsStat>),
    /// The call (this one or an earlier one) has not returned within the timeout.
    Stuck,
    /// Never started: every worker was held by a stuck mount until the deadline.
    NotStarted,
}

/// Runs statvfs on many mounts with bounded threads and a deadline, never blocking the caller's
/// runtime worker: the waiting is async. `outstanding` holds mounts whose call hasn't returned.
pub struct StatGuard {
    outstanding: Arc<Mutex<HashSet<String>>>,
    max_workers: usize,
}

impl StatGuard {
    pub fn new(max_workers: usize) -> Self {
        StatGuard {
            outstanding: Arc::new(Mutex::new(HashSet::new())),
            max_workers: max_workers.max(1),
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
        if n == 0 {
            return results;
        }
        let queue = Arc::new(Mutex::new(queue));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..self.max_workers.min(n) {
            let queue = queue.clone();
            let tx = tx.clone();
            let outstanding = self.outstanding.clone();
            let source = source.clone();
            let spawned = std::thread::Builder::new()
                .name("ssdwatch-statfs".into())
                .spawn(move || {
                    loop {
                        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                        let Some((mp, path)) = job else { break };
                        outstanding
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(mp.clone());
                        let r = source.statvfs(&mp, &path);
                        outstanding
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&mp);
                        if tx.send((mp, r)).is_err() {
                            break; // the batch is over; its caller moved on
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
    exclude: Regex,
    include: Option<Regex>,
    fs_exclude: HashSet<String>,
    fs_include: Option<HashSet<String>>,
}

impl Filters {
    pub fn new(cfg: &FilesystemConfig) -> anyhow::Result<Self> {
        Ok(Filters {
            exclude: Regex::new(&cfg.mount_points_exclude)?,
            include: cfg
                .mount_points_include
                .as_deref()
                .map(Regex::new)
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
    let mut best: BTreeMap<(u32, u32), &MountInfo> = BTreeMap::new();
    for m in mounts.iter().filter(|m| filters.wants(m)) {
        let key = (m.major, m.minor);
        let better = match best.get(&key) {
            None => true,
            Some(cur) => {
                let rank =
                    |x: &MountInfo| (x.root != "/", x.mount_point.len(), x.mount_point.clone());
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
            guard: StatGuard::new(8),
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
        let (mounts, mut errors, topo) = tokio::task::spawn_blocking(move || {
            let (mounts, errors) = read_mountinfo(&roots.proc)?;
            // Without /sys the mounts are still worth reporting, just not mapped to drives.
            let topo = Topology::read(&roots.sys).unwrap_or_default();
            anyhow::Ok((mounts, errors, topo))
        })
        .await??;
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
        for m in &selected {
            let r = results
                .remove(&m.info.mount_point)
                .unwrap_or(StatResult::NotStarted);
            if let Some(e) = filesystem_metrics(&mut s.metrics, m, &r, &topo) {
                errors.push(e);
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
                "statvfs {mp}: not run (all statfs threads held by stuck mounts)"
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
    let ro = st.readonly || m.info.mount_options.iter().any(|o| o == "ro");
    set.gauge(
        "ssdwatch_filesystem_readonly",
        "Whether the filesystem is mounted read-only.",
    )
    .push(&l, if ro { 1.0 } else { 0.0 });
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::mountinfo::parse_mountinfo;

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
    fn include_filters_narrow_the_selection() {
        let m =
            mounts("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n5 1 8:17 / /data rw - xfs /dev/sdb1 rw\n");
        let cfg = FilesystemConfig {
            mount_points_include: Some("^/data$".into()),
            ..Default::default()
        };
        let sel = select_mounts(&m, &Filters::new(&cfg).unwrap(), &Topology::default());
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].info.mount_point, "/data");
    }

    #[test]
    fn bad_regex_is_a_config_error_naming_the_key() {
        let cfg = FilesystemConfig {
            mount_points_exclude: "(".into(),
            ..Default::default()
        };
        let e = cfg.validate("collectors.filesystem").unwrap_err();
        assert_eq!(e.key, "collectors.filesystem.mount_points_exclude");
    }

    #[tokio::test]
    async fn hung_mount_is_stuck_and_not_retried_while_others_answer() {
        let mut map = BTreeMap::new();
        map.insert(
            "/ok".to_string(),
            Some(FsStat {
                frsize: 4096,
                blocks: 10,
                ..Default::default()
            }),
        );
        map.insert("/hung".to_string(), None);
        let src = StatSource::Fixture(Arc::new(map));
        let guard = StatGuard::new(4);
        let jobs = || {
            vec![
                ("/ok".to_string(), PathBuf::from("/ok")),
                ("/hung".to_string(), PathBuf::from("/hung")),
            ]
        };
        let r = guard.run(&src, jobs(), Duration::from_millis(100)).await;
        assert!(matches!(r["/ok"], StatResult::Done(Ok(_))));
        assert!(matches!(r["/hung"], StatResult::Stuck));
        // Second round: the hung call is still outstanding, so no new thread is started for it.
        let r = guard.run(&src, jobs(), Duration::from_millis(100)).await;
        assert!(matches!(r["/hung"], StatResult::Stuck));
        assert_eq!(guard.outstanding().len(), 1);
    }
}
