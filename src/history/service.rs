//! The history store in the running daemon: one thread that takes the records collectors hand
//! over (never blocking them: a full queue drops and counts), writes them in one transaction
//! every `flush_interval` (15 minutes), downsamples hourly, recomputes forecasts every `forecast_interval`, and publishes
//! them with its own health as the `history` collector. A store that can't be opened or written
//! (a read-only or full state directory) is an error of this collector only.

use super::clock::{ClockGuard, Verdict};
use super::current;
use super::forecast::Endurance;
use super::{
    DatabaseSample, DiscardEvent, DriveSample, FsKey, FsLayers, FsLayersRef, FsSample, FsSampleRef,
    HistoryConfig, IdlePeriod, LayerErrorsSample, LayerRow, ProbeRecord, Store,
};
use crate::catalogue;
use crate::metrics::MetricSet;
use crate::snapshot::{Published, Snapshots as Snapshot};
use crate::time::unix_now;
use regex_lite::Regex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// The collector name the history publishes its health and forecasts under.
pub const NAME: &str = "history";

/// Records waiting to be written; beyond this a record is dropped (and counted) rather than
/// making a collector wait. The channel allocates every slot up front (a pointer each, the
/// records are boxed). The history thread empties it continuously (into its pending rows) and
/// commits when `flush_interval` has passed or half this many records are pending; collectors
/// send a series at most once per `raw_interval`.
const QUEUE: usize = 4096;
/// Downsampling and retention this often.
const MAINTAIN_EVERY: Duration = crate::time::HOUR_DURATION;
/// A store that could not be opened is tried again this often.
const REOPEN_EVERY: Duration = Duration::from_secs(60);

/// One thing a collector saw that the history keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Fs(FsSample),
    /// A filesystem's stack of layers, sent beside its sample.
    FsLayers(FsLayers),
    Drive(DriveSample),
    Probe(ProbeRecord),
    Discard(DiscardEvent),
    Idle(IdlePeriod),
    /// What a database's files held, by component.
    Database(DatabaseSample),
    /// A btrfs device's, ZFS vdev's or md member's error counters.
    LayerErrors(LayerErrorsSample),
}

/// When a record was taken (Unix seconds).
fn record_time(r: &Record) -> i64 {
    match r {
        Record::Fs(s) => s.t,
        Record::FsLayers(s) => s.t,
        Record::Drive(s) => s.t,
        Record::Probe(p) => p.t,
        Record::Discard(d) => d.t,
        Record::Idle(i) => i.start,
        Record::Database(d) => d.t,
        Record::LayerErrors(e) => e.t,
    }
}

/// The collectors' end of the queue: cheap to clone, never blocks.
#[derive(Clone, Debug)]
pub struct Sink {
    /// Boxed: the channel allocates every slot up front, and a record is a few hundred bytes.
    tx: SyncSender<Box<Record>>,
    dropped: Arc<AtomicU64>,
    raw_interval: Duration,
    flusher: Flusher,
    /// Set when the store gained history from elsewhere (an import): the thread recomputes
    /// the forecasts at once instead of at its next `forecast_interval`.
    reforecast: Arc<AtomicBool>,
}

/// Asks the history thread to commit what it holds now rather than at its next
/// `flush_interval`: `/report` does, so a report shows what the daemon has seen (a new host's
/// first 15 minutes included), not only what the last commit wrote. One commit per request,
/// and reports are built one at a time.
#[derive(Clone, Debug, Default)]
pub struct Flusher {
    /// (commits asked for, asks answered), and the history thread's signal.
    state: Arc<(std::sync::Mutex<(u64, u64)>, std::sync::Condvar)>,
}

impl Flusher {
    /// Asks for a commit and waits until the history thread has made it (or found nothing to
    /// write, or could not write), at most `timeout`; whether it was answered in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (m, cv) = &*self.state;
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let want = g.0;
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |g| g.1 < want)
            .unwrap_or_else(|e| e.into_inner());
        g.1 >= want
    }

    /// The newest ask not answered yet, if any.
    fn asked(&self) -> Option<u64> {
        let g = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
        (g.0 > g.1).then_some(g.0)
    }

    /// Answers every ask up to `upto`.
    fn answer(&self, upto: u64) {
        let (m, cv) = &*self.state;
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = g.1.max(upto);
        cv.notify_all();
    }
}

impl Sink {
    /// The store keeps at most one raw sample per series this often: a collector sampling
    /// faster sends no more than that (the queue, and the daemon's memory, stay small).
    pub fn raw_interval(&self) -> Duration {
        self.raw_interval
    }

    /// What `/report` asks for a commit through.
    pub fn flusher(&self) -> Flusher {
        self.flusher.clone()
    }

    /// Asks for the forecasts to be recomputed now (within the thread's half-second round):
    /// the store holds history the last pass did not read.
    pub fn reforecast(&self) {
        self.reforecast.store(true, Ordering::Release);
    }

    /// Hands a record over; when the queue is full it is dropped and counted.
    pub fn send(&self, r: Record) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.tx.try_send(Box::new(r))
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A drive model's rated endurance, from the config (`history.endurance`).
#[derive(Debug, Clone)]
pub struct EnduranceRule {
    pub model: Regex,
    pub rating: Rating,
}

/// How a rating is given.
#[derive(Debug, Clone, Copy)]
pub enum Rating {
    Tbw { bytes: f64 },
    Dwpd { dwpd: f64, warranty_years: f64 },
}

/// A drive's rating: the first rule whose pattern matches its model (a DWPD rating needs the
/// capacity). The forecast pass and the report both judge a drive by this.
pub fn rated_endurance(
    rules: &[EnduranceRule],
    model: Option<&str>,
    capacity: Option<u64>,
) -> Option<Endurance> {
    let model = model?;
    let rule = rules.iter().find(|r| r.model.is_match(model))?;
    Some(match rule.rating {
        Rating::Tbw { bytes } => Endurance::Tbw { bytes },
        Rating::Dwpd {
            dwpd,
            warranty_years,
        } => Endurance::Dwpd {
            dwpd,
            capacity_bytes: capacity? as f64,
            warranty_years,
        },
    })
}

/// The running history: stop it to flush and end the thread.
pub struct Service {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    /// Flushes what is queued and ends the thread (waits at most `deadline`).
    pub fn stop(mut self, deadline: Duration) {
        self.stop.store(true, Ordering::Release);
        self.join_within(deadline);
    }

    /// Waits at most `deadline` for the thread to end and reaps it; whether it has ended.
    fn join_within(&mut self, deadline: Duration) -> bool {
        let Some(t) = self.thread.take() else {
            return true;
        };
        let until = Instant::now() + deadline;
        while !t.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if t.is_finished() {
            let _ = t.join();
            true
        } else {
            self.thread = Some(t);
            false
        }
    }
}

/// Starts the history thread; records go in through the returned sink.
pub fn start(
    cfg: HistoryConfig,
    state_dir: PathBuf,
    endurance: Vec<EnduranceRule>,
    slow_levels: Vec<(String, super::slow::SlowLevel)>,
    snapshot: Arc<Snapshot>,
) -> std::io::Result<(Sink, Service)> {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let raw_interval = cfg.raw_interval;
    let dropped = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = Flusher::default();
    let reforecast = Arc::new(AtomicBool::new(false));
    snapshot.register(NAME);
    // It publishes at each flush at the latest: what "overdue" is measured against.
    snapshot.expect_next(NAME, cfg.flush_interval);
    let mut w = Worker {
        cfg,
        state_dir,
        endurance,
        slow_levels,
        snapshot,
        dropped: dropped.clone(),
        stop: stop.clone(),
        flusher: flusher.clone(),
        reforecast: reforecast.clone(),
        store: None,
        next_open: Instant::now(),
        written: 0,
        errors: Vec::new(),
        forecasts: MetricSet::new(),
        last_write_unix: None,
        last_ok: None,
        clock: ClockGuard::default(),
    };
    // Not the door: the history store's one long-lived thread, for the daemon's life.
    let thread = std::thread::Builder::new()
        .name("ssdwatch-history".into())
        .spawn(move || w.run(rx))?;
    Ok((
        Sink {
            tx,
            dropped,
            raw_interval,
            flusher,
            reforecast,
        },
        Service {
            stop,
            thread: Some(thread),
        },
    ))
}

/// Filesystem samples waiting for the next commit, each key kept once: between two commits
/// (15 minutes at the defaults) a large host's 500 mounts send 1,500 samples of 500 keys.
/// A sample is 56 bytes here, against a few hundred as a record with its own strings.
#[derive(Default)]
struct PendingFs {
    keys: Vec<(FsKey, String)>,
    index: HashMap<FsKey, u32>,
    rows: Vec<(u32, FsValues)>,
    /// The newest stack of layers of each key: the store keeps only that.
    stacks: HashMap<u32, (i64, Vec<LayerRow>)>,
}

#[derive(Clone, Copy)]
struct FsValues {
    t: i64,
    size_bytes: u64,
    avail_bytes: u64,
    free_bytes: u64,
    files_free: Option<u64>,
}

impl PendingFs {
    fn key(&mut self, key: FsKey, device: String) -> u32 {
        match self.index.get(&key) {
            Some(&k) => {
                // The device it is mounted from now is what the store keeps.
                if self.keys[k as usize].1 != device {
                    self.keys[k as usize].1 = device;
                }
                k
            }
            None => {
                let k = self.keys.len() as u32;
                self.index.insert(key.clone(), k);
                self.keys.push((key, device));
                k
            }
        }
    }

    fn push_layers(&mut self, s: FsLayers) {
        let k = self.key(s.key, s.device);
        match self.stacks.get(&k) {
            Some((t, _)) if *t > s.t => {}
            _ => {
                self.stacks.insert(k, (s.t, s.layers));
            }
        }
    }

    fn push(&mut self, s: FsSample) {
        let k = self.key(s.key, s.device);
        self.rows.push((
            k,
            FsValues {
                t: s.t,
                size_bytes: s.size_bytes,
                avail_bytes: s.avail_bytes,
                free_bytes: s.free_bytes,
                files_free: s.files_free,
            },
        ));
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    /// Drops the samples stamped after `limit`; returns how many (stacks of layers are not
    /// counted: they go with their samples).
    fn drop_after(&mut self, limit: i64) -> usize {
        let before = self.rows.len();
        self.rows.retain(|(_, v)| v.t <= limit);
        self.stacks.retain(|_, (t, _)| *t <= limit);
        before - self.rows.len()
    }

    fn stacks(&self) -> impl Iterator<Item = FsLayersRef<'_>> {
        self.stacks.iter().map(|(k, (t, layers))| {
            let (key, device) = &self.keys[*k as usize];
            FsLayersRef {
                key,
                device,
                t: *t,
                layers,
            }
        })
    }

    fn samples(&self) -> impl Iterator<Item = FsSampleRef<'_>> {
        self.rows.iter().map(|(k, v)| {
            let (key, device) = &self.keys[*k as usize];
            FsSampleRef {
                key,
                device,
                t: v.t,
                size_bytes: v.size_bytes,
                avail_bytes: v.avail_bytes,
                free_bytes: v.free_bytes,
                files_free: v.files_free,
            }
        })
    }
}

struct Worker {
    cfg: HistoryConfig,
    state_dir: PathBuf,
    endurance: Vec<EnduranceRule>,
    /// Each probe target's slow commit level, by target path.
    slow_levels: Vec<(String, super::slow::SlowLevel)>,
    snapshot: Arc<Snapshot>,
    dropped: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    flusher: Flusher,
    reforecast: Arc<AtomicBool>,
    store: Option<Store>,
    next_open: Instant,
    written: u64,
    /// Errors since the last publish (each also logged when it starts and clears).
    errors: Vec<String>,
    forecasts: MetricSet,
    last_write_unix: Option<f64>,
    /// Whether the last open/write/maintenance succeeded.
    last_ok: Option<bool>,
    /// The wall clock against the monotonic one: nothing is stored or deleted by a clock that
    /// just jumped.
    clock: ClockGuard,
}

impl Worker {
    fn run(&mut self, rx: Receiver<Box<Record>>) {
        let mut batch = Vec::new();
        let mut fs = PendingFs::default();
        let flush_every = self.cfg.flush_interval;
        let mut next_flush = Instant::now() + flush_every;
        let mut next_maintain = Instant::now() + Duration::from_secs(120);
        let mut next_forecast =
            Instant::now() + self.cfg.forecast_interval.min(Duration::from_secs(30));
        let mut faults = crate::fault::Faults::default();
        self.ensure_open();
        self.publish(&mut faults, Duration::ZERO);
        loop {
            let mut stopping = self.stop.load(Ordering::Acquire);
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(r) => {
                    let mut take = |r: Box<Record>| match *r {
                        Record::Fs(s) => fs.push(s),
                        Record::FsLayers(s) => fs.push_layers(s),
                        other => batch.push(other),
                    };
                    take(r);
                    // Drain what is queued without waiting.
                    while let Ok(r) = rx.try_recv() {
                        take(r);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every sender is gone: no record can come any more, and waiting would return
                // at once, round after round (a spinning thread). Commit what is pending and end.
                Err(RecvTimeoutError::Disconnected) => stopping = true,
            }
            let now = Instant::now();
            let mut worked = false;
            let t0 = Instant::now();
            // Asked before what is queued now was taken: the records queued at the ask are
            // in `batch`/`fs` already (drained above), so this commit holds them.
            let asked = self.flusher.asked();
            if now >= next_flush
                || stopping
                || asked.is_some()
                || batch.len() + fs.len() >= QUEUE / 2
            {
                self.ensure_open();
                if !batch.is_empty() || fs.len() > 0 {
                    self.write(&mut batch, std::mem::take(&mut fs));
                }
                next_flush = now + flush_every;
                worked = true;
            }
            if let Some(upto) = asked {
                self.flusher.answer(upto);
            }
            if now >= next_maintain {
                self.maintain();
                next_maintain = now + MAINTAIN_EVERY;
                worked = true;
            }
            if now >= next_forecast || self.reforecast.swap(false, Ordering::AcqRel) {
                self.forecast();
                next_forecast = now + self.cfg.forecast_interval;
                worked = true;
            }
            if worked {
                self.publish(&mut faults, t0.elapsed());
            }
            if stopping {
                return;
            }
        }
    }

    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors.push(e.to_string());
        self.last_ok = Some(false);
    }

    fn ensure_open(&mut self) {
        if self.store.is_some() || Instant::now() < self.next_open {
            return;
        }
        self.next_open = Instant::now() + REOPEN_EVERY;
        match Store::open_or_recover(&self.state_dir, &self.cfg, unix_now() as i64) {
            Ok((store, aside)) => {
                if let Some(p) = aside {
                    tracing::error!(
                        "history store {} was damaged: moved aside to {}; a new store starts",
                        store.path().display(),
                        p.display()
                    );
                }
                self.store = Some(store);
                self.last_ok = Some(true);
                self.drop_future_rows();
            }
            Err(e) => self.error(format!("{e} (history not kept; retried every minute)")),
        }
    }

    /// Rows stamped after now (a daemon that ran under a clock ahead, then a clock set
    /// right) are removed when the store is opened under a believable clock: kept, they would
    /// refuse every sample of their series until the wrong date came round.
    fn drop_future_rows(&mut self) {
        let now = unix_now() as i64;
        if now < crate::time::CLOCK_FLOOR {
            return;
        }
        let Some(store) = self.store.as_mut() else {
            return;
        };
        match store.drop_future(now + super::clock::TOLERANCE_SECONDS) {
            Ok(f) if f.rows > 0 => tracing::warn!(
                "history store {}: {} row(s) stamped after now, up to {}, were written under a clock that was ahead: removed, so this clock's samples are stored",
                store.path().display(),
                f.rows,
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + Duration::from_secs(f.newest.max(0) as u64)
                )
            ),
            Ok(_) => {}
            Err(e) => self.error(e),
        }
    }

    /// Whether the wall clock can be believed now; when not, says so as an error.
    fn clock_trusted(&mut self, what: &str) -> bool {
        let now = unix_now() as i64;
        if now < crate::time::CLOCK_FLOOR {
            self.error(format!(
                "the wall clock reads {now} (Unix seconds), before this release was made: {what} until the clock is set"
            ));
            return false;
        }
        match self.clock.check(now, Instant::now()) {
            Verdict::Trusted => true,
            Verdict::Jumped { by_seconds } => {
                self.error(format!(
                    "the wall clock jumped {} by {} s against the monotonic clock: {what} until it is back or has held its new time for an hour",
                    if by_seconds > 0 { "forward" } else { "back" },
                    by_seconds.abs()
                ));
                false
            }
        }
    }

    fn write(&mut self, batch: &mut Vec<Record>, mut fs: PendingFs) {
        if !self.clock_trusted("samples are not stored (they are counted as dropped)") {
            self.dropped
                .fetch_add((batch.len() + fs.len()) as u64, Ordering::Relaxed);
            *batch = Vec::new();
            return;
        }
        // Samples stamped in the future were taken while the clock was off (and it came back
        // before this commit): stored, they would hold back every later sample of their series.
        let limit = unix_now() as i64 + super::clock::TOLERANCE_SECONDS;
        let before = batch.len();
        batch.retain(|r| record_time(r) <= limit);
        let future = before - batch.len() + fs.drop_after(limit);
        if future > 0 {
            self.dropped.fetch_add(future as u64, Ordering::Relaxed);
            self.error(format!(
                "{future} sample(s) stamped in the future (taken while the clock was ahead) were not stored; counted as dropped"
            ));
        }
        if let Some(Err(e)) = self.store.as_ref().map(Store::still_at_its_path) {
            tracing::error!("history store: {e}");
            self.error(e);
            if let Some(old) = self.store.take() {
                old.close_replaced();
            }
            self.next_open = Instant::now();
            self.ensure_open();
        }
        let Some(store) = self.store.as_mut() else {
            // Not open: what can't be written is dropped, and counted.
            self.dropped
                .fetch_add((batch.len() + fs.len()) as u64, Ordering::Relaxed);
            *batch = Vec::new();
            return;
        };
        let (mut drives, mut probes, mut discards, mut idle, mut databases, mut layer_errors) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        // Taken, not drained: a batch of 15 minutes of a large host is a few hundred KiB,
        // which goes back to the kernel here instead of staying resident between flushes.
        for r in std::mem::take(batch) {
            match r {
                Record::Fs(s) => fs.push(s),
                Record::FsLayers(s) => fs.push_layers(s),
                Record::Drive(s) => drives.push(s),
                Record::Probe(p) => probes.push(p),
                Record::Discard(d) => discards.push(d),
                Record::Idle(i) => idle.push(i),
                Record::Database(d) => databases.push(d),
                Record::LayerErrors(e) => layer_errors.push(e),
            }
        }
        let n = (fs.len()
            + drives.len()
            + probes.len()
            + discards.len()
            + idle.len()
            + databases.len()
            + layer_errors.len()) as u64;
        let result = store
            .record_fs(fs.samples())
            .and_then(|_| store.record_fs_layers(fs.stacks()))
            .and_then(|_| store.record_drives(&drives))
            .and_then(|_| store.record_probes(&probes))
            .and_then(|_| store.record_discards(&discards))
            .and_then(|_| store.record_idle(&idle))
            .and_then(|_| store.record_databases(&databases).map(drop))
            .and_then(|_| store.record_layer_errors(&layer_errors).map(drop));
        let older = store.take_refused_older();
        match result {
            Ok(()) => {
                self.written += n - older.min(n);
                self.last_write_unix = Some(unix_now());
                self.last_ok = Some(true);
                if older > 0 {
                    self.dropped.fetch_add(older, Ordering::Relaxed);
                    self.error(format!(
                        "{older} sample(s) older than their series' newest stored one (the clock was set back?) were not stored; counted as dropped"
                    ));
                }
            }
            Err(e) => {
                self.dropped.fetch_add(n, Ordering::Relaxed);
                let corrupt = e.is_corrupt();
                self.error(e);
                if corrupt {
                    // Reopen: open_or_recover moves the damaged file aside.
                    self.store = None;
                    self.next_open = Instant::now();
                }
            }
        }
    }

    fn maintain(&mut self) {
        if self.store.is_none() || !self.clock_trusted("no rows are rolled up or deleted by age") {
            return;
        }
        let Some(store) = self.store.as_mut() else {
            return;
        };
        if let Err(e) = store.downsample(unix_now() as i64) {
            self.error(e);
        }
        // A clock set back while the daemon ran, and believed since: what the clock ahead
        // wrote goes, as it does at a start.
        self.drop_future_rows();
    }

    fn forecast(&mut self) {
        if self.store.is_none() || !self.clock_trusted("forecasts are not recomputed") {
            return;
        }
        let Some(store) = self.store.as_ref() else {
            return;
        };
        let now = unix_now() as i64;
        let mut m = MetricSet::new();
        let result = (|| -> Result<(), super::StoreError> {
            let mut by_mount = std::collections::BTreeMap::new();
            let fss = store.filesystems()?;
            let ids: Vec<_> = fss.iter().map(|f| f.id).collect();
            let recent = current::recent_use(store, &ids, now)?;
            for f in fss {
                let r = recent.get(&f.id).map_or(&[][..], Vec::as_slice);
                let Some(fc) = current::stored_filesystem(store, f.id, r, now)? else {
                    continue;
                };
                by_mount.insert(f.key.mountpoint.clone(), fc.clone());
                let dev = f.device.clone().unwrap_or_default();
                let l = [
                    ("mountpoint", f.key.mountpoint.as_str()),
                    ("device", dev.as_str()),
                ];
                for (window, v) in [
                    ("7d", fc.growth_7d_bytes_per_day),
                    ("30d", fc.growth_30d_bytes_per_day),
                ] {
                    m.family(&catalogue::FILESYSTEM_GROWTH_BYTES_PER_DAY)
                        .push_opt(&[l[0], l[1], ("window", window)], v);
                }
                m.family(&catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS)
                    .push_opt(&l, fc.predicted_full_unix.map(|t| t as f64));
                for (bound, v) in [
                    ("earliest", fc.full_earliest_unix),
                    ("latest", fc.full_latest_unix),
                ] {
                    m.family(&catalogue::FILESYSTEM_PREDICTED_FULL_BOUND_TIMESTAMP_SECONDS)
                        .push_opt(&[l[0], l[1], ("bound", bound)], v.map(|t| t as f64));
                }
            }
            for d in store.drives()? {
                let pts = store.drive_days(d.id, 0, now)?;
                let endurance = self.rating(d.key.model.as_deref(), d.capacity_bytes);
                let Some(fc) = current::drive(&pts, now, endurance) else {
                    continue;
                };
                let dev = d.kernel_name.clone().unwrap_or_default();
                let serial = d.key.serial.clone().unwrap_or_default();
                let wwn = d.key.wwn.clone().unwrap_or_default();
                let l = [
                    ("device", dev.as_str()),
                    ("serial", serial.as_str()),
                    ("wwn", wwn.as_str()),
                ];
                m.family(&catalogue::DEVICE_WEAR_RATE_RATIO_PER_DAY)
                    .push_opt(&l, fc.wear_rate_per_day);
                m.family(&catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS)
                    .push_opt(&l, fc.predicted_wear_out_unix.map(|t| t as f64));
                for (bound, v) in [
                    ("earliest", fc.wear_out_earliest_unix),
                    ("latest", fc.wear_out_latest_unix),
                ] {
                    m.family(&catalogue::DEVICE_PREDICTED_WEAROUT_BOUND_TIMESTAMP_SECONDS)
                        .push_opt(&[l[0], l[1], l[2], ("bound", bound)], v.map(|t| t as f64));
                }
                for (window, v) in [
                    ("1d", fc.host_bytes_per_day_1d),
                    ("30d", fc.host_bytes_per_day_30d),
                ] {
                    m.family(&catalogue::DEVICE_HOST_WRITTEN_BYTES_PER_DAY)
                        .push_opt(&[l[0], l[1], l[2], ("window", window)], v);
                }
                for (window, v) in [
                    ("1d", fc.write_amplification_1d),
                    ("30d", fc.write_amplification_30d),
                ] {
                    m.family(&catalogue::DEVICE_RECENT_WRITE_AMPLIFICATION_RATIO)
                        .push_opt(&[l[0], l[1], l[2], ("window", window)], v);
                }
                m.family(&catalogue::DEVICE_ENDURANCE_USED_RATIO)
                    .push_opt(&l, fc.endurance_consumed_ratio);
                m.family(&catalogue::DEVICE_PREDICTED_ENDURANCE_TIMESTAMP_SECONDS)
                    .push_opt(&l, fc.predicted_endurance_exhausted_unix.map(|t| t as f64));
            }
            let from = now.saturating_sub(self.cfg.retention_hourly.as_secs() as i64);
            let groups = super::degradation::analyse(store, from, now)?;
            super::degradation::push_metrics(&groups, &mut m);
            let assessed = super::slow::assess(&groups, &by_mount, &self.slow_levels, now);
            super::slow::push_metrics(&assessed, &mut m);
            Ok(())
        })();
        match result {
            Ok(()) => self.forecasts = m,
            Err(e) => self.error(e),
        }
    }

    fn rating(&self, model: Option<&str>, capacity: Option<u64>) -> Option<Endurance> {
        rated_endurance(&self.endurance, model, capacity)
    }

    fn publish(&mut self, faults: &mut crate::fault::Faults, took: Duration) {
        let errors = std::mem::take(&mut self.errors);
        let item = self.state_dir.join("history.db").display().to_string();
        let items: Vec<crate::fault::ItemError> = errors
            .iter()
            .map(|e| crate::fault::ItemError::new(item.clone(), e.clone()))
            .collect();
        // A store that could not be opened is retried once a minute: a pass in between (a
        // flush, the last one at shutdown) did not look at it, so its fault is not over.
        let unsampled = if self.store.is_none() && items.is_empty() {
            vec![item]
        } else {
            Vec::new()
        };
        let failing = faults.items(NAME, &items, &unsampled);
        let mut m = self.forecasts.clone();
        let size = self.store.as_ref().and_then(|s| s.size_bytes().ok());
        m.family(&catalogue::HISTORY_STORE_BYTES)
            .push_opt(&[], size.map(|b| b as f64));
        m.family(&catalogue::HISTORY_LAST_WRITE_TIMESTAMP_SECONDS)
            .push_opt(&[], self.last_write_unix);
        // The counters stay while the store fails: the dropped records are what counts then.
        let mut kept = MetricSet::new();
        kept.family(&catalogue::HISTORY_RECORDS_WRITTEN_TOTAL)
            .push(&[], self.written as f64);
        kept.family(&catalogue::HISTORY_RECORDS_DROPPED_TOTAL)
            .push(&[], self.dropped.load(Ordering::Relaxed) as f64);
        let ok = self.last_ok != Some(false) && self.store.is_some();
        self.snapshot.publish(
            NAME,
            Published {
                metrics: ok.then_some(m),
                kept,
                duration: took,
                errors: errors.len() as u64,
                failing_items: failing,
            },
        );
        if ok {
            self.last_ok = Some(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn sample(mp: &str, device: &str, t: i64, avail: u64) -> FsSample {
        FsSample {
            key: FsKey {
                mountpoint: mp.into(),
                uuid: Some(format!("uuid-of-{mp}")),
            },
            device: device.into(),
            t,
            size_bytes: 1 << 40,
            avail_bytes: avail,
            free_bytes: avail + 1,
            files_free: Some(7),
        }
    }

    /// The history thread at its defaults, storing under `dir`.
    fn started(dir: &std::path::Path) -> (Sink, Service) {
        start(
            HistoryConfig::default(),
            dir.to_path_buf(),
            Vec::new(),
            Vec::new(),
            Arc::new(Snapshot::new()),
        )
        .unwrap()
    }

    /// /report's ask: a sample handed over a moment ago is in the store once `flush`
    /// returns, long before the 15-minute `flush_interval`.
    #[test]
    fn a_flush_asked_for_commits_what_the_thread_holds() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, service) = started(dir.path());
        let now = unix_now() as i64;
        sink.send(Record::Fs(sample("/srv/pg", "loop0", now, 1 << 30)));
        assert!(sink.flusher().flush(Duration::from_secs(60)), "answered");
        let store =
            Store::open_read_only(&dir.path().join(super::super::store::FILE_NAME)).unwrap();
        let fss = store.filesystems().unwrap();
        assert_eq!(fss.len(), 1, "{fss:?}");
        assert_eq!(fss[0].device.as_deref(), Some("loop0"));
        // Nothing held: answered all the same.
        assert!(sink.flusher().flush(Duration::from_secs(60)));
        service.stop(Duration::from_secs(10));
    }

    #[test]
    fn when_every_sender_is_gone_the_thread_commits_and_ends_instead_of_spinning() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, mut service) = started(dir.path());
        let now = unix_now() as i64;
        sink.send(Record::Fs(sample("/srv/pg", "loop0", now, 1 << 30)));
        drop(sink);
        // Without a stop: the channel's end alone ends the thread (it used to return from every
        // wait at once and loop forever, a core of CPU per forgotten service).
        assert!(
            service.join_within(Duration::from_secs(60)),
            "the history thread still runs"
        );
        let store =
            Store::open_read_only(&dir.path().join(super::super::store::FILE_NAME)).unwrap();
        assert_eq!(
            store.filesystems().unwrap().len(),
            1,
            "the pending sample was committed"
        );
    }

    #[test]
    fn pending_samples_keep_each_key_once_and_come_back_in_order() {
        let mut p = PendingFs::default();
        p.push(sample("/srv/pg", "dm-0", 100, 10));
        p.push(sample("/var/log", "sda2", 100, 20));
        p.push(sample("/srv/pg", "dm-3", 400, 30));
        assert_eq!((p.keys.len(), p.len()), (2, 3));
        let got: Vec<(String, String, i64, u64)> = p
            .samples()
            .map(|s| {
                (
                    s.key.mountpoint.clone(),
                    s.device.to_string(),
                    s.t,
                    s.avail_bytes,
                )
            })
            .collect();
        // The device a filesystem is mounted from now is the one the store is given.
        assert_eq!(
            got,
            [
                ("/srv/pg".into(), "dm-3".into(), 100, 10),
                ("/var/log".into(), "sda2".into(), 100, 20),
                ("/srv/pg".into(), "dm-3".into(), 400, 30),
            ]
        );
        let first = p.samples().next().unwrap();
        assert_eq!(
            (first.size_bytes, first.free_bytes, first.files_free),
            (1 << 40, 11, Some(7))
        );
    }
}

#[cfg(test)]
mod worker_tests {
    /// A filesystem sample of `mp` at `t`, half full.
    fn sample_at(mp: &str, t: i64) -> FsSample {
        sample(mp, "sda1", t, 1 << 39)
    }

    use super::tests::sample;
    use super::*;

    fn worker(state_dir: &std::path::Path) -> Worker {
        Worker {
            cfg: HistoryConfig {
                raw_interval: Duration::from_secs(1),
                ..HistoryConfig::default()
            },
            state_dir: state_dir.to_path_buf(),
            endurance: Vec::new(),
            slow_levels: Vec::new(),
            snapshot: Arc::new(Snapshot::new()),
            dropped: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            flusher: Flusher::default(),
            reforecast: Arc::new(AtomicBool::new(false)),
            store: None,
            next_open: Instant::now(),
            written: 0,
            errors: Vec::new(),
            forecasts: MetricSet::new(),
            last_write_unix: None,
            last_ok: None,
            clock: ClockGuard::default(),
        }
    }

    fn write_one(w: &mut Worker, mp: &str, t: i64) {
        let mut fs = PendingFs::default();
        fs.push(sample_at(mp, t));
        w.write(&mut Vec::new(), fs);
    }

    fn mounts_in(path: &std::path::Path) -> Vec<String> {
        let s = Store::open_read_only(path).unwrap();
        let mut v: Vec<String> = s
            .filesystems()
            .unwrap()
            .into_iter()
            .map(|f| f.key.mountpoint)
            .collect();
        v.sort();
        v
    }

    /// A history.db replaced (or deleted) under the running daemon is noticed at the next
    /// commit: an error is reported and the records go to the file now at the path, not into
    /// the old inode where nobody would ever read them.
    #[test]
    fn a_store_file_replaced_under_the_daemon_is_reopened_not_written_blindly() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = worker(dir.path());
        w.ensure_open();
        write_one(&mut w, "/a", 1_767_225_600);
        assert!(w.errors.is_empty(), "{:?}", w.errors);
        let path = dir.path().join(crate::history::store::FILE_NAME);
        // Another store made elsewhere and moved over the daemon's file.
        let other = tempfile::tempdir().unwrap();
        let mut w2 = worker(other.path());
        w2.ensure_open();
        write_one(&mut w2, "/other", 1_767_225_600);
        drop(w2);
        std::fs::rename(other.path().join(crate::history::store::FILE_NAME), &path).unwrap();
        write_one(&mut w, "/b", 1_767_225_700);
        assert!(
            w.errors
                .iter()
                .any(|e| e.contains("replaced by another file")),
            "{:?}",
            w.errors
        );
        assert_eq!(mounts_in(&path), vec!["/b", "/other"]);
        // Deleted outright: a new store is created at the path.
        w.errors.clear();
        for f in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{f}", path.display()));
        }
        write_one(&mut w, "/c", 1_767_225_800);
        assert!(
            w.errors.iter().any(|e| e.contains("removed")),
            "{:?}",
            w.errors
        );
        assert_eq!(mounts_in(&path), vec!["/c"]);
    }

    fn rows(path: &std::path::Path, mp: &str) -> usize {
        let s = Store::open_read_only(path).unwrap();
        let f = s
            .filesystems()
            .unwrap()
            .into_iter()
            .find(|f| f.key.mountpoint == mp)
            .unwrap();
        s.fs_series(f.id, 0, i64::MAX / 4).unwrap().len()
    }

    /// The clock jumps ten years forward and back, then a day back: nothing stored is deleted,
    /// every sample is stored or counted as dropped with an error (the collector's success 0),
    /// and no forecast is computed by the wrong clock.
    #[test]
    fn a_clock_jump_neither_deletes_history_nor_stores_samples_silently() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::history::store::FILE_NAME);
        let mut w = worker(dir.path());
        w.ensure_open();
        let now = unix_now() as i64;
        for i in 0..5 {
            write_one(&mut w, "/db", now - 3 * 86_400 + i * 3600);
        }
        write_one(&mut w, "/db", now);
        assert!(w.errors.is_empty(), "{:?}", w.errors);
        let stored = rows(&path, "/db");
        assert_eq!(stored, 6);
        let ten_years = 3_650 * 86_400;
        // The wall clock now reads ten years ahead of where the monotonic clock puts it.
        w.clock = ClockGuard::anchored(now - ten_years, Instant::now());
        let dropped = w.dropped.load(Ordering::Relaxed);
        write_one(&mut w, "/db", now + ten_years);
        w.maintain();
        w.forecast();
        assert_eq!(w.dropped.load(Ordering::Relaxed), dropped + 1);
        assert_eq!(w.last_ok, Some(false));
        assert!(
            w.errors.iter().any(|e| e.contains("jumped forward")),
            "{:?}",
            w.errors
        );
        assert_eq!(
            rows(&path, "/db"),
            stored,
            "nothing deleted, nothing stored"
        );
        // Back: a sample still stamped ten years ahead is dropped, a right one stored.
        w.errors.clear();
        w.clock = ClockGuard::anchored(unix_now() as i64, Instant::now());
        let mut fs = PendingFs::default();
        fs.push(sample_at("/db", now + ten_years));
        fs.push(sample_at("/other", now + 60));
        w.write(&mut Vec::new(), fs);
        assert!(
            w.errors.iter().any(|e| e.contains("in the future")),
            "{:?}",
            w.errors
        );
        assert_eq!(w.dropped.load(Ordering::Relaxed), dropped + 2);
        assert_eq!(rows(&path, "/db"), stored);
        assert_eq!(rows(&path, "/other"), 1);
        // A day back, believed (it held): a sample older than the newest stored is counted.
        w.errors.clear();
        write_one(&mut w, "/db", now - 86_400);
        assert!(
            w.errors.iter().any(|e| e.contains("older than")),
            "{:?}",
            w.errors
        );
        assert_eq!(w.dropped.load(Ordering::Relaxed), dropped + 3);
        w.maintain();
        assert_eq!(rows(&path, "/db"), stored, "retention deleted nothing");
    }

    /// The daemon's start after a run under a clock ten years ahead: the rows that run stamped
    /// in 2036 are removed when the store is opened, with a warning, and this clock's samples
    /// are stored again; the rows from before are all there.
    #[test]
    fn a_start_under_the_right_clock_removes_what_a_clock_ahead_stored_and_records_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::history::store::FILE_NAME);
        let now = unix_now() as i64;
        let ten_years = 3_650 * 86_400;
        {
            let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
            let at = |t| sample_at("/db", t);
            s.record_fs(&[at(now - 7200), at(now - 3600)]).unwrap();
            s.record_fs(&[at(now + ten_years)]).unwrap();
        }
        let mut w = worker(dir.path());
        w.ensure_open();
        assert_eq!(rows(&path, "/db"), 2, "the clock ahead's row is gone");
        write_one(&mut w, "/db", now);
        assert!(w.errors.is_empty(), "{:?}", w.errors);
        assert_eq!(rows(&path, "/db"), 3, "this clock's sample is stored");
    }
}
