//! The one loopback HTTP layer every server of the library runs on (the IDE
//! companion's MCP server, the plugin host's MCP server, the view server).
//!
//! The library lives inside the IDE's own process for days, so whatever its
//! servers hold, the IDE holds. This layer owns the accept loop and each
//! connection, so that no local process — token or not — can make it hold
//! descriptors, memory or tasks for long:
//!
//! - **Header read timeout** ([`Limits::header_timeout`], default 5 s): a
//!   connection that does not deliver a complete request head in time is
//!   closed (slowloris). Loopback clients send a head in one write.
//! - **Body timeout** ([`Limits::body_timeout`], default 30 s): the whole
//!   request body must arrive within it, else the request fails and the
//!   connection is closed.
//! - **Idle keep-alive timeout** ([`Limits::idle_timeout`], default 30 s): a
//!   connection with no request in progress for that long is closed. Node's
//!   HTTP client (the CLI's) drops its own idle connections after 4 s, so a
//!   live client never races this. A long-lived SSE stream is a request in
//!   progress, never idle: these timeouts do not cut it (its keep-alive
//!   comments keep it busy).
//! - **Connection cap** ([`Limits::max_connections`], default 128): beyond it
//!   the oldest connection that has not yet proven itself (no request with
//!   the right bearer token) is dropped to make room, so a flood of silent
//!   connections cannot lock real clients out; when every connection is
//!   proven, the new one is refused at once with `503` (logged, at most one
//!   line per 10 s with the count).
//!
//! [`guard`] holds the request checks every server applies (bearer token in
//! constant time, `Host` allow-list, `Origin` policy, body cap) and
//! [`sessions`] the lifecycle of MCP sessions (the CLI never sends
//! `DELETE`: abandoned sessions are reaped after a grace period, and their
//! number is bounded).

pub mod config;
pub mod guard;
pub mod mcp;
pub mod resume;
pub mod sessions;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::Router;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use config::{ServerConfig, ServerSettings};

use crate::error::{Error, Result};
use crate::host::Logger;

/// Connection limits and timeouts of one server (all configurable; see the
/// module docs for the defaults and why).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 128,
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// The JSON form of [`Limits`] inside a server's config (`"http": {…}`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most concurrent connections (1 ..= 65536, default 128).
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Longest wait for a complete request head, ms (100 ..= 600000, default 5000).
    #[serde(default)]
    pub header_timeout_ms: Option<u64>,
    /// Longest wait for a complete request body, ms (100 ..= 600000, default 30000).
    #[serde(default)]
    pub body_timeout_ms: Option<u64>,
    /// Idle keep-alive connections are closed after this, ms (100 ..= 3600000, default 30000).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
}

impl LimitsConfig {
    /// Validates the values and fills in the defaults.
    pub fn limits(&self) -> Result<Limits> {
        let d = Limits::default();
        let ms = |v: Option<u64>, name: &str, max: u64, default: Duration| -> Result<Duration> {
            match v {
                None => Ok(default),
                Some(v) if (100..=max).contains(&v) => Ok(Duration::from_millis(v)),
                Some(v) => Err(Error::invalid_argument(format!(
                    "http.{name} must be between 100 and {max}, got {v}"
                ))),
            }
        };
        let max_connections = match self.max_connections {
            None => d.max_connections,
            Some(n) if (1..=65536).contains(&n) => n,
            Some(n) => {
                return Err(Error::invalid_argument(format!(
                    "http.maxConnections must be between 1 and 65536, got {n}"
                )))
            }
        };
        Ok(Limits {
            max_connections,
            header_timeout: ms(
                self.header_timeout_ms,
                "headerTimeoutMs",
                600_000,
                d.header_timeout,
            )?,
            body_timeout: ms(
                self.body_timeout_ms,
                "bodyTimeoutMs",
                600_000,
                d.body_timeout,
            )?,
            idle_timeout: ms(
                self.idle_timeout_ms,
                "idleTimeoutMs",
                3_600_000,
                d.idle_timeout,
            )?,
        })
    }
}

/// Attached to every request (as an extension): lets the guard mark the
/// connection as proven once a request carried the right token.
#[derive(Clone)]
pub struct ConnInfo {
    proven: Arc<AtomicBool>,
}

impl ConnInfo {
    /// The connection carried an authenticated request.
    pub fn mark_proven(&self) {
        self.proven.store(true, Ordering::Relaxed);
    }
}

struct ConnEntry {
    accepted: Instant,
    proven: Arc<AtomicBool>,
    kill: CancellationToken,
}

/// Counters of one server, for logs, tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnStats {
    /// Connections open now.
    pub open: usize,
    /// Connections accepted since start.
    pub accepted: u64,
    /// Connections refused at once because every slot held a proven client.
    pub refused: u64,
    /// Unproven connections dropped to make room for a new one.
    pub evicted: u64,
}

#[derive(Default)]
struct Table {
    conns: Mutex<HashMap<u64, ConnEntry>>,
    next: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
    refused_since_log: AtomicU64,
    last_refusal_log: Mutex<Option<Instant>>,
    /// Requests other than `GET` (a client's long-lived event stream) whose
    /// response has not been sent to the end yet, and a wake-up for
    /// [`Server::settle`] when the count drops.
    exchanges: Arc<Exchanges>,
}

#[derive(Default)]
struct Exchanges {
    open: AtomicUsize,
    ended: tokio::sync::Notify,
}

/// Counts one request/response exchange while it lives.
struct Exchange(Arc<Exchanges>);

impl Drop for Exchange {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.ended.notify_waiters();
    }
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, ConnEntry>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for a new connection: `Some(id, entry parts)` when admitted.
    fn admit(&self, max: usize) -> Option<(u64, Arc<AtomicBool>, CancellationToken)> {
        let mut conns = self.lock();
        if conns.len() >= max {
            let victim = conns
                .iter()
                .filter(|(_, e)| !e.proven.load(Ordering::Relaxed))
                .min_by_key(|(_, e)| e.accepted)
                .map(|(id, _)| *id);
            match victim {
                Some(id) => {
                    if let Some(e) = conns.remove(&id) {
                        e.kill.cancel();
                    }
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => return None,
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let proven = Arc::new(AtomicBool::new(false));
        let kill = CancellationToken::new();
        conns.insert(
            id,
            ConnEntry {
                accepted: Instant::now(),
                proven: proven.clone(),
                kill: kill.clone(),
            },
        );
        self.accepted.fetch_add(1, Ordering::Relaxed);
        Some((id, proven, kill))
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn stats(&self) -> ConnStats {
        ConnStats {
            open: self.lock().len(),
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// Counts a refusal; returns the number to log when a line is due.
    fn refusal_to_log(&self) -> Option<u64> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.refused_since_log.fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .last_refusal_log
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let due = last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10));
        if due {
            *last = Some(Instant::now());
            Some(self.refused_since_log.swap(0, Ordering::Relaxed))
        } else {
            None
        }
    }
}

/// A running server: its accept loop and connections, ended by `shutdown`.
pub struct Server {
    table: Arc<Table>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Counters of this server.
    pub fn stats(&self) -> ConnStats {
        self.table.stats()
    }

    /// Stops accepting, lets every connection finish its current exchange
    /// (bounded by `grace`), then drops the rest.
    pub async fn shutdown(self, grace: Duration) {
        self.cancel.cancel();
        let _ = tokio::time::timeout(grace, self.task).await;
        for (_, e) in self.table.lock().drain() {
            e.kill.cancel();
        }
    }

    /// Waits (at most `limit`) until every exchange other than a `GET` event
    /// stream has sent its response to the end — e.g. the error replies of
    /// calls a stopping server just cancelled. True when all did.
    pub async fn settle(&self, limit: Duration) -> bool {
        let exchanges = &self.table.exchanges;
        let wait = async {
            loop {
                let ended = exchanges.ended.notified();
                if exchanges.open.load(Ordering::Acquire) == 0 {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    /// A handle to read the counters after the server was moved elsewhere.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.table.clone())
    }

    /// Stops without waiting (from a runtime thread).
    pub fn abort(self) {
        self.cancel.cancel();
        for (_, e) in self.table.lock().drain() {
            e.kill.cancel();
        }
        self.task.abort();
    }
}

/// Reads a server's counters.
#[derive(Clone)]
pub struct StatsHandle(Arc<Table>);

impl StatsHandle {
    pub fn get(&self) -> ConnStats {
        self.0.stats()
    }
}

/// Binds `127.0.0.1:0` (non-blocking, ready for the runtime).
pub fn bind_loopback() -> Result<(std::net::TcpListener, u16)> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| Error::io("bind 127.0.0.1:0", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("set_nonblocking", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("local_addr", e))?
        .port();
    Ok((listener, port))
}

/// Serves `app` on `listener` with `limits` on the current runtime (call
/// from inside it, e.g. after `Handle::enter`).
pub fn serve(
    listener: std::net::TcpListener,
    app: Router,
    limits: Limits,
    logger: Arc<Logger>,
) -> Result<Server> {
    let listener =
        TcpListener::from_std(listener).map_err(|e| Error::io("register listener", e))?;
    let table = Arc::new(Table::default());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(accept_loop(
        listener,
        app,
        limits,
        table.clone(),
        cancel.clone(),
        logger,
    ));
    Ok(Server {
        table,
        cancel,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    table: Arc<Table>,
    cancel: CancellationToken,
    logger: Arc<Logger>,
) {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = cancel.cancelled() => break,
        };
        let stream = match accepted {
            // A stream that cannot be kept from raising SIGPIPE (macOS) is
            // never written to.
            Ok((s, _)) => match crate::sys::ipc::accepted_tcp(&s) {
                Ok(()) => s,
                Err(_) => continue,
            },
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                logger.warn(|| format!("accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some((id, proven, kill)) = table.admit(limits.max_connections) else {
            // Counted before the answer goes out, so a client that saw its
            // 503 also sees it in the counters.
            let due = table.refusal_to_log();
            refuse(stream);
            if let Some(n) = due {
                logger.warn(|| {
                    format!(
                        "refused {n} connection(s): all {} slots hold authenticated clients",
                        limits.max_connections
                    )
                });
            }
            continue;
        };
        // Replies are small writes after the headers: without TCP_NODELAY
        // each would wait for the client's delayed ACK (~40 ms).
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let table = table.clone();
        let shutdown = cancel.clone();
        let exchanges = table.exchanges.clone();
        connections.spawn(async move {
            serve_connection(stream, app, limits, proven, kill, shutdown, exchanges).await;
            table.remove(id);
        });
    }
    connections.close();
    connections.wait().await;
}

/// Best effort `503` on a refused connection, then close it (never blocks).
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(
        b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    );
}

/// Activity of one connection, for the idle timeout.
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `base` of the last request start or end.
    last: AtomicU64,
    base: Instant,
}

impl Activity {
    fn touch(&self) {
        self.last
            .store(self.base.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        Some(self.base.elapsed().saturating_sub(last))
    }
}

/// Ends a request's activity when its response body is dropped (sent or
/// abandoned): an SSE stream stays "in flight" as long as it is open.
struct InFlight {
    activity: Arc<Activity>,
    _exchange: Option<Exchange>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.activity.touch();
        self.activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug)]
struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimeout {}

/// The request body, failing once `timeout` passes before its end. Its
/// frames, end and size hint pass through unchanged.
fn body_with_deadline(body: Incoming, timeout: Duration) -> Body {
    Body::new(Deadline {
        inner: body,
        deadline: tokio::time::Instant::now() + timeout,
        sleep: None,
    })
}

/// See [`body_with_deadline`]. The timer is armed only when the body is not
/// all there at once (a small request's body came with its head).
struct Deadline {
    inner: Incoming,
    deadline: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, axum::Error>>> {
        let me = self.get_mut();
        match Pin::new(&mut me.inner).poll_frame(cx) {
            Poll::Ready(r) => return Poll::Ready(r.map(|f| f.map_err(axum::Error::new))),
            Poll::Pending => {}
        }
        let deadline = me.deadline;
        let sleep = me
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimeout)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that ends its request's activity when dropped (sent or
/// abandoned). Frames, end and size hint pass through, so a body of known
/// length keeps its `Content-Length` (and is not sent chunked).
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: Limits,
    proven: Arc<AtomicBool>,
    kill: CancellationToken,
    shutdown: CancellationToken,
    exchanges: Arc<Exchanges>,
) {
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        last: AtomicU64::new(0),
        base: Instant::now(),
    });
    let info = ConnInfo { proven };
    let svc_activity = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let app = app.clone();
        let activity = svc_activity.clone();
        let info = info.clone();
        let exchange = (req.method() != axum::http::Method::GET).then(|| {
            exchanges.open.fetch_add(1, Ordering::AcqRel);
            Exchange(exchanges.clone())
        });
        async move {
            activity.in_flight.fetch_add(1, Ordering::AcqRel);
            activity.touch();
            let guard = InFlight {
                activity,
                _exchange: exchange,
            };
            let (mut parts, body) = req.into_parts();
            parts.extensions.insert(info);
            let req = axum::http::Request::from_parts(
                parts,
                body_with_deadline(body, limits.body_timeout),
            );
            let response = match app.oneshot(req).await {
                Ok(r) => r,
                Err(e) => match e {},
            };
            let (parts, body) = response.into_parts();
            let body = Tracked {
                inner: body,
                _guard: guard,
            };
            Ok::<_, Infallible>(axum::http::Response::from_parts(parts, body))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let tick = (limits.idle_timeout / 4).clamp(Duration::from_millis(25), Duration::from_secs(1));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closing = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = kill.cancelled() => break,
            _ = shutdown.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = ticker.tick(), if !closing => {
                if activity.idle_for().is_some_and(|d| d >= limits.idle_timeout) {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
