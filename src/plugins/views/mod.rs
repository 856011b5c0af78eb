//! The view server: the pages plugins ship (`views[]` docked views, the `ui`
//! floating panel) served over loopback HTTP to any browser an editor has
//! (JCEF, the user's default browser), with `window.pluginHost` injected.
//!
//! - **Transport**: `http://127.0.0.1:<random port>/` through the library's
//!   one loopback HTTP layer ([`crate::loopback::serve`]: connection cap,
//!   header/body/idle timeouts), `Host` allow-list and `Origin` policy of
//!   [`crate::loopback::guard`] ([`OriginPolicy::SameOrigin`]: no `Origin`,
//!   or exactly the server's own).
//! - **URLs**: a page is `/v/<capability>/<entry>`; its relative assets
//!   resolve under the same capability; its API is `/api/<capability>/…`
//!   (`invoke` POST, `events` SSE, `scheme` GET). See [`pages`] for the
//!   capabilities and [`routes`] for the answers.
//! - **pluginHost** ([`inject`]): `invoke(toolName, params)` runs the host's
//!   `call_tool` for the page's own plugin (schema check, timeouts) and
//!   resolves to `{content, details?}` or `{error, kind}`; `onPush(cb)`
//!   gets that plugin's `ui_push` (channel, payload); `getColorScheme()` /
//!   `onColorSchemeChange(cb)` follow [`ViewServer::set_color_scheme`].
//! - **Security**: see [`csp`] (headers) and [`files`] (what is served).
//! - **Live**: pages follow the host (install, uninstall, enable, disable,
//!   crash-loop disabling); the host emits `views_changed` itself. A
//!   `show_notification` request naming a view of its plugin (`viewId`)
//!   gains `"view":{"id","title","url"}` before the embedding host sees it.

pub mod csp;
pub mod files;
pub mod inject;
pub mod pages;
mod routes;

use crate::shared::sync::lock;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::{Error, Result, Status};
use crate::host::Logger;
use crate::loopback;
use crate::loopback::guard::{OriginPolicy, Policy};
use crate::plugins::host::{HostListener, PluginEvent, PluginHost};
use crate::runtime::{self, RuntimeRef};
use pages::{Capabilities, PageKey};

const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Open event streams per server (a page opens one).
const MAX_STREAMS: usize = 256;
/// Frames waiting per stream (a stalled page loses pushes beyond it).
const STREAM_QUEUE: usize = 256;

/// The light/dark scheme pages are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Light,
    Dark,
}

impl Scheme {
    pub fn parse(s: &str) -> Result<Scheme> {
        match s {
            "light" => Ok(Scheme::Light),
            "dark" => Ok(Scheme::Dark),
            other => Err(Error::invalid_argument(format!(
                "the colour scheme must be \"light\" or \"dark\", got {other:?}"
            ))),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Light => "light",
            Scheme::Dark => "dark",
        }
    }
}

/// View server configuration (a JSON object; every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The scheme at start: `"light"` (default) or `"dark"`.
    #[serde(default)]
    pub color_scheme: Option<String>,
    /// The settings every loopback server shares (`maxBodyBytes`, default
    /// 4 MiB: the largest `invoke`; `keepAliveMs`; `http`). The view server
    /// keeps no MCP sessions: `sessionGraceMs` and `maxSessions` are
    /// refused, as are unknown keys.
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
        loopback::config::parse(json, "view server")
    }
}

/// One open event stream of a page.
struct Stream {
    plugin: String,
    key: PageKey,
    tx: mpsc::Sender<String>,
}

/// State shared by the routes and the host listener.
pub(crate) struct State {
    host: Arc<PluginHost>,
    logger: Arc<Logger>,
    policy: Policy,
    caps: Capabilities,
    scheme: Mutex<Scheme>,
    streams: Mutex<Vec<Stream>>,
    keep_alive: Duration,
}

/// One SSE frame.
fn frame(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl State {
    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.policy.port)
    }

    fn url_of(&self, page: &pages::Page) -> Result<String> {
        let cap = self.caps.of(&page.plugin, &page.key)?;
        Ok(format!(
            "http://127.0.0.1:{}{}",
            self.policy.port,
            pages::page_path(&cap, &page.entry)
        ))
    }

    fn views_json(&self) -> Result<Value> {
        let mut views = Vec::new();
        let mut panels = Vec::new();
        for page in pages::current(&self.host) {
            let v = pages::page_json(&page, &self.url_of(&page)?);
            match page.key {
                PageKey::View(_) => views.push(v),
                PageKey::Panel => panels.push(v),
            }
        }
        Ok(json!({
            "url": self.base_url(),
            "views": views,
            "panels": panels,
            "colorScheme": lock(&self.scheme).as_str(),
        }))
    }

    /// Opens an event stream for a page, or refuses when too many are open.
    fn open_stream(&self, plugin: &str, key: &PageKey) -> Option<mpsc::Receiver<String>> {
        let mut streams = lock(&self.streams);
        streams.retain(|s| !s.tx.is_closed());
        if streams.len() >= MAX_STREAMS {
            return None;
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let scheme = lock(&self.scheme).as_str();
        let _ = tx.try_send(frame("ready", &json!({"colorScheme": scheme})));
        streams.push(Stream {
            plugin: plugin.to_string(),
            key: key.clone(),
            tx,
        });
        Some(rx)
    }

    /// Sends `text` to the streams `pick` selects.
    fn broadcast(&self, text: &str, pick: impl Fn(&Stream) -> bool) {
        let mut dropped = 0usize;
        {
            let mut streams = lock(&self.streams);
            streams.retain(|s| !s.tx.is_closed());
            for s in streams.iter().filter(|s| pick(s)) {
                if s.tx.try_send(text.to_string()).is_err() {
                    dropped += 1;
                }
            }
        }
        if dropped > 0 {
            self.logger.warn(|| {
                format!("views: {dropped} page stream(s) too slow; a message was dropped")
            });
        }
    }

    fn set_scheme(&self, scheme: Scheme) {
        let changed = {
            let mut s = lock(&self.scheme);
            let changed = *s != scheme;
            *s = scheme;
            changed
        };
        if changed {
            let text = frame("scheme", &json!({"colorScheme": scheme.as_str()}));
            self.broadcast(&text, |_| true);
        }
    }

    /// Ends the streams of pages that are no longer served.
    fn prune_streams(&self) {
        let current = pages::current(&self.host);
        lock(&self.streams).retain(|s| {
            current
                .iter()
                .any(|p| p.plugin == s.plugin && p.key == s.key)
        });
    }
}

/// Forwards host events to the server (held weakly by the host).
struct Listener(Weak<State>);

impl HostListener for Listener {
    fn event(&self, event: &PluginEvent) {
        let Some(state) = self.0.upgrade() else {
            return;
        };
        match event {
            PluginEvent::UiPush {
                plugin,
                channel,
                payload,
            } => {
                let text = frame("push", &json!({"channel": channel, "payload": payload}));
                state.broadcast(&text, |s| &s.plugin == plugin);
            }
            PluginEvent::Disabled { .. } => state.prune_streams(),
            _ => {}
        }
    }

    fn plugins_changed(&self) {
        if let Some(state) = self.0.upgrade() {
            state.prune_streams();
        }
    }

    fn decorate_request(&self, plugin: &str, capability: &str, params: &mut Value) {
        if capability != "show_notification" {
            return;
        }
        let Some(state) = self.0.upgrade() else {
            return;
        };
        let Some(view_id) = params
            .get("viewId")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        let key = PageKey::View(view_id.clone());
        let Some(page) = pages::find(&state.host, plugin, &key) else {
            return;
        };
        let (Ok(url), Value::Object(map)) = (state.url_of(&page), params) else {
            return;
        };
        map.insert(
            "view".into(),
            json!({
                "id": view_id,
                "title": page.title.clone().unwrap_or_else(|| view_id.clone()),
                "url": url,
            }),
        );
    }
}

struct Running {
    runtime: Arc<RuntimeRef>,
    server: loopback::Server,
    _listener: Arc<Listener>,
}

/// The view server of one plugin host. Dropping it stops it.
pub struct ViewServer {
    state: Arc<State>,
    running: Mutex<Option<Running>>,
}

impl ViewServer {
    /// Binds `127.0.0.1` on a free port and serves the pages of `host`'s
    /// enabled plugins; log lines go to `logger`.
    pub fn start(host: Arc<PluginHost>, config: Config, logger: Arc<Logger>) -> Result<ViewServer> {
        let loopback::ServerSettings {
            max_body_bytes,
            keep_alive,
            limits,
            ..
        } = config
            .server
            .settings_without_sessions(DEFAULT_MAX_BODY_BYTES)?;
        let scheme = match config.color_scheme.as_deref() {
            None => Scheme::Light,
            Some(s) => Scheme::parse(s)?,
        };
        let (std_listener, port) = loopback::bind_loopback()?;
        let rt = runtime::acquire()?;
        let handle = rt.handle().clone();
        let _enter = handle.enter();
        let state = Arc::new(State {
            host: host.clone(),
            logger: logger.clone(),
            policy: Policy {
                // Unused: pages authenticate by capability, not bearer.
                token: String::new(),
                port,
                origin: OriginPolicy::SameOrigin,
                max_body_bytes,
            },
            caps: Capabilities::default(),
            scheme: Mutex::new(scheme),
            streams: Mutex::new(Vec::new()),
            keep_alive,
        });
        let app = routes::router(state.clone());
        let server = loopback::serve(std_listener, app, limits, logger.clone())?;
        let listener = Arc::new(Listener(Arc::downgrade(&state)));
        let weak: Weak<dyn HostListener> =
            Arc::downgrade(&(listener.clone() as Arc<dyn HostListener>));
        host.add_listener(weak);
        logger.info(|| format!("view server on http://127.0.0.1:{port}/"));
        drop(_enter);
        Ok(ViewServer {
            state,
            running: Mutex::new(Some(Running {
                runtime: rt,
                server,
                _listener: listener,
            })),
        })
    }

    fn check_running(&self) -> Result<()> {
        if lock(&self.running).is_some() {
            Ok(())
        } else {
            Err(Error::not_running())
        }
    }

    pub fn is_running(&self) -> bool {
        lock(&self.running).is_some()
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.state.policy.port
    }

    /// `{"url","views":[…],"panels":[…],"colorScheme"}` (see the FFI docs).
    pub fn views_json(&self) -> Result<Value> {
        self.check_running()?;
        self.state.views_json()
    }

    /// The URL of view `view_id` of `plugin` (`None`: its `ui` panel);
    /// `NotFound` for an unknown or disabled plugin or page.
    pub fn view_url(&self, plugin: &str, view_id: Option<&str>) -> Result<String> {
        self.check_running()?;
        let key = match view_id {
            Some(v) => PageKey::View(v.to_string()),
            None => PageKey::Panel,
        };
        let page = pages::find(&self.state.host, plugin, &key).ok_or_else(|| {
            let what = match view_id {
                Some(v) => format!("view {v:?}"),
                None => "ui panel".to_string(),
            };
            let why = if self.state.host.manifest(plugin).is_none() {
                format!("no plugin with id {plugin:?} is installed")
            } else if !self.state.host.is_enabled(plugin) {
                format!("plugin {plugin:?} is disabled")
            } else {
                format!("plugin {plugin:?} declares no {what}")
            };
            Error::new(Status::NotFound, why)
        })?;
        self.state.url_of(&page)
    }

    /// Sets the scheme and tells every open page whose scheme changes.
    pub fn set_color_scheme(&self, scheme: Scheme) {
        self.state.set_scheme(scheme);
    }

    pub fn color_scheme(&self) -> Scheme {
        *lock(&self.state.scheme)
    }

    /// Ends every page stream, closes the sockets and returns when done.
    pub fn stop(&self) -> Result<()> {
        let Some(r) = lock(&self.running).take() else {
            return Err(Error::not_running());
        };
        lock(&self.state.streams).clear();
        if !crate::runtime::may_block() {
            r.server.abort();
        } else {
            let server = r.server;
            r.runtime.handle().block_on(async move {
                server.shutdown(Duration::from_secs(2)).await;
            });
        }
        self.state
            .logger
            .info(|| format!("view server stopped (port {})", self.state.policy.port));
        drop(r.runtime);
        Ok(())
    }
}

impl Drop for ViewServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
