//! What only macOS has, behind the same functions as `linux.rs`: a kqueue
//! parent watch instead of the parent death signal, `proc_listallpids` +
//! `sysctl(KERN_PROCARGS2)` instead of the `/proc` scan, `proc_pidinfo` for
//! zombies, no boot id or start token (as Qwen Code on macOS), `fcntl`
//! after `pipe` instead of `pipe2`, `SO_NOSIGPIPE` instead of `MSG_NOSIGNAL`.
//! Compiled and linted for macOS; not run by this project's tests (the
//! `KERN_PROCARGS2` parser, in `procargs.rs`, is tested on Linux).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// No boot id: Qwen Code on macOS records none (its start tokens need
/// Linux's `/proc`), and a record that carried one would fail its "same
/// machine" check, so we give none either.
pub(super) fn boot_id() -> Option<String> {
    None
}

/// `proc_pidinfo(PROC_PIDTBSDINFO)`, which also answers for zombies.
fn bsd_info(pid: u32) -> Option<libc::proc_bsdinfo> {
    let pid = libc::c_int::try_from(pid).ok().filter(|&p| p > 0)?;
    // SAFETY: proc_bsdinfo is plain data; an all-zero value is valid.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: proc_pidinfo writes at most `size` bytes into `info`.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            &mut info as *mut libc::proc_bsdinfo as *mut libc::c_void,
            size,
        )
    };
    (n == size).then_some(info)
}

/// No start token, as Qwen Code on macOS (see [`boot_id`]): liveness is
/// `kill(pid, 0)` plus the zombie check below.
pub(super) fn start_token(_pid: u32) -> Option<String> {
    None
}

/// macOS has no pid namespaces.
pub(super) fn pid_namespace() -> Option<u64> {
    None
}

pub(super) fn is_zombie(pid: u32) -> bool {
    bsd_info(pid).is_some_and(|i| i.pbi_status == libc::SZOMB)
}

/// `kern.argmax`: the largest `KERN_PROCARGS2` answer.
fn arg_max() -> usize {
    let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>();
    // SAFETY: sysctl writes one c_int into `value`.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            2,
            &mut value as *mut libc::c_int as *mut libc::c_void,
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc == 0 && value > 0 {
        value as usize
    } else {
        1 << 20
    }
}

/// `pid`'s `KERN_PROCARGS2` answer into `buf` (sized by [`arg_max`]).
fn proc_args(pid: libc::c_int, buf: &mut [u8]) -> Option<&[u8]> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    let mut len = buf.len();
    // SAFETY: sysctl writes at most `len` bytes into `buf`.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            3,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0).then(|| &buf[..len.min(buf.len())])
}

/// Every pid (`proc_listallpids`, retried while the table grows).
fn all_pids() -> Vec<libc::pid_t> {
    for _ in 0..4 {
        // SAFETY: a null buffer asks for the number of processes.
        let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
        if n <= 0 {
            return Vec::new();
        }
        let cap = n as usize + 64;
        let mut pids = vec![0 as libc::pid_t; cap];
        let bytes = (cap * std::mem::size_of::<libc::pid_t>()) as libc::c_int;
        // SAFETY: the buffer holds `bytes` bytes of pid_t.
        let got = unsafe { libc::proc_listallpids(pids.as_mut_ptr() as *mut libc::c_void, bytes) };
        if got < 0 {
            return Vec::new();
        }
        if (got as usize) < cap {
            pids.truncate(got as usize);
            return pids;
        }
    }
    Vec::new()
}

/// Pids of `uid`'s processes but `me` whose environment holds the entry
/// `needle`. Zombies have no arguments to read and do not match.
pub(super) fn find_by_env(needle: &[u8], uid: u32, me: u32) -> Vec<u32> {
    let mut buf = vec![0u8; arg_max()];
    let mut out = Vec::new();
    for pid in all_pids() {
        let Ok(p) = u32::try_from(pid) else { continue };
        if p == 0 || p == me || bsd_info(p).map(|i| i.pbi_uid) != Some(uid) {
            continue;
        }
        let Some(args) = proc_args(pid, &mut buf) else {
            continue;
        };
        if super::procargs::env_entries(args).contains(&needle) {
            out.push(p);
        }
    }
    out
}

/// The highest fd number to sweep in a forked child (the soft descriptor
/// limit, at most 2^20). Async-signal-safe (`getrlimit` is a system call).
fn fd_limit() -> libc::c_int {
    // SAFETY: rlimit is plain data; getrlimit writes it.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes into `rl`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 10_240;
    }
    rl.rlim_cur.min(1 << 20) as libc::c_int
}

/// In a forked child (before exec): starts the parent watch. macOS has no
/// parent death signal, so a watchdog is forked off the child: it resets
/// every signal to its default, closes every descriptor (it holds none of
/// the plugin's pipes or channel), and waits in kqueue (`EVFILT_PROC`,
/// `NOTE_EXIT`) for the host (our parent) or the plugin (the child, soon
/// Node) to exit. The host's exit → SIGKILL to the plugin's process group
/// (the watchdog is in it too); the plugin's exit → the watchdog exits. It
/// stays a child of Node, which does not reap it before it exits itself.
/// Only async-signal-safe calls run after either fork. Call after
/// `setpgid(0, 0)`.
pub(super) fn child_die_with_parent() -> io::Result<()> {
    // SAFETY: getppid and getpid have no preconditions.
    let (host, plugin) = unsafe { (libc::getppid(), libc::getpid()) };
    // SAFETY: fork in the single-threaded pre-exec child; the new process
    // runs `watchdog`, which only makes async-signal-safe system calls.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => watchdog(host, plugin),
        _ => Ok(()),
    }
}

fn watchdog(host: libc::pid_t, plugin: libc::pid_t) -> ! {
    // SAFETY: only system calls follow (sigaction, close, kqueue, kevent,
    // kill, _exit), on local plain-data values; nothing allocates or locks.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..32 {
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for fd in 0..fd_limit() {
            libc::close(fd);
        }
        let kq = libc::kqueue();
        if kq < 0 {
            libc::_exit(0);
        }
        let watch = |pid: libc::pid_t| libc::kevent {
            ident: pid as libc::uintptr_t,
            filter: libc::EVFILT_PROC,
            flags: libc::EV_ADD | libc::EV_RECEIPT,
            fflags: libc::NOTE_EXIT,
            data: 0,
            udata: std::ptr::null_mut(),
        };
        let changes = [watch(host), watch(plugin)];
        let mut receipts: [libc::kevent; 2] = std::mem::zeroed();
        let n = libc::kevent(
            kq,
            changes.as_ptr(),
            2,
            receipts.as_mut_ptr(),
            2,
            std::ptr::null(),
        );
        for r in receipts.iter().take(n.max(0) as usize) {
            if r.flags & libc::EV_ERROR != 0 && r.data != 0 {
                // ESRCH: that process is gone already.
                if r.ident == host as libc::uintptr_t {
                    libc::kill(-plugin, libc::SIGKILL);
                }
                libc::_exit(0);
            }
        }
        if n != 2 || libc::getppid() != plugin {
            libc::_exit(0);
        }
        loop {
            let mut ev: libc::kevent = std::mem::zeroed();
            let n = libc::kevent(kq, std::ptr::null(), 0, &mut ev, 1, std::ptr::null());
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            if n == 1 && ev.ident == host as libc::uintptr_t {
                libc::kill(-plugin, libc::SIGKILL);
            }
            libc::_exit(0);
        }
    }
}

/// In a forked child: marks every fd from `first` up to the descriptor
/// limit close-on-exec (macOS has no `close_range`). Async-signal-safe.
pub(super) fn child_cloexec_from(first: u32) {
    let first = first.min(i32::MAX as u32) as libc::c_int;
    for fd in first..fd_limit() {
        // SAFETY: fcntl only changes descriptor flags (EBADF for a free number).
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// Sets `FD_CLOEXEC` (and `O_NONBLOCK` when asked) on a new fd.
fn set_flags(fd: RawFd, nonblocking: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        if libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        if nonblocking {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// A write to a closed peer gives EPIPE, never SIGPIPE (`SO_NOSIGPIPE`).
pub(super) fn no_sigpipe(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from `one`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_NOSIGPIPE,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A non-blocking, close-on-exec pipe: (read end, write end). The flags
/// are set right after `pipe` (a fork by another thread in between would
/// see them without CLOEXEC; our own children mark every fd ≥ 3
/// close-on-exec before exec).
pub(super) fn pipe_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe writes two fds into the array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here.
    let pair = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_flags(pair.0.as_raw_fd(), true)?;
    set_flags(pair.1.as_raw_fd(), true)?;
    Ok(pair)
}

/// A connected pair of close-on-exec AF_UNIX stream sockets; the first
/// (ours) never raises SIGPIPE.
pub(super) fn stream_socketpair_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two new fds into the array.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here.
    let pair = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_flags(pair.0.as_raw_fd(), false)?;
    set_flags(pair.1.as_raw_fd(), false)?;
    no_sigpipe(pair.0.as_raw_fd())?;
    Ok(pair)
}

/// A non-blocking, close-on-exec stream socket for a UNIX address; -1 on error.
pub(super) fn unix_stream_socket_nonblocking() -> libc::c_int {
    // SAFETY: socket has no memory preconditions.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return -1;
    }
    if set_flags(fd, true).and_then(|()| no_sigpipe(fd)).is_err() {
        // SAFETY: closing the socket we just created.
        unsafe { libc::close(fd) };
        return -1;
    }
    fd
}

/// `recvmsg` flags. macOS has no `MSG_CMSG_CLOEXEC`: passed descriptors are
/// closed right after the call, and our children mark every fd ≥ 3
/// close-on-exec before exec, so none leaks in between.
pub(super) const RECV_FLAGS: libc::c_int = libc::MSG_DONTWAIT;
/// `send` flags (no `MSG_NOSIGNAL` here: our sockets carry `SO_NOSIGPIPE`).
pub(super) const SEND_FLAGS: libc::c_int = libc::MSG_DONTWAIT;

/// The system allocator returns memory by itself; nothing to do.
pub(super) fn malloc_trim() {}

/// macOS has no per-thread timer slack setting; nothing to do.
pub(super) fn set_timer_slack_minimal() {}
