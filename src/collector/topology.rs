//! Topology collector (placeholder until its module is written).

use crate::collector::{Collector, Context, Sample};
use crate::config::{Invalid, check_interval};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            enabled: true,
            interval: Duration::from_secs(60),
        }
    }
}

impl TopologyConfig {
    pub fn validate(&self, key: &str) -> Result<(), Invalid> {
        check_interval(key, self.interval, Duration::from_secs(1))
    }
}

pub struct TopologyCollector {
    interval: Duration,
}

impl TopologyCollector {
    pub fn new(cfg: &TopologyConfig) -> anyhow::Result<Self> {
        Ok(TopologyCollector {
            interval: cfg.interval,
        })
    }
}

#[async_trait::async_trait]
impl Collector for TopologyCollector {
    fn name(&self) -> &'static str {
        "topology"
    }

    fn next_delay(&mut self) -> Duration {
        self.interval
    }

    async fn sample(&mut self, _ctx: &Context) -> anyhow::Result<Sample> {
        Ok(Sample::default())
    }
}
