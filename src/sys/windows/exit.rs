//! Registration of the exit trampoline with the C runtime.

extern "C" {
    // The C runtime's `atexit` (msvcrt / ucrt), which the `libc` crate does
    // not declare for every Windows target.
    fn atexit(cb: extern "C" fn()) -> std::os::raw::c_int;
}

/// Has the C runtime call `hook` at normal process exit (for a DLL: when
/// the DLL is unloaded or the process exits).
pub fn register(hook: extern "C" fn()) {
    // SAFETY: registers a plain function that never unwinds (the trampoline
    // catches panics).
    unsafe {
        atexit(hook);
    }
}
