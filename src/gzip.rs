//! gzip bodies assembled from pieces compressed once: each piece is raw deflate ending in a sync
//! flush (byte-aligned, not final), so pieces compressed apart concatenate into one stream, as
//! pigz joins its blocks; a scrape adds a header, its live text as stored blocks, an empty
//! final block and the trailer. Also which encoding a request accepts. No I/O here.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The deflate level of published texts: 4. A publish compresses only the segments whose
/// text changed (src/snapshot.rs), so the level is paid on what moved, not on every sample's
/// whole text. On the large host's 1.26 MB, family by family: level 1 made 82.8 KB, level 4
/// 67.7 KB in 3.0 ms for all of it, level 6 and 9 no more than 0.2 KB less for twice and three
/// times the CPU (docs/benchmarks.md).
const LEVEL: u32 = 4;

/// The CRC-32 and length of a text, combinable with the next text's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Crc {
    hasher: crc32fast::Hasher,
    len: u64,
}

impl Crc {
    pub(crate) fn new() -> Crc {
        Crc::default()
    }

    pub(crate) fn update(&mut self, text: &[u8]) {
        self.hasher.update(text);
        self.len += text.len() as u64;
    }

    /// Extends this one with the text `next` covers, as if it had been read after.
    pub(crate) fn combine(&mut self, next: &Crc) {
        self.hasher.combine(&next.hasher);
        self.len += next.len;
    }

    /// Bytes of text it covers.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// A text compressed once: raw deflate blocks that end byte-aligned and not final, and the
/// CRC-32 and length of the text they hold.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    deflate: Vec<u8>,
    crc: Crc,
}

impl Segment {
    /// Compresses `text` on its own (no reference to what comes before it in a body).
    pub(crate) fn compress(text: &[u8]) -> Segment {
        Compressor::default().segment(text)
    }

    /// `text` as stored blocks (see [`stored_blocks`]).
    pub(crate) fn stored(text: &[u8]) -> Segment {
        let mut crc = Crc::new();
        crc.update(text);
        Segment {
            deflate: stored_blocks(text),
            crc,
        }
    }

    pub(crate) fn deflate(&self) -> &[u8] {
        &self.deflate
    }

    /// The CRC-32 and length of its text.
    pub(crate) fn crc(&self) -> &Crc {
        &self.crc
    }
}

/// One compressor for several segments in a row (a publish's changed families): its state,
/// about 160 KB, is made once and reset between texts instead of allocated for each.
#[derive(Default)]
pub(crate) struct Compressor(Option<Compress>);

impl Compressor {
    /// Compresses `text` on its own, as [`Segment::compress`].
    pub(crate) fn segment(&mut self, text: &[u8]) -> Segment {
        let c = match &mut self.0 {
            Some(c) => {
                c.reset();
                c
            }
            None => self.0.insert(Compress::new(Compression::new(LEVEL), false)),
        };
        // A whole exposition compresses about 18:1 (docs/design.md); one family's segment (few
        // series, short lines) compresses worse, so start from a sixth of the text, and the
        // vector grows if a text does worse still.
        let mut deflate = Vec::with_capacity(text.len() / 6 + 64);
        let mut input = text;
        loop {
            if deflate.capacity() - deflate.len() < 64 {
                deflate.reserve(deflate.capacity().max(4096));
            }
            let before = c.total_in();
            let status = c.compress_vec(input, &mut deflate, FlushCompress::Sync);
            let used = usize::try_from(c.total_in() - before).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            // Done once all input is taken and the flush fitted (space was left over).
            match status {
                Ok(Status::Ok) | Ok(Status::BufError)
                    if input.is_empty() && deflate.len() < deflate.capacity() =>
                {
                    break;
                }
                Ok(_) => {}
                // miniz_oxide reports no error for a sync flush of a memory buffer; were one
                // to appear, the text goes uncompressed rather than the body broken.
                Err(_) => return Segment::stored(text),
            }
        }
        deflate.shrink_to_fit();
        let mut crc = Crc::new();
        crc.update(text);
        Segment { deflate, crc }
    }
}

/// Inflates raw deflate blocks made here (segments one after the other) a bounded piece at a
/// time, so a plain scrape never holds a whole text: the caller knows the text's length (its
/// [`Crc::len`]) and asks until it has it all.
pub(crate) struct Inflate {
    d: Decompress,
}

impl Default for Inflate {
    fn default() -> Self {
        Inflate {
            d: Decompress::new(false),
        }
    }
}

impl Inflate {
    /// Ready for the next blocks, from their first byte (the state reused, not made anew).
    pub(crate) fn restart(&mut self) {
        self.d.reset(false);
    }

    /// The next `max` bytes of the text of `deflate` (given whole at each call; `max` no more
    /// than what remains of its text). An error when the blocks end or stop making text first:
    /// they are broken (never so for blocks this module made).
    pub(crate) fn next(&mut self, deflate: &[u8], max: usize) -> Result<Vec<u8>, InflateError> {
        let mut out = Vec::with_capacity(max);
        let len = deflate.len();
        while out.len() < max {
            let pos = usize::try_from(self.d.total_in()).unwrap_or(usize::MAX);
            let Some(input) = deflate.get(pos..) else {
                return Err(InflateError::PastEnd { pos, len });
            };
            let (in_before, out_before) = (self.d.total_in(), out.len());
            if let Err(source) = self
                .d
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
            {
                return Err(InflateError::Damaged { pos, source });
            }
            if self.d.total_in() == in_before && out.len() == out_before {
                return Err(InflateError::EndsEarly { pos, len });
            }
        }
        Ok(out)
    }
}

/// Why deflate blocks gave no text: they are broken (never so for blocks this module made).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InflateError {
    #[error("deflate read past its end ({pos} of {len})")]
    PastEnd { pos: usize, len: usize },
    #[error("deflate at byte {pos}: {source}")]
    Damaged {
        pos: usize,
        source: flate2::DecompressError,
    },
    #[error("deflate ends at byte {pos} of {len} before its text does")]
    EndsEarly { pos: usize, len: usize },
}

/// The whole text of `deflate`, `len` bytes.
pub(crate) fn inflate(deflate: &[u8], len: usize) -> Result<Vec<u8>, InflateError> {
    if len == 0 {
        return Ok(Vec::new());
    }
    Inflate::default().next(deflate, len)
}

/// `text` as stored (uncompressed) deflate blocks, not final: for what changes at every
/// scrape, so a scrape never runs the compressor (its CRC is the body's so far, updated with
/// the text: no combine).
pub(crate) fn stored_blocks(text: &[u8]) -> Vec<u8> {
    let mut deflate = Vec::with_capacity(text.len() + 5 * (text.len() / 65_535 + 1));
    for chunk in text.chunks(65_535) {
        let len = chunk.len() as u16;
        // BFINAL 0, BTYPE 00, padded to the byte; then LEN and its complement, little-endian.
        deflate.push(0);
        deflate.extend_from_slice(&len.to_le_bytes());
        deflate.extend_from_slice(&(!len).to_le_bytes());
        deflate.extend_from_slice(chunk);
    }
    deflate
}

/// The CRC-32 and length of several segments' texts, one after the other.
#[cfg(test)]
pub(crate) fn combined<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> Crc {
    let mut all = Crc::new();
    for s in segments {
        all.combine(&s.crc);
    }
    all
}

/// The gzip member header: deflate, no name, no time, OS unknown.
pub(crate) const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// What ends a body after its segments: an empty final stored block, the CRC-32 and the
/// length (modulo 2^32) of the whole text.
pub(crate) fn trailer(all: &Crc) -> [u8; 13] {
    let mut t = [0u8; 13];
    t[..5].copy_from_slice(&[1, 0, 0, 0xff, 0xff]);
    t[5..9].copy_from_slice(&all.hasher.clone().finalize().to_le_bytes());
    // ISIZE is the length modulo 2^32 (RFC 1952).
    t[9..].copy_from_slice(&(all.len as u32).to_le_bytes());
    t
}

/// Whether a request's `Accept-Encoding` lets the response be gzip (RFC 9110 12.5.3): `gzip`
/// (or `x-gzip`) listed with a q-value above 0, or `*` above 0 without gzip refused by name.
/// Prometheus sends `Accept-Encoding: gzip`; no header, or `identity` only, means no.
pub(crate) fn accepts_gzip(accept_encoding: &str) -> bool {
    let mut star = None;
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim().eq_ignore_ascii_case("q")).then(|| v.trim().parse::<f32>().ok())?
            })
            .next_back()
            .unwrap_or(1.0);
        let wanted = q > 0.0;
        match coding.as_str() {
            "gzip" | "x-gzip" => return wanted,
            "*" => star = Some(wanted),
            _ => {}
        }
    }
    star.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut out)
            .expect("a valid gzip stream");
        out
    }

    fn body(segments: &[Segment]) -> Vec<u8> {
        let mut b = HEADER.to_vec();
        for s in segments {
            b.extend_from_slice(s.deflate());
        }
        b.extend_from_slice(&trailer(&combined(segments)));
        b
    }

    #[test]
    fn segments_compressed_apart_make_one_gzip_member_of_the_whole_text() {
        let big: String = (0..20_000)
            .map(|i| {
                format!(
                    "ssdwatch_filesystem_avail_bytes{{mountpoint=\"/srv/db{i}\"}} {}\n",
                    i * 4096
                )
            })
            .collect();
        let texts: [&[u8]; 5] = [
            b"",
            b"# HELP a A.\n# TYPE a gauge\na 1\n",
            big.as_bytes(),
            b"",
            b"z 2\n",
        ];
        let mut segments: Vec<Segment> = texts.iter().map(|t| Segment::compress(t)).collect();
        // The live part of a scrape, stored: larger than one stored block.
        let live = "process_open_fds 12\n".repeat(5_000);
        segments.push(Segment::stored(live.as_bytes()));
        let b = body(&segments);
        let whole: Vec<u8> = texts.concat().into_iter().chain(live.bytes()).collect();
        assert_eq!(gunzip(&b), whole);
        // Only one member: the stream's length is the whole text's, and it is small.
        assert_eq!(combined(&segments).len() as usize, whole.len());
        let compressed: usize = segments[..5].iter().map(|s| s.deflate().len()).sum();
        assert!(compressed * 8 < big.len(), "{compressed} for {}", big.len());
        // As a scrape makes it: the parts' CRC carried on over the live text, stored.
        let mut all = combined(&segments[..5]);
        all.update(live.as_bytes());
        let mut scrape = HEADER.to_vec();
        for seg in &segments[..5] {
            scrape.extend_from_slice(seg.deflate());
        }
        scrape.extend_from_slice(&stored_blocks(live.as_bytes()));
        scrape.extend_from_slice(&trailer(&all));
        assert_eq!(scrape, b);
        // A decoder that reads exactly one member (no multistream) gets it all too.
        let mut one = Vec::new();
        flate2::read::GzDecoder::new(&b[..])
            .read_to_end(&mut one)
            .unwrap();
        assert_eq!(one.len(), whole.len());
    }

    /// Inflation a bounded frame at a time gives back the text of segments compressed apart,
    /// whatever the frame; blocks cut short or damaged give an error naming where, never a
    /// panic or an endless loop.
    #[test]
    fn segments_inflate_a_frame_at_a_time_and_broken_blocks_are_an_error() {
        let texts: Vec<String> = (0..3)
            .map(|k| {
                (0..3_000)
                    .map(|i| {
                        format!(
                            "ssdwatch_family_{k}{{mountpoint=\"/srv/db{i}\"}} {}\n",
                            i * 7
                        )
                    })
                    .collect()
            })
            .collect();
        let mut deflate = Vec::new();
        let mut crc = Crc::new();
        for t in &texts {
            let seg = Segment::compress(t.as_bytes());
            deflate.extend_from_slice(seg.deflate());
            crc.combine(seg.crc());
        }
        let whole = texts.concat();
        assert_eq!(crc.len() as usize, whole.len());
        assert_eq!(inflate(&deflate, whole.len()).unwrap(), whole.as_bytes());
        for frame in [1, 4096, 65_536, whole.len()] {
            let mut inf = Inflate::default();
            let mut got = Vec::new();
            while got.len() < whole.len() {
                let want = frame.min(whole.len() - got.len());
                let piece = inf.next(&deflate, want).unwrap();
                assert_eq!(piece.len(), want);
                got.extend_from_slice(&piece);
            }
            assert_eq!(got, whole.as_bytes(), "frame {frame}");
        }
        assert_eq!(inflate(b"", 0).unwrap(), b"");
        // Cut short: the text ends before its length.
        let cut = inflate(&deflate[..deflate.len() / 2], whole.len())
            .unwrap_err()
            .to_string();
        assert!(cut.contains("before its text does"), "{cut}");
        // Damaged: a block type that doesn't exist (BTYPE 11).
        let bad = inflate(&[0b0000_0111, 0, 0, 0], 10)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("deflate at byte 0"), "{bad}");
        // More text asked than the blocks hold.
        let short = inflate(&deflate, whole.len() + 1).unwrap_err().to_string();
        assert!(short.contains("before its text does"), "{short}");
    }

    #[test]
    fn an_empty_body_is_a_valid_gzip_stream() {
        assert_eq!(gunzip(&body(&[])), b"");
        assert_eq!(
            gunzip(&body(&[Segment::compress(b""), Segment::stored(b"")])),
            b""
        );
    }

    #[test]
    fn gzip_is_served_only_when_the_client_accepts_it() {
        let table = [
            ("gzip", true),
            ("GZIP", true),
            ("x-gzip", true),
            // What Prometheus sends, and browsers and curl --compressed.
            ("gzip, deflate, br", true),
            ("deflate, gzip;q=1.0, *;q=0.5", true),
            ("gzip;q=0.001", true),
            ("gzip;q=0", false),
            ("gzip; q=0.0", false),
            ("gzip;q=0, *", false),
            ("*", true),
            ("*;q=0", false),
            ("identity", false),
            ("deflate, br", false),
            ("", false),
            ("br;q=1, identity;q=0.5", false),
            ("gzipx", false),
        ];
        for (header, want) in table {
            assert_eq!(accepts_gzip(header), want, "{header:?}");
        }
    }
}
