//! One dedicated thread per library object that runs host callbacks.
//!
//! Host callbacks never run on runtime threads and never while a library lock
//! is held: jobs are queued here and executed one at a time, in order, on the
//! `qc-cb` thread. A host may call back into the library from inside a
//! callback, including stopping or freeing the object that owns the thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Most log lines that may wait for the callback thread; more are dropped.
const MAX_PENDING_LOGS: usize = 4096;

pub struct Dispatcher {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
    pending_logs: Arc<AtomicUsize>,
}

impl Dispatcher {
    pub fn new(name: &str) -> std::io::Result<Dispatcher> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    // A panicking Rust-side callback must not take the thread down.
                    let _ = catch_unwind(AssertUnwindSafe(job));
                }
            })?;
        Ok(Dispatcher {
            tx: Mutex::new(Some(tx)),
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
            pending_logs: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Queues a job. Returns false when the dispatcher is shut down.
    pub fn post(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match tx.as_ref() {
            Some(tx) => tx.send(Box::new(job)).is_ok(),
            None => false,
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
        if self.pending_logs.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING_LOGS {
            self.pending_logs.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let pending = self.pending_logs.clone();
        let job: Job = Box::new(move || {
            pending.fetch_sub(1, Ordering::AcqRel);
            job();
        });
        let posted = if no_wait {
            match self.tx.try_lock() {
                Ok(tx) => tx.as_ref().is_some_and(|tx| tx.send(job).is_ok()),
                Err(_) => false,
            }
        } else {
            self.post(job)
        };
        if !posted {
            self.pending_logs.fetch_sub(1, Ordering::AcqRel);
        }
        posted
    }

    /// Runs `f` on the callback thread and gives its result back.
    /// The receiver yields an error if the dispatcher shut down first.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::sync::oneshot::Receiver<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.post(move || {
            let _ = tx.send(f());
        });
        rx
    }

    pub fn is_current_thread(&self) -> bool {
        std::thread::current().id() == self.thread_id
    }

    /// Stops accepting jobs, lets queued ones run, and joins the thread
    /// (unless called from the thread itself, which then ends after the
    /// current callback returns).
    pub fn shutdown(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            if !self.is_current_thread() {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}
