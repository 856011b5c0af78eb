//! The plugin host as an editor embeds it — one object a Rust user can hold.
//! It sits above both [`crate::plugins`] (the runtime, the view server) and
//! [`crate::mcp_bridge`] (the plugin MCP server), which it puts together:
//! the plugin runtime ([`PluginHost`]), the way to the editor ([`HostLink`]:
//! its callback thread, log callback and pull mode), the capabilities the
//! editor offers to plugins, and the two optional servers built on the host
//! (the view server and the plugin MCP server). The C ABI's
//! `qc_plugin_host_*` functions are a thin layer over this type.
//!
//! Events reach the editor through [`PluginService::set_event_callback`] or,
//! in pull mode, [`PluginService::next_event`]. A plugin's `ui_push`es are
//! coalesced per plugin and channel while the editor is not taking them, and
//! a plugin that outpaces its editor is read no further until the editor
//! catches up (see [`crate::events`]); other plugins are not held up.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use once_cell::sync::OnceCell;
use serde_json::{json, Value};

use crate::error::{Error, Result, Status};
use crate::events::{Answer, EventFn, HostLink, Push};
use crate::host::{LogFn, LogLevel, Logger, Slot};
use crate::mcp_bridge::PluginMcpServer;
use crate::plugins::host::{
    CallError, CallOptions, CapabilityFn, Config, HostAnswer, HostRequest, PluginEvent, PluginHost,
    SlowDown,
};
use crate::plugins::install::{self, InstallError};
use crate::plugins::views::{self, Scheme, ViewServer};
use crate::shared::sync::lock;

/// A capability callback of the editor: `(request id, request JSON)`; the
/// editor answers with [`PluginService::respond`].
pub type CapabilityCall = dyn Fn(u64, &Value) + Send + Sync;

/// One offered capability: the editor's callback, or none (pull mode only).
pub type Offer = Option<Arc<CapabilityCall>>;

/// What a plugin call ends with, as one document:
/// `{"ok":true,"result":…}` / `{"ok":false,"error":{"kind",…}}`.
pub fn outcome_json(r: &std::result::Result<Value, CallError>) -> Value {
    match r {
        Ok(v) => json!({"ok": true, "result": v}),
        Err(e) => json!({"ok": false, "error": e.to_json()}),
    }
}

/// A failed change of the plugins directory.
#[derive(Debug)]
pub enum ChangeError {
    /// Refused or failed: the plugins directory is unchanged.
    Install(InstallError),
    /// Done, but the host could not reload (the message says what was done).
    Reload(Error),
}

impl From<InstallError> for ChangeError {
    fn from(e: InstallError) -> ChangeError {
        ChangeError::Install(e)
    }
}

/// The state the host's closures share (never the service itself, so
/// dropping the service ends everything).
struct Inner {
    link: HostLink,
    events: Slot<EventFn>,
    /// The host, for answering pulled capability requests.
    host: OnceCell<Weak<PluginHost>>,
    /// How long a host request may wait (the host's own limit).
    request_timeout: Duration,
    capabilities: Mutex<HashMap<String, Offer>>,
}

/// The plugin host with its editor link and servers (see the module docs).
/// Field order is drop order: the servers first (they hold the host), then
/// the host (it ends every plugin and drops its closures), then the shared
/// state (whose callback thread is joined, unless dropped on it).
pub struct PluginService {
    views: Mutex<(Option<ViewServer>, Scheme)>,
    mcp: Mutex<Option<PluginMcpServer>>,
    host: Arc<PluginHost>,
    inner: Arc<Inner>,
    plugins_dir: PathBuf,
}

impl PluginService {
    /// Creates the host over its plugins directory and starts the callback
    /// thread; no plugin runs until its first call.
    pub fn new(config: Config) -> Result<PluginService> {
        let request_timeout =
            Duration::from_millis(config.host_request_timeout_ms.unwrap_or(30_000));
        Self::with_host(Arc::new(PluginHost::new(config)?), request_timeout)
    }

    /// Wraps an existing host (tests use one with their own store).
    pub fn with_host(host: Arc<PluginHost>, request_timeout: Duration) -> Result<PluginService> {
        let inner = Arc::new(Inner {
            link: HostLink::new()?,
            events: Slot::default(),
            host: OnceCell::new(),
            request_timeout,
            capabilities: Mutex::new(HashMap::new()),
        });
        let _ = inner.host.set(Arc::downgrade(&host));
        let weak = Arc::downgrade(&inner);
        host.set_event_sink(Some(Arc::new(move |e: PluginEvent| -> SlowDown {
            weak.upgrade()?.deliver(e)
        })));
        let logger = inner.link.logger().clone();
        host.set_log_sink(Some(Arc::new(move |level, message: &str| {
            logger.log(level, || message.to_string())
        })));
        Ok(PluginService {
            views: Mutex::new((None, Scheme::Light)),
            mcp: Mutex::new(None),
            plugins_dir: host.plugins_dir(),
            host,
            inner,
        })
    }

    /// The plugin runtime: calls, installs, enable/disable, stats.
    pub fn host(&self) -> &Arc<PluginHost> {
        &self.host
    }

    /// The plugins directory in use (absolute).
    pub fn plugins_dir(&self) -> &std::path::Path {
        &self.plugins_dir
    }

    /// Installs the plugin at `src` (a folder or a `.zip`), replacing an
    /// installed version atomically, then reloads the host (a running old
    /// version is ended). Returns the plugin's summary.
    pub fn install(&self, src: &std::path::Path) -> std::result::Result<Value, ChangeError> {
        let outcome = install::install_from(&self.plugins_dir, src)?;
        let summary = outcome.summary_json();
        self.reload_after(&format!("{} was installed", outcome.manifest.id))?;
        Ok(summary)
    }

    /// Uninstalls plugin `id` (with `remove_data` also its data and state),
    /// then reloads the host. Returns `{"id","dataRemoved"}`.
    pub fn uninstall(
        &self,
        id: &str,
        remove_data: bool,
    ) -> std::result::Result<Value, ChangeError> {
        let outcome = install::uninstall(&self.plugins_dir, id, remove_data)?;
        self.reload_after(&format!("{id} was uninstalled"))?;
        Ok(outcome.summary_json())
    }

    fn reload_after(&self, what: &str) -> std::result::Result<(), ChangeError> {
        self.host.reload().map_err(|err| {
            ChangeError::Reload(Error::new(
                err.status,
                format!("{what}, but the host could not reload: {}", err.message),
            ))
        })
    }

    /// Every installed plugin (sorted by id) with its `lastError` as this
    /// host saw it (see `qc_plugin_host_list`).
    pub fn list(&self) -> std::result::Result<Value, InstallError> {
        let mut list = install::list_json(&self.plugins_dir)?;
        if let Value::Array(items) = &mut list {
            for item in items {
                let id = item.get("id").and_then(Value::as_str).map(str::to_string);
                let last = id.and_then(|id| self.host.last_error(&id));
                item["lastError"] = last.unwrap_or(Value::Null);
            }
        }
        Ok(list)
    }

    /// The service's logger (its log callback), also used by its servers.
    pub fn logger(&self) -> Arc<Logger> {
        self.inner.link.logger().clone()
    }

    /// Sets (or removes) the editor's event callback; it runs on the
    /// callback thread. Not called in pull mode.
    pub fn set_event_callback(&self, cb: Option<Arc<EventFn>>) {
        self.inner.events.set(cb);
    }

    /// Sets (or removes) the log callback.
    pub fn set_log_callback(&self, sink: Option<(LogFn, LogLevel)>) {
        self.inner.link.logger().set(sink);
    }

    /// In pull mode, delivers this object's log lines up to `max_level` as
    /// pulled `{"type":"log"}` events instead of a log callback (`None`: off;
    /// see [`crate::events::HostLink::enable_log_events`]).
    pub fn enable_log_events(&self, max_level: Option<LogLevel>) -> Result<()> {
        self.inner.link.enable_log_events(max_level)
    }

    /// Offers capability `name` to plugins, answered by `offer`'s callback
    /// (or, with `Some(None)`, in pull mode only); `None` withdraws it and
    /// the library default applies again.
    pub fn offer_capability(&self, name: &str, offer: Option<Offer>) {
        let handler = offer.as_ref().map(|_| self.inner.capability_handler(name));
        match offer {
            Some(o) => lock(&self.inner.capabilities).insert(name.to_string(), o),
            None => lock(&self.inner.capabilities).remove(name),
        };
        self.host.set_capability(name, handler);
    }

    /// Answers capability request `id` (of a callback, or in pull mode of a
    /// pulled `host_request`): `Ok(result)` or `Err(message)`.
    pub fn respond(&self, id: u64, answer: std::result::Result<Value, String>) -> Result<()> {
        if self.inner.link.pulling() {
            let answer = answer.map(|v| Some(v.to_string()));
            return self.inner.link.respond(id, answer);
        }
        self.host.respond(id, answer)
    }

    /// True in pull mode.
    pub fn pulling(&self) -> bool {
        self.inner.link.pulling()
    }

    /// Switches to pull mode (see [`HostLink::enable_pull`]).
    pub fn enable_events(&self) -> Result<crate::sys::event::RawEventHandle> {
        self.inner.link.enable_pull()
    }

    /// The next pulled event (see [`HostLink::next_event`]).
    pub fn next_event(&self) -> Result<Option<Value>> {
        self.inner.link.next_event()
    }

    /// The callback queue's counters (see [`HostLink::stats`]).
    pub fn callback_stats(&self) -> Value {
        self.inner.link.stats()
    }

    /// Starts a call and hands its outcome ([`outcome_json`]) to `done` on
    /// the callback thread, where the service's state and the runtime
    /// reference are let go too (never on a runtime thread).
    pub fn call_async(
        &self,
        plugin: String,
        tool: String,
        params: Value,
        options: CallOptions,
        done: impl FnOnce(Value) + Send + 'static,
    ) -> Result<()> {
        let rt = crate::runtime::acquire()?;
        let host = self.host.clone();
        let inner = self.inner.clone();
        rt.handle().clone().spawn(async move {
            let r = host
                .call_tool_async(&plugin, &tool, params, options)
                .await
                .map(|o| o.to_json());
            let doc = outcome_json(&r);
            let keep = inner.clone();
            keep.link.dispatcher().post_owed(move || {
                done(doc);
                drop(host);
                drop(inner);
                drop(rt);
            });
        });
        Ok(())
    }

    /// Starts a call in pull mode: its outcome is queued as the event
    /// `{"type":"call_done","callId":N,…outcome}`; returns `N` (unique in
    /// the process, never 0). Refused outside pull mode.
    pub fn call_queued(
        &self,
        plugin: String,
        tool: String,
        params: Value,
        options: CallOptions,
    ) -> Result<u64> {
        static NEXT_CALL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        if !self.inner.link.pulling() {
            return Err(Error::new(
                Status::Refused,
                "pull mode is not enabled (qc_plugin_host_enable_events)",
            ));
        }
        let id = NEXT_CALL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let inner = Arc::downgrade(&self.inner);
        self.call_async(plugin, tool, params, options, move |mut doc| {
            doc["type"] = json!("call_done");
            doc["callId"] = json!(id);
            if let Some(inner) = inner.upgrade() {
                inner.link.notify(doc, None);
            }
        })?;
        Ok(id)
    }

    /// Starts the view server (at most one) with the colour scheme last set,
    /// unless `config` names one; returns its pages (`views_json`).
    pub fn start_views(&self, mut config: views::Config) -> Result<Value> {
        let mut slot = lock(&self.views);
        if slot.0.is_some() {
            return Err(Error::new(
                Status::AlreadyRunning,
                "the view server of this host is already running",
            ));
        }
        match config.color_scheme.as_deref() {
            Some(s) => slot.1 = Scheme::parse(s)?,
            None => config.color_scheme = Some(slot.1.as_str().to_string()),
        }
        let server = ViewServer::start(self.host.clone(), config, self.logger())?;
        let info = server.views_json()?;
        slot.0 = Some(server);
        Ok(info)
    }

    /// Stops the view server and returns when its sockets are closed.
    pub fn stop_views(&self) -> Result<()> {
        let server = lock(&self.views).0.take().ok_or_else(Error::not_running)?;
        let stopped = server.stop();
        drop(server);
        stopped
    }

    /// Runs `f` on the running view server.
    pub fn with_views<T>(&self, f: impl FnOnce(&ViewServer) -> Result<T>) -> Result<T> {
        let slot = lock(&self.views);
        f(slot.0.as_ref().ok_or_else(Error::not_running)?)
    }

    /// Sets the colour scheme pages see (also before the server starts).
    pub fn set_color_scheme(&self, scheme: Scheme) {
        let mut slot = lock(&self.views);
        slot.1 = scheme;
        if let Some(server) = slot.0.as_ref() {
            server.set_color_scheme(scheme);
        }
    }

    /// Starts the plugin MCP server (at most one); its log lines go to this
    /// service's log callback, prefixed `mcp: `.
    pub fn start_mcp(&self, config: crate::mcp_bridge::server::Config) -> Result<()> {
        let mut slot = lock(&self.mcp);
        if slot.is_some() {
            return Err(Error::new(
                Status::AlreadyRunning,
                "the plugin MCP server of this host is already running",
            ));
        }
        let server = PluginMcpServer::start(self.host.clone(), config)?;
        let logger = self.logger();
        let forward: LogFn =
            Arc::new(move |level, message: &str| logger.log(level, || format!("mcp: {message}")));
        server.set_log_callback(Some((forward, LogLevel::Trace)));
        *slot = Some(server);
        Ok(())
    }

    /// Stops the plugin MCP server (lock file removed, sessions closed).
    pub fn stop_mcp(&self) -> Result<()> {
        let server = lock(&self.mcp).take().ok_or_else(Error::not_running)?;
        let stopped = server.stop();
        drop(server);
        stopped
    }

    /// Runs `f` on the running plugin MCP server.
    pub fn with_mcp<T>(&self, f: impl FnOnce(&PluginMcpServer) -> Result<T>) -> Result<T> {
        let slot = lock(&self.mcp);
        f(slot.as_ref().ok_or_else(Error::not_running)?)
    }

    /// Stops both servers, ends every plugin and answers what waits with an
    /// error. The callback thread ends when the service is dropped.
    pub fn shutdown(&self) {
        let views = lock(&self.views).0.take();
        drop(views);
        let mcp = lock(&self.mcp).take();
        drop(mcp);
        self.host.shutdown();
    }
}

impl Drop for PluginService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Inner {
    /// Delivers one event: queued in pull mode, else to the event callback
    /// on the callback thread. A `ui_push` is coalesced per plugin and
    /// channel; when those are over their bounds the reader is asked to
    /// wait (the returned future) before it reads more of that plugin.
    fn deliver(self: &Arc<Self>, event: PluginEvent) -> SlowDown {
        let key = match &event {
            PluginEvent::UiPush {
                plugin, channel, ..
            } => Some(format!("{plugin}\0{channel}")),
            _ => None,
        };
        let json = event.to_json();
        let cb = self.events.get();
        match key {
            None => {
                self.link.notify(json, cb);
                None
            }
            Some(key) => match self.link.notify_latest(key, json, cb) {
                Push::Taken => None,
                Push::Full => {
                    let weak = Arc::downgrade(self);
                    Some(Box::pin(async move {
                        if let Some(inner) = weak.upgrade() {
                            inner.link.room().await;
                        }
                    }))
                }
            },
        }
    }

    /// The handler registered with the runtime for capability `name`.
    fn capability_handler(self: &Arc<Self>, name: &str) -> Arc<CapabilityFn> {
        let inner = Arc::downgrade(self);
        let name = name.to_string();
        Arc::new(move |req: &HostRequest| -> HostAnswer {
            let Some(inner) = inner.upgrade() else {
                return HostAnswer::Now(Err("the plugin host is being freed".into()));
            };
            inner.handle_request(&name, req)
        })
    }

    fn handle_request(&self, name: &str, req: &HostRequest) -> HostAnswer {
        let mut doc = req.to_json();
        let mut pulled = doc.clone();
        pulled["type"] = json!("host_request");
        if let Value::Object(m) = &mut pulled {
            m.remove("id");
        }
        if let Some(queued) = self.link.pull_request(pulled) {
            return match queued {
                Ok(rx) => {
                    self.forward_pulled(req.id, rx);
                    HostAnswer::Later
                }
                Err(message) => HostAnswer::Now(Err(message)),
            };
        }
        let cb = lock(&self.capabilities).get(name).cloned().flatten();
        match cb {
            Some(cb) => {
                let id = req.id;
                let doc = std::mem::take(&mut doc);
                if self.link.dispatcher().post(move || cb(id, &doc)) {
                    HostAnswer::Later
                } else {
                    HostAnswer::Now(Err(
                        "the IDE is not taking its callbacks (or the plugin host is being freed)"
                            .into(),
                    ))
                }
            }
            None => HostAnswer::Now(Err(format!(
                "the host offers {name:?} only in pull mode, which is not enabled"
            ))),
        }
    }

    /// Waits (on the runtime) for the pull-mode answer of a queued request
    /// and hands it to the runtime's request `host_id`.
    fn forward_pulled(&self, host_id: u64, rx: tokio::sync::oneshot::Receiver<Answer>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return; // the runtime answers the request itself at its timeout
        };
        let host = self.host.get().cloned();
        let limit = self.request_timeout + Duration::from_millis(100);
        rt.spawn(async move {
            let answer = match tokio::time::timeout(limit, rx).await {
                Ok(Ok(Ok(text))) => Ok(text
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(Value::Null)),
                Ok(Ok(Err(message))) => Err(message),
                _ => return,
            };
            if let Some(host) = host.and_then(|w| w.upgrade()) {
                let _ = host.respond(host_id, answer);
            }
        });
    }
}
