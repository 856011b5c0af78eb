//! Helpers that more than one part of the library needs (the IDE companion,
//! the cross-session participant, the plugin host): Qwen's home directory,
//! private directories, atomic file writes, hex and randomness.
//! One copy here; the parts call it instead of keeping their own.

pub mod fs;
pub mod json;
pub mod paths;
pub mod rand;
pub mod sync;
#[cfg(test)]
pub(crate) mod testutil;
