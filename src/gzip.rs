//! gzip bodies assembled from pieces compressed once: each piece is raw deflate ending in a sync
//! flush (byte-aligned, not final), so pieces compressed apart concatenate into one stream, as
//! pigz joins its blocks; a scrape adds a header, its live text as stored blocks, an empty
//! final block and the trailer. Also which encoding a request accepts. No I/O here.

use flate2::{Compress, Compression, FlushCompress, Status};

/// The deflate level of published texts: 1, the fastest. Every sample of every collector pays
/// it, while a scrape pays only for the bytes: level 6 made 60 KB of the large host's 1.1 MB
/// and cost its largest collector 7.9 ms a sample; level 1 a few KB more for a fraction of the
/// CPU (docs/benchmarks.md).
const LEVEL: u32 = 1;

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

    #[cfg(test)]
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

impl Default for Segment {
    fn default() -> Self {
        Segment::compress(b"")
    }
}

impl Segment {
    /// Compresses `text` on its own (no reference to what comes before it in a body).
    pub(crate) fn compress(text: &[u8]) -> Segment {
        let mut c = Compress::new(Compression::new(LEVEL), false);
        // Text format compresses about 8:1; the vector grows if a text does worse.
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

    #[test]
    fn an_empty_body_is_a_valid_gzip_stream() {
        assert_eq!(gunzip(&body(&[])), b"");
        assert_eq!(
            gunzip(&body(&[Segment::default(), Segment::stored(b"")])),
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
