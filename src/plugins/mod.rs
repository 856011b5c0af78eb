//! The plugin host: installs, validates and runs the desktop
//! app's plugins — a folder with `manifest.json` and a Node entry script
//! that talks to its host over Node's IPC channel — without Electron.
//!
//! ## Layout of a plugins directory
//! ```text
//! <dir>/installed/<id>/     the plugin's files (manifest.json at the root)
//! <dir>/data/<id>/          PLUGIN_DATA_DIR: 0700, kept across restarts,
//!                           updates and re-installs; removed only on request
//! <dir>/state.json          enabled flags and configuration values per id
//! <dir>/.staging/           installs in progress (same filesystem, renamed
//!                           into `installed/` once validated)
//! ```
//! The default directory is `<qwen_home>/companion/plugins`
//! ([`crate::shared::fs::qwen_home`]).
//!
//! ## Parts
//! - [`manifest`]: the manifest's types, parser and validator.
//! - [`install`]: install from a folder or a `.zip`, uninstall, the state file.
//! - [`ipc`]: Node's `json` IPC framing over an AF_UNIX socketpair.
//! - [`process`]: spawning a plugin's Node child and ending it with all its descendants.
//! - [`host`]: the plugin host itself: `call_tool`, `host_request`, lifecycle.
//! - [`pdf`]: the library's default `render_pdf` capability (Markdown → PDF).
//! - [`views`]: the view server: plugin pages over loopback HTTP with `window.pluginHost`.

pub mod host;
pub mod install;
pub mod ipc;
pub mod manifest;
pub mod pdf;
pub mod process;
pub mod views;
