//! Pull mode: for hosts that must not be called on a foreign thread
//! (LuaJIT, some UI toolkits), events and requests are queued instead of
//! calling the callbacks. The host watches a pipe that is readable while
//! events wait, pulls them as JSON and answers requests by id.
//!
//! The queue has the same bounds and policies as the callback thread's
//! ([`super::lanes`]): at most [`MAX_QUEUED`] events and requests wait (past
//! it an event is dropped and a request refused at once), and notifications
//! of which only the newest matters are coalesced by key.

use std::collections::HashMap;

use serde_json::Value;
use tokio::sync::oneshot;

use super::lanes::{Lanes, Limits, Push};
use super::Answer;
use crate::error::{Error, Result, Status};
use crate::sys::event::{EventHandle, RawEventHandle};

/// Most events and requests that may wait; past it an event is dropped and a
/// request refused.
pub const MAX_QUEUED: usize = 1024;
/// Most log events (`{"type":"log"}`) that may wait; past it the oldest
/// waiting one is dropped (and counted) for the new one.
pub const MAX_LOGS: usize = 256;

pub struct PullQueue {
    queue: Lanes<Value>,
    /// Log events, in their own bounded queue; each has a place marker in
    /// `queue` (a `{"type":"log"}` stub without a message) so that events
    /// and log lines keep their order.
    logs: std::collections::VecDeque<Value>,
    dropped_logs: u64,
    pending: HashMap<u64, oneshot::Sender<Answer>>,
    next_id: u64,
    handle: EventHandle,
}

impl PullQueue {
    pub fn new() -> Result<PullQueue> {
        let handle = EventHandle::new().map_err(|e| Error::io("pipe2", e))?;
        Ok(PullQueue {
            queue: Lanes::new(Limits {
                max_kept: MAX_QUEUED,
                max_keys: super::dispatch::MAX_LATEST_KEYS,
                max_key_bytes: super::dispatch::MAX_LATEST_BYTES,
            }),
            logs: std::collections::VecDeque::new(),
            dropped_logs: 0,
            pending: HashMap::new(),
            next_id: 1,
            handle,
        })
    }

    /// The handle the host watches for readability.
    pub fn fd(&self) -> RawEventHandle {
        self.handle.raw()
    }

    fn signal(&self) {
        self.handle.signal();
    }

    fn drain(&self) {
        self.handle.drain();
    }

    /// Queues a notification-like event (no answer expected); false when
    /// [`MAX_QUEUED`] wait.
    pub fn push(&mut self, event: Value) -> bool {
        if self.queue.push_kept(event).is_err() {
            return false;
        }
        self.signal();
        true
    }

    /// Queues a log event under [`MAX_LOGS`]: past it the oldest waiting log
    /// line is dropped (and counted) to make room.
    pub fn push_log(&mut self, event: Value) {
        if self.logs.len() >= MAX_LOGS {
            self.logs.pop_front();
            self.dropped_logs += 1;
        } else {
            self.queue.push_owed(Value::Null);
        }
        self.logs.push_back(event);
        self.signal();
    }

    /// Log lines dropped because [`MAX_LOGS`] were waiting.
    pub fn dropped_logs(&self) -> u64 {
        self.dropped_logs
    }

    /// Queues a notification of which only the newest per `key` matters (see
    /// [`super::lanes`]).
    pub fn push_latest(&mut self, key: String, bytes: usize, event: Value) -> Push {
        let push = self.queue.push_latest(key, bytes, event);
        self.signal();
        push
    }

    /// True while coalesced notifications are within their bounds.
    pub fn has_room(&self) -> bool {
        self.queue.has_room()
    }

    /// The queue's counters.
    pub fn stats(&self) -> super::lanes::Stats {
        self.queue.stats()
    }

    /// Events waiting now.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues a request; the returned receiver yields the host's answer.
    /// `event` gets an `"id"` field.
    pub fn request(
        &mut self,
        mut event: Value,
    ) -> std::result::Result<oneshot::Receiver<Answer>, String> {
        let id = self.next_id;
        if let Value::Object(m) = &mut event {
            m.insert("id".into(), Value::from(id));
        }
        if self.queue.push_kept(event).is_err() {
            return Err("the IDE is not reading its events".into());
        }
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        self.pending.insert(id, tx);
        self.signal();
        Ok(rx)
    }

    /// Takes the next event, if any. Requests whose requester gave up (timed
    /// out, or the companion is stopping) are skipped: nobody waits for them.
    pub fn pop(&mut self) -> Option<Value> {
        let e = loop {
            let Some(e) = self.queue.pop() else {
                break None;
            };
            // A log line's place marker: the oldest waiting log line.
            if e.is_null() {
                match self.logs.pop_front() {
                    Some(log) => break Some(log),
                    None => continue,
                }
            }
            match e.get("id").and_then(Value::as_u64) {
                Some(id) if self.pending.get(&id).is_none_or(|tx| tx.is_closed()) => {
                    self.pending.remove(&id);
                }
                _ => break Some(e),
            }
        };
        if self.queue.is_empty() {
            self.drain();
        }
        e
    }

    /// Answers request `id`.
    pub fn respond(&mut self, id: u64, answer: Answer) -> Result<()> {
        let gone = || {
            Error::new(
                Status::NotFound,
                format!(
                    "no pending request with id {id} (already answered, timed out or cancelled)"
                ),
            )
        };
        let tx = self.pending.remove(&id).ok_or_else(gone)?;
        tx.send(answer).map_err(|_| gone())
    }

    /// Forgets requests whose requester gave up.
    pub fn prune(&mut self) {
        self.pending.retain(|_, tx| !tx.is_closed());
    }
}
