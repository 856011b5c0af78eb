//! Lexical checks: strict JSON (no duplicate keys), plugin ids, tool and
//! view names, MIME types and keybindings.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::*;

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
pub(super) const KEY_PUNCTUATION: &str = "`-=[]\\;',./";

/// A JSON value parsed strictly: like `serde_json::Value`, but an object
/// with the same key twice is an error (serde_json would keep the last one
/// silently). The error carries serde_json's line and column.
pub(super) struct StrictValue(pub(super) Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

pub(super) struct StrictVisitor;

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

pub(super) fn is_view_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub(super) fn tool_name_error(name: &str) -> String {
    format!(
        "{name:?} is not a valid tool name: 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"
    )
}

/// Why `mime` is not a valid MIME type (`type/subtype`, RFC 6838 restricted
/// names, an optional `+suffix` belongs to the subtype; no parameters).
pub fn mime_error(mime: &str) -> Option<String> {
    pub(super) fn name_ok(s: &str) -> bool {
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
pub(super) fn key_canonical(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    let mut parts: Vec<&str> = lower.split('+').collect();
    let last = parts.pop().unwrap_or_default();
    parts.sort_unstable();
    parts.push(last);
    parts.join("+")
}
