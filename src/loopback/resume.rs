//! rmcp's local session manager with exact SSE resumption.
//!
//! When a client re-opens a stream with `Last-Event-ID: N` (the CLI's MCP
//! transport does after a drop), rmcp 3.11 replays its cached events from
//! index N *inclusive*, so the event the client already had — usually the
//! last context — arrives twice. This wrapper asks rmcp to replay from N + 1:
//! the client gets exactly what it missed, no duplicate, nothing lost.
//! Everything else is rmcp's own behaviour.

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};

/// The session manager every MCP server of the library uses.
#[derive(Debug, Default)]
pub struct McpSessions(pub LocalSessionManager);

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
        self.0.create_stream(id, message).await
    }
    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
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
mod tests {
    use super::next_event_id;

    #[test]
    fn next_ids() {
        assert_eq!(next_event_id("0"), "1");
        assert_eq!(next_event_id("41/7"), "42/7");
        assert_eq!(next_event_id("x"), "x");
        assert_eq!(
            next_event_id(&usize::MAX.to_string()),
            usize::MAX.to_string()
        );
    }
}
