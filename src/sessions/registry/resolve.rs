//! Address resolution: the messageable peers among live records (twins
//! collapsed), and a typed address resolved to one of them (`ref`, name,
//! session id, `name[ref]`), with suggestions when it is not.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Number;

use super::super::names::{flatten_label, is_js_space, js_trim, peer_ref};
use super::super::net::Verdict;
use super::{LiveRecord, Record};

/// A session that can be messaged: live, with an inbox that answered a dial.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    pub session_id: String,
    /// Flattened; never empty.
    pub name: String,
    #[serde(rename = "ref")]
    pub ref_: String,
    /// The shortest address that selects exactly this session (filled by [`with_addresses`]).
    pub address: String,
    /// Flattened.
    pub cwd: String,
    pub pid: u64,
    /// `tui` when the record has none.
    pub kind: String,
    pub started_at: Number,
    #[serde(skip)]
    pub ipc_path: String,
    #[serde(skip)]
    pub ipc_token: Option<String>,
}

impl Peer {
    fn started(&self) -> f64 {
        self.started_at.as_f64().unwrap_or(0.0)
    }
}

/// Qwen's `toPeerSessionInfo`: needs an `ipcPath` and a non-blank flattened name.
pub fn to_peer(r: &Record) -> Option<Peer> {
    let ipc_path = r.ipc_path.clone()?;
    let name = flatten_label(&r.name);
    if name.is_empty() {
        return None;
    }
    Some(Peer {
        session_id: r.session_id.clone(),
        name,
        ref_: peer_ref(&r.session_id),
        address: String::new(),
        cwd: flatten_label(&r.cwd),
        pid: r.pid,
        kind: r.kind_or_tui().to_string(),
        started_at: r.started_at.clone(),
        ipc_path,
        ipc_token: r.ipc_token.clone(),
    })
}

/// Qwen Code on Windows has no automatic inbox: the reason it gives
/// (`unsupported_platform`), quoted when a send names such a session.
pub const NO_INBOX_REASON: &str =
    "cross-session messaging is OFF for that session (unsupported_platform: automatic peer inbox paths are not supported on Windows)";

/// The live record other than `except` (a session id) that `address`
/// selects among the records with no `ipcPath` (a Qwen Code on Windows),
/// if any: such a session is listed but cannot be messaged.
pub fn inboxless_match(records: &[LiveRecord], address: &str, except: &str) -> Option<Peer> {
    let inboxless: Vec<Peer> = records
        .iter()
        .filter(|r| r.record.ipc_path.is_none() && r.record.session_id != except)
        .filter_map(|r| {
            let mut rec = r.record.clone();
            rec.ipc_path = Some(String::new());
            to_peer(&rec)
        })
        .collect();
    match resolve_target(&inboxless, address) {
        Resolution::One(i) => Some(inboxless[i].clone()),
        Resolution::Ambiguous(ix) => ix.first().map(|&i| inboxless[i].clone()),
        Resolution::None => None,
    }
}

/// The live records that can be messaged: an inbox that dials `Alive`
/// (each distinct path dialled once). With `collapse_twins`, records sharing
/// session id and name keep only the newest, as Qwen's listing does.
pub fn messageable(
    records: &[LiveRecord],
    probe: impl Fn(&str) -> Verdict,
    collapse_twins: bool,
) -> Vec<Peer> {
    let candidates: Vec<Peer> = records.iter().filter_map(|r| to_peer(&r.record)).collect();
    let mut verdicts: HashMap<String, Verdict> = HashMap::new();
    for p in &candidates {
        if !verdicts.contains_key(&p.ipc_path) {
            verdicts.insert(p.ipc_path.clone(), probe(&p.ipc_path));
        }
    }
    let alive: Vec<Peer> = candidates
        .into_iter()
        .filter(|p| verdicts.get(&p.ipc_path) == Some(&Verdict::Alive))
        .collect();
    if !collapse_twins {
        return alive;
    }
    let mut order: Vec<(String, String)> = Vec::new();
    let mut newest: HashMap<(String, String), Peer> = HashMap::new();
    for p in alive {
        let key = (p.session_id.clone(), p.name.clone());
        match newest.get(&key) {
            None => {
                order.push(key.clone());
                newest.insert(key, p);
            }
            Some(seen) if p.started() > seen.started() => {
                newest.insert(key, p);
            }
            Some(_) => {}
        }
    }
    order
        .into_iter()
        .filter_map(|k| newest.remove(&k))
        .collect()
}

/// How an address resolved against a list of peers (indices into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    None,
    One(usize),
    Ambiguous(Vec<usize>),
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Splits `name [ref]` / `[ref]` (ref: 4–12 hex, any case) off the end.
fn split_bracketed(target: &str) -> Option<(&str, &str)> {
    let inner_end = target.strip_suffix(']')?;
    let open = inner_end.rfind('[')?;
    let hex = &inner_end[open + 1..];
    if !(4..=12).contains(&hex.len()) || !is_hex(hex) {
        return None;
    }
    Some((inner_end[..open].trim_end_matches(is_js_space), hex))
}

fn unique(matches: Vec<usize>) -> Resolution {
    let mut seen = HashSet::new();
    let uniq: Vec<usize> = matches.into_iter().filter(|i| seen.insert(*i)).collect();
    match uniq.len() {
        0 => Resolution::None,
        1 => Resolution::One(uniq[0]),
        _ => Resolution::Ambiguous(uniq),
    }
}

/// Qwen's `resolvePeerTarget`: `name` (exact, case-sensitive), `name [ref]`,
/// `[ref]` or a bare ref (case-insensitive). Several matches are ambiguous.
pub fn resolve_target(peers: &[Peer], target: &str) -> Resolution {
    let trimmed = js_trim(target);
    if trimmed.is_empty() {
        return Resolution::None;
    }
    let by_name = indices_where(peers, |p| p.name == trimmed);
    if let Some((name_part, hex)) = split_bracketed(trimmed) {
        let want = hex.to_ascii_lowercase();
        let bracketed = indices_where(peers, |p| {
            p.ref_ == want && (name_part.is_empty() || p.name == name_part)
        });
        return unique(by_name.chain(bracketed).collect());
    }
    let lower = trimmed.to_lowercase();
    let by_ref = indices_where(peers, |p| p.ref_ == lower);
    unique(by_name.chain(by_ref).collect())
}

/// Indices (in list order) of the peers `keep` accepts.
fn indices_where<'a>(
    peers: &'a [Peer],
    keep: impl Fn(&Peer) -> bool + 'a,
) -> impl Iterator<Item = usize> + 'a {
    peers
        .iter()
        .enumerate()
        .filter(move |(_, p)| keep(p))
        .map(|(i, _)| i)
}

/// The shortest of `name`, `name [ref]`, `[ref]` that selects exactly `peers[i]`.
pub fn advertisable_address(peers: &[Peer], i: usize) -> Option<String> {
    let p = &peers[i];
    [
        p.name.clone(),
        format!("{} [{}]", p.name, p.ref_),
        format!("[{}]", p.ref_),
    ]
    .into_iter()
    .find(|c| resolve_target(peers, c) == Resolution::One(i))
}

/// Fills each peer's `address`; peers no address can select are dropped.
pub fn with_addresses(peers: Vec<Peer>) -> Vec<Peer> {
    let addresses: Vec<Option<String>> = (0..peers.len())
        .map(|i| advertisable_address(&peers, i))
        .collect();
    peers
        .into_iter()
        .zip(addresses)
        .filter_map(|(mut p, a)| {
            p.address = a?;
            Some(p)
        })
        .collect()
}

/// Up to three names resembling `target` (for a "not found" message).
pub fn suggestions(peers: &[Peer], target: &str) -> Vec<String> {
    let mut needle = js_trim(target);
    if let Some(open) = needle.rfind('[') {
        let tail = &needle[open + 1..];
        let tail = tail.strip_suffix(']').unwrap_or(tail);
        if tail.len() <= 12 && is_hex(tail) {
            needle = needle[..open].trim_end_matches(is_js_space);
        }
    }
    let needle = js_trim(needle).to_lowercase();
    if needle.is_empty() {
        return Vec::new();
    }
    let mut hits: Vec<&Peer> = peers
        .iter()
        .filter(|p| p.name.to_lowercase().contains(&needle))
        .collect();
    hits.sort_by_key(|p| !p.name.to_lowercase().starts_with(&needle));
    hits.into_iter()
        .take(3)
        .map(|p| {
            if peers.iter().filter(|o| o.name == p.name).count() > 1 {
                format!("{} [{}]", p.name, p.ref_)
            } else {
                p.name.clone()
            }
        })
        .collect()
}
