//! Host-facing callback slots and the per-object logger.

use std::sync::{Arc, RwLock};

use crate::events::Dispatcher;

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
/// Nothing is ever printed by the library itself; a panic caught inside the
/// library is logged here too (see [`crate::panics`]).
pub struct Logger {
    inner: Arc<LoggerInner>,
}

struct LoggerInner {
    sink: RwLock<Option<(LogFn, LogLevel)>>,
    dispatcher: Arc<Dispatcher>,
}

impl crate::panics::PanicSink for LoggerInner {
    fn panicked(&self, message: &str) {
        // Never blocks: the panic may have happened under one of these locks.
        let sink = match self.sink.try_read() {
            Ok(guard) => match &*guard {
                Some((f, max)) if LogLevel::Error <= *max => f.clone(),
                _ => return,
            },
            Err(_) => return,
        };
        let message = message.to_string();
        self.dispatcher.try_post_log(move || {
            crate::panics::run_log_callback(|| sink(LogLevel::Error, &message))
        });
    }
}

impl Logger {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Logger {
        let inner = Arc::new(LoggerInner {
            sink: RwLock::new(None),
            dispatcher,
        });
        let weak: std::sync::Weak<dyn crate::panics::PanicSink> =
            Arc::downgrade(&inner) as std::sync::Weak<dyn crate::panics::PanicSink>;
        crate::panics::register(weak);
        Logger { inner }
    }

    pub fn set(&self, sink: Option<(LogFn, LogLevel)>) {
        let old = {
            let mut guard = self.inner.sink.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *guard, sink)
        };
        drop(old);
    }

    pub fn log(&self, level: LogLevel, message: impl FnOnce() -> String) {
        let sink = {
            let guard = self.inner.sink.read().unwrap_or_else(|p| p.into_inner());
            match &*guard {
                Some((f, max)) if level <= *max => f.clone(),
                _ => return,
            }
        };
        let message = message();
        self.inner
            .dispatcher
            .post_log(move || crate::panics::run_log_callback(|| sink(level, &message)));
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
