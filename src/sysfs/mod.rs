//! Readers of /sys under a root path given by the caller (`--path.sysfs`), and their pure parsers.
//! No metrics here: collectors turn what these return into series.

pub mod blockstat;
pub mod topology;

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
    let dev = sys.join("block").join(name);
    read_u64(&dev.join("queue").join("iostats")) != Some(0) || !dev.join("mq").is_dir()
}

/// The names of a directory's entries, sorted (the order /sys lists them in is not stable).
pub fn dir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

/// Reads a sysfs attribute as an unsigned integer.
pub fn read_u64(path: &Path) -> Option<u64> {
    read_attr(path)?.parse().ok()
}
