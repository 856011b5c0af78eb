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

mod breaker;
mod calls;
mod capability;
mod config;
mod events;
mod instance;
mod state;
mod store;

pub(crate) use crate::shared::sync::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result, Status};
use crate::host::{LogFn, Slot};
use crate::plugins::manifest::Manifest;
use crate::plugins::process::Spawner;
use crate::runtime;

pub use calls::{CallOptions, ParsedDocument, ToolOutput};
pub use capability::{CapabilityFn, HostAnswer, HostRequest};
pub use config::Config;
pub(crate) use config::Settings;
pub(crate) use events::Counters;
pub use events::{CallError, ErrorKind, EventSink, HostListener, PluginEvent, SlowDown};
use state::{files_id, FilesId};
pub(crate) use state::{PluginSlot, Shared};
pub use store::{DirStore, PluginStore, StoredPlugin};

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
        let handler_set = handler.is_some();
        let old = {
            let mut caps = lock(&self.shared.capabilities);
            match handler {
                Some(h) => caps.insert(name.to_string(), h),
                None => caps.remove(name),
            }
        };
        let changed = old.is_some() != handler_set;
        if old.is_some() {
            capability::fail_capability(
                &self.shared,
                name,
                "the host removed its handler for this capability",
            );
        }
        drop(old);
        if changed && name.starts_with(capability::EDITOR_PREFIX) {
            // The plugin MCP server lists the editor's tools it offers.
            self.shared.plugins_changed();
        }
    }

    /// Whether the embedding host registered a handler for `capability`.
    pub fn offers(&self, capability: &str) -> bool {
        lock(&self.shared.capabilities).contains_key(capability)
    }

    /// Asks the embedding host's handler of `capability` on behalf of Qwen
    /// Code (no plugin: the request's `plugin` is `None`), as the plugin
    /// MCP server does for the editor's tools. The answer, or why there is
    /// none (no handler, timeout after `hostRequestTimeoutMs`, shutdown).
    /// Dropping the future gives the request up.
    pub async fn ask(&self, capability: &str, params: Value) -> std::result::Result<Value, String> {
        capability::ask(&self.shared, None, capability, params, None).await
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
