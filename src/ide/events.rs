//! Pull-mode events: for hosts that must not be called on a foreign thread
//! (LuaJIT, some UI toolkits), requests are queued instead of calling the
//! callbacks. The host watches a pipe that is readable while events wait,
//! pulls them as JSON and answers requests by id.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::{Error, Result, Status};
use crate::sys::event::{EventHandle, RawEventHandle};

/// The host's answer to a request: `Ok(text)` or `Err(message)`.
pub type Answer = std::result::Result<Option<String>, String>;

/// Most events that may wait; a request beyond it is answered with an error.
const MAX_QUEUED: usize = 1024;

pub struct EventQueue {
    queue: VecDeque<Value>,
    pending: HashMap<u64, oneshot::Sender<Answer>>,
    next_id: u64,
    handle: EventHandle,
}

impl EventQueue {
    pub fn new() -> Result<EventQueue> {
        let handle = EventHandle::new().map_err(|e| Error::io("pipe2", e))?;
        Ok(EventQueue {
            queue: VecDeque::new(),
            pending: HashMap::new(),
            next_id: 1,
            handle,
        })
    }

    /// The fd the host watches for readability.
    pub fn fd(&self) -> RawEventHandle {
        self.handle.raw()
    }

    fn signal(&self) {
        self.handle.signal();
    }

    fn drain(&self) {
        self.handle.drain();
    }

    /// Queues a notification-like event (no answer expected).
    pub fn push(&mut self, event: Value) -> bool {
        if self.queue.len() >= MAX_QUEUED {
            return false;
        }
        self.queue.push_back(event);
        self.signal();
        true
    }

    /// Queues a request; the returned receiver yields the host's answer.
    /// `event` gets an `"id"` field.
    pub fn request(
        &mut self,
        mut event: Value,
    ) -> std::result::Result<oneshot::Receiver<Answer>, String> {
        if self.queue.len() >= MAX_QUEUED {
            return Err("the IDE is not reading its events".into());
        }
        let id = self.next_id;
        self.next_id += 1;
        if let Value::Object(m) = &mut event {
            m.insert("id".into(), Value::from(id));
        }
        let (tx, rx) = oneshot::channel();
        self.pending.insert(id, tx);
        self.queue.push_back(event);
        self.signal();
        Ok(rx)
    }

    /// Takes the next event, if any. Requests whose requester gave up (timed
    /// out, or the companion is stopping) are skipped: nobody waits for them.
    pub fn pop(&mut self) -> Option<Value> {
        let e = loop {
            let Some(e) = self.queue.pop_front() else {
                break None;
            };
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
