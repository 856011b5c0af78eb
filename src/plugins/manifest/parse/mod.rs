//! Parsing and validation of `manifest.json`.
//!
//! Every field is checked and every problem is reported at once, each with
//! the JSON pointer of the field (`/tools/1/name`; `""` is the whole
//! document) and a reason written for the plugin's author. Problems that do
//! not stop the plugin from working (an unknown permission, activation event
//! or `renderAs`; a `select` without `optionsTool`) are warnings.
//!
//! ## The rules
//! - Strict JSON (serde_json): no comments, trailing commas, BOM or
//!   duplicate keys; the error names line and column. The top level is an
//!   object; `manifest.json` is at most [`MAX_MANIFEST_BYTES`], a regular file.
//! - `id`: reverse-DNS-like, at least two dot-separated labels of
//!   `[A-Za-z0-9_-]`, each starting with a letter or digit, at most
//!   [`MAX_ID_LEN`] bytes — it becomes a directory name.
//! - `name`: a non-blank string; `version`: strict SemVer (`1.2.0`, not
//!   `1.0` or `v1.0.0`); `description`, `author`, `readme`: strings.
//! - `main`, `icon`, `ui.entry`, `views[].entry`: relative paths (`/`
//!   separators) to regular files that, symlinks resolved, are inside the
//!   plugin folder. View and command icons are icon names, not files.
//! - `permissions` ([`KNOWN_PERMISSIONS`]) and `activationEvents`
//!   ([`KNOWN_ACTIVATION_EVENTS`]): arrays of strings; unknown ones warn.
//! - `tools[]`: unique names matching `^[A-Za-z0-9_-]{1,64}$`; `parameters`
//!   required, a JSON Schema object with `"type": "object"` that passes its
//!   meta-schema (every violation reported at its place inside the schema;
//!   an unknown `$schema` is an error; remote `$ref`s are never fetched) and
//!   is compiled once; `renderAs` ([`KNOWN_RENDER_AS`], unknown warns);
//!   `annotations` holds only the booleans `readOnlyHint`,
//!   `destructiveHint`, `idempotentHint`, `openWorldHint`.
//! - `documentParsers[]`: `{mimeType, toolName}`; the MIME type is
//!   `type/subtype` (RFC 6838 names, `+suffix` allowed, no parameters),
//!   unique when lower-cased (it is stored lower-cased). A `toolName`
//!   missing from `tools[]` becomes a hidden tool (`model_visible: false`)
//!   with the schema [`parser_tool_schema`], appended after the declared
//!   tools; one in `tools[]` stays as declared.
//! - `views[]`: unique ids `[A-Za-z0-9_-]{1,64}`, `width` a positive integer.
//! - `sessionAction.tool` / `.visibleTool`, `configuration[].optionsTool`,
//!   `commands[].tool`, `keybindings[].command`, `menus.<location>[].tool`
//!   name tools declared in `tools[]` (hidden parser tools do not count).
//! - `configuration[]`: unique non-blank ids; `type` select, boolean,
//!   string or number; `defaultValue` required and of that type (a select's
//!   is a string); `optionsTool` only on a select. **A select without
//!   `optionsTool` is accepted with a warning**: the host then offers only
//!   its own "Auto" option (whose value is the default), which is a working
//!   if useless setting, so it does not stop the plugin.
//! - `keybindings[].key`: see [`key_error`]; duplicates (case and modifier
//!   order ignored) are errors.
//! - Unknown top-level fields are kept in `Manifest::extra`; unknown fields
//!   inside the known objects are ignored.
//!
//! ## The parts
//! This file reads the document and builds the [`Manifest`] field by field;
//! `lex` holds the lexical checks (strict JSON, ids, names, MIME types,
//! keys), `cx` the checking context (problems, typed field readers, files
//! inside the plugin folder), `tools` the tools, their schemas and the
//! document parsers, `ui` the views, configuration, commands, menus and
//! keybindings.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{CommandSpec, Manifest, MenuItem, PanelSpec, Problem, SessionAction, ToolSpec};

mod cx;
mod lex;
mod tools;
mod ui;

use cx::{at, file_field, Cx};
pub use cx::{pointer, problem};
pub use lex::{id_error, is_tool_name, key_error, mime_error, KEY_MODIFIERS, NAMED_KEYS};
use lex::{is_view_id, key_canonical, tool_name_error, StrictValue};
pub use tools::parser_tool_schema;
use tools::{compile, parse_document_parsers, parse_tools};
use ui::{parse_configuration, parse_items, parse_keybindings, parse_views};

/// The file name of a manifest inside a plugin folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Largest `manifest.json` accepted (checked before it is read whole).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Longest plugin id (it becomes a directory name).
pub const MAX_ID_LEN: usize = 128;
/// Permissions the host knows; others are kept and give a warning.
pub const KNOWN_PERMISSIONS: &[&str] = &["editor", "filesystem", "network", "notifications"];
/// Activation events the host knows; others are kept and give a warning.
pub const KNOWN_ACTIVATION_EVENTS: &[&str] = &["onStartupFinished"];
/// `renderAs` values the host knows; others give a warning (rendered as text).
pub const KNOWN_RENDER_AS: &[&str] = &["checklist"];

/// Reads and validates `<dir>/manifest.json` (see [`parse`]). The file must
/// be a regular file (not a symlink) of at most [`MAX_MANIFEST_BYTES`].
pub fn load_dir(dir: &Path) -> Result<(Manifest, Vec<Problem>), Vec<Problem>> {
    let path = dir.join(MANIFEST_FILE);
    let text = read_manifest_file(&path).map_err(|m| vec![problem("", m)])?;
    parse(&text, dir)
}

fn read_manifest_file(path: &Path) -> Result<String, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("{MANIFEST_FILE} not found in the plugin folder")
        } else {
            format!("cannot read {MANIFEST_FILE}: {e}")
        }
    })?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{MANIFEST_FILE} must be a regular file (symlinks and other types are refused)"
        ));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(format!(
            "{MANIFEST_FILE} is {} bytes; the limit is {MAX_MANIFEST_BYTES}",
            meta.len()
        ));
    }
    let file = fs::File::open(path).map_err(|e| format!("cannot read {MANIFEST_FILE}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {MANIFEST_FILE}: {e}"))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "{MANIFEST_FILE} grew past the limit of {MAX_MANIFEST_BYTES} bytes while being read"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{MANIFEST_FILE} is not valid UTF-8 (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Parses and validates a manifest whose plugin folder is `root` (files it
/// names — `main`, `icon`, `ui.entry`, `views[].entry` — must exist inside
/// `root` once symlinks are resolved). On success, the manifest and the
/// warnings; otherwise every error found (warnings are then dropped).
pub fn parse(text: &str, root: &Path) -> Result<(Manifest, Vec<Problem>), Vec<Problem>> {
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(vec![problem(
            "",
            format!(
                "the manifest is {} bytes; the limit is {MAX_MANIFEST_BYTES}",
                text.len()
            ),
        )]);
    }
    if text.starts_with('\u{feff}') {
        return Err(vec![problem(
            "",
            "the manifest starts with a byte-order mark (BOM); save it as UTF-8 without BOM",
        )]);
    }
    let doc = serde_json::from_str::<StrictValue>(text)
        .map_err(|e| {
            vec![problem(
                "",
                format!(
                    "invalid JSON: {e} (strict JSON: no comments, no trailing commas, no duplicate keys)"
                ),
            )]
        })?
        .0;
    let Value::Object(obj) = doc else {
        return Err(vec![problem(
            "",
            format!(
                "expected a JSON object at the top level, found {}",
                json_kind(&doc)
            ),
        )]);
    };
    let mut cx = Cx::default();
    let root = match crate::sys::fs::canonicalize(root) {
        Ok(r) if r.is_dir() => Some(r),
        Ok(r) => {
            cx.err(
                "",
                format!("the plugin folder {} is not a directory", r.display()),
            );
            None
        }
        Err(e) => {
            cx.err(
                "",
                format!("the plugin folder {} cannot be read: {e}", root.display()),
            );
            None
        }
    };
    let manifest = build(&mut cx, obj, root);
    match manifest {
        Some(m) if cx.errors.is_empty() => Ok((m, cx.warnings)),
        _ => Err(cx.errors),
    }
}

pub(crate) use crate::shared::json::kind as json_kind;

fn build(cx: &mut Cx, mut obj: Map<String, Value>, root: Option<PathBuf>) -> Option<Manifest> {
    let document = std::sync::Arc::new(obj.clone());
    let root_ref = root.as_deref();
    let id = cx.req_str(&obj, "", "id");
    if let Some(m) = id.as_deref().and_then(id_error) {
        cx.err("/id", m);
    }
    let name = cx.req_str(&obj, "", "name");
    if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        cx.err("/name", "the name must not be empty");
    }
    let version = cx
        .req_str(&obj, "", "version")
        .and_then(|v| match semver::Version::parse(&v) {
            Ok(ver) => Some(ver),
            Err(e) => {
                cx.err(
                    "/version",
                    format!("{v:?} is not a strict SemVer version like 1.2.0 (no leading 'v', three numbers): {e}"),
                );
                None
            }
        });
    let description = cx.opt_str(&obj, "", "description");
    let author = cx.opt_str(&obj, "", "author");
    let readme = cx.opt_str(&obj, "", "readme");
    let icon = cx.opt_str(&obj, "", "icon");
    if let Some(icon) = &icon {
        file_field(cx, root_ref, "/icon", icon);
    }
    let main = cx.req_str(&obj, "", "main");
    let main_path = main
        .as_deref()
        .and_then(|m| file_field(cx, root_ref, "/main", m));

    let permissions = cx.str_list(&obj, "permissions");
    for (i, p) in permissions.iter().enumerate() {
        if !KNOWN_PERMISSIONS.contains(&p.as_str()) {
            cx.warn(
                &at("/permissions", i),
                format!(
                    "unknown permission {p:?} (known: {}); it is kept but grants nothing",
                    KNOWN_PERMISSIONS.join(", ")
                ),
            );
        }
    }
    let activation_events = cx.str_list(&obj, "activationEvents");
    for (i, p) in activation_events.iter().enumerate() {
        if !KNOWN_ACTIVATION_EVENTS.contains(&p.as_str()) {
            cx.warn(
                &at("/activationEvents", i),
                format!(
                    "unknown activation event {p:?} (known: {}); it is ignored",
                    KNOWN_ACTIVATION_EVENTS.join(", ")
                ),
            );
        }
    }

    // `declared`: every valid, unique tool name, even of a tool with other
    // errors, so references to it do not add spurious problems.
    let (mut tools, declared) = parse_tools(cx, &obj);
    let document_parsers = parse_document_parsers(cx, &obj);
    for p in &document_parsers {
        if !tools.iter().any(|t| t.name == p.tool_name) {
            let parameters = parser_tool_schema();
            match compile(&parameters) {
                Ok(validator) => tools.push(ToolSpec {
                    name: p.tool_name.clone(),
                    summary: None,
                    description: None,
                    parameters,
                    validator,
                    render_as: None,
                    annotations: None,
                    model_visible: false,
                }),
                Err(m) => cx.err("/documentParsers", m),
            }
        }
    }

    let ui = obj.get("ui").and_then(|v| {
        let o = cx.as_object(v, "/ui")?;
        let entry = cx.req_str(o, "/ui", "entry");
        let entry_ok = entry
            .as_deref()
            .and_then(|e| file_field(cx, root_ref, "/ui/entry", e));
        let title = cx.opt_str(o, "/ui", "title");
        entry_ok.and(entry).map(|entry| PanelSpec { entry, title })
    });
    let views = parse_views(cx, &obj, root_ref);
    let names_tool = |cx: &mut Cx, path: &str, name: &str| {
        if !declared.contains(name) {
            cx.err(path, format!("{name:?} names no tool declared in /tools"));
        }
    };
    let session_action = obj.get("sessionAction").and_then(|v| {
        let o = cx.as_object(v, "/sessionAction")?;
        let tool = cx.req_str(o, "/sessionAction", "tool");
        if let Some(t) = &tool {
            names_tool(cx, "/sessionAction/tool", t);
        }
        let visible_tool = cx.opt_str(o, "/sessionAction", "visibleTool");
        if let Some(t) = &visible_tool {
            names_tool(cx, "/sessionAction/visibleTool", t);
        }
        let icon = cx.opt_str(o, "/sessionAction", "icon");
        let tooltip = cx.opt_str(o, "/sessionAction", "tooltip");
        Some(SessionAction {
            tool: tool?,
            icon,
            tooltip,
            visible_tool,
        })
    });
    let configuration = parse_configuration(cx, &obj, &names_tool);
    let commands = parse_items(cx, &obj, "commands", "", &names_tool)
        .into_iter()
        .map(|(tool, title, icon)| CommandSpec { tool, title, icon })
        .collect();
    let keybindings = parse_keybindings(cx, &obj, &names_tool);
    let mut menus = BTreeMap::new();
    if let Some(v) = obj.get("menus") {
        if let Some(o) = cx.as_object(v, "/menus") {
            for (location, _) in o.iter() {
                let base = pointer("/menus", location);
                if location.trim().is_empty() {
                    cx.err(&base, "a menu location must not be empty");
                }
                let items = parse_items(cx, o, location, "/menus", &names_tool)
                    .into_iter()
                    .map(|(tool, title, icon)| MenuItem { tool, title, icon })
                    .collect();
                menus.insert(location.clone(), items);
            }
        }
    }

    for key in KNOWN_FIELDS {
        obj.remove(*key);
    }
    Some(Manifest {
        id: id?,
        name: name?,
        version: version?,
        description,
        author,
        readme,
        main: main?,
        main_path: main_path?,
        root: root?,
        permissions,
        activation_events,
        tools,
        document_parsers,
        ui,
        views,
        session_action,
        configuration,
        commands,
        keybindings,
        menus,
        icon,
        extra: obj,
        document,
    })
}

/// The top-level fields this host reads; all others go to `extra`.
pub const KNOWN_FIELDS: &[&str] = &[
    "id",
    "name",
    "version",
    "description",
    "author",
    "readme",
    "icon",
    "main",
    "permissions",
    "activationEvents",
    "tools",
    "documentParsers",
    "ui",
    "views",
    "sessionAction",
    "configuration",
    "commands",
    "keybindings",
    "menus",
];
