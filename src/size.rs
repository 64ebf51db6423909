//! Byte sizes in the config: a plain number of bytes, or a number with a unit (`64MiB`, `20GiB`,
//! `10GB`, `1.5GiB`), read by serde for every byte-valued key. Parsing only; ranges are checked
//! by each section's validation, like every other value.
//!
//! Units: `KiB`, `MiB`, `GiB`, `TiB`, `PiB`, `EiB` are powers of 1024 (IEC); `KB`, `MB`, `GB`,
//! `TB`, `PB`, `EB` powers of 1000 (SI, as drives are sold and as `df -H` shows them); case does
//! not matter, the `B` may be left out (`64Mi`), a space may stand before the unit, and a
//! fraction is rounded to the nearest byte. The parser is `parse-size` (exact over the whole u64
//! range, refuses what overflows instead of saturating).

use serde::de::{self, Deserializer, Visitor};

/// What a refused size is told against (serde says "expected ..." with it).
const EXPECTED: &str = "a size such as 64MiB, 20GiB or 10GB (KiB, MiB, GiB, TiB = powers of 1024; KB, MB, GB, TB = powers of 1000), or a whole number of bytes";

/// Parses one size.
pub(crate) fn parse(text: &str) -> Result<u64, parse_size::Error> {
    parse_size::parse_size(text)
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse(v).map_err(|e| match e {
            parse_size::Error::PosOverflow => E::invalid_value(
                de::Unexpected::Str(v),
                &"a size of at most 16 EiB (it must fit 64 bits)",
            ),
            _ => E::invalid_value(de::Unexpected::Str(v), &self),
        })
    }
}

/// `#[serde(deserialize_with = "crate::size::bytes")]` for a `u64` of bytes.
pub(crate) fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(SizeVisitor)
}

/// The same for an `Option<u64>` (with `#[serde(default)]`): a size, or null.
pub(crate) fn opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct OptVisitor;
    impl<'de> Visitor<'de> for OptVisitor {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(EXPECTED)
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
            bytes(d).map(Some)
        }
    }
    d.deserialize_option(OptVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct S {
        #[serde(deserialize_with = "bytes")]
        size: u64,
        #[serde(default, deserialize_with = "opt_bytes")]
        opt: Option<u64>,
    }

    fn size(yaml: &str) -> Result<u64, String> {
        serde_yaml_ng::from_str::<S>(&format!("size: {yaml}\n"))
            .map(|s| s.size)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn sizes_with_iec_and_si_units_and_plain_numbers() {
        const MIB: u64 = 1 << 20;
        const GIB: u64 = 1 << 30;
        for (text, want) in [
            ("67108864", 64 * MIB),
            ("64MiB", 64 * MIB),
            ("64 MiB", 64 * MIB),
            ("64mib", 64 * MIB),
            ("64Mi", 64 * MIB),
            ("512KiB", 512 << 10),
            ("20GiB", 20 * GIB),
            ("1.5GiB", 3 * GIB / 2),
            ("10GB", 10_000_000_000),
            ("10gb", 10_000_000_000),
            ("3.5PB", 3_500_000_000_000_000),
            ("0", 0),
            ("18446744073709551615", u64::MAX),
            ("\"4096\"", 4096),
        ] {
            assert_eq!(size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn what_is_not_a_size_says_what_a_size_is() {
        for text in [
            "64 lemons",
            "-1",
            "many",
            "1.5",
            "[1]",
            "true",
            "17EiB",
            "''",
        ] {
            let e = size(text).unwrap_err();
            assert!(
                e.contains("expected a size") || e.contains("at most 16 EiB"),
                "{text}: {e}"
            );
            assert!(e.contains("size"), "{text}: {e}");
            assert!(e.contains("line 1"), "{text}: {e}");
        }
    }

    #[test]
    fn an_optional_size_takes_null_or_a_size() {
        let s: S = serde_yaml_ng::from_str("size: 1KiB\nopt: 2KiB\n").unwrap();
        assert_eq!((s.size, s.opt), (1024, Some(2048)));
        let s: S = serde_yaml_ng::from_str("size: 1\nopt: null\n").unwrap();
        assert_eq!(s.opt, None);
        let s: S = serde_yaml_ng::from_str("size: 1\n").unwrap();
        assert_eq!(s.opt, None);
        let e = serde_yaml_ng::from_str::<S>("size: 1\nopt: 2 parsecs\n").unwrap_err();
        assert!(e.to_string().contains("expected a size"), "{e}");
    }
}
