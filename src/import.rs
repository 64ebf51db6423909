//! Filling this host's history store from a Prometheus-compatible query API
//! (`ssdwatch history import`, and the daemon's import at first start): node_exporter's
//! filesystem series of an instance (else ssdwatch's own), at one row an hour, before the
//! daemon's own first sample of each filesystem. Everything is asked and checked first; the
//! store is written in one transaction, or not at all. It prints nothing: what it has to say
//! goes to the caller's line sink (stdout for the command, the log for the daemon).

use crate::catalogue;
use crate::history::store::{DriveImportHour, ImportHour};
use crate::history::{DriveId, DriveKey, FsId, HistoryConfig, Store};
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
    /// Hourly rows written, all drives together.
    pub drive_rows: usize,
    /// Drives that got any.
    pub drives: usize,
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
    let drives = drive_batches(&api, &args.instance, &store, start, now, say)?;
    let (fs_written, drives_written) = store
        .import_hours(&batches, &drives, api.base(), &args.instance, now)
        .map_err(|e| e.to_string())?;
    let rows: usize = fs_written.iter().map(|w| w.1).sum();
    let drive_rows: usize = drives_written.iter().map(|w| w.1).sum();
    say(format!(
        "imported {rows} hourly rows of filesystems, {drive_rows} of drives"
    ));
    Ok(Imported {
        rows,
        filesystems: fs_written.iter().filter(|w| w.1 > 0).count(),
        drive_rows,
        drives: drives_written.iter().filter(|w| w.1 > 0).count(),
    })
}

/// A drive as the server's series name it: ssdwatch's `serial` and `wwn` labels ("" when
/// unknown), and the model its `ssdwatch_device_info` gives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RemoteDrive {
    serial: String,
    wwn: String,
}

/// Each drive's kernel name (its newest `device` label) and hours, from the answers of
/// [`drive_queries`].
type DriveHours = BTreeMap<RemoteDrive, (String, Vec<DriveImportHour>)>;

/// The drive figures asked, in [`drive_queries`]' order: three gauges (min, max, mean, last
/// each), four counters (last), then two sample counts.
const DRIVE_GAUGES: [&str; 3] = [
    catalogue::DEVICE_WEAR_USED_RATIO.name,
    catalogue::DEVICE_SPARE_AVAILABLE_RATIO.name,
    catalogue::DEVICE_TEMPERATURE_CELSIUS.name,
];
const DRIVE_COUNTERS: [&str; 4] = [
    catalogue::DEVICE_HOST_WRITTEN_BYTES_TOTAL.name,
    catalogue::DEVICE_NAND_WRITTEN_BYTES_TOTAL.name,
    catalogue::DEVICE_MEDIA_ERRORS_TOTAL.name,
    catalogue::DEVICE_POWER_ON_SECONDS_TOTAL.name,
];
const DRIVE_QUERIES: usize = 3 * 4 + 4 + 2;

/// The hourly expressions of ssdwatch's drive series for `sel`.
fn drive_queries(sel: &str) -> Vec<String> {
    let mut q = Vec::with_capacity(DRIVE_QUERIES);
    for g in DRIVE_GAUGES {
        for f in ["min", "max", "avg", "last"] {
            q.push(format!("{f}_over_time({g}{sel}[1h])"));
        }
    }
    for c in DRIVE_COUNTERS {
        q.push(format!("last_over_time({c}{sel}[1h])"));
    }
    for m in [DRIVE_GAUGES[0], DRIVE_COUNTERS[0]] {
        q.push(format!("count_over_time({m}{sel}[1h])"));
    }
    q
}

/// The hours of each drive from the answers, in [`drive_queries`]' order: an hour with any
/// figure is kept, a gauge only with its four aggregates. A series without `serial` or `wwn`
/// (a drive the daemon cannot follow) is left out. Pure.
fn assemble_drives(answers: &[Answer]) -> DriveHours {
    let mut cells: BTreeMap<(RemoteDrive, i64), [Option<f64>; DRIVE_QUERIES]> = BTreeMap::new();
    let mut devices: BTreeMap<RemoteDrive, String> = BTreeMap::new();
    for (i, a) in answers.iter().enumerate().take(DRIVE_QUERIES) {
        for (labels, points) in a {
            let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
            let id = RemoteDrive {
                serial: get("serial"),
                wwn: get("wwn"),
            };
            if id.serial.is_empty() && id.wwn.is_empty() {
                continue;
            }
            // The newest kernel name wins: the last point decides.
            devices.insert(id.clone(), get("device"));
            for &(t, v) in points {
                if v.is_finite() && v >= 0.0 {
                    cells.entry((id.clone(), hour_of(t))).or_default()[i] = Some(v);
                }
            }
        }
    }
    let mut out = DriveHours::new();
    for ((id, hour), c) in cells {
        let gauge = |g: usize| -> Option<[f64; 4]> {
            Some([c[4 * g]?, c[4 * g + 1]?, c[4 * g + 2]?, c[4 * g + 3]?])
        };
        let h = DriveImportHour {
            hour,
            wear_used_ratio: gauge(0),
            spare_ratio: gauge(1),
            temperature_celsius: gauge(2),
            host_written_bytes: c[12],
            nand_written_bytes: c[13],
            media_errors: c[14],
            // ssdwatch exports seconds; the store keeps hours.
            power_on_hours: c[15].map(|s| (s / HOUR as f64).floor()),
            samples: c[16].into_iter().chain(c[17]).fold(0.0, f64::max).round() as i64,
        };
        let empty = h.wear_used_ratio.is_none()
            && h.spare_ratio.is_none()
            && h.temperature_celsius.is_none()
            && c[12..16].iter().all(Option::is_none);
        if empty {
            continue;
        }
        let dev = devices.get(&id).cloned().unwrap_or_default();
        out.entry(id).or_insert_with(|| (dev, Vec::new())).1.push(h);
    }
    out
}

/// Whether the server's drive is the store's: the same WWN where both know one, else the same
/// serial number, and the same model where both know one (the store's own rule for a drive's
/// identity, never the kernel name). Pure.
fn same_drive(ours: &DriveKey, theirs: &RemoteDrive, their_model: Option<&str>) -> bool {
    fn known(v: &Option<String>) -> Option<&str> {
        v.as_deref().filter(|s| !s.is_empty())
    }
    if let Some(w) = known(&ours.wwn)
        && !theirs.wwn.is_empty()
    {
        return w.eq_ignore_ascii_case(&theirs.wwn);
    }
    match known(&ours.serial) {
        Some(s) if s == theirs.serial => match (known(&ours.model), their_model) {
            (Some(a), Some(b)) if !b.is_empty() => a == b,
            _ => true,
        },
        _ => false,
    }
}

/// A PromQL regex for the instance labels of the host of `instance`: its host part with any
/// port (ssdwatch's `db7:10150` beside node_exporter's `db7:9100`).
fn host_instances(instance: &str) -> String {
    let host = match instance.rsplit_once(':') {
        Some((h, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || h.ends_with(']')) =>
        {
            h
        }
        _ => instance,
    };
    format!("{}(:[0-9]+)?", any_of(&[host]))
}

/// The imported hours of each drive the store knows, from ssdwatch's own drive series of
/// this host where the server kept them; the mapping printed. A drive whose imported history
/// ends above what the daemon read at its first sample (more wear, more bytes written) is not
/// the same drive, and the whole import is refused. Drives with no series are said, not an
/// error (many fleets keep only node_exporter).
fn drive_batches(
    api: &Api,
    instance: &str,
    store: &Store,
    start: i64,
    now: i64,
    say: &mut dyn FnMut(String),
) -> Result<Vec<(DriveId, Vec<DriveImportHour>)>, String> {
    let drives = store.drives().map_err(|e| e.to_string())?;
    if drives.is_empty() {
        say("drives: the store knows none yet (the SMART collector's first sample records them); none imported".into());
        return Ok(Vec::new());
    }
    let mut cutoffs = BTreeMap::new();
    for d in &drives {
        let c = store
            .drive_import_cutoff(d.id)
            .map_err(|e| e.to_string())?
            .unwrap_or(d.first_seen);
        cutoffs.insert(d.id, c);
    }
    let end = cutoffs.values().copied().max().unwrap_or(now);
    if end <= start + HOUR {
        say("drives: the daemon's own history covers the range; none imported".into());
        return Ok(Vec::new());
    }
    let sel = format!("{{instance=~{}}}", quote(&host_instances(instance)));
    let mut answers = Vec::with_capacity(DRIVE_QUERIES);
    for q in drive_queries(&sel) {
        answers.push(
            api.query_range(&q, start + HOUR - 1, end - 1, HOUR)
                .map_err(|e| e.to_string())?,
        );
    }
    let hours = assemble_drives(&answers);
    if hours.is_empty() {
        say(format!(
            "drives: no ssdwatch drive series ({}) of instance {sel} at {}; none imported",
            DRIVE_GAUGES[0],
            api.base()
        ));
        return Ok(Vec::new());
    }
    // The model of each drive, from its identity series over the range.
    let info = api
        .query(
            &format!(
                "last_over_time({}{sel}[{}s])",
                catalogue::DEVICE_INFO.name,
                (end - start).max(HOUR)
            ),
            end - 1,
        )
        .map_err(|e| e.to_string())?;
    let model_of = |r: &RemoteDrive| {
        info.iter()
            .find(|(l, _)| {
                l.get("serial").map_or("", |v| v) == r.serial
                    && l.get("wwn").map_or("", |v| v) == r.wwn
            })
            .and_then(|(l, _)| l.get("model").cloned())
    };
    say(format!(
        "ssdwatch drive series of instance {sel} at {} -> this host's drives:",
        api.base()
    ));
    let mut out = Vec::new();
    for d in &drives {
        let key = &d.key;
        let found = hours
            .iter()
            .find(|(r, _)| same_drive(key, r, model_of(r).as_deref()));
        let name = format!(
            "store drive {} (serial {}, wwn {}, model {})",
            d.id.0,
            key.serial.as_deref().unwrap_or("unknown"),
            key.wwn.as_deref().unwrap_or("unknown"),
            key.model.as_deref().unwrap_or("unknown")
        );
        let Some((remote, (device, hs))) = found else {
            say(format!("  no series -> {name}: none imported"));
            continue;
        };
        let cutoff = cutoffs.get(&d.id).copied().unwrap_or(now);
        let before: Vec<DriveImportHour> = hs.iter().filter(|h| h.hour < cutoff).copied().collect();
        check_drive(store, d, &before, api.base(), remote)?;
        say(format!(
            "  {device} (serial {}, wwn {}) -> {name}: {} hours before {}",
            or_unknown(&remote.serial),
            or_unknown(&remote.wwn),
            before.len(),
            crate::report::date(cutoff)
        ));
        out.push((d.id, before));
    }
    Ok(out)
}

fn or_unknown(v: &str) -> &str {
    if v.is_empty() { "unknown" } else { v }
}

/// Wear and written bytes only grow: an imported history that ends above the daemon's first
/// reading of the drive is another drive's (a serial number reused across models, a wrong
/// host). Tolerances: one percentage point of wear (drives report whole percents), and none
/// for written bytes beyond a rounding.
fn check_drive(
    store: &Store,
    d: &crate::history::DriveInfo,
    hours: &[DriveImportHour],
    server: &str,
    remote: &RemoteDrive,
) -> Result<(), String> {
    let first = store
        .drive_series(d.id, d.first_seen, d.first_seen + DAY)
        .map_err(|e| e.to_string())?;
    let Some(first) = first.first() else {
        return Ok(());
    };
    let last_wear = hours
        .iter()
        .rev()
        .find_map(|h| h.wear_used_ratio.map(|w| w[3]));
    let last_host = hours.iter().rev().find_map(|h| h.host_written_bytes);
    let refuse = |what: &str, theirs: String, ours: String| {
        Err(format!(
            "{server}: drive serial {} wwn {} has {what} {theirs} in the imported history, more than this host's drive {} read at its first sample ({ours}): not the same drive; nothing written",
            or_unknown(&remote.serial),
            or_unknown(&remote.wwn),
            d.key
                .serial
                .as_deref()
                .or(d.key.wwn.as_deref())
                .unwrap_or("unknown"),
        ))
    };
    if let (Some(a), Some(b)) = (last_wear, first.wear_used_ratio.map(|s| s.last))
        && a > b + 0.01 + 1e-9
    {
        return refuse(
            "wear used",
            format!("{:.0} %", a * 100.0),
            format!("{:.0} %", b * 100.0),
        );
    }
    if let (Some(a), Some(b)) = (last_host, first.host_written_bytes)
        && a > b * 1.001 + 1.0
    {
        return refuse("host bytes written", format!("{a:.0}"), format!("{b:.0}"));
    }
    Ok(())
}

/// How long the import at first start waits for the daemon's first filesystem sample to be in
/// the store (the filesystem collector samples within seconds of the start).
const FIRST_SAMPLE_WAIT: Duration = Duration::from_secs(300);
/// With the SMART collector on, how long after the first filesystem sample it waits for the
/// first drive reading (smartctl's first pass), so drives are imported with the filesystems:
/// the import runs once. A host with no readable drive waits this long for its filesystems.
const DRIVE_SAMPLE_WAIT: Duration = Duration::from_secs(60);
/// Whether the import at first start stops waiting for drives, `waited` after the first
/// filesystem sample: at once without the SMART collector or with a drive known. Pure.
fn drives_settled(drives_expected: bool, drives: usize, waited: Duration) -> bool {
    !drives_expected || drives > 0 || waited >= DRIVE_SAMPLE_WAIT
}

/// How often it looks, each time asking the history thread for a commit.
const FIRST_SAMPLE_POLL: Duration = Duration::from_secs(2);

/// Whether the store's filesystems are all there: their number has not changed for more than
/// a filesystem sampling interval (and a look), so the collector has sampled again since the
/// last one appeared. A mount whose statvfs missed the first sample (a slow or busy host) is
/// recorded at the next one, and is imported with the others. Pure.
fn filesystems_settled(unchanged_for: Duration, fs_interval: Duration) -> bool {
    unchanged_for > fs_interval + FIRST_SAMPLE_POLL
}

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
            "the store holds imported history of {marks} filesystem(s) or drive(s) already"
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
/// and for the first drive reading when `drives_expected` (the SMART collector is on),
/// imports as `ssdwatch history import` would, logs the mapping and the rows written, and has
/// the forecasts recomputed. A failure is one error line; the daemon goes on without the
/// import, and the next start tries again. `stop`: the daemon's stop signal.
pub(crate) fn spawn_at_first_start(
    cfg: &crate::history::ImportConfig,
    state_dir: PathBuf,
    history: HistoryConfig,
    drives_expected: bool,
    fs_interval: Duration,
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
        .spawn(move || {
            let waits = (drives_expected, fs_interval);
            at_first_start(&args, &state_dir, &history, waits, &sink, &stop)
        })
        .map(|_| ())
}

fn at_first_start(
    args: &ImportArgs,
    dir: &Path,
    history: &HistoryConfig,
    (drives_expected, fs_interval): (bool, Duration),
    sink: &crate::history::service::Sink,
    stop: &tokio::sync::watch::Receiver<bool>,
) {
    let server = &args.prometheus;
    let path = dir.join(crate::history::store::FILE_NAME);
    let deadline = std::time::Instant::now() + FIRST_SAMPLE_WAIT;
    // When the filesystems were first known: the drives are waited for a while after. And
    // since when their number is what it is: a mount may come a sample later.
    let mut fs_seen = None;
    let mut fs_count: Option<(usize, std::time::Instant)> = None;
    let (marks, first_seen) = loop {
        if *stop.borrow() {
            return;
        }
        sink.flusher().flush(Duration::from_secs(30));
        let known = Store::open_read_only(&path).and_then(|s| {
            let fs = s.filesystems()?;
            Ok((
                s.fs_imports()?.len() + s.drive_imports()?.len(),
                fs.iter().map(|f| f.first_seen).collect::<Vec<_>>(),
                s.drives()?.len(),
            ))
        });
        match known {
            Ok((m, _, _)) if m > 0 => break (m, Vec::new()),
            Ok((m, f, drives)) if !f.is_empty() => {
                let since = *fs_seen.get_or_insert_with(std::time::Instant::now);
                let unchanged_since = match fs_count {
                    Some((n, t)) if n == f.len() => t,
                    _ => fs_count.insert((f.len(), std::time::Instant::now())).1,
                };
                if drives_settled(drives_expected, drives, since.elapsed())
                    && filesystems_settled(unchanged_since.elapsed(), fs_interval)
                {
                    if drives_expected && drives == 0 {
                        tracing::info!(
                            server = %server,
                            "history import at first start: no drive in the store {} after the first filesystem sample (no drive with SMART and an identity); filesystems only",
                            humantime::format_duration(DRIVE_SAMPLE_WAIT)
                        );
                    }
                    break (m, f);
                }
                std::thread::sleep(FIRST_SAMPLE_POLL)
            }
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
    let now = crate::time::unix_now() as i64;
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
                drive_rows = n.drive_rows,
                drives = n.drives,
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

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_drives_hours_are_assembled_from_its_series_and_a_gauge_needs_its_four_figures() {
        let h = 1_800_000_000 / HOUR * HOUR;
        let l = labels(&[("device", "nvme0n1"), ("serial", "S1"), ("wwn", "eui.1")]);
        let anon = labels(&[("device", "dm-0"), ("serial", ""), ("wwn", "")]);
        let q = drive_queries("{instance=~\"db7(:[0-9]+)?\"}");
        assert_eq!(q.len(), DRIVE_QUERIES);
        assert!(q[0].starts_with("min_over_time(ssdwatch_device_wear_used_ratio{"));
        let mut answers: Vec<Answer> = vec![Vec::new(); DRIVE_QUERIES];
        // Wear's four figures in both hours; host bytes in the second only; spare's min only
        // (an incomplete gauge); a series without identity.
        for a in &mut answers[..4] {
            *a = vec![(
                l.clone(),
                vec![(h + HOUR - 1, 0.1), (h + 2 * HOUR - 1, 0.11)],
            )];
        }
        answers[4] = vec![(l.clone(), vec![(h + HOUR - 1, 0.99)])];
        answers[12] = vec![
            (l.clone(), vec![(h + 2 * HOUR - 1, 5e12)]),
            (anon, vec![(h + HOUR - 1, 1.0)]),
        ];
        answers[15] = vec![(l.clone(), vec![(h + 2 * HOUR - 1, 7200.0 + 1800.0)])];
        answers[16] = vec![(l.clone(), vec![(h + HOUR - 1, 12.0), (h + 2 * HOUR, 11.0)])];
        let got = assemble_drives(&answers);
        assert_eq!(got.len(), 1, "{got:?}");
        let (id, (dev, hours)) = got.iter().next().unwrap();
        assert_eq!(
            (id.serial.as_str(), id.wwn.as_str(), dev.as_str()),
            ("S1", "eui.1", "nvme0n1")
        );
        assert_eq!(hours.len(), 2);
        assert_eq!(hours[0].hour, h);
        assert_eq!(hours[0].wear_used_ratio, Some([0.1; 4]));
        assert_eq!(hours[0].spare_ratio, None);
        assert_eq!(hours[0].host_written_bytes, None);
        assert_eq!(hours[0].samples, 12);
        assert_eq!(hours[1].hour, h + HOUR);
        assert_eq!(hours[1].host_written_bytes, Some(5e12));
        assert_eq!(hours[1].power_on_hours, Some(2.0));
        assert_eq!(hours[1].samples, 11);
    }

    #[test]
    fn a_drive_is_matched_by_wwn_else_by_serial_and_model_never_by_kernel_name() {
        let key = |wwn: Option<&str>, serial: Option<&str>, model: Option<&str>| DriveKey {
            wwn: wwn.map(String::from),
            serial: serial.map(String::from),
            model: model.map(String::from),
        };
        let r = |serial: &str, wwn: &str| RemoteDrive {
            serial: serial.into(),
            wwn: wwn.into(),
        };
        let ours = key(Some("eui.0025"), Some("S1"), Some("M1"));
        assert!(same_drive(&ours, &r("S1", "EUI.0025"), Some("M1")));
        // Both know a WWN: it decides, whatever the serial.
        assert!(!same_drive(&ours, &r("S1", "eui.9999"), Some("M1")));
        // No WWN on the server's side: the serial, and the model where both know one.
        assert!(same_drive(&ours, &r("S1", ""), None));
        assert!(same_drive(&ours, &r("S1", ""), Some("")));
        assert!(!same_drive(&ours, &r("S1", ""), Some("M2")));
        assert!(!same_drive(&ours, &r("S2", ""), Some("M1")));
        // The store knows only a serial.
        let serial_only = key(None, Some("S1"), None);
        assert!(same_drive(&serial_only, &r("S1", "eui.1"), Some("M9")));
        assert!(!same_drive(&key(None, None, None), &r("", ""), None));
    }

    #[test]
    fn the_hosts_instances_are_its_name_with_any_port() {
        assert_eq!(host_instances("db7:9100"), "db7(:[0-9]+)?");
        assert_eq!(
            host_instances("db7.example.com:9100"),
            "db7\\.example\\.com(:[0-9]+)?"
        );
        assert_eq!(host_instances("db7"), "db7(:[0-9]+)?");
        assert_eq!(host_instances("[::1]:9100"), "\\[::1\\](:[0-9]+)?");
        assert_eq!(host_instances("fe80::1"), "fe80::1(:[0-9]+)?");
    }

    #[test]
    fn the_import_at_start_waits_a_sampling_interval_after_the_last_new_filesystem() {
        let (s, fs) = (Duration::from_secs, Duration::from_secs(15));
        assert!(!filesystems_settled(s(0), fs));
        assert!(
            !filesystems_settled(s(16), fs),
            "a look may not have seen the next sample"
        );
        assert!(filesystems_settled(s(18), fs));
        assert!(filesystems_settled(s(4), s(1)));
    }

    #[test]
    fn the_import_at_start_waits_a_while_for_the_drives_only_when_smart_reads_them() {
        let s = Duration::from_secs;
        assert!(drives_settled(false, 0, s(0)));
        assert!(drives_settled(true, 1, s(0)));
        assert!(!drives_settled(true, 0, s(59)));
        assert!(drives_settled(true, 0, DRIVE_SAMPLE_WAIT));
    }

    #[test]
    fn an_hour_is_read_from_the_asked_time_or_from_one_moved_onto_the_step() {
        let h = 1_800_000_000 / HOUR * HOUR;
        assert_eq!(hour_of(h + HOUR - 1), h);
        assert_eq!(hour_of(h + HOUR), h);
        assert_eq!(hour_of(h + 1), h);
    }
}
