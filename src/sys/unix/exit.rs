//! Registration of the exit trampoline with the C runtime.

/// Has the C runtime call `hook` at normal process exit.
pub fn register(hook: extern "C" fn()) {
    // SAFETY: registers a plain function that never unwinds (the trampoline
    // catches panics).
    unsafe {
        libc::atexit(hook);
    }
}
