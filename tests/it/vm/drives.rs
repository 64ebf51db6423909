//! End to end on a real kernel with drives nobody on the project wrote: a QEMU guest with an
//! emulated NVMe drive, a SATA (AHCI) drive and a virtio drive under a dm-linear layer runs
//! ssdwatch around a known O_DIRECT write, a delete, probes and fstrim (tests/vm/guest-init.sh).
//! The guest boots once (tests/vm/run.sh); each test checks one thing it recorded.
//!
//! It boots a VM (about a minute under software emulation), so it is opt-in:
//! `cargo test --test it -- --ignored vm::drives::`. A missing qemu or
//! kernel fails with what to install.

use crate::support;
use crate::support::exposition::{Series, must, parse_exposition, value};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// NVMe SMART data units are thousands of 512-byte sectors.
const NVME_DATA_UNIT_BYTES: f64 = 512_000.0;
const MOUNTS: [&str; 3] = ["/mnt/nvme", "/mnt/sata", "/mnt/virtio"];

/// Runs the guest once per test process; every test reads the same results.
/// `SSDWATCH_VM_RESULTS=DIR` checks the results a previous run left in DIR instead of booting.
fn guest() -> &'static Path {
    static RESULTS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match RESULTS.get_or_init(|| support::run_guest("run.sh", "SSDWATCH_VM_RESULTS", "vm-e2e")) {
        Ok(p) => p,
        Err(e) => panic!("the end-to-end guest did not run: {e}"),
    }
}

fn read(name: &str) -> String {
    let path = guest().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the guest left no {}: {e}", path.display()))
}

fn scrape(name: &str) -> Vec<Series> {
    parse_exposition(&read(name))
}

/// Kernel names the guest found for one of its drives (layout.txt: "what /dev/path name...").
fn layout(what: &str) -> Vec<String> {
    let layout = read("layout.txt");
    let line = layout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(what))
        .unwrap_or_else(|| panic!("layout.txt names no {what} drive"));
    line.split_whitespace()
        .skip(2)
        .map(str::to_string)
        .collect()
}

/// The NVMe test drive's kernel name (its namespace: the guest numbers controllers as found).
fn nvme() -> String {
    layout("nvme").remove(0)
}

/// The virtio drive's kernel name and its dm layer's.
fn virtio_names() -> (String, String) {
    let f = layout("virtio");
    assert_eq!(f.len(), 2, "layout.txt virtio: {f:?}");
    (f[0].clone(), f[1].clone())
}

/// The number a guest file holds: an exit status, a `date +%s` time, a byte count.
fn guest_num<T: std::str::FromStr>(name: &str) -> T
where
    T::Err: std::fmt::Display,
{
    read(name)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The guest's own smartctl reading of one drive (`smartctl-DRIVE-WHEN.json`, taken with the
/// options the daemon uses): "2-before" and "2" are right before and right after sample #2.
fn smartctl(drive: &str, when: &str) -> Value {
    let name = format!("smartctl-{drive}-{when}.json");
    serde_json::from_str(&read(&name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A number in smartctl's JSON, by path.
fn smartctl_f64(json: &Value, path: &[&str], file: &str) -> f64 {
    path.iter()
        .fold(json, |v, k| &v[*k])
        .as_f64()
        .unwrap_or_else(|| panic!("{file}: no {}", path.join(".")))
}

// smartctl's exit-status bits, in the daemon's names (the names themselves are checked
// against smartctl(8) in smart::collector).
use ssdwatch::smart::EXIT_BITS;

/// The daemon decoded every exit bit as the guest's own smartctl runs right before and right
/// after sample #2 saw it (a bit the two runs disagree on could be either).
fn assert_exit_bits_agree(s: &[Series], dev: &str, drive: &str) {
    let runs: [i32; 2] = [
        guest_num(&format!("smartctl-{drive}-2-before.rc")),
        guest_num(&format!("smartctl-{drive}-2.rc")),
    ];
    for (n, bit) in EXIT_BITS.iter().enumerate() {
        let v = must(
            s,
            "ssdwatch_device_smartctl_exit_status_bit",
            &[("device", dev), ("bit", bit)],
            "sample-2",
        );
        assert!(v == 0.0 || v == 1.0, "{dev} {bit} = {v}");
        let seen: Vec<f64> = runs.iter().map(|rc| f64::from((rc >> n) & 1)).collect();
        if seen[0] == seen[1] {
            assert_eq!(
                v, seen[0],
                "{dev} {bit}: the daemon says {v}, smartctl's exit status {runs:?} in the guest"
            );
        }
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn the_guest_scenario_runs_and_every_sample_succeeds() {
    for n in 1..=3 {
        let file = format!("sample-{n}.rc");
        assert_eq!(
            guest_num::<i32>(&file),
            0,
            "ssdwatch sample #{n} failed in the guest: {}",
            read(&format!("sample-{n}.err"))
        );
    }
    println!(
        "guest wall time: {} (accel {})",
        read("timing.txt").trim(),
        read("accel.txt").trim()
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn nvme_host_written_bytes_grow_by_the_bytes_written() {
    let written: f64 = guest_num("written-bytes.txt");
    let before = scrape("sample-1.prom");
    let after = scrape("sample-2.prom");
    let dev = nvme();
    let nvme = [("device", dev.as_str())];
    let m = "ssdwatch_device_host_written_bytes_total";
    let delta = must(&after, m, &nvme, "sample-2") - must(&before, m, &nvme, "sample-1");
    // The drive counts whole data units, rounded up, and ext4 adds a little metadata: the delta
    // is at least the data rounded down to units, and within 5% of it.
    assert!(
        delta >= (written / NVME_DATA_UNIT_BYTES).floor() * NVME_DATA_UNIT_BYTES,
        "host written grew by {delta} bytes, less than the {written} bytes written"
    );
    assert!(
        (delta - written).abs() <= 0.05 * written,
        "host written grew by {delta} bytes for {written} bytes written (more than 5% off)"
    );
    // Same counter as smartctl's own readings right before and right after the sample, in the
    // right unit: writeback between the readings may move it, never backwards.
    let sampled = must(&after, m, &nvme, "sample-2");
    let [low, high] = ["2-before", "2"].map(|when| {
        let units = smartctl_f64(
            &smartctl("nvme", when),
            &["nvme_smart_health_information_log", "data_units_written"],
            &format!("smartctl-nvme-{when}.json"),
        );
        units * NVME_DATA_UNIT_BYTES
    });
    for (what, v) in [("before", low), ("sampled", sampled), ("after", high)] {
        assert!(
            v > 0.0 && v % NVME_DATA_UNIT_BYTES == 0.0,
            "{what}: {v} bytes is no whole number of data units"
        );
    }
    assert!(
        low <= sampled && sampled <= high,
        "host written {sampled} bytes, smartctl read {low} right before and {high} right after"
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn drive_identity_matches_the_qemu_device_options() {
    let s = scrape("sample-2.prom");
    let (virt, _) = virtio_names();
    let nvme = nvme();
    let info = "ssdwatch_disk_info";
    // QEMU's NVMe controller has no model property: its fixed model differs between QEMU
    // versions, so the daemon is held to what smartctl read from the same drive. The serials and
    // the SATA model are the device options the host passed, and smartctl agrees on them too.
    let nvme_json = smartctl("nvme", "2");
    let sata_json = smartctl("sata", "2");
    let text = |j: &Value, k: &str| {
        j[k].as_str()
            .unwrap_or_else(|| panic!("smartctl reports no {k}: {j}"))
            .to_string()
    };
    let nvme_model = text(&nvme_json, "model_name");
    assert!(!nvme_model.is_empty());
    assert_eq!(text(&nvme_json, "serial_number"), "SSDWNVME0001");
    assert_eq!(text(&sata_json, "model_name"), "SSDW SATA SSD");
    assert_eq!(text(&sata_json, "serial_number"), "SSDWSATA0001");
    let want = [
        (
            nvme.as_str(),
            "nvme",
            nvme_model.as_str(),
            "SSDWNVME0001",
            Some("0"),
        ),
        ("sda", "scsi", "SSDW SATA SSD", "SSDWSATA0001", Some("0")),
        // virtio-blk has no model and says it is rotational whatever backs it.
        (virt.as_str(), "virtio", "", "SSDWVIRT0001", None),
    ];
    for (dev, kind, model, serial, rotational) in want {
        let mut labels = vec![
            ("device", dev),
            ("kind", kind),
            ("model", model),
            ("serial", serial),
        ];
        if let Some(r) = rotational {
            labels.push(("rotational", r));
        }
        assert_eq!(must(&s, info, &labels, "sample-2"), 1.0);
    }
    // SMART metrics carry the same serial, so a drive is recognised across renamed devices.
    for (dev, serial) in [(nvme.as_str(), "SSDWNVME0001"), ("sda", "SSDWSATA0001")] {
        let l = [("device", dev), ("serial", serial)];
        assert_eq!(
            must(&s, "ssdwatch_device_smart_passed", &l, "sample-2"),
            1.0
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn smartctl_exit_bits_are_decoded_and_a_drive_without_smart_is_not_fatal() {
    let s = scrape("sample-2.prom");
    let (virt, _) = virtio_names();
    let nvme = nvme();
    // All eight bits per drive, 0 or 1, each as the guest's own smartctl exited on that drive.
    for (dev, drive) in [(nvme.as_str(), "nvme"), ("sda", "sata")] {
        assert_exit_bits_agree(&s, dev, drive);
    }
    // SATA: whatever bits are set, the ATA attribute table is still read.
    assert!(
        s.iter()
            .any(|x| x.name == "ssdwatch_device_smart_attribute_raw"
                && x.labels.get("device").map(String::as_str) == Some("sda")),
        "no ATA attributes for sda"
    );
    // virtio has no SMART: smartctl fails on it (one of its three failure bits: which one is
    // smartctl's choice). That is one fact, told once: smart_supported 0 with sample_ok 1, and
    // no exit-bit series saying the same again.
    for when in ["2-before", "2"] {
        let rc: i32 = guest_num(&format!("smartctl-virtio-{when}.rc"));
        assert!(
            rc & 0b111 != 0,
            "smartctl on the virtio drive exited {rc}: it should fail for want of SMART"
        );
    }
    let virt_l = [("device", virt.as_str())];
    assert_eq!(
        must(&s, "ssdwatch_device_smart_supported", &virt_l, "sample-2"),
        0.0
    );
    assert_eq!(
        must(&s, "ssdwatch_device_smart_sample_ok", &virt_l, "sample-2"),
        1.0
    );
    assert!(
        !s.iter()
            .any(|x| x.name == "ssdwatch_device_smartctl_exit_status_bit"
                && x.labels.get("device") == Some(&virt)),
        "exit bits for {virt}, which has no SMART: the same fact told twice"
    );
    assert_eq!(guest_num::<i32>("sample-2.rc"), 0);
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn an_nvme_critical_warning_set_by_the_host_reads_as_smart_failing() {
    let s = scrape("sample-2.prom");
    let dev = layout("nvme-warning").remove(0);
    let l = [("device", dev.as_str()), ("serial", "SSDWNVMEWARN")];
    let bits: u64 = guest_num("critical-warning.txt");
    assert!(bits > 0);
    // The guest's own smartctl readings right before and right after the sample: what the
    // daemon reports must be what smartctl said (QEMU's fixed temperature, and any warning bits
    // of its own, vary between QEMU versions), and the bits the host set must be among them.
    let readings = [smartctl("warning", "2-before"), smartctl("warning", "2")];
    let cw = "ssdwatch_device_critical_warning";
    let warning = must(&s, cw, &l, "sample-2");
    let said: Vec<f64> = readings
        .iter()
        .map(|j| {
            smartctl_f64(
                j,
                &["nvme_smart_health_information_log", "critical_warning"],
                "smartctl-warning-2*.json",
            )
        })
        .collect();
    assert!(
        said.contains(&warning),
        "{cw} {warning}, smartctl said {said:?}"
    );
    assert_eq!(
        warning as u64 & bits,
        bits,
        "{cw} {warning} lacks the bits the host set ({bits})"
    );
    // smartctl calls the drive FAILED, and so does the daemon.
    for j in &readings {
        assert_eq!(
            j["smart_status"]["passed"],
            Value::Bool(false),
            "smartctl's verdict on a drive with critical warning {bits}: {}",
            j["smart_status"]
        );
    }
    assert_eq!(
        must(&s, "ssdwatch_device_smart_passed", &l, "sample-2"),
        0.0
    );
    // smartctl says FAILED with bit 3 of its exit status (the guest's own runs show it too);
    // the daemon decodes it, and every other bit, instead of dropping the drive.
    for when in ["2-before", "2"] {
        let rc: i32 = guest_num(&format!("smartctl-warning-{when}.rc"));
        assert_eq!(rc & 8, 8, "smartctl on the warning drive exited {rc}");
    }
    assert_exit_bits_agree(&s, &dev, "warning");
    let bit = [("device", dev.as_str()), ("bit", "smart_status_failing")];
    assert_eq!(
        must(
            &s,
            "ssdwatch_device_smartctl_exit_status_bit",
            &bit,
            "sample-2"
        ),
        1.0
    );
    // The temperature is still read, as smartctl read it.
    let temp = must(&s, "ssdwatch_device_temperature_celsius", &l, "sample-2");
    let said: Vec<f64> = readings
        .iter()
        .map(|j| smartctl_f64(j, &["temperature", "current"], "smartctl-warning-2*.json"))
        .collect();
    let (lo, hi) = (said[0].min(said[1]), said[0].max(said[1]));
    assert!(
        (lo..=hi).contains(&temp),
        "temperature {temp} °C, smartctl read {said:?} right before and after"
    );
    assert_eq!(guest_num::<i32>("sample-2.rc"), 0);
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn an_nvme_temperature_threshold_set_below_the_reading_raises_the_temperature_warning() {
    // The guest set the warning drive's over-temperature threshold to 274 K with nvme-cli.
    let set = read("temp-threshold.txt");
    assert_eq!(
        guest_num::<i32>("temp-threshold.rc"),
        0,
        "nvme set-feature: {set}"
    );
    let s = scrape("sample-2.prom");
    let dev = layout("nvme-warning").remove(0);
    let l = [("device", dev.as_str()), ("serial", "SSDWNVMEWARN")];
    // The temperature bit (1) of the critical warning, as smartctl read it right before and
    // right after the sample, and as the daemon exports it (which the critical-warning alert,
    // `ssdwatch_device_critical_warning > 0`, fires on).
    for when in ["2-before", "2"] {
        let cw = smartctl_f64(
            &smartctl("warning", when),
            &["nvme_smart_health_information_log", "critical_warning"],
            &format!("smartctl-warning-{when}.json"),
        ) as u64;
        assert_eq!(cw & 2, 2, "smartctl {when}: critical warning {cw} ({set})");
    }
    let cw = must(&s, "ssdwatch_device_critical_warning", &l, "sample-2") as u64;
    assert_eq!(cw & 2, 2, "ssdwatch_device_critical_warning {cw}");
    // The time above the drive's own warning limit: what smartctl says the drive counted.
    let j = smartctl("warning", "2");
    if let Some(min) = j["nvme_smart_health_information_log"]["warning_temp_time"].as_f64() {
        let limit = [
            ("device", dev.as_str()),
            ("serial", "SSDWNVMEWARN"),
            ("limit", "warning"),
        ];
        assert_eq!(
            must(
                &s,
                "ssdwatch_device_temperature_above_limit_seconds_total",
                &limit,
                "sample-2"
            ),
            min * 60.0
        );
    }
}

/// Bytes fstrim reported per mount point: the whole number right before "bytes", as busybox
/// ("/mnt/nvme: 1020678144 bytes trimmed") and util-linux ("/mnt/nvme: 973.4 MiB (1020678144
/// bytes) trimmed") print it. Other lines (errors) are left out.
fn parse_fstrim(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let (mp, rest) = l.split_once(": ")?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            let at = words
                .iter()
                .position(|w| w.trim_end_matches(')') == "bytes")?;
            let n: u64 = words
                .get(at.checked_sub(1)?)?
                .trim_start_matches('(')
                .parse()
                .ok()?;
            Some((mp.to_string(), n as f64))
        })
        .collect()
}

fn fstrim_bytes() -> BTreeMap<String, f64> {
    parse_fstrim(&read("fstrim.txt"))
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn fstrim_moves_discarded_bytes_and_last_discard_time_on_every_drive() {
    let trimmed = fstrim_bytes();
    let (virt, dm) = virtio_names();
    let nvme = nvme();
    // Whole seconds: taken right before the first fstrim, and when the daemon's scrape that
    // showed the whole trim was taken (the guest waited for it).
    let trim_start: f64 = guest_num("trim-start.txt");
    let scraped: f64 = guest_num("daemon-3-time.txt");
    let before = scrape("daemon-2.prom");
    let after = scrape("daemon-3.prom");
    let cases = [
        ("/mnt/nvme", nvme.as_str()),
        ("/mnt/sata", "sda"),
        ("/mnt/virtio", virt.as_str()),
        ("/mnt/virtio", dm.as_str()),
    ];
    for (mp, dev) in cases {
        let t = *trimmed
            .get(mp)
            .unwrap_or_else(|| panic!("fstrim.txt has no {mp}"));
        assert!(t > 0.0, "fstrim trimmed nothing on {mp}");
        let l = [("device", dev)];
        let m = "ssdwatch_disk_discarded_bytes_total";
        let grew = must(&after, m, &l, "daemon-3") - must(&before, m, &l, "daemon-2");
        assert!(
            grew >= t,
            "{dev}: discarded bytes grew by {grew}, fstrim on {mp} reported {t}"
        );
        let ts = "ssdwatch_disk_last_discard_timestamp_seconds";
        let last = must(&after, ts, &l, "daemon-3");
        // No discard before the trim (mkfs and mounts are nodiscard): the last one seen is the
        // trim's, stamped by a sample between its start and the scrape.
        assert!(
            last >= trim_start && last < scraped + 1.0,
            "{dev}: last discard at {last}, fstrim started at {trim_start}, scraped at {scraped}"
        );
        if let Some(prev) = value(&before, ts, &l) {
            assert!(prev < last, "{dev}: last discard did not move ({prev})");
        }
    }
    // The one-shot mode sees the counters too.
    let s2 = scrape("sample-2.prom");
    let s3 = scrape("sample-3.prom");
    let m = "ssdwatch_disk_discarded_bytes_total";
    let l = [("device", nvme.as_str())];
    assert!(must(&s3, m, &l, "sample-3") > must(&s2, m, &l, "sample-2"));
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn every_filesystem_is_trim_capable_and_mounted_without_discard() {
    let s = scrape("sample-3.prom");
    for mp in MOUNTS {
        let l = [("mountpoint", mp)];
        assert_eq!(
            must(&s, "ssdwatch_filesystem_trim_capable", &l, "sample-3"),
            1.0,
            "{mp}"
        );
        assert_eq!(
            must(
                &s,
                "ssdwatch_filesystem_discard_mount_option",
                &l,
                "sample-3"
            ),
            0.0,
            "{mp}"
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn filesystems_map_to_their_drives_for_nvme_sata_and_virtio_under_dm() {
    let s = scrape("sample-3.prom");
    let (virt, dm) = virtio_names();
    let nvme = nvme();
    let cases = [
        ("/mnt/nvme", nvme.as_str(), nvme.as_str()),
        ("/mnt/sata", "sda", "sda"),
        ("/mnt/virtio", dm.as_str(), virt.as_str()),
    ];
    for (mp, device, drive) in cases {
        let drives: Vec<&str> = s
            .iter()
            .filter(|x| x.name == "ssdwatch_filesystem_drive_info")
            .filter(|x| x.labels.get("mountpoint").map(String::as_str) == Some(mp))
            .map(|x| {
                assert_eq!(x.labels.get("device").map(String::as_str), Some(device));
                x.labels.get("drive").map(String::as_str).unwrap_or("")
            })
            .collect();
        assert_eq!(drives, vec![drive], "{mp}");
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn a_filesystem_on_md_raid1_lives_on_both_drives_and_trims_through_to_each() {
    let md = layout("md");
    assert_eq!(md.len(), 3, "layout.txt md: {md:?}");
    let s = scrape("sample-3.prom");
    let mut drives: Vec<&str> = s
        .iter()
        .filter(|x| x.name == "ssdwatch_filesystem_drive_info")
        .filter(|x| x.labels.get("mountpoint").map(String::as_str) == Some("/mnt/md"))
        .map(|x| {
            assert_eq!(x.labels.get("device"), Some(&md[0]));
            x.labels.get("drive").map(String::as_str).unwrap_or("")
        })
        .collect();
    drives.sort();
    let mut members = vec![md[1].as_str(), md[2].as_str()];
    members.sort();
    assert_eq!(drives, members);
    let l = [("mountpoint", "/mnt/md")];
    assert_eq!(
        must(&s, "ssdwatch_filesystem_trim_capable", &l, "sample-3"),
        1.0
    );
    // RAID1 passes each discard to both mirrors.
    let t = *fstrim_bytes()
        .get("/mnt/md")
        .expect("fstrim.txt has /mnt/md");
    let before = scrape("daemon-2.prom");
    let after = scrape("daemon-3.prom");
    let m = "ssdwatch_disk_discarded_bytes_total";
    for dev in &md {
        let l = [("device", dev.as_str())];
        let grew = must(&after, m, &l, "daemon-3") - must(&before, m, &l, "daemon-2");
        assert!(
            grew >= t,
            "{dev}: discarded grew by {grew}, fstrim reported {t}"
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn probes_ran_on_every_filesystem_with_their_context() {
    let (virt, _) = virtio_names();
    let nvme = nvme();
    let drives = [
        ("nvme", nvme.as_str()),
        ("sata", "sda"),
        ("virtio", virt.as_str()),
    ];
    // The CLI: one run of every kind per filesystem.
    for (name, drive) in drives {
        assert_eq!(
            guest_num::<i32>(&format!("probe-{name}.rc")),
            0,
            "probe run on /mnt/{name}: {}",
            read(&format!("probe-{name}.err"))
        );
        let j: Value = serde_json::from_str(&read(&format!("probe-{name}.json")))
            .unwrap_or_else(|e| panic!("probe-{name}.json: {e}"));
        assert_eq!(j["outcome"], "ran", "probe-{name}.json: {j}");
        assert_eq!(j["placement"]["drives"][0], drive, "probe-{name}.json");
        let fill = j["context"]["fill_ratio"].as_f64().expect("fill_ratio");
        assert!(fill > 0.0 && fill < 1.0, "fill ratio {fill}");
        let kinds: Vec<&str> = j["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter_map(|r| r["probe"].as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "sync_write_4k",
                "rand_read_4k",
                "rand_write_4k",
                "seq_write"
            ]
        );
    }
    // The daemon: runs counted and context recorded, including the trim seconds before.
    let s = scrape("daemon-3.prom");
    let trim_start: f64 = guest_num("trim-start.txt");
    for mp in MOUNTS {
        let runs: f64 = s
            .iter()
            .filter(|x| x.name == "ssdwatch_probe_runs_total")
            .filter(|x| x.labels.get("mountpoint").map(String::as_str) == Some(mp))
            .map(|x| x.value)
            .sum();
        assert!(runs > 0.0, "no probe runs on {mp} in the daemon");
        let l = [("mountpoint", mp)];
        let fill = must(&s, "ssdwatch_probe_context_fill_ratio", &l, "daemon-3");
        assert!(fill > 0.0 && fill < 1.0, "{mp}: fill ratio {fill}");
        let since = must(
            &s,
            "ssdwatch_probe_context_since_discard_seconds",
            &l,
            "daemon-3",
        );
        // Measured at the last run from the trim's discard, so no longer ago than the trim's
        // start (trim-start.txt is in whole seconds: the bound is up to 1 s loose). The guest
        // waited for such a run before its last scrape.
        let ran = must(
            &s,
            "ssdwatch_probe_last_run_timestamp_seconds",
            &l,
            "daemon-3",
        );
        assert!(
            since >= 0.0 && since <= ran - trim_start,
            "{mp}: {since} s since the discard at a run at {ran}, though fstrim started at {trim_start}"
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn nothing_is_written_outside_the_probe_directories() {
    // "path type size mtime" of every file on the three filesystems, before the first probe
    // and at the end.
    let before = read("listing-before.txt");
    let after = read("listing-after.txt");
    let is_root = |l: &str| MOUNTS.iter().any(|m| l.starts_with(&format!("{m} ")));
    let in_probe_dir = |l: &str| {
        MOUNTS
            .iter()
            .any(|m| l.starts_with(&format!("{m}/.ssdwatch-probe")))
    };
    for l in before.lines() {
        // The mount root's mtime moves when the probe directory is created in it.
        if !is_root(l) {
            assert!(after.lines().any(|a| a == l), "changed or gone: {l}");
        }
    }
    for l in after.lines() {
        if !is_root(l) && !in_probe_dir(l) {
            assert!(
                before.lines().any(|b| b == l),
                "written outside the probe dirs: {l}"
            );
        }
    }
    for m in MOUNTS {
        assert!(
            after
                .lines()
                .any(|l| l.starts_with(&format!("{m}/.ssdwatch-probe "))),
            "no probe directory on {m}"
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn the_guest_expositions_pass_promtool() {
    for name in ["sample-3.prom", "daemon-3.prom"] {
        support::assert_promtool_clean(name, &read(name));
    }
}

#[test]
fn the_exposition_parser_reads_escaped_labels() {
    let s = parse_exposition(
        "# HELP x y\nx{a=\"q\\\"uote\",b=\"back\\\\slash\"} 1.5\ny 2\nz{mountpoint=\"/a b\"} 3\n",
    );
    assert_eq!(s.len(), 3);
    assert_eq!(
        value(&s, "x", &[("a", "q\"uote"), ("b", "back\\slash")]),
        Some(1.5)
    );
    assert_eq!(value(&s, "y", &[]), Some(2.0));
    assert_eq!(value(&s, "z", &[("mountpoint", "/a b")]), Some(3.0));
}

#[test]
fn fstrim_output_is_read_from_busybox_and_util_linux() {
    let t = parse_fstrim(
        "/mnt/nvme: 1020678144 bytes trimmed\n\
         /mnt/sata: 973.4 MiB (1020678144 bytes) trimmed\n\
         /mnt/md: 0 B (0 bytes) trimmed\n\
         fstrim: /mnt/virtio: the discard operation is not supported\n",
    );
    assert_eq!(t.get("/mnt/nvme"), Some(&1_020_678_144.0));
    assert_eq!(t.get("/mnt/sata"), Some(&1_020_678_144.0));
    assert_eq!(t.get("/mnt/md"), Some(&0.0));
    assert_eq!(t.len(), 3, "{t:?}");
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn both_smart_backends_read_the_sata_drive_and_agree_on_every_field_both_report() {
    if !cfg!(feature = "atasmart") {
        support::skip(
            "both_smart_backends_read_the_sata_drive_and_agree_on_every_field_both_report",
            "built without the atasmart feature (the default features include it: build without --no-default-features)",
        );
        return;
    }
    let mut read_by = BTreeMap::new();
    for b in ["smartctl", "libatasmart"] {
        assert_eq!(
            guest_num::<i32>(&format!("backend-{b}.rc")),
            0,
            "{b}: {}",
            read(&format!("backend-{b}.err"))
        );
        let s = scrape(&format!("backend-{b}.prom"));
        let dev = [("device", "sda")];
        assert_eq!(
            must(&s, "ssdwatch_device_smart_sample_ok", &dev, b),
            1.0,
            "{b}: {}",
            read(&format!("backend-{b}.err"))
        );
        let info = s
            .iter()
            .find(|x| x.name == "ssdwatch_device_info")
            .unwrap_or_else(|| panic!("{b}: no info series"));
        assert_eq!(info.labels.get("backend").map(String::as_str), Some(b));
        read_by.insert(b, s);
    }
    // Before the udev property chose linux-ide, libatasmart's SAT access got no IDENTIFY from
    // QEMU's disk: the drive's error says which step failed and what selects another method.
    let sat = read("backend-libatasmart-sat.err");
    assert!(
        sat.contains("device sda: libatasmart identify") && sat.contains("ID_ATA_SMART_ACCESS"),
        "{sat}"
    );
    let (sc, la) = (&read_by["smartctl"], &read_by["libatasmart"]);
    // Every per-drive series both report, by name and labels; attributes by id (each backend
    // names them its own way), info by the identity labels both carry.
    let key = |x: &Series| -> Option<String> {
        if x.labels.get("device").map(String::as_str) != Some("sda") {
            return None;
        }
        match x.name.as_str() {
            // Only smartctl has exit bits; ages and intervals are about the run, not the drive.
            "ssdwatch_device_smartctl_exit_status_bit"
            | "ssdwatch_device_smart_sample_age_seconds"
            | "ssdwatch_device_info" => None,
            n if n.starts_with("ssdwatch_device_smart_attribute_") => {
                Some(format!("{n} id={}", x.labels.get("id")?))
            }
            n if n.starts_with("ssdwatch_device_") => Some(format!("{n} {:?}", x.labels)),
            _ => None,
        }
    };
    let of = |s: &[Series]| -> BTreeMap<String, f64> {
        s.iter().filter_map(|x| Some((key(x)?, x.value))).collect()
    };
    let (a, b) = (of(sc), of(la));
    let both: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
    let disagree: Vec<String> = both
        .iter()
        .filter(|k| a[**k] != b[**k])
        .map(|k| format!("{k}: smartctl {} libatasmart {}", a[*k], b[*k]))
        .collect();
    assert!(
        disagree.is_empty(),
        "the backends disagree:\n{}",
        disagree.join("\n")
    );
    // The comparison covered the fields that matter, not just the bookkeeping.
    for must_cover in [
        "ssdwatch_device_smart_supported",
        "ssdwatch_device_smart_passed",
        "ssdwatch_device_power_on_seconds_total",
        "ssdwatch_device_smart_attribute_raw",
    ] {
        assert!(
            both.iter().any(|k| k.starts_with(must_cover)),
            "{must_cover} not reported by both: smartctl {:?}\nlibatasmart {:?}",
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>()
        );
    }
    let info = |s: &[Series]| -> Vec<(String, String)> {
        let i = s
            .iter()
            .find(|x| x.name == "ssdwatch_device_info")
            .expect("info");
        ["model", "serial", "firmware"]
            .iter()
            .map(|k| (k.to_string(), i.labels.get(*k).cloned().unwrap_or_default()))
            .collect()
    };
    assert_eq!(info(sc), info(la), "identity");
    assert!(
        info(sc)
            .iter()
            .any(|(k, v)| k == "serial" && v == "SSDWSATA0001")
    );
}

/// A disk behind QEMU's emulated LSI MegaRAID SAS controller (megasas-gen2): smartctl's own
/// `--scan-open` lists its port, and the daemon's RAID discovery (`discover_raid`, nothing
/// listed by hand) finds it and reads it through the controller, as the guest's smartctl does.
#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test it -- --ignored vm::drives::"]
fn a_disk_behind_a_megaraid_controller_is_found_by_the_scan_and_read_through_it() {
    let port = read("raid-port.txt").trim().to_string();
    assert!(
        port.starts_with("/dev/bus/"),
        "smartctl's scan found no megaraid,0 port: {port:?}\n{}",
        read("raid-scan.json")
    );
    let scan: Value = serde_json::from_str(&read("raid-scan.json")).expect("scan JSON");
    let parsed = ssdwatch::smart::scan::parse_scan_open(&read("raid-scan.json")).unwrap();
    assert!(
        parsed
            .ports
            .iter()
            .any(|p| p.path == port && p.dev_type == "megaraid,0"),
        "{parsed:?} from {scan}"
    );
    let j: Value = serde_json::from_str(&read("smartctl-raid.json")).expect("smartctl JSON");
    assert_eq!(j["serial_number"], "SSDWRAID0001", "{j}");
    assert_eq!(j["device"]["type"], "megaraid,0");
    assert_eq!(guest_num::<i32>("raid.rc"), 0, "{}", read("raid.err"));
    let s = scrape("raid.prom");
    let label = format!("{}:megaraid,0", port.trim_start_matches("/dev/"));
    let l = [("device", label.as_str()), ("serial", "SSDWRAID0001")];
    assert_eq!(must(&s, "ssdwatch_device_smart_sample_ok", &l, "raid"), 1.0);
    // QEMU's SCSI disk has no SMART: known, not an error.
    assert_eq!(must(&s, "ssdwatch_device_smart_supported", &l, "raid"), 0.0);
    let info: Vec<&Series> = s
        .iter()
        .filter(|x| x.name == "ssdwatch_device_info" && x.labels.get("device") == Some(&label))
        .collect();
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(
        info[0].labels.get("model").map(String::as_str),
        j["scsi_model_name"].as_str(),
        "{info:?}"
    );
    assert_eq!(
        info[0].labels.get("device_type").map(String::as_str),
        Some("megaraid,0")
    );
    // The sample's collector succeeded: the scan was no error.
    assert!(
        !read("raid.err").contains("RAID discovery"),
        "{}",
        read("raid.err")
    );
}
