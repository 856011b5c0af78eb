//! The C ABI (`src/ffi`, `include/qwen_companion.h`) used as a C, Python,
//! Kotlin or Lua host would use it: through the exported functions only.
//!
//! One test binary; beside this file, binaries of their own: the tests that
//! change or measure process-wide state (`panic_hook.rs`, `threads.rs`) and
//! `header.rs` (the committed header equals what cbindgen generates; run as
//! `cargo test --test header`, as the header itself says).

/// `qc_companion_*`: the IDE companion's lifecycle, context and callbacks.
mod companion;
/// One handle space for every object type.
mod handles;
/// `qc_mcp_*`: the plugin MCP server.
mod mcp;
/// `qc_plugin_host_*`: the plugin host (calls, views, settings).
mod plugins;
/// A call queued behind a busy plugin.
mod plugins_call_queued;
/// `qc_participant_*`: cross-session messaging.
mod sessions;
/// The pull (poll) flavour of the participant's events.
// Polls the pull-mode fd (an event HANDLE on Windows, not pollable).
#[cfg(unix)]
mod sessions_pull;
