//! The packed form of a day of hourly rows: delta-coded varints in one BLOB per series and day.
//! Pure bytes in, records out; it knows nothing of SQL or of what the columns mean.
//!
//! Why packed: 50 filesystems × 17,520 hours × 13 aggregates as plain SQLite rows come to
//! ~60-80 MiB (a row costs ~50 bytes of payload and header, pages are not full). Hour to hour
//! an aggregate moves little, so its change from the previous hour fits in one to four bytes
//! (measured in benches/history.rs: ~32 bytes an hour for a filesystem).
//!
//! Layout: a format byte, then per record `varint(t - previous t)`, `varint(missing mask)` and,
//! for each present column, `zigzag varint(value - predicted)`. The prediction is the column's
//! last value, plus the change of a reference column when one is given (a filesystem's free
//! bytes move with its available bytes, so free is predicted from avail and costs one byte).
//! All arithmetic wraps, so any i64 round-trips.

const FORMAT: u8 = 1;

/// One row: a time offset inside the chunk and up to 64 optional columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub t: i64,
    pub vals: Vec<Option<i64>>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    #[error("empty chunk")]
    Empty,
    #[error("unknown chunk format {0}")]
    Format(u8),
    #[error("chunk ends inside a value at byte {0}")]
    Truncated(usize),
    #[error("varint too long at byte {0}")]
    Overlong(usize),
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, CodecError> {
    let start = *pos;
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or(CodecError::Truncated(start))?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(CodecError::Overlong(start))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The value column `i` is expected to have, from the previous values and the reference column.
fn predict(i: usize, prev: &[Option<i64>], cur: &[Option<i64>], refs: &[Option<usize>]) -> i64 {
    let base = prev[i].unwrap_or(0);
    match refs.get(i).copied().flatten() {
        Some(j) => match (prev[j], cur[j]) {
            (Some(p), Some(c)) => base.wrapping_add(c.wrapping_sub(p)),
            _ => base,
        },
        None => base,
    }
}

/// Encodes rows (sorted by `t`, each with the same number of columns, at most 64).
/// `refs[i] = Some(j)` predicts column `i` from column `j`; `j` must be less than `i`.
pub fn encode(rows: &[Row], ncols: usize, refs: &[Option<usize>]) -> Vec<u8> {
    debug_assert!(ncols <= 64);
    let mut out = Vec::with_capacity(1 + rows.len() * (2 + ncols * 2));
    out.push(FORMAT);
    let mut prev: Vec<Option<i64>> = vec![None; ncols];
    let mut prev_t = 0i64;
    for r in rows {
        put_varint(&mut out, r.t.wrapping_sub(prev_t) as u64);
        prev_t = r.t;
        let mut missing = 0u64;
        for (i, v) in r.vals.iter().take(ncols).enumerate() {
            if v.is_none() {
                missing |= 1 << i;
            }
        }
        put_varint(&mut out, missing);
        let mut next = prev.clone();
        for (i, slot) in next.iter_mut().enumerate() {
            if let Some(v) = r.vals.get(i).copied().flatten() {
                let p = predict(i, &prev, &r.vals, refs);
                put_varint(&mut out, zigzag(v.wrapping_sub(p)));
                *slot = Some(v);
            }
        }
        prev = next;
    }
    out
}

/// Decodes what [`encode`] wrote with the same `ncols` and `refs`.
pub fn decode(b: &[u8], ncols: usize, refs: &[Option<usize>]) -> Result<Vec<Row>, CodecError> {
    let (&format, _) = b.split_first().ok_or(CodecError::Empty)?;
    if format != FORMAT {
        return Err(CodecError::Format(format));
    }
    let mut pos = 1;
    let mut rows = Vec::new();
    let mut prev: Vec<Option<i64>> = vec![None; ncols];
    let mut t = 0i64;
    while pos < b.len() {
        t = t.wrapping_add(get_varint(b, &mut pos)? as i64);
        let missing = get_varint(b, &mut pos)?;
        let mut cur: Vec<Option<i64>> = vec![None; ncols];
        for i in 0..ncols {
            if missing & (1 << i) == 0 {
                let d = unzigzag(get_varint(b, &mut pos)?);
                // Reference columns come first, so cur[j] is already decoded here.
                cur[i] = Some(predict(i, &prev, &cur, refs).wrapping_add(d));
            }
        }
        for i in 0..ncols {
            if cur[i].is_some() {
                prev[i] = cur[i];
            }
        }
        rows.push(Row { t, vals: cur });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_extremes_missing_values_and_references() {
        let rows = vec![
            Row {
                t: 0,
                vals: vec![Some(i64::MAX), Some(i64::MIN), None, Some(5)],
            },
            Row {
                t: 3600,
                vals: vec![Some(-1), None, Some(0), Some(1 << 40)],
            },
            Row {
                t: 7200,
                vals: vec![None, Some(7), Some(i64::MAX), Some(3)],
            },
        ];
        let refs = [None, None, None, Some(0)];
        let b = encode(&rows, 4, &refs);
        assert_eq!(decode(&b, 4, &refs).unwrap(), rows);
    }

    #[test]
    fn a_column_that_moves_with_its_reference_costs_one_byte() {
        let rows: Vec<Row> = (0..24)
            .map(|h| {
                let avail = 500_000_000_000 - h * 37_000_123;
                Row {
                    t: h * 3600,
                    vals: vec![Some(avail), Some(avail + 25_000_000_000)],
                }
            })
            .collect();
        let with = encode(&rows, 2, &[None, Some(0)]);
        let without = encode(&rows, 2, &[None, None]);
        assert!(
            with.len() < without.len(),
            "{} {}",
            with.len(),
            without.len()
        );
        assert_eq!(decode(&with, 2, &[None, Some(0)]).unwrap(), rows);
    }

    #[test]
    fn damaged_bytes_are_errors_not_panics() {
        assert_eq!(decode(&[], 2, &[]), Err(CodecError::Empty));
        assert_eq!(decode(&[9], 2, &[]), Err(CodecError::Format(9)));
        assert!(matches!(
            decode(&[1, 0x80], 2, &[]),
            Err(CodecError::Truncated(_))
        ));
        assert!(matches!(decode(&[1; 40], 2, &[]), Ok(_) | Err(_)));
        let long = [vec![1u8], vec![0xff; 12]].concat();
        assert!(matches!(
            decode(&long, 1, &[]),
            Err(CodecError::Overlong(_))
        ));
    }
}
