//! The accept loop and the connections: a semaphore caps open connections; at the cap the
//! connection idle longest (no request in flight) is closed to admit the new one, so idle
//! clients can't keep a scrape out. hyper's HTTP/1 builder bounds headers in time and bytes, an
//! idle timer closes connections where nothing moves, and shutdown drops stragglers at a deadline.

use crate::web::Limits;
use crate::web::reload::Current;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower_service::Service;

/// Serves `app` on `listeners` until `shutdown` resolves, then gives open connections
/// `limits.shutdown_timeout` to finish and drops the rest. The connection cap is one for all
/// the listeners.
pub(crate) async fn serve(
    listeners: Vec<TcpListener>,
    app: Router,
    current: Arc<Current>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    const BACKLOG: i32 = crate::listen::LISTEN_BACKLOG as i32;
    for listener in &listeners {
        // listen() again on a listening socket only changes its backlog (a listener bound
        // elsewhere, as the tests' are, has std's 128).
        if let Err(e) = nix::sys::socket::Backlog::new(BACKLOG)
            .and_then(|b| nix::sys::socket::listen(listener, b))
        {
            tracing::debug!("raising the listen backlog to {BACKLOG}: {e}");
        }
    }
    let mut next_listener = 0;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut accept_failing = false;
    let mut at_cap = false;
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    'accept: loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = accept_any(&listeners, &mut next_listener) => a,
        };
        while conns.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: say it once, retry gently rather than spin.
                if !accept_failing {
                    accept_failing = true;
                    tracing::warn!("accepting a connection failed: {e}; retrying");
                } else {
                    tracing::debug!("accepting a connection failed: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if accept_failing {
            accept_failing = false;
            tracing::info!("accepting connections again");
        }
        // A slot for it: a free one, else the one of the connection idle longest, closed for
        // it; when every connection has a request in flight, the first to end. Meanwhile only
        // this one connection waits accepted (one descriptor over the cap); the next ones wait
        // in the kernel's backlog.
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => {
                if at_cap && slots.available_permits() >= limits.max_connections / 4 {
                    at_cap = false;
                    tracing::info!("below the connection cap again");
                }
                p
            }
            Err(_) => {
                if !at_cap {
                    at_cap = true;
                    tracing::warn!(
                        "at the connection cap ({}): closing the connection idle longest to admit each new one",
                        limits.max_connections
                    );
                }
                loop {
                    if let Some(idle) = open.idle_longest() {
                        idle.shed();
                    }
                    // Looked at again now and then: a connection busy now may be idle soon,
                    // and keep its slot open for a keep-alive rather than end.
                    tokio::select! {
                        _ = &mut shutdown => break 'accept,
                        p = slots.clone().acquire_owned() => match p {
                            Ok(p) => break p,
                            Err(_) => break 'accept,
                        },
                        _ = tokio::time::sleep(SHED_GRACE) => {}
                    }
                }
            }
        };
        let conn = Connection {
            app: app.clone(),
            current: current.clone(),
            limits: limits.clone(),
            peer,
            _permit: permit,
            _open: open.register(),
        };
        conns.spawn(conn.run(stream, stop_rx.clone()));
    }
    drop(listeners);
    let _ = stop_tx.send(true);
    let open = conns.len();
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_timeout, drain)
        .await
        .is_err()
    {
        tracing::info!(
            open,
            left = conns.len(),
            "dropping connections still open at the shutdown deadline"
        );
        conns.shutdown().await;
    }
}

/// The next connection waiting on any of `listeners`, taking them in turn from `*next` so a
/// busy one can't keep the others waiting.
async fn accept_any(
    listeners: &[TcpListener],
    next: &mut usize,
) -> io::Result<(TcpStream, SocketAddr)> {
    if listeners.is_empty() {
        return std::future::pending().await;
    }
    std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let at = (*next + i) % listeners.len();
            if let Poll::Ready(r) = listeners[at].poll_accept(cx) {
                *next = (at + 1) % listeners.len();
                return Poll::Ready(r);
            }
        }
        Poll::Pending
    })
    .await
}

/// The open connections, for choosing one to close at the cap.
#[derive(Default)]
struct Open {
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Open {
    /// Lists a new connection until the returned guard drops.
    fn register(self: &Arc<Self>) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        self.lock().insert(id, activity.clone());
        Registered {
            open: self.clone(),
            id,
            activity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn idle_longest(&self) -> Option<Arc<Activity>> {
        let conns = self.lock();
        let id = shed_choice(conns.iter().map(|(id, a)| (*id, a.standing())))?;
        conns.get(&id).cloned()
    }
}

/// A connection's entry in [`Open`], removed on drop.
struct Registered {
    open: Arc<Open>,
    id: u64,
    activity: Arc<Activity>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
    }
}

/// What the choice of a connection to close looks at.
#[derive(Debug, Clone, Copy)]
struct Standing {
    /// A request is in flight (from its head read to its response sent).
    busy: bool,
    /// Already asked to close.
    closing: bool,
    /// When a byte last moved (or it opened).
    quiet_since: Instant,
}

/// The connection to close so a new one can be served: of those with no request in flight and
/// not closing already, the one quiet longest (an idle keep-alive, a client that never sent a
/// byte or trickles a head); none when every connection is serving a request.
fn shed_choice(conns: impl IntoIterator<Item = (u64, Standing)>) -> Option<u64> {
    conns
        .into_iter()
        .filter(|(_, s)| !s.busy && !s.closing)
        .min_by_key(|(id, s)| (s.quiet_since, *id))
        .map(|(id, _)| id)
}

struct Connection {
    app: Router,
    current: Arc<Current>,
    limits: Arc<Limits>,
    peer: SocketAddr,
    _permit: OwnedSemaphorePermit,
    _open: Registered,
}

impl Connection {
    async fn run(self, stream: TcpStream, stop: watch::Receiver<bool>) {
        let _ = stream.set_nodelay(true);
        let activity = self._open.activity.clone();
        let io = Watched {
            inner: stream,
            activity: activity.clone(),
        };
        // The config as of this connection: a reload applies to the next ones.
        let active = self.current.get();
        match &active.tls {
            Some(tls) => {
                // One deadline for the first byte and the handshake (and a refusal's answer).
                let handshake_by = tokio::time::Instant::now() + self.limits.read_header_timeout;
                // Plain HTTP on the TLS port: answered as Go's net/http (exporter-toolkit) does,
                // rather than with a closed connection and a client's puzzling error.
                let first = tokio::time::timeout_at(handshake_by, first_byte(&io.inner));
                let first = tokio::select! {
                    f = first => f,
                    _ = activity.shed.notified() => return,
                };
                match first.map(|b| b.map(|b| b.map(opening))) {
                    Ok(Ok(Some(Opening::Tls))) => {}
                    Ok(Ok(Some(Opening::Http))) => {
                        tracing::debug!(peer = %self.peer, "plain HTTP on the TLS port: 400");
                        let _ = tokio::time::timeout_at(handshake_by, refuse_plain_http(io)).await;
                        return;
                    }
                    Ok(Ok(Some(Opening::Other))) => {
                        tracing::debug!(peer = %self.peer, "neither TLS nor HTTP on the TLS port");
                        return;
                    }
                    Ok(Ok(None)) | Ok(Err(_)) => return,
                    Err(_) => {
                        tracing::debug!(peer = %self.peer, "TLS handshake timed out");
                        return;
                    }
                }
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
                let handshake = tokio::time::timeout_at(handshake_by, acceptor.accept(io));
                let handshake = tokio::select! {
                    h = handshake => h,
                    _ = activity.shed.notified() => {
                        tracing::debug!(peer = %self.peer, "closed in its TLS handshake to admit a new connection at the cap");
                        return;
                    }
                };
                match handshake {
                    Ok(Ok(tls_stream)) => self.http(tls_stream, activity, stop).await,
                    Ok(Err(e)) => tracing::debug!(peer = %self.peer, "TLS handshake refused: {e}"),
                    Err(_) => tracing::debug!(peer = %self.peer, "TLS handshake timed out"),
                }
            }
            None => self.http(io, activity, stop).await,
        }
    }

    async fn http<I>(&self, io: I, activity: Arc<Activity>, mut stop: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // Each request carries its peer's address (auth and the rate limit share by client)
        // and marks the connection busy until its response is sent or dropped.
        let app = self.app.clone();
        let peer = self.peer;
        let marks = activity.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            let in_flight = InFlight::new(marks.clone());
            let mut app = app.clone();
            async move {
                std::future::poll_fn(|cx| Service::<Request<Incoming>>::poll_ready(&mut app, cx))
                    .await?;
                let resp = app.call(req).await?;
                Ok::<_, Infallible>(resp.map(|inner| Marked {
                    inner,
                    _in_flight: in_flight,
                }))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.read_header_timeout)
            .max_buf_size(self.limits.max_header_bytes)
            .max_headers(100)
            .keep_alive(true);
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        let mut tick = tokio::time::interval(tick_for(self.limits.idle_timeout));
        let mut stopping = *stop.borrow();
        if stopping {
            conn.as_mut().graceful_shutdown();
        }
        // Asked to close at the cap: hyper closes an idle connection at once on a graceful
        // shutdown and finishes a request in flight first; one that is still open and idle
        // after this is dropped.
        let mut shed_by: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(peer = %self.peer, "connection closed: {e}");
                    }
                    return;
                }
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = activity.shed.notified(), if shed_by.is_none() => {
                    tracing::debug!(peer = %self.peer, "closing the connection idle longest to admit a new one at the cap");
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                    shed_by = Some(tokio::time::Instant::now() + SHED_GRACE);
                }
                _ = sleep_until_some(shed_by) => {
                    if !activity.busy() {
                        return;
                    }
                    shed_by = Some(tokio::time::Instant::now() + SHED_GRACE);
                }
                _ = tick.tick() => {
                    if activity.idle_for() >= self.limits.idle_timeout {
                        tracing::debug!(peer = %self.peer, "closing a connection idle for {:?}", self.limits.idle_timeout);
                        return;
                    }
                }
            }
        }
    }
}

/// What Go's net/http writes, word for word, to a client that speaks plain HTTP to its TLS
/// port (then it closes the connection).
const HTTP_TO_HTTPS: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Writes [`HTTP_TO_HTTPS`], then reads what the client sent until it closes (at most 64 KiB,
/// at most a second): closing with its request unread would send a reset, which can discard
/// the answer before the client reads it.
async fn refuse_plain_http<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if io.write_all(HTTP_TO_HTTPS).await.is_err() || io.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// What a connection's first byte says it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// A TLS record of type handshake (22): a ClientHello.
    Tls,
    /// An upper-case letter: the method of an HTTP request (`GET /metrics HTTP/1.1`).
    Http,
    Other,
}

fn opening(first: u8) -> Opening {
    match first {
        0x16 => Opening::Tls,
        b'A'..=b'Z' => Opening::Http,
        _ => Opening::Other,
    }
}

/// The connection's first byte, left in the socket for the TLS handshake to read; `None`
/// when the client closed before sending one.
async fn first_byte(stream: &TcpStream) -> io::Result<Option<u8>> {
    let mut b = [0u8; 1];
    let n = stream.peek(&mut b).await?;
    Ok((n == 1).then_some(b[0]))
}

/// How long a connection asked to close at the cap may take to do it when it has no request
/// in flight, before it is dropped.
const SHED_GRACE: Duration = Duration::from_millis(100);

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The idle check runs a few times per timeout, at most once a second.
fn tick_for(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(25), Duration::from_secs(1))
}

/// When a byte last moved on a connection (in milliseconds since it opened), whether a request
/// is in flight on it, and the accept loop's request that it close.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicU32,
    closing: AtomicBool,
    shed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            closing: AtomicBool::new(false),
            shed: Notify::new(),
        }
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
    }

    fn standing(&self) -> Standing {
        Standing {
            busy: self.busy(),
            closing: self.closing.load(Ordering::Relaxed),
            quiet_since: self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)),
        }
    }

    /// Asks the connection to close (it may already be gone: the notification then waits
    /// unread, harmless).
    fn shed(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.shed.notify_one();
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// A stream that records each read or write that moved bytes.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request in flight on a connection, from its head read to its response sent (or dropped).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request marked in flight until hyper has taken all of it.
struct Marked {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for Marked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_byte_tells_a_tls_handshake_from_plain_http() {
        let table = [
            (0x16, Opening::Tls),
            (b'G', Opening::Http),
            (b'H', Opening::Http),
            (b'P', Opening::Http),
            (b'O', Opening::Http),
            (b'g', Opening::Other),
            (0x80, Opening::Other), // an SSLv2-style hello: rustls has none
            (0x15, Opening::Other), // a TLS alert first
            (0, Opening::Other),
        ];
        for (b, want) in table {
            assert_eq!(opening(b), want, "{b:#x}");
        }
    }

    #[test]
    fn at_the_cap_the_connection_quiet_longest_without_a_request_is_closed() {
        let t0 = Instant::now();
        let s = |busy, closing, ms| Standing {
            busy,
            closing,
            quiet_since: t0 + Duration::from_millis(ms),
        };
        // (connections, the one to close)
        type Case = (Vec<(u64, Standing)>, Option<u64>);
        let table: [Case; 5] = [
            (vec![], None),
            // Quiet longest goes first, whatever its age: a scrape in flight never does.
            (
                vec![
                    (1, s(true, false, 0)),
                    (2, s(false, false, 50)),
                    (3, s(false, false, 10)),
                ],
                Some(3),
            ),
            // One already asked to close is not asked again.
            (
                vec![(1, s(false, true, 0)), (2, s(false, false, 5))],
                Some(2),
            ),
            // Every connection serving a request: none; the new one waits for the first to end.
            (vec![(1, s(true, false, 0)), (2, s(true, false, 1))], None),
            // Ties go to the older connection.
            (
                vec![(7, s(false, false, 3)), (4, s(false, false, 3))],
                Some(4),
            ),
        ];
        for (conns, want) in table {
            assert_eq!(shed_choice(conns.clone()), want, "{conns:?}");
        }
    }
}
