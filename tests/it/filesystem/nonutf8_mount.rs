//! A mount point that is not UTF-8 (an automounted USB label, a FUSE mount an unprivileged user
//! made through a symlink) costs no other filesystem its series: on real loop-mounted ext4
//! filesystems, one at `.../b\xff`, the daemon reports both, the odd one under an escaped label.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support::*;
use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::config::Config;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// An ext4 image loop-mounted at a directory whose name ends in the byte 0xff.
struct OddMount {
    _dir: tempfile::TempDir,
    device: String,
    path: PathBuf,
}

impl OddMount {
    fn new() -> OddMount {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("odd.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let device = run("losetup", &["-f", "--show", image.to_str().unwrap()])
            .trim()
            .to_string();
        run("mkfs.ext4", &["-q", "-F", &device]);
        let mut name = dir.path().as_os_str().to_owned().into_vec();
        name.extend_from_slice(b"/b\xff");
        let path = PathBuf::from(OsString::from_vec(name));
        std::fs::create_dir(&path).unwrap();
        let ok = Command::new("mount")
            .arg(&device)
            .arg(&path)
            .status()
            .unwrap();
        assert!(ok.success(), "mount {device} on a non-UTF-8 path");
        OddMount {
            _dir: dir,
            device,
            path,
        }
    }
}

impl Drop for OddMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

#[test]
fn one_non_utf8_mount_point_costs_no_other_filesystem_its_series() {
    if !require_root("non-UTF-8 mount point")
        || !require_cmd("non-UTF-8 mount point", "mkfs.ext4", "e2fsprogs")
    {
        return;
    }
    let fs = LoopFs::named(64, "data");
    let odd = OddMount::new();
    let odd_label = format!("{}/b\\xff", odd._dir.path().display());
    let mut config = Config::default();
    config.state_dir = fs.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.probe.enabled = false;
    config.collectors.filesystem = FilesystemConfig {
        interval: Duration::from_secs(1),
        mount_points_include: Some(vec![
            format!("^{}$", regex_lite::escape(fs.mp())),
            format!(
                "^{}/b",
                regex_lite::escape(&odd._dir.path().display().to_string())
            ),
        ]),
        ..Default::default()
    };
    let daemon = Daemon::start(config, roots_seeing(&[&fs.mountpoint, &odd.path]));
    let m = daemon.wait_metrics("both filesystems", Duration::from_secs(10), |m| {
        value_matching(
            m,
            "ssdwatch_filesystem_size_bytes",
            &format!("mountpoint=\"{}\"", fs.mp()),
        )
        .is_some()
            && m.contains("ssdwatch_filesystem_size_bytes{mountpoint=\"")
            && m.contains(&format!("mountpoint=\"{}", odd_label.replace('\\', "\\\\")))
    });
    assert_eq!(
        value(&m, "ssdwatch_collector_success{collector=\"filesystem\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            "ssdwatch_collector_failing_items{collector=\"filesystem\"}"
        ),
        Some(0.0),
        "{m}"
    );
    // The odd mount's own statvfs worked through its exact bytes: a real size, 64 MiB or so.
    let odd_size = value_matching(
        &m,
        "ssdwatch_filesystem_size_bytes",
        &format!("mountpoint=\"{}\"", odd_label.replace('\\', "\\\\")),
    )
    .expect("the odd mount has a size");
    assert!(
        odd_size > 40.0 * 1048576.0 && odd_size <= 64.0 * 1048576.0,
        "{odd_size}"
    );
}
