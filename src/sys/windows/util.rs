//! Small helpers shared by the Windows modules: UTF-16 strings and owned
//! handles.

use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{FromRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};

/// `s` as a NUL-terminated UTF-16 string (an embedded NUL is refused).
pub fn wide(s: &OsStr) -> io::Result<Vec<u16>> {
    let mut v: Vec<u16> = s.encode_wide().collect();
    if v.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path or name contains a NUL character",
        ));
    }
    v.push(0);
    Ok(v)
}

/// Takes ownership of a handle a Windows call returned, or the last error
/// when it is null or `INVALID_HANDLE_VALUE`.
pub fn owned(h: HANDLE) -> io::Result<OwnedHandle> {
    if h.is_null() || h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle returned to us, owned from here on.
    Ok(unsafe { OwnedHandle::from_raw_handle(h) })
}

/// The last error unless `ok` (a Windows `BOOL`) is true.
pub fn check(ok: i32) -> io::Result<()> {
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether this process runs under Wine (its ntdll exports
/// `wine_get_version`, which Windows' does not). Used only where Wine is
/// known to behave differently from Windows, each use saying how.
pub fn is_wine() -> bool {
    use std::sync::OnceLock;
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    static WINE: OnceLock<bool> = OnceLock::new();
    *WINE.get_or_init(|| {
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: ntdll is loaded in every process; both names are
        // NUL-terminated; the module handle is not freed (not owned).
        unsafe {
            let m = GetModuleHandleW(ntdll.as_ptr());
            !m.is_null() && GetProcAddress(m, c"wine_get_version".as_ptr().cast()).is_some()
        }
    })
}
