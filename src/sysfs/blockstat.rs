//! Parser of `/sys/block/<dev>/stat` (Documentation/block/stat.rst).
//! 11 fields on every kernel, 15 since 4.18 (discards), 17 since 5.5 (flushes).
//! Sector counts there are always in 512-byte units, whatever the device's block size.

use std::path::{Path, PathBuf};

/// Bytes per sector in /sys/block/*/stat, fixed by the kernel ABI.
pub const STAT_SECTOR_BYTES: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockStat {
    pub reads_completed: u64,
    pub reads_merged: u64,
    pub read_sectors: u64,
    pub read_time_ms: u64,
    pub writes_completed: u64,
    pub writes_merged: u64,
    pub write_sectors: u64,
    pub write_time_ms: u64,
    pub in_flight: u64,
    pub io_time_ms: u64,
    pub weighted_io_time_ms: u64,
    /// Present on kernels ≥ 4.18.
    pub discard: Option<DiscardStat>,
    /// Present on kernels ≥ 5.5.
    pub flush: Option<FlushStat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiscardStat {
    pub completed: u64,
    pub merged: u64,
    pub sectors: u64,
    pub time_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushStat {
    pub completed: u64,
    pub time_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatParseError {
    #[error("expected at least 11 fields, found {0}")]
    TooFewFields(usize),
    #[error("field {index} is not a number: {value:?}")]
    NotANumber { index: usize, value: String },
}

/// Parses the single line of a block device's `stat` file.
pub fn parse_block_stat(text: &str) -> Result<BlockStat, StatParseError> {
    let mut f = Vec::with_capacity(17);
    for (i, tok) in text.split_ascii_whitespace().enumerate() {
        let v = tok.parse::<u64>().map_err(|_| StatParseError::NotANumber {
            index: i + 1,
            value: tok.chars().take(40).collect(),
        })?;
        f.push(v);
    }
    if f.len() < 11 {
        return Err(StatParseError::TooFewFields(f.len()));
    }
    Ok(BlockStat {
        reads_completed: f[0],
        reads_merged: f[1],
        read_sectors: f[2],
        read_time_ms: f[3],
        writes_completed: f[4],
        writes_merged: f[5],
        write_sectors: f[6],
        write_time_ms: f[7],
        in_flight: f[8],
        io_time_ms: f[9],
        weighted_io_time_ms: f[10],
        discard: (f.len() >= 15).then(|| DiscardStat {
            completed: f[11],
            merged: f[12],
            sectors: f[13],
            time_ms: f[14],
        }),
        flush: (f.len() >= 17).then(|| FlushStat {
            completed: f[15],
            time_ms: f[16],
        }),
    })
}

/// One device's parsed stat file, and whether the kernel accounts its I/O.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStat {
    pub name: String,
    pub stat: BlockStat,
    /// `queue/iostats` (see [`super::iostats_enabled`]); when off, the counters stay frozen and
    /// busy time, idle time and utilization are unknown.
    pub iostats: bool,
}

/// A device's stat file that can't be read or parsed; names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadStatError {
    #[error("{}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: {cause}", path.display())]
    Parse {
        path: PathBuf,
        cause: StatParseError,
    },
}

/// Reads and parses `<sys>/block/<name>/stat`.
pub fn read_one(sys: &Path, name: &str) -> Result<DeviceStat, ReadStatError> {
    let path = sys.join("block").join(super::name_path(name)).join("stat");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(cause) => return Err(ReadStatError::Read { path, cause }),
    };
    let stat = match parse_block_stat(&text) {
        Ok(s) => s,
        Err(cause) => return Err(ReadStatError::Parse { path, cause }),
    };
    Ok(DeviceStat {
        name: name.to_string(),
        stat,
        iostats: super::iostats_enabled(sys, name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn eleven_fields_old_kernel() {
        let s = parse_block_stat("  4 1 80 2 10 0 160 7 0 9 9\n").unwrap();
        assert_eq!(s.read_sectors, 80);
        assert_eq!(s.io_time_ms, 9);
        assert_eq!(s.discard, None);
        assert_eq!(s.flush, None);
    }

    #[test]
    fn fifteen_fields_with_discards() {
        let s = parse_block_stat("1 2 3 4 5 6 7 8 0 10 11 12 13 14 15").unwrap();
        assert_eq!(
            s.discard,
            Some(DiscardStat {
                completed: 12,
                merged: 13,
                sectors: 14,
                time_ms: 15
            })
        );
        assert_eq!(s.flush, None);
    }

    #[test]
    fn seventeen_fields_with_flushes() {
        // A real line from a loop device after fstrim on 6.x.
        let s = parse_block_stat(
            "     338        0    18126      104    12361     1432  1043592    12260        0     2896    12451       19        0   407544        1        0        0\n",
        )
        .unwrap();
        assert_eq!(s.write_sectors, 1_043_592);
        assert_eq!(s.discard.unwrap().sectors, 407_544);
        assert_eq!(s.flush.unwrap().completed, 0);
    }

    #[test]
    fn too_few_and_garbage_are_errors() {
        assert_eq!(
            parse_block_stat("1 2 3"),
            Err(StatParseError::TooFewFields(3))
        );
        assert!(matches!(
            parse_block_stat("1 2 3 x 5 6 7 8 9 10 11"),
            Err(StatParseError::NotANumber { index: 4, .. })
        ));
        assert_eq!(parse_block_stat(""), Err(StatParseError::TooFewFields(0)));
    }

    proptest! {
        #[test]
        fn any_numbers_roundtrip(fields in proptest::collection::vec(any::<u64>(), 11..20)) {
            let line = fields.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ");
            let s = parse_block_stat(&line).unwrap();
            prop_assert_eq!(s.reads_completed, fields[0]);
            prop_assert_eq!(s.weighted_io_time_ms, fields[10]);
            prop_assert_eq!(s.discard.is_some(), fields.len() >= 15);
            prop_assert_eq!(s.flush.is_some(), fields.len() >= 17);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,200}") {
            let _ = parse_block_stat(&text);
        }
    }
}
