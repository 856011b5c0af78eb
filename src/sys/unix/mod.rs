//! The POSIX implementation of [`crate::sys`], shared by Linux and macOS.
//! What only one of them has lives in `linux.rs` or `macos.rs`; both export
//! the same functions and are reached as `os::…`.

pub mod env;
pub mod event;
pub mod exit;
pub mod fs;
pub mod io;
pub mod ipc;
pub mod mem;
pub mod process;
pub mod thread;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;

// The `KERN_PROCARGS2` layout parser is portable: tested on every Unix.
#[cfg(any(target_os = "macos", test))]
mod procargs;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!(
    "qwen-companion's Unix layer knows Linux and macOS only: add src/sys/unix/<os>.rs exporting \
     the functions of linux.rs and select it in src/sys/unix/mod.rs."
);

#[cfg(all(test, target_os = "linux"))]
mod tests;
