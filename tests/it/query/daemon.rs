//! The daemon's import at first start (`history.import`), against the secured Prometheus and
//! VictoriaMetrics: a new host's daemon imports the fleet's 60 days by itself, in the
//! background, and exports `ssdwatch_filesystem_predicted_full_timestamp_seconds` with the date
//! the history implies in its first minutes (the report says the same, and which part was
//! imported); a second start imports nothing; a wrong password is one error line and the
//! daemon goes on. With its drive read by SMART, the drive's history comes in the same run and
//! `ssdwatch_device_predicted_wearout_timestamp_seconds` carries the date it implies.

use super::*;
use crate::support::binary::{Daemon as Binary, command};
use ssdwatch::history::Store;

/// A host with the simulated database host's two mounts, statvfs answering what the history's
/// last day implies now (the database mount 40 GiB + 0.5 GiB a day used), and a config whose
/// `history.import` names the gateway with `http_config`.
fn host(s: &Secured, name: &str, http_config: &Path) -> PathBuf {
    host_with(s, name, http_config, "  smart:\n    enabled: false\n")
}

/// [`host`] with `smart` as the config's SMART section (indented under `collectors`).
fn host_with(s: &Secured, name: &str, http_config: &Path, smart: &str) -> PathBuf {
    let h = s.dir.path().join(name);
    for d in [
        "sys/block",
        "sys/class/block",
        "proc/self",
        "rootfs",
        "state",
    ] {
        std::fs::create_dir_all(h.join(d)).unwrap();
    }
    std::fs::write(
        h.join("proc/self/mountinfo"),
        format!(
            "1 0 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n\
             2 1 259:1 / {DB_MOUNT} rw,relatime - ext4 /dev/nvme0n1p1 rw\n"
        ),
    )
    .unwrap();
    let now = crate::support::unix_now() as i64;
    let stat = |size: f64, used: f64| {
        let blocks = (size / 4096.0) as u64;
        let avail = ((size - used) / 4096.0) as u64;
        format!(
            "  frsize: 4096\n  blocks: {blocks}\n  bfree: {avail}\n  bavail: {avail}\n  files: 1000000\n  ffree: 900000\n"
        )
    };
    std::fs::write(
        h.join("statvfs.yaml"),
        format!(
            "\"/\":\n{}\"{DB_MOUNT}\":\n{}",
            stat(ROOT_SIZE, ROOT_USED),
            stat(DB_SIZE, db_used(now, s.start))
        ),
    )
    .unwrap();
    std::fs::write(
        h.join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n{smart}  layers:\n    enabled: false\n\
             history:\n  import:\n    prometheus: {}\n    instance: \"{NODE}\"\n    http_config_file: {}\n",
            h.join("state").display(),
            s.url,
            http_config.display()
        ),
    )
    .unwrap();
    h
}

/// The daemon on `host`, its log in a directory of its own (the host outlives it).
fn start(host: &Path) -> Binary {
    let cmd = {
        let mut c = command(host, &[]);
        c.arg("--fixture.statvfs").arg(host.join("statvfs.yaml"));
        c
    };
    Binary::spawn(tempfile::tempdir().unwrap(), cmd)
}

fn predicted_full(m: &str) -> Option<f64> {
    value_matching(
        m,
        "ssdwatch_filesystem_predicted_full_timestamp_seconds",
        &format!("mountpoint=\"{DB_MOUNT}\""),
    )
}

/// Waits (at most the daemon's first minutes) for `/metrics` to hold the database mount's
/// predicted-full date.
fn wait_predicted(d: &Binary) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(v) = predicted_full(&d.metrics()) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no predicted-full date of {DB_MOUNT}:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_new_hosts_daemon_imports_the_fleets_history_itself_and_dates_its_database_mount_at_once() {
    let test =
        "a_new_hosts_daemon_imports_the_fleets_history_itself_and_dates_its_database_mount_at_once";
    if let Some(s) = Secured::start(test) {
        daemon_story(&s);
    }
}

#[test]
fn a_new_hosts_daemon_imports_from_victoria_metrics_itself_and_dates_its_database_mount_at_once() {
    let test = "a_new_hosts_daemon_imports_from_victoria_metrics_itself_and_dates_its_database_mount_at_once";
    if let Some(s) = Secured::start_victoria_metrics(test) {
        daemon_story(&s);
    }
}

fn daemon_story(s: &Secured) {
    let good = s.config("good.yml", TENANT, PASSWORD, "ca.crt");
    let h = host(s, "db7", &good);
    let db = h.join("state/history.db");
    let want = (s.start + 120 * DAY) as f64;

    let d = start(&h);
    // Serving at once; the import runs behind it.
    assert_eq!(d.get_status("/-/healthy"), 200);
    assert!(
        d.wait_log(
            "history import at first start: done",
            Duration::from_secs(300)
        ),
        "{}",
        d.log_text()
    );
    let log = d.log_text();
    // The mapping and the rows written are logged.
    assert!(
        log.contains(&format!(
            "{DB_MOUNT} (device /dev/nvme0n1p1) -> store filesystem"
        )),
        "{log}"
    );
    let marks = Store::open_read_only(&db).unwrap().fs_imports().unwrap();
    assert_eq!(marks.len(), 2, "{marks:?}");
    let rows: i64 = marks.iter().map(|m| m.hours).sum();
    assert!(rows >= 2 * 59 * 24, "{marks:?}");
    assert!(log.contains(&format!("rows={rows}")), "{log}");
    // The forecast pass that follows the import: the date the history implies.
    let full = wait_predicted(&d);
    assert!((full - want).abs() <= 2.0 * DAY as f64, "{full} vs {want}");
    // The report from the store the daemon writes: the same date, the imported part named.
    let out = ssdwatch(&["report", "--json", "--store", db.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == DB_MOUNT)
        .cloned()
        .unwrap();
    let reported = fs["predicted_full_unix"].as_i64().expect("a full date") as f64;
    assert!(
        (reported - want).abs() <= 2.0 * DAY as f64,
        "{reported} vs {want}"
    );
    let text =
        String::from_utf8_lossy(&ssdwatch(&["report", "--store", db.to_str().unwrap()]).stdout)
            .to_string();
    assert!(text.contains("imported from"), "{text}");
    drop(d);

    // A later start: no second import, the same marks, and the date from its first pass.
    let d = start(&h);
    assert!(
        d.wait_log(
            "history import at first start: not run: the store holds imported history",
            Duration::from_secs(300)
        ),
        "{}",
        d.log_text()
    );
    let full = wait_predicted(&d);
    assert!((full - want).abs() <= 2.0 * DAY as f64, "{full} vs {want}");
    assert_eq!(
        Store::open_read_only(&db).unwrap().fs_imports().unwrap(),
        marks
    );
    assert!(!d.log_text().contains("history import at first start: done"));
}

#[test]
fn a_wrong_password_for_the_import_at_first_start_is_one_error_and_the_daemon_goes_on() {
    let test = "a_wrong_password_for_the_import_at_first_start_is_one_error_and_the_daemon_goes_on";
    let Some(s) = Secured::start(test) else {
        return;
    };
    let bad = s.config("badpass.yml", TENANT, "wrong", "ca.crt");
    let h = host(&s, "db7", &bad);
    let d = start(&h);
    assert!(
        d.wait_log("history import at first start:", Duration::from_secs(300)),
        "{}",
        d.log_text()
    );
    let log = d.log_text();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("history import"))
        .collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains("ERROR") && errors[0].contains("401") && errors[0].contains(&s.url),
        "{log}"
    );
    assert!(errors[0].contains("the daemon goes on"), "{log}");
    assert!(!log.contains(PASSWORD), "a secret in the log: {log}");
    // The daemon serves its own samples, without the import.
    let m = d.metrics();
    assert_eq!(
        value(&m, "ssdwatch_collector_success{collector=\"filesystem\"}"),
        Some(1.0),
        "{m}"
    );
    let db = h.join("state/history.db");
    assert!(
        Store::open_read_only(&db)
            .unwrap()
            .fs_imports()
            .unwrap()
            .is_empty()
    );
    assert_eq!(d.get_status("/-/healthy"), 200);
}

/// The same host with its drive read by the SMART collector (smartctl answering with a real
/// NVMe capture, its identity and counters set to the simulated drive's as of now: 20 % worn,
/// 62 TB written): the daemon imports the drive's 60 days with the filesystems, in one run,
/// and exports `ssdwatch_device_predicted_wearout_timestamp_seconds` with the date the history
/// implies (100 % worn 540 days after its start) in its first minutes.
#[test]
fn a_new_hosts_daemon_imports_its_drives_history_and_dates_its_wear_out_at_once() {
    let test = "a_new_hosts_daemon_imports_its_drives_history_and_dates_its_wear_out_at_once";
    let Some(s) = Secured::start(test) else {
        return;
    };
    let fake = crate::support::smart::Fake::new();
    let mut capture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::smart::smart_fixture(
            "nvme-samsung-970evoplus.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let now = crate::support::unix_now() as i64;
    capture["serial_number"] = DRIVE_SERIAL.into();
    capture["model_name"] = DRIVE_MODEL.into();
    let eui = u64::from_str_radix(DRIVE_WWN.trim_start_matches("eui."), 16).unwrap();
    capture["nvme_eui64"] = serde_json::json!({"oui": eui >> 40, "ext_id": eui & 0xff_ffff_ffff});
    let log = &mut capture["nvme_smart_health_information_log"];
    log["percentage_used"] = ((drive_wear(now, s.start) * 100.0).round() as u64).into();
    // NVMe data units are 512,000 bytes.
    log["data_units_written"] =
        ((drive_host_written(now, s.start) / 512_000.0).ceil() as u64).into();
    let json = fake.dir.path().join("capture.json");
    std::fs::write(&json, capture.to_string()).unwrap();
    std::fs::write(
        fake.dir.path().join("mode"),
        format!("ok {}\n", json.display()),
    )
    .unwrap();
    let good = s.config("good.yml", TENANT, PASSWORD, "ca.crt");
    let smart = format!(
        "  smart:\n    enabled: true\n    smartctl_path: {}\n    discover: false\n    devices:\n      - {{ path: /dev/{DRIVE_DEV}, type: nvme, label: {DRIVE_DEV} }}\n",
        fake.bin().display()
    );
    let h = host_with(&s, "db7", &good, &smart);
    let d = start(&h);
    assert!(
        d.wait_log(
            "history import at first start: done",
            Duration::from_secs(400)
        ),
        "{}",
        d.log_text()
    );
    let log = d.log_text();
    assert!(
        log.contains(&format!(
            "{DRIVE_DEV} (serial {DRIVE_SERIAL}, wwn {DRIVE_WWN}) -> store drive"
        )),
        "{log}"
    );
    let db = h.join("state/history.db");
    let marks = Store::open_read_only(&db).unwrap().drive_imports().unwrap();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(marks[0].hours >= 59 * 24, "{marks:?}");
    let want = (s.start + 540 * DAY) as f64;
    let deadline = Instant::now() + Duration::from_secs(300);
    let got = loop {
        let m = d.metrics();
        if let Some(v) = value_matching(
            &m,
            "ssdwatch_device_predicted_wearout_timestamp_seconds",
            &format!("serial=\"{DRIVE_SERIAL}\""),
        ) {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "no wear-out date:\n{m}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!((got - want).abs() <= 6.0 * DAY as f64, "{got} vs {want}");
}
