//! The discovery ("lock") file `<dir>/<PORT>.lock` that tells Qwen Code where
//! the companion listens.
//!
//! The directory is `$QWEN_HOME/ide` when `QWEN_HOME` is set, else
//! `~/.qwen/ide` (a config override wins over both). It is created with mode
//! 0700; the file is written with mode 0600 through an `O_EXCL | O_NOFOLLOW`
//! temporary file, fsynced and renamed into place, so a reader never sees a
//! partial file and nothing is ever written through a symlink.

use std::ffi::OsString;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result, Status};

/// Resolves the lock directory: override, then `$QWEN_HOME/ide`, then `~/.qwen/ide`.
pub fn lock_dir(override_dir: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = override_dir {
        return Ok(dir.to_path_buf());
    }
    if let Some(qh) = std::env::var_os("QWEN_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(qh).join("ide"));
    }
    let home = home_dir().ok_or_else(|| {
        Error::new(
            Status::Io,
            "cannot find the home directory (HOME is unset and no passwd entry)",
        )
    })?;
    Ok(home.join(".qwen").join("ide"))
}

fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(h));
    }
    // SAFETY: getpwuid_r with a stack buffer; the result points into `buf`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16384];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pwd.pw_dir);
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(OsString::from_vec(dir.to_bytes().to_vec())))
    }
}

/// Makes sure `dir` exists as a real directory owned by us with mode 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(&format!("create {}", parent.display()), e))?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(&format!("create {}", dir.display()), e)),
    }
    let meta =
        fs::symlink_metadata(dir).map_err(|e| Error::io(&format!("stat {}", dir.display()), e))?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(Error::new(
            Status::Io,
            format!(
                "{} is not a directory (symlinks are refused)",
                dir.display()
            ),
        ));
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid {
        return Err(Error::new(
            Status::Io,
            format!(
                "{} is owned by uid {}, not by us ({uid})",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(&format!("chmod 0700 {}", dir.display()), e))?;
    }
    Ok(())
}

/// Writes `contents` atomically to `dir/name` with mode 0600.
/// With `durable`, the file and the directory are fsynced (a lock file that
/// is stale after a crash anyway skips that; atomicity comes from the rename).
pub fn write_atomic(dir: &Path, name: &str, contents: &[u8], durable: bool) -> Result<PathBuf> {
    ensure_private_dir(dir)?;
    let target = dir.join(name);
    let mut rnd = [0u8; 8];
    getrandom::fill(&mut rnd).map_err(|e| Error::new(Status::Io, format!("OS RNG: {e}")))?;
    let tmp = dir.join(format!(".{name}.{}.tmp", hex(&rnd)));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| Error::io(&format!("create {}", tmp.display()), e))?;
        f.write_all(contents)
            .and_then(|_| if durable { f.sync_all() } else { Ok(()) })
            .map_err(|e| Error::io(&format!("write {}", tmp.display()), e))?;
        fs::rename(&tmp, &target)
            .map_err(|e| Error::io(&format!("rename to {}", target.display()), e))?;
        if durable {
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(target.clone())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes the lock file for `port` and returns its path.
pub fn write_lock(dir: &Path, port: u16, contents: &Value) -> Result<PathBuf> {
    let bytes = serde_json::to_vec_pretty(contents)
        .map_err(|e| Error::new(Status::Internal, format!("serialise lock file: {e}")))?;
    write_atomic(dir, &format!("{port}.lock"), &bytes, false)
}

/// Removes the lock file (the link itself if someone replaced it by one).
pub fn remove_lock(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&format!("remove {}", path.display()), e)),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// The value of `workspacePath` (and `QWEN_CODE_IDE_WORKSPACE_PATH`): roots
/// joined with the OS delimiter, or — when a root itself contains the
/// delimiter — the JSON-array form the CLI also accepts.
pub fn workspace_path_value(roots: &[String]) -> String {
    let delim = if cfg!(windows) { ';' } else { ':' };
    if roots.iter().any(|r| r.contains(delim)) {
        serde_json::to_string(roots).unwrap_or_default()
    } else {
        roots.join(&delim.to_string())
    }
}
