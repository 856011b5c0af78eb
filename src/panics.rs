//! Panics stay quiet: the library prints nothing, not even a panic message.
//!
//! Every `qc_` body runs behind `catch_unwind`, and callback and runtime
//! threads catch their jobs' panics too, but Rust's default panic hook would
//! still print `thread '…' panicked at …` to the host's stderr before the
//! unwind is caught. So the first library object (a logger is made for
//! every companion and participant) or the first `qc_` call installs, once
//! per process, a hook chained in front of whatever hook was set before:
//!
//! * a panic on a thread that is currently inside a library entry point (a
//!   thread-local depth counter) or on a library-owned thread (named `qc-*`:
//!   the runtime workers `qc-rt`, the callback threads `qc-cb`) is recorded:
//!   its message goes to the log callback of every live library object at
//!   level error (except a panic inside a log callback itself), and to the
//!   `char **error` of the call that caught it; nothing is printed;
//! * every other panic (the host's own threads, outside a `qc_` call) is
//!   passed to the previous hook unchanged.
//!
//! The hook never blocks: it only takes locks with `try_lock`, so a panic
//! raised while such a lock is held loses the log line, not the process.
//! A host that installs its own hook later replaces this one (Rust has one
//! hook per process); library panics then reach the host's hook.

use std::cell::{Cell, RefCell};
use std::sync::{Mutex, Once, Weak};

/// What a [`crate::host::Logger`] registers so that a panic reaches its log
/// callback.
pub(crate) trait PanicSink: Send + Sync {
    fn panicked(&self, message: &str);
}

static INSTALL: Once = Once::new();
static SINKS: Mutex<Vec<Weak<dyn PanicSink>>> = Mutex::new(Vec::new());

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
    static IN_LOG_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Runs a host log callback. A panic inside it is not logged again (that
/// would run the same callback, which would panic again, forever).
pub(crate) fn run_log_callback(f: impl FnOnce()) {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            let was = self.0;
            let _ = IN_LOG_CALLBACK.try_with(|c| c.set(was));
        }
    }
    let _reset = Reset(
        IN_LOG_CALLBACK
            .try_with(|c| c.replace(true))
            .unwrap_or(false),
    );
    f();
}

/// Installs the hook (once per process; later calls do nothing).
pub fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !is_library_context() {
                previous(info);
                return;
            }
            let payload = info.payload();
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let place = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let thread = std::thread::current();
            let message = format!(
                "panic in the library (thread {}): {what}{place}",
                thread.name().unwrap_or("unnamed")
            );
            let _ = LAST.try_with(|l| {
                if let Ok(mut l) = l.try_borrow_mut() {
                    *l = Some(message.clone());
                }
            });
            if IN_LOG_CALLBACK.try_with(Cell::get).unwrap_or(false) {
                return;
            }
            let sinks: Vec<_> = match SINKS.try_lock() {
                Ok(s) => s.iter().filter_map(Weak::upgrade).collect(),
                Err(_) => Vec::new(),
            };
            for s in sinks {
                s.panicked(&message);
            }
        }));
    });
}

/// Whether the current thread is inside a library entry point or is one of
/// the library's own threads.
pub fn is_library_context() -> bool {
    DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
        || std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("qc-"))
}

/// Marks the current thread as inside a library entry point until dropped
/// (nests). Installs the hook if it is not yet installed.
pub struct Boundary {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Boundary {
    pub fn enter() -> Boundary {
        install();
        let _ = DEPTH.try_with(|d| d.set(d.get() + 1));
        Boundary {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Boundary {
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The message of the last panic recorded on this thread, taken.
pub fn take_last() -> Option<String> {
    LAST.try_with(|l| l.try_borrow_mut().ok().and_then(|mut l| l.take()))
        .ok()
        .flatten()
}

/// Registers a sink for panic messages (held weakly: a dropped sink is
/// skipped and swept) and installs the hook.
pub(crate) fn register(sink: Weak<dyn PanicSink>) {
    install();
    let mut sinks = SINKS.lock().unwrap_or_else(|p| p.into_inner());
    sinks.retain(|s| s.strong_count() > 0);
    sinks.push(sink);
}
