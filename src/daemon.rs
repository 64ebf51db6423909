//! Wires collectors, the scheduler and the HTTP server together, and shuts them down.

use crate::Roots;
use crate::collector::{self, Collector, Context};
use crate::config::Config;
use crate::fault::Faults;
use crate::registry::{self, BuildEnv};
use crate::snapshot::Store;
use anyhow::Context as _;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Runs the daemon until `shutdown` resolves: binds the configured address, then serves.
pub async fn run(
    config: Config,
    roots: Roots,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = config.web.listen_address.clone();
    let listener = TcpListener::bind(&addr).await.with_context(|| {
        format!("listening on {addr} (web.listen_address / --web.listen-address)")
    })?;
    run_with_listener(config, roots, listener, shutdown).await
}

/// Runs the daemon on an already bound listener (tests bind port 0 and read the address).
pub async fn run_with_listener(
    config: Config,
    roots: Roots,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (collectors, ctx) = build(&config, roots, true)?;
    let store = Arc::new(Store::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let tasks = collector::spawn_all(collectors, ctx, store.clone(), stop_rx);
    match listener.local_addr() {
        Ok(a) => tracing::info!(address = %a, "serving /metrics"),
        Err(_) => tracing::info!("serving /metrics"),
    }
    let app = crate::http::router(store);
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("HTTP server");
    let _ = stop_tx.send(true);
    for t in tasks {
        // Collectors stop at their next await point; a stuck blocking call is left behind.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
    }
    result
}

/// One-shot mode: samples every enabled collector once (concurrently) and renders the
/// exposition. Returns the text and whether every collector succeeded.
pub async fn sample_once(config: &Config, roots: Roots) -> anyhow::Result<(String, bool)> {
    let (collectors, ctx) = build(config, roots, false)?;
    let store = Arc::new(Store::new());
    for c in &collectors {
        store.register(c.name());
    }
    // Collectors that feed the shared state others read (the topology, each drive's discards
    // and idle time) sample first, so one-shot output is what the daemon shows, not a race.
    let (feeders, rest): (Vec<_>, Vec<_>) = collectors
        .into_iter()
        .partition(|c| registry::feeds_others(c.name()));
    for mut c in feeders {
        collector::sample_once(c.as_mut(), &ctx, &store, &mut Faults::default()).await;
    }
    let mut handles = Vec::new();
    for mut c in rest {
        let ctx = ctx.clone();
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            collector::sample_once(c.as_mut(), &ctx, &store, &mut Faults::default()).await
        }));
    }
    for h in handles {
        h.await.context("collector task panicked")?;
    }
    Ok((store.render(), store.all_succeeded()))
}

/// The enabled collectors and the context they share.
fn build(
    config: &Config,
    roots: Roots,
    persist_state: bool,
) -> anyhow::Result<(Vec<Box<dyn Collector>>, Context)> {
    let env = BuildEnv {
        state_dir: &config.state_dir,
        persist_state,
    };
    let collectors = registry::build(&config.collectors, &env)?;
    let ctx = Context::new(roots, config.collectors.topology_max_age());
    Ok((collectors, ctx))
}
