//! The discovery files that tell each CLI where the companion listens:
//! Qwen Code's lock file `<dir>/<PORT>.lock` and Gemini CLI's
//! `<dir>/gemini-ide-server-<PID>-<PORT>.json` (what goes in them is
//! [`super::discovery`]'s; this module writes, sweeps and removes them).
//!
//! The directory is `$QWEN_HOME/ide` when `QWEN_HOME` is set, else
//! `~/.qwen/ide` (a config override wins over both), `QWEN_HOME` resolved as
//! the CLI resolves it. It is created with mode 0700; the file is written
//! with mode 0600 through an `O_EXCL | O_NOFOLLOW` temporary file renamed
//! into place (not fsynced: a lock file is stale after a crash anyway), so a
//! reader never sees a partial file and nothing is ever written through a
//! symlink.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result, Status};
use crate::shared::fs::{self, AtomicWrite};
use crate::shared::paths::PathStyle;

/// Resolves the lock directory: the override, else `<qwen_home>/ide` where
/// Qwen Code's home is resolved exactly as the CLI does
/// ([`crate::shared::fs::qwen_home`]).
pub fn lock_dir(override_dir: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = override_dir {
        return Ok(fs::absolute(dir));
    }
    Ok(fs::qwen_home()?.join("ide"))
}

/// Gemini CLI's discovery directory: the override, else
/// `<os.tmpdir()>/gemini/ide` with `os.tmpdir()` resolved as Node resolves
/// it on this platform ([`PathStyle::node_tmpdir`]).
pub fn gemini_dir(override_dir: Option<&Path>) -> PathBuf {
    if let Some(dir) = override_dir {
        return fs::absolute(dir);
    }
    let tmp = crate::sys::platform::PATH_STYLE.node_tmpdir(|name| std::env::var(name).ok());
    PathBuf::from(tmp).join("gemini").join("ide")
}

/// The name Gemini CLI looks for (`^gemini-ide-server-(\d+)-\d+\.json$`).
pub fn gemini_file_name(pid: u32, port: u16) -> String {
    format!("gemini-ide-server-{pid}-{port}.json")
}

/// The pid in a Gemini discovery file's name, if the name is one.
fn gemini_file_pid(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix("gemini-ide-server-")?
        .strip_suffix(".json")?;
    let (pid, port) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(port) {
        return None;
    }
    pid.parse().ok()
}

/// Writes Gemini CLI's discovery file for `pid`/`port` and returns its path.
/// Then removes the files that editors which have exited (gone, or a zombie) left in the same
/// (private) directory: the CLI would otherwise try them before giving up.
pub fn write_gemini(dir: &Path, pid: u32, port: u16, contents: &Value) -> Result<PathBuf> {
    let bytes = serde_json::to_vec_pretty(contents)
        .map_err(|e| Error::new(Status::Internal, format!("serialise discovery file: {e}")))?;
    let path = dir.join(gemini_file_name(pid, port));
    fs::write_atomic(&path, &bytes, AtomicWrite::PRIVATE)?;
    sweep_gemini(dir, crate::sys::process::is_alive);
    Ok(path)
}

/// Removes the Gemini discovery files in `dir` whose editor is gone
/// (`alive(pid)` false). Only regular files owned by us are touched; a
/// failure leaves the file (the next start tries again).
pub fn sweep_gemini(dir: &Path, alive: impl Fn(u32) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = crate::sys::fs::current_owner();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(gemini_file_pid) else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_file()
            && crate::sys::fs::owner(&path, &meta) == me
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Writes the lock file for `port` and returns its path.
pub fn write_lock(dir: &Path, port: u16, contents: &Value) -> Result<PathBuf> {
    let bytes = serde_json::to_vec_pretty(contents)
        .map_err(|e| Error::new(Status::Internal, format!("serialise lock file: {e}")))?;
    let path = dir.join(format!("{port}.lock"));
    fs::write_atomic(&path, &bytes, AtomicWrite::PRIVATE)?;
    Ok(path)
}

/// Removes the lock file (the link itself if someone replaced it by one).
pub fn remove_lock(path: &Path) -> Result<()> {
    fs::remove_file_if_exists(path)
}

/// The value of `workspacePath` (and `QWEN_CODE_IDE_WORKSPACE_PATH`): roots
/// joined with the delimiter of `style` (Node's `path.delimiter`: `:`, or `;`
/// on Windows), or — when a root itself contains the delimiter — the
/// JSON-array form the CLI also accepts.
pub fn workspace_path_value(roots: &[String], style: PathStyle) -> String {
    let delim = style.delimiter();
    if roots.iter().any(|r| r.contains(delim)) {
        serde_json::to_string(roots).unwrap_or_default()
    } else {
        roots.join(&delim.to_string())
    }
}

#[cfg(test)]
mod tests;
