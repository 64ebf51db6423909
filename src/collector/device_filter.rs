//! `device_include` / `device_exclude` of the smart and diskstats sections: regular expressions
//! searched in a device's kernel name, as node_exporter's `--collector.diskstats.device-*` and
//! smartctl_exporter's `--smartctl.device-*` flags. Compiled while the YAML is read, so a bad
//! expression is refused with its key and line.

use regex_lite::Regex;
use serde::{Deserialize, Deserializer};

/// One compiled expression; equal when written the same.
#[derive(Debug, Clone)]
pub struct DevicePattern(Regex);

impl PartialEq for DevicePattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl DevicePattern {
    /// The longest expression accepted: a device filter is a short alternation.
    pub const MAX_LEN: usize = 1024;

    pub fn new(re: &str) -> Result<Self, String> {
        if re.len() > Self::MAX_LEN {
            return Err(format!(
                "a {}-byte expression; at most {}",
                re.len(),
                Self::MAX_LEN
            ));
        }
        Regex::new(re).map(DevicePattern).map_err(|e| {
            // regex's message draws a caret under the expression on extra lines; its last
            // line says what is wrong.
            let msg = e.to_string();
            let why = msg.lines().last().unwrap_or(&msg);
            format!(
                "{re:?} is not a regular expression: {}",
                why.trim_start_matches("error: ")
            )
        })
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl<'de> Deserialize<'de> for DevicePattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Checked inside the visitor, while the YAML reader is on the value, so the error
        // names the key (`collectors.smart.device_exclude`) and its line.
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = DevicePattern;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a regular expression")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DevicePattern, E> {
                DevicePattern::new(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Whether a device passes: not matched by `exclude`, and matched by `include` when one is set.
pub fn wanted(
    include: Option<&DevicePattern>,
    exclude: Option<&DevicePattern>,
    name: &str,
) -> bool {
    !exclude.is_some_and(|e| e.0.is_match(name)) && include.is_none_or(|i| i.0.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclude_wins_and_include_keeps_only_what_it_matches() {
        let p = |s| DevicePattern::new(s).unwrap();
        let (inc, exc) = (p("^nvme"), p("^nvme1n1$"));
        assert!(wanted(None, None, "sda"));
        assert!(wanted(Some(&inc), None, "nvme0n1"));
        assert!(!wanted(Some(&inc), None, "sda"));
        assert!(!wanted(Some(&inc), Some(&exc), "nvme1n1"));
        assert!(wanted(Some(&inc), Some(&exc), "nvme0n1"));
        // node_exporter's default diskstats exclusion: partitions and ram/loop devices.
        let ne = p(r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$");
        assert!(!wanted(None, Some(&ne), "loop3"));
        assert!(wanted(None, Some(&ne), "nvme0n1"));
    }

    #[test]
    fn a_bad_expression_is_refused_with_its_key_and_line() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct S {
            device_exclude: Option<DevicePattern>,
        }
        let e = serde_yaml_ng::from_str::<S>("# c\ndevice_exclude: '^(sd'\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("device_exclude") && e.contains("line 2") && e.contains("^(sd"),
            "{e}"
        );
        let long = format!("device_exclude: '{}'\n", "a".repeat(2000));
        let e = serde_yaml_ng::from_str::<S>(&long).unwrap_err().to_string();
        assert!(e.contains("at most 1024"), "{e}");
    }
}
