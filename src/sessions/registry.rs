//! The session registry, `$QWEN_HOME/sessions/`: reading records as Qwen
//! Code reads them (and sweeping the ones it would sweep), choosing and
//! writing our own record file, and resolving a typed address to a session.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::names::{flatten_label, is_js_space, is_valid_kind, js_trim, peer_ref, random_hex};
use super::net::Verdict;
use super::proc::{boot_id, boot_id_of, is_same_process};
use crate::error::{Error, Result, Status};

/// Record schema we write and fully understand.
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// Records larger than this are ignored.
pub(crate) const MAX_RECORD_BYTES: u64 = 64 * 1024;
/// Orphaned temporary files older than this are removed by listers.
const TEMP_MAX_AGE: Duration = Duration::from_secs(5 * 60);

/// A record as read (after Qwen's normalisation).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub schema_version: Number,
    pub pid: u64,
    pub proc_start: Option<String>,
    pub pid_ns: Option<Number>,
    pub session_id: String,
    pub cwd: String,
    pub name: String,
    pub started_at: Number,
    pub qwen_version: Option<String>,
    /// Kept only when it is a valid kind; absent reads as `tui`.
    pub kind: Option<String>,
    pub ipc_path: Option<String>,
    pub ipc_token: Option<String>,
}

impl Record {
    pub fn started_at_f64(&self) -> f64 {
        self.started_at.as_f64().unwrap_or(0.0)
    }
    fn pid_ns_f64(&self) -> Option<f64> {
        self.pid_ns.as_ref().and_then(Number::as_f64)
    }
    /// `kind` for display: absent is `tui`.
    pub fn kind_or_tui(&self) -> &str {
        self.kind.as_deref().unwrap_or("tui")
    }
}

/// The outcome of reading one record file.
#[allow(clippy::large_enum_variant)] // short-lived, matched at once
#[derive(Debug, Clone, PartialEq)]
pub enum ReadOutcome {
    Ok(Record),
    /// No such file.
    Missing,
    /// Not a regular file, too large, not JSON, or a required field is wrong.
    Unreadable,
    /// The file exists but could not be read (permissions, I/O).
    ReadError,
    /// A newer `schemaVersion`: skipped, never deleted or overwritten.
    Newer,
}

/// Parses record JSON the way Qwen's `readRecord` does.
pub fn parse_record(raw: &[u8]) -> ReadOutcome {
    let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(raw) else {
        return ReadOutcome::Unreadable;
    };
    let Some(Value::Number(schema)) = v.get("schemaVersion") else {
        return ReadOutcome::Unreadable;
    };
    if schema.as_f64().is_none_or(|s| s > SCHEMA_VERSION as f64) {
        return ReadOutcome::Newer;
    }
    let pid = match v.get("pid").and_then(Value::as_f64) {
        Some(p) if p > 0.0 && p.fract() == 0.0 && p <= u64::MAX as f64 => p as u64,
        _ => return ReadOutcome::Unreadable,
    };
    let string = |k: &str| match v.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let non_empty = |k: &str| string(k).filter(|s| !s.is_empty());
    let (Some(session_id), Some(cwd), Some(name)) =
        (string("sessionId"), string("cwd"), string("name"))
    else {
        return ReadOutcome::Unreadable;
    };
    let started_at = match v.get("startedAt") {
        Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => n.clone(),
        _ => return ReadOutcome::Unreadable,
    };
    let pid_ns = match v.get("pidNs") {
        Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => Some(n.clone()),
        _ => None,
    };
    ReadOutcome::Ok(Record {
        schema_version: schema.clone(),
        pid,
        proc_start: string("procStart"),
        pid_ns,
        session_id,
        cwd,
        name,
        started_at,
        qwen_version: string("qwenVersion"),
        kind: string("kind").filter(|k| is_valid_kind(k)),
        ipc_path: non_empty("ipcPath"),
        ipc_token: non_empty("ipcToken"),
    })
}

/// Reads a record file (`stat` follows symlinks, as Qwen's does).
pub fn read_record(path: &Path) -> ReadOutcome {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ReadOutcome::Missing,
        Err(_) => return ReadOutcome::ReadError,
    };
    if !meta.is_file() || meta.len() > MAX_RECORD_BYTES {
        return ReadOutcome::Unreadable;
    }
    match fs::read(path) {
        Ok(raw) => parse_record(&raw),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ReadOutcome::Missing,
        Err(_) => ReadOutcome::ReadError,
    }
}

fn split_record_name(name: &str, ext: &str) -> Option<(String, bool)> {
    let stem = name.strip_suffix(ext)?;
    let (digits, suffix) = match stem.split_once('-') {
        Some((d, s)) => (d, Some(s)),
        None => (stem, None),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if let Some(s) = suffix {
        if s.len() != 8
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
    }
    Some((digits.to_string(), suffix.is_some()))
}

/// The PID a record file name is keyed by: `<pid>.json` or
/// `<pid>-<8 lowercase hex>.json`, canonical decimal (no leading zeros), > 0.
pub fn record_file_pid(name: &str) -> Option<u64> {
    let (digits, _) = split_record_name(name, ".json")?;
    let pid: u64 = digits.parse().ok()?;
    (pid > 0 && pid.to_string() == digits).then_some(pid)
}

fn is_record_file_name(name: &str) -> bool {
    split_record_name(name, ".json").is_some()
}

/// `<pid>(-<8hex>)?.json.<12 hex>.tmp`: our (and Qwen's) temporary files.
fn is_temp_file_name(name: &str) -> bool {
    let Some(rest) = name.strip_suffix(".tmp") else {
        return false;
    };
    let Some((record, nonce)) = rest.rsplit_once('.') else {
        return false;
    };
    nonce.len() == 12
        && nonce
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && is_record_file_name(record)
}

/// Who we are, as records describe a process.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub pid: u64,
    pub pid_ns: Option<u64>,
    pub boot_id: Option<String>,
    pub proc_start: Option<String>,
}

impl Identity {
    /// Reads our own identity (retrying each read once, as Qwen does).
    pub fn current() -> Identity {
        let pid = super::proc::own_pid();
        let read_start = || super::proc::proc_start_token(pid);
        Identity {
            pid,
            pid_ns: super::proc::pid_namespace().or_else(super::proc::pid_namespace),
            boot_id: boot_id(),
            proc_start: read_start().or_else(read_start),
        }
    }
}

fn ns_equal(record: Option<f64>, own: Option<u64>) -> bool {
    match (record, own) {
        (None, None) => true,
        (Some(r), Some(o)) => r == o as f64,
        _ => false,
    }
}

/// Qwen's `matchesLocalIdentity`: a record of this PID, in this namespace,
/// on this boot (or with no boot to tell).
pub fn matches_local_identity(r: &Record, own: &Identity) -> bool {
    if r.pid != own.pid || !ns_equal(r.pid_ns_f64(), own.pid_ns) {
        return false;
    }
    let Some(ps) = r.proc_start.as_deref() else {
        return true;
    };
    let rec_boot = boot_id_of(ps);
    match own.boot_id.as_deref() {
        None => rec_boot.is_none(),
        Some(own_boot) => rec_boot.is_none_or(|b| b == own_boot),
    }
}

/// A record left by an earlier process that had our PID: same namespace,
/// same boot, different start ticks. Only such a record may be replaced.
pub fn is_provably_stale_own(r: &Record, own: &Identity) -> bool {
    let (Some(rec), Some(cur)) = (r.proc_start.as_deref(), own.proc_start.as_deref()) else {
        return false;
    };
    r.pid == own.pid
        && own.pid_ns.is_some()
        && ns_equal(r.pid_ns_f64(), own.pid_ns)
        && boot_id_of(rec).is_some()
        && boot_id_of(rec) == boot_id_of(cur)
        && rec != cur
}

/// A live record and the file it came from.
#[derive(Debug, Clone)]
pub struct LiveRecord {
    pub path: PathBuf,
    pub record: Record,
}

/// Lists the live records in `dir`, newest first, applying every liveness
/// rule and sweeping exactly what Qwen's `listLiveSessions` sweeps:
///
/// - a name that is not a record name is ignored, except an orphaned
///   temporary file older than 5 minutes, which is removed;
/// - unreadable, newer-schema and mis-keyed (file-name PID ≠ `pid`) records
///   are skipped, never removed;
/// - a record from another PID namespace, or whose boot id differs from
///   ours, is skipped, never removed;
/// - a record whose process is gone, or whose PID now has other start
///   ticks, is re-read and, if unchanged, removed.
pub fn list_live(dir: &Path) -> Vec<LiveRecord> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let own_ns = super::proc::pid_namespace();
    let own_boot = boot_id();
    let mut live = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = dir.join(name);
        if !is_record_file_name(name) {
            if is_temp_file_name(name) {
                sweep_temp(&path);
            }
            continue;
        }
        let ReadOutcome::Ok(record) = read_record(&path) else {
            continue;
        };
        if record_file_pid(name) != Some(record.pid) {
            continue;
        }
        if !ns_equal(record.pid_ns_f64(), own_ns) {
            continue;
        }
        if let Some(rec_boot) = record.proc_start.as_deref().and_then(boot_id_of) {
            if Some(rec_boot) != own_boot.as_deref() {
                continue;
            }
        }
        if is_same_process(record.pid, record.proc_start.as_deref()) {
            live.push(LiveRecord { path, record });
            continue;
        }
        if let ReadOutcome::Ok(again) = read_record(&path) {
            if again.pid == record.pid
                && again.pid_ns == record.pid_ns
                && again.proc_start == record.proc_start
                && again.started_at == record.started_at
            {
                let _ = fs::remove_file(&path);
            }
        }
    }
    // Qwen lists `readdir` order (libuv sorts names bytewise), then a stable
    // sort newest first: equal start times keep file-name order.
    live.sort_by(|a, b| a.path.file_name().cmp(&b.path.file_name()));
    live.sort_by(|a, b| {
        b.record
            .started_at_f64()
            .partial_cmp(&a.record.started_at_f64())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    live
}

fn sweep_temp(path: &Path) {
    let Ok(meta) = fs::metadata(path) else { return };
    if !meta.is_file() {
        return;
    }
    let old = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|age| age >= TEMP_MAX_AGE);
    if old {
        let _ = fs::remove_file(path);
    }
}

/// The record we write, in Qwen's field order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordOut {
    pub schema_version: u32,
    pub pid: u64,
    pub proc_start: Option<String>,
    pub pid_ns: Option<u64>,
    pub session_id: String,
    pub cwd: String,
    pub name: String,
    pub started_at: u64,
    pub qwen_version: Option<String>,
    pub kind: String,
    pub ipc_path: String,
    pub ipc_token: String,
}

/// Picks the file for a new record. With `bare`, `<pid>.json` when it is
/// free or holds a provably stale record of our PID; otherwise (and always
/// without `bare`) a fresh `<pid>-<8 hex>.json` that does not exist yet.
pub fn choose_record_path(dir: &Path, own: &Identity, bare: bool) -> Result<PathBuf> {
    if bare {
        let path = dir.join(format!("{}.json", own.pid));
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path),
            Ok(meta) if meta.is_file() => {
                if let ReadOutcome::Ok(r) = read_record(&path) {
                    if is_provably_stale_own(&r, own) {
                        return Ok(path);
                    }
                }
            }
            _ => {}
        }
    }
    for _ in 0..3 {
        let path = dir.join(format!("{}-{}.json", own.pid, random_hex(4)));
        if let Err(e) = fs::symlink_metadata(&path) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(path);
            }
        }
    }
    Err(Error::new(
        Status::Io,
        format!(
            "no free record name for PID {} in {}",
            own.pid,
            dir.display()
        ),
    ))
}

/// Writes `bytes` to `path` atomically (0600, fsynced, in a 0700 directory,
/// never through a symlink; the `<name>.<12 hex>.tmp` temporary is the one
/// Qwen's listers sweep when a crash leaves it behind).
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::shared::fs::write_atomic(path, bytes, crate::shared::fs::AtomicWrite::PRIVATE_DURABLE)
}

/// Serialises and writes a record (pretty-printed, as Qwen writes them).
pub fn write_record(path: &Path, record: &RecordOut) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::new(Status::Internal, format!("serialise record: {e}")))?;
    write_file_atomic(path, &bytes)
}

/// Removes `path` only if it still holds a record with our PID and `session_id`.
pub fn remove_if_ours(path: &Path, pid: u64, session_id: &str) -> bool {
    match read_record(path) {
        ReadOutcome::Ok(r) if r.pid == pid && r.session_id == session_id => {
            fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Messageable peers and addresses.

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

/// What `qwen sessions ps --json` prints for a record (no `ipcToken`), plus
/// our `ref`, whether its inbox answered a dial, and the record's file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordInfo {
    pub schema_version: Number,
    pub pid: u64,
    pub proc_start: Option<String>,
    pub pid_ns: Option<Number>,
    pub session_id: String,
    pub cwd: String,
    pub name: String,
    pub started_at: Number,
    pub qwen_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipc_path: Option<String>,
    #[serde(rename = "ref")]
    pub ref_: String,
    /// The inbox answered a short dial (`false` when there is no `ipcPath`).
    pub reachable: bool,
    pub record_path: String,
}

impl RecordInfo {
    pub fn from_live(r: &LiveRecord, reachable: bool) -> RecordInfo {
        let x = &r.record;
        RecordInfo {
            schema_version: x.schema_version.clone(),
            pid: x.pid,
            proc_start: x.proc_start.clone(),
            pid_ns: x.pid_ns.clone(),
            session_id: x.session_id.clone(),
            cwd: x.cwd.clone(),
            name: x.name.clone(),
            started_at: x.started_at.clone(),
            qwen_version: x.qwen_version.clone(),
            kind: x.kind.clone(),
            ipc_path: x.ipc_path.clone(),
            ref_: peer_ref(&x.session_id),
            reachable,
            record_path: r.path.to_string_lossy().into_owned(),
        }
    }
}

/// A JSON object for a record (tests build records with it).
pub fn record_json(fields: &[(&str, Value)]) -> Vec<u8> {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert((*k).to_string(), v.clone());
    }
    serde_json::to_vec(&Value::Object(m)).expect("serialising a JSON object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::proc::{own_pid, pid_namespace, proc_start_token};
    use crate::sessions::testutil::TempDir;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn me() -> Identity {
        Identity::current()
    }

    fn good(pid: u64, extra: &[(&str, Value)]) -> Value {
        let own = me();
        let mut v = json!({
            "schemaVersion": 1, "pid": pid, "procStart": own.proc_start, "pidNs": own.pid_ns,
            "sessionId": "s1", "cwd": "/w", "name": "w-ab", "startedAt": 1000,
            "qwenVersion": null, "kind": "external", "ipcPath": "/x.sock", "ipcToken": "t"
        });
        for (k, x) in extra {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(*k);
            } else {
                v[*k] = x.clone();
            }
        }
        v
    }

    #[test]
    fn parse_table() {
        let ok = |v: Value| matches!(parse_record(v.to_string().as_bytes()), ReadOutcome::Ok(_));
        assert!(ok(good(5, &[])));
        assert!(ok(good(5, &[("schemaVersion", json!(0.5))])));
        assert_eq!(
            parse_record(
                good(5, &[("schemaVersion", json!(2))])
                    .to_string()
                    .as_bytes()
            ),
            ReadOutcome::Newer
        );
        for (k, v) in [
            ("schemaVersion", json!("1")),
            ("schemaVersion", Value::Null),
            ("pid", json!(0)),
            ("pid", json!(-3)),
            ("pid", json!(1.5)),
            ("pid", json!("5")),
            ("sessionId", json!(5)),
            ("cwd", Value::Null),
            ("name", json!(null)),
            ("startedAt", json!("x")),
        ] {
            assert!(!ok(good(5, &[(k, v.clone())])), "{k}={v}");
        }
        assert_eq!(parse_record(b"[1]"), ReadOutcome::Unreadable);
        assert_eq!(parse_record(b"nope"), ReadOutcome::Unreadable);
        // Normalisation.
        let ReadOutcome::Ok(r) = parse_record(
            good(
                5,
                &[
                    ("procStart", json!(7)),
                    ("pidNs", json!("x")),
                    ("qwenVersion", json!(1)),
                    ("kind", json!("Bad")),
                    ("ipcPath", json!("")),
                    ("ipcToken", json!(3)),
                ],
            )
            .to_string()
            .as_bytes(),
        ) else {
            panic!()
        };
        assert_eq!(
            (
                r.proc_start,
                r.pid_ns,
                r.qwen_version,
                r.kind,
                r.ipc_path,
                r.ipc_token
            ),
            (None, None, None, None, None, None)
        );
        let ReadOutcome::Ok(r) =
            parse_record(good(5, &[("kind", json!("1x"))]).to_string().as_bytes())
        else {
            panic!()
        };
        assert_eq!(r.kind_or_tui(), "tui", "a kind must start with a letter");
    }

    #[test]
    fn file_names() {
        let cases: &[(&str, Option<u64>)] = &[
            ("123.json", Some(123)),
            ("123-0a1b2c3d.json", Some(123)),
            ("0123.json", None),
            ("0.json", None),
            ("123-0A1B2C3D.json", None),
            ("123-0a1b2c3.json", None),
            ("123-0a1b2c3d4.json", None),
            ("x123.json", None),
            ("123.json.tmp", None),
            ("123.lock", None),
        ];
        for (n, want) in cases {
            assert_eq!(record_file_pid(n), *want, "{n}");
        }
        assert!(is_temp_file_name("123.json.0123456789ab.tmp"));
        assert!(is_temp_file_name("123-0a1b2c3d.json.0123456789ab.tmp"));
        assert!(!is_temp_file_name(".123.json.0123456789ab.tmp"));
        assert!(!is_temp_file_name("123.json.0123456789a.tmp"));
    }

    #[test]
    fn liveness_and_sweep_table() {
        let dir = TempDir::new("reg");
        let d = dir.path();
        let own = me();
        let pid = own_pid();
        let ps = own.proc_start.clone().unwrap();
        let boot = boot_id().unwrap();
        // A dead PID: a child we start and reap.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as u64;
        child.wait().unwrap();
        let dead_ps = format!("{boot}:1");
        let put = |name: &str, v: Value| std::fs::write(d.join(name), v.to_string()).unwrap();
        // (file, content, listed?, still there?)
        put(
            &format!("{pid}.json"),
            good(pid, &[("startedAt", json!(5))]),
        );
        put(
            &format!("{pid}-0000000a.json"),
            good(pid, &[("startedAt", json!(9))]),
        );
        put(&format!("{pid}-0000000b.json"), good(pid + 1, &[]));
        put(
            &format!("{dead}.json"),
            good(dead, &[("procStart", json!(dead_ps))]),
        );
        put(
            &format!("{pid}-0000000c.json"),
            good(pid, &[("procStart", json!(format!("{boot}:1")))]),
        );
        put(
            &format!("{pid}-0000000d.json"),
            good(pid, &[("procStart", json!("nocolon"))]),
        );
        put(
            &format!("{pid}-0000000e.json"),
            good(pid, &[("procStart", json!("other-boot:1"))]),
        );
        put(
            &format!("{pid}-0000000f.json"),
            good(pid, &[("pidNs", json!(1))]),
        );
        put(
            &format!("{pid}-00000010.json"),
            good(pid, &[("pidNs", Value::Null)]),
        );
        put(
            &format!("{pid}-00000011.json"),
            good(pid, &[("schemaVersion", json!(2))]),
        );
        put(
            &format!("{dead}-00000012.json"),
            good(dead, &[("schemaVersion", json!(2))]),
        );
        put(&format!("0{pid}.json"), good(pid, &[]));
        put(
            &format!("{pid}-00000013.json"),
            good(pid, &[("procStart", Value::Null)]),
        );
        std::fs::write(d.join("junk.txt"), b"x").unwrap();
        std::fs::write(d.join(format!("{pid}-00000014.json")), b"not json").unwrap();
        std::fs::create_dir(d.join(format!("{pid}-00000015.json"))).unwrap();
        let big = good(pid, &[("pad", json!("p".repeat(70_000)))]);
        put(&format!("{pid}-00000016.json"), big);
        // A symlinked record is still read (stat follows).
        put("target.txt", good(pid, &[("startedAt", json!(7))]));
        std::os::unix::fs::symlink(d.join("target.txt"), d.join(format!("{pid}-00000017.json")))
            .unwrap();
        // Temp files: an old one is swept, a fresh one is not.
        let old_tmp = d.join(format!("{pid}.json.0123456789ab.tmp"));
        std::fs::write(&old_tmp, b"x").unwrap();
        let past = std::time::SystemTime::now() - Duration::from_secs(600);
        std::fs::File::options()
            .write(true)
            .open(&old_tmp)
            .unwrap()
            .set_modified(past)
            .unwrap();
        let new_tmp = d.join(format!("{pid}.json.ba9876543210.tmp"));
        std::fs::write(&new_tmp, b"x").unwrap();
        let odd_tmp = d.join(format!(".{pid}.json.0123456789ab.tmp"));
        std::fs::write(&odd_tmp, b"x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&odd_tmp)
            .unwrap()
            .set_modified(past)
            .unwrap();

        let live = list_live(d);
        let names: Vec<String> = live
            .iter()
            .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec![
                format!("{pid}-00000013.json"),
                format!("{pid}-0000000a.json"),
                format!("{pid}-00000017.json"),
                format!("{pid}.json"),
            ],
            "live records, newest first"
        );
        // Newest first.
        let started: Vec<f64> = live.iter().map(|l| l.record.started_at_f64()).collect();
        assert!(started.windows(2).all(|w| w[0] >= w[1]));
        let exists = |n: &str| d.join(n).exists() || d.join(n).symlink_metadata().is_ok();
        // Swept: dead PID, live PID with other ticks, malformed procStart.
        assert!(!exists(&format!("{dead}.json")));
        assert!(!exists(&format!("{pid}-0000000c.json")));
        assert!(!exists(&format!("{pid}-0000000d.json")));
        // Skipped but kept.
        for keep in [
            format!("{pid}-0000000b.json"),
            format!("{pid}-0000000e.json"),
            format!("{pid}-0000000f.json"),
            format!("{pid}-00000010.json"),
            format!("{pid}-00000011.json"),
            format!("{dead}-00000012.json"),
            format!("0{pid}.json"),
            format!("{pid}-00000014.json"),
            format!("{pid}-00000015.json"),
            format!("{pid}-00000016.json"),
            "junk.txt".to_string(),
        ] {
            assert!(exists(&keep), "{keep} kept");
        }
        assert!(!old_tmp.exists(), "old temp file swept");
        assert!(new_tmp.exists());
        assert!(odd_tmp.exists(), "other temp names are never swept");
        let _ = (proc_start_token(pid), pid_namespace(), ps);
    }

    #[test]
    fn choose_names() {
        let dir = TempDir::new("choose");
        let d = dir.path();
        let own = me();
        let pid = own.pid;
        let bare = d.join(format!("{pid}.json"));
        assert_eq!(choose_record_path(d, &own, true).unwrap(), bare);
        let is_suffixed = |p: &Path| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with(&format!("{pid}-")) && record_file_pid(n) == Some(pid)
        };
        assert!(is_suffixed(&choose_record_path(d, &own, false).unwrap()));
        let boot = own.boot_id.clone().unwrap();
        // (content at <pid>.json, may it be replaced?)
        let cases: Vec<(Value, bool)> = vec![
            (
                good(pid, &[("procStart", json!(format!("{boot}:1")))]),
                true,
            ),
            (good(pid, &[]), false),
            (
                good(pid + 1, &[("procStart", json!(format!("{boot}:1")))]),
                false,
            ),
            (good(pid, &[("procStart", json!("otherboot:1"))]), false),
            (good(pid, &[("procStart", Value::Null)]), false),
            (
                good(
                    pid,
                    &[
                        ("pidNs", json!(1)),
                        ("procStart", json!(format!("{boot}:1"))),
                    ],
                ),
                false,
            ),
            (
                good(
                    pid,
                    &[
                        ("schemaVersion", json!(2)),
                        ("procStart", json!(format!("{boot}:1"))),
                    ],
                ),
                false,
            ),
        ];
        for (content, replace) in cases {
            std::fs::write(&bare, content.to_string()).unwrap();
            let got = choose_record_path(d, &own, true).unwrap();
            assert_eq!(got == bare, replace, "{content}");
            if !replace {
                assert!(is_suffixed(&got));
            }
        }
        std::fs::write(&bare, b"garbage").unwrap();
        assert!(
            is_suffixed(&choose_record_path(d, &own, true).unwrap()),
            "unparseable: not provably ours"
        );
        std::fs::remove_file(&bare).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), &bare).unwrap();
        assert!(
            is_suffixed(&choose_record_path(d, &own, true).unwrap()),
            "a symlink is never replaced"
        );
    }

    #[test]
    fn atomic_write_modes_and_symlinks() {
        let dir = TempDir::new("write");
        let sessions = dir.path().join("sessions");
        let target = sessions.join("1.json");
        write_file_atomic(&target, b"{}").unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&sessions).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
        // Replacing a symlink replaces the link, never its target.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = sessions.join("2.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_file_atomic(&link, b"{\"a\":1}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // A symlinked registry directory is refused.
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let linked = dir.path().join("linked");
        std::os::unix::fs::symlink(&real, &linked).unwrap();
        assert!(write_file_atomic(&linked.join("1.json"), b"{}").is_err());
        assert!(std::fs::read_dir(&real).unwrap().next().is_none());
        // Loose permissions on the directory are tightened.
        std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_file_atomic(&target, b"{}").unwrap();
        assert_eq!(std::fs::metadata(&sessions).unwrap().mode() & 0o777, 0o700);
        // No temp file is left behind.
        let leftovers: Vec<_> = std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn remove_only_ours() {
        let dir = TempDir::new("rm");
        let p = dir.path().join("5.json");
        std::fs::write(&p, good(5, &[("sessionId", json!("a"))]).to_string()).unwrap();
        assert!(!remove_if_ours(&p, 5, "b"));
        assert!(!remove_if_ours(&p, 6, "a"));
        assert!(p.exists());
        assert!(remove_if_ours(&p, 5, "a"));
        assert!(!p.exists());
    }

    fn peer(name: &str, sid: &str, started: u64) -> Peer {
        Peer {
            session_id: sid.into(),
            name: name.into(),
            ref_: peer_ref(sid),
            address: String::new(),
            cwd: "/w".into(),
            pid: 1,
            kind: "tui".into(),
            started_at: started.into(),
            ipc_path: format!("/{sid}.sock"),
            ipc_token: None,
        }
    }

    #[test]
    fn resolve_table() {
        let peers = vec![
            peer("alpha", "s1", 3),
            peer("alpha", "s2", 2),
            peer("beta", "s3", 1),
            peer("x [abcd]", "s4", 0),
        ];
        let r1 = peer_ref("s1");
        let r3 = peer_ref("s3");
        let cases: Vec<(String, Resolution)> = vec![
            ("beta".into(), Resolution::One(2)),
            ("  beta ".into(), Resolution::One(2)),
            ("Beta".into(), Resolution::None),
            ("alpha".into(), Resolution::Ambiguous(vec![0, 1])),
            (format!("alpha [{r1}]"), Resolution::One(0)),
            (format!("alpha[{}]", r1.to_uppercase()), Resolution::One(0)),
            (format!("beta [{r1}]"), Resolution::None),
            (format!("[{r3}]"), Resolution::One(2)),
            (r3.clone(), Resolution::One(2)),
            (r3.to_uppercase(), Resolution::One(2)),
            (format!("[{}]", &r3[..4]), Resolution::None),
            ("x [abcd]".into(), Resolution::One(3)),
            ("".into(), Resolution::None),
            ("nobody".into(), Resolution::None),
        ];
        for (t, want) in cases {
            assert_eq!(resolve_target(&peers, &t), want, "{t:?}");
        }
        assert_eq!(advertisable_address(&peers, 2).as_deref(), Some("beta"));
        assert_eq!(
            advertisable_address(&peers, 0),
            Some(format!("alpha [{r1}]"))
        );
        let with = with_addresses(peers.clone());
        assert_eq!(with.len(), 4);
        assert_eq!(
            suggestions(&peers, "alp"),
            vec![
                format!("alpha [{r1}]"),
                format!("alpha [{}]", peer_ref("s2"))
            ]
        );
        assert_eq!(suggestions(&peers, "ET [12]"), vec!["beta".to_string()]);
        assert!(suggestions(&peers, "  ").is_empty());
    }

    #[test]
    fn messageable_collapses_twins() {
        let dir = TempDir::new("msg");
        let mk = |sid: &str, name: &str, started: u64, ipc: Option<&str>| LiveRecord {
            path: dir.path().join(format!("{sid}.json")),
            record: match parse_record(
                good(
                    1,
                    &[
                        ("sessionId", json!(sid)),
                        ("name", json!(name)),
                        ("startedAt", json!(started)),
                        ("ipcPath", ipc.map(|s| json!(s)).unwrap_or(Value::Null)),
                    ],
                )
                .to_string()
                .as_bytes(),
            ) {
                ReadOutcome::Ok(r) => r,
                _ => panic!(),
            },
        };
        let records = vec![
            mk("a", "n", 9, Some("/a.sock")),
            mk("a", "n", 5, Some("/a2.sock")),
            mk("b", " \u{200b} ", 4, Some("/b.sock")),
            mk("c", "c", 3, None),
            mk("d", "d", 2, Some("/dead.sock")),
            mk("e", "e", 1, Some("/unknown.sock")),
        ];
        let probe = |p: &str| match p {
            "/dead.sock" => Verdict::Dead,
            "/unknown.sock" => Verdict::Unknown,
            _ => Verdict::Alive,
        };
        let got = messageable(&records, probe, true);
        assert_eq!(
            got.iter().map(|p| p.ipc_path.as_str()).collect::<Vec<_>>(),
            vec!["/a.sock"]
        );
        let got = messageable(&records, probe, false);
        assert_eq!(
            got.iter().map(|p| p.ipc_path.as_str()).collect::<Vec<_>>(),
            vec!["/a.sock", "/a2.sock"]
        );
    }
}
