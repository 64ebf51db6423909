//! Smart collector (placeholder until its module is written).

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SmartConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for SmartConfig {
    fn default() -> Self {
        SmartConfig {
            enabled: true,
            interval: Duration::from_secs(900),
        }
    }
}

impl SmartConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct SmartCollector {
    interval: Duration,
}

impl SmartCollector {
    pub fn new(cfg: &SmartConfig) -> anyhow::Result<Self> {
        Ok(SmartCollector {
            interval: cfg.interval,
        })
    }
}

#[async_trait::async_trait]
impl Collector for SmartCollector {
    fn name(&self) -> &'static str {
        "smart"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, _ctx: &Context) -> anyhow::Result<Sample> {
        Ok(Sample::default())
    }
}
