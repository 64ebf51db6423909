use super::*;
use crate::databases::component::{Component, Kind};
use crate::history::HistoryConfig;
use crate::history::record::*;
use crate::probe::ProbeKind;
use std::time::Duration;

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn cfg() -> HistoryConfig {
    HistoryConfig {
        raw_interval: Duration::from_secs(60),
        ..Default::default()
    }
}

fn fs(mp: &str, uuid: Option<&str>, device: &str, t: i64, avail: u64) -> FsSample {
    FsSample {
        key: FsKey {
            mountpoint: mp.into(),
            uuid: uuid.map(Into::into),
        },
        device: device.into(),
        t,
        size_bytes: 1 << 40,
        avail_bytes: avail,
        free_bytes: avail + (50 << 30),
        files_free: Some(1_000_000 - (t - T0) as u64 / 60),
    }
}

fn drive(serial: &str, wwn: Option<&str>, name: &str, t: i64, host: u64) -> DriveSample {
    DriveSample {
        key: DriveKey {
            wwn: wwn.map(Into::into),
            serial: Some(serial.into()),
            model: Some("SAMSUNG MZQL23T8HCLS".into()),
        },
        kernel_name: name.into(),
        capacity_bytes: Some(3_840_000_000_000),
        t,
        wear_used_ratio: Some(0.03),
        spare_ratio: Some(1.0),
        host_written_bytes: Some(host),
        nand_written_bytes: None,
        media_errors: Some(0),
        power_on_hours: Some(1000 + (t - T0) as u64 / 3600),
        temperature_celsius: Some(35.0 + ((t - T0) / 60 % 10) as f64),
        discarded_bytes: Some(host / 2),
        health: Default::default(),
    }
}

#[test]
fn samples_round_trip_and_the_raw_interval_thins_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let stored = s
        .record_fs(&[
            fs("/srv/pg", Some("u1"), "nvme0n1p1", T0, 500 << 30),
            fs("/srv/pg", Some("u1"), "nvme0n1p1", T0 + 15, 499 << 30),
            fs("/srv/pg", Some("u1"), "nvme0n1p1", T0 + 60, 498 << 30),
        ])
        .unwrap();
    assert_eq!(stored, 2, "the sample 15 s after the first is left out");
    let d = drive("S1", None, "nvme0n1", T0, 1 << 40);
    assert_eq!(s.record_drives(std::slice::from_ref(&d)).unwrap(), 1);
    drop(s);
    let s = Store::open(dir.path(), &cfg()).unwrap();
    let id = s.filesystems().unwrap()[0].id;
    let pts = s.fs_series(id, T0, T0 + 3600).unwrap();
    assert_eq!(pts.len(), 2);
    assert_eq!(pts[1].avail, Stat::one((498u64 << 30) as f64));
    assert_eq!(pts[1].free.last, ((498u64 << 30) + (50 << 30)) as f64);
    assert!(!pts[1].hourly);
    let drives = s.drives().unwrap();
    assert_eq!(drives[0].kernel_name.as_deref(), Some("nvme0n1"));
    let dp = s.drive_series(drives[0].id, T0, T0).unwrap();
    assert_eq!(dp[0].wear_used_ratio.unwrap().last, 0.03);
    assert_eq!(dp[0].temperature_celsius.unwrap().last, 35.0);
    assert_eq!(dp[0].host_written_bytes, Some((1u64 << 40) as f64));
    assert_eq!(dp[0].nand_written_bytes, None, "unknown stays unknown");
    let tables = s.table_sizes().unwrap();
    assert!(
        tables.iter().any(|(n, b)| n == "fs_raw" && *b > 0),
        "{tables:?}"
    );
}

#[test]
fn downsampling_keeps_min_max_mean_last_and_deletes_raw_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    // One hour, a sample a minute: avail falls 1 MiB a minute, with one dip at minute 30.
    let mib = 1u64 << 20;
    let samples: Vec<FsSample> = (0..60)
        .map(|m| {
            let avail = if m == 30 {
                100 * mib
            } else {
                1000 * mib - m as u64 * mib
            };
            fs("/srv/pg", Some("u1"), "dm-0", T0 + m * 60, avail)
        })
        .collect();
    s.record_fs(&samples).unwrap();
    let drives: Vec<DriveSample> = (0..4)
        .map(|q| drive("S1", None, "nvme0n1", T0 + q * 900, (q as u64 + 1) << 30))
        .collect();
    s.record_drives(&drives).unwrap();
    // Not yet older than 14 days: nothing rolls.
    assert_eq!(s.downsample(T0 + 3600).unwrap().raw_rolled, 0);
    let m = s.downsample(T0 + 15 * 86_400).unwrap();
    assert_eq!(m.raw_rolled, 64);
    assert_eq!(m.hours_written, 2);
    let raw_left: i64 = s
        .conn
        .query_row("SELECT count(*) FROM fs_raw", [], |r| r.get(0))
        .unwrap();
    assert_eq!(raw_left, 0);
    assert!(
        s.raw_days.borrow().as_ref().is_none_or(|d| d.is_empty()),
        "a rolled day's raw extremes go with its rows"
    );
    let id = s.filesystems().unwrap()[0].id;
    let pts = s.fs_series(id, T0 - 86_400, T0 + 86_400).unwrap();
    assert_eq!(pts.len(), 1);
    let p = &pts[0];
    assert!(p.hourly);
    assert_eq!(p.t, T0);
    let values: Vec<f64> = samples.iter().map(|x| x.avail_bytes as f64).collect();
    let mean = (values.iter().sum::<f64>() / 60.0).round();
    assert_eq!(p.avail.min, (100 * mib) as f64);
    assert_eq!(p.avail.max, (1000 * mib) as f64);
    assert_eq!(p.avail.mean, mean);
    assert_eq!(p.avail.last, (941 * mib) as f64);
    assert_eq!(p.free.min, (100 * mib + (50 << 30)) as f64);
    assert_eq!(p.free.last, (941 * mib + (50 << 30)) as f64);
    assert_eq!(p.size, Stat::one((1u64 << 40) as f64));
    let ff = p.files_free.unwrap();
    assert_eq!(
        (ff.min, ff.max, ff.last),
        (999_941.0, 1_000_000.0, 999_941.0)
    );
    let did = s.drives().unwrap()[0].id;
    let dp = s.drive_series(did, T0, T0 + 86_400).unwrap();
    assert_eq!(dp.len(), 1);
    let t = dp[0].temperature_celsius.unwrap();
    assert_eq!((t.min, t.max, t.last), (35.0, 35.0 + 5.0, 35.0 + 5.0));
    assert_eq!(t.mean, 35.0 + (0.0 + 5.0 + 0.0 + 5.0) / 4.0);
    assert_eq!(
        dp[0].host_written_bytes,
        Some((4u64 << 30) as f64),
        "counter: last"
    );
}

#[test]
fn raw_and_hourly_points_merge_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let day = 86_400;
    let samples: Vec<FsSample> = (0..20 * 24)
        .map(|h| fs("/", None, "sda1", T0 + h * 3600, (900 - h as u64) << 30))
        .collect();
    s.record_fs(&samples).unwrap();
    s.downsample(T0 + 20 * day).unwrap();
    let id = s.filesystems().unwrap()[0].id;
    let pts = s.fs_series(id, T0, T0 + 20 * day).unwrap();
    assert_eq!(pts.len(), 20 * 24);
    assert!(pts.windows(2).all(|w| w[0].t < w[1].t));
    let hourly = pts.iter().filter(|p| p.hourly).count();
    assert_eq!(hourly, 6 * 24, "what is older than 14 days is hourly");
}

/// /srv/pg over `days` days from T0, a sample every 10 min, avail shrinking and wandering.
fn wandering_pg(days: i64) -> Vec<FsSample> {
    (0..days * 144)
        .map(|i| {
            let wobble = (i * 7919 % 1000) as u64 * (1 << 20);
            fs(
                "/srv/pg",
                Some("u1"),
                "dm-0",
                T0 + i * 600,
                (800u64 << 30) - ((i as u64) << 24) + wobble,
            )
        })
        .collect()
}

#[test]
fn daily_summaries_equal_what_the_points_say() {
    use crate::history::forecast::{daily_use, forecast_drive, forecast_filesystem};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let day = 86_400;
    // 20 days, a sample every 10 min, avail wandering; 6 days end up hourly.
    let samples = wandering_pg(20);
    s.record_fs(&samples).unwrap();
    let drives: Vec<DriveSample> = (0..20 * 96)
        .map(|q| drive("S1", None, "nvme0n1", T0 + q * 900, (q as u64 + 1) << 30))
        .collect();
    s.record_drives(&drives).unwrap();
    let now = T0 + 20 * day;
    s.downsample(now).unwrap();
    let id = s.filesystems().unwrap()[0].id;
    let pts = s.fs_series(id, T0, now).unwrap();
    assert!(pts.iter().any(|p| p.hourly) && pts.iter().any(|p| !p.hourly));
    assert_eq!(s.fs_days(id, T0, now).unwrap(), daily_use(&pts));
    assert_eq!(
        forecast_filesystem(&pts, now),
        crate::history::forecast::forecast_filesystem_days(&s.fs_days(id, T0, now).unwrap(), now)
    );
    let did = s.drives().unwrap()[0].id;
    let days = s.drive_days(did, T0, now).unwrap();
    assert_eq!(days.len(), 20);
    let all = s.drive_series(did, T0, now).unwrap();
    for d in &days {
        let last = all
            .iter()
            .rfind(|p| p.t.div_euclid(day) == d.t.div_euclid(day))
            .unwrap();
        assert_eq!(d.host_written_bytes, last.host_written_bytes);
        assert_eq!(
            d.wear_used_ratio.unwrap().last,
            last.wear_used_ratio.unwrap().last
        );
    }
    let (a, b) = (
        forecast_drive(&days, now, None),
        forecast_drive(&all, now, None),
    );
    assert_eq!(a.host_bytes_per_day_30d, b.host_bytes_per_day_30d);
    assert_eq!(a.wear_rate_per_day, b.wear_rate_per_day);
}

#[test]
fn finished_raw_days_are_summarized_once_and_a_restart_reads_the_same_days() {
    use crate::history::forecast::daily_use;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let samples = wandering_pg(20);
    s.record_fs(&samples).unwrap();
    let count = |s: &Store| -> (i64, Option<i64>, Option<i64>) {
        s.conn
            .query_row(
                "SELECT count(*), min(id) >> 24, max(id) >> 24 FROM fs_day",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    // 01:00 on day 20: day 19 ended only an hour ago, so it is not summarized yet.
    let now = T0 + 20 * DAY + HOUR;
    let m = s.downsample(now).unwrap();
    let first_raw = T0 / DAY + 6;
    assert_eq!(m.days_summarized, 13, "days 6..=18 of the 14 raw days");
    assert_eq!(count(&s), (13, Some(first_raw), Some(T0 / DAY + 18)));
    assert_eq!(
        s.downsample(now).unwrap().days_summarized,
        0,
        "written once"
    );
    // Three hours later day 19 is over by more than two hours.
    assert_eq!(s.downsample(now + 2 * HOUR).unwrap().days_summarized, 1);
    let id = s.filesystems().unwrap()[0].id;
    let before = s.fs_days(id, T0, now).unwrap();
    assert_eq!(before, daily_use(&s.fs_series(id, T0, now).unwrap()));
    drop(s);

    // After a start the days are read from fs_day and the raw rows since; the same days.
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    assert_eq!(s.fs_days(id, T0, now).unwrap(), before);
    // A sample that arrives for a day already summarized (the raw gate refuses one older
    // than its series' last, so only a series' first can: here a filesystem first seen
    // with a time in day 10) goes into that day's summary too, so a restart reads it.
    let late = fs("/srv/late", None, "sdb1", T0 + 10 * DAY + 300, 1 << 30);
    assert_eq!(s.record_fs(std::slice::from_ref(&late)).unwrap(), 1);
    let late_id = s.fs_id_of(&late.key).unwrap().unwrap();
    let after = s.fs_days(late_id, T0, now).unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after, daily_use(&s.fs_series(late_id, T0, now).unwrap()));
    drop(s);
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    assert_eq!(s.fs_days(late_id, T0, now).unwrap(), after);
    assert_eq!(s.fs_days(id, T0, now).unwrap(), before);
    // Rolled days leave fs_day with their raw rows.
    s.downsample(now + 3 * DAY).unwrap();
    let (_, lo, _) = count(&s);
    assert_eq!(lo, Some(first_raw + 3));
    assert_eq!(
        s.fs_days(id, T0, now + 3 * DAY).unwrap(),
        daily_use(&s.fs_series(id, T0, now + 3 * DAY).unwrap())
    );
}

#[test]
fn retention_drops_old_hours_probes_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let c = HistoryConfig {
        retention_raw: Duration::from_secs(86_400),
        retention_hourly: Duration::from_secs(10 * 86_400),
        raw_interval: Duration::from_secs(60),
        ..Default::default()
    };
    let mut s = Store::open(dir.path(), &c).unwrap();
    let samples: Vec<FsSample> = (0..30 * 24)
        .map(|h| fs("/", None, "sda1", T0 + h * 3600, 1 << 30))
        .collect();
    s.record_fs(&samples).unwrap();
    let key = DriveKey {
        serial: Some("S1".into()),
        ..Default::default()
    };
    s.record_discards(&[
        DiscardEvent {
            drive: key.clone(),
            t: T0,
            bytes: 1 << 30,
        },
        DiscardEvent {
            drive: key.clone(),
            t: T0 + 25 * 86_400,
            bytes: 2 << 30,
        },
    ])
    .unwrap();
    s.record_idle(&[IdlePeriod {
        drive: key.clone(),
        start: T0,
        seconds: 600,
    }])
    .unwrap();
    let now = T0 + 30 * 86_400;
    let m = s.downsample(now).unwrap();
    assert_eq!(m.raw_rolled, 29 * 24);
    assert_eq!(m.hours_dropped, 20 * 24);
    assert_eq!(m.events_dropped, 2);
    let id = s.filesystems().unwrap()[0].id;
    let pts = s.fs_series(id, 0, now).unwrap();
    assert_eq!(pts.first().unwrap().t, now - 10 * 86_400);
    assert_eq!(pts.len(), 10 * 24);
    let did = s.drives().unwrap()[0].id;
    assert_eq!(
        s.discard_events(did, 0, now).unwrap(),
        vec![(T0 + 25 * 86_400, 2 << 30)]
    );
    assert!(s.idle_periods(did, 0, now).unwrap().is_empty());
}

/// Each run's context comes back as recorded, its untrimmed share included; a run of 16
/// writes comes back without a p99 (the store holds its maximum in that column, as older
/// versions did for every short run), one of 256 with its p99.
#[test]
fn probe_results_keep_their_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let p = ProbeRecord {
        target: "/srv/pg".into(),
        drive: Some(DriveKey {
            wwn: Some("eui.0025388b91b2c0e5".into()),
            serial: Some("S1".into()),
            model: None,
        }),
        t: T0,
        kind: ProbeKind::SyncWrite4k,
        ops: 16,
        p50_seconds: 0.000_123_456,
        p99_seconds: None,
        max_seconds: 0.0031,
        throughput_bytes_per_second: None,
        fill_ratio: Some(0.873),
        since_discard_seconds: Some(3600.0),
        idle_seconds: Some(12.0),
        utilization_ratio: Some(0.05),
        utilization_before_ratio: Some(0.01),
        written_since_discard_bytes: Some(5 << 30),
        untrimmed_ratio: Some(0.25),
    };
    let mut q = p.clone();
    q.ops = 256;
    q.p99_seconds = Some(0.002);
    q.untrimmed_ratio = None;
    q.kind = ProbeKind::SeqWrite;
    q.drive = None;
    q.written_since_discard_bytes = None;
    q.throughput_bytes_per_second = Some(1.5e9);
    s.record_probes(&[p.clone(), q.clone()]).unwrap();
    assert_eq!(s.probe_results(T0, T0).unwrap(), vec![p, q]);
}

#[test]
fn two_openers_of_a_new_file_make_the_schema_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = HistoryConfig::default();
    for _ in 0..20 {
        let _ = std::fs::remove_file(dir.path().join(FILE_NAME));
        let _ = std::fs::remove_file(dir.path().join(format!("{FILE_NAME}-wal")));
        let _ = std::fs::remove_file(dir.path().join(format!("{FILE_NAME}-shm")));
        let openers: Vec<_> = (0..4)
            .map(|_| {
                let p = dir.path().to_path_buf();
                let c = cfg.clone();
                // Not the door: a test opening the store from four threads at once, on purpose.
                std::thread::spawn(move || Store::open(&p, &c).map(|_| ()))
            })
            .collect();
        for o in openers {
            o.join().unwrap().expect("every opener finds one schema");
        }
    }
}

#[test]
fn a_remounted_filesystem_continues_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    s.record_fs(&[fs("/srv/pg", Some("u1"), "dm-3", T0, 10 << 30)])
        .unwrap();
    drop(s);
    // After a reboot the same filesystem comes up as dm-5.
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    s.record_fs(&[fs("/srv/pg", Some("u1"), "dm-5", T0 + 600, 9 << 30)])
        .unwrap();
    // A reformat (new UUID) at the same mount point is another filesystem.
    s.record_fs(&[fs("/srv/pg", Some("u2"), "dm-5", T0 + 1200, 1 << 40)])
        .unwrap();
    let all = s.filesystems().unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].device.as_deref(), Some("dm-5"));
    assert_eq!(s.fs_series(all[0].id, 0, i64::MAX).unwrap().len(), 2);
    // Seen first without a UUID, then with one: the same series.
    s.record_fs(&[fs("/boot", None, "sda1", T0, 1 << 30)])
        .unwrap();
    s.record_fs(&[fs("/boot", Some("b1"), "sda1", T0 + 600, 1 << 30)])
        .unwrap();
    let boot = s.fs_id_of(&FsKey {
        mountpoint: "/boot".into(),
        uuid: Some("b1".into()),
    });
    assert_eq!(
        s.fs_series(boot.unwrap().unwrap(), 0, i64::MAX)
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_drive_under_another_kernel_name_continues_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    s.record_drives(&[drive("S1", None, "nvme0n1", T0, 1 << 30)])
        .unwrap();
    drop(s);
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    s.record_drives(&[
        drive("S1", Some("eui.1"), "nvme1n1", T0 + 900, 2 << 30),
        drive("S2", None, "nvme0n1", T0 + 900, 5 << 30),
    ])
    .unwrap();
    // The WWN learnt above is enough from now on.
    let mut by_wwn = drive("ignored", Some("eui.1"), "nvme2n1", T0 + 1800, 3 << 30);
    by_wwn.key.serial = None;
    s.record_drives(&[by_wwn]).unwrap();
    let drives = s.drives().unwrap();
    assert_eq!(drives.len(), 2);
    assert_eq!(drives[0].key.wwn.as_deref(), Some("eui.1"));
    assert_eq!(drives[0].kernel_name.as_deref(), Some("nvme2n1"));
    let series = s.drive_series(drives[0].id, 0, i64::MAX).unwrap();
    let host: Vec<f64> = series.iter().filter_map(|p| p.host_written_bytes).collect();
    assert_eq!(
        host,
        vec![
            (1u64 << 30) as f64,
            (2u64 << 30) as f64,
            (3u64 << 30) as f64
        ]
    );
    let mut anonymous = drive("x", None, "sdz", T0, 0);
    anonymous.key.serial = None;
    let e = s.record_drives(&[anonymous]).unwrap_err();
    assert!(matches!(e, StoreError::NoDriveIdentity { .. }), "{e}");
}

fn damaged_file_is_moved_aside(damage: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let samples: Vec<FsSample> = (0..5000)
        .map(|m| fs("/srv/pg", Some("u1"), "dm-0", T0 + m * 60, 1 << 30))
        .collect();
    s.record_fs(&samples).unwrap();
    drop(s);
    let path = dir.path().join(FILE_NAME);
    damage(&path);
    let e = Store::open(dir.path(), &cfg()).unwrap_err();
    assert!(e.is_corrupt(), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let (mut s, aside) = Store::open_or_recover(dir.path(), &cfg(), 1_800_000_000).unwrap();
    let aside = aside.expect("moved aside");
    assert_eq!(aside, dir.path().join("history.db.corrupt-1800000000"));
    assert!(aside.exists());
    assert_eq!(
        s.record_fs(&samples[..1]).unwrap(),
        1,
        "the new store works"
    );
    assert_eq!(s.filesystems().unwrap().len(), 1);
}

#[test]
fn a_file_of_garbage_is_named_and_moved_aside() {
    damaged_file_is_moved_aside(|p| {
        let garbage: Vec<u8> = (0..100_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(p, garbage).unwrap();
    });
}

#[test]
fn a_truncated_file_is_named_and_moved_aside() {
    damaged_file_is_moved_aside(|p| {
        let len = std::fs::metadata(p).unwrap().len();
        assert!(len > 16_384, "{len}");
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.set_len(len / 2).unwrap();
    });
}

#[test]
fn a_healthy_store_is_not_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), &cfg()).unwrap());
    let (_s, aside) = Store::open_or_recover(dir.path(), &cfg(), 1).unwrap();
    assert_eq!(aside, None);
}

/// A read-only filesystem under the state directory: a tmpfs mounted read-only when we are
/// root (permission bits do not stop root), a mode 0555 directory otherwise.
struct ReadOnlyDir {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl ReadOnlyDir {
    fn new(options: &str) -> Option<ReadOnlyDir> {
        let dir = tempfile::tempdir().unwrap();
        if nix::unistd::geteuid().is_root() {
            let ok = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", options, "ssdwatch-test"])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("skipped: cannot mount a tmpfs here");
                return None;
            }
            Some(ReadOnlyDir { dir, mounted: true })
        } else {
            use std::os::unix::fs::PermissionsExt;
            if options.contains("size") {
                eprintln!("skipped: a full filesystem needs root to mount");
                return None;
            }
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
            Some(ReadOnlyDir {
                dir,
                mounted: false,
            })
        }
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status();
        }
    }
}

#[test]
fn a_read_only_state_dir_is_an_error_not_a_panic() {
    let Some(ro) = ReadOnlyDir::new("ro,size=1m") else {
        return;
    };
    let e = Store::open(&ro.dir.path().join("state"), &cfg()).unwrap_err();
    assert!(e.to_string().contains("history.db"), "{e}");
    let e = Store::open(ro.dir.path(), &cfg()).unwrap_err();
    assert!(e.to_string().contains("history.db"), "{e}");
    assert!(!e.is_corrupt());
    let e = Store::open_or_recover(ro.dir.path(), &cfg(), 1).unwrap_err();
    assert!(e.to_string().contains("history.db"), "{e}");
}

#[test]
fn a_full_state_dir_is_an_error_not_a_panic() {
    let Some(full) = ReadOnlyDir::new("size=256k") else {
        return;
    };
    let mut s = match Store::open(full.dir.path(), &cfg()) {
        Ok(s) => s,
        Err(e) => {
            assert!(e.to_string().contains("history.db"), "{e}");
            return;
        }
    };
    let mut failed = None;
    for batch in 0..200 {
        let samples: Vec<FsSample> = (0..500)
            .map(|m| {
                fs(
                    "/srv/pg",
                    Some("u1"),
                    "dm-0",
                    T0 + (batch * 500 + m) * 60,
                    1 << 30,
                )
            })
            .collect();
        if let Err(e) = s.record_fs(&samples) {
            failed = Some(e);
            break;
        }
    }
    let e = failed.expect("a 256 KiB filesystem fills up");
    assert!(e.to_string().contains("history.db"), "{e}");
    assert!(e.to_string().contains("full"), "{e}");
}

fn stack(t: i64, pool_avail: u64) -> FsLayers {
    FsLayers {
        key: FsKey {
            mountpoint: "/var/lib/mysql".into(),
            uuid: Some("u1".into()),
        },
        device: "dm-4".into(),
        t,
        layers: vec![
            LayerRow {
                layer: "filesystem".into(),
                name: String::new(),
                avail_bytes: 200 << 20,
                size_bytes: Some(400 << 20),
                limiting: false,
            },
            LayerRow {
                layer: "thin_pool".into(),
                name: "vg-pool-tpool".into(),
                avail_bytes: pool_avail,
                size_bytes: Some(256 << 20),
                limiting: true,
            },
        ],
    }
}

#[test]
fn a_filesystems_newest_stack_of_layers_is_kept_and_an_empty_one_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let a = stack(T0, 40 << 20);
    s.record_fs(&[fs("/var/lib/mysql", Some("u1"), "dm-4", T0, 200 << 20)])
        .unwrap();
    assert_eq!(s.record_fs_layers(std::slice::from_ref(&a)).unwrap(), 1);
    let id = s.fs_id_of(&a.key).unwrap().unwrap();
    assert_eq!(s.fs_layers(id).unwrap(), Some((T0, a.layers.clone())));
    // A newer stack replaces it; an older one (a clock set back) does not.
    let b = stack(T0 + 300, 8 << 20);
    s.record_fs_layers(std::slice::from_ref(&b)).unwrap();
    assert_eq!(s.record_fs_layers(&[stack(T0 + 60, 1)]).unwrap(), 0);
    assert_eq!(s.fs_layers(id).unwrap(), Some((T0 + 300, b.layers.clone())));
    // It survives a restart.
    drop(s);
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    assert_eq!(s.fs_layers(id).unwrap(), Some((T0 + 300, b.layers)));
    // The mount moved off the thin volume: nothing below it any more.
    let mut none = stack(T0 + 600, 0);
    none.layers.clear();
    s.record_fs_layers(std::slice::from_ref(&none)).unwrap();
    assert_eq!(s.fs_layers(id).unwrap(), None);
    // A filesystem never seen with layers makes no series of its own.
    none.key.mountpoint = "/srv/other".into();
    assert_eq!(s.record_fs_layers(&[none.clone()]).unwrap(), 0);
    assert_eq!(s.fs_id_of(&none.key).unwrap(), None);
}

fn wal_sample(t: i64, wal: u64, ready: u64) -> DatabaseSample {
    DatabaseSample {
        database: "/var/lib/postgresql/15/main".into(),
        kind: Kind::Postgres,
        t,
        components: vec![
            ComponentSize {
                component: Component::Wal,
                mountpoint: "/srv/pg".into(),
                bytes: wal,
            },
            ComponentSize {
                component: Component::Relations,
                mountpoint: "/srv/pg".into(),
                bytes: 9 << 30,
            },
        ],
        facts: DatabaseFacts {
            archive_ready_segments: Some(ready),
            archive_oldest_ready_age_seconds: Some(ready * 60),
            slot: Some(("standby1".into(), 1 << 30)),
            ..Default::default()
        },
    }
}

#[test]
fn component_sizes_keep_the_last_of_each_hour_and_the_facts_their_newest() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    // Three samples in the first hour (out of order), one in the next.
    let batch = [
        wal_sample(T0 + 600, 300, 3),
        wal_sample(T0 + 60, 100, 1),
        wal_sample(T0 + 1800, 200, 2),
        wal_sample(T0 + 3700, 400, 4),
    ];
    assert_eq!(s.record_databases(&batch).unwrap(), 8);
    // An older sample arriving late changes neither the hour's row nor the facts.
    s.record_databases(&[wal_sample(T0 + 30, 50, 9)]).unwrap();
    let comps = s.components(T0, T0 + DAY).unwrap();
    assert_eq!(comps.len(), 2);
    let wal = comps
        .iter()
        .find(|c| c.component == Component::Wal.label())
        .unwrap();
    assert_eq!(wal.mountpoint, "/srv/pg");
    assert_eq!(wal.kind, Kind::Postgres.label());
    assert_eq!(wal.sizes, vec![(T0 + 1800, 200), (T0 + 3700, 400)]);
    let facts = s.database_facts().unwrap();
    let (kind, t, f) = &facts["/var/lib/postgresql/15/main"];
    assert_eq!((kind.as_str(), *t), (Kind::Postgres.label(), T0 + 3700));
    assert_eq!(f.archive_ready_segments, Some(4));
    assert_eq!(f.slot, Some(("standby1".to_string(), 1 << 30)));
    // A range that holds none of its sizes leaves a component out.
    assert!(s.components(T0 + 2 * DAY, T0 + 3 * DAY).unwrap().is_empty());
}

#[test]
fn drive_health_is_kept_a_row_an_hour_and_thinned_to_a_day_past_the_raw_retention() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = HistoryConfig {
        raw_interval: Duration::from_secs(60),
        retention_raw: Duration::from_secs(2 * DAY as u64),
        ..Default::default()
    };
    let mut s = Store::open(dir.path(), &cfg).unwrap();
    // Four days, a reading every 30 minutes: the error log grows by one an hour.
    let mut samples = Vec::new();
    for i in 0..4 * 48 {
        let t = T0 + i * 1800;
        let mut d = drive("S1", None, "nvme0n1", t, 1 << 40);
        d.health = DriveHealthRecord {
            error_log_entries: Some(10 + (i / 2) as u64),
            self_test: Some("short passed".into()),
            self_test_age_seconds: Some(3600),
            temperature_warning_celsius: Some(70.0),
            above_warning_seconds: Some(0),
            durability: Some("none".into()),
        };
        samples.push(d);
    }
    s.record_drives(&samples).unwrap();
    let id = s.drives().unwrap()[0].id;
    let all = s.drive_health(id, T0, T0 + 4 * DAY).unwrap();
    assert_eq!(all.len(), 4 * 24, "one row an hour");
    assert_eq!(all[0].t, T0 + 1800, "the hour's last reading");
    assert_eq!(all[0].health.error_log_entries, Some(10));
    assert_eq!(all[0].health.temperature_warning_celsius, Some(70.0));
    assert_eq!(all[0].health.durability.as_deref(), Some("none"));
    // Maintenance at the end of day 4: days 1 and 2 are past the raw retention.
    let m = s.downsample(T0 + 4 * DAY).unwrap();
    assert_eq!(m.hourly_thinned, 2 * 23);
    let kept = s.drive_health(id, T0, T0 + 4 * DAY).unwrap();
    assert_eq!(kept.len(), 2 + 2 * 24);
    assert_eq!(kept[0].t, T0 + DAY - 1800, "day 1's last reading");
    assert_eq!(kept[0].health.error_log_entries, Some(10 + 23));
    // Again: nothing more to thin.
    assert_eq!(s.downsample(T0 + 4 * DAY).unwrap().hourly_thinned, 0);
}

/// A daemon started under a clock ten years ahead for two minutes, then under the right clock
/// (a dead RTC, a VM restored from a snapshot, NTP stepping after the start): the rows of
/// before are kept through the maintenance the wrong clock ran, and the rows it stamped in
/// 2036 are removed so the right clock's samples are stored again.
#[test]
fn a_clock_ten_years_ahead_neither_deletes_the_history_nor_blocks_the_right_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    let now = T0 + 40 * DAY;
    let at = |t: i64| FsSample {
        t,
        files_free: None,
        ..fs("/srv/pg", Some("u1"), "nvme0n1p1", T0, 1 << 39)
    };
    let real: Vec<FsSample> = (0..6).map(|i| at(now - 6 * 300 + i * 300)).collect();
    assert_eq!(s.record_fs(&real).unwrap(), 6);
    let ahead = now + 3_650 * DAY;
    assert_eq!(s.record_fs(&[at(ahead), at(ahead + 300)]).unwrap(), 2);
    // The wrong clock's maintenance: retention by that clock would drop every row of 2026.
    let m = s.downsample(ahead + 600).unwrap();
    assert_eq!(m.hours_dropped, 0, "{m:?}");
    let id = s.filesystems().unwrap()[0].id;
    let kept = s.fs_series(id, 0, now).unwrap();
    assert!(!kept.is_empty(), "the history is kept (rolled into hours)");
    assert!(kept.iter().all(|p| p.t <= now), "{kept:?}");
    assert_eq!(s.newest_t().unwrap(), Some(ahead + 300));
    // The right clock again: what was stamped after it goes, and its samples are stored.
    let f = s.drop_future(now + 300).unwrap();
    assert_eq!(f.rows, 2);
    assert_eq!(f.newest, ahead + 300);
    assert!(s.newest_t().unwrap().is_some_and(|t| t <= now));
    assert_eq!(s.record_fs(&[at(now)]).unwrap(), 1);
    assert_eq!(s.take_refused_older(), 0);
    // Nothing after now: nothing removed.
    assert_eq!(s.drop_future(now + 300).unwrap(), FutureRows::default());
}

/// Retention drops only what newer days with samples replaced: a host off for a year keeps
/// its hourly history until as many days of new samples come; raw rows are rolled by the
/// clock (into hours, nothing lost).
#[test]
fn retention_never_drops_the_newest_days_that_hold_data() {
    let dir = tempfile::tempdir().unwrap();
    let c = HistoryConfig {
        retention_raw: Duration::from_secs(2 * DAY as u64),
        retention_hourly: Duration::from_secs(5 * DAY as u64),
        raw_interval: Duration::from_secs(60),
        ..Default::default()
    };
    let mut s = Store::open(dir.path(), &c).unwrap();
    // Three days of samples, then the host is off for a year, then one day.
    let mut samples: Vec<FsSample> = (0..3 * 24)
        .map(|h| fs("/", None, "sda1", T0 + h * 3600, 1 << 30))
        .collect();
    let back = T0 + 365 * DAY;
    samples.extend((0..24).map(|h| fs("/", None, "sda1", back + h * 3600, 1 << 30)));
    s.record_fs(&samples).unwrap();
    let m = s.downsample(back + DAY + 3 * HOUR).unwrap();
    assert_eq!(m.hours_dropped, 0, "{m:?}");
    assert_eq!(m.raw_rolled, 3 * 24, "{m:?}");
    let id = s.filesystems().unwrap()[0].id;
    assert_eq!(s.fs_series(id, 0, i64::MAX / 4).unwrap().len(), 4 * 24);
    assert_eq!(s.recorded_floor(2).unwrap(), Some(T0 / DAY + 2));
    assert_eq!(s.recorded_floor(5).unwrap(), None);
    // Three more days of samples: the newest five days with data reach back to day 2.
    samples = (0..3 * 24)
        .map(|h| fs("/", None, "sda1", back + DAY + h * 3600, 1 << 30))
        .collect();
    s.record_fs(&samples).unwrap();
    let m = s.downsample(back + 4 * DAY + 3 * HOUR).unwrap();
    assert_eq!(m.hours_dropped, 2 * 24, "days 0 and 1 replaced: {m:?}");
}

/// The report reads the newest point of every series at once; each must be the one the
/// series' own points end with, whether the range holds raw rows, hourly rows or both, and
/// for series that stopped, started late or never report a temperature.
#[test]
fn the_newest_points_of_all_series_are_the_last_of_each_series_own_points() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let day = 86_400;
    let now = T0 + 20 * day;
    let mut fss = Vec::new();
    let mut drives = Vec::new();
    for i in 0..20 * 144 {
        let t = T0 + i * 600;
        let avail = (800u64 << 30) - ((i as u64) << 24) + (i * 7919 % 1000) as u64 * (1 << 20);
        fss.push(fs("/srv/pg", Some("u1"), "dm-0", t, avail));
        // Gone 5 days before the end; new on the last day; gone mid-way through yesterday.
        if t < now - 5 * day {
            fss.push(fs("/old", Some("u2"), "sdb1", t, avail / 2));
        }
        if t >= now - day {
            fss.push(fs("/new", Some("u3"), "sdc1", t, avail / 3));
        }
        if t < now - day - day / 2 {
            fss.push(fs("/gone", Some("u4"), "sdd1", t, avail / 4));
        }
        if i % 2 == 0 {
            drives.push(drive("S1", None, "nvme0n1", t, (i as u64 + 1) << 30));
            let mut cold = drive("S2", None, "nvme1n1", t, (i as u64 + 1) << 29);
            cold.temperature_celsius = None;
            drives.push(cold);
            if t < now - 4 * day {
                drives.push(drive("S3", None, "nvme2n1", t, (i as u64 + 1) << 28));
            }
        }
    }
    fss.sort_by_key(|f| f.t);
    s.record_fs(&fss).unwrap();
    s.record_drives(&drives).unwrap();
    s.downsample(now).unwrap();
    let ids: Vec<FsId> = s.filesystems().unwrap().iter().map(|f| f.id).collect();
    let dids: Vec<DriveId> = s.drives().unwrap().iter().map(|d| d.id).collect();
    assert_eq!((ids.len(), dids.len()), (4, 3));
    s.begin_read().unwrap();
    // Each range with how many filesystems and drive temperatures it holds.
    for (from, to, n_fs, n_temps) in [
        (now - 2 * day, now, 3, 1),
        (now - 2 * day, now - day, 3, 1),
        (now - 5 * day - 3600, now - 5 * day + 3600, 3, 2),
        // Across the raw retention's edge (14 days), and wholly hourly.
        (now - 16 * day, now - 13 * day, 3, 2),
        (now - 18 * day, now - 17 * day - 1, 3, 2),
        (now + day, now + 2 * day, 0, 0),
    ] {
        let newest = s
            .fs_newest(&ids.iter().map(|id| (*id, from)).collect(), to)
            .unwrap();
        assert_eq!(newest.len(), n_fs, "in {from}..={to}");
        for id in &ids {
            let expected = s.fs_series(*id, from, to).unwrap().pop();
            assert_eq!(newest.get(id), expected.as_ref(), "{id:?} in {from}..={to}");
        }
        // Ranges that begin at each series' own time, an hour and a half apart.
        let starts: BTreeMap<FsId, i64> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, from + i as i64 * 5400))
            .collect();
        let newest = s.fs_newest(&starts, to).unwrap();
        let mut each: BTreeMap<FsId, Vec<FsPoint>> = BTreeMap::new();
        s.fs_series_each(&starts, to, |id, p| each.entry(id).or_default().push(p))
            .unwrap();
        for (id, f) in &starts {
            let expected = s.fs_series(*id, *f, to).unwrap();
            assert_eq!(newest.get(id), expected.last(), "{id:?} in {f}..={to}");
            assert_eq!(
                each.remove(id).unwrap_or_default(),
                expected,
                "{id:?} in {f}..={to}"
            );
        }
        let temps = s.drive_temperatures(&dids, from, to).unwrap();
        assert_eq!(temps.len(), n_temps, "in {from}..={to}");
        for id in &dids {
            let expected = s
                .drive_series(*id, from, to)
                .unwrap()
                .iter()
                .rev()
                .find_map(|p| p.temperature_celsius.map(|t| t.last));
            assert_eq!(temps.get(id).copied(), expected, "{id:?} in {from}..={to}");
        }
    }
    s.end_read().unwrap();
}

#[test]
fn a_layers_use_is_kept_at_the_raw_interval_with_its_days_extremes_and_dropped_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    // Two days of a pool losing 1 MiB every 30 s, stacks every 30 s: kept once a minute.
    let mut t = T0;
    let mut avail: u64 = 200 << 20;
    while t < T0 + 2 * DAY {
        s.record_fs_layers(&[stack(t, avail)]).unwrap();
        t += 30;
        avail = avail.saturating_sub(1 << 10);
    }
    let key = stack(T0, 0).key;
    let id = s.fs_id_of(&key).unwrap().unwrap();
    let uses = s.layer_uses(id, T0, T0 + DAY, T0 + 2 * DAY).unwrap();
    assert_eq!(
        uses.len(),
        1,
        "the filesystem itself is no layer of its own"
    );
    let u = &uses[0];
    assert_eq!(
        (u.layer.as_str(), u.name.as_str()),
        ("thin_pool", "vg-pool-tpool")
    );
    assert_eq!(u.days.len(), 2);
    let size = (256u64 << 20) as f64;
    // Day one: from 200 MiB free down by 1 KiB each 30 s; the minute's rows, the last at
    // 23:59:00 (step 2878).
    assert_eq!(u.days[0].day, T0 / DAY);
    assert_eq!(u.days[0].low, size - (200u64 << 20) as f64);
    assert_eq!(u.days[0].high, size - ((200u64 << 20) - 2878 * 1024) as f64);
    assert_eq!(u.days[0].size, size);
    // The raw points of the second day, a minute apart.
    assert_eq!(u.recent.len(), 1440);
    assert!(
        u.recent
            .windows(2)
            .all(|w| w[1].0 - w[0].0 == 60 && w[1].1 > w[0].1)
    );
    // An older stack (a clock set back) adds no point.
    s.record_fs_layers(&[stack(T0 + DAY + 45, 1)]).unwrap();
    let again = s.layer_uses(id, T0, T0 + DAY, T0 + 2 * DAY).unwrap();
    assert_eq!(again, uses);
    // Retention: raw rows go with the filesystems' raw days, day rows with their hourly days.
    let short = HistoryConfig {
        raw_interval: Duration::from_secs(60),
        retention_raw: Duration::from_secs(DAY as u64),
        retention_hourly: Duration::from_secs(2 * DAY as u64),
        ..Default::default()
    };
    drop(s);
    let mut s = Store::open(dir.path(), &short).unwrap();
    s.downsample(T0 + 2 * DAY + 3600).unwrap();
    let u = s.layer_uses(id, T0, T0, T0 + 3 * DAY).unwrap();
    assert_eq!(
        u[0].days.len(),
        2,
        "day rows are kept as long as hourly rows"
    );
    assert!(
        u[0].recent.iter().all(|p| p.0 >= T0 + DAY),
        "day one's raw rows dropped"
    );
    assert_eq!(u[0].recent.len(), 1440);
    // Retention waits for newer days holding samples (the filesystems' own).
    for t in [T0 + 3 * DAY, T0 + 4 * DAY] {
        s.record_fs(&[fs("/var/lib/mysql", Some("u1"), "dm-4", t, 1 << 20)])
            .unwrap();
    }
    s.downsample(T0 + 4 * DAY + 3600).unwrap();
    assert_eq!(s.layer_uses(id, T0, T0, T0 + 5 * DAY).unwrap(), vec![]);
}

#[test]
fn a_mounts_stored_forecast_is_its_thin_pools_date_when_the_pool_runs_out_first() {
    use crate::history::current;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    // 20 days: the filesystem (1 GiB) fills 10 MiB a day from 500 MiB free; the pool under it
    // (shared with other volumes) 15 MiB a day from 400 MiB free: full on day 26.7, the
    // filesystem on day 50.
    let (mib, days) = (1u64 << 20, 20);
    let mut fs_rows = Vec::new();
    for h in 0..days * 24 {
        let t = T0 + h * 3600;
        let d = (t - T0) as f64 / DAY as f64;
        let fs_avail = ((500.0 - 10.0 * d) * mib as f64) as u64;
        let pool_avail = ((400.0 - 15.0 * d) * mib as f64) as u64;
        fs_rows.push(fs("/var/lib/mysql", Some("u1"), "dm-4", t, fs_avail));
        let mut st = stack(t, pool_avail);
        st.layers[0].avail_bytes = fs_avail;
        st.layers[0].size_bytes = Some(1 << 30);
        st.layers[1].size_bytes = Some(1 << 30);
        s.record_fs(std::slice::from_ref(fs_rows.last().unwrap()))
            .unwrap();
        s.record_fs_layers(&[st]).unwrap();
    }
    let now = T0 + days * DAY;
    let id = s.fs_id_of(&stack(T0, 0).key).unwrap().unwrap();
    let fc = current::stored_filesystem(&s, id, &[], now)
        .unwrap()
        .unwrap();
    let pool_full = T0 + (400 * DAY) / 15;
    let fs_full = T0 + 50 * DAY;
    let full = fc.predicted_full_unix.expect("a date");
    assert!(
        (full - pool_full).abs() <= DAY,
        "{full} vs the pool's {pool_full}"
    );
    assert!(full < fs_full - 10 * DAY);
    assert_eq!(
        fc.full_layer,
        Some(("thin_pool".into(), "vg-pool-tpool".into()))
    );
    assert!(fc.full_earliest_unix.unwrap() <= full);
}

#[test]
fn a_clock_that_was_ahead_leaves_no_layer_row_and_its_day_is_rebuilt_from_the_right_clocks_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    // The right clock: 10:00 to 10:09, the pool losing 1 MiB a minute from 100 MiB free.
    let at = T0 + 10 * 3600;
    for i in 0..10 {
        s.record_fs(&[fs(
            "/var/lib/mysql",
            Some("u1"),
            "dm-4",
            at + i * 60,
            1 << 30,
        )])
        .unwrap();
        s.record_fs_layers(&[stack(at + i * 60, (100 - i as u64) << 20)])
            .unwrap();
    }
    // A clock two hours ahead wrote the same day with a pool nearly empty.
    let ahead = at + 2 * 3600;
    s.record_fs(&[fs("/var/lib/mysql", Some("u1"), "dm-4", ahead, 1 << 30)])
        .unwrap();
    s.record_fs_layers(&[stack(ahead, 1 << 20)]).unwrap();
    let id = s.fs_id_of(&stack(T0, 0).key).unwrap().unwrap();
    let size = (256u64 << 20) as f64;
    let day = |s: &Store| s.layer_uses(id, T0, T0, T0 + DAY).unwrap()[0].days[0];
    assert_eq!(day(&s).high, size - (1u64 << 20) as f64);
    let out = s.drop_future(at + 9 * 60).unwrap();
    assert!(out.rows > 0, "{out:?}");
    let u = &s.layer_uses(id, T0, T0, T0 + DAY).unwrap()[0];
    assert_eq!(u.recent.len(), 10, "the right clock's rows stay");
    assert_eq!(u.days.len(), 1);
    assert_eq!(u.days[0].low, size - (100u64 << 20) as f64);
    assert_eq!(
        u.days[0].high,
        size - (91u64 << 20) as f64,
        "rebuilt: {:?}",
        u.days
    );
    assert_eq!(u.days[0].size, size);
}

#[test]
fn imported_drive_hours_go_before_the_daemons_first_sample_once_and_feed_the_wear_forecast() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &cfg()).unwrap();
    let now = T0 + 60 * DAY + 1800;
    let mut first = drive("S1", Some("eui.1"), "nvme0n1", now, 62_000_000_000_000);
    first.wear_used_ratio = Some(0.20);
    assert_eq!(s.record_drives(&[first]).unwrap(), 1);
    let id = s.drives().unwrap()[0].id;
    // 61 days of hours, the last ones at and after the daemon's first sample: those are left.
    let hours: Vec<DriveImportHour> = (0..61 * 24)
        .map(|i| {
            let hour = T0 + i * HOUR;
            let w = (10 + i / (6 * 24)) as f64 / 100.0;
            DriveImportHour {
                hour,
                wear_used_ratio: Some([w; 4]),
                host_written_bytes: Some(50e12 + 200e9 * i as f64 / 24.0),
                samples: 2,
                ..Default::default()
            }
        })
        .collect();
    let (fs, drives) = s
        .import_hours(&[], &[(id, hours.clone())], "https://prom", "db7:9100", now)
        .unwrap();
    assert!(fs.is_empty());
    let cutoff = now.div_euclid(HOUR) * HOUR;
    let want = ((cutoff - T0) / HOUR) as usize;
    assert_eq!(drives, vec![(id, want)]);
    let [m] = s.drive_imports().unwrap().try_into().unwrap();
    assert_eq!(
        (m.drive, m.from_t, m.until_t, m.hours),
        (id, T0, cutoff, want as i64)
    );
    // The daemon's own row is as it was; a second import writes nothing.
    let again = s
        .import_hours(&[], &[(id, hours)], "https://prom", "db7:9100", now)
        .unwrap();
    assert_eq!(again.1, vec![(id, 0)]);
    assert_eq!(s.drive_imports().unwrap()[0].hours, want as i64);
    let pts = s.drive_series(id, 0, now + DAY).unwrap();
    assert_eq!(pts.len(), want + 1);
    assert_eq!(pts.last().unwrap().wear_used_ratio.unwrap().last, 0.20);
    assert!(!pts.last().unwrap().hourly);
    // The wear forecast reads the imported days: 20 % now, a point every 6 days, worn out
    // 480 days from now.
    let days = s.drive_days(id, 0, now).unwrap();
    let f = crate::history::forecast::forecast_drive(&days, now, None);
    let out = f.predicted_wear_out_unix.expect("a wear-out date");
    assert!(
        (out - (now + 480 * DAY)).abs() <= 5 * DAY,
        "{}",
        (out - now) / DAY
    );
}

fn flaky_btrfs(t: i64, read: u64, drive: Option<&str>) -> LayerErrorsSample {
    LayerErrorsSample {
        kind: LayerErrorKind::BtrfsDevice,
        container: "50bd3755".into(),
        member: "flaky".into(),
        drive: drive.map(String::from),
        t,
        counts: LayerErrorCounts {
            read: Some(read),
            write: Some(5128),
            checksum: Some(0),
            other: Some(2),
        },
    }
}

/// A btrfs device, a vdev and an md member read every 30 minutes for four days: one row per
/// component and hour (the hour's last reading), thinned to a day's last past the raw
/// retention as the drives' health is; a counter the layer lacks stays unknown.
#[test]
fn layer_error_counters_are_kept_a_row_per_component_and_hour_and_thinned_to_a_day() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = HistoryConfig {
        raw_interval: Duration::from_secs(60),
        retention_raw: Duration::from_secs(2 * DAY as u64),
        ..Default::default()
    };
    let mut s = Store::open(dir.path(), &cfg).unwrap();
    let mut samples = Vec::new();
    for i in 0..4 * 48 {
        let t = T0 + i * 1800;
        // The drive under the btrfs device is learnt on day 2 and kept as the newest says.
        let drive = (i >= 48).then_some("vdh");
        samples.push(flaky_btrfs(t, 320 + (i / 2) as u64, drive));
        samples.push(LayerErrorsSample {
            kind: LayerErrorKind::MdMember,
            container: "md2".into(),
            member: "md9".into(),
            drive: None,
            t,
            counts: LayerErrorCounts {
                read: Some(8),
                ..Default::default()
            },
        });
        samples.push(LayerErrorsSample {
            kind: LayerErrorKind::ZfsVdev,
            container: "tank".into(),
            member: "zvdd".into(),
            drive: Some("vdd".into()),
            t,
            counts: LayerErrorCounts {
                read: Some(0),
                write: Some(0),
                checksum: Some(514),
                other: None,
            },
        });
    }
    // A reading with no counter known is not stored (no row of unknowns).
    samples.push(LayerErrorsSample {
        counts: LayerErrorCounts::default(),
        ..flaky_btrfs(T0, 0, None)
    });
    assert_eq!(s.record_layer_errors(&samples).unwrap(), 3 * 4 * 48);
    let all = s.layer_errors(T0, T0 + 4 * DAY).unwrap();
    let names: Vec<(LayerErrorKind, &str, &str)> = all
        .iter()
        .map(|x| (x.kind, x.container.as_str(), x.member.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (LayerErrorKind::BtrfsDevice, "50bd3755", "flaky"),
            (LayerErrorKind::MdMember, "md2", "md9"),
            (LayerErrorKind::ZfsVdev, "tank", "zvdd"),
        ]
    );
    let b = &all[0];
    assert_eq!(b.points.len(), 4 * 24, "one row an hour");
    assert_eq!(b.points[0].0, T0 + 1800, "the hour's last reading");
    assert_eq!(b.points[0].1.read, Some(320));
    assert_eq!(b.points[0].1.total(), Some(320 + 5128 + 2));
    assert_eq!(b.drive.as_deref(), Some("vdh"));
    assert_eq!(all[1].points[0].1.write, None, "md has no write counter");
    assert_eq!(all[1].points[0].1.total(), Some(8));
    assert_eq!(all[2].points[0].1.other, None);
    // An older reading of an hour already stored does not replace the hour's later one.
    s.record_layer_errors(&[flaky_btrfs(T0 + 60, 1, None)])
        .unwrap();
    let again = s.layer_errors(T0, T0 + 3600).unwrap();
    assert_eq!(again[0].points, vec![(T0 + 1800, b.points[0].1)]);
    assert_eq!(again[0].drive, None, "the drive as of the newest write");
    // Maintenance at the end of day 4: days 1 and 2 are past the raw retention.
    let m = s.downsample(T0 + 4 * DAY).unwrap();
    assert_eq!(m.hourly_thinned, 3 * 2 * 23);
    let kept = s.layer_errors(T0, T0 + 4 * DAY).unwrap();
    assert_eq!(kept[0].points.len(), 2 + 2 * 24);
    assert_eq!(kept[0].points[0].0, T0 + DAY - 1800, "day 1's last reading");
    assert_eq!(kept[0].points[0].1.read, Some(320 + 23));
    // Rows stamped by a clock ahead go with the rest of them.
    let ahead = T0 + 400 * DAY;
    s.record_layer_errors(&[flaky_btrfs(ahead, 999, None)])
        .unwrap();
    s.record_fs(&[fs("/srv/pg", Some("u1"), "nvme0n1p1", ahead, 1 << 39)])
        .unwrap();
    let f = s.drop_future(T0 + 4 * DAY).unwrap();
    assert!(f.rows >= 1, "{f:?}");
    let last = s.layer_errors(T0, T0 + 500 * DAY).unwrap();
    assert!(last[0].points.iter().all(|p| p.0 <= T0 + 4 * DAY));
}
