//! `ssdwatch history export --openmetrics`: the store's series as OpenMetrics text with
//! timestamps, for `promtool tsdb create-blocks-from openmetrics` to load months of a host's
//! history into a new Prometheus (or Thanos / Mimir through it).
//!
//! Names and labels are the daemon's live ones where the store keeps what they need
//! (`ssdwatch_filesystem_size_bytes{mountpoint,device}`, `ssdwatch_device_wear_used_ratio{device,
//! serial,wwn}`, `ssdwatch_probe_last_latency_seconds{mountpoint,device,probe,quantile}`...),
//! so dashboards and rules read the backfill like a scrape; the store has no `fstype`, so that
//! label is absent. Raw samples are written as they were taken; an hour the store has
//! downsampled is one sample at the hour's start carrying the hour's last value. The
//! TRIM and idle recoveries are one sample per event on the daemon's recovery gauges, at the
//! end of the hour after the event. The drives' model and capacity (`ssdwatch_device_info`,
//! `ssdwatch_disk_size_bytes`) and the predicted-full and wear-out dates as of the export close
//! it, one sample each at its time. Drive health readings and database component sizes are
//! hourly rows (daily ones past the raw retention), exported as such; a database's facts (the
//! archiver's backlog, the slot holding back the most WAL, the binary logs) are its newest,
//! one sample each.

use crate::catalogue::{self, Family};
use crate::history::current;
use crate::history::curve::RECOVERY_WINDOW_SECONDS;
use crate::history::degradation::{self, RECOVERY_FAMILIES, mountpoint_of, recovery_values};
use crate::history::{DriveInfo, DrivePoint, FsInfo, FsPoint, Store, StoreError};
use crate::metrics::{MetricKind, format_value};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::Write;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
}

/// A label set written `{k="v",...}`, each value escaped as the text format escapes it (the
/// same rules in OpenMetrics).
fn labels(l: &[(&str, &str)]) -> String {
    let mut o = String::from("{");
    for (i, (k, v)) in l.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(k);
        o.push_str("=\"");
        crate::render::escape_label_value(&mut o, v);
        o.push('"');
    }
    o.push('}');
    o
}

/// The family's `# TYPE` and `# HELP` lines, from its catalogue entry. OpenMetrics names a
/// counter's family without `_total` and its samples with it.
fn family(w: &mut dyn Write, def: &Family) -> std::io::Result<()> {
    let name = match def.kind {
        MetricKind::Counter => def.name.strip_suffix("_total").unwrap_or(def.name),
        _ => def.name,
    };
    let kind = def.kind.as_str();
    writeln!(w, "# TYPE {name} {kind}")?;
    writeln!(w, "# HELP {name} {}", def.help)
}

type FsField = fn(&FsPoint) -> f64;
type DriveField = fn(&DrivePoint) -> Option<f64>;
type FactField = fn(&crate::history::DatabaseFacts) -> Option<u64>;

/// Writes every series of the store up to `now` to `w`, family by family, each series in time
/// order; returns the number of samples written.
/// With `instance`, every series also carries `instance="<it>"` (several hosts backfilled into
/// one Prometheus stay apart, as scrapes would keep them).
pub fn export(
    store: &Store,
    now: i64,
    instance: Option<&str>,
    w: &mut dyn Write,
) -> Result<u64, ExportError> {
    store.begin_read()?;
    let r = export_in(store, now, instance, w);
    let end = store.end_read();
    let n = r?;
    end?;
    Ok(n)
}

/// The export's families in their order: the stored series (filesystems, drives, probe runs),
/// the recoveries, then what holds as of `now` (the drives' identity, the forecasts).
fn export_in(
    store: &Store,
    now: i64,
    instance: Option<&str>,
    w: &mut dyn Write,
) -> Result<u64, ExportError> {
    let mut out = Out { w, instance, n: 0 };
    let fss = store.filesystems()?;
    filesystem_series(&mut out, store, now, &fss)?;
    let drives = store.drives()?;
    drive_series(&mut out, store, now, &drives)?;
    drive_health_series(&mut out, store, now, &drives)?;
    database_series(&mut out, store, now)?;
    probe_runs(&mut out, store, now, &fss, &drives)?;
    recoveries(&mut out, store, now)?;
    drive_identity(&mut out, now, &drives)?;
    forecasts(&mut out, store, now, &fss, &drives)?;
    writeln!(out.w, "# EOF")?;
    Ok(out.n)
}

/// Where the export goes, the `instance` label every series carries (if any), and the number
/// of samples written so far.
struct Out<'a> {
    w: &'a mut dyn Write,
    instance: Option<&'a str>,
    n: u64,
}

impl Out<'_> {
    /// A series' label set, with `instance` last when given.
    fn labels(&self, l: &[(&str, &str)]) -> String {
        match self.instance {
            Some(i) => {
                let mut all = l.to_vec();
                all.push(("instance", i));
                labels(&all)
            }
            None => labels(l),
        }
    }

    fn family(&mut self, def: &Family) -> std::io::Result<()> {
        family(self.w, def)
    }

    /// One sample line: `name{labels} value t`.
    fn sample(&mut self, name: &str, l: &str, value: impl Display, t: i64) -> std::io::Result<()> {
        writeln!(self.w, "{name}{l} {value} {t}")?;
        self.n += 1;
        Ok(())
    }
}

/// A drive's identity labels: kernel name, serial and WWN ("" where unknown).
fn drive_ids(d: &DriveInfo) -> [(&'static str, &str); 3] {
    [
        ("device", d.kernel_name.as_deref().unwrap_or("")),
        ("serial", d.key.serial.as_deref().unwrap_or("")),
        ("wwn", d.key.wwn.as_deref().unwrap_or("")),
    ]
}

/// Size, available and free bytes of every filesystem, raw and hourly rows in time order.
fn filesystem_series(
    out: &mut Out,
    store: &Store,
    now: i64,
    fss: &[FsInfo],
) -> Result<(), ExportError> {
    let fs_fields: [(&Family, FsField); 3] = [
        (&catalogue::FILESYSTEM_SIZE_BYTES, |p| p.size.last),
        (&catalogue::FILESYSTEM_AVAIL_BYTES, |p| p.avail.last),
        (&catalogue::FILESYSTEM_FREE_BYTES, |p| p.free.last),
    ];
    for (def, field) in fs_fields {
        out.family(def)?;
        for f in fss {
            let dev = f.device.as_deref().unwrap_or("");
            let l = out.labels(&[("mountpoint", &f.key.mountpoint), ("device", dev)]);
            let mut last = i64::MIN;
            for p in store.fs_series(f.id, 0, now)? {
                // An hour's row and a raw row may share a second: one sample per timestamp.
                if p.t <= last {
                    continue;
                }
                last = p.t;
                out.sample(def.name, &l, format_value(field(&p)), p.t)?;
            }
        }
    }
    Ok(())
}

/// Wear, temperature and the written-bytes counters of every drive, where a row has them.
fn drive_series(
    out: &mut Out,
    store: &Store,
    now: i64,
    drives: &[DriveInfo],
) -> Result<(), ExportError> {
    let drive_fields: [(&Family, DriveField); 4] = [
        (&catalogue::DEVICE_WEAR_USED_RATIO, |p| {
            p.wear_used_ratio.map(|s| s.last)
        }),
        (&catalogue::DEVICE_TEMPERATURE_CELSIUS, |p| {
            p.temperature_celsius.map(|s| s.last)
        }),
        (&catalogue::DEVICE_HOST_WRITTEN_BYTES_TOTAL, |p| {
            p.host_written_bytes
        }),
        (&catalogue::DEVICE_NAND_WRITTEN_BYTES_TOTAL, |p| {
            p.nand_written_bytes
        }),
    ];
    for (def, field) in drive_fields {
        out.family(def)?;
        for d in drives {
            let l = out.labels(&drive_ids(d));
            let mut last = i64::MIN;
            for p in store.drive_series(d.id, 0, now)? {
                if p.t <= last {
                    continue;
                }
                if let Some(v) = field(&p) {
                    last = p.t;
                    out.sample(def.name, &l, format_value(v), p.t)?;
                }
            }
        }
    }
    Ok(())
}

/// Samples of one family grouped by series (label set), each series' in time order.
type SeriesSamples = BTreeMap<String, Vec<(i64, f64)>>;

fn write_family(out: &mut Out, def: &Family, series: SeriesSamples) -> std::io::Result<()> {
    if series.is_empty() {
        return Ok(());
    }
    out.family(def)?;
    for (l, samples) in series {
        for (t, v) in samples {
            out.sample(def.name, &l, format_value(v), t)?;
        }
    }
    Ok(())
}

/// Each drive's stored health readings (an hour's last, a day's last once older than the raw
/// retention) on the daemon's health families: the error log, the newest self-test and its
/// age, the warning temperature and the time above it, and the durability reason.
fn drive_health_series(
    out: &mut Out,
    store: &Store,
    now: i64,
    drives: &[DriveInfo],
) -> Result<(), ExportError> {
    let defs: [&Family; 6] = [
        &catalogue::DEVICE_ERROR_LOG_ENTRIES_TOTAL,
        &catalogue::DEVICE_SELF_TEST_LAST_RESULT,
        &catalogue::DEVICE_SELF_TEST_LAST_AGE_SECONDS,
        &catalogue::DEVICE_TEMPERATURE_LIMIT_CELSIUS,
        &catalogue::DEVICE_TEMPERATURE_ABOVE_LIMIT_SECONDS_TOTAL,
        &catalogue::DEVICE_DURABILITY_RISK_INFO,
    ];
    let mut families: [SeriesSamples; 6] = Default::default();
    for d in drives {
        let ids = drive_ids(d);
        let with = |k: &'static str, v: &str| {
            let mut l = ids.to_vec();
            l.push((k, v));
            out.labels(&l)
        };
        let plain = out.labels(&ids);
        for p in store.drive_health(d.id, 0, now)? {
            let h = &p.health;
            let mut put = |i: usize, l: String, v: Option<f64>| {
                if let Some(v) = v {
                    families[i].entry(l).or_default().push((p.t, v));
                }
            };
            put(0, plain.clone(), h.error_log_entries.map(|n| n as f64));
            if let Some((kind, result)) = h.self_test.as_deref().and_then(|s| s.split_once(' ')) {
                let mut l = ids.to_vec();
                l.extend([("type", kind), ("result", result)]);
                put(1, out.labels(&l), Some(1.0));
            }
            put(2, plain.clone(), h.self_test_age_seconds.map(|s| s as f64));
            put(3, with("limit", "warning"), h.temperature_warning_celsius);
            put(
                4,
                with("limit", "warning"),
                h.above_warning_seconds.map(|s| s as f64),
            );
            if let Some(r) = h.durability.as_deref() {
                put(5, with("reason", r), Some(1.0));
            }
        }
    }
    for (def, series) in defs.into_iter().zip(families) {
        write_family(out, def, series)?;
    }
    Ok(())
}

/// Each database component's stored sizes (an hour's last, a day's last once older than the
/// raw retention), each database's kind at those times (`ssdwatch_database_info`, with version
/// and mount point unknown: the store keeps neither), and its newest facts, one sample each at
/// the time they were seen.
fn database_series(out: &mut Out, store: &Store, now: i64) -> Result<(), ExportError> {
    let components = store.components(0, now)?;
    let mut sizes = SeriesSamples::new();
    let mut info: BTreeMap<(String, String), std::collections::BTreeSet<i64>> = BTreeMap::new();
    for c in &components {
        let l = out.labels(&[
            ("database", &c.database),
            ("component", &c.component),
            ("mountpoint", &c.mountpoint),
        ]);
        sizes.insert(l, c.sizes.iter().map(|&(t, b)| (t, b as f64)).collect());
        info.entry((c.database.clone(), c.kind.clone()))
            .or_default()
            .extend(c.sizes.iter().map(|s| s.0));
    }
    write_family(out, &catalogue::DATABASE_COMPONENT_BYTES, sizes)?;
    let info: SeriesSamples = info
        .into_iter()
        .map(|((db, kind), times)| {
            let l = out.labels(&[
                ("database", &db),
                ("kind", &kind),
                ("version", ""),
                ("mountpoint", ""),
            ]);
            (l, times.into_iter().map(|t| (t, 1.0)).collect())
        })
        .collect();
    write_family(out, &catalogue::DATABASE_INFO, info)?;
    let facts = store.database_facts()?;
    let fact_defs: [(&Family, FactField); 5] = [
        (&catalogue::POSTGRES_ARCHIVE_READY_SEGMENTS, |f| {
            f.archive_ready_segments
        }),
        (&catalogue::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS, |f| {
            f.archive_oldest_ready_age_seconds
        }),
        (&catalogue::MYSQL_BINLOG_FILES, |f| f.binlog_files),
        (&catalogue::MYSQL_BINLOG_OLDEST_AGE_SECONDS, |f| {
            f.binlog_oldest_age_seconds
        }),
        (&catalogue::MYSQL_BINLOG_RETENTION_SECONDS, |f| {
            f.binlog_retention_seconds
        }),
    ];
    for (def, field) in fact_defs {
        let series: SeriesSamples = facts
            .iter()
            .filter_map(|(db, (_, t, f))| {
                Some((
                    out.labels(&[("database", db)]),
                    vec![(*t, field(f)? as f64)],
                ))
            })
            .collect();
        write_family(out, def, series)?;
    }
    // The slot holding back the most (its type is not kept).
    let slots: SeriesSamples = facts
        .iter()
        .filter_map(|(db, (_, t, f))| {
            let (slot, b) = f.slot.as_ref()?;
            Some((
                out.labels(&[("database", db), ("slot", slot), ("type", "")]),
                vec![(*t, *b as f64)],
            ))
        })
        .collect();
    write_family(
        out,
        &catalogue::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES,
        slots,
    )?;
    Ok(())
}

/// A probe run as exported: its time, p50 and p99 latency (none for a run of fewer than 100
/// I/Os), the fill it ran at and the share of its filesystem deleted but not trimmed.
type Run = (i64, f64, Option<f64>, Option<f64>, Option<f64>);

/// Probe runs by target and kind, with the kernel name of the drive they ran on.
type RunGroups = BTreeMap<(i64, &'static str), (String, Vec<Run>)>;

/// A probe series: mount point, device, probe kind and its runs in time order.
type ProbeSeries<'a> = (String, String, &'static str, &'a Vec<Run>);

/// Every probe run's p50 and p99 latency and its fill; a run too short for a p99 has no
/// `quantile="0.99"` sample, as the daemon exports none for it.
fn probe_runs(
    out: &mut Out,
    store: &Store,
    now: i64,
    fss: &[FsInfo],
    drives: &[DriveInfo],
) -> Result<(), ExportError> {
    let runs = runs_by_target(store, now, drives)?;
    let series = probe_series(store, fss, &runs)?;
    out.family(&catalogue::PROBE_LAST_LATENCY_SECONDS)?;
    for (q, pick) in [("0.5", 0usize), ("0.99", 1)] {
        for (mp, dev, kind, v) in &series {
            let l = out.labels(&[
                ("probe", kind),
                ("mountpoint", mp),
                ("device", dev),
                ("quantile", q),
            ]);
            for r in v.iter() {
                let Some(x) = (if pick == 0 { Some(r.1) } else { r.2 }) else {
                    continue;
                };
                out.sample(
                    catalogue::PROBE_LAST_LATENCY_SECONDS.name,
                    &l,
                    format_value(x),
                    r.0,
                )?;
            }
        }
    }
    // Each run's context the curves need: its fill, and whether it ran on a trimmed
    // filesystem (a run without the figure has no sample, never a 0).
    for (family, pick) in [
        (
            &catalogue::PROBE_RUN_FILL_RATIO,
            (|r: &Run| r.3) as fn(&Run) -> Option<f64>,
        ),
        (&catalogue::PROBE_RUN_UNTRIMMED_RATIO, |r: &Run| r.4),
    ] {
        out.family(family)?;
        for (mp, dev, kind, v) in &series {
            let l = out.labels(&[("probe", kind), ("mountpoint", mp), ("device", dev)]);
            for r in v.iter() {
                if let Some(f) = pick(r) {
                    out.sample(family.name, &l, format_value(f), r.0)?;
                }
            }
        }
    }
    Ok(())
}

/// Probe runs grouped by target and kind (a series' samples must be in time order), each group
/// with the kernel name of the drive its runs were on.
fn runs_by_target(store: &Store, now: i64, drives: &[DriveInfo]) -> Result<RunGroups, ExportError> {
    let names: BTreeMap<i64, String> = drives
        .iter()
        .map(|d| (d.id.0, d.kernel_name.clone().unwrap_or_default()))
        .collect();
    let mut runs = RunGroups::new();
    store.for_each_probe_run(0, now, |r| {
        let e = runs
            .entry((r.target, r.kind.as_str()))
            .or_insert_with(|| (String::new(), Vec::new()));
        if let Some(d) = r.drive {
            e.0 = names.get(&d.0).cloned().unwrap_or_default();
        }
        e.1.push((
            r.t,
            r.p50_seconds,
            r.p99_seconds,
            r.fill_ratio,
            r.untrimmed_ratio,
        ));
    })?;
    Ok(runs)
}

/// The groups of runs as series labelled like the daemon's: the target's mount point (its
/// path where no stored filesystem holds it), device and probe kind.
fn probe_series<'a>(
    store: &Store,
    fss: &[FsInfo],
    runs: &'a RunGroups,
) -> Result<Vec<ProbeSeries<'a>>, ExportError> {
    let targets: BTreeMap<i64, String> = store.probe_targets()?.into_iter().collect();
    Ok(runs
        .iter()
        .map(|((target, kind), (dev, v))| {
            let path = targets.get(target).map(String::as_str).unwrap_or("");
            let mp = mountpoint_of(path, fss.iter().map(|f| f.key.mountpoint.as_str()))
                .unwrap_or(path)
                .to_string();
            (mp, dev.clone(), *kind, v)
        })
        .collect())
}

/// TRIM and idle recoveries: one sample per event on the daemon's recovery gauges, at the
/// end of the hour after it (when the daemon first knows the figures).
fn recoveries(out: &mut Out, store: &Store, now: i64) -> Result<(), ExportError> {
    let groups = degradation::analyse(store, 0, now)?;
    for (which, families) in RECOVERY_FAMILIES.iter().enumerate() {
        for (i, def) in families.iter().enumerate() {
            out.family(def)?;
            for g in &groups {
                let l = out.labels(&[
                    ("device", g.device.as_deref().unwrap_or("")),
                    ("mountpoint", g.mountpoint.as_deref().unwrap_or("")),
                    ("probe", g.probe.as_str()),
                ]);
                let mut last = i64::MIN;
                for e in if which == 0 { &g.trim } else { &g.idle } {
                    let t = (e.end + RECOVERY_WINDOW_SECONDS).min(now).max(last + 1);
                    last = t;
                    let v = recovery_values(e)[i];
                    out.sample(def.name, &l, format_value(v), t)?;
                }
            }
        }
    }
    Ok(())
}

/// The drives' identity as of the export (the daemon's ssdwatch_device_info and
/// ssdwatch_disk_size_bytes carry it), so a report from the query API names the model and
/// finds the drive's rated endurance.
fn drive_identity(out: &mut Out, now: i64, drives: &[DriveInfo]) -> Result<(), ExportError> {
    out.family(&catalogue::DEVICE_INFO)?;
    for d in drives {
        if let Some(model) = &d.key.model {
            let [device, serial, wwn] = drive_ids(d);
            let l = out.labels(&[device, serial, wwn, ("model", model)]);
            out.sample(catalogue::DEVICE_INFO.name, &l, 1, now)?;
        }
    }
    out.family(&catalogue::DISK_SIZE_BYTES)?;
    for d in drives {
        if let (Some(dev), Some(size)) = (&d.kernel_name, d.capacity_bytes) {
            let l = out.labels(&[("device", dev)]);
            out.sample(catalogue::DISK_SIZE_BYTES.name, &l, size, now)?;
        }
    }
    Ok(())
}

/// The forecasts as of the export, one sample at `now` (what the daemon exports every
/// forecast pass), so the fleet's view reads a backfilled host like a scraped one.
fn forecasts(
    out: &mut Out,
    store: &Store,
    now: i64,
    fss: &[FsInfo],
    drives: &[DriveInfo],
) -> Result<(), ExportError> {
    out.family(&catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS)?;
    let ids: Vec<_> = fss.iter().map(|f| f.id).collect();
    let recent = current::recent_use(store, &ids, now)?;
    for f in fss {
        let r = recent.get(&f.id).map_or(&[][..], Vec::as_slice);
        let fc = current::stored_filesystem(store, f.id, r, now)?;
        if let Some(t) = fc.and_then(|fc| fc.predicted_full_unix) {
            let dev = f.device.as_deref().unwrap_or("");
            let l = out.labels(&[("mountpoint", &f.key.mountpoint), ("device", dev)]);
            out.sample(
                catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS.name,
                &l,
                t,
                now,
            )?;
        }
    }
    out.family(&catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS)?;
    for d in drives {
        let pts = store.drive_days(d.id, 0, now)?;
        let fc = current::drive(&pts, now, None);
        if let Some(t) = fc.and_then(|fc| fc.predicted_wear_out_unix) {
            let l = out.labels(&drive_ids(d));
            out.sample(
                catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS.name,
                &l,
                t,
                now,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryConfig, ProbeRecord};
    use crate::probe::ProbeKind;

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    /// A mount point with a quote, a backslash and a newline in it stays one label value.
    #[test]
    fn a_label_value_is_escaped_as_the_text_format_escapes_it() {
        assert_eq!(
            labels(&[("mountpoint", "/a\"b\\c\nd"), ("device", "sda")]),
            r#"{mountpoint="/a\"b\\c\nd",device="sda"}"#
        );
        assert_eq!(labels(&[]), "{}");
    }

    /// A 16-write run exports its p50 and no `quantile="0.99"` sample (its maximum is not a
    /// p99); a 256-write run both. Each run's untrimmed share is exported where recorded.
    #[test]
    fn a_short_run_exports_no_p99_and_each_run_its_untrimmed_share() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        let run = |t: i64, ops: u64, p99: Option<f64>, untrimmed: Option<f64>| ProbeRecord {
            target: "/srv/pg".into(),
            drive: None,
            t,
            kind: ProbeKind::SyncWrite4k,
            ops,
            p50_seconds: 1e-3,
            p99_seconds: p99,
            max_seconds: 9e-3,
            throughput_bytes_per_second: None,
            fill_ratio: Some(0.5),
            since_discard_seconds: None,
            idle_seconds: None,
            utilization_ratio: None,
            utilization_before_ratio: None,
            written_since_discard_bytes: None,
            untrimmed_ratio: untrimmed,
        };
        store
            .record_probes(&[
                run(T0, 16, None, Some(0.2)),
                run(T0 + 300, 256, Some(4e-3), None),
            ])
            .unwrap();
        let mut out = Vec::new();
        export(&store, T0 + 600, None, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let samples = |prefix: &str| -> Vec<&str> {
            text.lines().filter(|l| l.starts_with(prefix)).collect()
        };
        let p99 = samples("ssdwatch_probe_last_latency_seconds{");
        let p99: Vec<&&str> = p99
            .iter()
            .filter(|l| l.contains("quantile=\"0.99\""))
            .collect();
        assert_eq!(p99.len(), 1, "{text}");
        assert!(p99[0].ends_with(&format!(" 0.004 {}", T0 + 300)), "{text}");
        assert!(
            !text.contains(" 0.009 "),
            "no maximum under a quantile: {text}"
        );
        let untrimmed = samples("ssdwatch_probe_run_untrimmed_ratio{");
        assert_eq!(untrimmed.len(), 1, "{text}");
        assert!(untrimmed[0].ends_with(&format!(" 0.2 {T0}")), "{text}");
    }
}
