//! On a real loop-mounted ext4: the daemon's /metrics (real HTTP) shows avail bytes equal to what
//! statvfs(2) says, and after a real fstrim the loop device's discarded bytes grew by at least
//! the amount fstrim reports, with the last-discard timestamp set and the path TRIM-capable.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support::*;
use ssdwatch::collector::diskstats::DiskstatsConfig;
use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::config::Config;
use std::io::Write;
use std::time::Duration;

#[test]
fn fstrim_on_a_loop_device_shows_up_in_discard_counters() {
    if !require_root("loop fstrim") || !require_cmd("loop fstrim", "fstrim", "util-linux") {
        return;
    }
    // A space in the mount point: the kernel writes it as \040 in mountinfo.
    let fs = LoopFs::named(256, "pg data");
    let dev = fs.kernel_name();
    // Write 64 MiB, make it reach the device, delete it: 64 MiB of garbage for fstrim.
    {
        let mut f = std::fs::File::create(fs.mountpoint.join("data")).unwrap();
        let chunk = vec![0xA5u8; 1 << 20];
        for _ in 0..64 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    std::fs::remove_file(fs.mountpoint.join("data")).unwrap();
    run("sync", &[]);

    let mut config = Config::default();
    config.state_dir = fs.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.diskstats = DiskstatsConfig {
        interval: Duration::from_secs(1),
        ..Default::default()
    };
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        mount_points_include: Some(vec![format!("^{}$", regex_lite::escape(fs.mp()))]),
        ..Default::default()
    };
    let daemon = Daemon::start(config, roots_seeing(&[&fs.mountpoint]));
    let discarded = |m: &str| {
        value(
            m,
            &format!("ssdwatch_disk_discarded_bytes_total{{device=\"{dev}\"}}"),
        )
    };
    let fs_label = format!("mountpoint=\"{}\"", fs.mp());
    let before = daemon.wait_metrics("first samples", Duration::from_secs(10), |m| {
        discarded(m).is_some()
            && value_matching(m, "ssdwatch_filesystem_avail_bytes", &fs_label).is_some()
    });

    // avail bytes equal statvfs as the test reads it (nothing writes in between).
    let st = nix::sys::statvfs::statvfs(&fs.mountpoint).unwrap();
    let want = st.blocks_available() as f64 * st.fragment_size() as f64;
    assert_eq!(
        value_matching(&before, "ssdwatch_filesystem_avail_bytes", &fs_label),
        Some(want)
    );
    assert_eq!(
        value_matching(&before, "ssdwatch_filesystem_trim_capable", &fs_label),
        Some(1.0)
    );
    assert_eq!(
        value_matching(
            &before,
            "ssdwatch_filesystem_drive_info",
            &format!("drive=\"{dev}\"")
        ),
        Some(1.0)
    );
    // Mounted without -o discard (fstrim is how it gets trimmed), read-write.
    assert_eq!(
        value_matching(
            &before,
            "ssdwatch_filesystem_discard_mount_option",
            &fs_label
        ),
        Some(0.0)
    );
    assert_eq!(
        value_matching(&before, "ssdwatch_filesystem_readonly", &fs_label),
        Some(0.0)
    );
    let d0 = discarded(&before).unwrap();

    let out = run("fstrim", &["-v", fs.mp()]);
    // "/tmp/x/mnt: 240.5 MiB (252153856 bytes) trimmed"
    let trimmed: f64 = out
        .split('(')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse fstrim output {out:?}"));
    assert!(
        trimmed >= 64.0 * 1048576.0,
        "fstrim trimmed only {trimmed} bytes"
    );

    let after = daemon.wait_metrics("discarded bytes to grow", Duration::from_secs(10), |m| {
        discarded(m).unwrap_or(0.0) >= d0 + trimmed
            && value(
                m,
                &format!(
                    "ssdwatch_disk_last_discard_timestamp_seconds{{device=\"{dev}\",source=\"observed\"}}"
                ),
            )
            .is_some()
    });
    let grew = discarded(&after).unwrap() - d0;
    eprintln!("fstrim reported {trimmed} bytes; discarded bytes grew by {grew}");
    assert!(grew >= trimmed);
    let ts = value(
        &after,
        &format!(
            "ssdwatch_disk_last_discard_timestamp_seconds{{device=\"{dev}\",source=\"observed\"}}"
        ),
    )
    .unwrap();
    // The fstrim was one burst (it may span two samples): its size is what the kernel counted.
    let burst = value(
        &after,
        &format!("ssdwatch_disk_last_discard_burst_bytes{{device=\"{dev}\"}}"),
    )
    .unwrap();
    assert!(
        burst >= trimmed && burst <= grew,
        "burst {burst} vs fstrim {trimmed}, counter {grew}"
    );
    assert!(
        value(
            &after,
            &format!("ssdwatch_disk_written_since_discard_bytes{{device=\"{dev}\"}}")
        )
        .is_some()
    );
    let now = crate::support::unix_now();
    assert!(
        ts <= now && ts > now - 30.0,
        "last discard timestamp {ts} vs now {now}"
    );

    // Deleted, not trimmed: a 96 MiB file written after that fstrim and deleted shows as freed
    // bytes the drive has not been told about, until the next fstrim.
    let untrimmed =
        |m: &str| value_matching(m, "ssdwatch_filesystem_freed_untrimmed_bytes", &fs_label);
    {
        let mut f = std::fs::File::create(fs.mountpoint.join("table")).unwrap();
        let chunk = vec![0x5Au8; 1 << 20];
        for _ in 0..96 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let avail_with_file = nix::sys::statvfs::statvfs(&fs.mountpoint).unwrap();
    let avail_with_file =
        avail_with_file.blocks_available() as f64 * avail_with_file.fragment_size() as f64;
    daemon.wait_metrics("the file to be seen", Duration::from_secs(10), |m| {
        value_matching(m, "ssdwatch_filesystem_avail_bytes", &fs_label) == Some(avail_with_file)
    });
    std::fs::remove_file(fs.mountpoint.join("table")).unwrap();
    run("sync", &[]);
    let deleted = daemon.wait_metrics(
        "the delete to show as untrimmed",
        Duration::from_secs(10),
        |m| untrimmed(m).is_some_and(|b| b >= 95.0 * 1048576.0),
    );
    assert!(
        untrimmed(&deleted).unwrap() <= 97.0 * 1048576.0,
        "{:?}",
        untrimmed(&deleted)
    );
    run("fstrim", &[fs.mp()]);
    daemon.wait_metrics("fstrim to clear it", Duration::from_secs(10), |m| {
        untrimmed(m) == Some(0.0)
    });
}
