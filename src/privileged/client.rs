//! The daemon's side of the privileged helper: sends requests over the current worker's socket
//! and matches replies to them by id; takes each new worker the keeper hands over. Its clients
//! (the SMART and layers collectors) are given a [`Helper`] when they are built. A worker that
//! dies fails the reads in flight with a message naming it; the next worker serves the rest.

use super::runner::{REAP_GRACE, RunError, RunOutcome};
use super::spec::{
    DmQuery, FailKind, MAX_OUTPUT_FRAME, MAX_REQUEST, Protocol, Reply, Request, read_frame,
    write_frames,
};
use crate::door::Pass;
use crate::smart::argv::Asks;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{oneshot, watch};

/// What a read through the helper gave: the outcome, and the cause of a refusal as the helper
/// observed it.
pub struct Answer {
    pub outcome: RunOutcome,
    pub cause: Option<String>,
}

struct Pending {
    tx: oneshot::Sender<Answer>,
    /// The item's door mark, held while the run is under way, and after it while the helper
    /// reports it stuck in the kernel.
    pass: Pass,
    worker: u32,
}

struct Conn {
    pid: u32,
    wr: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
}

struct Inner {
    conn: std::sync::Mutex<Option<Conn>>,
    pending: std::sync::Mutex<HashMap<u64, Pending>>,
    /// Runs reported stuck in the kernel, their marks held until the helper says they ended.
    stuck: std::sync::Mutex<HashMap<u64, (u32, Pass)>>,
    next_id: AtomicU64,
    /// Why there is no worker, when there is none.
    down: std::sync::Mutex<String>,
    /// Set once the keeper is gone: no worker will come after the current one.
    keeper_gone: std::sync::Mutex<Option<String>>,
    /// Bumped on each new worker; requests made before the first one wait for it.
    workers: watch::Sender<u64>,
    /// How long a read may take in the helper (its timeout plus the reap grace), plus slack.
    deadline: Duration,
}

/// A handle on the helper, cheap to clone.
#[derive(Clone)]
pub struct Helper {
    inner: Arc<Inner>,
}

/// How long a read made before the first worker arrived waits for it.
const FIRST_WORKER_WAIT: Duration = Duration::from_secs(10);

impl Helper {
    /// Takes the workers the keeper sends on `control` (a thread blocks on it) and serves them on
    /// the current runtime. `keeper` is reaped when it ends.
    pub fn start(
        control: std::os::unix::net::UnixStream,
        mut keeper: std::process::Child,
        helper_timeout: Duration,
    ) -> std::io::Result<Helper> {
        let (workers, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            conn: std::sync::Mutex::new(None),
            pending: std::sync::Mutex::new(HashMap::new()),
            stuck: std::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            down: std::sync::Mutex::new("the privileged helper has not started yet".into()),
            keeper_gone: std::sync::Mutex::new(None),
            workers,
            deadline: helper_timeout + REAP_GRACE + Duration::from_secs(5),
        });
        let rt = tokio::runtime::Handle::current();
        let keep = inner.clone();
        let keeper_pid = keeper.id();
        // Not the door: one long-lived thread that waits on the keeper's control socket for new
        // workers, for the daemon's life; it asks no device.
        std::thread::Builder::new()
            .name("ssdwatch-helper".into())
            .spawn(move || {
                loop {
                    match crate::privsep::keeper::recv_worker(&control) {
                        Ok(Some((pid, fd))) => {
                            let inner = keep.clone();
                            rt.spawn(async move { serve_worker(inner, pid, fd).await });
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::error!("the privileged helper's keeper (pid {keeper_pid}): {e}");
                            break;
                        }
                    }
                }
                let _ = keeper.kill();
                let how = keeper
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                let why = format!(
                    "the privileged helper's keeper (pid {keeper_pid}) is gone ({how}); no new privileged helper until ssdwatch restarts (it gave up its capabilities and cannot start one again)"
                );
                tracing::error!("{why}");
                // The helper serving now goes on until it ends; none comes after it.
                *lock(&keep.keeper_gone) = Some(why.clone());
                if lock(&keep.conn).is_none() {
                    *lock(&keep.down) = why;
                }
            })?;
        Ok(Helper { inner })
    }

    /// Asks the helper for one run (a drive's read, a RAID scan, a dmsetup table).
    /// `pass`: the item's door mark, held until the run ends (past it, while the helper reports
    /// the run stuck in the kernel).
    pub async fn read(&self, req: RequestKind, mut pass: Pass) -> Answer {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let request = req.with_id(id);
        let path = request_path(&request).to_string();
        let failed = |message: String| Answer {
            outcome: RunOutcome::Failed(RunError::Helper { message }),
            cause: None,
        };
        let Ok(body) = serde_json::to_vec(&request) else {
            return failed(format!("cannot encode the request for {path}"));
        };
        if body.len() > MAX_REQUEST as usize {
            return failed(format!("the request for {path} is too long"));
        }
        // Before the first worker has come, wait for it a little.
        let mut workers = self.inner.workers.subscribe();
        if *workers.borrow_and_update() == 0 {
            let _ = tokio::time::timeout(FIRST_WORKER_WAIT, workers.changed()).await;
        }
        let (tx, rx) = oneshot::channel();
        let (wr, pid) = {
            let conn = lock(&self.inner.conn);
            match conn.as_ref() {
                Some(c) => (c.wr.clone(), c.pid),
                None => {
                    let why = lock(&self.inner.down).clone();
                    return failed(why);
                }
            }
        };
        pass.set_deadline(tokio::time::Instant::now() + self.inner.deadline);
        lock(&self.inner.pending).insert(
            id,
            Pending {
                tx,
                pass,
                worker: pid,
            },
        );
        let sent = {
            let mut w = wr.lock().await;
            write_frames(&mut *w, &[&body]).await
        };
        if let Err(e) = sent {
            lock(&self.inner.pending).remove(&id);
            return failed(format!(
                "the privileged helper (pid {pid}) could not be asked about {path}: {e}"
            ));
        }
        match tokio::time::timeout(self.inner.deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => failed(format!(
                "the privileged helper (pid {pid}) ended before it answered for {path}; {}",
                if lock(&self.inner.keeper_gone).is_some() {
                    "no other is started until ssdwatch restarts (its keeper is gone)"
                } else {
                    "another is started"
                }
            )),
            Err(_) => {
                lock(&self.inner.pending).remove(&id);
                failed(format!(
                    "the privileged helper (pid {pid}) did not answer for {path} within {}",
                    humantime::format_duration(self.inner.deadline)
                ))
            }
        }
    }
}

/// A request without its id.
pub enum RequestKind {
    Smartctl {
        path: String,
        dev_type: Option<String>,
        protocol: Option<Protocol>,
        asks: Asks,
    },
    Atasmart {
        path: String,
    },
    Dmsetup {
        query: DmQuery,
    },
    ScanRaid,
    BtrfsDeviceStats {
        mount: String,
    },
}

impl RequestKind {
    fn with_id(self, id: u64) -> Request {
        match self {
            RequestKind::Smartctl {
                path,
                dev_type,
                protocol,
                asks,
            } => Request::Smartctl {
                id,
                path,
                dev_type,
                protocol,
                asks,
            },
            RequestKind::Atasmart { path } => Request::Atasmart { id, path },
            RequestKind::Dmsetup { query } => Request::Dmsetup { id, query },
            RequestKind::ScanRaid => Request::ScanRaid { id },
            RequestKind::BtrfsDeviceStats { mount } => Request::BtrfsDeviceStats { id, mount },
        }
    }
}

fn request_path(r: &Request) -> &str {
    match r {
        Request::Smartctl { path, .. } | Request::Atasmart { path, .. } => path,
        Request::Dmsetup { .. } => "dmsetup",
        Request::ScanRaid { .. } => "smartctl --scan-open",
        Request::BtrfsDeviceStats { mount, .. } => mount,
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves one worker until its socket closes.
async fn serve_worker(inner: Arc<Inner>, pid: u32, fd: OwnedFd) {
    let std_sock = std::os::unix::net::UnixStream::from(fd);
    let sock = match std_sock
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(std_sock))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("the privileged helper (pid {pid}): its socket: {e}");
            return;
        }
    };
    let (mut rd, wr) = sock.into_split();
    *lock(&inner.conn) = Some(Conn {
        pid,
        wr: Arc::new(tokio::sync::Mutex::new(wr)),
    });
    inner.workers.send_modify(|n| *n += 1);
    tracing::info!(pid, "privileged helper ready");
    let end = loop {
        let head = match read_frame(&mut rd, MAX_REQUEST).await {
            Ok(Some(h)) => h,
            Ok(None) => break "closed its socket".to_string(),
            Err(e) => break format!("broke its socket: {e}"),
        };
        let reply: Reply = match serde_json::from_slice(&head) {
            Ok(r) => r,
            Err(e) => break format!("sent a reply that is not one: {e}"),
        };
        let take = |id: u64| lock(&inner.pending).remove(&id);
        match reply {
            Reply::Output {
                id,
                len,
                exit,
                escaped,
                cause,
            } => {
                let stdout = match read_frame(&mut rd, MAX_OUTPUT_FRAME).await {
                    Ok(Some(o)) if o.len() as u64 == len => o,
                    Ok(_) => break "sent output of another length than it said".to_string(),
                    Err(e) => break format!("broke its socket: {e}"),
                };
                if let Some(mut p) = take(id) {
                    if escaped.stuck > 0 {
                        // Processes of the run stuck in the kernel: the helper says when
                        // they are gone.
                        p.pass.timed_out();
                        lock(&inner.stuck).insert(id, (pid, p.pass));
                    }
                    let _ = p.tx.send(Answer {
                        outcome: RunOutcome::Output {
                            stdout,
                            exit,
                            escaped,
                        },
                        cause,
                    });
                }
            }
            Reply::Failed {
                id,
                kind,
                after_ms,
                message,
            } => {
                let after = Duration::from_millis(after_ms);
                let error = match kind {
                    FailKind::TimedOut => RunError::TimedOut { after },
                    FailKind::Stuck => RunError::Stuck { after },
                    FailKind::AtasmartStuck => RunError::AtasmartStuck { after },
                    FailKind::Task => RunError::Task { cause: message },
                    FailKind::NoTask => RunError::NoTask { message },
                    FailKind::Other => RunError::Remote { message },
                };
                if let Some(mut p) = take(id) {
                    if matches!(kind, FailKind::Stuck | FailKind::AtasmartStuck) {
                        p.pass.timed_out();
                        lock(&inner.stuck).insert(id, (pid, p.pass));
                    }
                    let _ = p.tx.send(Answer {
                        outcome: RunOutcome::Failed(error),
                        cause: None,
                    });
                }
            }
            Reply::Refused { id, reason } => {
                if let Some(p) = take(id) {
                    let _ = p.tx.send(Answer {
                        outcome: RunOutcome::Failed(RunError::Helper {
                            message: format!("the privileged helper (pid {pid}) refused: {reason}"),
                        }),
                        cause: None,
                    });
                }
            }
            Reply::Reaped { id } => {
                // The mark ends: the item is asked again.
                let ended = lock(&inner.stuck).remove(&id);
                drop(ended);
            }
        }
    };
    tracing::warn!("the privileged helper (pid {pid}) {end}; the reads it had are failed");
    {
        let mut conn = lock(&inner.conn);
        if conn.as_ref().is_some_and(|c| c.pid == pid) {
            *conn = None;
            *lock(&inner.down) = match lock(&inner.keeper_gone).as_ref() {
                Some(gone) => format!("the privileged helper (pid {pid}) {end}, and {gone}"),
                None => {
                    format!("the privileged helper (pid {pid}) {end}; another is being started")
                }
            };
        }
    }
    // Its reads fail now (dropping the sender says so); its stuck runs are no longer watched.
    lock(&inner.pending).retain(|_, p| p.worker != pid);
    lock(&inner.stuck).retain(|_, (w, _)| *w != pid);
}
