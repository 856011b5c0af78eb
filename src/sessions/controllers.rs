//! Controller grants: `$QWEN_HOME/peer-controllers.json`, written by
//! `qwen sessions controllers add --label L`. Qwen consults the file on every
//! auth line (and on every re-validation), so adding or revoking a grant takes
//! effect for the next connection with nothing to restart. [`Grants`] keeps
//! that behaviour without re-reading the file each time: every lookup checks
//! the file's metadata (device, inode, size, mtime, ctime) and parses the file
//! again only when one of them changed. The inbox makes these lookups on the
//! blocking pool, never on a runtime worker.
//!
//! Format (`schemaVersion` must be exactly 1, else no grant is valid):
//! `{"schemaVersion":1,"controllers":[{"id":"c_<8 hex>","label":L,
//! "tokenHash":"<sha256(token) hex>","createdAt":<ms>}]}`. The file must be a
//! regular file (a symlink is ignored) of at most 64 KiB; malformed entries
//! are skipped. Tokens are `qpc_` + 64 hex; presented tokens longer than 256
//! characters or without the prefix are never looked up.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::names::{flatten_label, utf16_len};

pub(crate) const CONTROLLER_TOKEN_PREFIX: &str = "qpc_";
const MAX_PRESENTED_TOKEN_CHARS: usize = 256;
const MAX_LABEL_CHARS: usize = 40;
const MAX_REGISTRY_BYTES: u64 = 64 * 1024;

/// A grant the user minted: its id and its (flattened) label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    pub id: String,
    pub label: String,
}

struct Grant {
    id: String,
    label: String,
    token_hash: [u8; 32],
}

fn is_id(s: &str) -> bool {
    s.len() == 10
        && s.starts_with("c_")
        && s[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn decode_hash(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(out)
}

/// What identifies one version of the file: a rewrite (Qwen writes it
/// atomically, so a new inode) or an in-place edit (size, mtime, ctime)
/// changes it.
use crate::sys::fs::FileVersion as FileKey;

/// The controller grants of one file, parsed only when the file changed.
pub struct Grants {
    path: PathBuf,
    cached: Mutex<Option<(FileKey, Arc<Vec<Grant>>)>>,
    parses: AtomicUsize,
}

impl Grants {
    pub fn new(path: PathBuf) -> Grants {
        Grants {
            path,
            cached: Mutex::new(None),
            parses: AtomicUsize::new(0),
        }
    }

    /// How many times the file was read and parsed (a test hook).
    pub fn parses(&self) -> usize {
        self.parses.load(Ordering::Relaxed)
    }

    /// The current grants: a missing file, a symlink, a non-file or an
    /// oversized file means none.
    fn current(&self) -> Arc<Vec<Grant>> {
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_file() && m.len() <= MAX_REGISTRY_BYTES => m,
            _ => {
                *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = None;
                return Arc::new(Vec::new());
            }
        };
        let key = FileKey::of(&self.path, &meta);
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, grants)) = &*cached {
            if *k == key {
                return grants.clone();
            }
        }
        self.parses.fetch_add(1, Ordering::Relaxed);
        let grants = Arc::new(read_grants(&self.path));
        // Cache under the key seen before the read only if the file did not
        // change while it was read; otherwise the next lookup reads it again.
        let after = std::fs::symlink_metadata(&self.path).map(|m| FileKey::of(&self.path, &m));
        *cached = match after {
            Ok(k) if k == key => Some((key, grants.clone())),
            _ => None,
        };
        grants
    }

    /// The grant a presented token belongs to. Every grant is compared in
    /// constant time; the last match wins.
    pub fn resolve(&self, presented: &str) -> Option<Controller> {
        if !is_presentable(presented) {
            return None;
        }
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut matched = None;
        for g in self.current().iter() {
            if bool::from(g.token_hash.ct_eq(&hash)) {
                matched = Some(Controller {
                    id: g.id.clone(),
                    label: g.label.clone(),
                });
            }
        }
        matched
    }

    /// The ids of every grant currently valid.
    pub fn valid_ids(&self) -> HashSet<String> {
        self.current().iter().map(|g| g.id.clone()).collect()
    }
}

fn read_grants(path: &Path) -> Vec<Grant> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Vec::new();
    };
    if !meta.is_file() || meta.len() > MAX_REGISTRY_BYTES {
        return Vec::new();
    }
    let Ok(raw) = std::fs::read(path) else {
        return Vec::new();
    };
    if raw.len() as u64 > MAX_REGISTRY_BYTES {
        return Vec::new();
    }
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(&raw) else {
        return Vec::new();
    };
    if !matches!(obj.get("schemaVersion"), Some(Value::Number(n)) if n.as_f64() == Some(1.0)) {
        return Vec::new();
    }
    let Some(Value::Array(entries)) = obj.get("controllers") else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let e = e.as_object()?;
            let id = e.get("id")?.as_str().filter(|s| is_id(s))?;
            let token_hash = decode_hash(e.get("tokenHash")?.as_str()?)?;
            let label = flatten_label(e.get("label")?.as_str()?);
            if label.is_empty() || utf16_len(&label) > MAX_LABEL_CHARS {
                return None;
            }
            if !e.get("createdAt")?.as_f64().is_some_and(f64::is_finite) {
                return None;
            }
            Some(Grant {
                id: id.to_string(),
                label,
                token_hash,
            })
        })
        .collect()
}

/// Whether `token` has the shape of a controller token we may present or look up.
pub fn is_presentable(token: &str) -> bool {
    token.starts_with(CONTROLLER_TOKEN_PREFIX) && utf16_len(token) <= MAX_PRESENTED_TOKEN_CHARS
}

#[cfg(test)]
mod tests;
