//! Plugin tools for Qwen Code through an MCP server: the parts that do not
//! need the running plugin host.
//!
//! Every enabled plugin's model-visible tools are to be served as MCP tools
//! by a second loopback MCP server, which Qwen Code reaches through an entry
//! in the `mcpServers` object of its `settings.json`. This module holds:
//!
//! - [`registration`]: our entry (`qwen-companion-plugins`, the stdio
//!   bridge) registered in or removed from one settings file.
//! - [`settings`]: add and remove our `mcpServers` entry in the user's or the
//!   project's `settings.json`, keeping every comment, key and byte of
//!   formatting around it, refusing files Qwen Code itself cannot read.
//! - [`naming`]: the MCP tool names of plugin tools — readable, unique,
//!   already valid under the CLI's naming rules (so it never hashes them),
//!   mapped back exactly to (plugin id, tool name).
//! - [`schema`]: a plugin tool as the CLI wants it in `tools/list`
//!   (`inputSchema`, description, title, conservative annotations), and a
//!   per-tool check mirroring the CLI's own `tools/list` validation, so one
//!   bad tool is left out instead of the CLI dropping the whole server.
//!
//! - [`editor`]: the editor's own tools (diagnostics, open a file at a
//!   line, open editors, selection), served next to the plugin tools while
//!   the editor offers them as `editor_*` capabilities.
//!
//! How the entry reaches the server (a `${VAR}` URL or a stdio bridge) is
//! decided in `docs/mcp-registration.md`.

pub mod discovery;
pub mod editor;
pub mod naming;
pub mod registration;
pub mod schema;
pub mod server;
pub mod settings;
pub mod tools;

pub use server::PluginMcpServer;
