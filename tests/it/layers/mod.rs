//! The layers under filesystems: a real btrfs on a loop device whose data chunks take the whole
//! device while df still shows free space (checked against btrfs-progs' own figures), and the
//! commands the collector runs failing in every way (a zpool that hangs, prints garbage or
//! floods): each costs only its own series. Thin pools, md and ZFS for real are in the guest
//! (`vm::layers`), where device-mapper, md and the zfs module are.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support::*;
use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::collector::layers::LayersConfig;
use ssdwatch::config::Config;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

fn layers_only(state: &Path) -> Config {
    let mut config = Config::default();
    config.state_dir = state.to_path_buf();
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.diskstats.enabled = false;
    config.collectors.layers = LayersConfig {
        interval: Duration::from_secs(1),
        timeout: Duration::from_secs(2),
        ..Default::default()
    };
    config
}

/// A figure of `btrfs filesystem usage --raw` (e.g. "Device unallocated:").
fn usage_figure(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} not in btrfs filesystem usage:\n{text}"))
}

#[test]
fn btrfs_data_chunks_taking_the_device_show_while_df_shows_free_space() {
    let test = "btrfs chunk allocation";
    if !require_root(test) || !require_cmd(test, "mkfs.btrfs", "btrfs-progs") {
        return;
    }
    if !std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .contains("btrfs")
    {
        // Only a kernel without btrfs: nothing the suite could install.
        not_applicable(test, "the kernel has no btrfs");
        return;
    }
    // Data and metadata both single, so the arithmetic is the device's.
    let fs = LoopFs::of_type(
        512,
        "mkfs.btrfs",
        &["-q", "-f", "-d", "single", "-m", "single"],
    );
    // Fill with 1 MiB files until the data chunks take (nearly) every byte, then delete every
    // other file: the chunks stay allocated, half empty, and df shows the freed half.
    let chunk = vec![0x5Au8; 1 << 20];
    let mut n = 0;
    loop {
        let p = fs.mountpoint.join(format!("f{n:04}"));
        let Ok(mut f) = std::fs::File::create(&p) else {
            break;
        };
        if f.write_all(&chunk).and_then(|_| f.sync_all()).is_err() {
            let _ = std::fs::remove_file(&p);
            break;
        }
        n += 1;
        if n > 600 {
            break;
        }
    }
    assert!(n > 100, "only {n} files of 1 MiB fit on a 512 MiB btrfs");
    for i in (0..n).step_by(2) {
        std::fs::remove_file(fs.mountpoint.join(format!("f{i:04}"))).unwrap();
    }
    run("btrfs", &["filesystem", "sync", fs.mp()]);

    let mut config = layers_only(&fs.dir.path().join("state"));
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        mount_points_include: Some(vec![format!("^{}$", regex_lite::escape(fs.mp()))]),
        ..Default::default()
    };
    let daemon = Daemon::start(config, roots_seeing(&[&fs.mountpoint]));
    let uuid = run("findmnt", &["-no", "UUID", fs.mp()]).trim().to_string();
    let u = format!("uuid=\"{uuid}\"");
    // btrfs-progs is the oracle. Nothing writes meanwhile, but the kernel's cleaner removes the
    // block groups the deletes emptied in its own time: the two agree once both have seen the
    // same state, so each scrape is compared with a fresh answer of btrfs-progs (a daemon that
    // never catches up fails at the deadline with both figures).
    let usage = std::cell::RefCell::new(String::new());
    let m = daemon.wait_metrics(
        "btrfs series matching btrfs-progs",
        Duration::from_secs(60),
        |m| {
            let fresh = run("btrfs", &["filesystem", "usage", "--raw", fs.mp()]);
            let matches = value_matching(m, "ssdwatch_btrfs_unallocated_bytes", &u)
                == Some(usage_figure(&fresh, "Device unallocated:") as f64);
            *usage.borrow_mut() = fresh;
            matches
            // The filesystem collector placed the mount on the btrfs layer once shared.
            && m.lines().any(|l| {
                l.starts_with("ssdwatch_filesystem_layer_avail_bytes{")
                    && l.contains(fs.mp())
                    && l.contains("layer=\"btrfs")
            })
        },
    );
    let usage = usage.into_inner();
    let unallocated = usage_figure(&usage, "Device unallocated:");
    assert_eq!(
        value_matching(&m, "ssdwatch_btrfs_unallocated_bytes", &u),
        Some(unallocated as f64),
        "{usage}"
    );
    let dev = format!("device=\"{}\"", fs.kernel_name());
    assert_eq!(
        value_matching(&m, "ssdwatch_btrfs_device_unallocated_bytes", &dev),
        Some(unallocated as f64),
        "the device query answers per device"
    );
    let data_alloc = value_matching(&m, "ssdwatch_btrfs_allocated_bytes", "type=\"data\"").unwrap();
    let data_used = value_matching(&m, "ssdwatch_btrfs_used_bytes", "type=\"data\"").unwrap();
    // The story: data chunks hold most of the device, about half of them empty, and df shows it.
    assert!(data_alloc > 300.0 * 1048576.0, "data chunks {data_alloc}");
    assert!(
        data_used < 0.7 * data_alloc,
        "used {data_used} of {data_alloc}"
    );
    assert!(unallocated < 64 << 20, "unallocated {unallocated}");
    let avail = value_matching(&m, "ssdwatch_filesystem_avail_bytes", fs.mp()).unwrap();
    assert!(avail > 100.0 * 1048576.0, "df shows {avail} free");
    assert_eq!(
        value_matching(&m, "ssdwatch_btrfs_profile_info", "type=\"metadata\""),
        Some(1.0)
    );
    assert!(m.contains(&format!(
        "ssdwatch_btrfs_profile_info{{{u},type=\"data\",profile=\"single\"}} 1"
    )));
}

/// A loop device of its own, detached on drop (after the filesystem on it is unmounted: keep it
/// declared before the [`LoopFs`]).
struct ExtraLoop {
    _dir: tempfile::TempDir,
    device: String,
}

impl ExtraLoop {
    fn new(size_mib: u64) -> ExtraLoop {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("second.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(size_mib << 20))
            .unwrap();
        let device = run("losetup", &["-f", "--show", image.to_str().unwrap()])
            .trim()
            .to_string();
        ExtraLoop { _dir: dir, device }
    }
}

impl Drop for ExtraLoop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.device])
            .status();
    }
}

/// `btrfs device stats` of a mount, per device path: (path, counter name) → count.
fn device_stats(mp: &str) -> Vec<(String, String, u64)> {
    run("btrfs", &["device", "stats", mp])
        .lines()
        .filter_map(|l| {
            // "[/dev/loop0].write_io_errs    0"
            let (dev, rest) = l.strip_prefix('[')?.split_once("].")?;
            let mut f = rest.split_whitespace();
            let (name, n) = (f.next()?, f.next()?.parse().ok()?);
            Some((dev.to_string(), name.to_string(), n))
        })
        .collect()
}

/// A btrfs RAID1 of two loop devices, fresh: each device's five error counters are exported
/// under its own kernel name, as `btrfs device stats` shows them (all 0; raising them for real
/// needs a device that fails on purpose, dm-flakey, which this host's kernel lacks: the parser
/// and the mapping of non-zero counts are tested on fixture trees).
#[test]
fn a_two_device_btrfs_exports_each_devices_error_counters_as_btrfs_device_stats_says() {
    let test = "btrfs device error counters";
    if !require_root(test) || !require_cmd(test, "mkfs.btrfs", "btrfs-progs") {
        return;
    }
    if !std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .contains("btrfs")
    {
        not_applicable(test, "the kernel has no btrfs");
        return;
    }
    let second = ExtraLoop::new(300);
    let fs = LoopFs::of_type(
        300,
        "mkfs.btrfs",
        &["-q", "-f", "-d", "raid1", "-m", "raid1", &second.device],
    );
    let uuid = run("findmnt", &["-no", "UUID", fs.mp()]).trim().to_string();
    let sys = std::path::PathBuf::from("/sys/fs/btrfs").join(&uuid);
    if !sys.join("devinfo/1/error_stats").exists() {
        not_applicable(
            test,
            "the kernel has no devinfo/<devid>/error_stats (before 5.14)",
        );
        return;
    }
    let mut config = layers_only(&fs.dir.path().join("state"));
    config.collectors.filesystem.enabled = false;
    let daemon = Daemon::start(config, roots_seeing(&[&fs.mountpoint]));
    let u = format!("uuid=\"{uuid}\"");
    let m = daemon.wait_metrics("btrfs error counters", Duration::from_secs(20), |m| {
        m.lines()
            .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{") && l.contains(&u))
            .count()
            >= 10
    });
    let stats = device_stats(fs.mp());
    assert_eq!(stats.len(), 10, "btrfs device stats: {stats:?}");
    let second_name = second.device.trim_start_matches("/dev/").to_string();
    for (path, counter, n) in &stats {
        let name = path.trim_start_matches("/dev/");
        assert!(
            name == fs.kernel_name() || name == second_name,
            "{path} is neither device"
        );
        // write_io_errs → write, corruption_errs → corruption.
        let t = counter.trim_end_matches("_errs").trim_end_matches("_io");
        let series =
            format!("ssdwatch_btrfs_device_errors_total{{{u},device=\"{name}\",type=\"{t}\"}}");
        assert_eq!(value(&m, &series), Some(*n as f64), "{series} in\n{m}");
    }
    // One series per device and counter, no more.
    let ours = m
        .lines()
        .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{") && l.contains(&u))
        .count();
    assert_eq!(ours, 10, "{m}");
    assert_eq!(
        value(&m, "ssdwatch_collector_failing_items{collector=\"layers\"}"),
        Some(0.0),
        "{m}"
    );
}

/// Copies a sysfs directory's readable files (links become empty files, as the fixtures keep
/// `devices/`), leaving out files named `skip`.
fn copy_sysfs(from: &Path, to: &Path, skip: &str) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().unwrap();
        if ty.is_symlink() {
            std::fs::write(&dst, "").unwrap();
        } else if ty.is_dir() {
            copy_sysfs(&src, &dst, skip);
        } else if e.file_name() != skip
            && let Ok(b) = std::fs::read(&src)
        {
            std::fs::write(&dst, b).unwrap();
        }
    }
}

/// A kernel before 5.14 has no `error_stats`: the collector runs `btrfs device stats` instead.
/// A real btrfs on a loop device, seen through a sysfs root whose btrfs tree lacks the files
/// (this host's kernel has them): each device's five counters are the tool's own, under the
/// device's kernel name, and nothing fails.
#[test]
fn without_error_stats_the_counters_come_from_btrfs_device_stats() {
    let test = "btrfs device stats for kernels before 5.14";
    let Some((fs, uuid)) = btrfs_on_loop(test) else {
        return;
    };
    let sys = tempfile::tempdir().unwrap();
    sysfs_without_error_stats(sys.path(), &uuid);
    let tree = sys.path().join("fs/btrfs").join(&uuid);
    assert!(tree.join("devinfo/1").is_dir() && !tree.join("devinfo/1/error_stats").exists());
    let mut config = layers_only(&fs.dir.path().join("state"));
    config.collectors.filesystem.enabled = false;
    let roots = ssdwatch::Roots {
        sys: sys.path().to_path_buf(),
        ..roots_seeing(&[&fs.mountpoint])
    };
    let daemon = Daemon::start(config, roots);
    let u = format!("uuid=\"{uuid}\"");
    let m = daemon.wait_metrics("btrfs device stats", Duration::from_secs(20), |m| {
        m.lines()
            .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{") && l.contains(&u))
            .count()
            >= 5
    });
    assert_series_are_btrfs_device_stats(&m, &fs, &uuid);
    let ours = m
        .lines()
        .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{") && l.contains(&u))
        .count();
    assert_eq!(ours, 5, "{m}");
    assert_eq!(
        value(&m, "ssdwatch_collector_failing_items{collector=\"layers\"}"),
        Some(0.0),
        "{m}"
    );
}

/// The daemon as it runs as root, split: it gives up its capabilities and `btrfs device stats`
/// (which needs CAP_SYS_ADMIN) runs under the privileged helper, for a btrfs whose sysfs tree
/// lacks `error_stats`. The run had the capability (a wrapper records it and runs the real
/// tool), and the series are the tool's own.
#[test]
fn split_as_in_production_btrfs_device_stats_runs_under_the_privileged_helper() {
    let test = "btrfs device stats through the privileged helper";
    let Some((fs, uuid)) = btrfs_on_loop(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let sys = p.join("sys");
    sysfs_without_error_stats(&sys, &uuid);
    let caps = p.join("caps.txt");
    let btrfs = script(
        p,
        "btrfs-wrapper",
        &format!(
            "grep CapEff /proc/self/status >> {}\nexec btrfs \"$@\"",
            caps.display()
        ),
    );
    std::fs::create_dir_all(p.join("state")).unwrap();
    std::fs::write(
        p.join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n  smart:\n    enabled: false\n  probe:\n    enabled: false\n  filesystem:\n    enabled: false\n  diskstats:\n    enabled: false\n  layers:\n    interval: 1s\n    timeout: 10s\n    btrfs_path: {}\n",
            p.join("state").display(),
            btrfs.display()
        ),
    )
    .unwrap();
    let proc = roots_seeing(&[&fs.mountpoint]).proc;
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("--config")
        .arg(p.join("ssdwatch.yaml"))
        .arg("--path.sysfs")
        .arg(&sys)
        .arg("--path.procfs")
        .arg(&proc)
        .args(["--web.listen-address", "127.0.0.1:0"]);
    let d = crate::support::binary::Daemon::spawn(dir, cmd);
    let u = format!("uuid=\"{uuid}\"");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let m = loop {
        let m = d.metrics();
        if m.lines()
            .filter(|l| l.starts_with("ssdwatch_btrfs_device_errors_total{") && l.contains(&u))
            .count()
            >= 5
        {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no btrfs device stats series:\n{m}\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        d.log_text().contains("privileged helper started"),
        "{}",
        d.log_text()
    );
    let recorded = std::fs::read_to_string(&caps).unwrap();
    let eff = recorded
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("the wrapper recorded no capabilities: {recorded:?}"));
    assert_ne!(eff, "0000000000000000", "btrfs ran without capabilities");
    assert_series_are_btrfs_device_stats(&m, &fs, &uuid);
}

/// A btrfs on a 300 MiB loop device and its UUID, where the test can run (root, btrfs-progs,
/// the kernel's btrfs); `None` after saying why not.
fn btrfs_on_loop(test: &str) -> Option<(LoopFs, String)> {
    if !require_root(test)
        || !require_cmd(test, "mkfs.btrfs", "btrfs-progs")
        || !require_cmd(test, "btrfs", "btrfs-progs")
    {
        return None;
    }
    if !std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .contains("btrfs")
    {
        not_applicable(test, "the kernel has no btrfs");
        return None;
    }
    let fs = LoopFs::of_type(300, "mkfs.btrfs", &["-q", "-f"]);
    let uuid = run("findmnt", &["-no", "UUID", fs.mp()]).trim().to_string();
    Some((fs, uuid))
}

/// A sysfs root at `sys` that is this host's, but for the btrfs `uuid`'s tree, copied without
/// its `error_stats` files: a kernel before 5.14 as the collector sees it.
fn sysfs_without_error_stats(sys: &Path, uuid: &str) {
    std::fs::create_dir_all(sys).unwrap();
    for d in ["block", "devices", "class", "dev"] {
        std::os::unix::fs::symlink(Path::new("/sys").join(d), sys.join(d)).unwrap();
    }
    copy_sysfs(
        &Path::new("/sys/fs/btrfs").join(uuid),
        &sys.join("fs/btrfs").join(uuid),
        "error_stats",
    );
}

/// Each of `btrfs device stats`' five counters of `fs` is the daemon's series of that device
/// and type in `m`.
fn assert_series_are_btrfs_device_stats(m: &str, fs: &LoopFs, uuid: &str) {
    let stats = device_stats(fs.mp());
    assert_eq!(stats.len(), 5, "btrfs device stats: {stats:?}");
    for (path, counter, n) in &stats {
        let name = path.trim_start_matches("/dev/");
        assert_eq!(name, fs.kernel_name());
        let t = counter.trim_end_matches("_errs").trim_end_matches("_io");
        let series = format!(
            "ssdwatch_btrfs_device_errors_total{{uuid=\"{uuid}\",device=\"{name}\",type=\"{t}\"}}"
        );
        assert_eq!(value(m, &series), Some(*n as f64), "{series} in\n{m}");
    }
}

/// A sysfs root where the zfs module is loaded and no block device exists, so the collector
/// asks zpool and zfs and nothing else.
fn zfs_sysfs() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("module/zfs")).unwrap();
    std::fs::create_dir_all(t.path().join("block")).unwrap();
    t
}

fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

const ZFS_LIST: &str = "tank\t838410240\t137625600\t98304\t0\t0\t/tank\ntank/pg\t536903680\t137625600\t536903680\t0\t268435456\t/tank/pg\n";

#[test]
fn a_zpool_that_hangs_prints_garbage_or_floods_costs_only_its_own_series() {
    let sys = zfs_sysfs();
    let bin = tempfile::tempdir().unwrap();
    let zfs = script(
        bin.path(),
        "zfs",
        &format!(
            "printf '{}'",
            ZFS_LIST.replace('\t', "\\t").replace('\n', "\\n")
        ),
    );
    let pidfile = bin.path().join("hung.pid");
    for (case, body) in [
        // Hangs: its process group is killed at the timeout, and the next run goes on.
        (
            "hangs",
            format!("echo $$ > {}\nexec sleep 600", pidfile.display()),
        ),
        (
            "garbage",
            "echo 'this is not zpool output'; echo 'nor this'".to_string(),
        ),
        // 100 MB: read up to the cap, then refused as a whole.
        (
            "floods",
            "yes 'tank\t1\t1\t1\t1\t1\tONLINE\t-\t-' | head -c 100000000".to_string(),
        ),
        ("fails", "echo 'no pools available' >&2; exit 1".to_string()),
    ] {
        let zpool = script(bin.path(), &format!("zpool-{case}"), &body);
        let state = tempfile::tempdir().unwrap();
        let mut config = layers_only(state.path());
        config.collectors.filesystem.enabled = false;
        config.collectors.topology.enabled = false;
        config.collectors.layers.zpool_path = zpool;
        config.collectors.layers.zfs_path = zfs.clone();
        let roots = ssdwatch::Roots {
            sys: sys.path().to_path_buf(),
            ..ssdwatch::Roots::default()
        };
        let daemon = Daemon::start(config, roots);
        let m = daemon.wait_metrics(case, Duration::from_secs(30), |m| {
            value(m, "ssdwatch_collector_errors_total{collector=\"layers\"}").unwrap_or(0.0) >= 2.0
        });
        // The datasets are there; the pools are not (no zero, no half-read pool).
        assert_eq!(
            value(
                &m,
                "ssdwatch_zfs_dataset_reservation_bytes{dataset=\"tank/pg\",pool=\"tank\"}"
            ),
            Some(268435456.0),
            "{case}"
        );
        assert!(!m.contains("ssdwatch_zfs_pool_size_bytes{"), "{case}: {m}");
        assert_eq!(
            value(&m, "ssdwatch_collector_success{collector=\"layers\"}"),
            Some(1.0),
            "{case}: a bad command is an item's error, not a failed sample"
        );
        assert!(
            value(&m, "ssdwatch_collector_failing_items{collector=\"layers\"}").unwrap_or(0.0)
                >= 1.0,
            "{case}"
        );
        if case == "hangs" {
            let pid: i32 = std::fs::read_to_string(&pidfile)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            // Killed with its group at the timeout (and reaped): gone, not left sleeping.
            let gone = (0..100).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                !Path::new(&format!("/proc/{pid}")).exists()
            });
            assert!(gone, "the hung zpool {pid} was left running");
        }
    }
}

/// A zpool that answers `list` with one pool, and `status` as an OpenZFS before 2.3 does (a
/// usage error to `-j`, the text to `-p`: the real raidz2 capture with one write error) or as
/// 2.3 does (the JSON of zpool-status(8)): the vdevs' counters and the pool's data errors are
/// exported either way, and an old zpool is asked for JSON only once.
#[test]
fn zpool_status_errors_come_from_the_json_or_from_the_text_of_an_older_zpool() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layers");
    let bin = tempfile::tempdir().unwrap();
    let zfs = script(bin.path(), "zfs", "exit 0");
    let log = bin.path().join("calls.log");
    for (case, status_j) in [
        (
            "text",
            "echo \"invalid option 'j'\" >&2; exit 2".to_string(),
        ),
        (
            "json",
            format!(
                "cat {}",
                fixtures.join("zpool-status-j-manpage.json").display()
            ),
        ),
    ] {
        let _ = std::fs::remove_file(&log);
        let zpool = script(
            bin.path(),
            &format!("zpool-{case}"),
            &format!(
                "echo \"$*\" >> {log}\ncase \"$*\" in\n\
                 list*) printf 'tank\\t1006632960\\t872407040\\t134225920\\t64\\t86\\tONLINE\\t-\\t-\\n' ;;\n\
                 'status -j -p') {status_j} ;;\n\
                 'status -p') cat {text} ;;\n\
                 *) exit 1 ;;\nesac",
                log = log.display(),
                text = fixtures
                    .join("zpool-status-raidz2-write-error.txt")
                    .display(),
            ),
        );
        let sys = zfs_sysfs();
        let state = tempfile::tempdir().unwrap();
        let mut config = layers_only(state.path());
        config.collectors.filesystem.enabled = false;
        config.collectors.topology.enabled = false;
        config.collectors.layers.zpool_path = zpool;
        config.collectors.layers.zfs_path = zfs.clone();
        let roots = ssdwatch::Roots {
            sys: sys.path().to_path_buf(),
            ..ssdwatch::Roots::default()
        };
        let daemon = Daemon::start(config, roots);
        // Two samples, so an older zpool's second is the text alone.
        let m = daemon.wait_metrics(case, Duration::from_secs(30), |m| {
            m.contains("ssdwatch_zfs_vdev_errors_total{")
                && std::fs::read_to_string(&log)
                    .map(|l| l.lines().filter(|x| x.starts_with("list")).count() >= 2)
                    .unwrap_or(false)
        });
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            value(&m, "ssdwatch_collector_failing_items{collector=\"layers\"}"),
            Some(0.0),
            "{case}: {m}"
        );
        assert_eq!(
            value(&m, "ssdwatch_zfs_pool_data_errors{pool=\"tank\"}"),
            Some(0.0),
            "{case}"
        );
        if case == "text" {
            assert_eq!(
                calls.lines().filter(|l| *l == "status -j -p").count(),
                1,
                "JSON asked once: {calls}"
            );
            assert_eq!(
                value(
                    &m,
                    "ssdwatch_zfs_vdev_errors_total{pool=\"tank\",vdev=\"sda\",type=\"write\"}"
                ),
                Some(1.0),
                "{m}"
            );
            assert_eq!(
                value(
                    &m,
                    "ssdwatch_zfs_vdev_state{pool=\"tank\",vdev=\"raidz2-0\",state=\"ONLINE\"}"
                ),
                Some(1.0)
            );
            assert_eq!(
                value(
                    &m,
                    "ssdwatch_zfs_vdev_info{pool=\"tank\",vdev=\"sda\",leaf=\"true\"}"
                ),
                Some(1.0)
            );
        } else {
            assert!(!calls.contains("status -p\n"), "no text asked: {calls}");
            let vdevs = m
                .lines()
                .filter(|l| l.starts_with("ssdwatch_zfs_vdev_info{"))
                .count();
            assert_eq!(vdevs, 9, "{m}");
            assert_eq!(
                value(
                    &m,
                    "ssdwatch_zfs_vdev_state{pool=\"tank\",vdev=\"raidz1-0\",state=\"ONLINE\"}"
                ),
                Some(1.0),
                "HEALTHY is ONLINE"
            );
        }
    }
}

#[test]
fn no_zfs_module_no_device_mapper_runs_nothing() {
    // Commands that would fail loudly if run: they are not.
    let sys = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sys.path().join("block")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut config = layers_only(state.path());
    config.collectors.filesystem.enabled = false;
    config.collectors.layers.zpool_path = "/nonexistent/zpool".into();
    config.collectors.layers.zfs_path = "/nonexistent/zfs".into();
    config.collectors.layers.dmsetup_path = "/nonexistent/dmsetup".into();
    let roots = ssdwatch::Roots {
        sys: sys.path().to_path_buf(),
        ..ssdwatch::Roots::default()
    };
    let daemon = Daemon::start(config, roots);
    let m = daemon.wait_metrics("a layers sample", Duration::from_secs(20), |m| {
        value(m, "ssdwatch_collector_success{collector=\"layers\"}") == Some(1.0)
    });
    assert_eq!(
        value(&m, "ssdwatch_collector_errors_total{collector=\"layers\"}"),
        Some(0.0),
        "{m}"
    );
}

/// benches/layers.sh (the layers collector's CPU per sample and the daemon's memory on a host
/// of 16 thin pools, 200 thin volumes, 8 btrfs and 4 ZFS pools with 100 datasets) in its short
/// mode, so the script can't rot; the figures come from the release run.
#[test]
fn the_layers_bench_runs_in_its_short_mode() {
    let test = "layers bench";
    if !require_cmd(test, "curl", "curl") || !require_cmd(test, "python3", "python3") {
        return;
    }
    let text = run_bench_short("layers.sh", Path::new(env!("CARGO_BIN_EXE_ssdwatch")));
    assert!(
        text.contains("CPU a layers sample costs beyond today"),
        "{text}"
    );
    // Every kind of layer limits some mount of the generated host.
    let on = text
        .lines()
        .skip_while(|l| !l.starts_with("layers on:"))
        .nth(1)
        .unwrap_or_default();
    for layer in ["thin_pool", "btrfs", "zfs_dataset", "filesystem"] {
        assert!(on.contains(layer), "{layer} in {on:?}:\n{text}");
    }
    assert!(
        text.contains("layers off: ") && text.contains(" 0 layers samples"),
        "{text}"
    );
}

/// Names are the admin's (or whoever named the pool): an ESC or BEL in a thin pool, thin volume,
/// zpool or dataset name, as dmsetup and zpool print it, reaches the scrape in its label form
/// (`\x1b`), as a mount point does, and `<script>` stays text; promtool accepts the result.
#[test]
fn control_characters_in_dmsetup_and_zpool_names_are_escaped_in_the_scrape() {
    let sys = zfs_sysfs();
    // The pool's device, as /sys names it (raw), so its volumes are joined to it.
    let dm = sys.path().join("block/dm-2");
    std::fs::create_dir_all(dm.join("dm")).unwrap();
    std::fs::write(dm.join("dev"), "253:2\n").unwrap();
    std::fs::write(dm.join("size"), "131072\n").unwrap();
    std::fs::write(dm.join("dm/name"), "vg-\u{1b}[2Jpool-tpool\n").unwrap();
    let bin = tempfile::tempdir().unwrap();
    let esc = "\\033";
    let dmsetup = script(
        bin.path(),
        "dmsetup",
        &format!(
            "case \"$1\" in\n\
             table) printf 'vg-{esc}[2Jpool-tpool: 0 131072 thin-pool 253:0 253:1 128 0 1 skip_block_zeroing\\n<script>alert(1)</script>: 0 204800 thin 253:2 1\\n' ;;\n\
             status) printf 'vg-{esc}[2Jpool-tpool: 0 131072 thin-pool 1 22/1024 976/1024 - rw no_discard_passdown queue_if_no_space - 256\\n<script>alert(1)</script>: 0 204800 thin 124928 204799\\n' ;;\n\
             esac"
        ),
    );
    // `list`, and `status` as a zpool before OpenZFS 2.3 answers it (no `-j`), a leaf device
    // named with an ESC too.
    let zpool = script(
        bin.path(),
        "zpool",
        &format!(
            "case \"$*\" in\n\
             list*) printf 't{esc}]0;owned\\007ank\\t100\\t10\\t90\\t1\\t10\\tONLINE\\t-\\t-\\n' ;;\n\
             'status -j -p') exit 2 ;;\n\
             'status -p') printf '  pool: t{esc}]0;owned\\007ank\\nconfig:\\n\\n\\tNAME STATE READ WRITE CKSUM\\n\\tt{esc}]0;owned\\007ank ONLINE 0 0 0\\n\\t  sd{esc}[2J ONLINE 0 0 4\\n\\nerrors: No known data errors\\n' ;;\n\
             esac"
        ),
    );
    let zfs = script(
        bin.path(),
        "zfs",
        &format!("printf 't{esc}]0;owned\\007ank/<script>\\t1\\t2\\t3\\t-\\t0\\t-\\n'"),
    );
    let state = tempfile::tempdir().unwrap();
    let mut config = layers_only(state.path());
    config.collectors.filesystem.enabled = false;
    config.collectors.layers.dmsetup_path = dmsetup;
    config.collectors.layers.zpool_path = zpool;
    config.collectors.layers.zfs_path = zfs;
    let roots = ssdwatch::Roots {
        sys: sys.path().to_path_buf(),
        ..ssdwatch::Roots::default()
    };
    let daemon = Daemon::start(config, roots);
    let m = daemon.wait_metrics(
        "pools named with control characters",
        Duration::from_secs(20),
        |m| {
            m.contains("ssdwatch_thin_volume_size_bytes{")
                && m.contains("ssdwatch_zfs_dataset_used_bytes{")
                && m.contains("ssdwatch_zfs_vdev_errors_total{")
        },
    );
    assert!(
        !m.contains('\u{1b}') && !m.contains('\u{7}'),
        "a raw control character:\n{m:?}"
    );
    assert!(
        m.contains("ssdwatch_thin_volume_size_bytes{volume=\"<script>alert(1)</script>\",pool=\"vg-\\\\x1b[2Jpool-tpool\"} 104857600"),
        "{m}"
    );
    assert!(
        m.contains("ssdwatch_zfs_pool_size_bytes{pool=\"t\\\\x1b]0;owned\\\\x07ank\"} 100"),
        "{m}"
    );
    assert!(
        m.contains("ssdwatch_zfs_dataset_used_bytes{dataset=\"t\\\\x1b]0;owned\\\\x07ank/<script>\",pool=\"t\\\\x1b]0;owned\\\\x07ank\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("ssdwatch_zfs_vdev_errors_total{pool=\"t\\\\x1b]0;owned\\\\x07ank\",vdev=\"sd\\\\x1b[2J\",type=\"checksum\"} 4"),
        "{m}"
    );
    assert_eq!(
        value(&m, "ssdwatch_collector_errors_total{collector=\"layers\"}"),
        Some(0.0),
        "{m}"
    );
    if require_cmd("promtool check of escaped names", "promtool", "prometheus") {
        assert_promtool_clean("escaped names", &m);
    }
}

/// A thin pool filling while its filesystem is not sampled again: the mount's effective free
/// space in a scrape is its pool's free space in that same scrape, never the reading before
/// (with the layers read once a minute, that was a minute stale just when the pool filled).
#[test]
fn effective_free_space_follows_its_thin_pool_in_the_same_scrape() {
    let host = tempfile::tempdir().unwrap();
    let h = host.path();
    let put = |rel: &str, text: &str| {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    // ext4 on thin volume vg-db (dm-3) of pool vg-pool-tpool (dm-2): 1 GiB of 64 KiB blocks.
    for (dev, num, name) in [
        ("dm-2", "253:2", "vg-pool-tpool"),
        ("dm-3", "253:3", "vg-db"),
    ] {
        put(&format!("sys/block/{dev}/dev"), &format!("{num}\n"));
        put(&format!("sys/block/{dev}/size"), "4194304\n");
        put(&format!("sys/block/{dev}/dm/name"), &format!("{name}\n"));
    }
    put(
        "proc/self/mountinfo",
        "1 0 253:3 / /srv/db rw,relatime shared:1 - ext4 /dev/mapper/vg-db rw\n",
    );
    // 2 GiB free as the filesystem sees it: the pool is the limit.
    put(
        "statvfs.yaml",
        "\"/srv/db\":\n  frsize: 4096\n  blocks: 1048576\n  bfree: 600000\n  bavail: 524288\n  files: 262144\n  ffree: 260000\n",
    );
    std::fs::create_dir_all(h.join("rootfs/srv/db")).unwrap();
    let status = h.join("pool-status");
    let pool_status = |used: u64| {
        format!(
            "vg-pool-tpool: 0 2097152 thin-pool 1 22/1024 {used}/16384 - rw no_discard_passdown queue_if_no_space - 256\n\
             vg-db: 0 4194304 thin 1000 4194303\n"
        )
    };
    std::fs::write(&status, pool_status(7000)).unwrap();
    let bin = tempfile::tempdir().unwrap();
    let dmsetup = script(
        bin.path(),
        "dmsetup",
        &format!(
            "case \"$1\" in\n\
             table) printf 'vg-pool-tpool: 0 2097152 thin-pool 253:0 253:1 128 0 0\\nvg-db: 0 4194304 thin 253:2 1\\n' ;;\n\
             status) cat {} ;;\n\
             esac",
            status.display()
        ),
    );
    let state = tempfile::tempdir().unwrap();
    let mut config = layers_only(state.path());
    config.collectors.layers.dmsetup_path = dmsetup;
    // The filesystem is sampled once in the test's time; the layers every second.
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let daemon = Daemon::start(config, ssdwatch::Roots::fixture(h));
    let mp = "mountpoint=\"/srv/db\"";
    let free = |used: u64| ((16384 - used) * 65536) as f64;
    let m = daemon.wait_metrics("the pool under /srv/db", Duration::from_secs(20), |m| {
        value_matching(m, "ssdwatch_filesystem_effective_avail_bytes", mp) == Some(free(7000))
    });
    assert!(
        m.contains("ssdwatch_filesystem_limiting_layer_info{mountpoint=\"/srv/db\",layer=\"thin_pool\",name=\"vg-pool-tpool\"} 1"),
        "{m}"
    );
    // The pool fills by 1000 blocks (62.5 MiB); the filesystem is not sampled again.
    std::fs::write(&status, pool_status(8000)).unwrap();
    let m = daemon.wait_metrics("the pool's new reading", Duration::from_secs(20), |m| {
        value(
            m,
            "ssdwatch_thin_pool_data_used_bytes{pool=\"vg-pool-tpool\"}",
        ) == Some(8000.0 * 65536.0)
    });
    // The same scrape: the pool's series, its layer's and the mount's effective figure agree.
    let size = value(
        &m,
        "ssdwatch_thin_pool_data_size_bytes{pool=\"vg-pool-tpool\"}",
    )
    .unwrap();
    assert_eq!(size - 8000.0 * 65536.0, free(8000));
    assert_eq!(
        value(
            &m,
            "ssdwatch_filesystem_layer_avail_bytes{mountpoint=\"/srv/db\",layer=\"thin_pool\",name=\"vg-pool-tpool\"}"
        ),
        Some(free(8000)),
        "{m}"
    );
    assert_eq!(
        value_matching(&m, "ssdwatch_filesystem_effective_avail_bytes", mp),
        Some(free(8000)),
        "{m}"
    );
    // The filesystem's own figure is its one reading.
    assert_eq!(
        value_matching(&m, "ssdwatch_filesystem_avail_bytes", mp),
        Some(524288.0 * 4096.0)
    );
}
