//! The stuck-mount guard: statvfs of many mounts on a few short-lived threads with a deadline, so
//! a hung call (dead NFS, a wedged FUSE server) marks its mount stuck instead of stalling the
//! caller. A stuck mount is not retried until its hung call returns, so threads never pile up.
//! Its threads are the door's (owner [`STATFS_OWNER`], a share of 64), each mount's call under
//! the door's mark. No mount selection and no metrics here.

use super::{FsStat, StatSource};
use crate::door::{Door, STATFS_OWNER};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Result of one mount's statvfs in a batch.
#[derive(Debug)]
pub enum StatResult {
    Done(std::io::Result<FsStat>),
    /// The call (this one or an earlier one) has not returned within the timeout.
    Stuck,
    /// Never started: every worker was held by a hung call until the deadline, or the limit of
    /// hung calls is reached.
    NotStarted,
    /// Never started: no thread could be had for it (the door's share for statfs or the task
    /// limit's allowance was spent, or starting a thread failed).
    NoThread,
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
            StatResult::NoThread => Err(StatvfsError::NoThread { mount_point }),
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
    #[error(
        "statvfs {mount_point}: not run (no statfs thread left: the filesystem collector's share of threads, or the daemon's task limit)"
    )]
    NoThread { mount_point: String },
}

/// Why mounts of a batch got no thread.
#[derive(Debug)]
pub enum Shortage {
    /// Starting one more would have passed the door's share for statfs, or eaten into the
    /// tasks kept for the rest of the daemon.
    Limit,
    /// The door refused a thread or could not start one (EAGAIN: the task limit, or the
    /// kernel's threads-max): its reason.
    Refused(String),
}

/// What one batch found: each mount's result, and why some got no thread, if any did not.
#[derive(Debug)]
pub struct Batch {
    pub results: HashMap<String, StatResult>,
    pub shortage: Option<Shortage>,
}

/// A batch's thread budget: `good` for the first workers of the mounts that answered before
/// (they return, so they are kept apart), `tasks` for every other thread (new and suspect
/// mounts, replacements of held workers), which may hang. Out of the door's room for statfs
/// (`Door::room`: its share of 64 less the threads held, and the task limit's allowance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadBudget {
    pub good: usize,
    pub tasks: usize,
}

/// The batch's budget under `allowance`: the healthy mounts' workers come first (at least one,
/// so they are tried even when the limit is spent: one thread that fails to start costs
/// nothing), the rest may start only what leaves `max_workers` of the allowance for them next
/// time, so the hung calls the guard keeps never crowd the healthy mounts out either.
pub fn thread_budget(allowance: Option<usize>, max_workers: usize) -> ThreadBudget {
    match allowance {
        None => ThreadBudget {
            good: usize::MAX,
            tasks: usize::MAX,
        },
        Some(a) => ThreadBudget {
            good: a.max(1),
            tasks: a.saturating_sub(max_workers),
        },
    }
}

/// Runs statvfs on many mounts with bounded threads and a deadline, never blocking the caller's
/// runtime worker: the waiting is async. `outstanding` holds mounts whose call hasn't returned;
/// each such call also holds the door's mark of its mount.
///
/// Threads: `max_workers` per pool take the batch's mounts one after another and end with the
/// batch. A call that runs longer than a slice of the timeout (1/32, at most 100 ms) no longer
/// counts as a worker: a fresh thread takes its place, so mounts queued behind hung ones are still
/// reached within the deadline (100 hung new mounts ahead of a healthy one cost 12 slices, not 13
/// rounds). Replacements are bounded per batch (`max_stalled`), and a thread held by a hung call
/// stays with its mount (one per mount, never retried meanwhile), so threads are bounded by the
/// number of mounts that hang at once. Healthy mounts are never starved by hung ones: mounts that
/// answered before have a pool of their own; new mounts and mounts that hung before (their call
/// has returned since) share the other, new ones first; a mount that hung before is retried only
/// while fewer than `max_hung` calls are held, so a flapping NFS server can't eat the threads
/// healthy mounts need.
pub struct StatGuard {
    outstanding: Arc<Mutex<HashSet<String>>>,
    /// Mounts whose call ran past a deadline at least once.
    ever_hung: Mutex<HashSet<String>>,
    /// Mounts that have answered (in time) at least once.
    answered: Mutex<HashSet<String>>,
    max_workers: usize,
    max_hung: usize,
    max_stalled: usize,
}

/// Mounts waiting for a thread: (mount point, path to statvfs).
type Queue = VecDeque<(String, PathBuf)>;

/// A batch's mounts sorted into its two queues: mounts that answered before (`known_good`)
/// have workers of their own, so new or suspect mounts that hang can never hold up the healthy
/// ones; the other queue holds new mounts first, then those that hung before (`suspects`).
/// A mount whose call is still running (`busy`) is not retried until it returns (`Stuck`), and
/// one that hung before is retried only while fewer than `max_hung` calls are held
/// (`NotStarted`): those go straight into `results`.
fn queues(
    jobs: Vec<(String, PathBuf)>,
    busy: &HashSet<String>,
    known_good: &HashSet<String>,
    suspects: &HashSet<String>,
    max_hung: usize,
    results: &mut HashMap<String, StatResult>,
) -> (Queue, Queue) {
    let mut good = VecDeque::new();
    let mut new = VecDeque::new();
    let mut risky = VecDeque::new();
    for (mp, path) in jobs {
        if busy.contains(&mp) {
            results.insert(mp, StatResult::Stuck);
        } else if suspects.contains(&mp) {
            risky.push_back((mp, path));
        } else if known_good.contains(&mp) {
            good.push_back((mp, path));
        } else {
            new.push_back((mp, path));
        }
    }
    let retry = max_hung.saturating_sub(busy.len()).min(risky.len());
    for (mp, _) in risky.drain(retry..) {
        results.insert(mp, StatResult::NotStarted);
    }
    let mut untried = new;
    untried.extend(risky);
    (good, untried)
}

/// The door's refusals of a batch, as for any collector: mounts not started, each for want of
/// a thread (the door's share or the task limit), or because its earlier call (`busy` when
/// the batch began) has not returned.
fn refused(results: &HashMap<String, StatResult>, busy: &HashSet<String>) -> usize {
    results
        .iter()
        .filter(|(mp, r)| {
            matches!(r, StatResult::NoThread | StatResult::NotStarted)
                || (matches!(r, StatResult::Stuck) && busy.contains(*mp))
        })
        .count()
}

/// Threads taking mounts in one sample, per pool.
pub const STATFS_WORKERS: usize = 8;
/// Hung statvfs calls held before mounts that hung before are no longer retried.
pub const MAX_HUNG_STATFS: usize = 32;
/// Threads started in one sample to replace workers held by a slow or hung call.
pub const MAX_STALLED_STATFS: usize = 128;

/// One queue of a batch and the threads taking from it.
struct Pool {
    jobs: Queue,
    /// The batch's deadline: each call's mark reads as stuck past it.
    deadline: tokio::time::Instant,
    /// One per thread of the pool: when its call now running started (microseconds since
    /// `epoch`, plus one), 0 while it runs none. Atomics, so a call's end takes no lock.
    slots: Vec<Arc<AtomicU64>>,
    epoch: Instant,
    /// Threads of this pool that have not ended.
    workers: usize,
}

type Answers = tokio::sync::mpsc::UnboundedSender<(String, std::io::Result<FsStat>)>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StatGuard {
    pub fn new(max_workers: usize, max_hung: usize, max_stalled: usize) -> Self {
        StatGuard {
            outstanding: Arc::new(Mutex::new(HashSet::new())),
            ever_hung: Mutex::new(HashSet::new()),
            answered: Mutex::new(HashSet::new()),
            max_workers: max_workers.max(1),
            max_hung: max_hung.max(1),
            max_stalled,
        }
    }

    /// Mount points whose statvfs call is still running.
    pub fn outstanding(&self) -> HashSet<String> {
        lock(&self.outstanding).clone()
    }

    /// How long a call may run before its thread stops counting as a worker.
    fn slice(timeout: Duration) -> Duration {
        (timeout / 32).clamp(Duration::from_millis(1), Duration::from_millis(100))
    }

    /// One batch: statvfs of each mount within `timeout` on the `door`'s threads, starting no
    /// more than its room for statfs allows (see [`thread_budget`]). A thread that can't be
    /// started is no error here: its mounts are `NoThread` and the batch says why.
    pub async fn run(
        &self,
        door: &Door,
        source: &StatSource,
        jobs: Vec<(String, PathBuf)>,
        timeout: Duration,
    ) -> Batch {
        let mut results = HashMap::with_capacity(jobs.len());
        let busy = self.outstanding();
        let (good, untried) = queues(
            jobs,
            &busy,
            &lock(&self.answered),
            &lock(&self.ever_hung),
            self.max_hung,
            &mut results,
        );
        let mut n = good.len() + untried.len();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let deadline = tokio::time::Instant::now() + timeout;
        let pools = [good, untried].map(|jobs| {
            Arc::new(Mutex::new(Pool {
                jobs,
                deadline,
                slots: Vec::new(),
                epoch: Instant::now(),
                workers: 0,
            }))
        });
        let slice = Self::slice(timeout);
        let budget = thread_budget(Some(door.room(STATFS_OWNER)), self.max_workers);
        let mut shortage = None;
        let mut good_first = budget.good;
        self.top_up(
            door,
            &pools[0],
            source,
            &tx,
            slice,
            &mut good_first,
            &mut shortage,
        );
        let mut tasks = budget.tasks;
        self.top_up(
            door,
            &pools[1],
            source,
            &tx,
            slice,
            &mut tasks,
            &mut shortage,
        );
        let mut stalled_left = self.max_stalled;
        let mut tick = tokio::time::Instant::now() + slice;
        let mut got = 0;
        loop {
            // A pool with mounts queued, no thread and none to be had: they wait for nothing.
            if tasks == 0 || shortage.is_some() {
                for pool in &pools {
                    let mut p = lock(pool);
                    if p.workers == 0 {
                        for (mp, _) in p.jobs.drain(..) {
                            results.insert(mp, StatResult::NoThread);
                            n -= 1;
                        }
                    }
                }
                if shortage.is_none() && tasks == 0 && budget.tasks != usize::MAX {
                    shortage = Some(Shortage::Limit);
                }
            }
            let now = tokio::time::Instant::now();
            if got >= n || now >= deadline {
                break;
            }
            if now >= tick {
                for pool in &pools {
                    let mut b = stalled_left.min(tasks);
                    let before = b;
                    self.top_up(door, pool, source, &tx, slice, &mut b, &mut shortage);
                    stalled_left -= before - b;
                    tasks -= before - b;
                }
                tick = now + slice;
            }
            match tokio::time::timeout_at(tick.min(deadline), rx.recv()).await {
                Ok(Some((mp, r))) => {
                    results.insert(mp, StatResult::Done(r));
                    got += 1;
                }
                Ok(None) => break,
                Err(_) => {} // a slice has passed, or the deadline
            }
        }
        drop(tx);
        // Whatever is left: still queued (never started) or running past the deadline (stuck).
        // Queued for want of a thread the limit would give, or for workers held by hung calls.
        let out_of_threads = shortage.is_some() || tasks == 0;
        for pool in &pools {
            let left: Vec<(String, PathBuf)> = lock(pool).jobs.drain(..).collect();
            for (mp, _) in left {
                let r = if out_of_threads {
                    StatResult::NoThread
                } else {
                    StatResult::NotStarted
                };
                results.insert(mp, r);
            }
        }
        if out_of_threads
            && shortage.is_none()
            && results.values().any(|r| matches!(r, StatResult::NoThread))
        {
            shortage = Some(Shortage::Limit);
        }
        let stuck_now = self.outstanding();
        for mp in &stuck_now {
            results.entry(mp.clone()).or_insert(StatResult::Stuck);
            // Given up on: the door counts one timeout per call, and shows it stuck.
            door.timed_out(STATFS_OWNER, mp);
        }
        // Calls that finished between the deadline and now.
        while let Ok((mp, r)) = rx.try_recv() {
            results.insert(mp, StatResult::Done(r));
        }
        self.remember(&results, &stuck_now);
        door.refused(STATFS_OWNER, refused(&results, &busy));
        let shortage =
            shortage.filter(|_| results.values().any(|r| matches!(r, StatResult::NoThread)));
        Batch { results, shortage }
    }

    /// Remembers who answered and who hung, for the mounts of this batch only (mounts come and
    /// go: containers, automounts), so the memory is bounded by the mount table.
    fn remember(&self, results: &HashMap<String, StatResult>, stuck_now: &HashSet<String>) {
        let mut ever_hung = lock(&self.ever_hung);
        let mut answered = lock(&self.answered);
        ever_hung.retain(|mp| results.contains_key(mp) || stuck_now.contains(mp));
        answered.retain(|mp| results.contains_key(mp));
        for (mp, r) in results {
            if stuck_now.contains(mp) {
                // Past the deadline (whether or not it answered just after).
                ever_hung.insert(mp.clone());
                answered.remove(mp);
            } else if matches!(r, StatResult::Done(_)) {
                answered.insert(mp.clone());
                ever_hung.remove(mp); // it came back in time
            }
        }
    }

    /// Starts threads so that `max_workers` of the pool are free to take its queued mounts: a
    /// thread whose call has run a whole slice is counted out. The threads started come out of
    /// `budget`. A thread the door refuses or can't start (EAGAIN under the task limit) ends
    /// the starting for the batch: `shortage` says why, `budget` is spent.
    #[allow(clippy::too_many_arguments)]
    fn top_up(
        &self,
        door: &Door,
        pool: &Arc<Mutex<Pool>>,
        source: &StatSource,
        tx: &Answers,
        slice: Duration,
        budget: &mut usize,
        shortage: &mut Option<Shortage>,
    ) {
        if shortage.is_some() {
            return;
        }
        // Counted and given their slots under the lock, started after it: a thread spawned while
        // it is held would only wait for it.
        let slots: Vec<Arc<AtomicU64>> = {
            let mut p = lock(pool);
            let now = p.epoch.elapsed().as_micros() as u64 + 1;
            let slice_us = slice.as_micros() as u64;
            let stalled = p
                .slots
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .filter(|&t| t != 0 && now.saturating_sub(t) >= slice_us)
                .count();
            let free = p.workers.saturating_sub(stalled);
            let start = self
                .max_workers
                .saturating_sub(free)
                .min(p.jobs.len())
                .min(*budget);
            p.workers += start;
            let new: Vec<_> = (0..start).map(|_| Arc::new(AtomicU64::new(0))).collect();
            p.slots.extend(new.iter().cloned());
            new
        };
        *budget -= slots.len();
        let mut left = slots.len();
        for slot in slots {
            let (q, tx) = (pool.clone(), tx.clone());
            let (outstanding, source) = (self.outstanding.clone(), source.clone());
            let d = door.clone();
            // A door thread with no mark of its own: the worker takes many mounts, each under
            // its own mark, and is replaced when one hangs (see `StatGuard`).
            let spawned = door.thread(STATFS_OWNER, move || {
                work(&d, &q, &slot, &outstanding, &source, &tx)
            });
            left -= 1;
            if let Err(e) = spawned {
                // This one and the ones not tried: none of them runs.
                lock(pool).workers -= left + 1;
                tracing::debug!("cannot start a statfs thread: {e}");
                let why = match e {
                    crate::door::Unanswered::NoThread(why) => why,
                    other => other.to_string(),
                };
                *shortage = Some(Shortage::Refused(why));
                *budget = 0;
                break;
            }
        }
    }
}

/// A worker: takes the pool's mounts one after another until none is left or the batch is over.
fn work(
    door: &Door,
    pool: &Mutex<Pool>,
    slot: &AtomicU64,
    outstanding: &Mutex<HashSet<String>>,
    source: &StatSource,
    tx: &Answers,
) {
    loop {
        // Taking a job and marking it outstanding happen under the pool lock, so the deadline
        // sweep finds every mount either queued or running.
        let (job, deadline) = {
            let mut p = lock(pool);
            let job = p.jobs.pop_front();
            match &job {
                Some((mp, _)) => {
                    lock(outstanding).insert(mp.clone());
                    slot.store(p.epoch.elapsed().as_micros() as u64 + 1, Ordering::Relaxed);
                }
                None => p.workers -= 1,
            }
            (job, p.deadline)
        };
        let Some((mp, path)) = job else { break };
        // The door's mark of the mount, for its series (stuck past the batch's deadline). The
        // guard already left out mounts whose call has not returned, so it is free; were it
        // not, the call runs unmarked rather than not at all.
        let pass = door.enter(STATFS_OWNER, mp.clone()).ok().map(|mut p| {
            p.set_deadline(deadline);
            p
        });
        // A panic in the call must not leave the mount outstanding (stuck) for ever.
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.statvfs(&mp, &path)))
                .unwrap_or_else(|_| Err(std::io::Error::other("the statvfs call panicked")));
        // The mark ends before the mount leaves `outstanding`: a mount the guard sees free is
        // never refused by the door.
        drop(pass);
        slot.store(0, Ordering::Relaxed);
        // Send and clear under the outstanding lock: whoever looks sees the mount either running
        // or answered, never neither. A send fails once the batch is over (its answer is then
        // dropped; the next sample asks again).
        let sent = {
            let mut o = lock(outstanding);
            let sent = tx.send((mp.clone(), r)).is_ok();
            o.remove(&mp);
            sent
        };
        if !sent {
            lock(pool).workers -= 1;
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::door::{MAX_STATFS_THREADS, room};
    use crate::statfs::FixtureAnswer;
    use crate::sysfs::cgroup::TaskLimit;
    use std::collections::BTreeMap;

    /// A door with no task limit (its /proc and /sys don't exist): only its own caps hold.
    fn door() -> Door {
        Door::new("/nonexistent/proc".into(), "/nonexistent/sys".into())
    }

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
        let guard = StatGuard::new(4, 32, 128);
        let d = door();
        let jobs = || {
            vec![
                ("/ok".to_string(), PathBuf::from("/ok")),
                ("/hung".to_string(), PathBuf::from("/hung")),
            ]
        };
        let r = guard
            .run(&d, &src, jobs(), Duration::from_millis(300))
            .await
            .results;
        assert!(matches!(r["/ok"], StatResult::Done(Ok(_))));
        assert!(matches!(r["/hung"], StatResult::Stuck));
        // Second round: the hung call is still outstanding, so no new thread is started for it.
        let r = guard
            .run(&d, &src, jobs(), Duration::from_millis(300))
            .await
            .results;
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
    async fn more_hung_mounts_than_workers_are_all_tried_in_the_first_round_one_thread_each() {
        let (src, jobs) = hung_mounts(5);
        let guard = StatGuard::new(2, 32, 128);
        let d = door();
        let mut stuck_rounds = Vec::new();
        for _ in 0..3 {
            let r = guard
                .run(&d, &src, jobs.clone(), Duration::from_millis(300))
                .await
                .results;
            assert_eq!(r.len(), 5, "every mount gets an answer: {r:?}");
            stuck_rounds.push(count(&r, |v| matches!(v, StatResult::Stuck)));
        }
        // A worker held past a slice is replaced, so the two workers don't leave three mounts
        // for later rounds; and a hung mount is never given a second thread.
        assert_eq!(stuck_rounds, vec![5, 5, 5]);
        assert_eq!(guard.outstanding().len(), 5);
    }

    #[tokio::test]
    async fn replacements_for_held_workers_are_bounded_per_round() {
        let (src, jobs) = hung_mounts(5);
        // Two workers and one replacement a round: 3 mounts tried, then the 2 left.
        let guard = StatGuard::new(2, 32, 1);
        let d = door();
        let mut rounds = Vec::new();
        for _ in 0..3 {
            let r = guard
                .run(&d, &src, jobs.clone(), Duration::from_millis(300))
                .await
                .results;
            rounds.push((
                count(&r, |v| matches!(v, StatResult::Stuck)),
                count(&r, |v| matches!(v, StatResult::NotStarted)),
            ));
        }
        assert_eq!(rounds, vec![(3, 2), (5, 0), (5, 0)]);
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

    /// Dead NFS mounts listed before the healthy ones, all new (the daemon starts while the
    /// NFS server is down), and a batch's results with the healthy ones answered counted.
    fn dead_before_healthy(dead: usize) -> (StatSource, Vec<(String, PathBuf)>) {
        let mut map = BTreeMap::new();
        let mut jobs = Vec::new();
        for i in 0..dead {
            let mp = format!("/mnt/nfs{i:03}");
            map.insert(mp.clone(), FixtureAnswer::Hang);
            jobs.push((mp.clone(), PathBuf::from(mp)));
        }
        for mp in HEALTHY {
            ok(&mut map, mp);
            jobs.push((mp.to_string(), PathBuf::from(mp)));
        }
        (StatSource::Fixture(Arc::new(map)), jobs)
    }

    const HEALTHY: [&str; 3] = ["/srv/pg", "/srv/wal", "/"];

    fn healthy_done(r: &HashMap<String, StatResult>) -> usize {
        HEALTHY
            .iter()
            .filter(|mp| matches!(r[**mp], StatResult::Done(Ok(_))))
            .count()
    }

    /// 50 dead NFS mounts listed before the healthy ones, all new: the healthy ones answer in
    /// the first round and in every round after, and each dead mount holds one thread, never
    /// more. 50 is within the door's share for statfs less the healthy mounts' workers (56).
    #[tokio::test]
    async fn healthy_mounts_are_sampled_every_round_with_50_hung_ones_present() {
        let (src, jobs) = dead_before_healthy(50);
        let guard = StatGuard::new(8, 32, 128);
        let d = door();
        // A generous timeout: the 50 hung calls are taken 8 per slice (1/32 of it), and only
        // the first round waits for it (after that every dead mount is known to be stuck).
        for round in 0..10 {
            let r = guard
                .run(&d, &src, jobs.clone(), Duration::from_secs(2))
                .await
                .results;
            assert_eq!(r.len(), 53);
            assert_eq!(healthy_done(&r), 3, "round {round}: {r:?}");
            assert_eq!(
                count(&r, |v| matches!(v, StatResult::Stuck)),
                50,
                "round {round}"
            );
            assert_eq!(guard.outstanding().len(), 50, "one thread per hung mount");
        }
        // The healthy mounts' workers end just after their answers: waited for, not timed.
        let text = settled(&d, "ssdwatch_blocking_threads{collector=\"filesystem\"} 50").await;
        for line in [
            "ssdwatch_blocking_stuck_calls{collector=\"filesystem\"} 50",
            // One timeout per hung call, not one per round.
            "ssdwatch_blocking_timeouts_total{collector=\"filesystem\"} 50",
            // Nine rounds after the first, each refusing the 50 that have not returned.
            "ssdwatch_blocking_refused_total{collector=\"filesystem\"} 450",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
    }

    /// The door's series once `line` is among them (a thread that has answered ends soon
    /// after), or as they are after 500 looks.
    async fn settled(d: &Door, line: &str) -> String {
        let mut text = rendered(d);
        for _ in 0..500 {
            if text.contains(line) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            text = rendered(d);
        }
        assert!(text.contains(line), "{line}:\n{text}");
        text
    }

    fn rendered(d: &Door) -> String {
        let mut set = crate::metrics::MetricSet::new();
        d.families(&mut set);
        let mut text = String::new();
        crate::render::render_families(&mut text, set.families());
        text
    }

    /// 100 dead NFS mounts, all new: more than the door's share for statfs (64, of which the
    /// guard keeps 8 for the workers of mounts that answered before). The first 56 tried hold a
    /// thread each, the other 44 get none (refused and counted, never a 57th thread), and the
    /// healthy mounts, listed first as the collector lists block-device mounts, answer in every
    /// round. (Before the door's share, each of the 100 held a thread of its own.)
    #[tokio::test]
    async fn more_hung_mounts_than_the_statfs_share_hold_56_threads_and_the_rest_get_none() {
        let (src, mut jobs) = dead_before_healthy(100);
        jobs.rotate_right(HEALTHY.len());
        let guard = StatGuard::new(8, 32, 128);
        let d = door();
        let held = MAX_STATFS_THREADS - 8;
        for round in 0..5 {
            let b = guard
                .run(&d, &src, jobs.clone(), Duration::from_secs(2))
                .await;
            let r = &b.results;
            assert_eq!(r.len(), 103);
            assert_eq!(healthy_done(r), 3, "round {round}: {r:?}");
            let stuck = count(r, |v| matches!(v, StatResult::Stuck));
            let no_thread = count(r, |v| matches!(v, StatResult::NoThread));
            assert_eq!((stuck, no_thread), (held, 100 - held), "round {round}");
            assert!(matches!(b.shortage, Some(Shortage::Limit)), "{b:?}");
            assert_eq!(guard.outstanding().len(), held);
        }
        let text = settled(
            &d,
            &format!("ssdwatch_blocking_threads{{collector=\"filesystem\"}} {held}"),
        )
        .await;
        assert!(
            text.contains("ssdwatch_blocking_refused_total{collector=\"filesystem\"}"),
            "{text}"
        );
    }

    /// 40 mounts that answered before all hang at once (their NFS server died), listed before
    /// the database's own filesystem: it still answers in that very round.
    #[tokio::test]
    async fn known_mounts_that_hang_together_dont_hold_up_the_healthy_one() {
        let mut up = BTreeMap::new();
        let mut down = BTreeMap::new();
        let mut jobs = Vec::new();
        for i in 0..40 {
            let mp = format!("/mnt/nfs{i:02}");
            ok(&mut up, &mp);
            down.insert(mp.clone(), FixtureAnswer::Hang);
            jobs.push((mp.clone(), PathBuf::from(mp)));
        }
        for map in [&mut up, &mut down] {
            ok(map, "/srv/pg");
        }
        jobs.push(("/srv/pg".to_string(), PathBuf::from("/srv/pg")));
        let guard = StatGuard::new(8, 32, 128);
        let d = door();
        let timeout = Duration::from_secs(2);
        let r = guard
            .run(
                &d,
                &StatSource::Fixture(Arc::new(up)),
                jobs.clone(),
                timeout,
            )
            .await
            .results;
        assert_eq!(count(&r, |v| matches!(v, StatResult::Done(Ok(_)))), 41);
        let down = StatSource::Fixture(Arc::new(down));
        let r = guard.run(&d, &down, jobs.clone(), timeout).await.results;
        assert!(matches!(r["/srv/pg"], StatResult::Done(Ok(_))), "{r:?}");
        assert_eq!(count(&r, |v| matches!(v, StatResult::Stuck)), 40);
        let r = guard.run(&d, &down, jobs, timeout).await.results;
        assert!(matches!(r["/srv/pg"], StatResult::Done(Ok(_))), "{r:?}");
        assert_eq!(guard.outstanding().len(), 40);
    }

    #[test]
    fn the_thread_budget_leaves_a_quarter_of_the_task_limit_and_the_healthy_workers() {
        let limit = |max, current| TaskLimit {
            max,
            current,
            dir: PathBuf::from("/sys/fs/cgroup/system.slice/ssdwatch.service"),
        };
        // (max, current) -> the door's room for statfs (no thread held yet), then the budget
        // with 8 workers. The door's share for statfs (64) caps it when the limit is generous.
        let cases = [
            // TasksMax=128, the daemon's own 20 tasks: 32 kept, 76 left, of which the share
            // takes 64 (before the door's share: 76, and 68 for new mounts).
            ((128, 20), 64, (64, 56)),
            // The daemon at 50 tasks: the limit binds, 46 left.
            ((128, 50), 46, (46, 38)),
            // 68 hung calls later: 8 left, all of them for the healthy mounts' workers.
            ((128, 88), 8, (8, 0)),
            // At the limit: nothing, yet one worker for the healthy mounts is still tried.
            ((128, 128), 0, (1, 0)),
            ((128, 200), 0, (1, 0)),
            // systemd's default (15 % of pid_max 32768): the share binds.
            ((4915, 30), 64, (64, 56)),
            // A tiny limit: the reserve of 32 takes it all.
            ((40, 10), 0, (1, 0)),
        ];
        let cap = MAX_STATFS_THREADS;
        for ((max, current), allowance, (good, tasks)) in cases {
            let l = limit(max, current);
            assert_eq!(room(0, 0, cap, Some(&l)), allowance, "{max}/{current}");
            assert_eq!(
                thread_budget(Some(allowance), 8),
                ThreadBudget { good, tasks },
                "{max}/{current}"
            );
        }
        // No limit known: the share alone.
        assert_eq!(room(0, 0, cap, None), 64);
        assert_eq!(room(0, 56, cap, None), 8);
        let unlimited = thread_budget(None, 8);
        assert_eq!((unlimited.good, unlimited.tasks), (usize::MAX, usize::MAX));
    }

    /// `TasksMax=128` on a fixture /sys/fs/cgroup tree, the daemon at 50 tasks, 130 hung mounts
    /// and the database's filesystem (known good): the guard holds no more hung calls than
    /// leave the reserve and the healthy workers free, the rest are `NoThread` and the batch
    /// says why; the healthy mount answers in every round. `pids.current` is moved on by the
    /// threads held, as the kernel would. (At 20 tasks, as before the door's share, the share
    /// of 64 would bind before the limit: the test above.)
    #[tokio::test]
    async fn under_a_task_limit_hung_calls_are_capped_and_the_rest_get_no_thread() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, sys) = (dir.path().join("proc"), dir.path().join("sys"));
        std::fs::create_dir_all(proc.join("self")).unwrap();
        std::fs::write(
            proc.join("self/cgroup"),
            "0::/system.slice/ssdwatch.service\n",
        )
        .unwrap();
        let unit = sys.join("fs/cgroup/system.slice/ssdwatch.service");
        std::fs::create_dir_all(&unit).unwrap();
        std::fs::write(unit.join("pids.max"), "128\n").unwrap();
        const OWN: usize = 50;
        // Written before the door first reads it.
        std::fs::write(unit.join("pids.current"), format!("{OWN}\n")).unwrap();
        let (src, mut jobs) = {
            let (src, jobs) = hung_mounts(130);
            let StatSource::Fixture(map) = src else {
                unreachable!()
            };
            let mut map = (*map).clone();
            ok(&mut map, "/srv/pg");
            (StatSource::Fixture(Arc::new(map)), jobs)
        };
        jobs.insert(0, ("/srv/pg".to_string(), PathBuf::from("/srv/pg")));
        let guard = StatGuard::new(8, 32, 128);
        // The door reads the limit of the fixture tree itself.
        let d = Door::new(proc.clone(), sys.clone());
        // The database's filesystem answered before the NFS server died.
        let healthy_only = vec![jobs[0].clone()];
        let r = guard
            .run(&d, &src, healthy_only, Duration::from_millis(300))
            .await
            .results;
        assert!(matches!(r["/srv/pg"], StatResult::Done(Ok(_))));
        let mut rounds = Vec::new();
        for _ in 0..3 {
            let current = OWN + guard.outstanding().len();
            std::fs::write(unit.join("pids.current"), format!("{current}\n")).unwrap();
            let limit = crate::sysfs::cgroup::read_task_limit(&proc, &sys).unwrap();
            assert_eq!(
                limit.as_ref().map(|l| (l.max, l.current)),
                Some((128, current as u64))
            );
            let b = guard
                .run(&d, &src, jobs.clone(), Duration::from_secs(5))
                .await;
            assert!(
                matches!(b.results["/srv/pg"], StatResult::Done(Ok(_))),
                "{b:?}"
            );
            assert!(
                matches!(b.shortage, Some(Shortage::Limit)),
                "{:?}",
                b.shortage
            );
            rounds.push((
                count(&b.results, |v| matches!(v, StatResult::Stuck)),
                count(&b.results, |v| matches!(v, StatResult::NoThread)),
            ));
        }
        // 128 - 50 - 32 kept = 46, less 8 for the healthy mount's workers: 38 held, never more.
        // (A read of the limit up to a second old changes nothing: once the first round has
        // ended, the tasks in use stay at 50 + 38.)
        assert_eq!(rounds, vec![(38, 92), (38, 92), (38, 92)]);
        assert_eq!(guard.outstanding().len(), 38);
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
        let guard = StatGuard::new(8, 3, 128);
        let d = door();
        // Round 1: everything new; the dead ones and the slow one run past the deadline.
        let r = guard
            .run(&d, &src, jobs.clone(), Duration::from_millis(100))
            .await
            .results;
        assert!(matches!(r["/mnt/slow"], StatResult::Stuck));
        assert!(matches!(r["/"], StatResult::Done(Ok(_))));
        std::thread::sleep(Duration::from_millis(400)); // the slow call returns
        // Round 2: three calls held (the dead ones) = max_hung: the slow mount is not retried,
        // and the healthy one answers as ever.
        let r = guard
            .run(&d, &src, jobs, Duration::from_millis(100))
            .await
            .results;
        assert!(matches!(r["/mnt/slow"], StatResult::NotStarted), "{r:?}");
        assert!(matches!(r["/"], StatResult::Done(Ok(_))));
        assert_eq!(guard.outstanding().len(), 3);
    }

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn names(q: &Queue) -> Vec<&str> {
        q.iter().map(|(mp, _)| mp.as_str()).collect()
    }

    #[test]
    fn healthy_mounts_get_their_own_queue_and_suspects_come_after_new_ones() {
        let jobs = ["/nfs-old", "/new", "/data", "/hung", "/nfs-flap"]
            .map(|mp| (mp.to_string(), PathBuf::from(mp)))
            .to_vec();
        let mut results = HashMap::new();
        let (good, untried) = queues(
            jobs,
            &set(&["/hung"]),
            &set(&["/data"]),
            &set(&["/nfs-old", "/nfs-flap"]),
            // One hung call held: one more suspect may be retried.
            2,
            &mut results,
        );
        assert_eq!(names(&good), ["/data"]);
        assert_eq!(names(&untried), ["/new", "/nfs-old"]);
        assert!(matches!(results["/hung"], StatResult::Stuck));
        assert!(matches!(results["/nfs-flap"], StatResult::NotStarted));
        assert_eq!(results.len(), 2);
        // A mount still stuck from before counts as refused only if it was busy at the start.
        results.insert("/late".into(), StatResult::Stuck);
        results.insert("/ok".into(), StatResult::Done(Ok(FsStat::default())));
        results.insert("/no-thread".into(), StatResult::NoThread);
        assert_eq!(refused(&results, &set(&["/hung"])), 3);
    }
}
