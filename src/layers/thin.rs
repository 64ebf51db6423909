//! Device-mapper thin provisioning, from the output of `dmsetup table` and `dmsetup status`: each
//! thin pool's data and metadata use and mode, and each thin volume's pool and size. Pure: the
//! text in, the pools out; running dmsetup is the collector's. Field meanings follow the kernel's
//! Documentation/admin-guide/device-mapper/thin-provisioning.rst.

use crate::label::label_form;
use std::collections::BTreeMap;

/// Thin-pool metadata blocks are always 4 KiB (the kernel's THIN_METADATA_BLOCK_SIZE).
pub const METADATA_BLOCK_BYTES: u64 = 4096;
/// Device-mapper lengths and block sizes are in 512-byte sectors.
const SECTOR_BYTES: u64 = 512;

/// One line of `dmsetup table` or `dmsetup status` for all devices: `name: start length target
/// args…`.
#[derive(Debug, Clone, PartialEq)]
pub struct DmLine<'a> {
    pub name: &'a str,
    pub start: u64,
    pub length_sectors: u64,
    pub target: &'a str,
    pub args: &'a str,
}

/// A line that could not be read, with its number (1-based) in the output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}: {text:?}")]
pub struct LineError {
    pub line: usize,
    pub reason: &'static str,
    pub text: String,
}

/// Splits dmsetup's output for all devices into lines; "No devices found" is no line. A device
/// of several segments prints one line per segment, each with its name.
pub fn parse_lines(text: &str) -> (Vec<DmLine<'_>>, Vec<LineError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.is_empty() || line == "No devices found" {
            continue;
        }
        match parse_line(line) {
            Ok(l) => out.push(l),
            Err(reason) => errors.push(LineError {
                line: i + 1,
                reason,
                text: line.chars().take(200).collect(),
            }),
        }
    }
    (out, errors)
}

fn parse_line(line: &str) -> Result<DmLine<'_>, &'static str> {
    // dmsetup writes "name: " before each line when it lists every device.
    let (name, rest) = line.split_once(": ").ok_or("no device name")?;
    let mut it = rest.splitn(4, ' ');
    let start = it.next().and_then(|s| s.parse().ok()).ok_or("bad start")?;
    let length_sectors = it.next().and_then(|s| s.parse().ok()).ok_or("bad length")?;
    let target = it.next().filter(|t| !t.is_empty()).ok_or("no target")?;
    Ok(DmLine {
        name,
        start,
        length_sectors,
        target,
        args: it.next().unwrap_or(""),
    })
}

/// A thin pool's table line: where its data and metadata live and its fixed settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolTable {
    pub metadata_dev: String,
    pub data_dev: String,
    pub data_block_sectors: u64,
    /// `error_if_no_space`: writes fail at once when the data space is gone; otherwise they
    /// queue (for 60 s by default, then fail).
    pub error_if_no_space: bool,
    pub read_only: bool,
}

/// Parses the arguments of a `thin-pool` table line:
/// `<metadata dev> <data dev> <data block size> <low water mark> [<#features> <feature>…]`.
pub fn parse_pool_table(args: &str) -> Result<PoolTable, &'static str> {
    let f: Vec<&str> = args.split_whitespace().collect();
    if f.len() < 4 {
        return Err("thin-pool table: fewer than 4 fields");
    }
    let data_block_sectors: u64 = f[2]
        .parse()
        .ok()
        .filter(|b| *b > 0)
        .ok_or("thin-pool table: bad data block size")?;
    let features = &f[4.min(f.len())..];
    let has = |name: &str| features.iter().skip(1).any(|x| *x == name);
    Ok(PoolTable {
        metadata_dev: f[0].to_string(),
        data_dev: f[1].to_string(),
        data_block_sectors,
        error_if_no_space: has("error_if_no_space"),
        read_only: has("read_only"),
    })
}

/// The mode a pool reports in its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    ReadWrite,
    ReadOnly,
    OutOfDataSpace,
    /// The pool failed (`Fail`): no I/O at all.
    Failed,
}

/// A thin pool's status line.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolStatus {
    pub transaction_id: u64,
    pub metadata_used_blocks: u64,
    pub metadata_total_blocks: u64,
    pub data_used_blocks: u64,
    pub data_total_blocks: u64,
    pub mode: PoolMode,
    /// Whether writes fail at once when out of data space (else they queue), as the status says.
    pub error_if_no_space: Option<bool>,
    pub needs_check: bool,
}

fn fraction(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once('/')?;
    let (a, b) = (a.parse().ok()?, b.parse().ok()?);
    (a <= b).then_some((a, b))
}

/// Parses the arguments of a `thin-pool` status line: `<transaction id> <used meta>/<total meta>
/// <used data>/<total data> <held root> ro|rw|out_of_data_space [no_]discard_passdown
/// error|queue_if_no_space needs_check|- [<metadata low watermark>]`, or `Fail`. Older kernels
/// stop after the mode; fields they lack are unknown.
pub fn parse_pool_status(args: &str) -> Result<PoolStatus, &'static str> {
    let f: Vec<&str> = args.split_whitespace().collect();
    if f.first() == Some(&"Fail") {
        return Ok(PoolStatus {
            transaction_id: 0,
            metadata_used_blocks: 0,
            metadata_total_blocks: 0,
            data_used_blocks: 0,
            data_total_blocks: 0,
            mode: PoolMode::Failed,
            error_if_no_space: None,
            needs_check: false,
        });
    }
    if f.len() < 3 {
        return Err("thin-pool status: fewer than 3 fields");
    }
    let transaction_id = f[0]
        .parse()
        .map_err(|_| "thin-pool status: bad transaction id")?;
    let (metadata_used_blocks, metadata_total_blocks) =
        fraction(f[1]).ok_or("thin-pool status: bad metadata used/total")?;
    let (data_used_blocks, data_total_blocks) =
        fraction(f[2]).ok_or("thin-pool status: bad data used/total")?;
    let mode = match f.get(4).copied() {
        Some("rw") | None => PoolMode::ReadWrite,
        Some("ro") => PoolMode::ReadOnly,
        Some("out_of_data_space") => PoolMode::OutOfDataSpace,
        Some(_) => return Err("thin-pool status: unknown mode"),
    };
    let error_if_no_space = f.iter().find_map(|x| match *x {
        "error_if_no_space" => Some(true),
        "queue_if_no_space" => Some(false),
        _ => None,
    });
    Ok(PoolStatus {
        transaction_id,
        metadata_used_blocks,
        metadata_total_blocks,
        data_used_blocks,
        data_total_blocks,
        mode,
        error_if_no_space,
        needs_check: f.contains(&"needs_check"),
    })
}

/// A thin volume's status: sectors mapped (written and not discarded), or `Fail`.
pub fn parse_thin_status(args: &str) -> Result<Option<u64>, &'static str> {
    let first = args.split_whitespace().next().ok_or("thin status: empty")?;
    if first == "Fail" {
        return Ok(None);
    }
    first
        .parse()
        .map(Some)
        .map_err(|_| "thin status: bad mapped sectors")
}

/// A thin pool as the collector reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The device-mapper name of the `thin-pool` target (LVM: `vg-pool-tpool`).
    pub name: String,
    pub data_block_bytes: u64,
    pub status: PoolStatus,
    pub error_if_no_space: bool,
    /// Sum of the sizes of its thin volumes: what has been promised.
    pub virtual_bytes: u64,
    pub volumes: Vec<Volume>,
}

impl Pool {
    pub fn data_size_bytes(&self) -> u64 {
        self.status
            .data_total_blocks
            .saturating_mul(self.data_block_bytes)
    }
    pub fn data_used_bytes(&self) -> u64 {
        self.status
            .data_used_blocks
            .saturating_mul(self.data_block_bytes)
    }
    /// What any one thin volume of the pool can still get: the pool's free data space, none
    /// when the pool is out of space, read-only or failed.
    pub fn free_bytes(&self) -> u64 {
        match self.status.mode {
            PoolMode::ReadWrite => self.data_size_bytes() - self.data_used_bytes(),
            _ => 0,
        }
    }
    pub fn metadata_size_bytes(&self) -> u64 {
        self.status
            .metadata_total_blocks
            .saturating_mul(METADATA_BLOCK_BYTES)
    }
    pub fn metadata_used_bytes(&self) -> u64 {
        self.status
            .metadata_used_blocks
            .saturating_mul(METADATA_BLOCK_BYTES)
    }
}

/// A thin volume: its device-mapper name, its pool and its size.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub name: String,
    pub size_bytes: u64,
    pub mapped_bytes: Option<u64>,
}

/// An item that could not be read: the device (or line) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemProblem {
    pub item: String,
    pub message: String,
}

/// Joins the table and status of every device into pools with their volumes. `name_of` turns a
/// `major:minor` (how tables name the devices they use) into a device-mapper name in its label
/// form. Pools and volumes are named in their label form ([`label_form`]): a name is the
/// admin's choice, and an ESC in one must not reach a terminal through a scrape. Devices of
/// other targets are ignored; a pool or volume whose lines can't be read is a problem of its
/// own, the rest are still returned.
pub fn pools(
    table: &str,
    status: &str,
    name_of: impl Fn(&str) -> Option<String>,
) -> (Vec<Pool>, Vec<ItemProblem>) {
    let (table, terr) = parse_lines(table);
    let (status, serr) = parse_lines(status);
    let mut problems: Vec<ItemProblem> = terr
        .into_iter()
        .map(|e| ItemProblem {
            item: "dmsetup table".into(),
            message: format!("dmsetup table: {e}"),
        })
        .chain(serr.into_iter().map(|e| ItemProblem {
            item: "dmsetup status".into(),
            message: format!("dmsetup status: {e}"),
        }))
        .collect();
    // Each device's first status line of each target, looked up by name: a host has hundreds
    // of thin volumes.
    let mut by_device: std::collections::HashMap<(&str, &str), &str> =
        std::collections::HashMap::with_capacity(status.len());
    for l in &status {
        by_device.entry((l.name, l.target)).or_insert(l.args);
    }
    let status_of = |name: &str, target: &str| by_device.get(&(name, target)).copied();
    let mut by_name: BTreeMap<String, Pool> = BTreeMap::new();
    for l in table.iter().filter(|l| l.target == "thin-pool") {
        let name = label_form(l.name.as_bytes());
        let fail = |m: &str| ItemProblem {
            item: name.clone(),
            message: format!("thin pool {name}: {m}"),
        };
        let t = match parse_pool_table(l.args) {
            Ok(t) => t,
            Err(e) => {
                problems.push(fail(e));
                continue;
            }
        };
        let Some(st) = status_of(l.name, "thin-pool") else {
            problems.push(fail("no status line"));
            continue;
        };
        match parse_pool_status(st) {
            Ok(status) => {
                by_name.insert(
                    name.clone(),
                    Pool {
                        name,
                        data_block_bytes: t.data_block_sectors.saturating_mul(SECTOR_BYTES),
                        error_if_no_space: status.error_if_no_space.unwrap_or(t.error_if_no_space),
                        status,
                        virtual_bytes: 0,
                        volumes: Vec::new(),
                    },
                );
            }
            Err(e) => problems.push(fail(e)),
        }
    }
    // A thin volume of several segments (rare: a resized one) sums them.
    let mut volumes: BTreeMap<(String, String), Volume> = BTreeMap::new();
    for l in table.iter().filter(|l| l.target == "thin") {
        let name = label_form(l.name.as_bytes());
        let Some(pool_dev) = l.args.split_whitespace().next() else {
            problems.push(ItemProblem {
                message: format!("thin volume {name}: no pool device in its table"),
                item: name,
            });
            continue;
        };
        let pool = name_of(pool_dev).unwrap_or_else(|| label_form(pool_dev.as_bytes()));
        if !by_name.contains_key(&pool) {
            continue;
        }
        let mapped = status_of(l.name, "thin").and_then(|s| parse_thin_status(s).ok().flatten());
        let v = volumes
            .entry((pool, name.clone()))
            .or_insert_with(|| Volume {
                name,
                size_bytes: 0,
                mapped_bytes: mapped.map(|m| m.saturating_mul(SECTOR_BYTES)),
            });
        v.size_bytes = v
            .size_bytes
            .saturating_add(l.length_sectors.saturating_mul(SECTOR_BYTES));
    }
    for ((pool, _), v) in volumes {
        if let Some(p) = by_name.get_mut(&pool) {
            p.virtual_bytes = p.virtual_bytes.saturating_add(v.size_bytes);
            p.volumes.push(v);
        }
    }
    (by_name.into_values().collect(), problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_of_a_current_kernel_reads_every_field() {
        let s =
            parse_pool_status("3 94/4096 7821/8192 - rw discard_passdown queue_if_no_space - 1024")
                .unwrap();
        assert_eq!(s.transaction_id, 3);
        assert_eq!(
            (s.metadata_used_blocks, s.metadata_total_blocks),
            (94, 4096)
        );
        assert_eq!((s.data_used_blocks, s.data_total_blocks), (7821, 8192));
        assert_eq!(s.mode, PoolMode::ReadWrite);
        assert_eq!(s.error_if_no_space, Some(false));
        assert!(!s.needs_check);
    }

    #[test]
    fn out_of_space_needs_check_and_fail_are_states_not_errors() {
        let s = parse_pool_status(
            "5 100/4096 8192/8192 - out_of_data_space discard_passdown error_if_no_space needs_check 1024",
        )
        .unwrap();
        assert_eq!(s.mode, PoolMode::OutOfDataSpace);
        assert_eq!(s.error_if_no_space, Some(true));
        assert!(s.needs_check);
        assert_eq!(parse_pool_status("Fail").unwrap().mode, PoolMode::Failed);
        // An old kernel's line stops after the mode.
        let s = parse_pool_status("0 10/100 1/50 - ro").unwrap();
        assert_eq!(s.mode, PoolMode::ReadOnly);
        assert_eq!(s.error_if_no_space, None);
    }

    #[test]
    fn bad_status_lines_say_which_field() {
        assert_eq!(
            parse_pool_status("x 1/2 1/2"),
            Err("thin-pool status: bad transaction id")
        );
        assert_eq!(
            parse_pool_status("1 3/2 1/2"),
            Err("thin-pool status: bad metadata used/total")
        );
        assert_eq!(
            parse_pool_status("1 1/2 1/"),
            Err("thin-pool status: bad data used/total")
        );
        assert_eq!(
            parse_pool_status("1 1/2 1/2 - weird"),
            Err("thin-pool status: unknown mode")
        );
        assert_eq!(
            parse_pool_status(""),
            Err("thin-pool status: fewer than 3 fields")
        );
    }

    #[test]
    fn the_table_gives_block_size_and_features() {
        let t = parse_pool_table("253:1 253:2 128 0 1 skip_block_zeroing").unwrap();
        assert_eq!(t.data_block_sectors, 128);
        assert!(!t.error_if_no_space);
        let t = parse_pool_table("253:1 253:2 1024 0 2 error_if_no_space read_only").unwrap();
        assert!(t.error_if_no_space && t.read_only);
        assert!(parse_pool_table("253:1 253:2 0 0").is_err());
        assert!(parse_pool_table("253:1").is_err());
    }

    /// An overcommitted LVM thin pool as dmsetup prints it: a 64 MiB pool (64 KiB blocks)
    /// holding two 100 MiB thin volumes, one of them 61 MiB written.
    const TABLE: &str = "\
vg-pool: 0 131072 linear 253:2 0
vg-pool-tpool: 0 131072 thin-pool 253:0 253:1 128 0 1 skip_block_zeroing
vg-pool_tdata: 0 131072 linear 7:1 10240
vg-pool_tmeta: 0 8192 linear 7:1 2048
vg-db: 0 204800 thin 253:2 1
vg-logs: 0 102400 thin 253:2 2
vg-logs: 102400 102400 thin 253:2 2
vg-plain: 0 2048 linear 7:2 0
";
    const STATUS: &str = "\
vg-pool: 0 131072 linear 
vg-pool-tpool: 0 131072 thin-pool 1 22/1024 976/1024 - rw no_discard_passdown queue_if_no_space - 256
vg-pool_tdata: 0 131072 linear 
vg-pool_tmeta: 0 8192 linear 
vg-db: 0 204800 thin 124928 204799
vg-logs: 0 102400 thin 0 -
vg-logs: 102400 102400 thin 0 -
vg-plain: 0 2048 linear 
";

    fn name_of(dev: &str) -> Option<String> {
        (dev == "253:2").then(|| "vg-pool-tpool".to_string())
    }

    #[test]
    fn an_overcommitted_pool_joins_its_volumes() {
        let (pools, problems) = pools(TABLE, STATUS, name_of);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(pools.len(), 1);
        let p = &pools[0];
        assert_eq!(p.name, "vg-pool-tpool");
        assert_eq!(p.data_block_bytes, 65536);
        assert_eq!(p.data_size_bytes(), 64 << 20);
        assert_eq!(p.data_used_bytes(), 976 * 65536);
        assert_eq!(p.free_bytes(), 48 * 65536);
        assert_eq!(p.metadata_size_bytes(), 4 << 20);
        assert_eq!(p.metadata_used_bytes(), 22 * 4096);
        // 100 MiB + 100 MiB promised from 64 MiB.
        assert_eq!(p.virtual_bytes, 200 << 20);
        let db = p.volumes.iter().find(|v| v.name == "vg-db").unwrap();
        assert_eq!(db.size_bytes, 100 << 20);
        assert_eq!(db.mapped_bytes, Some(124928 * 512));
        assert_eq!(
            p.volumes
                .iter()
                .find(|v| v.name == "vg-logs")
                .unwrap()
                .size_bytes,
            100 << 20
        );
    }

    #[test]
    fn a_real_pool_that_ran_out_reads_as_dmsetup_printed_it() {
        // tests/fixtures/layers/SOURCES.md: 256 MiB pool, two 400 MiB volumes, out of space.
        let (pools, problems) = pools(
            include_str!("../../tests/fixtures/layers/dmsetup-table.txt"),
            include_str!("../../tests/fixtures/layers/dmsetup-status.txt"),
            name_of,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let p = &pools[0];
        assert_eq!(p.name, "vg-pool-tpool");
        assert_eq!(p.data_size_bytes(), 256 << 20);
        assert_eq!(p.data_used_bytes(), 256 << 20);
        assert_eq!(p.status.mode, PoolMode::OutOfDataSpace);
        assert_eq!(p.free_bytes(), 0);
        assert!(p.error_if_no_space);
        assert_eq!(p.metadata_used_bytes(), 131 * 4096);
        assert_eq!(p.virtual_bytes, 800 << 20);
        let db = p.volumes.iter().find(|v| v.name == "vg-db").unwrap();
        assert_eq!(db.mapped_bytes, Some(256 << 20));
        let logs = p.volumes.iter().find(|v| v.name == "vg-logs").unwrap();
        assert_eq!(logs.mapped_bytes, Some(0));
    }

    #[test]
    fn a_bad_line_or_pool_costs_only_itself() {
        let table = format!("garbage without a name\n{TABLE}broken-pool: 0 10 thin-pool 1:1\n");
        let (pools, problems) = pools(&table, STATUS, name_of);
        assert_eq!(pools.len(), 1);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].message.contains("line 1"), "{problems:?}");
        assert_eq!(problems[1].item, "broken-pool");
        assert!(problems[1].message.contains("fewer than 4 fields"));
    }

    #[test]
    fn an_out_of_space_pool_gives_nothing_more() {
        let status = STATUS.replace(" rw ", " out_of_data_space ");
        let (full, _) = pools(TABLE, &status, name_of);
        assert_eq!(full[0].free_bytes(), 0);
        let (none, problems) = pools("No devices found\n", "No devices found\n", name_of);
        assert!(none.is_empty() && problems.is_empty());
    }
}
