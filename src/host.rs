//! Host-facing callback slots and the per-object logger.

use std::sync::{Arc, RwLock};

use crate::dispatch::Dispatcher;

/// Log levels as passed to the host's log callback.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

pub type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// A slot holding an optional host callback. Reading clones the `Arc` so the
/// callback runs with no lock held.
pub struct Slot<T: ?Sized>(RwLock<Option<Arc<T>>>);

impl<T: ?Sized> Default for Slot<T> {
    fn default() -> Self {
        Slot(RwLock::new(None))
    }
}

impl<T: ?Sized> Slot<T> {
    pub fn set(&self, value: Option<Arc<T>>) {
        let old = {
            let mut guard = self.0.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *guard, value)
        };
        // The old callback (and its user-data finalizer) is dropped here, outside the lock.
        drop(old);
    }
    pub fn get(&self) -> Option<Arc<T>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Sends log lines to the host's log callback on the callback thread.
/// Nothing is ever printed by the library itself.
pub struct Logger {
    sink: RwLock<Option<(LogFn, LogLevel)>>,
    dispatcher: Arc<Dispatcher>,
}

impl Logger {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Logger {
        Logger {
            sink: RwLock::new(None),
            dispatcher,
        }
    }

    pub fn set(&self, sink: Option<(LogFn, LogLevel)>) {
        let old = {
            let mut guard = self.sink.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *guard, sink)
        };
        drop(old);
    }

    pub fn log(&self, level: LogLevel, message: impl FnOnce() -> String) {
        let sink = {
            let guard = self.sink.read().unwrap_or_else(|p| p.into_inner());
            match &*guard {
                Some((f, max)) if level <= *max => f.clone(),
                _ => return,
            }
        };
        let message = message();
        self.dispatcher.post_log(move || sink(level, &message));
    }

    pub fn error(&self, m: impl FnOnce() -> String) {
        self.log(LogLevel::Error, m)
    }
    pub fn warn(&self, m: impl FnOnce() -> String) {
        self.log(LogLevel::Warn, m)
    }
    pub fn info(&self, m: impl FnOnce() -> String) {
        self.log(LogLevel::Info, m)
    }
    pub fn debug(&self, m: impl FnOnce() -> String) {
        self.log(LogLevel::Debug, m)
    }
}
