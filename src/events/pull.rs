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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use serde_json::Value;
use tokio::sync::oneshot;

use super::lanes::{Lanes, Limits, Push};
use super::Answer;
use crate::error::{Error, Result, Status};

/// Most events and requests that may wait; past it an event is dropped and a
/// request refused.
pub const MAX_QUEUED: usize = 1024;

pub struct PullQueue {
    queue: Lanes<Value>,
    pending: HashMap<u64, oneshot::Sender<Answer>>,
    next_id: u64,
    read: OwnedFd,
    write: OwnedFd,
}

impl PullQueue {
    pub fn new() -> Result<PullQueue> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(Error::io("pipe2", std::io::Error::last_os_error()));
        }
        // SAFETY: both fds were just created and are owned here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(PullQueue {
            queue: Lanes::new(Limits {
                max_kept: MAX_QUEUED,
                max_keys: super::dispatch::MAX_LATEST_KEYS,
                max_key_bytes: super::dispatch::MAX_LATEST_BYTES,
            }),
            pending: HashMap::new(),
            next_id: 1,
            read,
            write,
        })
    }

    /// The fd the host watches for readability.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    fn signal(&self) {
        let b = [1u8];
        // SAFETY: writing one byte to our own non-blocking pipe; a full pipe is fine
        // (it is readable already).
        unsafe { libc::write(self.write.as_raw_fd(), b.as_ptr() as *const libc::c_void, 1) };
    }

    fn drain(&self) {
        let mut buf = [0u8; 256];
        // SAFETY: reading into a local buffer from our own non-blocking pipe.
        while unsafe {
            libc::read(
                self.read.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        } > 0
        {}
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
