//! A DBA upgrading ssdwatch keeps their history: a store written by the schema-1 code
//! (tests/fixtures/history/v1.db; its README says how it was made, from the story below) is
//! migrated to the current schema in place when the daemon opens it, and every row it held reads
//! back. A store from a newer ssdwatch is still refused by name.

use ssdwatch::history::forecast::daily_use;
use ssdwatch::history::store::{FILE_NAME, SCHEMA_VERSION};
use ssdwatch::history::{DriveKey, FsKey, FsSample, HistoryConfig, Store, StoreError};
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

/// The fixture copied into a fresh state directory, as the daemon would find it.
fn v1_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join(FILE_NAME)).unwrap();
    dir
}

fn user_version(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

const TABLES: [&str; 7] = [
    "fs",
    "drive",
    "fs_raw",
    "drive_raw",
    "fs_hourly",
    "drive_hourly",
    "discard",
];

fn counts(path: &Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    TABLES
        .iter()
        .map(|t| {
            conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .unwrap()
        })
        .collect()
}

/// The primary key columns of a table, in key order.
fn key_of(path: &Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut st = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk"
        ))
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What a version-9 file lacks: version 10's layer error counters.
const V10_TABLES_DROPPED: &str = "DROP TABLE layer_member; DROP TABLE layer_errors;";

/// What a version-5 file lacks: version 6's drive health, components and database facts, and
/// the later versions' tables.
const V6_TABLES_DROPPED: &str = "DROP TABLE drive_health; DROP TABLE component;
    DROP TABLE component_size; DROP TABLE database_state; DROP TABLE fs_import;
    DROP TABLE layer; DROP TABLE layer_raw; DROP TABLE layer_day; DROP TABLE drive_import;
    DROP TABLE layer_member; DROP TABLE layer_errors;";

/// Version 8's tables: the layers' use over time.
const V8_TABLES_DROPPED: &str = "DROP TABLE layer; DROP TABLE layer_raw; DROP TABLE layer_day;";

/// Version 9's table: which part of each drive's history was imported.
const V9_TABLES_DROPPED: &str = "DROP TABLE drive_import;";

/// What each version from 7 on added, as the statements that take it away again.
const ADDED: &[(i64, &str)] = &[
    (7, "DROP TABLE fs_import;"),
    (8, V8_TABLES_DROPPED),
    (9, V9_TABLES_DROPPED),
    (10, V10_TABLES_DROPPED),
];

/// The store in `dir` taken back to `version` (6 or later): the tables of every later version
/// dropped, its version set; a read-only open refuses it as older. Its row counts then.
fn downgrade(dir: &Path, version: i64) -> Vec<i64> {
    let path = dir.join(FILE_NAME);
    let drops: Vec<&str> = ADDED
        .iter()
        .filter(|(v, _)| *v > version)
        .map(|(_, d)| *d)
        .collect();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "{} PRAGMA user_version = {version}",
            drops.join(" ")
        ))
        .unwrap();
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(
        matches!(e, StoreError::OlderSchema { found, .. } if found == version),
        "{e}"
    );
    counts(&path)
}

#[test]
fn a_schema_1_store_is_upgraded_in_place_and_every_row_reads_back() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    assert_eq!(user_version(&path), 1);
    assert_eq!(key_of(&path, "fs_raw"), ["fs", "t"]);
    let before = counts(&path);
    assert!(
        before.iter().all(|&n| n > 0),
        "the fixture has rows: {before:?}"
    );

    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 10);
    assert_eq!(
        key_of(&path, "fs_day"),
        ["id"],
        "version 3's table is made too"
    );
    assert_eq!(key_of(&path, "fs_layer"), ["fs", "pos"], "and version 4's");
    assert_eq!(
        key_of(&path, "drive_health"),
        ["hour", "drive"],
        "and version 6's"
    );
    assert_eq!(key_of(&path, "component_size"), ["hour", "component"]);
    assert_eq!(key_of(&path, "fs_import"), ["fs"], "and version 7's");
    assert_eq!(
        key_of(&path, "layer_errors"),
        ["hour", "member"],
        "and version 10's"
    );
    assert_eq!(counts(&path), before, "every row survives ({TABLES:?})");
    // Raw rows keyed by the rowid `t << 24 | series`, which pragma_table_info shows as `id`.
    assert_eq!(key_of(&path, "fs_raw"), ["id"]);
    assert!(key_of(&path, "fs_raw_day").is_empty(), "fs_raw_day is gone");
    assert_eq!(key_of(&path, "drive_raw"), ["id"]);

    // /srv/pg: two hourly days, then 14 raw days, each value the story's.
    let end = T0 + DAYS * DAY;
    let id = s.fs_id_of(&pg()).unwrap().expect("/srv/pg kept its series");
    let pts = s.fs_series(id, 0, end).unwrap();
    let (hourly, raw): (Vec<_>, Vec<_>) = pts.iter().partition(|p| p.hourly);
    assert_eq!(hourly.len(), 2 * 24);
    assert_eq!(raw.len() as i64, (DAYS - 2) * DAY / FS_STEP);
    for p in &raw {
        let i = (p.t - T0) / FS_STEP;
        assert_eq!(p.avail.last, pg_avail(i) as f64, "raw sample at {}", p.t);
        assert_eq!(p.free.last, (pg_avail(i) + 50 * GIB) as f64);
        assert_eq!(p.size.last, (1u64 << 40) as f64);
    }
    for p in &hourly {
        let i0 = (p.t - T0) / FS_STEP;
        let hour: Vec<f64> = (i0..i0 + 6).map(|i| pg_avail(i) as f64).collect();
        assert_eq!(p.avail.min, hour.iter().cloned().fold(f64::MAX, f64::min));
        assert_eq!(p.avail.max, hour.iter().cloned().fold(f64::MIN, f64::max));
        assert_eq!(p.avail.last, hour[5], "hour at {}", p.t);
    }
    assert!(pts.windows(2).all(|w| w[0].t < w[1].t));
    // The forecast's day summaries still agree with the points they summarize.
    assert_eq!(s.fs_days(id, 0, end).unwrap(), daily_use(&pts));
    assert_eq!(s.fs_days(id, 0, end).unwrap().len() as i64, DAYS);

    // The drive: one point a day, the day's last counter values.
    let d = s.drives().unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].key, drive_key());
    let days = s.drive_days(d[0].id, 0, end).unwrap();
    assert_eq!(days.len() as i64, DAYS);
    for (k, p) in days.iter().enumerate() {
        // An hourly day's point is its last hour (t at the hour's start), a raw day's its
        // last sample; both carry the counter's value at the day's last sample.
        let last = if k < 2 { DAY - 3600 } else { DAY - DRIVE_STEP };
        assert_eq!(p.t, T0 + k as i64 * DAY + last);
        let q = (k as i64 * DAY + DAY - DRIVE_STEP) / DRIVE_STEP;
        assert_eq!(p.host_written_bytes, Some(((q as u64 + 1) * GIB) as f64));
    }
    assert_eq!(
        s.drive_series(d[0].id, 0, end).unwrap().len() as i64,
        2 * 24 + (DAYS - 2) * DAY / DRIVE_STEP
    );
    assert_eq!(
        s.discard_events(d[0].id, 0, end).unwrap(),
        vec![(T0 + 7 * DAY, 200 * GIB)]
    );
    assert_eq!(
        s.idle_periods(d[0].id, 0, end).unwrap(),
        vec![(T0 + 3 * DAY, 900)]
    );

    // The upgraded store goes on: new samples append, the next day rolls into hourly rows.
    let mut next = fs_samples();
    next.retain(|x| x.key == pg());
    let more: Vec<FsSample> = (0..144)
        .map(|k| FsSample {
            t: end + k * FS_STEP,
            ..next[0].clone()
        })
        .collect();
    assert_eq!(s.record_fs(&more).unwrap(), 144);
    let m = s.downsample(end + DAY + 60).unwrap();
    assert_eq!(
        m.raw_rolled as i64,
        2 * 144 + DAY / DRIVE_STEP,
        "day 2 of both filesystems and the drive"
    );
    let pts = s.fs_series(id, 0, end + DAY).unwrap();
    assert_eq!(pts.iter().filter(|p| p.hourly).count(), 3 * 24);
    assert_eq!(
        pts.iter().filter(|p| !p.hourly).count() as i64,
        (DAYS - 3) * DAY / FS_STEP + 144
    );
    drop(s);
    // And it opens again without upgrading twice.
    Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
}

#[test]
fn a_schema_2_store_gets_its_day_summaries_and_reads_the_same_days() {
    // A version-2 file is this schema without `fs_day`, `fs_layer` and the probe runs'
    // untrimmed state: the upgraded v1 fixture made so.
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V6_TABLES_DROPPED} DROP TABLE fs_day; DROP TABLE fs_layer;
                 ALTER TABLE probe DROP COLUMN untrimmed_ppm; PRAGMA user_version = 2"
        ))
        .unwrap();
    }
    assert_eq!(user_version(&path), 2);
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 2, .. }), "{e}");
    let before = counts(&path);

    let end = T0 + DAYS * DAY;
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    let id = s.fs_id_of(&pg()).unwrap().unwrap();
    let pts = s.fs_series(id, 0, end).unwrap();
    // Before any maintenance the raw days come from the raw rows alone.
    let days = s.fs_days(id, 0, end).unwrap();
    assert_eq!(days, daily_use(&pts));
    let m = s.downsample(end + 3 * 3600).unwrap();
    assert!(m.days_summarized > 0, "{m:?}");
    drop(s);
    let summarized: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM fs_day", [], |r| r.get(0))
        .unwrap();
    assert_eq!(summarized as usize, m.days_summarized);
    // After a start the same days come from the summaries.
    let s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(s.fs_days(id, 0, end).unwrap(), days);
}

#[test]
fn a_schema_3_store_gets_the_layers_table_and_keeps_its_rows() {
    // A version-3 file is this schema without `fs_layer` and the untrimmed state.
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V6_TABLES_DROPPED} DROP TABLE fs_layer; ALTER TABLE probe DROP COLUMN untrimmed_ppm;
                 PRAGMA user_version = 3"
        ))
        .unwrap();
    }
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 3, .. }), "{e}");
    let before = counts(&path);
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    let id = s.fs_id_of(&pg()).unwrap().unwrap();
    assert_eq!(
        s.fs_layers(id).unwrap(),
        None,
        "no stack until a sample brings one"
    );
    let stack = vec![ssdwatch::history::LayerRow {
        layer: "thin_pool".into(),
        name: "vg-pool-tpool".into(),
        avail_bytes: 1 << 20,
        size_bytes: Some(256 << 20),
        limiting: true,
    }];
    let t = T0 + DAYS * DAY;
    s.record_fs_layers(&[ssdwatch::history::FsLayers {
        key: pg(),
        device: "dm-3".into(),
        t,
        layers: stack.clone(),
    }])
    .unwrap();
    assert_eq!(s.fs_layers(id).unwrap(), Some((t, stack)));
}

/// A version-4 store's probe runs (no untrimmed state; a 16-write run holding its maximum in
/// `p99_ns`, as version 4 wrote it) survive the upgrade: the old runs read back with their
/// state unknown and no p99, and new runs keep their untrimmed share.
#[test]
fn a_schema_4_store_keeps_its_probe_runs_and_takes_each_runs_untrimmed_state() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V6_TABLES_DROPPED} ALTER TABLE probe DROP COLUMN untrimmed_ppm;
                 INSERT INTO probe_target (id, path) VALUES (1, '/srv/pg/probe');
                 INSERT INTO probe (target, t, kind, ops, p50_ns, p99_ns, max_ns, fill_ppm)
                     VALUES (1, 1767225600, 0, 16, 700000, 2500000, 2500000, 500000),
                            (1, 1767225900, 0, 256, 700000, 1500000, 2500000, 500000);
                 PRAGMA user_version = 4"
        ))
        .unwrap();
    }
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 4, .. }), "{e}");
    let before = counts(&path);
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    s.record_probes(&[ssdwatch::history::ProbeRecord {
        target: "/srv/pg/probe".into(),
        drive: None,
        t: T0 + 600,
        kind: ssdwatch::probe::ProbeKind::SyncWrite4k,
        ops: 256,
        p50_seconds: 11e-3,
        p99_seconds: Some(20e-3),
        max_seconds: 30e-3,
        throughput_bytes_per_second: None,
        fill_ratio: Some(0.5),
        since_discard_seconds: None,
        idle_seconds: None,
        utilization_ratio: None,
        utilization_before_ratio: None,
        written_since_discard_bytes: None,
        untrimmed_ratio: Some(0.2),
    }])
    .unwrap();
    let mut runs = Vec::new();
    s.for_each_probe_run(0, T0 + DAY, |r| {
        runs.push((r.t, r.p99_seconds, r.untrimmed_ratio))
    })
    .unwrap();
    assert_eq!(
        runs,
        vec![
            (T0, None, None),
            (T0 + 300, Some(1.5e-3), None),
            (T0 + 600, Some(20e-3), Some(0.2)),
        ]
    );
}

#[test]
fn an_upgrade_that_fails_half_way_leaves_the_schema_1_store_whole() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    // A table in the way of the upgrade's third step: the first two (fs_raw copied, fs_raw_day
    // dropped) succeed, then creating drive_raw_v2 fails.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE drive_raw_v2 (x INTEGER)")
            .unwrap();
    }
    let before = counts(&path);
    let e = Store::open(dir.path(), &HistoryConfig::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string())
            && msg.contains("upgrading the schema from version 1")
            && msg.contains("drive_raw_v2"),
        "{msg}"
    );
    assert_eq!(user_version(&path), 1);
    assert_eq!(
        key_of(&path, "fs_raw"),
        ["fs", "t"],
        "the first step rolled back"
    );
    assert_eq!(counts(&path), before);
}

#[test]
fn a_store_from_a_newer_ssdwatch_is_refused_and_an_older_one_is_not_read_half_understood() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let path = dir.path().join(FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    for e in [
        Store::open(dir.path(), &HistoryConfig::default()).unwrap_err(),
        Store::open_read_only(&path).unwrap_err(),
    ] {
        assert!(
            matches!(e, StoreError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("newer ssdwatch"),
            "{msg}"
        );
    }
    // `ssdwatch report` opens read-only beside the daemon: a schema-1 file is named as such.
    let old = v1_store();
    let e = Store::open_read_only(&old.path().join(FILE_NAME)).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 1, .. }), "{e}");
    assert!(e.to_string().contains("upgrades it in place"), "{e}");
    assert_eq!(user_version(&old.path().join(FILE_NAME)), 1);
}

/// A version-5 store gets version 6's tables, keeps every row, and takes a drive's health and
/// a database's components from then on.
#[test]
fn a_schema_5_store_gets_the_health_and_component_tables_and_keeps_its_rows() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!("{V6_TABLES_DROPPED} PRAGMA user_version = 5"))
            .unwrap();
    }
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 5, .. }), "{e}");
    let before = counts(&path);
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    let t = T0 + DAYS * DAY;
    let d = s.drives().unwrap()[0].clone();
    assert!(s.drive_health(d.id, 0, t).unwrap().is_empty());
    let health = ssdwatch::history::DriveHealthRecord {
        error_log_entries: Some(3),
        self_test: Some("extended failed".into()),
        ..Default::default()
    };
    s.record_drives(&[ssdwatch::history::DriveSample {
        key: d.key.clone(),
        kernel_name: "nvme0n1".into(),
        t,
        health: health.clone(),
        ..Default::default()
    }])
    .unwrap();
    let got = s.drive_health(d.id, 0, t).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].t, &got[0].health), (t, &health));
    let db = ssdwatch::history::DatabaseSample {
        database: "/srv/pg/data".into(),
        kind: ssdwatch::databases::component::Kind::Postgres,
        t,
        components: vec![ssdwatch::history::ComponentSize {
            component: ssdwatch::databases::component::Component::Wal,
            mountpoint: "/srv/pg".into(),
            bytes: 1 << 30,
        }],
        facts: Default::default(),
    };
    assert_eq!(s.record_databases(&[db]).unwrap(), 1);
    assert_eq!(s.components(0, t).unwrap()[0].sizes, vec![(t, 1 << 30)]);
}

/// A version-6 store gets version 7's `fs_import`, empty (nothing of it was imported), and
/// keeps every row.
#[test]
fn a_schema_6_store_gets_the_import_marks_and_keeps_its_rows() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let before = downgrade(dir.path(), 6);
    let s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    assert!(s.fs_imports().unwrap().is_empty());
}

/// A version-7 store gets version 8's layer tables, empty (only each filesystem's newest stack
/// was kept before), keeps every row, and from its next samples keeps its layers' use, which
/// the forecast reads.
#[test]
fn a_schema_7_store_gets_the_layers_use_tables_and_keeps_its_rows() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let t = T0 + DAYS * DAY;
    let stack = |t: i64, pool_avail: u64| ssdwatch::history::FsLayers {
        key: pg(),
        device: "dm-3".into(),
        t,
        layers: vec![
            ssdwatch::history::LayerRow {
                layer: "filesystem".into(),
                name: String::new(),
                avail_bytes: 100 << 20,
                size_bytes: Some(512 << 20),
                limiting: false,
            },
            ssdwatch::history::LayerRow {
                layer: "thin_pool".into(),
                name: "vg-pool-tpool".into(),
                avail_bytes: pool_avail,
                size_bytes: Some(256 << 20),
                limiting: true,
            },
        ],
    };
    {
        // Version 7 as it was: the newest stack kept, no use over time.
        let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        s.record_fs_layers(&[stack(t, 2 << 20)]).unwrap();
        drop(s);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V8_TABLES_DROPPED} {V9_TABLES_DROPPED} {V10_TABLES_DROPPED} PRAGMA user_version = 7"
        ))
        .unwrap();
    }
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::OlderSchema { found: 7, .. }), "{e}");
    let before = counts(&path);
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    let id = s.fs_id_of(&pg()).unwrap().unwrap();
    assert_eq!(
        s.fs_layers(id).unwrap(),
        Some((t, stack(t, 2 << 20).layers))
    );
    assert!(
        s.layer_uses(id, 0, 0, t).unwrap().is_empty(),
        "no past of the layers"
    );
    s.record_fs_layers(&[stack(t + 300, 1 << 20)]).unwrap();
    let uses = s.layer_uses(id, 0, 0, t + 300).unwrap();
    assert_eq!(uses.len(), 1);
    assert_eq!(
        uses[0].recent,
        vec![(t + 300, ((256 << 20) - (1 << 20)) as f64)]
    );
    drop(s);
    // And it opens again without upgrading twice.
    Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
}

/// A version-8 store gets version 9's drive import marks, empty, and keeps every row.
#[test]
fn a_schema_8_store_gets_the_drive_import_marks_and_keeps_its_rows() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let before = downgrade(dir.path(), 8);
    let s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    assert!(s.drive_imports().unwrap().is_empty());
}

/// A version-9 store gets version 10's layer error tables, empty until the daemon's next layers
/// samples, keeps every row, and takes a btrfs device's counters from then on.
#[test]
fn a_schema_9_store_gets_the_layer_error_tables_and_keeps_its_rows() {
    let dir = v1_store();
    let path = dir.path().join(FILE_NAME);
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let before = downgrade(dir.path(), 9);
    let mut s = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(counts(&path), before, "every row survives");
    let t = T0 + DAYS * DAY;
    assert!(s.layer_errors(0, t).unwrap().is_empty());
    let x = ssdwatch::history::LayerErrorsSample {
        kind: ssdwatch::history::LayerErrorKind::BtrfsDevice,
        container: "50bd3755-c9e5-4988-984e-568186d825d1".into(),
        member: "flaky".into(),
        drive: Some("vdh".into()),
        t,
        counts: ssdwatch::history::LayerErrorCounts {
            read: Some(320),
            write: Some(5128),
            checksum: Some(0),
            other: Some(2),
        },
    };
    assert_eq!(s.record_layer_errors(std::slice::from_ref(&x)).unwrap(), 1);
    let got = s.layer_errors(0, t).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].points, vec![(t, x.counts)]);
    assert_eq!(got[0].drive.as_deref(), Some("vdh"));
}
