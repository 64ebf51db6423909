//! The one table of collectors: name (the `collector` label and the config key under
//! `collectors:`), default interval, how to validate and build each. Adding a collector means a
//! module, a field in `CollectorsConfig` and a line in `COLLECTORS`.

use crate::collector::{
    Collector, databases, diskstats, filesystem, layers, probe, smart, topology,
};
use crate::validate::Invalid;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// The `collectors:` section: one sub-section per collector, each owned by its module.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CollectorsConfig {
    pub topology: topology::TopologyConfig,
    pub diskstats: diskstats::DiskstatsConfig,
    pub filesystem: filesystem::FilesystemConfig,
    pub layers: layers::LayersConfig,
    pub smart: smart::SmartConfig,
    pub probe: probe::ProbeConfig,
    pub databases: databases::DatabasesConfig,
}

/// What a collector may need beyond its own section.
pub struct BuildEnv<'a> {
    /// `state_dir`: where state that survives restarts lives.
    pub state_dir: &'a Path,
    /// Whether collectors write state back: the daemon does; one-shot `ssdwatch sample` only
    /// reads it (it may run as another user and must not leave files the daemon can't replace).
    pub persist_state: bool,
    /// The privileged helper, where the daemon gave up its capabilities: the SMART and layers
    /// collectors run their privileged reads through it. None: they run them in this process.
    pub helper: Option<crate::privileged::Helper>,
}

/// One registered collector.
pub struct Entry {
    /// The `collector` label and the key of its section under `collectors:`.
    pub name: &'static str,
    pub default_interval: Duration,
    /// Its configured `interval`: the watchdog's measure of a stalled collector.
    pub interval: fn(&CollectorsConfig) -> Duration,
    /// It publishes state other collectors read (`shared::Shared`): one-shot sampling runs it
    /// before the others.
    pub feeds_others: bool,
    pub enabled: fn(&CollectorsConfig) -> bool,
    /// Its `enabled` key, for `--[no-]collector.NAME`.
    pub enabled_mut: fn(&mut CollectorsConfig) -> &mut bool,
    /// Whether its section is the same in two configs (a reload says which changed).
    pub same: fn(&CollectorsConfig, &CollectorsConfig) -> bool,
    /// Checks the collector's section; `key` is its path (`collectors.NAME`).
    pub validate: fn(&CollectorsConfig, &str) -> Result<(), Invalid>,
    pub build: fn(&CollectorsConfig, &BuildEnv) -> anyhow::Result<Box<dyn Collector>>,
}

/// Every collector, in the order they are built and rendered.
pub const COLLECTORS: &[Entry] = &[
    Entry {
        name: "topology",
        default_interval: topology::DEFAULT_INTERVAL,
        feeds_others: true,
        interval: |c| c.topology.interval,
        enabled: |c| c.topology.enabled,
        enabled_mut: |c| &mut c.topology.enabled,
        same: |a, b| a.topology == b.topology,
        validate: |c, k| c.topology.validate(k),
        build: |c, _| Ok(Box::new(topology::TopologyCollector::new(&c.topology)?)),
    },
    Entry {
        name: "diskstats",
        default_interval: diskstats::DEFAULT_INTERVAL,
        feeds_others: true,
        interval: |c| c.diskstats.interval,
        enabled: |c| c.diskstats.enabled,
        enabled_mut: |c| &mut c.diskstats.enabled,
        same: |a, b| a.diskstats == b.diskstats,
        validate: |c, k| c.diskstats.validate(k),
        build: |c, env| {
            Ok(Box::new(diskstats::DiskstatsCollector::new(
                &c.diskstats,
                env.state_dir,
                env.persist_state,
            )?))
        },
    },
    Entry {
        name: "layers",
        default_interval: layers::DEFAULT_INTERVAL,
        feeds_others: true,
        interval: |c| c.layers.interval,
        enabled: |c| c.layers.enabled,
        enabled_mut: |c| &mut c.layers.enabled,
        same: |a, b| a.layers == b.layers,
        validate: |c, k| c.layers.validate(k),
        build: |c, env| {
            Ok(Box::new(layers::LayersCollector::with_helper(
                &c.layers,
                env.helper.clone(),
            )))
        },
    },
    Entry {
        name: "filesystem",
        default_interval: filesystem::DEFAULT_INTERVAL,
        feeds_others: false,
        interval: |c| c.filesystem.interval,
        enabled: |c| c.filesystem.enabled,
        enabled_mut: |c| &mut c.filesystem.enabled,
        same: |a, b| a.filesystem == b.filesystem,
        validate: |c, k| c.filesystem.validate(k),
        build: |c, _| {
            Ok(Box::new(filesystem::FilesystemCollector::new(
                &c.filesystem,
            )?))
        },
    },
    Entry {
        name: "smart",
        default_interval: smart::DEFAULT_INTERVAL,
        // Its rotation rates reach the topology collector's next sample; not worth serializing
        // one-shot mode for (smartctl runs take seconds).
        feeds_others: false,
        interval: |c| c.smart.interval,
        enabled: |c| c.smart.enabled,
        enabled_mut: |c| &mut c.smart.enabled,
        same: |a, b| a.smart == b.smart,
        validate: |c, k| c.smart.validate(k),
        build: |c, env| {
            Ok(Box::new(smart::SmartCollector::with_helper(
                &c.smart,
                env.helper.clone(),
            )?))
        },
    },
    Entry {
        name: "probe",
        default_interval: probe::DEFAULT_INTERVAL,
        feeds_others: false,
        interval: |c| c.probe.interval,
        enabled: |c| c.probe.enabled,
        enabled_mut: |c| &mut c.probe.enabled,
        same: |a, b| a.probe == b.probe,
        validate: |c, k| c.probe.validate(k),
        build: |c, env| {
            Ok(Box::new(probe::ProbeCollector::new(
                &c.probe,
                env.state_dir,
            )?))
        },
    },
    Entry {
        name: "databases",
        default_interval: databases::DEFAULT_INTERVAL,
        feeds_others: false,
        interval: |c| c.databases.interval,
        enabled: |c| c.databases.enabled,
        enabled_mut: |c| &mut c.databases.enabled,
        same: |a, b| a.databases == b.databases,
        validate: |c, k| c.databases.validate(k),
        build: |c, _| Ok(Box::new(databases::DatabasesCollector::new(&c.databases))),
    },
];

impl CollectorsConfig {
    /// Checks every collector's section, naming the key of the first bad value.
    pub fn validate(&self) -> Result<(), Invalid> {
        for e in COLLECTORS {
            (e.validate)(self, &format!("collectors.{}", e.name))?;
        }
        Ok(())
    }

    /// Turns the collector `name` on or off (a `--[no-]collector.NAME` flag); false when no
    /// collector has that name.
    pub fn set_enabled(&mut self, name: &str, on: bool) -> bool {
        match COLLECTORS.iter().find(|e| e.name == name) {
            Some(e) => {
                *(e.enabled_mut)(self) = on;
                true
            }
            None => false,
        }
    }

    /// The collectors whose sections differ between `self` and `other`, in table order.
    pub fn changed_sections(&self, other: &CollectorsConfig) -> Vec<&'static str> {
        COLLECTORS
            .iter()
            .filter(|e| !(e.same)(self, other))
            .map(|e| e.name)
            .collect()
    }

    /// Each enabled collector with its configured interval, in table order.
    pub fn enabled_intervals(&self) -> Vec<(&'static str, Duration)> {
        COLLECTORS
            .iter()
            .filter(|e| (e.enabled)(self))
            .map(|e| (e.name, (e.interval)(self)))
            .collect()
    }

    /// How old a shared block topology may be: the topology collector's interval (its default
    /// when it is disabled, so the others still share one reading per cycle).
    pub fn topology_max_age(&self) -> Duration {
        if self.topology.enabled {
            self.topology.interval
        } else {
            topology::DEFAULT_INTERVAL
        }
    }
}

/// Whether the collector named `name` feeds state that other collectors read.
pub fn feeds_others(name: &str) -> bool {
    COLLECTORS.iter().any(|e| e.name == name && e.feeds_others)
}

/// Builds every enabled collector, in table order.
pub fn build(c: &CollectorsConfig, env: &BuildEnv) -> anyhow::Result<Vec<Box<dyn Collector>>> {
    let mut out = Vec::new();
    for e in COLLECTORS.iter().filter(|e| (e.enabled)(c)) {
        let col = (e.build)(c, env)?;
        debug_assert_eq!(col.name(), e.name, "registry name and collector name agree");
        out.push(col);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collector_is_registered_once_and_built_under_its_own_name() {
        let c = CollectorsConfig::default();
        let dir = tempfile::tempdir().unwrap();
        let built = build(
            &c,
            &BuildEnv {
                state_dir: dir.path(),
                persist_state: false,
                helper: None,
            },
        )
        .unwrap();
        let names: Vec<&str> = built.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "topology",
                "diskstats",
                "layers",
                "filesystem",
                "smart",
                "probe",
                "databases"
            ]
        );
        let mut seen = std::collections::HashSet::new();
        assert!(COLLECTORS.iter().all(|e| seen.insert(e.name)));
    }

    #[test]
    fn a_disabled_collector_is_not_built() {
        let mut c = CollectorsConfig::default();
        c.smart.enabled = false;
        let dir = tempfile::tempdir().unwrap();
        let built = build(
            &c,
            &BuildEnv {
                state_dir: dir.path(),
                persist_state: false,
                helper: None,
            },
        )
        .unwrap();
        assert!(built.iter().all(|c| c.name() != "smart"));
    }

    #[test]
    fn every_collector_can_be_switched_by_name() {
        for e in COLLECTORS {
            let mut c = CollectorsConfig::default();
            assert!(c.set_enabled(e.name, false));
            assert!(!(e.enabled)(&c), "{}", e.name);
            assert_eq!(c.changed_sections(&CollectorsConfig::default()), [e.name]);
            assert!(c.set_enabled(e.name, true));
            assert!((e.enabled)(&c), "{}", e.name);
        }
        assert!(!CollectorsConfig::default().set_enabled("nosuch", true));
    }

    #[test]
    fn default_intervals_are_those_of_the_default_config() {
        let c = CollectorsConfig::default();
        assert_eq!(COLLECTORS[0].default_interval, c.topology.interval);
        assert_eq!(COLLECTORS[1].default_interval, c.diskstats.interval);
        assert_eq!(COLLECTORS[2].default_interval, c.layers.interval);
        assert_eq!(COLLECTORS[3].default_interval, c.filesystem.interval);
        assert_eq!(COLLECTORS[4].default_interval, c.smart.interval);
        assert_eq!(COLLECTORS[5].default_interval, c.probe.interval);
        assert_eq!(COLLECTORS[6].default_interval, c.databases.interval);
        for e in COLLECTORS {
            assert_eq!((e.interval)(&c), e.default_interval, "{}", e.name);
        }
    }
}
