//! Filesystem collector (placeholder until its module is written).

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FilesystemConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for FilesystemConfig {
    fn default() -> Self {
        FilesystemConfig {
            enabled: true,
            interval: Duration::from_secs(15),
        }
    }
}

impl FilesystemConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct FilesystemCollector {
    interval: Duration,
}

impl FilesystemCollector {
    pub fn new(cfg: &FilesystemConfig) -> anyhow::Result<Self> {
        Ok(FilesystemCollector {
            interval: cfg.interval,
        })
    }
}

#[async_trait::async_trait]
impl Collector for FilesystemCollector {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, _ctx: &Context) -> anyhow::Result<Sample> {
        Ok(Sample::default())
    }
}
