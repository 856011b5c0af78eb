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
//! Implemented today: Linux and macOS (`unix/`, shared POSIX code, with
//! what only one of them has in `unix/linux.rs` — parent death signal, the
//! `/proc` scan, `pipe2`, `close_range`, `MSG_CMSG_CLOEXEC` — or in
//! `unix/macos.rs` — a kqueue `EVFILT_PROC` parent watch, the
//! `proc_listallpids`/`sysctl(KERN_PROCARGS2)` scan, `SO_NOSIGPIPE`, and
//! `fcntl` after `pipe` — both reached as `unix::os`). The macOS code is
//! compiled and linted for `aarch64-apple-darwin` and `x86_64-apple-darwin`
//! but not run; its portable part (the `KERN_PROCARGS2` parser) is tested
//! on Linux.
//!
//! Windows (`windows/`): handles instead of fds behind the same
//! opaque types ([`process::ChannelEnd`], [`process::PipeReader`],
//! [`event::RawEventHandle`]), named pipes behind [`ipc`], a Job Object
//! (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`) behind the process group,
//! owner-only ACLs behind the private modes, `CreateProcessW` with the
//! C-runtime fd table in `STARTUPINFO.lpReserved2` for Node's channel, and a
//! retrying rename (antivirus and indexers hold files briefly) behind
//! [`fs::replace`]. Its unit tests run under Wine on Linux.
//!
//! Any other target stops at the `compile_error!` below (another Unix at the
//! one in `unix/mod.rs`), so the build of an unported platform names this
//! module first.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

#[cfg(not(any(unix, windows)))]
compile_error!(
    "qwen-companion has no OS layer for this target yet: only Unix (Linux, macOS) and Windows \
     are implemented in src/sys. Add src/sys/<os>/ exporting the same modules as src/sys/unix/ \
     and select it in src/sys/mod.rs."
);

pub use imp::{env, event, fs, io, ipc, mem, process, thread};

mod exit;
pub(crate) use exit::at_exit;
pub mod platform;

/// A request to end or pause processes. On Windows, `Terminate` and `Kill`
/// both end the process (a plugin's whole Job Object for a group), and
/// `Stop` is not available (it does nothing there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to exit (SIGTERM).
    Terminate,
    /// End at once (SIGKILL).
    Kill,
    /// Pause, so the process cannot fork while we look (SIGSTOP).
    Stop,
}

/// What one dial without waiting found at a local socket path (a UNIX
/// socket, or a named pipe on Windows): `ipc::dial_once`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dial {
    /// Something accepted (or its backlog is full, or every pipe instance
    /// is busy).
    Answered,
    /// Nothing listens there (no such file or pipe, or refused).
    NobodyThere,
    /// Anything else (no permission, path too long, a file where a pipe
    /// was expected, …).
    Unknown,
}

/// What to run as a plugin's Node child: `process::spawn_with_channel`.
#[derive(Debug, Clone)]
pub struct ChannelCommand {
    pub program: std::ffi::OsString,
    pub args: Vec<std::ffi::OsString>,
    pub cwd: std::path::PathBuf,
    /// The complete environment (nothing is inherited); the channel
    /// variables are added here.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// A started child with its channel and output pipes:
/// `process::spawn_with_channel`.
#[derive(Debug)]
pub struct ChannelChild {
    pub process: process::Process,
    pub channel: process::ChannelEnd,
    pub stdout: process::PipeReader,
    pub stderr: process::PipeReader,
}

/// What tells a changed file from an unchanged one: identity, size,
/// modification time and, where the OS keeps one (not Windows), the
/// status-change time (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    id: fs::FileId,
    size: u64,
    modified_ns: i128,
    changed_ns: Option<i128>,
}

impl FileVersion {
    /// The version of the file at `path`, `meta` being its metadata.
    pub fn of(path: &std::path::Path, meta: &std::fs::Metadata) -> FileVersion {
        imp::fs::file_version(path, meta)
    }
    pub fn id(&self) -> fs::FileId {
        self.id
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn modified_ns(&self) -> i128 {
        self.modified_ns
    }
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
