//! The web config in force, and its reloads: on SIGHUP and when the web config file or a file
//! it names changes (polled). A bad reload keeps the config in force and says why.

use crate::config::{MAX_CONFIG_BYTES, read_config_file};
use crate::web::auth::Users;
use crate::web::config::{TlsVersion, WebConfigError, WebConfigFile};
use crate::web::limits::RateLimiter;
use crate::web::tls;
use axum::http::{HeaderName, HeaderValue};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};

/// How often the watched files' metadata is compared.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(3);

/// One loaded web config: what each new connection and request uses.
#[derive(Debug, Default)]
pub struct Active {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: Option<Arc<Users>>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub rate_limit: Option<RateLimiter>,
    /// The web config file, then the files it names: what the watcher compares.
    pub files: Vec<PathBuf>,
}

/// Reads and checks a web config file and everything it names (certificates, key, CA).
/// Does one bcrypt (the decoy hash) when there are users.
pub(crate) fn load(path: &Path) -> Result<Active, WebConfigError> {
    // Capped and regular files only, as `--config.file`: `/dev/zero` or a FIFO must not take the
    // daemon's memory or hang its start (or a reload).
    let bytes = read_config_file(path, MAX_CONFIG_BYTES)
        .map_err(|e| WebConfigError::new(path, e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        WebConfigError::new(
            path,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })?;
    let cfg = WebConfigFile::parse(&text, path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files = vec![path.to_path_buf()];
    let tls = match &cfg.tls_server_config {
        Some(t) if cfg.tls_enabled() => {
            if let Some(v @ (TlsVersion::TLS10 | TlsVersion::TLS11)) = t.min_version {
                tracing::info!(
                    file = %path.display(),
                    "tls_server_config.min_version {v:?}: TLS 1.2 is the floor (rustls offers nothing older)"
                );
            }
            files.extend(tls::files(t, dir));
            Some(tls::build(t, dir).map_err(|i| WebConfigError::new(path, i.to_string()))?)
        }
        _ => None,
    };
    let users = match cfg.basic_auth_users.filter(|u| !u.is_empty()) {
        Some(u) => Some(Arc::new(
            Users::new(u).map_err(|e| WebConfigError::new(path, e.to_string()))?,
        )),
        None => None,
    };
    let headers = cfg
        .http_server_config
        .and_then(|h| h.headers)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| !v.is_empty()) // "Unset if blank."
        .filter_map(|(n, v)| {
            Some((
                HeaderName::try_from(n).ok()?,
                HeaderValue::try_from(v).ok()?,
            ))
        })
        .collect();
    let rate_limit = cfg.rate_limit.and_then(|r| {
        let interval = r.interval.filter(|i| !i.is_zero())?;
        Some(RateLimiter::new(interval, r.burst.unwrap_or(1)))
    });
    Ok(Active {
        tls,
        users,
        headers,
        rate_limit,
        files,
    })
}

/// The config in force: swapped whole on a good reload; readers take an `Arc` and keep it for
/// their connection or request.
#[derive(Debug, Default)]
pub(crate) struct Current {
    active: RwLock<Arc<Active>>,
}

impl Current {
    pub(crate) fn new(active: Active) -> Current {
        Current {
            active: RwLock::new(Arc::new(active)),
        }
    }

    pub(crate) fn get(&self) -> Arc<Active> {
        self.active
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, active: Active) {
        *self.active.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(active);
    }
}

/// What a file looked like: a changed value means "reload". Missing files count too, so a
/// file that comes back is noticed.
type Fingerprint = Vec<Option<(SystemTime, u64, u64)>>;

fn fingerprint(files: &[PathBuf]) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata(f).ok()?;
            Some((m.modified().ok()?, m.len(), m.ino()))
        })
        .collect()
}

/// Reloads `path` into `current` on each message of `hup` and when a watched file changes,
/// until `stop`. Without a web config file, a SIGHUP only says so.
pub(crate) async fn watch(
    current: Arc<Current>,
    path: Option<PathBuf>,
    mut hup: mpsc::Receiver<()>,
    reloads: Arc<crate::snapshot::ConfigReloads>,
    mut stop: watch::Receiver<bool>,
) {
    use crate::snapshot::WEB_CONFIG_FILE;
    let mut files = current.get().files.clone();
    let mut seen = fingerprint(&files);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut hup_open = true;
    loop {
        let why = tokio::select! {
            _ = stop.changed() => return,
            msg = hup.recv(), if hup_open => match msg {
                Some(()) => "SIGHUP",
                None => { hup_open = false; continue; }
            },
            _ = tick.tick() => {
                let now = fingerprint(&files);
                if now == seen { continue; }
                seen = now;
                "a watched file changed"
            }
        };
        let Some(path) = path.clone() else {
            tracing::info!("{why}: no --web.config.file to reload");
            continue;
        };
        // Not the door: one small config file, read once per SIGHUP.
        let result = tokio::task::spawn_blocking(move || load(&path)).await;
        match result {
            Ok(Ok(mut active)) => {
                // What the previous users verified stays verified (entries name their hash):
                // a reload under a flood of wrong passwords must not send Prometheus' password
                // back to bcrypt.
                let previous = current.get();
                if let (Some(new), Some(old)) = (
                    active.users.as_mut().and_then(Arc::get_mut),
                    previous.users.as_deref(),
                ) {
                    new.inherit(old);
                }
                tracing::info!(
                    tls = active.tls.is_some(),
                    users = active.users.is_some(),
                    "{why}: web config reloaded"
                );
                files = active.files.clone();
                current.set(active);
                reloads.record(WEB_CONFIG_FILE, true);
            }
            Ok(Err(e)) => {
                reloads.record(WEB_CONFIG_FILE, false);
                tracing::error!("{why}: web config not reloaded, the previous one stays: {e}")
            }
            Err(e) => {
                reloads.record(WEB_CONFIG_FILE, false);
                tracing::error!("{why}: web config reload failed: {e}")
            }
        }
        // Compare against what was just read, good or bad: a bad file is reported once per
        // change, not every poll.
        seen = fingerprint(&files);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `load(path)` on another thread: a load that hangs fails the test instead of holding it.
    fn load_error(path: &Path) -> String {
        let p = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        // Not the door: a test's own watchdog thread.
        std::thread::spawn(move || {
            let _ = tx.send(load(&p).map(|_| ()).map_err(|e| e.to_string()));
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Err(e)) => e,
            Ok(Ok(())) => panic!("{} was accepted", path.display()),
            Err(_) => panic!("loading {} did not return", path.display()),
        }
    }

    #[test]
    fn an_endless_a_blocking_or_a_huge_web_config_file_is_refused_at_once_naming_it() {
        let err = load_error(Path::new("/dev/zero"));
        assert!(
            err.contains("web config file /dev/zero") && err.contains("not a regular file"),
            "{err}"
        );

        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("web.yml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = load_error(&fifo);
        assert!(
            err.contains(&fifo.display().to_string()) && err.contains("a FIFO"),
            "{err}"
        );

        let huge = dir.path().join("huge.yml");
        std::fs::write(&huge, "# padding\n".repeat(200_000)).unwrap();
        let err = load_error(&huge);
        assert!(
            err.contains(&huge.display().to_string()) && err.contains("larger than 1048576 bytes"),
            "{err}"
        );

        // The files it names are read the same way.
        let cert_fifo = dir.path().join("server.crt");
        nix::unistd::mkfifo(&cert_fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let web = dir.path().join("tls.yml");
        std::fs::write(
            &web,
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /dev/zero\n",
        )
        .unwrap();
        let err = load_error(&web);
        assert!(
            err.contains("tls.yml") && err.contains("server.crt") && err.contains("a FIFO"),
            "{err}"
        );
    }
}
