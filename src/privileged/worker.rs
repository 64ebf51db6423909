//! The helper's loop: reads requests from its socket, refuses what the config does not allow,
//! runs smartctl (or libatasmart, or dmsetup) with the runner's timeouts and caps, and writes
//! the answer.
//! It never opens a network socket or the state directory, and never takes an argument list.

use super::access;
use super::runner::{self, RunError, RunOutcome};
use super::spec::{Allow, FailKind, MAX_REQUEST, Reply, Request, Spec, read_frame, write_frames};
use crate::door::Door;
use crate::smart::argv;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Mutex, Semaphore};

/// Requests served at once; more wait (the daemon's parallelism is at most 64 too).
const MAX_IN_FLIGHT: usize = 64;

/// The worker's life on `sock` (descriptor 3 from the keeper). Returns the exit code: 0 when
/// the daemon closed the socket, 1 on a broken request (the keeper starts a fresh worker).
pub(crate) fn main(spec: Spec, sock: std::os::unix::net::UnixStream) -> i32 {
    let allow = match Allow::new(spec) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            tracing::error!("helper: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(MAX_IN_FLIGHT)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("helper: starting the async runtime: {e}");
            return 1;
        }
    };
    rt.block_on(serve(allow, sock))
}

async fn serve(allow: Arc<Allow>, sock: std::os::unix::net::UnixStream) -> i32 {
    let sock = match sock
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(sock))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("helper: its socket: {e}");
            return 1;
        }
    };
    // The helper is the daemon's binary: what its start-up touched (argument parsing, the
    // spec) is let go as the daemon lets go of its own.
    tokio::spawn(crate::memory::release_after_start_up(
        "the privileged helper",
    ));
    let (mut rd, wr) = sock.into_split();
    let wr = Arc::new(Mutex::new(wr));
    let sem = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // The helper's own door: each request's run holds a mark (`request <id>`) until it ends,
    // a libatasmart call holds one of its threads, and a run stuck in the kernel keeps its
    // mark until it is gone (then the daemon is told).
    let door = Door::default();
    loop {
        let frame = match read_frame(&mut rd, MAX_REQUEST).await {
            Ok(Some(f)) => f,
            Ok(None) => return 0,
            Err(e) => {
                tracing::error!("helper: reading a request: {e}");
                return 1;
            }
        };
        let req: Request = match serde_json::from_slice(&frame) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("helper: a request that is not one: {e}");
                return 1;
            }
        };
        let (allow, wr, sem, door) = (allow.clone(), wr.clone(), sem.clone(), door.clone());
        tokio::spawn(async move {
            let Ok(_permit) = sem.acquire_owned().await else {
                return;
            };
            handle(&allow, req, &wr, &door).await;
        });
    }
}

async fn send(wr: &Mutex<OwnedWriteHalf>, reply: &Reply, output: Option<&[u8]>) {
    let Ok(head) = serde_json::to_vec(reply) else {
        return;
    };
    let mut w = wr.lock().await;
    let r = match output {
        Some(o) => write_frames(&mut *w, &[&head, o]).await,
        None => write_frames(&mut *w, &[&head]).await,
    };
    if let Err(e) = r {
        tracing::debug!("helper: writing a reply: {e}");
    }
}

/// The door's name for the helper's runs.
const OWNER: &str = "helper";

async fn handle(allow: &Allow, req: Request, wr: &Mutex<OwnedWriteHalf>, door: &Door) {
    let id = req.id();
    let item = format!("request {id}");
    // Ids are the daemon's, one per request: a mark still held means the same id came twice.
    let pass = match door.enter(OWNER, item.clone()) {
        Ok(p) => p,
        Err(e) => {
            let reason = format!("request {id} is already under way: {e}");
            send(wr, &Reply::Refused { id, reason }, None).await;
            return;
        }
    };
    let spec = allow.spec();
    let (path, dev_type) = match &req {
        Request::Smartctl { path, dev_type, .. } => (path.clone(), dev_type.clone()),
        Request::Atasmart { path, .. } => (path.clone(), None),
        Request::Dmsetup { query, .. } => {
            let Some(bin) = &spec.dmsetup else {
                let reason = "device-mapper reads are not enabled (collectors.layers)".to_string();
                send(wr, &Reply::Refused { id, reason }, None).await;
                return;
            };
            let timeout = Duration::from_millis(spec.dmsetup_timeout_ms.max(100));
            let outcome = runner::run_bounded(bin, &query.args(), timeout, pass).await;
            reply(wr, id, outcome, None, door, &item).await;
            return;
        }
        Request::BtrfsDeviceStats { mount, .. } => {
            let Some(bin) = &spec.btrfs else {
                let reason = "btrfs reads are not enabled (collectors.layers)".to_string();
                send(wr, &Reply::Refused { id, reason }, None).await;
                return;
            };
            // Only a btrfs mount point of the helper's own mount table: the daemon names no
            // other path, and no option.
            let mounts: Vec<std::path::PathBuf> =
                crate::procfs::mountinfo::read_mountinfo_of_type(&spec.proc, "btrfs")
                    .map(|t| t.mounts.into_iter().map(|m| m.mount_path).collect())
                    .unwrap_or_default();
            let args = match super::spec::btrfs_stats_args(mount, &mounts) {
                Ok(a) => a,
                Err(refusal) => {
                    tracing::warn!("helper: refused btrfs device stats: {refusal}");
                    let reason = refusal.to_string();
                    send(wr, &Reply::Refused { id, reason }, None).await;
                    return;
                }
            };
            let timeout = Duration::from_millis(spec.dmsetup_timeout_ms.max(100));
            let outcome = runner::run_bounded(bin, &args, timeout, pass).await;
            reply(wr, id, outcome, None, door, &item).await;
            return;
        }
        Request::ScanRaid { .. } => {
            if !spec.discover_raid {
                let reason = "RAID discovery is off (collectors.smart.discover_raid)".to_string();
                send(wr, &Reply::Refused { id, reason }, None).await;
                return;
            }
            let timeout = Duration::from_millis(spec.timeout_ms);
            let outcome =
                runner::run_bounded(&spec.smartctl, &argv::scan_args(), timeout, pass).await;
            reply(wr, id, outcome, None, door, &item).await;
            return;
        }
    };
    if let Err(refusal) = allow.check(&path, dev_type.as_deref(), |n| allow.observe(n)) {
        tracing::warn!("helper: refused a read of {path}: {refusal}");
        let reason = refusal.to_string();
        send(wr, &Reply::Refused { id, reason }, None).await;
        return;
    }
    let timeout = Duration::from_millis(spec.timeout_ms);
    let outcome = match &req {
        Request::Smartctl { protocol, asks, .. } => {
            let asks = spec.allowed_asks(*asks);
            let args = argv::smartctl_args(
                &path,
                dev_type.as_deref(),
                protocol.map(super::spec::Protocol::as_str),
                asks,
                spec.nocheck_standby,
            );
            runner::run_bounded(&spec.smartctl, &args, timeout, pass).await
        }
        #[cfg(feature = "atasmart")]
        Request::Atasmart { .. } => {
            runner::run_atasmart(&path, spec.nocheck_standby, timeout, pass).await
        }
        #[cfg(not(feature = "atasmart"))]
        Request::Atasmart { .. } => RunOutcome::Failed(RunError::Task {
            cause: "this build has no libatasmart support".into(),
        }),
        // Answered above.
        Request::Dmsetup { .. } | Request::ScanRaid { .. } | Request::BtrfsDeviceStats { .. } => {
            return;
        }
    };
    // The cause of a refusal is observed here, where smartctl ran with this process's
    // credentials and capabilities.
    let cause = |stdout: &[u8]| {
        let text = String::from_utf8_lossy(stdout).to_ascii_lowercase();
        (text.contains("permission denied") || text.contains("operation not permitted")).then(
            || {
                let needed = if path.contains("nvme") {
                    access::CAP_SYS_ADMIN
                } else {
                    access::CAP_SYS_RAWIO
                };
                access::cause(&access::facts(&path, &spec.smartctl, needed)).to_string()
            },
        )
    };
    let cause = match &outcome {
        RunOutcome::Output { stdout, .. } => cause(stdout),
        RunOutcome::Failed(_) => None,
    };
    reply(wr, id, outcome, cause, door, &item).await;
}

/// Sends a run's outcome, and later word of its processes stuck in the kernel being gone.
async fn reply(
    wr: &Mutex<OwnedWriteHalf>,
    id: u64,
    outcome: RunOutcome,
    cause: Option<String>,
    door: &Door,
    item: &str,
) {
    match outcome {
        RunOutcome::Output {
            stdout,
            exit,
            escaped,
        } => {
            let reply = Reply::Output {
                id,
                len: stdout.len() as u64,
                exit,
                escaped,
                cause,
            };
            send(wr, &reply, Some(&stdout)).await;
            if escaped.stuck > 0 {
                // Processes of the run are stuck in the kernel: the daemon keeps the drive
                // stuck until told they are gone.
                reaped_when_gone(wr, id, door, item).await;
            }
        }
        RunOutcome::Failed(e) => {
            let (kind, after) = match &e {
                RunError::TimedOut { after } => (FailKind::TimedOut, *after),
                RunError::Stuck { after } => (FailKind::Stuck, *after),
                RunError::AtasmartStuck { after } => (FailKind::AtasmartStuck, *after),
                RunError::Task { .. } => (FailKind::Task, Duration::ZERO),
                RunError::NoTask { .. } => (FailKind::NoTask, Duration::ZERO),
                _ => (FailKind::Other, Duration::ZERO),
            };
            let message = match &e {
                RunError::Task { cause } => cause.clone(),
                other => other.to_string(),
            };
            let stuck = matches!(kind, FailKind::Stuck | FailKind::AtasmartStuck);
            let reply = Reply::Failed {
                id,
                kind,
                after_ms: after.as_millis() as u64,
                message,
            };
            send(wr, &reply, None).await;
            if stuck {
                reaped_when_gone(wr, id, door, item).await;
            }
        }
    }
}

/// Tells the daemon when a run reported stuck is gone, so the drive is read again.
async fn reaped_when_gone(wr: &Mutex<OwnedWriteHalf>, id: u64, door: &Door, item: &str) {
    while door.is_running(OWNER, item) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    send(wr, &Reply::Reaped { id }, None).await;
}
