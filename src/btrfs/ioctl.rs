//! The one btrfs figure sysfs lacks: how much of each device is allocated to chunks, from the
//! `BTRFS_IOC_DEV_INFO` ioctl on a directory of the mounted filesystem (no capability needed).
//! A system call on a mount may hang like statvfs: callers run it off the async workers with a
//! deadline. No metrics here.

use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `struct btrfs_ioctl_dev_info_args` (linux/btrfs.h): 4 KiB, padded.
#[repr(C)]
struct DevInfoArgs {
    devid: u64,
    uuid: [u8; 16],
    bytes_used: u64,
    total_bytes: u64,
    unused: [u64; 379],
    path: [u8; 1024],
}

const _: () = assert!(std::mem::size_of::<DevInfoArgs>() == 4096);

/// `_IOWR(0x94, 30, struct btrfs_ioctl_dev_info_args)`.
const BTRFS_IOC_DEV_INFO: libc::c_ulong = (3 << 30) | (4096 << 16) | (0x94 << 8) | 30;

/// One device of a mounted btrfs, as the filesystem accounts it.
#[derive(Debug, Clone, PartialEq)]
pub struct DevInfo {
    pub devid: u64,
    /// Raw bytes allocated to chunks on the device.
    pub bytes_used: u64,
    /// Bytes of the device the filesystem may use.
    pub total_bytes: u64,
    /// The device node the filesystem opened (`/dev/sdb1`).
    pub path: String,
}

/// Asks the btrfs mounted at `mount` about each of `devids` (from sysfs `devinfo/`). A devid
/// the filesystem no longer has is left out.
pub fn dev_info(mount: &Path, devids: &[u64]) -> std::io::Result<Vec<DevInfo>> {
    let dir = std::fs::File::open(mount)?;
    let mut out = Vec::with_capacity(devids.len());
    for &devid in devids {
        // SAFETY: DevInfoArgs is plain old data; all zeroes is a valid value of it.
        let mut args: DevInfoArgs = unsafe { std::mem::zeroed() };
        args.devid = devid;
        // SAFETY: the ioctl reads and writes exactly one DevInfoArgs, which lives until it
        // returns; the descriptor is open.
        let r = unsafe { libc::ioctl(dir.as_raw_fd(), BTRFS_IOC_DEV_INFO as _, &mut args) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENODEV) {
                continue;
            }
            return Err(e);
        }
        let path = CStr::from_bytes_until_nul(&args.path)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(DevInfo {
            devid: args.devid,
            bytes_used: args.bytes_used,
            total_bytes: args.total_bytes,
            path,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_number_is_the_kernel_headers() {
        assert_eq!(BTRFS_IOC_DEV_INFO, 0xD000_941E);
    }

    #[test]
    fn a_directory_that_is_not_btrfs_is_an_error_not_a_figure() {
        // procfs is never btrfs: ENOTTY (EINVAL on some kernels), never a zeroed answer.
        let e = dev_info(Path::new("/proc"), &[1]).unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
    }
}
