//! `ssdwatch history import`: fills this host's history store from a Prometheus-compatible
//! query API: node_exporter's filesystem series of `--instance` (else ssdwatch's own), at one
//! row an hour, before the daemon's own first sample of each filesystem. Everything is asked
//! and checked first; the store is written in one transaction, or not at all.

use crate::catalogue;
use crate::config::Config;
use crate::history::store::{FILE_NAME, ImportHour};
use crate::history::{FsId, Store};
use crate::query::{Answer, Api, quote};
use crate::snapshot::unix_now;
use crate::time::{DAY, HOUR};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `ssdwatch history import`.
#[derive(Debug, Clone)]
pub(crate) struct ImportArgs {
    pub prometheus: String,
    pub instance: String,
    pub range: Duration,
    pub store: Option<PathBuf>,
    pub http_config_file: Option<PathBuf>,
}

/// The longest range taken: a range query at one point an hour stays under Prometheus' 11,000
/// points a series.
pub(crate) const MAX_RANGE_DAYS: u64 = 400;
/// A filesystem whose imported size differs from the store's by more than this share is not
/// the same filesystem (another host's, a reformatted disk).
const SIZE_TOLERANCE: f64 = 0.02;

/// node_exporter's names (not ssdwatch's families: declared by node_exporter).
const NODE_SOURCE: [&str; 3] = [
    "node_filesystem_size_bytes",
    "node_filesystem_avail_bytes",
    "node_filesystem_free_bytes",
];

/// A PromQL regex matching exactly these strings.
fn any_of(values: &[&str]) -> String {
    let esc: Vec<String> = values
        .iter()
        .map(|v| {
            v.chars()
                .flat_map(|c| {
                    let meta = "\\.+*?()|[]{}^$".contains(c);
                    meta.then_some('\\').into_iter().chain([c])
                })
                .collect()
        })
        .collect();
    esc.join("|")
}

/// Each mount point's device label and hours, from the ten answers of [`queries`].
type Hours = BTreeMap<String, (String, Vec<ImportHour>)>;

/// The hours of each mount point from the answers, in [`queries`]' order; an hour misses
/// when one of its figures does. Pure.
fn assemble(answers: &[Answer]) -> Hours {
    // (mountpoint, hour) -> figures
    let mut cells: BTreeMap<(String, i64), [Option<f64>; 10]> = BTreeMap::new();
    let mut devices: BTreeMap<String, String> = BTreeMap::new();
    for (i, a) in answers.iter().enumerate() {
        for (labels, points) in a {
            let Some(mp) = labels.get("mountpoint") else {
                continue;
            };
            if let Some(d) = labels.get("device") {
                devices.insert(mp.clone(), d.clone());
            }
            for &(t, v) in points {
                if v.is_finite() && v >= 0.0 {
                    cells.entry((mp.clone(), t - (HOUR - 1))).or_default()[i] = Some(v);
                }
            }
        }
    }
    let mut out = Hours::new();
    for ((mp, hour), c) in cells {
        let r = |v: f64| v.round() as i64;
        let [
            Some(size),
            Some(amin),
            Some(amax),
            Some(amean),
            Some(alast),
            Some(fmin),
            Some(fmax),
            Some(fmean),
            Some(flast),
            Some(n),
        ] = c
        else {
            continue;
        };
        let dev = devices.get(&mp).cloned().unwrap_or_default();
        out.entry(mp)
            .or_insert_with(|| (dev, Vec::new()))
            .1
            .push(ImportHour {
                hour,
                size: r(size),
                avail: [r(amin), r(amax), r(amean), r(alast)],
                free: [r(fmin), r(fmax), r(fmean), r(flast)],
                samples: r(n),
            });
    }
    out
}

/// The ten hourly expressions over `names` (size, avail, free) for `sel`.
fn queries(names: [&str; 3], sel: &str) -> Vec<String> {
    let [size, avail, free] = names;
    let mut q = vec![format!("last_over_time({size}{sel}[1h])")];
    for m in [avail, free] {
        for f in ["min", "max", "avg", "last"] {
            q.push(format!("{f}_over_time({m}{sel}[1h])"));
        }
    }
    q.push(format!("count_over_time({avail}{sel}[1h])"));
    q
}

/// `ssdwatch history import`; exit code 0, or 1 with one line on stderr.
pub(crate) fn run(args: &ImportArgs, config: &Config) -> i32 {
    match import(args, config) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ssdwatch history import: {e}");
            1
        }
    }
}

fn import(args: &ImportArgs, config: &Config) -> Result<(), String> {
    let days = args.range.as_secs().div_ceil(DAY as u64);
    if !(1..=MAX_RANGE_DAYS).contains(&days) {
        return Err(format!(
            "--range {}: between 1 day and {MAX_RANGE_DAYS} days",
            humantime::format_duration(args.range)
        ));
    }
    let dir = match &args.store {
        Some(f) if f.file_name().is_some_and(|n| n == FILE_NAME) => {
            f.parent().map(PathBuf::from).unwrap_or_default()
        }
        Some(f) => {
            return Err(format!(
                "--store {}: the store's file is named {FILE_NAME}",
                f.display()
            ));
        }
        None => config.state_dir.clone(),
    };
    let path = dir.join(FILE_NAME);
    if !path.exists() {
        return Err(format!(
            "{}: no history store yet: start the daemon once (its first sample records this host's filesystems), then import",
            path.display()
        ));
    }
    let mut store = Store::open(&dir, &config.history).map_err(|e| e.to_string())?;
    let filesystems = store.filesystems().map_err(|e| e.to_string())?;
    // One series per mount point: the newest (a reformatted disk's older series stays).
    let mut by_mount: BTreeMap<String, (FsId, i64)> = BTreeMap::new();
    for f in &filesystems {
        let cutoff = store
            .import_cutoff(f.id)
            .map_err(|e| e.to_string())?
            .unwrap_or(f.first_seen);
        by_mount.insert(f.key.mountpoint.clone(), (f.id, cutoff));
    }
    if by_mount.is_empty() {
        return Err(format!(
            "{}: the store knows no filesystem yet: start the daemon once, then import",
            path.display()
        ));
    }
    let now = unix_now() as i64;
    let start = (now - days as i64 * DAY).div_euclid(HOUR) * HOUR;
    let end = by_mount.values().map(|v| v.1).max().unwrap_or(now);
    if end <= start + HOUR {
        return Err("nothing to import: the daemon's own history covers the whole range".into());
    }
    let api = Api::with_config(&args.prometheus, args.http_config_file.as_deref())
        .map_err(|e| e.to_string())?;
    let mounts: Vec<&str> = by_mount.keys().map(String::as_str).collect();
    let sel = format!(
        "{{instance={},mountpoint=~{}}}",
        quote(&args.instance),
        quote(&any_of(&mounts))
    );
    let ours = [
        catalogue::FILESYSTEM_SIZE_BYTES.name,
        catalogue::FILESYSTEM_AVAIL_BYTES.name,
        catalogue::FILESYSTEM_FREE_BYTES.name,
    ];
    let mut found = None;
    for (names, what) in [(NODE_SOURCE, "node_exporter"), (ours, "ssdwatch")] {
        let mut answers = Vec::new();
        for q in queries(names, &sel) {
            answers.push(
                api.query_range(&q, start + HOUR - 1, end - 1, HOUR)
                    .map_err(|e| e.to_string())?,
            );
        }
        let hours = assemble(&answers);
        if !hours.is_empty() {
            found = Some((hours, what));
            break;
        }
    }
    let Some((hours, what)) = found else {
        return Err(format!(
            "{}: no filesystem series of instance {:?} ({} or {}) at this host's mount points ({}) from {} to {}: check --instance (node_exporter's instance label, such as host:9100)",
            api.base(),
            args.instance,
            NODE_SOURCE[1],
            ours[1],
            mounts.join(", "),
            crate::report::date(start),
            crate::report::date(end)
        ));
    };
    // Checked before anything is written: the same filesystem, by its size now.
    let mut batches = Vec::new();
    println!(
        "{what} series of instance {:?} at {} -> this host's filesystems:",
        args.instance,
        api.base()
    );
    for (mp, (device, hs)) in &hours {
        let Some(&(id, cutoff)) = by_mount.get(mp) else {
            continue;
        };
        let stored = store
            .fs_days(id, cutoff, now)
            .map_err(|e| e.to_string())?
            .last()
            .map(|d| d.size);
        let theirs = hs.last().map(|h| h.size as f64);
        if let (Some(a), Some(b)) = (stored, theirs)
            && (a - b).abs() > SIZE_TOLERANCE * a
        {
            return Err(format!(
                "{}: {mp} of instance {:?} is {:.1} GiB, this host's is {:.1} GiB: not the same filesystem (wrong --instance, or a disk replaced); nothing written",
                api.base(),
                args.instance,
                b / (1u64 << 30) as f64,
                a / (1u64 << 30) as f64
            ));
        }
        let info = filesystems.iter().find(|f| f.id == id);
        println!(
            "  {mp} (device {device}) -> store filesystem {} {mp} (uuid {}, device {}): {} hours before {}",
            id.0,
            info.and_then(|f| f.key.uuid.as_deref())
                .unwrap_or("unknown"),
            info.and_then(|f| f.device.as_deref()).unwrap_or("unknown"),
            hs.iter().filter(|h| h.hour < cutoff).count(),
            crate::report::date(cutoff)
        );
        batches.push((id, hs.clone()));
    }
    let written = store
        .import_fs_hours(&batches, api.base(), &args.instance, now)
        .map_err(|e| e.to_string())?;
    let n: usize = written.iter().map(|w| w.1).sum();
    println!("imported {n} hourly rows");
    Ok(())
}
