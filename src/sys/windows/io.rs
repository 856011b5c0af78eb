//! OS error codes.

use std::io;

use windows_sys::Win32::Foundation as f;
use windows_sys::Win32::Networking::WinSock as ws;

/// The errno name of an OS error, with Windows error codes mapped onto the
/// names the POSIX implementation gives (`ENOENT`, `ECONNREFUSED`,
/// `EAGAIN`, `EBUSY`, `EACCES`, `EPERM`, `ENOTSOCK`, `ECONNRESET`, `EPIPE`,
/// `ENAMETOOLONG`, `ETIMEDOUT`, else `EIO`), or `None` for an error that
/// carries no OS code.
pub fn errno_name(e: &io::Error) -> Option<&'static str> {
    let code = e.raw_os_error()?;
    Some(name_of(code))
}

pub(super) fn name_of(code: i32) -> &'static str {
    let c = code as u32;
    match c {
        f::ERROR_FILE_NOT_FOUND | f::ERROR_PATH_NOT_FOUND | f::ERROR_INVALID_DRIVE => "ENOENT",
        f::ERROR_ACCESS_DENIED | f::ERROR_SHARING_VIOLATION | f::ERROR_LOCK_VIOLATION => "EACCES",
        f::ERROR_PRIVILEGE_NOT_HELD => "EPERM",
        f::ERROR_PIPE_BUSY | f::ERROR_BUSY => "EBUSY",
        f::ERROR_BROKEN_PIPE | f::ERROR_NO_DATA | f::ERROR_PIPE_NOT_CONNECTED => "EPIPE",
        f::ERROR_NO_SYSTEM_RESOURCES | f::ERROR_IO_PENDING => "EAGAIN",
        f::ERROR_FILENAME_EXCED_RANGE | f::ERROR_BUFFER_OVERFLOW => "ENAMETOOLONG",
        f::ERROR_SEM_TIMEOUT | f::WAIT_TIMEOUT => "ETIMEDOUT",
        f::ERROR_NETNAME_DELETED => "ECONNRESET",
        _ => match code {
            ws::WSAECONNREFUSED => "ECONNREFUSED",
            ws::WSAEWOULDBLOCK => "EAGAIN",
            ws::WSAENOTSOCK => "ENOTSOCK",
            ws::WSAECONNRESET | ws::WSAECONNABORTED => "ECONNRESET",
            ws::WSAETIMEDOUT => "ETIMEDOUT",
            ws::WSAENAMETOOLONG => "ENAMETOOLONG",
            ws::WSAEACCES => "EACCES",
            _ => "EIO",
        },
    }
}
