//! The OCP Datacenter NVMe SSD "SMART / Health Information Extended" log (log page C0h) as
//! smartctl dumps it (`--log=nvmelog,0xc0,0x200` with `--json=o`): the hex dump read back into
//! bytes, and the bytes into the few fields the model trusts. Pure: no I/O here.
//!
//! Log page C0h is vendor-specific in the NVMe base specification: only drives built to the OCP
//! datacenter spec put this layout there. So nothing is read from it unless its own GUID (bytes
//! 496–511) says it is the OCP log and its version (bytes 494–495) is one whose layout is known.

use serde::Serialize;
use serde_json::Value;

/// The log page smartctl is asked for, and its size (the OCP spec fixes it at 512 bytes).
pub const LOG_ID: u8 = 0xc0;
pub const LOG_BYTES: usize = 512;

/// The OCP log's GUID, AFD514C9-7C6F-4F9C-A4F2-BFEA2810AFC5, as its bytes lie in the log: a
/// 128-bit little-endian value, lowest byte first.
const GUID_LE: [u8; 16] = [
    0xc5, 0xaf, 0x10, 0x28, 0xea, 0xbf, 0xf2, 0xa4, 0x9c, 0x4f, 0x6f, 0x7c, 0xc9, 0x14, 0xd5, 0xaf,
];
const GUID_AT: usize = 496;
const VERSION_AT: usize = 494;
/// Log page versions 1 to 5 (OCP spec 1.0 to 2.6): each keeps "Physical Media Units Written"
/// (bytes 0–15) and "Physical Media Units Read" (bytes 16–31), in bytes. A later version is
/// not trusted until its layout has been checked.
const KNOWN_VERSIONS: std::ops::RangeInclusive<u16> = 1..=5;

/// No drive has written 2^64 bytes (18 EB, about 600 years at 1 GB/s): a larger count is a
/// firmware fault or garbage, not a figure.
const MAX_BYTES: u128 = u64::MAX as u128;

/// What the model takes from a trusted OCP log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OcpLog {
    pub version: u16,
    /// Bytes written to the flash, host and internal writes together.
    pub physical_media_written_bytes: Option<u64>,
    pub physical_media_read_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OcpError {
    #[error("NVMe log 0x{id:02x}: no hex dump in smartctl's output")]
    NoDump { id: u8 },
    #[error("NVMe log 0x{id:02x}: dump line {line} is not an address and hex bytes: {text:?}")]
    BadLine { id: u8, line: usize, text: String },
    #[error("NVMe log 0x{id:02x}: the dump holds {got} bytes, {want} expected")]
    Short { id: u8, got: usize, want: usize },
    #[error("NVMe log 0xc0 has GUID {0}, not the OCP SMART log's: not read")]
    UnknownGuid(String),
    #[error("NVMe log 0xc0 (OCP) has log page version {0}, whose layout is not known: not read")]
    UnknownVersion(u16),
}

/// The bytes of log `id` from smartctl's text output lines (`smartctl.output` of `--json=o`):
/// the header "NVMe Log 0xc0 (0x0200 bytes)", then lines of an address and up to 16 hex bytes
/// (an ASCII rendering from column 60 on is ignored).
pub fn dump_bytes(lines: &[&str], id: u8) -> Result<Vec<u8>, OcpError> {
    let header = format!("NVMe Log 0x{id:02x} (");
    let start = lines
        .iter()
        .position(|l| l.starts_with(&header))
        .ok_or(OcpError::NoDump { id })?;
    // "(0x0200 bytes)": what smartctl says it read.
    let want = lines[start][header.len()..]
        .strip_prefix("0x")
        .and_then(|r| r.split_once(' '))
        .and_then(|(n, _)| usize::from_str_radix(n, 16).ok())
        .ok_or_else(|| OcpError::BadLine {
            id,
            line: start + 1,
            text: lines[start].to_string(),
        })?;
    let mut bytes = Vec::with_capacity(want.min(LOG_BYTES * 8));
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        if bytes.len() >= want || line.trim().is_empty() {
            break;
        }
        let bad = || OcpError::BadLine {
            id,
            line: i + 1,
            text: line.to_string(),
        };
        // The hex part ends before the ASCII column; the whole line is ASCII when it is a dump.
        if !line.is_ascii() {
            return Err(bad());
        }
        let hex = &line[..line.len().min(59)];
        let mut tokens = hex.split_whitespace();
        let addr = tokens
            .next()
            .and_then(|a| usize::from_str_radix(a, 16).ok())
            .ok_or_else(bad)?;
        if addr != bytes.len() {
            return Err(bad());
        }
        let before = bytes.len();
        for t in tokens {
            if t.len() != 2 || bytes.len() - before == 16 {
                return Err(bad());
            }
            bytes.push(u8::from_str_radix(t, 16).map_err(|_| bad())?);
        }
        if bytes.len() == before {
            return Err(bad());
        }
    }
    if bytes.len() < want {
        return Err(OcpError::Short {
            id,
            got: bytes.len(),
            want,
        });
    }
    bytes.truncate(want);
    Ok(bytes)
}

fn le128(b: &[u8]) -> u128 {
    b.iter()
        .rev()
        .fold(0u128, |acc, &x| (acc << 8) | u128::from(x))
}

/// The OCP log from its 512 bytes, when its GUID and version say it is one.
pub fn parse_c0(b: &[u8]) -> Result<OcpLog, OcpError> {
    if b.len() < LOG_BYTES {
        return Err(OcpError::Short {
            id: LOG_ID,
            got: b.len(),
            want: LOG_BYTES,
        });
    }
    let guid = &b[GUID_AT..GUID_AT + 16];
    if guid != GUID_LE {
        return Err(OcpError::UnknownGuid(format!("{:032X}", le128(guid))));
    }
    let version = u16::from_le_bytes([b[VERSION_AT], b[VERSION_AT + 1]]);
    if !KNOWN_VERSIONS.contains(&version) {
        return Err(OcpError::UnknownVersion(version));
    }
    let count = |at: usize| u64::try_from(le128(&b[at..at + 16]).min(MAX_BYTES + 1)).ok();
    Ok(OcpLog {
        version,
        physical_media_written_bytes: count(0),
        physical_media_read_bytes: count(16),
    })
}

/// The OCP log in a smartctl JSON output, if the run asked for it: `None` when the output
/// holds no dump of log C0h (not asked, or the drive refused it: smartctl says so in its
/// messages), an error when it holds one that can't be trusted.
pub fn from_output(v: &Value) -> Option<Result<OcpLog, OcpError>> {
    let lines: Vec<&str> = v
        .get("smartctl")?
        .get("output")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match dump_bytes(&lines, LOG_ID) {
        Err(OcpError::NoDump { .. }) => None,
        r => Some(r.and_then(|b| parse_c0(&b))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 512-byte OCP log: `written` and `read` at bytes 0 and 16, the version and GUID.
    pub(crate) fn log(written: u128, read: u128, version: u16, guid: [u8; 16]) -> Vec<u8> {
        let mut b = vec![0u8; LOG_BYTES];
        b[..16].copy_from_slice(&written.to_le_bytes());
        b[16..32].copy_from_slice(&read.to_le_bytes());
        b[VERSION_AT..VERSION_AT + 2].copy_from_slice(&version.to_le_bytes());
        b[GUID_AT..].copy_from_slice(&guid);
        b
    }

    pub(crate) const OCP_GUID: [u8; 16] = GUID_LE;

    /// The whole `smartctl.output` of a run that read the log: smartctl 7.3's banner, then
    /// the dump ([`crate::testing::nvme_log_dump`]).
    pub(crate) fn dump(b: &[u8]) -> Vec<String> {
        let mut out = vec![
            "smartctl 7.3 2022-02-28 r5338 [x86_64-linux] (local build)".to_string(),
            String::new(),
        ];
        out.extend(crate::testing::nvme_log_dump(LOG_ID, b));
        out.push(String::new());
        out
    }

    fn lines(d: &[String]) -> Vec<&str> {
        d.iter().map(String::as_str).collect()
    }

    #[test]
    fn an_ocp_log_gives_the_bytes_written_to_flash() {
        // 1.5 PB written to flash, 3.25 PB read.
        let b = log(1_500_000_000_000_000, 3_250_000_000_000_000, 4, GUID_LE);
        let d = dump(&b);
        let back = dump_bytes(&lines(&d), LOG_ID).expect("dump");
        assert_eq!(back, b, "the dump reads back byte for byte");
        let l = parse_c0(&back).expect("ocp");
        assert_eq!(l.version, 4);
        assert_eq!(l.physical_media_written_bytes, Some(1_500_000_000_000_000));
        assert_eq!(l.physical_media_read_bytes, Some(3_250_000_000_000_000));
    }

    #[test]
    fn a_log_c0h_with_another_guid_or_version_is_not_read() {
        // Vendor-specific C0h logs of other layouts (e.g. a vendor's extended SMART log).
        let mut other = GUID_LE;
        other[0] ^= 0xff;
        let b = log(1 << 40, 0, 3, other);
        let e = parse_c0(&b).expect_err("another GUID");
        assert!(matches!(e, OcpError::UnknownGuid(_)));
        assert!(
            e.to_string().contains("AFD514C97C6F4F9CA4F2BFEA2810AF3A"),
            "{e}"
        );
        let zero = log(1 << 40, 0, 3, [0; 16]);
        assert!(matches!(parse_c0(&zero), Err(OcpError::UnknownGuid(_))));
        for v in [0, 6, 0xffff] {
            let b = log(1 << 40, 0, v, GUID_LE);
            assert_eq!(parse_c0(&b), Err(OcpError::UnknownVersion(v)));
        }
        // The GUID as the spec writes it, from the bytes: the check is not byte-swapped.
        assert_eq!(
            format!("{:032X}", le128(&GUID_LE)),
            "AFD514C97C6F4F9CA4F2BFEA2810AFC5"
        );
    }

    #[test]
    fn an_absurd_count_is_unknown_not_a_figure() {
        let b = log(u128::MAX, (u64::MAX as u128) + 1, 3, GUID_LE);
        let l = parse_c0(&b).expect("ocp");
        assert_eq!(l.physical_media_written_bytes, None);
        assert_eq!(l.physical_media_read_bytes, None);
        let b = log(u64::MAX as u128, 0, 3, GUID_LE);
        assert_eq!(
            parse_c0(&b).expect("ocp").physical_media_written_bytes,
            Some(u64::MAX)
        );
    }

    #[test]
    fn a_short_or_damaged_dump_is_an_error_naming_the_line() {
        let b = log(1 << 30, 0, 3, GUID_LE);
        let d = dump(&b);
        // Cut after 10 lines: fewer bytes than announced.
        let cut: Vec<&str> = lines(&d)[..13].to_vec();
        assert_eq!(
            dump_bytes(&cut, LOG_ID),
            Err(OcpError::Short {
                id: LOG_ID,
                got: 160,
                want: 512
            })
        );
        // A line out of order, a byte that is not hex, a three-digit byte, no address, and
        // a character that is not ASCII.
        for (n, f) in [
            (
                5usize,
                (|l: &str| l.replacen(" 20", " 30", 1)) as fn(&str) -> String,
            ),
            (6, |l: &str| l.replacen(" 00", " zz", 1)),
            (7, |l: &str| l.replacen(" 00", " 000", 1)),
            (8, |_: &str| "garbage".to_string()),
            (9, |l: &str| l.replacen(" 00", " é", 1)),
        ] {
            let mut d2 = d.clone();
            d2[n] = f(&d2[n]);
            let e = dump_bytes(&lines(&d2), LOG_ID).expect_err(&d2[n]);
            assert!(
                matches!(e, OcpError::BadLine { line, .. } if line == n + 1),
                "{n}: {e}"
            );
        }
        // A header with no size.
        let bad = ["NVMe Log 0xc0 (lots of bytes)", " 00  00"];
        assert!(matches!(
            dump_bytes(&bad, LOG_ID),
            Err(OcpError::BadLine { line: 1, .. })
        ));
        // No dump at all, and a log too short to hold the GUID.
        assert_eq!(
            dump_bytes(&["Read NVMe Log 0xc0 failed"], LOG_ID),
            Err(OcpError::NoDump { id: LOG_ID })
        );
        assert!(matches!(parse_c0(&b[..300]), Err(OcpError::Short { .. })));
    }

    #[test]
    fn from_output_reads_only_a_dump_that_is_there() {
        let b = log(7 << 40, 0, 5, GUID_LE);
        let out = serde_json::json!({"smartctl": {"output": dump(&b)}});
        assert_eq!(
            from_output(&out),
            Some(Ok(OcpLog {
                version: 5,
                physical_media_written_bytes: Some(7 << 40),
                physical_media_read_bytes: Some(0),
            }))
        );
        for v in [
            serde_json::json!({"smartctl": {"exit_status": 0}}),
            serde_json::json!({"smartctl": {"output": "not a list"}}),
            serde_json::json!({"smartctl": {"output": [1, 2, null]}}),
            serde_json::json!({"smartctl": {"output": ["Read NVMe Log 0xc0 failed: NVMe Status 0x4002"]}}),
        ] {
            assert_eq!(from_output(&v), None, "{v}");
        }
    }
}
