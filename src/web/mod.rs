//! The daemon's web layer, safe to expose: routes, exporter-toolkit's web config (TLS, basic
//! auth, headers, rate limit) with live reloads, and limits nothing outside can exhaust.
//! It renders snapshots only; it never touches a device.

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod limits;
pub(crate) mod reload;
pub(crate) mod routes;
mod server;
pub(crate) mod tls;

pub(crate) use limits::Limits;
pub(crate) use reload::{Active, load};
pub(crate) use server::serve;

use std::path::PathBuf;
use tokio::sync::mpsc;

/// How the daemon serves: the web config (already loaded, so a bad one stops the start), the
/// limits, and where reload requests (SIGHUP) come from.
#[derive(Debug)]
pub struct WebSetup {
    pub config_file: Option<PathBuf>,
    pub active: Active,
    pub limits: Limits,
    pub reload: mpsc::Receiver<()>,
    /// How the config files' loads went (the SIGHUP reloader records the config file's, the
    /// web layer the web config's); rendered at each scrape.
    pub reloads: std::sync::Arc<crate::snapshot::ConfigReloads>,
}

impl Default for WebSetup {
    /// Plain HTTP, no auth, default limits, no reloads.
    fn default() -> Self {
        WebSetup {
            config_file: None,
            active: Active::default(),
            limits: Limits::default(),
            reload: mpsc::channel(1).1,
            reloads: crate::snapshot::ConfigReloads::loaded_at_start(),
        }
    }
}
