//! The discovery ("lock") file `<dir>/<PORT>.lock` that tells Qwen Code where
//! the companion listens.
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
