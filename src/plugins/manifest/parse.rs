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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{
    CommandSpec, ConfigEntry, ConfigKind, DocumentParser, Keybinding, Manifest, MenuItem,
    PanelSpec, Problem, SessionAction, ToolAnnotations, ToolSpec, ViewSpec,
};

/// The file name of a manifest inside a plugin folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Largest `manifest.json` accepted (checked before it is read whole).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Longest plugin id (it becomes a directory name).
pub const MAX_ID_LEN: usize = 128;
/// Permissions the host knows; others are kept and give a warning.
pub const KNOWN_PERMISSIONS: &[&str] = &["filesystem", "network", "notifications"];
/// Activation events the host knows; others are kept and give a warning.
pub const KNOWN_ACTIVATION_EVENTS: &[&str] = &["onStartupFinished"];
/// `renderAs` values the host knows; others give a warning (rendered as text).
pub const KNOWN_RENDER_AS: &[&str] = &["checklist"];
/// Keybinding modifiers (`mod` is Cmd on macOS and Ctrl elsewhere).
pub const KEY_MODIFIERS: &[&str] = &["mod", "ctrl", "cmd", "alt", "shift", "meta"];
/// Named keys a keybinding may end with (besides one letter, digit or
/// punctuation character, and `f1`..`f24`).
pub const NAMED_KEYS: &[&str] = &[
    "enter",
    "return",
    "escape",
    "esc",
    "tab",
    "space",
    "backspace",
    "delete",
    "insert",
    "home",
    "end",
    "pageup",
    "pagedown",
    "up",
    "down",
    "left",
    "right",
    "arrowup",
    "arrowdown",
    "arrowleft",
    "arrowright",
    "plus",
    "minus",
];
const KEY_PUNCTUATION: &str = "`-=[]\\;',./";

/// The implied `parameters` of a document-parser tool that `tools[]` does
/// not declare: the host calls it with the dropped file as base64.
pub fn parser_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "base64": { "type": "string" } },
        "required": ["base64"]
    })
}

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
    let root = match fs::canonicalize(root) {
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

/// A JSON value parsed strictly: like `serde_json::Value`, but an object
/// with the same key twice is an error (serde_json would keep the last one
/// silently). The error carries serde_json's line and column.
struct StrictValue(Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// A [`Problem`] at `path`.
pub fn problem(path: &str, message: impl Into<String>) -> Problem {
    Problem {
        path: path.to_string(),
        message: message.into(),
    }
}

/// `base` + `/` + `key` escaped as a JSON-pointer token (`~` → `~0`, `/` → `~1`).
pub fn pointer(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn at(base: &str, i: usize) -> String {
    format!("{base}/{i}")
}

pub(crate) use crate::shared::json::kind as json_kind;

#[derive(Default)]
struct Cx {
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl Cx {
    fn err(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(problem(path, message));
    }
    fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(problem(path, message));
    }
    fn wrong_type(&mut self, path: &str, expected: &str, found: &Value) {
        self.err(
            path,
            format!(
                "expected {expected} at {}, found {}",
                shown(path),
                json_kind(found)
            ),
        );
    }
    fn missing(&mut self, path: &str) {
        self.err(path, format!("{} is required", shown(path)));
    }

    /// An optional string field (absent → None; wrong type → error).
    fn opt_str(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<String> {
        let path = pointer(base, key);
        match obj.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(&path, "a string", other);
                None
            }
        }
    }
    /// A required string field.
    fn req_str(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<String> {
        if !obj.contains_key(key) {
            self.missing(&pointer(base, key));
            return None;
        }
        self.opt_str(obj, base, key)
    }
    /// An optional array field, as its elements.
    fn opt_array<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v Vec<Value>> {
        match obj.get(key)? {
            Value::Array(a) => Some(a),
            other => {
                self.wrong_type(&pointer(base, key), "an array", other);
                None
            }
        }
    }
    fn as_object<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(o) => Some(o),
            other => {
                self.wrong_type(path, "an object", other);
                None
            }
        }
    }
    /// An optional array of strings (absent → empty).
    fn str_list(&mut self, obj: &Map<String, Value>, key: &str) -> Vec<String> {
        let mut out = Vec::new();
        let base = pointer("", key);
        for (i, v) in self
            .opt_array(obj, "", key)
            .into_iter()
            .flatten()
            .enumerate()
        {
            match v {
                Value::String(s) => out.push(s.clone()),
                other => self.wrong_type(&at(&base, i), "a string", other),
            }
        }
        out
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "the top level"
    } else {
        path
    }
}

/// Why `id` is not a valid plugin id, if it is not.
pub fn id_error(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("the id must not be empty".into());
    }
    if id.len() > MAX_ID_LEN {
        return Some(format!(
            "the id is {} bytes long; the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if id.contains('/') || id.contains('\\') || id.contains('\0') {
        return Some("the id becomes a directory name: '/', '\\' and NUL are not allowed".into());
    }
    if id.starts_with('.') {
        return Some("the id must not start with a dot".into());
    }
    if id.contains("..") {
        return Some("the id must not contain '..' (empty label)".into());
    }
    let labels: Vec<&str> = id.split('.').collect();
    if labels.len() < 2 {
        return Some(
            "the id must be reverse-DNS-like, with at least two dot-separated labels (e.g. com.example.hello)"
                .into(),
        );
    }
    for label in labels {
        let Some(first) = label.chars().next() else {
            return Some("the id must not end with a dot (empty label)".into());
        };
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Some(format!(
                "the id may contain only letters, digits, '_', '-' and dots; found {c:?}"
            ));
        }
        if !first.is_ascii_alphanumeric() {
            return Some(format!(
                "every label of the id must start with a letter or digit; {label:?} does not"
            ));
        }
    }
    None
}

/// Whether `name` is a valid tool name (`^[A-Za-z0-9_-]{1,64}$`).
pub fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_view_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn tool_name_error(name: &str) -> String {
    format!(
        "{name:?} is not a valid tool name: 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"
    )
}

/// Why `mime` is not a valid MIME type (`type/subtype`, RFC 6838 restricted
/// names, an optional `+suffix` belongs to the subtype; no parameters).
pub fn mime_error(mime: &str) -> Option<String> {
    fn name_ok(s: &str) -> bool {
        let mut bytes = s.bytes();
        matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
            && s.len() <= 127
            && bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    }
    let Some((ty, sub)) = mime.split_once('/') else {
        return Some(format!(
            "{mime:?} is not a MIME type: expected type/subtype, e.g. text/markdown"
        ));
    };
    if mime.contains(';') {
        return Some(format!(
            "{mime:?}: MIME parameters (;…) are not allowed here"
        ));
    }
    if !name_ok(ty) || !name_ok(sub) || sub.ends_with('+') {
        return Some(format!(
            "{mime:?} is not a MIME type: type and subtype must start with a letter or digit and use only letters, digits and !#$&-^_.+"
        ));
    }
    None
}

/// Why `key` is not a valid keybinding, if it is not. Grammar:
/// `(modifier "+")* key`, modifiers among [`KEY_MODIFIERS`] (each at most
/// once), the key one letter, digit or punctuation character, `f1`..`f24` or
/// one of [`NAMED_KEYS`]; case-insensitive.
pub fn key_error(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("the key must not be empty".into());
    }
    let lower = key.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('+').collect();
    let (last, mods) = parts.split_last().expect("split yields at least one part");
    let mut seen = HashSet::new();
    for m in mods {
        if m.is_empty() {
            return Some(format!("{key:?}: empty part between '+' signs"));
        }
        if !KEY_MODIFIERS.contains(m) {
            return Some(format!(
                "{key:?}: {m:?} is not a modifier (use {}) — only the last part is the key",
                KEY_MODIFIERS.join(", ")
            ));
        }
        if !seen.insert(*m) {
            return Some(format!("{key:?}: modifier {m:?} appears twice"));
        }
    }
    if last.is_empty() {
        return Some(format!(
            "{key:?}: the final key is missing (write 'plus' for the + key)"
        ));
    }
    if KEY_MODIFIERS.contains(last) {
        return Some(format!(
            "{key:?}: ends with the modifier {last:?}; a final key is missing"
        ));
    }
    let single = last.chars().count() == 1 && {
        let c = last.chars().next().unwrap_or(' ');
        c.is_ascii_alphanumeric() || KEY_PUNCTUATION.contains(c)
    };
    let function = last
        .strip_prefix('f')
        .and_then(|n| {
            n.parse::<u8>()
                .ok()
                .filter(|n| (1..=24).contains(n))
                .map(|_| n)
        })
        .is_some_and(|n| !n.starts_with('0'));
    if !(single || function || NAMED_KEYS.contains(last)) {
        return Some(format!(
            "{key:?}: {last:?} is not a key (one letter, digit or punctuation character, f1..f24, or one of {})",
            NAMED_KEYS.join(", ")
        ));
    }
    None
}

/// The canonical form of a valid keybinding, for finding duplicates:
/// lower case, modifiers sorted.
fn key_canonical(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    let mut parts: Vec<&str> = lower.split('+').collect();
    let last = parts.pop().unwrap_or_default();
    parts.sort_unstable();
    parts.push(last);
    parts.join("+")
}

/// Resolves `rel` (a path written in the manifest) to a regular file inside
/// `root` (canonical), following symlinks.
fn resolve_file(root: &Path, rel: &str) -> Result<PathBuf, String> {
    if rel.is_empty() {
        return Err("the path must not be empty".into());
    }
    if rel.contains('\0') {
        return Err("the path contains a NUL character".into());
    }
    if rel.contains('\\') {
        return Err(format!("{rel:?}: use '/' as the separator, not '\\'"));
    }
    if rel.starts_with('/') || Path::new(rel).is_absolute() {
        return Err(format!(
            "{rel:?} is absolute; write a path relative to the plugin folder"
        ));
    }
    let joined = root.join(rel);
    let real = fs::canonicalize(&joined).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("{rel:?} does not exist in the plugin folder")
        } else {
            format!("{rel:?} cannot be resolved: {e}")
        }
    })?;
    if !real.starts_with(root) {
        return Err(format!(
            "{rel:?} resolves to {} outside the plugin folder",
            real.display()
        ));
    }
    let meta = fs::metadata(&real).map_err(|e| format!("{rel:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{rel:?} is not a regular file"));
    }
    Ok(real)
}

fn file_field(cx: &mut Cx, root: Option<&Path>, path: &str, rel: &str) -> Option<PathBuf> {
    let root = root?;
    match resolve_file(root, rel) {
        Ok(p) => Some(p),
        Err(m) => {
            cx.err(path, m);
            None
        }
    }
}

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

/// Compiles a tool's `parameters` (already meta-validated). A panic inside
/// the schema crate is turned into an error: a plugin's schema must never
/// take the host down.
fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    match catch_unwind(AssertUnwindSafe(|| jsonschema::validator_for(schema))) {
        Ok(Ok(v)) => Ok(Arc::new(v)),
        Ok(Err(e)) => Err(format!("the schema cannot be compiled: {e}")),
        Err(_) => Err("the schema cannot be compiled (the validator failed internally)".into()),
    }
}

/// Every meta-schema violation of `schema` as (pointer inside the schema, message).
fn meta_errors(schema: &Value) -> Vec<(String, String)> {
    let run = || -> Vec<(String, String)> {
        match jsonschema::meta::validator_for(schema) {
            Ok(meta) => meta
                .iter_errors(schema)
                .map(|e| (e.instance_path().as_str().to_string(), e.to_string()))
                .collect(),
            Err(e) => vec![("/$schema".to_string(), format!("unsupported $schema: {e}"))],
        }
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|_| {
        vec![(
            String::new(),
            "the schema cannot be checked against its meta-schema".into(),
        )]
    })
}

fn parse_tools(cx: &mut Cx, obj: &Map<String, Value>) -> (Vec<ToolSpec>, HashSet<String>) {
    let mut tools = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "tools")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/tools", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let name = cx.req_str(o, &base, "name");
        let name_path = pointer(&base, "name");
        if let Some(n) = &name {
            if !is_tool_name(n) {
                cx.err(&name_path, tool_name_error(n));
            } else if let Some(j) = seen.get(n) {
                cx.err(
                    &name_path,
                    format!("duplicate tool name {n:?} (already used by /tools/{j})"),
                );
            } else {
                seen.insert(n.clone(), i);
            }
        }
        let summary = cx.opt_str(o, &base, "summary");
        let description = cx.opt_str(o, &base, "description");
        let params_path = pointer(&base, "parameters");
        let parameters = match o.get("parameters") {
            None => {
                cx.err(
                    &params_path,
                    format!("{params_path} is required: a JSON Schema with \"type\": \"object\""),
                );
                None
            }
            Some(Value::Object(p)) => {
                let schema = Value::Object(p.clone());
                let mut ok = true;
                if p.get("type") != Some(&Value::String("object".into())) {
                    cx.err(
                        &pointer(&params_path, "type"),
                        "the parameters schema must have \"type\": \"object\"",
                    );
                    ok = false;
                }
                for (sub, msg) in meta_errors(&schema) {
                    cx.err(
                        &format!("{params_path}{sub}"),
                        format!("invalid JSON Schema: {msg}"),
                    );
                    ok = false;
                }
                ok.then_some(schema)
            }
            Some(other) => {
                cx.wrong_type(&params_path, "an object (a JSON Schema)", other);
                None
            }
        };
        let validator = parameters.as_ref().and_then(|s| match compile(s) {
            Ok(v) => Some(v),
            Err(m) => {
                cx.err(&params_path, m);
                None
            }
        });
        let render_as = cx.opt_str(o, &base, "renderAs");
        if let Some(r) = &render_as {
            if !KNOWN_RENDER_AS.contains(&r.as_str()) {
                cx.warn(
                    &pointer(&base, "renderAs"),
                    format!(
                        "unknown renderAs {r:?} (known: {}); the result is shown as text",
                        KNOWN_RENDER_AS.join(", ")
                    ),
                );
            }
        }
        let annotations = o
            .get("annotations")
            .and_then(|a| parse_annotations(cx, a, &pointer(&base, "annotations")));
        if let (Some(name), Some(parameters), Some(validator)) = (name, parameters, validator) {
            tools.push(ToolSpec {
                name,
                summary,
                description,
                parameters,
                validator,
                render_as,
                annotations,
                model_visible: true,
            });
        }
    }
    (tools, seen.into_keys().collect())
}

fn parse_annotations(cx: &mut Cx, v: &Value, base: &str) -> Option<ToolAnnotations> {
    let o = cx.as_object(v, base)?;
    let mut a = ToolAnnotations::default();
    for (k, v) in o {
        let path = pointer(base, k);
        let slot = match k.as_str() {
            "readOnlyHint" => &mut a.read_only,
            "destructiveHint" => &mut a.destructive,
            "idempotentHint" => &mut a.idempotent,
            "openWorldHint" => &mut a.open_world,
            _ => {
                cx.err(
                    &path,
                    format!("unknown annotation {k:?} (allowed: readOnlyHint, destructiveHint, idempotentHint, openWorldHint)"),
                );
                continue;
            }
        };
        match v {
            Value::Bool(b) => *slot = Some(*b),
            other => cx.wrong_type(&path, "a boolean", other),
        }
    }
    Some(a)
}

fn parse_document_parsers(cx: &mut Cx, obj: &Map<String, Value>) -> Vec<DocumentParser> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "documentParsers")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/documentParsers", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let mime = cx.req_str(o, &base, "mimeType").and_then(|m| {
            let path = pointer(&base, "mimeType");
            if let Some(e) = mime_error(&m) {
                cx.err(&path, e);
                return None;
            }
            let lower = m.to_ascii_lowercase();
            if let Some(j) = seen.get(&lower) {
                cx.err(
                    &path,
                    format!("duplicate mimeType {m:?} (already handled by /documentParsers/{j})"),
                );
                return None;
            }
            seen.insert(lower.clone(), i);
            Some(lower)
        });
        let tool = cx.req_str(o, &base, "toolName").and_then(|t| {
            if is_tool_name(&t) {
                Some(t)
            } else {
                cx.err(&pointer(&base, "toolName"), tool_name_error(&t));
                None
            }
        });
        if let (Some(mime_type), Some(tool_name)) = (mime, tool) {
            out.push(DocumentParser {
                mime_type,
                tool_name,
            });
        }
    }
    out
}

fn parse_views(cx: &mut Cx, obj: &Map<String, Value>, root: Option<&Path>) -> Vec<ViewSpec> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "views")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/views", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let id = cx.req_str(o, &base, "id").and_then(|id| {
            let path = pointer(&base, "id");
            if !is_view_id(&id) {
                cx.err(
                    &path,
                    format!("{id:?} is not a valid view id: 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"),
                );
                return None;
            }
            if let Some(j) = seen.get(&id) {
                cx.err(&path, format!("duplicate view id {id:?} (already used by /views/{j})"));
                return None;
            }
            seen.insert(id.clone(), i);
            Some(id)
        });
        let title = cx.opt_str(o, &base, "title");
        let icon = cx.opt_str(o, &base, "icon");
        let entry = cx.req_str(o, &base, "entry");
        let entry_ok = entry
            .as_deref()
            .and_then(|e| file_field(cx, root, &pointer(&base, "entry"), e));
        let width = match o.get("width") {
            None => Some(None),
            Some(w) => match w
                .as_u64()
                .filter(|n| *n > 0)
                .and_then(|n| u32::try_from(n).ok())
            {
                Some(n) => Some(Some(n)),
                None => {
                    cx.err(
                        &pointer(&base, "width"),
                        format!("expected a positive integer (pixels) at {base}/width, found {w}"),
                    );
                    None
                }
            },
        };
        if let (Some(id), Some(entry), Some(_), Some(width)) = (id, entry, entry_ok, width) {
            out.push(ViewSpec {
                id,
                title,
                icon,
                entry,
                width,
            });
        }
    }
    out
}

fn parse_configuration(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<ConfigEntry> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "configuration")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/configuration", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let id = cx.req_str(o, &base, "id").and_then(|id| {
            let path = pointer(&base, "id");
            if id.trim().is_empty() {
                cx.err(&path, "the configuration id must not be empty");
                return None;
            }
            if let Some(j) = seen.get(&id) {
                cx.err(
                    &path,
                    format!(
                        "duplicate configuration id {id:?} (already used by /configuration/{j})"
                    ),
                );
                return None;
            }
            seen.insert(id.clone(), i);
            Some(id)
        });
        let label = cx.opt_str(o, &base, "label");
        let description = cx.opt_str(o, &base, "description");
        let options_tool = cx.opt_str(o, &base, "optionsTool");
        let type_path = pointer(&base, "type");
        let kind = cx.req_str(o, &base, "type").and_then(|t| match t.as_str() {
            "select" => Some(ConfigKind::Select {
                options_tool: options_tool.clone(),
            }),
            "boolean" => Some(ConfigKind::Boolean),
            "string" => Some(ConfigKind::String),
            "number" => Some(ConfigKind::Number),
            _ => {
                cx.err(
                    &type_path,
                    format!(
                        "unknown configuration type {t:?} (use select, boolean, string or number)"
                    ),
                );
                None
            }
        });
        let opt_path = pointer(&base, "optionsTool");
        match (&kind, &options_tool) {
            (Some(ConfigKind::Select { .. }), Some(t)) => names_tool(cx, &opt_path, t),
            (Some(ConfigKind::Select { .. }), None) => cx.warn(
                &opt_path,
                "a select without optionsTool offers only the host's \"Auto\" option (the default value)",
            ),
            (Some(k), Some(_)) => cx.err(
                &opt_path,
                format!("optionsTool applies only to type \"select\", not {:?}", k.name()),
            ),
            _ => {}
        }
        let default_path = pointer(&base, "defaultValue");
        let default_value = match o.get("defaultValue") {
            None => {
                cx.missing(&default_path);
                None
            }
            Some(d) => match &kind {
                Some(k) if k.accepts(d) => Some(d.clone()),
                Some(k) => {
                    let expected = match k {
                        ConfigKind::Boolean => "a boolean",
                        ConfigKind::Number => "a number",
                        _ => "a string",
                    };
                    cx.err(
                        &default_path,
                        format!(
                            "expected {expected} at {default_path} (the entry's type is {}), found {}",
                            k.name(),
                            json_kind(d)
                        ),
                    );
                    None
                }
                None => None,
            },
        };
        if let (Some(id), Some(kind), Some(default_value)) = (id, kind, default_value) {
            out.push(ConfigEntry {
                id,
                label,
                description,
                kind,
                default_value,
            });
        }
    }
    out
}

/// `{tool, title?, icon?}` items of the array `obj[key]`, reported under `base/key`.
fn parse_items(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    key: &str,
    base: &str,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut out = Vec::new();
    let arr_path = pointer(base, key);
    let arr = match obj.get(key) {
        None => return out,
        Some(Value::Array(a)) => a,
        Some(other) => {
            cx.wrong_type(&arr_path, "an array", other);
            return out;
        }
    };
    for (i, v) in arr.iter().enumerate() {
        let ib = at(&arr_path, i);
        let Some(o) = cx.as_object(v, &ib) else {
            continue;
        };
        let tool = cx.req_str(o, &ib, "tool");
        if let Some(t) = &tool {
            names_tool(cx, &pointer(&ib, "tool"), t);
        }
        let title = cx.opt_str(o, &ib, "title");
        let icon = cx.opt_str(o, &ib, "icon");
        if let Some(tool) = tool {
            out.push((tool, title, icon));
        }
    }
    out
}

fn parse_keybindings(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<Keybinding> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "keybindings")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/keybindings", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let command = cx.req_str(o, &base, "command");
        if let Some(c) = &command {
            names_tool(cx, &pointer(&base, "command"), c);
        }
        let key = cx.req_str(o, &base, "key").and_then(|k| {
            let path = pointer(&base, "key");
            if let Some(e) = key_error(&k) {
                cx.err(&path, e);
                return None;
            }
            let canon = key_canonical(&k);
            if let Some(j) = seen.get(&canon) {
                cx.err(
                    &path,
                    format!("duplicate keybinding {k:?} (already bound by /keybindings/{j})"),
                );
                return None;
            }
            seen.insert(canon, i);
            Some(k)
        });
        if let (Some(command), Some(key)) = (command, key) {
            out.push(Keybinding { command, key });
        }
    }
    out
}
