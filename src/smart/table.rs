//! The per-family vendor table (`families.yaml`, embedded at build time): what an ATA attribute
//! means on a drive family. Only loading and matching live here; no I/O, no metric names.

use regex_lite::Regex;
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
    /// The low 16 bits of raw as a percentage in two bytes: bits 8..15 the whole percent,
    /// bits 0..7 the hundredths (0..99). WD/SanDisk 230 (`0x0445` is 4.69 %).
    RawLow16Centi,
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
    /// NAND pages: multiplied by the rule's `page_bytes` (the page size of that product line).
    Page,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: u32,
    #[serde(default)]
    name: Option<String>,
    field: Field,
    from: From,
    #[serde(default)]
    percent: Option<Percent>,
    #[serde(default)]
    unit: Unit,
    #[serde(default)]
    add: bool,
    #[serde(default)]
    page_bytes: Option<u64>,
    #[serde(default)]
    models: Option<String>,
}

/// One attribute meaning of a family (see the head of `families.yaml`).
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: u32,
    pub name: Option<String>,
    pub field: Field,
    pub from: From,
    pub percent: Option<Percent>,
    pub unit: Unit,
    pub add: bool,
    /// Bytes per NAND page, for `unit: page` only (required there).
    pub page_bytes: Option<u64>,
    /// The rule holds only for models matching this (one product line of the family).
    pub models: Option<Regex>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFamily {
    key: String,
    model_family: String,
    #[serde(default)]
    not_model_family: Option<String>,
    models: String,
    #[serde(default)]
    not_models: Option<String>,
    rules: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    defaults: Vec<RawRule>,
    families: Vec<RawFamily>,
}

#[derive(Debug)]
pub struct Family {
    pub key: String,
    model_family: Regex,
    not_model_family: Option<Regex>,
    /// The model names of the family's product lines, for drives smartctl's database misses.
    models: Regex,
    not_models: Option<Regex>,
    pub rules: Vec<Rule>,
}

impl Family {
    /// Whether a model name belongs to this family's product lines.
    pub fn matches_model(&self, model: &str) -> bool {
        self.models.is_match(model) && !self.not_models.as_ref().is_some_and(|n| n.is_match(model))
    }
}

#[derive(Debug)]
pub struct Table {
    pub defaults: Vec<Rule>,
    pub families: Vec<Family>,
}

/// How a family was matched: through smartctl's database (`model_family`) or, where the
/// database names none, by the model name.
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
        source: regex_lite::Error,
    },
    #[error("vendor table: family {family}: attribute {id}: {message}")]
    Rule {
        family: String,
        id: u32,
        message: &'static str,
    },
}

fn compile(family: &str, pattern: &str) -> Result<Regex, TableError> {
    Regex::new(pattern).map_err(|source| TableError::Pattern {
        family: family.to_string(),
        pattern: pattern.to_string(),
        source,
    })
}

fn rule(family: &str, r: RawRule) -> Result<Rule, TableError> {
    let bad = |message| TableError::Rule {
        family: family.to_string(),
        id: r.id,
        message,
    };
    match (r.unit, r.page_bytes) {
        (Unit::Page, None | Some(0)) => return Err(bad("unit page needs page_bytes > 0")),
        (Unit::Page, Some(_)) | (_, None) => {}
        (_, Some(_)) => return Err(bad("page_bytes goes with unit page only")),
    }
    let ratio = matches!(r.field, Field::WearUsedRatio | Field::SpareAvailableRatio);
    if ratio != r.percent.is_some() {
        return Err(bad(
            "percent goes with the ratio fields, and only with them",
        ));
    }
    if r.from == From::RawLow16Centi && !ratio {
        return Err(bad("raw_low16_centi is a percentage: ratio fields only"));
    }
    Ok(Rule {
        models: r
            .models
            .as_deref()
            .map(|p| compile(family, p))
            .transpose()?,
        id: r.id,
        name: r.name,
        field: r.field,
        from: r.from,
        percent: r.percent,
        unit: r.unit,
        add: r.add,
        page_bytes: r.page_bytes,
    })
}

impl Table {
    /// Parses a table; errors name the family key and the bad pattern.
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let raw: RawTable = serde_yaml_ng::from_str(text)?;
        let mut families = Vec::with_capacity(raw.families.len());
        for f in raw.families {
            let re = |p: &str| compile(&f.key, p);
            families.push(Family {
                model_family: re(&f.model_family)?,
                not_model_family: f.not_model_family.as_deref().map(re).transpose()?,
                models: re(&f.models)?,
                not_models: f.not_models.as_deref().map(re).transpose()?,
                rules: f
                    .rules
                    .into_iter()
                    .map(|r| rule(&f.key, r))
                    .collect::<Result<_, _>>()?,
                key: f.key,
            });
        }
        let defaults = raw
            .defaults
            .into_iter()
            .map(|r| rule("defaults", r))
            .collect::<Result<_, _>>()?;
        Ok(Table { defaults, families })
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

    /// Finds the family of a drive: smartctl's `model_family` first; the model-name patterns
    /// only when smartctl names no family (its database misses the drive, or is too old).
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
            .find(|f| f.matches_model(model))
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
        // Checks each rule (percent with ratio fields, page with page_bytes) while parsing.
        assert!(t.defaults.iter().all(|r| r.percent.is_none()));
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

    /// Model names as drivedb.h's test comments and the vendors' data sheets give them, one
    /// or more per family; every family must have a case.
    #[test]
    fn every_family_recognises_its_product_lines_by_model_name() {
        let cases: &[(&str, &str)] = &[
            ("samsung", "Samsung SSD 860 EVO 500GB"),
            ("samsung", "Samsung SSD 870 QVO 4TB"),
            ("samsung", "SAMSUNG MZ7LH1T9HMLT-00005"),
            ("samsung", "SAMSUNG MZ7L3480HCHQ-00A07"),
            ("samsung", "MZ7KM960HMJP0D3"),
            ("samsung", "Samsung SSD 840 Series"),
            ("intel", "INTEL SSDSC2KB480G8"),
            ("intel", "INTEL SSDSC2BB120G4L"),
            ("intel", "SOLIDIGM SSDSC2KB038TZ"),
            ("intel", "INTEL SSDSCKKW512G8"),
            ("dell_intel", "SSDSC2KB480G7R"),
            ("dell_intel", "INTEL SSDSC2BB480G7R"),
            ("micron_client", "CT500MX500SSD1"),
            ("micron_client", "Crucial_CT500MX200SSD1"),
            ("micron_client", "Micron_1100_MTFDDAK512TBN"),
            ("micron_enterprise", "Micron_5300_MTFDDAK1T9TDS"),
            ("micron_enterprise", "MTFDDAK1T9TDT"),
            ("micron_enterprise", "Micron_5400_MTFDDAK960TGA_SED"),
            ("crucial_m4", "M4-CT128M4SSD2"),
            ("crucial_m4", "MTFDDAK128MAM-1J1"),
            ("phison", "KINGSTON SA400M8120G"),
            ("phison", "KINGSTON  SA400S37480G"),
            ("kingston_uv", "KINGSTON SUV500MS120G"),
            ("sandforce", "KINGSTON SV300S37A120G"),
            ("wd_ssd", "WDC  WDS400T1R0A-68A4W0"),
            ("wd_ssd", "WDC WDS500G2B0A-00SM50"),
            ("sandisk_marvell", "SanDisk SDSSDHII240G"),
            ("sandisk_marvell", "SanDisk SD8SB8U1T001122"),
            ("silicon_motion", "TS32GMTS400"),
            ("silicon_motion", "CT250BX100SSD1"),
            ("silicon_motion", "ADATA SU800"),
            ("skhynix_enterprise", "HFS1T9G3H2X069N"),
            ("seagate_ssd", "Seagate BarraCuda SSD ZA500CM10002"),
            ("seagate_ssd", "Seagate IronWolf ZA1000NM10002-2ZG101"),
            ("ocz_barefoot3", "OCZ-VECTOR150"),
            ("plextor", "PLEXTOR PX-256M6S"),
        ];
        let t = Table::builtin();
        for (key, model) in cases {
            let got = t.lookup(None, Some(model)).map(|(f, _)| f.key.as_str());
            assert_eq!(got, Some(*key), "{model}");
        }
        for f in &t.families {
            assert!(
                cases.iter().any(|(k, _)| *k == f.key),
                "family {} has no model-name case",
                f.key
            );
        }
        // OEM firmware of the same hardware means other things, and unknown names are no
        // family: no figure rather than a wrong one.
        for model in [
            "SSDSC2KB480G8L LEN",    // Lenovo Intel: 241 counts LBAs there
            "X SSD 850 PRO 128GB",   // anonymised by its contributor
            "WDC WD140EDFZ-11A0VA0", // a WD hard disk
            "SanDisk SDSSDA240G",    // SSD Plus: SandForce, no entry
            "CT500P2SSD8",           // an NVMe drive
            "NONAME SSD 128GB",
        ] {
            let got = t.lookup(None, Some(model)).map(|(f, _)| f.key.as_str());
            assert_eq!(got, None, "{model}");
        }
    }

    #[test]
    fn current_and_old_drivedb_family_names_find_the_same_entry() {
        let t = Table::builtin();
        for (name, key) in [
            ("Intel S4510/S4610/S4500/S4600 Series SSDs", "intel"),
            ("Intel/Solidigm S46x0/S45x0 Series SSDs", "intel"),
            ("Micron 5100 Pro / 52x0 / 5300 SSDs", "micron_enterprise"),
            ("Micron 5100 / 52x0 / 5300 / 5400 SSDs", "micron_enterprise"),
            ("Seagate BarraCuda SSD", "seagate_ssd"),
            ("Seagate BarraCuda series SSD", "seagate_ssd"),
            ("Seagate IronWolf (Pro) 125 SSDs", "seagate_ssd"),
            ("Indilinx Barefoot 3 based SSDs", "ocz_barefoot3"),
            ("WD Blue / Red / Green SSDs", "wd_ssd"),
        ] {
            let got = t.lookup(Some(name), None).map(|(f, _)| f.key.as_str());
            assert_eq!(got, Some(key), "{name}");
        }
    }

    #[test]
    fn bad_table_names_the_family() {
        let e = Table::parse(
            "defaults: []\nfamilies:\n  - {key: x, model_family: '(', models: x, rules: []}\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("family x"), "{e}");
        let e = Table::parse(
            "defaults: []\nfamilies:\n  - {key: y, model_family: y, models: y, rules: [\
             {id: 247, field: nand_written_bytes, from: raw, unit: page}]}\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "vendor table: family y: attribute 247: unit page needs page_bytes > 0"
        );
        let e = Table::parse(
            "defaults: []\nfamilies:\n  - {key: z, model_family: z, models: z, rules: [\
             {id: 230, field: wear_used_ratio, from: value}]}\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("family z: attribute 230: percent"),
            "{e}"
        );
        // A family without model-name patterns is refused: every entry must have them.
        let e = Table::parse("defaults: []\nfamilies:\n  - {key: w, model_family: w, rules: []}\n")
            .unwrap_err();
        assert!(e.to_string().contains("models"), "{e}");
    }
}
