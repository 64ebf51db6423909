//! Diskstats collector (placeholder until its module is written).

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiskstatsConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for DiskstatsConfig {
    fn default() -> Self {
        DiskstatsConfig {
            enabled: true,
            interval: Duration::from_secs(15),
        }
    }
}

impl DiskstatsConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct DiskstatsCollector {
    interval: Duration,
}

impl DiskstatsCollector {
    pub fn new(cfg: &DiskstatsConfig) -> anyhow::Result<Self> {
        Ok(DiskstatsCollector {
            interval: cfg.interval,
        })
    }
}

#[async_trait::async_trait]
impl Collector for DiskstatsCollector {
    fn name(&self) -> &'static str {
        "diskstats"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, _ctx: &Context) -> anyhow::Result<Sample> {
        Ok(Sample::default())
    }
}
