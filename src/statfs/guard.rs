//! The stuck-mount guard: statvfs of many mounts on a few short-lived threads with a deadline, so
//! a hung call (dead NFS, a wedged FUSE server) marks its mount stuck instead of stalling the
//! caller. A stuck mount is not retried until its hung call returns, so threads never pile up.
//! No mount selection and no metrics here.

use super::{FsStat, StatSource};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

impl StatResult {
    /// The answer, or why there is none (naming the mount point).
    pub fn into_stat(self, mount_point: &str) -> Result<FsStat, StatvfsError> {
        let mount_point = mount_point.to_string();
        match self {
            StatResult::Done(Ok(st)) => Ok(st),
            StatResult::Done(Err(cause)) => Err(StatvfsError::Failed { mount_point, cause }),
            StatResult::Stuck => Err(StatvfsError::Stuck { mount_point }),
            StatResult::NotStarted => Err(StatvfsError::NotStarted { mount_point }),
        }
    }
}

/// Why a mount has no statvfs answer.
#[derive(Debug, thiserror::Error)]
pub enum StatvfsError {
    #[error("statvfs {mount_point}: {cause}")]
    Failed {
        mount_point: String,
        cause: std::io::Error,
    },
    #[error("statvfs {mount_point}: stuck (no answer within the timeout)")]
    Stuck { mount_point: String },
    #[error("statvfs {mount_point}: not run (statfs threads held by hung calls on other mounts)")]
    NotStarted { mount_point: String },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statfs::FixtureAnswer;
    use std::collections::BTreeMap;

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

    /// `n` mounts whose statvfs never returns, and a job for each.
    fn hung_mounts(n: usize) -> (StatSource, Vec<(String, PathBuf)>) {
        let mps: Vec<String> = (0..n).map(|i| format!("/hung{i}")).collect();
        let map = mps.iter().map(|mp| (mp.clone(), FixtureAnswer::Hang));
        let jobs = mps.iter().map(|mp| (mp.clone(), PathBuf::from(mp)));
        (StatSource::Fixture(Arc::new(map.collect())), jobs.collect())
    }

    fn count(r: &HashMap<String, StatResult>, f: impl Fn(&StatResult) -> bool) -> usize {
        r.values().filter(|v| f(v)).count()
    }

    #[tokio::test]
    async fn more_hung_mounts_than_workers_leave_the_rest_not_started_then_stuck() {
        let (src, jobs) = hung_mounts(5);
        let guard = StatGuard::new(2, 32);
        let mut stuck_rounds = Vec::new();
        for _ in 0..4 {
            let r = guard
                .run(&src, jobs.clone(), Duration::from_millis(300))
                .await;
            assert_eq!(r.len(), 5, "every mount gets an answer: {r:?}");
            stuck_rounds.push(count(&r, |v| matches!(v, StatResult::Stuck)));
        }
        // Two new workers per round are taken by mounts not yet hung; never more than one per mount.
        assert_eq!(stuck_rounds, vec![2, 4, 5, 5]);
        assert_eq!(guard.outstanding().len(), 5);
    }

    #[tokio::test]
    async fn once_the_hung_limit_is_reached_no_new_call_starts() {
        let (src, jobs) = hung_mounts(6);
        let guard = StatGuard::new(8, 3);
        for _ in 0..3 {
            let r = guard
                .run(&src, jobs.clone(), Duration::from_millis(300))
                .await;
            let stuck = count(&r, |v| matches!(v, StatResult::Stuck));
            let not_started = count(&r, |v| matches!(v, StatResult::NotStarted));
            assert_eq!((stuck, not_started), (3, 3));
        }
        assert_eq!(guard.outstanding().len(), 3);
    }
}
