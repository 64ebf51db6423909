//! Fills a store with days of samples for the series another store knows, through the store's
//! own writes (one transaction per raw interval, a downsample an hour, as the daemon does), so
//! benches/history_io.sh can measure the steady state a host lives in rather than a new file.
//! Samples are synthetic (a slow fill, a daily wobble) around each series' last real values.
//! It only ever creates a new store ([`fill_new`]): synthetic rows in a host's real history
//! would give it full dates for filesystems that don't exist. Not part of the daemon's binary:
//! `examples/history_fill.rs` drives it.

use super::record::*;
use super::store::{Store, StoreError};
use crate::time::{DAY, HOUR};

/// What [`fill`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filled {
    pub filesystems: usize,
    pub drives: usize,
    /// Samples stored (filesystems and drives).
    pub samples: usize,
    /// Transactions of samples (one per raw interval).
    pub commits: usize,
}

/// The samples of every template series at time `t`, `ago` seconds before the templates'
/// values: avail was higher by 0.1% of the size a day, with a wobble of up to 0.01%.
fn fs_at(templates: &[(FsInfo, FsPoint)], t: i64, ago: i64) -> Vec<FsSample> {
    templates
        .iter()
        .map(|(info, p)| {
            let size = p.size.last.max(0.0);
            let wobble = ((t / 300 * 7919 + info.id.0 * 104_729) % 1000) as f64 / 1000.0;
            let avail =
                (p.avail.last + size * 1e-3 * ago as f64 / DAY as f64 + size * 1e-4 * wobble)
                    .clamp(0.0, size);
            let reserve = (p.free.last - p.avail.last).max(0.0);
            FsSample {
                key: info.key.clone(),
                device: info.device.clone().unwrap_or_default(),
                t,
                size_bytes: size as u64,
                avail_bytes: avail as u64,
                free_bytes: (avail + reserve).min(size) as u64,
                files_free: p.files_free.map(|f| f.last.max(0.0) as u64),
            }
        })
        .collect()
}

/// Drive samples at `t`: counters lower by 200 GB (host) and 300 GB (NAND) a day before the
/// template's, wear lower by 0.01% a day.
fn drives_at(templates: &[(DriveInfo, DrivePoint)], t: i64, ago: i64) -> Vec<DriveSample> {
    let days = ago as f64 / DAY as f64;
    let back = |v: Option<f64>, per_day: f64| v.map(|x| (x - per_day * days).max(0.0) as u64);
    templates
        .iter()
        .map(|(info, p)| DriveSample {
            key: info.key.clone(),
            kernel_name: info.kernel_name.clone().unwrap_or_default(),
            capacity_bytes: info.capacity_bytes,
            t,
            wear_used_ratio: p.wear_used_ratio.map(|w| (w.last - 1e-4 * days).max(0.0)),
            spare_ratio: p.spare_ratio.map(|s| s.last),
            host_written_bytes: back(p.host_written_bytes, 200e9),
            nand_written_bytes: back(p.nand_written_bytes, 300e9),
            media_errors: p.media_errors.map(|x| x as u64),
            power_on_hours: p.power_on_hours.map(|h| (h - days * 24.0).max(0.0) as u64),
            temperature_celsius: p
                .temperature_celsius
                .map(|c| c.last + ((t / HOUR) % 5) as f64),
            discarded_bytes: back(p.discarded_bytes, 100e9),
            health: Default::default(),
        })
        .collect()
}

/// Why [`fill_new`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    #[error(
        "{}: a store is already there; synthetic samples only go into a new store (give a directory without {})",
        .0.display(), super::store::FILE_NAME
    )]
    Exists(std::path::PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Creates the store of `state_dir` and fills it as [`fill`] does; refuses a directory that
/// already holds one (a real host's history, or anything else), writing nothing there.
pub fn fill_new(
    state_dir: &std::path::Path,
    cfg: &super::HistoryConfig,
    like: &Store,
    days: i64,
    until: i64,
) -> Result<Filled, FillError> {
    let path = state_dir.join(super::store::FILE_NAME);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(FillError::Exists(path));
    }
    let mut store = Store::open(state_dir, cfg)?;
    let step = cfg.raw_interval.as_secs().max(1) as i64;
    Ok(fill(&mut store, like, days, step, until)?)
}

/// Writes `days` days of samples, every `step` seconds up to `until` (excluded), for each
/// series `like` holds (its last point is the template), downsampling at each hour's end.
pub fn fill(
    store: &mut Store,
    like: &Store,
    days: i64,
    step: i64,
    until: i64,
) -> Result<Filled, StoreError> {
    let step = step.max(1);
    let mut fss = Vec::new();
    for f in like.filesystems()? {
        if let Some(p) = like.fs_series(f.id, 0, i64::MAX)?.pop() {
            fss.push((f, p));
        }
    }
    let mut drives = Vec::new();
    for d in like.drives()? {
        if let Some(p) = like.drive_series(d.id, 0, i64::MAX)?.pop() {
            drives.push((d, p));
        }
    }
    let mut out = Filled {
        filesystems: fss.len(),
        drives: drives.len(),
        ..Filled::default()
    };
    let start = (until - days.max(0) * DAY).div_euclid(step) * step;
    let mut t = start;
    while t < until {
        let ago = until - t;
        out.samples += store.record_fs(&fs_at(&fss, t, ago))?;
        out.samples += store.record_drives(&drives_at(&drives, t, ago))?;
        out.commits += 1;
        let next = t + step;
        if next.div_euclid(HOUR) != t.div_euclid(HOUR) {
            store.downsample(next)?;
        }
        t = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::HistoryConfig;

    #[test]
    fn a_store_filled_like_another_holds_its_series_over_the_days_asked() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cfg = HistoryConfig::default();
        let now = 1_767_225_600 + 20 * DAY;
        let mut like = Store::open(a.path(), &cfg).unwrap();
        let key = FsKey {
            mountpoint: "/srv/pg".into(),
            uuid: Some("u1".into()),
        };
        like.record_fs(&[FsSample {
            key: key.clone(),
            device: "nvme0n1p1".into(),
            t: now,
            size_bytes: 1 << 40,
            avail_bytes: 1 << 39,
            free_bytes: (1 << 39) + (1 << 30),
            files_free: Some(1000),
        }])
        .unwrap();
        let mut store = Store::open(b.path(), &cfg).unwrap();
        let f = fill(&mut store, &like, 2, 300, now).unwrap();
        assert_eq!((f.filesystems, f.drives), (1, 0));
        assert_eq!(f.commits, 2 * 288);
        assert_eq!(f.samples, 2 * 288);
        let id = store.fs_id_of(&key).unwrap().unwrap();
        let pts = store.fs_series(id, 0, i64::MAX).unwrap();
        assert_eq!(pts.len(), 2 * 288);
        assert_eq!(pts[0].t, now - 2 * DAY);
        assert_eq!(pts.last().unwrap().t, now - 300);
        // Two days ago the filesystem held 0.2% of its size less.
        let grew = pts[0].avail.last - pts.last().unwrap().avail.last;
        assert!((grew / (1u64 << 40) as f64 - 2e-3).abs() < 2e-4, "{grew}");
        assert!(pts.iter().all(|p| p.free.last > p.avail.last));
    }

    #[test]
    fn synthetic_samples_never_go_into_an_existing_store() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cfg = HistoryConfig::default();
        let now = 1_767_225_600 + 20 * DAY;
        let like = Store::open(a.path(), &cfg).unwrap();
        // A host's real store: one sample.
        let mut real = Store::open(b.path(), &cfg).unwrap();
        let key = FsKey {
            mountpoint: "/srv/pg".into(),
            uuid: None,
        };
        real.record_fs(&[FsSample {
            key: key.clone(),
            device: "sda1".into(),
            t: now - 600,
            size_bytes: 1 << 30,
            avail_bytes: 1 << 29,
            free_bytes: 1 << 29,
            files_free: None,
        }])
        .unwrap();
        drop(real);
        let before = std::fs::read(b.path().join(crate::history::store::FILE_NAME)).unwrap();
        let e = fill_new(b.path(), &cfg, &like, 2, now).unwrap_err();
        assert!(matches!(e, FillError::Exists(_)), "{e}");
        assert!(e.to_string().contains("already there"), "{e}");
        let after = std::fs::read(b.path().join(crate::history::store::FILE_NAME)).unwrap();
        assert_eq!(before, after, "the real store is untouched");
        // A fresh directory is filled.
        let c = tempfile::tempdir().unwrap();
        let f = fill_new(&c.path().join("new"), &cfg, &like, 1, now).unwrap();
        assert_eq!(f.filesystems, 0);
    }
}
