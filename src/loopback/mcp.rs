//! What every MCP server on the loopback layer does around rmcp's handling
//! of a request: the shared checks ([`super::guard`]), then keeping the
//! session lifecycle informed — a request seen, a session created by an
//! `initialize` answer, a GET stream opened and (when its body is dropped)
//! closed. Each server says what those events mean for it through
//! [`SessionEvents`]; the HTTP side exists once, here.

use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;

use super::guard::{self, Policy};
use crate::host::Logger;

/// The session header of MCP's streamable HTTP transport.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// What a server does when its sessions move.
pub trait SessionEvents: Send + Sync + 'static {
    /// A request of `sid` arrived.
    fn request_seen(&self, sid: &str);
    /// `sid` was just created by an `initialize` answer.
    fn created(&self, sid: &str);
    /// The GET stream of `sid` opened; returns its generation.
    fn stream_opened(&self, sid: &str) -> u64;
    /// The GET stream `generation` of `sid` ended.
    fn stream_closed(&self, sid: &str, generation: u64);
}

/// A server with nothing of its own to do on these events: the lifecycle
/// bookkeeping alone.
impl<T: Default + Send + 'static> SessionEvents for super::sessions::Sessions<T> {
    fn request_seen(&self, sid: &str) {
        super::sessions::Sessions::request_seen(self, sid)
    }
    fn created(&self, sid: &str) {
        let mut map = self.lock();
        self.entry(&mut map, sid);
    }
    fn stream_opened(&self, sid: &str) -> u64 {
        let mut map = self.lock();
        super::sessions::Sessions::stream_opened(self, &mut map, sid)
    }
    fn stream_closed(&self, sid: &str, generation: u64) {
        let mut map = self.lock();
        super::sessions::Sessions::stream_closed(self, &mut map, sid, generation);
    }
}

/// The middleware body: the shared checks, then the lifecycle events.
pub async fn guard_and_track<E: SessionEvents>(
    policy: &Policy,
    logger: &Logger,
    events: &Arc<E>,
    req: Request,
    next: Next,
) -> Response {
    if let Err(refusal) = guard::check(req.headers(), req.extensions(), policy) {
        logger.warn(|| refusal.describe().into());
        return refusal.response();
    }
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(sid) = &session {
        events.request_seen(sid);
    }
    let stream_session =
        session.filter(|_| req.method() == Method::GET && req.uri().path() == "/mcp");
    let is_post = req.method() == Method::POST;
    let response = next.run(req).await;
    if is_post {
        // A new session (initialize answered): known from now on, so what
        // is sent before its stream opens waits for it.
        if let Some(sid) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            events.created(sid);
        }
    }
    let Some(sid) = stream_session else {
        return response;
    };
    let is_stream = response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        return response;
    }
    let generation = events.stream_opened(&sid);
    let closed = StreamClosed {
        events: Arc::downgrade(events),
        sid,
        generation,
    };
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _ = &closed;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// Reports a GET stream's end when its body is dropped (client gone or
/// server stopping).
struct StreamClosed<E: SessionEvents> {
    events: Weak<E>,
    sid: String,
    generation: u64,
}

impl<E: SessionEvents> Drop for StreamClosed<E> {
    fn drop(&mut self) {
        if let Some(e) = self.events.upgrade() {
            e.stream_closed(&self.sid, self.generation);
        }
    }
}
