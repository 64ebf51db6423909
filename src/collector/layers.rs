//! Layers collector: the capacity below statvfs (LVM thin pools through `dmsetup`, btrfs chunk
//! allocation from /sys and one ioctl, ZFS pools and datasets through `zpool`/`zfs list -Hp`)
//! and md arrays' state, sampled off the scrape path. It shares what it read so the filesystem
//! collector gives each mount its effective free space. A command that hangs, fails or prints
//! garbage costs only its own series; nothing is run for a layer the host doesn't have.

use crate::btrfs::{self, device_stats, sysfs as btrfs_sysfs};
use crate::catalogue;
use crate::collector::{Collector, Context, ItemError, Sample};
use crate::door::{Door, Pass};
use crate::history::service::Record;
use crate::history::{LayerErrorCounts, LayerErrorKind, LayerErrorsSample};
use crate::layers::{BtrfsDevice, BtrfsSpace, Layers, thin, zfs, zpool_status};
use crate::metrics::MetricSet;
use crate::privileged::{
    DmQuery, Exit, Helper, MAX_OUTPUT, RequestKind, RunError, RunOutcome, run_bounded,
};
use crate::procfs::mountinfo::{read_mountinfo_of_type, strip_rootfs};
use crate::space::SpaceInput;
use crate::sysfs::md;
use crate::sysfs::topology::{Topology, resolve_device};
use crate::validate::{Invalid, check_interval, check_timeout};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// An item error's list is capped: 100 MB of garbage is one error, not a million.
const MAX_LINE_ERRORS: usize = 3;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LayersConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long one `dmsetup`, `zpool` or `zfs` run may take before its process group is
    /// killed.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    pub dmsetup_path: PathBuf,
    pub zpool_path: PathBuf,
    pub zfs_path: PathBuf,
    /// btrfs-progs' `btrfs`, for `btrfs device stats` where the kernel has no `error_stats`
    /// (before 5.14): run through the privileged helper when the daemon runs split.
    pub btrfs_path: PathBuf,
}

impl Default for LayersConfig {
    fn default() -> Self {
        LayersConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            timeout: Duration::from_secs(10),
            dmsetup_path: PathBuf::from("dmsetup"),
            zpool_path: PathBuf::from("zpool"),
            zfs_path: PathBuf::from("zfs"),
            btrfs_path: PathBuf::from("btrfs"),
        }
    }
}

impl LayersConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        check_timeout(key, self.timeout)?;
        for (k, p) in [
            ("dmsetup_path", &self.dmsetup_path),
            ("zpool_path", &self.zpool_path),
            ("zfs_path", &self.zfs_path),
            ("btrfs_path", &self.btrfs_path),
        ] {
            if p.as_os_str().is_empty() {
                return Err(Invalid::new(format!("{key}.{k}"), "must not be empty"));
            }
        }
        Ok(())
    }
}

/// The commands the collector runs, each its own item at the door: a `zpool` stuck in the
/// kernel (a suspended pool) is not run again until it is gone, and stops nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Tool {
    DmsetupTable,
    DmsetupStatus,
    Zpool,
    ZpoolStatus,
    Zfs,
}

impl Tool {
    /// Its item at the door.
    fn item(self) -> &'static str {
        match self {
            Tool::DmsetupTable => "dmsetup table",
            Tool::DmsetupStatus => "dmsetup status",
            Tool::Zpool => "zpool",
            Tool::ZpoolStatus => "zpool status",
            Tool::Zfs => "zfs",
        }
    }
}

/// Why a command of this collector gave no output to read; each names the command line.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{cmd}: an earlier run is stuck in the kernel; not run again until it ends")]
    Stuck { cmd: String },
    #[error("{cmd}: output over {mib} MiB; not read")]
    OutputOverCap { cmd: String, mib: u64 },
    #[error("{cmd}: {exit}{}", first_line.as_ref().map(|l| format!(": {l}")).unwrap_or_default())]
    Exit {
        cmd: String,
        exit: Exit,
        /// The first non-blank line it printed, cut to 200 characters.
        first_line: Option<String>,
    },
    #[error("{cmd}: {error}")]
    Failed { cmd: String, error: RunError },
    #[error("{}: not UTF-8; btrfs device stats not asked", mount.display())]
    NotUtf8Mount { mount: PathBuf },
    #[error("{cmd}: {error}")]
    DeviceStats {
        cmd: String,
        error: device_stats::DeviceStatsError,
    },
}

/// The door's mark of `tool`, or why it is refused: an earlier run is still stuck in the kernel.
fn enter(door: &Door, tool: Tool, cmd: &str) -> Result<Pass, CommandError> {
    door.enter(NAME, tool.item())
        .map_err(|_| CommandError::Stuck {
            cmd: cmd.to_string(),
        })
}

pub struct LayersCollector {
    cfg: LayersConfig,
    /// When the error counters last went to the history store (Unix seconds).
    history_sent: Option<f64>,
    /// The privileged helper dmsetup runs under when the daemon gave up CAP_SYS_ADMIN; None:
    /// run here.
    helper: Option<Helper>,
    /// Whether this zpool has `status -j` (OpenZFS 2.3 and later): unknown until asked once;
    /// refused as a usage error (exit 2), the text form is read from then on.
    zpool_json: Option<bool>,
}

/// The door's name for this collector's calls (a btrfs filesystem's device ioctl is the item
/// `btrfs <uuid>`: not asked again while one hangs).
const NAME: &str = "layers";

impl LayersCollector {
    /// A collector that runs its commands in this process.
    pub fn new(cfg: &LayersConfig) -> Self {
        Self::with_helper(cfg, None)
    }

    /// A collector that runs dmsetup through `helper` when given.
    pub fn with_helper(cfg: &LayersConfig, helper: Option<Helper>) -> Self {
        LayersCollector {
            cfg: cfg.clone(),
            helper,
            zpool_json: None,
            history_sent: None,
        }
    }

    /// Runs one fixed command; its output, or an error naming the command.
    async fn run(
        &self,
        door: &Door,
        tool: Tool,
        bin: &Path,
        args: &[&str],
    ) -> Result<String, CommandError> {
        let (cmd, outcome) = self.run_raw(door, tool, bin, args).await?;
        output(&cmd, outcome)
    }

    /// Runs one fixed command under its door mark; the command line and how the run ended, or
    /// why it was not run (an earlier run is stuck).
    async fn run_raw(
        &self,
        door: &Door,
        tool: Tool,
        bin: &Path,
        args: &[&str],
    ) -> Result<(String, RunOutcome), CommandError> {
        let cmd = format!("{} {}", bin.display(), args.join(" "));
        let pass = enter(door, tool, &cmd)?;
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let outcome = run_bounded(bin, &args, self.cfg.timeout, pass).await;
        Ok((cmd, outcome))
    }
}

/// A run's output as text, or an error naming the command: it failed, exited non-zero or
/// printed more than the cap.
fn output(cmd: &str, outcome: RunOutcome) -> Result<String, CommandError> {
    match outcome {
        RunOutcome::Output { stdout, exit, .. } => {
            // The runner stops reading a chunk short of the cap.
            if stdout.len() as u64 + 8192 >= MAX_OUTPUT {
                return Err(CommandError::OutputOverCap {
                    cmd: cmd.to_string(),
                    mib: MAX_OUTPUT >> 20,
                });
            }
            let text = String::from_utf8_lossy(&stdout).into_owned();
            match exit {
                Exit::Code(0) => Ok(text),
                exit => Err(CommandError::Exit {
                    cmd: cmd.to_string(),
                    exit,
                    first_line: first_line(&text),
                }),
            }
        }
        RunOutcome::Failed(error) => Err(CommandError::Failed {
            cmd: cmd.to_string(),
            error,
        }),
    }
}

fn first_line(s: &str) -> Option<String> {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(200).collect())
}

#[async_trait::async_trait]
impl Collector for LayersCollector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn next_delay(&mut self) -> Duration {
        self.cfg.interval
    }

    async fn sample(&mut self, ctx: &Context) -> anyhow::Result<Sample> {
        let started = Instant::now();
        let mut s = Sample::default();
        let topo = ctx.topology().await.unwrap_or_else(|e| {
            s.error(ItemError::new(
                "block topology",
                format!("block topology (thin volumes not placed): {e:#}"),
            ));
            Arc::new(Topology::default())
        });
        let mut layers = Layers::default();
        self.sysfs_layers(ctx, &topo, &mut layers, &mut s).await;
        // Thin pools exist only as device-mapper devices: no dmsetup run on a host without one.
        if topo.devices.values().any(|d| d.dm_name.is_some()) {
            self.thin_pools(&ctx.door, &topo, &mut layers, &mut s).await;
        }
        // ZFS only where its module is loaded.
        if ctx.roots.sys.join("module").join("zfs").is_dir() {
            self.zfs(&ctx.door, &mut layers, &mut s).await;
            layers.vdev_drives = vdev_drives(ctx, &topo, &layers.zfs_status).await;
        }
        layer_metrics(&mut s.metrics, &layers);
        // The error counters' readings for the history, at its raw interval: the store keeps
        // the last of each hour.
        let now = crate::time::unix_now();
        if let Some(h) = &ctx.history
            && self
                .history_sent
                .is_none_or(|t| now - t >= h.raw_interval().as_secs_f64())
        {
            self.history_sent = Some(now);
            s.records.extend(
                error_records(&layers, &topo, now as i64)
                    .into_iter()
                    .map(Record::LayerErrors),
            );
        }
        let layers = Arc::new(layers);
        let valid_for = valid_for(self.cfg.interval, started.elapsed());
        // For the filesystem collector's history records, and for the mounts' effective free
        // space in the scrape: made again from this reading as it is published, so a scrape
        // shows the two from the same reading.
        ctx.shared.set_layers(layers.clone(), valid_for);
        s.space = Some(SpaceInput::Layers(layers, Instant::now() + valid_for));
        Ok(s)
    }
}

impl LayersCollector {
    /// md arrays and btrfs from /sys, and each btrfs's per-device allocation.
    async fn sysfs_layers(
        &mut self,
        ctx: &Context,
        topo: &Topology,
        layers: &mut Layers,
        s: &mut Sample,
    ) {
        let sys = ctx.roots.sys.clone();
        let roots = ctx.roots.clone();
        // Not the door: md and btrfs attributes in /sys and /proc's mountinfo are the kernel's memory,
        // no device or mount is asked, so this cannot hang (the btrfs ioctl below goes through it).
        let read = tokio::task::spawn_blocking(move || {
            let md = md::read_all(&sys);
            let (fs, errors) = btrfs_sysfs::read_all(&sys);
            // A mount of each btrfs, for its device ioctl: by the kernel name of its source.
            // Only btrfs lines are parsed, and only when there is a btrfs.
            let mounts = if fs.is_empty() {
                Vec::new()
            } else {
                read_mountinfo_of_type(&roots.proc, "btrfs")
                    .map(|mut t| {
                        strip_rootfs(&mut t.mounts, &roots.rootfs);
                        t.mounts
                    })
                    .unwrap_or_default()
            };
            (md, fs, errors, mounts)
        })
        .await;
        let Ok((md, fs, errors, mounts)) = read else {
            s.error(ItemError::new(
                "sysfs layers",
                "reading md and btrfs from /sys did not complete",
            ));
            return;
        };
        layers.md = md;
        for e in errors {
            s.error(ItemError::new(
                format!("btrfs {}", e.uuid),
                format!("btrfs {}: {e}", e.uuid),
            ));
        }
        for b in &fs {
            for e in &b.device_errors {
                if let Err(why) = &e.counts {
                    s.error(ItemError::new(
                        format!("btrfs {} devid {}", b.uuid, e.devid),
                        format!(
                            "btrfs {}: {}: {why}",
                            b.uuid,
                            ctx.roots.sys.join("fs/btrfs").join(&b.uuid).display()
                        ),
                    ));
                }
            }
        }
        for b in fs {
            let mount = mounts
                .iter()
                .filter(|m| m.fstype == "btrfs")
                .find(|m| resolve_device(m, topo).is_some_and(|d| b.devices.contains(&d)))
                .map(|m| ctx.roots.in_rootfs(&m.mount_path));
            // No error_stats (kernels before 5.14): btrfs device stats, which needs
            // CAP_SYS_ADMIN (through the helper when the daemon runs split).
            if b.device_errors.is_empty()
                && let Some(m) = &mount
            {
                match self.btrfs_device_stats(&ctx.door, &b.uuid, m).await {
                    Ok(stats) => layers.btrfs_device_stats.push((b.uuid.clone(), stats)),
                    Err(e) => s.error(ItemError::new(
                        format!("btrfs {} device stats", b.uuid),
                        format!("btrfs {}: {e}", b.uuid),
                    )),
                }
            }
            let devices = self.btrfs_devices(ctx, topo, &b, mount, s).await;
            layers.btrfs.push(BtrfsSpace { fs: b, devices });
        }
    }

    /// Each device's size and unallocated space: from the filesystem (ioctl) where it answers,
    /// else the block device's size (the total unallocated is then the sizes less the chunks).
    async fn btrfs_devices(
        &mut self,
        ctx: &Context,
        topo: &Topology,
        b: &btrfs_sysfs::Btrfs,
        mount: Option<PathBuf>,
        s: &mut Sample,
    ) -> Vec<BtrfsDevice> {
        let fallback = || sized_by_topology(b, topo);
        let Some(mount) = mount else {
            return fallback();
        };
        let devids: Vec<u64> =
            crate::sysfs::dir_names(&ctx.roots.sys.join("fs/btrfs").join(&b.uuid).join("devinfo"))
                .unwrap_or_default()
                .iter()
                .filter_map(|n| n.parse().ok())
                .collect();
        // No `devinfo/` (older kernels have none): nothing to ask the ioctl about, and an
        // empty answer would make a filesystem of size 0 whose metadata can never grow.
        if devids.is_empty() {
            return fallback();
        }
        let m = mount.clone();
        let deadline = tokio::time::Instant::now() + self.cfg.timeout;
        let job = ctx
            .door
            .call(NAME, format!("btrfs {}", b.uuid), deadline, move || {
                btrfs::ioctl::dev_info(&m, &devids)
            });
        let infos = match job.await {
            Ok(Ok(infos)) if !infos.is_empty() => infos,
            Ok(Ok(_)) => return fallback(),
            Ok(Err(e)) if matches!(e.raw_os_error(), Some(libc::ENOTTY) | Some(libc::EINVAL)) => {
                // Not a btrfs after all (a fixture tree, a mount replaced meanwhile).
                return fallback();
            }
            Ok(Err(e)) => {
                s.error(ItemError::new(
                    format!("btrfs {}", b.uuid),
                    format!("btrfs {}: device query on {}: {e}", b.uuid, mount.display()),
                ));
                return fallback();
            }
            // Not asked again while an earlier query hangs; a panic is this filesystem's
            // error and it is asked again next time.
            Err(why) => {
                s.error(ItemError::new(
                    format!("btrfs {}", b.uuid),
                    format!(
                        "btrfs {}: device query on {}: {why}",
                        b.uuid,
                        mount.display()
                    ),
                ));
                return fallback();
            }
        };
        infos
            .into_iter()
            .map(|i| {
                let path = ctx.roots.in_rootfs(Path::new(&i.path));
                let name = std::fs::canonicalize(&path)
                    .ok()
                    .and_then(|p| p.file_name().map(crate::sysfs::name_label))
                    .unwrap_or_else(|| format!("devid{}", i.devid));
                BtrfsDevice {
                    name,
                    size_bytes: Some(i.total_bytes),
                    unallocated_bytes: Some(i.total_bytes.saturating_sub(i.bytes_used)),
                    devid: Some(i.devid),
                }
            })
            .collect()
    }

    /// `btrfs device stats MOUNT`, parsed: through the privileged helper where the daemon runs
    /// split (the tool needs CAP_SYS_ADMIN, which the daemon gave up), else run here. The
    /// filesystem is its own item at the door: not asked again while a run on it hangs.
    async fn btrfs_device_stats(
        &self,
        door: &Door,
        uuid: &str,
        mount: &Path,
    ) -> Result<Vec<device_stats::DeviceStats>, CommandError> {
        let bin = self.cfg.btrfs_path.clone();
        let Some(m) = mount.to_str() else {
            return Err(CommandError::NotUtf8Mount {
                mount: mount.to_path_buf(),
            });
        };
        let cmd = format!("{} device stats {m}", bin.display());
        let pass = door
            .enter(NAME, format!("btrfs device stats {uuid}"))
            .map_err(|_| CommandError::Stuck { cmd: cmd.clone() })?;
        let outcome = match self.helper.clone() {
            Some(helper) => {
                let mount = m.to_string();
                helper
                    .read(RequestKind::BtrfsDeviceStats { mount }, pass)
                    .await
                    .outcome
            }
            None => run_bounded(&bin, &device_stats::args(m), self.cfg.timeout, pass).await,
        };
        let text = output(&cmd, outcome)?;
        device_stats::parse_device_stats(&text)
            .map_err(|error| CommandError::DeviceStats { cmd, error })
    }

    /// `dmsetup table` or `status`: through the privileged helper where the daemon runs split (the
    /// device-mapper ioctls need CAP_SYS_ADMIN, which the daemon gave up), else run here.
    async fn dmsetup(&self, door: &Door, query: DmQuery) -> Result<String, CommandError> {
        let (tool, word) = match query {
            DmQuery::Table => (Tool::DmsetupTable, "table"),
            DmQuery::Status => (Tool::DmsetupStatus, "status"),
        };
        let bin = self.cfg.dmsetup_path.clone();
        let Some(helper) = self.helper.clone() else {
            return self.run(door, tool, &bin, &[word]).await;
        };
        let cmd = format!("{} {word} (through the privileged helper)", bin.display());
        let pass = enter(door, tool, &cmd)?;
        let answer = helper.read(RequestKind::Dmsetup { query }, pass).await;
        output(&cmd, answer.outcome)
    }

    async fn thin_pools(&self, door: &Door, topo: &Topology, layers: &mut Layers, s: &mut Sample) {
        let table = self.dmsetup(door, DmQuery::Table).await;
        let status = self.dmsetup(door, DmQuery::Status).await;
        let (table, status) = match (table, status) {
            (Ok(t), Ok(s)) => (t, s),
            (Err(e), _) | (_, Err(e)) => {
                s.error(ItemError::new("thin pools", format!("thin pools: {e}")));
                return;
            }
        };
        let name_of = |dev: &str| {
            crate::sysfs::topology::parse_devnum(dev)
                .and_then(|(ma, mi)| topo.by_devnum(ma, mi))
                .and_then(|d| d.dm_name.clone())
        };
        let (pools, problems) = thin::pools(&table, &status, name_of);
        let errors = problems
            .into_iter()
            .map(|p| ItemError::new(format!("thin {}", p.item), p.message));
        capped(s, "thin pools", errors);
        layers.thin_pools = pools;
    }

    async fn zfs(&mut self, door: &Door, layers: &mut Layers, s: &mut Sample) {
        let zpool = self.cfg.zpool_path.clone();
        let args = ["list", "-Hp", "-o", zfs::ZPOOL_COLUMNS];
        let pools = self.run(door, Tool::Zpool, &zpool, &args).await;
        layers.zfs_pools = parsed(s, "zfs pools", pools, zfs::parse_pools);
        layers.zfs_status = self.zpool_status(door, s).await;
        let zfs_bin = self.cfg.zfs_path.clone();
        let args = [
            "list",
            "-Hp",
            "-t",
            "filesystem,volume",
            "-o",
            zfs::ZFS_COLUMNS,
        ];
        let datasets = self.run(door, Tool::Zfs, &zfs_bin, &args).await;
        layers.zfs_datasets = parsed(s, "zfs datasets", datasets, zfs::parse_datasets);
    }
}

impl LayersCollector {
    /// `zpool status -j -p` where zpool has it, else `zpool status -p`: each vdev's error
    /// counters and each pool's data errors. A usage error (exit 2) to `-j` is an older zpool:
    /// the text form at once, and from then on.
    async fn zpool_status(&mut self, door: &Door, s: &mut Sample) -> Vec<zpool_status::PoolStatus> {
        let zpool = self.cfg.zpool_path.clone();
        let item = "zfs status";
        if self.zpool_json != Some(false) {
            let json = ["status", "-j", "-p"];
            let (cmd, outcome) = match self.run_raw(door, Tool::ZpoolStatus, &zpool, &json).await {
                Ok(run) => run,
                Err(e) => {
                    s.error(ItemError::new(item, format!("{item}: {e}")));
                    return Vec::new();
                }
            };
            if let RunOutcome::Output {
                exit: Exit::Code(2),
                ..
            } = outcome
            {
                self.zpool_json = Some(false);
            } else {
                let text = match output(&cmd, outcome) {
                    Ok(t) => t,
                    Err(e) => {
                        s.error(ItemError::new(item, format!("{item}: {e}")));
                        return Vec::new();
                    }
                };
                return match zpool_status::parse_json(&text) {
                    Ok((pools, errors)) => {
                        self.zpool_json = Some(true);
                        status_errors(s, errors);
                        pools
                    }
                    Err(e) => {
                        s.error(ItemError::new(item, format!("{item}: {cmd}: {e}")));
                        Vec::new()
                    }
                };
            }
        }
        match self
            .run(door, Tool::ZpoolStatus, &zpool, &["status", "-p"])
            .await
        {
            Ok(text) => {
                let (pools, errors) = zpool_status::parse_text(&text);
                status_errors(s, errors);
                pools
            }
            Err(e) => {
                s.error(ItemError::new(item, format!("{item}: {e}")));
                Vec::new()
            }
        }
    }
}

/// The first few problems of `zpool status`'s output as errors, and how many more there were.
fn status_errors(s: &mut Sample, errors: Vec<zpool_status::StatusError>) {
    let errors = errors
        .into_iter()
        .map(|e| ItemError::new(format!("zfs status {}", e.where_), e.to_string()));
    capped(s, "zfs status", errors);
}

/// How long a reading stands for the layers: until the next is surely due. The next is published
/// an interval plus its own run later, and a run takes about as long as this one (`zpool status`
/// on a busy host, several commands under emulation): three intervals and twice this run, so a
/// run longer than two intervals does not leave the mounts without their layers between two.
fn valid_for(interval: Duration, this_run: Duration) -> Duration {
    interval
        .saturating_mul(3)
        .saturating_add(this_run.saturating_mul(2))
}

/// Each device of `b` at its block device's size as /sys tells it (unknown where it doesn't),
/// its unallocated space unknown: what is left when the filesystem can't be asked.
fn sized_by_topology(b: &btrfs_sysfs::Btrfs, topo: &Topology) -> Vec<BtrfsDevice> {
    b.devices
        .iter()
        .map(|d| BtrfsDevice {
            name: d.clone(),
            size_bytes: topo.get(d).and_then(|x| x.size_bytes),
            unallocated_bytes: None,
            devid: None,
        })
        .collect()
}

/// What a command's output parses into; its failure or its bad lines are the sample's errors.
fn parsed<T>(
    s: &mut Sample,
    item: &str,
    output: Result<String, CommandError>,
    parse: fn(&str) -> (Vec<T>, Vec<zfs::LineError>),
) -> Vec<T> {
    match output {
        Ok(text) => {
            let (out, errors) = parse(&text);
            line_errors(s, item, errors);
            out
        }
        Err(e) => {
            s.error(ItemError::new(item, format!("{item}: {e}")));
            Vec::new()
        }
    }
}

/// The first few bad lines of a command's output, each an error naming the line, and how many
/// more there were.
fn line_errors(s: &mut Sample, what: &str, errors: Vec<zfs::LineError>) {
    let errors = errors
        .into_iter()
        .map(|e| ItemError::new(format!("{what} line {}", e.line), e.to_string()));
    capped(s, what, errors);
}

/// The first [`MAX_LINE_ERRORS`] of `errors` as the sample's errors, and one more counting the
/// rest: a command's garbage is a few errors, however much of it there is.
fn capped(s: &mut Sample, what: &str, errors: impl Iterator<Item = ItemError>) {
    let mut more = 0usize;
    for (i, e) in errors.enumerate() {
        if i < MAX_LINE_ERRORS {
            s.error(e);
        } else {
            more += 1;
        }
    }
    if more > 0 {
        s.error(ItemError::new(
            format!("{what} more"),
            format!("{what}: {more} more problems"),
        ));
    }
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// Every layer's series.
pub fn layer_metrics(set: &mut MetricSet, l: &Layers) {
    for p in &l.thin_pools {
        let pl = [("pool", p.name.as_str())];
        set.family(&catalogue::THIN_POOL_DATA_SIZE_BYTES)
            .push(&pl, p.data_size_bytes() as f64);
        set.family(&catalogue::THIN_POOL_DATA_USED_BYTES)
            .push(&pl, p.data_used_bytes() as f64);
        set.family(&catalogue::THIN_POOL_METADATA_SIZE_BYTES)
            .push(&pl, p.metadata_size_bytes() as f64);
        set.family(&catalogue::THIN_POOL_METADATA_USED_BYTES)
            .push(&pl, p.metadata_used_bytes() as f64);
        set.family(&catalogue::THIN_POOL_VIRTUAL_SIZE_BYTES)
            .push(&pl, p.virtual_bytes as f64);
        let size = p.data_size_bytes();
        set.family(&catalogue::THIN_POOL_OVERCOMMIT_RATIO).push_opt(
            &pl,
            (size > 0).then(|| p.virtual_bytes as f64 / size as f64),
        );
        let mode = p.status.mode;
        set.family(&catalogue::THIN_POOL_OUT_OF_DATA_SPACE)
            .push(&pl, flag(mode == thin::PoolMode::OutOfDataSpace));
        set.family(&catalogue::THIN_POOL_READ_ONLY)
            .push(&pl, flag(mode == thin::PoolMode::ReadOnly));
        set.family(&catalogue::THIN_POOL_FAILED)
            .push(&pl, flag(mode == thin::PoolMode::Failed));
        set.family(&catalogue::THIN_POOL_NEEDS_CHECK)
            .push(&pl, flag(p.status.needs_check));
        set.family(&catalogue::THIN_POOL_ERROR_IF_NO_SPACE)
            .push(&pl, flag(p.error_if_no_space));
        for v in &p.volumes {
            let vl = [("volume", v.name.as_str()), ("pool", p.name.as_str())];
            set.family(&catalogue::THIN_VOLUME_SIZE_BYTES)
                .push(&vl, v.size_bytes as f64);
            set.family(&catalogue::THIN_VOLUME_MAPPED_BYTES)
                .push_opt(&vl, v.mapped_bytes.map(|m| m as f64));
        }
    }
    for b in &l.btrfs {
        btrfs_metrics(set, b);
    }
    for p in &l.zfs_pools {
        let pl = [("pool", p.name.as_str())];
        set.family(&catalogue::ZFS_POOL_SIZE_BYTES)
            .push(&pl, p.size_bytes as f64);
        set.family(&catalogue::ZFS_POOL_ALLOCATED_BYTES)
            .push(&pl, p.allocated_bytes as f64);
        set.family(&catalogue::ZFS_POOL_FREE_BYTES)
            .push(&pl, p.free_bytes as f64);
        set.family(&catalogue::ZFS_POOL_FRAGMENTATION_RATIO)
            .push_opt(&pl, p.fragmentation_ratio);
        set.family(&catalogue::ZFS_POOL_CAPACITY_RATIO)
            .push_opt(&pl, p.capacity_ratio);
        set.family(&catalogue::ZFS_POOL_CHECKPOINT_BYTES)
            .push(&pl, p.checkpoint_bytes as f64);
        set.family(&catalogue::ZFS_POOL_EXPANDABLE_BYTES)
            .push(&pl, p.expandable_bytes as f64);
        for state in zfs::HEALTH_STATES {
            set.family(&catalogue::ZFS_POOL_HEALTH).push(
                &[("pool", p.name.as_str()), ("state", state)],
                flag(p.health == *state),
            );
        }
    }
    for d in &l.zfs_datasets {
        let dl = [("dataset", d.name.as_str()), ("pool", d.pool.as_str())];
        set.family(&catalogue::ZFS_DATASET_USED_BYTES)
            .push(&dl, d.used_bytes as f64);
        set.family(&catalogue::ZFS_DATASET_AVAILABLE_BYTES)
            .push(&dl, d.available_bytes as f64);
        set.family(&catalogue::ZFS_DATASET_REFERENCED_BYTES)
            .push(&dl, d.referenced_bytes as f64);
        set.family(&catalogue::ZFS_DATASET_QUOTA_BYTES)
            .push_opt(&dl, d.quota_bytes.map(|q| q as f64));
        set.family(&catalogue::ZFS_DATASET_RESERVATION_BYTES)
            .push(&dl, d.reservation_bytes as f64);
    }
    for p in &l.zfs_status {
        zfs_status_metrics(set, p);
    }
    for (uuid, stats) in &l.btrfs_device_stats {
        for d in stats {
            for (t, n) in d.counts.by_type() {
                set.family(&catalogue::BTRFS_DEVICE_ERRORS_TOTAL).push(
                    &[
                        ("uuid", uuid.as_str()),
                        ("device", d.device.as_str()),
                        ("type", t),
                    ],
                    n as f64,
                );
            }
        }
    }
    for v in &l.vdev_drives {
        for d in &v.drives {
            set.family(&catalogue::ZFS_VDEV_DRIVE_INFO).push(
                &[
                    ("pool", v.pool.as_str()),
                    ("vdev", v.vdev.as_str()),
                    ("device", v.device.as_str()),
                    ("drive", d.as_str()),
                ],
                1.0,
            );
        }
    }
    for a in &l.md {
        md_metrics(set, a);
    }
}

/// Each leaf vdev placed on its drives ([`crate::layers::place_vdevs`]); the /dev links of
/// names that are no kernel or device-mapper name are read under the root filesystem, off the
/// runtime (links in devtmpfs: no device is asked).
async fn vdev_drives(
    ctx: &Context,
    topo: &Arc<Topology>,
    pools: &[zpool_status::PoolStatus],
) -> Vec<crate::layers::VdevDrive> {
    if pools.is_empty() {
        return Vec::new();
    }
    let (pools, topo, rootfs) = (pools.to_vec(), topo.clone(), ctx.roots.rootfs.clone());
    // Not the door: readlink of /dev links (devtmpfs, the kernel's memory); no device is asked.
    tokio::task::spawn_blocking(move || {
        crate::layers::place_vdevs(&pools, &topo, |name| dev_link(&rootfs, name))
    })
    .await
    .unwrap_or_default()
}

/// The kernel name a /dev link called `name` points to (`/dev/disk/by-id/ata-…-part1` →
/// `sda1`), in the first of [`crate::layers::VDEV_LINK_DIRS`] that has one.
fn dev_link(rootfs: &Path, name: &str) -> Option<String> {
    if !crate::layers::is_plain_name(name) {
        return None;
    }
    crate::layers::VDEV_LINK_DIRS.iter().find_map(|dir| {
        let target = std::fs::read_link(rootfs.join(dir).join(name)).ok()?;
        target.file_name()?.to_str().map(String::from)
    })
}

fn zfs_status_metrics(set: &mut MetricSet, p: &zpool_status::PoolStatus) {
    let pool = p.pool.as_str();
    set.family(&catalogue::ZFS_POOL_DATA_ERRORS)
        .push_opt(&[("pool", pool)], p.data_errors.map(|n| n as f64));
    for v in &p.vdevs {
        let vdev = v.name.as_str();
        for (t, n) in [
            ("read", v.read_errors),
            ("write", v.write_errors),
            ("checksum", v.checksum_errors),
        ] {
            set.family(&catalogue::ZFS_VDEV_ERRORS_TOTAL)
                .push(&[("pool", pool), ("vdev", vdev), ("type", t)], n as f64);
        }
        set.family(&catalogue::ZFS_VDEV_INFO).push(
            &[
                ("pool", pool),
                ("vdev", vdev),
                ("leaf", if v.leaf { "true" } else { "false" }),
            ],
            1.0,
        );
        // A state zpool names otherwise gives no series, never a row of zeros.
        if let Some(state) = v.state {
            for x in zpool_status::VDEV_STATES {
                set.family(&catalogue::ZFS_VDEV_STATE).push(
                    &[("pool", pool), ("vdev", vdev), ("state", x)],
                    flag(state == *x),
                );
            }
        }
    }
}

fn btrfs_metrics(set: &mut MetricSet, b: &BtrfsSpace) {
    let u = b.fs.uuid.as_str();
    set.family(&catalogue::BTRFS_INFO).push(
        &[("uuid", u), ("label", b.fs.label.as_deref().unwrap_or(""))],
        1.0,
    );
    // A size or unallocated space not known gives no series (and no "can't grow"), never 0.
    set.family(&catalogue::BTRFS_SIZE_BYTES)
        .push_opt(&[("uuid", u)], b.size_bytes().map(|x| x as f64));
    set.family(&catalogue::BTRFS_UNALLOCATED_BYTES)
        .push_opt(&[("uuid", u)], b.unallocated_bytes().map(|x| x as f64));
    set.family(&catalogue::BTRFS_GLOBAL_RESERVE_BYTES)
        .push(&[("uuid", u)], b.fs.global_reserve_bytes as f64);
    set.family(&catalogue::BTRFS_METADATA_CAN_GROW)
        .push_opt(&[("uuid", u)], b.metadata_can_grow().map(flag));
    for (t, a) in [
        ("data", &b.fs.data),
        ("metadata", &b.fs.metadata),
        ("system", &b.fs.system),
    ] {
        let tl = [("uuid", u), ("type", t)];
        set.family(&catalogue::BTRFS_ALLOCATED_BYTES)
            .push(&tl, a.total_bytes as f64);
        set.family(&catalogue::BTRFS_USED_BYTES)
            .push(&tl, a.used_bytes as f64);
        set.family(&catalogue::BTRFS_DISK_ALLOCATED_BYTES)
            .push(&tl, a.disk_total_bytes as f64);
        set.family(&catalogue::BTRFS_DISK_USED_BYTES)
            .push(&tl, a.disk_used_bytes as f64);
        for p in &a.profiles {
            set.family(&catalogue::BTRFS_PROFILE_INFO)
                .push(&[("uuid", u), ("type", t), ("profile", p.as_str())], 1.0);
        }
    }
    for d in &b.devices {
        let dl = [("uuid", u), ("device", d.name.as_str())];
        set.family(&catalogue::BTRFS_DEVICE_SIZE_BYTES)
            .push_opt(&dl, d.size_bytes.map(|x| x as f64));
        set.family(&catalogue::BTRFS_DEVICE_UNALLOCATED_BYTES)
            .push_opt(&dl, d.unallocated_bytes.map(|x| x as f64));
    }
    for e in &b.fs.device_errors {
        // A file that could not be read is the sample's error (see `sysfs_layers`): no series.
        let Ok(counts) = &e.counts else { continue };
        let name = btrfs_device_name(b, e.devid);
        for (t, n) in counts.by_type() {
            set.family(&catalogue::BTRFS_DEVICE_ERRORS_TOTAL).push(
                &[("uuid", u), ("device", name.as_str()), ("type", t)],
                n as f64,
            );
        }
    }
}

/// The kernel name of the device the filesystem calls `devid`: from its device query where it
/// answered, else the one device /sys lists when the filesystem has one; `devid<N>` when
/// neither tells (a multi-device btrfs whose mount could not be asked), as the device query's
/// own fallback names it.
fn btrfs_device_name(b: &BtrfsSpace, devid: u64) -> String {
    if let Some(d) = b.devices.iter().find(|d| d.devid == Some(devid)) {
        return d.name.clone();
    }
    match (b.fs.devices.as_slice(), b.fs.device_errors.len()) {
        ([only], 1) if b.devices.iter().all(|d| d.devid.is_none()) => only.clone(),
        _ => format!("devid{devid}"),
    }
}

/// The kernel name of the one drive under `name` (a kernel name or a device-mapper name, as
/// the layers' labels have them); None when it is not a block device here or lies on several.
fn drive_under(topo: &Topology, name: &str) -> Option<String> {
    let dev = topo.get(name).or_else(|| {
        topo.devices
            .values()
            .find(|d| d.dm_name.as_deref() == Some(name))
    })?;
    match topo.physical_drives(&dev.name).as_slice() {
        [one] => Some(one.name.clone()),
        _ => None,
    }
}

/// The history's readings of every error counter the layers published in this sample (the
/// same figures as the series): btrfs devices, ZFS vdevs, md members. A btrfs device whose
/// file could not be read and an md member without an `errors` file give none.
fn error_records(l: &Layers, topo: &Topology, t: i64) -> Vec<LayerErrorsSample> {
    let mut out = Vec::new();
    for b in &l.btrfs {
        for e in &b.fs.device_errors {
            let Ok(c) = &e.counts else { continue };
            let member = btrfs_device_name(b, e.devid);
            out.push(LayerErrorsSample {
                kind: LayerErrorKind::BtrfsDevice,
                container: b.fs.uuid.clone(),
                drive: drive_under(topo, &member),
                member,
                t,
                counts: LayerErrorCounts {
                    read: Some(c.read),
                    write: Some(c.write),
                    checksum: Some(c.corruption),
                    other: Some(c.flush.saturating_add(c.generation)),
                },
            });
        }
    }
    for (uuid, stats) in &l.btrfs_device_stats {
        for d in stats {
            let c = &d.counts;
            out.push(LayerErrorsSample {
                kind: LayerErrorKind::BtrfsDevice,
                container: uuid.clone(),
                member: d.device.clone(),
                drive: drive_under(topo, &d.device),
                t,
                counts: LayerErrorCounts {
                    read: Some(c.read),
                    write: Some(c.write),
                    checksum: Some(c.corruption),
                    other: Some(c.flush.saturating_add(c.generation)),
                },
            });
        }
    }
    for p in &l.zfs_status {
        for v in &p.vdevs {
            out.push(LayerErrorsSample {
                kind: LayerErrorKind::ZfsVdev,
                container: p.pool.clone(),
                member: v.name.clone(),
                drive: l
                    .vdev_drives
                    .iter()
                    .find(|d| d.pool == p.pool && d.vdev == v.name)
                    .and_then(|d| match d.drives.as_slice() {
                        [one] => Some(one.clone()),
                        _ => None,
                    }),
                t,
                counts: LayerErrorCounts {
                    read: Some(v.read_errors),
                    write: Some(v.write_errors),
                    checksum: Some(v.checksum_errors),
                    other: None,
                },
            });
        }
    }
    for a in &l.md {
        for m in &a.member_list {
            let Some(n) = m.corrected_read_errors else {
                continue;
            };
            out.push(LayerErrorsSample {
                kind: LayerErrorKind::MdMember,
                container: a.name.clone(),
                member: m.name.clone(),
                drive: drive_under(topo, &m.name),
                t,
                counts: LayerErrorCounts {
                    read: Some(n),
                    ..Default::default()
                },
            });
        }
    }
    out
}

fn md_metrics(set: &mut MetricSet, a: &md::Array) {
    let dl = [("device", a.name.as_str())];
    set.family(&catalogue::MD_INFO).push(
        &[("device", a.name.as_str()), ("level", a.level.as_str())],
        1.0,
    );
    // An unknown state or member list gives no series, never a row of zeros.
    if md::ARRAY_STATES.contains(&a.state.as_str()) {
        for state in md::ARRAY_STATES {
            set.family(&catalogue::MD_ARRAY_STATE).push(
                &[("device", a.name.as_str()), ("state", state)],
                flag(a.state == *state),
            );
        }
    }
    set.family(&catalogue::MD_DISKS_REQUIRED)
        .push_opt(&dl, a.disks_required.map(|x| x as f64));
    set.family(&catalogue::MD_DISKS_MISSING)
        .push_opt(&dl, a.degraded.map(|x| x as f64));
    if a.members > 0 {
        for (state, n) in [
            ("active", a.disks_active),
            ("failed", a.disks_failed),
            ("spare", a.disks_spare),
        ] {
            set.family(&catalogue::MD_DISKS)
                .push(&[("device", a.name.as_str()), ("state", state)], n as f64);
        }
    }
    if let Some(action) = &a.sync_action {
        for x in md::SYNC_ACTIONS {
            set.family(&catalogue::MD_SYNC_ACTION).push(
                &[("device", a.name.as_str()), ("action", x)],
                flag(action == x),
            );
        }
    }
    set.family(&catalogue::MD_SYNC_PROGRESS_RATIO)
        .push_opt(&dl, a.sync_progress);
    set.family(&catalogue::MD_MISMATCH_SECTORS)
        .push_opt(&dl, a.mismatch_sectors.map(|x| x as f64));
    for m in &a.member_list {
        set.family(&catalogue::MD_MEMBER_CORRECTED_READ_ERRORS_TOTAL)
            .push_opt(
                &[("device", a.name.as_str()), ("member", m.name.as_str())],
                m.corrected_read_errors.map(|x| x as f64),
            );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btrfs::error_stats::ErrorCounts;
    use crate::layers::MountView;

    fn text(l: &Layers) -> String {
        let mut set = MetricSet::new();
        layer_metrics(&mut set, l);
        let mut out = String::new();
        crate::render::render_families(&mut out, set.families());
        out
    }

    /// A btrfs whose device /sys gives no size for (and the ioctl could not be asked): its
    /// size, unallocated space and whether metadata can grow are unknown, so they have no
    /// series, and the mount gets no btrfs limit from them (never "0 available").
    #[test]
    fn a_btrfs_device_of_unknown_size_gives_no_size_and_no_cannot_grow() {
        let fs = btrfs_sysfs::Btrfs {
            uuid: "4e3b".into(),
            devices: vec!["sdb".into()],
            ..Default::default()
        };
        let topo = Topology::default();
        let layers = Layers {
            btrfs: vec![BtrfsSpace {
                devices: sized_by_topology(&fs, &topo),
                fs,
            }],
            ..Default::default()
        };
        let t = text(&layers);
        for family in [
            "ssdwatch_btrfs_size_bytes{",
            "ssdwatch_btrfs_unallocated_bytes{",
            "ssdwatch_btrfs_metadata_can_grow{",
            "ssdwatch_btrfs_device_size_bytes{",
        ] {
            assert!(!t.contains(family), "{family} of an unknown size:\n{t}");
        }
        // What is known still shows.
        assert!(t.contains("ssdwatch_btrfs_info{uuid=\"4e3b\""), "{t}");
        let stack = [crate::layers::StackDevice {
            name: "sdb".into(),
            dm_name: None,
        }];
        let m = MountView {
            fstype: "btrfs",
            source: "/dev/sdb",
            stack: &stack,
        };
        assert_eq!(layers.limits(&m), vec![]);
    }

    #[test]
    fn a_reading_stands_three_intervals_and_twice_its_own_run() {
        let s = Duration::from_secs;
        assert_eq!(valid_for(s(60), Duration::ZERO), s(180));
        // A 2 s run at a 1 s interval (commands under emulation): the next comes 3 s later.
        assert_eq!(valid_for(s(1), s(2)), s(7));
        assert_eq!(valid_for(Duration::MAX, s(1)), Duration::MAX);
    }

    /// The history's readings are the published counters, each placed on the one drive under
    /// it: a btrfs device by its device-mapper name over a partition, a ZFS leaf by its kernel
    /// name (its mirror, on two drives, on none), an md member on a dm device over two drives
    /// on none.
    #[test]
    fn error_records_hold_the_series_figures_and_the_one_drive_under_each() {
        use crate::sysfs::topology::{BlockDevice, DeviceKind};
        let mut topo = Topology::default();
        let mut add =
            |name: &str, kind, slaves: &[&str], dm: Option<&str>, parent: Option<&str>| {
                topo.devices.insert(
                    name.into(),
                    BlockDevice {
                        name: name.into(),
                        kind: Some(kind),
                        slaves: slaves.iter().map(|s| s.to_string()).collect(),
                        dm_name: dm.map(String::from),
                        parent: parent.map(String::from),
                        ..Default::default()
                    },
                );
            };
        add("sda", DeviceKind::Scsi, &[], None, None);
        add("sdb", DeviceKind::Scsi, &[], None, None);
        add("sda1", DeviceKind::Partition, &[], None, Some("sda"));
        add("dm-0", DeviceKind::Dm, &["sda1"], Some("flaky"), None);
        add(
            "dm-1",
            DeviceKind::Dm,
            &["sda", "sdb"],
            Some("striped"),
            None,
        );
        let l = Layers {
            btrfs: vec![BtrfsSpace {
                fs: btrfs_sysfs::Btrfs {
                    uuid: "aa".into(),
                    devices: vec!["dm-0".into()],
                    device_errors: vec![btrfs_sysfs::DeviceErrors {
                        devid: 1,
                        counts: Ok(ErrorCounts {
                            write: 5128,
                            read: 320,
                            flush: 2,
                            corruption: 1,
                            generation: 3,
                        }),
                    }],
                    ..Default::default()
                },
                devices: vec![BtrfsDevice {
                    name: "flaky".into(),
                    size_bytes: None,
                    unallocated_bytes: None,
                    devid: Some(1),
                }],
            }],
            zfs_status: vec![zpool_status::PoolStatus {
                pool: "tank".into(),
                data_errors: Some(0),
                vdevs: vec![
                    zpool_status::Vdev {
                        name: "mirror-0".into(),
                        leaf: false,
                        state: Some("ONLINE"),
                        read_errors: 0,
                        write_errors: 0,
                        checksum_errors: 0,
                    },
                    zpool_status::Vdev {
                        name: "sdb".into(),
                        leaf: true,
                        state: Some("ONLINE"),
                        read_errors: 1,
                        write_errors: 2,
                        checksum_errors: 514,
                    },
                ],
            }],
            md: vec![md::Array {
                name: "md2".into(),
                member_list: vec![
                    md::Member {
                        name: "dm-1".into(),
                        corrected_read_errors: Some(8),
                    },
                    md::Member {
                        name: "sdc".into(),
                        corrected_read_errors: None,
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut l = l;
        l.vdev_drives = crate::layers::place_vdevs(&l.zfs_status, &topo, |_| None);
        let r = error_records(&l, &topo, 1000);
        let got: Vec<_> = r
            .iter()
            .map(|x| {
                (
                    x.kind,
                    x.container.as_str(),
                    x.member.as_str(),
                    x.drive.as_deref(),
                    x.counts.total(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    LayerErrorKind::BtrfsDevice,
                    "aa",
                    "flaky",
                    Some("sda"),
                    Some(5454)
                ),
                (LayerErrorKind::ZfsVdev, "tank", "mirror-0", None, Some(0)),
                (
                    LayerErrorKind::ZfsVdev,
                    "tank",
                    "sdb",
                    Some("sdb"),
                    Some(517)
                ),
                (LayerErrorKind::MdMember, "md2", "dm-1", None, Some(8)),
            ],
            "an md member without an errors file has no reading"
        );
        assert!(r.iter().all(|x| x.t == 1000));
        assert_eq!(
            r[0].counts,
            LayerErrorCounts {
                read: Some(320),
                write: Some(5128),
                checksum: Some(1),
                other: Some(5),
            }
        );
        assert_eq!(r[3].counts.write, None, "md counts corrected reads only");
        // On a kernel without error_stats the counters come from btrfs device stats: the same
        // series and the same records, by the device's name.
        let l = Layers {
            btrfs_device_stats: vec![(
                "bb".into(),
                vec![device_stats::DeviceStats {
                    device: "flaky".into(),
                    counts: ErrorCounts {
                        write: 5128,
                        read: 320,
                        flush: 2,
                        ..Default::default()
                    },
                }],
            )],
            ..Default::default()
        };
        let r = error_records(&l, &topo, 1000);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (
                r[0].container.as_str(),
                r[0].member.as_str(),
                r[0].drive.as_deref()
            ),
            ("bb", "flaky", Some("sda"))
        );
        assert_eq!(r[0].counts.total(), Some(5450));
        let t = text(&l);
        assert!(
            t.contains("ssdwatch_btrfs_device_errors_total{uuid=\"bb\",device=\"flaky\",type=\"write\"} 5128"),
            "{t}"
        );
    }

    /// Leaf vdevs are placed on their drives by kernel name, device-mapper name or a /dev link
    /// of their name (a by-id name, read here from a real link under a root), a device over two
    /// drives on both; a group (mirror) and a file vdev get no row, and a vdev name that is a
    /// path is never joined to a directory.
    #[test]
    fn leaf_vdevs_are_placed_on_their_drives_through_their_names_and_dev_links() {
        use crate::sysfs::topology::{BlockDevice, DeviceKind};
        let mut topo = Topology::default();
        for (name, kind, slaves, dm, parent) in [
            ("sda", DeviceKind::Scsi, vec![], None, None),
            ("sdb", DeviceKind::Scsi, vec![], None, None),
            ("nvme0n1", DeviceKind::Nvme, vec![], None, None),
            (
                "nvme0n1p1",
                DeviceKind::Partition,
                vec![],
                None,
                Some("nvme0n1"),
            ),
            (
                "dm-1",
                DeviceKind::Dm,
                vec!["sda", "sdb"],
                Some("striped"),
                None,
            ),
        ] {
            topo.devices.insert(
                name.into(),
                BlockDevice {
                    name: name.into(),
                    kind: Some(kind),
                    slaves: slaves.iter().map(|s: &&str| s.to_string()).collect(),
                    dm_name: dm.map(String::from),
                    parent: parent.map(String::from),
                    ..Default::default()
                },
            );
        }
        let root = tempfile::tempdir().unwrap();
        let by_id = root.path().join("dev/disk/by-id");
        std::fs::create_dir_all(&by_id).unwrap();
        let nvme_link = "nvme-Samsung_SSD_980_PRO_1TB_S5GXNF0R123456-part1";
        std::os::unix::fs::symlink("../../nvme0n1p1", by_id.join(nvme_link)).unwrap();
        // A link by a name that is also a path: never followed.
        assert_eq!(dev_link(root.path(), "disk/by-id/x"), None);
        assert_eq!(dev_link(root.path(), ".."), None);
        assert_eq!(
            dev_link(root.path(), nvme_link).as_deref(),
            Some("nvme0n1p1")
        );
        let vdev = |name: &str, leaf| zpool_status::Vdev {
            name: name.into(),
            leaf,
            ..Default::default()
        };
        let pools = [zpool_status::PoolStatus {
            pool: "tank".into(),
            data_errors: Some(0),
            vdevs: vec![
                vdev("tank", false),
                vdev("mirror-0", false),
                vdev("sda", true),
                vdev(nvme_link, true),
                vdev("striped", true),
                vdev("/var/tmp/file-vdev", true),
            ],
        }];
        let placed = crate::layers::place_vdevs(&pools, &topo, |n| dev_link(root.path(), n));
        let got: Vec<(&str, &str, Vec<&str>)> = placed
            .iter()
            .map(|v| {
                (
                    v.vdev.as_str(),
                    v.device.as_str(),
                    v.drives.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("sda", "sda", vec!["sda"]),
                (nvme_link, "nvme0n1p1", vec!["nvme0n1"]),
                ("striped", "dm-1", vec!["sda", "sdb"]),
            ]
        );
        let t = text(&Layers {
            zfs_status: pools.to_vec(),
            vdev_drives: placed,
            ..Default::default()
        });
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("ssdwatch_zfs_vdev_drive_info{"))
            .collect();
        assert_eq!(
            rows,
            [
                "ssdwatch_zfs_vdev_drive_info{pool=\"tank\",vdev=\"sda\",device=\"sda\",drive=\"sda\"} 1",
                &format!(
                    "ssdwatch_zfs_vdev_drive_info{{pool=\"tank\",vdev=\"{nvme_link}\",device=\"nvme0n1p1\",drive=\"nvme0n1\"}} 1"
                ),
                "ssdwatch_zfs_vdev_drive_info{pool=\"tank\",vdev=\"striped\",device=\"dm-1\",drive=\"sda\"} 1",
                "ssdwatch_zfs_vdev_drive_info{pool=\"tank\",vdev=\"striped\",device=\"dm-1\",drive=\"sdb\"} 1",
            ]
        );
    }

    /// Each btrfs device's counters under its kernel name: by devid where the filesystem
    /// answered its device query, the one device /sys lists for a one-device filesystem, and
    /// `devid<N>` where neither tells; a file that could not be read gives no series.
    #[test]
    fn btrfs_error_counters_are_named_by_the_device_the_filesystem_calls_devid() {
        let c = |corruption| {
            Ok(ErrorCounts {
                corruption,
                ..Default::default()
            })
        };
        let errs = |list: Vec<(u64, Result<ErrorCounts, btrfs_sysfs::ErrorStatsFileError>)>| {
            list.into_iter()
                .map(|(devid, counts)| btrfs_sysfs::DeviceErrors { devid, counts })
                .collect()
        };
        let dev = |name: &str, devid| BtrfsDevice {
            name: name.into(),
            size_bytes: Some(1 << 30),
            unallocated_bytes: None,
            devid,
        };
        let asked = BtrfsSpace {
            fs: btrfs_sysfs::Btrfs {
                uuid: "aa".into(),
                devices: vec!["sdb1".into(), "sdc1".into()],
                device_errors: errs(vec![
                    (1, c(3)),
                    (2, c(0)),
                    (
                        3,
                        Err(btrfs_sysfs::ErrorStatsFileError {
                            devid: 3,
                            error: crate::btrfs::error_stats::ErrorStatsError::Missing(
                                "write_errs",
                            ),
                        }),
                    ),
                ]),
                ..Default::default()
            },
            devices: vec![dev("sdc1", Some(1)), dev("sdb1", Some(2))],
        };
        let one = BtrfsSpace {
            fs: btrfs_sysfs::Btrfs {
                uuid: "bb".into(),
                devices: vec!["nvme0n1p2".into()],
                device_errors: errs(vec![(1, c(1))]),
                ..Default::default()
            },
            devices: vec![dev("nvme0n1p2", None)],
        };
        let unasked = BtrfsSpace {
            fs: btrfs_sysfs::Btrfs {
                uuid: "cc".into(),
                devices: vec!["sdd".into(), "sde".into()],
                device_errors: errs(vec![(2, c(5))]),
                ..Default::default()
            },
            devices: vec![dev("sdd", None), dev("sde", None)],
        };
        let t = text(&Layers {
            btrfs: vec![asked, one, unasked],
            ..Default::default()
        });
        let v = |u: &str, d: &str, ty: &str| {
            let series = format!(
                "ssdwatch_btrfs_device_errors_total{{uuid=\"{u}\",device=\"{d}\",type=\"{ty}\"}} "
            );
            t.lines()
                .find_map(|l| l.strip_prefix(&series))
                .map(|x| x.to_string())
        };
        assert_eq!(v("aa", "sdc1", "corruption").as_deref(), Some("3"), "{t}");
        assert_eq!(v("aa", "sdb1", "corruption").as_deref(), Some("0"));
        assert_eq!(v("aa", "sdc1", "generation").as_deref(), Some("0"));
        assert!(
            !t.contains("devid3"),
            "an unreadable file has no series: {t}"
        );
        assert_eq!(v("bb", "nvme0n1p2", "corruption").as_deref(), Some("1"));
        assert_eq!(v("cc", "devid2", "corruption").as_deref(), Some("5"));
        let n = t
            .lines()
            .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{"))
            .count();
        assert_eq!(n, 4 * 5, "five counters for each of four readable devices");
    }

    /// md members' corrected read errors, one series per member; an unknown count none.
    #[test]
    fn md_members_corrected_read_errors_are_per_member() {
        let t = text(&Layers {
            md: vec![md::Array {
                name: "md0".into(),
                level: "raid1".into(),
                member_list: vec![
                    md::Member {
                        name: "nvme0n1p1".into(),
                        corrected_read_errors: Some(0),
                    },
                    md::Member {
                        name: "nvme1n1p1".into(),
                        corrected_read_errors: Some(37),
                    },
                    md::Member {
                        name: "sdz".into(),
                        corrected_read_errors: None,
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        });
        assert!(t.contains("ssdwatch_md_member_corrected_read_errors_total{device=\"md0\",member=\"nvme1n1p1\"} 37\n"), "{t}");
        assert!(t.contains("ssdwatch_md_member_corrected_read_errors_total{device=\"md0\",member=\"nvme0n1p1\"} 0\n"));
        assert!(!t.contains("member=\"sdz\""));
    }

    /// Names from dmsetup and zpool output reach the exposition in their label form: an ESC
    /// (or any control character) is written `\x1b`, as in a mount point, so it can't drive
    /// an admin's terminal through a scrape, a log line or the report.
    #[test]
    fn control_characters_in_pool_and_volume_names_are_escaped_in_labels() {
        let table = "vg-\u{1b}[2Jpool-tpool: 0 131072 thin-pool 253:0 253:1 128 0 1 skip_block_zeroing\n\
                     <script>x</script>: 0 204800 thin 253:2 1\n";
        let status = "vg-\u{1b}[2Jpool-tpool: 0 131072 thin-pool 1 22/1024 976/1024 - rw no_discard_passdown queue_if_no_space - 256\n\
                      <script>x</script>: 0 204800 thin 124928 204799\n";
        let name_of = |d: &str| (d == "253:2").then(|| "vg-\\x1b[2Jpool-tpool".to_string());
        let (thin_pools, problems) = thin::pools(table, status, name_of);
        assert!(problems.is_empty(), "{problems:?}");
        let (zfs_pools, errors) =
            zfs::parse_pools("t\u{1b}]0;owned\u{7}ank\t100\t10\t90\t1\t10\tONLINE\t-\t-\n");
        assert!(errors.is_empty(), "{errors:?}");
        let (zfs_datasets, errors) =
            zfs::parse_datasets("t\u{1b}]0;owned\u{7}ank/<script>\t1\t2\t3\t-\t0\t/tank/\u{1b}x\n");
        assert!(errors.is_empty(), "{errors:?}");
        let t = text(&Layers {
            thin_pools,
            zfs_pools,
            zfs_datasets,
            ..Default::default()
        });
        assert!(!t.contains('\u{1b}') && !t.contains('\u{7}'), "{t:?}");
        assert!(
            t.contains("ssdwatch_thin_volume_size_bytes{volume=\"<script>x</script>\",pool=\"vg-\\\\x1b[2Jpool-tpool\"} 104857600"),
            "{t}"
        );
        assert!(
            t.contains("ssdwatch_zfs_dataset_used_bytes{dataset=\"t\\\\x1b]0;owned\\\\x07ank/<script>\",pool=\"t\\\\x1b]0;owned\\\\x07ank\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("ssdwatch_zfs_pool_size_bytes{pool=\"t\\\\x1b]0;owned\\\\x07ank\"} 100"),
            "{t}"
        );
    }
}
