//! The report of a host whose history lives in Prometheus (or a compatible query API: Thanos,
//! Mimir, VictoriaMetrics), and the fleet's view. The same forecast code as the store's report
//! runs on daily figures asked of the query API, so both agree within the downsampling's
//! precision.
//!
//! Queries per host are bounded: 3 range queries for filesystems (60 points a series), 3 for
//! drives (one point a day over at most 2 years), 6 instant queries for the current values
//! (avail and free, drive model and size, the daemon's endurance gauges), 3 for the layers under the
//! filesystems (each layer's free bytes, the limiting layer, the layers' sizes), probe samples in 30-day chunks
//! (only series exported by `ssdwatch history export`, which carry each run's fill), and the
//! TRIM/idle recovery gauges at one point an hour in 30-day chunks (720 points a series).

use super::filling::ComponentReport;
use super::{DriveHealth, DriveReport, FsReport, LayerReport, Report};
use crate::catalogue;
use crate::history::current;
use crate::history::curve::{Curve, Recovery, not_trimmed};
use crate::history::degradation::{Group, RECOVERY_FAMILIES};
use crate::history::forecast::{DayUse, forecast_drive};
use crate::history::service::{EnduranceRule, rated_endurance};
use crate::history::{DatabaseFacts, DrivePoint, Stat};
use crate::probe::ProbeKind;
use crate::time::{DAY, HOUR};
use std::collections::BTreeMap;

/// Days of daily figures asked for filesystems (what the forecast uses) and drives.
const DRIVE_DAYS: i64 = 730;
/// Probe samples are asked for in chunks this long (a chunk of 5-minute runs is 8,640 samples
/// a series, under Prometheus' 11,000-point and 50-million-sample limits).
const CHUNK: i64 = 30 * DAY;

pub use crate::query::{Answer, Api, QueryError};

type Labels = BTreeMap<String, String>;
/// Up to three figures a day, by day.
type Days = BTreeMap<i64, [Option<f64>; 3]>;
/// Up to three figures per series and day.
type Daily<K> = BTreeMap<K, Days>;

/// The range a "last value" query looks back over: the history's rule of which series are
/// current ([`current::STALE_SECONDS`], "seen in the last 2 days"), written in PromQL.
fn recent() -> String {
    crate::query::range(current::STALE_SECONDS)
}

fn sel(instance: &str, extra: &str) -> String {
    let inst = format!("instance={}", crate::query::quote(instance));
    if extra.is_empty() {
        format!("{{{inst}}}")
    } else {
        format!("{{{inst},{extra}}}")
    }
}

fn label<'a>(l: &'a Labels, k: &str) -> Option<&'a str> {
    l.get(k).map(String::as_str).filter(|v| !v.is_empty())
}

/// The report of `instance` as of `now` from the query API at `api`.
/// `rules` are the rated endurances of the config (`history.endurance`), as the store's report
/// uses them; a drive they don't cover takes the daemon's own endurance gauges, if exported.
pub fn build(
    api: &Api,
    instance: &str,
    now: i64,
    rules: &[EnduranceRule],
) -> Result<Report, QueryError> {
    let mut unknown = Vec::new();
    let filesystems = filesystems(api, instance, now)?;
    if filesystems.is_empty() {
        unknown.push(format!("no filesystem series for instance {instance:?}"));
    }
    let drive_reports = drives(api, instance, now, rules)?;
    if drive_reports.is_empty() {
        unknown.push(format!("no drive series for instance {instance:?}"));
    }
    let degradation = degradation(api, instance, now)?;
    if degradation.is_empty() {
        unknown.push(format!(
            "no per-run probe series ({}, written by `ssdwatch history export`): latency by fill is unknown",
            catalogue::PROBE_RUN_FILL_RATIO.name
        ));
    }
    unknown.push(
        "discard bursts are not in the query API's series: their count and sizes are unknown here (the TRIM recoveries come from ssdwatch_trim_recovery_*)"
            .into(),
    );
    // The exported curves carry no target path, so each target takes the default slow level.
    let performance_full = super::performance_full(&filesystems, &degradation, &[], now);
    Ok(Report {
        host: instance.to_string(),
        generated_unix: now,
        source: api.base().to_string(),
        history_since_unix: filesystems
            .iter()
            .map(|f| f.first_seen_unix)
            .chain(drive_reports.iter().map(|d| d.first_seen_unix))
            .min(),
        filesystems,
        drives: drive_reports,
        degradation,
        performance_full,
        unknown,
    })
}

/// The range of a daily range query over the `days` days up to today: day d is evaluated at
/// its last second (or now), (d·DAY - 1, d·DAY + DAY - 1].
fn day_range(now: i64, days: i64) -> (i64, i64) {
    let today = now.div_euclid(DAY);
    ((today - days + 1) * DAY + DAY - 1, today * DAY + DAY - 1)
}

/// A filesystem series' key: its mount point and device ("" where absent).
type FsLabels = (String, String);

fn fs_labels(l: &Labels) -> FsLabels {
    (
        label(l, "mountpoint").unwrap_or("").to_string(),
        label(l, "device").unwrap_or("").to_string(),
    )
}

/// A drive series' key: its device, serial and WWN ("" where absent).
type DriveLabels = (String, String, String);

fn drive_labels(l: &Labels) -> DriveLabels {
    (
        label(l, "device").unwrap_or("").to_string(),
        label(l, "serial").unwrap_or("").to_string(),
        label(l, "wwn").unwrap_or("").to_string(),
    )
}

/// Every filesystem with a day of figures, as the store's report shows it.
fn filesystems(api: &Api, instance: &str, now: i64) -> Result<Vec<FsReport>, QueryError> {
    let days = filesystem_days(api, instance, now)?;
    let last_avail = last_value(api, instance, now, &catalogue::FILESYSTEM_AVAIL_BYTES)?;
    let last_free = last_value(api, instance, now, &catalogue::FILESYSTEM_FREE_BYTES)?;
    let mut stacks = layers(api, instance, now)?;
    // The daemon's own dates: the earliest of each mount's layers' (the query API holds no
    // history of the layers to forecast them from).
    let daemon_full = last_value(
        api,
        instance,
        now,
        &catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS,
    )?;
    let mut filling = Filling::query(api, instance, now)?;
    Ok(days
        .into_iter()
        .filter_map(|((mp, dev), days)| {
            let key = (mp.clone(), dev.clone());
            let now_figures = last_avail
                .get(&key)
                .copied()
                .zip(last_free.get(&key).copied());
            let layers = stacks.remove(&mp).unwrap_or_default();
            let grew = filling.mount_growth_1d.get(&mp).copied();
            let components = filling.components.remove(&mp).unwrap_or_default();
            let daemon_date = daemon_full.get(&key).map(|t| t.round() as i64);
            let mut f = filesystem(mp, dev, &days, layers, now_figures, now)?;
            take_daemon_date(&mut f, daemon_date);
            Some(f.with_filling(components, grew, &filling.facts))
        })
        .collect())
}

/// Where the daemon dates the mount earlier than the filesystem's own daily figures do, the
/// daemon's date is the mount's: its forecast is the same code with what the query API lacks
/// (the earliest of the mount's layers' dates, the runaway leg's raw points). The layer below
/// that runs out first, when the stack names one, is said to give it; the query API has no
/// band for it.
fn take_daemon_date(f: &mut FsReport, daemon_date: Option<i64>) {
    let Some(d) = daemon_date else { return };
    if f.predicted_full_unix.is_none_or(|own| d < own) {
        f.full_layer = f
            .runs_out_first()
            .filter(|l| l.layer != "filesystem")
            .map(LayerReport::title);
        f.predicted_full_unix = Some(d);
        f.full_earliest_unix = None;
        f.full_latest_unix = None;
        f.full_note = None;
    }
}

/// What is filling each mount, from the databases collector's series: each component's
/// bytes now and growth over a day and a week, each mount's growth of df's used over a day,
/// and each database's facts (the archiver's backlog, slots, binary logs).
struct Filling {
    components: BTreeMap<String, Vec<ComponentReport>>,
    mount_growth_1d: BTreeMap<String, f64>,
    facts: BTreeMap<String, DatabaseFacts>,
}

impl Filling {
    fn query(api: &Api, instance: &str, now: i64) -> Result<Filling, QueryError> {
        let s = sel(instance, "");
        let bytes = catalogue::DATABASE_COMPONENT_BYTES.name;
        // (database, component, mountpoint) → value
        let by_component =
            |q: String| -> Result<BTreeMap<(String, String, String), f64>, QueryError> {
                Ok(api
                    .query(&q, now)?
                    .into_iter()
                    .filter_map(|(l, p)| {
                        let k = |n| label(&l, n).unwrap_or("").to_string();
                        Some((
                            (k("database"), k("component"), k("mountpoint")),
                            p.first()?.1,
                        ))
                    })
                    .collect())
            };
        // The newest value within an hour: a backfilled store's sizes are hourly.
        let last = |m: &str, offset: &str| format!("last_over_time({m}{s}[1h]{offset})");
        let growth = |span: &str| {
            by_component(format!(
                "{} - {}",
                last(bytes, ""),
                last(bytes, &format!(" offset {span}"))
            ))
        };
        let (g1, g7) = (growth("1d")?, growth("7d")?);
        let kinds: BTreeMap<String, String> = api
            .query(&last(catalogue::DATABASE_INFO.name, ""), now)?
            .into_iter()
            .filter_map(|(l, _)| {
                Some((
                    label(&l, "database")?.to_string(),
                    label(&l, "kind")?.to_string(),
                ))
            })
            .collect();
        let mut components: BTreeMap<String, Vec<ComponentReport>> = BTreeMap::new();
        for (k, v) in by_component(last(bytes, ""))? {
            components
                .entry(k.2.clone())
                .or_default()
                .push(ComponentReport {
                    kind: kinds.get(&k.0).cloned().unwrap_or_default(),
                    bytes: v,
                    growth_1d_bytes: g1.get(&k).copied(),
                    growth_7d_bytes: g7.get(&k).copied(),
                    share_1d: None,
                    // Prometheus has the series or not: an unread component has none.
                    stale_since: None,
                    database: k.0,
                    component: k.1,
                });
        }
        let (size, free) = (
            catalogue::FILESYSTEM_SIZE_BYTES.name,
            catalogue::FILESYSTEM_FREE_BYTES.name,
        );
        let mount_growth_1d = api
            .query(
                &format!(
                    "max by (mountpoint) (({} - {}) - ({} - {}))",
                    last(size, ""),
                    last(free, ""),
                    last(size, " offset 1d"),
                    last(free, " offset 1d")
                ),
                now,
            )?
            .into_iter()
            .filter_map(|(l, p)| Some((label(&l, "mountpoint")?.to_string(), p.first()?.1)))
            .collect();
        let mut facts: BTreeMap<String, DatabaseFacts> = BTreeMap::new();
        let mut fact = |family: &catalogue::Family,
                        set: &dyn Fn(&mut DatabaseFacts, &Labels, f64)|
         -> Result<(), QueryError> {
            for (l, p) in api.query(&last(family.name, ""), now)? {
                if let (Some(db), Some(&(_, v))) = (label(&l, "database"), p.first()) {
                    set(facts.entry(db.to_string()).or_default(), &l, v);
                }
            }
            Ok(())
        };
        let n = |v: f64| v.max(0.0) as u64;
        fact(&catalogue::POSTGRES_ARCHIVE_READY_SEGMENTS, &|f, _, v| {
            f.archive_ready_segments = Some(n(v))
        })?;
        fact(
            &catalogue::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS,
            &|f, _, v| f.archive_oldest_ready_age_seconds = Some(n(v)),
        )?;
        fact(
            &catalogue::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES,
            &|f, l, v| {
                // The slot holding back the most.
                if f.slot.as_ref().is_none_or(|(_, b)| n(v) > *b) {
                    f.slot = Some((label(l, "slot").unwrap_or("").to_string(), n(v)));
                }
            },
        )?;
        fact(&catalogue::MYSQL_BINLOG_FILES, &|f, _, v| {
            f.binlog_files = Some(n(v))
        })?;
        fact(&catalogue::MYSQL_BINLOG_OLDEST_AGE_SECONDS, &|f, _, v| {
            f.binlog_oldest_age_seconds = Some(n(v))
        })?;
        fact(&catalogue::MYSQL_BINLOG_RETENTION_SECONDS, &|f, _, v| {
            f.binlog_retention_seconds = Some(n(v))
        })?;
        Ok(Filling {
            components,
            mount_growth_1d,
            facts,
        })
    }
}

/// Each mount's stack of layers as last scraped (mounts with a layer below them only): each
/// layer's free bytes, which one limits the mount, and the sizes the layers' own series give.
fn layers(
    api: &Api,
    instance: &str,
    now: i64,
) -> Result<BTreeMap<String, Vec<LayerReport>>, QueryError> {
    let s = sel(instance, "");
    let key = |l: &Labels| {
        (
            label(l, "layer").unwrap_or("").to_string(),
            l.get("name").cloned().unwrap_or_default(),
        )
    };
    let mut stacks: BTreeMap<String, Vec<LayerReport>> = BTreeMap::new();
    for (l, pts) in api.query(
        &format!("{}{s}", catalogue::FILESYSTEM_LAYER_AVAIL_BYTES.name),
        now,
    )? {
        let (Some(mp), Some((_, v))) = (l.get("mountpoint"), pts.last()) else {
            continue;
        };
        let (layer, name) = key(&l);
        stacks.entry(mp.clone()).or_default().push(LayerReport {
            layer,
            name,
            avail_bytes: *v,
            size_bytes: None,
            fill_ratio: None,
            limiting: false,
        });
    }
    // Only the filesystem itself: nothing below it to show.
    stacks.retain(|_, v| v.len() > 1);
    if stacks.is_empty() {
        return Ok(stacks);
    }
    for (l, _) in api.query(
        &format!("{}{s}", catalogue::FILESYSTEM_LIMITING_LAYER_INFO.name),
        now,
    )? {
        let (layer, name) = key(&l);
        if let Some(stack) = l.get("mountpoint").and_then(|mp| stacks.get_mut(mp)) {
            for x in stack.iter_mut() {
                x.limiting = x.layer == layer && x.name == name;
            }
        }
    }
    // Each layer's capacity on the scale of its free bytes, as the daemon's `Limit` has it:
    // the filesystem's used (+ its avail, below), a thin pool's data space, a ZFS pool's size,
    // a dataset's used + available, a btrfs's data used (+ what data can still get).
    let named = |expr: String, layer: &str, from: &str| {
        format!(
            "label_replace(label_replace({expr}, \"layer\", \"{layer}\", \"\", \"\"), \"name\", \"$1\", \"{from}\", \"(.*)\")"
        )
    };
    let q = [
        named(
            format!(
                "{}{s} - {}{s}",
                catalogue::FILESYSTEM_SIZE_BYTES.name,
                catalogue::FILESYSTEM_FREE_BYTES.name
            ),
            "filesystem",
            "__unused__",
        ),
        named(
            format!("{}{s}", catalogue::THIN_POOL_DATA_SIZE_BYTES.name),
            "thin_pool",
            "pool",
        ),
        named(
            format!("{}{s}", catalogue::ZFS_POOL_SIZE_BYTES.name),
            "zfs_pool",
            "pool",
        ),
        named(
            format!(
                "{}{s} + {}{s}",
                catalogue::ZFS_DATASET_USED_BYTES.name,
                catalogue::ZFS_DATASET_AVAILABLE_BYTES.name
            ),
            "zfs_dataset",
            "dataset",
        ),
        named(
            format!(
                "{}{}",
                catalogue::BTRFS_USED_BYTES.name,
                sel(instance, "type=\"data\"")
            ),
            "btrfs",
            "uuid",
        ),
    ]
    .join(" or ");
    let mut sizes: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut fs_used: BTreeMap<String, f64> = BTreeMap::new();
    for (l, pts) in api.query(&q, now)? {
        let Some((_, v)) = pts.last() else { continue };
        let (layer, name) = key(&l);
        if layer == "filesystem" {
            if let Some(mp) = l.get("mountpoint") {
                fs_used.insert(mp.clone(), *v);
            }
        } else {
            sizes.insert((layer, name), *v);
        }
    }
    for (mp, stack) in &mut stacks {
        for x in stack.iter_mut() {
            x.size_bytes = match x.layer.as_str() {
                "filesystem" => fs_used.get(mp).map(|u| u + x.avail_bytes),
                "btrfs" => sizes
                    .get(&(x.layer.clone(), x.name.clone()))
                    .map(|u| u + x.avail_bytes),
                _ => sizes.get(&(x.layer.clone(), x.name.clone())).copied(),
            };
            x.fill_ratio = crate::layers::layer_fill_ratio(x.avail_bytes, x.size_bytes);
        }
        stack.sort_by_key(|x| super::layer_rank(&x.layer));
    }
    Ok(stacks)
}

/// Each filesystem's daily lowest and highest available bytes and its last size.
fn filesystem_days(api: &Api, instance: &str, now: i64) -> Result<Daily<FsLabels>, QueryError> {
    let (start, end) = day_range(now, current::FILESYSTEM_DAYS);
    let fs_sel = sel(instance, "");
    let mut fs: Daily<FsLabels> = BTreeMap::new();
    for (i, q) in [
        format!(
            "min_over_time({}{fs_sel}[1d])",
            catalogue::FILESYSTEM_AVAIL_BYTES.name
        ),
        format!(
            "max_over_time({}{fs_sel}[1d])",
            catalogue::FILESYSTEM_AVAIL_BYTES.name
        ),
        format!(
            "last_over_time({}{fs_sel}[1d])",
            catalogue::FILESYSTEM_SIZE_BYTES.name
        ),
    ]
    .iter()
    .enumerate()
    {
        for (l, pts) in api.query_range(q, start, end, DAY)? {
            let days = fs.entry(fs_labels(&l)).or_default();
            for (t, v) in pts {
                days.entry(t.div_euclid(DAY)).or_default()[i] = Some(v);
            }
        }
    }
    Ok(fs)
}

/// Each filesystem's last value of a filesystem gauge (2 days back at most).
fn last_value(
    api: &Api,
    instance: &str,
    now: i64,
    family: &catalogue::Family,
) -> Result<BTreeMap<FsLabels, f64>, QueryError> {
    Ok(api
        .query(
            &format!(
                "last_over_time({}{}[{}])",
                family.name,
                sel(instance, ""),
                recent()
            ),
            now,
        )?
        .into_iter()
        .filter_map(|(l, p)| Some((fs_labels(&l), p.first()?.1)))
        .collect())
}

/// One filesystem's report from its daily figures and its last (available, free) bytes; None
/// without a day that has all three figures.
fn filesystem(
    mp: String,
    dev: String,
    days: &Days,
    layers: Vec<LayerReport>,
    now_figures: Option<(f64, f64)>,
    now: i64,
) -> Option<FsReport> {
    let uses: Vec<DayUse> = days
        .iter()
        .filter_map(|(&day, v)| {
            let (amin, amax, size) = (v[0]?, v[1]?, v[2]?);
            Some(DayUse {
                day,
                low: size - amax,
                high: size - amin,
                size,
            })
        })
        .collect();
    let last = uses.last().copied()?;
    // Daily figures only from the query API: no runaway leg here (the daemon's own series
    // carry its dates).
    let fc = current::filesystem(&uses, &[], now).unwrap_or_default();
    let full_note = fc
        .predicted_full_unix
        .is_none()
        .then(|| "no date from the query API's daily figures".to_string());
    let seen = super::FsSeen {
        mountpoint: mp,
        device: (!dev.is_empty()).then_some(dev),
        first_seen_unix: uses[0].day * DAY,
        last_seen_unix: Some((last.day * DAY + DAY - 1).min(now)),
        size_bytes: Some(last.size),
        free_avail: now_figures.map(|(avail, free)| (free, avail)),
        days: &uses,
        layers,
    };
    Some(FsReport::new(seen, fc, full_note))
}

/// Every drive with a day of figures, as the store's report shows it.
fn drives(
    api: &Api,
    instance: &str,
    now: i64,
    rules: &[EnduranceRule],
) -> Result<Vec<DriveReport>, QueryError> {
    let days = drive_days(api, instance, now)?;
    let facts = DriveFacts::query(api, instance, now)?;
    Ok(days
        .into_iter()
        .map(|(k, days)| drive(k, &days, &facts, rules, now))
        .collect())
}

/// Drives: one point a day (its last values), as the store's drive_days: wear and the host's
/// and NAND's written bytes.
fn drive_days(api: &Api, instance: &str, now: i64) -> Result<Daily<DriveLabels>, QueryError> {
    let (dstart, dend) = day_range(now, DRIVE_DAYS);
    let fs_sel = sel(instance, "");
    let mut drives: Daily<DriveLabels> = BTreeMap::new();
    for (i, m) in [
        catalogue::DEVICE_WEAR_USED_RATIO.name,
        catalogue::DEVICE_HOST_WRITTEN_BYTES_TOTAL.name,
        catalogue::DEVICE_NAND_WRITTEN_BYTES_TOTAL.name,
    ]
    .iter()
    .enumerate()
    {
        let q = format!("last_over_time({m}{fs_sel}[1d])");
        for (l, pts) in api.query_range(&q, dstart, dend, DAY)? {
            let days = drives.entry(drive_labels(&l)).or_default();
            for (t, v) in pts {
                days.entry(t.min(now).div_euclid(DAY)).or_default()[i] = Some(v);
            }
        }
    }
    Ok(drives)
}

/// Identity and the daemon's own endurance figures: the last value of each (2 days back).
struct DriveFacts {
    models: BTreeMap<DriveLabels, String>,
    sizes: BTreeMap<String, u64>,
    daemon_used: BTreeMap<DriveLabels, f64>,
    daemon_date: BTreeMap<DriveLabels, f64>,
    health: BTreeMap<DriveLabels, DriveHealth>,
}

impl DriveFacts {
    fn query(api: &Api, instance: &str, now: i64) -> Result<DriveFacts, QueryError> {
        let fs_sel = sel(instance, "");
        let last = |m: &str| api.query(&format!("last_over_time({m}{fs_sel}[{}])", recent()), now);
        let models = last(catalogue::DEVICE_INFO.name)?
            .into_iter()
            .filter_map(|(l, _)| Some((drive_labels(&l), label(&l, "model")?.to_string())))
            .collect();
        let sizes = last(catalogue::DISK_SIZE_BYTES.name)?
            .into_iter()
            .filter_map(|(l, p)| Some((label(&l, "device")?.to_string(), p.first()?.1 as u64)))
            .collect();
        let gauge = |m: &str| -> Result<BTreeMap<DriveLabels, f64>, QueryError> {
            Ok(last(m)?
                .into_iter()
                .filter_map(|(l, p)| Some((drive_labels(&l), p.first()?.1)))
                .collect())
        };
        // The drive's health now: the latest of each series (2 days back, as above).
        let mut health: BTreeMap<DriveLabels, DriveHealth> = BTreeMap::new();
        let put = |h: &mut BTreeMap<DriveLabels, DriveHealth>,
                   q: String,
                   set: &dyn Fn(&mut DriveHealth, &Labels, f64)|
         -> Result<(), QueryError> {
            for (l, p) in api.query(&q, now)? {
                if let Some(&(_, v)) = p.first() {
                    set(h.entry(drive_labels(&l)).or_default(), &l, v);
                }
            }
            Ok(())
        };
        let lot = |m: &str, extra: &str| {
            format!("last_over_time({m}{}[{}])", sel(instance, extra), recent())
        };
        put(
            &mut health,
            lot(catalogue::DEVICE_ERROR_LOG_ENTRIES_TOTAL.name, ""),
            &|h, _, v| h.error_log_entries = Some(v),
        )?;
        put(
            &mut health,
            format!(
                "increase({}{}[7d])",
                catalogue::DEVICE_ERROR_LOG_ENTRIES_TOTAL.name,
                fs_sel
            ),
            &|h, _, v| h.error_log_entries_new_7d = Some(v),
        )?;
        put(
            &mut health,
            lot(catalogue::DEVICE_SELF_TEST_LAST_RESULT.name, ""),
            &|h, l, _| {
                if let (Some(t), Some(r)) = (label(l, "type"), label(l, "result")) {
                    h.self_test = Some(format!("{t} {r}"));
                }
            },
        )?;
        put(
            &mut health,
            lot(catalogue::DEVICE_SELF_TEST_LAST_AGE_SECONDS.name, ""),
            &|h, _, v| h.self_test_age_seconds = Some(v),
        )?;
        put(
            &mut health,
            lot(catalogue::DEVICE_TEMPERATURE_CELSIUS.name, ""),
            &|h, _, v| h.temperature_celsius = Some(v),
        )?;
        put(
            &mut health,
            lot(
                catalogue::DEVICE_TEMPERATURE_LIMIT_CELSIUS.name,
                r#"limit="warning""#,
            ),
            &|h, _, v| h.temperature_warning_celsius = Some(v),
        )?;
        put(
            &mut health,
            format!(
                "increase({}{}[7d])",
                catalogue::DEVICE_TEMPERATURE_ABOVE_LIMIT_SECONDS_TOTAL.name,
                sel(instance, r#"limit="warning""#)
            ),
            &|h, _, v| h.above_warning_seconds_7d = Some(v),
        )?;
        put(
            &mut health,
            lot(catalogue::DEVICE_DURABILITY_RISK_INFO.name, ""),
            &|h, l, _| h.durability = label(l, "reason").map(str::to_string),
        )?;
        Ok(DriveFacts {
            models,
            sizes,
            daemon_used: gauge(catalogue::DEVICE_ENDURANCE_USED_RATIO.name)?,
            daemon_date: gauge(catalogue::DEVICE_PREDICTED_ENDURANCE_TIMESTAMP_SECONDS.name)?,
            health,
        })
    }
}

/// One drive's report from its daily figures: the forecast under the config's rated
/// endurance where a rule covers it, else the daemon's endurance gauges.
fn drive(
    (dev, serial, wwn): DriveLabels,
    days: &Days,
    facts: &DriveFacts,
    rules: &[EnduranceRule],
    now: i64,
) -> DriveReport {
    let k = (dev.clone(), serial.clone(), wwn.clone());
    let model = facts.models.get(&k).cloned();
    let capacity = facts.sizes.get(&dev).copied();
    let pts = drive_points(days, now);
    let endurance = rated_endurance(rules, model.as_deref(), capacity);
    let fc = forecast_drive(&pts, now, endurance);
    let (endurance_used, endurance_date) = if endurance.is_some() {
        (
            fc.endurance_consumed_ratio,
            fc.predicted_endurance_exhausted_unix,
        )
    } else {
        (
            facts.daemon_used.get(&k).copied(),
            facts.daemon_date.get(&k).map(|t| t.round() as i64),
        )
    };
    let wear: Vec<(i64, f64)> = pts
        .iter()
        .filter_map(|p| Some((p.t, p.wear_used_ratio?.last)))
        .collect();
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    DriveReport {
        device: some(&dev),
        model,
        serial: some(&serial),
        wwn: some(&wwn),
        capacity_bytes: capacity,
        first_seen_unix: pts.first().map(|p| p.t).unwrap_or(now),
        last_seen_unix: pts.last().map(|p| p.t),
        wear_used_ratio: wear.last().map(|w| w.1),
        wear_rate_per_day: fc.wear_rate_per_day,
        predicted_wear_out_unix: fc.predicted_wear_out_unix,
        wear_out_earliest_unix: fc.wear_out_earliest_unix,
        wear_out_latest_unix: fc.wear_out_latest_unix,
        host_written_bytes: pts.iter().rev().find_map(|p| p.host_written_bytes),
        endurance_used_ratio: endurance_used,
        predicted_endurance_exhausted_unix: endurance_date,
        write_amplification_30d: fc.write_amplification_30d,
        host_bytes_per_day_30d: fc.host_bytes_per_day_30d,
        discard_bursts: 0,
        last_discard_unix: None,
        last_discard_bytes: None,
        wear,
        health: facts.health.get(&k).cloned().unwrap_or_default(),
    }
}

/// A drive's daily figures as the store's points (one a day, at the day's last second or now).
fn drive_points(days: &Days, now: i64) -> Vec<DrivePoint> {
    days.iter()
        .map(|(&day, v)| DrivePoint {
            t: (day * DAY + DAY - 1).min(now),
            hourly: true,
            wear_used_ratio: v[0].map(Stat::one),
            spare_ratio: None,
            temperature_celsius: None,
            host_written_bytes: v[1],
            nand_written_bytes: v[2],
            media_errors: None,
            power_on_hours: None,
            discarded_bytes: None,
        })
        .collect()
}

/// Latency by fill from the per-run series, with each group's TRIM and idle recoveries.
fn degradation(api: &Api, instance: &str, now: i64) -> Result<Vec<Group>, QueryError> {
    let (from, mut groups) = curves(api, instance, now)?;
    let mut events = recoveries(api, instance, from, now)?;
    for g in &mut groups {
        let k = (
            g.probe.as_str().to_string(),
            g.mountpoint.clone().unwrap_or_default(),
            g.device.clone().unwrap_or_default(),
        );
        if let Some((trim, idle)) = events.remove(&k) {
            (g.trim, g.idle) = (trim, idle);
        }
    }
    Ok(groups)
}

/// Latency by fill from the per-run series, 30 days at a time back to the first run; and
/// where that search began (a day before the first run, or 2 years back).
fn curves(api: &Api, instance: &str, now: i64) -> Result<(i64, Vec<Group>), QueryError> {
    let first = api.query(
        &format!(
            "min_over_time(timestamp({}{})[{}d:1h])",
            catalogue::PROBE_RUN_FILL_RATIO.name,
            sel(instance, ""),
            DRIVE_DAYS
        ),
        now,
    );
    // The subquery above is only a bound; without it, start DRIVE_DAYS back.
    let from = first
        .ok()
        .and_then(|r| {
            r.iter()
                .filter_map(|(_, p)| p.first().map(|x| x.1 as i64))
                .min()
        })
        .unwrap_or(now - DRIVE_DAYS * DAY)
        - DAY;
    type Key = (String, String, String);
    // Per run: fill, p50, p99, untrimmed share.
    let mut runs: BTreeMap<Key, BTreeMap<i64, [Option<f64>; 4]>> = BTreeMap::new();
    let key = |l: &Labels| {
        (
            label(l, "probe").unwrap_or("").to_string(),
            label(l, "mountpoint").unwrap_or("").to_string(),
            label(l, "device").unwrap_or("").to_string(),
        )
    };
    let mut t = now;
    while t > from {
        let span = CHUNK.min(t - from);
        for (i, m) in [
            format!(
                "{}{}",
                catalogue::PROBE_RUN_FILL_RATIO.name,
                sel(instance, "")
            ),
            format!(
                "{}{}",
                catalogue::PROBE_LAST_LATENCY_SECONDS.name,
                sel(instance, "quantile=\"0.5\"")
            ),
            format!(
                "{}{}",
                catalogue::PROBE_LAST_LATENCY_SECONDS.name,
                sel(instance, "quantile=\"0.99\"")
            ),
            format!(
                "{}{}",
                catalogue::PROBE_RUN_UNTRIMMED_RATIO.name,
                sel(instance, "")
            ),
        ]
        .iter()
        .enumerate()
        {
            for (l, pts) in api.query(&format!("{m}[{span}s]"), t)? {
                let r = runs.entry(key(&l)).or_default();
                for (ts, v) in pts {
                    r.entry(ts).or_default()[i] = Some(v);
                }
            }
        }
        t -= span;
    }
    let groups = runs
        .into_iter()
        .filter_map(|((probe, mp, dev), rs)| {
            let kind = ProbeKind::parse(&probe)?;
            let (mut c, mut untrimmed) = (Curve::default(), Curve::default());
            let mut n = 0;
            let mut max_fill: Option<f64> = None;
            for v in rs.values() {
                // A run too short for a p99 was exported without one; one without its
                // untrimmed share counts as trimmed, as in the store's report.
                if let (Some(f), Some(p50)) = (v[0], v[1]) {
                    let curve = if not_trimmed(v[3]) {
                        &mut untrimmed
                    } else {
                        if (0.0..=1.0).contains(&f) {
                            max_fill = Some(max_fill.map_or(f, |m| m.max(f)));
                        }
                        &mut c
                    };
                    curve.add(Some(f), p50, v[2]);
                    n += 1;
                }
            }
            (n > 0).then(|| Group {
                target: mp.clone(),
                mountpoint: Some(mp),
                device: (!dev.is_empty()).then_some(dev),
                drive: None,
                probe: kind,
                runs: n,
                first_run: *rs.keys().next().unwrap_or(&now),
                last_run: *rs.keys().last().unwrap_or(&now),
                curve: c.bins(),
                curve_max_fill: max_fill,
                curve_untrimmed: untrimmed.bins(),
                trim: Vec::new(),
                idle: Vec::new(),
            })
        })
        .collect();
    Ok((from, groups))
}

/// Recoveries of one probe series (probe, mountpoint, device): around TRIMs and idle periods.
type Events = BTreeMap<(String, String, String), (Vec<Recovery>, Vec<Recovery>)>;

/// The TRIM and idle recoveries since `from`, from the daemon's recovery gauges (each holds
/// the last event's figures until the next one; `ssdwatch history export` writes one sample
/// per event): asked at one point an hour, 30 days a query, and told apart by the event's
/// start. Two events within one hour of each other show as the later one. Run counts are not
/// exported: they are 0 here.
fn recoveries(api: &Api, instance: &str, from: i64, now: i64) -> Result<Events, QueryError> {
    type Point = [Option<f64>; 4];
    let mut points: BTreeMap<(usize, String, String, String), BTreeMap<i64, Point>> =
        BTreeMap::new();
    let end = from + (now - from).div_euclid(HOUR) * HOUR + HOUR;
    for (which, families) in RECOVERY_FAMILIES.iter().enumerate() {
        let mut s = from;
        while s <= end {
            let e = (s + CHUNK - HOUR).min(end);
            for (i, def) in families.iter().enumerate() {
                let q = format!("last_over_time({}{}[1h])", def.name, sel(instance, ""));
                for (l, pts) in api.query_range(&q, s, e, HOUR)? {
                    let k = (
                        which,
                        label(&l, "probe").unwrap_or("").to_string(),
                        label(&l, "mountpoint").unwrap_or("").to_string(),
                        label(&l, "device").unwrap_or("").to_string(),
                    );
                    let series = points.entry(k).or_default();
                    for (t, v) in pts {
                        series.entry(t).or_default()[i] = Some(v);
                    }
                }
            }
            s = e + HOUR;
        }
    }
    let mut out = Events::new();
    for ((which, probe, mp, dev), series) in points {
        // One event per start: the last figures seen for it.
        let mut by_start: BTreeMap<i64, Recovery> = BTreeMap::new();
        for p in series.values() {
            if let [Some(ratio), Some(start), Some(before), Some(after)] = *p {
                let start = start as i64;
                by_start.insert(
                    start,
                    Recovery {
                        start,
                        end: start,
                        runs_before: 0,
                        runs_after: 0,
                        before_seconds: before,
                        after_seconds: after,
                        ratio,
                    },
                );
            }
        }
        let e = out.entry((probe, mp, dev)).or_default();
        let list = if which == 0 { &mut e.0 } else { &mut e.1 };
        list.extend(by_start.into_values());
    }
    Ok(out)
}

/// One row of the fleet's view.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FleetRow {
    pub instance: String,
    /// Mount point, or drive (device, serial).
    pub what: String,
    pub when_unix: i64,
}

/// The fleet's filesystems by predicted-full date and drives by wear-out date, soonest first,
/// `limit` of each: two instant queries (`bottomk`) over the daemons' forecast gauges, whose
/// cost is one series per filesystem or drive with a forecast, whatever the history's length.
pub fn fleet(
    api: &Api,
    now: i64,
    limit: usize,
) -> Result<(Vec<FleetRow>, Vec<FleetRow>), QueryError> {
    let rows = |q: String, what: &dyn Fn(&Labels) -> String| -> Result<Vec<FleetRow>, QueryError> {
        let mut v: Vec<FleetRow> = api
            .query(&q, now)?
            .into_iter()
            .filter_map(|(l, p)| {
                Some(FleetRow {
                    instance: label(&l, "instance").unwrap_or("").to_string(),
                    what: what(&l),
                    // A timestamp gauge read back as a float: to the nearest second.
                    when_unix: p.first()?.1.round() as i64,
                })
            })
            .collect();
        v.sort_by(|a, b| {
            (a.when_unix, &a.instance, &a.what).cmp(&(b.when_unix, &b.instance, &b.what))
        });
        Ok(v)
    };
    let fs = rows(
        format!(
            "bottomk({limit}, last_over_time({}[2h]))",
            catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS.name
        ),
        &|l| label(l, "mountpoint").unwrap_or("?").to_string(),
    )?;
    let drives = rows(
        format!(
            "bottomk({limit}, last_over_time({}[2h]))",
            catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS.name
        ),
        &|l| {
            format!(
                "{} (serial {})",
                label(l, "device").unwrap_or("?"),
                label(l, "serial").unwrap_or("?")
            )
        },
    )?;
    Ok((fs, drives))
}
