//! The MCP server: rmcp's streamable-HTTP service behind an axum router with
//! the companion's security checks, plus the `openDiff`/`closeDiff` tools.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::hub::{Hub, Notification};
use super::{HostRequest, Inner};
use crate::loopback::guard::Policy;
use crate::loopback::mcp::{self, session_id};
use crate::loopback::resume::McpSessions;

/// Per-server state shared by the HTTP guard and the MCP handler.
pub struct ServerState {
    pub inner: Arc<Inner>,
    pub hub: Arc<Hub>,
    pub policy: Policy,
}

/// Builds the axum app: `/mcp` (rmcp) behind the guard, 404 elsewhere.
pub fn router(
    state: Arc<ServerState>,
    sessions: Arc<McpSessions>,
    cancel: CancellationToken,
    keep_alive: Duration,
) -> Router {
    let max_body_bytes = state.policy.max_body_bytes;
    let handler_state = state.clone();
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(keep_alive))
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(max_body_bytes)
        // Host and Origin are checked by `guard` with the official companion's rules.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || {
            Ok(IdeMcp {
                state: handler_state.clone(),
            })
        },
        sessions,
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .fallback(|| async { (StatusCode::NOT_FOUND, "Not Found") })
        .layer(axum::middleware::from_fn_with_state(state, guard))
}

/// Checks every request with the shared loopback rules and keeps the hub
/// informed of the session lifecycle ([`crate::loopback::mcp`]).
async fn guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    mcp::guard_and_track(&state.policy, &state.inner.logger, &state.hub, req, next).await
}

#[derive(Clone)]
struct IdeMcp {
    state: Arc<ServerState>,
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// The two tools with their schemas and annotations. Both only act on the
/// IDE's views (never on files), and repeating a call with the same
/// arguments leaves the same state, so they are idempotent and not
/// destructive; the CLI may safely re-run them after a lost connection.
pub fn tools() -> Vec<Tool> {
    let open = Tool::new(
        "openDiff",
        "Open a diff view in the IDE comparing the file with proposed new content. \
         Returns at once; the user's decision arrives as ide/diffAccepted or ide/diffRejected.",
        schema(json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "Absolute path of the file to diff."},
                "newContent": {"type": "string", "description": "Proposed new content of the file."}
            },
            "required": ["filePath", "newContent"],
            "additionalProperties": false
        })),
    )
    .with_annotations(
        ToolAnnotations::with_title("Open diff in IDE")
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    let close = Tool::new(
        "closeDiff",
        "Close the IDE's diff view for a file and return its final content as JSON {\"content\": string|null}.",
        schema(json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "Absolute path of the file whose diff to close."},
                "suppressNotification": {"type": "boolean", "description": "Do not send ide/diffClosed."}
            },
            "required": ["filePath"],
            "additionalProperties": false
        })),
    )
    .with_annotations(
        ToolAnnotations::with_title("Close diff in IDE")
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    vec![open, close]
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn arg_path(args: &Map<String, Value>) -> Result<String, CallToolResult> {
    match args.get("filePath") {
        Some(Value::String(p)) if p.contains('\0') => {
            Err(tool_error("filePath contains a NUL character"))
        }
        Some(Value::String(p)) if crate::sys::platform::PATH_STYLE.is_absolute(p) => Ok(p.clone()),
        Some(Value::String(p)) => Err(tool_error(format!(
            "filePath must be an absolute path, got {p:?}"
        ))),
        _ => Err(tool_error("filePath (string) is required")),
    }
}

impl IdeMcp {
    async fn open_diff(&self, args: Map<String, Value>, sid: Option<String>) -> CallToolResult {
        let path = match arg_path(&args) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Some(Value::String(new_content)) = args.get("newContent") else {
            return tool_error("newContent (string) is required");
        };
        let inner = &self.state.inner;
        let source = sid.as_deref().and_then(|sid| inner.diff_source(sid));
        let id = inner.diffs_open(&path, new_content.clone(), source.clone());
        let outcome = match inner
            .ask_host(HostRequest::OpenDiff {
                path: path.clone(),
                content: new_content.clone(),
                source,
            })
            .await
        {
            Some(Ok(_)) => Ok(()),
            Some(Err(message)) => Err(message),
            None => Err("this IDE has no diff view (no open-diff callback is set)".to_string()),
        };
        match outcome {
            Ok(()) => {
                inner.logger.info(|| format!("diff opened for {path}"));
                CallToolResult::success(vec![])
            }
            Err(message) => {
                inner.diffs_forget(&path, id);
                inner
                    .logger
                    .warn(|| format!("openDiff for {path} failed: {message}"));
                tool_error(message)
            }
        }
    }

    async fn close_diff(&self, args: Map<String, Value>) -> CallToolResult {
        let path = match arg_path(&args) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let suppress = matches!(args.get("suppressNotification"), Some(Value::Bool(true)));
        let inner = &self.state.inner;
        let Some(proposed) = inner.diffs_take(&path) else {
            return CallToolResult::success(vec![ContentBlock::text(
                json!({"content": null}).to_string(),
            )]);
        };
        let content = match inner
            .ask_host(HostRequest::CloseDiff { path: path.clone() })
            .await
        {
            None => Some(proposed),
            Some(Ok(text)) => text,
            Some(Err(message)) => return tool_error(message),
        };
        if !suppress {
            self.state.hub.broadcast(Notification::new(
                "ide/diffClosed",
                json!({"filePath": path, "content": content}),
            ));
        }
        inner
            .logger
            .info(|| format!("diff closed for {path} by the CLI"));
        CallToolResult::success(vec![ContentBlock::text(
            json!({"content": content}).to_string(),
        )])
    }
}

impl ServerHandler for IdeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("qwen-companion", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let sid = session_id(&context.extensions).map(str::to_string);
        let result = match request.name.as_ref() {
            "openDiff" => self.open_diff(args, sid).await,
            "closeDiff" => self.close_diff(args).await,
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool {other:?}"),
                    None,
                ))
            }
        };
        Ok(CallToolResponse::Complete(result))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        match session_id(&context.extensions) {
            Some(sid) => self.state.hub.peer_initialized(sid, context.peer.clone()),
            None => self
                .state
                .inner
                .logger
                .warn(|| "initialized notification without a session id".into()),
        }
    }
}
