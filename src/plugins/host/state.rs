//! The host's state shared by its entry points and background tasks:
//! [`PluginSlot`] (one installed plugin: its stored entry, breaker, file
//! identity, running instance and counters) and [`Shared`] (settings,
//! runtime, store, slots, sinks, listeners, capability handlers).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::instance::Instance;
use super::{
    lock, CallError, CapabilityFn, Counters, ErrorKind, EventSink, HostListener, PluginEvent,
    PluginStore, Settings, SlowDown, StoredPlugin,
};
use crate::host::{LogLevel, Slot};
use crate::plugins::manifest::Manifest;
use crate::plugins::process::Spawner;
use crate::runtime::RuntimeRef;
use crate::sys::fs::{FileId, FileVersion};

/// The host's record of one plugin.
pub(crate) struct PluginSlot {
    pub id: String,
    pub(super) entry: Mutex<StoredPlugin>,
    /// Set by the crash-loop breaker.
    pub(super) breaker: Mutex<Option<String>>,
    /// Identity of the plugin's files when last loaded.
    pub(super) files: Mutex<Option<FilesId>>,
    pub(super) crashes: Mutex<VecDeque<Instant>>,
    /// The last failure: the breaker's reason, an unexpected exit or a
    /// failed start (message, unix ms).
    pub(super) last_error: Mutex<Option<(String, u64)>>,
    /// The running instance; the async lock serialises starts.
    pub instance: Arc<tokio::sync::Mutex<Option<Arc<Instance>>>>,
    pub counters: Counters,
}

/// (root folder identity, main file identity, its size and mtime in ns).
pub(super) type FilesId = (FileId, FileId, u64, i128);

pub(super) fn files_id(m: &Manifest) -> Option<FilesId> {
    let root = std::fs::metadata(&m.root).ok()?;
    let main = FileVersion::of(&m.main_path, &std::fs::metadata(&m.main_path).ok()?);
    Some((
        FileId::of(&m.root, &root),
        main.id(),
        main.size(),
        main.modified_ns(),
    ))
}

impl PluginSlot {
    pub(super) fn new(entry: StoredPlugin) -> PluginSlot {
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
}

type LogSinkFn = dyn Fn(LogLevel, &str) + Send + Sync;
type HostAnswerTx = tokio::sync::oneshot::Sender<std::result::Result<Value, String>>;

pub(crate) struct Shared {
    pub settings: Settings,
    /// The `requestId`s of calls.
    pub request_ids: crate::shared::rand::IdSequence,
    pub rt: Arc<RuntimeRef>,
    pub spawner: Spawner,
    pub(super) store: Arc<dyn PluginStore>,
    pub(super) plugins: Mutex<HashMap<String, Arc<PluginSlot>>>,
    pub(super) sink: Slot<EventSink>,
    pub(super) listeners: Mutex<Vec<std::sync::Weak<dyn HostListener>>>,
    pub(super) log: Slot<LogSinkFn>,
    pub capabilities: Mutex<HashMap<String, Arc<CapabilityFn>>>,
    /// Requests waiting for `respond`, with their capability.
    pub host_requests: Mutex<HashMap<u64, (String, HostAnswerTx)>>,
    pub next_host_request: AtomicU64,
    /// Cancelled on shutdown: waiting host requests are answered at once.
    pub closing: CancellationToken,
    /// `startup_finished()` was called: background plugins are restarted.
    pub(super) started_up: std::sync::atomic::AtomicBool,
    /// The views and panels of the enabled plugins when last told (to emit
    /// [`PluginEvent::ViewsChanged`] only on a change).
    pub(super) views_seen: Mutex<Vec<String>>,
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
    pub(super) fn listeners(&self) -> Vec<Arc<dyn HostListener>> {
        let mut list = lock(&self.listeners);
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(std::sync::Weak::upgrade).collect()
    }
    pub(super) fn plugins_changed(&self) {
        for l in self.listeners() {
            l.plugins_changed();
        }
        self.views_maybe_changed();
    }
    /// One line per view and panel of every plugin that may run.
    pub(super) fn views_signature(&self) -> Vec<String> {
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
    pub(super) fn views_maybe_changed(&self) {
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
    pub(super) fn slots(&self) -> Vec<Arc<PluginSlot>> {
        lock(&self.plugins).values().cloned().collect()
    }
}
