//! Registering the plugin MCP server with Qwen Code: the
//! `qwen-companion-plugins` entry of `mcpServers` in one `settings.json`
//! (user or project scope), written and removed by [`settings`] without
//! touching anything else of the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

use super::naming::SERVER_NAME;
use super::settings::{self, Change, Outcome, Scope};
use crate::error::{Error, Result, Status};
use crate::shared::paths::PathStyle;
use crate::sys::platform::{is_launchable, LaunchRule, EXE_SUFFIX, LAUNCH_RULE, PATH_STYLE};

/// The `description` of our `mcpServers` entry.
pub const ENTRY_DESCRIPTION: &str = "Tools of the plugins installed in your IDE (qwen-companion)";

/// `options_json` of `qc_mcp_register` / `qc_mcp_unregister`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    bridge: Option<String>,
    #[serde(default)]
    always_load_tools: bool,
}

/// The parsed options: the settings file and its scope.
struct Target {
    scope: Scope,
    path: PathBuf,
    options: Options,
}

fn target(text: &str) -> Result<Target> {
    let options: Options = serde_json::from_str(text)
        .map_err(|e| Error::invalid_json(format!("invalid options_json: {e}")))?;
    let scope = match options.scope.as_deref() {
        None | Some("user") => Scope::User,
        Some("project") => Scope::Project,
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "options_json.scope must be \"user\" or \"project\", not {other:?}"
            )))
        }
    };
    let path = match scope {
        Scope::User => settings::settings_path(Scope::User, Path::new("/"))?,
        Scope::Project => {
            let Some(project) = options.project.as_deref() else {
                return Err(Error::invalid_argument(
                    "options_json.project (the project folder) is required for the project scope",
                ));
            };
            let dir = Path::new(project);
            if !PATH_STYLE.is_absolute(project) {
                return Err(Error::invalid_argument(format!(
                    "options_json.project {project:?} is not an absolute path"
                )));
            }
            if !dir.is_dir() {
                return Err(Error::new(
                    Status::NotFound,
                    format!("options_json.project {project:?} is not a folder"),
                ));
            }
            settings::settings_path(Scope::Project, dir)?
        }
    };
    Ok(Target {
        scope,
        path,
        options,
    })
}

/// Checks the bridge path: absolute, a regular file this platform can start
/// (an execute bit; on Windows an `.exe`, `.com`, `.cmd` or `.bat` file).
///
/// The path is written into `command` as it is, without quotes: Qwen Code
/// starts a stdio MCP server with the MCP SDK's `StdioClientTransport`
/// (`cross-spawn`, no shell), which passes a path with spaces as one program
/// name and wraps a `.cmd`/`.bat` in `cmd.exe` itself; JSON escapes the
/// backslashes of a Windows path.
fn bridge_path(bridge: Option<&str>) -> Result<PathBuf> {
    bridge_path_in(bridge, PATH_STYLE, LAUNCH_RULE)
}

/// [`bridge_path`] under the path and launch rules of a platform.
fn bridge_path_in(bridge: Option<&str>, style: PathStyle, rule: LaunchRule) -> Result<PathBuf> {
    let Some(bridge) = bridge else {
        return Err(Error::invalid_argument(format!(
            "options_json.bridge (the path of qc-mcp-bridge{EXE_SUFFIX}) is required"
        )));
    };
    if !style.is_absolute(bridge) || bridge.contains('\0') {
        return Err(Error::invalid_argument(format!(
            "options_json.bridge {bridge:?} is not an absolute path (Qwen Code starts it from any folder)"
        )));
    }
    let path = PathBuf::from(bridge);
    let meta = std::fs::metadata(&path).map_err(|e| {
        Error::new(
            Status::NotFound,
            format!("options_json.bridge {bridge:?}: {e}"),
        )
    })?;
    if !is_launchable(&path, &meta, rule) {
        let what = match rule {
            LaunchRule::ExecuteBits => "an executable file",
            LaunchRule::Extensions(_) => "an .exe, .com, .cmd or .bat file",
        };
        return Err(Error::invalid_argument(format!(
            "options_json.bridge {bridge:?} is not {what}"
        )));
    }
    Ok(path)
}

fn change_name(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Replaced => "replaced",
        Change::Unchanged => "unchanged",
        Change::Removed => "removed",
        Change::Absent => "absent",
    }
}

fn outcome_json(t: &Target, o: &Outcome) -> Value {
    json!({
        "ok": true,
        "scope": if t.scope == Scope::Project { "project" } else { "user" },
        "settings": o.path,
        "serverName": SERVER_NAME,
        "change": change_name(o.change),
        "created": o.created,
        "replacedSymlink": o.replaced_symlink,
        "serversLeft": o.servers_left,
    })
}

/// Makes a settings error name the file it is about.
fn about(path: &Path, e: Error) -> Error {
    let shown = path.display().to_string();
    if e.message.contains(&shown) {
        return e;
    }
    Error::new(e.status, format!("{shown}: {}", e.message))
}

/// Adds (or replaces) our entry; `options_json` as `qc_mcp_register` takes it.
/// Returns the outcome document.
pub fn register(options_json: &str) -> Result<Value> {
    let t = target(options_json)?;
    let bridge = bridge_path(t.options.bridge.as_deref())?;
    let mut entry = json!({
        "command": bridge,
        "args": ["plugins"],
        "description": ENTRY_DESCRIPTION,
    });
    if t.options.always_load_tools {
        entry["alwaysLoadTools"] = json!(true);
    }
    let o = settings::register(&t.path, SERVER_NAME, &entry).map_err(|e| about(&t.path, e))?;
    let mut out = outcome_json(&t, &o);
    if t.scope == Scope::Project {
        out["approve"] = json!(format!("qwen mcp approve {SERVER_NAME}"));
    }
    Ok(out)
}

/// Removes our entry; `options_json` as `qc_mcp_unregister` takes it.
pub fn unregister(options_json: &str) -> Result<Value> {
    let t = target(options_json)?;
    let o = settings::unregister(&t.path, SERVER_NAME).map_err(|e| about(&t.path, e))?;
    Ok(outcome_json(&t, &o))
}

/// Our entry as one settings file holds it (for the health report).
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// The file does not exist, or has no entry of ours.
    Absent,
    /// The entry's `command`, and why it cannot start when it cannot.
    Entry {
        command: String,
        problem: Option<String>,
    },
    /// The file cannot be read as Qwen Code reads it.
    Unreadable(String),
}

/// Our entry in the settings file at `path`, read as Qwen Code reads it
/// (comments allowed, a BOM skipped); its `command` checked with the rules
/// of [`register`].
pub fn find(path: &Path) -> Found {
    let text = match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Absent,
        Err(e) => return Found::Unreadable(format!("{}: {e}", path.display())),
        Ok(bytes) => bytes,
    };
    let Ok(text) = String::from_utf8(text) else {
        return Found::Unreadable(format!("{}: not UTF-8", path.display()));
    };
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let doc = match settings::qwen_parse(body) {
        Ok(d) => d,
        Err(e) => return Found::Unreadable(format!("{}: {}", path.display(), e.message)),
    };
    let Some(entry) = doc.get("mcpServers").and_then(|m| m.get(SERVER_NAME)) else {
        return Found::Absent;
    };
    let command = entry
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let problem = bridge_path(Some(&command)).err().map(|e| e.message);
    Found::Entry { command, problem }
}

#[cfg(test)]
mod tests;
