//! The operating-system layer: the single module to edit when porting the
//! library to a new platform.
//!
//! Everything that depends on the OS — file modes and owners, atomic
//! replace, file locks, file identity, the home directory, spawning a
//! plugin's Node child with its IPC channel, process groups, liveness and the
//! scan for leftover processes, local sockets, the pull-mode event handle and
//! the `atexit` hook — is reached through this module, and the rest of the
//! crate never sees a `cfg` for an OS or a call into `libc`.
//!
//! The layout follows the usual `sys` pattern (Rust's own `std::sys`, mio,
//! wasmtime): one `cfg` switch below selects a per-OS module, and every
//! per-OS module exports the same names (`fs`, `env`, `process`, `ipc`,
//! `event`, `exit`, `mem`, `thread`, `io`). The portable types shared by all
//! of them ([`ExitInfo`], [`Signal`]) live here.
//!
//! Implemented today: Windows (`windows/`) and Linux (`unix/`, with the Linux-only parts — parent
//! death signal, the `/proc` scan, `pipe2`, `close_range`,
//! `MSG_CMSG_CLOEXEC` — in `unix/linux.rs`). The interface is shaped for
//! the next two:
//! - macOS goes into `unix/` next to `linux.rs`: a parent watch
//!   (kqueue `EVFILT_PROC`/`NOTE_EXIT`) instead of the parent death signal,
//!   `proc_listallpids`/`sysctl(KERN_PROCARGS2)` for the process scan,
//!   `SO_NOSIGPIPE` on sockets, `pipe` + `fcntl` instead of `pipe2`.
//! - Windows gets its own `windows/`: handles instead of fds behind the same
//!   opaque types ([`process::ChannelEnd`], [`process::PipeReader`],
//!   [`event::RawEventHandle`]), named pipes behind [`ipc`], a Job Object
//!   (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`) behind the process group,
//!   owner-only ACLs behind the private modes, `CreateProcessW` with the
//!   C-runtime fd table in `STARTUPINFO.lpReserved2` for Node's channel, and a
//!   retrying rename (antivirus and indexers hold files briefly) behind
//!   [`fs::replace`].
//!
//! Any other target stops at the `compile_error!` below, so the build of an
//! unported platform fails in this module only.

#[cfg(target_os = "linux")]
mod unix;
#[cfg(target_os = "linux")]
use unix as imp;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

#[cfg(not(any(target_os = "linux", windows)))]
compile_error!(
    "qwen-companion has no OS layer for this target yet: only Linux and Windows are implemented in src/sys. \
     Add src/sys/<os>/ exporting the same modules as src/sys/unix/ and select it in src/sys/mod.rs."
);
// Still compiled on an unported target, so that the crate's other modules
// resolve every `sys::` name and the only errors are the ones in here.
#[cfg(not(any(target_os = "linux", windows)))]
mod unix;
#[cfg(not(any(target_os = "linux", windows)))]
use unix as imp;

pub use imp::{env, event, fs, io, ipc, mem, process, thread};

mod exit;
pub(crate) use exit::at_exit;
pub mod platform;

/// A request to end or pause processes. On Windows, `Terminate` and `Kill`
/// both end the Job Object and `Stop` suspends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to exit (SIGTERM).
    Terminate,
    /// End at once (SIGKILL).
    Kill,
    /// Pause, so the process cannot fork while we look (SIGSTOP).
    Stop,
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that killed it (POSIX only; always `None` on Windows).
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s} ({})", process::signal_name(s)),
            _ => write!(f, "unknown exit status"),
        }
    }
}

#[cfg(test)]
mod tests;
