//! MCP tool names for plugin tools.
//!
//! Qwen Code registers every MCP tool as `mcp__<server>__<tool>` and passes
//! that through `normalizeToolNameForProvider`: a name of at most 63
//! characters (`MAX_TOOL_NAME_LENGTH`) matching `^[A-Za-z][A-Za-z0-9_-]*$`
//! (`PROVIDER_SAFE_TOOL_NAME`) is kept; any other is sanitised (every
//! character outside `[A-Za-z0-9_-]` becomes `_`), cut and given an FNV-1a
//! hash suffix. A hashed name is unreadable and also differs from the one a
//! user's permission rule names, so we never let that happen: every name
//! [`assign`] hands out is already valid ([`cli_registered_name`] is the
//! CLI's rule, and the tests check that it keeps our names unchanged).
//!
//! ## The names
//! For a plugin `com.example.notes` and its tool `search`, the MCP tool is
//! `notes_search`: the id's last label, `_`, the tool name. The room is
//! `63 - len("mcp__") - len(server) - len("__")` characters, 34 for
//! [`SERVER_NAME`].
//!
//! ## Collisions (the documented rule)
//! 1. Every tool starts with one label of its plugin's id.
//! 2. While two tools get the same name, each of them takes one more label
//!    of its id (`example-notes_search`, labels joined with `-`), as long as
//!    it has labels left and the longer name fits.
//! 3. A tool whose name still collides, or whose name does not fit, or whose
//!    id or tool name holds characters outside `[A-Za-z0-9_-]`, gets a
//!    hashed name: the readable name cut to leave room, `_` and 7 base-36
//!    characters of the SHA-256 of `id NUL tool`. In the (astronomically
//!    unlikely) case that a hashed name still meets another name, its hash
//!    is salted with a counter until it is unique.
//!
//! The result depends only on the *set* of (plugin id, tool) pairs, never
//! on their order, and [`Assignment::lookup`] maps every name back to
//! exactly one pair.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The name of our MCP server in `mcpServers` (and so in every tool name).
/// Lowercase letters, digits and single `-`: no `_` (a `__` would break the
/// CLI's `mcp__<server>` permission patterns, which split on `__`), no `.`
/// (any character outside `[A-Za-z0-9_-]` makes the CLI hash every tool name
/// of the server).
pub const SERVER_NAME: &str = "qwen-companion-plugins";

/// The CLI's `MAX_TOOL_NAME_LENGTH`.
pub const MAX_TOOL_NAME_LENGTH: usize = 63;

/// Longest server name we accept: it leaves at least 16 characters for the
/// tool part, enough for a hashed name (8 readable characters + `_` + 7).
pub const MAX_SERVER_NAME_LEN: usize = 40;

const HASH_LEN: usize = 7;

/// Why `name` cannot be our MCP server name, if it cannot:
/// `^[a-z][a-z0-9-]*$`, no `--`, not ending in `-`, at most
/// [`MAX_SERVER_NAME_LEN`] characters.
pub fn server_name_error(name: &str) -> Option<String> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if name.is_empty() || name.len() > MAX_SERVER_NAME_LEN {
        return Some(format!(
            "the MCP server name must have 1 to {MAX_SERVER_NAME_LEN} characters; {name:?} has {}",
            name.len()
        ));
    }
    if !ok_chars || !name.as_bytes()[0].is_ascii_lowercase() {
        return Some(format!(
            "the MCP server name {name:?} must start with a lowercase letter and hold only a-z, 0-9 and '-' \
             (other characters make Qwen Code rename every tool of the server)"
        ));
    }
    if name.contains("--") || name.ends_with('-') {
        return Some(format!(
            "the MCP server name {name:?} must not contain '--' or end with '-'"
        ));
    }
    None
}

/// The room for the tool part of `mcp__<server>__<tool>`.
pub fn tool_budget(server: &str) -> usize {
    MAX_TOOL_NAME_LENGTH.saturating_sub("mcp__".len() + server.len() + "__".len())
}

/// The name Qwen Code 0.24.4 registers for tool `tool` of server `server`
/// (`generateValidName` → `normalizeToolNameForProvider`), reproduced so that
/// tests can prove our names pass through unchanged.
pub fn cli_registered_name(server: &str, tool: &str) -> String {
    let name = format!("mcp__{server}__{tool}");
    if is_provider_safe(&name) {
        return name;
    }
    let sanitized: String = name
        .chars()
        .map(|c| if is_safe_char(c) { c } else { '_' })
        .collect();
    let sanitized = if sanitized.starts_with(|c: char| c.is_ascii_alphabetic()) {
        sanitized
    } else {
        format!("tool_{sanitized}")
    };
    let suffix = format!("_{}", fnv_base36(&name));
    // `slice` in JavaScript counts UTF-16 units; after sanitising every
    // character is ASCII, so bytes are the same.
    let keep = MAX_TOOL_NAME_LENGTH - suffix.len();
    let head: String = sanitized.chars().take(keep).collect();
    format!("{head}{suffix}")
}

fn is_safe_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn is_provider_safe(name: &str) -> bool {
    name.encode_utf16().count() <= MAX_TOOL_NAME_LENGTH
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(is_safe_char)
}

/// `stableToolNameHash`: 32-bit FNV-1a over UTF-16 code units, base 36,
/// left-padded with `0` to 7 characters.
fn fnv_base36(name: &str) -> String {
    let mut hash: u32 = 2166136261;
    for unit in name.encode_utf16() {
        hash = (hash ^ unit as u32).wrapping_mul(16777619);
    }
    format!("{:0>7}", base36(hash as u64))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    while n > 0 {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// One plugin tool and its MCP name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub plugin_id: String,
    pub tool: String,
    /// The tool name our server lists (without `mcp__<server>__`).
    pub mcp_name: String,
    /// What the model and permission rules see: `mcp__<server>__<mcp_name>`.
    pub registered_name: String,
}

/// The names of a set of plugin tools, both ways.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    /// Sorted by `(plugin_id, tool)`.
    pub tools: Vec<Assigned>,
    by_name: BTreeMap<String, usize>,
    by_pair: BTreeMap<(String, String), usize>,
}

impl Assignment {
    /// The (plugin id, tool name) behind an MCP tool name.
    pub fn lookup(&self, mcp_name: &str) -> Option<(&str, &str)> {
        let a = &self.tools[*self.by_name.get(mcp_name)?];
        Some((&a.plugin_id, &a.tool))
    }
    /// The MCP name of a plugin's tool.
    pub fn name_of(&self, plugin_id: &str, tool: &str) -> Option<&str> {
        let i = self
            .by_pair
            .get(&(plugin_id.to_string(), tool.to_string()))?;
        Some(&self.tools[*i].mcp_name)
    }
}

struct Slot {
    id: String,
    tool: String,
    labels: Vec<String>,
    /// Labels in use (1..=labels.len()).
    level: usize,
    /// `Some(salt)` once the name is hashed.
    hashed: Option<u32>,
}

impl Slot {
    fn readable(&self, level: usize) -> String {
        let start = self.labels.len() - level;
        format!(
            "{}_{}",
            self.labels[start..].join("-"),
            sanitize(&self.tool)
        )
    }
    fn clean(&self) -> bool {
        self.id
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(is_safe_char))
            && !self.tool.is_empty()
            && self.tool.chars().all(is_safe_char)
    }
    fn name(&self, budget: usize) -> String {
        match self.hashed {
            None => self.readable(self.level),
            Some(salt) => {
                let mut h = Sha256::new();
                h.update(self.id.as_bytes());
                h.update([0]);
                h.update(self.tool.as_bytes());
                if salt > 0 {
                    h.update([0]);
                    h.update(salt.to_be_bytes());
                }
                let d = h.finalize();
                let n = u64::from_be_bytes([0, 0, 0, d[0], d[1], d[2], d[3], d[4]]);
                let mut hash = base36(n % 36u64.pow(HASH_LEN as u32));
                while hash.len() < HASH_LEN {
                    hash.insert(0, '0');
                }
                let keep = budget.saturating_sub(HASH_LEN + 1);
                let head: String = self.readable(self.level).chars().take(keep).collect();
                format!("{head}_{hash}")
            }
        }
    }
}

fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| if is_safe_char(c) { c } else { '_' })
        .collect();
    if out.is_empty() {
        "_".into()
    } else {
        out
    }
}

/// Assigns an MCP tool name to every `(plugin id, tool name)` pair (the
/// rules are in the module docs). Repeated pairs count once. Fails only if
/// `server` is not a valid server name ([`server_name_error`]).
pub fn assign(tools: &[(&str, &str)], server: &str) -> Result<Assignment> {
    if let Some(e) = server_name_error(server) {
        return Err(Error::invalid_argument(e));
    }
    let budget = tool_budget(server);
    let pairs: BTreeSet<(&str, &str)> = tools.iter().copied().collect();
    let mut slots: Vec<Slot> = pairs
        .into_iter()
        .map(|(id, tool)| {
            let labels: Vec<String> = id.split('.').map(sanitize).collect();
            Slot {
                id: id.to_string(),
                tool: tool.to_string(),
                labels,
                level: 1,
                hashed: None,
            }
        })
        .collect();
    for s in &mut slots {
        if !s.clean() || s.readable(1).len() > budget {
            s.hashed = Some(0);
        }
    }
    // Rule 2: colliding readable names take one more label each, while they can.
    loop {
        let groups = collisions(&slots, budget);
        let mut bumped = false;
        for group in groups {
            for i in group {
                let s = &mut slots[i];
                if s.hashed.is_some() {
                    continue;
                }
                if s.level < s.labels.len() && s.readable(s.level + 1).len() <= budget {
                    s.level += 1;
                    bumped = true;
                }
            }
        }
        if !bumped {
            break;
        }
    }
    // Rule 3: what still collides is hashed; a hash that collides is salted.
    for group in collisions(&slots, budget) {
        for i in group {
            if slots[i].hashed.is_none() {
                slots[i].hashed = Some(0);
            }
        }
    }
    for _ in 0..1000 {
        let groups = collisions(&slots, budget);
        if groups.is_empty() {
            break;
        }
        for group in groups {
            // Keep the first hashed member (in sorted order) unless a
            // readable name holds the spot; salt the others.
            let readable_present = group.iter().any(|&i| slots[i].hashed.is_none());
            let mut kept = readable_present;
            for i in group {
                if let Some(salt) = slots[i].hashed {
                    if kept {
                        slots[i].hashed = Some(salt + 1);
                    } else {
                        kept = true;
                    }
                }
            }
        }
    }
    let mut out = Assignment::default();
    for s in &slots {
        let mcp_name = s.name(budget);
        let i = out.tools.len();
        if out.by_name.insert(mcp_name.clone(), i).is_some() {
            return Err(Error::new(
                crate::error::Status::Internal,
                format!("could not give {}/{} a unique MCP name", s.id, s.tool),
            ));
        }
        out.by_pair.insert((s.id.clone(), s.tool.clone()), i);
        out.tools.push(Assigned {
            plugin_id: s.id.clone(),
            tool: s.tool.clone(),
            registered_name: format!("mcp__{server}__{mcp_name}"),
            mcp_name,
        });
    }
    Ok(out)
}

/// Indices of slots sharing a name, group by group (groups of two or more).
fn collisions(slots: &[Slot], budget: usize) -> Vec<Vec<usize>> {
    let mut by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, s) in slots.iter().enumerate() {
        by.entry(s.name(budget)).or_default().push(i);
    }
    by.into_values().filter(|g| g.len() > 1).collect()
}

#[cfg(test)]
mod tests;
