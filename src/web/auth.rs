//! HTTP basic auth against `basic_auth_users` (bcrypt hashes), made so that clients without the
//! password can't lock out the one with it: a credential once checked is remembered under a keyed
//! hash and answered without bcrypt from then on (renewed by each use, kept across reloads), and
//! bcrypt runs on one thread that takes the clients in turn, a few checks waiting each; beyond
//! that a check is refused at once as busy. Decides only; the responses are the gate's.

use crate::web::client::client_key;
use base64::Engine as _;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A verified credential is answered without bcrypt while it is used at least this often (each
/// use renews it): a scrape interval is well under it, so Prometheus' password, once checked,
/// never waits for bcrypt again, whatever else is checked meanwhile.
const VERIFIED_IDLE: Duration = Duration::from_secs(15 * 60);
/// A refused credential is answered without bcrypt while it is tried at least this often: a
/// client repeating one wrong password (an old one in a forgotten job, or a flood) costs one
/// bcrypt, not one per request.
const REFUSED_IDLE: Duration = Duration::from_secs(60);
/// Only right passwords are remembered as verified, so this is a few per user.
const VERIFIED_MAX: usize = 256;
const REFUSED_MAX: usize = 4096;
/// Checks waiting for bcrypt from one client (an IPv4 address or an IPv6 /64), and from all:
/// beyond them a check is answered "busy" (429) at once, so no client can make another wait
/// behind more than one check of its own per turn. 256 × a 16 KiB header at most is 4 MiB.
const QUEUE_PER_CLIENT: usize = 4;
const QUEUE_MAX: usize = 256;

/// A keyed hash (HMAC-SHA256 under a key made at start) of user, hash and password: the
/// memory of checks never holds a password, an entry is useless without the process's key,
/// and a changed hash (a reload) can't match an old entry.
pub(crate) type Key = [u8; 32];

/// What a check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// No credentials, an unknown user or a wrong password: 401.
    Refused,
    /// Not checked: the client has its few checks waiting already, or all clients together
    /// have as many as are kept: 429.
    Busy,
}

pub struct Users {
    hashes: BTreeMap<String, String>,
    /// A hash of the highest configured cost: unknown users are checked against it, so a
    /// wrong user name takes as long as a wrong password.
    decoy: String,
    checker: Arc<Checker>,
}

/// Why the web config's users could not be made ready.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The system gave no randomness for the key that hides the checked passwords in memory.
    #[error("no randomness for the key of the password-check memory")]
    NoRandomness,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the hashes.
        f.debug_struct("Users")
            .field("users", &self.hashes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Users {
    /// `hashes` were checked by `WebConfigFile::validate`. Makes the decoy hash (one bcrypt) and
    /// the key of the memory of checks; fails only when the system has no randomness to give.
    pub fn new(hashes: BTreeMap<String, String>) -> Result<Users, AuthError> {
        let cost = hashes
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let decoy = bcrypt::hash("ssdwatch decoy password", cost).unwrap_or_default();
        let hmac =
            ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())
                .map_err(|_| AuthError::NoRandomness)?;
        Ok(Users {
            hashes,
            decoy,
            checker: Arc::new(Checker {
                hmac,
                shared: Arc::new(Shared::default()),
            }),
        })
    }

    /// Takes over what `previous` (the config before a reload) remembered, its key and its
    /// bcrypt thread: the entries name their hash, so those of changed or removed users can't
    /// match, and Prometheus' password stays verified across the reload.
    pub fn inherit(&mut self, previous: &Users) {
        self.checker = previous.checker.clone();
    }

    /// The key of credentials verified before (renewing them), found without bcrypt and without
    /// waiting; `None` for anything else.
    pub fn verified(&self, authorization: Option<&[u8]>) -> Option<Key> {
        let (user, password) = authorization.and_then(parse_basic)?;
        let hash = self.hashes.get(&user)?;
        let key = self.checker.key(&user, hash, &password);
        let recalled = self.checker.lock().memory.recall(&key, Instant::now());
        (recalled == Some(true)).then_some(key)
    }

    /// Whether an `Authorization` header value names a user with the right password; `client`
    /// is the peer's address, whose share of the bcrypt thread the check takes. A check that
    /// starts is finished and remembered even when the request is dropped meanwhile (its client
    /// gave up), so the next request with the same credentials is answered at once.
    pub async fn check(&self, authorization: Option<&[u8]>, client: IpAddr) -> Verdict {
        let Some((user, password)) = authorization.and_then(parse_basic) else {
            return Verdict::Refused;
        };
        let (hash, known) = match self.hashes.get(&user) {
            Some(h) => (h.as_str(), true),
            None => (self.decoy.as_str(), false),
        };
        let key = self.checker.key(&user, hash, &password);
        let answer = {
            let mut state = self.checker.lock();
            match state.memory.recall(&key, Instant::now()) {
                Some(true) => return Verdict::Allowed,
                Some(false) => return Verdict::Refused,
                None => {}
            }
            let (tx, rx) = oneshot::channel();
            let job = || Job {
                hash: hash.to_string(),
                password,
                known,
                waiters: Vec::new(),
            };
            match state.queue.admit(client_key(client), key, tx, job) {
                Admit::Busy => return Verdict::Busy,
                Admit::Joined => {}
                Admit::Queued => {
                    if !state.worker && !self.checker.start_worker() {
                        state.queue.forget(&key);
                        return Verdict::Busy;
                    }
                    state.worker = true;
                    self.checker.shared.wake.notify_one();
                }
            }
            rx
        };
        match answer.await {
            Ok(true) => Verdict::Allowed,
            _ => Verdict::Refused,
        }
    }
}

/// What outlives a reload: the key, the memory of checks and the bcrypt thread with its queue.
struct Checker {
    hmac: ring::hmac::Key,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    memory: Memory,
    queue: Queue,
    /// The bcrypt thread is running.
    worker: bool,
    /// No `Users` refers to this any more: the thread ends.
    closed: bool,
}

impl Checker {
    fn key(&self, user: &str, hash: &str, password: &str) -> Key {
        let mut ctx = ring::hmac::Context::with_key(&self.hmac);
        for part in [user, hash, password] {
            ctx.update(&(part.len() as u64).to_le_bytes());
            ctx.update(part.as_bytes());
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the bcrypt thread; false (logged) when the system won't give a thread.
    fn start_worker(&self) -> bool {
        let shared = self.shared.clone();
        // Not the door: the one bcrypt thread (CPU only, cannot hang), for the server's life.
        match std::thread::Builder::new()
            .name("bcrypt".into())
            .spawn(move || work(&shared))
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("starting the password-check thread: {e}");
                false
            }
        }
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

/// The bcrypt thread: one check at a time (a flood of wrong passwords takes one core, never
/// both), clients in turn; each result is remembered before the waiters hear it.
fn work(shared: &Shared) {
    let lock = || shared.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let (key, hash, password, known) = {
            let mut state = lock();
            loop {
                if state.closed {
                    // The waiters' channels close: they answer 401.
                    state.worker = false;
                    return;
                }
                let Some(key) = state.queue.next() else {
                    state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                    continue;
                };
                if let Some(job) = state.queue.jobs.get_mut(&key) {
                    let password = std::mem::take(&mut job.password);
                    break (key, job.hash.clone(), password, job.known);
                }
            }
        };
        let ok = bcrypt::verify(password, &hash).unwrap_or(false) && known;
        let mut state = lock();
        state.memory.remember(key, ok, Instant::now());
        if let Some(job) = state.queue.finish(&key) {
            for waiter in job.waiters {
                let _ = waiter.send(ok); // its request may be gone; the result is remembered
            }
        }
    }
}

/// Verdicts of past checks by key, with when each was last used.
#[derive(Default)]
struct Memory {
    verified: HashMap<Key, Instant>,
    refused: HashMap<Key, Instant>,
}

impl Memory {
    /// The remembered verdict of `key`, renewed; `None` when there is none (or it lapsed).
    fn recall(&mut self, key: &Key, now: Instant) -> Option<bool> {
        for (map, idle, verdict) in [
            (&mut self.verified, VERIFIED_IDLE, true),
            (&mut self.refused, REFUSED_IDLE, false),
        ] {
            if let Some(used) = map.get_mut(key) {
                if now.saturating_duration_since(*used) < idle {
                    *used = now;
                    return Some(verdict);
                }
                map.remove(key);
            }
        }
        None
    }

    fn remember(&mut self, key: Key, ok: bool, now: Instant) {
        let (map, idle, max) = if ok {
            (&mut self.verified, VERIFIED_IDLE, VERIFIED_MAX)
        } else {
            (&mut self.refused, REFUSED_IDLE, REFUSED_MAX)
        };
        if !map.contains_key(&key) && map.len() >= max {
            // Lapsed entries first, then the one unused longest: forgetting costs a bcrypt.
            map.retain(|_, used| now.saturating_duration_since(*used) < idle);
            if map.len() >= max
                && let Some(oldest) = map.iter().min_by_key(|(_, used)| **used).map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        map.insert(key, now);
    }
}

/// A check waiting for (or running on) the bcrypt thread, and the requests waiting for it.
struct Job {
    hash: String,
    /// Taken when the check starts.
    password: String,
    known: bool,
    waiters: Vec<oneshot::Sender<bool>>,
}

#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// The same credentials are being checked already: the request waits for that check.
    Joined,
    Queued,
    Busy,
}

/// The checks waiting for the bcrypt thread: a queue per client, the clients served in turn,
/// so a client's flood delays itself, not the others.
#[derive(Default)]
struct Queue {
    /// Waiting and running checks.
    jobs: HashMap<Key, Job>,
    /// Waiting checks by client.
    waiting: HashMap<IpAddr, VecDeque<Key>>,
    /// Clients with checks waiting, the next one first.
    turn: VecDeque<IpAddr>,
    queued: usize,
}

impl Queue {
    fn admit(
        &mut self,
        client: IpAddr,
        key: Key,
        waiter: oneshot::Sender<bool>,
        job: impl FnOnce() -> Job,
    ) -> Admit {
        if let Some(j) = self.jobs.get_mut(&key) {
            j.waiters.push(waiter);
            return Admit::Joined;
        }
        let mine = self.waiting.get(&client).map_or(0, VecDeque::len);
        if mine >= QUEUE_PER_CLIENT || self.queued >= QUEUE_MAX {
            return Admit::Busy;
        }
        let mut j = job();
        j.waiters.push(waiter);
        self.jobs.insert(key, j);
        if mine == 0 {
            self.turn.push_back(client);
        }
        self.waiting.entry(client).or_default().push_back(key);
        self.queued += 1;
        Admit::Queued
    }

    /// The next check to run: the first waiting one of the client whose turn it is.
    fn next(&mut self) -> Option<Key> {
        let client = self.turn.pop_front()?;
        let mine = self.waiting.get_mut(&client)?;
        let key = mine.pop_front();
        if mine.is_empty() {
            self.waiting.remove(&client);
        } else {
            self.turn.push_back(client);
        }
        if key.is_some() {
            self.queued -= 1;
        }
        key
    }

    /// A check is done: its job, with the waiters to tell.
    fn finish(&mut self, key: &Key) -> Option<Job> {
        self.jobs.remove(key)
    }

    /// Takes back a check just queued (no thread to run it).
    fn forget(&mut self, key: &Key) {
        if self.jobs.remove(key).is_none() {
            return;
        }
        for mine in self.waiting.values_mut() {
            let before = mine.len();
            mine.retain(|k| k != key);
            self.queued -= before - mine.len();
        }
        self.waiting.retain(|_, mine| !mine.is_empty());
        let waiting = &self.waiting;
        self.turn.retain(|c| waiting.contains_key(c));
    }
}

/// `Basic base64(user:password)` → (user, password).
pub(crate) fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn header(user: &str, password: &str) -> Vec<u8> {
        let enc = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {enc}").into_bytes()
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    fn users(password: &str) -> Users {
        let hash = bcrypt::hash(password, 4).unwrap();
        Users::new(BTreeMap::from([("alice".to_string(), hash)])).unwrap()
    }

    #[test]
    fn basic_header_is_parsed_and_other_schemes_are_not() {
        assert_eq!(
            parse_basic(&header("alice", "a:b")),
            Some(("alice".into(), "a:b".into()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
    }

    #[tokio::test]
    async fn right_password_passes_and_is_then_answered_without_bcrypt() {
        let users = users("s3cret");
        let right = header("alice", "s3cret");
        assert_eq!(users.verified(Some(&right)), None);
        assert_eq!(users.check(Some(&right), ip(1)).await, Verdict::Allowed);
        assert_eq!(
            users.check(Some(&header("alice", "wrong")), ip(1)).await,
            Verdict::Refused
        );
        assert_eq!(
            users.check(Some(&header("mallory", "s3cret")), ip(1)).await,
            Verdict::Refused
        );
        assert_eq!(users.check(None, ip(1)).await, Verdict::Refused);
        assert!(users.verified(Some(&right)).is_some());
        assert_eq!(users.verified(Some(&header("alice", "wrong"))), None);
        // Remembered: answered with the bcrypt thread's queue full of other clients' checks.
        {
            let mut state = users.checker.lock();
            for n in 0..QUEUE_MAX {
                let (tx, _rx) = oneshot::channel();
                let job = || Job {
                    hash: String::new(),
                    password: String::new(),
                    known: false,
                    waiters: Vec::new(),
                };
                let mut key = [0u8; 32];
                key[..8].copy_from_slice(&(n as u64).to_le_bytes());
                state.queue.admit(ip(100 + (n % 100) as u8), key, tx, job);
            }
        }
        let ok = tokio::time::timeout(Duration::from_secs(5), users.check(Some(&right), ip(1)));
        assert_eq!(ok.await, Ok(Verdict::Allowed));
    }

    #[tokio::test]
    async fn a_check_whose_client_gave_up_is_still_finished_and_remembered() {
        let users = users("s3cret");
        let right = header("alice", "s3cret");
        // The request is dropped as soon as its check is queued: polled once, then dropped (no
        // timer, so a busy machine can't change what the test does).
        let mut check = Box::pin(users.check(Some(&right), ip(1)));
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(check.as_mut().poll(cx))).await;
        assert!(
            first.is_pending(),
            "a bcrypt check finished on its first poll"
        );
        drop(check);
        let deadline = Instant::now() + Duration::from_secs(30);
        while users.verified(Some(&right)).is_none() {
            assert!(
                Instant::now() < deadline,
                "the abandoned check was never remembered"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[test]
    fn clients_take_turns_with_a_few_checks_waiting_each() {
        let mut q = Queue::default();
        let job = || Job {
            hash: String::new(),
            password: String::new(),
            known: false,
            waiters: Vec::new(),
        };
        let key = |n: u8| [n; 32];
        let admit = |q: &mut Queue, client, n| q.admit(client, key(n), oneshot::channel().0, job);
        // A flood from one address: a few wait, the rest are busy at once.
        for n in 0..QUEUE_PER_CLIENT as u8 {
            assert_eq!(admit(&mut q, ip(1), n), Admit::Queued);
        }
        assert_eq!(admit(&mut q, ip(1), 50), Admit::Busy);
        // The same credentials again join the waiting check rather than queue another.
        assert_eq!(admit(&mut q, ip(1), 0), Admit::Joined);
        assert_eq!(admit(&mut q, ip(9), 0), Admit::Joined);
        // Another address gets the next turn, not the flood's.
        assert_eq!(admit(&mut q, ip(2), 100), Admit::Queued);
        assert_eq!(q.next(), Some(key(0)));
        assert_eq!(q.next(), Some(key(100)));
        assert_eq!(q.next(), Some(key(1)));
        // A running check is still joined, and its client may queue again.
        assert_eq!(admit(&mut q, ip(1), 1), Admit::Joined);
        assert_eq!(admit(&mut q, ip(1), 60), Admit::Queued);
        assert_eq!(q.next(), Some(key(2)));
        assert_eq!(q.next(), Some(key(3)));
        assert_eq!(q.next(), Some(key(60)));
        assert_eq!(q.next(), None);
        assert_eq!(q.finish(&key(0)).map(|j| j.waiters.len()), Some(3));
        assert_eq!(q.queued, 0);
    }

    #[test]
    fn no_client_waits_behind_more_than_one_check_of_each_other_client() {
        let mut q = Queue::default();
        let job = || Job {
            hash: String::new(),
            password: String::new(),
            known: false,
            waiters: Vec::new(),
        };
        // 40 addresses flood; each is held to QUEUE_PER_CLIENT waiting checks.
        let mut n = 0u32;
        for round in 0..10 {
            for client in 1..=40u8 {
                let mut key = [0u8; 32];
                key[..4].copy_from_slice(&n.to_le_bytes());
                n += 1;
                let got = q.admit(ip(client), key, oneshot::channel().0, job);
                assert_eq!(got == Admit::Queued, round < QUEUE_PER_CLIENT, "{got:?}");
            }
        }
        // Prometheus' address arrives last and runs within one turn of the others.
        let prometheus = [0xff; 32];
        assert_eq!(
            q.admit(ip(200), prometheus, oneshot::channel().0, job),
            Admit::Queued
        );
        let position = std::iter::from_fn(|| q.next())
            .position(|k| k == prometheus)
            .unwrap();
        assert!(position <= 40, "{position}");
    }

    #[test]
    fn the_queue_is_bounded_in_all() {
        let mut q = Queue::default();
        let job = || Job {
            hash: String::new(),
            password: String::new(),
            known: false,
            waiters: Vec::new(),
        };
        let mut queued = 0;
        for n in 0..=u16::MAX {
            let mut key = [0u8; 32];
            key[..2].copy_from_slice(&n.to_le_bytes());
            let client = IpAddr::V4(Ipv4Addr::from(u32::from(n)));
            if q.admit(client, key, oneshot::channel().0, job) == Admit::Queued {
                queued += 1;
            }
        }
        assert_eq!(queued, QUEUE_MAX);
        let first = q.turn.front().and_then(|c| q.waiting[c].front()).copied();
        q.forget(&first.unwrap());
        assert_eq!(q.queued, QUEUE_MAX - 1);
        assert_eq!(q.turn.len(), QUEUE_MAX - 1);
    }

    #[test]
    fn memory_renews_on_use_forgets_the_lapsed_and_stays_bounded() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        m.remember([1; 32], true, t0);
        m.remember([2; 32], false, t0);
        // Used every 10 minutes, the verified one stays (each use renews it) ...
        for i in 1..=6 {
            assert_eq!(
                m.recall(&[1; 32], t0 + Duration::from_secs(600 * i)),
                Some(true)
            );
        }
        // ... and lapses 15 minutes after its last use.
        assert_eq!(
            m.recall(&[1; 32], t0 + Duration::from_secs(3600 + 900)),
            None
        );
        assert_eq!(
            m.recall(&[2; 32], t0 + Duration::from_secs(59)),
            Some(false)
        );
        assert_eq!(m.recall(&[2; 32], t0 + Duration::from_secs(59 + 60)), None);
        for n in 0..(REFUSED_MAX as u32 + 100) {
            let mut key = [0u8; 32];
            key[..4].copy_from_slice(&n.to_le_bytes());
            m.remember(key, false, t0 + Duration::from_millis(u64::from(n)));
        }
        assert_eq!(m.refused.len(), REFUSED_MAX);
    }

    #[tokio::test]
    async fn what_was_verified_survives_a_reload_of_the_same_users() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let before = Users::new(BTreeMap::from([("alice".to_string(), hash.clone())])).unwrap();
        let right = header("alice", "s3cret");
        assert_eq!(before.check(Some(&right), ip(1)).await, Verdict::Allowed);
        let mut after = Users::new(BTreeMap::from([("alice".to_string(), hash)])).unwrap();
        assert!(after.verified(Some(&right)).is_none());
        after.inherit(&before);
        assert!(after.verified(Some(&right)).is_some());
        // A changed hash is not matched by the old entry.
        let other = bcrypt::hash("s3cret", 4).unwrap();
        let mut changed = Users::new(BTreeMap::from([("alice".to_string(), other)])).unwrap();
        changed.inherit(&before);
        assert!(changed.verified(Some(&right)).is_none());
    }
}
