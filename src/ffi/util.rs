//! Shared FFI plumbing: status constants, the panic boundary, strings, handles.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result, Status};
use crate::host::{LogFn, LogLevel};

pub use crate::error::codes::*;

/// The ABI version of this library. Bindings compare `qc_abi_version()` with
/// the value they were written for and refuse to load on a mismatch.
pub const QC_ABI_VERSION: u32 = 1;

/// Log level: errors.
pub const QC_LOG_ERROR: u32 = 1;
/// Log level: warnings.
pub const QC_LOG_WARN: u32 = 2;
/// Log level: informational messages.
pub const QC_LOG_INFO: u32 = 3;
/// Log level: debugging detail.
pub const QC_LOG_DEBUG: u32 = 4;
/// Log level: very verbose tracing.
pub const QC_LOG_TRACE: u32 = 5;

/// Called when the library no longer needs a `user_data` pointer given with a
/// callback (the callback was replaced, or its object freed). Runs once, on
/// whichever thread drops the last reference (often the callback thread).
pub type qc_free_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Log callback: `level` is one of `QC_LOG_*`, `message` is UTF-8, borrowed
/// for the duration of the call.
pub type qc_log_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, level: u32, message: *const c_char)>;

/// Builds the library-side log sink from a host log callback (`None` for a
/// NULL `cb`; the `user_data` is then finalized at once).
pub(crate) fn log_sink(
    cb: qc_log_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    max_level: u32,
) -> Result<Option<(LogFn, LogLevel)>> {
    let level = match max_level {
        QC_LOG_ERROR => LogLevel::Error,
        QC_LOG_WARN => LogLevel::Warn,
        QC_LOG_INFO => LogLevel::Info,
        QC_LOG_DEBUG => LogLevel::Debug,
        QC_LOG_TRACE => LogLevel::Trace,
        _ => {
            return Err(Error::invalid_argument(
                "max_level must be QC_LOG_ERROR (1) .. QC_LOG_TRACE (5)",
            ))
        }
    };
    let ud = UserData::new(user_data, free_user_data);
    Ok(cb.map(|f| {
        let sink: LogFn = Arc::new(move |level: LogLevel, msg: &str| {
            let msg = callback_cstring(msg);
            // SAFETY: host callback with its own user_data; the string lives for the call.
            unsafe { f(ud.ptr(), level as u32, msg.as_ptr()) }
        });
        (sink, level)
    }))
}

/// `max_level` of a `qc_*_enable_log_events`: 0 turns log events off, 1..5
/// is the most verbose `QC_LOG_*` level delivered.
pub(crate) fn log_events_level(max_level: u32) -> Result<Option<LogLevel>> {
    match max_level {
        0 => Ok(None),
        QC_LOG_ERROR => Ok(Some(LogLevel::Error)),
        QC_LOG_WARN => Ok(Some(LogLevel::Warn)),
        QC_LOG_INFO => Ok(Some(LogLevel::Info)),
        QC_LOG_DEBUG => Ok(Some(LogLevel::Debug)),
        QC_LOG_TRACE => Ok(Some(LogLevel::Trace)),
        _ => Err(Error::invalid_argument(
            "max_level must be 0 (off) or QC_LOG_ERROR (1) .. QC_LOG_TRACE (5)",
        )),
    }
}

/// A callback receiving one JSON document (borrowed for the call).
pub type qc_json_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, json: *const c_char)>;

/// A Rust-side callback taking a serialisable value.
pub(crate) type JsonCallback<T> = Arc<dyn Fn(&T) + Send + Sync>;

/// Wraps a host JSON callback as a Rust closure over serialisable values
/// (`None` for a NULL `cb`; the `user_data` is then finalized at once).
pub(crate) fn json_callback<T: serde::Serialize + ?Sized>(
    cb: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
) -> Option<JsonCallback<T>> {
    let ud = UserData::new(user_data, free_user_data);
    cb.map(|f| {
        let call: JsonCallback<T> = Arc::new(move |value: &T| {
            let json = callback_cstring(&serde_json::to_string(value).unwrap_or_default());
            // SAFETY: host callback with its own user_data; the string lives for the call.
            unsafe { f(ud.ptr(), json.as_ptr()) }
        });
        call
    })
}

/// Writes an owned string to a non-NULL out-parameter.
pub(crate) fn write_string(out: *mut *mut c_char, value: String) -> Result<()> {
    out_arg(out, "out")?;
    // SAFETY: checked non-NULL.
    unsafe { out.write(to_c_string(value)) };
    Ok(())
}

/// Runs `f` behind the panic boundary, after checking `out`, and writes its
/// result as an owned JSON string to `out`.
pub(crate) fn json_result<T: serde::Serialize>(
    error: *mut *mut c_char,
    out: *mut *mut c_char,
    f: impl FnOnce() -> Result<T>,
) -> qc_status {
    boundary(error, || {
        out_arg(out, "out")?;
        write_json(out, &f()?)
    })
}

/// Runs `f` behind the panic boundary, after checking `out`, and writes its
/// plain value to `out`.
pub(crate) fn value_result<T>(
    error: *mut *mut c_char,
    out: *mut T,
    f: impl FnOnce() -> Result<T>,
) -> qc_status {
    boundary(error, || {
        out_arg(out, "out")?;
        let value = f()?;
        // SAFETY: checked non-NULL above; `write` drops nothing that `out`
        // held (it may be uninitialised).
        unsafe { out.write(value) };
        Ok(())
    })
}

/// Writes a pulled event to a checked, non-NULL `out`: an owned JSON
/// string, or NULL when no event waits.
pub(crate) fn write_optional_json(out: *mut *mut c_char, value: Option<serde_json::Value>) {
    let ptr = match value {
        Some(v) => to_c_string(v.to_string()),
        None => std::ptr::null_mut(),
    };
    // SAFETY: the caller checked `out` non-NULL.
    unsafe { out.write(ptr) };
}

/// Serialises `value` to an owned JSON string in `out`.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(
    out: *mut *mut c_char,
    value: &T,
) -> Result<()> {
    let json = serde_json::to_string(value)
        .map_err(|e| Error::new(Status::Internal, format!("serialise: {e}")))?;
    write_string(out, json)
}

/// Converts an owned Rust string into a C string the caller frees with
/// `qc_string_free` (NUL bytes inside are replaced).
pub(crate) fn to_c_string(s: impl Into<String>) -> *mut c_char {
    let s: String = s.into();
    let c = CString::new(s).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|b| *b != 0);
        CString::new(bytes).expect("NULs removed")
    });
    c.into_raw()
}

/// Runs `f` behind the panic boundary and reports its error through `error`.
pub(crate) fn boundary(error: *mut *mut c_char, f: impl FnOnce() -> Result<()>) -> qc_status {
    if !error.is_null() {
        // SAFETY: the caller passes a writable `char **` or NULL.
        unsafe { *error = std::ptr::null_mut() };
    }
    let guard = crate::panics::Boundary::enter();
    let caught = catch_unwind(AssertUnwindSafe(f));
    drop(guard);
    let err = match caught {
        Ok(Ok(())) => return QC_OK,
        Ok(Err(e)) => e,
        Err(panic) => {
            // The hook recorded the message with its location (and printed
            // nothing); fall back to the payload if it could not.
            let what = crate::panics::take_last().unwrap_or_else(|| {
                panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into())
            });
            Error::new(Status::Panic, format!("internal panic: {what}"))
        }
    };
    if !error.is_null() {
        // SAFETY: as above.
        unsafe { *error = to_c_string(err.message.clone()) };
    }
    err.status as qc_status
}

/// Borrows a required NUL-terminated UTF-8 argument.
pub(crate) fn str_arg<'a>(ptr: *const c_char, name: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Error::new(Status::NullParameter, format!("{name} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string valid for the call.
    unsafe { CStr::from_ptr(ptr) }.to_str().map_err(|e| {
        Error::new(
            Status::InvalidUtf8,
            format!("{name} is not valid UTF-8: {e}"),
        )
    })
}

/// Borrows an optional NUL-terminated UTF-8 argument (NULL = `None`).
pub(crate) fn opt_str_arg<'a>(ptr: *const c_char, name: &str) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        str_arg(ptr, name).map(Some)
    }
}

/// Borrows `len` bytes of UTF-8 text at `ptr` (NULL with `len == 0` is empty).
pub(crate) fn text_arg<'a>(ptr: *const c_char, len: usize, name: &str) -> Result<&'a str> {
    if ptr.is_null() {
        if len == 0 {
            return Ok("");
        }
        return Err(Error::new(Status::NullParameter, format!("{name} is NULL")));
    }
    if len > isize::MAX as usize {
        return Err(Error::invalid_argument(format!(
            "{name} length is too large"
        )));
    }
    // SAFETY: the caller passes `len` readable bytes at `ptr`.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    std::str::from_utf8(bytes).map_err(|e| {
        Error::new(
            Status::InvalidUtf8,
            format!("{name} is not valid UTF-8: {e}"),
        )
    })
}

pub(crate) fn out_arg<T>(ptr: *mut T, name: &str) -> Result<()> {
    if ptr.is_null() {
        Err(Error::new(Status::NullParameter, format!("{name} is NULL")))
    } else {
        Ok(())
    }
}

/// The one handle space of the process: every handle of every type comes
/// from this counter, so a handle of one type can never resolve as another,
/// and a freed handle is never issued again (a 64-bit counter stepping by 16
/// does not wrap in the life of a process).
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(0x1000);

/// A table of live handles of one type. A handle is an opaque, never-reused
/// number disguised as a pointer; it is never dereferenced, so any value a
/// host passes is safe to look up.
pub(crate) struct HandleTable<T> {
    items: Mutex<HashMap<usize, Arc<T>>>,
}

impl<T> HandleTable<T> {
    pub(crate) fn new() -> Self {
        HandleTable {
            items: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn insert(&self, item: T) -> usize {
        // Step by 16 so handles look like aligned pointers; shared by every table.
        let id = NEXT_HANDLE.fetch_add(16, Ordering::Relaxed);
        self.items
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::new(item));
        id
    }

    pub(crate) fn get(&self, id: usize) -> Result<Arc<T>> {
        if id == 0 {
            return Err(Error::new(Status::InvalidHandle, "the handle is NULL"));
        }
        self.items
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::new(Status::InvalidHandle, "unknown or already freed handle"))
    }

    pub(crate) fn remove(&self, id: usize) -> Option<Arc<T>> {
        self.items
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
    }

    /// The body of a `_new` function: checks `out`, builds the object from
    /// the optional JSON config and writes the new handle to `out`.
    pub(crate) fn create<H>(
        &self,
        config_json: *const c_char,
        out: *mut *mut H,
        error: *mut *mut c_char,
        make: impl FnOnce(Option<&str>) -> Result<T>,
    ) -> qc_status {
        boundary(error, || {
            out_arg(out, "out")?;
            let item = make(opt_str_arg(config_json, "config_json")?)?;
            let id = self.insert(item);
            // SAFETY: checked non-NULL above.
            unsafe { out.write(id as *mut H) };
            Ok(())
        })
    }

    /// The body of a `_free` function: NULL is a no-op; the object is removed
    /// from the table and `finish` runs on it (it is dropped when the last
    /// call using it returns).
    pub(crate) fn destroy<H>(&self, handle: *mut H, finish: impl FnOnce(&T)) -> qc_status {
        if handle.is_null() {
            return QC_OK;
        }
        boundary(std::ptr::null_mut(), || {
            let item = self.remove(handle as usize).ok_or_else(|| {
                Error::new(Status::InvalidHandle, "unknown or already freed handle")
            })?;
            finish(&item);
            Ok(())
        })
    }
}

/// Host `user_data` with its optional finalizer, run when the last owner drops it.
pub(crate) struct UserData {
    ptr: *mut c_void,
    free: qc_free_fn,
}

// SAFETY: the API contract says user_data is used from the library's callback
// thread; the host is responsible for what it points to.
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

impl UserData {
    pub(crate) fn new(ptr: *mut c_void, free: qc_free_fn) -> Arc<UserData> {
        Arc::new(UserData { ptr, free })
    }
    pub(crate) fn ptr(&self) -> *mut c_void {
        self.ptr
    }
}

impl Drop for UserData {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: host-provided finalizer for its own pointer; called once.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { free(self.ptr) }));
        }
    }
}

/// Makes a C string for a callback argument (NULs replaced by U+FFFD is not
/// possible in C strings, so they are dropped).
pub(crate) fn callback_cstring(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|b| *b != 0);
        CString::new(bytes).expect("NULs removed")
    })
}

/// Returns the library version, e.g. `"0.1.0"`. The string is static: do not free it.
#[no_mangle]
pub extern "C" fn qc_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// Returns `QC_ABI_VERSION` of the compiled library.
#[no_mangle]
pub extern "C" fn qc_abi_version() -> u32 {
    QC_ABI_VERSION
}

/// Returns the constant's name for a status code (e.g. `"QC_NOT_FOUND"`), or
/// `"QC_UNKNOWN"`. The string is static: do not free it.
#[no_mangle]
pub extern "C" fn qc_status_name(status: qc_status) -> *const c_char {
    Status::from_code(status)
        .map_or(c"QC_UNKNOWN", Status::c_name)
        .as_ptr()
}

/// Frees a string returned by this library. NULL is a no-op. Never pass a
/// string that came from elsewhere, and never free one twice.
#[no_mangle]
pub unsafe extern "C" fn qc_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    let _quiet = crate::panics::Boundary::enter();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `s` came from `CString::into_raw` in this library.
        drop(unsafe { CString::from_raw(s) })
    }));
}

#[cfg(test)]
mod tests;
