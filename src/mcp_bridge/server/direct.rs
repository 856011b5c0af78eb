//! The fast paths of the hot request, `tools/call`: answered without rmcp's
//! request parsing, session worker and service task (four task hops per
//! request), by the same [`ServerState::run_call`] as rmcp's handler.
//!
//! - [`direct_call`], an axum layer behind the guard, takes a `tools/call`
//!   POST of a session that finished its handshake (its peer is known) and
//!   whose `context.cwd` needs no `roots/list` question first (the client
//!   offers no roots, or their answer is cached). The call runs in the
//!   connection's own task.
//!   - Without a `progressToken`: one `application/json` answer, which the
//!     Streamable HTTP transport allows for any request.
//!   - With one (what Qwen Code sends, as it passes `onprogress`): the
//!     head of the answer waits for the first thing to send, at most one
//!     keep-alive interval. A call that ends first, with no progress to
//!     tell, is answered like one without a token: one `application/json`
//!     body (the transport lets the server choose per request; a client
//!     must take both). That is one write and one wakeup of the client,
//!     where an open stream costs a write and a wakeup for the head, each
//!     event and the end. Otherwise the head goes out with the first
//!     progress event (or at the interval) as an SSE stream, and the call
//!     goes on in a task of its own, its events streamed with keep-alive
//!     comments, as rmcp streams them. (A call that ends in the same step
//!     as its progress, or a cancelled one, gets a whole SSE body.)
//! - [`Direct`], rmcp's session-manager hook ([`DirectRequests`]), takes
//!   the other `tools/call`s of a session with a known peer (e.g. its first
//!   one, which asks `roots/list` on the way) after rmcp parsed them.
//!
//! On every path `notifications/cancelled` for the call ends it (its
//! [`DirectSlot`]), and a client that goes away (closes the connection or
//! drops the stream) gives it up: the host abandons the plugin request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    GetMeta, ProgressToken, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::Peer;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use rmcp::RoleServer;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sse_stream::{KeepAlive, Sse, SseBody};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{lock, offers_roots, Progress, ServerState, PROGRESS_QUEUE};
use crate::loopback::mcp::SESSION_HEADER;
use crate::loopback::resume::DirectRequests;

const EVENT_STREAM: &str = "text/event-stream";

/// A direct call's entry in the table (what its `notifications/cancelled`
/// cancels), removed when the call ends (even by drop).
pub(super) struct DirectSlot(Arc<ServerState>, (String, RequestId));

impl DirectSlot {
    /// Registers the call `id` of session `sid`; returns its entry and the
    /// token a cancellation fires.
    fn register(state: Arc<ServerState>, sid: String, id: RequestId) -> (Self, CancellationToken) {
        let cancel = CancellationToken::new();
        lock(&state.direct_calls).insert((sid.clone(), id.clone()), cancel.clone());
        (DirectSlot(state, (sid, id)), cancel)
    }
}

impl Drop for DirectSlot {
    fn drop(&mut self) {
        lock(&self.0.direct_calls).remove(&self.1);
    }
}

/// A `tools/call` POST body as this layer takes it.
#[derive(Deserialize)]
struct WireCall {
    jsonrpc: String,
    method: String,
    id: Value,
    params: CallToolRequestParams,
}

/// A `tools/call` this layer answers itself: its JSON-RPC id (as sent and
/// as rmcp's type), its parameters and its progress token.
struct Call {
    raw_id: Value,
    id: RequestId,
    params: CallToolRequestParams,
    token: Option<ProgressToken>,
}

/// The POST body as a single well-formed `tools/call` request, else `None`
/// (rmcp then handles it, and answers what is wrong with it).
fn parse_call(body: &[u8]) -> Option<Call> {
    let wire: WireCall = serde_json::from_slice(body).ok()?;
    if wire.jsonrpc != "2.0" || wire.method != "tools/call" {
        return None;
    }
    if !(wire.id.is_string() || wire.id.is_i64() || wire.id.is_u64()) {
        return None;
    }
    let token = match &wire.params.meta {
        None => None,
        Some(meta) if meta.0.contains_key("progressToken") => Some(meta.get_progress_token()?),
        Some(_) => None,
    };
    Some(Call {
        id: serde_json::from_value(wire.id.clone()).ok()?,
        raw_id: wire.id,
        params: wire.params,
        token,
    })
}

/// Which answers the client takes (`Accept`; `*/*` takes both).
#[derive(Default, Clone, Copy)]
struct Accepts {
    json: bool,
    sse: bool,
}

impl Accepts {
    fn of(headers: &axum::http::HeaderMap) -> Accepts {
        let mut a = Accepts::default();
        for t in headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
        {
            let t = t.split(';').next().unwrap_or("").trim();
            let any = t == "*/*";
            a.json |= any || t.eq_ignore_ascii_case("application/json");
            a.sse |= any || t.eq_ignore_ascii_case(EVENT_STREAM);
        }
        a
    }
}

/// The session's peer, when its calls can be answered here: the handshake
/// is done, and `context.cwd` needs no `roots/list` question first (that
/// request travels on the call's stream through rmcp's worker).
fn ready_peer(state: &ServerState, sid: &str) -> Option<Peer<RoleServer>> {
    state.sessions.lock().get(sid).and_then(|e| {
        let peer = e.data.peer.clone()?;
        (!offers_roots(&peer) || e.data.root.is_some()).then_some(peer)
    })
}

/// The axum layer (see the module docs). Everything it does not take —
/// other methods, other sessions, bodies that are not one `tools/call`, a
/// client that does not take the answer's type — goes on to rmcp unchanged.
pub(super) async fn direct_call(
    State(state): State<Arc<ServerState>>,
    req: Request,
    next: Next,
) -> Response {
    let accepts = Accepts::of(req.headers());
    if req.method() != Method::POST || !(accepts.json || accepts.sse) {
        return next.run(req).await;
    }
    let Some(sid) = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return next.run(req).await;
    };
    let Some(peer) = ready_peer(&state, &sid) else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, state.policy.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response(),
    };
    match parse_call(&bytes) {
        Some(call) if call.token.is_none() && accepts.json => {
            json_answer(state, peer, sid, call).await
        }
        Some(call) if call.token.is_some() && accepts.sse => {
            sse_answer(state, peer, sid, call, accepts.json).await
        }
        _ => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// A call without a `progressToken`: one `application/json` answer.
async fn json_answer(
    state: Arc<ServerState>,
    peer: Peer<RoleServer>,
    sid: String,
    call: Call,
) -> Response {
    let (slot, cancel) = DirectSlot::register(state.clone(), sid.clone(), call.id);
    let outcome = state
        .run_call(
            &peer,
            Some(&sid),
            call.params,
            None,
            Progress::Peer(peer.clone()),
            &cancel,
        )
        .await;
    drop(slot);
    json_response(&call.raw_id, outcome)
}

/// The `application/json` answer of a finished call (cancelled: the
/// JSON-RPC error a JSON answer must then carry).
fn json_response(id: &Value, outcome: Option<CallToolResult>) -> Response {
    let answer = match outcome {
        Some(result) => serde_json::to_string(&RpcResult {
            jsonrpc: "2.0",
            id,
            result: &result,
        })
        .unwrap_or_else(|e| {
            json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32603, "message": format!("cannot encode the result: {e}")}})
            .to_string()
        }),
        None => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32800, "message": "the call was cancelled"}})
        .to_string(),
    };
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

/// A JSON-RPC result, encoded straight from the call's result.
#[derive(Serialize)]
struct RpcResult<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a CallToolResult,
}

/// The JSON-RPC answer of a finished call as an SSE message (`None`:
/// cancelled, nothing is answered).
fn answer_message(outcome: Option<CallToolResult>, id: RequestId) -> Option<ServerSseMessage> {
    outcome.map(|result| {
        ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            ServerResult::CallToolResult(result),
            id,
        ))
    })
}

/// A message as an SSE event (`None`: a message without content, or one
/// that cannot be encoded, which is logged).
fn event(state: &ServerState, m: &ServerSseMessage) -> Option<Sse> {
    let message = m.message.as_ref()?;
    match serde_json::to_string(message.as_ref()) {
        Ok(data) => Some(Sse::default().data(data)),
        Err(e) => {
            state
                .logger
                .warn(|| format!("tools/call: an event cannot be encoded: {e}"));
            None
        }
    }
}

/// The head of an SSE answer (the headers rmcp's streams carry).
fn sse_response(body: Body) -> Response {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

type Running = Pin<Box<dyn Future<Output = Option<CallToolResult>> + Send>>;

/// A call with a `progressToken`: an SSE answer, whole when the call ends
/// before anything else is to be sent (see the module docs).
async fn sse_answer(
    state: Arc<ServerState>,
    peer: Peer<RoleServer>,
    sid: String,
    call: Call,
    accepts_json: bool,
) -> Response {
    // Room for the progress queue and the answer.
    let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE + 1);
    let mut run = running_call(
        state.clone(),
        peer,
        sid,
        call.id.clone(),
        call.params,
        call.token,
        tx.clone(),
    );
    let hold = tokio::time::sleep(state.keep_alive);
    tokio::pin!(hold);
    let first = tokio::select! {
        biased;
        outcome = &mut run => {
            let mut events = Vec::new();
            while let Ok(m) = rx.try_recv() {
                events.extend(event(&state, &m).map(Bytes::from));
            }
            // Nothing but the answer, and the client takes JSON: the
            // cheapest answer the transport allows.
            if events.is_empty() && accepts_json && outcome.is_some() {
                return json_response(&call.raw_id, outcome);
            }
            let answer = answer_message(outcome, call.id);
            events.extend(answer.and_then(|a| event(&state, &a)).map(Bytes::from));
            return sse_response(Body::from(events.concat()));
        }
        m = rx.recv() => m,
        _ = &mut hold => None,
    };
    spawn_streamed(&state, run, call.id, tx);
    sse_response(stream_body(state, first, rx))
}

/// A call of session `sid` as a future of its own: registered (its
/// [`DirectSlot`]) now, until it ends or is dropped; its progress goes to
/// `progress`.
fn running_call(
    state: Arc<ServerState>,
    peer: Peer<RoleServer>,
    sid: String,
    id: RequestId,
    params: CallToolRequestParams,
    token: Option<ProgressToken>,
    progress: mpsc::Sender<ServerSseMessage>,
) -> Running {
    let (slot, cancel) = DirectSlot::register(state, sid.clone(), id);
    Box::pin(async move {
        let state = &slot.0;
        let outcome = state
            .run_call(
                &peer,
                Some(&sid),
                params,
                token,
                Progress::Stream(progress),
                &cancel,
            )
            .await;
        drop(slot);
        outcome
    })
}

/// Runs `run` in a task of its own and sends its answer onto `tx`, after
/// its progress; a receiver that goes away (the client dropped the
/// stream) gives the call up.
fn spawn_streamed(
    state: &ServerState,
    run: Running,
    id: RequestId,
    tx: mpsc::Sender<ServerSseMessage>,
) {
    let logger = state.logger.clone();
    state.rt.spawn(async move {
        tokio::select! {
            outcome = run => {
                if let Some(a) = answer_message(outcome, id) {
                    let _ = tx.send(a).await;
                }
            }
            _ = tx.closed() => logger.info(|| {
                "tools/call: the client closed its stream; the call is given up".to_string()
            }),
        }
    });
}

/// The streamed SSE body of a call: `first`, then what `rx` yields until the
/// call's task drops its sender, with a keep-alive comment after each
/// silent interval.
fn stream_body(
    state: Arc<ServerState>,
    first: Option<ServerSseMessage>,
    mut rx: mpsc::Receiver<ServerSseMessage>,
) -> Body {
    let keep_alive = state.keep_alive;
    let mut first = first;
    let events = futures_util::stream::poll_fn(move |cx| loop {
        let next = match first.take() {
            Some(m) => Some(m),
            None => match rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(m) => m,
            },
        };
        let Some(m) = next else {
            return Poll::Ready(None);
        };
        if let Some(sse) = event(&state, &m) {
            return Poll::Ready(Some(Ok::<_, Infallible>(sse)));
        }
    });
    Body::new(
        SseBody::new(events)
            .with_keep_alive::<KeepAliveTimer>(KeepAlive::new().interval(keep_alive)),
    )
}

/// The tokio timer of an [`SseBody`]'s keep-alive.
struct KeepAliveTimer(Pin<Box<tokio::time::Sleep>>);

impl Future for KeepAliveTimer {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().0.as_mut().poll(cx)
    }
}

impl sse_stream::Timer for KeepAliveTimer {
    fn from_duration(duration: Duration) -> Self {
        KeepAliveTimer(Box::pin(tokio::time::sleep(duration)))
    }
    fn reset(self: Pin<&mut Self>, when: std::time::Instant) {
        self.get_mut()
            .0
            .as_mut()
            .reset(tokio::time::Instant::from_std(when));
    }
}

/// rmcp's session-manager hook (see the module docs).
pub(super) struct Direct(pub(super) Weak<ServerState>);

impl DirectRequests for Direct {
    fn request(
        &self,
        session: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> std::result::Result<mpsc::Receiver<ServerSseMessage>, Box<ClientJsonRpcMessage>> {
        let Some(state) = self.0.upgrade() else {
            return Err(Box::new(message));
        };
        let is_call = matches!(&message, ClientJsonRpcMessage::Request(r)
            if matches!(r.request, ClientRequest::CallToolRequest(_)));
        let peer = if is_call {
            state
                .sessions
                .lock()
                .get(session.as_ref())
                .and_then(|e| e.data.peer.clone())
        } else {
            None
        };
        let Some(peer) = peer else {
            return Err(Box::new(message));
        };
        let ClientJsonRpcMessage::Request(request) = message else {
            unreachable!("checked above");
        };
        let id = request.id;
        // rmcp keeps the request's `_meta` in its extensions.
        let token = request.request.get_meta().get_progress_token();
        let ClientRequest::CallToolRequest(call) = request.request else {
            unreachable!("checked above");
        };
        // Room for the progress queue and the answer.
        let (tx, rx) = mpsc::channel(PROGRESS_QUEUE + 1);
        let run = running_call(
            state.clone(),
            peer,
            session.to_string(),
            id.clone(),
            call.params,
            token,
            tx.clone(),
        );
        spawn_streamed(&state, run, id, tx);
        Ok(rx)
    }

    fn notification(&self, session: &SessionId, message: &ClientJsonRpcMessage) -> bool {
        let ClientJsonRpcMessage::Notification(n) = message else {
            return false;
        };
        let ClientNotification::CancelledNotification(c) = &n.notification else {
            return false;
        };
        let (Some(state), Some(id)) = (self.0.upgrade(), c.params.request_id.clone()) else {
            return false;
        };
        let found = lock(&state.direct_calls)
            .get(&(session.to_string(), id))
            .cloned();
        match found {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}
