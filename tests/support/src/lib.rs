//! Helpers shared by every integration test binary of qwen-companion
//! (`tests/<feature>/main.rs`), so that each helper exists once:
//!
//! - [`TempDir`]: a private temporary directory removed on drop;
//! - [`wait_until`]: a readiness poll with a deadline (returns as soon as the
//!   condition holds) for state the tests cannot be told about directly;
//! - [`mcp`]: a strict MCP-over-HTTP client (raw HTTP/1.1, SSE reader);
//! - [`sessions`]: participant configs, a fake inbox, raw frames, and the
//!   C ABI string helpers;
//! - [`plugins`]: a plugins directory builder, an in-memory plugin store, a
//!   host with short timeouts, and process-liveness checks.

pub mod mcp;
pub mod plugins;
pub mod sessions;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A private temporary directory (from `tempfile`), removed on drop. Its
/// path is canonical and short (`$TMPDIR/qc-<tag>-XXXXXX`), so Unix socket
/// paths built under it stay within the platform's limit.
pub struct TempDir {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("qc-{tag}-"))
            .tempdir()
            .unwrap();
        let path = plain(dir.path().canonicalize().unwrap());
        TempDir { path, _dir: dir }
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Writes `contents` to `name` in the directory; returns the file's path.
    pub fn file(&self, name: &str, contents: &str) -> String {
        let p = self.path.join(name);
        std::fs::write(&p, contents).unwrap();
        p.to_string_lossy().into_owned()
    }
}

/// `path` without the `\\?\` prefix Windows' canonical paths carry when
/// what follows is an ordinary drive path (`\\?\C:\…` -> `C:\…`): the
/// form users and the CLI see, and one in which `/` also separates.
pub fn plain(path: PathBuf) -> PathBuf {
    let s = path.to_string_lossy();
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => path,
    }
}

/// Polls `f` until it holds (returning true at once) or `timeout` passes
/// (returning `f()`'s last answer). For state the test cannot wait on
/// directly (a file appearing, a process exiting, a counter reached).
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

/// Waits at most `timeout_ms` for the pull-mode event handle of a
/// `qc_*_enable_events` to be signalled: a readable descriptor on Unix
/// (`poll`), an event `HANDLE` on Windows (the `int32_t` sign-extended,
/// `WaitForSingleObject`). It may return early or at the timeout; callers
/// pull the queue after it either way.
pub fn wait_event_handle(handle: i32, timeout_ms: u32) {
    #[cfg(unix)]
    {
        let mut p = libc::pollfd {
            fd: handle,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on our stack, count 1.
        unsafe { libc::poll(&mut p, 1, timeout_ms.min(i32::MAX as u32) as i32) };
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::Threading::WaitForSingleObject;
        // SAFETY: waiting on the library's event handle, which stays open
        // while the object that handed it out is alive (the caller's).
        unsafe {
            WaitForSingleObject(
                handle as isize as windows_sys::Win32::Foundation::HANDLE,
                timeout_ms,
            )
        };
    }
}

/// Whether this test runs under Wine (its ntdll exports `wine_get_version`,
/// which Windows' does not), for the few checks where Wine is known to
/// behave unlike Windows; each caller says how. Always false off Windows.
pub fn under_wine() -> bool {
    // Windows only: the question is about the Windows ntdll.
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: ntdll is loaded in every process; both names are
        // NUL-terminated; the module handle is not owned (not freed).
        unsafe {
            let m = GetModuleHandleW(ntdll.as_ptr());
            !m.is_null() && GetProcAddress(m, c"wine_get_version".as_ptr().cast()).is_some()
        }
    }
    #[cfg(not(windows))]
    {
        false
    }
}

/// The repository's root (where `Cargo.toml` of the library is).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}
