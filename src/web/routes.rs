//! HTTP routes: /metrics renders the snapshot store, never a device; plus /, /-/healthy, /-/ready,
//! and /report (the history report, read from the store on a blocking thread, one at a time).
//! Every request first passes the web config's gate (headers, rate limit, basic auth); /metrics
//! also the cap on concurrent scrapes.

use crate::gzip::Inflate;
use crate::render::CONTENT_TYPE;
use crate::snapshot::{Part, Snapshots};
use crate::web::auth::Verdict;
use crate::web::limits::{Bucket, client_key};
use crate::web::reload::Current;
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Semaphore;

/// Where /report reads from: the history store file, the host's name and the endurance rules.
#[derive(Debug, Clone)]
pub(crate) struct ReportSource {
    pub store: std::path::PathBuf,
    pub host: String,
    pub endurance: Vec<crate::history::service::EnduranceRule>,
    /// Asks the history thread to commit what it holds before the report reads the store.
    pub flush: Option<crate::history::service::Flusher>,
    /// Probe targets configured (0 with the probe collector off).
    pub probe_targets: usize,
    /// Each target's slow commit level (performance-full).
    pub slow_levels: Vec<(String, crate::history::slow::SlowLevel)>,
}

/// How long /report waits for the history thread's commit before reading what is stored.
const REPORT_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The routes behind the gate of `current`; `max_requests` concurrent /metrics (0: no cap);
/// /report when the history is on.
pub(crate) fn router(
    store: Arc<Snapshots>,
    current: Arc<Current>,
    max_requests: usize,
    report: Option<ReportSource>,
) -> Router {
    let slots = (max_requests > 0).then(|| Arc::new(Semaphore::new(max_requests)));
    let report = Arc::new((report, Semaphore::new(1)));
    let scrapes = Arc::new(Scrapes {
        store: store.clone(),
        gzip: AtomicU64::new(0),
        identity: AtomicU64::new(0),
    });
    Router::new()
        .route("/report", get(report_page).with_state(report))
        .route(
            "/metrics",
            get(metrics)
                .with_state(scrapes)
                .route_layer(middleware::from_fn_with_state(slots, scrape_slot)),
        )
        .route("/", get(landing))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .with_state(store)
        .layer(middleware::from_fn_with_state(current, gate))
}

/// node_exporter's --web.max-requests: a scrape over the cap gets 503 at once rather than
/// queueing behind the others.
async fn scrape_slot(
    State(slots): State<Option<Arc<Semaphore>>>,
    req: Request,
    next: Next,
) -> Response {
    let _permit = match &slots {
        Some(s) => match s.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Too many concurrent scrapes (--web.max-requests)\n",
                )
                    .into_response();
            }
        },
        None => None,
    };
    next.run(req).await
}

/// The web config's rules for every request, in exporter-toolkit's order: its extra headers
/// go on every response (401 and 429 too), then the rate limit, then basic auth. Credentials
/// verified before are recognised first (no bcrypt), so they pass with their own rate-limit
/// bucket; anything else takes its client's bucket and its client's turn at bcrypt.
async fn gate(State(current): State<Arc<Current>>, req: Request, next: Next) -> Response {
    let active = current.get();
    // Requests made in-process (tests) have no peer: they share the unspecified address.
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    let verified = active
        .users
        .as_ref()
        .and_then(|u| u.verified(authorization.as_deref()));
    let bucket = match verified {
        Some(key) => Bucket::Credential(key),
        None => Bucket::Client(client_key(client)),
    };
    let verdict = match (&active.users, verified) {
        _ if active.rate_limit.as_ref().is_some_and(|r| !r.allow(bucket)) => None,
        (Some(users), None) => Some(users.check(authorization.as_deref(), client).await),
        _ => Some(Verdict::Allowed),
    };
    let mut resp = match verdict {
        None => (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response(),
        Some(Verdict::Allowed) => next.run(req).await,
        Some(Verdict::Refused) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic")],
            "Unauthorized\n",
        )
            .into_response(),
        Some(Verdict::Busy) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "Too many password checks waiting from this address\n",
        )
            .into_response(),
    };
    for (name, value) in &active.headers {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    resp
}

/// What /metrics serves from, and how many responses it sent in each encoding.
struct Scrapes {
    store: Arc<Snapshots>,
    gzip: AtomicU64,
    identity: AtomicU64,
}

/// /metrics: the exposition of the last publish and the live series, in gzip when the client
/// accepts it (Prometheus always does), as it is otherwise. Nothing is compressed here: the
/// collectors' texts were compressed when published, and the live series (about 1 KB) go as
/// stored blocks. `Vary: Accept-Encoding` tells caches that the body depends on the header.
async fn metrics(State(scrapes): State<Arc<Scrapes>>, headers: HeaderMap) -> Response {
    let gzip = (headers.get_all(header::ACCEPT_ENCODING).iter())
        .filter_map(|v| v.to_str().ok())
        .any(crate::gzip::accepts_gzip);
    let counter = if gzip {
        &scrapes.gzip
    } else {
        &scrapes.identity
    };
    counter.fetch_add(1, Ordering::Relaxed);
    let e = scrapes.store.exposition();
    let live = scrapes.store.live_text(|set| {
        let f = set.family(&crate::catalogue::SCRAPES_TOTAL);
        f.push(
            &[("encoding", "gzip")],
            scrapes.gzip.load(Ordering::Relaxed) as f64,
        );
        f.push(
            &[("encoding", "identity")],
            scrapes.identity.load(Ordering::Relaxed) as f64,
        );
    });
    let mut chunks = VecDeque::with_capacity(e.parts.len() + 4);
    let mut resp_headers = HeaderMap::new();
    resp_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp_headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        // The CRC-32 of the parts, carried on over the live text (no combine: O(its bytes)).
        let mut all = e.crc.clone();
        all.update(live.as_bytes());
        chunks.push_back(Bytes::from_static(&crate::gzip::HEADER));
        for p in &e.parts {
            chunks.push_back(Bytes::from_owner(Deflate(p.clone())));
        }
        chunks.push_back(Bytes::from(crate::gzip::stored_blocks(live.as_bytes())));
        chunks.push_back(Bytes::copy_from_slice(&crate::gzip::trailer(&all)));
        resp_headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    } else {
        let body = Inflating {
            parts: e.parts.clone().into(),
            inflate: Inflate::default(),
            done: 0,
            live: Some(Bytes::from(live)),
        };
        return (resp_headers, axum::body::Body::new(body)).into_response();
    }
    (resp_headers, axum::body::Body::new(Chunks(chunks))).into_response()
}

/// Text a plain body inflates a frame at a time: what it holds in memory beyond the
/// published exposition.
const INFLATE_FRAME: usize = 64 * 1024;

/// A plain body: the published parts inflated a frame at a time as the connection takes
/// them, then the live series. Its exact length is known, so it has a Content-Length.
struct Inflating {
    parts: VecDeque<Arc<Part>>,
    inflate: Inflate,
    /// Bytes of the first part's text already sent.
    done: usize,
    live: Option<Bytes>,
}

impl http_body::Body for Inflating {
    type Data = Bytes;
    type Error = crate::gzip::InflateError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        while let Some(part) = this.parts.front() {
            let left = part.text_len() - this.done;
            if left == 0 {
                this.parts.pop_front();
                this.inflate.restart();
                this.done = 0;
                continue;
            }
            let frame = match this.inflate.next(part.deflate(), left.min(INFLATE_FRAME)) {
                Ok(text) => text,
                Err(e) => {
                    // Never so for what the daemon compressed itself; the connection is cut
                    // rather than a wrong text sent.
                    tracing::error!("/metrics: inflating a published part: {e}");
                    return std::task::Poll::Ready(Some(Err(e)));
                }
            };
            this.done += frame.len();
            return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(frame)))));
        }
        std::task::Poll::Ready(this.live.take().map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty() && self.live.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let parts: usize = self.parts.iter().map(|p| p.text_len()).sum();
        let live = self.live.as_ref().map_or(0, |b| b.len());
        http_body::SizeHint::with_exact((parts - self.done + live) as u64)
    }
}

/// A published part's deflate blocks, sent as they are.
struct Deflate(Arc<Part>);

impl AsRef<[u8]> for Deflate {
    fn as_ref(&self) -> &[u8] {
        self.0.deflate()
    }
}

/// A body of ready chunks whose exact length is known, so the response carries a
/// Content-Length as before rather than chunked encoding.
struct Chunks(VecDeque<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}

#[derive(Debug, serde::Deserialize)]
struct ReportQuery {
    format: Option<String>,
}

/// /report: the page `ssdwatch report --html` writes (`?format=json` or `text` for the others).
/// One at a time: a second request while one is built gets 503 (a report reads the whole
/// history, up to a second of CPU).
async fn report_page(
    State(src): State<Arc<(Option<ReportSource>, Semaphore)>>,
    axum::extract::Query(q): axum::extract::Query<ReportQuery>,
) -> Response {
    let Some(source) = src.0.clone() else {
        return (
            StatusCode::NOT_FOUND,
            "No report: the history is disabled (history.enabled in the config)\n",
        )
            .into_response();
    };
    let format = q.format.unwrap_or_else(|| "html".into());
    if !["html", "json", "text"].contains(&format.as_str()) {
        return (
            StatusCode::BAD_REQUEST,
            format!("format={format:?}: one of html, json, text\n"),
        )
            .into_response();
    }
    let Ok(_permit) = src.1.try_acquire() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "A report is being built; try again in a moment\n",
        )
            .into_response();
    };
    // Not the door: the report reads the history store in the state directory (CPU and the
    // local store), one build at a time.
    let built = tokio::task::spawn_blocking(move || {
        // What the daemon holds in memory goes into the store first: a new host's report shows
        // its first minutes, not "nothing yet" until the first flush_interval has passed.
        if let Some(f) = &source.flush {
            f.flush(REPORT_FLUSH_WAIT);
        }
        let now = crate::time::unix_now() as i64;
        crate::report::from_store(
            &source.store,
            &source.host,
            now,
            &source.endurance,
            Some(source.probe_targets),
            &source.slow_levels,
        )
    })
    .await;
    match built {
        Ok(Ok(r)) => match format.as_str() {
            "json" => (
                [(header::CONTENT_TYPE, "application/json")],
                crate::report::json(&r),
            )
                .into_response(),
            "text" => (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                crate::report::text::render(&r),
            )
                .into_response(),
            _ => Html(crate::report::html::render(&r)).into_response(),
        },
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("building the report: {e}\n"),
        )
            .into_response(),
    }
}

async fn healthy() -> &'static str {
    "OK\n"
}

async fn ready(State(store): State<Arc<Snapshots>>) -> impl IntoResponse {
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
         <li><a href=\"report\">Report</a></li>\n\
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
        let store = Arc::new(Snapshots::new());
        store.register("topology");
        store.register("smart");
        let status = |s: &Arc<Snapshots>| {
            let s = s.clone();
            async move { ready(State(s)).await.into_response().status() }
        };
        assert_eq!(status(&store).await, StatusCode::SERVICE_UNAVAILABLE);
        let published = |metrics| Published {
            failing_items: 0,
            metrics,
            kept: Default::default(),
            duration: Duration::from_millis(1),
            errors: 0,
        };
        store.publish("topology", published(Some(Default::default())));
        assert_eq!(status(&store).await, StatusCode::SERVICE_UNAVAILABLE);
        store.publish("smart", published(None));
        assert_eq!(status(&store).await, StatusCode::OK);
    }

    /// A plain scrape inflates the published parts a frame at a time: several frames for a
    /// part larger than one, an exact length announced first, and the same text as the gzip
    /// scrape's and the store's own rendering.
    #[tokio::test]
    async fn a_plain_scrape_inflates_the_parts_frame_by_frame_to_the_same_text() {
        use http_body::Body as _;
        let store = Arc::new(Snapshots::new());
        let mut m = crate::metrics::MetricSet::new();
        for i in 0..5_000 {
            m.family(&crate::catalogue::DISK_SIZE_BYTES)
                .push(&[("device", &format!("nvme{i}n1"))], i as f64);
        }
        store.publish(
            "filesystem",
            Published {
                failing_items: 0,
                metrics: Some(m),
                kept: Default::default(),
                duration: Duration::from_millis(1),
                errors: 0,
            },
        );
        let e = store.exposition();
        assert!(
            e.parts[0].text_len() > 3 * INFLATE_FRAME,
            "{}",
            e.text_len()
        );
        let scrapes = Arc::new(Scrapes {
            store: store.clone(),
            gzip: AtomicU64::new(0),
            identity: AtomicU64::new(0),
        });
        let resp = metrics(State(scrapes.clone()), HeaderMap::new()).await;
        let mut body = resp.into_body();
        let announced = body.size_hint().exact().expect("an exact length");
        let mut frames = 0;
        let mut plain = Vec::new();
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= INFLATE_FRAME);
            plain.extend_from_slice(&data);
            frames += 1;
        }
        assert!(frames > 4, "{frames} frames");
        assert_eq!(plain.len() as u64, announced);
        let plain = String::from_utf8(plain).unwrap();
        let mut gz_headers = HeaderMap::new();
        gz_headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let gz = metrics(State(scrapes), gz_headers).await;
        let gz = axum::body::to_bytes(gz.into_body(), usize::MAX)
            .await
            .unwrap();
        let mut unzipped = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut unzipped)
            .unwrap();
        let parts = e.text_len();
        assert_eq!(plain[..parts], unzipped[..parts]);
        assert_eq!(plain[..parts], store.render()[..parts]);
        assert!(plain.contains("ssdwatch_disk_size_bytes{device=\"nvme4999n1\"} 4999\n"));
    }

    /// A published part whose blocks end before its text does (never so for what the daemon
    /// compressed itself): the plain body sends the text it could inflate, then an error frame
    /// (hyper then cuts the connection), never a short text as if whole, and no panic.
    #[tokio::test]
    async fn a_broken_part_ends_the_plain_body_with_an_error() {
        use http_body::Body as _;
        let text: String = (0..8_000)
            .map(|i| format!("ssdwatch_disk_size_bytes{{device=\"nvme{i}n1\"}} {i}\n"))
            .collect();
        let seg = crate::gzip::Segment::compress(text.as_bytes());
        let whole = Arc::new(Part::raw(seg.deflate().to_vec(), text.len()));
        let cut = seg.deflate()[..seg.deflate().len() / 2].to_vec();
        let broken = Arc::new(Part::raw(cut, text.len()));
        let mut body = Inflating {
            parts: [whole, broken].into(),
            inflate: Inflate::default(),
            done: 0,
            live: Some(Bytes::from_static(b"process_open_fds 9\n")),
        };
        let mut sent = Vec::new();
        let error = loop {
            let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx))
                .await
                .expect("an error before the body's end");
            match frame {
                Ok(f) => sent.extend_from_slice(&f.into_data().unwrap()),
                Err(e) => break e.to_string(),
            }
        };
        assert!(error.contains("before its text does"), "{error}");
        // The whole first part, then part of the broken one, and never the live series.
        assert!(sent.len() > text.len() && sent.len() < 2 * text.len());
        assert_eq!(&sent[..text.len()], text.as_bytes());
        assert!(text.as_bytes().starts_with(&sent[text.len()..]));
    }

    /// --web.max-requests 1: while one scrape is in flight, the next gets 503 at once, and
    /// once it is done the next scrape gets through.
    #[tokio::test]
    async fn a_scrape_over_max_requests_gets_503_at_once() {
        use tower_service::Service;
        let release = Arc::new(tokio::sync::Notify::new());
        let r = release.clone();
        let slow = move || {
            let r = r.clone();
            async move {
                r.notified().await;
                "done"
            }
        };
        let slots = Some(Arc::new(Semaphore::new(1)));
        let mut app: Router = Router::new().route(
            "/metrics",
            get(slow).route_layer(middleware::from_fn_with_state(slots, scrape_slot)),
        );
        let req = || {
            Request::get("/metrics")
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let first = tokio::spawn(app.call(req()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = app.call(req()).await.unwrap();
        assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        let third = tokio::spawn(app.call(req()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.notify_one();
        assert_eq!(third.await.unwrap().unwrap().status(), StatusCode::OK);
    }
}
