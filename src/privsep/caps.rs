//! The capability sets of this thread, read from procfs, and the one way they change here:
//! down to a kept set (`plan` decides, `apply` carries it out). No process is started here.
//!
//! Capabilities are per thread in Linux: `apply` refuses to run once the process has a second
//! thread, so no thread is left holding what the others gave up.

use std::path::Path;

/// Capability numbers (linux/capability.h).
pub const CAP_SETPCAP: u32 = 8;
pub const CAP_SYS_RAWIO: u32 = 17;
pub const CAP_SYS_ADMIN: u32 = 21;

/// What the privileged helper keeps: ATA/SCSI passthrough (CAP_SYS_RAWIO) and NVMe admin commands
/// (CAP_SYS_ADMIN). Nothing else in ssdwatch needs a capability.
pub const SMART_CAPS: u64 = 1 << CAP_SYS_RAWIO | 1 << CAP_SYS_ADMIN;

/// The five capability sets of a thread, as /proc/PID/status shows them (bit N = capability N).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapState {
    pub eff: u64,
    pub prm: u64,
    pub inh: u64,
    pub amb: u64,
    pub bnd: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CapError {
    #[error("{file}: no {field} line")]
    Missing { file: String, field: &'static str },
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error(
        "capabilities are per thread and this process already has {0} threads: they must be given up before any thread starts"
    )]
    Threaded(u64),
    #[error("{step}: {source}")]
    Call {
        step: &'static str,
        source: std::io::Error,
    },
    #[error("after giving up capabilities this thread still holds {0:?}")]
    Left(CapState),
}

/// The capability sets in a /proc/PID/status text.
pub fn parse_status(text: &str, file: &str) -> Result<CapState, CapError> {
    let field = |name: &'static str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .ok_or(CapError::Missing {
                file: file.to_string(),
                field: name,
            })
    };
    Ok(CapState {
        eff: field("CapEff:")?,
        prm: field("CapPrm:")?,
        inh: field("CapInh:")?,
        amb: field("CapAmb:")?,
        bnd: field("CapBnd:")?,
    })
}

/// The capability sets of a status file (`/proc/PID/status`, `/proc/thread-self/status`).
pub fn read(status: &Path) -> Result<CapState, CapError> {
    let file = status.display().to_string();
    let text = std::fs::read_to_string(status).map_err(|source| CapError::Read {
        file: file.clone(),
        source,
    })?;
    parse_status(&text, &file)
}

/// This thread's capability sets.
pub fn current() -> Result<CapState, CapError> {
    read(Path::new("/proc/thread-self/status"))
}

/// How to go from `held` down to `keep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Capabilities to remove from the bounding set (only possible with CAP_SETPCAP, which is
    /// then dropped last); empty without it.
    pub bounding_drop: Vec<u32>,
    /// The new effective, permitted and inheritable sets (all three the same).
    pub set: u64,
    /// Capabilities to raise in the ambient set, so a program this thread starts holds them.
    pub ambient: Vec<u32>,
}

/// From what is held to `keep`: what is kept is only what is already permitted (nothing is
/// gained); the bounding set is cut to `keep` when CAP_SETPCAP allows it (a root process, whose
/// children would otherwise get the whole bounding set back at exec); kept capabilities go to the
/// ambient set so the programs this process starts (smartctl) hold them too.
pub fn plan(held: CapState, keep: u64) -> Plan {
    let set = held.prm & keep;
    let bounding_drop = if held.eff & 1 << CAP_SETPCAP != 0 {
        (0..64)
            .filter(|c| held.bnd & 1 << c != 0 && keep & 1 << c == 0)
            .collect()
    } else {
        Vec::new()
    };
    let ambient = (0..64).filter(|c| set & 1 << c != 0).collect();
    Plan {
        bounding_drop,
        set,
        ambient,
    }
}

/// Carries out `plan(current, keep)` on this (single-threaded) process, sets no_new_privs when
/// asked, and checks the result: holds exactly `held.prm & keep` in each set afterwards.
///
/// The privileged helper keeps exec's file capabilities working (`no_new_privs` false): a user run
/// may give a private copy of smartctl its capabilities with setcap. The unit's
/// NoNewPrivileges=yes applies to it anyway.
pub fn keep_only(keep: u64, no_new_privs: bool) -> Result<CapState, CapError> {
    let threads = threads()?;
    if threads > 1 {
        return Err(CapError::Threaded(threads));
    }
    let held = current()?;
    let p = plan(held, keep);
    prctl(
        "PR_CAP_AMBIENT_CLEAR_ALL",
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as _,
        0,
    )?;
    for c in &p.bounding_drop {
        prctl("PR_CAPBSET_DROP", libc::PR_CAPBSET_DROP, *c as _, 0)?;
    }
    if no_new_privs {
        // Nothing gained by exec from here on (setuid or file-capability programs).
        prctl("PR_SET_NO_NEW_PRIVS", libc::PR_SET_NO_NEW_PRIVS, 1, 0)?;
    }
    capset(p.set)?;
    for c in &p.ambient {
        prctl(
            "PR_CAP_AMBIENT_RAISE",
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE as _,
            *c as _,
        )?;
    }
    let now = current()?;
    if now.eff != p.set || now.prm != p.set || now.inh != p.set || now.amb != p.set {
        return Err(CapError::Left(now));
    }
    Ok(now)
}

/// Gives up every capability (effective, permitted, inheritable, ambient; the bounding set
/// too when allowed) and sets no_new_privs.
pub fn drop_all() -> Result<CapState, CapError> {
    keep_only(0, true)
}

/// Sets this thread's name (`comm`, at most 15 bytes), as ps and top show the process.
pub fn set_name(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
}

fn threads() -> Result<u64, CapError> {
    let file = "/proc/self/status";
    let text = std::fs::read_to_string(file).map_err(|source| CapError::Read {
        file: file.into(),
        source,
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(CapError::Missing {
            file: file.into(),
            field: "Threads:",
        })
}

fn prctl(
    step: &'static str,
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> Result<(), CapError> {
    // SAFETY: prctl with integer arguments only; unused arguments are 0 as the man page asks.
    let r = unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if r < 0 {
        return Err(CapError::Call {
            step,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// capset(2) of this thread: effective = permitted = inheritable = `set`.
fn capset(set: u64) -> Result<(), CapError> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: 64-bit sets as two 32-bit words.
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let word = |w: u32| Data {
        effective: w,
        permitted: w,
        inheritable: w,
    };
    let data = [word(set as u32), word((set >> 32) as u32)];
    // SAFETY: a version-3 header and the two data words the kernel reads for it.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r < 0 {
        return Err(CapError::Call {
            step: "capset",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u64 = 0x1ff_ffff_ffff;

    #[test]
    fn the_status_lines_are_read_as_hex_sets() {
        let text = "Name:\tssdwatch\nCapInh:\t0000000000220000\nCapPrm:\t0000000000220000\nCapEff:\t0000000000220000\nCapBnd:\t0000000000220000\nCapAmb:\t0000000000220000\n";
        let s = parse_status(text, "/proc/1/status").unwrap();
        assert_eq!(s.eff, SMART_CAPS);
        assert_eq!(
            s,
            CapState {
                eff: SMART_CAPS,
                prm: SMART_CAPS,
                inh: SMART_CAPS,
                amb: SMART_CAPS,
                bnd: SMART_CAPS
            }
        );
        let e = parse_status("CapEff:\t0\n", "/proc/7/status").unwrap_err();
        assert_eq!(e.to_string(), "/proc/7/status: no CapPrm: line");
    }

    #[test]
    fn nothing_is_gained_and_root_cuts_its_bounding_set() {
        // The unit: ambient RAWIO|ADMIN, no CAP_SETPCAP. The daemon keeps nothing, the helper
        // the two; the bounding set is out of reach (no_new_privs guards exec instead).
        let unit = CapState {
            eff: SMART_CAPS,
            prm: SMART_CAPS,
            inh: SMART_CAPS,
            amb: SMART_CAPS,
            bnd: SMART_CAPS,
        };
        assert_eq!(
            plan(unit, 0),
            Plan {
                bounding_drop: vec![],
                set: 0,
                ambient: vec![]
            }
        );
        assert_eq!(
            plan(unit, SMART_CAPS),
            Plan {
                bounding_drop: vec![],
                set: SMART_CAPS,
                ambient: vec![CAP_SYS_RAWIO, CAP_SYS_ADMIN]
            }
        );
        // Root started by hand: everything held. The helper cuts the bounding set to the two so
        // smartctl, started as root, gets no more back at exec.
        let root = CapState {
            eff: ALL,
            prm: ALL,
            inh: 0,
            amb: 0,
            bnd: ALL,
        };
        let p = plan(root, SMART_CAPS);
        assert_eq!(p.set, SMART_CAPS);
        assert_eq!(p.bounding_drop.len(), 39);
        assert!(!p.bounding_drop.contains(&CAP_SYS_RAWIO));
        assert!(p.bounding_drop.contains(&CAP_SETPCAP));
        assert_eq!(plan(root, 0).bounding_drop.len(), 41);
        // A user without capabilities: the helper keeps what it has, nothing.
        assert_eq!(
            plan(
                CapState {
                    bnd: ALL,
                    ..CapState::default()
                },
                SMART_CAPS
            ),
            Plan {
                bounding_drop: vec![],
                set: 0,
                ambient: vec![]
            }
        );
    }
}
