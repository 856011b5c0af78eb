//! Editor context kept by the companion and normalised the way Qwen Code
//! normalises it (`IdeContextStore.set` in the CLI), so what we send is what the
//! CLI will use: MRU by timestamp, at most 10 files, only the newest file can be
//! active, cursor/selection only on it, selection capped at 16384 UTF-16 units.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Most files the CLI keeps (`IDE_MAX_OPEN_FILES`).
pub const MAX_OPEN_FILES: usize = 10;
/// Most UTF-16 code units of selected text the CLI keeps (`IDE_MAX_SELECTED_TEXT_LENGTH`).
pub const MAX_SELECTED_TEXT_UNITS: usize = 16384;
/// Appended to a selection we had to cut; the whole text stays within the cap,
/// so the CLI never cuts it again (and never inside a surrogate pair).
pub const TRUNCATION_MARKER: &str = "... [TRUNCATED]";
/// Most entries the state remembers (older ones are forgotten).
const MAX_TRACKED_FILES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub line: u32,
    pub character: u32,
}

#[derive(Debug, Clone, PartialEq)]
struct FileEntry {
    path: String,
    timestamp: u64,
    cursor: Option<Cursor>,
    selected_text: Option<String>,
}

/// The host's editor state.
#[derive(Debug, Clone)]
pub struct ContextState {
    /// Bumped on every change; orders snapshots of the state.
    pub version: u64,
    files: Vec<FileEntry>,
    active: Option<String>,
    trusted: bool,
    last_timestamp: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Cuts `text` to at most `MAX_SELECTED_TEXT_UNITS` UTF-16 units, marker
/// included, on a character boundary.
pub fn truncate_selection(text: &str) -> String {
    let total: usize = text.chars().map(char::len_utf16).sum();
    if total <= MAX_SELECTED_TEXT_UNITS {
        return text.to_string();
    }
    let budget = MAX_SELECTED_TEXT_UNITS - TRUNCATION_MARKER.len();
    let mut used = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        let w = c.len_utf16();
        if used + w > budget {
            break;
        }
        used += w;
        end = i + c.len_utf8();
    }
    let mut out = String::with_capacity(end + TRUNCATION_MARKER.len());
    out.push_str(&text[..end]);
    out.push_str(TRUNCATION_MARKER);
    out
}

/// Number of UTF-16 code units in `text` (what JavaScript's `length` counts).
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContext {
    workspace_state: Option<WireWorkspaceState>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireWorkspaceState {
    open_files: Option<Vec<WireFile>>,
    is_trusted: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireFile {
    path: String,
    timestamp: f64,
    is_active: Option<bool>,
    cursor: Option<WireCursor>,
    selected_text: Option<String>,
}

#[derive(Deserialize)]
struct WireCursor {
    line: f64,
    character: f64,
}

impl ContextState {
    pub fn new(trusted: bool) -> ContextState {
        ContextState {
            version: 0,
            files: Vec::new(),
            active: None,
            trusted,
            last_timestamp: 0,
        }
    }

    /// A strictly increasing millisecond timestamp, so MRU order is exact even
    /// for events in the same millisecond.
    fn next_timestamp(&mut self) -> u64 {
        let ts = now_ms().max(self.last_timestamp + 1);
        self.last_timestamp = ts;
        ts
    }

    fn find(&mut self, path: &str) -> Option<&mut FileEntry> {
        self.files.iter_mut().find(|f| f.path == path)
    }

    fn forget_oldest(&mut self) {
        while self.files.len() > MAX_TRACKED_FILES {
            let (idx, _) = self
                .files
                .iter()
                .enumerate()
                .min_by_key(|(_, f)| f.timestamp)
                .expect("non-empty");
            let removed = self.files.remove(idx);
            if self.active.as_deref() == Some(removed.path.as_str()) {
                self.active = None;
            }
        }
    }

    /// A file was opened (not necessarily focused).
    pub fn opened(&mut self, path: &str) {
        if self.find(path).is_some() {
            return;
        }
        let timestamp = self.next_timestamp();
        self.files.push(FileEntry {
            path: path.to_string(),
            timestamp,
            cursor: None,
            selected_text: None,
        });
        // An opened file is newer than the focused one: the focused one would
        // lose its active state in the CLI unless it stays the newest.
        if let Some(active) = self.active.clone() {
            let ts = self.next_timestamp();
            if let Some(f) = self.find(&active) {
                f.timestamp = ts;
            }
        }
        self.forget_oldest();
    }

    /// A file got the focus: it becomes the newest and the active one.
    pub fn focused(&mut self, path: &str) {
        let timestamp = self.next_timestamp();
        if let Some(prev) = self.active.take() {
            if prev != path {
                if let Some(f) = self.find(&prev) {
                    f.cursor = None;
                    f.selected_text = None;
                }
            }
        }
        match self.find(path) {
            Some(f) => f.timestamp = timestamp,
            None => self.files.push(FileEntry {
                path: path.to_string(),
                timestamp,
                cursor: None,
                selected_text: None,
            }),
        }
        self.active = Some(path.to_string());
        self.forget_oldest();
    }

    pub fn closed(&mut self, path: &str) {
        self.files.retain(|f| f.path != path);
        if self.active.as_deref() == Some(path) {
            self.active = None;
        }
    }

    pub fn renamed(&mut self, old: &str, new: &str) {
        if old == new {
            return;
        }
        let was_active = self.active.as_deref() == Some(old);
        if !self.files.iter().any(|f| f.path == old) {
            return;
        }
        self.files.retain(|f| f.path != new);
        if let Some(f) = self.find(old) {
            f.path = new.to_string();
        }
        if was_active {
            self.active = Some(new.to_string());
        } else if self.active.as_deref() == Some(new) {
            self.active = None;
        }
    }

    fn target(&mut self, path: Option<&str>) -> Result<&mut FileEntry> {
        let path = match path {
            Some(p) => p.to_string(),
            None => self.active.clone().ok_or_else(|| {
                Error::new(crate::error::Status::NotFound, "no file has the focus")
            })?,
        };
        if self.active.as_deref() != Some(path.as_str()) {
            // Cursor and selection only count for the focused file: a position in
            // another file means that file has the focus now.
            self.focused(&path);
        }
        Ok(self.find(&path).expect("focused file exists"))
    }

    /// Sets the cursor (1-based line and character) of `path` or of the active file.
    pub fn set_cursor(&mut self, path: Option<&str>, line: u32, character: u32) -> Result<()> {
        if line == 0 || character == 0 {
            return Err(Error::invalid_argument(
                "cursor line and character are 1-based and must be at least 1",
            ));
        }
        self.target(path)?.cursor = Some(Cursor { line, character });
        Ok(())
    }

    /// Sets (or with `None`/empty clears) the selected text of `path` or of the active file.
    pub fn set_selection(&mut self, path: Option<&str>, text: Option<&str>) -> Result<()> {
        let entry = self.target(path)?;
        entry.selected_text = match text {
            Some(t) if !t.is_empty() => Some(truncate_selection(t)),
            _ => None,
        };
        Ok(())
    }

    pub fn set_trusted(&mut self, trusted: bool) {
        self.trusted = trusted;
    }

    /// Replaces the state with a whole `IdeContext` JSON document from the host.
    pub fn replace_from_json(&mut self, json: &str) -> Result<()> {
        let wire: WireContext = serde_json::from_str(json)
            .map_err(|e| Error::invalid_json(format!("not an IdeContext: {e}")))?;
        let mut files = Vec::new();
        let mut active: Option<(u64, String)> = None;
        let mut trusted = self.trusted;
        if let Some(ws) = wire.workspace_state {
            if let Some(t) = ws.is_trusted {
                trusted = t;
            }
            for f in ws.open_files.unwrap_or_default() {
                if !f.timestamp.is_finite() || f.timestamp < 0.0 {
                    return Err(Error::invalid_json(format!(
                        "openFiles entry {:?} has an invalid timestamp",
                        f.path
                    )));
                }
                let timestamp = f.timestamp as u64;
                let cursor = match f.cursor {
                    Some(c) => {
                        let ok = |v: f64| v.is_finite() && v >= 1.0 && v <= u32::MAX as f64;
                        if !ok(c.line) || !ok(c.character) {
                            return Err(Error::invalid_json(format!(
                                "openFiles entry {:?} has an invalid cursor",
                                f.path
                            )));
                        }
                        Some(Cursor {
                            line: c.line as u32,
                            character: c.character as u32,
                        })
                    }
                    None => None,
                };
                if f.is_active == Some(true)
                    && active.as_ref().is_none_or(|(ts, _)| timestamp >= *ts)
                {
                    active = Some((timestamp, f.path.clone()));
                }
                files.retain(|e: &FileEntry| e.path != f.path);
                files.push(FileEntry {
                    path: f.path,
                    timestamp,
                    cursor,
                    selected_text: f
                        .selected_text
                        .filter(|s| !s.is_empty())
                        .map(|s| truncate_selection(&s)),
                });
            }
        }
        self.last_timestamp = self
            .last_timestamp
            .max(files.iter().map(|f| f.timestamp).max().unwrap_or(0));
        self.files = files;
        self.active = active.map(|(_, p)| p);
        self.trusted = trusted;
        self.forget_oldest();
        Ok(())
    }

    /// The context as sent to the CLI. `keep` decides which paths are real
    /// files on disk (absolute paths to regular files).
    pub fn normalized(&self, keep: impl Fn(&str) -> bool) -> Value {
        let mut files: Vec<&FileEntry> = self.files.iter().filter(|f| keep(&f.path)).collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.timestamp));
        files.truncate(MAX_OPEN_FILES);
        let open: Vec<Value> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut o = Map::new();
                o.insert("path".into(), json!(f.path));
                o.insert("timestamp".into(), json!(f.timestamp));
                let is_active = i == 0 && self.active.as_deref() == Some(f.path.as_str());
                o.insert("isActive".into(), json!(is_active));
                if is_active {
                    if let Some(c) = f.cursor {
                        o.insert(
                            "cursor".into(),
                            json!({"line": c.line, "character": c.character}),
                        );
                    }
                    if let Some(s) = &f.selected_text {
                        o.insert("selectedText".into(), json!(s));
                    }
                }
                Value::Object(o)
            })
            .collect();
        json!({"workspaceState": {"openFiles": open, "isTrusted": self.trusted}})
    }
}

/// True for absolute paths naming a regular file on disk (symlinks followed).
pub fn is_real_file(path: &str) -> bool {
    let p = std::path::Path::new(path);
    p.is_absolute() && std::fs::metadata(p).map(|m| m.is_file()).unwrap_or(false)
}

#[cfg(test)]
mod tests;
