//! The callback thread: one per library object, running host callbacks.
//!
//! Host callbacks never run on runtime threads and never while a library lock
//! is held: jobs are queued here and executed one at a time, in order, on the
//! `qc-cb` thread. A host may call back into the library from inside a
//! callback, including stopping or freeing the object that owns the thread.
//!
//! The queue is bounded (see [`super::lanes`] and the bounds below), so a
//! host whose callback blocks (a busy UI thread, an unread pipe) costs the
//! library a bounded amount of memory:
//! - [`post`](Dispatcher::post): events and requests; at most
//!   [`MAX_QUEUED_JOBS`] wait, one more is refused (`false`) and the producer
//!   answers or counts it.
//! - [`post_owed`](Dispatcher::post_owed): answers to calls the host made
//!   itself (`_call_async` completions): bounded by the host's own calls,
//!   never refused while the thread runs.
//! - [`post_latest`](Dispatcher::post_latest): notifications where only the
//!   newest matters (a plugin's `ui_push` per channel), coalesced by key; past
//!   [`MAX_LATEST_KEYS`] keys or [`MAX_LATEST_BYTES`] bytes the producer is
//!   told to wait for [`room`](Dispatcher::room).
//! - [`post_log`](Dispatcher::post_log): at most [`MAX_PENDING_LOGS`] log
//!   lines wait; newer ones are dropped and counted.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{JoinHandle, ThreadId};

use super::lanes::{Lanes, Limits, Push};
use crate::shared::sync::lock;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Most events and requests that may wait for the callback thread.
pub const MAX_QUEUED_JOBS: usize = 4096;
/// Most log lines that may wait for the callback thread; more are dropped.
pub const MAX_PENDING_LOGS: usize = 4096;
/// Most distinct coalescing keys (plugin and channel) that may wait.
pub const MAX_LATEST_KEYS: usize = 256;
/// Most bytes of coalesced notifications that may wait.
pub const MAX_LATEST_BYTES: usize = 8 * 1024 * 1024;

struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the dispatcher shuts down.
    ready: Condvar,
    /// Woken whenever the thread takes a job (room may have been made).
    room: tokio::sync::Notify,
    dropped_logs: AtomicU64,
    pending_logs: AtomicUsize,
}

struct State {
    lanes: Lanes<Job>,
    open: bool,
}

/// Counters of one callback queue, for the host's `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Jobs waiting now.
    pub waiting: usize,
    /// Notifications replaced by a newer one with the same key.
    pub coalesced: u64,
    /// Events and requests refused because the queue was full.
    pub refused: u64,
    /// Log lines dropped because too many were waiting.
    pub dropped_logs: u64,
}

impl QueueStats {
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "waiting": self.waiting,
            "coalesced": self.coalesced,
            "refused": self.refused,
            "droppedLogs": self.dropped_logs,
        })
    }
}

pub struct Dispatcher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl Dispatcher {
    pub fn new(name: &str) -> std::io::Result<Dispatcher> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                lanes: Lanes::new(Limits {
                    max_kept: MAX_QUEUED_JOBS,
                    max_keys: MAX_LATEST_KEYS,
                    max_key_bytes: MAX_LATEST_BYTES,
                }),
                open: true,
            }),
            ready: Condvar::new(),
            room: tokio::sync::Notify::new(),
            dropped_logs: AtomicU64::new(0),
            pending_logs: AtomicUsize::new(0),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(&worker))?;
        Ok(Dispatcher {
            shared,
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues through `f` under the state lock and wakes the thread; false
    /// when shut down, when `f` refused, or (with `no_wait`) when the lock
    /// was busy.
    fn push_with(&self, no_wait: bool, f: impl FnOnce(&mut Lanes<Job>) -> bool) -> bool {
        let mut st = if no_wait {
            match self.shared.state.try_lock() {
                Ok(st) => st,
                Err(_) => return false,
            }
        } else {
            lock(&self.shared.state)
        };
        if !st.open {
            return false;
        }
        let queued = f(&mut st.lanes);
        drop(st);
        if queued {
            self.shared.ready.notify_one();
        }
        queued
    }

    fn push(&self, f: impl FnOnce(&mut Lanes<Job>) -> bool) -> bool {
        self.push_with(false, f)
    }

    /// Queues an event or request. False when [`MAX_QUEUED_JOBS`] wait (the
    /// host is not taking its callbacks) or the dispatcher is shut down.
    pub fn post(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.push(|l| l.push_kept(Box::new(job)).is_ok())
    }

    /// Queues the answer to a call the host made itself (never refused for
    /// room: the host bounds these by its own calls). False when shut down.
    pub fn post_owed(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.push(|l| {
            l.push_owed(Box::new(job));
            true
        })
    }

    /// Queues a notification of which only the newest per `key` matters; a
    /// waiting one with the same key is replaced. `Push::Full` asks the
    /// producer to wait for [`room`](Self::room) before producing more (the
    /// job is queued either way, unless the dispatcher is shut down).
    pub fn post_latest(
        &self,
        key: String,
        bytes: usize,
        job: impl FnOnce() + Send + 'static,
    ) -> Push {
        let mut push = Push::Taken;
        self.push(|l| {
            push = l.push_latest(key, bytes, Box::new(job));
            true
        });
        push
    }

    /// Resolves once coalesced notifications are back within their bounds
    /// (at once if they are, or if the dispatcher is shut down).
    pub async fn room(&self) {
        loop {
            let notified = self.shared.room.notified();
            {
                let st = lock(&self.shared.state);
                if !st.open || st.lanes.has_room() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Queues a log job unless too many are already waiting.
    pub fn post_log(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.post_log_with(job, false)
    }

    /// As [`post_log`](Self::post_log), but gives up instead of waiting for
    /// the queue's lock (for the panic hook, which must never block).
    pub fn try_post_log(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.post_log_with(job, true)
    }

    fn post_log_with(&self, job: impl FnOnce() + Send + 'static, no_wait: bool) -> bool {
        let shared = &self.shared;
        if shared.pending_logs.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING_LOGS {
            shared.pending_logs.fetch_sub(1, Ordering::AcqRel);
            shared.dropped_logs.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let pending = shared.clone();
        let job: Job = Box::new(move || {
            pending.pending_logs.fetch_sub(1, Ordering::AcqRel);
            job();
        });
        // Log lines are bounded by their own counter, not by MAX_QUEUED_JOBS.
        let posted = self.push_with(no_wait, |l| {
            l.push_owed(job);
            true
        });
        if !posted {
            shared.pending_logs.fetch_sub(1, Ordering::AcqRel);
        }
        posted
    }

    /// Runs `f` on the callback thread (as an event or request, see
    /// [`post`](Self::post)) and gives its result back. `None` when it could
    /// not be queued (full, or shut down); the receiver yields an error if
    /// the dispatcher shut down before running it.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<R>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.post(move || {
            let _ = tx.send(f());
        })
        .then_some(rx)
    }

    pub fn is_current_thread(&self) -> bool {
        std::thread::current().id() == self.thread_id
    }

    /// The queue's counters.
    pub fn stats(&self) -> QueueStats {
        let st = lock(&self.shared.state);
        let lanes = st.lanes.stats();
        QueueStats {
            waiting: st.lanes.len(),
            coalesced: lanes.coalesced,
            refused: lanes.refused,
            dropped_logs: self.shared.dropped_logs.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting jobs, lets queued ones run, and joins the thread
    /// (unless called from the thread itself, which then ends after the
    /// current callback returns).
    pub fn shutdown(&self) {
        lock(&self.shared.state).open = false;
        self.shared.ready.notify_all();
        self.shared.room.notify_waiters();
        let handle = lock(&self.thread).take();
        if let Some(handle) = handle {
            if !self.is_current_thread() {
                let _ = handle.join();
            }
        }
    }
}

/// The callback thread's loop: runs jobs in order until shut down and drained.
fn run(shared: &Shared) {
    loop {
        let job = {
            let mut st = lock(&shared.state);
            loop {
                if let Some(job) = st.lanes.pop() {
                    break Some(job);
                }
                if !st.open {
                    break None;
                }
                st = shared.ready.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        let Some(job) = job else {
            return;
        };
        shared.room.notify_waiters();
        // A panicking Rust-side callback must not take the thread down.
        let _ = catch_unwind(AssertUnwindSafe(job));
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;
