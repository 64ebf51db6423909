//! The capability split at start-up: the daemon starts the privileged helper's keeper while it
//! still holds its capabilities (when a collector needs the helper), then gives them all up
//! before any thread, port or collector exists; and the hidden `ssdwatch smart-helper` command
//! the keeper and its workers run (its name kept from the releases where only SMART used it).

use crate::Roots;
use crate::collector::layers::LayersConfig;
use crate::collector::smart::SmartConfig;
use crate::privileged::{Helper, Spec, worker};
use crate::privsep::{SMART_CAPS, caps, keeper};
use std::ffi::OsString;
use std::path::Path;

/// This binary, as the kernel has it: still there when the file was replaced by an upgrade.
const SELF_EXE: &str = "/proc/self/exe";

/// A keeper started, waiting for the runtime to take its workers.
pub(super) struct Started {
    keeper: std::process::Child,
    control: std::os::unix::net::UnixStream,
    timeout: std::time::Duration,
}

/// Whether the daemon starts the privileged helper: when one of its clients is on (SMART reads
/// drives through it; the layers collector runs dmsetup, whose ioctls need CAP_SYS_ADMIN).
pub(crate) fn needs_helper(smart: &SmartConfig, layers: &LayersConfig) -> bool {
    smart.enabled || layers.enabled
}

/// Why the capability split or the helper's socket failed; each names the step.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SplitError {
    #[error("the privileged helper: {0}")]
    Spec(#[source] serde_json::Error),
    #[error("starting the privileged helper ({SELF_EXE} smart-helper): {0}")]
    Start(#[source] std::io::Error),
    #[error("giving up capabilities: {0}")]
    DropCaps(#[source] caps::CapError),
    #[error("the privileged helper's socket: {0}")]
    Socket(#[source] std::io::Error),
}

/// Starts the keeper (when [`needs_helper`]), then gives up every capability of this process.
/// Must run before any other thread starts. The helper runs whenever a client needs it, with
/// or without capabilities to keep, so there is one way those reads are made in the daemon.
pub(super) fn split(
    smart: &SmartConfig,
    layers: &LayersConfig,
    roots: &Roots,
) -> Result<Option<Started>, SplitError> {
    let started = if needs_helper(smart, layers) {
        // With SMART off the helper serves no drive: no discovery, no configured device.
        let spec = Spec {
            smartctl: smart.smartctl_path.clone(),
            timeout_ms: smart.timeout.as_millis() as u64,
            nocheck_standby: smart.nocheck_standby,
            sys: roots.sys.clone(),
            discover: smart.enabled && smart.discover,
            include: smart
                .device_include
                .as_ref()
                .map(|p| p.as_str().to_string()),
            exclude: smart
                .device_exclude
                .as_ref()
                .map(|p| p.as_str().to_string()),
            devices: (smart.devices.iter())
                .filter(|_| smart.enabled)
                .map(|d| (d.path.clone(), d.dev_type.clone()))
                .collect(),
            dmsetup: layers.enabled.then(|| layers.dmsetup_path.clone()),
            dmsetup_timeout_ms: layers.timeout.as_millis() as u64,
            ocp_log: smart.enabled && smart.nvme_ocp_log,
            discover_raid: smart.enabled && smart.discover_raid,
            btrfs: layers.enabled.then(|| layers.btrfs_path.clone()),
            proc: roots.proc.clone(),
        };
        let spec = serde_json::to_string(&spec).map_err(SplitError::Spec)?;
        let args: Vec<OsString> = ["smart-helper", "--spec", &spec]
            .iter()
            .map(OsString::from)
            .collect();
        let (keeper, control) =
            keeper::spawn_with_socket(Path::new(SELF_EXE), &args).map_err(SplitError::Start)?;
        Some(Started {
            keeper,
            control,
            timeout: smart.timeout.max(layers.timeout),
        })
    } else {
        None
    };
    let left = caps::drop_all().map_err(SplitError::DropCaps)?;
    tracing::debug!(?left, "capabilities given up");
    Ok(started)
}

/// The handle the helper's clients are built with; it takes the keeper's workers (on the
/// runtime entered).
pub(super) fn connect(started: Started) -> Result<Helper, SplitError> {
    let keeper = started.keeper.id();
    let helper = Helper::start(started.control, started.keeper, started.timeout)
        .map_err(SplitError::Socket)?;
    tracing::info!(
        keeper,
        "privileged helper started (smartctl, libatasmart and dmsetup run under it)"
    );
    Ok(helper)
}

/// `ssdwatch smart-helper [--worker] --spec JSON`: the keeper, or (with --worker) the helper
/// itself. Both keep CAP_SYS_RAWIO and CAP_SYS_ADMIN, when they have them, and nothing else.
pub(super) fn smart_helper(worker: bool, spec_json: &str) -> i32 {
    let spec: Spec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("smart-helper: --spec: {e}");
            return 2;
        }
    };
    // Named in ps and top (started as /proc/self/exe, they would show as "exe").
    crate::privsep::caps::set_name(if worker {
        c"ssdwatch-helper"
    } else {
        c"ssdwatch-keeper"
    });
    // Their life is the daemon's: they end when its socket closes, after killing what they
    // run. A Ctrl-C (SIGINT to the terminal's process group) or a SIGTERM meant for the daemon
    // must not end them first and orphan a smartctl mid-run. Caught, not ignored: a caught
    // signal is back to its default in the programs they start.
    for sig in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        let action = nix::sys::signal::SigAction::new(
            nix::sys::signal::SigHandler::Handler(ignore_signal),
            nix::sys::signal::SaFlags::SA_RESTART,
            nix::sys::signal::SigSet::empty(),
        );
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        if let Err(e) = unsafe { nix::sys::signal::sigaction(sig, &action) } {
            tracing::warn!("smart-helper: catching {sig}: {e}");
        }
    }
    if let Err(e) = caps::keep_only(SMART_CAPS, false) {
        tracing::error!("smart-helper: keeping only CAP_SYS_RAWIO and CAP_SYS_ADMIN: {e}");
        return 1;
    }
    if !worker {
        let args: Vec<OsString> = ["smart-helper", "--worker", "--spec", spec_json]
            .iter()
            .map(OsString::from)
            .collect();
        return keeper::run(Path::new(SELF_EXE), &args);
    }
    // SAFETY: the keeper started this process with its socket as descriptor 3; taken once.
    match unsafe { keeper::inherited_socket() } {
        Ok(sock) => worker::main(spec, sock),
        Err(e) => {
            tracing::error!("smart-helper: {e}");
            2
        }
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}
