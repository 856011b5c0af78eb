//! OS error codes.

use std::io;

/// The errno name of an OS error (`ENOENT`, `ECONNREFUSED`, `EAGAIN`,
/// `EBUSY`, `EACCES`, `EPERM`, `ENOTSOCK`, `ECONNRESET`, `EPIPE`,
/// `ENAMETOOLONG`, `ETIMEDOUT`, else `EIO`), or `None` for an error that
/// carries no OS code. Other platforms map their codes onto the same names.
pub fn errno_name(e: &io::Error) -> Option<&'static str> {
    Some(match e.raw_os_error()? {
        libc::ENOENT => "ENOENT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EAGAIN => "EAGAIN",
        libc::EBUSY => "EBUSY",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::ECONNRESET => "ECONNRESET",
        libc::EPIPE => "EPIPE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => "EIO",
    })
}
