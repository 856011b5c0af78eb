//! What the plugin MCP server lists and how a call's outcome becomes an MCP
//! result: the listing from the manifests alone, the built-in
//! [`STATUS_TOOL`], the mapping of plugin results and errors.

use std::path::Path;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{json, Value};

use super::editor;
use super::naming::{self, Assignment, SERVER_NAME};
use super::schema::{self, ToolSource};
use crate::plugins::host::{CallError, PluginHost, ToolOutput};
use crate::shared::paths::{self, PathStyle};
use crate::sys::platform::PATH_STYLE;

/// The built-in read-only tool listed even when no plugin is enabled (Qwen
/// Code treats a server listing nothing as an error). It has no `_`, so no
/// plugin tool name (always `<label>_<tool>`) can ever equal it.
pub const STATUS_TOOL: &str = "plugins-status";

/// The tools being served: the listed entries and the names, both ways.
pub struct Listing {
    pub tools: Vec<Value>,
    pub names: Assignment,
}

impl Listing {
    /// The (plugin id, tool) behind a listed MCP name.
    pub fn lookup(&self, mcp_name: &str) -> Option<(String, String)> {
        let listed = self
            .tools
            .iter()
            .any(|t| t.get("name").and_then(Value::as_str) == Some(mcp_name));
        if !listed || mcp_name == STATUS_TOOL || editor::find(mcp_name).is_some() {
            return None;
        }
        self.names
            .lookup(mcp_name)
            .map(|(p, t)| (p.to_string(), t.to_string()))
    }

    /// The listed tools as rmcp values (an entry rmcp cannot read is left out).
    pub fn rmcp_tools(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .filter_map(|t| serde_json::from_value(t.clone()).ok())
            .collect()
    }
}

/// The listing for the host's current state: every enabled plugin's
/// model-visible tools, from the manifests alone (nothing is spawned), the
/// editor's tools it offers ([`editor`]), then [`STATUS_TOOL`]. A tool the CLI would refuse is left out and reported
/// to `left_out` (plugin id, tool, reason); the others stay.
pub fn listing(host: &PluginHost, mut left_out: impl FnMut(&str, &str, &str)) -> Listing {
    let manifests: Vec<_> = host
        .plugin_ids()
        .into_iter()
        .filter(|id| host.is_enabled(id))
        .filter_map(|id| host.manifest(&id))
        .collect();
    let pairs: Vec<(&str, &str)> = manifests
        .iter()
        .flat_map(|m| {
            m.tools
                .iter()
                .filter(|t| t.model_visible)
                .map(|t| (m.id.as_str(), t.name.as_str()))
        })
        .collect();
    let names = naming::assign(&pairs, SERVER_NAME).unwrap_or_default();
    let sources: Vec<ToolSource> = manifests
        .iter()
        .flat_map(|m| {
            m.tools.iter().map(|spec| ToolSource {
                plugin_id: &m.id,
                plugin_name: &m.name,
                spec,
            })
        })
        .collect();
    let mut tools = schema::tools_list(&sources, &names, SERVER_NAME, &mut left_out);
    tools.retain(|t| {
        let name = t.get("name").and_then(Value::as_str).unwrap_or("");
        let clash = name == STATUS_TOOL || editor::find(name).is_some();
        if clash {
            left_out("?", name, "the name is a built-in tool's");
        }
        !clash
    });
    tools.extend(
        editor::TOOLS
            .iter()
            .filter(|t| host.offers(t.capability))
            .map(editor::EditorTool::listed),
    );
    tools.push(status_tool());
    Listing { tools, names }
}

fn status_tool() -> Value {
    json!({
        "name": STATUS_TOOL,
        "title": "IDE plugins status",
        "description": "List the plugins installed in the IDE (qwen-companion): id, name, version, \
            whether each is enabled, and the MCP names of its tools.",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        "annotations": {"title": "IDE plugins status", "readOnlyHint": true,
            "openWorldHint": false},
    })
}

/// The built-in status tool's answer (JSON text).
pub fn status(host: &PluginHost, listing: &Listing) -> CallToolResult {
    let plugins: Vec<Value> = host
        .plugin_ids()
        .into_iter()
        .filter_map(|id| {
            let m = host.manifest(&id)?;
            let tools: Vec<&str> = m
                .tools
                .iter()
                .filter(|t| t.model_visible)
                .filter_map(|t| listing.names.name_of(&m.id, &t.name))
                .filter(|n| listing.lookup(n).is_some())
                .collect();
            Some(json!({
                "id": m.id,
                "name": m.name,
                "version": m.version.to_string(),
                "enabled": host.is_enabled(&id),
                "tools": if host.is_enabled(&id) { json!(tools) } else { json!([]) },
            }))
        })
        .collect();
    CallToolResult::success(vec![ContentBlock::text(
        json!({ "plugins": plugins }).to_string(),
    )])
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A failed call as an MCP error result: the host's message (plus the last
/// lines of the plugin's stderr when it exited).
pub fn call_error(e: &CallError) -> CallToolResult {
    let mut text = e.to_string();
    if let Some(tail) = e.stderr_tail.as_deref().filter(|t| !t.trim().is_empty()) {
        text.push_str("\nstderr:\n");
        text.push_str(tail.trim_end());
    }
    error_result(text)
}

/// A tool that is not (or no longer) served.
pub fn gone(name: &str) -> CallToolResult {
    error_result(format!(
        "the tool {name:?} is not available: its plugin was disabled or uninstalled, \
         or the tool list changed; list the tools again"
    ))
}

/// A plugin's result as an MCP result. Every content block MCP knows
/// (text, image, audio, resource, resource_link) passes through unchanged;
/// any other block becomes a text block saying what was left out.
/// `details.filePath` adds a `resource_link` to the file (relative paths
/// are taken against `cwd`). `details` is never copied into
/// `structuredContent`: Qwen Code 0.24.4 puts `structuredContent` in front
/// of the model's input as JSON text, which would repeat the plugin's
/// internal data.
pub fn output(out: &ToolOutput, cwd: &str) -> CallToolResult {
    let mut blocks = Vec::new();
    for block in &out.content {
        match serde_json::from_value::<ContentBlock>(block.clone()) {
            Ok(b) => blocks.push(b),
            Err(_) => {
                let kind = block
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("(none)");
                blocks.push(ContentBlock::text(format!(
                    "[a content block of type {kind:?} that MCP cannot carry was left out]"
                )));
            }
        }
    }
    let file = out
        .details
        .as_ref()
        .and_then(|d| d.get("filePath"))
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty() && !p.contains('\0'));
    if let Some(link) = file.and_then(|p| file_link(p, cwd, PATH_STYLE)) {
        if let Ok(link) = serde_json::from_value::<ContentBlock>(link) {
            blocks.push(link);
        }
    }
    CallToolResult::success(blocks)
}

/// The `resource_link` of a tool's `details.filePath`: `p` when absolute in
/// `style`, else joined to `cwd` (when that is absolute); `None` otherwise.
pub fn file_link(p: &str, cwd: &str, style: PathStyle) -> Option<Value> {
    let path = if style.is_absolute(p) {
        p.to_string()
    } else if style.is_absolute(cwd) {
        format!("{cwd}{}{p}", style.separator())
    } else {
        return None;
    };
    let path = style.normalize(&path)?;
    let name = path
        .rsplit(|c| c == '/' || c == style.separator())
        .find(|s| !s.is_empty())
        .unwrap_or(&path)
        .to_string();
    let mut link = json!({
        "type": "resource_link",
        "uri": style.file_uri(&path)?,
        "name": name,
    });
    if let Some(mime) = mime_type(Path::new(&name)) {
        link["mimeType"] = json!(mime);
    }
    Some(link)
}

/// The `file://` URI of an absolute path as Node's `url.pathToFileURL` writes
/// it on this platform (a path that is not UTF-8 is percent-encoded byte by
/// byte).
pub fn file_uri(path: &Path) -> String {
    path.to_str()
        .and_then(|s| PATH_STYLE.file_uri(s))
        .unwrap_or_else(|| {
            format!(
                "file://{}",
                paths::encode_uri_path(&crate::sys::env::path_bytes(path))
            )
        })
}

/// The local path of a `file://` URI as Node's `url.fileURLToPath` finds it
/// on this platform, if it is one.
pub fn uri_path(uri: &str) -> Option<String> {
    PATH_STYLE.path_from_file_uri(uri)
}

/// The MIME type of a file from its extension (the common ones).
pub fn mime_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" => "text/typescript",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
