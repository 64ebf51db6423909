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
/// A hung thread stays with its mount (one per mount, never retried meanwhile), so threads are
/// bounded by the number of mounts that hang at once. Healthy mounts are never starved by hung
/// ones: each batch takes first the mounts that answered before, then new ones, and last the
/// mounts that hung before (their call has returned since); those are retried only while fewer
/// than `max_hung` calls are held, so a flapping NFS server can't eat the threads healthy mounts
/// need.
pub struct StatGuard {
    outstanding: Arc<Mutex<HashSet<String>>>,
    /// Mounts whose call ran past a deadline at least once.
    ever_hung: Mutex<HashSet<String>>,
    /// Mounts that have answered (in time) at least once.
    answered: Mutex<HashSet<String>>,
    max_workers: usize,
    max_hung: usize,
}

/// Threads taking mounts in one sample.
pub const STATFS_WORKERS: usize = 8;
/// Hung statvfs calls held before mounts that hung before are no longer retried.
pub const MAX_HUNG_STATFS: usize = 32;

impl StatGuard {
    pub fn new(max_workers: usize, max_hung: usize) -> Self {
        StatGuard {
            outstanding: Arc::new(Mutex::new(HashSet::new())),
            ever_hung: Mutex::new(HashSet::new()),
            answered: Mutex::new(HashSet::new()),
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
        let (known_good, suspects) = {
            let answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
            let ever_hung = self.ever_hung.lock().unwrap_or_else(|e| e.into_inner());
            (answered.clone(), ever_hung.clone())
        };
        // Mounts that answered before first, then new ones, then those that hung before.
        let mut good = VecDeque::new();
        let mut new = VecDeque::new();
        let mut risky = VecDeque::new();
        for (mp, path) in jobs {
            if busy.contains(&mp) {
                results.insert(mp, StatResult::Stuck); // not retried until the hung call returns
            } else if suspects.contains(&mp) {
                risky.push_back((mp, path));
            } else if known_good.contains(&mp) {
                good.push_back((mp, path));
            } else {
                new.push_back((mp, path));
            }
        }
        // A mount that hung before is retried only while fewer than max_hung calls are held.
        let retry = self.max_hung.saturating_sub(busy.len()).min(risky.len());
        for (mp, _) in risky.drain(retry..) {
            results.insert(mp, StatResult::NotStarted);
        }
        // Two pools: mounts that answered before have workers of their own, so new or suspect
        // mounts that hang can never hold up the healthy ones.
        let mut untried = new;
        untried.extend(risky);
        let n = good.len() + untried.len();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let queues = [good, untried].map(|q| Arc::new(Mutex::new(q)));
        let spawns = queues.iter().flat_map(|q| {
            let workers = self
                .max_workers
                .min(q.lock().unwrap_or_else(|e| e.into_inner()).len());
            std::iter::repeat_n(q.clone(), workers)
        });
        for queue in spawns.collect::<Vec<_>>() {
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
        for queue in &queues {
            let left: Vec<(String, PathBuf)> = queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
                .collect();
            for (mp, _) in left {
                results.insert(mp, StatResult::NotStarted);
            }
        }
        let stuck_now = self.outstanding();
        for mp in &stuck_now {
            results.entry(mp.clone()).or_insert(StatResult::Stuck);
        }
        // Calls that finished between the deadline and now.
        while let Ok((mp, r)) = rx.try_recv() {
            results.insert(mp, StatResult::Done(r));
        }
        // Remember who answered and who hung, for the mounts of this batch only (mounts come and
        // go: containers, automounts), so the memory is bounded by the mount table.
        let mut ever_hung = self.ever_hung.lock().unwrap_or_else(|e| e.into_inner());
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        ever_hung.retain(|mp| results.contains_key(mp) || stuck_now.contains(mp));
        answered.retain(|mp| results.contains_key(mp));
        for (mp, r) in &results {
            if stuck_now.contains(mp) {
                // Past the deadline (whether or not it answered just after).
                ever_hung.insert(mp.clone());
                answered.remove(mp);
            } else if matches!(r, StatResult::Done(_)) {
                answered.insert(mp.clone());
                ever_hung.remove(mp); // it came back in time
            }
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

    fn ok(map: &mut BTreeMap<String, FixtureAnswer>, mp: &str) {
        map.insert(
            mp.to_string(),
            FixtureAnswer::Stat(FsStat {
                frsize: 4096,
                blocks: 10,
                ..Default::default()
            }),
        );
    }

    /// 100 dead NFS mounts listed before the healthy ones: once the healthy ones have answered,
    /// they answer in every round, and each dead mount holds one thread, never more.
    #[tokio::test]
    async fn healthy_mounts_are_sampled_every_round_with_100_hung_ones_present() {
        let mut map = BTreeMap::new();
        let mut jobs = Vec::new();
        for i in 0..100 {
            let mp = format!("/mnt/nfs{i:03}");
            map.insert(mp.clone(), FixtureAnswer::Hang);
            jobs.push((mp.clone(), PathBuf::from(mp)));
        }
        for mp in ["/srv/pg", "/srv/wal", "/"] {
            ok(&mut map, mp);
            jobs.push((mp.to_string(), PathBuf::from(mp)));
        }
        let src = StatSource::Fixture(Arc::new(map));
        let guard = StatGuard::new(8, 32);
        let healthy_done = |r: &HashMap<String, StatResult>| {
            ["/srv/pg", "/srv/wal", "/"]
                .iter()
                .filter(|mp| matches!(r[**mp], StatResult::Done(Ok(_))))
                .count()
        };
        let mut rounds_to_first_answer = None;
        for round in 0..20 {
            let r = guard
                .run(&src, jobs.clone(), Duration::from_millis(100))
                .await;
            assert_eq!(r.len(), 103);
            match rounds_to_first_answer {
                None if healthy_done(&r) == 3 => rounds_to_first_answer = Some(round),
                None => {}
                Some(_) => assert_eq!(healthy_done(&r), 3, "round {round}: {r:?}"),
            }
            assert!(guard.outstanding().len() <= 100);
        }
        // New mounts are tried 8 at a time until every dead one is known; then the healthy
        // ones, which from then on have workers of their own.
        assert!(
            rounds_to_first_answer.is_some_and(|r| r <= 13),
            "{rounds_to_first_answer:?}"
        );
        assert_eq!(guard.outstanding().len(), 100, "one thread per hung mount");
    }

    /// A mount that hung and came back is retried only while fewer than `max_hung` calls are
    /// held; mounts that answered before never wait for it.
    #[tokio::test]
    async fn a_mount_that_hung_before_waits_while_the_hung_limit_is_reached() {
        let mut map = BTreeMap::new();
        map.insert("/mnt/slow".to_string(), FixtureAnswer::SlowMs(300));
        ok(&mut map, "/");
        for i in 0..3 {
            map.insert(format!("/mnt/dead{i}"), FixtureAnswer::Hang);
        }
        let src = StatSource::Fixture(Arc::new(map.clone()));
        let jobs: Vec<(String, PathBuf)> = map
            .keys()
            .map(|mp| (mp.clone(), PathBuf::from(mp)))
            .collect();
        let guard = StatGuard::new(8, 3);
        // Round 1: everything new; the dead ones and the slow one run past the deadline.
        let r = guard
            .run(&src, jobs.clone(), Duration::from_millis(100))
            .await;
        assert!(matches!(r["/mnt/slow"], StatResult::Stuck));
        assert!(matches!(r["/"], StatResult::Done(Ok(_))));
        std::thread::sleep(Duration::from_millis(400)); // the slow call returns
        // Round 2: three calls held (the dead ones) = max_hung: the slow mount is not retried,
        // and the healthy one answers as ever.
        let r = guard.run(&src, jobs, Duration::from_millis(100)).await;
        assert!(matches!(r["/mnt/slow"], StatResult::NotStarted), "{r:?}");
        assert!(matches!(r["/"], StatResult::Done(Ok(_))));
        assert_eq!(guard.outstanding().len(), 3);
    }
}
