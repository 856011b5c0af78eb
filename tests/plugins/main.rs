//! The plugin host (`src/plugins`): manifests, installation, the Node
//! runtime and its hostile fixtures, views, and the PDF renderer.
//!
//! One test binary; `ipc_sigpipe.rs` beside this file (changes the process's
//! SIGPIPE disposition) is a binary of its own.

/// Property tests of the manifest parser.
mod fuzz;
/// The hostile fixture plugins stay what the runtime tests rely on.
mod hostile_fixtures;
/// Installing, updating and removing plugins.
// Symlinks, FIFOs and mode bits in the copied trees: Unix by nature.
#[cfg(unix)]
mod install;
/// Manifest validation against the fixture plugins.
mod manifest;
/// The Markdown-to-PDF renderer.
// Reads the PDFs back with poppler's Linux tools and checks mode bits.
#[cfg(unix)]
mod pdf;
/// The plugin runtime: a host with real Node plugin processes.
mod runtime;
/// The view server.
mod views;
// The plugin host with the real Windows Node (node.exe) and its Job Object.
#[cfg(windows)]
mod windows;
