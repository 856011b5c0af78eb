//! Library-wide error type and the fixed status-code table of the C ABI.

use std::fmt;

/// Status codes returned by every fallible `qc_` function.
///
/// The numeric values are part of the ABI: they are fixed and never reused.
/// A retired code stays listed here as a comment.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullParameter = 1,
    /// A string argument was not valid UTF-8.
    InvalidUtf8 = 2,
    /// A JSON argument could not be parsed or had the wrong shape.
    InvalidJson = 3,
    /// An argument had a value outside its allowed range.
    InvalidArgument = 4,
    /// The handle is NULL where not allowed, already freed, or was never issued.
    InvalidHandle = 5,
    /// The operation needs a running object: a started companion (not started
    /// yet, or stopped), or a participant with a registered session and a
    /// bound inbox that is not closed.
    NotRunning = 6,
    /// The object is already running: `start` on a running companion, or a
    /// second `register` on a participant without `multiSession`.
    AlreadyRunning = 7,
    /// The named item (for example an open diff for a path) does not exist.
    NotFound = 8,
    /// An operating-system I/O operation failed (bind, lock file, ...).
    Io = 9,
    /// A panic was caught inside the library; the call had no effect it could vouch for.
    Panic = 10,
    /// An unexpected internal failure.
    Internal = 11,
    /// The call is refused in the current situation (for example a reply used
    /// outside its callback).
    Refused = 12,
}

impl Status {
    /// The constant's C name, e.g. `"QC_NOT_FOUND"`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "QC_OK",
            Status::NullParameter => "QC_NULL_PARAMETER",
            Status::InvalidUtf8 => "QC_INVALID_UTF8",
            Status::InvalidJson => "QC_INVALID_JSON",
            Status::InvalidArgument => "QC_INVALID_ARGUMENT",
            Status::InvalidHandle => "QC_INVALID_HANDLE",
            Status::NotRunning => "QC_NOT_RUNNING",
            Status::AlreadyRunning => "QC_ALREADY_RUNNING",
            Status::NotFound => "QC_NOT_FOUND",
            Status::Io => "QC_IO",
            Status::Panic => "QC_PANIC",
            Status::Internal => "QC_INTERNAL",
            Status::Refused => "QC_REFUSED",
        }
    }

    /// Maps a raw code back to a status (unknown codes give `None`).
    pub fn from_code(code: u32) -> Option<Status> {
        use Status::*;
        [
            Ok,
            NullParameter,
            InvalidUtf8,
            InvalidJson,
            InvalidArgument,
            InvalidHandle,
            NotRunning,
            AlreadyRunning,
            NotFound,
            Io,
            Panic,
            Internal,
            Refused,
        ]
        .into_iter()
        .find(|s| *s as u32 == code)
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
