//! Library-wide error type, and the status codes of the C ABI ([`codes`]).

use std::fmt;

pub mod codes;

/// Declares [`Status`] from the constants of [`codes`]: each variant takes
/// its value from its constant and its C name from the constant's name.
macro_rules! statuses {
    ($($(#[$doc:meta])* $variant:ident = $code:ident,)*) => {
        /// Status codes returned by every fallible `qc_` function (values
        /// and meanings: [`codes`]).
        #[repr(u32)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Status {
            $($(#[$doc])* $variant = codes::$code,)*
        }

        impl Status {
            /// Every status, in code order.
            pub const ALL: &'static [Status] = &[$(Status::$variant),*];

            /// The constant's C name, e.g. `c"QC_NOT_FOUND"` (static).
            pub fn c_name(self) -> &'static std::ffi::CStr {
                match self {
                    $(Status::$variant => {
                        const NAME: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
                            concat!(stringify!($code), "\0").as_bytes(),
                        ) {
                            Ok(name) => name,
                            Err(_) => panic!("a constant name has no NUL"),
                        };
                        NAME
                    })*
                }
            }
        }
    };
}

statuses! {
    /// Success.
    Ok = QC_OK,
    /// A required pointer argument was NULL.
    NullParameter = QC_NULL_PARAMETER,
    /// A string argument was not valid UTF-8.
    InvalidUtf8 = QC_INVALID_UTF8,
    /// A JSON argument could not be parsed or had the wrong shape.
    InvalidJson = QC_INVALID_JSON,
    /// An argument had a value outside its allowed range.
    InvalidArgument = QC_INVALID_ARGUMENT,
    /// The handle is NULL where not allowed, already freed, or was never issued.
    InvalidHandle = QC_INVALID_HANDLE,
    /// The operation needs a running object.
    NotRunning = QC_NOT_RUNNING,
    /// The object is already running.
    AlreadyRunning = QC_ALREADY_RUNNING,
    /// The named item does not exist.
    NotFound = QC_NOT_FOUND,
    /// An operating-system I/O operation failed (bind, lock file, ...).
    Io = QC_IO,
    /// A panic was caught inside the library; the call had no effect it could vouch for.
    Panic = QC_PANIC,
    /// An unexpected internal failure.
    Internal = QC_INTERNAL,
    /// The call is refused in the current situation.
    Refused = QC_REFUSED,
}

impl Status {
    /// The constant's C name, e.g. `"QC_NOT_FOUND"`.
    pub fn name(self) -> &'static str {
        self.c_name().to_str().unwrap_or("QC_UNKNOWN")
    }

    /// Maps a raw code back to a status (unknown codes give `None`).
    pub fn from_code(code: u32) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| *s as u32 == code)
    }
}

/// An error with its status code and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error {
            status,
            message: message.into(),
        }
    }
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(Status::InvalidArgument, message)
    }
    pub fn invalid_json(message: impl Into<String>) -> Self {
        Error::new(Status::InvalidJson, message)
    }
    pub fn not_running() -> Self {
        Error::new(Status::NotRunning, "the companion is not running")
    }
    pub fn io(context: &str, err: std::io::Error) -> Self {
        Error::new(Status::Io, format!("{context}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
