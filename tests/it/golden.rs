//! The golden scrape is the contract: `ssdwatch sample` against each fixture host tree must print
//! exactly the checked-in exposition in tests/golden/<host>.prom, and pass `promtool check metrics`.
//! After an intended change, regenerate with `UPDATE_GOLDEN=1 cargo test --test it golden::` and
//! review the diff against the fixture values (tests/fixtures/hosts/make_trees.py writes the
//! trees). Series that change from run to run are left out (`VOLATILE`), and sizes that depend
//! on the checkout's filesystem have their values masked (`ALLOCATED`); story tests below check
//! both against the tree and the clock.

use crate::support;

use crate::support::value;
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

const HOSTS: &[&str] = &[
    "nvme-partitions",
    "sata-luks-lvm",
    "md-raid1-nvme",
    "virtio",
    "discard-dropped",
    "layers-vm",
    "pg-mariadb",
];

/// What the fake smartctl answers for each drive of each host: a real capture (from
/// tests/fixtures/smart, see SOURCES.md there) of the same model where the corpus has one, and
/// smartctl's own answer for a virtio disk (no SMART on that device type).
const SMART: &[(&str, &str, &str)] = &[
    (
        "nvme-partitions",
        "nvme0n1",
        "ok nvme-samsung-pm9a3-mzql23t8hcls.json",
    ),
    (
        "sata-luks-lvm",
        "sda",
        "ok ata-samsung-pm883-mz7lh1t9hmlt.json",
    ),
    (
        "md-raid1-nvme",
        "nvme0n1",
        "ok nvme-intel-p4510-ssdpe2kx010t8-worn73.json",
    ),
    (
        "md-raid1-nvme",
        "nvme1n1",
        "ok nvme-micron-7300-mtfdhbe960tdf.json",
    ),
    (
        "virtio",
        "vda",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "virtio",
        "vdb",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "discard-dropped",
        "sda",
        "ok ata-kingston-a400-sa400m8120g.json",
    ),
    (
        "discard-dropped",
        "sdb",
        "ok ata-micron-5300-mtfddak1t9tds.json",
    ),
    (
        "layers-vm",
        "vda",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "layers-vm",
        "vdb",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "layers-vm",
        "vdc",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "layers-vm",
        "vdd",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "layers-vm",
        "vde",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    (
        "layers-vm",
        "vdf",
        "exit 1 err-unable-to-detect-device-type.json",
    ),
    // Captures with a self-test log and temperature limits (`-x` of a SATA SSD, `-a` of
    // smartctl 7.5 on an NVMe drive).
    ("pg-mariadb", "sda", "ok ata-samsung-860evo.json"),
    (
        "pg-mariadb",
        "nvme0n1",
        "ok nvme-teamgroup-mp33-tm8fp6256g-smartctl75.json",
    ),
];

/// Families whose series change from run to run (timings, clocks, version): the golden keeps
/// their `# HELP` and `# TYPE` lines (so it shows they are exported) and drops their series.
const VOLATILE: &[&str] = &[
    "ssdwatch_collector_duration_seconds",
    "ssdwatch_collector_last_success_timestamp_seconds",
    "ssdwatch_collector_sample_age_seconds",
    "ssdwatch_build_info",
    "ssdwatch_device_smart_sample_age_seconds",
    // When the sizing finished, and ages from the files' modification times (a checkout's
    // time): `database_ages_run_from_the_files_mtimes` checks them against the clock.
    "ssdwatch_database_size_completed_timestamp_seconds",
    "ssdwatch_postgres_archive_oldest_ready_age_seconds",
    "ssdwatch_mysql_binlog_oldest_age_seconds",
    // The process's own figures (memory, CPU, descriptors, start time): of the test run, not
    // of the fixture host.
    "process_cpu_seconds_total",
    "process_virtual_memory_bytes",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
];

/// Families whose values are the space the fixture tree's files take (`st_blocks`, as du):
/// they differ with the filesystem the repository is checked out on (a directory takes 4 KiB
/// on ext4 and nothing on tmpfs or btrfs, which also keeps small files inline). The golden
/// keeps their series, labels and all, with the value written `<allocated>`;
/// `database_sizes_are_what_the_checkout_allocates` checks the values against the tree.
const ALLOCATED: &[&str] = &[
    "ssdwatch_database_component_bytes",
    "ssdwatch_postgres_tablespace_bytes",
    "ssdwatch_postgres_replication_slot_retained_bytes",
];

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The probe target whose outcome the host's probe-outcomes.json records (written by
/// tests/fixtures/hosts/make_probe_outcomes.py).
fn probe_target(host_dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(host_dir.join("probe-outcomes.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v[0]["target"].as_str().unwrap().to_string()
}

/// A state directory for the fake smartctl with this host's answers.
fn fake_smartctl_state(host: &str) -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    let captures = manifest().join("tests/fixtures/smart");
    for (_, dev, answer) in SMART.iter().filter(|(h, _, _)| *h == host) {
        let (mode, file) = answer.rsplit_once(' ').unwrap();
        let line = format!("{mode} {}\n", captures.join(file).display());
        std::fs::write(state.path().join(format!("{dev}.mode")), line).unwrap();
    }
    // A drive the table forgot would get this (and fail the golden comparison loudly).
    std::fs::write(state.path().join("mode"), "garbage\n").unwrap();
    state
}

fn sample(host: &str) -> String {
    let dir = manifest().join("tests/fixtures/hosts").join(host);
    let cfg = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    let smart = fake_smartctl_state(host);
    // What an earlier run of the daemon left (tests/fixtures/hosts/<host>/state), so the restored
    // discard history shows too.
    let state = tempfile::tempdir().unwrap();
    if let Ok(saved) = std::fs::read(dir.join("state/discards.json")) {
        std::fs::write(state.path().join("discards.json"), saved).unwrap();
    }
    let fake = manifest().join("tests/fake-smartctl/smartctl");
    // dmsetup, zpool and zfs answer from the host's captures (tests/fixtures/hosts/<host>/layers).
    let layers_fake = manifest().join("tests/fake-layers");
    std::fs::write(
        cfg.path(),
        format!(
            "state_dir: {}\ncollectors:\n  smart:\n    smartctl_path: {}\n  probe:\n    jitter_ratio: 0\n    targets: [{{path: {:?}}}]\n  filesystem:\n    statfs_timeout: 300ms\n  layers:\n    dmsetup_path: {}\n    zpool_path: {}\n    zfs_path: {}\n",
            state.path().display(),
            fake.display(),
            probe_target(&dir),
            layers_fake.join("dmsetup").display(),
            layers_fake.join("zpool").display(),
            layers_fake.join("zfs").display(),
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
        .env("FAKE_STATE", smart.path())
        .env("FAKE_LAYERS", dir.join("layers"))
        .arg("--config")
        .arg(cfg.path())
        .args(support::fixture_host_flags(&dir))
        .arg("--fixture.probe-outcomes")
        .arg(dir.join("probe-outcomes.json"))
        .arg("--log.level=error")
        .arg("sample")
        .output()
        .expect("run ssdwatch sample");
    assert!(
        out.status.success(),
        "{host}: sample failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

/// Whether `line` is a series of one of `families`.
fn of_family(line: &str, families: &[&str]) -> bool {
    !line.starts_with('#')
        && families.iter().any(|f| {
            line.strip_prefix(f)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
        })
}

fn stable(text: &str) -> String {
    text.lines()
        .filter(|l| !of_family(l, VOLATILE))
        .map(|l| match l.rsplit_once(' ') {
            // The value is after the last space (label values may hold spaces; no series
            // carries a timestamp).
            Some((series, _)) if of_family(l, ALLOCATED) => format!("{series} <allocated>\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

fn promtool_check(host: &str, text: &str) {
    if !support::require_cmd(
        &format!("promtool check for {host}"),
        "promtool",
        "prometheus",
    ) {
        return;
    }
    support::assert_promtool_clean(host, text);
}

fn families_unique(host: &str, text: &str) {
    let mut seen = HashSet::new();
    for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = l.split_whitespace().nth(2).unwrap();
        assert!(
            seen.insert(name.to_string()),
            "{host}: family {name} appears twice"
        );
    }
}

fn check(host: &str) -> Option<String> {
    let text = sample(host);
    promtool_check(host, &text);
    families_unique(host, &text);
    let got = stable(&text);
    let path = manifest().join("tests/golden").join(format!("{host}.prom"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
        return None;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got == want {
        return None;
    }
    let diff: Vec<String> = diff_lines(&want, &got);
    Some(format!(
        "{host}: exposition differs from {} (UPDATE_GOLDEN=1 to accept):\n{}",
        path.display(),
        diff.join("\n")
    ))
}

fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let w: HashSet<&str> = want.lines().collect();
    let g: HashSet<&str> = got.lines().collect();
    let mut out: Vec<String> = want
        .lines()
        .filter(|l| !g.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        got.lines()
            .filter(|l| !w.contains(l))
            .map(|l| format!("+ {l}")),
    );
    out
}

#[test]
fn every_fixture_host_matches_its_golden_exposition() {
    let failures: Vec<String> = HOSTS.iter().filter_map(|h| check(h)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn luks_on_lvm_filesystem_maps_to_the_sata_drive_and_is_trim_capable() {
    let t = sample("sata-luks-lvm");
    let l = "{mountpoint=\"/var/lib/mysql\",device=\"dm-2\",fstype=\"ext4\"";
    assert_eq!(
        value(&t, &format!("ssdwatch_filesystem_trim_capable{l}}}")),
        Some(1.0)
    );
    assert_eq!(
        value(
            &t,
            &format!("ssdwatch_filesystem_discard_mount_option{l}}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &t,
            &format!("ssdwatch_filesystem_drive_info{l},drive=\"sda\"}}")
        ),
        Some(1.0)
    );
    // bavail 17880000 blocks of 4096 bytes
    assert_eq!(
        value(&t, &format!("ssdwatch_filesystem_avail_bytes{l}}}")),
        Some(73_236_480_000.0)
    );
}

#[test]
fn a_dm_crypt_layer_without_allow_discards_makes_trim_incapable() {
    let t = sample("discard-dropped");
    let l = "{mountpoint=\"/srv/db\",device=\"dm-0\",fstype=\"ext4\"}";
    assert_eq!(
        value(&t, &format!("ssdwatch_filesystem_trim_capable{l}")),
        Some(0.0)
    );
    assert_eq!(
        value(&t, "ssdwatch_disk_discard_max_bytes{device=\"dm-0\"}"),
        Some(0.0)
    );
    // The hung FUSE mount is stuck and has no size; the others are unaffected.
    let s = "{mountpoint=\"/mnt/stuck\",device=\"backup@nas:/export\",fstype=\"fuse.sshfs\"}";
    assert_eq!(
        value(&t, &format!("ssdwatch_filesystem_stuck{s}")),
        Some(1.0)
    );
    assert_eq!(
        value(&t, &format!("ssdwatch_filesystem_size_bytes{s}")),
        None
    );
    assert!(
        value(
            &t,
            "ssdwatch_filesystem_size_bytes{mountpoint=\"/\",device=\"sda\",fstype=\"ext4\"}"
        )
        .is_some()
    );
}

#[test]
fn md_raid1_lives_on_both_nvme_drives() {
    let t = sample("md-raid1-nvme");
    for d in ["nvme0n1", "nvme1n1"] {
        let s = format!(
            "ssdwatch_filesystem_drive_info{{mountpoint=\"/\",device=\"md0\",fstype=\"ext4\",drive=\"{d}\"}}"
        );
        assert_eq!(value(&t, &s), Some(1.0), "{s}");
    }
    assert!(t.contains("ssdwatch_disk_info{device=\"nvme1n1\",kind=\"nvme\",model=\"INTEL SSDPE2KX016T8\",serial=\"PHLN0123004K3P2BGN\""));
}

#[test]
fn discard_counters_are_sectors_times_512_and_absent_on_old_kernels() {
    let t = sample("nvme-partitions");
    // stat field 14 (discarded sectors) = 93810688
    assert_eq!(
        value(
            &t,
            "ssdwatch_disk_discarded_bytes_total{device=\"nvme0n1\"}"
        ),
        Some(93_810_688.0 * 512.0)
    );
    let v = sample("virtio");
    assert!(
        !v.contains("ssdwatch_disk_discarded_bytes_total"),
        "11-field stat has no discards"
    );
    assert_eq!(
        value(
            &v,
            "ssdwatch_filesystem_readonly{mountpoint=\"/srv\",device=\"vdb\",fstype=\"ext4\"}"
        ),
        Some(1.0)
    );
    assert!(
        !v.contains("mountpoint=\"/www\""),
        "bind mount of / reported twice"
    );
}

/// Every host has a bind mount of a subtree (with a space in its mount point): the filesystem is
/// reported once, under the mount of its root, never again under the bind mount.
#[test]
fn bind_mounts_of_subtrees_are_not_reported_twice() {
    for (host, bind) in [
        ("nvme-partitions", "/var/backups"),
        ("sata-luks-lvm", "/srv/mysql binlog"),
        ("md-raid1-nvme", "/var/lib/containers/pg data"),
        ("virtio", "/srv/static files"),
        ("discard-dropped", "/srv/db dumps"),
    ] {
        let t = sample(host);
        assert!(
            !t.contains(&format!("mountpoint=\"{bind}\"")),
            "{host}: bind mount {bind} reported"
        );
        assert!(!t.contains("\\040"), "{host}: mount point left escaped");
        assert!(
            t.contains("ssdwatch_filesystem_size_bytes{mountpoint=\"/\""),
            "{host}"
        );
    }
}

#[test]
fn mount_point_with_a_space_is_unescaped_and_bind_mount_reported_once() {
    let t = sample("nvme-partitions");
    assert!(t.contains("ssdwatch_filesystem_size_bytes{mountpoint=\"/srv/pg data\",device=\"nvme0n1p3\",fstype=\"xfs\"}"));
    assert!(!t.contains("mountpoint=\"/var/backups\""));
}

/// Allocated bytes (`st_blocks` x 512, as du) of `path` and everything under it; links are
/// not followed.
fn allocated_tree(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).unwrap();
    let mut total = m.blocks() * 512;
    if m.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            total += allocated_tree(&e.unwrap().path());
        }
    }
    total
}

/// The database host's sizes, masked in its golden, are what its files take on this checkout:
/// pg_wal with its archive_status, the slot's retained segment, the tablespace's tree, the
/// binary logs the index names.
#[test]
fn database_sizes_are_what_the_checkout_allocates() {
    let t = sample("pg-mariadb");
    let root = manifest().join("tests/fixtures/hosts/pg-mariadb/rootfs");
    let pg = root.join("var/lib/postgresql/15/main");
    let wal = pg.join("pg_wal");
    // Every entry of pg_wal and of archive_status (the directories themselves aside).
    let entries = |d: &std::path::Path| -> u64 {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                if p.is_dir() {
                    use std::os::unix::fs::MetadataExt;
                    std::fs::symlink_metadata(&p).unwrap().blocks() * 512
                } else {
                    allocated_tree(&p)
                }
            })
            .sum()
    };
    let pg_db = "database=\"/var/lib/postgresql/15/main\"";
    assert_eq!(
        value(
            &t,
            &format!(
                "ssdwatch_database_component_bytes{{{pg_db},component=\"wal\",mountpoint=\"/var/lib/postgresql\"}}"
            )
        ),
        Some((entries(&wal) + entries(&wal.join("archive_status"))) as f64)
    );
    // restart_lsn 0/1500718 is in segment 1; the redo location 0/2000028 in segment 2.
    assert_eq!(
        value(
            &t,
            &format!(
                "ssdwatch_postgres_replication_slot_retained_bytes{{{pg_db},slot=\"standby1\",type=\"physical\"}}"
            )
        ),
        Some(allocated_tree(&wal.join("000000010000000000000001")) as f64)
    );
    assert_eq!(
        value(
            &t,
            &format!(
                "ssdwatch_postgres_tablespace_bytes{{{pg_db},tablespace=\"16390\",location=\"/srv/pgspace/ts1\",mountpoint=\"/srv/pgspace\"}}"
            )
        ),
        Some(allocated_tree(&root.join("srv/pgspace/ts1")) as f64)
    );
    let binlogs: u64 = (1..=3)
        .map(|n| allocated_tree(&root.join(format!("var/lib/mysql/mysql-bin.00000{n}"))))
        .sum();
    assert_eq!(
        value(
            &t,
            "ssdwatch_database_component_bytes{database=\"/var/lib/mysql\",component=\"binlog\",mountpoint=\"/\"}"
        ),
        Some(binlogs as f64)
    );
}

/// The database host's clock-bound figures, left out of its golden: the sizing finished during
/// the sample, and the ages run from the files' modification times (the checkout's).
#[test]
fn database_ages_run_from_the_files_mtimes() {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let mtime = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let before = now();
    let t = sample("pg-mariadb");
    let after = now();
    let root = manifest().join("tests/fixtures/hosts/pg-mariadb/rootfs");
    for db in ["/var/lib/postgresql/15/main", "/var/lib/mysql"] {
        let done = value(
            &t,
            &format!("ssdwatch_database_size_completed_timestamp_seconds{{database=\"{db}\"}}"),
        )
        .unwrap();
        assert!(before <= done && done <= after, "{db}: {done}");
    }
    let ready =
        mtime(&root.join(
            "var/lib/postgresql/15/main/pg_wal/archive_status/000000010000000000000001.ready",
        ));
    let age = value(
        &t,
        "ssdwatch_postgres_archive_oldest_ready_age_seconds{database=\"/var/lib/postgresql/15/main\"}",
    )
    .unwrap();
    assert!(before - ready <= age && age <= after - ready, "{age}");
    let oldest = (1..=3)
        .map(|n| mtime(&root.join(format!("var/lib/mysql/mysql-bin.00000{n}"))))
        .fold(f64::INFINITY, f64::min);
    let age = value(
        &t,
        "ssdwatch_mysql_binlog_oldest_age_seconds{database=\"/var/lib/mysql\"}",
    )
    .unwrap();
    assert!(before - oldest <= age && age <= after - oldest, "{age}");
}
