//! Local sockets are named pipes here (`\\.\pipe\…`), and so is a plugin's
//! Node channel, which carries libuv's frame header on every write (see
//! `frame.rs`).
//!
//! A listener is a chain of pipe instances: the first is created with
//! `FILE_FLAG_FIRST_PIPE_INSTANCE` (so a name in use is `AddrInUse`), each
//! accept hands the connected instance over and creates the next one. Every
//! instance has an owner-only DACL and refuses remote clients. Writes to a
//! dead peer fail with `ERROR_NO_DATA`/`ERROR_BROKEN_PIPE` (EPIPE); Windows
//! has no SIGPIPE.

use std::io;
use std::os::windows::io::{AsRawHandle, IntoRawHandle, OwnedHandle};
use std::path::Path;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::windows::named_pipe::{ClientOptions, NamedPipeClient, NamedPipeServer};
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_FILE_NOT_FOUND, ERROR_PIPE_BUSY, GENERIC_READ, GENERIC_WRITE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, OPEN_EXISTING,
    PIPE_ACCESS_DUPLEX,
};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, DisconnectNamedPipe, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS,
    PIPE_TYPE_BYTE, PIPE_UNLIMITED_INSTANCES, PIPE_WAIT,
};

use super::frame::{self, Decoder};
use super::process::ChannelEnd;
use super::security::OwnerOnlyAttributes;
use super::util::{owned, wide};

/// Kernel buffer of each pipe instance, each way.
const PIPE_BUFFER: u32 = 64 * 1024;

#[derive(Debug)]
enum Pipe {
    Server(NamedPipeServer),
    Client(NamedPipeClient),
}

/// A connected local stream (tokio): either end of a named pipe. On a
/// plugin channel, [`recv_chunk`] and [`send_all`] add and strip libuv's
/// frames.
#[derive(Debug)]
pub struct LocalStream {
    pipe: Pipe,
    /// The frame decoder of a Node channel (`None`: a plain byte stream).
    frames: Option<Mutex<Decoder>>,
}

macro_rules! both {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            Pipe::Server($p) => $e,
            Pipe::Client($p) => $e,
        }
    };
}

impl LocalStream {
    fn plain(pipe: Pipe) -> LocalStream {
        LocalStream { pipe, frames: None }
    }

    async fn readable(&self) -> io::Result<()> {
        both!(&self.pipe, p => p.readable().await)
    }

    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        both!(&self.pipe, p => p.try_read(buf))
    }

    async fn writable(&self) -> io::Result<()> {
        both!(&self.pipe, p => p.writable().await)
    }

    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        both!(&self.pipe, p => p.try_write(buf))
    }
}

impl AsyncRead for LocalStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        both!(&mut self.get_mut().pipe, p => Pin::new(p).poll_read(cx, buf))
    }
}

impl AsyncWrite for LocalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        both!(&mut self.get_mut().pipe, p => Pin::new(p).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(&mut self.get_mut().pipe, p => Pin::new(p).poll_flush(cx))
    }

    /// Named pipes have no half-close: flushes only (the peer sees EOF when
    /// the stream is dropped).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(&mut self.get_mut().pipe, p => Pin::new(p).poll_shutdown(cx))
    }
}

/// Whether `path` names a named pipe (`\\.\pipe\…` or `\\?\pipe\…`, with
/// `/` accepted for `\` and any case, as Qwen Code's `isLocalIpcPath`).
pub fn is_pipe_name(path: &str) -> bool {
    let s = path.replace('/', "\\").to_ascii_lowercase();
    (s.starts_with(r"\\.\pipe\") || s.starts_with(r"\\?\pipe\")) && s.len() > r"\\.\pipe\".len()
}

fn pipe_name(path: &Path) -> io::Result<Vec<u16>> {
    let s = path.to_string_lossy();
    if !is_pipe_name(&s) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{s} is not a named pipe: local sockets on Windows are named pipes (\\\\.\\pipe\\<name>)"
            ),
        ));
    }
    wide(std::ffi::OsStr::new(&s.replace('/', "\\")))
}

/// Creates one instance of pipe `name` (overlapped, byte mode, local
/// clients only, owner-only DACL).
fn create_instance(name: &[u16], first: bool) -> io::Result<OwnedHandle> {
    let sa = OwnerOnlyAttributes::new(false)?;
    let open_mode = PIPE_ACCESS_DUPLEX
        | FILE_FLAG_OVERLAPPED
        | if first {
            FILE_FLAG_FIRST_PIPE_INSTANCE
        } else {
            0
        };
    // SAFETY: a NUL-terminated name and security attributes alive for the call.
    let h = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            open_mode,
            PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            PIPE_UNLIMITED_INSTANCES,
            PIPE_BUFFER,
            PIPE_BUFFER,
            0,
            sa.as_ptr(),
        )
    };
    owned(h).map_err(|e| {
        if first && e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) {
            io::Error::new(io::ErrorKind::AddrInUse, "the pipe name is in use")
        } else {
            e
        }
    })
}

/// A listening named pipe before it is handed to tokio.
#[derive(Debug)]
pub struct StdLocalListener {
    name: Vec<u16>,
    first: OwnedHandle,
}

impl StdLocalListener {
    /// Pipe instances are overlapped already: nothing to change.
    pub fn set_nonblocking(&self, _nonblocking: bool) -> io::Result<()> {
        Ok(())
    }
}

/// A listening named pipe (tokio).
#[derive(Debug)]
pub struct LocalListener {
    name: Vec<u16>,
    next: tokio::sync::Mutex<NamedPipeServer>,
}

impl LocalListener {
    /// Registers the listener with the current tokio runtime.
    pub fn from_std(l: StdLocalListener) -> io::Result<LocalListener> {
        // SAFETY: an overlapped pipe instance we own, handed over to tokio.
        let server = unsafe { NamedPipeServer::from_raw_handle(l.first.into_raw_handle())? };
        Ok(LocalListener {
            name: l.name,
            next: tokio::sync::Mutex::new(server),
        })
    }

    /// Waits for a client; the connected instance is returned and a new one
    /// listens in its place. Cancel-safe.
    pub async fn accept(&self) -> io::Result<(LocalStream, ())> {
        let mut next = self.next.lock().await;
        next.connect().await?;
        let fresh = create_instance(&self.name, false)?;
        // SAFETY: a fresh overlapped pipe instance we own.
        let fresh = unsafe { NamedPipeServer::from_raw_handle(fresh.into_raw_handle())? };
        let connected = std::mem::replace(&mut *next, fresh);
        Ok((LocalStream::plain(Pipe::Server(connected)), ()))
    }
}

/// Creates the named pipe `path` (`\\.\pipe\…`); `AddrInUse` when the name
/// exists already. Any other path is refused (`InvalidInput`).
pub fn bind(path: &Path) -> io::Result<StdLocalListener> {
    let name = pipe_name(path)?;
    let first = create_instance(&name, true)?;
    Ok(StdLocalListener { name, first })
}

/// Prepares a stream `accept` returned. Nothing to do on Windows: a pipe
/// has no SIGPIPE to turn off (a write to a dead peer fails with EPIPE).
pub fn accepted(_stream: &LocalStream) -> io::Result<()> {
    Ok(())
}

/// [`accepted`] for a loopback TCP connection (nothing to do on Windows).
pub fn accepted_tcp(_stream: &tokio::net::TcpStream) -> io::Result<()> {
    Ok(())
}

/// Connects to the named pipe `path`, waiting up to 2 s while every
/// instance is busy.
pub async fn connect(path: &Path) -> io::Result<LocalStream> {
    let name = pipe_name(path)?;
    let name = String::from_utf16_lossy(&name[..name.len() - 1]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        match ClientOptions::new().open(&name) {
            Ok(c) => return Ok(LocalStream::plain(Pipe::Client(c))),
            Err(e)
                if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32)
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

pub use crate::sys::Dial;

/// Opens `path` once without waiting (`CreateFileW`): a pipe that opens or
/// is busy answered, a missing one is nobody. The connection is closed at
/// once, which the server sees as a client that left.
pub fn dial_once(path: &str) -> Dial {
    let Ok(name) = pipe_name(Path::new(path)) else {
        return if std::fs::symlink_metadata(path).is_err() {
            Dial::NobodyThere
        } else {
            Dial::Unknown
        };
    };
    // SAFETY: a NUL-terminated name; the handle is closed on success.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            0,
            std::ptr::null(),
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    match owned(h) {
        Ok(_) => Dial::Answered,
        Err(e) => match e.raw_os_error().map(|c| c as u32) {
            Some(ERROR_PIPE_BUSY) => Dial::Answered,
            Some(ERROR_FILE_NOT_FOUND) => Dial::NobodyThere,
            _ => Dial::Unknown,
        },
    }
}

/// Our end of a child's channel as a tokio stream that speaks libuv's
/// framing (call inside a runtime).
pub fn channel_stream(end: ChannelEnd) -> io::Result<LocalStream> {
    // SAFETY: the overlapped server end of the channel pipe, owned by `end`.
    let server = unsafe { NamedPipeServer::from_raw_handle(end.0.into_raw_handle())? };
    Ok(LocalStream {
        pipe: Pipe::Server(server),
        frames: Some(Mutex::new(Decoder::default())),
    })
}

/// A connected pair of channel ends (for tests of the channel transport):
/// the second one is the child's end, framed the same way.
#[cfg(test)]
pub fn channel_pair() -> io::Result<(ChannelEnd, ChannelEnd)> {
    let (ours, theirs) = super::process::channel_pipe(false)?;
    Ok((ChannelEnd(ours), ChannelEnd(theirs)))
}

/// Ends our writing. Named pipes have no half-close: on a server end (a
/// plugin channel, an accepted connection) the pipe is disconnected, which
/// the peer reads as EOF (and which ends our reading too); a client end
/// cannot signal EOF before it is dropped.
pub fn shutdown_write(stream: &LocalStream) {
    if let Pipe::Server(p) = &stream.pipe {
        // SAFETY: disconnects our own pipe instance.
        unsafe { DisconnectNamedPipe(p.as_raw_handle()) };
    }
}

/// Reads the next chunk from a channel (libuv frame headers stripped;
/// sockets the child offered are never imported, their count returned).
/// `Ok((0, _))` is EOF.
pub async fn recv_chunk(stream: &LocalStream, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    let mut handles = 0;
    loop {
        stream.readable().await?;
        let n = match stream.try_read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok((0, handles));
        }
        let Some(frames) = &stream.frames else {
            return Ok((n, handles));
        };
        let (payload, offered) = frames
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .decode_in_place(&mut buf[..n])?;
        handles += offered;
        if payload > 0 {
            return Ok((payload, handles));
        }
    }
}

/// Writes all of `bytes` to a channel, framed as libuv expects. Writers
/// must be serialised (the caller holds a write lock), as on every
/// platform.
pub async fn send_all(stream: &LocalStream, bytes: &[u8]) -> io::Result<()> {
    let framed;
    let mut rest = if stream.frames.is_some() {
        framed = frame::encode(bytes);
        &framed[..]
    } else {
        bytes
    };
    while !rest.is_empty() {
        stream.writable().await?;
        match stream.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
