//! qwen-companion: a native library (C ABI) that makes any editor a Qwen Code
//! companion. See README.md for the C API conventions.

pub mod error;
pub mod events;
pub mod ffi;
pub mod health;
pub mod host;
pub mod ide;
pub mod loopback;
pub mod mcp_bridge;
pub mod panics;
pub mod plugins;
pub mod runtime;
pub mod service;
pub mod sessions;
pub mod shared;
mod sys;

pub use error::{Error, Result, Status};
