//! Local sockets (UNIX-domain sockets here; named pipes on Windows) and the
//! byte transport of a plugin's Node channel.
//!
//! No write to a dead peer may raise SIGPIPE, which would kill the host
//! application: it must give EPIPE. On Linux every write passes
//! `MSG_NOSIGNAL` (ours here, and std's and tokio's stream writes). macOS has
//! no such flag: the socket itself carries `SO_NOSIGPIPE`. tokio (mio) sets
//! it on the sockets it creates (`connect`, `bind`) but not on accepted ones,
//! so every accepted stream goes through [`accepted`] / [`accepted_tcp`], and
//! our channel socketpair and dial socket set it themselves.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use tokio::io::Interest;

use super::process::ChannelEnd;

/// A connected local stream (tokio).
pub type LocalStream = tokio::net::UnixStream;
/// A listening local socket (tokio).
pub type LocalListener = tokio::net::UnixListener;
/// A listening local socket before it is handed to tokio.
pub type StdLocalListener = std::os::unix::net::UnixListener;

/// Binds a listening socket at `path` (the file must not exist).
pub fn bind(path: &Path) -> io::Result<StdLocalListener> {
    StdLocalListener::bind(path)
}

/// Prepares a stream `accept` returned (macOS: `SO_NOSIGPIPE`, which an
/// accepted socket does not inherit; nothing on Linux).
pub fn accepted(stream: &LocalStream) -> io::Result<()> {
    super::os::no_sigpipe(stream.as_raw_fd())
}

/// [`accepted`] for a loopback TCP connection.
pub fn accepted_tcp(stream: &tokio::net::TcpStream) -> io::Result<()> {
    super::os::no_sigpipe(stream.as_raw_fd())
}

/// Connects to the socket at `path`.
pub async fn connect(path: &Path) -> io::Result<LocalStream> {
    LocalStream::connect(path).await
}

pub use crate::sys::Dial;

/// Dials `path` once without blocking. A UNIX-domain connect answers at once
/// (success, `EAGAIN` on a full backlog, or an error), so no timer is needed.
pub fn dial_once(path: &str) -> Dial {
    // SAFETY: plain socket calls on a zeroed sockaddr_un we fill within bounds;
    // the descriptor is closed on every path.
    unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        let bytes = path.as_bytes();
        if bytes.len() >= addr.sun_path.len() {
            return Dial::Unknown;
        }
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let fd = super::os::unix_stream_socket_nonblocking();
        if fd < 0 {
            return Dial::Unknown;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let rc = libc::connect(
            fd,
            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        );
        let verdict = if rc == 0 {
            Dial::Answered
        } else {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINPROGRESS) => Dial::Answered,
                Some(libc::ENOENT) | Some(libc::ECONNREFUSED) => Dial::NobodyThere,
                _ => Dial::Unknown,
            }
        };
        libc::close(fd);
        verdict
    }
}

/// Our end of a child's channel as a tokio stream (call inside a runtime).
pub fn channel_stream(end: ChannelEnd) -> io::Result<LocalStream> {
    let std = std::os::unix::net::UnixStream::from(end.0);
    std.set_nonblocking(true)?;
    LocalStream::from_std(std)
}

/// A connected pair of channel ends (for tests of the channel transport).
#[cfg(all(test, target_os = "linux"))]
pub fn channel_pair() -> io::Result<(ChannelEnd, ChannelEnd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    Ok((ChannelEnd(a.into()), ChannelEnd(b.into())))
}

/// Closes the write side of `stream` (the peer sees EOF); reading goes on.
pub fn shutdown_write(stream: &LocalStream) {
    // SAFETY: shutting down the write side of our own socket.
    unsafe { libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR) };
}

/// Most fds one read may carry (more are dropped by the kernel, MSG_CTRUNC).
const MAX_FDS_PER_READ: usize = 16;

fn close_passed_fds(msg: &libc::msghdr) -> usize {
    let mut closed = 0;
    // SAFETY: walking the control buffer the kernel filled for this msghdr
    // with the CMSG_* macros; each SCM_RIGHTS payload holds c_ints that are
    // fds now owned by us, closed once here.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                let header = libc::CMSG_LEN(0) as usize;
                let n = ((*cmsg).cmsg_len as usize).saturating_sub(header)
                    / std::mem::size_of::<libc::c_int>();
                for k in 0..n {
                    let fd = std::ptr::read_unaligned(data.add(k));
                    if fd >= 0 {
                        libc::close(fd);
                        closed += 1;
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    closed
}

/// One `recvmsg` on `fd`: bytes into `buf`; every fd passed with them is
/// closed at once (received close-on-exec, so none can leak to a child in
/// between). Returns `(bytes, fds closed)`; 0 bytes = EOF.
fn recv_once(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    // u64 alignment covers cmsghdr.
    let space =
        // SAFETY: CMSG_SPACE is a pure size computation.
        unsafe { libc::CMSG_SPACE((MAX_FDS_PER_READ * std::mem::size_of::<libc::c_int>()) as u32) }
            as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr is a valid empty header; the pointers set below
    // point to live local buffers for the duration of the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = (control.len() * 8) as _;
    // SAFETY: recvmsg on our socket with the header above.
    let n = unsafe { libc::recvmsg(fd, &mut msg, super::os::RECV_FLAGS) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let closed = close_passed_fds(&msg);
    Ok((n as usize, closed))
}

/// Reads the next chunk from a channel (descriptors or handles passed with
/// it are closed, their count returned). `Ok((0, _))` is EOF.
pub async fn recv_chunk(stream: &LocalStream, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    let fd = stream.as_raw_fd();
    loop {
        stream.readable().await?;
        match stream.try_io(Interest::READABLE, || recv_once(fd, buf)) {
            Ok(r) => return Ok(r),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `bytes` to a channel (EPIPE, never SIGPIPE).
pub async fn send_all(stream: &LocalStream, mut bytes: &[u8]) -> io::Result<()> {
    let fd = stream.as_raw_fd();
    while !bytes.is_empty() {
        stream.writable().await?;
        let r = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: send from a live slice on our socket.
            let n = unsafe {
                libc::send(
                    fd,
                    bytes.as_ptr() as *const libc::c_void,
                    bytes.len(),
                    super::os::SEND_FLAGS,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
