//! Mutation fuzzing, on stable Rust, of every parser that reads what comes from outside: smartctl's
//! JSON, the mount table, /sys block `stat` files, the config file, PostgreSQL's slot state
//! files and pg_control, MySQL option files and process command lines, and the layers below the
//! filesystems (`dmsetup table`/`status`, `zpool list`, `zfs list`, and the btrfs and md trees
//! of /sys). Each is fed mutations of the real inputs under tests/fixtures (and config/) for a
//! wall time, panics are caught and the input that caused one is saved; a parser must never
//! panic, whatever the bytes. A /sys tree is fuzzed as text, one `path<TAB>content` line per
//! file, written out as a tree for each case, so mutations reach file names and directory
//! layout as well as the values.
//!
//! The test suite runs a few seconds per parser (`FUZZ_SECONDS`, default 1);
//! `benches/fuzz.sh [SECONDS_PER_PARSER]` runs the long version and prints the figures.
//! `FUZZ_SEED` replays a run; `FUZZ_CRASH_DIR` is where crashing inputs go.
//! (`smart::fuzz` complements it for smartctl with structure-aware JSON from proptest.)

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Inputs grow by insertions and duplications; past this they are cut (the real inputs are a
/// few KiB; the config loader refuses more than 1 MiB anyway).
const MAX_INPUT: usize = 64 << 10;

/// Inputs that still parsed are kept to mutate further (they reach past the first error).
const POOL: usize = 256;

/// xorshift64*: reproducible from its seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One parser under fuzzing: its real inputs, the tokens worth inserting, and the call, which
/// says whether the input was accepted.
struct Target {
    name: &'static str,
    seeds: Vec<Vec<u8>>,
    dict: &'static [&'static [u8]],
    call: fn(&[u8]) -> bool,
}

/// What `zpool status` prints, text and JSON.
const ZPOOL_STATUS_TOKENS: &[&[u8]] = &[
    b"  pool: ",
    b"\tNAME        STATE     READ WRITE CKSUM\n",
    b"\t  ",
    b"errors: ",
    b" data errors, use '-v' for a list",
    b"No known data errors",
    b"ONLINE",
    b"HEALTHY",
    b"FAULTED",
    b"\"vdevs\": {",
    b"\"checksum_errors\": ",
    b"\"error_count\": ",
    b"1.2K",
    b"18446744073709551616",
];

/// Values at the edges of every integer type and of the parsers' own formats.
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"255",
    b"256",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"1e308",
    b"1e309",
    b"-0",
    b"0.5",
    b"NaN",
    b"inf",
];

const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\"",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"[]",
    b"{}",
    b"\"raw\":",
    b"\"value\":",
    b"\"table\":[",
    b"\"nvme_smart_health_information_log\":",
    b"\"ata_smart_attributes\":",
    b"\"exit_status\":",
    b"\"percentage_used\":",
];

const MOUNTINFO_TOKENS: &[&[u8]] = &[
    b" ",
    b"\n",
    b" - ",
    b"-",
    b"\\040",
    b"\\011",
    b"\\134",
    b"\\",
    b"\\0",
    b"\\777",
    b"0:0",
    b"259:1",
    b":",
    b"shared:1 ",
    b"master:2 ",
    b"rw,",
    b"ro",
    b"ext4",
    b"/",
    b"\xff",
];

const STAT_TOKENS: &[&[u8]] = &[b" ", b"  ", b"\n", b"\t", b"-", b"+", b"x", b"\0"];

const YAML_TOKENS: &[&[u8]] = &[
    b"\n",
    b"  ",
    b": ",
    b"- ",
    b"[",
    b"]",
    b"{",
    b"}",
    b"&a ",
    b"*a",
    b"<<: *a",
    b"!!binary ",
    b"~",
    b"'",
    b"\"",
    b"#",
    b"---\n",
    b"...",
    b"1s",
    b"0s",
    b"10000000days",
    b"1ms",
    b"targets:\n      - path: /data\n",
    b"interval: ",
    b"enabled: ",
    b"ratio: ",
];

/// Bytes of binary formats: the slot magic, versions, lengths at their edges.
const BINARY_TOKENS: &[&[u8]] = &[
    &[0xA1, 0x1C, 0x05, 0x01],
    &[0x02, 0, 0, 0],
    &[0xB8, 0, 0, 0],
    &[0xFF, 0xFF, 0xFF, 0xFF],
    &[0, 0, 0, 0],
    &[0x14, 0x05, 0, 0],
];

const MYCNF_TOKENS: &[&[u8]] = &[
    b"[mysqld]\n",
    b"[server]\n",
    b"[mariadb-10.11]\n",
    b"[client]\n",
    b"datadir = ",
    b"log_bin = ",
    b"log-bin\n",
    b"skip-log-bin\n",
    b"!include ",
    b"!includedir ",
    b"\"",
    b"'",
    b" # ",
    b"=",
    b"[",
    b"]",
];

const CMDLINE_TOKENS: &[&[u8]] = &[
    b"\0",
    b"-D",
    b"-c",
    b"data_directory=",
    b"--data-directory=",
    b"--datadir=",
    b"--datadir",
    b"-h",
    b"--defaults-file=",
    b"--no-defaults",
    b"--log-bin=",
    b"postgres:",
];

const DMSETUP_TOKENS: &[&[u8]] = &[
    b": ",
    b" ",
    b"\n",
    b"thin-pool ",
    b"thin ",
    b"linear ",
    b"253:2",
    b"/",
    b"-",
    b"Fail",
    b"rw ",
    b"ro ",
    b"out_of_data_space ",
    b"error_if_no_space",
    b"queue_if_no_space",
    b"needs_check",
    b"skip_block_zeroing",
    b"No devices found",
    b"\n---- status ----\n",
];

const ZFS_TOKENS: &[&[u8]] = &[
    b"\t",
    b"\n",
    b"-",
    b"none",
    b"legacy",
    b"%",
    b"/",
    b"ONLINE",
    b"DEGRADED",
    b"SUSPENDED",
    b"tank/",
];

const SYS_TREE_TOKENS: &[&[u8]] = &[
    b"\t",
    b"\n",
    b"/",
    b"..",
    b"allocation/",
    b"data/",
    b"metadata/",
    b"system/",
    b"total_bytes",
    b"bytes_used",
    b"disk_total",
    b"disk_used",
    b"chunk_size",
    b"global_rsv_size",
    b"devices/",
    b"dup/",
    b"raid1/",
    b"block/md0/md/",
    b"dev-sda1/state\t",
    b"faulty",
    b"in_sync",
    b"spare",
    b",",
    b"sync_completed\t",
    b" / ",
    b"level\t",
    b"degraded\t",
];

/// Where `dmsetup table` ends and `dmsetup status` begins in a dmsetup seed.
const DMSETUP_SPLIT: &str = "\n---- status ----\n";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir` (recursively, symlinks not followed) whose name satisfies `keep`.
fn files(dir: &Path, keep: &dyn Fn(&str) -> bool, out: &mut Vec<Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            files(&e.path(), keep, out);
        } else if ft.is_file() && keep(&e.file_name().to_string_lossy()) {
            out.push(std::fs::read(e.path()).expect("reading a fixture"));
        }
    }
}

fn corpus(dir: &str, keep: &dyn Fn(&str) -> bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    files(&repo().join(dir), keep, &mut out);
    assert!(!out.is_empty(), "no fuzz seeds under {dir}");
    out
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// A /sys tree under `dir` as text: one `path<TAB>content` line per file (content with its
/// newlines as `\n`), paths relative to `root`, which they start with.
fn tree_text(root: &Path, dir: &Path, depth: usize, out: &mut String) {
    // Links can loop (a device's `subsystem`): a reader never goes this deep.
    if depth > 8 {
        return;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        // Through symlinks: sys/block/md0 is a link into devices/ on a fixture host.
        let p = e.path();
        if p.is_dir() {
            tree_text(root, &p, depth + 1, out);
        } else if let Ok(content) = std::fs::read_to_string(&p) {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push_str(&format!(
                "{rel}\t{}\n",
                content.trim_end().replace('\n', "\\n")
            ));
        }
    }
}

/// Writes a tree's text (see [`tree_text`]) under `root`, made empty first. Lines that would
/// leave the root or make more than a few hundred files are skipped: the harness's own limits,
/// not the reader's.
fn write_tree(root: &Path, text: &str) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).unwrap();
    for line in text.lines().take(400) {
        let (path, content) = line.split_once('\t').unwrap_or((line, ""));
        let rel = Path::new(path);
        let ok = !path.is_empty()
            && rel.components().count() <= 12
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !ok {
            continue;
        }
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            // A file where a directory is wanted (or the reverse): that line is skipped.
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        let _ = std::fs::write(&p, content.replace("\\n", "\n"));
    }
}

/// Each thread's scratch directory for trees (the fuzzer runs one target at a time per thread):
/// in memory where the machine has /dev/shm, since a tree is written out for every case (on a
/// busy disk that costs 100 ms a case, in memory under 3 ms).
fn scratch() -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = match Path::new("/dev/shm").is_dir() {
            true => tempfile::tempdir_in("/dev/shm"),
            false => tempfile::tempdir(),
        }
        .unwrap();
    }
    DIR.with(|d| d.path().join("sys"))
}

/// The seeds of a tree target: each fixture tree as text.
fn tree_seeds(trees: &[PathBuf]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for root in trees {
        let mut t = String::new();
        tree_text(root, root, 0, &mut t);
        assert!(!t.is_empty(), "no files under {}", root.display());
        out.push(t.into_bytes());
    }
    out
}

/// Every layer read goes on through what the collector does with it: the mounts placed on
/// their layers, the effective free space, and the series.
fn through_layers(layers: &ssdwatch::layers::Layers) {
    use ssdwatch::layers::{MountView, effective};
    use ssdwatch::sysfs::topology::BlockDevice;
    let mut set = ssdwatch::metrics::MetricSet::new();
    ssdwatch::collector::layers::layer_metrics(&mut set, layers);
    let devs: Vec<BlockDevice> = layers
        .thin_pools
        .iter()
        .flat_map(|p| &p.volumes)
        .map(|v| BlockDevice {
            name: "dm-9".into(),
            dm_name: Some(v.name.clone()),
            ..Default::default()
        })
        .chain(
            layers
                .btrfs
                .iter()
                .flat_map(|b| &b.fs.devices)
                .map(|d| BlockDevice {
                    name: d.clone(),
                    ..Default::default()
                }),
        )
        .collect();
    for d in &devs {
        let stack = [ssdwatch::layers::StackDevice::from(d)];
        for fstype in ["ext4", "btrfs"] {
            let l = layers.limits(&MountView {
                fstype,
                source: "/dev/x",
                stack: &stack,
            });
            let e = effective(u64::MAX, &l);
            let _ = e.fill_ratio();
            for x in &l {
                let _ = x.fill_ratio();
            }
        }
    }
    for ds in &layers.zfs_datasets {
        let l = layers.limits(&MountView {
            fstype: "zfs",
            source: &ds.name,
            stack: &[],
        });
        let _ = effective(0, &l).fill_ratio();
    }
    for b in &layers.btrfs {
        let _ = (b.unallocated_bytes(), b.metadata_can_grow(), b.limit());
    }
}

fn pool_name(dev: &str) -> Option<String> {
    // The real capture's pool (tests/fixtures/layers/SOURCES.md), and any other number as a
    // name of its own, so volumes of mutated pools still join.
    match dev {
        "253:2" => Some("vg-pool-tpool".into()),
        d if d.contains(':') => Some(format!("pool-{d}")),
        _ => None,
    }
}

fn targets() -> Vec<Target> {
    let mut configs = vec![std::fs::read(repo().join("config/ssdwatch.example.yaml")).unwrap()];
    // The example lists no probe target or SMART device (they are the host's); one that does,
    // so mutations reach their validation too.
    configs.push(
        b"state_dir: /var/lib/ssdwatch\ncollectors:\n  smart:\n    devices:\n      - path: /dev/sda\n        type: sat\n  probe:\n    interval: 5m\n    targets:\n      - path: /srv/pg\n        kinds: [sync_write_4k, rand_read_4k]\n        write_ops: 64\n        file_size_bytes: 33554432\n        free_floor_ratio: 0.05\n        timeout: 2m\n"
            .to_vec(),
    );
    let layers = repo().join("tests/fixtures/layers");
    let mut dmsetup = vec![
        format!(
            "{}{DMSETUP_SPLIT}{}",
            std::fs::read_to_string(layers.join("dmsetup-table.txt")).unwrap(),
            std::fs::read_to_string(layers.join("dmsetup-status.txt")).unwrap()
        )
        .into_bytes(),
    ];
    let hosts = repo().join("tests/fixtures/hosts");
    for h in std::fs::read_dir(&hosts).unwrap().filter_map(|e| e.ok()) {
        let l = h.path().join("layers");
        if let (Ok(t), Ok(st)) = (
            std::fs::read_to_string(l.join("dmsetup-table.txt")),
            std::fs::read_to_string(l.join("dmsetup-status.txt")),
        ) {
            dmsetup.push(format!("{t}{DMSETUP_SPLIT}{st}").into_bytes());
        }
    }
    let md_trees: Vec<PathBuf> = std::fs::read_dir(&hosts)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("sys"))
        .filter(|sys| {
            std::fs::read_dir(sys.join("block"))
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("md"))
        })
        .collect();
    // The md readers see `block/md*/md/`; only those parts of a host's tree are fuzzed.
    let md_seeds: Vec<Vec<u8>> = tree_seeds(&md_trees)
        .into_iter()
        .map(|t| {
            lossy(&t)
                .lines()
                .filter(|l| l.starts_with("block/md"))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    assert!(
        md_seeds.iter().all(|s| !s.is_empty()),
        "md fixture trees without block/md*"
    );
    vec![
        Target {
            name: "dmsetup_thin",
            seeds: dmsetup,
            dict: DMSETUP_TOKENS,
            call: |b| {
                let text = lossy(b);
                let (table, status) = text.split_once(DMSETUP_SPLIT).unwrap_or((&text, ""));
                // Every line through every parser, whatever its target says.
                let (lines, _) = ssdwatch::layers::thin::parse_lines(&text);
                for l in &lines {
                    let _ = ssdwatch::layers::thin::parse_pool_table(l.args);
                    let _ = ssdwatch::layers::thin::parse_pool_status(l.args);
                    let _ = ssdwatch::layers::thin::parse_thin_status(l.args);
                }
                let (pools, _) = ssdwatch::layers::thin::pools(table, status, pool_name);
                for p in &pools {
                    let _ = (
                        p.data_size_bytes(),
                        p.data_used_bytes(),
                        p.free_bytes(),
                        p.metadata_size_bytes(),
                        p.metadata_used_bytes(),
                    );
                }
                let accepted = !pools.is_empty();
                through_layers(&ssdwatch::layers::Layers {
                    thin_pools: pools,
                    ..Default::default()
                });
                accepted
            },
        },
        Target {
            name: "zpool_zfs_list",
            seeds: corpus("tests/fixtures/layers", &|n| {
                n == "zpool-list.txt" || n == "zfs-list.txt"
            }),
            dict: ZFS_TOKENS,
            call: |b| {
                // Each input as both outputs: a mutation can carry a line across.
                let text = lossy(b);
                let (zfs_pools, _) = ssdwatch::layers::zfs::parse_pools(&text);
                let (datasets, _) = ssdwatch::layers::zfs::parse_datasets(&text);
                let accepted = !zfs_pools.is_empty() || !datasets.is_empty();
                through_layers(&ssdwatch::layers::Layers {
                    zfs_pools,
                    zfs_datasets: datasets,
                    ..Default::default()
                });
                accepted
            },
        },
        Target {
            name: "zpool_status",
            seeds: corpus("tests/fixtures/layers", &|n| n.starts_with("zpool-status")),
            dict: ZPOOL_STATUS_TOKENS,
            call: |b| {
                // Each input as both forms: the JSON parser on text and the text parser on JSON
                // are hostile inputs too.
                let text = lossy(b);
                let (mut zfs_status, _) = ssdwatch::layers::zpool_status::parse_text(&text);
                if let Ok((pools, _)) = ssdwatch::layers::zpool_status::parse_json(&text) {
                    zfs_status.extend(pools);
                }
                let accepted = !zfs_status.is_empty();
                through_layers(&ssdwatch::layers::Layers {
                    zfs_status,
                    ..Default::default()
                });
                accepted
            },
        },
        Target {
            name: "sys_btrfs_tree",
            seeds: tree_seeds(&[repo().join("tests/fixtures/layers/btrfs-sysfs")]),
            dict: SYS_TREE_TOKENS,
            call: |b| {
                let sys = scratch();
                write_tree(&sys, &lossy(b));
                let (all, _) = ssdwatch::btrfs::sysfs::read_all(&sys);
                let accepted = !all.is_empty();
                let btrfs = all
                    .into_iter()
                    .map(|fs| ssdwatch::layers::BtrfsSpace {
                        devices: fs
                            .devices
                            .iter()
                            .enumerate()
                            .map(|(i, d)| ssdwatch::layers::BtrfsDevice {
                                name: d.clone(),
                                size_bytes: Some(512 << 20),
                                // As the ioctl answers, and as the fallback (sizes only).
                                unallocated_bytes: (i % 2 == 0).then_some(300 << 20),
                                devid: Some(i as u64 + 1),
                            })
                            .collect(),
                        fs,
                    })
                    .collect();
                through_layers(&ssdwatch::layers::Layers {
                    btrfs,
                    ..Default::default()
                });
                accepted
            },
        },
        Target {
            name: "sys_md_tree",
            seeds: md_seeds,
            dict: SYS_TREE_TOKENS,
            call: |b| {
                let sys = scratch();
                write_tree(&sys, &lossy(b));
                let md = ssdwatch::sysfs::md::read_all(&sys);
                for a in &md {
                    let _ = ssdwatch::sysfs::md::read_array(&sys, &a.name);
                }
                let accepted = !md.is_empty();
                through_layers(&ssdwatch::layers::Layers {
                    md,
                    ..Default::default()
                });
                accepted
            },
        },
        Target {
            name: "smartctl_json",
            seeds: corpus("tests/fixtures/smart", &|n| {
                n.ends_with(".json") && n != "expected.json"
            }),
            dict: JSON_TOKENS,
            call: |b| match ssdwatch::smart::parse(&lossy(b)) {
                Ok(h) => {
                    let _ = ssdwatch::smart::inspect_json(&h);
                    true
                }
                Err(_) => false,
            },
        },
        Target {
            name: "mountinfo",
            seeds: corpus("tests/fixtures/hosts", &|n| n == "mountinfo"),
            dict: MOUNTINFO_TOKENS,
            call: |b| {
                let (mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo_bytes(b);
                let (text_mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo(&lossy(b));
                for m in mounts.iter().chain(&text_mounts) {
                    let _ = ssdwatch::procfs::mountinfo::label_form(
                        m.mount_path.as_os_str().as_encoded_bytes(),
                    );
                }
                !mounts.is_empty()
            },
        },
        Target {
            name: "sys_block_stat",
            seeds: corpus("tests/fixtures/hosts", &|n| n == "stat"),
            dict: STAT_TOKENS,
            call: |b| ssdwatch::sysfs::blockstat::parse_block_stat(&lossy(b)).is_ok(),
        },
        Target {
            name: "pg_slot_state",
            seeds: corpus("tests/fixtures/databases", &|n| n.ends_with(".state")),
            dict: BINARY_TOKENS,
            call: |b| ssdwatch::databases::postgres::decode_slot_state(b).is_ok(),
        },
        Target {
            name: "pg_control",
            seeds: corpus("tests/fixtures/databases", &|n| n == "pg_control"),
            dict: BINARY_TOKENS,
            call: |b| ssdwatch::databases::postgres::decode_control(b).is_ok(),
        },
        Target {
            name: "mysql_option_file",
            seeds: corpus("tests/fixtures/databases", &|n| n.ends_with(".cnf")),
            dict: MYCNF_TOKENS,
            call: |b| {
                let mut o = ssdwatch::databases::mycnf::Options::default();
                let _ = ssdwatch::databases::mycnf::parse(&lossy(b), &mut o);
                let _ = ssdwatch::databases::mycnf::binlog_expiry(
                    o.binlog_expire_logs_seconds.as_deref(),
                    o.expire_logs_days.as_deref(),
                );
                o.datadir.is_some() || o.log_bin.is_some()
            },
        },
        Target {
            name: "postmaster_pid",
            seeds: vec![
                b"812\n/var/lib/postgresql/15/main\n1764201600\n5432\n/var/run/postgresql\nlocalhost\n  5432001    196608\nready   \n".to_vec(),
                b"4444\n/srv/pg\n".to_vec(),
            ],
            dict: CMDLINE_TOKENS,
            call: |b| ssdwatch::databases::parse_pid_file(&lossy(b)).is_ok(),
        },
        Target {
            name: "pg_wal_names",
            // A listing of pg_wal and of archive_status, a name a line: segments, a partial
            // one, a timeline history, a backup label, markers.
            seeds: vec![
                b"000000010000000000000001\n000000010000000000000002\n0000000100000000000000FF\n000000010000000100000000\n000000020000000100000000.partial\n00000002.history\n000000010000000000000001.00000028.backup\narchive_status\n".to_vec(),
                b"000000010000000000000001.ready\n000000010000000000000002.done\n00000002.history.ready\n".to_vec(),
            ],
            dict: CMDLINE_TOKENS,
            call: |b| {
                let text = lossy(b);
                let mut numbers = Vec::new();
                for name in text.lines() {
                    let name = ssdwatch::databases::postgres::ready_marker(name).unwrap_or(name);
                    if let Some(s) = ssdwatch::databases::postgres::parse_segment_name(name) {
                        // 1 MiB to 1 GiB are the sizes initdb allows; 1 and 0 are not.
                        for size in [0, 1, 1 << 20, 16 << 20, 1 << 30] {
                            numbers.push(s.number(size));
                        }
                    }
                }
                for w in numbers.windows(2) {
                    let _ = ssdwatch::databases::postgres::retained_range(w[0], w[1], 16 << 20);
                }
                !numbers.is_empty()
            },
        },
        Target {
            name: "mysql_binlog_index",
            seeds: vec![
                b"./binlog.000001\n./binlog.000002\n./binlog.000003\n".to_vec(),
                b"/var/log/mysql/mysql-bin.000042\n/var/log/mysql/mysql-bin.000043\n".to_vec(),
                b"./host-relay-bin.000007\n".to_vec(),
            ],
            dict: CMDLINE_TOKENS,
            call: |b| {
                let logs = ssdwatch::databases::mysql::parse_index(&lossy(b));
                for l in &logs {
                    let _ = ssdwatch::databases::mysql::classify(l, false);
                    let _ = ssdwatch::databases::mysql::classify(l, true);
                    let _ = ssdwatch::databases::mysql::is_relay_index(l);
                    let _ = ssdwatch::databases::mycnf::binlog_index(l, Path::new("/var/lib/mysql"));
                }
                !logs.is_empty()
            },
        },
        Target {
            // A process's `stat` line, which discovery reads first (its name and parent).
            name: "proc_stat",
            seeds: vec![
                b"4242 (postgres) S 4100 4100 4100 0 -1 4194560 310 0 0 0 12 3 0 0 20 0 1 0 9090 228036608 4521\n".to_vec(),
                b"7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0\n".to_vec(),
            ],
            dict: CMDLINE_TOKENS,
            call: |b| ssdwatch::procfs::processes::parse_stat_ppid(&lossy(b)).is_some(),
        },
        Target {
            name: "proc_cmdline",
            seeds: vec![
                b"/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/postgresql/15/main\0-c\0config_file=/etc/postgresql/15/main/postgresql.conf\0".to_vec(),
                b"postgres: 15/main: checkpointer ".to_vec(),
                b"/usr/sbin/mariadbd\0--datadir=/srv/mysql\0--log-bin=/var/log/mysql/b\0--defaults-file=/etc/my.cnf\0".to_vec(),
            ],
            dict: CMDLINE_TOKENS,
            call: |b| {
                let args = ssdwatch::procfs::processes::parse_cmdline(b);
                ["postgres", "mariadbd"]
                    .iter()
                    .filter_map(|comm| ssdwatch::procfs::processes::classify(comm, &args))
                    .count()
                    > 0
            },
        },
        Target {
            name: "config_yaml",
            seeds: configs,
            dict: YAML_TOKENS,
            call: |b| match ssdwatch::config::Config::parse(&lossy(b), Path::new("fuzz.yaml")) {
                Ok(_) => true,
                // Refused, and saying which file: a message without it is a finding too.
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("fuzz.yaml"), "error names no file: {msg}");
                    false
                }
            },
        },
    ]
}

/// One to eight stacked mutations of `input`: bit flips, random or special bytes, tokens of the
/// format, numbers at type edges, deletions, duplications, truncation, splices with another seed.
fn mutate(rng: &mut Rng, input: &[u8], t: &Target) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(b.len() + 1);
        match rng.below(10) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = rng.next() as u8;
            }
            2 => {
                let tok = t.dict[rng.below(t.dict.len())];
                b.splice(at..at, tok.iter().copied());
            }
            3 => {
                // A number at an edge, in place of the digits found here (or inserted).
                let tok = NUMBERS[rng.below(NUMBERS.len())];
                let end = b[at..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(b.len(), |p| at + p);
                b.splice(at..end, tok.iter().copied());
            }
            4 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at..end);
            }
            5 if !b.is_empty() => {
                let start = rng.below(b.len());
                let end = (start + 1 + rng.below(256)).min(b.len());
                let chunk = b[start..end].to_vec();
                b.splice(at..at, chunk);
            }
            6 => b.truncate(at),
            7 => {
                let other = &t.seeds[rng.below(t.seeds.len())];
                let from = rng.below(other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[from..]);
            }
            8 => {
                const SPECIAL: &[u8] = b"\0\xff\n\r\t \"\\:#-{}[]";
                b.insert(at, SPECIAL[rng.below(SPECIAL.len())]);
            }
            _ => {
                let n = 1 + rng.below(16);
                let noise: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, noise);
            }
        }
    }
    b.truncate(MAX_INPUT);
    b
}

/// What one parser's run found.
struct Report {
    cases: u64,
    accepted: u64,
    panics: Vec<(PathBuf, String)>,
    slowest: Duration,
}

thread_local! {
    /// Whether this thread is running a fuzz case: its panics are expected, kept, not printed.
    static FUZZING: Cell<bool> = const { Cell::new(false) };
    /// The message of this thread's last panic in a fuzz case (a run may see thousands).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once, a panic hook that keeps a fuzz case's panic quietly in `LAST_PANIC` and hands
/// every other panic to the hook it replaced: the binary's other tests run beside the fuzzer, and
/// their failures must still say why.
fn keep_fuzz_panics_quiet() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let others = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !FUZZING.with(Cell::get) {
                return others(info);
            }
            let where_ = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{where_}")));
        }));
    });
}

fn fuzz(t: &Target, wall: Duration, seed: u64, crash_dir: &Path) -> Report {
    let mut rng = Rng(seed | 1);
    let mut pool: Vec<Vec<u8>> = t.seeds.clone();
    keep_fuzz_panics_quiet();
    let mut r = Report {
        cases: 0,
        accepted: 0,
        panics: Vec::new(),
        slowest: Duration::ZERO,
    };
    let start = Instant::now();
    while start.elapsed() < wall {
        // The unmutated seeds first: each must go through as it is.
        let input = if (r.cases as usize) < t.seeds.len() {
            t.seeds[r.cases as usize].clone()
        } else {
            let base = &pool[rng.below(pool.len())];
            mutate(&mut rng, base, t)
        };
        r.cases += 1;
        let t0 = Instant::now();
        FUZZING.with(|f| f.set(true));
        let outcome = catch_unwind(AssertUnwindSafe(|| (t.call)(&input)));
        FUZZING.with(|f| f.set(false));
        r.slowest = r.slowest.max(t0.elapsed());
        match outcome {
            Ok(true) => {
                r.accepted += 1;
                if pool.len() < POOL {
                    pool.push(input);
                } else {
                    let i = rng.below(POOL);
                    pool[i] = input;
                }
            }
            Ok(false) => {}
            Err(_) => {
                let msg = LAST_PANIC.with(|p| p.take()).unwrap_or_default();
                let path = crash_dir.join(format!("{}-{seed:016x}-{}.bin", t.name, r.cases));
                std::fs::write(&path, &input)
                    .unwrap_or_else(|e| panic!("saving {}: {e}", path.display()));
                r.panics.push((path, msg));
            }
        }
    }
    r
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        Err(_) => default,
    }
}

/// Every parser, for `FUZZ_SECONDS` each: no input makes one panic. Prints one line of figures
/// per parser (`benches/fuzz.sh` collects them).
#[test]
fn no_parser_panics_on_mutations_of_real_inputs() {
    let seconds: f64 = env_or("FUZZ_SECONDS", 1.0);
    let seed: u64 = env_or(
        "FUZZ_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    let crash_dir = std::env::var_os("FUZZ_CRASH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-crashes"));
    std::fs::create_dir_all(&crash_dir).unwrap();
    let wall = Duration::from_secs_f64(seconds);

    // FUZZ_ONLY=name,name runs those parsers only (benches/fuzz.sh passes it on).
    let only = std::env::var("FUZZ_ONLY").unwrap_or_default();
    let only: Vec<&str> = only.split(',').filter(|n| !n.is_empty()).collect();
    let all = targets();
    for n in &only {
        assert!(
            all.iter().any(|t| t.name == *n),
            "FUZZ_ONLY names {n:?}, which is no parser here"
        );
    }
    let reports: Vec<(&str, Report)> = all
        .iter()
        .filter(|t| only.is_empty() || only.contains(&t.name))
        .map(|t| (t.name, fuzz(t, wall, seed, &crash_dir)))
        .collect();

    let mut found = Vec::new();
    for (name, r) in &reports {
        // Straight to stderr: the figures are what a bench run is for.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "FUZZ {name} seconds={seconds} cases={} accepted={} panics={} slowest_ms={:.2} seed={seed:#x}",
            r.cases,
            r.accepted,
            r.panics.len(),
            r.slowest.as_secs_f64() * 1000.0
        );
        assert!(r.cases > 0, "{name}: no case ran in {seconds} s");
        for (path, msg) in &r.panics {
            found.push(format!("{name}: {msg} (input: {})", path.display()));
        }
    }
    assert!(
        found.is_empty(),
        "parsers panicked (replay with FUZZ_SEED={seed:#x}):\n{}",
        found.join("\n")
    );
}

/// The harness itself finds a panic and saves its input: a parser that panics on a NUL byte,
/// fed real inputs, is caught within a second.
#[test]
fn the_harness_catches_a_panic_and_saves_the_input() {
    let t = Target {
        name: "panics_on_nul",
        seeds: vec![b"1 2 3 4 5 6 7 8 9 10 11".to_vec()],
        dict: STAT_TOKENS,
        call: |b| {
            assert!(!b.contains(&0), "a NUL byte");
            true
        },
    };
    let dir = tempfile::tempdir().unwrap();
    let r = fuzz(&t, Duration::from_secs(1), 42, dir.path());
    assert!(r.cases > 1);
    let (path, _) = r.panics.first().expect("the NUL byte was never produced");
    assert!(
        std::fs::read(path).unwrap().contains(&0),
        "{}",
        path.display()
    );
}
