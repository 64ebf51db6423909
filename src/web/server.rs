//! The accept loop and the connections: a semaphore caps open connections (the rest wait in
//! the kernel's queue), hyper's HTTP/1 builder bounds headers in time and bytes, an idle timer
//! closes connections where nothing moves, and shutdown drops stragglers at a deadline.

use crate::web::Limits;
use crate::web::reload::Current;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower_service::Service;

/// Serves `app` on `listener` until `shutdown` resolves, then gives open connections
/// `limits.shutdown_timeout` to finish and drops the rest.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    current: Arc<Current>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut accept_failing = false;
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    loop {
        // A slot first, then accept: over the cap, connections wait in the listen backlog
        // and cost us no descriptor.
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        while conns.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer)) => {
                if accept_failing {
                    accept_failing = false;
                    tracing::info!("accepting connections again");
                }
                let conn = Connection {
                    app: app.clone(),
                    current: current.clone(),
                    limits: limits.clone(),
                    peer,
                    _permit: permit,
                };
                conns.spawn(conn.run(stream, stop_rx.clone()));
            }
            Err(e) => {
                // EMFILE and friends: say it once, retry gently rather than spin.
                if !accept_failing {
                    accept_failing = true;
                    tracing::warn!("accepting a connection failed: {e}; retrying");
                } else {
                    tracing::debug!("accepting a connection failed: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
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

struct Connection {
    app: Router,
    current: Arc<Current>,
    limits: Arc<Limits>,
    peer: SocketAddr,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn run(self, stream: TcpStream, stop: watch::Receiver<bool>) {
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let io = Watched {
            inner: stream,
            activity: activity.clone(),
        };
        // The config as of this connection: a reload applies to the next ones.
        let active = self.current.get();
        match &active.tls {
            Some(tls) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
                let handshake =
                    tokio::time::timeout(self.limits.read_header_timeout, acceptor.accept(io));
                match handshake.await {
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
        // Each request carries its peer's address: auth and the rate limit share by client.
        let app = self.app.clone();
        let peer = self.peer;
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            let mut app = app.clone();
            async move {
                std::future::poll_fn(|cx| Service::<Request<Incoming>>::poll_ready(&mut app, cx))
                    .await?;
                app.call(req).await
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

/// The idle check runs a few times per timeout, at most once a second.
fn tick_for(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(25), Duration::from_secs(1))
}

/// When a byte last moved on a connection, in milliseconds since it opened.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
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
