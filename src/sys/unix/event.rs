//! The event handle of pull mode: a handle the host (an editor's event loop)
//! watches, readable while events wait. Here the read end of a non-blocking
//! pipe; on Windows an event object (`CreateEventW`, manual reset) whose
//! HANDLE the host waits on.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// What the host is given to watch: an fd here, a HANDLE on Windows (the C
/// ABI passes it as an integer either way).
pub type RawEventHandle = std::os::fd::RawFd;

/// A level-triggered wake-up: [`signal`](EventHandle::signal) makes the raw
/// handle readable, [`drain`](EventHandle::drain) clears it.
pub struct EventHandle {
    read: OwnedFd,
    write: OwnedFd,
}

impl EventHandle {
    pub fn new() -> io::Result<EventHandle> {
        let (read, write) = super::os::pipe_nonblocking()?;
        Ok(EventHandle { read, write })
    }

    /// The handle the host watches.
    pub fn raw(&self) -> RawEventHandle {
        self.read.as_raw_fd()
    }

    /// Makes the handle readable (idempotent: a full pipe is readable already).
    pub fn signal(&self) {
        let b = [1u8];
        // SAFETY: writing one byte from a local buffer to our own non-blocking pipe.
        unsafe { libc::write(self.write.as_raw_fd(), b.as_ptr() as *const libc::c_void, 1) };
    }

    /// Clears every pending signal.
    pub fn drain(&self) {
        let mut buf = [0u8; 256];
        // SAFETY: reading into a local buffer from our own non-blocking pipe.
        while unsafe {
            libc::read(
                self.read.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        } > 0
        {}
    }
}
