//! The event handle of pull mode: a manual-reset event object
//! (`CreateEventW`), signalled while events wait.
//!
//! The C ABI passes the HANDLE as an `int32_t`: Windows keeps kernel handle
//! values within 32 bits so that 32- and 64-bit processes can share them,
//! and a value may be sign-extended back. The host converts it with
//! `(HANDLE)(intptr_t)value` and waits with `WaitForSingleObject` or
//! `MsgWaitForMultipleObjects`; it must not close it (the library does, when
//! the object is freed).

use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};

use windows_sys::Win32::System::Threading::{CreateEventW, ResetEvent, SetEvent};

/// What the host is given to wait on: the event's HANDLE value as an
/// integer (see the module docs).
pub type RawEventHandle = i32;

/// A level-triggered wake-up: [`signal`](EventHandle::signal) sets the
/// event, [`drain`](EventHandle::drain) resets it.
pub struct EventHandle {
    event: OwnedHandle,
}

impl EventHandle {
    pub fn new() -> io::Result<EventHandle> {
        // SAFETY: an unnamed manual-reset event, initially not signalled,
        // with default security (not inheritable).
        let h = unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
        let event = super::util::owned(h)?;
        let v = event.as_raw_handle() as isize;
        if i32::try_from(v).is_err() {
            return Err(io::Error::other(
                "the event handle does not fit the 32-bit value the C ABI passes",
            ));
        }
        Ok(EventHandle { event })
    }

    /// The handle the host waits on.
    pub fn raw(&self) -> RawEventHandle {
        // Checked to fit in `new`.
        self.event.as_raw_handle() as isize as i32
    }

    /// Sets the event (idempotent).
    pub fn signal(&self) {
        // SAFETY: our own event handle.
        unsafe { SetEvent(self.event.as_raw_handle()) };
    }

    /// Clears every pending signal.
    pub fn drain(&self) {
        // SAFETY: our own event handle.
        unsafe { ResetEvent(self.event.as_raw_handle()) };
    }
}
