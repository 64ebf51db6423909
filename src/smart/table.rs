//! The per-family vendor table (`families.yaml`, embedded at build time): what an ATA attribute
//! means on a drive family. Only loading and matching live here; no I/O, no metric names.

use regex::Regex;
use serde::Deserialize;
use std::sync::OnceLock;

/// The normalized field an attribute rule feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    WearUsedRatio,
    SpareAvailableRatio,
    HostWrittenBytes,
    HostReadBytes,
    NandWrittenBytes,
    EraseCountAvg,
    EraseCountMax,
    UnsafeShutdowns,
    ReallocatedSectors,
    PendingSectors,
}

/// Where in the attribute the number is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum From {
    Value,
    Raw,
    RawLow16,
    RawWord1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Percent {
    Remaining,
    Used,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    #[default]
    Count,
    /// Logical sectors: multiplied by the drive's logical block size.
    Lba,
    #[serde(rename = "bytes_32mib")]
    Bytes32mib,
    Gib,
    Gb,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: u32,
    #[serde(default)]
    pub name: Option<String>,
    pub field: Field,
    pub from: From,
    #[serde(default)]
    pub percent: Option<Percent>,
    #[serde(default)]
    pub unit: Unit,
    #[serde(default)]
    pub add: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFamily {
    key: String,
    model_family: String,
    #[serde(default)]
    not_model_family: Option<String>,
    #[serde(default)]
    models: Option<String>,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    defaults: Vec<Rule>,
    families: Vec<RawFamily>,
}

#[derive(Debug)]
pub struct Family {
    pub key: String,
    model_family: Regex,
    not_model_family: Option<Regex>,
    models: Option<Regex>,
    pub rules: Vec<Rule>,
}

#[derive(Debug)]
pub struct Table {
    pub defaults: Vec<Rule>,
    pub families: Vec<Family>,
}

/// How a family was matched: through smartctl's database or only by the model string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedBy {
    ModelFamily,
    ModelPattern,
}

pub const TABLE_YAML: &str = include_str!("families.yaml");

/// A vendor table that does not load; the message names the family and the bad pattern.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("vendor table: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("vendor table: family {family}: {pattern}: {source}")]
    Pattern {
        family: String,
        pattern: String,
        source: regex::Error,
    },
}

impl Table {
    /// Parses a table; errors name the family key and the bad pattern.
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let raw: RawTable = serde_yaml_ng::from_str(text)?;
        let mut families = Vec::with_capacity(raw.families.len());
        for f in raw.families {
            let re = |p: &str| {
                Regex::new(p).map_err(|source| TableError::Pattern {
                    family: f.key.clone(),
                    pattern: p.to_string(),
                    source,
                })
            };
            families.push(Family {
                model_family: re(&f.model_family)?,
                not_model_family: f.not_model_family.as_deref().map(re).transpose()?,
                models: f.models.as_deref().map(re).transpose()?,
                key: f.key.clone(),
                rules: f.rules,
            });
        }
        Ok(Table {
            defaults: raw.defaults,
            families,
        })
    }

    /// The built-in table. It is checked by a unit test, so a broken table never ships;
    /// should it fail anyway, normalization runs with no vendor rules rather than panic.
    pub fn builtin() -> &'static Table {
        static T: OnceLock<Table> = OnceLock::new();
        T.get_or_init(|| {
            Table::parse(TABLE_YAML).unwrap_or_else(|e| {
                tracing::error!("{e}");
                Table {
                    defaults: Vec::new(),
                    families: Vec::new(),
                }
            })
        })
    }

    /// Finds the family of a drive: smartctl's `model_family` first, then model patterns.
    pub fn lookup(
        &self,
        model_family: Option<&str>,
        model: Option<&str>,
    ) -> Option<(&Family, MatchedBy)> {
        if let Some(mf) = model_family {
            let hit = self.families.iter().find(|f| {
                f.model_family.is_match(mf)
                    && !f.not_model_family.as_ref().is_some_and(|n| n.is_match(mf))
            });
            if let Some(f) = hit {
                return Some((f, MatchedBy::ModelFamily));
            }
            // A drive the database knows under another family: its model pattern is no better.
            return None;
        }
        let model = model?;
        self.families
            .iter()
            .find(|f| f.models.as_ref().is_some_and(|m| m.is_match(model)))
            .map(|f| (f, MatchedBy::ModelPattern))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_keys_are_unique() {
        let t = Table::parse(TABLE_YAML).expect("families.yaml parses");
        let mut keys: Vec<_> = t.families.iter().map(|f| f.key.as_str()).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "duplicate family key");
        assert!(n >= 10);
        for f in &t.families {
            for r in &f.rules {
                let ratio = matches!(r.field, Field::WearUsedRatio | Field::SpareAvailableRatio);
                assert_eq!(
                    ratio,
                    r.percent.is_some(),
                    "family {} id {}: percent goes with ratio fields only",
                    f.key,
                    r.id
                );
            }
        }
    }

    #[test]
    fn oem_intel_families_are_not_taken_for_intel() {
        let t = Table::builtin();
        let (f, _) = t
            .lookup(Some("Dell Certified Intel S3520 Series SSDs"), None)
            .expect("dell");
        assert_eq!(f.key, "dell_intel");
        assert!(
            t.lookup(Some("Intel D3-S4510 Series SSDs (Lenovo OEM)"), None)
                .is_none()
        );
    }

    #[test]
    fn a_drive_known_under_another_family_is_not_matched_by_model_pattern() {
        let t = Table::builtin();
        assert!(
            t.lookup(Some("Some Other Family"), Some("INTEL SSDSC2BB120G4"))
                .is_none()
        );
        let (f, by) = t.lookup(None, Some("INTEL SSDSC2BB120G4")).expect("intel");
        assert_eq!((f.key.as_str(), by), ("intel", MatchedBy::ModelPattern));
    }

    #[test]
    fn bad_table_names_the_family() {
        let e =
            Table::parse("defaults: []\nfamilies:\n  - {key: x, model_family: '(', rules: []}\n")
                .unwrap_err();
        assert!(e.to_string().contains("family x"), "{e}");
    }
}
