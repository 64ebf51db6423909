//! btrfs space allocation from `/sys/fs/btrfs/<uuid>/`: per block-group type (data, metadata,
//! system) the space allocated to chunks and used inside them, raw and logical, the profile, the
//! global reserve, and the devices. A btrfs says "No space left" while `df` shows free space when
//! every byte of its devices is allocated to data chunks and metadata can't get a new chunk:
//! what [`Btrfs::metadata_can_grow`] tells. Also each device's error counters
//! (`devinfo/<devid>/error_stats`, kernel 5.14 and later, parsed by [`super::error_stats`]).
//! Reads files under the sysfs root it is given; no ioctl (the one btrfs system call is
//! [`super::ioctl`]).

use super::error_stats::{ErrorCounts, ErrorStatsError, parse_error_stats};
use crate::sysfs::SysDir;
use std::path::Path;

/// One block-group type's allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allocation {
    /// Logical bytes in chunks of this type (what `btrfs filesystem df` calls total).
    pub total_bytes: u64,
    /// Logical bytes used inside those chunks.
    pub used_bytes: u64,
    /// Raw bytes those chunks take on the devices (total × the profile's copies).
    pub disk_total_bytes: u64,
    pub disk_used_bytes: u64,
    /// Profiles in use (`single`, `dup`, `raid1`…): more than one while a balance converts.
    pub profiles: Vec<String>,
    /// Size of a new chunk of this type, where the kernel says (5.19 and later).
    pub chunk_size_bytes: Option<u64>,
}

impl Allocation {
    /// Raw bytes a logical byte takes: 2 for dup and raid1, 3 for raid1c3…; 1 when unknown.
    pub fn copies(&self) -> u64 {
        if self.total_bytes > 0 && self.disk_total_bytes >= self.total_bytes {
            // Rounded to the nearest; the sum can pass u64::MAX with figures no real
            // filesystem has (a corrupt or hostile /sys), so it is taken in u128.
            ((u128::from(self.disk_total_bytes) + u128::from(self.total_bytes / 2))
                / u128::from(self.total_bytes)) as u64
        } else {
            1
        }
    }
    /// Allocated but unused logical bytes.
    pub fn free_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.used_bytes)
    }
}

/// One btrfs filesystem.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Btrfs {
    pub uuid: String,
    pub label: Option<String>,
    pub data: Allocation,
    pub metadata: Allocation,
    pub system: Allocation,
    pub global_reserve_bytes: u64,
    pub global_reserve_reserved_bytes: u64,
    /// Kernel names of its devices (`devices/`).
    pub devices: Vec<String>,
    /// Each device's error counters by devid (`devinfo/<devid>/error_stats`); empty on kernels
    /// without them (before 5.14). A file that could not be read is its device's error, not the
    /// filesystem's.
    pub device_errors: Vec<DeviceErrors>,
}

/// One device's error counters, or why they could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceErrors {
    pub devid: u64,
    pub counts: Result<ErrorCounts, ErrorStatsFileError>,
}

/// A device's `error_stats` that could not be read, named by its place under the filesystem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("devinfo/{devid}/error_stats: {error}")]
pub struct ErrorStatsFileError {
    pub devid: u64,
    pub error: ErrorStatsError,
}

/// Every device's counters under the filesystem's `devinfo/`, by devid; none where the kernel
/// has no `error_stats` (before 5.14).
fn device_errors(fs: &SysDir) -> Vec<DeviceErrors> {
    let Ok(devinfo) = fs.sub("devinfo") else {
        return Vec::new();
    };
    let mut ids: Vec<u64> = devinfo
        .names()
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.into_iter()
        .filter_map(|devid| {
            let dir = devinfo.sub(&devid.to_string()).ok()?;
            let text = dir.attr("error_stats");
            // No file: a kernel without the counters (no series, no error).
            let counts =
                parse_error_stats(&text?).map_err(|error| ErrorStatsFileError { devid, error });
            Some(DeviceErrors { devid, counts })
        })
        .collect()
}

/// A btrfs whose sysfs directory could not be read, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {reason}", dir.display())]
pub struct BtrfsError {
    pub uuid: String,
    pub dir: std::path::PathBuf,
    pub reason: BtrfsReason,
}

/// What was wrong in a filesystem's directory; `file` is the path under it
/// (`allocation/metadata/bytes_used`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BtrfsReason {
    /// The directory (`file` empty) or a subdirectory of it did not open.
    #[error("{}cannot open: {error}", if file.is_empty() { String::new() } else { format!("{file}: ") })]
    Open { file: String, error: String },
    #[error("{file}: missing or unreadable")]
    Missing { file: String },
    #[error("{file}: {value:?} is not a number")]
    NotANumber { file: String, value: String },
    #[error("{file}: used above total")]
    UsedAboveTotal { file: String },
}

impl BtrfsReason {
    fn open(file: &str, e: std::io::Error) -> Self {
        BtrfsReason::Open {
            file: file.to_string(),
            error: e.to_string(),
        }
    }
}

/// The number in `dir`'s `file`; errors name it as `at` + `file`.
fn num(dir: &SysDir, at: &str, file: &str) -> Result<u64, BtrfsReason> {
    let s = dir.attr(file).ok_or_else(|| BtrfsReason::Missing {
        file: format!("{at}{file}"),
    })?;
    s.parse().map_err(|_| BtrfsReason::NotANumber {
        file: format!("{at}{file}"),
        value: s,
    })
}

/// One block-group type's `allocation/<type>/`, its errors naming it as `at`.
fn allocation(dir: &SysDir, at: &str) -> Result<Allocation, BtrfsReason> {
    let profiles = dir.subdir_names().unwrap_or_default();
    let prefix = format!("{at}/");
    let a = Allocation {
        total_bytes: num(dir, &prefix, "total_bytes")?,
        used_bytes: num(dir, &prefix, "bytes_used")?,
        disk_total_bytes: num(dir, &prefix, "disk_total")?,
        disk_used_bytes: num(dir, &prefix, "disk_used")?,
        profiles,
        chunk_size_bytes: num(dir, &prefix, "chunk_size").ok(),
    };
    if a.used_bytes > a.total_bytes || a.disk_used_bytes > a.disk_total_bytes {
        return Err(BtrfsReason::UsedAboveTotal {
            file: at.to_string(),
        });
    }
    Ok(a)
}

/// Reads one filesystem's directory.
pub fn read_one(dir: &Path, uuid: &str) -> Result<Btrfs, BtrfsError> {
    let err = |reason: BtrfsReason| BtrfsError {
        uuid: uuid.to_string(),
        dir: dir.to_path_buf(),
        reason,
    };
    let fs = SysDir::open(dir).map_err(|e| err(BtrfsReason::open("", e)))?;
    let alloc = fs
        .sub("allocation")
        .map_err(|e| err(BtrfsReason::open("allocation", e)))?;
    read_open(&fs, &alloc, uuid)
}

/// One filesystem's directory and its `allocation/`, held open: its files are opened relative
/// to them (about 20 files a filesystem), so its long path is walked once.
fn read_open(fs: &SysDir, alloc: &SysDir, uuid: &str) -> Result<Btrfs, BtrfsError> {
    let err = |reason: BtrfsReason| BtrfsError {
        uuid: uuid.to_string(),
        dir: fs.path().to_path_buf(),
        reason,
    };
    let typed = |t: &str| {
        let at = format!("allocation/{t}");
        let d = alloc.sub(t).map_err(|e| err(BtrfsReason::open(&at, e)))?;
        allocation(&d, &at).map_err(err)
    };
    Ok(Btrfs {
        uuid: uuid.to_string(),
        label: fs.attr("label").filter(|l| !l.is_empty()),
        data: typed("data")?,
        metadata: typed("metadata")?,
        system: typed("system")?,
        global_reserve_bytes: num(alloc, "allocation/", "global_rsv_size").map_err(err)?,
        global_reserve_reserved_bytes: num(alloc, "allocation/", "global_rsv_reserved")
            .unwrap_or(0),
        devices: fs
            .sub("devices")
            .and_then(|d| d.names())
            .unwrap_or_default(),
        device_errors: device_errors(fs),
    })
}

/// Every btrfs under `<sys>/fs/btrfs` (none when btrfs is not loaded), and those that could
/// not be read.
pub fn read_all(sys: &Path) -> (Vec<Btrfs>, Vec<BtrfsError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let Ok(base) = SysDir::open(&sys.join("fs").join("btrfs")) else {
        return (out, errors);
    };
    for name in base.names().unwrap_or_default() {
        // Beside the filesystems: `features/`, and files such as `debug`.
        if name == "features" {
            continue;
        }
        // A filesystem has `allocation/`; anything else here is passed over.
        let Ok(fs) = base.sub(&name) else {
            continue;
        };
        let Ok(alloc) = fs.sub("allocation") else {
            continue;
        };
        match read_open(&fs, &alloc, &name) {
            Ok(b) => out.push(b),
            Err(e) => errors.push(e),
        }
    }
    (out, errors)
}

impl Btrfs {
    /// Raw bytes allocated to chunks of any type.
    pub fn allocated_raw_bytes(&self) -> u64 {
        self.data
            .disk_total_bytes
            .saturating_add(self.metadata.disk_total_bytes)
            .saturating_add(self.system.disk_total_bytes)
    }

    /// Whether metadata can still get a new chunk from `unallocated_bytes` (raw, on all
    /// devices): one metadata chunk times its copies. The chunk size is the kernel's where it
    /// says (`chunk_size`), else 256 MiB; either way the kernel caps a chunk at a tenth of the
    /// filesystem (`max_chunk_size` in volumes.c), which on a small filesystem is less.
    pub fn metadata_can_grow(&self, unallocated_bytes: u64, size_bytes: u64) -> bool {
        let chunk = self
            .metadata
            .chunk_size_bytes
            .unwrap_or(256 << 20)
            .min(size_bytes / 10)
            .max(1 << 20);
        unallocated_bytes >= chunk.saturating_mul(self.metadata.copies())
    }

    /// Logical bytes data can still take: free space in data chunks plus what the unallocated
    /// space gives at the data profile's copies.
    pub fn data_allocatable_bytes(&self, unallocated_bytes: u64) -> u64 {
        self.data
            .free_bytes()
            .saturating_add(unallocated_bytes / self.data.copies())
    }

    /// Whether the filesystem is out of metadata space in effect: metadata can't get a new
    /// chunk and the room left in its chunks is within the global reserve (which only the
    /// kernel's own transactions may use), so ordinary writes soon fail with ENOSPC.
    pub fn metadata_exhausted(&self, unallocated_bytes: u64, size_bytes: u64) -> bool {
        !self.metadata_can_grow(unallocated_bytes, size_bytes)
            && self.metadata.free_bytes() <= self.global_reserve_bytes.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, v: &str) {
        let p = dir.join(file);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{v}\n")).unwrap();
    }

    /// The layout of a real 400 MiB single-device btrfs (kernel 6.18, btrfs-progs 6.2 defaults:
    /// data single, metadata dup), right after mkfs.
    fn fresh(sys: &Path, uuid: &str) -> std::path::PathBuf {
        let d = sys.join("fs/btrfs").join(uuid);
        for (t, total, used, dt, du, profile) in [
            ("data", 8388608, 0, 8388608, 0, "single"),
            ("metadata", 33554432, 131072, 67108864, 262144, "dup"),
            ("system", 8388608, 16384, 16777216, 32768, "dup"),
        ] {
            let a = d.join("allocation").join(t);
            write(&a, "total_bytes", &total.to_string());
            write(&a, "bytes_used", &used.to_string());
            write(&a, "disk_total", &dt.to_string());
            write(&a, "disk_used", &du.to_string());
            write(&a.join(profile), "total_bytes", &total.to_string());
        }
        write(&d.join("allocation"), "global_rsv_size", "5767168");
        write(&d.join("allocation"), "global_rsv_reserved", "5767168");
        write(&d, "label", "");
        std::fs::create_dir_all(d.join("devices")).unwrap();
        std::fs::write(d.join("devices/loop0"), "").unwrap();
        std::fs::create_dir_all(sys.join("fs/btrfs/features")).unwrap();
        d
    }

    #[test]
    fn a_fresh_filesystem_reads_every_type_and_profile() {
        let t = tempfile::tempdir().unwrap();
        fresh(t.path(), "aa86b6af-3d8b-4fd7-a9c6-a654897f2a8d");
        let (all, errors) = read_all(t.path());
        assert!(errors.is_empty(), "{errors:?}");
        let b = &all[0];
        assert_eq!(b.uuid, "aa86b6af-3d8b-4fd7-a9c6-a654897f2a8d");
        assert_eq!(b.label, None);
        assert_eq!(b.data.profiles, ["single"]);
        assert_eq!(b.metadata.profiles, ["dup"]);
        assert_eq!(b.metadata.copies(), 2);
        assert_eq!(b.data.copies(), 1);
        assert_eq!(b.allocated_raw_bytes(), 8388608 + 67108864 + 16777216);
        assert_eq!(b.global_reserve_bytes, 5767168);
        assert_eq!(b.devices, ["loop0"]);
        let size = 400 << 20;
        let unallocated = size - b.allocated_raw_bytes();
        assert!(b.metadata_can_grow(unallocated, size));
        assert_eq!(b.data_allocatable_bytes(unallocated), 8388608 + unallocated);
        assert!(!b.metadata_exhausted(unallocated, size));
    }

    #[test]
    fn all_space_in_data_chunks_leaves_metadata_unable_to_grow() {
        let t = tempfile::tempdir().unwrap();
        let d = fresh(t.path(), "u");
        // Metadata chunks nearly full (within twice the reserve), nothing unallocated.
        write(&d.join("allocation/metadata"), "bytes_used", "27000000");
        let b = read_one(&d, "u").unwrap();
        assert!(!b.metadata_can_grow(0, 400 << 20));
        assert!(b.metadata_exhausted(0, 400 << 20));
        // 100 MiB unallocated still takes a 2 × 40 MiB dup chunk.
        assert!(b.metadata_can_grow(100 << 20, 400 << 20));
    }

    #[test]
    fn missing_or_malformed_files_name_the_file_and_the_rest_is_read() {
        let t = tempfile::tempdir().unwrap();
        fresh(t.path(), "good");
        let bad = fresh(t.path(), "bad");
        write(&bad.join("allocation/metadata"), "bytes_used", "lots");
        let worse = fresh(t.path(), "worse");
        std::fs::remove_file(worse.join("allocation/data/disk_total")).unwrap();
        let used_above = fresh(t.path(), "used-above");
        write(
            &used_above.join("allocation/data"),
            "bytes_used",
            "99999999999",
        );
        let (all, errors) = read_all(t.path());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].uuid, "good");
        let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(
            msgs[0].ends_with("allocation/metadata/bytes_used: \"lots\" is not a number"),
            "{msgs:?}"
        );
        assert!(
            msgs[1].ends_with("allocation/data: used above total"),
            "{msgs:?}"
        );
        assert!(
            msgs[2].ends_with("allocation/data/disk_total: missing or unreadable"),
            "{msgs:?}"
        );
    }

    #[test]
    fn raw_figures_near_the_top_of_u64_give_copies_without_overflow() {
        // A disk_total of u64::MAX (a mutated tree): the copies are a figure, not a panic.
        let a = Allocation {
            total_bytes: 142606336,
            disk_total_bytes: u64::MAX,
            ..Default::default()
        };
        assert_eq!(a.copies(), 129_354_309_150);
        let b = Btrfs {
            data: a.clone(),
            metadata: a,
            ..Default::default()
        };
        assert_eq!(b.allocated_raw_bytes(), u64::MAX);
        assert!(b.data_allocatable_bytes(u64::MAX) > 0);
        assert!(!b.metadata_can_grow(0, u64::MAX));
    }

    #[test]
    fn the_real_capture_reads_as_btrfs_progs_said() {
        // tests/fixtures/layers/SOURCES.md: a 512 MiB btrfs with 96 MiB written.
        let sys = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layers/btrfs-sysfs");
        let (all, errors) = read_all(&sys);
        assert!(errors.is_empty(), "{errors:?}");
        let b = &all[0];
        assert_eq!(b.label.as_deref(), Some("pgdata"));
        assert_eq!(b.devices, ["loop0"]);
        assert_eq!(
            b.device_errors,
            [DeviceErrors {
                devid: 1,
                counts: Ok(ErrorCounts::default())
            }]
        );
        assert_eq!(b.data.profiles, ["single"]);
        assert_eq!(
            (b.data.total_bytes, b.data.used_bytes),
            (142606336, 100663296)
        );
        assert_eq!(b.metadata.copies(), 2);
        assert_eq!(b.allocated_raw_bytes(), 226492416, "Device allocated");
        let unallocated = (512 << 20) - b.allocated_raw_bytes();
        assert_eq!(unallocated, 310378496, "Device unallocated");
        // Its 256 MiB metadata chunks are capped at a tenth of the filesystem: two copies of
        // 51 MiB fit in the 296 MiB unallocated.
        assert!(b.metadata_can_grow(unallocated, 512 << 20));
        assert!(!b.metadata_can_grow(100 << 20, 512 << 20));
    }

    #[test]
    fn device_error_counters_read_per_devid_and_a_bad_file_is_its_devices_error() {
        let t = tempfile::tempdir().unwrap();
        let d = fresh(t.path(), "u");
        // A two-device filesystem: devid 1 has seen corruption, devid 3's file is garbage, and
        // devid 2 is on a kernel path without the file (no counters, no error).
        write(
            &d.join("devinfo/1"),
            "error_stats",
            "write_errs 0\nread_errs 2\nflush_errs 0\ncorruption_errs 7\ngeneration_errs 1",
        );
        std::fs::create_dir_all(d.join("devinfo/2")).unwrap();
        write(&d.join("devinfo/3"), "error_stats", "write_errs lots");
        let b = read_one(&d, "u").unwrap();
        assert_eq!(b.device_errors.len(), 2, "{:?}", b.device_errors);
        assert_eq!(b.device_errors[0].devid, 1);
        assert_eq!(
            b.device_errors[0].counts,
            Ok(ErrorCounts {
                write: 0,
                read: 2,
                flush: 0,
                corruption: 7,
                generation: 1
            })
        );
        assert_eq!(b.device_errors[1].devid, 3);
        assert_eq!(
            b.device_errors[1].counts,
            Err(ErrorStatsFileError {
                devid: 3,
                error: ErrorStatsError::NotACount {
                    line: 1,
                    key: "write_errs".into(),
                    value: "lots".into()
                }
            })
        );
        assert_eq!(
            b.device_errors[1].counts.as_ref().unwrap_err().to_string(),
            "devinfo/3/error_stats: line 1: write_errs \"lots\" is not a count"
        );
    }

    #[test]
    fn no_btrfs_module_is_no_filesystem() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read_all(t.path()), (vec![], vec![]));
    }
}
