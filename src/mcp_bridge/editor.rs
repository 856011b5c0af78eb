//! The editor's own tools on the plugin MCP server: the diagnostics of a
//! file or the workspace, open a file at a line, the open editors, the
//! current selection.
//!
//! The editor provides each one as a capability of its plugin host (the
//! mechanism plugins use for `show_notification`): `editor_diagnostics`,
//! `editor_open_file`, `editor_open_editors`, `editor_selection`. A tool is
//! listed while its capability is offered. Qwen Code 0.24.4 reads the tool
//! list once per connection (it ignores `tools/list_changed`), so editors
//! offer them before the CLI starts.
//!
//! This module checks and normalises the arguments before the editor sees
//! them (paths made absolute against the session's root, lines and columns
//! integers ≥ 1, 1-based) and checks and bounds the editor's answer before
//! the model sees it: a malformed answer is an error result naming what is
//! wrong, never a crash; long lists and texts are cut with a note.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};

use super::schema;
use crate::shared::paths::PathStyle;

/// One editor tool: its capability and how Qwen Code sees it.
pub struct EditorTool {
    /// The capability the editor offers (`editor_…`).
    pub capability: &'static str,
    /// The MCP tool name (no `_`, so no plugin tool, always
    /// `<label>_<tool>`, can take it).
    pub name: &'static str,
    title: &'static str,
    description: &'static str,
    read_only: bool,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Diagnostics,
    OpenFile,
    OpenEditors,
    Selection,
}

/// Most diagnostics passed to the model in one answer.
pub const MAX_DIAGNOSTICS: usize = 500;
/// Longest diagnostic message passed on (characters).
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// Most open editors passed on.
pub const MAX_EDITORS: usize = 500;
/// Longest selected text passed on (characters).
pub const MAX_SELECTION_CHARS: usize = 100_000;

/// The severities, most severe first.
const SEVERITIES: [&str; 4] = ["error", "warning", "information", "hint"];

/// Every editor tool, in listing order.
pub const TOOLS: [EditorTool; 4] = [
    EditorTool {
        capability: "editor_diagnostics",
        name: "editor-diagnostics",
        title: "IDE diagnostics",
        description: "The diagnostics (errors, warnings, hints) the IDE currently shows, from its \
            language servers, inspections and linters: for one file (`path`) or, without `path`, \
            for every file the IDE has diagnostics for. `severity` keeps that severity and the \
            more severe ones. Lines and columns are 1-based.",
        read_only: true,
        kind: Kind::Diagnostics,
    },
    EditorTool {
        capability: "editor_open_file",
        name: "editor-open-file",
        title: "Open file in the IDE",
        description: "Open an existing file in the IDE and show it to the user, at `line` (and \
            `column`) when given; with `endLine` the range from line/column to endLine/endColumn \
            is selected. Lines and columns are 1-based. It does not change the file.",
        read_only: false,
        kind: Kind::OpenFile,
    },
    EditorTool {
        capability: "editor_open_editors",
        name: "editor-open-editors",
        title: "IDE open editors",
        description: "The files open in the IDE's editors: path, whether it is the active one, \
            whether it has unsaved changes, and its language.",
        read_only: true,
        kind: Kind::OpenEditors,
    },
    EditorTool {
        capability: "editor_selection",
        name: "editor-selection",
        title: "IDE selection",
        description: "The text the user has selected in the IDE now, with its file and 1-based \
            start and end (line, column); null when nothing is selected.",
        read_only: true,
        kind: Kind::Selection,
    },
];

/// The editor tool called `name`, if it is one.
pub fn find(name: &str) -> Option<&'static EditorTool> {
    TOOLS.iter().find(|t| t.name == name)
}

fn position_props() -> Value {
    let n = |d: &str| json!({"type": "integer", "minimum": 1, "description": d});
    json!({
        "path": {"type": "string", "description":
            "The file: absolute, or relative to the workspace root."},
        "line": n("1-based line to show."),
        "column": n("1-based column (characters) on that line."),
        "endLine": n("1-based last line of a range to select."),
        "endColumn": n("1-based column (characters) where the selection ends."),
    })
}

impl EditorTool {
    fn input_schema(&self) -> Value {
        match self.kind {
            Kind::Diagnostics => json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description":
                        "The file: absolute, or relative to the workspace root. Omit for the whole workspace."},
                    "severity": {"type": "string", "enum": SEVERITIES, "description":
                        "The least severe kind to include (default: hint, everything)."},
                },
                "additionalProperties": false,
            }),
            Kind::OpenFile => json!({
                "type": "object",
                "properties": position_props(),
                "required": ["path"],
                "additionalProperties": false,
            }),
            Kind::OpenEditors | Kind::Selection => json!({
                "type": "object", "properties": {}, "additionalProperties": false,
            }),
        }
    }

    /// The `tools/list` entry, annotated as the plugin tools are.
    pub fn listed(&self) -> Value {
        let mut annotations = json!({"title": self.title, "readOnlyHint": self.read_only,
            "openWorldHint": false});
        if !self.read_only {
            annotations["destructiveHint"] = json!(false);
            annotations["idempotentHint"] = json!(true);
        }
        json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": schema::input_schema(&self.input_schema()),
            "annotations": annotations,
        })
    }

    /// The capability's `params` from the call's arguments: checked, with
    /// relative paths taken against `cwd`. `Err` is the message for the
    /// model.
    pub fn params(
        &self,
        args: &Map<String, Value>,
        cwd: &str,
        style: PathStyle,
    ) -> Result<Value, String> {
        let allowed: &[&str] = match self.kind {
            Kind::Diagnostics => &["path", "severity"],
            Kind::OpenFile => &["path", "line", "column", "endLine", "endColumn"],
            Kind::OpenEditors | Kind::Selection => &[],
        };
        if let Some(k) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("{}: unknown argument {k:?}", self.name));
        }
        let mut out = Map::new();
        match args.get("path") {
            None | Some(Value::Null) if self.kind == Kind::OpenFile => {
                return Err(format!("{}: `path` (string) is required", self.name));
            }
            None | Some(Value::Null) => {}
            Some(Value::String(p)) => {
                out.insert("path".into(), json!(absolute(p, cwd, style)?));
            }
            Some(_) => return Err(format!("{}: `path` must be a string", self.name)),
        }
        if let Some(v) = args.get("severity").filter(|v| !v.is_null()) {
            match v.as_str().filter(|s| SEVERITIES.contains(s)) {
                Some(s) => out.insert("severity".into(), json!(s)),
                None => {
                    return Err(format!(
                        "{}: `severity` must be one of {}",
                        self.name,
                        SEVERITIES.join(", ")
                    ))
                }
            };
        }
        for key in ["line", "column", "endLine", "endColumn"] {
            match args.get(key) {
                None | Some(Value::Null) => {}
                Some(v) => match v.as_u64().filter(|n| *n >= 1 && *n <= u32::MAX as u64) {
                    Some(n) => {
                        out.insert(key.into(), json!(n));
                    }
                    None => return Err(format!("{}: `{key}` must be an integer ≥ 1", self.name)),
                },
            }
        }
        if out.contains_key("column") && !out.contains_key("line") {
            return Err(format!("{}: `column` needs `line`", self.name));
        }
        if out.contains_key("endColumn") && !out.contains_key("endLine") {
            return Err(format!("{}: `endColumn` needs `endLine`", self.name));
        }
        if let (Some(a), Some(b)) = (out.get("line"), out.get("endLine")) {
            if b.as_u64() < a.as_u64() {
                return Err(format!("{}: `endLine` is before `line`", self.name));
            }
        } else if out.contains_key("endLine") {
            return Err(format!("{}: `endLine` needs `line`", self.name));
        }
        Ok(Value::Object(out))
    }

    /// The MCP result of the editor's answer to `params`.
    pub fn result(&self, params: &Value, answer: Result<Value, String>) -> CallToolResult {
        let answer = match answer {
            Ok(a) => a,
            Err(m) => return error(format!("the IDE could not answer {}: {m}", self.name)),
        };
        let shaped = match self.kind {
            Kind::Diagnostics => diagnostics(params, &answer),
            Kind::OpenFile => open_file(params, &answer),
            Kind::OpenEditors => editors(&answer),
            Kind::Selection => selection(&answer),
        };
        match shaped {
            Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            Err(m) => error(format!(
                "the IDE's answer to {} is malformed: {m}",
                self.name
            )),
        }
    }
}

/// An error result for the model.
pub fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn absolute(p: &str, cwd: &str, style: PathStyle) -> Result<String, String> {
    if p.is_empty() || p.contains('\0') {
        return Err("`path` must be a non-empty path without NUL".into());
    }
    let joined = if style.is_absolute(p) {
        p.to_string()
    } else if style.is_absolute(cwd) {
        format!("{cwd}{}{p}", style.separator())
    } else {
        return Err(format!(
            "`path` {p:?} is relative and the workspace root is not known"
        ));
    };
    style
        .normalize(&joined)
        .ok_or_else(|| format!("`path` {p:?} is not a usable path"))
}

fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((i, _)) => (text[..i].to_string(), true),
        None => (text.to_string(), false),
    }
}

fn rank(severity: &str) -> Option<usize> {
    SEVERITIES.iter().position(|s| *s == severity)
}

fn list<'a>(answer: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    answer
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("it has no `{key}` list"))
}

fn diagnostics(params: &Value, answer: &Value) -> Result<Value, String> {
    let wanted = params
        .get("severity")
        .and_then(Value::as_str)
        .and_then(rank)
        .unwrap_or(3);
    let only = params.get("path").and_then(Value::as_str);
    let mut kept = Vec::new();
    let mut counts = [0usize; 4];
    for (i, d) in list(answer, "diagnostics")?.iter().enumerate() {
        let path = d.get("path").and_then(Value::as_str);
        let line = d.get("line").and_then(Value::as_u64);
        let message = d.get("message").and_then(Value::as_str);
        let severity = d.get("severity").and_then(Value::as_str).and_then(rank);
        let (Some(path), Some(line), Some(message), Some(severity)) =
            (path, line, message, severity)
        else {
            return Err(format!(
                "diagnostics[{i}] needs path, line, message and a severity of {}",
                SEVERITIES.join("/")
            ));
        };
        if severity > wanted || only.is_some_and(|p| p != path) {
            continue;
        }
        counts[severity] += 1;
        let (message, _) = cut(message, MAX_MESSAGE_CHARS);
        let mut out = json!({"path": path, "line": line,
            "column": d.get("column").and_then(Value::as_u64).unwrap_or(1),
            "severity": SEVERITIES[severity], "message": message});
        for key in ["endLine", "endColumn"] {
            if let Some(n) = d.get(key).and_then(Value::as_u64) {
                out[key] = json!(n);
            }
        }
        for key in ["source", "code"] {
            match d.get(key) {
                Some(Value::String(s)) if !s.is_empty() => out[key] = json!(cut(s, 200).0),
                Some(Value::Number(n)) => out[key] = json!(n.to_string()),
                _ => {}
            }
        }
        kept.push((severity, out));
    }
    kept.sort_by(|(sa, a), (sb, b)| {
        let key = |v: &Value| {
            (
                v["path"].as_str().unwrap_or("").to_string(),
                v["line"].as_u64().unwrap_or(0),
                v["column"].as_u64().unwrap_or(0),
            )
        };
        sa.cmp(sb).then_with(|| key(a).cmp(&key(b)))
    });
    let total = kept.len();
    let shown: Vec<Value> = kept
        .into_iter()
        .take(MAX_DIAGNOSTICS)
        .map(|(_, v)| v)
        .collect();
    let mut out = json!({
        "count": total,
        "errors": counts[0], "warnings": counts[1],
        "information": counts[2], "hints": counts[3],
        "diagnostics": shown,
    });
    if let Some(p) = only {
        out["path"] = json!(p);
    }
    if total > MAX_DIAGNOSTICS {
        out["note"] = json!(format!(
            "only the {MAX_DIAGNOSTICS} most severe of {total} diagnostics are shown; ask for one file or a higher severity"
        ));
    }
    Ok(out)
}

fn open_file(params: &Value, answer: &Value) -> Result<Value, String> {
    if !answer.is_object() {
        return Err("it is not an object".into());
    }
    let mut out = json!({"opened": true, "path": params["path"]});
    if let Some(line) = params.get("line") {
        out["line"] = line.clone();
    }
    Ok(out)
}

fn editors(answer: &Value) -> Result<Value, String> {
    let all = list(answer, "editors")?;
    let mut shown = Vec::new();
    for (i, e) in all.iter().enumerate() {
        let Some(path) = e
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            return Err(format!("editors[{i}] has no path"));
        };
        if shown.len() == MAX_EDITORS {
            continue;
        }
        let mut out = json!({"path": path,
            "active": e.get("active").and_then(Value::as_bool).unwrap_or(false),
            "dirty": e.get("dirty").and_then(Value::as_bool).unwrap_or(false)});
        if let Some(l) = e
            .get("language")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty())
        {
            out["language"] = json!(cut(l, 100).0);
        }
        shown.push(out);
    }
    let mut out = json!({"count": all.len(), "editors": shown});
    if all.len() > MAX_EDITORS {
        out["note"] = json!(format!(
            "only the first {MAX_EDITORS} of {} are shown",
            all.len()
        ));
    }
    Ok(out)
}

fn point(v: Option<&Value>, what: &str) -> Result<Value, String> {
    let line = v.and_then(|p| p.get("line")).and_then(Value::as_u64);
    let column = v.and_then(|p| p.get("column")).and_then(Value::as_u64);
    match (line, column) {
        (Some(l), Some(c)) if l >= 1 && c >= 1 => Ok(json!({"line": l, "column": c})),
        _ => Err(format!("selection.{what} needs line and column ≥ 1")),
    }
}

fn selection(answer: &Value) -> Result<Value, String> {
    let sel = match answer.get("selection") {
        None => return Err("it has no `selection` (null when nothing is selected)".into()),
        Some(Value::Null) => return Ok(json!({"selection": null})),
        Some(s) => s,
    };
    let path = sel
        .get("path")
        .and_then(Value::as_str)
        .ok_or("selection.path is missing")?;
    let text = sel
        .get("text")
        .and_then(Value::as_str)
        .ok_or("selection.text is missing")?;
    let (text, truncated) = cut(text, MAX_SELECTION_CHARS);
    let mut out = json!({"selection": {"path": path, "text": text,
        "start": point(sel.get("start"), "start")?, "end": point(sel.get("end"), "end")?}});
    if truncated {
        out["note"] = json!(format!(
            "the selected text was cut to its first {MAX_SELECTION_CHARS} characters"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
