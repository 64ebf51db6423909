//! The one door for calls that may hang (a readdir or stat on a dead NFS or FUSE mount, an
//! ioctl, a read of a process's command line): each runs on a thread of its own, counted in one
//! budget under the daemon's task limit; the caller waits asynchronously until a deadline. An
//! item whose call has not returned is not called again until it does, so a hung item holds
//! exactly one thread however many samples pass. A panic of the call ends its mark. Collectors
//! only decide and publish; nothing here knows what the calls do.

use crate::catalogue;
use crate::metrics::MetricSet;
use crate::sysfs::cgroup::{TaskLimit, read_task_limit};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Threads the door holds at most, running or hung, whatever the task limit allows.
pub(crate) const MAX_THREADS: usize = 128;
/// The share of [`MAX_THREADS`] one collector may hold: nine hung database directories, or a
/// hundred, never take the threads another collector needs.
pub(crate) const MAX_THREADS_PER_OWNER: usize = MAX_THREADS / 4;
/// The owner of the filesystem collector's statvfs calls (the stuck-mount guard's threads).
pub(crate) const STATFS_OWNER: &str = "filesystem";
/// Its share: half of [`MAX_THREADS`], since each hung mount holds one thread and a host may
/// have dozens of dead NFS mounts; the other half stays with the other collectors.
pub(crate) const MAX_STATFS_THREADS: usize = MAX_THREADS / 2;

/// The threads `owner` may hold at most.
pub(crate) fn owner_cap(owner: &str) -> usize {
    if owner == STATFS_OWNER {
        MAX_STATFS_THREADS
    } else {
        MAX_THREADS_PER_OWNER
    }
}

/// Tasks of the daemon's limit the door leaves to everything else (the runtime, the history
/// thread, smartctl's processes, each other): a quarter, at least 32.
pub fn reserved_tasks(max: u64) -> u64 {
    (max / 4).max(32)
}
/// How long a read of the task limit is used before it is read again.
const LIMIT_MAX_AGE: Duration = Duration::from_secs(1);

/// Why a call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    #[error(
        "an earlier call has not returned for {} s (a hung filesystem or device?); not started again until it does",
        .0.as_secs()
    )]
    StillRunning(Duration),
    #[error(
        "no answer within {} ms (a hung or very slow filesystem or device?); not started again until it returns",
        (.0.as_micros() + 500) / 1000
    )]
    TimedOut(Duration),
    #[error("not run: {0}")]
    NoThread(String),
    #[error("the call panicked: {0}")]
    Panicked(String),
}

/// One owner's calls: what the live metrics show.
#[derive(Debug, Default, Clone)]
struct Owner {
    /// Threads held (running calls, hung ones included; the statfs guard's workers).
    threads: usize,
    timeouts: u64,
    refused: u64,
    panics: u64,
}

/// A call that has not returned: when it started and until when its caller waited.
#[derive(Debug, Clone, Copy)]
struct Running {
    started: Instant,
    deadline: Instant,
    /// Whether its timeout is counted already: once per call, however often it is told.
    timed_out: bool,
}

#[derive(Default)]
struct State {
    running: HashMap<(&'static str, String), Running>,
    owners: BTreeMap<&'static str, Owner>,
    threads: usize,
    limit: Option<(Instant, Option<TaskLimit>)>,
}

/// The door; clones share it.
#[derive(Clone)]
pub struct Door {
    state: Arc<Mutex<State>>,
    /// `--path.procfs` and `--path.sysfs`, for the daemon's task limit.
    proc: PathBuf,
    sys: PathBuf,
}

/// A door reading the task limit of this host's own `/proc` and `/sys`.
impl Default for Door {
    fn default() -> Door {
        Door::new(PathBuf::from("/proc"), PathBuf::from("/sys"))
    }
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What decides whether a new thread may start: the door's own caps (`cap` the owner's, see
/// [`owner_cap`]), then the task limit.
pub(crate) fn may_start(
    threads: usize,
    owner_threads: usize,
    cap: usize,
    limit: Option<&TaskLimit>,
) -> Result<(), String> {
    if owner_threads >= cap {
        return Err(format!(
            "this collector already holds {owner_threads} threads in calls that have not returned"
        ));
    }
    if threads >= MAX_THREADS {
        return Err(format!(
            "{threads} threads are held in calls that have not returned"
        ));
    }
    if let Some(l) = limit
        && l.left() <= reserved_tasks(l.max)
    {
        return Err(format!(
            "{} of the daemon's {} tasks ({}) are left, kept for the rest of the daemon",
            l.left(),
            l.max,
            l.dir.join("pids.max").display()
        ));
    }
    Ok(())
}

/// How many threads may start now, one after another, under the same rules as [`may_start`]:
/// what is left of the owner's cap, of [`MAX_THREADS`], and of the task limit beyond its reserve.
pub(crate) fn room(
    threads: usize,
    owner_threads: usize,
    cap: usize,
    limit: Option<&TaskLimit>,
) -> usize {
    let tasks = limit.map_or(usize::MAX, |l| {
        usize::try_from(l.left().saturating_sub(reserved_tasks(l.max))).unwrap_or(usize::MAX)
    });
    cap.saturating_sub(owner_threads)
        .min(MAX_THREADS.saturating_sub(threads))
        .min(tasks)
}

impl Door {
    pub fn new(proc: PathBuf, sys: PathBuf) -> Door {
        Door {
            state: Arc::default(),
            proc,
            sys,
        }
    }

    /// The task limit, read at most once a second.
    fn task_limit(&self, st: &mut State) -> Option<TaskLimit> {
        match &st.limit {
            Some((at, l)) if at.elapsed() < LIMIT_MAX_AGE => l.clone(),
            _ => {
                let l = read_task_limit(&self.proc, &self.sys).ok().flatten();
                st.limit = Some((Instant::now(), l.clone()));
                l
            }
        }
    }

    /// Marks `item` of `owner` as running until the [`Pass`] is dropped, taking no thread: for
    /// a call that runs elsewhere (a child process, a request to the privileged helper), or
    /// one [`Pass::call`] then runs on a thread. Refused, like a call, while an earlier mark of
    /// the item is held. The mark reads as stuck once past the deadline its holder sets.
    pub fn enter(&self, owner: &'static str, item: impl Into<String>) -> Result<Pass, Unanswered> {
        let key = (owner, item.into());
        let mut st = lock(&self.state);
        if let Some(r) = st.running.get(&key) {
            let held = r.started.elapsed();
            st.owners.entry(owner).or_default().refused += 1;
            return Err(Unanswered::StillRunning(held));
        }
        let now = Instant::now();
        st.running.insert(
            key.clone(),
            Running {
                started: now,
                deadline: now + FAR,
                timed_out: false,
            },
        );
        st.owners.entry(owner).or_default();
        drop(st);
        Ok(Pass {
            state: self.state.clone(),
            door: self.clone(),
            key,
            thread: false,
        })
    }

    /// How many threads `owner` may start now (see [`room`]): for a caller that starts several
    /// and keeps some of its share for calls that must not wait behind hung ones.
    pub fn room(&self, owner: &'static str) -> usize {
        let mut st = lock(&self.state);
        let owner_threads = st.owners.get(owner).map_or(0, |o| o.threads);
        let limit = self.task_limit(&mut st);
        room(st.threads, owner_threads, owner_cap(owner), limit.as_ref())
    }

    /// Runs `f` on a thread of its own counted in `owner`'s share until it returns, with no
    /// mark and no waiting: for a worker that takes several items one after another, each under
    /// its own mark ([`Door::enter`], [`Door::timed_out`]), as the statfs guard's do. Refused
    /// (not counted: the caller counts the items it did not start, [`Door::refused`]) while no
    /// thread may start. A panic of `f` is counted and ends its thread.
    pub fn thread(
        &self,
        owner: &'static str,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<(), Unanswered> {
        {
            let mut st = lock(&self.state);
            let owner_threads = st.owners.get(owner).map_or(0, |o| o.threads);
            let limit = self.task_limit(&mut st);
            may_start(st.threads, owner_threads, owner_cap(owner), limit.as_ref())
                .map_err(Unanswered::NoThread)?;
            st.threads += 1;
            st.owners.entry(owner).or_default().threads += 1;
        }
        let state = self.state.clone();
        let release = move |st: &mut State| {
            st.threads = st.threads.saturating_sub(1);
            let o = st.owners.entry(owner).or_default();
            o.threads = o.threads.saturating_sub(1);
        };
        let spawned = std::thread::Builder::new()
            .name(format!("ssdwatch-{owner}"))
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                let mut st = lock(&state);
                if r.is_err() {
                    st.owners.entry(owner).or_default().panics += 1;
                }
                release(&mut st);
            });
        if let Err(e) = spawned {
            release(&mut lock(&self.state));
            return Err(Unanswered::NoThread(format!("starting a thread: {e}")));
        }
        Ok(())
    }

    /// `n` items of `owner` its caller did not start for want of a thread: counted as refused.
    pub fn refused(&self, owner: &'static str, n: usize) {
        if n > 0 {
            lock(&self.state).owners.entry(owner).or_default().refused += n as u64;
        }
    }

    /// `item`'s call ran past its deadline and its caller gave up on it: counted once as a
    /// timeout, stuck from now on until its mark ends. Nothing when the item is not marked.
    pub fn timed_out(&self, owner: &'static str, item: &str) {
        let now = Instant::now();
        let mut st = lock(&self.state);
        let Some(r) = st.running.get_mut(&(owner, item.to_string())) else {
            return;
        };
        r.deadline = r.deadline.min(now);
        if !std::mem::replace(&mut r.timed_out, true) {
            st.owners.entry(owner).or_default().timeouts += 1;
        }
    }

    /// Runs `f` for `item` of `owner` on a thread of its own and waits for it until
    /// `deadline`. Refused while an earlier call of the same item has not returned, and while
    /// no thread may start. A call past its deadline keeps its thread and its mark until it
    /// returns; its answer is then dropped.
    pub async fn call<T: Send + 'static>(
        &self,
        owner: &'static str,
        item: impl Into<String>,
        deadline: tokio::time::Instant,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Unanswered> {
        self.enter(owner, item)?.call(deadline, f).await
    }

    /// Whether `item` of `owner` is marked and past its deadline: stuck.
    pub fn is_stuck(&self, owner: &str, item: &str) -> bool {
        let st = lock(&self.state);
        let now = Instant::now();
        st.running
            .iter()
            .any(|((o, i), r)| *o == owner && i == item && now > r.deadline)
    }

    /// Whether `item` of `owner` is marked (its call has not returned).
    pub fn is_running(&self, owner: &str, item: &str) -> bool {
        lock(&self.state)
            .running
            .keys()
            .any(|(o, i)| *o == owner && i == item)
    }

    /// `owner`'s items whose call has run past its deadline, with how long it has run.
    #[cfg(test)]
    fn stuck(&self, owner: &str) -> Vec<(String, Duration)> {
        let st = lock(&self.state);
        let now = Instant::now();
        let mut v: Vec<_> = st
            .running
            .iter()
            .filter(|((o, _), r)| *o == owner && now > r.deadline)
            .map(|((_, item), r)| (item.clone(), now - r.started))
            .collect();
        v.sort();
        v
    }

    /// Threads the door holds now.
    #[cfg(test)]
    fn threads(&self) -> usize {
        lock(&self.state).threads
    }

    /// The door's series, per collector that used it, as of now.
    pub fn families(&self, set: &mut MetricSet) {
        let st = lock(&self.state);
        let now = Instant::now();
        let mut stuck: BTreeMap<&str, usize> = BTreeMap::new();
        for ((o, _), r) in &st.running {
            if now > r.deadline {
                *stuck.entry(o).or_default() += 1;
            }
        }
        for (name, o) in &st.owners {
            let l = [("collector", *name)];
            set.family(&catalogue::BLOCKING_THREADS)
                .push(&l, o.threads as f64);
            set.family(&catalogue::BLOCKING_STUCK_CALLS)
                .push(&l, stuck.get(name).copied().unwrap_or(0) as f64);
            set.family(&catalogue::BLOCKING_TIMEOUTS_TOTAL)
                .push(&l, o.timeouts as f64);
            set.family(&catalogue::BLOCKING_REFUSED_TOTAL)
                .push(&l, o.refused as f64);
            set.family(&catalogue::BLOCKING_PANICS_TOTAL)
                .push(&l, o.panics as f64);
        }
    }
}

/// A deadline far enough never to pass: a mark whose holder has not set one yet.
const FAR: Duration = Duration::from_secs(100 * 365 * crate::time::DAY as u64);

/// An item's mark: held while its call runs (here on a thread, or elsewhere), ended when
/// dropped. While it is held the item is refused; past its deadline it reads as stuck.
pub struct Pass {
    state: Arc<Mutex<State>>,
    door: Door,
    key: (&'static str, String),
    /// Whether it holds one of the door's threads.
    thread: bool,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pass({} {})", self.key.0, self.key.1)
    }
}

impl Pass {
    /// The door it was taken from.
    pub fn door(&self) -> &Door {
        &self.door
    }

    pub fn owner(&self) -> &'static str {
        self.key.0
    }

    pub fn item(&self) -> &str {
        &self.key.1
    }

    /// From now on the call is stuck once `deadline` has passed.
    pub fn set_deadline(&mut self, deadline: tokio::time::Instant) {
        if let Some(r) = lock(&self.state).running.get_mut(&self.key) {
            r.deadline = deadline.into_std();
        }
    }

    /// The call ran past its deadline (a child killed and still not gone): counted once as a
    /// timeout, and stuck from now on until the pass is dropped.
    pub fn timed_out(&mut self) {
        self.door.timed_out(self.key.0, &self.key.1);
    }

    /// Runs `f` under this mark on a thread of its own and waits for it until `deadline`;
    /// the mark ends when `f` returns, whatever became of its caller. Refused while no thread
    /// may start.
    pub async fn call<T: Send + 'static>(
        mut self,
        deadline: tokio::time::Instant,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Unanswered> {
        let owner = self.key.0;
        let key = self.key.clone();
        let started = {
            let mut st = lock(&self.state);
            let owner_threads = st.owners.get(owner).map_or(0, |o| o.threads);
            // Read at most once a second: the reserve the docs promise holds from the first call.
            let limit = self.door.task_limit(&mut st);
            if let Err(why) = may_start(st.threads, owner_threads, owner_cap(owner), limit.as_ref())
            {
                st.owners.entry(owner).or_default().refused += 1;
                return Err(Unanswered::NoThread(why));
            }
            st.threads += 1;
            st.owners.entry(owner).or_default().threads += 1;
            let r = st.running.get_mut(&self.key);
            let now = Instant::now();
            if let Some(r) = r {
                r.started = now;
                r.deadline = deadline.into_std();
            }
            now
        };
        self.thread = true;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let state = self.state.clone();
        let here = self.state.clone();
        // Handed to the thread through a slot, so that a thread that can't be started leaves
        // it here to be dropped (its mark ending) as the refusal is counted.
        let slot = Arc::new(Mutex::new(Some(self)));
        let thread_slot = slot.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("ssdwatch-{owner}"))
            .spawn(move || {
                let pass = lock(&thread_slot).take();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                if r.is_err() {
                    lock(&state).owners.entry(owner).or_default().panics += 1;
                }
                // The mark ends with the call, whatever became of its caller.
                drop(pass);
                let _ = tx.send(r.map_err(|p| panic_text(p.as_ref())));
            });
        if let Err(e) = spawned {
            drop(lock(&slot).take());
            lock(&here).owners.entry(owner).or_default().refused += 1;
            return Err(Unanswered::NoThread(format!("starting a thread: {e}")));
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(p))) => Err(Unanswered::Panicked(p)),
            // The thread ended without sending: it was torn down.
            Ok(Err(_)) => Err(Unanswered::Panicked("the thread ended".into())),
            Err(_) => {
                let mut st = lock(&here);
                // Counted here; a later `timed_out` of the same call counts nothing.
                let counted = st
                    .running
                    .get_mut(&key)
                    .is_some_and(|r| std::mem::replace(&mut r.timed_out, true));
                if !counted {
                    st.owners.entry(owner).or_default().timeouts += 1;
                }
                Err(Unanswered::TimedOut(deadline.into_std() - started))
            }
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        st.running.remove(&self.key);
        if self.thread {
            st.threads = st.threads.saturating_sub(1);
            let o = st.owners.entry(self.key.0).or_default();
            o.threads = o.threads.saturating_sub(1);
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn door() -> Door {
        Door::new("/nonexistent/proc".into(), "/nonexistent/sys".into())
    }

    fn soon(ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_hung_item_holds_one_thread_is_refused_until_it_returns_and_others_go_on() {
        let d = door();
        let (release, wait) = mpsc::channel::<()>();
        let r = d
            .call("databases", "/hung", soon(50), move || wait.recv().is_ok())
            .await;
        assert!(matches!(r, Err(Unanswered::TimedOut(_))), "{r:?}");
        for _ in 0..5 {
            let r = d.call("databases", "/hung", soon(50), || true).await;
            assert!(matches!(r, Err(Unanswered::StillRunning(_))), "{r:?}");
            assert_eq!(d.call("databases", "/ok", soon(5_000), || 7).await, Ok(7));
        }
        assert_eq!(d.threads(), 1);
        let stuck = d.stuck("databases");
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].0, "/hung");
        release.send(()).unwrap();
        // Once the hung call returns, its item is called again.
        let mut again = Err(Unanswered::NoThread(String::new()));
        for _ in 0..500 {
            again = d.call("databases", "/hung", soon(5_000), || true).await;
            if again.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(again, Ok(true));
        assert_eq!(d.threads(), 0);
        let mut set = MetricSet::new();
        d.families(&mut set);
        let mut text = String::new();
        crate::render::render_families(&mut text, set.families());
        assert!(
            text.contains("ssdwatch_blocking_timeouts_total{collector=\"databases\"} 1"),
            "{text}"
        );
        // Five refusals while it hung, and any retry above that came before it returned.
        let refused: f64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("ssdwatch_blocking_refused_total{collector=\"databases\"} ")
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(refused >= 5.0, "{text}");
    }

    #[tokio::test]
    async fn a_panic_clears_the_mark_and_is_an_answer_of_its_own() {
        let d = door();
        let r: Result<(), _> = d
            .call("layers", "btrfs u1", soon(5_000), || {
                panic!("ioctl went wrong")
            })
            .await;
        assert_eq!(r, Err(Unanswered::Panicked("ioctl went wrong".into())));
        assert_eq!(d.call("layers", "btrfs u1", soon(5_000), || 1).await, Ok(1));
        assert_eq!(d.threads(), 0);
    }

    #[tokio::test]
    async fn one_collectors_hung_calls_never_take_the_threads_of_another() {
        let d = door();
        let mut releases = Vec::new();
        for i in 0..MAX_THREADS_PER_OWNER + 3 {
            let (tx, rx) = mpsc::channel::<()>();
            releases.push(tx);
            let _ = d
                .call("databases", format!("/hung{i}"), soon(1), move || {
                    rx.recv().is_ok()
                })
                .await;
        }
        assert_eq!(d.threads(), MAX_THREADS_PER_OWNER);
        let r = d.call("databases", "/new", soon(1_000), || 1).await;
        assert!(matches!(r, Err(Unanswered::NoThread(_))), "{r:?}");
        assert_eq!(d.call("layers", "zpool", soon(5_000), || 2).await, Ok(2));
        drop(releases);
    }

    /// A smartctl killed at its timeout and still in the kernel (D state): its run's mark is
    /// held by the runner's watcher, not a thread. The drive is refused while it is held, by
    /// a run and by a call alike; it shows stuck (one timeout) and ends when the watcher lets go.
    #[tokio::test]
    async fn a_mark_held_for_a_child_is_refused_shows_stuck_and_ends_when_dropped() {
        let d = door();
        let mut pass = d.enter("smart", "sda").unwrap();
        pass.set_deadline(soon(60_000));
        assert!(d.is_running("smart", "sda") && !d.is_stuck("smart", "sda"));
        assert!(matches!(
            d.enter("smart", "sda"),
            Err(Unanswered::StillRunning(_))
        ));
        let r = d.call("smart", "sda", soon(1_000), || 1).await;
        assert!(matches!(r, Err(Unanswered::StillRunning(_))), "{r:?}");
        // Another drive goes on.
        assert_eq!(d.call("smart", "sdb", soon(5_000), || 2).await, Ok(2));
        pass.timed_out();
        pass.timed_out();
        assert!(d.is_stuck("smart", "sda"));
        assert_eq!(d.threads(), 0, "a child's mark holds no thread");
        let text = rendered(&d);
        for line in [
            "ssdwatch_blocking_stuck_calls{collector=\"smart\"} 1",
            "ssdwatch_blocking_timeouts_total{collector=\"smart\"} 1",
            "ssdwatch_blocking_refused_total{collector=\"smart\"} 2",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
        drop(pass);
        assert!(!d.is_running("smart", "sda"));
        let again = d.enter("smart", "sda").unwrap();
        assert_eq!(again.item(), "sda");
    }

    /// A task that panics while it holds a mark (a read's task, a watcher) drops it: the item
    /// is not refused for ever.
    #[tokio::test]
    async fn a_task_that_panics_holding_a_mark_ends_it() {
        let d = door();
        let pass = d.enter("layers", "zpool").unwrap();
        let task = tokio::spawn(async move {
            let _held = pass;
            panic!("the watcher went wrong");
        });
        assert!(task.await.is_err());
        assert!(!d.is_running("layers", "zpool"));
        assert!(d.enter("layers", "zpool").is_ok());
    }

    /// A libatasmart-like call under a drive's mark: it hangs past its deadline (refused, stuck)
    /// and, once it returns, the drive is read again; one that panics ends its mark at once.
    #[tokio::test]
    async fn a_hung_call_under_a_mark_is_refused_until_it_returns_and_a_panic_ends_it() {
        let d = door();
        let (release, wait) = mpsc::channel::<()>();
        let pass = d.enter("smart", "sdc").unwrap();
        let r = pass.call(soon(50), move || wait.recv().is_ok()).await;
        assert!(matches!(r, Err(Unanswered::TimedOut(_))), "{r:?}");
        assert!(d.is_stuck("smart", "sdc"));
        assert!(matches!(
            d.enter("smart", "sdc"),
            Err(Unanswered::StillRunning(_))
        ));
        assert_eq!(d.threads(), 1);
        release.send(()).unwrap();
        let mut again = None;
        for _ in 0..500 {
            if let Ok(p) = d.enter("smart", "sdc") {
                again = Some(p);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pass = again.expect("the drive is read again once its call returned");
        let r: Result<(), _> = pass
            .call(soon(5_000), || panic!("libatasmart went wrong"))
            .await;
        assert_eq!(
            r,
            Err(Unanswered::Panicked("libatasmart went wrong".into()))
        );
        assert!(!d.is_running("smart", "sdc"));
        assert_eq!(d.threads(), 0);
        assert!(rendered(&d).contains("ssdwatch_blocking_panics_total{collector=\"smart\"} 1"));
    }

    /// The statfs guard's kind of thread: no mark of its own, counted in the owner's share (64
    /// for statfs, 32 for others), refused past it without a thread started; a panic is
    /// counted and gives its thread back.
    #[tokio::test]
    async fn a_bare_thread_is_counted_in_its_owners_share_and_given_back_when_it_ends() {
        let d = door();
        let mut releases = Vec::new();
        for _ in 0..MAX_STATFS_THREADS {
            let (tx, rx) = mpsc::channel::<()>();
            releases.push(tx);
            d.thread(STATFS_OWNER, move || {
                let _ = rx.recv();
            })
            .unwrap();
        }
        assert_eq!(d.threads(), MAX_STATFS_THREADS);
        assert_eq!(d.room(STATFS_OWNER), 0);
        let r = d.thread(STATFS_OWNER, || ());
        assert!(matches!(r, Err(Unanswered::NoThread(_))), "{r:?}");
        assert_eq!(d.threads(), MAX_STATFS_THREADS, "no thread started for it");
        // Another collector still has its own share (of what is left of the 128).
        assert_eq!(d.room("databases"), MAX_THREADS_PER_OWNER);
        assert_eq!(d.call("databases", "/a", soon(5_000), || 3).await, Ok(3));
        d.refused(STATFS_OWNER, 2);
        drop(releases);
        d.thread(STATFS_OWNER, || panic!("statvfs went wrong"))
            .unwrap();
        // Every thread ends (the released ones, the panicking one): waited for, not timed.
        for _ in 0..500 {
            if d.threads() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(d.threads(), 0);
        let text = rendered(&d);
        for line in [
            "ssdwatch_blocking_threads{collector=\"filesystem\"} 0",
            "ssdwatch_blocking_refused_total{collector=\"filesystem\"} 2",
            "ssdwatch_blocking_panics_total{collector=\"filesystem\"} 1",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
    }

    /// A call given up on by its caller (the statfs guard at its deadline) is one timeout however
    /// often it is told, and stuck until its mark ends.
    #[test]
    fn a_timeout_is_counted_once_per_call() {
        let d = door();
        let pass = d.enter(STATFS_OWNER, "/mnt/nfs").unwrap();
        assert!(!d.is_stuck(STATFS_OWNER, "/mnt/nfs"));
        for _ in 0..3 {
            d.timed_out(STATFS_OWNER, "/mnt/nfs");
        }
        d.timed_out(STATFS_OWNER, "/not/marked");
        assert!(d.is_stuck(STATFS_OWNER, "/mnt/nfs"));
        assert!(
            rendered(&d).contains("ssdwatch_blocking_timeouts_total{collector=\"filesystem\"} 1")
        );
        drop(pass);
        let _again = d.enter(STATFS_OWNER, "/mnt/nfs").unwrap();
        d.timed_out(STATFS_OWNER, "/mnt/nfs");
        assert!(
            rendered(&d).contains("ssdwatch_blocking_timeouts_total{collector=\"filesystem\"} 2")
        );
    }

    fn rendered(d: &Door) -> String {
        let mut set = MetricSet::new();
        d.families(&mut set);
        let mut text = String::new();
        crate::render::render_families(&mut text, set.families());
        text
    }

    #[test]
    fn the_task_limit_keeps_a_reserve_for_the_rest_of_the_daemon() {
        let l = |max, current| TaskLimit {
            max,
            current,
            dir: PathBuf::from("/sys/fs/cgroup/system.slice/ssdwatch.service"),
        };
        let cap = MAX_THREADS_PER_OWNER;
        assert!(may_start(10, 2, cap, Some(&l(1000, 100))).is_ok());
        let e = may_start(10, 2, cap, Some(&l(128, 100))).unwrap_err();
        assert!(e.contains("28 of the daemon's 128 tasks"), "{e}");
        assert!(e.contains("ssdwatch.service/pids.max"), "{e}");
        assert!(may_start(MAX_THREADS, 0, cap, None).is_err());
        assert!(may_start(0, MAX_THREADS_PER_OWNER, cap, None).is_err());
        // The statfs guard's share is twice another collector's.
        assert_eq!(owner_cap(STATFS_OWNER), 64);
        assert_eq!(owner_cap("databases"), 32);
        assert!(may_start(40, 40, owner_cap(STATFS_OWNER), None).is_ok());
        assert!(may_start(64, 64, owner_cap(STATFS_OWNER), None).is_err());
        // What `room` says may start is exactly what `may_start` lets through, one by one.
        for (threads, own, cap, limit) in [
            (0, 0, 64, None),
            (10, 2, 64, Some(l(128, 20))),
            (100, 40, 64, None),
            (0, 0, 32, Some(l(128, 100))),
            (0, 0, 64, Some(l(4915, 30))),
        ] {
            let n = room(threads, own, cap, limit.as_ref());
            for i in 0..n {
                let mut limit = limit.clone();
                if let Some(l) = &mut limit {
                    l.current += i as u64;
                }
                assert!(may_start(threads + i, own + i, cap, limit.as_ref()).is_ok());
            }
            let mut limit = limit.clone();
            if let Some(l) = &mut limit {
                l.current += n as u64;
            }
            assert!(
                may_start(threads + n, own + n, cap, limit.as_ref()).is_err(),
                "{threads} {own} {cap}: room {n}"
            );
        }
    }
}
