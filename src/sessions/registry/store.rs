//! The record store: reading records as Qwen Code reads them (and sweeping
//! the ones it would sweep), the identity that proves a record ours,
//! choosing and writing our own record file, and what a listing shows.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::super::names::{is_valid_kind, peer_ref};
use super::super::proc::{boot_id, boot_id_of, is_same_process};
use crate::error::{Error, Result, Status};
use crate::shared::rand::random_hex;

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
pub(super) fn is_temp_file_name(name: &str) -> bool {
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
        let pid = super::super::proc::own_pid();
        let read_start = || super::super::proc::proc_start_token(pid);
        Identity {
            pid,
            pid_ns: super::super::proc::pid_namespace().or_else(super::super::proc::pid_namespace),
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
    let own_ns = super::super::proc::pid_namespace();
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
        let path = dir.join(format!("{}-{}.json", own.pid, random_hex(4)?));
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
