//! What a call and the host report: the error of a failed call
//! ([`ErrorKind`], [`CallError`]), the events the embedding host receives
//! ([`PluginEvent`] through an [`EventSink`], with [`SlowDown`] as its
//! backpressure), in-library observers ([`HostListener`]) and the per-plugin
//! [`Counters`] behind `PluginHost::stats`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::error::{Error, Status};
use crate::plugins::process::ExitInfo;

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
    /// `reload`, `enable` or `disable` ran, or the embedding host offered
    /// or withdrew one of the editor's capabilities (`editor_*`): the
    /// installed plugins, their enabled flags or the editor's tools may have
    /// changed.
    fn plugins_changed(&self);
    /// A capability request of `plugin` is about to reach the embedding
    /// host's handler: the listener may add to its `params` (the view
    /// server adds `view` to a `show_notification` naming a view).
    fn decorate_request(&self, _plugin: &str, _capability: &str, _params: &mut Value) {}
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
    pub(super) fn to_json(&self) -> Value {
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
