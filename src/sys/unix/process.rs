//! Processes: ids, liveness, signals, and spawning a plugin's Node child
//! with its IPC channel in a process group of its own.
//!
//! ## The spawned child
//! Node attaches its IPC channel to the fd named by `NODE_CHANNEL_FD`, which
//! must be one end of an AF_UNIX SOCK_STREAM socketpair. We create the pair
//! close-on-exec, move the child's end to fd [`CHANNEL_FD`] in the child
//! only, and close our copy of it right after the spawn (otherwise we would
//! never see EOF). In the child, before exec, only async-signal-safe calls
//! run: `setpgid(0, 0)` (own process group), the parent watch and a
//! re-check of the parent (Linux: the parent death signal; macOS: a forked
//! kqueue watchdog that kills the group when the host exits), marking every
//! inherited fd ≥ 3 close-on-exec (Linux: `close_range`, best effort;
//! macOS: `fcntl` up to the descriptor limit), then `dup2` of the channel
//! to fd 3.
//! Windows (next): `CreateProcessW` with the channel's pipe in the C-runtime
//! fd table (`STARTUPINFO.lpReserved2`) and the child in a Job Object that
//! is killed when the host dies.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::sys::{ExitInfo, Signal};

/// The fd number Node finds its channel at (`NODE_CHANNEL_FD`).
pub const CHANNEL_FD: i32 = 3;

/// This process's id.
pub fn current_pid() -> u32 {
    std::process::id()
}

/// The id of this process's parent.
#[cfg(test)]
pub fn parent_pid() -> u32 {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() as u32 }
}

pub(super) fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

/// Whether a process `pid` exists, ours or another user's (a zombie counts).
pub fn exists(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || {
        let e = io::Error::last_os_error().raw_os_error();
        e == Some(libc::EPERM) || e == Some(libc::EACCES)
    }
}

/// Whether `pid` exists and is not a zombie (the zombie check needs `/proc`:
/// where that is missing, a zombie counts as alive).
pub fn is_alive(pid: u32) -> bool {
    exists(pid) && !super::os::is_zombie(pid)
}

/// `"<boot id>:<start ticks>"` for `pid`, which tells a process from a later
/// one that reuses its pid (`None` where the OS does not say).
pub fn start_token(pid: u32) -> Option<String> {
    super::os::start_token(pid)
}

/// The boot id (`None` where the OS does not give one).
pub fn boot_id() -> Option<String> {
    super::os::boot_id()
}

/// An id of this process's pid namespace (`None` where there is none).
pub fn pid_namespace() -> Option<u64> {
    super::os::pid_namespace()
}

fn signal_number(sig: Signal) -> libc::c_int {
    match sig {
        Signal::Terminate => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
        Signal::Stop => libc::SIGSTOP,
    }
}

/// Sends `sig` to one process.
pub fn signal(pid: u32, sig: Signal) {
    if pid > 1 && pid <= i32::MAX as u32 {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pid as libc::pid_t, signal_number(sig)) };
    }
}

/// A signal number's name (`SIGKILL`, …), or `"signal"`.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// How a child killed by [`Signal::Kill`] reads.
#[cfg(test)]
pub const KILLED: ExitInfo = ExitInfo {
    code: None,
    signal: Some(libc::SIGKILL),
};

/// Pids of this user's processes (not this one) whose environment holds
/// the entry `var_eq_value` (`NAME=value`): the scan for processes a
/// plugin left behind, whatever group or session they moved to.
pub fn find_by_env(var_eq_value: &str) -> Vec<u32> {
    super::os::find_by_env(var_eq_value.as_bytes(), current_uid(), current_pid())
}

pub use crate::sys::ChannelCommand;

/// Our end of a child's IPC channel (an fd; a pipe HANDLE on Windows).
/// Turn it into a stream with [`crate::sys::ipc::channel_stream`].
#[derive(Debug)]
pub struct ChannelEnd(pub(in crate::sys) OwnedFd);

/// The read end of a child's stdout or stderr pipe.
#[derive(Debug)]
pub struct PipeReader(OwnedFd);

/// An async reader of a [`PipeReader`] (tokio `AsyncRead`).
pub type AsyncPipeReader = tokio::net::unix::pipe::Receiver;

impl PipeReader {
    /// Registers the pipe with the current tokio runtime.
    pub fn into_async(self) -> io::Result<AsyncPipeReader> {
        tokio::net::unix::pipe::Receiver::from_owned_fd(self.0)
    }
}

/// A spawned child: the leader of its own process group (its own Job Object
/// on Windows).
#[derive(Debug)]
pub struct Process {
    pid: u32,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Blocks until the child exits and reaps it (only this pid: never
    /// `waitpid(-1)`, which would steal the exit status of the host's own
    /// children). Both fields are `None` when someone else reaped it.
    pub fn wait(&self) -> ExitInfo {
        let pid = self.pid as libc::pid_t;
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: waitpid on the one pid we spawned.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            if r == pid {
                return exit_info(status);
            }
            if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // ECHILD: someone else reaped it (a waitpid(-1) in the host).
            return ExitInfo {
                code: None,
                signal: None,
            };
        }
    }

    /// Signals the child's whole process group.
    pub fn signal_group(&self, sig: Signal) {
        if self.pid > 1 {
            // SAFETY: signalling the process group we created (pgid = child pid).
            unsafe { libc::kill(-(self.pid as libc::pid_t), signal_number(sig)) };
        }
    }

    /// Whether process `pid` is in this child's group.
    pub fn group_contains(&self, pid: u32) -> bool {
        // SAFETY: getpgid only reads another process's group id.
        let g = unsafe { libc::getpgid(pid as libc::pid_t) };
        g > 0 && g as u32 == self.pid
    }
}

fn exit_info(status: libc::c_int) -> ExitInfo {
    if libc::WIFEXITED(status) {
        ExitInfo {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        ExitInfo {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        ExitInfo {
            code: None,
            signal: None,
        }
    }
}

pub use crate::sys::ChannelChild;

/// A CLOEXEC duplicate of `fd` numbered 10 or higher (so the child's end is
/// never 0–3, whatever the host closed).
fn dup_high(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new fd we own.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: n is a new fd.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Starts `cmd` with Node's IPC channel (`NODE_CHANNEL_FD`, `json` mode),
/// stdin from the null device, stdout and stderr piped, in a new process
/// group, with no inherited descriptor but the channel. The child is killed
/// when the calling THREAD exits (Linux: the parent death signal follows the
/// spawning thread; macOS: when the process exits), so call it from a
/// thread that lives as long as the children should.
pub fn spawn_with_channel(cmd: ChannelCommand) -> io::Result<ChannelChild> {
    let (parent_end, child_end) = super::os::stream_socketpair_cloexec()?;
    let child_end = dup_high(&child_end)?;
    let child_fd = child_end.as_raw_fd();
    // SAFETY: getpid has no preconditions.
    let parent_pid = unsafe { libc::getpid() };
    let mut c = Command::new(&cmd.program);
    c.args(&cmd.args)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(cmd.env)
        .env("NODE_CHANNEL_FD", CHANNEL_FD.to_string())
        .env("NODE_CHANNEL_SERIALIZATION_MODE", "json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure only makes async-signal-safe calls (setpgid,
    // prctl or fork of the watchdog, getppid, close_range or fcntl, dup2,
    // _exit) on values
    // captured by copy; it allocates nothing and takes no lock.
    unsafe {
        c.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            super::os::child_die_with_parent()?;
            if libc::getppid() != parent_pid {
                // The spawner died between fork and prctl: nobody to serve.
                libc::_exit(1);
            }
            super::os::child_cloexec_from(3);
            // dup2 gives fd 3 without CLOEXEC (child_fd >= 10, never 3).
            if libc::dup2(child_fd, CHANNEL_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn()?;
    drop(child_end);
    let stdout = OwnedFd::from(child.stdout.take().expect("piped"));
    let stderr = OwnedFd::from(child.stderr.take().expect("piped"));
    Ok(ChannelChild {
        process: Process { pid: child.id() },
        channel: ChannelEnd(parent_end),
        stdout: PipeReader(stdout),
        stderr: PipeReader(stderr),
    })
}
