//! Readers of /sys under a root path given by the caller (`--path.sysfs`), and their pure parsers.
//! No metrics here: collectors turn what these return into series.

pub mod blockstat;
pub mod btrfs;
pub mod cgroup;
pub mod md;
pub mod topology;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Reads a sysfs attribute, trimmed; `None` when absent or unreadable (sysfs attributes come and go
/// with drivers and kernel versions, so a missing one is normal, not an error).
pub fn read_attr(path: &Path) -> Option<String> {
    let s = std::fs::read(path).ok()?;
    // Some attributes (e.g. SCSI vpd pages) carry binary bytes; keep the printable part.
    let text = String::from_utf8_lossy(&s);
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    Some(t.to_string())
}

/// Whether the kernel accounts I/O statistics for the block device `name` (`queue/iostats`).
/// Some database hosts turn it off for speed; the device's stat counters then stay frozen, so
/// busy time, idle time and utilization derived from them are unknown rather than zero.
/// Only blk-mq devices (those with an `mq` directory: NVMe, SCSI, virtio, loop) are taken at
/// their word: bio-based dm and md devices read 0 there on older kernels (before 6.5 for dm)
/// while counting all the same. A device without the attribute counts as accounted.
pub fn iostats_enabled(sys: &Path, name: &str) -> bool {
    let dev = sys.join("block").join(name_path(name));
    read_u64(&dev.join("queue").join("iostats")) != Some(0) || !dev.join("mq").is_dir()
}

/// The names of a directory's entries in their label form ([`name_label`]), sorted (the order
/// /sys lists them in is not stable).
pub fn dir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    names_where(dir, |_| true)
}

/// The names of the directories in `dir`, sorted, as [`dir_names`] gives them. The type comes
/// with the directory listing (no stat of each entry); a symlink is not a directory here.
pub fn subdir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    names_where(dir, |e| e.file_type().is_ok_and(|t| t.is_dir()))
}

fn names_where(
    dir: &Path,
    keep: impl Fn(&std::fs::DirEntry) -> bool,
) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| keep(e))
        .map(|e| name_label(&e.file_name()))
        .collect();
    v.sort();
    Ok(v)
}

/// A /sys entry's name as a label and map key: UTF-8 as is, any byte that is not valid UTF-8 as
/// `\xNN` (as mount points are labelled), and a backslash as `\x5c`, so the label turns back
/// into the exact bytes ([`name_path`]) and two names never share one. Kernel names are ASCII in
/// practice; one that is not (a driver's, a fixture's) must neither lose its device its series
/// (read through a lossy name, its files are not found) nor merge two devices.
pub fn name_label(raw: &OsStr) -> String {
    crate::label::label_form(raw.as_bytes())
}

pub use crate::label::name_path;

/// Reads a sysfs attribute as an unsigned integer.
pub fn read_u64(path: &Path) -> Option<u64> {
    read_attr(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_is_labelled_with_escapes_and_turns_back_into_its_bytes() {
        for (raw, label) in [
            (&b"sda"[..], "sda"),
            (b"sd\xff", "sd\\xff"),
            (b"nbd\xc3(", "nbd\\xc3("),
            (b"b\\xff", "b\\x5cxff"), // a literal backslash can't pass for an escape
            ("d\u{e9}v".as_bytes(), "d\u{e9}v"),
        ] {
            let os = OsStr::from_bytes(raw);
            assert_eq!(name_label(os), label);
            assert_eq!(name_path(label), os, "{label}");
        }
    }
}
