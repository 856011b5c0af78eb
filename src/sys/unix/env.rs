//! The user's directories.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The home directory of the user this process runs as, from the user
/// database (the passwd entry of our uid; the profile directory on
/// Windows). Callers look at `$HOME` first, as Node's `os.homedir()` does.
pub fn user_home() -> Option<PathBuf> {
    // SAFETY: getpwuid_r with a heap buffer; the result points into `buf`,
    // which outlives every use of it.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16384];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pwd.pw_dir);
        let dir = PathBuf::from(OsString::from_vec(dir.to_bytes().to_vec()));
        (!dir.as_os_str().is_empty()).then_some(dir)
    }
}

/// The raw bytes of a path (for percent-encoding it into a `file://` URI).
/// A Windows implementation gives the UTF-8 of its `/`-separated form.
pub fn path_bytes(path: &std::path::Path) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(path.as_os_str().as_bytes())
}
