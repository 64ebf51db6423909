//! The layers below filesystems on a real kernel (tests/vm/guest-layers.sh): an overcommitted
//! LVM thin pool filled under a half-empty ext4 until writes fail, an md RAID1 degraded and
//! rebuilt, ZFS pools and datasets filled past 80 % with a faulted mirror device. The daemon
//! runs split as in production (it gives up its capabilities; dmsetup goes through the helper).
//! The guest boots once; each test checks one thing it recorded.
//!
//! Opt-in (a VM, minutes under software emulation): `cargo test --test it -- --ignored vm::layers::`.

use crate::support;
use crate::support::exposition::{Series, must, parse_exposition, value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `SSDWATCH_VM_LAYERS_RESULTS=DIR` checks the results a previous run left in DIR.
fn guest() -> &'static Path {
    static RESULTS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match RESULTS
        .get_or_init(|| support::run_guest("layers.sh", "SSDWATCH_VM_LAYERS_RESULTS", "vm-layers"))
    {
        Ok(p) => p,
        Err(e) => panic!("the layers guest did not run: {e}"),
    }
}

fn read(name: &str) -> String {
    let path = guest().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the guest left no {}: {e}", path.display()))
}

fn scrape(name: &str) -> Vec<Series> {
    parse_exposition(&read(&format!("{name}.prom")))
}

const POOL: &str = "vg-pool-tpool";
const THIN_MOUNT: &str = "/mnt/thin";

/// The fill steps: (step, whether its write succeeded).
fn thin_steps() -> Vec<(u32, bool)> {
    read("thin-steps.txt")
        .lines()
        .map(|l| {
            let (n, r) = l.split_once(' ').expect("step line");
            (n.parse().expect("step number"), r == "ok")
        })
        .collect()
}

#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn an_overcommitted_thin_pool_limits_the_ext4_on_it_before_writes_fail() {
    let steps = thin_steps();
    let failed = steps
        .iter()
        .find(|(_, ok)| !ok)
        .map(|(n, _)| *n)
        .expect("the pool never ran out: no write failed");
    assert!(failed > 3, "writes failed at step {failed}: {steps:?}");
    let last_ok = scrape(&format!("thin-step-{:02}", failed - 1));
    let f = "last good step";
    let mp = [("mountpoint", THIN_MOUNT)];
    let size = must(&last_ok, "ssdwatch_filesystem_size_bytes", &mp, f);
    let avail = must(&last_ok, "ssdwatch_filesystem_avail_bytes", &mp, f);
    let effective = must(
        &last_ok,
        "ssdwatch_filesystem_effective_avail_bytes",
        &mp,
        f,
    );
    // The story: the ext4 alone still shows over a quarter of it free; the pool under it has
    // almost nothing left, and the daemon says so, naming the pool.
    assert!(avail > 0.25 * size, "ext4 avail {avail} of {size}");
    // Less than the next 24 MiB write, which then failed.
    assert!(
        effective < 24.0 * 1048576.0 && effective < 0.25 * avail,
        "effective {effective}, ext4 avail {avail}"
    );
    assert_eq!(
        value(
            &last_ok,
            "ssdwatch_filesystem_limiting_layer_info",
            &[
                ("mountpoint", THIN_MOUNT),
                ("layer", "thin_pool"),
                ("name", POOL)
            ]
        ),
        Some(1.0)
    );
    let p = [("pool", POOL)];
    let data = must(&last_ok, "ssdwatch_thin_pool_data_size_bytes", &p, f);
    let used = must(&last_ok, "ssdwatch_thin_pool_data_used_bytes", &p, f);
    assert_eq!(data, 256.0 * 1048576.0);
    assert_eq!(
        effective,
        data - used,
        "the mount's effective space is the pool's free space"
    );
    // Two 400 MiB volumes promised from 256 MiB.
    assert_eq!(
        value(&last_ok, "ssdwatch_thin_pool_overcommit_ratio", &p),
        Some(800.0 / 256.0)
    );
    assert_eq!(
        value(&last_ok, "ssdwatch_thin_pool_error_if_no_space", &p),
        Some(1.0)
    );
    // Once the writes failed: out of data space, nothing effective left.
    let after = scrape(&format!("thin-step-{failed:02}"));
    assert_eq!(
        value(&after, "ssdwatch_thin_pool_out_of_data_space", &p),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "ssdwatch_filesystem_effective_avail_bytes", &mp),
        Some(0.0)
    );
    // The figures are dmsetup's own: used data blocks × 64 KiB blocks, as the guest saw them.
    let status = read("dmsetup-status-full.txt");
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{POOL}:")))
        .expect("the pool in dmsetup status");
    let blocks: f64 = line
        .split_whitespace()
        .nth(6)
        .and_then(|f| f.split('/').next())
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("used data blocks in {line:?}"));
    assert_eq!(
        value(&after, "ssdwatch_thin_pool_data_used_bytes", &p),
        Some(blocks * 65536.0)
    );
    alerts_fire_before_the_writes_fail(&steps, failed);
}

/// Go's `%.4g` (Prometheus' humanizePercentage prints `%.4g%%` of the value × 100).
fn go_g4(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    let decimals = (3 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Replays the steps before the failing write in promtool, ten minutes apart, then holds the
/// last good state: the pool's and the mount's low-space alerts fire on it, and the pool's
/// forecast says full within a day; so a DBA was told before the writes failed.
fn alerts_fire_before_the_writes_fail(steps: &[(u32, bool)], failed: u32) {
    if !support::require_cmd("thin pool alerts", "promtool", "prometheus") {
        return;
    }
    let good: Vec<Vec<Series>> = (0..failed)
        .map(|n| scrape(&format!("thin-step-{n:02}")))
        .collect();
    assert_eq!(good.len() as u32, failed, "{steps:?}");
    // Each step 10 minutes apart (one sample per minute held), then the last one for 40 minutes.
    let values = |name: &str, want: &[(&str, &str)]| -> String {
        let mut v: Vec<String> = Vec::new();
        for s in &good {
            let x = value(s, name, want).unwrap_or_else(|| panic!("{name} {want:?} missing"));
            v.push(format!("{x}x9"));
        }
        let last = value(good.last().unwrap(), name, want).unwrap();
        v.push(format!("{last}x40"));
        v.join(" ")
    };
    let fs = [("mountpoint", THIN_MOUNT)];
    let dev = good
        .last()
        .unwrap()
        .iter()
        .find(|s| {
            s.name == "ssdwatch_filesystem_size_bytes" && s.labels["mountpoint"] == THIN_MOUNT
        })
        .map(|s| s.labels["device"].clone())
        .expect("the thin mount's device");
    let fl = format!(
        "instance=\"guest\",job=\"ssdwatch\",mountpoint=\"{THIN_MOUNT}\",device=\"{dev}\",fstype=\"ext4\""
    );
    let pl = format!("instance=\"guest\",job=\"ssdwatch\",pool=\"{POOL}\"");
    let mut series = String::new();
    // The layer that runs out first, as the guest's last good scrape names it: the summary's
    // template looks it up (a thin pool under the ext4: "Effective fill of ...").
    let limiting = good.last().unwrap().iter().find(|s| {
        s.name == "ssdwatch_filesystem_limiting_layer_info"
            && s.labels["mountpoint"] == THIN_MOUNT
            && s.labels.get("layer").is_some_and(|l| l != "filesystem")
    });
    if let Some(l) = limiting {
        let labels: Vec<String> = l
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        series += &format!(
            "      - series: 'ssdwatch_filesystem_limiting_layer_info{{instance=\"guest\",job=\"ssdwatch\",{}}}'\n        values: '1x{}'\n",
            labels.join(","),
            good.len() * 10 + 40
        );
    }
    for name in [
        "ssdwatch_filesystem_size_bytes",
        "ssdwatch_filesystem_free_bytes",
        "ssdwatch_filesystem_avail_bytes",
        "ssdwatch_filesystem_effective_avail_bytes",
        "ssdwatch_filesystem_readonly",
    ] {
        series += &format!(
            "      - series: '{name}{{{fl}}}'\n        values: '{}'\n",
            values(name, &fs)
        );
    }
    for sev in ["warning", "critical"] {
        for name in [
            "ssdwatch_filesystem_alert_threshold_ratio",
            "ssdwatch_filesystem_alert_threshold_avail_bytes",
            "ssdwatch_filesystem_alert_threshold_full_seconds",
        ] {
            let want = [("mountpoint", THIN_MOUNT), ("severity", sev)];
            series += &format!(
                "      - series: '{name}{{instance=\"guest\",job=\"ssdwatch\",mountpoint=\"{THIN_MOUNT}\",severity=\"{sev}\"}}'\n        values: '{}'\n",
                values(name, &want)
            );
        }
    }
    let p = [("pool", POOL)];
    for name in [
        "ssdwatch_thin_pool_data_size_bytes",
        "ssdwatch_thin_pool_data_used_bytes",
        "ssdwatch_thin_pool_metadata_size_bytes",
        "ssdwatch_thin_pool_metadata_used_bytes",
        "ssdwatch_thin_pool_out_of_data_space",
        "ssdwatch_thin_pool_read_only",
        "ssdwatch_thin_pool_failed",
        "ssdwatch_thin_pool_needs_check",
    ] {
        series += &format!(
            "      - series: '{name}{{{pl}}}'\n        values: '{}'\n",
            values(name, &p)
        );
    }
    let last = good.last().unwrap();
    let size = value(last, "ssdwatch_filesystem_size_bytes", &fs).unwrap();
    let free = value(last, "ssdwatch_filesystem_free_bytes", &fs).unwrap();
    let avail = value(last, "ssdwatch_filesystem_avail_bytes", &fs).unwrap();
    let eff = value(last, "ssdwatch_filesystem_effective_avail_bytes", &fs).unwrap();
    let used_ratio = (size - free + avail - eff) / (size - free + avail);
    let pool_ratio = value(last, "ssdwatch_thin_pool_data_used_bytes", &p).unwrap()
        / value(last, "ssdwatch_thin_pool_data_size_bytes", &p).unwrap();
    assert!(
        pool_ratio > 0.9 && used_ratio > 0.9,
        "pool {pool_ratio}, mount {used_ratio}"
    );
    // Warning past 90 %; critical too past 95 % (the mount's critical also needs < 5 GiB left).
    let severities = |ratio: f64| {
        if ratio > 0.95 {
            vec!["warning", "critical"]
        } else {
            vec!["warning"]
        }
    };
    let at = (failed as usize * 10 + 30).to_string() + "m";
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/prometheus");
    let alert = |name: &str, sev: &str, labels: &str| -> String {
        format!(
            "          - exp_labels: {{severity: {sev}, {labels}}}\n            exp_annotations: __{name}_{sev}__\n"
        )
    };
    // Annotations are rendered from the rule file's own templates with the values above.
    let alerts_doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(rules.join("ssdwatch.alerts.yml")).unwrap(),
    )
    .unwrap();
    let render = |name: &str, sev: &str, labels: &[(&str, &str)], v: f64| -> String {
        let rule = alerts_doc["groups"]
            .as_sequence()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_sequence().unwrap().iter())
            .find(|r| {
                r["alert"].as_str() == Some(name) && r["labels"]["severity"].as_str() == Some(sev)
            })
            .unwrap_or_else(|| panic!("no {name} {sev}"));
        let mut out = String::from("{");
        for (k, t) in rule["annotations"].as_mapping().unwrap() {
            let mut t = t.as_str().unwrap().to_string();
            // The words that name the layer running out first come from queries in the
            // templates: what they render to, written out (the limiting layer, and df's own
            // fill of the filesystem at the check).
            if t.contains("{{ with query") {
                let df = format!("{}%", go_g4((size - free) / (size - free + avail) * 100.0));
                let nested = regex_lite::Regex::new(
                    r"(?s)\{\{ with query \(printf `\(ssdwatch_filesystem_size_bytes.*?\}\}\{\{ with index \. 0 \}\}(.*?)\{\{ end \}\}\{\{ end \}\}",
                )
                .unwrap();
                t = nested
                    .replace_all(&t, |c: &regex_lite::Captures| {
                        c[1].replace("{{ .Value | humanizePercentage }}", &df)
                    })
                    .into_owned();
                let outer = regex_lite::Regex::new(
                    r"(?s)\{\{ with query \(printf `ssdwatch_filesystem_limiting_layer_info.*?\}\}\{\{ with index \. 0 \}\}(.*?)\{\{ end \}\}(?:\{\{ else \}\}(.*?))?\{\{ end \}\}",
                )
                .unwrap();
                t = outer
                    .replace_all(&t, |c: &regex_lite::Captures| match limiting {
                        Some(l) => c[1]
                            .replace(
                                "{{ .Labels.layer | reReplaceAll \"_\" \" \" }}",
                                &l.labels["layer"].replace('_', " "),
                            )
                            .replace("{{ .Labels.name }}", &l.labels["name"]),
                        None => c.get(2).map_or(String::new(), |m| m.as_str().to_string()),
                    })
                    .into_owned();
            }
            for (lk, lv) in labels {
                t = t.replace(&format!("{{{{ $labels.{lk} }}}}"), lv);
            }
            t = t.replace(
                "{{ $value | humanizePercentage }}",
                &format!("{}%", go_g4(v * 100.0)),
            );
            out += &format!(
                "{}: {}, ",
                k.as_str().unwrap(),
                serde_json::to_string(&t).unwrap()
            );
        }
        out.trim_end_matches(", ").to_string() + "}"
    };
    let mut cases = String::new();
    let fs_labels = [
        ("instance", "guest"),
        ("mountpoint", THIN_MOUNT),
        ("device", dev.as_str()),
        ("fstype", "ext4"),
    ];
    let pool_labels = [("instance", "guest"), ("pool", POOL)];
    cases += &format!(
        "      - eval_time: {at}\n        alertname: SsdwatchFilesystemAlmostFull\n        exp_alerts:\n"
    );
    for sev in severities(used_ratio) {
        cases += &alert("SsdwatchFilesystemAlmostFull", sev, &format!(
            "instance: guest, job: ssdwatch, mountpoint: \"{THIN_MOUNT}\", device: \"{dev}\", fstype: ext4"
        ))
        .replace(
            &format!("__SsdwatchFilesystemAlmostFull_{sev}__"),
            &render("SsdwatchFilesystemAlmostFull", sev, &fs_labels, used_ratio),
        );
    }
    cases += &format!(
        "      - eval_time: {at}\n        alertname: SsdwatchThinPoolAlmostFull\n        exp_alerts:\n"
    );
    for sev in severities(pool_ratio) {
        cases += &alert(
            "SsdwatchThinPoolAlmostFull",
            sev,
            &format!("instance: guest, job: ssdwatch, pool: \"{POOL}\""),
        )
        .replace(
            &format!("__SsdwatchThinPoolAlmostFull_{sev}__"),
            &render("SsdwatchThinPoolAlmostFull", sev, &pool_labels, pool_ratio),
        );
    }
    // At the first step nothing fires.
    cases += "      - eval_time: 5m\n        alertname: SsdwatchThinPoolAlmostFull\n        exp_alerts: []\n";
    cases += "      - eval_time: 5m\n        alertname: SsdwatchFilesystemAlmostFull\n        exp_alerts: []\n";
    // The pool's own forecast: full within a day, from the steps' trend.
    let forecast = format!(
        "      - expr: ssdwatch:thin_pool_seconds_until_full < bool 86400\n        eval_time: {at}\n        exp_samples:\n          - labels: '{{{pl}}}'\n            value: 1\n"
    );
    let groups: Vec<String> = ["ssdwatch.rules.yml", "ssdwatch.alerts.yml"]
        .iter()
        .flat_map(|f| {
            let d: serde_yaml_ng::Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(rules.join(f)).unwrap()).unwrap();
            d["groups"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|g| format!("  - {}\n", g["name"].as_str().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    let doc = format!(
        "rule_files:\n  - {}\n  - {}\nevaluation_interval: 1m\ngroup_eval_order:\n{}tests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n{cases}    promql_expr_test:\n{forecast}",
        rules.join("ssdwatch.rules.yml").display(),
        rules.join("ssdwatch.alerts.yml").display(),
        groups.concat()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("thin.test.yml");
    std::fs::write(&file, &doc).unwrap();
    let (ok, out) = support::run_status("promtool", &["test", "rules", file.to_str().unwrap()]);
    assert!(
        ok,
        "promtool test on the guest's thin pool steps failed:\n{out}\n{doc}"
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn an_md_raid1_degraded_then_rebuilt_shows_each_state() {
    let d = [("device", "md1")];
    let state = |s: &[Series], action: &str| {
        value(
            s,
            "ssdwatch_md_sync_action",
            &[("device", "md1"), ("action", action)],
        )
    };
    let disks =
        |s: &[Series], st: &str| value(s, "ssdwatch_md_disks", &[("device", "md1"), ("state", st)]);
    let clean = scrape("md-clean");
    assert_eq!(value(&clean, "ssdwatch_md_disks_missing", &d), Some(0.0));
    assert_eq!(disks(&clean, "active"), Some(2.0));
    assert_eq!(state(&clean, "idle"), Some(1.0));
    assert_eq!(
        value(
            &clean,
            "ssdwatch_md_info",
            &[("device", "md1"), ("level", "raid1")]
        ),
        Some(1.0)
    );
    let degraded = scrape("md-degraded");
    assert_eq!(value(&degraded, "ssdwatch_md_disks_missing", &d), Some(1.0));
    assert_eq!(disks(&degraded, "active"), Some(1.0));
    let rec = scrape("md-recovering");
    assert_eq!(
        state(&rec, "recover"),
        Some(1.0),
        "the rebuild was caught running"
    );
    let progress = must(&rec, "ssdwatch_md_sync_progress_ratio", &d, "md-recovering");
    assert!((0.0..1.0).contains(&progress), "progress {progress}");
    assert_eq!(
        disks(&rec, "spare"),
        Some(1.0),
        "the member being rebuilt into"
    );
    let done = scrape("md-recovered");
    assert_eq!(value(&done, "ssdwatch_md_disks_missing", &d), Some(0.0));
    assert_eq!(disks(&done, "active"), Some(2.0));
    assert_eq!(state(&done, "idle"), Some(1.0));
    assert_eq!(value(&done, "ssdwatch_md_sync_progress_ratio", &d), None);
}

#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn zfs_pools_and_datasets_are_zpools_and_zfss_own_figures() {
    let s = scrape("zfs-full");
    let (pools, errors) = ssdwatch::layers::zfs::parse_pools(&read("zpool-list.txt"));
    assert!(errors.is_empty(), "{errors:?}");
    let (datasets, errors) = ssdwatch::layers::zfs::parse_datasets(&read("zfs-list.txt"));
    assert!(errors.is_empty(), "{errors:?}");
    let tank = pools
        .iter()
        .find(|p| p.name == "tank")
        .expect("tank in zpool list");
    let t = [("pool", "tank")];
    assert_eq!(
        value(&s, "ssdwatch_zfs_pool_size_bytes", &t),
        Some(tank.size_bytes as f64)
    );
    let cap = must(&s, "ssdwatch_zfs_pool_capacity_ratio", &t, "zfs-full");
    assert!(cap > 0.8, "tank filled past 80 %: {cap}");
    assert_eq!(Some(cap), tank.capacity_ratio);
    // The faulted mirror device: the pool is DEGRADED, only that state is 1.
    let health = |p: &str, st: &str| {
        value(
            &s,
            "ssdwatch_zfs_pool_health",
            &[("pool", p), ("state", st)],
        )
    };
    assert_eq!(health("safe", "DEGRADED"), Some(1.0));
    assert_eq!(health("safe", "ONLINE"), Some(0.0));
    assert_eq!(health("tank", "ONLINE"), Some(1.0));
    let ds = |name: &str| datasets.iter().find(|d| d.name == name).expect(name);
    let logs = [("dataset", "tank/logs"), ("pool", "tank")];
    assert_eq!(
        value(&s, "ssdwatch_zfs_dataset_quota_bytes", &logs),
        Some(48.0 * 1048576.0)
    );
    assert_eq!(ds("tank/logs").quota_bytes, Some(48 << 20));
    let pg = [("dataset", "tank/pg"), ("pool", "tank")];
    assert_eq!(
        value(&s, "ssdwatch_zfs_dataset_reservation_bytes", &pg),
        Some(32.0 * 1048576.0)
    );
    assert_eq!(
        value(&s, "ssdwatch_zfs_dataset_quota_bytes", &pg),
        None,
        "no quota: no series"
    );
    // Each mount is limited by its dataset; the logs dataset by its quota, below the pool's free.
    let logs_eff = must(
        &s,
        "ssdwatch_filesystem_effective_avail_bytes",
        &[("mountpoint", "/tank/logs")],
        "zfs-full",
    );
    assert_eq!(
        value(
            &s,
            "ssdwatch_filesystem_limiting_layer_info",
            &[
                ("mountpoint", "/tank/logs"),
                ("layer", "zfs_dataset"),
                ("name", "tank/logs")
            ]
        ),
        Some(1.0)
    );
    let pool_free = must(&s, "ssdwatch_zfs_pool_free_bytes", &t, "zfs-full");
    assert!(
        logs_eff < pool_free,
        "quota room {logs_eff} under the pool's free {pool_free}"
    );
    assert!(
        logs_eff < 40.0 * 1048576.0,
        "16 MiB written of a 48 MiB quota: {logs_eff}"
    );
}

/// Each md member's corrected read errors as the kernel shows them in `dev-*/errors` (0 here:
/// nothing in the guest fails a read), one series per member.
#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn md_members_corrected_read_errors_are_the_kernels_own_counts() {
    let s = scrape("md-recovered");
    let members = read("md-member-errors.txt");
    let mut n = 0;
    for line in members.lines() {
        let (member, count) = line.split_once(' ').expect("member and count");
        let count: f64 = count.trim().parse().expect("a count");
        assert_eq!(
            value(
                &s,
                "ssdwatch_md_member_corrected_read_errors_total",
                &[("device", "md1"), ("member", member)]
            ),
            Some(count),
            "{member}: {members}"
        );
        n += 1;
    }
    assert_eq!(n, 2, "both members: {members}");
}

/// 32 MiB of tank's only device overwritten behind ZFS's back, then a scrub: the device's
/// checksum errors and the pool's permanent data errors are exported as `zpool status -p`
/// printed them at that moment (the capture is read line by line here, not by the parser).
#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn zfs_checksum_errors_found_by_a_scrub_are_zpools_own_counts() {
    let before = scrape("zfs-full");
    let s = scrape("zfs-errors");
    let status = read("zpool-status-p-errors.txt");
    // The config rows of tank, and its errors: line.
    let tank = status
        .split("  pool: ")
        .find(|b| b.starts_with("tank\n"))
        .unwrap_or_else(|| panic!("no tank in {status}"));
    let rows: Vec<Vec<&str>> = tank
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("NAME"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let leaf = rows.last().expect("tank's device row");
    let (name, cksum): (&str, f64) = (leaf[0], leaf[4].parse().expect("CKSUM"));
    assert!(
        cksum > 0.0,
        "the scrub found the overwritten blocks: {tank}"
    );
    let t = [("pool", "tank"), ("vdev", name), ("type", "checksum")];
    assert_eq!(
        value(&s, "ssdwatch_zfs_vdev_errors_total", &t),
        Some(cksum),
        "{tank}"
    );
    assert_eq!(
        value(&before, "ssdwatch_zfs_vdev_errors_total", &t),
        Some(0.0)
    );
    let data_errors: f64 = tank
        .lines()
        .find_map(|l| l.strip_prefix("errors: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no data error count in {tank}"));
    assert!(data_errors > 0.0, "{tank}");
    assert_eq!(
        value(&s, "ssdwatch_zfs_pool_data_errors", &[("pool", "tank")]),
        Some(data_errors)
    );
    assert_eq!(
        value(
            &before,
            "ssdwatch_zfs_pool_data_errors",
            &[("pool", "tank")]
        ),
        Some(0.0)
    );
    // The faulted mirror device of the other pool: its state, not tank's.
    assert_eq!(
        value(
            &s,
            "ssdwatch_zfs_vdev_info",
            &[("pool", "tank"), ("vdev", name), ("leaf", "true")]
        ),
        Some(1.0)
    );
    // The vdev (a device-mapper device zpool names by its dm name) lies on the drive the guest
    // made the pool on, so its errors join that drive's SMART.
    let log = read("log.txt");
    let drive = log
        .split_whitespace()
        .find_map(|w| w.strip_prefix("zfs="))
        .unwrap_or_else(|| panic!("no zfs drive in the guest's log: {log}"));
    let placed: Vec<&Series> = s
        .iter()
        .filter(|x| x.name == "ssdwatch_zfs_vdev_drive_info" && x.labels["vdev"] == name)
        .collect();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].labels["pool"], "tank");
    assert_eq!(placed[0].labels["drive"], drive);
    assert!(placed[0].labels["device"].starts_with("dm-"), "{placed:?}");
}

/// `btrfs device stats` lines (`[/dev/X].write_io_errs 5`) as (device path, counter, count).
fn device_stats(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (key, n) = l.rsplit_once(char::is_whitespace).expect("a count");
            let (dev, counter) = key.trim().rsplit_once("].").expect("[device].counter");
            (
                dev.trim_start_matches('[').to_string(),
                counter.to_string(),
                n.trim().parse().expect("a number"),
            )
        })
        .collect()
}

/// A btrfs RAID1 with one device behind dm-flakey: its writes failed, then its reads (repaired
/// from the other copy). The daemon's counters are btrfs' own for each device, as `btrfs
/// device stats` and the kernel's `error_stats` gave them at that moment; before the faults
/// they were all 0.
#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn a_btrfs_device_failing_writes_then_reads_shows_btrfs_own_counts() {
    let uuid = read("btrfs-uuid.txt").trim().to_string();
    let clean = scrape("btrfs-clean");
    let s = scrape("btrfs-errors");
    let stats = device_stats(&read("btrfs-device-stats.txt"));
    assert_eq!(stats.len(), 10, "two devices, five counters: {stats:?}");
    let ty = |counter: &str| match counter {
        "write_io_errs" => "write",
        "read_io_errs" => "read",
        "flush_io_errs" => "flush",
        "corruption_errs" => "corruption",
        "generation_errs" => "generation",
        c => panic!("unknown counter {c}"),
    };
    for (dev, counter, n) in &stats {
        // /dev/mapper/flaky is named by its device-mapper name, vdg by its kernel name.
        let device = dev.rsplit('/').next().unwrap();
        let l = [
            ("uuid", uuid.as_str()),
            ("device", device),
            ("type", ty(counter)),
        ];
        assert_eq!(
            value(&s, "ssdwatch_btrfs_device_errors_total", &l),
            Some(*n),
            "{dev} {counter}"
        );
        assert_eq!(
            value(&clean, "ssdwatch_btrfs_device_errors_total", &l),
            Some(0.0),
            "{dev} {counter} before the faults"
        );
    }
    let of = |device: &str, t: &str| {
        value(
            &s,
            "ssdwatch_btrfs_device_errors_total",
            &[("uuid", uuid.as_str()), ("device", device), ("type", t)],
        )
        .unwrap_or_else(|| panic!("no {t} series of {device}"))
    };
    assert!(of("flaky", "write") > 0.0 && of("flaky", "read") > 0.0);
    assert_eq!(
        of("vdg", "write") + of("vdg", "read"),
        0.0,
        "the plain drive"
    );
    // The kernel's own view (sysfs, by devid) holds the same counts: devid 2 is the flaky one.
    let sysfs = read("btrfs-error-stats.txt");
    let flaky: Vec<f64> = sysfs
        .split("devid ")
        .find(|b| b.starts_with("2\n"))
        .unwrap_or_else(|| panic!("no devid 2 in {sysfs}"))
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    let want: Vec<f64> = ["write", "read", "flush", "corruption", "generation"]
        .iter()
        .map(|t| of("flaky", t))
        .collect();
    assert_eq!(flaky, want, "{sysfs}");
}

/// An md RAID1 whose member (an md "faulty" array) failed one read until rewritten: md read
/// the other side, rewrote the sector and counted a corrected read error on that member. The
/// daemon's count is the kernel's `dev-*/errors`, and only that member's grew.
#[test]
#[ignore = "boots a QEMU guest; run with --ignored vm::layers::"]
fn an_md_member_failing_a_read_shows_the_kernels_corrected_count() {
    let s = scrape("md2-errors");
    let members = read("md2-member-errors.txt");
    let mut counts = Vec::new();
    for line in members.lines() {
        let (member, count) = line.split_once(' ').expect("member and count");
        let count: f64 = count.trim().parse().expect("a count");
        assert_eq!(
            value(
                &s,
                "ssdwatch_md_member_corrected_read_errors_total",
                &[("device", "md2"), ("member", member)]
            ),
            Some(count),
            "{member}: {members}"
        );
        counts.push((member.to_string(), count));
    }
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(counts.len(), 2, "{members}");
    assert_eq!(counts[0].0, "md9", "{members}");
    assert!(
        counts[0].1 > 0.0,
        "the faulty member's read was corrected: {members}"
    );
    assert_eq!(counts[1].1, 0.0, "the other member: {members}");
    // The array stayed whole: the member was not evicted.
    assert_eq!(
        value(&s, "ssdwatch_md_disks_missing", &[("device", "md2")]),
        Some(0.0)
    );
}
