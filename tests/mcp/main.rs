//! The plugin MCP bridge (`src/mcp_bridge`): plugin tools served as MCP
//! tools, over HTTP and through the `qc-mcp-bridge` stdio binary.

/// The editor's own tools.
mod editor;
/// The HTTP server.
mod http;
/// The stdio bridge binary.
mod stdio;
