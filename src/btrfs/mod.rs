//! Everything btrfs in one place: what a btrfs has allocated and where, and each device's error
//! counters. No metrics here (the layers collector turns these into series).
//!
//! Which part does I/O and which is pure:
//! - [`sysfs`] reads `/sys/fs/btrfs/<uuid>/` under the sysfs root it is given (allocation per
//!   block-group type, global reserve, devices, `devinfo/<devid>/error_stats`).
//! - [`ioctl`] is the one system call: `BTRFS_IOC_DEV_INFO` on a mounted filesystem, for the
//!   per-device allocation sysfs lacks. It may hang like statvfs: callers run it through the door.
//! - [`error_stats`] parses sysfs' `error_stats` file and holds the counters' model. Pure.
//! - [`device_stats`] parses `btrfs device stats` output, the same counters on kernels before
//!   5.14. Pure: running the tool (through the privileged helper, as it needs CAP_SYS_ADMIN) is
//!   the layers collector's, and which mounts it may run on is the helper's spec
//!   (`privileged::spec`).

pub mod device_stats;
pub mod error_stats;
pub mod ioctl;
pub mod sysfs;
