//! How a library object reaches its host — one design for the IDE
//! companion, the cross-session participant and the plugin host.
//!
//! Every object owns one [`HostLink`]: a callback thread ([`Dispatcher`])
//! that runs the host's callbacks one at a time, in order, never on a runtime
//! thread and never under a library lock; and, once the host asks for it,
//! pull mode ([`PullQueue`]): nothing of the host's is called any more,
//! events and requests wait in a queue, an OS event handle (today a pipe's
//! read end) is readable while they do, and the host pulls them as JSON and
//! answers requests by id.
//!
//! ## Bounds and policies (push and pull alike)
//! | what | bound | past it |
//! |---|---|---|
//! | events and requests | [`dispatch::MAX_QUEUED_JOBS`] waiting callbacks, [`pull::MAX_QUEUED`] pulled events | an event is dropped (logged, counted as `refused`); a request is answered with an error at once |
//! | `ui_push` (newest per plugin and channel matters) | coalesced: one waiting entry per key, [`dispatch::MAX_LATEST_KEYS`] keys, [`dispatch::MAX_LATEST_BYTES`] bytes | the plugin's reader stops reading that plugin's socket until the host takes some (backpressure; other plugins are not held up) |
//! | answers to the host's own calls (`_call_async`) | the host's calls | — |
//! | log lines | [`dispatch::MAX_PENDING_LOGS`] | dropped, counted as `droppedLogs` |
//!
//! Messages, receipts and held changes of the participant, and the
//! companion's diff requests, are bounded before they get here (the inbox
//! gate, the open-diff cap).

pub mod dispatch;
pub mod lanes;
pub mod pull;

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::oneshot;

pub use dispatch::{Dispatcher, QueueStats};
pub use lanes::Push;
pub use pull::PullQueue;

use crate::error::{Error, Result, Status};
use crate::host::Logger;
use crate::shared::sync::lock;

/// The host's answer to a pulled request: `Ok(text)` or `Err(message)`.
pub type Answer = std::result::Result<Option<String>, String>;

/// A host callback taking one JSON event.
pub type EventFn = dyn Fn(&Value) + Send + Sync;

/// The way from one library object to its host (see the module docs).
pub struct HostLink {
    dispatcher: Arc<Dispatcher>,
    logger: Arc<Logger>,
    /// Shared with the log sink of [`HostLink::enable_log_events`].
    pull: Arc<Mutex<Option<PullQueue>>>,
    /// Woken when the host pulls an event (pull-mode room for producers).
    pulled: tokio::sync::Notify,
}

impl HostLink {
    /// Starts the object's callback thread (`qc-cb`).
    pub fn new() -> Result<HostLink> {
        let dispatcher = Arc::new(
            Dispatcher::new("qc-cb")
                .map_err(|e| Error::io("cannot start the callback thread", e))?,
        );
        Ok(HostLink {
            logger: Arc::new(Logger::new(dispatcher.clone())),
            dispatcher,
            pull: Arc::new(Mutex::new(None)),
            pulled: tokio::sync::Notify::new(),
        })
    }

    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// The object's logger (its log callback, on the callback thread).
    pub fn logger(&self) -> &Arc<Logger> {
        &self.logger
    }

    /// True when called on this object's callback thread.
    pub fn on_callback_thread(&self) -> bool {
        self.dispatcher.is_current_thread()
    }

    /// Switches to pull mode (again: no change) and returns the handle the
    /// host watches; it stays valid while the object lives.
    pub fn enable_pull(&self) -> Result<crate::sys::event::RawEventHandle> {
        let mut pull = lock(&self.pull);
        if pull.is_none() {
            *pull = Some(PullQueue::new()?);
        }
        Ok(pull.as_ref().expect("just set").fd())
    }

    /// In pull mode, delivers the object's log lines up to `max_level` as
    /// pulled events `{"type":"log","level":1..5,"message":"…"}` (replacing
    /// a log callback); `None` turns them off. They wait under their own cap
    /// ([`pull::MAX_LOGS`], oldest first dropped and counted), so they never
    /// crowd out the object's own events. Refused outside pull mode.
    pub fn enable_log_events(&self, max_level: Option<crate::host::LogLevel>) -> Result<()> {
        if !self.pulling() {
            return Err(Self::not_pulling());
        }
        let Some(max) = max_level else {
            self.logger.set(None);
            return Ok(());
        };
        let pull = Arc::downgrade(&self.pull);
        let sink: crate::host::LogFn = Arc::new(move |level, message: &str| {
            if let Some(pull) = pull.upgrade() {
                if let Some(q) = lock(&pull).as_mut() {
                    q.push_log(json!({"type": "log", "level": level as u32, "message": message}));
                }
            }
        });
        self.logger.set(Some((sink, max)));
        Ok(())
    }

    /// True in pull mode.
    pub fn pulling(&self) -> bool {
        lock(&self.pull).is_some()
    }

    fn not_pulling() -> Error {
        Error::new(Status::Refused, "pull mode is not enabled")
    }

    /// The next pulled event (`None` when none waits); requests whose
    /// requester gave up are skipped. Refused outside pull mode.
    pub fn next_event(&self) -> Result<Option<Value>> {
        let event = {
            let mut pull = lock(&self.pull);
            let q = pull.as_mut().ok_or_else(Self::not_pulling)?;
            q.prune();
            q.pop()
        };
        if event.is_some() {
            self.pulled.notify_waiters();
        }
        Ok(event)
    }

    /// Answers pulled request `id`. Refused outside pull mode.
    pub fn respond(&self, id: u64, answer: Answer) -> Result<()> {
        lock(&self.pull)
            .as_mut()
            .ok_or_else(Self::not_pulling)?
            .respond(id, answer)
    }

    /// Delivers an event: queued in pull mode, else `cb` runs with it on the
    /// callback thread (nothing when `cb` is `None`). False (and logged) when
    /// the event was dropped because the host is not taking its events.
    pub fn notify(&self, event: Value, cb: Option<Arc<EventFn>>) -> bool {
        let delivered = match lock(&self.pull).as_mut() {
            Some(q) => q.push(event),
            None => match cb {
                Some(cb) => self.dispatcher.post(move || cb(&event)),
                None => true,
            },
        };
        if !delivered {
            self.logger
                .warn(|| "the host is not taking its events: an event was dropped".into());
        }
        delivered
    }

    /// Delivers an event of which only the newest per `key` matters (see
    /// [`notify`](Self::notify)); [`Push::Full`] asks the producer to await
    /// [`room`](Self::room) before producing more.
    pub fn notify_latest(&self, key: String, event: Value, cb: Option<Arc<EventFn>>) -> Push {
        // The size is what the event costs while it waits, about its JSON length.
        let bytes = approx_size(&event);
        match lock(&self.pull).as_mut() {
            Some(q) => q.push_latest(key, bytes, event),
            None => match cb {
                Some(cb) => self.dispatcher.post_latest(key, bytes, move || cb(&event)),
                None => Push::Taken,
            },
        }
    }

    /// Resolves once coalesced events are within their bounds again.
    pub async fn room(&self) {
        loop {
            let pulled = self.pulled.notified();
            match lock(&self.pull).as_ref() {
                Some(q) if !q.has_room() => {}
                Some(_) => return,
                None => break,
            }
            pulled.await;
        }
        self.dispatcher.room().await
    }

    /// In pull mode, queues a request (`event` gains an `"id"`) and gives the
    /// receiver of its answer, or the reason it was refused at once. `None`
    /// outside pull mode (the caller asks through a callback instead).
    pub fn pull_request(
        &self,
        event: Value,
    ) -> Option<std::result::Result<oneshot::Receiver<Answer>, String>> {
        let mut pull = lock(&self.pull);
        let q = pull.as_mut()?;
        q.prune();
        Some(q.request(event))
    }

    /// The counters of both queues: `{"waiting","coalesced","refused",
    /// "droppedLogs"}` of the callback thread, plus `"pulled"` (the same
    /// without `droppedLogs`) in pull mode.
    pub fn stats(&self) -> Value {
        let mut v = self.dispatcher.stats().to_json();
        if let Some(q) = lock(&self.pull).as_ref() {
            let s = q.stats();
            v["pulled"] = json!({"waiting": q.len(), "coalesced": s.coalesced,
                "refused": s.refused, "droppedLogs": q.dropped_logs()});
        }
        v
    }

    /// Ends the callback thread after the queued callbacks ran (see
    /// [`Dispatcher::shutdown`]).
    pub fn shutdown(&self) {
        self.dispatcher.shutdown();
        self.pulled.notify_waiters();
    }
}

/// About the bytes `v` holds (its JSON length), without serialising it.
fn approx_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(approx_size).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| k.len() + 3 + approx_size(v))
                .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests;
