//! SIGHUP: the config file is read again and the log level applied at once; what else changed
//! is named as needing a restart; then the web layer reloads its own config. A bad file keeps
//! the config in force and says why (file, key, line). A SIGHUP never ends the process.

use super::Overrides;
use crate::config::{Config, log_filter};
use crate::logging;
use std::path::PathBuf;
use tokio::sync::mpsc;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Registry, reload};

/// Changes the log filter of the running process.
#[derive(Clone)]
pub(super) struct LogHandle(reload::Handle<Targets, Registry>);

impl LogHandle {
    /// Applies a level spec the config validation already accepted.
    pub(super) fn set_level(&self, spec: &str) {
        match log_filter(spec) {
            Ok(f) => {
                if let Err(e) = self.0.reload(f) {
                    tracing::error!("changing the log level to {spec:?}: {e}");
                }
            }
            Err(e) => tracing::error!("log level {spec:?}: {e}"),
        }
    }
}

/// Logs to stderr in `format` with `filter`, which can be changed later through the handle;
/// each line starts with its syslog priority when stderr is the journal.
pub(super) fn init_logging(filter: Targets, format: logging::Format) -> LogHandle {
    let (filter, handle) = reload::Layer::new(filter);
    let formatter = logging::Formatter::new(format, logging::stderr_is_journal());
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(formatter),
        )
        .init();
    LogHandle(handle)
}

/// What a reload needs: where the config comes from, the flags that beat it, the config in
/// force and the log filter to change.
pub(super) struct Reloader {
    pub path: Option<PathBuf>,
    pub flags: Overrides,
    pub current: Config,
    pub log: LogHandle,
    /// Where the outcome of each reload is recorded for the scrape.
    pub reloads: std::sync::Arc<crate::snapshot::ConfigReloads>,
}

impl Reloader {
    /// Reads the config again and applies what can be applied live; logs what happened and
    /// returns it in a few words (for `systemctl status`).
    fn reload(&mut self, new: Result<Config, String>) -> String {
        let Some(path) = &self.path else {
            tracing::info!("SIGHUP: no --config.file; the built-in defaults stay");
            return "no --config.file, the built-in defaults stay".to_string();
        };
        let new = match new {
            Ok(c) => {
                self.reloads.record(crate::snapshot::CONFIG_FILE, true);
                c
            }
            Err(e) => {
                self.reloads.record(crate::snapshot::CONFIG_FILE, false);
                tracing::error!("SIGHUP: config not reloaded, the previous one stays: {e}");
                return "config not reloaded (an error, see the log); the previous one stays"
                    .to_string();
            }
        };
        let mut applied = Vec::new();
        if new.log.level != self.current.log.level {
            self.log.set_level(&new.log.level);
            applied.push(format!(
                "log.level {:?} -> {:?}",
                self.current.log.level, new.log.level
            ));
        } else if self.flags.log_level.is_some() {
            applied.push("log.level stays as --log.level sets it".to_string());
        }
        let restart = self.current.restart_needed(&new);
        let applied = if applied.is_empty() {
            "nothing to apply".to_string()
        } else {
            applied.join(", ")
        };
        if restart.is_empty() {
            tracing::info!("SIGHUP: config {} reloaded: {applied}", path.display());
        } else {
            tracing::warn!(
                "SIGHUP: config {} reloaded: {applied}; changed but applied only after a restart: {}",
                path.display(),
                restart.join(", ")
            );
            // Keep comparing against what runs, so the next reload names these again.
            let mut kept = self.current.clone();
            kept.log = new.log;
            self.current = kept;
            return format!(
                "config reloaded; applied after a restart: {}",
                restart.join(", ")
            );
        }
        self.current = new;
        "config reloaded".to_string()
    }
}

/// Listens for SIGHUP: each one reloads the config file, then asks the web layer to reload
/// (the receiver gets one message per SIGHUP, coalesced while one is pending). Must run inside
/// the runtime.
pub(super) fn on_sighup(mut r: Reloader) -> mpsc::Receiver<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = mpsc::channel(1);
    match signal(SignalKind::hangup()) {
        Ok(mut hup) => {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading the config file and the web config");
                    crate::notify::reloading();
                    let (path, flags) = (r.path.clone(), r.flags.clone());
                    // Not the door: one small config file, read once per SIGHUP.
                    let loaded = tokio::task::spawn_blocking(move || {
                        super::load_config(path.as_deref(), &flags)
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("reading the config failed: {e}")));
                    let outcome = r.reload(loaded);
                    let _ = tx.try_send(());
                    crate::notify::reloaded(&outcome);
                }
            });
        }
        Err(e) => tracing::error!("cannot listen for SIGHUP: {e}"),
    }
    rx
}
