//! What every MCP server on the loopback layer does around rmcp's handling
//! of a request: the shared checks ([`super::guard`]), then keeping the
//! session lifecycle informed — a request seen, a session created by an
//! `initialize` answer, a GET stream opened and (when its body is dropped)
//! closed — and the one change made to what rmcp streams
//! ([`without_empty_data`]). Each server says what those events mean for it through
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

/// The MCP session id of a request or notification handled by rmcp (its
/// `Mcp-Session-Id` header), if it has one.
pub fn session_id(ext: &rmcp::model::Extensions) -> Option<&str> {
    ext.get::<axum::http::request::Parts>()
        .and_then(|parts| parts.headers.get(SESSION_HEADER))
        .and_then(|v| v.to_str().ok())
}

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
    let is_stream = response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        return response;
    }
    // A GET stream's end is reported when its body is dropped.
    let closed = stream_session.map(|sid| {
        let generation = events.stream_opened(&sid);
        StreamClosed {
            events: Arc::downgrade(events),
            sid,
            generation,
        }
    });
    let (parts, body) = response.into_parts();
    if closed.is_none() && hyper::body::Body::size_hint(&body).exact().is_some() {
        // A whole answer of known length (made by the server, not one of
        // rmcp's streams): sent as it is, with its `Content-Length`.
        return Response::from_parts(parts, body);
    }
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _ = &closed;
        chunk.map(without_empty_data)
    }));
    Response::from_parts(parts, body)
}

/// An SSE chunk without the empty `data:` line of rmcp's priming events.
///
/// rmcp starts every stream (GET, and each POST answer) with a priming
/// event, `data: \nid: 0\nretry: 3000\n\n`, whose empty data line makes it
/// a message event with the data `""`. Qwen Code's MCP client skips such an
/// event; Gemini CLI's (0.61.0) runs `JSON.parse` on it, fails, and drops
/// the IDE connection. Without the data line the event is not dispatched
/// at all (the SSE rules), while its `id` and `retry` still take effect for
/// both clients, so resuming and reconnecting work as before. Events with
/// data, comments (keep-alives) and anything that does not parse as whole
/// events pass unchanged.
pub fn without_empty_data(chunk: axum::body::Bytes) -> axum::body::Bytes {
    let Ok(text) = std::str::from_utf8(&chunk) else {
        return chunk;
    };
    if !text.ends_with("\n\n") {
        return chunk;
    }
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for event in text[..text.len() - 2].split("\n\n") {
        let lines: Vec<&str> = event.split('\n').collect();
        let is_data = |l: &&str| *l == "data" || l.starts_with("data:");
        let empty_data = |l: &&str| matches!(*l, "data" | "data:" | "data: ");
        let has_field = lines.iter().any(|l| !l.starts_with(':') && !is_data(l));
        if lines.iter().any(is_data)
            && lines.iter().filter(|l| is_data(l)).all(empty_data)
            && has_field
        {
            changed = true;
            for l in lines.iter().filter(|l| !is_data(l)) {
                out.push_str(l);
                out.push('\n');
            }
        } else {
            out.push_str(event);
            out.push('\n');
        }
        out.push('\n');
    }
    if changed {
        axum::body::Bytes::from(out)
    } else {
        chunk
    }
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
