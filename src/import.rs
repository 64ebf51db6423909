//! Filling this host's history store from a Prometheus-compatible query API
//! (`ssdwatch history import`, and the daemon's import at first start): node_exporter's
//! filesystem series of an instance (else ssdwatch's own), at one row an hour, before the
//! daemon's own first sample of each filesystem. Everything is asked and checked first; the
//! store is written in one transaction, or not at all. It prints nothing: what it has to say
//! goes to the caller's line sink (stdout for the command, the log for the daemon).

use crate::catalogue;
use crate::history::store::ImportHour;
use crate::history::{FsId, HistoryConfig, Store};
use crate::query::{Answer, Api, quote};
use crate::time::{DAY, HOUR};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to import and from where.
#[derive(Debug, Clone)]
pub(crate) struct ImportArgs {
    pub prometheus: String,
    pub instance: String,
    pub range: Duration,
    pub http_config_file: Option<PathBuf>,
}

/// What an import wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Imported {
    /// Hourly rows written, all filesystems together.
    pub rows: usize,
    /// Filesystems that got any.
    pub filesystems: usize,
}

/// The longest range taken: a range query at one point an hour stays under Prometheus' 11,000
/// points a series.
pub(crate) const MAX_RANGE_DAYS: u64 = crate::history::MAX_IMPORT_DAYS;
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
                    cells.entry((mp.clone(), hour_of(t))).or_default()[i] = Some(v);
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

/// The hour a point of a `[1h]` window evaluated at `t` stands for: the hour the window
/// `(t - 1h, t]` lies in. Asked at the last second of each hour (`H + 3599`), that is `H`; a
/// server that moved the evaluation times onto multiples of the step (VictoriaMetrics'
/// cache alignment, where `nocache` is not honoured) answers at `H + 3600` for the same
/// hour, which maps to `H` too instead of to no hour at all.
fn hour_of(t: i64) -> i64 {
    (t - 1).div_euclid(HOUR) * HOUR
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

/// Imports into the store in `dir` (which the daemon made), at `now`; each line of the
/// mapping and the outcome goes to `say`. An error names the server or the store, in one line.
pub(crate) fn import(
    args: &ImportArgs,
    dir: &Path,
    history: &HistoryConfig,
    now: i64,
    say: &mut dyn FnMut(String),
) -> Result<Imported, String> {
    let days = args.range.as_secs().div_ceil(DAY as u64);
    if !(1..=MAX_RANGE_DAYS).contains(&days) {
        return Err(format!(
            "range {}: between 1 day and {MAX_RANGE_DAYS} days",
            humantime::format_duration(args.range)
        ));
    }
    let path = dir.join(crate::history::store::FILE_NAME);
    if !path.exists() {
        return Err(format!(
            "{}: no history store yet: start the daemon once (its first sample records this host's filesystems), then import",
            path.display()
        ));
    }
    let mut store = Store::open(dir, history).map_err(|e| e.to_string())?;
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
    say(format!(
        "{what} series of instance {:?} at {} -> this host's filesystems:",
        args.instance,
        api.base()
    ));
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
        say(format!(
            "  {mp} (device {device}) -> store filesystem {} {mp} (uuid {}, device {}): {} hours before {}",
            id.0,
            info.and_then(|f| f.key.uuid.as_deref())
                .unwrap_or("unknown"),
            info.and_then(|f| f.device.as_deref()).unwrap_or("unknown"),
            hs.iter().filter(|h| h.hour < cutoff).count(),
            crate::report::date(cutoff)
        ));
        batches.push((id, hs.clone()));
    }
    let written = store
        .import_fs_hours(&batches, api.base(), &args.instance, now)
        .map_err(|e| e.to_string())?;
    let rows: usize = written.iter().map(|w| w.1).sum();
    say(format!("imported {rows} hourly rows"));
    Ok(Imported {
        rows,
        filesystems: written.iter().filter(|w| w.1 > 0).count(),
    })
}

/// How long the import at first start waits for the daemon's first filesystem sample to be in
/// the store (the filesystem collector samples within seconds of the start).
const FIRST_SAMPLE_WAIT: Duration = Duration::from_secs(300);
/// How often it looks, each time asking the history thread for a commit.
const FIRST_SAMPLE_POLL: Duration = Duration::from_secs(2);

/// What the import at first start does, decided from what the store holds: the import
/// runs once, while the daemon's own history is younger than the range; an import that wrote
/// rows (marked in `fs_import`) is never run again. Pure.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AtStart {
    Import,
    /// Why not, for the log.
    Skip(String),
}

/// The plan from the store's import marks and its filesystems' first samples (`first_seen`).
pub(crate) fn plan_at_start(
    marks: usize,
    first_seen: &[i64],
    range: Duration,
    now: i64,
) -> AtStart {
    if marks > 0 {
        return AtStart::Skip(format!(
            "the store holds imported history of {marks} filesystem(s) already"
        ));
    }
    let days = range.as_secs().div_ceil(DAY as u64) as i64;
    match first_seen.iter().max() {
        None => AtStart::Skip("the store knows no filesystem".into()),
        Some(&newest) if newest <= now - days * DAY + HOUR => AtStart::Skip(format!(
            "the daemon's own history covers the range ({})",
            humantime::format_duration(range)
        )),
        Some(_) => AtStart::Import,
    }
}

/// Runs `history.import` on a thread of its own, so the daemon serves at once: it waits for
/// the first filesystem sample to be committed (asking the history thread for the commit),
/// imports as `ssdwatch history import` would, logs the mapping and the rows written, and has
/// the forecasts recomputed. A failure is one error line; the daemon goes on without the
/// import, and the next start tries again. `stop`: the daemon's stop signal.
pub(crate) fn spawn_at_first_start(
    cfg: &crate::history::ImportConfig,
    state_dir: PathBuf,
    history: HistoryConfig,
    sink: crate::history::service::Sink,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let args = ImportArgs {
        prometheus: cfg.prometheus.clone(),
        instance: cfg.instance.clone(),
        range: cfg.range,
        http_config_file: cfg.http_config_file.clone(),
    };
    // Not the door: one short-lived thread for the daemon's first minutes, whose only
    // blocking calls are the query client's (bounded by its timeouts) and the store's.
    std::thread::Builder::new()
        .name("ssdwatch-import".into())
        .spawn(move || at_first_start(&args, &state_dir, &history, &sink, &stop))
        .map(|_| ())
}

fn at_first_start(
    args: &ImportArgs,
    dir: &Path,
    history: &HistoryConfig,
    sink: &crate::history::service::Sink,
    stop: &tokio::sync::watch::Receiver<bool>,
) {
    let server = &args.prometheus;
    let path = dir.join(crate::history::store::FILE_NAME);
    let deadline = std::time::Instant::now() + FIRST_SAMPLE_WAIT;
    let (marks, first_seen) = loop {
        if *stop.borrow() {
            return;
        }
        sink.flusher().flush(Duration::from_secs(30));
        let known = Store::open_read_only(&path).and_then(|s| {
            let fs = s.filesystems()?;
            Ok((
                s.fs_imports()?.len(),
                fs.iter().map(|f| f.first_seen).collect::<Vec<_>>(),
            ))
        });
        match known {
            Ok((m, f)) if m > 0 || !f.is_empty() => break (m, f),
            _ if std::time::Instant::now() >= deadline => {
                tracing::error!(
                    server = %server,
                    "history import at first start: {} holds no filesystem sample after {} (is the filesystem collector off, or the store unwritable?); not imported",
                    path.display(),
                    humantime::format_duration(FIRST_SAMPLE_WAIT)
                );
                return;
            }
            _ => std::thread::sleep(FIRST_SAMPLE_POLL),
        }
    };
    let now = crate::snapshot::unix_now() as i64;
    match plan_at_start(marks, &first_seen, args.range, now) {
        AtStart::Skip(why) => {
            tracing::info!(server = %server, "history import at first start: not run: {why}");
            return;
        }
        AtStart::Import => {}
    }
    let mut say = |line: String| tracing::info!("history import: {}", line.trim_start());
    match import(args, dir, history, now, &mut say) {
        Ok(n) => {
            tracing::info!(
                server = %server,
                instance = %args.instance,
                rows = n.rows,
                filesystems = n.filesystems,
                "history import at first start: done"
            );
            sink.reforecast();
        }
        Err(e) => tracing::error!(
            "history import at first start: {e}; the daemon goes on without it (the next start tries again; `ssdwatch history import` runs it by hand)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_import_at_start_runs_once_on_a_young_store() {
        let now = 100 * DAY;
        let range = Duration::from_secs(60 * DAY as u64);
        assert_eq!(plan_at_start(0, &[now - 60], range, now), AtStart::Import);
        // Imported once: never again.
        assert!(matches!(
            plan_at_start(2, &[now - 60], range, now),
            AtStart::Skip(w) if w.contains("imported history of 2")
        ));
        // The daemon's own history is as long as the range: nothing left to import.
        assert!(matches!(
            plan_at_start(0, &[now - 61 * DAY], range, now),
            AtStart::Skip(w) if w.contains("covers the range")
        ));
        // A mount first seen today on a host watched for months: its history can be imported.
        assert_eq!(
            plan_at_start(0, &[now - 90 * DAY, now - 60], range, now),
            AtStart::Import
        );
        assert!(matches!(
            plan_at_start(0, &[], range, now),
            AtStart::Skip(_)
        ));
    }

    #[test]
    fn an_hour_is_read_from_the_asked_time_or_from_one_moved_onto_the_step() {
        let h = 1_800_000_000 / HOUR * HOUR;
        assert_eq!(hour_of(h + HOUR - 1), h);
        assert_eq!(hour_of(h + HOUR), h);
        assert_eq!(hour_of(h + 1), h);
    }
}
