//! The status codes of the C ABI — the one table of them.
//!
//! Every fallible `qc_` function returns one of these. The numbers are part of
//! the ABI: fixed, never reused (a retired code stays listed as a comment).
//! The C header's `QC_` constants are generated from this file, the Rust
//! [`Status`](super::Status) enum takes its values and names from it, and
//! `qc_status_name` answers from it. Kept free of anything else, because the
//! header generator reads it as it is.

#![allow(non_camel_case_types)]

/// Status code returned by every fallible function (see the `QC_` constants).
pub type qc_status = u32;

/// Success.
pub const QC_OK: qc_status = 0;
/// A required pointer argument was NULL.
pub const QC_NULL_PARAMETER: qc_status = 1;
/// A string argument was not valid UTF-8.
pub const QC_INVALID_UTF8: qc_status = 2;
/// A JSON argument could not be parsed or had the wrong shape.
pub const QC_INVALID_JSON: qc_status = 3;
/// An argument had a value outside its allowed range.
pub const QC_INVALID_ARGUMENT: qc_status = 4;
/// The handle was never issued or has been freed.
pub const QC_INVALID_HANDLE: qc_status = 5;
/// The operation needs a running object: a started companion (not started
/// yet, or stopped), or a participant with a registered session and a bound
/// inbox that is not closed.
pub const QC_NOT_RUNNING: qc_status = 6;
/// The object is already running: `start` on a running companion, or a
/// second `register` on a participant without `multiSession`.
pub const QC_ALREADY_RUNNING: qc_status = 7;
/// The named item does not exist (for example no open diff for that path).
pub const QC_NOT_FOUND: qc_status = 8;
/// An operating-system I/O operation failed.
pub const QC_IO: qc_status = 9;
/// A panic was caught inside the library.
pub const QC_PANIC: qc_status = 10;
/// An unexpected internal failure.
pub const QC_INTERNAL: qc_status = 11;
/// The call is not allowed here (for example a reply used outside its callback).
pub const QC_REFUSED: qc_status = 12;
