//! The latest immutable sample of each collector, and what a scrape renders from it.
//! Collectors publish here from their own tasks; each publish renders the collector's text and
//! compresses it once, and rebuilds the exposition a scrape sends (those texts plus the
//! collectors' health). A scrape only takes that exposition (a reference count, no copy) and
//! reads the process's own figures (`/proc/self/statm`, `/proc/self/fd`) unlocked.

use crate::catalogue;
use crate::gzip;
use crate::metrics::MetricSet;
use crate::render;
use crate::space::{SpaceInput, SpaceInputs};
use crate::time::unix_now;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A piece of the exposition, kept only as gzip segments (see src/gzip.rs): segments of whole
/// families, each compressed on its own, and compressed again only when its text changed
/// since the piece it replaces. Most families of a sample (sizes, thresholds, info series)
/// come out as they were, so a publish pays the compressor for the few that moved. The text
/// itself is not kept: a plain scrape inflates it (about half a millisecond for 1.26 MB), so
/// only the compressed exposition stays resident, about a nineteenth of it.
#[derive(Debug, Default)]
pub struct Part {
    /// The families' segments, one after the other.
    deflate: Vec<u8>,
    /// The CRC-32 and length of the whole text.
    crc: gzip::Crc,
    /// Its segments, for the next piece to reuse.
    segments: Vec<FamilySegment>,
    /// How many of them were compressed for this piece (the others were reused).
    compressed: usize,
}

/// Text a segment of a [`Part`] holds at least (whole families; the last may hold less). Small
/// families (a value for each of 64 drives: 3-4 KB) compress better together, where their
/// labels repeat; larger ones compress as well alone. 16 KB made the large host's exposition
/// 1.8 % smaller than a segment for every family.
const SEGMENT_TEXT: usize = 16 * 1024;

/// One segment of whole families within a [`Part`].
#[derive(Debug)]
struct FamilySegment {
    /// A keyed hash of its text: the same text, the same segment.
    key: u64,
    range: std::ops::Range<usize>,
    crc: gzip::Crc,
}

impl Part {
    /// A piece of one text, compressed whole.
    fn of_text(text: &str) -> Part {
        let seg = gzip::Segment::compress(text.as_bytes());
        Part {
            deflate: seg.deflate().to_vec(),
            crc: seg.crc().clone(),
            segments: Vec::new(),
            compressed: 1,
        }
    }

    /// The families of `sets` (each set's sorted by name, as [`render::render_families`]) in
    /// segments of whole families, at least [`SEGMENT_TEXT`] bytes of text each but the last,
    /// each segment taken from `previous` when its text is the same there.
    fn of_families(sets: &[&MetricSet], previous: &Part, keys: &RandomState) -> Part {
        let reusable: HashMap<u64, &FamilySegment> =
            previous.segments.iter().map(|f| (f.key, f)).collect();
        let mut part = Part {
            deflate: Vec::with_capacity(previous.deflate.len() + previous.deflate.len() / 8),
            ..Part::default()
        };
        let mut text = String::new();
        let mut compressor = gzip::Compressor::default();
        let mut families = sets
            .iter()
            .flat_map(|m| render::sorted(m.families()))
            .peekable();
        while let Some(fam) = families.next() {
            render::render_family(&mut text, fam);
            if (text.len() < SEGMENT_TEXT && families.peek().is_some()) || text.is_empty() {
                continue;
            }
            let key = keys.hash_one(text.as_bytes());
            let start = part.deflate.len();
            let crc = match reusable.get(&key) {
                Some(f) if f.crc.len() == text.len() as u64 => {
                    part.deflate
                        .extend_from_slice(&previous.deflate[f.range.clone()]);
                    f.crc.clone()
                }
                _ => {
                    let seg = compressor.segment(text.as_bytes());
                    part.compressed += 1;
                    part.deflate.extend_from_slice(seg.deflate());
                    seg.crc().clone()
                }
            };
            part.crc.combine(&crc);
            part.segments.push(FamilySegment {
                key,
                range: start..part.deflate.len(),
                crc,
            });
            text.clear();
        }
        part.deflate.shrink_to_fit();
        part
    }

    /// The raw deflate blocks of its text (a piece of a gzip body, see src/gzip.rs).
    pub fn deflate(&self) -> &[u8] {
        &self.deflate
    }

    /// Bytes of its text.
    pub fn text_len(&self) -> usize {
        self.crc.len() as usize
    }

    /// Its text, inflated.
    pub(crate) fn text(&self) -> Result<String, PartError> {
        let bytes = gzip::inflate(&self.deflate, self.text_len())?;
        Ok(String::from_utf8(bytes)?)
    }
}

/// Why a published part gave no text (never so for a part the daemon made itself).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PartError {
    #[error(transparent)]
    Inflate(#[from] gzip::InflateError),
    #[error("inflated text: {0}")]
    NotUtf8(#[from] std::string::FromUtf8Error),
}

#[cfg(test)]
impl Part {
    /// A piece of the blocks `deflate` as given, said to hold `text_len` bytes of text: how a
    /// test makes a broken one.
    pub(crate) fn raw(deflate: Vec<u8>, text_len: usize) -> Part {
        let mut crc = gzip::Crc::new();
        crc.update(&vec![b' '; text_len]);
        Part {
            deflate,
            crc,
            ..Part::default()
        }
    }
}

/// What one collector last published, plus its own health.
#[derive(Debug, Default, Clone)]
pub struct CollectorState {
    /// The collector's families, rendered and compressed once at publish time.
    pub rendered: Arc<Part>,
    /// Whether the last sample succeeded; `None` before the first sample finished.
    pub success: Option<bool>,
    pub duration: Option<Duration>,
    pub last_success_unix: Option<f64>,
    pub errors_total: u64,
    /// Items (mounts, devices) that failed in the last sample.
    pub failing_items: u64,
    /// Samples finished, failed ones included: what the watchdog counts as progress.
    pub cycles: u64,
    /// When it registered, and when it last published.
    pub registered: Option<Instant>,
    pub last_publish: Option<Instant>,
    /// The wait before its next sample, as it said after its last one.
    pub next_delay: Option<Duration>,
}

/// How long a collector may go without publishing before its sample counts as overdue
/// (success 0): twice the wait it announced and 30 s after its last publish (one that announced
/// none is not judged: nothing says when it is due); before its first, 5 minutes after it
/// registered.
pub(crate) fn overdue(st: &CollectorState, now: Instant) -> bool {
    match (st.last_publish, st.registered) {
        (Some(last), _) => st
            .next_delay
            .is_some_and(|d| now.saturating_duration_since(last) > d * 2 + Duration::from_secs(30)),
        (None, Some(reg)) => now.saturating_duration_since(reg) > Duration::from_secs(300),
        (None, None) => false,
    }
}

/// The exposition as of the last publish, what every scrape until the next one sends: each
/// collector's part, then the collectors' health and the build info (rendered at publish too),
/// followed at each scrape by the live series ([`Snapshots::live_text`]).
#[derive(Debug, Default)]
pub struct Exposition {
    pub parts: Vec<Arc<Part>>,
    /// The CRC-32 and length of all the parts' text, for a gzip body's trailer.
    pub(crate) crc: gzip::Crc,
}

impl Exposition {
    fn new(parts: Vec<Arc<Part>>) -> Exposition {
        let mut crc = gzip::Crc::new();
        for p in &parts {
            crc.combine(&p.crc);
        }
        Exposition { parts, crc }
    }

    /// Bytes of text of the parts.
    pub fn text_len(&self) -> usize {
        self.parts.iter().map(|p| p.text_len()).sum()
    }
}

/// The snapshot store: one entry per enabled collector.
#[derive(Debug, Default)]
pub struct Snapshots {
    states: RwLock<BTreeMap<&'static str, CollectorState>>,
    /// Rebuilt under the `states` write lock at each publish and register, so the newest
    /// state always wins; a scrape only reads it.
    exposition: RwLock<Arc<Exposition>>,
    /// How the config files' last loads went, rendered with the live series at each scrape.
    reloads: Arc<ConfigReloads>,
    /// The key of the hash that tells a family's text unchanged (random per process, so no
    /// text can be made to match another's on purpose).
    family_keys: RandomState,
    /// The door for calls that may hang: its series go with the collectors' health, made
    /// again at each publish of any collector.
    door: std::sync::OnceLock<crate::door::Door>,
    /// Each mount's effective free space: made from the filesystem's and the layers' latest
    /// samples at each publish of either, under the `states` write lock, so it lands in the
    /// same exposition as the sample it comes from (see `space`).
    space: Mutex<(SpaceInputs, Arc<Part>)>,
}

/// The config file (`--config.file`).
pub const CONFIG_FILE: &str = "config";
/// The web config file (`--web.config.file`).
pub const WEB_CONFIG_FILE: &str = "web_config";

/// Prometheus' own pattern for a reload that may fail: per config file, whether its last load
/// succeeded and when it last did. Shared by the SIGHUP reloader, the web config watcher and
/// the scrape.
#[derive(Debug, Default)]
pub struct ConfigReloads {
    files: Mutex<BTreeMap<&'static str, (bool, Option<f64>)>>,
}

impl ConfigReloads {
    /// Both files loaded now (the daemon starts only with good ones).
    pub fn loaded_at_start() -> Arc<ConfigReloads> {
        let r = ConfigReloads::default();
        r.record(CONFIG_FILE, true);
        r.record(WEB_CONFIG_FILE, true);
        Arc::new(r)
    }

    /// Records a load of `file` (`CONFIG_FILE`, `WEB_CONFIG_FILE`).
    pub fn record(&self, file: &'static str, ok: bool) {
        let mut g = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let e = g.entry(file).or_insert((ok, None));
        e.0 = ok;
        if ok {
            e.1 = Some(unix_now());
        }
    }

    fn push(&self, m: &mut MetricSet) {
        let g = self.files.lock().unwrap_or_else(|e| e.into_inner());
        for (file, (ok, at)) in g.iter() {
            let l = [("file", *file)];
            m.family(&catalogue::CONFIG_LAST_RELOAD_SUCCESSFUL)
                .push(&l, if *ok { 1.0 } else { 0.0 });
            m.family(&catalogue::CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS)
                .push_opt(&l, *at);
        }
    }
}

/// Outcome of one sample, as the scheduler reports it.
pub struct Published {
    pub metrics: Option<MetricSet>,
    /// Series shown whatever the outcome, after `metrics`: counters of what the collector lost
    /// (the history's dropped records), which matter most exactly while its samples fail.
    pub kept: MetricSet,
    pub duration: Duration,
    /// Errors in this sample: a failed sample (metrics = None) or per-item errors in a good one.
    pub errors: u64,
    /// Distinct items that failed in this sample.
    pub failing_items: u64,
}

impl Snapshots {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that renders `reloads` with the daemon's live series.
    pub fn with_reloads(reloads: Arc<ConfigReloads>) -> Self {
        Snapshots {
            reloads,
            ..Self::default()
        }
    }

    /// The series read at each scrape: the daemon's own `process_*` figures (cheap procfs
    /// reads, no device), the config files' reload state, and what `add` puts in (the web
    /// layer's own counters).
    pub fn live_text(&self, add: impl FnOnce(&mut MetricSet)) -> String {
        let mut live = MetricSet::new();
        self.collectors_live(&mut live);
        crate::process::families(&mut live);
        self.reloads.push(&mut live);
        add(&mut live);
        let mut out = String::with_capacity(1024);
        render::render_families(&mut out, live.families());
        out
    }

    /// Each collector's success and sample age at this scrape: a sample overdue reads as a
    /// failure, never as the last success it had.
    fn collectors_live(&self, set: &mut MetricSet) {
        let g = self.states.read().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        for (name, st) in g.iter() {
            let l = [("collector", *name)];
            let late = overdue(st, now);
            let ok = match st.success {
                Some(b) => Some(b && !late),
                None => late.then_some(false),
            };
            set.family(&catalogue::COLLECTOR_SUCCESS)
                .push_opt(&l, ok.map(|b| if b { 1.0 } else { 0.0 }));
            set.family(&catalogue::COLLECTOR_SAMPLE_AGE_SECONDS)
                .push_opt(
                    &l,
                    st.last_publish
                        .map(|t| now.saturating_duration_since(t).as_secs_f64()),
                );
        }
    }

    /// Shows the door's series with the collectors' health.
    pub fn attach_door(&self, door: crate::door::Door) {
        let _ = self.door.set(door);
    }

    /// Registers a collector so it shows up (success absent) before its first sample.
    pub fn register(&self, name: &'static str) {
        let mut g = self.states.write().unwrap_or_else(|e| e.into_inner());
        g.entry(name)
            .or_default()
            .registered
            .get_or_insert_with(Instant::now);
        self.rebuild(&g);
    }

    /// Records the wait a collector announced before its next sample (what "overdue" is
    /// measured against).
    pub fn expect_next(&self, name: &'static str, delay: Duration) {
        let mut g = self.states.write().unwrap_or_else(|e| e.into_inner());
        g.entry(name).or_default().next_delay = Some(delay);
    }

    /// Publishes a sample. A failed sample drops the collector's series (as node_exporter does)
    /// rather than serving stale values as if they were fresh; only its `kept` series stay.
    /// The text is rendered and compressed here, in the collector's task, never by a scrape.
    pub fn publish(&self, name: &'static str, p: Published) {
        self.publish_with_space(name, p, None);
    }

    /// Publishes a sample and what it gives towards the mounts' effective free space; their
    /// series are made again from it and the other collector's latest, and land in the same
    /// exposition as the sample. A failed sample's earlier input is forgotten.
    pub fn publish_with_space(&self, name: &'static str, p: Published, space: Option<SpaceInput>) {
        let previous = {
            let g = self.states.read().unwrap_or_else(|e| e.into_inner());
            g.get(name)
                .map(|st| st.rendered.clone())
                .unwrap_or_default()
        };
        let success = p.metrics.is_some();
        let sets: Vec<&MetricSet> = p.metrics.iter().chain([&p.kept]).collect();
        let rendered = Arc::new(Part::of_families(&sets, &previous, &self.family_keys));
        drop(previous);
        let mut g = self.states.write().unwrap_or_else(|e| e.into_inner());
        let st = g.entry(name).or_default();
        st.duration = Some(p.duration);
        st.cycles += 1;
        st.errors_total += p.errors;
        st.failing_items = p.failing_items;
        st.rendered = rendered;
        st.success = Some(success);
        st.last_publish = Some(Instant::now());
        if success {
            st.last_success_unix = Some(unix_now());
        }
        {
            let mut sp = self.space.lock().unwrap_or_else(|e| e.into_inner());
            let (inputs, part) = &mut *sp;
            let changed = match space {
                Some(input) => {
                    inputs.update(name, input);
                    true
                }
                None if !success => inputs.forget(name),
                None => false,
            };
            if changed {
                let set = inputs.metrics(Instant::now());
                *part = Arc::new(Part::of_families(&[&set], part, &self.family_keys));
            }
        }
        self.rebuild(&g);
    }

    /// Makes the exposition of `states`: their parts and a new health part (a few KB,
    /// compressed here, under the caller's write lock so publishes land in order).
    fn rebuild(&self, states: &BTreeMap<&'static str, CollectorState>) {
        let mut parts: Vec<Arc<Part>> = (states.values())
            .filter(|st| st.rendered.text_len() > 0)
            .map(|st| st.rendered.clone())
            .collect();
        let space = self
            .space
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone();
        if space.text_len() > 0 {
            parts.push(space);
        }
        // The health part (a few KB, some of it new at every publish) is compressed whole:
        // its families are too small to gain from segments of their own.
        parts.push(Arc::new(Part::of_text(&health_text(
            states,
            self.door.get(),
        ))));
        let e = Arc::new(Exposition::new(parts));
        *self.exposition.write().unwrap_or_else(|e| e.into_inner()) = e;
    }

    /// The exposition as of the last publish (shared, not copied).
    pub fn exposition(&self) -> Arc<Exposition> {
        self.exposition
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// True once every registered collector has finished at least one sample.
    pub fn ready(&self) -> bool {
        let g = self.states.read().unwrap_or_else(|e| e.into_inner());
        g.values().all(|s| s.success.is_some())
    }

    /// Each collector's finished samples so far and whether its last one succeeded (`None`
    /// before the first): what the systemd watchdog and status line are made of.
    pub fn progress(&self) -> Vec<(&'static str, u64, Option<bool>)> {
        let g = self.states.read().unwrap_or_else(|e| e.into_inner());
        g.iter().map(|(n, s)| (*n, s.cycles, s.success)).collect()
    }

    /// True when every collector's last sample succeeded.
    pub fn all_succeeded(&self) -> bool {
        let g = self.states.read().unwrap_or_else(|e| e.into_inner());
        g.values().all(|s| s.success == Some(true))
    }

    /// Renders the whole exposition as one text: each collector's families, the collectors'
    /// own health, then the live series.
    pub fn render(&self) -> String {
        let e = self.exposition();
        let live = self.live_text(|_| {});
        let mut out = String::with_capacity(e.text_len() + live.len());
        for p in &e.parts {
            match p.text() {
                Ok(t) => out.push_str(&t),
                Err(err) => tracing::error!("a published part of {} bytes: {err}", p.text_len()),
            }
        }
        out.push_str(&live);
        out
    }
}

/// The collectors' health series and the build info: they change only when a collector
/// publishes.
fn health_text(
    states: &BTreeMap<&'static str, CollectorState>,
    door: Option<&crate::door::Door>,
) -> String {
    let mut out = String::with_capacity(256 * states.len() + 512);
    let mut meta = MetricSet::new();
    for (name, st) in states.iter() {
        let l = [("collector", *name)];
        meta.family(&catalogue::COLLECTOR_DURATION_SECONDS)
            .push_opt(&l, st.duration.map(|d| d.as_secs_f64()));
        meta.family(&catalogue::COLLECTOR_LAST_SUCCESS_TIMESTAMP_SECONDS)
            .push_opt(&l, st.last_success_unix);
        meta.family(&catalogue::COLLECTOR_ERRORS_TOTAL)
            .push(&l, st.errors_total as f64);
        meta.family(&catalogue::COLLECTOR_FAILING_ITEMS)
            .push_opt(&l, st.success.map(|_| st.failing_items as f64));
    }
    if let Some(d) = door {
        d.families(&mut meta);
    }
    meta.family(&catalogue::BUILD_INFO)
        .push(&[("version", env!("CARGO_PKG_VERSION"))], 1.0);
    render::render_families(&mut out, meta.families());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static SIZE: crate::catalogue::Family = crate::catalogue::Family {
        name: "ssdwatch_filesystem_size_bytes",
        kind: crate::metrics::MetricKind::Gauge,
        unit: "bytes",
        help: "Size.",
        labels: &["mountpoint"],
    };
    static AVAIL: crate::catalogue::Family = crate::catalogue::Family {
        name: "ssdwatch_filesystem_avail_bytes",
        kind: crate::metrics::MetricKind::Gauge,
        unit: "bytes",
        help: "Available.",
        labels: &["mountpoint"],
    };

    fn sample(avail: f64) -> Published {
        let mut m = MetricSet::new();
        for i in 0..2_000 {
            let mp = format!("/srv/db{i}");
            m.family(&SIZE).push(&[("mountpoint", &mp)], 1e12);
            m.family(&AVAIL)
                .push(&[("mountpoint", &mp)], avail + i as f64);
        }
        let mut kept = MetricSet::new();
        kept.family(&crate::catalogue::HISTORY_RECORDS_DROPPED_TOTAL)
            .push(&[], 0.0);
        Published {
            metrics: Some(m),
            kept,
            duration: Duration::from_millis(2),
            errors: 0,
            failing_items: 0,
        }
    }

    /// The gzip body a scrape sends (header, the parts, trailer), without the live series.
    fn gzip_body(e: &Exposition) -> Vec<u8> {
        let mut b = gzip::HEADER.to_vec();
        for p in &e.parts {
            b.extend_from_slice(p.deflate());
        }
        b.extend_from_slice(&gzip::trailer(&e.crc));
        b
    }

    fn gunzip(body: &[u8]) -> String {
        use std::io::Read;
        let mut out = String::new();
        flate2::read::GzDecoder::new(body)
            .read_to_string(&mut out)
            .expect("a valid gzip body");
        out
    }

    /// A publish compresses only the families whose text changed; the others' segments come
    /// from the previous one as they were. The gzip body and the inflated text are the new
    /// sample's text all the same, byte for byte.
    #[test]
    fn a_publish_compresses_only_the_families_that_changed() {
        let store = Snapshots::new();
        store.publish("filesystem", sample(5e9));
        let first = store.states.read().unwrap()["filesystem"].rendered.clone();
        assert_eq!(first.compressed, 3);
        assert_eq!(first.segments.len(), 3);
        store.publish("filesystem", sample(4e9));
        let second = store.states.read().unwrap()["filesystem"].rendered.clone();
        // Only the available bytes moved.
        assert_eq!(second.compressed, 1);
        let text = second.text().unwrap();
        let mut want = String::new();
        let set = sample(4e9);
        render::render_families(&mut want, set.metrics.as_ref().unwrap().families());
        render::render_families(&mut want, set.kept.families());
        assert_eq!(text, want);
        assert!(
            text.contains("ssdwatch_filesystem_avail_bytes{mountpoint=\"/srv/db7\"} 4000000007\n")
        );
        // The unchanged families' blocks are the first sample's, byte for byte.
        for (a, b) in first.segments.iter().zip(&second.segments) {
            if a.key == b.key {
                assert_eq!(
                    first.deflate[a.range.clone()],
                    second.deflate[b.range.clone()]
                );
            }
        }
        assert_eq!(
            first
                .segments
                .iter()
                .zip(&second.segments)
                .filter(|(a, b)| a.key == b.key)
                .count(),
            2
        );
        // The whole exposition, as a scrape sends it, is one gzip member of the rendered text.
        let e = store.exposition();
        let rendered = store.render();
        let unzipped = gunzip(&gzip_body(&e));
        assert_eq!(unzipped.len(), e.text_len());
        assert!(
            rendered.starts_with(&unzipped),
            "the live series follow the parts"
        );
        // Compressed at about 1:10 or better.
        assert!(e.parts.iter().map(|p| p.deflate().len()).sum::<usize>() * 10 < e.text_len());
    }

    #[test]
    fn failed_sample_drops_series_and_counts_error() {
        let store = Snapshots::new();
        store.register("filesystem");
        assert!(!store.ready());
        let mut m = MetricSet::new();
        m.family(&SIZE).push(&[("mountpoint", "/")], 10.0);
        store.publish(
            "filesystem",
            Published {
                metrics: Some(m),
                kept: MetricSet::new(),
                duration: Duration::from_millis(2),
                errors: 0,
                failing_items: 0,
            },
        );
        assert!(store.ready());
        let out = store.render();
        assert!(out.contains("ssdwatch_filesystem_size_bytes{mountpoint=\"/\"} 10\n"));
        assert!(out.contains("ssdwatch_collector_success{collector=\"filesystem\"} 1\n"));
        store.publish(
            "filesystem",
            Published {
                metrics: None,
                kept: MetricSet::new(),
                duration: Duration::from_millis(2),
                errors: 1,
                failing_items: 0,
            },
        );
        let out = store.render();
        assert!(!out.contains("ssdwatch_filesystem_size_bytes"));
        assert!(out.contains("ssdwatch_collector_success{collector=\"filesystem\"} 0\n"));
        assert!(out.contains("ssdwatch_collector_errors_total{collector=\"filesystem\"} 1\n"));
        // A failed sample's loss counters stay (the history's dropped records while its store
        // fails); its other series go.
        let mut kept = MetricSet::new();
        kept.family(&crate::catalogue::HISTORY_RECORDS_DROPPED_TOTAL)
            .push(&[], 7.0);
        store.publish(
            "filesystem",
            Published {
                metrics: None,
                kept,
                duration: Duration::from_millis(2),
                errors: 1,
                failing_items: 0,
            },
        );
        let out = store.render();
        assert!(
            out.contains("ssdwatch_history_records_dropped_total 7\n"),
            "{out}"
        );
        assert!(!out.contains("ssdwatch_filesystem_size_bytes"));
        assert!(out.contains("ssdwatch_collector_success{collector=\"filesystem\"} 0\n"));
        assert!(!store.all_succeeded());
        // A failed sample is a finished one all the same.
        assert_eq!(store.progress(), [("filesystem", 3, Some(false))]);
    }

    /// A collector is overdue only against the wait it announced: the history thread, which
    /// publishes at each flush (15 minutes by default), never reads as failed between flushes.
    #[test]
    fn a_sample_is_overdue_only_past_twice_its_announced_wait() {
        let t0 = Instant::now();
        let mut st = CollectorState {
            registered: Some(t0),
            last_publish: Some(t0),
            success: Some(true),
            ..CollectorState::default()
        };
        let later = |s: u64| t0 + Duration::from_secs(s);
        assert!(!overdue(&st, later(3600)), "no wait announced: not judged");
        st.next_delay = Some(Duration::from_secs(900));
        assert!(!overdue(&st, later(1830)));
        assert!(overdue(&st, later(1831)));
        // Never published: judged five minutes after it registered.
        st.last_publish = None;
        assert!(!overdue(&st, later(300)));
        assert!(overdue(&st, later(301)));
    }
}
