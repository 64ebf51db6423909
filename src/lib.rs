//! ssdwatch: a Prometheus exporter and monitoring daemon for SSDs under databases.
//! `run` boots the whole daemon in-process so tests can drive it like `main` does.

pub(crate) mod backtest;
pub mod btrfs;
pub(crate) mod catalogue;
pub mod cli;
pub mod collector;
pub mod config;
pub(crate) mod daemon;
pub mod databases;
pub mod door;
pub(crate) mod exe;
pub mod fault;
pub(crate) mod gzip;
pub mod history;
pub(crate) mod import;
pub(crate) mod label;
pub mod layers;
pub(crate) mod listen;
pub(crate) mod logging;
pub(crate) mod memory;
pub mod metrics;
pub(crate) mod notify;
pub(crate) mod privileged;
pub mod privsep;
pub mod probe;
pub(crate) mod process;
pub mod procfs;
pub mod query;
pub mod registry;
pub mod render;
pub mod report;
mod roots;
pub mod shared;
pub(crate) mod size;
pub(crate) mod small_file;
pub mod smart;
pub mod snapshot;
pub(crate) mod space;
pub(crate) mod statefile;
pub mod statfs;
pub mod sysfs;
#[cfg(test)]
mod testing;
pub(crate) mod time;
pub(crate) mod validate;
pub(crate) mod web;
pub(crate) mod yaml_guard;
pub(crate) mod yaml_line;

pub use daemon::{run, run_with_listener, sample_once};
pub use roots::Roots;
