//! `ssdwatch history import` from the secured Prometheus and the secured VictoriaMetrics: a
//! new host's store, holding only the daemon's first sample, gets 60 days of hourly rows from
//! node_exporter's filesystem series and ssdwatch's drive series, a second import adds none,
//! and the report dates the database mount and the drive's wear-out as the history implies; a
//! wrong password, CA or tenant, a 50 MB answer, a wrong instance, an instance with no series
//! and another drive under the same identity each give one error line and leave the store as
//! it was.

use super::*;
use ssdwatch::history::record::{DriveKey, DriveSample, FsKey, FsSample};
use ssdwatch::history::store::{DriveImportMark, ImportMark};
use ssdwatch::history::{HistoryConfig, Store};

/// The store as the daemon leaves it after its first sample: both real mounts at `now`, and
/// the drive reading `wear`.
fn first_sample(dir: &Path, s: &Secured, now: i64, wear: f64) {
    let mut store = Store::open(dir, &HistoryConfig::default()).unwrap();
    let sample = |mp: &str, dev: &str, size: f64, used: f64| FsSample {
        key: FsKey {
            mountpoint: mp.into(),
            uuid: Some(format!("uuid-of-{dev}")),
        },
        device: dev.into(),
        t: now,
        size_bytes: size as u64,
        avail_bytes: (size - used) as u64,
        free_bytes: (size - used) as u64,
        files_free: Some(1000),
    };
    let fs = [
        sample(DB_MOUNT, "nvme0n1p1", DB_SIZE, db_used(now, s.start)),
        sample("/", "nvme0n1p2", ROOT_SIZE, ROOT_USED),
    ];
    assert_eq!(store.record_fs(&fs).unwrap(), 2);
    assert_eq!(store.record_drives(&[drive_sample(now, wear)]).unwrap(), 1);
}

/// The SMART collector's first reading of the drive at `now` (the identity /sys and smartctl
/// give it, the wear `wear`), as the daemon records it.
fn drive_sample(now: i64, wear: f64) -> DriveSample {
    DriveSample {
        key: DriveKey {
            wwn: Some(DRIVE_WWN.into()),
            serial: Some(DRIVE_SERIAL.into()),
            model: Some(DRIVE_MODEL.into()),
        },
        kernel_name: DRIVE_DEV.into(),
        capacity_bytes: Some(1_000_204_886_016),
        t: now,
        wear_used_ratio: Some(wear),
        spare_ratio: Some(1.0),
        host_written_bytes: Some(drive_host_written(now, now - 60 * DAY) as u64),
        nand_written_bytes: Some((1.1 * drive_host_written(now, now - 60 * DAY)) as u64),
        media_errors: Some(0),
        power_on_hours: Some(2440),
        temperature_celsius: Some(41.0),
        ..Default::default()
    }
}

/// What the store holds: its import marks, every filesystem's hourly and raw points, every
/// drive's.
#[derive(Debug, PartialEq)]
struct Held {
    fs_marks: Vec<ImportMark>,
    drive_marks: Vec<DriveImportMark>,
    fs_points: usize,
    drive_points: usize,
}

fn held(dir: &Path, now: i64) -> Held {
    let store = Store::open_read_only(&dir.join("history.db")).unwrap();
    let fs_points = store
        .filesystems()
        .unwrap()
        .iter()
        .map(|f| store.fs_series(f.id, 0, now + DAY).unwrap().len())
        .sum();
    let drive_points = store
        .drives()
        .unwrap()
        .iter()
        .map(|d| store.drive_series(d.id, 0, now + DAY).unwrap().len())
        .sum();
    Held {
        fs_marks: store.fs_imports().unwrap(),
        drive_marks: store.drive_imports().unwrap(),
        fs_points,
        drive_points,
    }
}

#[test]
fn a_new_hosts_store_imported_from_a_secured_prometheus_dates_its_database_mount_at_once() {
    let test =
        "a_new_hosts_store_imported_from_a_secured_prometheus_dates_its_database_mount_at_once";
    if let Some(s) = Secured::start(test) {
        import_story(&s);
    }
}

/// The same history in VictoriaMetrics, whose response cache (on, as in production) moves a
/// long range query's times onto multiples of the step unless told `nocache`.
#[test]
fn a_new_hosts_store_imported_from_a_secured_victoria_metrics_dates_its_database_mount_at_once() {
    let test = "a_new_hosts_store_imported_from_a_secured_victoria_metrics_dates_its_database_mount_at_once";
    if let Some(s) = Secured::start_victoria_metrics(test) {
        import_story(&s);
    }
}

fn import_story(s: &Secured) {
    let state = s.dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let now = crate::support::unix_now() as i64;
    first_sample(&state, s, now, drive_wear(now, s.start));
    let db = state.join("history.db");
    let good = s.config("good.yml", TENANT, PASSWORD, "ca.crt");
    let import = |instance: &str, cfg: &Path| {
        ssdwatch(&[
            "history",
            "import",
            "--prometheus",
            &s.url,
            "--instance",
            instance,
            "--store",
            db.to_str().unwrap(),
            "--http.config.file",
            cfg.to_str().unwrap(),
        ])
    };

    // Failures first: each one line, the store as it was.
    let before = held(&state, now);
    assert!(before.fs_marks.is_empty() && before.drive_marks.is_empty());
    // A wrong password, CA or tenant and a 50 MB answer (as for the report), then a host
    // with no series and another host's filesystem.
    let mut cases: Vec<(&str, PathBuf, &str)> = refusals(s)
        .into_iter()
        .map(|(cfg, says)| (NODE, cfg, says))
        .collect();
    cases.push(("db9:9100", good.clone(), "no filesystem series"));
    cases.push(("db8:9100", good.clone(), "not the same filesystem"));
    for (instance, cfg, says) in &cases {
        let err = one_error_line(&import(instance, cfg));
        assert!(err.contains(says) && err.contains(&s.url), "{err}");
        assert_eq!(held(&state, now), before, "{instance}: {err}");
    }

    let out = import(NODE, &good);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The mapping: node_exporter's device label beside the store's identity.
    assert!(
        text.contains(&format!(
            "{DB_MOUNT} (device /dev/nvme0n1p1) -> store filesystem"
        )) && text.contains("uuid uuid-of-nvme0n1p1"),
        "{text}"
    );
    assert!(!text.contains("/run"), "a mount this host lacks: {text}");
    let after = held(&state, now);
    let marks = &after.fs_marks;
    assert_eq!(marks.len(), 2, "{marks:?}");
    let mut hours = 0;
    for m in marks {
        // Every hour from the range's start to the history's last sample, nothing after the
        // daemon's first sample.
        assert_eq!(m.hours, (m.until_t - m.from_t) / HOUR, "{m:?}");
        assert_eq!(m.until_t, s.end.div_euclid(HOUR) * HOUR + HOUR, "{m:?}");
        assert!(m.until_t <= now.div_euclid(HOUR) * HOUR, "{m:?}");
        assert!((m.from_t - s.start).abs() <= 2 * HOUR, "{m:?}");
        assert_eq!(m.instance, NODE);
        hours += m.hours as usize;
    }
    // The drive: ssdwatch's own series (instance db7:10150 beside node_exporter's db7:9100)
    // matched by WWN, every hour of the same span.
    assert!(
        text.contains(&format!(
            "{DRIVE_DEV} (serial {DRIVE_SERIAL}, wwn {DRIVE_WWN}) -> store drive"
        )) && text.contains(&format!("model {DRIVE_MODEL}")),
        "{text}"
    );
    let [dm] = after.drive_marks.as_slice() else {
        panic!("one drive mark: {:?}", after.drive_marks);
    };
    assert_eq!(dm.hours, (dm.until_t - dm.from_t) / HOUR, "{dm:?}");
    assert_eq!(dm.from_t, marks[0].from_t, "{dm:?}");
    assert_eq!(dm.until_t, marks[0].until_t, "{dm:?}");
    assert_eq!(dm.instance, NODE);
    assert!(
        text.contains(&format!(
            "imported {hours} hourly rows of filesystems, {} of drives",
            dm.hours
        )),
        "{text}"
    );
    assert_eq!(after.fs_points, before.fs_points + hours);
    assert_eq!(after.drive_points, before.drive_points + dm.hours as usize);
    // The rows hold the drive's figures at the store's units: wear and bytes written at the
    // history's first imported hour's end.
    let store = Store::open_read_only(&db).unwrap();
    let d = &store.drives().unwrap()[0];
    let first = store.drive_series(d.id, 0, dm.from_t).unwrap();
    let [p] = first.as_slice() else {
        panic!("one point at {}: {first:?}", dm.from_t);
    };
    assert!(p.hourly);
    let t = dm.from_t + HOUR - STEP;
    assert_eq!(
        p.wear_used_ratio.map(|w| w.last),
        Some(drive_wear(t, s.start))
    );
    assert_eq!(
        p.host_written_bytes,
        Some(drive_host_written(t, s.start).round())
    );
    assert_eq!(p.temperature_celsius.map(|w| w.max), Some(41.0));
    drop(store);

    // Again: nothing new.
    let out = import(NODE, &good);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("imported 0 hourly rows of filesystems, 0 of drives"),
        "{text}"
    );
    assert_eq!(held(&state, now), after);

    // The report, in the daemon's first minutes: the date the history implies (full 120
    // days after its start), and the imported part named.
    let out = ssdwatch(&["report", "--json", "--store", db.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == DB_MOUNT)
        .unwrap();
    let full = fs["predicted_full_unix"].as_i64().expect("a full date");
    let want = s.start + 120 * DAY;
    assert!((full - want).abs() <= 2 * DAY, "{full} vs {want}");
    // The drive's wear-out date the history implies: 20 % at the first sample, a point every
    // 6 days, 100 % 540 days after the history's start.
    let drive = &v["drives"][0];
    let out_t = drive["predicted_wear_out_unix"]
        .as_i64()
        .unwrap_or_else(|| panic!("a wear-out date: {drive}"));
    let want = s.start + 540 * DAY;
    assert!(
        (out_t - want).abs() <= 6 * DAY,
        "{out_t} vs {want}: {drive}"
    );
    let text =
        String::from_utf8_lossy(&ssdwatch(&["report", "--store", db.to_str().unwrap()]).stdout)
            .to_string();
    assert!(text.contains("imported from"), "{text}");
    assert!(
        text.contains(&format!("history of drive {DRIVE_DEV} from")),
        "{text}"
    );

    // Another drive under the same identity (its first reading, 2 % worn, below the 20 % the
    // history ends at): not the same drive, one error line, nothing written.
    let other = s.dir.path().join("other-drive");
    std::fs::create_dir(&other).unwrap();
    first_sample(&other, s, now, 0.02);
    let before = held(&other, now);
    let other_db = other.join("history.db");
    let err = one_error_line(&ssdwatch(&[
        "history",
        "import",
        "--prometheus",
        &s.url,
        "--instance",
        NODE,
        "--store",
        other_db.to_str().unwrap(),
        "--http.config.file",
        good.to_str().unwrap(),
    ]));
    assert!(err.contains("not the same drive"), "{err}");
    assert_eq!(held(&other, now), before);
}

/// What the issue asks the help and the guide to say: how series are matched and what is not.
#[test]
fn the_import_help_and_the_history_guide_describe_the_mapping_and_its_limits() {
    let out = ssdwatch(&["history", "import", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/history.md"))
        .unwrap()
        .replace('\n', " ");
    for (text, what) in [(&help, "--help"), (&guide, "docs/history.md")] {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for says in [
            "matched to the",
            "by mount point",
            "`device` label is the mount source",
            "renamed or moved is another series",
            "more than 2%",
            "by WWN, else serial",
            "never by kernel name",
            "host part of",
        ] {
            assert!(text.contains(says), "{what} does not say {says:?}: {text}");
        }
    }
}
