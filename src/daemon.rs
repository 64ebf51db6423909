//! Wires collectors, the scheduler and the web layer together, and shuts them down.

use crate::Roots;
use crate::collector::{self, Collector, Context};
use crate::config::Config;
use crate::fault::Faults;
use crate::history;
use crate::notify;
use crate::privileged::Helper;
use crate::registry::{self, BuildEnv};
use crate::snapshot::Snapshots;
use crate::web::WebSetup;
use crate::web::reload::{self, Current};
use anyhow::Context as _;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Runs the daemon until `shutdown` resolves: binds every configured address (one that can't
/// be bound stops the start, naming it), then serves on all of them. `helper`: the privileged
/// helper the collectors that need capabilities read through (None: they read themselves).
pub async fn run(
    config: Config,
    roots: Roots,
    web: WebSetup,
    helper: Option<Helper>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addrs = config
        .web
        .listen_addresses()
        .map_err(|i| anyhow::anyhow!("{}: {}", i.key, i.message))?;
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in &addrs {
        let l = crate::listen::bind(addr).await.with_context(|| {
            format!("listening on {addr} (web.listen_address / --web.listen-address)")
        })?;
        listeners.push(l);
    }
    serve(config, roots, listeners, web, helper, shutdown).await
}

/// Runs the daemon on an already bound listener with plain HTTP and default limits (tests bind
/// port 0 and read the address).
pub async fn run_with_listener(
    config: Config,
    roots: Roots,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve(
        config,
        roots,
        vec![listener],
        WebSetup::default(),
        None,
        shutdown,
    )
    .await
}

/// Runs the daemon on `listeners` as `web` says until `shutdown` resolves; then the web layer
/// gets `web.limits.shutdown_timeout` and the collectors one more short deadline.
pub(crate) async fn serve(
    config: Config,
    roots: Roots,
    listeners: Vec<TcpListener>,
    web: WebSetup,
    helper: Option<Helper>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let host = crate::report::host_name(&roots.proc);
    let (collectors, mut ctx) = build(&config, roots, true, helper)?;
    let store = Arc::new(Snapshots::with_reloads(web.reloads.clone()));
    store.attach_door(ctx.door.clone());
    let judging = Judging::of(&config)?;
    let history = start_history(&config, &judging, store.clone())?;
    ctx.history = history.as_ref().map(|(sink, _)| sink.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let door = ctx.door.clone();
    if let (Some(cfg), Some((sink, _))) = (&config.history.import, &history) {
        crate::import::spawn_at_first_start(
            cfg,
            config.state_dir.clone(),
            config.history.clone(),
            config.collectors.smart.enabled,
            config.collectors.filesystem.interval,
            sink.clone(),
            stop_rx.clone(),
        )
        .context("starting the history import")?;
    }
    let tasks = collector::spawn_all(collectors, ctx, store.clone(), stop_rx.clone());
    let scheme = if web.active.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut bound = Vec::with_capacity(listeners.len());
    for l in &listeners {
        match l.local_addr() {
            Ok(a) => {
                bound.push(a.to_string());
                tracing::info!(address = %a, scheme, max_connections = web.limits.max_connections, "serving /metrics")
            }
            Err(_) => tracing::info!(scheme, "serving /metrics"),
        }
    }
    let current = Arc::new(Current::new(web.active));
    let watcher = tokio::spawn(reload::watch(
        current.clone(),
        web.config_file,
        web.reload,
        web.reloads.clone(),
        stop_rx.clone(),
    ));
    let report = config
        .history
        .enabled
        .then(|| crate::web::routes::ReportSource {
            store: config.state_dir.join(history::store::FILE_NAME),
            host,
            endurance: judging.endurance.clone(),
            flush: history.as_ref().map(|(sink, _)| sink.flusher()),
            slow_levels: judging.slow_levels.clone(),
            probe_targets: if config.collectors.probe.enabled {
                config.collectors.probe.targets.len()
            } else {
                0
            },
        });
    let app = crate::web::routes::router(
        store.clone(),
        current.clone(),
        web.limits.max_requests,
        report,
    );
    // Collectors are told to stop when the signal comes, so they wind down while the web
    // layer drains its connections.
    let shutdown = async move {
        shutdown.await;
        notify::stopping();
        let _ = stop_tx.send(true);
    };
    // systemd: ready now (config loaded, listener bound), then the watchdog while collectors progress.
    let serving = if bound.is_empty() {
        scheme.to_string()
    } else {
        format!("{scheme} on {}", bound.join(", "))
    };
    notify::start(
        store.clone(),
        serving,
        config.collectors.enabled_intervals(),
        stop_rx.clone(),
    );
    crate::web::serve(listeners, app, current, web.limits, shutdown).await;
    let _ = watcher.await;
    // Collectors stop at their next await point; one deadline for all of them, so a stuck
    // blocking call (left behind) can't stretch the exit.
    let deadline = tokio::time::Instant::now() + COLLECTOR_STOP_DEADLINE;
    for t in tasks {
        let _ = tokio::time::timeout_at(deadline, t).await;
    }
    if let Some((_, service)) = history {
        // Flush what the collectors handed over; a store stuck on a dead disk is left behind.
        // Through the door, on a thread of its own: never behind a blocking pool that hung
        // calls might hold.
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        if let Err(e) = door
            .call("history", "final flush", until, move || {
                service.stop(Duration::from_secs(2))
            })
            .await
        {
            tracing::warn!("history: the final flush: {e}");
        }
    }
    Ok(())
}

/// How long collectors still get once the web layer has stopped.
const COLLECTOR_STOP_DEADLINE: Duration = Duration::from_secs(1);

/// One-shot mode: samples every enabled collector once (concurrently) and renders the
/// exposition. Returns the text and whether every collector succeeded.
pub async fn sample_once(config: &Config, roots: Roots) -> anyhow::Result<(String, bool)> {
    let (collectors, ctx) = build(config, roots, false, None)?;
    let store = Arc::new(Snapshots::new());
    store.attach_door(ctx.door.clone());
    for c in &collectors {
        store.register(c.name());
    }
    // Collectors that feed the shared state others read (the topology, each drive's discards
    // and idle time) sample first, so one-shot output is what the daemon shows, not a race.
    let (feeders, rest): (Vec<_>, Vec<_>) = collectors
        .into_iter()
        .partition(|c| registry::feeds_others(c.name()));
    for mut c in feeders {
        collector::sample_and_publish(c.as_mut(), &ctx, &store, &mut Faults::default()).await;
    }
    let mut handles = Vec::new();
    for mut c in rest {
        let ctx = ctx.clone();
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            collector::sample_and_publish(c.as_mut(), &ctx, &store, &mut Faults::default()).await
        }));
    }
    for h in handles {
        h.await.context("collector task panicked")?;
    }
    Ok((store.render(), store.all_succeeded()))
}

/// What the history thread and the `/report` page both judge by, built (and checked) once:
/// the drive models' rated endurance and each probe target's slow level.
struct Judging {
    endurance: Vec<history::service::EnduranceRule>,
    slow_levels: Vec<(String, history::slow::SlowLevel)>,
}

impl Judging {
    fn of(config: &Config) -> anyhow::Result<Judging> {
        Ok(Judging {
            endurance: config
                .history
                .endurance_rules()
                .context("history.endurance")?,
            slow_levels: history::slow::levels_of(&config.collectors.probe.targets),
        })
    }
}

/// The history store's thread, when `history.enabled`.
fn start_history(
    config: &Config,
    judging: &Judging,
    store: Arc<Snapshots>,
) -> anyhow::Result<Option<(history::service::Sink, history::service::Service)>> {
    if !config.history.enabled {
        return Ok(None);
    }
    let started = history::service::start(
        config.history.clone(),
        config.state_dir.clone(),
        judging.endurance.clone(),
        judging.slow_levels.clone(),
        store,
    )
    .context("starting the history thread")?;
    Ok(Some(started))
}

/// The enabled collectors and the context they share.
fn build(
    config: &Config,
    roots: Roots,
    persist_state: bool,
    helper: Option<Helper>,
) -> anyhow::Result<(Vec<Box<dyn Collector>>, Context)> {
    let env = BuildEnv {
        state_dir: &config.state_dir,
        persist_state,
        helper,
    };
    let collectors = registry::build(&config.collectors, &env)?;
    let ctx = Context::new(roots, config.collectors.topology_max_age());
    Ok((collectors, ctx))
}
