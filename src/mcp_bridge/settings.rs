//! Our entry in Qwen Code's `mcpServers`: add it, replace it, remove it,
//! and touch nothing else.
//!
//! ## Which file
//! [`settings_path`]: the user file `<qwen home>/settings.json`
//! ([`crate::shared::fs::qwen_home`]: `$QWEN_HOME` or `~/.qwen`), or the
//! project file `<project>/.qwen/settings.json`. Qwen Code reads the project
//! file of its exact working directory only, and never when that directory
//! is the home directory, so a project in the home directory is refused.
//! Project-scope servers also need the user's approval in Qwen Code (see
//! `docs/mcp-registration.md`).
//!
//! ## How Qwen Code reads the file, and so what we accept
//! Qwen strips a UTF-8 BOM, removes `//` and `/* */` comments
//! (strip-json-comments, which turns them into spaces and treats an
//! unterminated comment as running to the end), then calls `JSON.parse`:
//! **trailing commas, single quotes, unquoted keys, hex numbers, `NaN` are
//! errors**, and a broken user file stops the CLI. We run the same two steps
//! ([`qwen_parse`]: our comment stripper, then serde_json, which is as strict
//! as `JSON.parse`) and refuse a file that fails them, naming line and
//! column, without changing a byte. The top level must be an object, and
//! `mcpServers`, when present, must be an object too: anything else is
//! refused (never replaced by `{}`).
//!
//! ## What an edit keeps
//! The edit goes through jsonc-parser's concrete syntax tree, so every other
//! key, every comment, blank line, the indentation style (spaces or tabs),
//! the line endings (LF or CRLF) and a BOM stay as they were. Our entry's
//! own keys are written in sorted order. After the edit the new text is read
//! back the way Qwen reads it and must equal the intended settings exactly,
//! or nothing is written.
//!
//! - **Add** ([`register`]) sets `mcpServers.<name>` to the entry: an
//!   existing entry of that name is replaced where it stands (its comments
//!   above it stay), otherwise the entry is appended (and `mcpServers` is
//!   appended to the top level when missing). Adding an entry equal to the
//!   one there leaves the file alone: adding twice gives identical bytes.
//! - **Remove** ([`unregister`]) deletes `mcpServers.<name>` with its
//!   same-line comment. A missing entry (or file, or `mcpServers`) is a
//!   successful no-op. Removing the last entry leaves `"mcpServers": {}`
//!   behind: the key may carry the user's comments, and Qwen treats an empty
//!   object as no servers.
//! - **Duplicate keys**: `JSON.parse` keeps the *last* of duplicate keys, so
//!   that is the one that counts. We edit the last `mcpServers` of the top
//!   level (earlier ones are dead text Qwen ignores; Qwen's own writer
//!   deletes them on its next write, we leave them). Inside it, every
//!   property of our name is ours: add keeps the last and removes the
//!   others, remove removes them all — removing only the last would bring an
//!   older duplicate back to life.
//! - **A new file** is `{"$version": 4, "mcpServers": {...}}` (two-space
//!   indent, LF), mode 0600, its directory created (0700) if missing. The
//!   `$version` saves Qwen from rewriting the file on its next start. In an
//!   existing file we never add `$version`: Qwen normalises it itself.
//!
//! ## How it is written
//! Atomically: a temporary file in the same directory, fsynced, renamed over
//! the target ([`crate::shared::fs::write_atomic`]), with the old file's
//! permission bits (0640 stays 0640). Just before the rename the file is
//! read again; if someone (Qwen itself) changed it meanwhile, the edit is
//! redone on the new text (three tries, then an error).
//!
//! **A symlinked settings file** is read through the link, and the link is
//! then *replaced* by a regular file holding the edited text, which is what
//! Qwen's own writer does on every settings write (`writeWithBackupSync`:
//! temporary file + rename). Writing through the link instead would let a
//! checked-out project's `.qwen/settings.json` symlink make us edit an
//! arbitrary file elsewhere. The link's target keeps its old content; the
//! [`Outcome`] says the link was replaced, so a dotfile manager's user can be
//! told.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::{Map, Value};

use crate::error::{Error, Result, Status};
use crate::shared::fs::{absolute, home_dir, qwen_home, write_atomic, AtomicWrite};

/// The largest settings file we edit.
pub const MAX_SETTINGS_BYTES: u64 = 8 * 1024 * 1024;

/// The `$version` Qwen Code 0.24.4 writes (`SETTINGS_VERSION`).
pub const SETTINGS_VERSION: u64 = 4;

const MCP_SERVERS: &str = "mcpServers";
const BOM: char = '\u{feff}';

/// Which settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `<qwen home>/settings.json`.
    User,
    /// `<project>/.qwen/settings.json` (needs the user's approval in Qwen).
    Project,
}

/// What an edit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The entry was not there and now is.
    Added,
    /// An entry of that name was there and now holds the new value.
    Replaced,
    /// The same entry was already there: the file was not touched.
    Unchanged,
    /// The entry was removed.
    Removed,
    /// There was no entry to remove: the file was not touched.
    Absent,
}

/// The result of [`register`] / [`unregister`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub path: PathBuf,
    pub change: Change,
    /// The file did not exist and was created.
    pub created: bool,
    /// The path was a symlink and is now a regular file (see module docs).
    pub replaced_symlink: bool,
    /// Entries left in `mcpServers` afterwards (0 after removing the last:
    /// the file then holds `"mcpServers": {}`).
    pub servers_left: usize,
}

/// The settings file of `scope`. `project` is used for [`Scope::Project`]
/// only (made absolute); a project that is the home directory is refused,
/// since Qwen Code ignores project settings there.
pub fn settings_path(scope: Scope, project: &Path) -> Result<PathBuf> {
    match scope {
        Scope::User => Ok(qwen_home()?.join("settings.json")),
        Scope::Project => {
            let project = absolute(project);
            if let Some(home) = home_dir() {
                let same = project == home
                    || matches!(
                        (crate::sys::fs::canonicalize(&project), crate::sys::fs::canonicalize(&home)),
                        (Ok(x), Ok(y)) if x == y
                    );
                if same {
                    return Err(Error::new(
                        Status::Refused,
                        format!(
                            "{} is the home directory: Qwen Code reads no project settings there; use the user scope",
                            project.display()
                        ),
                    ));
                }
            }
            Ok(project.join(".qwen").join("settings.json"))
        }
    }
}

/// Sets `mcpServers.<name>` to `entry` (a JSON object) in the settings file
/// at `path`, creating the file if needed (rules in the module docs).
pub fn register(path: &Path, name: &str, entry: &Value) -> Result<Outcome> {
    check_name(name)?;
    if !entry.is_object() {
        return Err(Error::invalid_argument(format!(
            "the mcpServers entry for {name:?} must be a JSON object"
        )));
    }
    apply(path, name, Some(entry))
}

/// Removes `mcpServers.<name>` from the settings file at `path`; a missing
/// file, `mcpServers` or entry is a successful no-op ([`Change::Absent`]).
pub fn unregister(path: &Path, name: &str) -> Result<Outcome> {
    check_name(name)?;
    apply(path, name, None)
}

fn check_name(name: &str) -> Result<()> {
    match super::naming::server_name_error(name) {
        Some(e) => Err(Error::invalid_argument(e)),
        None => Ok(()),
    }
}

fn apply(path: &Path, name: &str, entry: Option<&Value>) -> Result<Outcome> {
    for _ in 0..3 {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&format!("stat {}", path.display()), e)),
        };
        let Some(meta) = meta else {
            let Some(entry) = entry else {
                return Ok(outcome(path, Change::Absent, false, false, 0));
            };
            let text = new_file_text(name, entry);
            ensure_dir(path)?;
            if fs::symlink_metadata(path).is_ok() {
                continue; // created meanwhile: edit it instead
            }
            write_atomic(path, text.as_bytes(), atomic(0o600))?;
            return Ok(outcome(path, Change::Added, true, false, 1));
        };
        let is_link = meta.file_type().is_symlink();
        let target_meta = if is_link {
            fs::metadata(path)
                .map_err(|e| Error::io(&format!("follow the symlink {}", path.display()), e))?
        } else {
            meta
        };
        if !target_meta.is_file() {
            return Err(Error::invalid_argument(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        let mode = crate::sys::fs::mode(path, &target_meta) & 0o7777;
        let original = read_text(path)?;
        let edit = edit_text(&original, name, entry).map_err(|mut e| {
            e.message = format!("{}: {}", path.display(), e.message);
            e
        })?;
        if matches!(edit.change, Change::Unchanged | Change::Absent) {
            return Ok(outcome(path, edit.change, false, false, edit.servers_left));
        }
        if read_text(path)? != original {
            continue; // changed under us: redo the edit on the new text
        }
        write_atomic(path, edit.text.as_bytes(), atomic(mode))?;
        return Ok(outcome(
            path,
            edit.change,
            false,
            is_link,
            edit.servers_left,
        ));
    }
    Err(Error::new(
        Status::Io,
        format!(
            "{} kept changing while we edited it; nothing was written",
            path.display()
        ),
    ))
}

fn atomic(mode: u32) -> AtomicWrite {
    AtomicWrite {
        mode,
        durable: true,
        private_dir: false,
    }
}

fn outcome(path: &Path, change: Change, created: bool, link: bool, left: usize) -> Outcome {
    Outcome {
        path: path.to_path_buf(),
        change,
        created,
        replaced_symlink: link,
        servers_left: left,
    }
}

fn read_text(path: &Path) -> Result<String> {
    let len = fs::metadata(path)
        .map_err(|e| Error::io(&format!("stat {}", path.display()), e))?
        .len();
    if len > MAX_SETTINGS_BYTES {
        return Err(Error::invalid_argument(format!(
            "{} is {len} bytes; we edit settings files of at most {MAX_SETTINGS_BYTES} bytes",
            path.display()
        )));
    }
    let bytes = fs::read(path).map_err(|e| Error::io(&format!("read {}", path.display()), e))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid_json(format!(
            "{} is not valid UTF-8 (at byte {}); it was left untouched",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Makes sure the settings file's directory exists: an existing one is used
/// as it is (its mode is the user's business); a missing one is created
/// with mode 0700 (its parents with the default mode).
fn ensure_dir(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| Error::invalid_argument(format!("{} has no directory", path.display())))?;
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(&format!("create {}", parent.display()), e))?;
    }
    match crate::sys::fs::dir_builder(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(Error::io(&format!("create {}", dir.display()), e)),
    }
}

fn new_file_text(name: &str, entry: &Value) -> String {
    let mut servers = Map::new();
    servers.insert(name.to_string(), entry.clone());
    let mut root = Map::new();
    root.insert("$version".into(), Value::from(SETTINGS_VERSION));
    root.insert(MCP_SERVERS.into(), Value::Object(servers));
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    text
}

/// The text of a settings file after an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub text: String,
    pub change: Change,
    pub servers_left: usize,
}

/// Sets (`Some(entry)`) or removes (`None`) `mcpServers.<name>` in the text
/// of a settings file; the file-independent half of [`register`] and
/// [`unregister`]. On [`Change::Unchanged`] / [`Change::Absent`] the text is
/// returned as it was.
pub fn edit_text(original: &str, name: &str, entry: Option<&Value>) -> Result<Edit> {
    let (bom, body) = match original.strip_prefix(BOM) {
        Some(rest) => (true, rest),
        None => (false, original),
    };
    let parsed = qwen_parse(body)?;
    let Value::Object(mut expected) = parsed else {
        return Err(Error::invalid_json(
            "the top level is not a JSON object (Qwen Code ignores such a file); it was left untouched",
        ));
    };
    let unchanged = |change, left| Edit {
        text: original.to_string(),
        change,
        servers_left: left,
    };
    let change = match (expected.get_mut(MCP_SERVERS), entry) {
        (Some(Value::Object(servers)), Some(entry)) => {
            if servers.get(name) == Some(entry) {
                return Ok(unchanged(Change::Unchanged, servers.len()));
            }
            if servers.insert(name.to_string(), entry.clone()).is_some() {
                Change::Replaced
            } else {
                Change::Added
            }
        }
        (Some(Value::Object(servers)), None) => {
            if servers.remove(name).is_none() {
                return Ok(unchanged(Change::Absent, servers.len()));
            }
            Change::Removed
        }
        (Some(other), _) => {
            return Err(Error::invalid_json(format!(
                "\"mcpServers\" is {}, not an object; fix it by hand (it was left untouched)",
                crate::shared::json::kind(other)
            )))
        }
        (None, None) => return Ok(unchanged(Change::Absent, 0)),
        (None, Some(entry)) => {
            let mut servers = Map::new();
            servers.insert(name.to_string(), entry.clone());
            expected.insert(MCP_SERVERS.into(), Value::Object(servers));
            Change::Added
        }
    };
    let servers_left = expected
        .get(MCP_SERVERS)
        .and_then(Value::as_object)
        .map_or(0, Map::len);

    let root = CstRootNode::parse(body, &strict_options()).map_err(|e| {
        Error::invalid_json(format!(
            "the file cannot be edited safely ({e}); it was left untouched"
        ))
    })?;
    let top = root
        .object_value()
        .ok_or_else(|| Error::invalid_json("the top level is not a JSON object"))?;
    let servers_prop = top
        .properties()
        .into_iter()
        .rfind(|p| p.decoded_name().as_deref() == Some(MCP_SERVERS));
    match servers_prop {
        None => {
            // Only an add gets here: a remove without mcpServers returned above.
            let entry = entry.ok_or_else(|| {
                Error::new(Status::Internal, "no mcpServers to remove an entry from")
            })?;
            top.append(
                MCP_SERVERS,
                CstInputValue::Object(vec![(name.to_string(), to_input(entry))]),
            );
        }
        Some(prop) => {
            let servers: CstObject = prop
                .object_value()
                .ok_or_else(|| Error::invalid_json("\"mcpServers\" is not an object"))?;
            let mut ours: Vec<_> = servers
                .properties()
                .into_iter()
                .filter(|p| p.decoded_name().as_deref() == Some(name))
                .collect();
            match entry {
                Some(entry) => match ours.pop() {
                    Some(last) => {
                        for p in ours {
                            p.remove();
                        }
                        last.set_value(to_input(entry));
                    }
                    None => {
                        servers.append(name, to_input(entry));
                    }
                },
                None => {
                    for p in ours {
                        p.remove();
                    }
                }
            }
        }
    }
    let mut text = root.to_string();
    // What Qwen will read must be exactly what we meant.
    match qwen_parse(&text) {
        Ok(v) if v == Value::Object(expected) => {}
        _ => {
            return Err(Error::new(
                Status::Internal,
                "the edited settings would not read back as intended; nothing was written",
            ))
        }
    }
    if bom {
        text.insert(0, BOM);
    }
    Ok(Edit {
        text,
        change,
        servers_left,
    })
}

/// jsonc-parser options accepting exactly what Qwen accepts: comments, and
/// nothing else beyond JSON.
fn strict_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

fn to_input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), to_input(v))).collect())
        }
    }
}

/// Reads a settings text (BOM already removed) as Qwen Code does:
/// strip-json-comments, then strict JSON. The error names line and column.
pub fn qwen_parse(body: &str) -> Result<Value> {
    let stripped = strip_comments(body);
    serde_json::from_str(&stripped).map_err(|e| {
        Error::invalid_json(format!(
            "not valid settings JSON at line {} column {}: {e} (Qwen Code allows // and /* */ comments, \
             but no trailing commas, single quotes or other JSON5 extras); it was left untouched",
            e.line(),
            e.column()
        ))
    })
}

/// strip-json-comments (v3, `whitespace: true`): every comment character
/// that is not whitespace becomes a space, so lines and columns stay put; a
/// `"` preceded by an odd number of backslashes does not end a string; an
/// unterminated block or line comment runs to the end of the text.
pub fn strip_comments(text: &str) -> String {
    #[derive(PartialEq)]
    enum In {
        Code,
        Str,
        Line,
        Block,
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut state = In::Code;
    let blank = |c: char| if c.is_whitespace() { c } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match state {
            In::Code => {
                if c == '"' {
                    state = In::Str;
                    out.push(c);
                } else if c == '/' && next == Some('/') {
                    state = In::Line;
                    out.push_str("  ");
                    i += 1;
                } else if c == '/' && next == Some('*') {
                    state = In::Block;
                    out.push_str("  ");
                    i += 1;
                } else {
                    out.push(c);
                }
            }
            In::Str => {
                if c == '"' {
                    let backslashes = chars[..i].iter().rev().take_while(|&&b| b == '\\').count();
                    if backslashes % 2 == 0 {
                        state = In::Code;
                    }
                }
                out.push(c);
            }
            In::Line => {
                if c == '\n' || (c == '\r' && next == Some('\n')) {
                    state = In::Code;
                    out.push(c);
                } else {
                    out.push(blank(c));
                }
            }
            In::Block => {
                if c == '*' && next == Some('/') {
                    state = In::Code;
                    out.push_str("  ");
                    i += 1;
                } else {
                    out.push(blank(c));
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests;
