//! How the store's rows are keyed and laid out: rowids (raw rows time-major, day chunks
//! day-major), the fields of each kind of series with their hourly columns, and integer units.

/// Days are kept below 2^24 (year 47,000).
const MAX_DAY: i64 = (1 << 24) - 1;
/// The latest sample time the store takes: below 2^39 (year 19,400), so a raw row's rowid
/// `t << 24 | series` fits in 63 bits.
pub(super) const MAX_T: i64 = (1 << 39) - 1;
/// Series ids are below 2^24 in a chunk's rowid (16 million filesystems or drives).
pub(super) const SERIES_BITS: u32 = 24;
pub(super) const SERIES_MASK: i64 = (1 << SERIES_BITS) - 1;

/// The rowid of a raw row: time-major, so each commit (one sample per series) appends.
pub(super) fn raw_key(t: i64, series: i64) -> i64 {
    (t.clamp(0, MAX_T) << SERIES_BITS) | (series & SERIES_MASK)
}

/// The rowids of raw rows with `from <= t <= to`; None when no stored time is in the range.
pub(super) fn raw_keys(from: i64, to: i64) -> Option<(i64, i64)> {
    let (a, b) = (from.max(0), to.min(MAX_T));
    // Shifted only when in range: `a` may be any i64 beyond MAX_T.
    if a <= b {
        Some((a << SERIES_BITS, (b << SERIES_BITS) | SERIES_MASK))
    } else {
        None
    }
}

/// The rowid of a series' day chunk: day-major, so a day's chunks of every series are one key
/// range, written together once when that day is rolled, and dropped together as a prefix.
pub(super) fn chunk_id(series: i64, day: i64) -> i64 {
    (day.clamp(0, MAX_DAY) << SERIES_BITS) | (series & SERIES_MASK)
}

/// How a field is kept per hour.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Agg {
    /// min, max, mean, last: a gauge that moves.
    Full,
    /// last only: a counter (an hour's increase is the difference of two lasts; its min, max
    /// and mean would be its first, last and a midpoint) or a size that changes only on a
    /// resize.
    Last,
}

impl Agg {
    fn width(self) -> usize {
        match self {
            Agg::Full => 4,
            Agg::Last => 1,
        }
    }
}

/// The fields of one kind of series, in raw column order, and their hourly columns.
pub(super) struct Layout {
    pub(super) fields: &'static [Agg],
    /// Codec reference columns of the hourly rows.
    pub(super) refs: &'static [Option<usize>],
}

impl Layout {
    pub(super) fn fields(&self) -> usize {
        self.fields.len()
    }
    /// The first hourly column of field `f`.
    pub(super) fn offset(&self, f: usize) -> usize {
        self.fields[..f].iter().map(|a| a.width()).sum()
    }
    /// Hourly columns: 4 per full field, 1 per last-only field, then the sample count.
    pub(super) fn hourly_cols(&self) -> usize {
        self.offset(self.fields.len()) + 1
    }
}

/// size (last), avail, free, files_free (full). free's aggregates are predicted from
/// avail's: they differ by the root reserve, which is constant.
const FS: Layout = Layout {
    fields: &[Agg::Last, Agg::Full, Agg::Full, Agg::Full],
    refs: &[
        None,
        None,
        None,
        None,
        None,
        Some(1),
        Some(2),
        Some(3),
        Some(4),
        None,
        None,
        None,
        None,
        None,
    ],
};

/// wear, spare, temperature (full); host, NAND, media errors, power-on hours, discarded (last).
const DRIVE: Layout = Layout {
    fields: &[
        Agg::Full,
        Agg::Full,
        Agg::Full,
        Agg::Last,
        Agg::Last,
        Agg::Last,
        Agg::Last,
        Agg::Last,
    ],
    refs: &[],
};

/// The series tables of one kind.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Fs,
    Drive,
}

impl Kind {
    pub(super) fn layout(self) -> &'static Layout {
        match self {
            Kind::Fs => &FS,
            Kind::Drive => &DRIVE,
        }
    }
    pub(super) fn raw_select(self) -> &'static str {
        match self {
            Kind::Fs => "SELECT id & 16777215, id >> 24, size, avail, free, files_free FROM fs_raw",
            Kind::Drive => {
                "SELECT id & 16777215, id >> 24, wear_ppm, spare_ppm, temp_mc, host_written, \
                 nand_written, media_errors, power_on_hours, discarded FROM drive_raw"
            }
        }
    }
    pub(super) fn raw_table(self) -> &'static str {
        match self {
            Kind::Fs => "fs_raw",
            Kind::Drive => "drive_raw",
        }
    }
    pub(super) fn hourly_table(self) -> &'static str {
        match self {
            Kind::Fs => "fs_hourly",
            Kind::Drive => "drive_hourly",
        }
    }
}

// Ratios are kept as integer parts per million, temperatures in milli-degrees Celsius and
// latencies in nanoseconds: SQLite stores a small integer in 1-4 bytes and a REAL in 8.
pub(super) const PPM: f64 = 1e6;
pub(super) const MILLI: f64 = 1e3;
pub(super) const NANO: f64 = 1e9;

pub(super) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn scaled(v: Option<f64>, scale: f64) -> Option<i64> {
    v.filter(|x| x.is_finite())
        .map(|x| (x * scale).round() as i64)
}
