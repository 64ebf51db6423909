//! Where a key path (`collectors.probe.targets[1].file_size_bytes`) is written in a YAML text,
//! so an error found after parsing (a range, a cross-field check) names the line like a syntax
//! error does. Found by a second pass of the same parser (serde_yaml_ng) over the same text, never
//! by matching the text: quoting, flow style, comments and anchors are read as the config was.

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Where the value of a key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The key is written at this line (1-based); for a list entry (`targets[1]`), the line
    /// where the entry starts.
    Line(usize),
    /// The key is not in the text: the value is the built-in default. `parent` is the nearest
    /// enclosing key that is written, and its line.
    Default { parent: Option<(String, usize)> },
}

impl Place {
    /// The line of the key itself, when it is written.
    pub fn line(&self) -> Option<usize> {
        match self {
            Place::Line(n) => Some(*n),
            Place::Default { .. } => None,
        }
    }
}

impl fmt::Display for Place {
    /// A suffix for a message: ` at line 12`, or what stands in for the missing key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line(n) => write!(f, " at line {n}"),
            Place::Default { parent: None } => f.write_str(" (not set in the file: the default)"),
            Place::Default {
                parent: Some((key, n)),
            } => write!(
                f,
                " (not set in the file: the default; {key} is at line {n})"
            ),
        }
    }
}

impl Place {
    /// A suffix for a message about a required key, which has no default: ` at line 12`, or
    /// where its section is (` (not in the file; tls_config is at line 3)`), or nothing.
    pub fn required_suffix(&self) -> String {
        match self {
            Place::Line(n) => format!(" at line {n}"),
            Place::Default {
                parent: Some((section, n)),
            } => format!(" (not in the file; {section} is at line {n})"),
            Place::Default { parent: None } => String::new(),
        }
    }
}

/// Where `key` is written in `text` (YAML that serde_yaml_ng parses), or, when it is not, the
/// nearest enclosing key that is.
pub(crate) fn locate(text: &str, key: &str) -> Place {
    let Some(path) = segments(key) else {
        return Place::Default { parent: None };
    };
    for depth in (1..=path.len()).rev() {
        if let Some(line) = line_of(text, &path[..depth]) {
            if depth == path.len() {
                return Place::Line(line);
            }
            return Place::Default {
                parent: Some((join(&path[..depth]), line)),
            };
        }
    }
    Place::Default { parent: None }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// `a.b[1][2].c` → [a, b, 1, 2, c]; None when it is not of that shape.
fn segments(key: &str) -> Option<Vec<Seg<'_>>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if name.is_empty() {
            return None;
        }
        out.push(Seg::Key(name));
        while !rest.is_empty() {
            let close = rest.find(']')?;
            out.push(Seg::Index(rest.get(1..close)?.parse().ok()?));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return None;
            }
        }
    }
    Some(out)
}

fn join(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// What the walk fails with when it stands on the wanted node: serde_yaml_ng attaches the
/// position of the event being read (the key, or the list entry) to an error raised there.
const FOUND: &str = "ssdwatch: the wanted key is here";

fn line_of(text: &str, path: &[Seg]) -> Option<usize> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match (Find { path }).deserialize(de) {
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| l.line()),
        _ => None,
    }
}

/// Walks to `path` (not empty); Ok(()) when it is not there.
struct Find<'p, 'a> {
    path: &'p [Seg<'a>],
}

impl Find<'_, '_> {
    fn scalar<E: Error>(self) -> Result<(), E> {
        match self.path {
            [Seg::Index(0)] => Err(E::custom(FOUND)),
            _ => Ok(()),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Find<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Find<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if let Seg::Key(want) = self.path[0] {
            let last = self.path.len() == 1;
            while let Some(hit) = map.next_key_seed(KeyIs { want, last })? {
                if hit {
                    map.next_value_seed(Find {
                        path: &self.path[1..],
                    })?;
                    break;
                }
                map.next_value::<IgnoredAny>()?;
            }
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Seg::Index(want) = self.path[0] {
            let mut i = 0;
            loop {
                if i == want {
                    let found = if self.path.len() == 1 {
                        seq.next_element_seed(Here)?
                    } else {
                        seq.next_element_seed(Find {
                            path: &self.path[1..],
                        })?
                    };
                    if found.is_none() {
                        return Ok(());
                    }
                    break;
                }
                if seq.next_element::<IgnoredAny>()?.is_none() {
                    return Ok(());
                }
                i += 1;
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    // A scalar holds no key; it stands for a one-entry list where the config takes a single
    // value for a list (`mount_points_exclude: "^/srv"` is entry [0]).
    fn visit_bool<E: Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i128<E: Error>(self, _: i128) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u128<E: Error>(self, _: u128) -> Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_str<E: Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
}

/// A map key: whether it is `want`; stops the walk on it when it is the last segment.
struct KeyIs<'a> {
    want: &'a str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<bool, E> {
        match (v == self.want, self.last) {
            (true, true) => Err(E::custom(FOUND)),
            (hit, _) => Ok(hit),
        }
    }
}

/// A list entry that is the wanted node: any value stops the walk on it. Every `visit_*` is left
/// to its default, which fails with "invalid type: ..., expected {expecting}": the expectation
/// carries the marker, and the error the entry's position.
struct Here;

impl<'de> DeserializeSeed<'de> for Here {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Here {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(FOUND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# a comment
web:
  listen_address: \"0.0.0.0:1\"   # line 3
collectors:
  smart:
    class_intervals: {nvme: 1h,
      ata: 2h}
    devices:
      - path: /dev/sda
      - {path: /dev/sdb, type: sat}
  probe:
    targets:
      -
        path: /srv/a
      - path: /srv/b
        'file_size_bytes': 1
        \"write_ops\": 2
  filesystem:
    mount_points_exclude: \"^/srv\"
history:
  retention_raw: &r 14days
  retention_hourly: *r
  endurance:
  - models: x
    dwpd: 1
";

    #[test]
    fn a_written_key_is_found_at_its_line_in_every_style() {
        for (key, line) in [
            ("web", 2),
            ("web.listen_address", 3),
            ("collectors.smart.class_intervals", 6),
            ("collectors.smart.class_intervals.nvme", 6),
            ("collectors.smart.class_intervals.ata", 7),
            ("collectors.smart.devices[0]", 9),
            ("collectors.smart.devices[0].path", 9),
            ("collectors.smart.devices[1].type", 10),
            ("collectors.probe.targets[0].path", 14),
            ("collectors.probe.targets[1]", 15),
            ("collectors.probe.targets[1].file_size_bytes", 16),
            ("collectors.probe.targets[1].write_ops", 17),
            ("collectors.filesystem.mount_points_exclude", 19),
            ("collectors.filesystem.mount_points_exclude[0]", 19),
            ("history.retention_hourly", 22),
            ("history.endurance[0].dwpd", 25),
        ] {
            assert_eq!(locate(TEXT, key), Place::Line(line), "{key}");
        }
    }

    #[test]
    fn a_missing_key_is_the_default_with_its_nearest_written_parent() {
        assert_eq!(
            locate(TEXT, "collectors.probe.targets[1].read_ops"),
            Place::Default {
                parent: Some(("collectors.probe.targets[1]".into(), 15))
            }
        );
        assert_eq!(
            locate(TEXT, "collectors.probe.targets[7].path"),
            Place::Default {
                parent: Some(("collectors.probe.targets".into(), 12))
            }
        );
        assert_eq!(
            locate(TEXT, "history.flush_interval"),
            Place::Default {
                parent: Some(("history".into(), 20))
            }
        );
        assert_eq!(locate(TEXT, "state_dir"), Place::Default { parent: None });
        assert_eq!(locate("", "web"), Place::Default { parent: None });
        // A key below a scalar, or an index into a map, is not there.
        assert_eq!(
            locate(TEXT, "web.listen_address.x").line(),
            None,
            "below a scalar"
        );
        assert_eq!(locate(TEXT, "web[0]").line(), None);
        assert_eq!(
            locate(TEXT, "collectors.filesystem.mount_points_exclude[1]").line(),
            None,
            "a single value is entry 0 only"
        );
    }

    #[test]
    fn key_paths_are_read_strictly() {
        assert_eq!(
            segments("a.b[1][2].c"),
            Some(vec![
                Seg::Key("a"),
                Seg::Key("b"),
                Seg::Index(1),
                Seg::Index(2),
                Seg::Key("c")
            ])
        );
        for bad in ["", "a..b", "a[x]", "a[1", "a[1]b", "[1]"] {
            assert_eq!(segments(bad), None, "{bad:?}");
        }
        assert_eq!(locate(TEXT, "a[x]"), Place::Default { parent: None });
    }

    #[test]
    fn the_place_reads_as_a_message_suffix() {
        assert_eq!(Place::Line(7).to_string(), " at line 7");
        assert_eq!(
            Place::Default {
                parent: Some(("history".into(), 3))
            }
            .to_string(),
            " (not set in the file: the default; history is at line 3)"
        );
    }
}
