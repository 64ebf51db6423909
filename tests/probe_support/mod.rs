//! Helpers of the probe tests: root checks, a loop-mounted ext4 torn down by Drop (also when a
//! test panics), a background process killed by Drop, and the host's roots.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

pub fn require_root(test: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        true
    } else {
        eprintln!("SKIP {test}: needs root (loop devices, mkfs, mount)");
        false
    }
}

pub fn require_cmd(test: &str, cmd: &str) -> bool {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP {test}: {cmd} not installed (apt-get install {cmd})");
    }
    ok
}

pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// ext4 on a loop device over a sparse image, mounted in a temp dir.
pub struct LoopExt4 {
    pub dir: tempfile::TempDir,
    pub device: String,
    pub mnt: PathBuf,
}

impl LoopExt4 {
    pub fn new(size_mib: u64) -> LoopExt4 {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("disk.img");
        let f = std::fs::File::create(&image).expect("create image");
        f.set_len(size_mib << 20).expect("size image");
        drop(f);
        let device = sh("losetup", &["-f", "--show", image.to_str().expect("utf8")])
            .trim()
            .to_string();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mkdir mnt");
        let fs = LoopExt4 { dir, device, mnt };
        // No reserved blocks: the space arithmetic of the tests stays exact.
        sh("mkfs.ext4", &["-q", "-F", "-m", "0", &fs.device]);
        sh("mount", &[&fs.device, fs.mnt.to_str().expect("utf8")]);
        fs
    }

    pub fn kernel_name(&self) -> String {
        self.device.trim_start_matches("/dev/").to_string()
    }

    pub fn avail(&self) -> u64 {
        let v = nix::sys::statvfs::statvfs(&self.mnt).expect("statvfs");
        v.blocks_available() as u64 * v.fragment_size() as u64
    }

    pub fn probe_dir(&self) -> PathBuf {
        self.mnt.join(".ssdwatch-probe")
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn host_roots() -> ssdwatch::Roots {
    ssdwatch::Roots {
        sys: "/sys".into(),
        proc: "/proc".into(),
        rootfs: "/".into(),
        statvfs_fixture: None,
    }
}

/// A target with small sizes so tests take seconds, and no 1 GiB floor (loop filesystems are tiny).
pub fn small_target(path: &Path) -> ssdwatch::probe::TargetConfig {
    ssdwatch::probe::TargetConfig {
        path: path.to_path_buf(),
        file_size_bytes: 4 << 20,
        seq_write_bytes: 2 << 20,
        free_floor_bytes: 8 << 20,
        free_floor_ratio: 0.0,
        ..Default::default()
    }
}

pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ssdwatch")
}
