//! The inbox: choosing and binding the UNIX socket as Qwen Code does
//! (candidates, 103-byte limit, 0700 directory, 0600 socket, the sibling
//! name when the PID name is taken), sweeping orphaned sockets, and serving
//! connections on the library's runtime (30 s line deadline, 64 connections,
//! auth line first, 1 MiB UTF-16 line cap).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::controllers::Controller;
use super::frames::{parse_auth_line, parse_frame, Frame, LineReader};
use super::net::{is_local_ipc_path, is_local_ipc_path_in, probe, Verdict};
use super::proc::is_pid_alive;
use crate::shared::rand::random_hex;
use crate::sys;
use crate::sys::ipc::StdLocalListener as StdUnixListener;
use crate::sys::ipc::{LocalListener as UnixListener, LocalStream as UnixStream};
use crate::sys::platform::IpcKind;

/// Longest socket path (bytes) we bind; `sun_path` holds 104/108 with the NUL.
pub(crate) const MAX_SOCKET_PATH_BYTES: usize = 103;
/// Most connections served at once; more are closed at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// A connection must complete a line within this (re-armed by the auth line
/// and by each parseable frame); controller grants are re-checked this often.
pub(crate) const LINE_DEADLINE: Duration = Duration::from_secs(30);
/// Directory name under `$XDG_RUNTIME_DIR`, and prefix of nonce directories.
pub(crate) const SOCKET_DIR_NAME: &str = "qwen-socks";
/// An empty nonce directory younger than this is not swept.
const EMPTY_DIR_GRACE: Duration = Duration::from_secs(60);

/// The socket paths to try, in order: `$XDG_RUNTIME_DIR/qwen-socks/<pid>.sock`,
/// `$TMPDIR/qwen-socks-<nonce>/<pid>.sock`, `/tmp/qwen-socks-<nonce>/<pid>.sock`
/// (duplicates and paths over 103 bytes removed). `nonce` is 16 random hex
/// chars per process in Qwen; per inbox here.
pub fn candidates(
    pid: u64,
    runtime_dir: Option<&Path>,
    tmp_dir: Option<&Path>,
    nonce: &str,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(rt) = runtime_dir.filter(|p| !p.as_os_str().is_empty()) {
        out.push(rt.join(SOCKET_DIR_NAME).join(format!("{pid}.sock")));
    }
    let tmp = tmp_dir
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| {
            let s = p.to_string_lossy();
            let trimmed = s.trim_end_matches('/');
            PathBuf::from(if trimmed.is_empty() { "/" } else { trimmed })
        })
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    out.push(
        tmp.join(format!("{SOCKET_DIR_NAME}-{nonce}"))
            .join(format!("{pid}.sock")),
    );
    out.push(
        PathBuf::from("/tmp")
            .join(format!("{SOCKET_DIR_NAME}-{nonce}"))
            .join(format!("{pid}.sock")),
    );
    let mut seen = Vec::new();
    out.retain(|p| {
        let ok = p.as_os_str().len() <= MAX_SOCKET_PATH_BYTES && !seen.contains(p);
        seen.push(p.clone());
        ok
    });
    out
}

/// Longest pipe name (characters) we bind; Windows allows 256.
pub(crate) const MAX_PIPE_NAME_CHARS: usize = 256;

/// The automatic inbox where the transport is named pipes (Windows):
/// `\\.\pipe\qwen-socks-<nonce>-<pid>`. Qwen Code itself has no automatic
/// inbox there (its records carry no `ipcPath`); ours is a pipe that any
/// sender accepting named-pipe paths (Qwen's included) can reach. A pipe has
/// no directory, no mode and nothing to sweep.
pub fn pipe_candidate(pid: u64, nonce: &str) -> PathBuf {
    PathBuf::from(format!("\\\\.\\pipe\\{SOCKET_DIR_NAME}-{nonce}-{pid}"))
}

/// The automatic inbox paths to try for the transport `kind`: [`candidates`]
/// for UNIX sockets, the one [`pipe_candidate`] for named pipes.
pub fn automatic_candidates(
    kind: IpcKind,
    pid: u64,
    runtime_dir: Option<&Path>,
    tmp_dir: Option<&Path>,
    nonce: &str,
) -> Vec<PathBuf> {
    match kind {
        IpcKind::UnixSockets => candidates(pid, runtime_dir, tmp_dir, nonce),
        IpcKind::NamedPipes => vec![pipe_candidate(pid, nonce)],
    }
}

/// Checks a pipe name before binding it: Qwen's named-pipe rule and the
/// 256-character limit.
pub fn check_pipe_name(name: &str) -> Result<(), String> {
    if !is_local_ipc_path_in(name, IpcKind::NamedPipes) {
        return Err(format!("refusing to bind a non-local IPC path: {name}"));
    }
    if name.chars().count() > MAX_PIPE_NAME_CHARS {
        return Err(format!(
            "{name} is longer than {MAX_PIPE_NAME_CHARS} characters"
        ));
    }
    Ok(())
}

/// `<name>-<8 hex>`, the pipe to try when `name` is taken.
fn pipe_sibling(name: &str) -> Result<String, String> {
    let s = format!("{name}-{}", random_hex(4).map_err(|e| e.message)?);
    check_pipe_name(&s)?;
    Ok(s)
}

/// Binds a named pipe (its owner-only security comes from `sys::ipc::bind`);
/// a name in use gives way to a sibling name, as a socket does.
fn bind_pipe(path: &Path) -> Result<Bound, String> {
    let name = path.to_str().ok_or("pipe name is not UTF-8")?;
    check_pipe_name(name)?;
    let mut target = path.to_path_buf();
    let listener = match sys::ipc::bind(&target) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            target = PathBuf::from(pipe_sibling(name)?);
            sys::ipc::bind(&target).map_err(|e| format!("bind {}: {e}", target.display()))?
        }
        Err(e) => return Err(format!("bind {name}: {e}")),
    };
    bound(listener, target, None)
}

fn is_nonce_dir_name(name: &str) -> bool {
    name.strip_prefix(&format!("{SOCKET_DIR_NAME}-"))
        .is_some_and(|n| {
            n.len() == 16
                && n.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// `<pid>(-<8 hex>)?.sock` → pid.
fn socket_file_pid(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".sock")?;
    let (digits, suffix) = match stem.split_once('-') {
        Some((d, s)) => (d, Some(s)),
        None => (stem, None),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if suffix.is_some_and(|s| {
        s.len() != 8
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }) {
        return None;
    }
    digits.parse().ok().filter(|p| *p > 0)
}

/// `<dir>/<pid>-<8 hex>.sock` next to `path`, if it fits (`Ok(None)` when it
/// would not); an error when the OS RNG fails.
fn sibling(path: &Path) -> Result<Option<PathBuf>, String> {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem().and_then(|s| s.to_str())) else {
        return Ok(None);
    };
    let base = stem.split('-').next().unwrap_or(stem);
    let nonce = random_hex(4).map_err(|e| e.message)?;
    let p = dir.join(format!("{base}-{nonce}.sock"));
    Ok((p.as_os_str().len() <= MAX_SOCKET_PATH_BYTES).then_some(p))
}

/// A bound socket.
#[derive(Debug)]
pub struct Bound {
    pub listener: StdUnixListener,
    pub path: PathBuf,
    /// A `qwen-socks-<nonce>` directory we may remove (when empty) at close.
    pub nonce_dir: Option<PathBuf>,
}

fn own_uid() -> sys::fs::OwnerId {
    sys::fs::current_owner()
}

/// Binds one candidate (a named pipe where that is the transport). `explicit` (a configured path) only tightens the
/// directory's mode when we created it or it is one of ours.
pub fn bind_at(path: &Path, explicit: bool) -> Result<Bound, String> {
    if sys::platform::IPC_KIND == IpcKind::NamedPipes {
        return bind_pipe(path);
    }
    let s = path.to_str().ok_or("socket path is not UTF-8")?;
    if !is_local_ipc_path(s) {
        return Err(format!("refusing to bind a non-local IPC path: {s}"));
    }
    if s.len() > MAX_SOCKET_PATH_BYTES {
        return Err(format!("{s} is longer than {MAX_SOCKET_PATH_BYTES} bytes"));
    }
    let dir = path.parent().ok_or("socket path has no directory")?;
    let existed = fs::symlink_metadata(dir).is_ok();
    sys::fs::dir_builder(0o700)
        .recursive(true)
        .create(dir)
        .map_err(|e| format!("create {}: {e}", dir.display()))?;
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ours = dir_name == SOCKET_DIR_NAME || is_nonce_dir_name(dir_name);
    let nonce_dir = is_nonce_dir_name(dir_name).then(|| dir.to_path_buf());
    let cleanup = || {
        if nonce_dir.is_some() || !existed {
            let _ = fs::remove_dir(dir);
        }
    };
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("stat {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        cleanup();
        return Err(format!("{} is not a directory", dir.display()));
    }
    if sys::fs::owner(dir, &meta) != own_uid() {
        cleanup();
        return Err(format!(
            "{} belongs to uid {}, not {}",
            dir.display(),
            sys::fs::owner(dir, &meta),
            own_uid()
        ));
    }
    if !explicit || ours || !existed {
        if let Err(e) = sys::fs::set_mode(dir, 0o700) {
            cleanup();
            return Err(format!("chmod 0700 {}: {e}", dir.display()));
        }
    }
    let mut target = path.to_path_buf();
    if probe(s) != Verdict::Dead {
        match sibling(&target) {
            Ok(Some(p)) => target = p,
            Err(e) => {
                cleanup();
                return Err(format!(
                    "{s} is in use and no sibling name could be made: {e}"
                ));
            }
            Ok(None) => {
                cleanup();
                return Err(format!("{s} is in use and a sibling name would not fit"));
            }
        }
    }
    let _ = fs::remove_file(&target);
    let listener = match sys::ipc::bind(&target) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let p = match sibling(&target) {
                Ok(p) => p,
                Err(e) => {
                    cleanup();
                    return Err(format!(
                        "{} is in use and no sibling name could be made: {e}",
                        target.display()
                    ));
                }
            };
            let Some(p) = p else {
                cleanup();
                return Err(format!(
                    "{} is in use and a sibling name would not fit",
                    target.display()
                ));
            };
            target = p;
            sys::ipc::bind(&target).map_err(|e| {
                cleanup();
                format!("bind {}: {e}", target.display())
            })?
        }
        Err(e) => {
            cleanup();
            return Err(format!("bind {}: {e}", target.display()));
        }
    };
    if let Err(e) = sys::fs::set_mode(&target, 0o600) {
        drop(listener);
        let _ = fs::remove_file(&target);
        cleanup();
        return Err(format!("chmod 0600 {}: {e}", target.display()));
    }
    bound(listener, target, nonce_dir)
}

/// A bound listener made non-blocking, ready for the runtime.
fn bound(
    listener: StdUnixListener,
    path: PathBuf,
    nonce_dir: Option<PathBuf>,
) -> Result<Bound, String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("set_nonblocking: {e}"))?;
    Ok(Bound {
        listener,
        path,
        nonce_dir,
    })
}

/// Tries each candidate in turn; the error lists every attempt.
pub fn bind_first(candidates: &[PathBuf], explicit: bool) -> Result<Bound, String> {
    let mut errors = Vec::new();
    for c in candidates {
        match bind_at(c, explicit) {
            Ok(b) => return Ok(b),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        errors.push("no socket path candidate fits in 103 bytes".into());
    }
    Err(format!(
        "could not bind a peer inbox: {}",
        errors.join("; ")
    ))
}

/// Removes orphaned sockets near a candidate, as Qwen does after binding:
/// in a `qwen-socks` directory, `<pid>.sock` files of dead PIDs that no
/// longer answer; for a `qwen-socks-<nonce>` directory, every sibling nonce
/// directory owned by us whose files are all such sockets (or that is empty
/// and older than a minute).
pub fn sweep_around(candidate: &Path, own_socket: &Path) {
    let Some(dir) = candidate.parent() else {
        return;
    };
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == SOCKET_DIR_NAME {
        sweep_sockets(dir, own_socket);
    } else if is_nonce_dir_name(name) {
        if let Some(parent) = dir.parent() {
            sweep_nonce_dirs(parent, own_socket.parent());
        }
    }
}

fn dead_socket(path: &Path, pid: u64) -> bool {
    !is_pid_alive(pid)
        && path.to_str().is_some_and(|s| probe(s) == Verdict::Dead)
        && !is_pid_alive(pid)
}

fn sweep_sockets(dir: &Path, own: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(socket_file_pid) else {
            continue;
        };
        let path = dir.join(&name);
        if path == own {
            continue;
        }
        if dead_socket(&path, pid) {
            let _ = fs::remove_file(&path);
        }
    }
}

fn sweep_nonce_dirs(parent: &Path, own_dir: Option<&Path>) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(is_nonce_dir_name) {
            continue;
        }
        let dir = parent.join(&name);
        if Some(dir.as_path()) == own_dir {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() || sys::fs::owner(&dir, &meta) != own_uid() {
            continue;
        }
        let Ok(files) =
            fs::read_dir(&dir).map(|r| r.flatten().map(|f| f.file_name()).collect::<Vec<_>>())
        else {
            continue;
        };
        if files.is_empty() {
            let young = meta
                .modified()
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_none_or(|age| age < EMPTY_DIR_GRACE);
            if young {
                continue;
            }
        }
        let all_dead = files.iter().all(|f| {
            f.to_str()
                .and_then(socket_file_pid)
                .is_some_and(|pid| dead_socket(&dir.join(f), pid))
        });
        if !all_dead {
            continue;
        }
        for f in &files {
            let _ = fs::remove_file(dir.join(f));
        }
        let _ = fs::remove_dir(&dir);
    }
}

/// What a connection proved with its auth line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Our record token: an ordinary peer.
    Peer,
    /// A child token we minted for one of our sessions (`slot`).
    Child { slot: u64 },
    /// A controller grant.
    Controller(Controller),
}

/// The participant's side of a connection.
pub trait Handler: Send + Sync + 'static {
    /// Which token kind `token` is, if any (record, child, controller).
    fn authenticate(&self, token: &str) -> Option<Credential>;
    /// Re-checks a controller grant (revoked → `None`).
    fn revalidate(&self, token: &str) -> Option<Credential>;
    /// A parseable frame on an authenticated connection.
    fn on_frame(&self, frame: Frame, cred: &Credential);
}

/// Serves the inbox until `cancel`: at most 64 connections (further ones
/// are closed at once), each on its own task.
pub async fn serve(
    listener: UnixListener,
    handler: Arc<dyn Handler>,
    cancel: CancellationToken,
    deadline: Duration,
) {
    let mut conns: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Full, or a stream that cannot be kept from raising
                    // SIGPIPE (macOS): closed at once.
                    if conns.len() >= MAX_CONNECTIONS || sys::ipc::accepted(&stream).is_err() {
                        drop(stream);
                        continue;
                    }
                    conns.spawn(connection(stream, handler.clone(), cancel.clone(), deadline));
                }
                Err(_) => {
                    // EMFILE and the like: back off instead of spinning.
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                }
            }
        }
    }
    conns.shutdown().await;
}

/// Runs a credential check on the blocking pool: a controller lookup may
/// stat and read `peer-controllers.json`, which must never block a runtime
/// worker (a flood of auth lines would otherwise stall every connection).
/// A check that cannot run (the runtime shutting down) admits nothing.
async fn off_runtime(
    handler: &Arc<dyn Handler>,
    check: impl FnOnce(&dyn Handler) -> Option<Credential> + Send + 'static,
) -> Option<Credential> {
    let h = handler.clone();
    tokio::task::spawn_blocking(move || check(&*h))
        .await
        .ok()
        .flatten()
}

async fn connection(
    mut stream: UnixStream,
    handler: Arc<dyn Handler>,
    cancel: CancellationToken,
    deadline: Duration,
) {
    let mut reader = LineReader::new();
    let mut cred: Option<Credential> = None;
    let mut controller_token: Option<String> = None;
    let mut line_deadline = Instant::now() + deadline;
    let mut recheck: Option<Instant> = None;
    // Small: most frames are short, and the 1 MiB line cap is checked per read.
    let mut buf = vec![0u8; 8 * 1024];
    let mut lines = Vec::new();
    loop {
        let recheck_at = recheck.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(line_deadline) => return,
            _ = tokio::time::sleep_until(recheck_at), if recheck.is_some() => {
                let checked = match controller_token.clone() {
                    Some(t) => off_runtime(&handler, move |h| h.revalidate(&t)).await,
                    None => None,
                };
                match checked {
                    Some(c) => {
                        cred = Some(c);
                        recheck = Some(Instant::now() + deadline);
                    }
                    None => return,
                }
            }
            read = stream.read(&mut buf) => {
                let n = match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                lines.clear();
                if reader.push(&buf[..n], &mut lines).is_err() {
                    return;
                }
                for line in lines.drain(..) {
                    match &cred {
                        None => {
                            line_deadline = Instant::now() + deadline;
                            let Some(token) = parse_auth_line(&line) else { return };
                            let t = token.clone();
                            let authenticated = off_runtime(&handler, move |h| h.authenticate(&t)).await;
                            let Some(c) = authenticated else { return };
                            if matches!(c, Credential::Controller(_)) {
                                controller_token = Some(token);
                                recheck = Some(Instant::now() + deadline);
                            }
                            cred = Some(c);
                        }
                        Some(c) => {
                            let Some(frame) = parse_frame(&line) else { continue };
                            line_deadline = Instant::now() + deadline;
                            handler.on_frame(frame, c);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
