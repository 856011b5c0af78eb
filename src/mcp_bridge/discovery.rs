//! How the `qc-mcp-bridge` executable finds the running plugin MCP server:
//! the lock files `<qwen_home>/companion/plugins-mcp/<pid>.lock` written by
//! [`super::server::PluginMcpServer`].
//!
//! A lock file counts only when it parses, names a port and a token, and
//! its `pid` is alive (a stale file of a crashed IDE is skipped). Among
//! those, the server of the IDE named by [`PREFERRED_PID_ENV`] comes first
//! (a terminal the IDE started carries it, so two IDEs open on the same
//! folder each reach their own plugins), then the servers whose
//! `workspacePaths` contain the bridge's working directory, then the newest
//! file (modification time); when none contains it, the newest live server
//! is used. A variable naming an IDE that is gone changes nothing: the
//! bridge falls back to the working directory as in any other terminal.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::shared::paths::PathStyle;
use crate::sys::platform::PATH_STYLE;

/// The variable a terminal started by the IDE carries (the `env` of
/// `qc_plugin_host_mcp_info`): the pid of the IDE whose plugin MCP server
/// the bridge should use first. Qwen Code passes its environment to the
/// stdio servers it starts (minus a few of its own secrets), so the bridge
/// sees it.
pub const PREFERRED_PID_ENV: &str = "QWEN_COMPANION_PLUGINS_PID";

/// The pid [`PREFERRED_PID_ENV`] holds (`None` when unset, empty, or not a
/// positive number: a malformed value is ignored, never an error).
pub fn preferred_pid_from_env() -> Option<i32> {
    parse_pid(std::env::var(PREFERRED_PID_ENV).ok()?.as_str())
}

fn parse_pid(v: &str) -> Option<i32> {
    v.trim().parse::<i32>().ok().filter(|&p| p > 0)
}

/// A live plugin MCP server, as its lock file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub path: PathBuf,
    pub port: u16,
    pub token: String,
    pub pid: i32,
    pub workspace_paths: Vec<String>,
}

/// True when a process `pid` exists (ours or another user's).
pub fn pid_alive(pid: i32) -> bool {
    pid > 0 && crate::sys::process::exists(pid as u32)
}

fn parse(path: &Path, bytes: &[u8]) -> Option<LockInfo> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let port = u16::try_from(v.get("port")?.as_u64()?).ok()?;
    let token = v.get("authToken")?.as_str()?.to_string();
    let pid = i32::try_from(v.get("pid")?.as_i64()?).ok()?;
    if port == 0 || token.is_empty() {
        return None;
    }
    let workspace_paths = v
        .get("workspacePaths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Some(LockInfo {
        path: path.to_path_buf(),
        port,
        token,
        pid,
        workspace_paths,
    })
}

/// True when `dir` is `root` or inside it, segment by segment with the path
/// rules of `style` (on Windows case-insensitive, `\` and `/` alike), also
/// after resolving symlinks of both.
pub fn contains(root: &str, dir: &Path, style: PathStyle) -> bool {
    if !style.is_absolute(root) {
        return false;
    }
    if style.contains(root, &dir.to_string_lossy()) {
        return true;
    }
    match (
        crate::sys::fs::canonicalize(Path::new(root)),
        crate::sys::fs::canonicalize(dir),
    ) {
        (Ok(r), Ok(d)) => style.contains(&r.to_string_lossy(), &d.to_string_lossy()),
        _ => false,
    }
}

/// Every live server's lock in `dir`, best first for a bridge running in
/// `cwd`. A missing directory is no server.
pub fn candidates(dir: &Path, cwd: &Path) -> Vec<LockInfo> {
    candidates_preferring(dir, cwd, None)
}

/// [`candidates`], with the live server of the process `preferred` (see
/// [`PREFERRED_PID_ENV`]) first whatever its workspace.
pub fn candidates_preferring(dir: &Path, cwd: &Path, preferred: Option<i32>) -> Vec<LockInfo> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(bool, bool, SystemTime, LockInfo)> = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("lock") {
            continue;
        }
        // Regular files only (never follow a planted link).
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 64 * 1024 {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Some(info) = parse(&path, &bytes) else {
            continue;
        };
        if !pid_alive(info.pid) {
            continue;
        }
        let inside = info
            .workspace_paths
            .iter()
            .any(|r| contains(r, cwd, PATH_STYLE));
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let wanted = preferred == Some(info.pid);
        found.push((wanted, inside, mtime, info));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    found.into_iter().map(|(_, _, _, i)| i).collect()
}

#[cfg(test)]
mod tests;
