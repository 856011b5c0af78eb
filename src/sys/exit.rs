//! Process-exit hooks. The C runtime's `atexit` takes a C function pointer,
//! so the one `extern "C"` trampoline lives here; the parts of the library
//! register plain Rust functions through [`at_exit`]. The registration
//! itself is per-OS (`exit::register` of the selected implementation).

use std::sync::Mutex;

pub(super) static HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());
static REGISTERED: std::sync::Once = std::sync::Once::new();

/// Runs `hook` when the process exits normally (`exit()` or a return from
/// `main`), after hooks registered before it. Registering the same function
/// twice runs it once. A hook must not block: it runs on the exiting thread
/// with the rest of the process still alive; a panic in it is caught.
pub(crate) fn at_exit(hook: fn()) {
    REGISTERED.call_once(|| super::imp::exit::register(run_hooks));
    let mut hooks = HOOKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !hooks.iter().any(|h| std::ptr::fn_addr_eq(*h, hook)) {
        hooks.push(hook);
    }
}

extern "C" fn run_hooks() {
    let _ = std::panic::catch_unwind(|| {
        // Another thread holding the list at exit time: skip rather than
        // deadlock the exiting process.
        let hooks = match HOOKS.try_lock() {
            Ok(g) => g.clone(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().clone(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        for hook in hooks {
            let _ = std::panic::catch_unwind(hook);
        }
    });
}
