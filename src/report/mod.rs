//! `ssdwatch report`: one page per host built from the history store (filesystems with their
//! growth and predicted-full date, drives with wear and endurance, TRIM and idle recovery, the
//! latency-vs-fill curves). [`build`] makes the [`Report`] model by queries; `text`, `json`
//! and `html` render it. It never writes to the store.

pub mod filling;
pub mod html;
pub mod prometheus;
pub mod svg;
pub mod text;
pub mod view;

use crate::history::current;
use crate::history::degradation::{self, Group};
use crate::history::forecast::{DayUse, forecast_drive};
use crate::history::service::{EnduranceRule, rated_endurance};
use crate::history::slow::{self, Assessment, SlowFill, SlowLevel};
use crate::history::{DatabaseFacts, DriveId, FsId, Store, StoreError};
use crate::statfs::df_fill_ratio;
use crate::time::{DAY, HOUR};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The whole report of one host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub host: String,
    /// When it was made (Unix seconds).
    pub generated_unix: i64,
    /// Where the figures come from: a store file or a Prometheus URL.
    pub source: String,
    /// The oldest point the history holds (Unix seconds), when it holds any.
    pub history_since_unix: Option<i64>,
    pub filesystems: Vec<FsReport>,
    pub drives: Vec<DriveReport>,
    /// Latency by fill ratio and recoveries, per probe target and kind.
    pub degradation: Vec<Group>,
    /// Performance-full per commit-probe target: the fill at which commits got slow and when
    /// the fill forecast reaches it (docs/probes.md).
    pub performance_full: Vec<crate::history::slow::Assessment>,
    /// What the history can't tell yet, in plain words.
    pub unknown: Vec<String>,
}

/// One filesystem.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FsReport {
    pub mountpoint: String,
    pub device: Option<String>,
    pub first_seen_unix: i64,
    pub last_seen_unix: Option<i64>,
    pub size_bytes: Option<f64>,
    /// df's Used: size − free (root's reserve is not counted as used).
    pub used_bytes: Option<f64>,
    /// df's Use%: used / (used + avail) ([`crate::statfs::df_fill_ratio`]).
    pub fill_ratio: Option<f64>,
    /// Root's reserve as last seen (free − avail): neither used nor available. The usage chart
    /// is drawn on df's scale: its points and `usage` are used bytes less this, its limit
    /// `size_bytes` less this (where the forecast's "full" lies).
    pub reserved_bytes: Option<f64>,
    pub growth_7d_bytes_per_day: Option<f64>,
    pub growth_30d_bytes_per_day: Option<f64>,
    pub predicted_full_unix: Option<i64>,
    /// The layer below the filesystem whose date `predicted_full_unix` is, when one runs out
    /// before the filesystem (`thin pool vg-pool-tpool`): the mount's date is the earliest of
    /// its layers'.
    pub full_layer: Option<String>,
    /// Why there is no date, when there is none.
    pub full_note: Option<String>,
    /// The earliest and latest full dates of the band around `predicted_full_unix`.
    pub full_earliest_unix: Option<i64>,
    pub full_latest_unix: Option<i64>,
    /// The forecast these figures come from (what dates the performance-full fill).
    #[serde(skip)]
    pub forecast: crate::history::forecast::FsForecast,
    /// (time, low used, high used) for the usage chart, df's used (size − free, root's reserve
    /// taken as `reserved_bytes` throughout): daily figures once the history holds
    /// [`FINE_USAGE_DAYS`] days, before that the stored samples in at most [`USAGE_POINTS`]
    /// buckets (a new host's first days draw as a line, not as one dot a day).
    pub usage: Vec<(i64, f64, f64)>,
    /// The stack of layers under it as last seen (the filesystem first, then the thin pools,
    /// btrfs, ZFS dataset and pool below): empty when nothing below has a capacity of its own.
    pub layers: Vec<LayerReport>,
    /// df's used now less a day ago; unknown before a day of history.
    pub used_growth_1d_bytes: Option<f64>,
    /// What is filling it: the database components on it, the fastest-growing first.
    pub filling: Vec<filling::ComponentReport>,
    /// The sentence naming the component behind most of the last day's growth and why it
    /// grows ([`filling::top_contributor`]).
    pub top_contributor: Option<String>,
}

/// One layer of a filesystem's stack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerReport {
    /// The `layer` label's value (`filesystem`, `thin_pool`, `btrfs`, `btrfs_metadata`,
    /// `zfs_dataset`, `zfs_pool`).
    pub layer: String,
    /// Its own name: a thin pool, a btrfs UUID, a ZFS dataset or pool; empty for the
    /// filesystem.
    pub name: String,
    pub avail_bytes: f64,
    pub size_bytes: Option<f64>,
    pub fill_ratio: Option<f64>,
    /// It runs out first: the mount's effective free space is its.
    pub limiting: bool,
}

impl LayerReport {
    /// What a reader calls it: `thin pool vg-pool-tpool`, `ZFS pool tank`.
    pub fn title(&self) -> String {
        layer_title(&self.layer, &self.name)
    }
}

/// What a reader calls a layer of kind `layer` (the `layer` label's value) named `name`.
pub fn layer_title(layer: &str, name: &str) -> String {
    let kind = match layer {
        "filesystem" => return "filesystem".into(),
        "thin_pool" => "thin pool",
        "btrfs" => "btrfs",
        "btrfs_metadata" => "btrfs metadata",
        "zfs_dataset" => "ZFS dataset",
        "zfs_pool" => "ZFS pool",
        other => other,
    };
    format!("{kind} {name}")
}

impl FsReport {
    /// The layer that runs out first, when the mount has layers below it.
    pub fn runs_out_first(&self) -> Option<&LayerReport> {
        if self.layers.len() < 2 {
            return None;
        }
        self.layers.iter().find(|l| l.limiting)
    }

    /// Where a layer below limits the mount: the fill counting what that layer has left as
    /// all the mount can still take (the alerts' `ssdwatch:filesystem_used_ratio`), with the
    /// layer. None where the filesystem itself runs out first.
    pub fn effective_fill(&self) -> Option<(f64, &LayerReport)> {
        let first = self.runs_out_first().filter(|l| l.layer != "filesystem")?;
        let fs_avail = self
            .layers
            .iter()
            .find(|l| l.layer == "filesystem")?
            .avail_bytes;
        let room = self.used_bytes? + fs_avail;
        (room > 0.0).then(|| ((room - first.avail_bytes.min(fs_avail)) / room, first))
    }

    /// The words after the predicted-full date when a layer below gives it: " (thin pool
    /// vg-pool-tpool runs out first)", else nothing.
    pub fn full_layer_words(&self) -> String {
        self.full_layer
            .as_ref()
            .map(|l| format!(" ({l} runs out first)"))
            .unwrap_or_default()
    }

    /// The fill line's words: df's fill, and the effective fill where a layer runs out first
    /// ("23.0 % (df); effective fill 94.0 %, thin pool vg-pool runs out first"), never a
    /// filesystem said to be fuller than df says.
    pub fn fill_words(&self, pct: impl Fn(f64) -> String) -> String {
        let df = self.fill_ratio.map_or("unknown".to_string(), &pct);
        match self.effective_fill() {
            Some((eff, l)) => format!(
                "{df} (df); effective fill {}, {} runs out first",
                pct(eff),
                l.title()
            ),
            None => df,
        }
    }
}

/// What a filesystem's row is made of, whichever the source (the store or a query API): who it
/// is, when it was seen, its newest figures and its daily use. [`FsReport::new`] derives the
/// rest the same way for both.
pub(crate) struct FsSeen<'a> {
    pub mountpoint: String,
    pub device: Option<String>,
    pub first_seen_unix: i64,
    pub last_seen_unix: Option<i64>,
    pub size_bytes: Option<f64>,
    /// The newest (free, available) bytes: df's used, fill and root's reserve come from them.
    pub free_avail: Option<(f64, f64)>,
    pub days: &'a [DayUse],
    /// The stack as last seen (empty where there is none or it is not current).
    pub layers: Vec<LayerReport>,
}

impl FsReport {
    /// The report of a filesystem from what was seen of it, its forecast and why that has no
    /// date (when it has none). Growth over a day and what fills it come after
    /// ([`FsReport::with_filling`]).
    pub(crate) fn new(
        seen: FsSeen<'_>,
        fc: crate::history::forecast::FsForecast,
        full_note: Option<String>,
    ) -> FsReport {
        let size = seen.size_bytes;
        let used = size
            .zip(seen.free_avail)
            .map(|(s, (free, _))| (s - free).max(0.0));
        let fill_ratio = size
            .zip(seen.free_avail)
            .and_then(|(s, (free, avail))| df_fill_ratio(s, free, avail));
        let reserved = seen.free_avail.map(|(free, avail)| (free - avail).max(0.0));
        FsReport {
            mountpoint: seen.mountpoint,
            device: seen.device,
            first_seen_unix: seen.first_seen_unix,
            last_seen_unix: seen.last_seen_unix,
            size_bytes: size,
            used_bytes: used,
            fill_ratio,
            reserved_bytes: reserved,
            growth_7d_bytes_per_day: fc.growth_7d_bytes_per_day,
            growth_30d_bytes_per_day: fc.growth_30d_bytes_per_day,
            predicted_full_unix: fc.predicted_full_unix,
            full_layer: fc.full_layer.as_ref().map(|(l, n)| layer_title(l, n)),
            full_note,
            full_earliest_unix: fc.full_earliest_unix,
            full_latest_unix: fc.full_latest_unix,
            usage: on_df_scale(daily_usage(seen.days), reserved),
            layers: seen.layers,
            forecast: fc,
            used_growth_1d_bytes: None,
            filling: Vec::new(),
            top_contributor: None,
        }
    }

    /// The filesystem with what is filling it: its growth of df's used over the last day, the
    /// database components on it with their shares of that growth, and the sentence naming
    /// the top one.
    pub(crate) fn with_filling(
        mut self,
        components: Vec<filling::ComponentReport>,
        grew_1d: Option<f64>,
        facts: &BTreeMap<String, DatabaseFacts>,
    ) -> FsReport {
        self.used_growth_1d_bytes = grew_1d;
        self.filling = filling::with_shares(components, grew_1d);
        self.top_contributor = filling::top_contributor(&self.filling, grew_1d, facts);
        self
    }
}

/// Where a kind of layer sits in a stack: the filesystem on top, a ZFS pool at the bottom.
pub(crate) fn layer_rank(layer: &str) -> u8 {
    match layer {
        "filesystem" => 0,
        "thin_pool" => 1,
        "btrfs" => 2,
        "btrfs_metadata" => 3,
        "zfs_dataset" => 4,
        "zfs_pool" => 5,
        _ => 6,
    }
}

/// A stored stack of layers as the report shows it.
fn layer_reports(rows: Vec<crate::history::LayerRow>) -> Vec<LayerReport> {
    rows.into_iter()
        .map(|l| LayerReport {
            fill_ratio: crate::layers::layer_fill_ratio(
                l.avail_bytes as f64,
                l.size_bytes.map(|s| s as f64),
            ),
            layer: l.layer,
            name: l.name,
            avail_bytes: l.avail_bytes as f64,
            size_bytes: l.size_bytes.map(|s| s as f64),
            limiting: l.limiting,
        })
        .collect()
}

/// One drive.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriveReport {
    pub device: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    pub capacity_bytes: Option<u64>,
    pub first_seen_unix: i64,
    pub last_seen_unix: Option<i64>,
    pub wear_used_ratio: Option<f64>,
    pub wear_rate_per_day: Option<f64>,
    pub predicted_wear_out_unix: Option<i64>,
    /// The band around the wear-out date (earliest, latest).
    pub wear_out_earliest_unix: Option<i64>,
    pub wear_out_latest_unix: Option<i64>,
    /// Host bytes written over the drive's life (the TBW consumed).
    pub host_written_bytes: Option<f64>,
    /// Host bytes written ÷ the rated endurance from `history.endurance`.
    pub endurance_used_ratio: Option<f64>,
    pub predicted_endurance_exhausted_unix: Option<i64>,
    pub write_amplification_30d: Option<f64>,
    pub host_bytes_per_day_30d: Option<f64>,
    /// Discard bursts in the history, and the newest one's time and bytes.
    pub discard_bursts: usize,
    pub last_discard_unix: Option<i64>,
    pub last_discard_bytes: Option<u64>,
    /// Daily (day's last time, wear used ratio), for the wear chart.
    pub wear: Vec<(i64, f64)>,
    /// What the drive's own logs and the durability check say now (from Prometheus: the
    /// history store does not keep these).
    pub health: DriveHealth,
}

impl DriveReport {
    /// What a heading calls it: its kernel name, else its serial or WWN (never "?").
    pub fn name(&self) -> String {
        drive_name(
            self.device.as_deref(),
            self.serial.as_deref(),
            self.wwn.as_deref(),
        )
    }
}

/// A drive's name for people from what is known of it.
fn drive_name(device: Option<&str>, serial: Option<&str>, wwn: Option<&str>) -> String {
    match (device, serial, wwn) {
        (Some(d), _, _) if !d.is_empty() => d.to_string(),
        (_, Some(s), _) => format!("serial {s}"),
        (_, _, Some(w)) => format!("WWN {w}"),
        _ => "a drive without a name".into(),
    }
}

/// A drive's health as of the report: its error log, newest self-test, temperature against
/// its own limit, and whether fsync on it is durable. Unknown is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DriveHealth {
    pub error_log_entries: Option<f64>,
    /// Entries added over the last 7 days.
    pub error_log_entries_new_7d: Option<f64>,
    /// The newest self-test's type and result, e.g. "extended failed".
    pub self_test: Option<String>,
    /// Power-on time since it ran.
    pub self_test_age_seconds: Option<f64>,
    pub temperature_celsius: Option<f64>,
    pub temperature_warning_celsius: Option<f64>,
    /// Time above the warning limit over the last 7 days, as the drive counted it.
    pub above_warning_seconds_7d: Option<f64>,
    /// `ssdwatch_device_durability_risk_info`'s reason.
    pub durability: Option<String>,
    /// Errors the layers on the drive counted over the last 7 days (btrfs devices, ZFS vdevs
    /// and md members whose one drive it is), summed; None when none on it counts errors or
    /// has two readings in the window.
    pub layer_errors_new_7d: Option<f64>,
    /// Those of them whose count grew, most first.
    pub layer_errors_grown: Vec<LayerErrorGrowth>,
}

/// A component under the filesystems whose error count grew over the last 7 days.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerErrorGrowth {
    /// `btrfs_device`, `zfs_vdev` or `md_member`.
    pub kind: String,
    /// Its filesystem UUID, pool or array.
    pub container: String,
    /// Its device, vdev or member name.
    pub member: String,
    pub new_7d: f64,
}

impl LayerErrorGrowth {
    /// How a sentence names it: "btrfs device sdb1 of 50bd3755", "ZFS vdev sda of tank".
    pub fn title(&self) -> String {
        let what = match self.kind.as_str() {
            "btrfs_device" => "btrfs device",
            "zfs_vdev" => "ZFS vdev",
            "md_member" => "md member",
            k => k,
        };
        // A btrfs UUID in full is noise in a sentence: its first group names it.
        let of = match self.kind.as_str() {
            "btrfs_device" => self.container.split('-').next().unwrap_or(""),
            _ => self.container.as_str(),
        };
        format!("{what} {} of {of}", self.member)
    }
}

/// By drive kernel name: the errors its components gained, and those that grew.
pub(crate) type ErrorsByDrive = BTreeMap<String, (f64, Vec<LayerErrorGrowth>)>;

/// What each drive's layers counted over a window, from their stored readings (oldest first):
/// by drive kernel name, the sum of what each component gained and the components that grew;
/// and the components that grew with no one drive under them (named so the report can say
/// their errors are in no drive's row). A counter that went down was reset (`btrfs device
/// stats -z`, `zpool clear`, an array assembled again): what it holds now is what it gained.
pub(crate) fn layer_error_growth(
    series: &[crate::history::LayerErrorsSeries],
) -> (ErrorsByDrive, Vec<LayerErrorGrowth>) {
    let mut by_drive = ErrorsByDrive::new();
    let mut unplaced = Vec::new();
    for x in series {
        let (Some(a), Some(b)) = (x.points.first(), x.points.last()) else {
            continue;
        };
        if x.points.len() < 2 {
            continue;
        }
        let (Some(old), Some(new)) = (a.1.total(), b.1.total()) else {
            continue;
        };
        let gained = if new >= old { new - old } else { new } as f64;
        let g = LayerErrorGrowth {
            kind: x.kind.as_str().to_string(),
            container: x.container.clone(),
            member: x.member.clone(),
            new_7d: gained,
        };
        match &x.drive {
            Some(d) => {
                let e = by_drive.entry(d.clone()).or_default();
                e.0 += gained;
                if gained > 0.0 {
                    e.1.push(g);
                }
            }
            None if gained > 0.0 => unplaced.push(g),
            None => {}
        }
    }
    for (_, grown) in by_drive.values_mut() {
        grown.sort_by(|a, b| b.new_7d.total_cmp(&a.new_7d));
    }
    (by_drive, unplaced)
}

impl DriveHealth {
    /// The facts worth a reader's attention, in plain words; empty when all is well or unknown.
    pub fn concerns(&self) -> Vec<String> {
        let mut c = Vec::new();
        if let Some(n) = self.error_log_entries_new_7d.filter(|n| *n > 0.0) {
            c.push(format!("{n:.0} new error-log entries in 7 days"));
        }
        if let Some(n) = self.layer_errors_new_7d.filter(|n| *n > 0.0) {
            let by: Vec<String> = self
                .layer_errors_grown
                .iter()
                .map(|g| format!("{} {:.0}", g.title(), g.new_7d))
                .collect();
            c.push(format!(
                "{n:.0} errors counted under the filesystem in 7 days ({})",
                by.join(", ")
            ));
        }
        if let Some(t) = self.self_test.as_deref().filter(|t| t.ends_with(" failed")) {
            c.push(format!("latest self-test: {t}"));
        }
        if let Some(s) = self.above_warning_seconds_7d.filter(|s| *s > 0.0) {
            c.push(format!(
                "{:.0} min above its warning temperature in 7 days",
                s / 60.0
            ));
        }
        if let Some(r) = self
            .durability
            .as_deref()
            .filter(|r| *r != "none" && *r != "unknown")
        {
            c.push(format!("fsync may not be durable ({r})"));
        }
        c
    }
}

/// A drive's health from its stored readings of the last 7 days (oldest first): the newest
/// reading's figures, and what its counters gained since the oldest (unknown with one reading,
/// as Prometheus' `increase` over 7 days is), with the newest temperature stored.
fn stored_health(
    readings: &[crate::history::DriveHealthPoint],
    temperature_celsius: Option<f64>,
) -> DriveHealth {
    let (Some(first), Some(last)) = (readings.first(), readings.last()) else {
        return DriveHealth {
            temperature_celsius,
            ..DriveHealth::default()
        };
    };
    let (a, b) = (&first.health, &last.health);
    let gained = |f: fn(&crate::history::DriveHealthRecord) -> Option<u64>| {
        if readings.len() < 2 {
            return None;
        }
        // A counter that went down was reset (a drive replaced under the same identity, a
        // firmware that clears its log): what it holds now is what it gained.
        let (x, y) = (f(a)?, f(b)?);
        Some(if y >= x { y - x } else { y } as f64)
    };
    DriveHealth {
        error_log_entries: b.error_log_entries.map(|n| n as f64),
        error_log_entries_new_7d: gained(|h| h.error_log_entries),
        self_test: b.self_test.clone(),
        self_test_age_seconds: b.self_test_age_seconds.map(|s| s as f64),
        temperature_celsius,
        temperature_warning_celsius: b.temperature_warning_celsius,
        above_warning_seconds_7d: gained(|h| h.above_warning_seconds),
        durability: b.durability.clone(),
        ..DriveHealth::default()
    }
}

/// Histories shorter than this many days draw usage from the stored samples.
pub const FINE_USAGE_DAYS: usize = 14;
/// Points of such a usage chart at most.
pub const USAGE_POINTS: i64 = 300;

/// A usage chart's points: (time, low used, high used).
type UsagePoints = Vec<(i64, f64, f64)>;

/// The usage chart of a filesystem with [`FINE_USAGE_DAYS`] days of history or more: its daily
/// lows and highs (see [`FsReport::usage`]).
fn daily_usage(days: &[DayUse]) -> UsagePoints {
    days.iter().map(|d| (d.day * DAY, d.low, d.high)).collect()
}

/// A usage chart of a shorter history being drawn from its points, oldest first: at most
/// [`USAGE_POINTS`] buckets from the first point to the newest, each the lowest and highest
/// used (`size - avail`) of its points.
struct UsageBuckets {
    first: i64,
    width: i64,
    points: UsagePoints,
}

impl UsageBuckets {
    /// Buckets from `first` to `newest` (times of the series' first and newest points).
    fn new(first: i64, newest: i64) -> Self {
        UsageBuckets {
            first,
            width: ((newest - first) / USAGE_POINTS).max(1),
            points: Vec::new(),
        }
    }

    fn push(&mut self, p: &crate::history::FsPoint) {
        let bucket = self.first + (p.t - self.first) / self.width * self.width;
        let (lo, hi) = (p.size.last - p.avail.max, p.size.last - p.avail.min);
        match self.points.last_mut() {
            Some(o) if o.0 == bucket => {
                o.1 = o.1.min(lo);
                o.2 = o.2.max(hi);
            }
            _ => self.points.push((bucket, lo, hi)),
        }
    }
}

/// The usage charts of the filesystems of `first_seen` (series -> its first time), each from
/// its points up to `now`; a series without points there has none. The points of all of them
/// are read in one pass ([`Store::fs_series_each`]): a new host's charts cost its stored rows
/// once, not once per filesystem.
fn fine_usage(
    store: &Store,
    first_seen: &BTreeMap<FsId, i64>,
    now: i64,
) -> Result<HashMap<FsId, UsagePoints>, StoreError> {
    // The newest point sets a chart's bucket width before its first point is read.
    let newest = store.fs_newest(first_seen, now)?;
    let mut charts: HashMap<FsId, UsageBuckets> = HashMap::new();
    store.fs_series_each(first_seen, now, |id, p| {
        if let Some(b) = newest.get(&id) {
            charts
                .entry(id)
                .or_insert_with(|| UsageBuckets::new(p.t, b.t))
                .push(&p);
        }
    })?;
    Ok(charts.into_iter().map(|(id, c)| (id, c.points)).collect())
}

/// df's used (size − free) at the newest point less at `then`, an older one; None without
/// either.
fn used_growth(
    newest: Option<&crate::history::FsPoint>,
    then: Option<&crate::history::FsPoint>,
) -> Option<f64> {
    let used = |p: &crate::history::FsPoint| p.size.last - p.free.last;
    Some(used(newest?) - used(then?))
}

/// Usage points (used as `size − avail`, which the forecast counts) on df's scale: less root's
/// reserve, so the chart's last point is the table's used.
pub(crate) fn on_df_scale(
    usage: Vec<(i64, f64, f64)>,
    reserved: Option<f64>,
) -> Vec<(i64, f64, f64)> {
    let r = reserved.unwrap_or(0.0);
    usage
        .into_iter()
        .map(|(t, lo, hi)| (t, (lo - r).max(0.0), (hi - r).max(0.0)))
        .collect()
}

/// A report that says only that the store does not exist yet.
pub fn not_created(host: &str, source: &str, now: i64, why: &str) -> Report {
    Report {
        host: host.to_string(),
        generated_unix: now,
        source: source.to_string(),
        history_since_unix: None,
        filesystems: Vec::new(),
        drives: Vec::new(),
        degradation: Vec::new(),
        performance_full: Vec::new(),
        unknown: vec![why.to_string()],
    }
}

/// Builds the report from the store as of `now`, in one read snapshot. `probe_targets` is how
/// many probe targets the daemon has configured, when known: what the report says while no
/// run is stored yet.
pub fn build(
    store: &Store,
    host: &str,
    now: i64,
    rules: &[EnduranceRule],
    probe_targets: Option<usize>,
    slow_levels: &[(String, SlowLevel)],
) -> Result<Report, StoreError> {
    store.begin_read()?;
    let r = build_in(store, host, now, rules, probe_targets, slow_levels);
    let end = store.end_read();
    let r = r?;
    end?;
    Ok(r)
}

fn build_in(
    store: &Store,
    host: &str,
    now: i64,
    rules: &[EnduranceRule],
    probe_targets: Option<usize>,
    slow_levels: &[(String, SlowLevel)],
) -> Result<Report, StoreError> {
    let mut unknown = Vec::new();
    let (components, facts) = components_by_mount(store, now)?;
    let filesystems = filesystem_reports(store, now, components, &facts)?;
    if filesystems.is_empty() {
        unknown.push("no filesystem samples yet: fill, growth and full dates are unknown".into());
    }
    import_notes(store, &mut unknown)?;
    let drives = drive_reports(store, now, rules, &mut unknown)?;
    if drives.is_empty() {
        unknown.push("no SMART samples of a drive yet: wear and wear-out dates are unknown".into());
    }
    let degradation = degradation::analyse(store, 0, now)?;
    if degradation.is_empty() {
        unknown.push(no_probe_runs(probe_targets));
    }
    for g in degradation.iter().filter(|g| g.trim.is_empty()) {
        unknown.push(format!(
            "{} {}: no discard burst with probe runs in the hour before and after it yet",
            g.target,
            g.probe.as_str()
        ));
    }
    let performance_full = performance_full(&filesystems, &degradation, slow_levels, now);
    let since = filesystems
        .iter()
        .map(|f| f.first_seen_unix)
        .chain(drives.iter().map(|d| d.first_seen_unix))
        .min();
    Ok(Report {
        host: host.to_string(),
        generated_unix: now,
        source: store.path().display().to_string(),
        history_since_unix: since,
        filesystems,
        drives,
        degradation,
        performance_full,
        unknown,
    })
}

/// The database components seen lately, by mount point, from their sizes of the last 8 days
/// (7 days' growth needs a size a week old); and the facts of the databases seen lately.
fn components_by_mount(store: &Store, now: i64) -> Result<(Components, Facts), StoreError> {
    let mut components = Components::new();
    let database_facts = store.database_facts()?;
    for c in store.components(now - 8 * DAY, now)? {
        // A component not seen lately is gone (a server stopped, a slot dropped).
        let Some(&(sized_at, size)) = c.sizes.last() else {
            continue;
        };
        if !current::seen_recently(Some(sized_at), now) {
            continue;
        }
        let seen = database_facts.get(&c.database).map(|f| f.1);
        components
            .entry(c.mountpoint.clone())
            .or_default()
            .push(filling::ComponentReport {
                stale_since: filling::stale_since(sized_at, seen),
                bytes: size as f64,
                growth_1d_bytes: filling::growth(&c.sizes, now, DAY),
                growth_7d_bytes: filling::growth(&c.sizes, now, 7 * DAY),
                share_1d: None,
                database: c.database,
                kind: c.kind,
                component: c.component,
            });
    }
    let facts = database_facts
        .into_iter()
        .filter(|(_, (_, t, _))| current::seen_recently(Some(*t), now))
        .map(|(db, (_, _, f))| (db, f))
        .collect();
    Ok((components, facts))
}

/// Database components by mount point.
type Components = BTreeMap<String, Vec<filling::ComponentReport>>;
/// Database facts by database.
type Facts = BTreeMap<String, DatabaseFacts>;

/// What every filesystem's report reads that is read for all of them at once: raw rows are
/// time-major, so a read of one series would pass over every other series' rows of the range.
struct FsBatch {
    /// The last hours of raw points, for the forecasts' runaway leg.
    runaway_points: HashMap<FsId, Vec<(i64, f64)>>,
    /// The newest point of every filesystem seen lately, and its newest a day back (df's used
    /// then).
    newest_now: HashMap<FsId, crate::history::FsPoint>,
    newest_day_ago: HashMap<FsId, crate::history::FsPoint>,
}

/// Every stored filesystem's report, each with the components on it.
fn filesystem_reports(
    store: &Store,
    now: i64,
    mut components: Components,
    facts: &Facts,
) -> Result<Vec<FsReport>, StoreError> {
    let fss = store.filesystems()?;
    let ids: Vec<FsId> = fss.iter().map(|f| f.id).collect();
    let recent: BTreeMap<FsId, i64> = ids
        .iter()
        .map(|id| (*id, now - current::STALE_SECONDS))
        .collect();
    let batch = FsBatch {
        runaway_points: current::recent_use(store, &ids, now)?,
        newest_now: store.fs_newest(&recent, now)?,
        newest_day_ago: store.fs_newest(&recent, now - DAY)?,
    };
    // The filesystems with a short history, whose usage charts are drawn from their points.
    let mut fine: BTreeMap<FsId, i64> = BTreeMap::new();
    let mut filesystems = Vec::new();
    for f in fss {
        let (report, days) = filesystem_report(store, &f, &batch, now, &mut components, facts)?;
        if days < FINE_USAGE_DAYS {
            fine.insert(f.id, f.first_seen);
        }
        filesystems.push(report);
    }
    // A short history's chart from its points; daily figures stay where it has none.
    let mut charts = fine_usage(store, &fine, now)?;
    for (f, id) in filesystems.iter_mut().zip(&ids) {
        if let Some(points) = charts.remove(id) {
            f.usage = on_df_scale(points, f.reserved_bytes);
        }
    }
    Ok(filesystems)
}

/// One filesystem's report, and how many days of history it has. A mount's newest series
/// takes the components on its mount point (they are keyed by it).
fn filesystem_report(
    store: &Store,
    f: &crate::history::FsInfo,
    batch: &FsBatch,
    now: i64,
    components: &mut Components,
    facts: &Facts,
) -> Result<(FsReport, usize), StoreError> {
    let days = store.fs_days(f.id, 0, now)?;
    let last = days.last().copied();
    let cur = batch.newest_now.get(&f.id);
    let last_seen = cur.map(|p| p.t).or(last.map(|d| d.day * DAY));
    // The newest point (raw or hourly) carries free bytes too, which df's used needs; a
    // filesystem not seen lately takes its last stored day's (the last day it has points).
    let newest = match (cur, last) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(d)) => store
            .fs_newest(
                &BTreeMap::from([(f.id, d.day * DAY)]),
                (d.day * DAY + DAY - 1).min(now),
            )?
            .remove(&f.id),
        _ => None,
    };
    let stale = !current::seen_recently(last_seen, now);
    let fc = if stale {
        Default::default()
    } else {
        let r = batch
            .runaway_points
            .get(&f.id)
            .map_or(&[][..], Vec::as_slice);
        current::filesystem(&days, r, now)
            .map(|fc| current::with_layers(store, f.id, fc, now))
            .transpose()?
            .unwrap_or_default()
    };
    let note = full_note(&fc, stale, days.len());
    // The stack as last seen, while current: an old one would name a pool long gone.
    let (layers, stack_t) = match store.fs_layers(f.id)? {
        Some((t, rows)) if current::seen_recently(Some(t), now) => (layer_reports(rows), Some(t)),
        _ => (Vec::new(), None),
    };
    let free_avail = newest.as_ref().map(|p| df_free_avail(p, &layers, stack_t));
    let (grew, on_it) = if stale {
        (None, Vec::new())
    } else {
        (
            used_growth(cur, batch.newest_day_ago.get(&f.id)),
            components.remove(&f.key.mountpoint).unwrap_or_default(),
        )
    };
    let seen = FsSeen {
        mountpoint: f.key.mountpoint.clone(),
        device: f.device.clone(),
        first_seen_unix: f.first_seen,
        last_seen_unix: last_seen,
        size_bytes: newest.as_ref().map(|p| p.size.last),
        free_avail,
        days: &days,
        layers,
    };
    let report = FsReport::new(seen, fc, note).with_filling(on_it, grew, facts);
    Ok((report, days.len()))
}

/// Why a filesystem's forecast has no date (or, for a runaway, what its date is), in plain
/// words; None for a dated forecast that needs no word.
fn full_note(
    fc: &crate::history::forecast::FsForecast,
    stale: bool,
    days: usize,
) -> Option<String> {
    if let Some(rate) = fc.runaway_bytes_per_day {
        return Some(format!(
            "a runaway: +{}/h over the last hours, above anything of the last two weeks",
            bytes(rate / 24.0)
        ));
    }
    if fc.predicted_full_unix.is_some() {
        return None;
    }
    if stale {
        return Some("not seen in the last 2 days: no forecast".to_string());
    }
    Some(
        match fc.growth_30d_bytes_per_day.or(fc.growth_7d_bytes_per_day) {
            None => format!(
                "not enough history yet ({days} day(s) since the trend began; a date needs 7)"
            ),
            Some(g) if g <= 0.0 => "not growing: no full date".to_string(),
            Some(_) => "growing too slowly for a date within 10 years".to_string(),
        },
    )
}

/// The (free, available) bytes df shows of the newest point `p`. The stored avail of a mount
/// with layers is its effective figure (the least of its stack's, what its forecast must see);
/// df's fill and root's reserve are the filesystem's own, from the stack's filesystem row: a
/// thin pool at 94 % under an ext4 df shows at 23 % is "23.0 % (df); effective fill 94.0 %",
/// never 79 % "(df)". Only from a stack of the newest sample's time or the hour after it (the
/// collector records both at once; the stack with every sample, a raw row once a raw
/// interval).
fn df_free_avail(
    p: &crate::history::FsPoint,
    layers: &[LayerReport],
    stack_t: Option<i64>,
) -> (f64, f64) {
    match layers.iter().find(|l| l.layer == "filesystem") {
        Some(own) if stack_t.is_some_and(|t| (0..=HOUR).contains(&(t - p.t))) => {
            (p.free.last, own.avail_bytes)
        }
        _ => (p.free.last, p.avail.last),
    }
}

/// Which part of each history is not the daemon's own (`ssdwatch history import`), in plain
/// words.
fn import_notes(store: &Store, unknown: &mut Vec<String>) -> Result<(), StoreError> {
    let names: BTreeMap<_, _> = store
        .filesystems()?
        .into_iter()
        .map(|f| (f.id, f.key.mountpoint))
        .collect();
    for m in store.fs_imports()? {
        unknown.push(format!(
            "history of {} from {} to {} imported from {} (instance {}, {} hours): node_exporter's or the fleet's samples, not this daemon's",
            names.get(&m.fs).map_or("?", String::as_str),
            date(m.from_t),
            date(m.until_t),
            m.source,
            m.instance,
            m.hours
        ));
    }
    let drive_names: BTreeMap<_, _> = store
        .drives()?
        .into_iter()
        .map(|d| (d.id, info_name(&d)))
        .collect();
    for m in store.drive_imports()? {
        unknown.push(format!(
            "history of drive {} from {} to {} imported from {} (instance {}, {} hours): the fleet's samples, not this daemon's",
            drive_names.get(&m.drive).map_or("?", String::as_str),
            date(m.from_t),
            date(m.until_t),
            m.source,
            m.instance,
            m.hours
        ));
    }
    Ok(())
}

/// A stored drive's name for people.
fn info_name(d: &crate::history::DriveInfo) -> String {
    drive_name(
        d.kernel_name.as_deref(),
        d.key.serial.as_deref(),
        d.key.wwn.as_deref(),
    )
}

/// Every stored drive's report; what is not known of them goes to `unknown`.
fn drive_reports(
    store: &Store,
    now: i64,
    rules: &[EnduranceRule],
    unknown: &mut Vec<String>,
) -> Result<Vec<DriveReport>, StoreError> {
    let mut days_of = Vec::new();
    for d in store.drives()? {
        let pts = store.drive_days(d.id, 0, now)?;
        days_of.push((d, pts));
    }
    let live: Vec<DriveId> = days_of
        .iter()
        .filter(|(_, pts)| current::seen_recently(pts.last().map(|p| p.t), now))
        .map(|(d, _)| d.id)
        .collect();
    // The newest temperatures of the drives seen lately, read for all at once (as above).
    let temperatures = store.drive_temperatures(&live, now - current::STALE_SECONDS, now)?;
    // What the layers on each drive counted in 7 days, read for all at once.
    let (mut layer_errors, unplaced) = layer_error_growth(&store.layer_errors(now - 7 * DAY, now)?);
    for g in unplaced {
        unknown.push(format!(
            "{}: {:.0} errors in 7 days on no single drive (not in the drive table)",
            g.title(),
            g.new_7d
        ));
    }
    let mut drives = Vec::new();
    for (d, pts) in days_of {
        let endurance = rated_endurance(rules, d.key.model.as_deref(), d.capacity_bytes);
        if !pts.is_empty() && !pts.iter().any(|p| p.wear_used_ratio.is_some()) {
            unknown.push(format!(
                "drive {}: no wear figure in its SMART data (or smartctl never ran on it)",
                info_name(&d)
            ));
        }
        if endurance.is_none() && !pts.is_empty() {
            unknown.push(format!(
                "drive {} ({}): no rated endurance (history.endurance in the config): TBW consumed has no share",
                info_name(&d),
                d.key.model.as_deref().unwrap_or("model unknown")
            ));
        }
        let stale = !current::seen_recently(pts.last().map(|p| p.t), now);
        let health = if stale {
            DriveHealth::default()
        } else {
            let mut h = stored_health(
                &store.drive_health(d.id, now - 7 * DAY, now)?,
                temperatures.get(&d.id).copied(),
            );
            if let Some((n, grown)) = d.kernel_name.as_ref().and_then(|k| layer_errors.remove(k)) {
                h.layer_errors_new_7d = Some(n);
                h.layer_errors_grown = grown;
            }
            h
        };
        let discards = store.discard_events(d.id, 0, now)?;
        drives.push(drive_report(d, &pts, now, endurance, &discards, health));
    }
    Ok(drives)
}

/// A drive's report from its daily points (oldest first), its rated endurance, its discard
/// bursts (time, bytes; oldest first) and its health.
fn drive_report(
    d: crate::history::DriveInfo,
    pts: &[crate::history::DrivePoint],
    now: i64,
    endurance: Option<crate::history::forecast::Endurance>,
    discards: &[(i64, u64)],
    health: DriveHealth,
) -> DriveReport {
    let last_seen = pts.last().map(|p| p.t);
    // A drive not seen lately has no future: no dates, no rates.
    let live = current::seen_recently(last_seen, now);
    let fc = forecast_drive(pts, now, endurance);
    let wear: Vec<(i64, f64)> = pts
        .iter()
        .filter_map(|p| Some((p.t, p.wear_used_ratio?.last)))
        .collect();
    DriveReport {
        device: d.kernel_name,
        model: d.key.model,
        serial: d.key.serial,
        wwn: d.key.wwn,
        capacity_bytes: d.capacity_bytes,
        first_seen_unix: d.first_seen,
        last_seen_unix: last_seen,
        wear_used_ratio: wear.last().map(|w| w.1),
        wear_rate_per_day: fc.wear_rate_per_day.filter(|_| live),
        predicted_wear_out_unix: fc.predicted_wear_out_unix.filter(|_| live),
        wear_out_earliest_unix: fc.wear_out_earliest_unix.filter(|_| live),
        wear_out_latest_unix: fc.wear_out_latest_unix.filter(|_| live),
        host_written_bytes: pts.iter().rev().find_map(|p| p.host_written_bytes),
        endurance_used_ratio: fc.endurance_consumed_ratio,
        predicted_endurance_exhausted_unix: fc.predicted_endurance_exhausted_unix.filter(|_| live),
        write_amplification_30d: fc.write_amplification_30d,
        host_bytes_per_day_30d: fc.host_bytes_per_day_30d,
        discard_bursts: discards.len(),
        last_discard_unix: discards.last().map(|e| e.0),
        last_discard_bytes: discards.last().map(|e| e.1),
        wear,
        health,
    }
}

/// The performance-full assessment of every commit-probe group, dated by the forecast of the
/// filesystem it is on (the newest series of a mount point, as the groups take it).
pub fn performance_full(
    filesystems: &[FsReport],
    groups: &[Group],
    levels: &[(String, SlowLevel)],
    now: i64,
) -> Vec<Assessment> {
    let mut by_mount = std::collections::BTreeMap::new();
    for f in filesystems {
        by_mount.insert(f.mountpoint.clone(), f.forecast.clone());
    }
    slow::assess(groups, &by_mount, levels, now)
}

/// " (earliest E, latest L)" after a predicted date: its band; "latest not in sight" when only
/// the earliest bound exists.
pub fn band(earliest: Option<i64>, latest: Option<i64>) -> String {
    match (earliest, latest) {
        (Some(e), Some(l)) => format!(" (earliest {}, latest {})", date(e), date(l)),
        (Some(e), None) => format!(" (earliest {}, latest not in sight)", date(e)),
        _ => String::new(),
    }
}

/// One line per commit-probe target: at which fill its commits got slow and when the fill
/// forecast gets there, or why that is not known. Shared by the text and HTML reports.
pub fn performance_full_line(a: &Assessment) -> String {
    let what = a.mountpoint.as_deref().unwrap_or(&a.target);
    match &a.slow {
        SlowFill::Reached {
            fill,
            baseline_seconds,
            level_seconds,
            p50_seconds,
        } => {
            let factor = p50_seconds / baseline_seconds;
            let head = format!(
                "{what}: commits {factor:.1}x slower past {} fill ({} vs {} at low fill; slow above {})",
                pct(*fill),
                latency(*p50_seconds),
                latency(*baseline_seconds),
                latency(*level_seconds)
            );
            match (a.slow_at_unix, a.full_at_unix) {
                (Some(t), _) if t <= a.as_of_unix => format!("{head}; already there"),
                (Some(t), Some(full)) => format!(
                    "{head}; at today's growth that is on {} ({} days), {} days before full",
                    date(t),
                    (t - a.as_of_unix) / DAY,
                    (full - t).max(0) / DAY
                ),
                (Some(t), None) => format!(
                    "{head}; at today's growth that is on {} ({} days)",
                    date(t),
                    (t - a.as_of_unix) / DAY
                ),
                (None, _) => format!("{head}; the filesystem is not growing: no date"),
            }
        }
        SlowFill::NotReached {
            max_fill,
            level_seconds,
            ..
        } => format!(
            "{what}: commits never passed {} on the fills seen: not reached at {} fill (nothing is known beyond)",
            latency(*level_seconds),
            pct(*max_fill)
        ),
        SlowFill::Unknown { reason } => format!("{what}: performance-full unknown: {reason}"),
    }
}

/// Why there is no latency by fill yet, in plain words: a new host with a target configured is
/// told its first runs are to come, never to configure one.
fn no_probe_runs(probe_targets: Option<usize>) -> String {
    match probe_targets {
        Some(0) => "no probe target configured (collectors.probe.targets): latency by fill and TRIM/idle recovery are unknown".into(),
        Some(n) => format!(
            "no probe run recorded yet: latency by fill and TRIM/idle recovery come with the first runs of the {n} configured probe target(s)"
        ),
        None => "no probe run recorded yet: latency by fill and TRIM/idle recovery are unknown".into(),
    }
}

/// The report of the store file at `path`, opened read-only; a store not created yet gives a
/// report that says so.
pub fn from_store(
    path: &std::path::Path,
    host: &str,
    now: i64,
    rules: &[EnduranceRule],
    probe_targets: Option<usize>,
    slow_levels: &[(String, SlowLevel)],
) -> Result<Report, StoreError> {
    match Store::open_read_only(path) {
        Ok(store) => build(&store, host, now, rules, probe_targets, slow_levels),
        Err(e @ StoreError::NotCreated { .. }) => Ok(not_created(
            host,
            &path.display().to_string(),
            now,
            &format!("{e}: nothing is known yet"),
        )),
        Err(e) => Err(e),
    }
}

/// The host's name as the kernel has it, under the procfs root (`--path.procfs`).
pub fn host_name(proc: &std::path::Path) -> String {
    std::fs::read_to_string(proc.join("sys/kernel/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// What a curve of runs made while more than 1 % of the filesystem was deleted but not trimmed
/// is called.
pub const UNTRIMMED_TITLE: &str = "deleted, not trimmed (> 1 % of the filesystem)";

/// A probe target and kind for a heading: `/data/pg on /data (nvme0n1), sync_write_4k`, what is
/// unknown left out (never a "(?)").
pub fn group_title(g: &Group) -> String {
    let mut t = g.target.clone();
    if let Some(mp) = g.mountpoint.as_deref().filter(|m| *m != g.target) {
        t.push_str(&format!(" on {mp}"));
    }
    if let Some(d) = g.device.as_deref().filter(|d| !d.is_empty()) {
        t.push_str(&format!(" ({d})"));
    }
    format!("{t}, {}", g.probe.as_str())
}

/// The report as JSON (every figure in base units, times in Unix seconds).
pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// A date (UTC) for people: `2027-03-14`.
pub fn date(t: i64) -> String {
    let st = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64);
    let s = humantime::format_rfc3339_seconds(st).to_string();
    s.get(..10).unwrap_or(&s).to_string()
}

/// A time (UTC) for people: `2027-03-14 08:00`.
pub fn datetime(t: i64) -> String {
    let st = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64);
    let s = humantime::format_rfc3339_seconds(st).to_string();
    format!(
        "{} {}",
        s.get(..10).unwrap_or(&s),
        s.get(11..16).unwrap_or("")
    )
}

/// Bytes in decimal units as drives are rated: `1.23 TB`.
pub fn bytes(b: f64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1000.0 && i + 1 < units.len() {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", units[i])
    }
}

/// A latency for people: `412 µs`, `3.1 ms`.
pub fn latency(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// A ratio as a percentage: `81.2 %`.
pub fn pct(r: f64) -> String {
    format!("{:.1} %", r * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assessed(slow: SlowFill, slow_at: Option<i64>, full_at: Option<i64>) -> Assessment {
        Assessment {
            target: "/srv/pg/probe".into(),
            mountpoint: Some("/srv/pg".into()),
            device: Some("nvme0n1".into()),
            slow,
            slow_at_unix: slow_at,
            full_at_unix: full_at,
            as_of_unix: 1_767_225_600,
        }
    }

    #[test]
    fn the_performance_full_line_dates_the_slow_fill_or_says_how_far_the_curve_has_seen() {
        let now = 1_767_225_600;
        let reached = SlowFill::Reached {
            fill: 0.85,
            baseline_seconds: 0.0002,
            level_seconds: 0.0006,
            p50_seconds: 0.0007,
        };
        assert_eq!(
            performance_full_line(&assessed(
                reached.clone(),
                Some(now + 9 * DAY),
                Some(now + 30 * DAY)
            )),
            "/srv/pg: commits 3.5x slower past 85.0 % fill (700 µs vs 200 µs at low fill; slow \
             above 600 µs); at today's growth that is on 2026-01-10 (9 days), 21 days before full"
        );
        assert!(
            performance_full_line(&assessed(reached.clone(), Some(now), Some(now + DAY)))
                .ends_with("; already there")
        );
        assert!(
            performance_full_line(&assessed(reached, None, None))
                .ends_with("the filesystem is not growing: no date")
        );
        let not_reached = SlowFill::NotReached {
            max_fill: 0.62,
            baseline_seconds: 0.0002,
            level_seconds: 0.0006,
        };
        assert_eq!(
            performance_full_line(&assessed(not_reached, None, Some(now + DAY))),
            "/srv/pg: commits never passed 600 µs on the fills seen: not reached at 62.0 % fill \
             (nothing is known beyond)"
        );
        let unknown = SlowFill::Unknown {
            reason: "no fill bin has 10 runs yet",
        };
        assert_eq!(
            performance_full_line(&assessed(unknown, None, None)),
            "/srv/pg: performance-full unknown: no fill bin has 10 runs yet"
        );
        assert_eq!(
            band(Some(now), None),
            " (earliest 2026-01-01, latest not in sight)"
        );
        assert_eq!(band(None, None), "");
    }

    /// A heading never says "?": a drive is named by what is known of it.
    #[test]
    fn a_drive_is_named_by_what_is_known_of_it() {
        assert_eq!(drive_name(Some("sda"), Some("S1"), None), "sda");
        assert_eq!(drive_name(None, Some("S1"), Some("eui.1")), "serial S1");
        assert_eq!(drive_name(Some(""), None, Some("eui.1")), "WWN eui.1");
        assert_eq!(drive_name(None, None, None), "a drive without a name");
    }

    /// The WAL runaway as the store holds it: three weeks flat at 55 % of 1 TB, then three
    /// hours of +40 GB an hour. The report dates it (from the last hours, within 10 minutes of
    /// the true instant) and says it is a runaway, where it used to say "growing too slowly".
    #[test]
    fn a_runaway_from_a_flat_volume_is_dated_and_named_by_the_report() {
        use crate::history::{FsKey, FsSample, HistoryConfig};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        let (g, size) = (1e9, 1e12);
        let start = 1_767_225_600 + 21 * DAY;
        let sample = |t: i64, used: f64| FsSample {
            key: FsKey {
                mountpoint: "/srv/pg".into(),
                uuid: None,
            },
            device: "nvme0n1p1".into(),
            t,
            size_bytes: size as u64,
            avail_bytes: (size - used) as u64,
            free_bytes: (size - used) as u64,
            files_free: None,
        };
        let mut t = start - 21 * DAY;
        while t < start {
            store.record_fs(&[sample(t, 550.0 * g)]).unwrap();
            if t % crate::time::HOUR == 0 {
                store.downsample(t).unwrap();
            }
            t += 300;
        }
        let mut used = 550.0 * g;
        for _ in 0..36 {
            used += 40.0 * g / 12.0;
            store.record_fs(&[sample(t, used)]).unwrap();
            t += 300;
        }
        let now = t - 300;
        let truth = now + ((size - used) / (40.0 * g) * HOUR as f64) as i64;
        let r = build(&store, "db1", now, &[], None, &[]).unwrap();
        let f = r
            .filesystems
            .iter()
            .find(|f| f.mountpoint == "/srv/pg")
            .unwrap();
        let full = f.predicted_full_unix.expect("a date");
        assert!((full - truth).abs() < 600, "{full} vs {truth}");
        assert!(
            f.full_note
                .as_deref()
                .is_some_and(|n| n.starts_with("a runaway: +40.00 GB/h")),
            "{:?}",
            f.full_note
        );
        let text = super::text::render(&r);
        assert!(text.contains("a runaway"), "{text}");
    }

    /// Each component's growth over the window, summed per drive: a counter reset counts what
    /// it holds since, one reading says nothing, a component on no single drive is named apart.
    #[test]
    fn layer_errors_grow_per_drive_and_a_reset_counts_what_came_after() {
        use crate::history::{LayerErrorCounts, LayerErrorKind, LayerErrorsSeries};
        let reads = |n: u64| LayerErrorCounts {
            read: Some(n),
            ..Default::default()
        };
        let series = |kind, member: &str, drive: Option<&str>, pts: &[u64]| LayerErrorsSeries {
            kind,
            container: "c".into(),
            member: member.into(),
            drive: drive.map(String::from),
            points: pts
                .iter()
                .enumerate()
                .map(|(i, n)| (i as i64 * HOUR, reads(*n)))
                .collect(),
        };
        let (by_drive, unplaced) = layer_error_growth(&[
            series(
                LayerErrorKind::BtrfsDevice,
                "sda1",
                Some("sda"),
                &[5, 7, 12],
            ),
            // `zpool clear` between: 3 since.
            series(LayerErrorKind::ZfsVdev, "sda2", Some("sda"), &[40, 0, 3]),
            series(LayerErrorKind::MdMember, "sdb1", Some("sdb"), &[2, 2]),
            series(LayerErrorKind::MdMember, "sdc1", Some("sdc"), &[9]),
            series(LayerErrorKind::MdMember, "dm-4", None, &[0, 8]),
            series(LayerErrorKind::MdMember, "dm-5", None, &[1, 1]),
        ]);
        let sda = &by_drive["sda"];
        assert_eq!(sda.0, 10.0);
        let grown: Vec<(&str, f64)> = sda
            .1
            .iter()
            .map(|g| (g.member.as_str(), g.new_7d))
            .collect();
        assert_eq!(grown, [("sda1", 7.0), ("sda2", 3.0)], "most first");
        assert_eq!(by_drive["sdb"], (0.0, Vec::new()), "known and quiet");
        assert!(!by_drive.contains_key("sdc"), "one reading: unknown");
        let names: Vec<String> = unplaced.iter().map(|g| g.title()).collect();
        assert_eq!(names, ["md member dm-4 of c"]);
    }
}
