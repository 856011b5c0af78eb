//! The user's directories.

use std::ffi::OsString;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::AsRawHandle;
use std::path::PathBuf;

use windows_sys::Win32::Security::TOKEN_QUERY;
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};
use windows_sys::Win32::UI::Shell::GetUserProfileDirectoryW;

/// The profile directory of the user this process runs as, as Node's
/// `os.homedir()` gives it: `%USERPROFILE%`, else the profile directory of
/// the process token (`GetUserProfileDirectoryW`).
pub fn user_home() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("USERPROFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let mut token = std::ptr::null_mut();
    // SAFETY: opens our own process token for reading into a local.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return None;
    }
    let token = super::util::owned(token).ok()?;
    let mut len: u32 = 0;
    // SAFETY: a size query (null buffer), then a fill of a buffer of that size.
    unsafe { GetUserProfileDirectoryW(token.as_raw_handle(), std::ptr::null_mut(), &mut len) };
    if len == 0 || len > 32 * 1024 {
        return None;
    }
    let mut buf = vec![0u16; len as usize];
    // SAFETY: `buf` holds `len` UTF-16 units, as the call was told.
    let ok = unsafe { GetUserProfileDirectoryW(token.as_raw_handle(), buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return None;
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    (end > 0).then(|| PathBuf::from(OsString::from_wide(&buf[..end])))
}

/// The UTF-8 of `path` with every `\` turned into `/` (for a
/// `file:///C:/…` URI). Unpaired UTF-16 surrogates become U+FFFD.
pub fn path_bytes(path: &std::path::Path) -> std::borrow::Cow<'_, [u8]> {
    let s = path.to_string_lossy().replace('\\', "/");
    std::borrow::Cow::Owned(s.into_bytes())
}
