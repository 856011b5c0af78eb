//! The Windows implementation of [`crate::sys`]: handles instead of file
//! descriptors behind the same names as `sys/unix/`, owner-only DACLs
//! behind the private modes, named pipes behind the local sockets and
//! Node's channel, and a Job Object behind a plugin's process group.

pub mod env;
pub mod event;
pub mod exit;
pub mod fs;
pub mod io;
pub mod ipc;
pub mod mem;
pub mod process;
pub mod thread;

mod frame;
mod security;
pub(super) mod util;

#[cfg(test)]
mod tests;
