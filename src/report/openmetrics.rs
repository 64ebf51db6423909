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
//! it, one sample each at its time.

use crate::catalogue::{self, Family};
use crate::history::current;
use crate::history::curve::RECOVERY_WINDOW_SECONDS;
use crate::history::degradation::{self, RECOVERY_FAMILIES, mountpoint_of, recovery_values};
use crate::history::{DrivePoint, FsPoint, Store, StoreError};
use crate::metrics::{MetricKind, format_value};
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(l: &[(&str, &str)]) -> String {
    let inner: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
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

fn export_in(
    store: &Store,
    now: i64,
    instance: Option<&str>,
    w: &mut dyn Write,
) -> Result<u64, ExportError> {
    let labels = |l: &[(&str, &str)]| match instance {
        Some(i) => {
            let mut all = l.to_vec();
            all.push(("instance", i));
            labels(&all)
        }
        None => labels(l),
    };
    let mut n = 0u64;
    let fss = store.filesystems()?;
    let fs_fields: [(&Family, FsField); 3] = [
        (&catalogue::FILESYSTEM_SIZE_BYTES, |p| p.size.last),
        (&catalogue::FILESYSTEM_AVAIL_BYTES, |p| p.avail.last),
        (&catalogue::FILESYSTEM_FREE_BYTES, |p| p.free.last),
    ];
    for (def, field) in fs_fields {
        family(w, def)?;
        let name = def.name;
        for f in &fss {
            let dev = f.device.clone().unwrap_or_default();
            let l = labels(&[("mountpoint", &f.key.mountpoint), ("device", &dev)]);
            let mut last = i64::MIN;
            for p in store.fs_series(f.id, 0, now)? {
                // An hour's row and a raw row may share a second: one sample per timestamp.
                if p.t <= last {
                    continue;
                }
                last = p.t;
                writeln!(w, "{name}{l} {} {}", format_value(field(&p)), p.t)?;
                n += 1;
            }
        }
    }
    let drives = store.drives()?;
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
        family(w, def)?;
        let sample = def.name;
        for d in &drives {
            let dev = d.kernel_name.clone().unwrap_or_default();
            let serial = d.key.serial.clone().unwrap_or_default();
            let wwn = d.key.wwn.clone().unwrap_or_default();
            let l = labels(&[("device", &dev), ("serial", &serial), ("wwn", &wwn)]);
            let mut last = i64::MIN;
            for p in store.drive_series(d.id, 0, now)? {
                if p.t <= last {
                    continue;
                }
                if let Some(v) = field(&p) {
                    last = p.t;
                    writeln!(w, "{sample}{l} {} {}", format_value(v), p.t)?;
                    n += 1;
                }
            }
        }
    }
    // Probe runs, grouped by target and kind (a series' samples must be in time order).
    let targets: BTreeMap<i64, String> = store.probe_targets()?.into_iter().collect();
    let names: BTreeMap<i64, String> = drives
        .iter()
        .map(|d| (d.id.0, d.kernel_name.clone().unwrap_or_default()))
        .collect();
    type Run = (i64, f64, f64, Option<f64>);
    let mut runs: BTreeMap<(i64, &'static str), (String, Vec<Run>)> = BTreeMap::new();
    store.for_each_probe_run(0, now, |r| {
        let e = runs
            .entry((r.target, r.kind.as_str()))
            .or_insert_with(|| (String::new(), Vec::new()));
        if let Some(d) = r.drive {
            e.0 = names.get(&d.0).cloned().unwrap_or_default();
        }
        e.1.push((r.t, r.p50_seconds, r.p99_seconds, r.fill_ratio));
    })?;
    let series: Vec<(String, String, &'static str, &Vec<Run>)> = runs
        .iter()
        .map(|((target, kind), (dev, v))| {
            let path = targets.get(target).map(String::as_str).unwrap_or("");
            let mp = mountpoint_of(path, fss.iter().map(|f| f.key.mountpoint.as_str()))
                .unwrap_or(path)
                .to_string();
            (mp, dev.clone(), *kind, v)
        })
        .collect();
    family(w, &catalogue::PROBE_LAST_LATENCY_SECONDS)?;
    for (q, pick) in [("0.5", 0usize), ("0.99", 1)] {
        for (mp, dev, kind, v) in &series {
            let l = labels(&[
                ("probe", kind),
                ("mountpoint", mp),
                ("device", dev),
                ("quantile", q),
            ]);
            for r in v.iter() {
                let x = if pick == 0 { r.1 } else { r.2 };
                writeln!(
                    w,
                    "{}{l} {} {}",
                    catalogue::PROBE_LAST_LATENCY_SECONDS.name,
                    format_value(x),
                    r.0
                )?;
                n += 1;
            }
        }
    }
    family(w, &catalogue::PROBE_RUN_FILL_RATIO)?;
    for (mp, dev, kind, v) in &series {
        let l = labels(&[("probe", kind), ("mountpoint", mp), ("device", dev)]);
        for r in v.iter() {
            if let Some(f) = r.3 {
                writeln!(
                    w,
                    "{}{l} {} {}",
                    catalogue::PROBE_RUN_FILL_RATIO.name,
                    format_value(f),
                    r.0
                )?;
                n += 1;
            }
        }
    }
    // TRIM and idle recoveries: one sample per event on the daemon's recovery gauges, at the
    // end of the hour after it (when the daemon first knows the figures).
    let groups = degradation::analyse(store, 0, now)?;
    for (which, families) in RECOVERY_FAMILIES.iter().enumerate() {
        for (i, def) in families.iter().enumerate() {
            family(w, def)?;
            let name = def.name;
            for g in &groups {
                let l = labels(&[
                    ("device", g.device.as_deref().unwrap_or("")),
                    ("mountpoint", g.mountpoint.as_deref().unwrap_or("")),
                    ("probe", g.probe.as_str()),
                ]);
                let mut last = i64::MIN;
                for e in if which == 0 { &g.trim } else { &g.idle } {
                    let t = (e.end + RECOVERY_WINDOW_SECONDS).min(now).max(last + 1);
                    last = t;
                    let v = recovery_values(e)[i];
                    writeln!(w, "{name}{l} {} {t}", format_value(v))?;
                    n += 1;
                }
            }
        }
    }
    // The drives' identity as of the export (the daemon's ssdwatch_device_info and
    // ssdwatch_disk_size_bytes carry it), so a report from the query API names the model and
    // finds the drive's rated endurance.
    family(w, &catalogue::DEVICE_INFO)?;
    for d in &drives {
        if let Some(model) = &d.key.model {
            let dev = d.kernel_name.clone().unwrap_or_default();
            let serial = d.key.serial.clone().unwrap_or_default();
            let wwn = d.key.wwn.clone().unwrap_or_default();
            let l = labels(&[
                ("device", &dev),
                ("serial", &serial),
                ("wwn", &wwn),
                ("model", model),
            ]);
            writeln!(w, "{}{l} 1 {now}", catalogue::DEVICE_INFO.name)?;
            n += 1;
        }
    }
    family(w, &catalogue::DISK_SIZE_BYTES)?;
    for d in &drives {
        if let (Some(dev), Some(size)) = (&d.kernel_name, d.capacity_bytes) {
            writeln!(
                w,
                "{}{} {size} {now}",
                catalogue::DISK_SIZE_BYTES.name,
                labels(&[("device", dev)])
            )?;
            n += 1;
        }
    }
    // The forecasts as of the export, one sample at `now` (what the daemon exports every
    // forecast pass), so the fleet's view reads a backfilled host like a scraped one.
    family(w, &catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS)?;
    for f in &fss {
        let fc = current::stored_filesystem(store, f.id, now)?;
        if let Some(t) = fc.and_then(|fc| fc.predicted_full_unix) {
            let dev = f.device.clone().unwrap_or_default();
            let l = labels(&[("mountpoint", &f.key.mountpoint), ("device", &dev)]);
            writeln!(
                w,
                "{}{l} {t} {now}",
                catalogue::FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS.name
            )?;
            n += 1;
        }
    }
    family(w, &catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS)?;
    for d in &drives {
        let pts = store.drive_days(d.id, 0, now)?;
        let fc = current::drive(&pts, now, None);
        if let Some(t) = fc.and_then(|fc| fc.predicted_wear_out_unix) {
            let dev = d.kernel_name.clone().unwrap_or_default();
            let serial = d.key.serial.clone().unwrap_or_default();
            let wwn = d.key.wwn.clone().unwrap_or_default();
            let l = labels(&[("device", &dev), ("serial", &serial), ("wwn", &wwn)]);
            writeln!(
                w,
                "{}{l} {t} {now}",
                catalogue::DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS.name
            )?;
            n += 1;
        }
    }
    writeln!(w, "# EOF")?;
    Ok(n)
}
