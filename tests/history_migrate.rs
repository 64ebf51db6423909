//! A DBA upgrading ssdwatch keeps their history: a store written by the schema-1 code
//! (tests/fixtures/history/v1.db, made by `make_v1_fixture` below when the code wrote schema 1)
//! is migrated to schema 2 in place when the daemon opens it, and every row it held reads back.
//! A store from a newer ssdwatch is still refused by name.

use ssdwatch::history::forecast::daily_use;
use ssdwatch::history::store::{FILE_NAME, SCHEMA_VERSION};
use ssdwatch::history::{
    DiscardEvent, DriveKey, DriveSample, FsKey, FsSample, HistoryConfig, IdlePeriod, Store,
    StoreError,
};
use std::path::{Path, PathBuf};

/// 2026-01-01T00:00:00Z: the story starts here.
const T0: i64 = 1_767_225_600;
const DAY: i64 = 86_400;
/// 16 days of samples, downsampled at the end: days 0 and 1 are hourly, 2..16 raw.
const DAYS: i64 = 16;
const FS_STEP: i64 = 600;
const DRIVE_STEP: i64 = 1800;
const GIB: u64 = 1 << 30;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history/v1.db")
}

fn pg() -> FsKey {
    FsKey {
        mountpoint: "/srv/pg".into(),
        uuid: Some("6f1c2b4e-9d0a-4e55-8a3b-2f7c1e0d9a11".into()),
    }
}

fn root() -> FsKey {
    FsKey {
        mountpoint: "/".into(),
        uuid: None,
    }
}

fn drive_key() -> DriveKey {
    DriveKey {
        wwn: Some("eui.0025388b21b4c2a1".into()),
        serial: Some("S5P2NG0R600123".into()),
        model: Some("SAMSUNG MZQL23T8HCLS-00A07".into()),
    }
}

/// The story's avail of /srv/pg at sample `i`: falls 64 MiB a sample with a wobble.
fn pg_avail(i: i64) -> u64 {
    (900 * GIB) - (i as u64) * (64 << 20) + (i * 7919 % 1000) as u64 * (1 << 20)
}

fn root_avail(i: i64) -> u64 {
    40 * GIB - (i % 144) as u64 * (1 << 20)
}

fn fs_samples() -> Vec<FsSample> {
    let mut out = Vec::new();
    for i in 0..DAYS * DAY / FS_STEP {
        let t = T0 + i * FS_STEP;
        out.push(FsSample {
            key: pg(),
            device: "nvme0n1p1".into(),
            t,
            size_bytes: 1 << 40,
            avail_bytes: pg_avail(i),
            free_bytes: pg_avail(i) + 50 * GIB,
            files_free: Some(60_000_000 - i as u64),
        });
        out.push(FsSample {
            key: root(),
            device: "sda2".into(),
            t,
            size_bytes: 64 * GIB,
            avail_bytes: root_avail(i),
            free_bytes: root_avail(i) + 3 * GIB,
            files_free: None,
        });
    }
    out
}

fn drive_samples() -> Vec<DriveSample> {
    (0..DAYS * DAY / DRIVE_STEP)
        .map(|q| DriveSample {
            key: drive_key(),
            kernel_name: "nvme0n1".into(),
            capacity_bytes: Some(3_840_755_982_336),
            t: T0 + q * DRIVE_STEP,
            wear_used_ratio: Some(0.03 + q as f64 * 1e-6),
            spare_ratio: Some(1.0),
            host_written_bytes: Some((q as u64 + 1) * GIB),
            nand_written_bytes: Some((q as u64 + 1) * GIB * 3 / 2),
            media_errors: Some(0),
            power_on_hours: Some(1000 + q as u64 / 2),
            temperature_celsius: Some(35.0 + (q % 10) as f64),
            discarded_bytes: None,
        })
        .collect()
}

/// Run at the schema-1 code (commit 653240e) to make the fixture:
/// `cargo test --test history_migrate make_v1_fixture -- --ignored`.
#[test]
#[ignore]
fn make_v1_fixture() {
    assert_eq!(
        SCHEMA_VERSION, 1,
        "the fixture must be written by the schema-1 code"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    let fs = fs_samples();
    for batch in fs.chunks(2) {
        s.record_fs(batch).unwrap();
    }
    for d in drive_samples() {
        s.record_drives(&[d]).unwrap();
    }
    s.record_discards(&[DiscardEvent {
        drive: drive_key(),
        t: T0 + 7 * DAY,
        bytes: 200 * GIB,
    }])
    .unwrap();
    s.record_idle(&[IdlePeriod {
        drive: drive_key(),
        start: T0 + 3 * DAY,
        seconds: 900,
    }])
    .unwrap();
    s.downsample(T0 + DAYS * DAY).unwrap();
    let out = fixture();
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&out);
    let conn = rusqlite::Connection::open(dir.path().join(FILE_NAME)).unwrap();
    conn.execute("VACUUM INTO ?1", [out.to_str().unwrap()])
        .unwrap();
}
