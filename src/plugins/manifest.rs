//! A plugin's `manifest.json`: the types the rest of the host works with.
//! Parsing and validation live in [`parse`] (re-exported here: [`load_dir`],
//! [`parse()`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

mod parse;
pub use parse::*;

#[cfg(test)]
mod tests;

/// A validated manifest of a plugin folder.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Reverse-DNS-like id (`com.example.hello`); also the directory name.
    pub id: String,
    pub name: String,
    /// Strict SemVer.
    pub version: semver::Version,
    pub description: Option<String>,
    pub author: Option<String>,
    pub readme: Option<String>,
    /// `main` as written in the manifest (relative to the plugin folder).
    pub main: String,
    /// `main` resolved (symlinks followed) to a file inside `root`.
    pub main_path: PathBuf,
    /// The plugin folder (canonical).
    pub root: PathBuf,
    /// Known and unknown permissions as written (unknown ones gave a warning).
    pub permissions: Vec<String>,
    pub activation_events: Vec<String>,
    /// Every tool the plugin answers: the manifest's `tools[]` in order, then
    /// one hidden tool per `documentParsers[].toolName` not among them.
    pub tools: Vec<ToolSpec>,
    pub document_parsers: Vec<DocumentParser>,
    pub ui: Option<PanelSpec>,
    pub views: Vec<ViewSpec>,
    pub session_action: Option<SessionAction>,
    pub configuration: Vec<ConfigEntry>,
    pub commands: Vec<CommandSpec>,
    pub keybindings: Vec<Keybinding>,
    /// `menus` by location (e.g. `"session/context"`).
    pub menus: BTreeMap<String, Vec<MenuItem>>,
    pub icon: Option<String>,
    /// Top-level fields this host does not know: kept, ignored.
    pub extra: Map<String, Value>,
    /// The whole validated manifest object as the author wrote it.
    pub document: Arc<Map<String, Value>>,
}

impl Manifest {
    /// The tool called `name`, hidden parser tools included.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
    /// The tools offered to a model (hidden document-parser tools left out).
    pub fn visible_tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().filter(|t| t.model_visible)
    }
    /// The document-parser tool for `mime_type` (compared in lower case).
    pub fn parser_for(&self, mime_type: &str) -> Option<&ToolSpec> {
        let mime = mime_type.to_ascii_lowercase();
        let p = self.document_parsers.iter().find(|p| p.mime_type == mime)?;
        self.tool(&p.tool_name)
    }
    /// The configuration entry `id`.
    pub fn config_entry(&self, id: &str) -> Option<&ConfigEntry> {
        self.configuration.iter().find(|c| c.id == id)
    }
    /// A JSON summary for listings and install results:
    /// `{id, name, version, description?, author?, permissions, tools: [{name, modelVisible}]}`.
    pub fn summary_json(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "version": self.version.to_string(),
            "permissions": self.permissions,
            "tools": self.tools.iter().map(|t| json!({
                "name": t.name,
                "modelVisible": t.model_visible,
            })).collect::<Vec<_>>(),
        });
        if let Some(d) = &self.description {
            v["description"] = json!(d);
        }
        if let Some(a) = &self.author {
            v["author"] = json!(a);
        }
        v
    }
    /// Whether the manifest lists `permission`.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }
    /// `context.config` for a call: every configuration id with the user's
    /// value from `values` when it has the entry's type, else the default.
    /// `None` when the manifest declares no configuration.
    pub fn effective_config(&self, values: &Map<String, Value>) -> Option<Map<String, Value>> {
        if self.configuration.is_empty() {
            return None;
        }
        let mut out = Map::new();
        for entry in &self.configuration {
            let v = values
                .get(&entry.id)
                .filter(|v| entry.kind.accepts(v))
                .cloned()
                .unwrap_or_else(|| entry.default_value.clone());
            out.insert(entry.id.clone(), v);
        }
        Some(out)
    }
}

/// One tool the plugin answers.
#[derive(Clone)]
pub struct ToolSpec {
    pub name: String,
    pub summary: Option<String>,
    pub description: Option<String>,
    /// The `parameters` JSON Schema as written (`type: "object"`).
    pub parameters: Value,
    /// `parameters` compiled once.
    pub validator: Arc<jsonschema::Validator>,
    /// `renderAs` (e.g. `"checklist"`).
    pub render_as: Option<String>,
    /// Optional MCP-style hints (`readOnlyHint`, `destructiveHint`,
    /// `idempotentHint`, `openWorldHint`), validated booleans.
    pub annotations: Option<ToolAnnotations>,
    /// False for a hidden document-parser tool (never offered to a model).
    pub model_visible: bool,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("model_visible", &self.model_visible)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolAnnotations {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentParser {
    /// A valid MIME type (`type/subtype`).
    pub mime_type: String,
    pub tool_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PanelSpec {
    /// Entry file relative to the plugin folder (exists inside it).
    pub entry: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ViewSpec {
    pub id: String,
    pub title: Option<String>,
    pub icon: Option<String>,
    pub entry: String,
    pub width: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAction {
    pub tool: String,
    pub icon: Option<String>,
    pub tooltip: Option<String>,
    pub visible_tool: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    pub id: String,
    pub label: Option<String>,
    pub description: Option<String>,
    pub kind: ConfigKind,
    /// Of the entry's type.
    pub default_value: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigKind {
    /// Options come from `options_tool` (called with `{}`), after the host's "Auto".
    Select {
        options_tool: Option<String>,
    },
    Boolean,
    String,
    Number,
}

impl ConfigKind {
    /// Whether `v` is a value of this kind.
    pub fn accepts(&self, v: &Value) -> bool {
        match self {
            ConfigKind::Select { .. } | ConfigKind::String => v.is_string(),
            ConfigKind::Boolean => v.is_boolean(),
            ConfigKind::Number => v.is_number(),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            ConfigKind::Select { .. } => "select",
            ConfigKind::Boolean => "boolean",
            ConfigKind::String => "string",
            ConfigKind::Number => "number",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub tool: String,
    pub title: Option<String>,
    pub icon: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keybinding {
    /// Names a tool.
    pub command: String,
    /// As written, e.g. `mod+shift+d`.
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuItem {
    pub tool: String,
    pub title: Option<String>,
    pub icon: Option<String>,
}

/// One problem found in a manifest: the JSON path of the field (`/tools/1/name`,
/// `""` for the whole document) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}
