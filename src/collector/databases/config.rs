//! The databases collector's configuration (`collectors.databases`): typed, with defaults and
//! the bounds each value is checked against. No I/O here.

use crate::validate::{
    Invalid, check_absolute_path, check_duration, check_entries, check_interval, check_range,
    check_timeout,
};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// Between samples unless the config says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The most paths watched by name.
const MAX_WATCH: usize = 64;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DatabasesConfig {
    pub enabled: bool,
    /// How often the cheap parts are looked at and a sizing pass is taken.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Find PostgreSQL and MySQL/MariaDB servers from their processes.
    pub discover: bool,
    /// How often the big trees are sized from scratch.
    #[serde(with = "humantime_serde")]
    pub size_interval: Duration,
    /// Entries one sizing pass of a database takes at most; the next sample resumes.
    pub size_entries_per_pass: u64,
    /// Time one sizing pass of a database takes at most.
    #[serde(with = "humantime_serde")]
    pub size_time_per_pass: Duration,
    /// How long MySQL keeps binary logs here, where the server's own setting
    /// (binlog_expire_logs_seconds, expire_logs_days, read from its command line and option
    /// files) is not to be believed; unset, the server's setting is used (30 days where it says
    /// none or "never"). Exported beside the oldest log's age, for the alert on logs kept past it.
    #[serde(with = "humantime_serde::option")]
    pub mysql_binlog_retention: Option<Duration>,
    /// How long a database's cheap look (or the search of /proc) may take before it is
    /// reported stuck; a sizing pass gets this on top of `size_time_per_pass`.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Other paths to size by name (a Redis AOF, a Kafka log directory, backups).
    pub watch: Vec<WatchConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    pub name: String,
    pub path: PathBuf,
}

impl Default for DatabasesConfig {
    fn default() -> Self {
        DatabasesConfig {
            enabled: true,
            interval: DEFAULT_INTERVAL,
            discover: true,
            size_interval: Duration::from_secs(15 * 60),
            size_entries_per_pass: 100_000,
            size_time_per_pass: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            mysql_binlog_retention: None,
            watch: Vec::new(),
        }
    }
}

impl DatabasesConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))?;
        check_duration(
            &format!("{key}.size_interval"),
            self.size_interval,
            Duration::from_secs(1),
            crate::validate::MAX_INTERVAL,
        )?;
        check_range(
            &format!("{key}.size_entries_per_pass"),
            self.size_entries_per_pass,
            100,
            100_000_000,
        )?;
        check_duration(
            &format!("{key}.size_time_per_pass"),
            self.size_time_per_pass,
            Duration::from_millis(10),
            Duration::from_secs(600),
        )?;
        check_timeout(key, self.timeout)?;
        if let Some(r) = self.mysql_binlog_retention {
            check_duration(
                &format!("{key}.mysql_binlog_retention"),
                r,
                crate::time::HOUR_DURATION,
                crate::time::DAY_DURATION * 3660,
            )?;
        }
        check_entries(&format!("{key}.watch"), self.watch.len(), MAX_WATCH)?;
        for (i, w) in self.watch.iter().enumerate() {
            let k = format!("{key}.watch[{i}]");
            if w.name.trim().is_empty() || w.name.len() > 128 {
                return Err(Invalid::new(
                    format!("{k}.name"),
                    "must be 1 to 128 bytes, not blank",
                ));
            }
            if w.name.starts_with('/') {
                return Err(Invalid::new(
                    format!("{k}.name"),
                    "must not start with / (discovered databases are labelled by their path)",
                ));
            }
            check_absolute_path(&format!("{k}.path"), &w.path)?;
            if self.watch[..i].iter().any(|o| o.name == w.name) {
                return Err(Invalid::new(format!("{k}.name"), "listed twice"));
            }
        }
        Ok(())
    }
}
