//! The IDE companion — an MCP server Qwen Code and Gemini CLI connect to,
//! the discovery files that let each find the server, the editor context
//! it receives and the diffs it asks the IDE to show.
//!
//! [`Companion`] is the Rust API; `crate::ffi` wraps it for C.

mod config;
pub mod context;
mod debounce;
pub mod discovery;
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

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result, Status};
use crate::events::{Answer, HostLink};
use crate::host::{LogFn, LogLevel, Logger, Slot};
use crate::loopback;
use crate::loopback::guard::{OriginPolicy, Policy};
use crate::runtime::{self, RuntimeRef};
use config::validate_roots;
pub use config::{Config, Settings};
use context::ContextState;
use hub::{Hub, Notification};

/// Host callback asked to show a diff: `(file_path, new_content)`; `Err(message)` refuses.
pub type OpenDiffFn = dyn Fn(&str, &str) -> std::result::Result<(), String> + Send + Sync;
/// Host callback asked to close a diff: returns the final buffer text (or `None`).
pub type CloseDiffFn = dyn Fn(&str) -> std::result::Result<Option<String>, String> + Send + Sync;

/// Most diffs kept open at once, and most bytes of proposed content they
/// hold; past either the oldest is closed (`ide/diffClosed`).
const MAX_OPEN_DIFFS: usize = 32;
const MAX_OPEN_DIFF_BYTES: usize = 256 * 1024 * 1024;

struct OpenDiff {
    id: u64,
    proposed: String,
    /// The CLI session that proposed it, when known.
    source: Option<DiffSource>,
}

/// The CLI session that proposed a diff: its MCP session id and the label
/// the user is shown (`CLI #n`, see [`hub::Hub::session_label`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DiffSource {
    pub id: String,
    pub label: String,
}

impl DiffSource {
    fn to_json(source: Option<&DiffSource>) -> Value {
        source.map_or(Value::Null, |s| json!({"id": s.id, "label": s.label}))
    }
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
    /// Where each CLI's discovery file goes, and the files written.
    dirs: discovery::Dirs,
    files: discovery::Written,
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
    OpenDiff {
        path: String,
        content: String,
        source: Option<DiffSource>,
    },
    CloseDiff {
        path: String,
    },
}

impl Inner {
    pub(crate) fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    pub(crate) fn diffs_open(
        &self,
        path: &str,
        proposed: String,
        source: Option<DiffSource>,
    ) -> u64 {
        let id = self.next_diff_id.fetch_add(1, Ordering::Relaxed);
        let evicted = lock(&self.diffs).insert(
            path,
            OpenDiff {
                id,
                proposed,
                source,
            },
        );
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
            HostRequest::OpenDiff {
                path,
                content,
                source,
            } => {
                let clients = self.hub().map_or(0, |h| h.active_sessions());
                json!({"type": "openDiff", "filePath": path, "newContent": content,
                    "session": DiffSource::to_json(source.as_ref()), "clients": clients})
            }
            HostRequest::CloseDiff { path } => json!({"type": "closeDiff", "filePath": path}),
        };
        let queued = match self.link.pull_request(event) {
            Some(pulled) => pulled,
            None => {
                let d = self.link.dispatcher();
                match request {
                    HostRequest::OpenDiff { path, content, .. } => {
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

    /// The label of CLI session `sid` (see [`hub::Hub::session_label`]).
    pub(crate) fn diff_source(&self, sid: &str) -> Option<DiffSource> {
        let label = self.hub()?.session_label(sid)?;
        Some(DiffSource {
            id: sid.to_string(),
            label,
        })
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

    /// In pull mode, delivers this object's log lines up to `max_level` as
    /// pulled `{"type":"log"}` events instead of a log callback (`None`: off;
    /// see [`crate::events::HostLink::enable_log_events`]).
    pub fn enable_log_events(&self, max_level: Option<LogLevel>) -> Result<()> {
        self.inner.link.enable_log_events(max_level)
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

    /// What the discovery files and terminal variables are made from.
    fn endpoint<'a>(settings: &'a Settings, port: u16, token: &'a str) -> discovery::Endpoint<'a> {
        discovery::Endpoint {
            port,
            token,
            roots: &settings.workspace_roots,
            pid: settings.ppid,
            ide_name: &settings.ide_name,
            ide_display_name: &settings.ide_display_name,
            ide_id: &settings.ide_id,
            style: PATH_STYLE,
        }
    }

    /// Logs the roots a served CLI cannot be told about.
    fn warn_unreachable_roots(&self, settings: &Settings, ep: &discovery::Endpoint<'_>) {
        for cli in settings.clis.iter() {
            let roots = ep.unreachable_roots(cli);
            if !roots.is_empty() {
                self.inner.logger.warn(|| {
                    format!(
                        "{} cannot be told about the workspace roots {roots:?}: they contain the path delimiter",
                        cli.key()
                    )
                });
            }
        }
    }

    /// Binds 127.0.0.1 on a free port, serves `/mcp` and writes the
    /// discovery file of every CLI served. On any failure nothing is left
    /// running and no discovery file is written.
    pub fn start(&self) -> Result<()> {
        let mut running = lock(&self.inner.running);
        if running.is_some() {
            return Err(Error::new(
                Status::AlreadyRunning,
                "the companion is already running",
            ));
        }
        let settings = self.inner.settings();
        let dirs =
            discovery::Dirs::resolve(settings.lock_dir.as_deref(), settings.gemini_dir.as_deref())?;
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
        let endpoint = Self::endpoint(&settings, port, &token);
        let files = match discovery::Written::write_all(settings.clis, &dirs, &endpoint) {
            Ok(f) => f,
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
        self.warn_unreachable_roots(&settings, &endpoint);
        self.inner.logger.info(|| {
            format!(
                "listening on 127.0.0.1:{port} for {}, discovery files {}",
                settings.clis.name(),
                files.to_json()
            )
        });
        *running = Some(Running {
            runtime: rt,
            port,
            token,
            dirs,
            files,
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
        // The discovery files go first: a client answered below must not
        // find them.
        let removed = r.files.remove_all();
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

    /// Qwen Code's lock file, or Gemini CLI's discovery file when only
    /// Gemini CLI is served.
    pub fn lock_file_path(&self) -> Result<PathBuf> {
        let running = lock(&self.inner.running);
        let r = running.as_ref().ok_or_else(Error::not_running)?;
        r.files
            .first()
            .map(PathBuf::from)
            .ok_or_else(|| Error::new(Status::Internal, "no discovery file was written"))
    }

    /// The discovery file of each CLI: `{"qwen": path | null, "gemini":
    /// path | null}` (null for a CLI not served).
    pub fn discovery_files(&self) -> Result<Value> {
        lock(&self.inner.running)
            .as_ref()
            .map(|r| r.files.to_json())
            .ok_or_else(Error::not_running)
    }

    /// The CLIs served (the `cli` option).
    pub fn clis(&self) -> discovery::Clis {
        self.inner.settings().clis
    }

    /// The bearer token clients must present (also in the lock file).
    pub fn auth_token(&self) -> Result<String> {
        lock(&self.inner.running)
            .as_ref()
            .map(|r| r.token.clone())
            .ok_or_else(Error::not_running)
    }

    /// Number of clients currently able to receive notifications.
    /// The diffs open now, oldest first, with the CLI session that proposed
    /// each: `{"clients": n, "diffs": [{"filePath", "session": {"id",
    /// "label"} | null}]}`. `clients` is [`Companion::connected_clients`];
    /// editors name the session on a diff only when it is above 1.
    pub fn open_diffs(&self) -> Value {
        let mut diffs: Vec<(u64, Value)> = lock(&self.inner.diffs)
            .by_path
            .iter()
            .map(|(path, d)| {
                (
                    d.id,
                    json!({"filePath": path, "session": DiffSource::to_json(d.source.as_ref())}),
                )
            })
            .collect();
        diffs.sort_by_key(|(id, _)| *id);
        json!({
            "clients": self.connected_clients(),
            "diffs": diffs.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        })
    }

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

    /// Variables the host must set in its integrated terminals: those of
    /// every CLI served.
    pub fn terminal_env(&self) -> Result<Value> {
        let (port, token) = {
            let running = lock(&self.inner.running);
            let r = running.as_ref().ok_or_else(Error::not_running)?;
            (r.port, r.token.clone())
        };
        let settings = self.inner.settings();
        Ok(Self::endpoint(&settings, port, &token).terminal_env(settings.clis))
    }

    /// Replaces the workspace roots; rewrites the lock file when running.
    pub fn set_workspace_roots(&self, roots: Vec<String>) -> Result<()> {
        validate_roots(&roots)?;
        lock(&self.inner.settings).workspace_roots = roots;
        let running = lock(&self.inner.running);
        if let Some(r) = running.as_ref() {
            let settings = self.inner.settings();
            let endpoint = Self::endpoint(&settings, r.port, &r.token);
            r.files.rewrite(&r.dirs, &endpoint)?;
            self.warn_unreachable_roots(&settings, &endpoint);
            self.inner
                .logger
                .info(|| "workspace roots changed, discovery files rewritten".into());
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
