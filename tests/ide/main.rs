//! The IDE companion (`src/ide`) as the Qwen Code CLI sees it: an MCP server
//! over loopback HTTP, its lock file, context pushes and diffs, and the HTTP
//! layer's limits.
//!
//! One test binary; `lock_dir_env.rs` (changes the process environment) and
//! `soak.rs` (measures its own server process) beside this file are binaries
//! of their own.

/// The companion end to end through an MCP client.
mod companion;
/// The `cli` option: Gemini CLI's discovery file and variables, one server
/// for both CLIs.
mod gemini;
/// The loopback HTTP layer's limits (sizes, timeouts, connection cap).
mod http_limits;
