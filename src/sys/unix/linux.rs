//! What only Linux has: `/proc` (boot id, start ticks, zombies, the
//! environment scan), the parent death signal, `close_range`, `pipe2`,
//! `MSG_CMSG_CLOEXEC`, timer slack and `malloc_trim`. `macos.rs` beside this
//! file exports the same functions for macOS.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use once_cell::sync::OnceCell;

/// `/proc/sys/kernel/random/boot_id`, trimmed; cached once read successfully.
pub(super) fn boot_id() -> Option<String> {
    static CACHE: OnceCell<String> = OnceCell::new();
    if let Some(v) = CACHE.get() {
        return Some(v.clone());
    }
    let raw = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let value = raw.trim();
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    Some(CACHE.get_or_init(|| value.to_string()).clone())
}

/// The fields of `/proc/<pid>/stat` after the command name (which may itself
/// contain spaces and parentheses, hence the last `)`).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    let end = raw.rfind(')')?;
    Some(
        raw[end + 1..]
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

/// `"<boot id>:<start ticks>"` (field 22 of `/proc/<pid>/stat`).
pub(super) fn start_token(pid: u32) -> Option<String> {
    if pid == 0 {
        return None;
    }
    let boot = boot_id()?;
    let fields = stat_fields(pid)?;
    let start = fields.get(19)?;
    if start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("{boot}:{start}"))
}

/// The inode of `/proc/self/ns/pid` (the link is followed, as `stat` does).
pub(super) fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

pub(super) fn is_zombie(pid: u32) -> bool {
    stat_fields(pid)
        .and_then(|f| f.first().cloned())
        .is_some_and(|s| s.starts_with('Z'))
}

/// Pids of `uid`'s processes but `me` whose `/proc/<pid>/environ` holds the
/// entry `needle`. Zombies have no environment and do not match.
pub(super) fn find_by_env(needle: &[u8], uid: u32, me: u32) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == needle) {
            out.push(pid);
        }
    }
    out
}

/// In a forked child: SIGKILL when the spawning thread exits.
/// Async-signal-safe.
pub(super) fn child_die_with_parent() -> io::Result<()> {
    // SAFETY: prctl only changes this process's parent death signal.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// In a forked child: marks every fd from `first` up close-on-exec (best
/// effort, Linux >= 5.11). Async-signal-safe.
pub(super) fn child_cloexec_from(first: u32) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range only changes descriptor flags.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
    }
}

/// A non-blocking, close-on-exec pipe: (read end, write end).
pub(super) fn pipe_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A connected pair of close-on-exec AF_UNIX stream sockets (what Node's
/// channel must be).
pub(super) fn stream_socketpair_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two new fds into the array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A non-blocking, close-on-exec stream socket for a UNIX address; -1 on error.
pub(super) fn unix_stream_socket_nonblocking() -> libc::c_int {
    // SAFETY: socket has no memory preconditions.
    unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    }
}

/// Linux needs nothing on the socket: every write passes `MSG_NOSIGNAL`.
pub(super) fn no_sigpipe(_fd: RawFd) -> io::Result<()> {
    Ok(())
}

/// `recvmsg` flags: descriptors passed with the data arrive close-on-exec.
pub(super) const RECV_FLAGS: libc::c_int = libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT;
/// `send` flags: EPIPE instead of SIGPIPE (macOS: `SO_NOSIGPIPE` on the socket).
pub(super) const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;

pub(super) fn malloc_trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub(super) fn set_timer_slack_minimal() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}
