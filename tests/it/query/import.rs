//! `ssdwatch history import` from the secured Prometheus and the secured VictoriaMetrics: a
//! new host's store, holding only the daemon's first sample, gets 60 days of hourly rows from
//! node_exporter's series, a second import adds none, and the report dates the database mount
//! as the history implies; a wrong password, a wrong instance, an instance with no series and
//! a 50 MB answer each give one error line and leave the store as it was.

use super::*;
use ssdwatch::history::record::{FsKey, FsSample};
use ssdwatch::history::{HistoryConfig, Store};

/// The store as the daemon leaves it after its first sample: both real mounts at `now`.
fn first_sample(dir: &Path, s: &Secured, now: i64) {
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
}

/// What the store holds: its import marks and every filesystem's hourly and raw points.
fn held(dir: &Path, now: i64) -> (Vec<ssdwatch::history::store::ImportMark>, usize) {
    let store = Store::open_read_only(&dir.join("history.db")).unwrap();
    let points = store
        .filesystems()
        .unwrap()
        .iter()
        .map(|f| store.fs_series(f.id, 0, now + DAY).unwrap().len())
        .sum();
    (store.fs_imports().unwrap(), points)
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
    let now = ssdwatch::snapshot::unix_now() as i64;
    first_sample(&state, s, now);
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
    assert!(before.0.is_empty());
    let cases = [
        (
            NODE,
            s.config("badpass.yml", TENANT, "wrong", "ca.crt"),
            "401",
        ),
        ("db9:9100", good.clone(), "no filesystem series"),
        ("db8:9100", good.clone(), "not the same filesystem"),
        (
            NODE,
            s.config("huge.yml", "huge", PASSWORD, "ca.crt"),
            "larger than 32 MiB",
        ),
    ];
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
    let (marks, points) = held(&state, now);
    assert_eq!(marks.len(), 2, "{marks:?}");
    let mut hours = 0;
    for m in &marks {
        // Every hour from the range's start to the history's last sample, nothing after the
        // daemon's first sample.
        assert_eq!(m.hours, (m.until_t - m.from_t) / HOUR, "{m:?}");
        assert_eq!(m.until_t, s.end.div_euclid(HOUR) * HOUR + HOUR, "{m:?}");
        assert!(m.until_t <= now.div_euclid(HOUR) * HOUR, "{m:?}");
        assert!((m.from_t - s.start).abs() <= 2 * HOUR, "{m:?}");
        assert_eq!(m.instance, NODE);
        hours += m.hours as usize;
    }
    assert!(
        text.contains(&format!("imported {hours} hourly rows")),
        "{text}"
    );
    assert_eq!(points, before.1 + hours);

    // Again: nothing new.
    let out = import(NODE, &good);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("imported 0 hourly rows"), "{text}");
    assert_eq!(held(&state, now), (marks, points));

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
    let text =
        String::from_utf8_lossy(&ssdwatch(&["report", "--store", db.to_str().unwrap()]).stdout)
            .to_string();
    assert!(text.contains("imported from"), "{text}");
}
