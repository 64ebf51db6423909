//! HTTP routes: /metrics renders the snapshot store, never a device; plus /, /-/healthy, /-/ready.

use crate::render::CONTENT_TYPE;
use crate::snapshot::Store;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use std::sync::Arc;

pub fn router(store: Arc<Store>) -> Router {
    Router::new()
        .route("/", get(landing))
        .route("/metrics", get(metrics))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .with_state(store)
}

async fn metrics(State(store): State<Arc<Store>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], store.render())
}

async fn healthy() -> &'static str {
    "OK\n"
}

async fn ready(State(store): State<Arc<Store>>) -> impl IntoResponse {
    if store.ready() {
        (StatusCode::OK, "Ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Not ready: waiting for the first sample of every collector\n",
        )
    }
}

async fn landing() -> Html<String> {
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>ssdwatch</title></head><body>\n\
         <h1>ssdwatch {}</h1>\n<p>SSD wear, fill, TRIM and latency exporter.</p>\n<ul>\n\
         <li><a href=\"metrics\">Metrics</a></li>\n\
         <li><a href=\"-/healthy\">Health</a></li>\n\
         <li><a href=\"-/ready\">Readiness</a></li>\n</ul>\n</body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Published;
    use std::time::Duration;

    /// /-/ready answers 503 until every registered collector has published a first sample
    /// (even a failed one: the daemon is up and reporting), then 200.
    #[tokio::test]
    async fn ready_is_503_until_every_collector_has_sampled_once() {
        let store = Arc::new(Store::new());
        store.register("topology");
        store.register("smart");
        let status = |s: &Arc<Store>| {
            let s = s.clone();
            async move { ready(State(s)).await.into_response().status() }
        };
        assert_eq!(status(&store).await, StatusCode::SERVICE_UNAVAILABLE);
        let published = |metrics| Published {
            failing_items: 0,
            metrics,
            duration: Duration::from_millis(1),
            errors: 0,
        };
        store.publish("topology", published(Some(Default::default())));
        assert_eq!(status(&store).await, StatusCode::SERVICE_UNAVAILABLE);
        store.publish("smart", published(None));
        assert_eq!(status(&store).await, StatusCode::OK);
    }
}
