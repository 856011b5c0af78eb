//! The checking context: problems at JSON pointers, typed field readers
//! that report what they find wrong, and file fields resolved inside the
//! plugin folder.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::super::Problem;
use super::*;

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

pub(super) fn at(base: &str, i: usize) -> String {
    format!("{base}/{i}")
}

#[derive(Default)]
pub(super) struct Cx {
    pub(super) errors: Vec<Problem>,
    pub(super) warnings: Vec<Problem>,
}

impl Cx {
    pub(super) fn err(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(problem(path, message));
    }
    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(problem(path, message));
    }
    pub(super) fn wrong_type(&mut self, path: &str, expected: &str, found: &Value) {
        self.err(
            path,
            format!(
                "expected {expected} at {}, found {}",
                shown(path),
                json_kind(found)
            ),
        );
    }
    pub(super) fn missing(&mut self, path: &str) {
        self.err(path, format!("{} is required", shown(path)));
    }

    /// An optional string field (absent → None; wrong type → error).
    pub(super) fn opt_str(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<String> {
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
    pub(super) fn req_str(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<String> {
        if !obj.contains_key(key) {
            self.missing(&pointer(base, key));
            return None;
        }
        self.opt_str(obj, base, key)
    }
    /// An optional array field, as its elements.
    pub(super) fn opt_array<'v>(
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
    pub(super) fn as_object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(o) => Some(o),
            other => {
                self.wrong_type(path, "an object", other);
                None
            }
        }
    }
    /// An optional array of strings (absent → empty).
    pub(super) fn str_list(&mut self, obj: &Map<String, Value>, key: &str) -> Vec<String> {
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

pub(super) fn shown(path: &str) -> &str {
    if path.is_empty() {
        "the top level"
    } else {
        path
    }
}

/// Resolves `rel` (a path written in the manifest) to a regular file inside
/// `root` (canonical), following symlinks.
pub(super) fn resolve_file(root: &Path, rel: &str) -> Result<PathBuf, String> {
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
    let real = crate::sys::fs::canonicalize(&joined).map_err(|e| {
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

pub(super) fn file_field(
    cx: &mut Cx,
    root: Option<&Path>,
    path: &str,
    rel: &str,
) -> Option<PathBuf> {
    let root = root?;
    match resolve_file(root, rel) {
        Ok(p) => Some(p),
        Err(m) => {
            cx.err(path, m);
            None
        }
    }
}
