//! The POSIX implementation of [`crate::sys`]. Code here is meant to serve
//! every Unix (Linux today, macOS next); what only Linux has lives in
//! `linux.rs` and is reached through the same names.

pub mod env;
pub mod event;
pub mod exit;
pub mod fs;
pub mod io;
pub mod ipc;
pub mod mem;
pub mod process;
pub mod thread;

mod linux;

#[cfg(test)]
mod tests;
