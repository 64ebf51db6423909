//! Low-space alert thresholds per mount point, set in the daemon's config and exported as series
//! the shipped alert rules join on, so one rule file serves every host and a DBA tunes a volume
//! where it lives. Pure: config types, validation and the per-mount lookup.

use crate::time::{DAY, DAY_DURATION};
use crate::validate::{Invalid, MAX_ENTRIES, check_duration, check_entries};
use regex_lite::Regex;
use serde::Deserialize;
use std::time::Duration;

/// One severity's thresholds: the alert fires when the filesystem is fuller than `used_ratio`
/// AND (it has less than `avail_bytes` left OR it is predicted full within `full_within`).
/// Each key of a severity is optional on its own: one left out keeps that severity's default
/// (`warning: {used_ratio: 0.85}` keeps the warning's `avail_bytes` and `full_within`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub used_ratio: f64,
    pub avail_bytes: u64,
    pub full_within: Duration,
}

/// `collectors.filesystem.alert_thresholds`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AlertThresholds {
    #[serde(deserialize_with = "warning_over_default")]
    pub warning: Threshold,
    #[serde(deserialize_with = "critical_over_default")]
    pub critical: Threshold,
    /// Per mount point: the first entry whose expression matches decides; unset fields keep
    /// the defaults above.
    pub overrides: Vec<Override>,
}

/// A mount-point-specific change of the thresholds.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// A regular expression searched in the mount point (anchor it: `^/var/lib/postgresql$`).
    pub mount_points: String,
    #[serde(default)]
    pub warning: Partial,
    #[serde(default)]
    pub critical: Partial,
}

/// Some of a severity's thresholds.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Partial {
    pub used_ratio: Option<f64>,
    #[serde(default, deserialize_with = "crate::size::opt_bytes")]
    pub avail_bytes: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    pub full_within: Option<Duration>,
}

impl Default for AlertThresholds {
    fn default() -> Self {
        const GIB: u64 = 1 << 30;
        AlertThresholds {
            // A ticket: 90 % used and under 20 GiB left, or filling to full within a week.
            warning: Threshold {
                used_ratio: 0.90,
                avail_bytes: 20 * GIB,
                full_within: Duration::from_secs(7 * DAY as u64),
            },
            // A page: 95 % used and under 5 GiB left, or full within a day.
            critical: Threshold {
                used_ratio: 0.95,
                avail_bytes: 5 * GIB,
                full_within: DAY_DURATION,
            },
            overrides: Vec::new(),
        }
    }
}

/// The warning keys given, over the warning's defaults.
fn warning_over_default<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
    Ok(Partial::deserialize(d)?.over(AlertThresholds::default().warning))
}

/// The critical keys given, over the critical's defaults.
fn critical_over_default<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
    Ok(Partial::deserialize(d)?.over(AlertThresholds::default().critical))
}

impl Partial {
    fn over(&self, t: Threshold) -> Threshold {
        Threshold {
            used_ratio: self.used_ratio.unwrap_or(t.used_ratio),
            avail_bytes: self.avail_bytes.unwrap_or(t.avail_bytes),
            full_within: self.full_within.unwrap_or(t.full_within),
        }
    }
}

fn check(key: &str, t: &Threshold) -> Result<(), Invalid> {
    if !(t.used_ratio > 0.0 && t.used_ratio <= 1.0) {
        return Err(Invalid::new(
            format!("{key}.used_ratio"),
            "must be in (0, 1]",
        ));
    }
    if t.avail_bytes > 1 << 60 {
        return Err(Invalid::new(
            format!("{key}.avail_bytes"),
            "must be at most 1 EiB",
        ));
    }
    check_duration(
        &format!("{key}.full_within"),
        t.full_within,
        Duration::from_secs(60),
        Duration::from_secs(366 * DAY as u64),
    )
}

impl AlertThresholds {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check(&format!("{key}.warning"), &self.warning)?;
        check(&format!("{key}.critical"), &self.critical)?;
        check_entries(
            &format!("{key}.overrides"),
            self.overrides.len(),
            MAX_ENTRIES,
        )?;
        for (i, o) in self.overrides.iter().enumerate() {
            let k = format!("{key}.overrides[{i}]");
            Regex::new(&o.mount_points).map_err(|e| {
                Invalid::new(
                    format!("{k}.mount_points"),
                    format!("bad regular expression {:?}: {e}", o.mount_points),
                )
            })?;
            check(&format!("{k}.warning"), &o.warning.over(self.warning))?;
            check(&format!("{k}.critical"), &o.critical.over(self.critical))?;
        }
        Ok(())
    }

    /// The compiled form, for the collector.
    pub fn compile(&self) -> Result<Compiled, regex_lite::Error> {
        Ok(Compiled {
            defaults: (self.warning, self.critical),
            overrides: self
                .overrides
                .iter()
                .map(|o| Ok((Regex::new(&o.mount_points)?, o.warning, o.critical)))
                .collect::<Result<_, regex_lite::Error>>()?,
        })
    }
}

/// Thresholds ready to look up by mount point.
#[derive(Debug, Clone)]
pub struct Compiled {
    defaults: (Threshold, Threshold),
    overrides: Vec<(Regex, Partial, Partial)>,
}

impl Compiled {
    /// (warning, critical) for a mount point: the first matching override over the defaults.
    pub fn for_mount(&self, mount_point: &str) -> (Threshold, Threshold) {
        let (w, c) = self.defaults;
        match self
            .overrides
            .iter()
            .find(|(re, _, _)| re.is_match(mount_point))
        {
            Some((_, ow, oc)) => (ow.over(w), oc.over(c)),
            None => (w, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_override_changes_only_what_it_sets() {
        let t: AlertThresholds = serde_yaml_ng::from_str(
            "overrides:\n\
             - mount_points: ^/srv/pg$\n\
             \x20 warning: {used_ratio: 0.8}\n\
             \x20 critical: {avail_bytes: 107374182400, full_within: 2d}\n\
             - mount_points: ^/srv\n\
             \x20 warning: {used_ratio: 0.5}\n",
        )
        .unwrap();
        t.validate("collectors.filesystem.alert_thresholds")
            .unwrap();
        let c = t.compile().unwrap();
        let (w, cr) = c.for_mount("/srv/pg");
        assert_eq!(w.used_ratio, 0.8);
        assert_eq!(w.avail_bytes, 20 << 30, "default kept");
        assert_eq!(cr.used_ratio, 0.95);
        assert_eq!(cr.avail_bytes, 100 << 30);
        assert_eq!(cr.full_within, Duration::from_secs(2 * 86400));
        assert_eq!(c.for_mount("/srv/mysql").0.used_ratio, 0.5);
        assert_eq!(c.for_mount("/").0, AlertThresholds::default().warning);
    }

    /// Each key of a severity given alone: that one is taken, the others keep the severity's
    /// own defaults (the warning's are not the critical's).
    #[test]
    fn each_threshold_key_given_alone_keeps_the_others_defaults() {
        let d = AlertThresholds::default();
        for severity in ["warning", "critical"] {
            let base = if severity == "warning" {
                d.warning
            } else {
                d.critical
            };
            for (key, value, want) in [
                (
                    "used_ratio",
                    "0.85",
                    Threshold {
                        used_ratio: 0.85,
                        ..base
                    },
                ),
                (
                    "avail_bytes",
                    "64GiB",
                    Threshold {
                        avail_bytes: 64 << 30,
                        ..base
                    },
                ),
                (
                    "full_within",
                    "3days",
                    Threshold {
                        full_within: Duration::from_secs(3 * DAY as u64),
                        ..base
                    },
                ),
            ] {
                let t: AlertThresholds =
                    serde_yaml_ng::from_str(&format!("{severity}: {{{key}: {value}}}\n"))
                        .unwrap_or_else(|e| panic!("{severity}.{key} alone: {e}"));
                let (got, other) = if severity == "warning" {
                    (t.warning, t.critical)
                } else {
                    (t.critical, t.warning)
                };
                assert_eq!(got, want, "{severity}.{key} alone");
                let other_default = if severity == "warning" {
                    d.critical
                } else {
                    d.warning
                };
                assert_eq!(other, other_default, "{severity}.{key} alone");
            }
        }
        // An empty severity is all defaults; an unknown key is still refused.
        let t: AlertThresholds = serde_yaml_ng::from_str("warning: {}\n").unwrap();
        assert_eq!(t, d);
        let e = serde_yaml_ng::from_str::<AlertThresholds>("warning: {used: 0.8}\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `used`"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut t = AlertThresholds::default();
        t.overrides.push(Override {
            mount_points: "^/x".into(),
            critical: Partial {
                used_ratio: Some(1.5),
                ..Partial::default()
            },
            ..Override::default()
        });
        let e = t.validate("k").unwrap_err();
        assert_eq!(e.key, "k.overrides[0].critical.used_ratio");
        t.overrides[0] = Override {
            mount_points: "(".into(),
            ..Override::default()
        };
        assert_eq!(
            t.validate("k").unwrap_err().key,
            "k.overrides[0].mount_points"
        );
        let t = AlertThresholds {
            warning: Threshold {
                full_within: Duration::from_secs(1),
                ..AlertThresholds::default().warning
            },
            ..AlertThresholds::default()
        };
        assert_eq!(t.validate("k").unwrap_err().key, "k.warning.full_within");
    }
}
