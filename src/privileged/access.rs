//! Why smartctl was refused a device: which of the usual causes holds here (the node's mode and
//! group, a capability smartctl does not get, or a refusal from elsewhere), so the message names
//! that one. `cause` is a pure decision over observed facts; `facts` gathers them.

use std::path::Path;

/// Capability numbers (linux/capability.h).
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
pub(crate) const CAP_SYS_RAWIO: u32 = 17;
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

fn cap_name(cap: u32) -> &'static str {
    match cap {
        CAP_SYS_RAWIO => "CAP_SYS_RAWIO",
        CAP_SYS_ADMIN => "CAP_SYS_ADMIN",
        _ => "a capability",
    }
}

/// A device node as stat tells it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub path: String,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Owner and group names for the message, when /etc/passwd and /etc/group know them.
    pub owner: String,
    pub group: String,
}

/// What was observed about smartctl's side of a refused run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Facts {
    /// The node it opened; None when it could not be examined.
    pub node: Option<Node>,
    /// The credentials smartctl runs with (the daemon's: it is not setuid).
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// Capabilities smartctl holds once started (ambient or file capabilities, all for root);
    /// None when /proc could not tell.
    pub smartctl_caps: Option<u64>,
    /// Capabilities the daemon itself holds (effective).
    pub daemon_caps: Option<u64>,
    /// The capability the command needs: CAP_SYS_RAWIO (ATA/SCSI passthrough) or CAP_SYS_ADMIN
    /// (NVMe admin commands).
    pub needed: u32,
}

/// The cause a refusal is put down to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cause {
    /// The node's mode and owner/group give smartctl no read access.
    NodeAccess(Node, u32, u32),
    /// smartctl lacks the capability; `daemon_has` when the daemon holds it but smartctl does
    /// not inherit it.
    MissingCap { cap: u32, daemon_has: bool },
    /// smartctl had both: the kernel, the driver or a security policy refused.
    Elsewhere { cap: u32, node: Node },
    /// Not enough was observed to tell.
    Unknown { cap: u32 },
}

fn has(caps: u64, cap: u32) -> bool {
    caps & (1u64 << cap) != 0
}

/// Which cause holds. The node is checked first (a mode that shuts smartctl out fails the
/// open whatever the capabilities), then the capability smartctl gets on exec.
pub(crate) fn cause(f: &Facts) -> Cause {
    let cap = f.needed;
    let Some(node) = &f.node else {
        return Cause::Unknown { cap };
    };
    let dac_bypass = f
        .smartctl_caps
        .is_some_and(|c| has(c, CAP_DAC_OVERRIDE) || has(c, CAP_DAC_READ_SEARCH));
    let readable = if node.uid == f.uid {
        node.mode & 0o400 != 0
    } else if node.gid == f.gid || f.groups.contains(&node.gid) {
        node.mode & 0o040 != 0
    } else {
        node.mode & 0o004 != 0
    };
    if !readable && !dac_bypass {
        return Cause::NodeAccess(node.clone(), f.uid, f.gid);
    }
    match f.smartctl_caps {
        Some(c) if !has(c, cap) => Cause::MissingCap {
            cap,
            daemon_has: f.daemon_caps.is_some_and(|d| has(d, cap)),
        },
        Some(_) => Cause::Elsewhere {
            cap,
            node: node.clone(),
        },
        None => Cause::Unknown { cap },
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::NodeAccess(n, uid, gid) => write!(
                f,
                "{} is {:04o} {}:{} and smartctl runs as uid {uid} gid {gid} without read access to it; give that user read access to the node (a udev rule setting its group, or the service's SupplementaryGroups)",
                n.path,
                n.mode & 0o7777,
                n.owner,
                n.group
            ),
            Cause::MissingCap {
                cap,
                daemon_has: true,
            } => write!(
                f,
                "ssdwatch holds {0} but smartctl does not get it when started: make it ambient (AmbientCapabilities= in the unit) or a file capability of smartctl",
                cap_name(*cap)
            ),
            Cause::MissingCap {
                cap,
                daemon_has: false,
            } => write!(
                f,
                "smartctl needs {} for {}, which it does not hold",
                cap_name(*cap),
                if *cap == CAP_SYS_ADMIN {
                    "NVMe admin commands"
                } else {
                    "ATA/SCSI passthrough"
                }
            ),
            Cause::Elsewhere { cap, node } => write!(
                f,
                "smartctl held {} and read access to {} ({:04o} {}:{}): the refusal came from the device's driver (no passthrough of this command, e.g. a virtio disk or the wrong -d type), a security module (AppArmor, SELinux) or the service's device policy",
                cap_name(*cap),
                node.path,
                node.mode & 0o7777,
                node.owner,
                node.group
            ),
            Cause::Unknown { cap } => write!(
                f,
                "smartctl needs {} and read access to the device node",
                cap_name(*cap)
            ),
        }
    }
}

/// Gathers the facts of a refusal of `path` to smartctl at `smartctl` (a path or a name
/// looked up on PATH).
pub(crate) fn facts(path: &str, smartctl: &Path, needed: u32) -> Facts {
    use std::os::unix::fs::MetadataExt;
    let node = std::fs::metadata(path).ok().map(|m| Node {
        path: path.to_string(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        owner: name_of("/etc/passwd", m.uid()).unwrap_or_else(|| m.uid().to_string()),
        group: name_of("/etc/group", m.gid()).unwrap_or_else(|| m.gid().to_string()),
    });
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let (bnd, amb, eff) = (field("CapBnd:"), field("CapAmb:"), field("CapEff:"));
    let uid = nix::unistd::geteuid().as_raw();
    let smartctl_caps = if uid == 0 {
        // Root gets the bounding set on exec (no securebits games assumed).
        bnd
    } else {
        amb.map(|a| a | file_caps(smartctl).unwrap_or(0) & bnd.unwrap_or(!0))
    };
    Facts {
        node,
        uid,
        gid: nix::unistd::getegid().as_raw(),
        groups: nix::unistd::getgroups()
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default(),
        smartctl_caps,
        daemon_caps: eff,
        needed,
    }
}

/// The name of an id in a passwd/group file (name:x:id:...).
fn name_of(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == id).then(|| name.to_string())
    })
}

/// The permitted file capabilities of the smartctl binary (security.capability), if any.
fn file_caps(smartctl: &Path) -> Option<u64> {
    let path = crate::exe::find(smartctl)?;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let name = c"security.capability";
    let mut buf = [0u8; 24];
    // SAFETY: valid NUL-terminated strings and a buffer of the length passed.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    // vfs_cap_data: magic, then (permitted, inheritable) low words, then high words.
    let n = usize::try_from(n).ok()?;
    if n < 12 {
        return None;
    }
    let word = |i: usize| {
        u64::from(u32::from_le_bytes([
            buf[i],
            buf[i + 1],
            buf[i + 2],
            buf[i + 3],
        ]))
    };
    let hi = if n >= 20 { word(12) } else { 0 };
    Some(word(4) | hi << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mode: u32, uid: u32, gid: u32) -> Option<Node> {
        Some(Node {
            path: "/dev/sda".into(),
            mode: 0o60000 | mode,
            uid,
            gid,
            owner: if uid == 0 {
                "root".into()
            } else {
                uid.to_string()
            },
            group: match gid {
                0 => "root".into(),
                6 => "disk".into(),
                g => g.to_string(),
            },
        })
    }

    fn facts(node: Option<Node>, uid: u32, groups: &[u32], smartctl: u64, daemon: u64) -> Facts {
        Facts {
            node,
            uid,
            gid: uid,
            groups: groups.to_vec(),
            smartctl_caps: Some(smartctl),
            daemon_caps: Some(daemon),
            needed: CAP_SYS_RAWIO,
        }
    }

    const RAWIO: u64 = 1 << CAP_SYS_RAWIO;
    const ALL: u64 = 0x1ff_ffff_ffff;

    #[test]
    fn the_cause_named_is_the_one_that_holds() {
        let cases: [(&str, Facts, &str); 6] = [
            (
                "capabilities held but the node is 0600 root:root",
                facts(node(0o600, 0, 0), 999, &[999], RAWIO, RAWIO),
                "/dev/sda is 0600 root:root and smartctl runs as uid 999 gid 999 without read access",
            ),
            (
                "in group disk, node 0660 root:disk, no capability at all",
                facts(node(0o660, 0, 6), 999, &[6], 0, 0),
                "smartctl needs CAP_SYS_RAWIO for ATA/SCSI passthrough, which it does not hold",
            ),
            (
                "the daemon holds it, but not as an ambient capability",
                facts(node(0o660, 0, 6), 999, &[6], 0, RAWIO),
                "ssdwatch holds CAP_SYS_RAWIO but smartctl does not get it",
            ),
            (
                "root: both held, refused by the driver",
                facts(node(0o600, 0, 0), 0, &[0], ALL, ALL),
                "smartctl held CAP_SYS_RAWIO and read access to /dev/sda (0600 root:root): the refusal came from the device's driver",
            ),
            (
                "CAP_DAC_OVERRIDE opens a 0600 node",
                facts(
                    node(0o600, 0, 0),
                    999,
                    &[],
                    RAWIO | 1 << CAP_DAC_OVERRIDE,
                    RAWIO,
                ),
                "smartctl held CAP_SYS_RAWIO and read access",
            ),
            (
                "the node could not be examined",
                facts(None, 999, &[], RAWIO, RAWIO),
                "smartctl needs CAP_SYS_RAWIO and read access to the device node",
            ),
        ];
        for (story, f, want) in cases {
            let got = cause(&f).to_string();
            assert!(got.starts_with(want), "{story}: {got}");
        }
        let mut nvme = facts(node(0o600, 999, 0), 999, &[], RAWIO, RAWIO);
        nvme.needed = CAP_SYS_ADMIN;
        assert_eq!(
            cause(&nvme).to_string(),
            "smartctl needs CAP_SYS_ADMIN for NVMe admin commands, which it does not hold"
        );
    }
}
