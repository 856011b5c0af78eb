//! The plugin host: runs installed plugins' Node children on demand, calls
//! their tools (`call_tool`), answers their `host_request`s with the
//! embedding host's capabilities, forwards their `ui_push`es, and keeps a
//! misbehaving plugin from hurting anything but its own calls.
//!
//! [`PluginHost`] is the Rust API (sync entry points plus `_async` twins;
//! `Send + Sync`); events reach the embedding host through one sink closure
//! ([`PluginHost::set_event_sink`]), never called while a library lock is
//! held.
//!
//! ## Protocol (plugin format of the desktop app)
//! host → plugin `{type:"call_tool", requestId, toolName, params,
//! context:{cwd, config?}}`; plugin → host `tool_result {requestId, content
//! (array), details?}` / `tool_error {requestId, message}`; plugin → host
//! `host_request {requestId, capability, params}` answered with
//! `host_response {requestId, result}` / `host_error {requestId, message}`;
//! plugin → host `ui_push {channel, payload}`.
//!
//! ## Decisions
//! - Lazy start: a plugin runs from its first call (or `startup_finished()`
//!   for `onStartupFinished`). A start is done when Node's event loop answers
//!   a `NODE_HANDLE` probe (Node itself answers `NODE_HANDLE_NACK` to one
//!   without an fd), within `startTimeoutMs`.
//! - Timeout: the call fails `timeout`, then the same probe tells a plugin
//!   that is merely slow (kept) from one whose event loop is stuck (killed
//!   with its descendants; the next call starts a fresh one).
//! - Crash-loop breaker: `crashLoopMaxExits` (3) unexpected exits within
//!   `crashLoopWindowMs` (60 s) disable the plugin in memory: calls are
//!   refused as `disabled` without a spawn until [`PluginHost::enable`]. Not
//!   persisted on purpose: the user's own enabled flag stays the user's; an
//!   IDE restart gives the plugin a fresh chance.
//! - Exits we cause (unload, kill after a timeout or an oversized message)
//!   are `expected` and never count as crashes.
//! - Restarts: a plugin is started again by its next call. A background
//!   plugin (`onStartupFinished`, after `startup_finished()`) that exits
//!   unexpectedly is also restarted on its own after `restartBackoffMs`
//!   (1 s), doubled per recent crash (at most 60 s), until the breaker
//!   disables it.
//! - State: enabled flags and configuration values are read from the store
//!   at creation and on [`PluginHost::reload`]; changes made through the
//!   host are written to the store and seen at once. Call `reload()` after
//!   installing, updating or uninstalling (or any change made elsewhere).

mod calls;
mod capability;
mod instance;
mod store;

pub(crate) use crate::shared::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result, Status};
use crate::host::{LogFn, LogLevel, Slot};
use crate::plugins::ipc::DEFAULT_MAX_MESSAGE_BYTES;
use crate::plugins::manifest::Manifest;
use crate::plugins::process::{ExitInfo, Spawner};
use crate::runtime::{self, RuntimeRef};
use crate::sys::fs::{FileId, FileVersion};

pub use calls::{CallOptions, ParsedDocument, ToolOutput};
pub use capability::{CapabilityFn, HostAnswer, HostRequest};
use instance::Instance;
pub use store::DirStore;

/// Plugin host configuration (a JSON object; every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Default `<qwen_home>/companion/plugins`.
    #[serde(default)]
    pub plugins_dir: Option<PathBuf>,
    /// The node binary: a path or a name looked up in PATH (default `node`).
    #[serde(default)]
    pub node: Option<String>,
    /// The `node` binary is an Electron runtime (`ELECTRON_RUN_AS_NODE=1`).
    #[serde(default)]
    pub node_is_electron: bool,
    /// Default per-call timeout (30000; 50 ..= 3600000).
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// Largest message from a plugin in bytes (16 MiB; at least 1024).
    #[serde(default)]
    pub max_message_bytes: Option<usize>,
    /// Longest a start may take until Node's event loop answers (10000).
    #[serde(default)]
    pub start_timeout_ms: Option<u64>,
    /// Grace after closing the channel, and after SIGTERM (2000).
    #[serde(default)]
    pub kill_grace_ms: Option<u64>,
    /// Liveness probe after a timeout (1000).
    #[serde(default)]
    pub probe_timeout_ms: Option<u64>,
    /// How long a host_request waits for the embedding host (30000).
    #[serde(default)]
    pub host_request_timeout_ms: Option<u64>,
    /// `context.cwd` of calls that give none (default: empty string).
    #[serde(default)]
    pub workspace_root: Option<String>,
    /// Unexpected exits that disable a plugin (3; 0 = never).
    #[serde(default)]
    pub crash_loop_max_exits: Option<u32>,
    /// Window of the crash-loop breaker (60000).
    #[serde(default)]
    pub crash_loop_window_ms: Option<u64>,
    /// First delay before a background (`onStartupFinished`) plugin that
    /// exited unexpectedly is started again, doubled per recent crash
    /// (1000; 0 = only the next call starts it).
    #[serde(default)]
    pub restart_backoff_ms: Option<u64>,
    /// How long a call polls for the plugin's reply before its task sleeps,
    /// in microseconds (200; 0 ..= 10000; 0 = never poll). See
    /// `calls::await_reply`.
    #[serde(default)]
    pub reply_poll_us: Option<u64>,
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        match json.map(str::trim) {
            None | Some("") => Ok(Config::default()),
            Some(s) => serde_json::from_str(s)
                .map_err(|e| Error::invalid_json(format!("invalid plugin host config: {e}"))),
        }
    }
}

/// Validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub plugins_dir: PathBuf,
    pub node: String,
    pub electron: bool,
    pub call_timeout: Duration,
    pub max_message_bytes: usize,
    pub start_timeout: Duration,
    pub kill_grace: Duration,
    pub probe_timeout: Duration,
    pub host_request_timeout: Duration,
    pub workspace_root: String,
    pub crash_max: u32,
    pub crash_window: Duration,
    pub restart_backoff: Duration,
    pub reply_poll: Duration,
}

fn ms(v: Option<u64>, default: u64, min: u64, max: u64, name: &str) -> Result<Duration> {
    let v = v.unwrap_or(default);
    if v < min || v > max {
        return Err(Error::invalid_argument(format!(
            "{name} must be between {min} and {max}"
        )));
    }
    Ok(Duration::from_millis(v))
}

impl Settings {
    fn from_config(c: Config) -> Result<Settings> {
        let plugins_dir = match c.plugins_dir {
            Some(d) => crate::shared::fs::absolute(&d),
            None => crate::shared::fs::qwen_home()?
                .join("companion")
                .join("plugins"),
        };
        let node = c
            .node
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "node".into());
        if node.contains('\0') {
            return Err(Error::invalid_argument("node contains NUL"));
        }
        let max_message_bytes = c.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES);
        if max_message_bytes < 1024 {
            return Err(Error::invalid_argument("maxMessageBytes must be >= 1024"));
        }
        Ok(Settings {
            plugins_dir,
            node,
            electron: c.node_is_electron,
            call_timeout: ms(c.call_timeout_ms, 30_000, 50, 3_600_000, "callTimeoutMs")?,
            max_message_bytes,
            start_timeout: ms(c.start_timeout_ms, 10_000, 50, 600_000, "startTimeoutMs")?,
            kill_grace: ms(c.kill_grace_ms, 2_000, 0, 60_000, "killGraceMs")?,
            probe_timeout: ms(c.probe_timeout_ms, 1_000, 10, 60_000, "probeTimeoutMs")?,
            host_request_timeout: ms(
                c.host_request_timeout_ms,
                30_000,
                10,
                3_600_000,
                "hostRequestTimeoutMs",
            )?,
            workspace_root: c.workspace_root.unwrap_or_default(),
            crash_max: c.crash_loop_max_exits.unwrap_or(3),
            crash_window: ms(
                c.crash_loop_window_ms,
                60_000,
                1,
                86_400_000,
                "crashLoopWindowMs",
            )?,
            restart_backoff: ms(c.restart_backoff_ms, 1_000, 0, 600_000, "restartBackoffMs")?,
            reply_poll: match c.reply_poll_us.unwrap_or(200) {
                us @ 0..=10_000 => Duration::from_micros(us),
                _ => {
                    return Err(Error::invalid_argument(
                        "replyPollUs must be between 0 and 10000",
                    ))
                }
            },
        })
    }
}

/// Error kinds of a call, as named in messages and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Schema,
    UnknownTool,
    Timeout,
    Exited,
    Protocol,
    TooLarge,
    ToolError,
    Disabled,
    NotFound,
    Host,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Schema => "schema",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Exited => "exited",
            ErrorKind::Protocol => "protocol",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::Disabled => "disabled",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Host => "host",
        }
    }
    /// The C status an FFI layer reports for it.
    pub fn status(self) -> Status {
        match self {
            ErrorKind::Schema => Status::InvalidArgument,
            ErrorKind::UnknownTool | ErrorKind::NotFound => Status::NotFound,
            ErrorKind::Disabled => Status::Refused,
            ErrorKind::Host => Status::Io,
            _ => Status::Refused,
        }
    }
}

/// A failed call: a kind, a sentence for the user and the details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub kind: ErrorKind,
    pub message: String,
    /// `exited`: how the plugin ended.
    pub exit: Option<ExitInfo>,
    /// `exited`: the last lines of its stderr.
    pub stderr_tail: Option<String>,
    /// `tool_error`: the plugin's own message.
    pub plugin_message: Option<String>,
    /// `schema`: `(instance path, problem)` per error.
    pub schema_errors: Vec<(String, String)>,
}

impl CallError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CallError {
        CallError {
            kind,
            message: message.into(),
            exit: None,
            stderr_tail: None,
            plugin_message: None,
            schema_errors: Vec::new(),
        }
    }
    pub fn to_json(&self) -> Value {
        let mut v = json!({"kind": self.kind.as_str(), "message": self.message});
        if let Some(e) = &self.exit {
            v["exitCode"] = json!(e.code);
            v["signal"] = json!(e.signal);
        }
        if let Some(t) = &self.stderr_tail {
            v["stderrTail"] = json!(t);
        }
        if let Some(m) = &self.plugin_message {
            v["pluginMessage"] = json!(m);
        }
        if !self.schema_errors.is_empty() {
            v["errors"] = Value::Array(
                self.schema_errors
                    .iter()
                    .map(|(p, m)| json!({"path": p, "message": m}))
                    .collect(),
            );
        }
        v
    }
    /// As a library [`Error`] (status from the kind, message prefixed with it).
    pub fn into_error(self) -> Error {
        Error::new(
            self.kind.status(),
            format!("{}: {}", self.kind.as_str(), self.message),
        )
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for CallError {}

/// What the host tells the embedding host.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginEvent {
    Started {
        plugin: String,
        pid: i32,
    },
    Exit {
        plugin: String,
        code: Option<i32>,
        signal: Option<i32>,
        /// True when the host ended it (unload, kill after a timeout …).
        expected: bool,
        stderr_tail: String,
    },
    Disabled {
        plugin: String,
        reason: String,
    },
    UiPush {
        plugin: String,
        channel: String,
        payload: Value,
    },
    /// The views or panels of the enabled plugins changed (install,
    /// uninstall, enable, disable, crash-loop disabling).
    ViewsChanged,
}

impl PluginEvent {
    pub fn to_json(&self) -> Value {
        match self {
            PluginEvent::Started { plugin, pid } => {
                json!({"type": "plugin_started", "plugin": plugin, "pid": pid})
            }
            PluginEvent::Exit {
                plugin,
                code,
                signal,
                expected,
                stderr_tail,
            } => json!({"type": "plugin_exit", "plugin": plugin, "code": code,
                "signal": signal, "expected": expected, "stderrTail": stderr_tail}),
            PluginEvent::Disabled { plugin, reason } => {
                json!({"type": "plugin_disabled", "plugin": plugin, "reason": reason})
            }
            PluginEvent::UiPush {
                plugin,
                channel,
                payload,
            } => json!({"type": "ui_push", "plugin": plugin, "channel": channel,
                "payload": payload}),
            PluginEvent::ViewsChanged => json!({"type": "views_changed"}),
        }
    }
}

/// What an event sink may ask of the plugin's reader: `None`, or a future
/// to await before reading more from that plugin (backpressure: the
/// embedder is not taking its events).
pub type SlowDown = Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>;

/// The embedder's receiver of [`PluginEvent`]s (see [`SlowDown`]).
pub type EventSink = dyn Fn(PluginEvent) -> SlowDown + Send + Sync;

/// An observer inside the library (the plugin MCP server), told of every
/// [`PluginEvent`] as the embedder's sink is, and of every change of the
/// installed plugins or their enabled state. Held weakly: dropping the
/// observer unregisters it. Called from library threads, never under a lock.
pub trait HostListener: Send + Sync {
    fn event(&self, event: &PluginEvent);
    /// `reload`, `enable` or `disable` ran: the installed plugins or their
    /// enabled flags may have changed.
    fn plugins_changed(&self);
    /// A capability request of `plugin` is about to reach the embedding
    /// host's handler: the listener may add to its `params` (the view
    /// server adds `view` to a `show_notification` naming a view).
    fn decorate_request(&self, _plugin: &str, _capability: &str, _params: &mut Value) {}
}

/// One installed plugin as the store knows it.
#[derive(Clone)]
pub struct StoredPlugin {
    pub manifest: Arc<Manifest>,
    pub enabled: bool,
    /// The user's configuration values (`configuration[].id` → value).
    pub config: Map<String, Value>,
}

/// Where installed plugins, their enabled flags and configuration values
/// come from (the plugins directory's `installed/` and `state.json`).
pub trait PluginStore: Send + Sync {
    /// Every installed plugin (invalid ones left out).
    fn list(&self) -> Result<Vec<StoredPlugin>>;
    fn set_enabled(&self, id: &str, enabled: bool) -> Result<()>;
    fn set_config_value(&self, id: &str, key: &str, value: Value) -> Result<()>;
}

/// Counters of one plugin (over all its instances), for debugging and tests.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub starts: AtomicU64,
    pub unexpected_exits: AtomicU64,
    pub invalid_lines: AtomicU64,
    pub unknown_replies: AtomicU64,
    pub duplicate_replies: AtomicU64,
    pub late_replies: AtomicU64,
    pub ignored_messages: AtomicU64,
    pub internal_messages: AtomicU64,
    pub fds_closed: AtomicU64,
    pub host_requests: AtomicU64,
    pub ui_pushes: AtomicU64,
    pub timeouts: AtomicU64,
    pub kills: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    fn to_json(&self) -> Value {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "starts": g(&self.starts),
            "unexpectedExits": g(&self.unexpected_exits),
            "invalidLines": g(&self.invalid_lines),
            "unknownReplies": g(&self.unknown_replies),
            "duplicateReplies": g(&self.duplicate_replies),
            "lateReplies": g(&self.late_replies),
            "ignoredMessages": g(&self.ignored_messages),
            "internalMessages": g(&self.internal_messages),
            "fdsClosed": g(&self.fds_closed),
            "hostRequests": g(&self.host_requests),
            "uiPushes": g(&self.ui_pushes),
            "timeouts": g(&self.timeouts),
            "kills": g(&self.kills),
        })
    }
}

/// The host's record of one plugin.
pub(crate) struct PluginSlot {
    pub id: String,
    entry: Mutex<StoredPlugin>,
    /// Set by the crash-loop breaker.
    breaker: Mutex<Option<String>>,
    /// Identity of the plugin's files when last loaded.
    files: Mutex<Option<FilesId>>,
    crashes: Mutex<VecDeque<Instant>>,
    /// The last failure: the breaker's reason, an unexpected exit or a
    /// failed start (message, unix ms).
    last_error: Mutex<Option<(String, u64)>>,
    /// The running instance; the async lock serialises starts.
    pub instance: Arc<tokio::sync::Mutex<Option<Arc<Instance>>>>,
    pub counters: Counters,
}

/// (root folder identity, main file identity, its size and mtime in ns).
type FilesId = (FileId, FileId, u64, i128);

fn files_id(m: &Manifest) -> Option<FilesId> {
    let root = std::fs::metadata(&m.root).ok()?;
    let main = FileVersion::of(&std::fs::metadata(&m.main_path).ok()?);
    Some((
        FileId::of(&root),
        main.id(),
        main.size(),
        main.modified_ns(),
    ))
}

impl PluginSlot {
    fn new(entry: StoredPlugin) -> PluginSlot {
        PluginSlot {
            id: entry.manifest.id.clone(),
            entry: Mutex::new(entry),
            breaker: Mutex::new(None),
            files: Mutex::new(None),
            crashes: Mutex::new(VecDeque::new()),
            last_error: Mutex::new(None),
            instance: Arc::new(tokio::sync::Mutex::new(None)),
            counters: Counters::default(),
        }
    }
    pub fn entry(&self) -> StoredPlugin {
        lock(&self.entry).clone()
    }
    pub fn breaker(&self) -> Option<String> {
        lock(&self.breaker).clone()
    }
    /// Records `message` as the plugin's last error (now).
    pub fn set_last_error(&self, message: String) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        *lock(&self.last_error) = Some((message, at));
    }
    /// Records an unexpected exit; returns the reason when the breaker trips now.
    fn record_crash(&self, s: &Settings, exit: &ExitInfo) -> Option<String> {
        if s.crash_max == 0 {
            return None;
        }
        let now = Instant::now();
        let mut c = lock(&self.crashes);
        c.push_back(now);
        while c
            .front()
            .is_some_and(|t| now.duration_since(*t) > s.crash_window)
        {
            c.pop_front();
        }
        if c.len() < s.crash_max as usize {
            return None;
        }
        c.clear();
        let window = if s.crash_window < Duration::from_secs(1) {
            format!("{} ms", s.crash_window.as_millis())
        } else {
            format!("{} s", s.crash_window.as_secs())
        };
        let reason = format!(
            "it exited unexpectedly {} times within {window} (last: {exit})",
            s.crash_max
        );
        *lock(&self.breaker) = Some(reason.clone());
        Some(reason)
    }
}

type LogSinkFn = dyn Fn(LogLevel, &str) + Send + Sync;
type HostAnswerTx = tokio::sync::oneshot::Sender<std::result::Result<Value, String>>;

pub(crate) struct Shared {
    pub settings: Settings,
    /// The `requestId`s of calls.
    pub request_ids: crate::shared::rand::IdSequence,
    pub rt: Arc<RuntimeRef>,
    pub spawner: Spawner,
    store: Arc<dyn PluginStore>,
    plugins: Mutex<HashMap<String, Arc<PluginSlot>>>,
    sink: Slot<EventSink>,
    listeners: Mutex<Vec<std::sync::Weak<dyn HostListener>>>,
    log: Slot<LogSinkFn>,
    pub capabilities: Mutex<HashMap<String, Arc<CapabilityFn>>>,
    /// Requests waiting for `respond`, with their capability.
    pub host_requests: Mutex<HashMap<u64, (String, HostAnswerTx)>>,
    pub next_host_request: AtomicU64,
    /// Cancelled on shutdown: waiting host requests are answered at once.
    pub closing: CancellationToken,
    /// `startup_finished()` was called: background plugins are restarted.
    started_up: std::sync::atomic::AtomicBool,
    /// The views and panels of the enabled plugins when last told (to emit
    /// [`PluginEvent::ViewsChanged`] only on a change).
    views_seen: Mutex<Vec<String>>,
}

impl Shared {
    /// Tells the listeners and the embedder's sink; gives back what the
    /// sink asks of the producer.
    pub fn emit(&self, event: PluginEvent) -> SlowDown {
        for l in self.listeners() {
            l.event(&event);
        }
        self.sink.get().and_then(|sink| sink(event))
    }
    /// The live listeners (dead ones are dropped from the list).
    fn listeners(&self) -> Vec<Arc<dyn HostListener>> {
        let mut list = lock(&self.listeners);
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(std::sync::Weak::upgrade).collect()
    }
    fn plugins_changed(&self) {
        for l in self.listeners() {
            l.plugins_changed();
        }
        self.views_maybe_changed();
    }
    /// One line per view and panel of every plugin that may run.
    fn views_signature(&self) -> Vec<String> {
        let mut out = Vec::new();
        for slot in self.slots() {
            let e = slot.entry();
            if !e.enabled || slot.breaker().is_some() {
                continue;
            }
            let m = &e.manifest;
            for v in &m.views {
                out.push(format!(
                    "{}\0view\0{}\0{:?}\0{:?}\0{:?}\0{}\0{}",
                    m.id,
                    v.id,
                    v.title,
                    v.icon,
                    v.width,
                    v.entry,
                    m.root.display()
                ));
            }
            if let Some(p) = &m.ui {
                out.push(format!(
                    "{}\0ui\0{:?}\0{}\0{}",
                    m.id,
                    p.title,
                    p.entry,
                    m.root.display()
                ));
            }
        }
        out.sort();
        out
    }
    /// Emits [`PluginEvent::ViewsChanged`] when the views or panels of the
    /// plugins that may run changed since the last time.
    fn views_maybe_changed(&self) {
        let now = self.views_signature();
        {
            let mut seen = lock(&self.views_seen);
            if *seen == now {
                return;
            }
            *seen = now;
        }
        self.emit(PluginEvent::ViewsChanged);
    }
    pub fn log(&self, level: LogLevel, message: impl FnOnce() -> String) {
        if let Some(log) = self.log.get() {
            log(level, &message());
        }
    }
    pub fn slot(&self, id: &str) -> std::result::Result<Arc<PluginSlot>, CallError> {
        lock(&self.plugins).get(id).cloned().ok_or_else(|| {
            CallError::new(
                ErrorKind::NotFound,
                format!("no plugin with id {id:?} is installed"),
            )
        })
    }
    fn slots(&self) -> Vec<Arc<PluginSlot>> {
        lock(&self.plugins).values().cloned().collect()
    }

    /// An unexpected exit of `slot`'s instance: counts it, trips the
    /// breaker when it should, else restarts a background plugin (one
    /// started by `onStartupFinished`) after a backoff.
    pub fn on_crash(self: &Arc<Self>, slot: &Arc<PluginSlot>, exit: &ExitInfo) {
        Counters::bump(&slot.counters.unexpected_exits);
        slot.set_last_error(format!("it exited unexpectedly ({exit})"));
        if let Some(reason) = slot.record_crash(&self.settings, exit) {
            self.log(LogLevel::Warn, || {
                format!("plugin {} disabled: {reason}", slot.id)
            });
            slot.set_last_error(format!("disabled: {reason}"));
            self.emit(PluginEvent::Disabled {
                plugin: slot.id.clone(),
                reason,
            });
            self.views_maybe_changed();
            return;
        }
        let base = self.settings.restart_backoff;
        let background = slot
            .entry()
            .manifest
            .activation_events
            .iter()
            .any(|a| a == "onStartupFinished");
        if base.is_zero() || !background || !self.started_up.load(Ordering::Acquire) {
            return;
        }
        // 1x, 2x, 4x … the base per recent crash, at most a minute.
        let recent = lock(&slot.crashes).len().clamp(1, 7) as u32;
        let delay = (base * (1u32 << (recent - 1))).min(Duration::from_secs(60));
        let shared = Arc::downgrade(self);
        let slot = slot.clone();
        let closing = self.closing.clone();
        self.rt.handle().spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = closing.cancelled() => return,
            }
            let Some(shared) = shared.upgrade() else {
                return;
            };
            // Still installed (not removed by a reload)?
            let current = lock(&shared.plugins).get(&slot.id).cloned();
            if !current.is_some_and(|c| Arc::ptr_eq(&c, &slot)) {
                return;
            }
            if let Err(e) = calls::ensure_instance(&shared, &slot).await {
                shared.log(LogLevel::Warn, || {
                    format!("plugin {}: restart failed: {e}", slot.id)
                });
            }
        });
    }
}

/// The plugin host. Dropping it ends every plugin.
pub struct PluginHost {
    shared: Arc<Shared>,
}

impl PluginHost {
    /// A host over the plugins directory (`pluginsDir`, default
    /// `<qwen_home>/companion/plugins`) as the install API keeps it. Call
    /// [`PluginHost::reload`] after installing or uninstalling a plugin.
    pub fn new(config: Config) -> Result<PluginHost> {
        let settings = Settings::from_config(config.clone())?;
        let store = Arc::new(DirStore::new(settings.plugins_dir));
        PluginHost::with_store(config, store)
    }

    /// A host over `store` (installed plugins and their state).
    pub fn with_store(config: Config, store: Arc<dyn PluginStore>) -> Result<PluginHost> {
        let settings = Settings::from_config(config)?;
        let rt = runtime::acquire()?;
        let spawner =
            Spawner::new().map_err(|e| Error::io("cannot start the plugin spawn thread", e))?;
        let shared = Arc::new(Shared {
            settings,
            request_ids: crate::shared::rand::IdSequence::new()?,
            rt,
            spawner,
            store,
            plugins: Mutex::new(HashMap::new()),
            sink: Slot::default(),
            listeners: Mutex::new(Vec::new()),
            log: Slot::default(),
            capabilities: Mutex::new(HashMap::new()),
            host_requests: Mutex::new(HashMap::new()),
            next_host_request: AtomicU64::new(1),
            closing: CancellationToken::new(),
            started_up: std::sync::atomic::AtomicBool::new(false),
            views_seen: Mutex::new(Vec::new()),
        });
        let host = PluginHost { shared };
        host.reload()?;
        // The first listing is the baseline, not a change.
        *lock(&host.shared.views_seen) = host.shared.views_signature();
        Ok(host)
    }

    /// The plugins directory in use.
    pub fn plugins_dir(&self) -> PathBuf {
        self.shared.settings.plugins_dir.clone()
    }

    /// Receives every [`PluginEvent`] (from library threads; never under a lock).
    pub fn set_event_sink(&self, sink: Option<Arc<EventSink>>) {
        self.shared.sink.set(sink);
    }

    /// Adds an in-library observer (see [`HostListener`]); it stays until
    /// dropped.
    pub fn add_listener(&self, listener: std::sync::Weak<dyn HostListener>) {
        lock(&self.shared.listeners).push(listener);
    }

    /// `context.cwd` of calls that name none (`workspaceRoot`; may be empty).
    pub fn workspace_root(&self) -> String {
        self.shared.settings.workspace_root.clone()
    }

    /// Receives log lines (from library threads; never under a lock).
    pub fn set_log_sink(&self, sink: Option<LogFn>) {
        self.shared.log.set(sink);
    }

    /// Ids of the installed plugins, sorted.
    pub fn plugin_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.shared.plugins).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The manifest of an installed plugin.
    pub fn manifest(&self, id: &str) -> Option<Arc<Manifest>> {
        self.shared.slot(id).ok().map(|s| s.entry().manifest)
    }

    /// The plugin's last error: `{"message", "at": unix ms}` (the crash-loop
    /// breaker's reason when it disabled the plugin, else the last
    /// unexpected exit or failed start), `None` when there was none.
    pub fn last_error(&self, id: &str) -> Option<Value> {
        let slot = self.shared.slot(id).ok()?;
        let e = lock(&slot.last_error).clone();
        e.map(|(message, at)| json!({"message": message, "at": at}))
    }

    /// Whether `id` may run: enabled by the user and not stopped by the breaker.
    pub fn is_enabled(&self, id: &str) -> bool {
        self.shared
            .slot(id)
            .is_ok_and(|s| s.entry().enabled && s.breaker().is_none())
    }

    /// The pid of the plugin's running process, if one runs.
    pub fn running_pid(&self, id: &str) -> Option<i32> {
        let slot = self.shared.slot(id).ok()?;
        let guard = slot.instance.try_lock().ok()?;
        guard
            .as_ref()
            .filter(|i| !i.is_dead())
            .map(|i| i.child.pid())
    }

    /// Counters of a plugin: starts, unexpected exits, invalid lines,
    /// unknown / duplicate / late replies, ignored and internal messages,
    /// passed fds closed, host requests, ui pushes, timeouts, kills.
    pub fn stats(&self, id: &str) -> Option<Value> {
        let slot = self.shared.slot(id).ok()?;
        let mut v = slot.counters.to_json();
        v["running"] = json!(self.running_pid(id).is_some());
        v["disabledReason"] = json!(slot.breaker());
        Some(v)
    }

    /// Re-reads the store: new plugins appear, removed ones are unloaded and
    /// forgotten, a plugin whose files changed (update, re-install) or that
    /// was disabled is unloaded (the next call starts the new version).
    pub fn reload(&self) -> Result<()> {
        let listed: Vec<(StoredPlugin, Option<FilesId>)> = self
            .shared
            .store
            .list()?
            .into_iter()
            .map(|p| {
                let id = files_id(&p.manifest);
                (p, id)
            })
            .collect();
        let mut to_unload = Vec::new();
        {
            let mut plugins = lock(&self.shared.plugins);
            let mut seen = std::collections::HashSet::new();
            for (p, files) in listed {
                let id = p.manifest.id.clone();
                seen.insert(id.clone());
                match plugins.get(&id) {
                    Some(slot) => {
                        let mut entry = lock(&slot.entry);
                        let mut known = lock(&slot.files);
                        let old = &entry.manifest;
                        // A re-install renames a new folder in (new inode),
                        // even for the same version; an edit changes main.
                        let changed = old.version != p.manifest.version
                            || old.root != p.manifest.root
                            || old.main_path != p.manifest.main_path
                            || *known != files;
                        if changed || !p.enabled {
                            to_unload.push(slot.clone());
                        }
                        *entry = p;
                        *known = files;
                    }
                    None => {
                        let slot = PluginSlot::new(p);
                        *lock(&slot.files) = files;
                        plugins.insert(id, Arc::new(slot));
                    }
                }
            }
            let gone: Vec<String> = plugins
                .keys()
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect();
            for id in gone {
                if let Some(slot) = plugins.remove(&id) {
                    to_unload.push(slot);
                }
            }
        }
        self.unload_slots(to_unload);
        self.shared.plugins_changed();
        Ok(())
    }

    /// Unloads `slots` concurrently: waits when called from a plain thread;
    /// on a runtime thread (where blocking is not allowed) the unloads run
    /// in the background.
    fn unload_slots(&self, slots: Vec<Arc<PluginSlot>>) {
        if slots.is_empty() {
            return;
        }
        let tasks: Vec<_> = slots
            .into_iter()
            .map(|slot| {
                let shared = self.shared.clone();
                self.shared
                    .rt
                    .handle()
                    .spawn(async move { calls::unload_slot(&shared, &slot).await })
            })
            .collect();
        if crate::runtime::may_block() {
            self.shared.rt.handle().block_on(async move {
                for t in tasks {
                    let _ = t.await;
                }
            });
        }
    }

    /// Runs `f` on the shared runtime, blocking the caller (refused on a
    /// runtime thread, where blocking would stall the runtime).
    fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T
    where
        T: BlockFallback,
    {
        if !crate::runtime::may_block() {
            return T::refused();
        }
        self.shared.rt.handle().block_on(f)
    }

    /// Calls `tool` of `plugin_id` with `params` (see the module docs).
    pub fn call_tool(
        &self,
        plugin_id: &str,
        tool: &str,
        params: Value,
        options: CallOptions,
    ) -> std::result::Result<ToolOutput, CallError> {
        self.block(self.call_tool_async(plugin_id, tool, params, options))
    }

    pub async fn call_tool_async(
        &self,
        plugin_id: &str,
        tool: &str,
        params: Value,
        options: CallOptions,
    ) -> std::result::Result<ToolOutput, CallError> {
        calls::call_tool(&self.shared, plugin_id, tool, params, options).await
    }

    /// Starts every enabled plugin that declares `onStartupFinished`
    /// (concurrently); returns each start's outcome.
    pub fn startup_finished(&self) -> Vec<(String, std::result::Result<(), CallError>)> {
        self.block(self.startup_finished_async())
    }

    pub async fn startup_finished_async(
        &self,
    ) -> Vec<(String, std::result::Result<(), CallError>)> {
        self.shared.started_up.store(true, Ordering::Release);
        let mut tasks = Vec::new();
        for slot in self.shared.slots() {
            let e = slot.entry();
            if !e.enabled
                || slot.breaker().is_some()
                || !e
                    .manifest
                    .activation_events
                    .iter()
                    .any(|a| a == "onStartupFinished")
            {
                continue;
            }
            let shared = self.shared.clone();
            tasks.push((
                slot.id.clone(),
                self.shared
                    .rt
                    .handle()
                    .spawn(async move { calls::ensure_instance(&shared, &slot).await.map(|_| ()) }),
            ));
        }
        let mut out = Vec::new();
        for (id, t) in tasks {
            let r = t.await.unwrap_or_else(|e| {
                Err(CallError::new(
                    ErrorKind::Host,
                    format!("start failed: {e}"),
                ))
            });
            out.push((id, r));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Ends the plugin's process (and all its descendants); the next call
    /// starts it again. Unknown id → `not_found`.
    pub fn unload(&self, id: &str) -> std::result::Result<(), CallError> {
        self.block(self.unload_async(id))
    }

    pub async fn unload_async(&self, id: &str) -> std::result::Result<(), CallError> {
        let slot = self.shared.slot(id)?;
        calls::unload_slot(&self.shared, &slot).await;
        Ok(())
    }

    /// Enables the plugin (persisted) and clears the crash-loop breaker.
    pub fn enable(&self, id: &str) -> Result<()> {
        let slot = self.shared.slot(id).map_err(CallError::into_error)?;
        self.shared.store.set_enabled(id, true)?;
        lock(&slot.entry).enabled = true;
        lock(&slot.breaker).take();
        lock(&slot.crashes).clear();
        self.shared.plugins_changed();
        Ok(())
    }

    /// Disables the plugin (persisted) and unloads it.
    pub fn disable(&self, id: &str) -> Result<()> {
        let slot = self.shared.slot(id).map_err(CallError::into_error)?;
        self.shared.store.set_enabled(id, false)?;
        lock(&slot.entry).enabled = false;
        self.unload_slots(vec![slot]);
        self.shared.plugins_changed();
        Ok(())
    }

    /// Sets a configuration value (persisted); it must name a declared
    /// entry and have the entry's type (`null` removes the value: the
    /// default applies again). Later calls see it in `context.config`.
    pub fn set_config_value(&self, id: &str, key: &str, value: Value) -> Result<()> {
        let slot = self.shared.slot(id).map_err(CallError::into_error)?;
        let manifest = slot.entry().manifest;
        let entry = manifest
            .configuration
            .iter()
            .find(|c| c.id == key)
            .ok_or_else(|| {
                Error::new(
                    Status::NotFound,
                    format!("plugin {id} declares no configuration entry {key:?}"),
                )
            })?;
        if !value.is_null() && !entry.kind.accepts(&value) {
            return Err(Error::invalid_argument(format!(
                "configuration entry {key:?} of plugin {id} takes a {} value",
                entry.kind.name()
            )));
        }
        self.shared.store.set_config_value(id, key, value.clone())?;
        let mut entry = lock(&slot.entry);
        if value.is_null() {
            entry.config.remove(key);
        } else {
            entry.config.insert(key.to_string(), value);
        }
        Ok(())
    }

    /// Registers (or with `None` removes) the handler of a capability
    /// plugins may request. `show_notification` and `render_pdf` have
    /// library defaults, used when no handler is registered.
    /// Replacing or removing a handler answers the requests the old one
    /// left waiting with `host_error`.
    pub fn set_capability(&self, name: &str, handler: Option<Arc<CapabilityFn>>) {
        let old = {
            let mut caps = lock(&self.shared.capabilities);
            match handler {
                Some(h) => caps.insert(name.to_string(), h),
                None => caps.remove(name),
            }
        };
        if old.is_some() {
            capability::fail_capability(
                &self.shared,
                name,
                "the host removed its handler for this capability",
            );
        }
        drop(old);
    }

    /// Answers a [`HostRequest`] whose handler returned [`HostAnswer::Later`]
    /// (from any thread). `Err(message)` becomes the plugin's `host_error`.
    pub fn respond(
        &self,
        request_id: u64,
        answer: std::result::Result<Value, String>,
    ) -> Result<()> {
        capability::respond(&self.shared, request_id, answer)
    }

    /// Whether the plugin's session action should show in `cwd`: calls its
    /// `sessionAction.visibleTool` with `{}` and returns `details.visible`
    /// (true when no visibleTool is declared).
    pub fn visible(&self, plugin_id: &str, cwd: &str) -> std::result::Result<bool, CallError> {
        self.block(calls::visible(&self.shared, plugin_id, cwd))
    }

    pub async fn visible_async(
        &self,
        plugin_id: &str,
        cwd: &str,
    ) -> std::result::Result<bool, CallError> {
        calls::visible(&self.shared, plugin_id, cwd).await
    }

    /// Options of a `select` configuration entry: "Auto" (the entry's
    /// default value) first, then the `optionsTool`'s `details.options`
    /// (a returned duplicate of the default value dropped).
    pub fn options(
        &self,
        plugin_id: &str,
        config_id: &str,
    ) -> std::result::Result<Vec<Value>, CallError> {
        self.block(calls::options(&self.shared, plugin_id, config_id))
    }

    pub async fn options_async(
        &self,
        plugin_id: &str,
        config_id: &str,
    ) -> std::result::Result<Vec<Value>, CallError> {
        calls::options(&self.shared, plugin_id, config_id).await
    }

    /// Parses a dropped file with the enabled plugin whose documentParsers
    /// lists `mime` (its tool gets `{base64}` and `cwd: ""`).
    pub fn parse_document(
        &self,
        mime: &str,
        bytes: &[u8],
    ) -> std::result::Result<ParsedDocument, CallError> {
        self.block(calls::parse_document(&self.shared, mime, bytes))
    }

    pub async fn parse_document_async(
        &self,
        mime: &str,
        bytes: &[u8],
    ) -> std::result::Result<ParsedDocument, CallError> {
        calls::parse_document(&self.shared, mime, bytes).await
    }

    /// Ends every plugin and leaves no process behind. Later calls fail
    /// with `host`. Called by drop too.
    pub fn shutdown(&self) {
        self.shared.closing.cancel();
        let slots = self.shared.slots();
        if !crate::runtime::may_block() {
            // Cannot wait here: kill at once.
            for slot in slots {
                if let Ok(mut g) = slot.instance.try_lock() {
                    if let Some(i) = g.take() {
                        i.mark_expected();
                        i.child.kill_all_blocking();
                    }
                }
            }
        } else {
            self.unload_slots(slots);
        }
        capability::fail_all(&self.shared, "the plugin host is shutting down");
    }
}

impl Drop for PluginHost {
    fn drop(&mut self) {
        self.shutdown();
        self.shared.sink.set(None);
        self.shared.log.set(None);
        lock(&self.shared.capabilities).clear();
        self.shared.spawner.shutdown();
    }
}

/// What a blocking entry point returns when called on a runtime thread.
trait BlockFallback {
    fn refused() -> Self;
}

const ON_RUNTIME: &str = "called on a library runtime thread; use the async variant there";

impl<T> BlockFallback for std::result::Result<T, CallError> {
    fn refused() -> Self {
        Err(CallError::new(ErrorKind::Host, ON_RUNTIME))
    }
}

impl BlockFallback for Vec<(String, std::result::Result<(), CallError>)> {
    fn refused() -> Self {
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
