//! The plugin host's MCP server: every enabled plugin's model-visible tools
//! as MCP tools, for Qwen Code (reached through the `qc-mcp-bridge` stdio
//! bridge, see `docs/mcp-registration.md`).
//!
//! - **Transport and security**: rmcp's streamable HTTP on `127.0.0.1:<random
//!   port>/mcp` through [`crate::loopback::serve`], with the IDE server's
//!   checks ([`crate::loopback::guard::check`]: every `Origin` refused, a
//!   loopback `Host` on our port, `Authorization: Bearer <token>` compared in
//!   constant time, capped bodies), the connection limits of
//!   [`crate::loopback::Limits`] and the session lifecycle of
//!   [`crate::loopback::sessions`] (stream-less sessions reaped after a
//!   grace, their number bounded).
//! - **Discovery**: while running, `<qwen_home>/companion/plugins-mcp/<pid>.lock`
//!   (directory 0700, file 0600, written atomically) holds `{port,
//!   authToken, pid, workspacePaths, serverName, version}`; it is removed on
//!   stop. One server per process and lock directory.
//! - **`tools/list`**: built from the manifests alone (no plugin is started
//!   to list), see [`super::tools::listing`]; it always holds the built-in
//!   read-only [`super::tools::STATUS_TOOL`].
//! - **Live**: on `reload`/`enable`/`disable` and when the crash-loop breaker
//!   disables a plugin, live sessions get `notifications/tools/list_changed`
//!   (only when the listed tools really changed). A call to a tool that is
//!   no longer listed is an `isError` result at once.
//! - **`tools/call`**: the host validates the arguments against the tool's
//!   schema (a failure is an `isError` result with the schema errors;
//!   nothing is spawned). `context.cwd` is the first root of the session's
//!   `roots/list` when the client declared the `roots` capability (asked
//!   once per session, cached, asked again after
//!   `notifications/roots/list_changed`), else the host's workspace root.
//!   Each `ui_push` of the called plugin during the call is sent as
//!   `notifications/progress` when the request carried a `progressToken`
//!   (it also resets the CLI's request timeout). `notifications/cancelled`
//!   ends the call: the host gives the request up. The hot request skips
//!   rmcp's session worker: see the `direct` module.

use crate::shared::sync::lock;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use once_cell::sync::Lazy;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    Notification, PaginatedRequestParams, ProgressNotificationParam, ProgressToken, RequestId,
    ServerCapabilities, ServerConfig, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::naming::SERVER_NAME;
use super::{editor, tools};
use crate::error::{Error, Result, Status};
use crate::events::HostLink;
use crate::host::{LogFn, LogLevel, Logger};
use crate::loopback;
use crate::loopback::guard::{OriginPolicy, Policy};
use crate::loopback::resume::McpSessions;
use crate::loopback::sessions::Sessions;
use crate::plugins::host::{CallOptions, HostListener, PluginEvent, PluginHost};
use crate::runtime::{self, RuntimeRef};
use crate::shared::fs::{self, AtomicWrite};

use crate::loopback::mcp::{self, session_id};

mod direct;
use direct::{direct_call, Direct};

const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How long a `roots/list` question may take before the call goes on with
/// the workspace root.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(5);
/// `ui_push`es waiting to be sent as progress, per call (more are dropped).
const PROGRESS_QUEUE: usize = 64;

/// Lock files in use by servers of this process.
static LOCKS_IN_USE: Lazy<Mutex<HashSet<PathBuf>>> = Lazy::new(|| Mutex::new(HashSet::new()));

/// Server configuration (a JSON object; every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Absolute workspace folders written to the lock file (the bridge
    /// prefers the server whose folders contain its working directory).
    /// Default: the plugin host's workspace root, if any.
    #[serde(default)]
    pub workspace_paths: Vec<String>,
    /// Directory of the lock file (default `<qwen_home>/companion/plugins-mcp`).
    #[serde(default)]
    pub lock_dir: Option<PathBuf>,
    /// The settings every loopback server shares (`maxBodyBytes`, default
    /// 16 MiB; `keepAliveMs`; `http`; `sessionGraceMs`; `maxSessions`).
    /// Unknown keys are refused there.
    #[serde(flatten)]
    pub server: loopback::ServerConfig,
}

impl loopback::config::EmbedsServerConfig for Config {
    fn server_config(&self) -> &loopback::ServerConfig {
        &self.server
    }
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        loopback::config::parse(json, "plugin MCP server")
    }
}

/// The default lock directory: `<qwen_home>/companion/plugins-mcp`.
pub fn default_lock_dir() -> Result<PathBuf> {
    Ok(fs::qwen_home()?.join("companion").join("plugins-mcp"))
}

/// Per-session data: the client's peer (for notifications) and the cached
/// first root (`Some(None)`: asked, no usable root).
#[derive(Default)]
struct SessionData {
    peer: Option<Peer<RoleServer>>,
    root: Option<Option<String>>,
}

/// State shared by the guard, the handler and the host listener.
struct ServerState {
    host: Arc<PluginHost>,
    logger: Arc<Logger>,
    policy: Policy,
    sessions: Arc<Sessions<SessionData>>,
    rt: tokio::runtime::Handle,
    /// Interval of SSE keep-alive comments (also how long the head of a
    /// direct answer to a call with a progress token may wait, see
    /// [`direct`]).
    keep_alive: Duration,
    /// Calls in progress: their plugin id and where its `ui_push`es go.
    calls: Mutex<HashMap<u64, (String, mpsc::Sender<PluginEvent>)>>,
    /// Calls answered directly ([`direct`]), by (session, request id): what
    /// their `notifications/cancelled` cancels.
    direct_calls: Mutex<HashMap<(String, RequestId), CancellationToken>>,
    next_call: AtomicU64,
    /// The names last listed (to send `list_changed` only on a change).
    last_listed: Mutex<Vec<String>>,
    /// Bumped by the host listener whenever the plugins (or their enabled
    /// flags) may have changed; the cached listing is valid for one value.
    generation: AtomicU64,
    /// The listing built for `generation` (building it walks every
    /// manifest, converts and checks every schema and hashes names: a
    /// `tools/call` must not pay that).
    cached: Mutex<Option<(u64, Arc<tools::Listing>)>>,
}

impl ServerState {
    /// The roots of `sid` are to be asked again (the client changed them).
    fn forget_roots(&self, sid: &str) {
        if let Some(e) = self.sessions.lock().get_mut(sid) {
            e.data.root = None;
        }
    }

    /// The current listing; `log` reports each tool left out (done for
    /// `tools/list` only, so calls and change checks do not repeat it).
    /// Always built afresh (and cached), the tools left out logged.
    fn listing_logged(&self, log: bool) -> Arc<tools::Listing> {
        // Read before building: a change during the build bumps it again,
        // so what we store is never taken for the newer state.
        let generation = self.generation.load(Ordering::SeqCst);
        let built = Arc::new(tools::listing(&self.host, |plugin, tool, why| {
            if log {
                self.logger
                    .warn(|| format!("tool {tool} of plugin {plugin} is not listed: {why}"));
            }
        }));
        let mut cached = lock(&self.cached);
        if self.generation.load(Ordering::SeqCst) == generation {
            *cached = Some((generation, built.clone()));
        }
        built
    }

    /// The listing for the host's current state, from the cache when no
    /// change was signalled since it was built.
    fn listing(&self) -> Arc<tools::Listing> {
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some((g, l)) = lock(&self.cached).as_ref() {
            if *g == generation {
                return l.clone();
            }
        }
        self.listing_logged(false)
    }

    /// The host's plugins may have changed: the cache is stale.
    fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn names(listing: &tools::Listing) -> Vec<String> {
        listing
            .tools
            .iter()
            .map(|t| serde_json::to_string(t).unwrap_or_default())
            .collect()
    }

    /// Sends `notifications/tools/list_changed` to every live session when
    /// the listed tools changed since the last listing or notification.
    fn tools_maybe_changed(&self) {
        let now = Self::names(&self.listing());
        {
            let mut last = lock(&self.last_listed);
            if *last == now {
                return;
            }
            *last = now;
        }
        let peers: Vec<Peer<RoleServer>> = self
            .sessions
            .lock()
            .values()
            .filter(|e| !e.life.doomed)
            .filter_map(|e| e.data.peer.clone())
            .collect();
        self.logger
            .info(|| format!("plugin tools changed: telling {} session(s)", peers.len()));
        for peer in peers {
            self.rt.spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }
}

/// Forwards host events to the server (held weakly by the host).
struct Listener(Weak<ServerState>);

impl HostListener for Listener {
    fn event(&self, event: &PluginEvent) {
        let Some(state) = self.0.upgrade() else {
            return;
        };
        match event {
            PluginEvent::UiPush { plugin, .. } => {
                for (p, tx) in lock(&state.calls).values() {
                    if p == plugin {
                        // Full (a flood, a slow client): this update is
                        // dropped; progress is advisory.
                        let _ = tx.try_send(event.clone());
                    }
                }
            }
            PluginEvent::Disabled { .. } => {
                state.invalidate();
                state.tools_maybe_changed()
            }
            _ => {}
        }
    }
    fn plugins_changed(&self) {
        if let Some(state) = self.0.upgrade() {
            state.invalidate();
            state.tools_maybe_changed();
        }
    }
}

struct Running {
    runtime: Arc<RuntimeRef>,
    port: u16,
    token: String,
    lock_path: PathBuf,
    cancel: CancellationToken,
    server: loopback::Server,
    manager: Arc<McpSessions>,
    // Keeps the host listener alive.
    _listener: Arc<Listener>,
}

/// The plugin MCP server. Dropping it stops it.
pub struct PluginMcpServer {
    state: Arc<ServerState>,
    /// The server's log callback and its thread.
    link: HostLink,
    running: Mutex<Option<Running>>,
}

/// A claim on a lock path in [`LOCKS_IN_USE`], released on drop unless kept.
struct LockClaim(Option<PathBuf>);

impl LockClaim {
    fn new(path: &Path) -> Result<LockClaim> {
        if !lock(&LOCKS_IN_USE).insert(path.to_path_buf()) {
            return Err(Error::new(
                Status::AlreadyRunning,
                format!(
                    "a plugin MCP server of this process already uses {}",
                    path.display()
                ),
            ));
        }
        Ok(LockClaim(Some(path.to_path_buf())))
    }
    /// Keeps the path claimed (`stop` releases it); frees the claim itself
    /// (forgetting it would leak its path).
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for LockClaim {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            lock(&LOCKS_IN_USE).remove(&path);
        }
    }
}

impl PluginMcpServer {
    /// Binds `127.0.0.1` on a free port, serves `/mcp` and writes the lock
    /// file. On any failure nothing is left running and no lock file exists.
    pub fn start(host: Arc<PluginHost>, config: Config) -> Result<PluginMcpServer> {
        let mut workspace_paths = config.workspace_paths.clone();
        if workspace_paths.is_empty() && !host.workspace_root().is_empty() {
            workspace_paths.push(host.workspace_root());
        }
        for p in &workspace_paths {
            if !crate::sys::platform::PATH_STYLE.is_absolute(p) || p.contains('\0') {
                return Err(Error::invalid_argument(format!(
                    "workspace path {p:?} is not an absolute path"
                )));
            }
        }
        let loopback::ServerSettings {
            max_body_bytes,
            keep_alive,
            limits,
            lifecycle,
        } = config.server.settings(DEFAULT_MAX_BODY_BYTES)?;
        let lock_dir = match &config.lock_dir {
            Some(d) => fs::absolute(d),
            None => default_lock_dir()?,
        };
        let pid = crate::sys::process::current_pid();
        let lock_path = lock_dir.join(format!("{pid}.lock"));
        let claim = LockClaim::new(&lock_path)?;
        let token = crate::shared::rand::random_hex(32)?;
        let (std_listener, port) = loopback::bind_loopback()?;
        let link = HostLink::new()?;
        let logger = link.logger().clone();
        let rt = runtime::acquire()?;
        let handle = rt.handle().clone();
        let _enter = handle.enter();
        let sessions = Arc::new(Sessions::new(lifecycle));
        let state = Arc::new(ServerState {
            host: host.clone(),
            logger: logger.clone(),
            policy: Policy {
                token: token.clone(),
                port,
                origin: OriginPolicy::RefuseAll,
                max_body_bytes,
            },
            sessions: sessions.clone(),
            rt: handle.clone(),
            keep_alive,
            calls: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(1),
            last_listed: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            cached: Mutex::new(None),
            direct_calls: Mutex::new(HashMap::new()),
        });
        *lock(&state.last_listed) = ServerState::names(&state.listing());
        let cancel = CancellationToken::new();
        let mut manager = McpSessions::default();
        // Our reaper closes sessions (rmcp's inactivity timer would cut a
        // healthy stream-less client between two calls).
        manager.0.session_config.keep_alive = None;
        manager.set_direct(Arc::new(Direct(Arc::downgrade(&state))));
        let manager = Arc::new(manager);
        let app = router(
            state.clone(),
            manager.clone(),
            cancel.child_token(),
            keep_alive,
        );
        let server = loopback::serve(std_listener, app, limits, logger.clone())?;
        let contents = json!({
            "port": port,
            "authToken": token,
            "pid": pid,
            "workspacePaths": workspace_paths,
            "serverName": SERVER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
        });
        let written = fs::ensure_private_dir(&lock_dir).and_then(|()| {
            let bytes = serde_json::to_vec_pretty(&contents)
                .map_err(|e| Error::new(Status::Internal, format!("serialise lock file: {e}")))?;
            fs::write_atomic(&lock_path, &bytes, AtomicWrite::PRIVATE)
        });
        if let Err(e) = written {
            cancel.cancel();
            server.abort();
            return Err(e);
        }
        claim.keep();
        handle.spawn(loopback::sessions::reap_loop(
            sessions,
            manager.clone(),
            cancel.clone(),
            logger.clone(),
            |_| false,
            |_, _| {},
        ));
        let listener = Arc::new(Listener(Arc::downgrade(&state)));
        let weak: Weak<dyn HostListener> =
            Arc::downgrade(&(listener.clone() as Arc<dyn HostListener>));
        host.add_listener(weak);
        logger.info(|| {
            format!(
                "plugin MCP server on 127.0.0.1:{port}, lock file {}",
                lock_path.display()
            )
        });
        drop(_enter);
        Ok(PluginMcpServer {
            state,
            link,
            running: Mutex::new(Some(Running {
                runtime: rt,
                port,
                token,
                lock_path,
                cancel,
                server,
                manager,
                _listener: listener,
            })),
        })
    }

    /// Receives the server's log lines (on its callback thread).
    pub fn set_log_callback(&self, sink: Option<(LogFn, LogLevel)>) {
        self.state.logger.set(sink);
    }

    fn running<T>(&self, f: impl FnOnce(&Running) -> T) -> Result<T> {
        lock(&self.running)
            .as_ref()
            .map(f)
            .ok_or_else(Error::not_running)
    }

    pub fn port(&self) -> Result<u16> {
        self.running(|r| r.port)
    }

    /// The bearer token clients must present (also in the lock file).
    pub fn auth_token(&self) -> Result<String> {
        self.running(|r| r.token.clone())
    }

    pub fn lock_file_path(&self) -> Result<PathBuf> {
        self.running(|r| r.lock_path.clone())
    }

    /// What a terminal the IDE starts should carry so that the
    /// `qc-mcp-bridge` run by a `qwen` in it reaches this server first,
    /// even when another IDE is open on the same folder:
    /// `{"QWEN_COMPANION_PLUGINS_PID": "<this process's pid>"}` (the pid the
    /// lock file names; see `discovery::PREFERRED_PID_ENV`). It holds no
    /// secret: the bridge still reads the port and token from the lock file.
    pub fn terminal_env(&self) -> Result<serde_json::Map<String, Value>> {
        self.running(|_| ())?;
        let mut env = serde_json::Map::new();
        let pid = crate::sys::process::current_pid();
        env.insert(
            super::discovery::PREFERRED_PID_ENV.to_string(),
            Value::String(pid.to_string()),
        );
        Ok(env)
    }

    /// What a client of the running server needs (`qc_plugin_host_mcp_info`):
    /// `{"url","port","headers":{"Authorization"},"env","lockFile",
    /// "serverName","tools":[names],"sessions"}`.
    pub fn info(&self) -> Result<Value> {
        let port = self.port()?;
        let token = self.auth_token()?;
        let tools: Vec<Value> = self
            .tools()
            .iter()
            .filter_map(|t| t.get("name").cloned())
            .collect();
        Ok(serde_json::json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "port": port,
            "headers": {"Authorization": format!("Bearer {token}")},
            "env": self.terminal_env()?,
            "lockFile": self.lock_file_path()?,
            "serverName": super::naming::SERVER_NAME,
            "tools": tools,
            "sessions": self.session_count(),
        }))
    }

    /// Number of MCP sessions known to the server.
    pub fn session_count(&self) -> usize {
        self.state.sessions.len()
    }

    /// The `tools/list` result the server would give now.
    pub fn tools(&self) -> Vec<Value> {
        self.state.listing().tools.clone()
    }

    /// Removes the lock file, closes every session and stops the server.
    pub fn stop(&self) -> Result<()> {
        let Some(r) = lock(&self.running).take() else {
            return Err(Error::not_running());
        };
        let removed = fs::remove_file_if_exists(&r.lock_path);
        lock(&LOCKS_IN_USE).remove(&r.lock_path);
        r.cancel.cancel();
        self.state.sessions.clear();
        lock(&self.state.calls).clear();
        if !crate::runtime::may_block() {
            r.server.abort();
        } else {
            let (server, manager) = (r.server, r.manager.clone());
            r.runtime.handle().block_on(async move {
                loopback::sessions::close_all(&manager).await;
                server.shutdown(Duration::from_secs(2)).await;
            });
        }
        self.state
            .logger
            .info(|| format!("stopped (port {})", r.port));
        drop(r.runtime);
        removed
    }

    pub fn is_running(&self) -> bool {
        lock(&self.running).is_some()
    }
}

impl Drop for PluginMcpServer {
    fn drop(&mut self) {
        let _ = self.stop();
        self.state.logger.set(None);
        self.link.shutdown();
    }
}

fn router(
    state: Arc<ServerState>,
    manager: Arc<McpSessions>,
    cancel: CancellationToken,
    keep_alive: Duration,
) -> Router {
    let handler_state = state.clone();
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(keep_alive))
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(state.policy.max_body_bytes)
        // Host and Origin are checked by `guard::check`.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || {
            Ok(PluginsMcp {
                state: handler_state.clone(),
            })
        },
        manager,
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .fallback(|| async { (StatusCode::NOT_FOUND, "Not Found") })
        // Runs after the guard (layers wrap outwards).
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            direct_call,
        ))
        .layer(axum::middleware::from_fn_with_state(state, http_guard))
}

/// The shared loopback checks and the session lifecycle
/// ([`crate::loopback::mcp`]).
async fn http_guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let req = roots_changed_in_order(&state, req).await;
    mcp::guard_and_track(&state.policy, &state.logger, &state.sessions, req, next).await
}

/// Largest body looked at by [`roots_changed_in_order`]: a notification
/// is far smaller.
const SMALL_BODY: usize = 4096;

/// rmcp handles every notification and every request in a task of its
/// own, so a `tools/call` sent right after `notifications/roots/list_changed`
/// could still run with the old roots. That notification is recognised
/// here, before rmcp takes it, and the session's roots are forgotten in
/// arrival order (rmcp's handler forgets them again, harmlessly). Only
/// small POSTs of a session that pass the guard are read; everything else
/// passes untouched.
async fn roots_changed_in_order(state: &ServerState, req: Request) -> Request {
    let small = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n <= SMALL_BODY);
    let Some(sid) = req
        .headers()
        .get(mcp::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return req;
    };
    if req.method() != axum::http::Method::POST
        || !small
        || loopback::guard::check(req.headers(), req.extensions(), &state.policy).is_err()
    {
        return req;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, SMALL_BODY).await else {
        // The body broke off: rmcp answers the empty one as malformed.
        return Request::from_parts(parts, axum::body::Body::empty());
    };
    let method = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string));
    if method.as_deref() == Some("notifications/roots/list_changed") {
        state.forget_roots(&sid);
    }
    Request::from_parts(parts, axum::body::Body::from(bytes))
}

/// Removes a call from the table when its handling ends (even by drop).
struct CallSlot<'a>(&'a ServerState, u64);

impl Drop for CallSlot<'_> {
    fn drop(&mut self) {
        lock(&self.0.calls).remove(&self.1);
    }
}

#[derive(Clone)]
struct PluginsMcp {
    state: Arc<ServerState>,
}

/// Where a call's progress notifications go.
enum Progress {
    /// rmcp's handler: through the request's peer.
    Peer(Peer<RoleServer>),
    /// A direct answer ([`direct`]): onto the request's own SSE stream.
    Stream(mpsc::Sender<ServerSseMessage>),
}

impl Progress {
    async fn send(&self, param: ProgressNotificationParam) {
        match self {
            Progress::Peer(peer) => {
                let _ = peer.notify_progress(param).await;
            }
            Progress::Stream(tx) => {
                let note = ServerNotification::ProgressNotification(Notification::new(param));
                let _ = tx
                    .send(ServerSseMessage::from_message(
                        ServerJsonRpcMessage::notification(note),
                    ))
                    .await;
            }
        }
    }
}

/// True when the client declared the `roots` capability (rmcp marks roots
/// deprecated by a later MCP revision; Qwen Code 0.24.4 uses them).
#[allow(deprecated)]
fn offers_roots(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.roots.is_some())
}

impl ServerState {
    /// `context.cwd` for a call of session `sid`: its first root when the
    /// client declared `roots`, else the host's workspace root. (rmcp marks
    /// roots deprecated by a later MCP revision; Qwen Code 0.24.4 uses them.)
    #[allow(deprecated)]
    async fn cwd(&self, peer: &Peer<RoleServer>, sid: Option<&str>) -> String {
        let fallback = self.host.workspace_root();
        if !offers_roots(peer) {
            return fallback;
        }
        if let Some(sid) = sid {
            if let Some(e) = self.sessions.lock().get(sid) {
                if let Some(cached) = &e.data.root {
                    return cached.clone().unwrap_or(fallback);
                }
            }
        }
        let root = match tokio::time::timeout(ROOTS_TIMEOUT, peer.list_roots()).await {
            Ok(Ok(r)) => r.roots.iter().find_map(|r| tools::uri_path(&r.uri)),
            Ok(Err(e)) => {
                self.logger
                    .warn(|| format!("roots/list failed: {e}; using the workspace root"));
                None
            }
            Err(_) => {
                self.logger.warn(|| {
                    "roots/list was not answered in time; using the workspace root".into()
                });
                None
            }
        };
        if let Some(sid) = sid {
            let mut map = self.sessions.lock();
            if let Some(e) = map.get_mut(sid) {
                e.data.root = Some(root.clone());
            }
        }
        root.unwrap_or(fallback)
    }

    /// A call of one of the editor's tools: the arguments checked, the
    /// editor asked through its capability, its answer checked and bounded.
    /// `None`: cancelled before the editor answered.
    async fn editor_call(
        &self,
        peer: &Peer<RoleServer>,
        sid: Option<&str>,
        tool: &'static editor::EditorTool,
        request: CallToolRequestParams,
        cancel: &CancellationToken,
    ) -> Option<CallToolResult> {
        if !self.host.offers(tool.capability) {
            return Some(tools::gone(tool.name));
        }
        let args = request.arguments.unwrap_or_default();
        let cwd = self.cwd(peer, sid).await;
        let params = match tool.params(&args, &cwd, crate::sys::platform::PATH_STYLE) {
            Ok(p) => p,
            Err(message) => return Some(editor::error(message)),
        };
        self.logger
            .debug(|| format!("tools/call {} → the IDE ({params})", tool.name));
        let answer = tokio::select! {
            a = self.host.ask(tool.capability, params.clone()) => a,
            _ = cancel.cancelled() => return None,
        };
        if let Err(m) = &answer {
            self.logger
                .info(|| format!("tools/call {}: {m}", tool.name));
        }
        Some(tool.result(&params, answer))
    }

    /// One `tools/call` of session `sid`, however it arrived (rmcp's handler
    /// or [`direct`]). `None`: cancelled before its end.
    async fn run_call(
        &self,
        peer: &Peer<RoleServer>,
        sid: Option<&str>,
        request: CallToolRequestParams,
        progress_token: Option<ProgressToken>,
        progress: Progress,
        cancel: &CancellationToken,
    ) -> Option<CallToolResult> {
        let listing = self.listing();
        let name = request.name.as_ref();
        if name == tools::STATUS_TOOL {
            return Some(tools::status(&self.host, &listing));
        }
        if let Some(tool) = editor::find(name) {
            return self.editor_call(peer, sid, tool, request, cancel).await;
        }
        let Some((plugin, tool)) = listing.lookup(name) else {
            return Some(tools::gone(name));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let cwd = self.cwd(peer, sid).await;
        let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE);
        let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).insert(call_id, (plugin.clone(), tx));
        let _slot = CallSlot(self, call_id);
        self.logger
            .debug(|| format!("tools/call {name} → {plugin}/{tool} (cwd {cwd})"));
        let call = self.host.call_tool_async(
            &plugin,
            &tool,
            args,
            CallOptions {
                cwd: Some(cwd.clone()),
                timeout: None,
            },
        );
        tokio::pin!(call);
        let mut count = 0u32;
        let outcome = loop {
            tokio::select! {
                r = &mut call => break Some(r),
                _ = cancel.cancelled() => break None,
                Some(event) = rx.recv() => {
                    let (Some(token), PluginEvent::UiPush { channel, payload, .. }) =
                        (&progress_token, &event) else { continue };
                    count += 1;
                    let mut message = format!("{channel}: {payload}");
                    if message.len() > 1000 {
                        let mut cut = 1000;
                        while !message.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        message.truncate(cut);
                        message.push('…');
                    }
                    let param = ProgressNotificationParam::new(token.clone(), count as f64)
                        .with_message(message);
                    progress.send(param).await;
                }
            }
        };
        match outcome {
            Some(Ok(out)) => Some(tools::output(&out, &cwd)),
            Some(Err(e)) => {
                self.logger.info(|| format!("tools/call {name}: {e}"));
                Some(tools::call_error(&e))
            }
            None => {
                self.logger
                    .info(|| format!("tools/call {name}: cancelled by the client"));
                None
            }
        }
    }
}

impl ServerHandler for PluginsMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        let listing = self.state.listing_logged(true);
        *lock(&self.state.last_listed) = ServerState::names(&listing);
        Ok(ListToolsResult::with_all_items(listing.rmcp_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let sid = session_id(&context.extensions).map(str::to_string);
        let token = context.meta.get_progress_token();
        let progress = Progress::Peer(context.peer.clone());
        match self
            .state
            .run_call(
                &context.peer,
                sid.as_deref(),
                request,
                token,
                progress,
                &context.ct,
            )
            .await
        {
            Some(result) => Ok(CallToolResponse::Complete(result)),
            None => Err(McpError::internal_error("the call was cancelled", None)),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(sid) = session_id(&context.extensions) else {
            return;
        };
        let mut map = self.state.sessions.lock();
        self.state.sessions.entry(&mut map, sid).data.peer = Some(context.peer.clone());
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        if let Some(sid) = session_id(&context.extensions) {
            self.state.forget_roots(sid);
        }
    }
}
