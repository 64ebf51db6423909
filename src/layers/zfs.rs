//! ZFS pools and datasets from the stable scripting output of `zpool list -Hp` and `zfs list
//! -Hp` (tab-separated, exact numbers): each pool's size, allocation, fragmentation and health,
//! each dataset's use, availability, quota and reservation. Pure; running the commands is the
//! collector's. A dataset's `available` already counts the pool's free space (shared by every
//! dataset of the pool), so the datasets' figures are never added up.

use crate::label::label_form;

/// The columns asked of `zpool list`, in order.
pub const ZPOOL_COLUMNS: &str =
    "name,size,allocated,free,fragmentation,capacity,health,checkpoint,expandsize";
/// The columns asked of `zfs list`, in order.
pub const ZFS_COLUMNS: &str = "name,used,available,referenced,quota,reservation,mountpoint";

/// The health states `zpool list` reports.
pub const HEALTH_STATES: &[&str] = &[
    "ONLINE",
    "DEGRADED",
    "FAULTED",
    "OFFLINE",
    "UNAVAIL",
    "REMOVED",
    "SUSPENDED",
];

/// A pool, as `zpool list -Hp` reports it. Names and mount points are in their label form
/// ([`label_form`]), as the mount table's are, so a dataset still meets its mount and a control
/// character in a name never reaches a terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    pub size_bytes: u64,
    pub allocated_bytes: u64,
    pub free_bytes: u64,
    /// Fragmentation of the free space, 0..1; unknown on pools without spacemap histograms.
    pub fragmentation_ratio: Option<f64>,
    /// Allocated ÷ size as zpool rounds it, 0..1.
    pub capacity_ratio: Option<f64>,
    pub health: String,
    /// Space held by a checkpoint (0 without one).
    pub checkpoint_bytes: u64,
    /// Space the pool could grow into (0 when none).
    pub expandable_bytes: u64,
}

/// A dataset (filesystem or volume), as `zfs list -Hp` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub pool: String,
    pub used_bytes: u64,
    pub available_bytes: u64,
    pub referenced_bytes: u64,
    /// None: no quota.
    pub quota_bytes: Option<u64>,
    pub reservation_bytes: u64,
    /// Where it is mounted; None for volumes and unmounted or legacy filesystems.
    pub mountpoint: Option<String>,
}

/// A line that could not be read, with its number (1-based).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what} line {line}: {reason}")]
pub struct LineError {
    pub what: &'static str,
    pub line: usize,
    pub reason: LineReason,
}

/// Why a line of `zpool list -Hp` or `zfs list -Hp` was not read; the value it names is the
/// field as printed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineReason {
    #[error("{0:?} is not a byte count (zpool/zfs run without -p?)")]
    NotBytes(String),
    #[error("{0:?} is not a percentage")]
    NotPercentage(String),
    #[error("{got} fields, expected {expected}")]
    Fields { got: usize, expected: usize },
    #[error("unknown health {0:?}")]
    UnknownHealth(String),
    #[error("empty dataset name")]
    EmptyDatasetName,
    #[error("mountpoint {0:?} is not a path")]
    MountpointNotAPath(String),
}

/// `-` (none) and `0` of an optional size both mean "not set".
fn none_or_bytes(s: &str) -> Result<Option<u64>, LineReason> {
    match s {
        "-" | "none" | "0" => Ok(None),
        _ => bytes(s).map(Some),
    }
}

fn bytes(s: &str) -> Result<u64, LineReason> {
    s.parse().map_err(|_| LineReason::NotBytes(s.to_string()))
}

fn percent(s: &str) -> Result<Option<f64>, LineReason> {
    match s.trim_end_matches('%') {
        "-" => Ok(None),
        v => v
            .parse::<u64>()
            .ok()
            .filter(|p| *p <= 100)
            .map(|p| Some(p as f64 / 100.0))
            .ok_or_else(|| LineReason::NotPercentage(s.to_string())),
    }
}

fn fields(line: &str, n: usize) -> Result<Vec<&str>, LineReason> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() == n {
        Ok(f)
    } else {
        Err(LineReason::Fields {
            got: f.len(),
            expected: n,
        })
    }
}

/// Parses every non-empty line of `text` with `parse`; a bad line is an error of its own, named
/// with `what` and its number, and the rest are still read.
fn parse_all<T>(
    text: &str,
    what: &'static str,
    parse: fn(&str) -> Result<T, LineReason>,
) -> (Vec<T>, Vec<LineError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        match parse(line) {
            Ok(x) => out.push(x),
            Err(reason) => errors.push(LineError {
                what,
                line: i + 1,
                reason,
            }),
        }
    }
    (out, errors)
}

/// Parses `zpool list -Hp -o` [`ZPOOL_COLUMNS`].
pub fn parse_pools(text: &str) -> (Vec<Pool>, Vec<LineError>) {
    parse_all(text, "zpool list", parse_pool)
}

fn parse_pool(line: &str) -> Result<Pool, LineReason> {
    let f = fields(line, 9)?;
    let health = f[6].to_string();
    if !HEALTH_STATES.contains(&health.as_str()) {
        return Err(LineReason::UnknownHealth(health));
    }
    Ok(Pool {
        name: label_form(f[0].as_bytes()),
        size_bytes: bytes(f[1])?,
        allocated_bytes: bytes(f[2])?,
        free_bytes: bytes(f[3])?,
        fragmentation_ratio: percent(f[4])?,
        capacity_ratio: percent(f[5])?,
        health,
        checkpoint_bytes: none_or_bytes(f[7])?.unwrap_or(0),
        expandable_bytes: none_or_bytes(f[8])?.unwrap_or(0),
    })
}

/// Parses `zfs list -Hp -o` [`ZFS_COLUMNS`].
pub fn parse_datasets(text: &str) -> (Vec<Dataset>, Vec<LineError>) {
    parse_all(text, "zfs list", parse_dataset)
}

fn parse_dataset(line: &str) -> Result<Dataset, LineReason> {
    let f = fields(line, 7)?;
    let name = f[0];
    if name.is_empty() {
        return Err(LineReason::EmptyDatasetName);
    }
    let pool = label_form(name.split('/').next().unwrap_or(name).as_bytes());
    let mountpoint = match f[6] {
        "-" | "none" | "legacy" => None,
        m if m.starts_with('/') => Some(label_form(m.as_bytes())),
        m => return Err(LineReason::MountpointNotAPath(m.to_string())),
    };
    Ok(Dataset {
        name: label_form(name.as_bytes()),
        pool,
        used_bytes: bytes(f[1])?,
        available_bytes: bytes(f[2])?,
        referenced_bytes: bytes(f[3])?,
        quota_bytes: none_or_bytes(f[4])?,
        reservation_bytes: none_or_bytes(f[5])?.unwrap_or(0),
        mountpoint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real outputs of OpenZFS 2.1.11 (tests/fixtures/layers/SOURCES.md): a pool filled until its
    /// datasets had no room, a degraded mirror; datasets with a quota and a reservation.
    const ZPOOL: &str = include_str!("../../tests/fixtures/layers/zpool-list.txt");
    const ZFS: &str = include_str!("../../tests/fixtures/layers/zfs-list.txt");

    #[test]
    fn pools_read_every_column() {
        let (pools, errors) = parse_pools(ZPOOL);
        assert!(errors.is_empty(), "{errors:?}");
        let t = pools.iter().find(|p| p.name == "tank").unwrap();
        assert_eq!(t.size_bytes, 1006632960);
        assert_eq!(t.allocated_bytes, 872407040);
        assert_eq!(t.free_bytes, 134225920);
        assert_eq!(t.fragmentation_ratio, Some(0.64));
        assert_eq!(t.capacity_ratio, Some(0.86));
        assert_eq!(t.health, "ONLINE");
        assert_eq!(t.checkpoint_bytes, 0);
        assert_eq!(t.expandable_bytes, 0);
        let safe = pools.iter().find(|p| p.name == "safe").unwrap();
        assert_eq!(safe.health, "DEGRADED");
        assert_eq!(safe.capacity_ratio, Some(0.0));
        // A checkpoint and room to expand, as zpool prints them when there are.
        let (p, _) = parse_pools(
            "tank\t1006632960\t838467584\t168165376\t6\t83\tONLINE\t1228800\t536870912\n",
        );
        assert_eq!(
            (p[0].checkpoint_bytes, p[0].expandable_bytes),
            (1228800, 536870912)
        );
    }

    #[test]
    fn datasets_know_their_pool_quota_and_reservation() {
        let (ds, errors) = parse_datasets(ZFS);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(ds.len(), 4);
        let by = |n: &str| ds.iter().find(|d| d.name == n).unwrap();
        let pg = by("tank/pg");
        assert_eq!(pg.pool, "tank");
        assert_eq!(pg.used_bytes, 854802432);
        assert_eq!(pg.available_bytes, 8192);
        assert_eq!(pg.quota_bytes, None);
        assert_eq!(pg.reservation_bytes, 32 << 20);
        assert_eq!(pg.mountpoint.as_deref(), Some("/tank/pg"));
        let logs = by("tank/logs");
        assert_eq!(logs.quota_bytes, Some(48 << 20));
        assert_eq!(logs.used_bytes, 16883712);
        assert_eq!(by("safe").available_bytes, 58339328);
        // A volume: no mount point, no quota ("-").
        let (v, errors) = parse_datasets("tank/vol\t91750400\t229277696\t57344\t-\t91750400\t-\n");
        assert!(errors.is_empty());
        assert_eq!((v[0].mountpoint.as_deref(), v[0].quota_bytes), (None, None));
    }

    #[test]
    fn garbage_lines_are_errors_with_their_number_and_the_rest_is_read() {
        let text = format!(
            "hello world\n{ZPOOL}tank2\t1K\t0\t0\t-\t-\tONLINE\t-\t-\nx\t1\t1\t1\t1\t1\tHAPPY\t-\t-\n"
        );
        let (pools, errors) = parse_pools(&text);
        assert_eq!(pools.len(), 2);
        assert_eq!(errors.len(), 3);
        assert_eq!(errors[0].line, 1);
        assert!(
            errors[0]
                .to_string()
                .contains("zpool list line 1: 1 fields, expected 9")
        );
        assert!(
            errors[1].reason.to_string().contains("without -p"),
            "{errors:?}"
        );
        assert!(errors[2].reason.to_string().contains("HAPPY"));
        let (_, errors) = parse_pools("t\t1\t1\t1\t101\t1\tONLINE\t-\t-\n");
        assert!(errors[0].reason.to_string().contains("not a percentage"));
        let (_, errors) = parse_datasets("t\t1\t1\t1\t0\t0\trelative/path\n");
        assert!(errors[0].reason.to_string().contains("not a path"));
    }
}
