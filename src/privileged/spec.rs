//! The privileged helper: the process that keeps CAP_SYS_RAWIO and CAP_SYS_ADMIN and reads
//! drives (smartctl, libatasmart) and device-mapper tables (dmsetup) for the daemon, which holds
//! no capability. Here: what it is started with (`Spec`), the messages on its socket, and the
//! rule of which reads it accepts (`allow`, pure). The worker's loop is in `worker`, the
//! daemon's side in `client`; starting and restarting it is `crate::privsep`'s.
//!
//! The wire: each message is a frame (a 4-byte big-endian length, then that many bytes). A
//! request is one JSON frame; a reply one JSON frame, followed by one frame of smartctl's
//! output when it says so. The daemon never sends an argument list: the helper builds smartctl's
//! from the fixed set of `smart::argv::smartctl_args`.

use crate::collector::device_filter::{DevicePattern, wanted};
use crate::smart::argv::Asks;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a helper is started with, fixed for its life: the SMART part of the config as the
/// daemon loaded it before it gave up its capabilities.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Spec {
    pub smartctl: PathBuf,
    pub timeout_ms: u64,
    pub nocheck_standby: bool,
    /// The sysfs root discovery looks at (`--path.sysfs`).
    pub sys: PathBuf,
    pub discover: bool,
    pub include: Option<String>,
    pub exclude: Option<String>,
    /// Configured devices: a node and its `-d` type.
    pub devices: Vec<(String, Option<String>)>,
    /// dmsetup, when the layers collector reads thin pools (the device-mapper ioctls need
    /// CAP_SYS_ADMIN, which only the helper keeps); None: no dmsetup request is served.
    #[serde(default)]
    pub dmsetup: Option<PathBuf>,
    #[serde(default)]
    pub dmsetup_timeout_ms: u64,
    /// NVMe drives may be asked for the OCP SMART log (C0h): `collectors.smart.nvme_ocp_log`.
    /// Off: a request asking for it gets the run without it.
    #[serde(default)]
    pub ocp_log: bool,
    /// `collectors.smart.discover_raid`: the helper runs `smartctl --scan-open` when asked and
    /// reads drives behind RAID controllers (`smart::scan`'s port types on its controller
    /// nodes) without their being listed under `devices`.
    #[serde(default)]
    pub discover_raid: bool,
    /// btrfs-progs' `btrfs`, when the layers collector reads btrfs error counters on kernels
    /// without `error_stats` (`btrfs device stats` needs CAP_SYS_ADMIN); None: no such request
    /// is served. Its runs take `dmsetup_timeout_ms` (the layers collector's timeout).
    #[serde(default)]
    pub btrfs: Option<PathBuf>,
    /// The procfs root (`--path.procfs`) whose mount table says which paths are btrfs mounts.
    #[serde(default = "default_proc")]
    pub proc: PathBuf,
}

fn default_proc() -> PathBuf {
    PathBuf::from("/proc")
}

/// `btrfs device stats`'s whole argument list for `mount`, if the helper may run it there:
/// an absolute path that is a btrfs mount point in `btrfs_mounts` (the helper's own mount
/// table), never an option or another path.
pub(crate) fn btrfs_stats_args(
    mount: &str,
    btrfs_mounts: &[PathBuf],
) -> Result<Vec<String>, Refusal> {
    if !mount.starts_with('/') || mount.contains('\0') {
        return Err(Refusal::NotAbsolute {
            mount: mount.to_string(),
        });
    }
    if !btrfs_mounts.iter().any(|m| m.as_os_str() == mount) {
        return Err(Refusal::NotABtrfsMount {
            mount: mount.to_string(),
        });
    }
    Ok(crate::btrfs::device_stats::args(mount))
}

impl Spec {
    /// What a request may ask of a drive: the OCP log only where the config allowed it,
    /// whatever the request says.
    pub(crate) fn allowed_asks(&self, asks: Asks) -> Asks {
        Asks {
            ocp: asks.ocp && self.ocp_log,
            ..asks
        }
    }
}

/// What the layers collector may ask dmsetup: `dmsetup table` or `dmsetup status` of every
/// device, and nothing else.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DmQuery {
    Table,
    Status,
}

impl DmQuery {
    /// dmsetup's whole argument list for the query.
    pub fn args(self) -> Vec<String> {
        vec![
            match self {
                DmQuery::Table => "table",
                DmQuery::Status => "status",
            }
            .to_string(),
        ]
    }
}

/// A drive's protocol as smartctl names it: which fixed set of extra logs a read asks for.
/// Only these three can come over the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Protocol {
    #[serde(rename = "ATA")]
    Ata,
    #[serde(rename = "NVMe")]
    Nvme,
    #[serde(rename = "SCSI")]
    Scsi,
}

impl Protocol {
    /// smartctl's `device.protocol` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Ata => "ATA",
            Protocol::Nvme => "NVMe",
            Protocol::Scsi => "SCSI",
        }
    }

    pub fn from_smartctl(s: &str) -> Option<Protocol> {
        [Protocol::Ata, Protocol::Nvme, Protocol::Scsi]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// A request to the helper.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Request {
    /// Run smartctl's fixed argument set on a device; `protocol` (once known) adds that
    /// protocol's fixed set of small logs (`smart::argv::smartctl_args`).
    Smartctl {
        id: u64,
        path: String,
        dev_type: Option<String>,
        protocol: Option<Protocol>,
        /// Which of the protocol's logs; the drive refused the others.
        asks: Asks,
    },
    /// Read an ATA drive through libatasmart.
    Atasmart { id: u64, path: String },
    /// Run dmsetup's fixed `table` or `status` (thin pools, for the layers collector).
    Dmsetup { id: u64, query: DmQuery },
    /// Run smartctl's fixed `--scan-open --json=c` (RAID port discovery).
    ScanRaid { id: u64 },
    /// Run `btrfs device stats MOUNT` on a btrfs mount point (error counters where the kernel
    /// has no `error_stats`).
    BtrfsDeviceStats { id: u64, mount: String },
}

impl Request {
    pub(crate) fn id(&self) -> u64 {
        match self {
            Request::Smartctl { id, .. }
            | Request::Atasmart { id, .. }
            | Request::Dmsetup { id, .. }
            | Request::ScanRaid { id }
            | Request::BtrfsDeviceStats { id, .. } => *id,
        }
    }
}

/// How a failed run is told over the socket: the kinds the collector treats differently, and
/// the message of the rest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FailKind {
    TimedOut,
    Stuck,
    AtasmartStuck,
    Task,
    NoTask,
    Other,
}

/// A reply from the helper.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Reply {
    /// The run gave output: it follows in the next frame (`len` bytes).
    Output {
        id: u64,
        len: u64,
        exit: super::runner::Exit,
        escaped: super::escape::Swept,
        /// When smartctl was refused the device: the cause, observed where smartctl ran.
        cause: Option<String>,
    },
    Failed {
        id: u64,
        kind: FailKind,
        after_ms: u64,
        message: String,
    },
    /// The request was not one the helper serves.
    Refused { id: u64, reason: String },
    /// A run reported stuck in the kernel (failed as stuck, or output with `escaped.stuck`)
    /// has ended.
    Reaped { id: u64 },
}

/// Limits of a frame: requests and reply headers are small; output is capped by the runner.
pub(crate) const MAX_REQUEST: u32 = 64 << 10;
pub(crate) const MAX_OUTPUT_FRAME: u32 = (4 << 20) + 1;

/// Reads one frame of at most `max` bytes; None at a clean end of stream.
pub(crate) async fn read_frame<R: AsyncReadExt + Unpin>(
    r: &mut R,
    max: u32,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = u32::from_be_bytes(len);
    if n > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a {n}-byte frame; at most {max}"),
        ));
    }
    let mut buf = vec![0u8; n as usize];
    r.read_exact(&mut buf).await?;
    Ok(Some(buf))
}

/// Writes frames back to back.
pub(crate) async fn write_frames<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    frames: &[&[u8]],
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(frames.iter().map(|f| f.len() + 4).sum());
    for f in frames {
        let n = u32::try_from(f.len()).map_err(|_| std::io::Error::other("frame too large"))?;
        buf.extend_from_slice(&n.to_be_bytes());
        buf.extend_from_slice(f);
    }
    w.write_all(&buf).await?;
    w.flush().await
}

/// What the helper observed of a device node for the allow rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeFacts {
    /// /dev/NAME is a block device node.
    pub block_node: bool,
    /// SYS/block/NAME/device exists: a drive the kernel found on a bus (not loop, dm, md).
    pub sys_drive: bool,
}

/// Discovered drive names: what the collector's discovery accepts.
fn kernel_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why the helper refuses a request: each names the device or mount it was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("{mount:?} is not an absolute path")]
    NotAbsolute { mount: String },
    #[error("{mount:?} is not a btrfs mount point")]
    NotABtrfsMount { mount: String },
    /// A `-d TYPE` read of a device not configured with that type; `raid_port`: a RAID port a
    /// scan could find, refused because discover_raid is off.
    #[error("{path} with -d {dev_type} is not a device of collectors.smart.devices{}", if *raid_port { " (discover_raid is off)" } else { "" })]
    NotConfiguredWithType {
        path: String,
        dev_type: String,
        raid_port: bool,
    },
    #[error("{path} is not a device of collectors.smart.devices (discovery is off)")]
    DiscoveryOff { path: String },
    #[error("{path} is neither a configured device nor a kernel drive name under /dev/")]
    NotAKernelName { path: String },
    #[error("{path} is left out by device_include/device_exclude")]
    Filtered { path: String },
    #[error("{path}: {}/block/{name}/device does not exist: not a drive the kernel found", sys.display())]
    NotADrive {
        path: String,
        sys: PathBuf,
        name: String,
    },
    #[error("{path} is not a block device node")]
    NotABlockNode { path: String },
}

/// A device filter of the spec that does not compile, with its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub(crate) struct PatternError {
    pub key: &'static str,
    pub reason: String,
}

/// The allow rule, compiled once.
pub(crate) struct Allow {
    spec: Spec,
    include: Option<DevicePattern>,
    exclude: Option<DevicePattern>,
}

impl Allow {
    pub(crate) fn new(spec: Spec) -> Result<Allow, PatternError> {
        let pat = |p: &Option<String>, key: &'static str| {
            p.as_deref()
                .map(DevicePattern::new)
                .transpose()
                .map_err(|reason| PatternError { key, reason })
        };
        Ok(Allow {
            include: pat(&spec.include, "device_include")?,
            exclude: pat(&spec.exclude, "device_exclude")?,
            spec,
        })
    }

    pub(crate) fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Whether a read of `path` (with `-d dev_type`) is one the config allows: a configured
    /// device exactly as configured, or, with discovery on, a drive the kernel found (a block
    /// node /dev/NAME of a drive on a bus) that the include/exclude filters let through.
    /// `node` observes the node only when the rule gets that far.
    pub(crate) fn check(
        &self,
        path: &str,
        dev_type: Option<&str>,
        node: impl FnOnce(&str) -> NodeFacts,
    ) -> Result<(), Refusal> {
        if self
            .spec
            .devices
            .iter()
            .any(|(p, t)| p == path && t.as_deref() == dev_type)
        {
            return Ok(());
        }
        if let Some(t) = dev_type {
            // A port a scan can find: its type and node are of the fixed shapes RAID
            // passthrough uses, so no other device or option gets through this way.
            let raid_port =
                crate::smart::scan::is_raid_type(t) && crate::smart::scan::is_raid_node(path);
            if raid_port && self.spec.discover_raid {
                return Ok(());
            }
            return Err(Refusal::NotConfiguredWithType {
                path: path.to_string(),
                dev_type: t.to_string(),
                raid_port,
            });
        }
        if !self.spec.discover {
            return Err(Refusal::DiscoveryOff {
                path: path.to_string(),
            });
        }
        let Some(name) = path.strip_prefix("/dev/").filter(|n| kernel_name_ok(n)) else {
            return Err(Refusal::NotAKernelName {
                path: path.to_string(),
            });
        };
        if !wanted(self.include.as_ref(), self.exclude.as_ref(), name) {
            return Err(Refusal::Filtered {
                path: path.to_string(),
            });
        }
        let facts = node(name);
        if !facts.sys_drive {
            return Err(Refusal::NotADrive {
                path: path.to_string(),
                sys: self.spec.sys.clone(),
                name: name.to_string(),
            });
        }
        if !facts.block_node {
            return Err(Refusal::NotABlockNode {
                path: path.to_string(),
            });
        }
        Ok(())
    }

    /// The node facts of a discovered name, as the kernel shows them now.
    pub(crate) fn observe(&self, name: &str) -> NodeFacts {
        use std::os::unix::fs::FileTypeExt;
        NodeFacts {
            block_node: std::fs::symlink_metadata(
                std::path::Path::new("/dev").join(crate::sysfs::name_path(name)),
            )
            .is_ok_and(|m| m.file_type().is_block_device()),
            sys_drive: self
                .spec
                .sys
                .join("block")
                .join(crate::sysfs::name_path(name))
                .join("device")
                .exists(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            smartctl: "smartctl".into(),
            timeout_ms: 30_000,
            nocheck_standby: true,
            sys: "/sys".into(),
            discover: true,
            include: None,
            exclude: Some("^sd[x-z]$".into()),
            devices: vec![
                ("/dev/bus/0".into(), Some("megaraid,3".into())),
                ("/dev/sdb".into(), None),
            ],
            dmsetup: None,
            dmsetup_timeout_ms: 0,
            ocp_log: false,
            discover_raid: false,
            btrfs: None,
            proc: "/proc".into(),
        }
    }

    const DRIVE: NodeFacts = NodeFacts {
        block_node: true,
        sys_drive: true,
    };

    #[test]
    fn only_configured_devices_and_discovered_drives_are_read() {
        let a = Allow::new(spec()).unwrap();
        let ok = |p: &str, t: Option<&str>, f: NodeFacts| a.check(p, t, |_| f);
        type Case<'a> = (&'a str, Option<&'a str>, NodeFacts, Result<(), &'a str>);
        let cases: [Case; 9] = [
            ("/dev/bus/0", Some("megaraid,3"), DRIVE, Ok(())),
            (
                "/dev/bus/0",
                Some("megaraid,4"),
                DRIVE,
                Err(
                    "/dev/bus/0 with -d megaraid,4 is not a device of collectors.smart.devices (discover_raid is off)",
                ),
            ),
            ("/dev/nvme0n1", None, DRIVE, Ok(())),
            (
                "/dev/sdy",
                None,
                DRIVE,
                Err("/dev/sdy is left out by device_include/device_exclude"),
            ),
            (
                "/etc/shadow",
                None,
                DRIVE,
                Err(
                    "/etc/shadow is neither a configured device nor a kernel drive name under /dev/",
                ),
            ),
            (
                "/dev/../etc/shadow",
                None,
                DRIVE,
                Err(
                    "/dev/../etc/shadow is neither a configured device nor a kernel drive name under /dev/",
                ),
            ),
            (
                "/dev/loop0",
                None,
                NodeFacts {
                    block_node: true,
                    sys_drive: false,
                },
                Err(
                    "/dev/loop0: /sys/block/loop0/device does not exist: not a drive the kernel found",
                ),
            ),
            (
                "/dev/sda",
                None,
                NodeFacts {
                    block_node: false,
                    sys_drive: true,
                },
                Err("/dev/sda is not a block device node"),
            ),
            (
                "/dev/sda",
                Some("sat"),
                DRIVE,
                Err("/dev/sda with -d sat is not a device of collectors.smart.devices"),
            ),
        ];
        for (path, t, f, want) in cases {
            assert_eq!(
                ok(path, t, f).map_err(|e| e.to_string()),
                want.map_err(String::from),
                "{path} {t:?}"
            );
        }
        // A configured device needs no node (a RAID port's name is smartctl's own).
        assert_eq!(
            a.check("/dev/sdb", None, |_| panic!("not observed")),
            Ok(())
        );
        let off = Allow::new(Spec {
            discover: false,
            ..spec()
        })
        .unwrap();
        assert_eq!(
            off.check("/dev/nvme0n1", None, |_| DRIVE)
                .map_err(|e| e.to_string()),
            Err(
                "/dev/nvme0n1 is not a device of collectors.smart.devices (discovery is off)"
                    .into()
            )
        );
    }

    #[test]
    fn with_raid_discovery_any_raid_port_on_a_controller_node_is_read_and_nothing_else() {
        let on = Allow::new(Spec {
            discover_raid: true,
            ..spec()
        })
        .unwrap();
        let off = Allow::new(spec()).unwrap();
        for (path, t) in [
            ("/dev/bus/1", "megaraid,12"),
            ("/dev/bus/0", "sat+megaraid,0"),
            ("/dev/twa0", "3ware,1"),
            ("/dev/sg3", "cciss,0"),
        ] {
            assert_eq!(on.check(path, Some(t), |_| DRIVE), Ok(()), "{path} {t}");
            let e = off.check(path, Some(t), |_| DRIVE).unwrap_err().to_string();
            assert!(e.contains("discover_raid is off"), "{e}");
        }
        for (path, t) in [
            ("/dev/bus/1", "sat"),
            ("/dev/bus/1", "megaraid,12,1"),
            ("/dev/mem", "megaraid,1"),
            ("/dev/bus/../../etc", "megaraid,1"),
            ("/dev/sda", "usbjmicron,0"),
        ] {
            assert!(on.check(path, Some(t), |_| DRIVE).is_err(), "{path} {t}");
        }
        // The configured port is read either way.
        assert_eq!(
            off.check("/dev/bus/0", Some("megaraid,3"), |_| DRIVE),
            Ok(())
        );
    }

    #[test]
    fn the_ocp_log_is_read_only_where_the_config_allows_it() {
        let ocp = Asks {
            ocp: true,
            ..Asks::ALL
        };
        assert_eq!(spec().allowed_asks(ocp), Asks::ALL, "off by default");
        let on = Spec {
            ocp_log: true,
            ..spec()
        };
        assert_eq!(on.allowed_asks(ocp), ocp);
        assert_eq!(on.allowed_asks(Asks::ALL), Asks::ALL);
    }

    #[test]
    fn requests_and_replies_keep_their_shape_on_the_wire() {
        let r = Request::Smartctl {
            id: 7,
            path: "/dev/sda".into(),
            dev_type: None,
            protocol: Some(Protocol::Ata),
            asks: Asks::ALL,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"op":"smartctl","id":7,"path":"/dev/sda","dev_type":null,"protocol":"ATA","asks":{"devstat":true,"logs":true,"ocp":false}}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        // A daemon of the release before (no `ocp`) is understood by this helper.
        assert_eq!(
            serde_json::from_str::<Request>(
                r#"{"op":"smartctl","id":7,"path":"/dev/sda","dev_type":null,"protocol":"ATA","asks":{"devstat":true,"logs":true}}"#
            )
            .unwrap(),
            r
        );
        // No way to smuggle an argument list in.
        assert!(
            serde_json::from_str::<Request>(
                r#"{"op":"smartctl","id":7,"path":"/dev/sda","dev_type":null,"protocol":"ATA","asks":{"devstat":true,"logs":true},"args":["-x"]}"#
            )
            .is_err()
        );
        // Nor another set of logs.
        assert!(
            serde_json::from_str::<Request>(
                r#"{"op":"smartctl","id":7,"path":"/dev/sda","dev_type":null,"protocol":"-x","asks":{"devstat":true,"logs":true}}"#
            )
            .is_err()
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"exec","id":1}"#).is_err());
    }

    proptest::proptest! {
        /// Whatever path and type come in, the helper lets through only a configured device or
        /// a plain kernel name directly under /dev: never a path that climbs out of it.
        #[test]
        fn nothing_outside_the_rule_is_let_through(
            path in "(/dev/)?[A-Za-z0-9_./ -]{0,40}",
            dev_type in proptest::option::of("[a-z,+0-9 -]{0,12}"),
        ) {
            let a = Allow::new(spec()).unwrap();
            if a.check(&path, dev_type.as_deref(), |_| DRIVE).is_ok() {
                let configured = spec()
                    .devices
                    .iter()
                    .any(|(p, t)| *p == path && *t == dev_type);
                let name = path.strip_prefix("/dev/").unwrap_or("");
                proptest::prop_assert!(
                    configured || (dev_type.is_none() && kernel_name_ok(name)),
                    "{path:?} {dev_type:?}"
                );
                proptest::prop_assert!(!path.contains("..") || configured);
            }
        }

        /// Any bytes on the socket: a frame, an end, or an error; never a panic, never a buffer
        /// beyond the cap.
        #[test]
        fn any_bytes_read_as_frames_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let mut r = bytes.as_slice();
            while let Ok(Some(f)) = rt.block_on(read_frame(&mut r, 16)) {
                proptest::prop_assert!(f.len() <= 16);
            }
        }
    }

    #[tokio::test]
    async fn an_oversized_frame_is_refused_before_it_is_read() {
        let mut big = Vec::new();
        big.extend_from_slice(&(MAX_REQUEST + 1).to_be_bytes());
        let e = read_frame(&mut big.as_slice(), MAX_REQUEST)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "a 65537-byte frame; at most 65536");
        let mut ok = Vec::new();
        write_frames(&mut ok, &[b"ab", b""]).await.unwrap();
        let mut r = ok.as_slice();
        assert_eq!(read_frame(&mut r, 10).await.unwrap(), Some(b"ab".to_vec()));
        assert_eq!(read_frame(&mut r, 10).await.unwrap(), Some(vec![]));
        assert_eq!(read_frame(&mut r, 10).await.unwrap(), None);
    }

    /// The helper runs btrfs device stats only on a btrfs mount point of its own mount table,
    /// by its absolute path: never a relative path, an option or any other path.
    #[test]
    fn btrfs_device_stats_runs_only_on_a_btrfs_mount_point() {
        let mounts = [PathBuf::from("/srv/pgdata"), PathBuf::from("/mnt/a b")];
        assert_eq!(
            btrfs_stats_args("/srv/pgdata", &mounts),
            Ok(vec!["device".into(), "stats".into(), "/srv/pgdata".into()])
        );
        assert!(btrfs_stats_args("/mnt/a b", &mounts).is_ok());
        for (mount, why) in [
            ("srv/pgdata", "is not an absolute path"),
            ("-z", "is not an absolute path"),
            ("", "is not an absolute path"),
            ("/srv/pgdata/..", "is not a btrfs mount point"),
            ("/etc", "is not a btrfs mount point"),
            ("/srv/pgdata\0/etc", "is not an absolute path"),
        ] {
            let e = btrfs_stats_args(mount, &mounts).unwrap_err().to_string();
            assert!(e.ends_with(why), "{mount:?}: {e}");
        }
        // A request of the kind round-trips on the wire.
        let r = Request::BtrfsDeviceStats {
            id: 7,
            mount: "/srv/pgdata".into(),
        };
        let back: Request = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.id(), 7);
    }
}
