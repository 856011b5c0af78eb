//! rmcp's local session manager with exact SSE resumption.
//!
//! When a client re-opens a stream with `Last-Event-ID: N` (the CLI's MCP
//! transport does after a drop), rmcp 3.11 replays its cached events from
//! index N *inclusive*, so the event the client already had — usually the
//! last context — arrives twice. This wrapper asks rmcp to replay from N + 1:
//! the client gets exactly what it missed, no duplicate, nothing lost.
//!
//! A server may also answer some requests itself ([`DirectRequests`]): rmcp
//! hands every request of a session to that session's worker task, which
//! hands it to the service's task, whose answer travels back the same way —
//! four task hops per request. For its hot request (`tools/call` of the
//! plugin MCP server) a server takes the request here, where rmcp has
//! already checked the session, and answers on the request's own SSE stream.
//! Everything else is rmcp's own behaviour.

use std::sync::{Arc, OnceLock};

use futures_util::future::Either;
use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use tokio::sync::mpsc;

/// Requests and notifications a server answers itself, before rmcp's
/// session worker sees them. Called on a runtime thread; must not block.
pub trait DirectRequests: Send + Sync + 'static {
    /// `Ok(stream)`: the request is ours; what the receiver yields is its
    /// SSE stream (the final answer last). Dropping the receiver means the
    /// client went away. `Err(message)`: not ours, rmcp handles it.
    fn request(
        &self,
        session: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<mpsc::Receiver<ServerSseMessage>, Box<ClientJsonRpcMessage>>;
    /// True when the notification concerned one of our requests (e.g. its
    /// `notifications/cancelled`) and is consumed.
    fn notification(&self, session: &SessionId, message: &ClientJsonRpcMessage) -> bool;
}

/// The session manager every MCP server of the library uses.
#[derive(Default)]
pub struct McpSessions(pub LocalSessionManager, OnceLock<Arc<dyn DirectRequests>>);

impl std::fmt::Debug for McpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSessions")
            .field("direct", &self.1.get().is_some())
            .finish_non_exhaustive()
    }
}

/// An mpsc receiver as a `Stream + Sync` (what rmcp's SSE response needs).
fn receiver_stream(
    mut rx: mpsc::Receiver<ServerSseMessage>,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The id of the event after `last` (`index[/request]`, as rmcp writes it),
/// or `last` unchanged when it is not one of rmcp's ids.
pub fn next_event_id(last: &str) -> String {
    let (index, rest) = match last.split_once('/') {
        Some((i, r)) => (i, Some(r)),
        None => (last, None),
    };
    match index.parse::<usize>() {
        Ok(i) => match rest {
            Some(r) => format!("{}/{r}", i.saturating_add(1)),
            None => i.saturating_add(1).to_string(),
        },
        Err(_) => last.to_string(),
    }
}

impl McpSessions {
    /// Installs the server's direct answers (once; a second call is
    /// ignored and returns false).
    pub fn set_direct(&self, direct: Arc<dyn DirectRequests>) -> bool {
        self.1.set(direct).is_ok()
    }

    /// Number of sessions rmcp holds.
    pub async fn count(&self) -> usize {
        self.0.sessions.read().await.len()
    }
}

impl SessionManager for McpSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.0.create_session().await
    }
    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.0.initialize_session(id, message).await
    }
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.0.has_session(id).await
    }
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.0.close_session(id).await
    }
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let message = match self.1.get() {
            // rmcp calls this only for a session it holds.
            Some(direct) => match direct.request(id, message) {
                Ok(rx) => return Ok(Either::Left(receiver_stream(rx))),
                Err(message) => *message,
            },
            None => message,
        };
        Ok(Either::Right(self.0.create_stream(id, message).await?))
    }
    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if let Some(direct) = self.1.get() {
            if direct.notification(id, &message) {
                return Ok(());
            }
        }
        self.0.accept_message(id, message).await
    }
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.0.create_standalone_stream(id).await
    }
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.0.resume(id, next_event_id(&last_event_id)).await
    }
}

#[cfg(test)]
mod tests;
