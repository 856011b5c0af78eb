//! The IDE companion — an MCP server Qwen Code connects to, the lock
//! file that lets it find the server, the editor context it receives and the
//! diffs it asks the IDE to show.
//!
//! [`Companion`] is the Rust API; `crate::ffi` wraps it for C.

pub mod context;
mod debounce;
pub mod hub;
pub mod lockfile;
pub mod server;

use crate::shared::sync::lock;
use crate::sys::platform::PATH_STYLE;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result, Status};
use crate::events::{Answer, HostLink};
use crate::host::{LogFn, LogLevel, Logger, Slot};
use crate::loopback::guard::{OriginPolicy, Policy};
use crate::loopback::sessions::Lifecycle;
use crate::loopback::{self, Limits};
use crate::runtime::{self, RuntimeRef};
use context::ContextState;
use hub::{Hub, Notification};

/// Host callback asked to show a diff: `(file_path, new_content)`; `Err(message)` refuses.
pub type OpenDiffFn = dyn Fn(&str, &str) -> std::result::Result<(), String> + Send + Sync;
/// Host callback asked to close a diff: returns the final buffer text (or `None`).
pub type CloseDiffFn = dyn Fn(&str) -> std::result::Result<Option<String>, String> + Send + Sync;

const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Most diffs kept open at once, and most bytes of proposed content they
/// hold; past either the oldest is closed (`ide/diffClosed`).
const MAX_OPEN_DIFFS: usize = 32;
const MAX_OPEN_DIFF_BYTES: usize = 256 * 1024 * 1024;

/// Companion configuration (the JSON object given to `qc_companion_new`).
/// Unknown keys are refused (by the embedded [`loopback::ServerConfig`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Absolute workspace root folders.
    #[serde(default)]
    pub workspace_roots: Vec<String>,
    /// Human-readable IDE name (`ideName`, `ideInfo.displayName`).
    #[serde(default)]
    pub ide_name: Option<String>,
    /// Display name for `ideInfo.displayName` (defaults to `ideName`).
    #[serde(default)]
    pub ide_display_name: Option<String>,
    /// Identifier for `ideInfo.name` (defaults to a slug of `ideName`).
    #[serde(default)]
    pub ide_id: Option<String>,
    /// Directory for lock files (default `$QWEN_HOME/ide` or `~/.qwen/ide`).
    #[serde(default)]
    pub lock_dir: Option<PathBuf>,
    /// `ppid` written to the lock file; defaults to this process's pid, which
    /// lives exactly as long as the IDE hosting the library.
    #[serde(default)]
    pub ppid: Option<u32>,
    /// Initial workspace trust.
    #[serde(default = "default_true")]
    pub trusted: bool,
    /// Trailing debounce of context updates in milliseconds (default 50).
    #[serde(default)]
    pub debounce_ms: Option<u64>,
    /// Longest a context update may be held back by continuous events (default 200).
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    /// How long openDiff/closeDiff wait for the host's answer, in milliseconds
    /// (default 30000; 100 ..= 600000). After it the CLI gets an error.
    #[serde(default)]
    pub request_timeout_ms: Option<u64>,
    /// A client whose stream has not taken a notification for this long is
    /// dropped like an abandoned session, in milliseconds (default 30000;
    /// 100 ..= 600000).
    #[serde(default)]
    pub stalled_client_ms: Option<u64>,
    /// The settings every loopback server shares (`maxBodyBytes`, default
    /// 64 MiB; `keepAliveMs`; `http`; `sessionGraceMs`; `maxSessions`).
    #[serde(flatten)]
    pub server: loopback::ServerConfig,
}

fn default_true() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workspace_roots: Vec::new(),
            ide_name: None,
            ide_display_name: None,
            ide_id: None,
            lock_dir: None,
            ppid: None,
            trusted: true,
            debounce_ms: None,
            max_wait_ms: None,
            request_timeout_ms: None,
            server: loopback::ServerConfig::default(),
            stalled_client_ms: None,
        }
    }
}

impl loopback::config::EmbedsServerConfig for Config {
    fn server_config(&self) -> &loopback::ServerConfig {
        &self.server
    }
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        loopback::config::parse(json, "companion")
    }
}

/// Validated settings derived from [`Config`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub workspace_roots: Vec<String>,
    pub ide_name: String,
    pub ide_display_name: String,
    pub ide_id: String,
    pub lock_dir: Option<PathBuf>,
    pub ppid: u32,
    pub debounce: Duration,
    pub max_wait: Duration,
    pub max_body_bytes: usize,
    pub keep_alive: Duration,
    pub request_timeout: Duration,
    pub limits: Limits,
    pub lifecycle: Lifecycle,
    pub stalled_client: Duration,
}

fn validate_roots(roots: &[String]) -> Result<()> {
    for r in roots {
        if !PATH_STYLE.is_absolute(r) {
            return Err(Error::invalid_argument(format!(
                "workspace root {r:?} is not an absolute path"
            )));
        }
        if r.contains('\0') {
            return Err(Error::invalid_argument("workspace root contains NUL"));
        }
    }
    Ok(())
}

fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .filter_map(|c| {
            if c.is_ascii_alphanumeric() {
                Some(c.to_ascii_lowercase())
            } else if c == ' ' || c == '-' || c == '_' {
                Some('-')
            } else {
                None
            }
        })
        .collect();
    if s.is_empty() {
        "qwen-companion".into()
    } else {
        s
    }
}

impl Settings {
    fn from_config(c: Config) -> Result<Settings> {
        validate_roots(&c.workspace_roots)?;
        let ide_name = c
            .ide_name
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "Qwen Companion".to_string());
        let ide_display_name = c
            .ide_display_name
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| ide_name.clone());
        let ide_id = c
            .ide_id
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| slug(&ide_name));
        let debounce = Duration::from_millis(c.debounce_ms.unwrap_or(50));
        let max_wait = Duration::from_millis(c.max_wait_ms.unwrap_or(200));
        if debounce > Duration::from_secs(10) || max_wait > Duration::from_secs(60) {
            return Err(Error::invalid_argument(
                "debounceMs must be <= 10000 and maxWaitMs <= 60000",
            ));
        }
        let server = c.server.settings(DEFAULT_MAX_BODY_BYTES)?;
        let request_timeout = Duration::from_millis(c.request_timeout_ms.unwrap_or(30_000));
        if request_timeout < Duration::from_millis(100)
            || request_timeout > Duration::from_secs(600)
        {
            return Err(Error::invalid_argument(
                "requestTimeoutMs must be between 100 and 600000",
            ));
        }
        let stalled_client = Duration::from_millis(c.stalled_client_ms.unwrap_or(30_000));
        if stalled_client < Duration::from_millis(100) || stalled_client > Duration::from_secs(600)
        {
            return Err(Error::invalid_argument(
                "stalledClientMs must be between 100 and 600000",
            ));
        }
        Ok(Settings {
            stalled_client,
            limits: server.limits,
            lifecycle: server.lifecycle,
            keep_alive: server.keep_alive,
            request_timeout,
            workspace_roots: c.workspace_roots,
            ide_name,
            ide_display_name,
            ide_id,
            lock_dir: c.lock_dir,
            ppid: c.ppid.unwrap_or_else(crate::sys::process::current_pid),
            debounce,
            max_wait: max_wait.max(debounce),
            max_body_bytes: server.max_body_bytes,
        })
    }
}

struct OpenDiff {
    id: u64,
    proposed: String,
}

/// The open diffs by path, bounded in count and bytes.
#[derive(Default)]
struct OpenDiffs {
    by_path: HashMap<String, OpenDiff>,
    bytes: usize,
}

impl OpenDiffs {
    /// Adds a diff; returns the paths closed to stay within the bounds.
    fn insert(&mut self, path: &str, diff: OpenDiff) -> Vec<String> {
        if let Some(old) = self.by_path.remove(path) {
            self.bytes -= old.proposed.len();
        }
        let mut evicted = Vec::new();
        while !self.by_path.is_empty()
            && (self.by_path.len() >= MAX_OPEN_DIFFS
                || self.bytes + diff.proposed.len() > MAX_OPEN_DIFF_BYTES)
        {
            let oldest = self
                .by_path
                .iter()
                .min_by_key(|(_, d)| d.id)
                .map(|(p, _)| p.clone())
                .expect("not empty");
            self.remove(&oldest);
            evicted.push(oldest);
        }
        self.bytes += diff.proposed.len();
        self.by_path.insert(path.to_string(), diff);
        evicted
    }
    fn remove(&mut self, path: &str) -> Option<OpenDiff> {
        let d = self.by_path.remove(path)?;
        self.bytes -= d.proposed.len();
        Some(d)
    }
    fn get(&self, path: &str) -> Option<&OpenDiff> {
        self.by_path.get(path)
    }
    fn clear(&mut self) {
        self.by_path.clear();
        self.bytes = 0;
    }
}

/// What exists only while the server runs.
struct Running {
    runtime: Arc<RuntimeRef>,
    port: u16,
    token: String,
    lock_path: PathBuf,
    lock_dir: PathBuf,
    cancel: CancellationToken,
    /// Cancelled first on stop: questions still waiting for the host are
    /// answered with an error, so no CLI request is left without a reply.
    requests: CancellationToken,
    hub: Arc<Hub>,
    server: loopback::Server,
    sessions: Arc<SessionManagerImpl>,
}

/// Shared state of one companion.
pub struct Inner {
    pub(crate) logger: Arc<Logger>,
    /// The callback thread and pull mode.
    link: HostLink,
    pub(crate) open_diff_cb: Slot<OpenDiffFn>,
    pub(crate) close_diff_cb: Slot<CloseDiffFn>,
    settings: Mutex<Settings>,
    context: Mutex<ContextState>,
    diffs: Mutex<OpenDiffs>,
    next_diff_id: AtomicU64,
    running: Mutex<Option<Running>>,
    /// The running companion's debouncer (None when stopped).
    debouncer: Mutex<Option<Arc<debounce::Debouncer>>>,
}

/// A question for the host (answered by a callback or through the event queue).
pub(crate) enum HostRequest {
    OpenDiff { path: String, content: String },
    CloseDiff { path: String },
}

impl Inner {
    pub(crate) fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    pub(crate) fn diffs_open(&self, path: &str, proposed: String) -> u64 {
        let id = self.next_diff_id.fetch_add(1, Ordering::Relaxed);
        let evicted = lock(&self.diffs).insert(path, OpenDiff { id, proposed });
        if !evicted.is_empty() {
            let hub = self.hub();
            for p in evicted {
                self.logger
                    .warn(|| format!("too many open diffs: closing the oldest one, for {p}"));
                if let Some(hub) = &hub {
                    hub.broadcast(Notification::new(
                        "ide/diffClosed",
                        json!({"filePath": p, "content": null}),
                    ));
                }
            }
        }
        id
    }

    pub(crate) fn diffs_forget(&self, path: &str, id: u64) {
        let mut diffs = lock(&self.diffs);
        if diffs.get(path).is_some_and(|d| d.id == id) {
            diffs.remove(path);
        }
    }

    pub(crate) fn diffs_take(&self, path: &str) -> Option<String> {
        lock(&self.diffs).remove(path).map(|d| d.proposed)
    }

    /// The context as clients get it, with the state version it shows.
    fn normalized_context(&self) -> (u64, Value) {
        let state = lock(&self.context).clone();
        (state.version, state.normalized(context::is_real_file))
    }

    /// Asks the host: through the event queue when the host pulls events,
    /// else through its callback on the callback thread. `None` when the host
    /// has neither for this request.
    pub(crate) async fn ask_host(&self, request: HostRequest) -> Option<Answer> {
        let event = match &request {
            HostRequest::OpenDiff { path, content } => {
                json!({"type": "openDiff", "filePath": path, "newContent": content})
            }
            HostRequest::CloseDiff { path } => json!({"type": "closeDiff", "filePath": path}),
        };
        let queued = match self.link.pull_request(event) {
            Some(pulled) => pulled,
            None => {
                let d = self.link.dispatcher();
                match request {
                    HostRequest::OpenDiff { path, content } => {
                        let cb = self.open_diff_cb.get()?;
                        d.call(move || cb(&path, &content).map(|()| None))
                    }
                    HostRequest::CloseDiff { path } => {
                        let cb = self.close_diff_cb.get()?;
                        d.call(move || cb(&path))
                    }
                }
                .ok_or_else(|| "the IDE is not taking its callbacks".to_string())
            }
        };
        let answer = match queued {
            Ok(rx) => rx,
            Err(message) => return Some(Err(message)),
        };
        let timeout = lock(&self.settings).request_timeout;
        let stopping = lock(&self.running)
            .as_ref()
            .map(|r| r.requests.clone())
            .unwrap_or_default();
        Some(tokio::select! {
            a = tokio::time::timeout(timeout, answer) => match a {
                Ok(Ok(a)) => a,
                Ok(Err(_)) => Err("the companion is shutting down".to_string()),
                Err(_) => Err(format!("the IDE did not answer within {} ms", timeout.as_millis())),
            },
            _ = stopping.cancelled() => Err("the IDE companion is stopping".to_string()),
        })
    }

    /// Sends the current context to every connected client (if it changed).
    fn publish_context(&self) {
        let (version, value) = self.normalized_context();
        if let Some(hub) = self.hub() {
            if hub.publish_context(version, value) {
                self.logger.debug(|| "context update sent".into());
            }
        }
    }

    fn hub(&self) -> Option<Arc<Hub>> {
        lock(&self.running).as_ref().map(|r| r.hub.clone())
    }
}

/// An IDE companion: one per IDE window.
pub struct Companion {
    inner: Arc<Inner>,
}

impl Companion {
    pub fn new(config: Config) -> Result<Companion> {
        let trusted = config.trusted;
        let settings = Settings::from_config(config)?;
        let link = HostLink::new()?;
        Ok(Companion {
            inner: Arc::new(Inner {
                logger: link.logger().clone(),
                link,
                open_diff_cb: Slot::default(),
                close_diff_cb: Slot::default(),
                settings: Mutex::new(settings),
                context: Mutex::new(ContextState::new(trusted)),
                diffs: Mutex::new(OpenDiffs::default()),
                next_diff_id: AtomicU64::new(1),
                running: Mutex::new(None),
                debouncer: Mutex::new(None),
            }),
        })
    }

    pub fn set_log_callback(&self, sink: Option<(LogFn, LogLevel)>) {
        self.inner.logger.set(sink);
    }
    pub fn set_open_diff_callback(&self, cb: Option<Arc<OpenDiffFn>>) {
        self.inner.open_diff_cb.set(cb);
    }
    pub fn set_close_diff_callback(&self, cb: Option<Arc<CloseDiffFn>>) {
        self.inner.close_diff_cb.set(cb);
    }

    /// Switches to pull mode: openDiff/closeDiff requests are queued as JSON
    /// events instead of calling the callbacks. Returns the fd that is
    /// readable while events wait (the same fd on every call).
    pub fn enable_event_queue(&self) -> Result<crate::sys::event::RawEventHandle> {
        self.inner.link.enable_pull()
    }

    /// The next pulled event (`None` when none waits). Requests carry an
    /// `"id"` to answer with [`Companion::respond`].
    pub fn poll_event(&self) -> Result<Option<Value>> {
        self.inner.link.next_event()
    }

    /// Answers a pulled request: `Ok(text)` (openDiff: shown; closeDiff: the
    /// final text or `None`) or `Err(message)` to refuse.
    pub fn respond(&self, id: u64, answer: Answer) -> Result<()> {
        self.inner.link.respond(id, answer)
    }

    /// The callback queue's counters (see [`HostLink::stats`]).
    pub fn callback_stats(&self) -> Value {
        self.inner.link.stats()
    }

    /// True when called on this companion's callback thread.
    pub fn on_callback_thread(&self) -> bool {
        self.inner.link.on_callback_thread()
    }

    fn lock_contents(settings: &Settings, port: u16, token: &str) -> Value {
        json!({
            "port": port,
            "workspacePath": lockfile::workspace_path_value(&settings.workspace_roots, PATH_STYLE),
            "authToken": token,
            "ppid": settings.ppid,
            "ideName": settings.ide_name,
            "ideInfo": {"name": settings.ide_id, "displayName": settings.ide_display_name},
        })
    }

    /// Binds 127.0.0.1 on a free port, serves `/mcp` and writes the lock file.
    /// On any failure nothing is left running and no lock file is written.
    pub fn start(&self) -> Result<()> {
        let mut running = lock(&self.inner.running);
        if running.is_some() {
            return Err(Error::new(
                Status::AlreadyRunning,
                "the companion is already running",
            ));
        }
        let settings = self.inner.settings();
        let lock_dir = lockfile::lock_dir(settings.lock_dir.as_deref())?;
        let token = crate::shared::rand::random_hex(32)?;
        let (std_listener, port) = loopback::bind_loopback()?;
        // The debounce thread first: it is the last fallible step that needs
        // no cleanup of a running server.
        let weak = Arc::downgrade(&self.inner);
        let debouncer = Arc::new(
            debounce::Debouncer::start(settings.debounce, settings.max_wait, move || {
                if let Some(inner) = weak.upgrade() {
                    inner.publish_context();
                }
            })
            .map_err(|e| Error::io("cannot start the debounce thread", e))?,
        );
        let rt = match runtime::acquire() {
            Ok(rt) => rt,
            Err(e) => {
                debouncer.stop();
                return Err(e);
            }
        };
        let handle = rt.handle().clone();
        let _enter = handle.enter();

        // The first snapshot is made here, on the host's thread; later ones
        // on the debounce thread. The hub never makes one itself.
        let refresher = Arc::downgrade(&debouncer);
        let mut hub = Hub::new(
            self.inner.normalized_context(),
            Box::new(move || {
                if let Some(d) = refresher.upgrade() {
                    d.emit_now();
                }
            }),
            {
                let inner = Arc::downgrade(&self.inner);
                Box::new(move || {
                    inner
                        .upgrade()
                        .map(|i| lock(&i.context).version)
                        .unwrap_or(0)
                })
            },
            settings.lifecycle,
            self.inner.logger.clone(),
            handle.clone(),
        );
        hub.set_stuck_after(settings.stalled_client);
        let hub = Arc::new(hub);
        let cancel = CancellationToken::new();
        let mut session_manager = SessionManagerImpl::default();
        // Our reaper closes sessions (rmcp's own inactivity timer would cut
        // a healthy stream-less CLI between two tool calls).
        session_manager.0.session_config.keep_alive = None;
        let session_manager = Arc::new(session_manager);
        let state = Arc::new(server::ServerState {
            inner: self.inner.clone(),
            hub: hub.clone(),
            policy: Policy {
                token: token.clone(),
                port,
                origin: OriginPolicy::RefuseAll,
                max_body_bytes: settings.max_body_bytes,
            },
        });
        let app = server::router(
            state,
            session_manager.clone(),
            cancel.child_token(),
            settings.keep_alive,
        );
        let server = match loopback::serve(
            std_listener,
            app,
            settings.limits,
            self.inner.logger.clone(),
        ) {
            Ok(s) => s,
            Err(e) => {
                debouncer.stop();
                return Err(e);
            }
        };
        let lock_path = match lockfile::write_lock(
            &lock_dir,
            port,
            &Self::lock_contents(&settings, port, &token),
        ) {
            Ok(p) => p,
            Err(e) => {
                cancel.cancel();
                server.abort();
                debouncer.stop();
                return Err(e);
            }
        };
        *lock(&self.inner.debouncer) = Some(debouncer);
        handle.spawn(loopback::sessions::reap_loop(
            hub.sessions().clone(),
            session_manager.clone(),
            cancel.clone(),
            self.inner.logger.clone(),
            hub::session_dead,
            |_, _| {},
        ));
        self.inner.logger.info(|| {
            format!(
                "listening on 127.0.0.1:{port}, lock file {}",
                lock_path.display()
            )
        });
        *running = Some(Running {
            runtime: rt,
            port,
            token,
            lock_path,
            lock_dir,
            requests: CancellationToken::new(),
            cancel,
            hub,
            server,
            sessions: session_manager,
        });
        Ok(())
    }

    /// Stops the server, closes every session and removes the lock file.
    pub fn stop(&self) -> Result<()> {
        let Some(r) = lock(&self.inner.running).take() else {
            return Err(Error::not_running());
        };
        // The lock file goes first: a client answered below must not find it.
        let removed = lockfile::remove_lock(&r.lock_path);
        r.requests.cancel();
        let debouncer = lock(&self.inner.debouncer).take();
        if let Some(d) = debouncer {
            d.stop();
        }
        let on_runtime = !crate::runtime::may_block();
        if !on_runtime {
            // Let calls in progress send their (error) replies to the end
            // first: the cancelled ones answer at once.
            let server = &r.server;
            r.runtime
                .handle()
                .block_on(server.settle(Duration::from_secs(1)));
        }
        r.cancel.cancel();
        r.hub.clear();
        lock(&self.inner.diffs).clear();
        if !on_runtime {
            let server = r.server;
            let sessions = r.sessions.clone();
            r.runtime.handle().block_on(async move {
                loopback::sessions::close_all(&sessions).await;
                server.shutdown(Duration::from_secs(2)).await;
            });
        } else {
            r.server.abort();
        }
        self.inner
            .logger
            .info(|| format!("stopped (port {})", r.port));
        drop(r.runtime);
        removed
    }

    pub fn is_running(&self) -> bool {
        lock(&self.inner.running).is_some()
    }

    pub fn port(&self) -> Result<u16> {
        lock(&self.inner.running)
            .as_ref()
            .map(|r| r.port)
            .ok_or_else(Error::not_running)
    }

    pub fn lock_file_path(&self) -> Result<PathBuf> {
        lock(&self.inner.running)
            .as_ref()
            .map(|r| r.lock_path.clone())
            .ok_or_else(Error::not_running)
    }

    /// The bearer token clients must present (also in the lock file).
    pub fn auth_token(&self) -> Result<String> {
        lock(&self.inner.running)
            .as_ref()
            .map(|r| r.token.clone())
            .ok_or_else(Error::not_running)
    }

    /// Number of clients currently able to receive notifications.
    pub fn connected_clients(&self) -> usize {
        self.inner.hub().map(|h| h.active_sessions()).unwrap_or(0)
    }

    /// Counters of the running server: MCP sessions known to the companion
    /// and to rmcp, and the HTTP connection counters.
    pub fn server_stats(&self) -> Result<Value> {
        let (hub, sessions, conns, rt) = {
            let running = lock(&self.inner.running);
            let r = running.as_ref().ok_or_else(Error::not_running)?;
            (
                r.hub.clone(),
                r.sessions.clone(),
                r.server.stats(),
                r.runtime.handle().clone(),
            )
        };
        let rmcp_sessions = if !crate::runtime::may_block() {
            sessions.0.sessions.try_read().map(|m| m.len()).unwrap_or(0)
        } else {
            rt.block_on(sessions.count())
        };
        Ok(json!({
            "sessions": hub.session_count(),
            "activeSessions": hub.active_sessions(),
            "rmcpSessions": rmcp_sessions,
            "connections": conns,
        }))
    }

    /// Variables the host must set in its integrated terminals.
    pub fn terminal_env(&self) -> Result<Value> {
        let port = self.port()?;
        let settings = self.inner.settings();
        Ok(json!({
            "QWEN_CODE_IDE_SERVER_PORT": port.to_string(),
            "QWEN_CODE_IDE_WORKSPACE_PATH": lockfile::workspace_path_value(&settings.workspace_roots, PATH_STYLE),
        }))
    }

    /// Replaces the workspace roots; rewrites the lock file when running.
    pub fn set_workspace_roots(&self, roots: Vec<String>) -> Result<()> {
        validate_roots(&roots)?;
        lock(&self.inner.settings).workspace_roots = roots;
        let running = lock(&self.inner.running);
        if let Some(r) = running.as_ref() {
            let settings = self.inner.settings();
            lockfile::write_lock(
                &r.lock_dir,
                r.port,
                &Self::lock_contents(&settings, r.port, &r.token),
            )?;
            self.inner
                .logger
                .info(|| "workspace roots changed, lock file rewritten".into());
        }
        Ok(())
    }

    fn update_context(&self, f: impl FnOnce(&mut ContextState) -> Result<()>) -> Result<()> {
        {
            let mut state = lock(&self.inner.context);
            f(&mut state)?;
            state.version += 1;
        }
        let debouncer = lock(&self.inner.debouncer).clone();
        if let Some(d) = debouncer {
            d.notify();
        }
        Ok(())
    }

    pub fn file_opened(&self, path: &str) -> Result<()> {
        self.update_context(|c| {
            c.opened(path);
            Ok(())
        })
    }
    pub fn file_focused(&self, path: &str) -> Result<()> {
        self.update_context(|c| {
            c.focused(path);
            Ok(())
        })
    }
    pub fn file_closed(&self, path: &str) -> Result<()> {
        self.update_context(|c| {
            c.closed(path);
            Ok(())
        })
    }
    pub fn file_renamed(&self, old: &str, new: &str) -> Result<()> {
        self.update_context(|c| {
            c.renamed(old, new);
            Ok(())
        })
    }
    pub fn set_cursor(&self, path: Option<&str>, line: u32, character: u32) -> Result<()> {
        self.update_context(|c| c.set_cursor(path, line, character))
    }
    pub fn set_selection(&self, path: Option<&str>, text: Option<&str>) -> Result<()> {
        self.update_context(|c| c.set_selection(path, text))
    }
    pub fn set_trusted(&self, trusted: bool) -> Result<()> {
        self.update_context(|c| {
            c.set_trusted(trusted);
            Ok(())
        })
    }
    pub fn set_context_json(&self, json: &str) -> Result<()> {
        self.update_context(|c| c.replace_from_json(json))
    }

    /// The normalised context, as it is (or will be) sent to clients.
    pub fn context(&self) -> Value {
        self.inner.normalized_context().1
    }

    fn finish_diff(&self, path: &str, method: &'static str, params: Value) -> Result<()> {
        let hub = self.inner.hub().ok_or_else(Error::not_running)?;
        if self.inner.diffs_take(path).is_none() {
            return Err(Error::new(
                Status::NotFound,
                format!("no open diff for {path:?}"),
            ));
        }
        hub.broadcast(Notification::new(method, params));
        self.inner.logger.info(|| format!("{method} for {path}"));
        Ok(())
    }

    /// The user accepted the diff; `content` is the final text (`None` = as proposed).
    pub fn diff_accept(&self, path: &str, content: Option<&str>) -> Result<()> {
        if !self.is_running() {
            return Err(Error::not_running());
        }
        let content = match content {
            Some(c) => c.to_string(),
            None => lock(&self.inner.diffs)
                .get(path)
                .map(|d| d.proposed.clone())
                .ok_or_else(|| {
                    Error::new(Status::NotFound, format!("no open diff for {path:?}"))
                })?,
        };
        self.finish_diff(
            path,
            "ide/diffAccepted",
            json!({"filePath": path, "content": content}),
        )
    }

    /// The user rejected the diff.
    pub fn diff_reject(&self, path: &str) -> Result<()> {
        self.finish_diff(path, "ide/diffRejected", json!({"filePath": path}))
    }

    /// The user closed the diff view without deciding (the CLI treats it as rejected).
    pub fn diff_closed(&self, path: &str) -> Result<()> {
        self.finish_diff(path, "ide/diffClosed", json!({"filePath": path}))
    }
}

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.stop();
        self.inner.open_diff_cb.set(None);
        self.inner.close_diff_cb.set(None);
        self.inner.logger.set(None);
        self.inner.link.shutdown();
    }
}

type SessionManagerImpl = crate::loopback::resume::McpSessions;
