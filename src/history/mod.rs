//! Long-term history: an embedded SQLite store of filesystem, drive and probe records, its
//! downsampling, and forecasts (growth, full, wear-out) computed from what it holds.
//! It knows no collector: the daemon hands it plain records and reads plain series back. What
//! it publishes itself (the forecasts, the recoveries after TRIM and idle time, the store's own
//! health) it builds from its records in `service.rs`, `degradation.rs` and `slow.rs`.

pub mod clock;
pub mod codec;
pub mod current;
pub mod curve;
pub mod degradation;
pub mod export;
pub mod fill;
pub mod forecast;
pub mod record;
pub mod service;
pub mod slow;
pub mod store;

pub use record::{
    ComponentSeries, ComponentSize, DatabaseFacts, DatabaseSample, DiscardEvent, DriveHealthPoint,
    DriveHealthRecord, DriveId, DriveInfo, DriveKey, DrivePoint, DriveSample, FsId, FsInfo, FsKey,
    FsLayers, FsLayersRef, FsPoint, FsSample, FsSampleRef, IdlePeriod, LayerErrorCounts,
    LayerErrorKind, LayerErrorsSample, LayerErrorsSeries, LayerRow, LayerUse, ProbeRecord,
    ProbeRun, Stat,
};
pub use store::{Maintenance, Store, StoreError};

use crate::time::{DAY_DURATION, HOUR_DURATION};
use crate::validate::{
    Invalid, MAX_ENTRIES, check_absolute_path, check_duration, check_entries, check_range,
};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The largest rated endurance (1 EiB written): a thousand times the largest drive's rating.
pub const MAX_TBW_BYTES: u64 = 1 << 60;

/// The `history` section of the config.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    pub enabled: bool,
    /// How long samples are kept as they were taken before being rolled into hourly rows.
    #[serde(with = "humantime_serde")]
    pub retention_raw: Duration,
    /// How long hourly rows, probe results, discard events and idle periods are kept.
    #[serde(with = "humantime_serde")]
    pub retention_hourly: Duration,
    /// How often the daemon recomputes forecasts from the store.
    #[serde(with = "humantime_serde")]
    pub forecast_interval: Duration,
    /// A series keeps at most one raw sample per this interval; samples in between are not
    /// stored. Prometheus keeps the 15 s resolution; this store is for months and years. 50
    /// filesystems take 8 MiB of raw rows over 14 days at 5 min (benches/history.rs), so one
    /// sample a minute would alone take ~40 MiB of the 50 MiB budget.
    #[serde(with = "humantime_serde")]
    pub raw_interval: Duration,
    /// How often queued records are committed (one transaction each time). A commit costs
    /// SQLite about 40 KB of pages beyond its rows (the WAL's partly filled last pages, the
    /// b-trees' right edges, the WAL index), so fewer, larger commits are kinder to the drive
    /// being watched: at 15 min a commit carries three raw samples of every series. A kill -9
    /// loses at most this much; a stop (SIGTERM) commits what is queued.
    #[serde(with = "humantime_serde")]
    pub flush_interval: Duration,
    /// Rated endurance per drive model, for the endurance-used share and its date.
    pub endurance: Vec<EnduranceConfig>,
    /// The server the daemon imports this host's history from at its first start (none: no
    /// import by itself).
    pub import: Option<ImportConfig>,
}

/// The longest history imported: a range query at one point an hour stays under Prometheus'
/// 11,000 points a series.
pub const MAX_IMPORT_DAYS: u64 = 400;
/// The longest instance label taken (node_exporter's are `host:port`).
const MAX_INSTANCE_BYTES: usize = 256;

/// `history.import`: what `ssdwatch history import` is told by its flags, for the daemon to
/// run it by itself once, at its first start.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImportConfig {
    /// The query API's URL (`--prometheus`).
    pub prometheus: String,
    /// The host's `instance` label there (`--instance`): node_exporter's, such as db7:9100.
    pub instance: String,
    /// Prometheus' `http_config` file (`--http.config.file`).
    #[serde(default)]
    pub http_config_file: Option<PathBuf>,
    /// How far back (`--range`).
    #[serde(default = "default_import_range", with = "humantime_serde")]
    pub range: Duration,
}

fn default_import_range() -> Duration {
    60 * DAY_DURATION
}

impl ImportConfig {
    fn validate(&self, key: &str) -> Result<(), Invalid> {
        let k = |f: &str| format!("{key}.{f}");
        let host = self
            .prometheus
            .strip_prefix("https://")
            .or_else(|| self.prometheus.strip_prefix("http://"));
        match host {
            None => {
                return Err(Invalid::new(
                    k("prometheus"),
                    format!("{:?} is not an http:// or https:// URL", self.prometheus),
                ));
            }
            Some(h) if h.is_empty() || h.starts_with('/') => {
                return Err(Invalid::new(
                    k("prometheus"),
                    format!("{:?} names no server", self.prometheus),
                ));
            }
            Some(_) => {}
        }
        if self.prometheus.chars().any(|c| c.is_control() || c == ' ') {
            return Err(Invalid::new(
                k("prometheus"),
                "a URL holds no space or control character",
            ));
        }
        if self.instance.is_empty()
            || self.instance.len() > MAX_INSTANCE_BYTES
            || self.instance.chars().any(char::is_control)
        {
            return Err(Invalid::new(
                k("instance"),
                format!(
                    "the host's instance label there (such as db7:9100): 1 to {MAX_INSTANCE_BYTES} bytes, no control character"
                ),
            ));
        }
        if let Some(p) = &self.http_config_file {
            check_absolute_path(&k("http_config_file"), p)?;
        }
        check_duration(
            &k("range"),
            self.range,
            DAY_DURATION,
            MAX_IMPORT_DAYS as u32 * DAY_DURATION,
        )
    }
}

/// One `history.endurance` entry: a model pattern and its rating, as TBW or as DWPD over the
/// warranty (from the vendor's data sheet).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnduranceConfig {
    /// A regular expression searched in the drive's model (`^SAMSUNG MZQL2`).
    pub models: String,
    /// Rated terabytes written, in bytes (a size: `3500TB`).
    #[serde(default, deserialize_with = "crate::size::opt_bytes")]
    pub tbw_bytes: Option<u64>,
    /// Rated drive writes per day...
    #[serde(default)]
    pub dwpd: Option<f64>,
    /// ...over this many years of warranty.
    #[serde(default)]
    pub warranty_years: Option<f64>,
}

impl EnduranceConfig {
    fn validate(&self, key: &str) -> Result<(), Invalid> {
        regex_lite::Regex::new(&self.models).map_err(|e| {
            Invalid::new(
                format!("{key}.models"),
                format!("bad regular expression {:?}: {e}", self.models),
            )
        })?;
        // Each error names the field that is wrong (or missing), so its line can be shown.
        let k = |f: &str| format!("{key}.{f}");
        const EITHER: &str = "give tbw_bytes, or dwpd with warranty_years";
        match (self.tbw_bytes, self.dwpd, self.warranty_years) {
            (Some(b), None, None) => check_range(&k("tbw_bytes"), b, 1, MAX_TBW_BYTES),
            (Some(_), Some(_), _) => Err(Invalid::new(k("dwpd"), format!("{EITHER}, not both"))),
            (Some(_), None, Some(_)) => Err(Invalid::new(
                k("warranty_years"),
                format!("{EITHER}, not both"),
            )),
            (None, None, None) => Err(Invalid::new(k("tbw_bytes"), format!("missing: {EITHER}"))),
            (None, None, Some(_)) => Err(Invalid::new(
                k("dwpd"),
                "missing: warranty_years needs the dwpd it rates",
            )),
            (None, Some(_), None) => Err(Invalid::new(
                k("warranty_years"),
                "missing: dwpd needs the warranty it is rated over",
            )),
            (None, Some(d), Some(y)) => {
                if !(d > 0.0 && d <= 100.0) {
                    return Err(Invalid::new(k("dwpd"), "must be in (0, 100]"));
                }
                if !(y > 0.0 && y <= 20.0) {
                    return Err(Invalid::new(k("warranty_years"), "must be in (0, 20]"));
                }
                Ok(())
            }
        }
    }

    /// The compiled rule for the service.
    pub fn rule(&self) -> Result<service::EnduranceRule, regex_lite::Error> {
        let rating = match (self.tbw_bytes, self.dwpd, self.warranty_years) {
            (Some(b), _, _) => service::Rating::Tbw { bytes: b as f64 },
            (None, Some(dwpd), Some(warranty_years)) => service::Rating::Dwpd {
                dwpd,
                warranty_years,
            },
            _ => service::Rating::Tbw {
                bytes: f64::INFINITY,
            },
        };
        Ok(service::EnduranceRule {
            model: regex_lite::Regex::new(&self.models)?,
            rating,
        })
    }
}

impl HistoryConfig {
    /// The compiled `endurance` rules (their patterns were checked by `validate`).
    pub fn endurance_rules(&self) -> Result<Vec<service::EnduranceRule>, regex_lite::Error> {
        self.endurance.iter().map(|e| e.rule()).collect()
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            enabled: true,
            retention_raw: 14 * DAY_DURATION,
            retention_hourly: 730 * DAY_DURATION,
            forecast_interval: HOUR_DURATION,
            raw_interval: Duration::from_secs(300),
            flush_interval: Duration::from_secs(900),
            endurance: Vec::new(),
            import: None,
        }
    }
}

impl HistoryConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_duration(
            &format!("{key}.retention_raw"),
            self.retention_raw,
            HOUR_DURATION,
            90 * DAY_DURATION,
        )?;
        // Ten years bounds every timestamp subtraction the store does with it.
        check_duration(
            &format!("{key}.retention_hourly"),
            self.retention_hourly,
            DAY_DURATION,
            3653 * DAY_DURATION,
        )?;
        if self.retention_hourly < self.retention_raw {
            return Err(Invalid::new(
                format!("{key}.retention_hourly"),
                "must be at least retention_raw (hourly rows are made from raw ones)",
            ));
        }
        check_duration(
            &format!("{key}.forecast_interval"),
            self.forecast_interval,
            Duration::from_secs(60),
            DAY_DURATION,
        )?;
        check_duration(
            &format!("{key}.raw_interval"),
            self.raw_interval,
            Duration::from_secs(1),
            HOUR_DURATION,
        )?;
        check_duration(
            &format!("{key}.flush_interval"),
            self.flush_interval,
            Duration::from_secs(1),
            HOUR_DURATION,
        )?;
        check_entries(
            &format!("{key}.endurance"),
            self.endurance.len(),
            MAX_ENTRIES,
        )?;
        for (i, e) in self.endurance.iter().enumerate() {
            e.validate(&format!("{key}.endurance[{i}]"))?;
        }
        if let Some(i) = &self.import {
            i.validate(&format!("{key}.import"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_parse_from_an_empty_section() {
        let c: HistoryConfig = serde_yaml_ng::from_str("{}").unwrap();
        assert_eq!(c, HistoryConfig::default());
        c.validate("history").unwrap();
    }

    #[test]
    fn humantime_values_and_unknown_keys() {
        let c: HistoryConfig =
            serde_yaml_ng::from_str("retention_raw: 7d\nretention_hourly: 1y\n").unwrap();
        assert_eq!(c.retention_raw, 7 * DAY_DURATION);
        c.validate("history").unwrap();
        let e = serde_yaml_ng::from_str::<HistoryConfig>("retention: 7d\n").unwrap_err();
        assert!(e.to_string().contains("retention"), "{e}");
    }

    #[test]
    fn out_of_range_values_name_the_key() {
        let mut c = HistoryConfig {
            retention_raw: Duration::from_secs(60),
            ..Default::default()
        };
        assert_eq!(
            c.validate("history").unwrap_err().key,
            "history.retention_raw"
        );
        c.retention_raw = 30 * DAY_DURATION;
        c.retention_hourly = 20 * DAY_DURATION;
        assert_eq!(
            c.validate("history").unwrap_err().key,
            "history.retention_hourly"
        );
        c.retention_hourly = 100 * 365 * DAY_DURATION;
        assert_eq!(
            c.validate("history").unwrap_err().key,
            "history.retention_hourly"
        );
        c.retention_hourly = 365 * DAY_DURATION;
        c.forecast_interval = Duration::ZERO;
        assert_eq!(
            c.validate("history").unwrap_err().key,
            "history.forecast_interval"
        );
        c.forecast_interval = HOUR_DURATION;
        c.raw_interval = DAY_DURATION;
        assert_eq!(
            c.validate("history").unwrap_err().key,
            "history.raw_interval"
        );
    }

    #[test]
    fn the_import_section_takes_the_commands_flags_and_names_a_wrong_key() {
        let c: HistoryConfig = serde_yaml_ng::from_str(
            "import:\n  prometheus: https://mimir.example/prometheus\n  instance: db7:9100\n  http_config_file: /etc/ssdwatch/client.yml\n  range: 90d\n",
        )
        .unwrap();
        c.validate("history").unwrap();
        let i = c.import.as_ref().unwrap();
        assert_eq!(i.range, 90 * DAY_DURATION);
        assert_eq!(i.instance, "db7:9100");
        // The range defaults to the command's.
        let c: HistoryConfig =
            serde_yaml_ng::from_str("import: {prometheus: 'http://p:9090', instance: a}\n")
                .unwrap();
        assert_eq!(c.import.as_ref().unwrap().range, 60 * DAY_DURATION);
        c.validate("history").unwrap();
        // Unknown and missing keys are errors of the parser, naming them.
        let e = serde_yaml_ng::from_str::<HistoryConfig>(
            "import: {prometheus: 'http://p:9090', instance: a, tenant: x}\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("tenant"), "{e}");
        let e = serde_yaml_ng::from_str::<HistoryConfig>("import: {prometheus: 'http://p'}\n")
            .unwrap_err();
        assert!(e.to_string().contains("instance"), "{e}");
        let key = |yaml: &str| {
            serde_yaml_ng::from_str::<HistoryConfig>(yaml)
                .unwrap()
                .validate("history")
                .err()
                .map(|i| i.key)
        };
        for (yaml, want) in [
            ("import: {prometheus: 'p:9090', instance: a}", "prometheus"),
            (
                "import: {prometheus: 'https://', instance: a}",
                "prometheus",
            ),
            (
                "import: {prometheus: 'http://p 1', instance: a}",
                "prometheus",
            ),
            ("import: {prometheus: 'http://p', instance: ''}", "instance"),
            (
                "import: {prometheus: 'http://p', instance: a, http_config_file: c.yml}",
                "http_config_file",
            ),
            (
                "import: {prometheus: 'http://p', instance: a, range: 12h}",
                "range",
            ),
            (
                "import: {prometheus: 'http://p', instance: a, range: 401d}",
                "range",
            ),
        ] {
            assert_eq!(
                key(yaml).as_deref(),
                Some(format!("history.import.{want}").as_str()),
                "{yaml}"
            );
        }
    }

    #[test]
    fn an_endurance_entry_names_the_field_that_is_wrong_or_missing() {
        let key = |tbw, dwpd, years| {
            let e = EnduranceConfig {
                models: "^X".into(),
                tbw_bytes: tbw,
                dwpd,
                warranty_years: years,
            };
            e.validate("e").err().map(|i| i.key)
        };
        assert_eq!(key(Some(1), None, None), None);
        assert_eq!(key(None, Some(1.0), Some(5.0)), None);
        assert_eq!(key(Some(0), None, None).as_deref(), Some("e.tbw_bytes"));
        assert_eq!(
            key(Some(u64::MAX), None, None).as_deref(),
            Some("e.tbw_bytes")
        );
        assert_eq!(key(Some(1), Some(1.0), None).as_deref(), Some("e.dwpd"));
        assert_eq!(
            key(Some(1), None, Some(1.0)).as_deref(),
            Some("e.warranty_years")
        );
        assert_eq!(key(None, None, Some(1.0)).as_deref(), Some("e.dwpd"));
        assert_eq!(key(None, None, None).as_deref(), Some("e.tbw_bytes"));
        assert_eq!(
            key(None, Some(1.0), None).as_deref(),
            Some("e.warranty_years")
        );
        assert_eq!(
            key(None, Some(f64::NAN), Some(1.0)).as_deref(),
            Some("e.dwpd")
        );
        assert_eq!(
            key(None, Some(1.0), Some(20.5)).as_deref(),
            Some("e.warranty_years")
        );
    }
}
