//! PostgreSQL's data directory read without a login: WAL segment names, the archiver's
//! `archive_status/*.ready` markers, each replication slot's on-disk `state` file and the last
//! checkpoint's redo location in `global/pg_control`. Decoders are pure; the readers below
//! them only list and read files under a directory they are given.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// WAL segment size when no segment file says otherwise (initdb's default).
pub const DEFAULT_SEGMENT_BYTES: u64 = 16 << 20;

/// A slot's `state` file is a few hundred bytes; anything much larger is not one.
const MAX_STATE_BYTES: u64 = 64 << 10;
/// pg_control is 8 KiB on disk (PG_CONTROL_FILE_SIZE); its data is the first few hundred bytes.
const CONTROL_BYTES: usize = 8192;

/// A WAL segment file's name: timeline, then the segment number as "log" and "seg" halves,
/// each eight upper-case hex digits (`000000010000000A000000FF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentName {
    pub timeline: u32,
    pub log: u32,
    pub seg: u32,
}

impl SegmentName {
    /// The segment number (XLogSegNo) for segments of `segment_bytes`: each "log" holds
    /// 4 GiB of WAL.
    pub fn number(&self, segment_bytes: u64) -> u64 {
        let per_log = 0x1_0000_0000 / segment_bytes.max(1);
        u64::from(self.log) * per_log + u64::from(self.seg)
    }
}

/// A segment file name, or None for anything else in pg_wal (`.history`, `.partial`,
/// `.backup`, `archive_status`, temporary files).
pub fn parse_segment_name(name: &str) -> Option<SegmentName> {
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if name.bytes().any(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let h = |r: std::ops::Range<usize>| u32::from_str_radix(&name[r], 16).ok();
    Some(SegmentName {
        timeline: h(0..8)?,
        log: h(8..16)?,
        seg: h(16..24)?,
    })
}

/// The segment a `.ready` or `.done` marker names (`<segment>.ready`; `.history` and
/// `.backup` markers name other files and are counted, not placed).
pub fn ready_marker(name: &str) -> Option<&str> {
    name.strip_suffix(".ready")
}

/// A replication slot as its `pg_replslot/<name>/state` file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotState {
    pub name: String,
    /// Logical slots belong to a database (their oid is not 0); physical ones don't.
    pub logical: bool,
    /// The oldest WAL the slot needs; 0 when it reserves none (created without reserving, or
    /// invalidated by `max_slot_wal_keep_size`).
    pub restart_lsn: u64,
    pub version: u32,
}

impl SlotState {
    pub fn kind(&self) -> &'static str {
        if self.logical { "logical" } else { "physical" }
    }
}

/// Why a slot's state file was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("{len} bytes, too short for a slot state")]
    Short { len: usize },
    #[error("magic number {found:#x}, not a slot state (expected {SLOT_MAGIC:#x})")]
    Magic { found: u32 },
    #[error("length field {length} does not match the file's {len} bytes")]
    Length { length: u32, len: usize },
    #[error(
        "checksum {stored:#010x} does not match the contents ({computed:#010x}): torn or damaged"
    )]
    Checksum { stored: u32, computed: u32 },
}

/// `SLOT_MAGIC` of src/backend/replication/slot.c.
pub const SLOT_MAGIC: u32 = 0x1051CA1;

// ReplicationSlotOnDisk (slot.c): magic, checksum (CRC-32C of everything after it), version,
// length (of what follows the 16-byte header), then ReplicationSlotPersistentData (slot.h),
// whose head has kept its layout since 9.4: name (NameData, 64 bytes), database (Oid),
// persistency, xmin, catalog_xmin (4 bytes each), restart_lsn (XLogRecPtr, 8 bytes). Fields
// after it changed across versions (invalidated_at in 13, two_phase in 14, failover in 17) and
// are not read. Integers are in the server's byte order: little-endian on the hosts we run on.
const SLOT_HEADER: usize = 16;
const NAMEDATALEN: usize = 64;
const SLOT_DATABASE: usize = SLOT_HEADER + NAMEDATALEN;
const SLOT_RESTART_LSN: usize = SLOT_HEADER + NAMEDATALEN + 16;

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Decodes a slot's `state` file, checking its magic number, length and CRC-32C as the server
/// does when it starts.
pub fn decode_slot_state(b: &[u8]) -> Result<SlotState, SlotError> {
    if b.len() < SLOT_RESTART_LSN + 8 {
        return Err(SlotError::Short { len: b.len() });
    }
    let magic = u32_at(b, 0);
    if magic != SLOT_MAGIC {
        return Err(SlotError::Magic { found: magic });
    }
    let length = u32_at(b, 12);
    if SLOT_HEADER.checked_add(length as usize) != Some(b.len()) {
        return Err(SlotError::Length {
            length,
            len: b.len(),
        });
    }
    let stored = u32_at(b, 4);
    let computed = crc32c(&b[8..]);
    if stored != computed {
        return Err(SlotError::Checksum { stored, computed });
    }
    let name = &b[SLOT_HEADER..SLOT_HEADER + NAMEDATALEN];
    let end = name.iter().position(|c| *c == 0).unwrap_or(NAMEDATALEN);
    Ok(SlotState {
        name: String::from_utf8_lossy(&name[..end]).into_owned(),
        logical: u32_at(b, SLOT_DATABASE) != 0,
        restart_lsn: u64_at(b, SLOT_RESTART_LSN),
        version: u32_at(b, 8),
    })
}

/// CRC-32C (Castagnoli, reflected, init and final xor all ones): PostgreSQL's `pg_crc32c`.
pub fn crc32c(data: &[u8]) -> u32 {
    const POLY: u32 = 0x82F6_3B78;
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// What `global/pg_control` says that we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub version: u32,
    /// Where crash recovery would start: WAL older than this segment is needed only by
    /// archiving, `wal_keep_size` or a slot.
    pub redo_lsn: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("{len} bytes, too short for pg_control")]
    Short { len: usize },
    #[error("pg_control_version {0}, not a PostgreSQL 9.4 or later control file")]
    Version(u32),
}

// ControlFileData (pg_control.h): system_identifier (8), pg_control_version (4),
// catalog_version_no (4), state (4, then 4 of padding), time (8), checkPoint (8), then
// checkPointCopy, a CheckPoint whose first field is redo (8). Unchanged since 9.3.
const CONTROL_VERSION: usize = 8;
const CONTROL_REDO: usize = 40;

pub fn decode_control(b: &[u8]) -> Result<Control, ControlError> {
    if b.len() < CONTROL_REDO + 8 {
        return Err(ControlError::Short { len: b.len() });
    }
    let version = u32_at(b, CONTROL_VERSION);
    // 942 (9.4) to 1300 (15), 1700 (17): a wrong byte order or garbage lands far outside.
    if !(900..10_000).contains(&version) {
        return Err(ControlError::Version(version));
    }
    Ok(Control {
        version,
        redo_lsn: u64_at(b, CONTROL_REDO),
    })
}

/// The WAL segments a slot alone keeps: from the segment of its restart LSN up to, not
/// including, the segment of the last checkpoint's redo location (WAL from there on is
/// needed for crash recovery anyway). None for a slot that reserves nothing.
pub fn retained_range(restart_lsn: u64, redo_lsn: u64, segment_bytes: u64) -> Option<(u64, u64)> {
    if restart_lsn == 0 || segment_bytes == 0 {
        return None;
    }
    let from = restart_lsn / segment_bytes;
    let to = redo_lsn / segment_bytes;
    (from < to).then_some((from, to))
}

/// One slot's reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub state: SlotState,
    /// Bytes of the segment files in its [`retained_range`] found in pg_wal.
    pub retained_bytes: u64,
}

/// What the cheap look at pg_wal found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wal {
    /// Every file under pg_wal (archive_status included), allocated bytes.
    pub bytes: u64,
    pub segments: u64,
    pub segment_bytes: u64,
    /// `archive_status/*.ready`: segments written and not yet archived.
    pub ready: u64,
    pub oldest_ready: Option<SystemTime>,
    pub slots: Vec<Slot>,
}

/// A problem reading one part of a data directory.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: {cause}", path.display())]
    Slot { path: PathBuf, cause: SlotError },
    #[error("{}: {cause}", path.display())]
    Control { path: PathBuf, cause: ControlError },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |cause| ReadError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

use crate::small_file::{Links, read_small};
use std::os::unix::fs::MetadataExt;

/// Allocated bytes of a file (what it takes from the filesystem; `st_blocks` counts 512-byte
/// units whatever the block size).
pub fn allocated(m: &std::fs::Metadata) -> u64 {
    m.blocks().saturating_mul(512)
}

/// The last checkpoint's redo location, from `global/pg_control`.
pub fn read_control(data_dir: &Path) -> Result<Control, ReadError> {
    let path = data_dir.join("global/pg_control");
    let b =
        read_small(&path, CONTROL_BYTES as u64, Links::Refuse).map_err(|e| io(&path)(e.into()))?;
    decode_control(&b).map_err(|cause| ReadError::Control { path, cause })
}

/// Every slot under `pg_replslot` (directories being created or dropped, `*.tmp`, skipped),
/// and the slots that could not be read.
pub fn read_slots(data_dir: &Path) -> Result<(Vec<SlotState>, Vec<ReadError>), ReadError> {
    let dir = data_dir.join("pg_replslot");
    let mut slots = Vec::new();
    let mut errors = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let e = e.map_err(io(&dir))?;
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".tmp") {
            continue;
        }
        let path = e.path().join("state");
        match read_small(&path, MAX_STATE_BYTES, Links::Refuse).map_err(std::io::Error::from) {
            Ok(b) => match decode_slot_state(&b) {
                Ok(s) => slots.push(s),
                Err(cause) => errors.push(ReadError::Slot { path, cause }),
            },
            // Dropped between the listing and the read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(cause) => errors.push(ReadError::Io { path, cause }),
        }
    }
    slots.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((slots, errors))
}

/// Lists `pg_wal` and `pg_wal/archive_status`: segments, bytes, markers waiting for the
/// archiver and the oldest of them, and what each slot keeps (given the redo location). One
/// pass over the names; files are stat'ed, never opened.
pub fn read_wal(
    data_dir: &Path,
    slots: Vec<SlotState>,
    redo_lsn: Option<u64>,
) -> Result<Wal, ReadError> {
    // pg_xlog before PostgreSQL 10.
    let dir = match data_dir.join("pg_wal") {
        d if !d.exists() && data_dir.join("pg_xlog").is_dir() => data_dir.join("pg_xlog"),
        d => d,
    };
    let mut wal = Wal::default();
    let mut names = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let e = e.map_err(io(&dir))?;
        let m = match e.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // recycled meanwhile
            Err(cause) => {
                return Err(ReadError::Io {
                    path: e_path(&dir, &e),
                    cause,
                });
            }
        };
        wal.bytes = wal.bytes.saturating_add(allocated(&m));
        if let Some(n) = e.file_name().to_str().and_then(parse_segment_name)
            && m.is_file()
        {
            wal.segments += 1;
            // Every segment is preallocated to the cluster's segment size.
            wal.segment_bytes = wal.segment_bytes.max(m.len());
            names.push((n, allocated(&m)));
        }
    }
    if wal.segment_bytes == 0 || !wal.segment_bytes.is_power_of_two() {
        wal.segment_bytes = DEFAULT_SEGMENT_BYTES;
    }
    let status = dir.join("archive_status");
    match std::fs::read_dir(&status) {
        Ok(rd) => {
            for e in rd {
                let e = e.map_err(io(&status))?;
                let m = match e.metadata() {
                    Ok(m) => m,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(cause) => {
                        return Err(ReadError::Io {
                            path: status.clone(),
                            cause,
                        });
                    }
                };
                wal.bytes = wal.bytes.saturating_add(allocated(&m));
                if e.file_name().to_str().and_then(ready_marker).is_some() {
                    wal.ready += 1;
                    let t = m.modified().ok();
                    wal.oldest_ready = match (wal.oldest_ready, t) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
        }
        // No archive_status (a copied directory): nothing waits.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(cause) => {
            return Err(ReadError::Io {
                path: status,
                cause,
            });
        }
    }
    let seg = wal.segment_bytes;
    wal.slots = slots
        .into_iter()
        .map(|state| {
            let retained_bytes =
                match redo_lsn.and_then(|r| retained_range(state.restart_lsn, r, seg)) {
                    Some((from, to)) => names
                        .iter()
                        .filter(|(n, _)| (from..to).contains(&n.number(seg)))
                        .map(|(_, b)| *b)
                        .sum(),
                    None => 0,
                };
            Slot {
                state,
                retained_bytes,
            }
        })
        .collect();
    Ok(wal)
}

fn e_path(dir: &Path, e: &std::fs::DirEntry) -> PathBuf {
    dir.join(e.file_name())
}

/// `pg_tblspc/<oid>` links: each tablespace's oid and where its link points.
pub fn read_tablespaces(data_dir: &Path) -> Result<Vec<(String, PathBuf)>, ReadError> {
    let dir = data_dir.join("pg_tblspc");
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(cause) => return Err(ReadError::Io { path: dir, cause }),
    };
    for e in rd {
        let e = e.map_err(io(&dir))?;
        let oid = e.file_name().to_string_lossy().into_owned();
        if !oid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // In-place tablespaces (allow_in_place_tablespaces, tests) are directories, not links.
        let target = std::fs::read_link(e.path()).unwrap_or_else(|_| e.path());
        out.push((oid, target));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A slot state file as PostgreSQL 15 writes it (SLOT_VERSION 2, length 184: the
    /// persistent data of 15), with a correct checksum.
    pub(crate) fn slot_file(name: &str, database: u32, restart_lsn: u64) -> Vec<u8> {
        let length = 184u32;
        let mut b = vec![0u8; SLOT_HEADER + length as usize];
        b[0..4].copy_from_slice(&SLOT_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        b[12..16].copy_from_slice(&length.to_le_bytes());
        b[SLOT_HEADER..SLOT_HEADER + name.len()].copy_from_slice(name.as_bytes());
        b[SLOT_DATABASE..SLOT_DATABASE + 4].copy_from_slice(&database.to_le_bytes());
        b[SLOT_RESTART_LSN..SLOT_RESTART_LSN + 8].copy_from_slice(&restart_lsn.to_le_bytes());
        let crc = crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub(crate) fn control_file(redo_lsn: u64) -> Vec<u8> {
        let mut b = vec![0u8; CONTROL_BYTES];
        b[CONTROL_VERSION..CONTROL_VERSION + 4].copy_from_slice(&1300u32.to_le_bytes());
        b[CONTROL_REDO..CONTROL_REDO + 8].copy_from_slice(&redo_lsn.to_le_bytes());
        b
    }

    #[test]
    fn crc32c_is_castagnolis() {
        // The check value of CRC-32C (RFC 3720, B.4).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn segment_names_give_segment_numbers() {
        let n = parse_segment_name("000000010000000A000000FF").unwrap();
        assert_eq!((n.timeline, n.log, n.seg), (1, 10, 255));
        // 16 MiB segments: 256 a "log"; 1 GiB segments: 4.
        assert_eq!(n.number(16 << 20), 10 * 256 + 255);
        assert_eq!(
            parse_segment_name("000000020000000000000004")
                .unwrap()
                .number(1 << 30),
            4
        );
        for bad in [
            "00000001000000000000000",
            "000000010000000000000001.partial",
            "00000002.history",
            "000000010000000a000000ff",
            "archive_status",
            "xlogtemp.123",
        ] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
        assert_eq!(
            ready_marker("000000010000000000000003.ready"),
            Some("000000010000000000000003")
        );
        assert_eq!(ready_marker("000000010000000000000003.done"), None);
    }

    #[test]
    fn slot_state_files_decode_and_damage_is_refused() {
        let f = slot_file("s1", 0, 0x0000_0001_2300_0028);
        let s = decode_slot_state(&f).unwrap();
        assert_eq!(s.name, "s1");
        assert_eq!(s.kind(), "physical");
        assert_eq!(s.restart_lsn, 0x1_2300_0028);
        let l = decode_slot_state(&slot_file("sub", 16384, 7)).unwrap();
        assert_eq!(l.kind(), "logical");

        let mut torn = f.clone();
        torn[SLOT_RESTART_LSN] ^= 1;
        assert!(matches!(
            decode_slot_state(&torn),
            Err(SlotError::Checksum { .. })
        ));
        assert!(matches!(
            decode_slot_state(&f[..50]),
            Err(SlotError::Short { len: 50 })
        ));
        assert!(matches!(
            decode_slot_state(&f[..f.len() - 1]),
            Err(SlotError::Length { .. })
        ));
        let mut magic = f.clone();
        magic[0] = 0;
        assert!(matches!(
            decode_slot_state(&magic),
            Err(SlotError::Magic { .. })
        ));
        // The message names the damage.
        assert!(
            decode_slot_state(&torn)
                .unwrap_err()
                .to_string()
                .contains("torn or damaged")
        );
    }

    #[test]
    fn pg_control_gives_the_redo_location() {
        let c = decode_control(&control_file(0x3_0000_0060)).unwrap();
        assert_eq!(c.version, 1300);
        assert_eq!(c.redo_lsn, 0x3_0000_0060);
        assert!(decode_control(&[0u8; 20]).is_err());
        assert!(matches!(
            decode_control(&[0u8; 100]),
            Err(ControlError::Version(0))
        ));
    }

    #[test]
    fn a_slot_keeps_the_segments_from_its_restart_lsn_to_the_redo_segment() {
        let seg = 16 << 20;
        // restart in segment 2, redo in segment 10: segments 2..10 are the slot's.
        assert_eq!(
            retained_range(2 * seg + 40, 10 * seg + 8, seg),
            Some((2, 10))
        );
        // A slot at or past the redo point keeps nothing beyond what recovery needs.
        assert_eq!(retained_range(10 * seg, 10 * seg + 8, seg), None);
        assert_eq!(retained_range(11 * seg, 10 * seg, seg), None);
        // Reserving nothing (invalidated, or created without reserving).
        assert_eq!(retained_range(0, 10 * seg, seg), None);
    }

    #[test]
    fn a_data_directory_tree_is_read_without_a_login() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let seg: u64 = 1 << 20; // initdb --wal-segsize=1
        std::fs::create_dir_all(root.join("pg_wal/archive_status")).unwrap();
        std::fs::create_dir_all(root.join("global")).unwrap();
        std::fs::create_dir_all(root.join("pg_replslot/s1")).unwrap();
        std::fs::create_dir_all(root.join("pg_replslot/gone.tmp")).unwrap();
        for i in 1..=8u64 {
            let name = format!("00000001{:08X}{:08X}", 0, i);
            let f = std::fs::File::create(root.join("pg_wal").join(&name)).unwrap();
            // Real bytes, not a sparse file, so allocated == length.
            std::io::Write::write_all(&mut &f, &vec![1u8; seg as usize]).unwrap();
            if i <= 3 {
                std::fs::write(
                    root.join("pg_wal/archive_status")
                        .join(format!("{name}.ready")),
                    "",
                )
                .unwrap();
            }
        }
        std::fs::write(root.join("pg_wal/00000002.history"), "x").unwrap();
        std::fs::write(root.join("global/pg_control"), control_file(6 * seg + 0x28)).unwrap();
        // The slot needs segment 2 onwards; redo is in segment 6: it alone keeps 2, 3, 4, 5.
        std::fs::write(
            root.join("pg_replslot/s1/state"),
            slot_file("s1", 0, 2 * seg + 0x60),
        )
        .unwrap();
        let (slots, errors) = read_slots(root).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let control = read_control(root).unwrap();
        let wal = read_wal(root, slots, Some(control.redo_lsn)).unwrap();
        assert_eq!(wal.segments, 8);
        assert_eq!(wal.segment_bytes, seg);
        assert_eq!(wal.ready, 3);
        assert!(wal.oldest_ready.is_some());
        assert!(wal.bytes >= 8 * seg);
        assert_eq!(wal.slots.len(), 1);
        assert_eq!(wal.slots[0].retained_bytes, 4 * seg);

        // A torn state file is that slot's error; the others are read.
        std::fs::create_dir_all(root.join("pg_replslot/s2")).unwrap();
        let mut torn = slot_file("s2", 0, 5);
        torn[100] ^= 0xff;
        std::fs::write(root.join("pg_replslot/s2/state"), torn).unwrap();
        let (slots, errors) = read_slots(root).unwrap();
        assert_eq!(slots.len(), 1);
        assert_eq!(errors.len(), 1);
        let msg = errors[0].to_string();
        assert!(
            msg.contains("pg_replslot/s2/state") && msg.contains("checksum"),
            "{msg}"
        );
        // No pg_wal at all: the error names the directory.
        std::fs::remove_dir_all(root.join("pg_wal")).unwrap();
        let e = read_wal(root, Vec::new(), None).unwrap_err().to_string();
        assert!(e.contains("pg_wal"), "{e}");
    }

    #[test]
    fn real_postgresql_15_captures_decode_to_what_the_server_said() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/databases/pg15");
        let slot = decode_slot_state(&std::fs::read(dir.join("standby1.state")).unwrap()).unwrap();
        assert_eq!(slot.name, "standby1");
        assert_eq!(slot.kind(), "physical");
        // pg_replication_slots: 0/1500718.
        assert_eq!(slot.restart_lsn, 0x0150_0718);
        assert_eq!(slot.version, 2);
        let c = decode_control(&std::fs::read(dir.join("pg_control")).unwrap()).unwrap();
        assert_eq!(c.version, 1300);
        // pg_controldata: REDO location 0/2000028.
        assert_eq!(c.redo_lsn, 0x0200_0028);
        // 16 MiB segments: the slot alone keeps segment 1 (restart in 1, redo in 2).
        assert_eq!(
            retained_range(slot.restart_lsn, c.redo_lsn, 16 << 20),
            Some((1, 2))
        );
    }
}
