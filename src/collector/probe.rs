//! Probe collector (placeholder until its module is written).

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            enabled: true,
            interval: Duration::from_secs(300),
        }
    }
}

impl ProbeConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct ProbeCollector {
    interval: Duration,
}

impl ProbeCollector {
    pub fn new(cfg: &ProbeConfig, _state_dir: &std::path::Path) -> anyhow::Result<Self> {
        Ok(ProbeCollector {
            interval: cfg.interval,
        })
    }
}

#[async_trait::async_trait]
impl Collector for ProbeCollector {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, _ctx: &Context) -> anyhow::Result<Sample> {
        Ok(Sample::default())
    }
}
