//! The client side of the socket protocol: the short dial probe that tells
//! a live inbox from a stale socket file, and writing one connection's worth
//! of lines (auth line + frame in one write, half-close, wait for the peer
//! to close).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::sys::platform::IpcKind;

/// How long a sender waits for the receiving inbox to close the connection.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most frames this process writes at once; more fail with `EBUSY`.
pub(crate) const MAX_CONCURRENT_SENDS: usize = 64;

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Qwen's `isLocalIpcPath` on this platform (see [`is_local_ipc_path_in`]).
pub fn is_local_ipc_path(p: &str) -> bool {
    is_local_ipc_path_in(p, crate::sys::platform::IPC_KIND)
}

/// Qwen's `isLocalIpcPath`: non-empty, no NUL, and for UNIX sockets an
/// absolute path not starting with `//`; for named pipes `\\.\pipe\…` or
/// `\\?\pipe\…` once `/` is read as `\`, in any case.
pub fn is_local_ipc_path_in(p: &str, kind: IpcKind) -> bool {
    if p.is_empty() || p.contains('\0') {
        return false;
    }
    match kind {
        IpcKind::UnixSockets => !p.starts_with("//") && p.starts_with('/'),
        IpcKind::NamedPipes => {
            let n = p.replace('/', "\\").to_lowercase();
            n.starts_with("\\\\.\\pipe\\") || n.starts_with("\\\\?\\pipe\\")
        }
    }
}

/// What a dial says about a socket path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Something accepted (or the backlog is full: `EAGAIN`/`EBUSY`).
    Alive,
    /// `ENOENT` or `ECONNREFUSED`: nothing listens there.
    Dead,
    /// Anything else; treated as "maybe alive" when binding, as unreachable when listing.
    Unknown,
}

/// Dials `path` once without blocking. A UNIX-domain connect answers at once
/// (success, `EAGAIN` on a full backlog, or an error), so no timer is needed
/// for the 250 ms bound Qwen puts on its probe.
pub fn probe(path: &str) -> Verdict {
    if !is_local_ipc_path(path) {
        return Verdict::Unknown;
    }
    match crate::sys::ipc::dial_once(path) {
        crate::sys::ipc::Dial::Answered => Verdict::Alive,
        crate::sys::ipc::Dial::NobodyThere => Verdict::Dead,
        crate::sys::ipc::Dial::Unknown => Verdict::Unknown,
    }
}

/// Why a frame could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendError {
    /// errno name (`ENOENT`, `ECONNREFUSED`, `EAGAIN`, `EBUSY`, `EMSGSIZE`,
    /// `ETIMEDOUT`, …) or `None` for a refusal before any connection.
    pub code: Option<&'static str>,
    pub message: String,
}

impl SendError {
    /// Nothing reached the peer: the frame can be treated as never sent.
    pub fn definitely_unwritten(&self) -> bool {
        matches!(
            self.code,
            None | Some("ENOENT")
                | Some("ECONNREFUSED")
                | Some("EMSGSIZE")
                | Some("EAGAIN")
                | Some("EBUSY")
        )
    }
}

use crate::sys::io::errno_name;

struct InFlight;
impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Connects to `path`, writes the auth line (when a token is given) and the
/// frame line in one write, half-closes, and waits (at most `timeout`) for
/// the peer to close its side.
pub async fn send_lines(
    path: &str,
    auth: Option<&str>,
    frame_json: &str,
    timeout: Duration,
) -> Result<(), SendError> {
    if !is_local_ipc_path(path) {
        return Err(SendError {
            code: None,
            message: format!("refusing to connect to a non-local IPC path: {path:?}"),
        });
    }
    if IN_FLIGHT.fetch_add(1, Ordering::AcqRel) >= MAX_CONCURRENT_SENDS {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        return Err(SendError {
            code: Some("EBUSY"),
            message: format!(
                "already writing {MAX_CONCURRENT_SENDS} frames; not opening another connection"
            ),
        });
    }
    let _guard = InFlight;
    let mut payload = String::with_capacity(frame_json.len() + 160);
    if let Some(token) = auth {
        payload.push_str(&super::frames::auth_line(token));
    }
    payload.push_str(frame_json);
    payload.push('\n');
    let io = async {
        let mut stream = crate::sys::ipc::connect(Path::new(path)).await?;
        stream.write_all(payload.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 512];
        loop {
            if stream.read(&mut sink).await? == 0 {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    match tokio::time::timeout(timeout, io).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(SendError {
            code: errno_name(&e),
            message: format!("{path}: {e}"),
        }),
        Err(_) => Err(SendError {
            code: Some("ETIMEDOUT"),
            message: format!("timed out sending to {path}"),
        }),
    }
}

#[cfg(test)]
mod tests;
