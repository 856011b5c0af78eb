//! The C ABI: the exported `qc_*` entry points. Apart from the `atexit`
//! trampoline of the OS layer (`crate::sys`), this module is the only place
//! with `extern "C"` functions.
//!
//! Conventions (also in the generated header and README):
//! * Every fallible function returns a `qc_status` from a fixed table and takes
//!   a last `char **error` out-parameter (may be NULL). On failure `*error`
//!   receives an owned message to free with `qc_string_free`; on success it is
//!   set to NULL. Other out-parameters are written only on success.
//! * Input strings are NUL-terminated UTF-8, borrowed for the call only.
//! * Returned strings are owned by the caller and freed with `qc_string_free`.
//! * Handles are checked against a table of live handles: a freed, stale or
//!   made-up handle gives `QC_INVALID_HANDLE`, never undefined behaviour.
//! * Every body runs behind a panic boundary (`QC_PANIC`).

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

mod companion;
mod health;
mod mcp;
mod plugins;
mod sessions;
mod util;
mod views;

pub use companion::*;
pub use health::*;
pub use mcp::*;
pub use plugins::*;
pub use sessions::*;
pub use util::*;
pub use views::*;
