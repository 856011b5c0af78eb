//! Qwen's home directory, private directories and atomic file writes.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result, Status};
use crate::shared::paths::PathStyle;
use crate::sys;

/// The user's home directory as Node's `os.homedir()` finds it: the home
/// variable of this platform (`$HOME`, `%USERPROFILE%` on Windows) when set
/// and non-empty, else what the OS says (the passwd entry of our uid, the
/// profile folder).
pub fn home_dir() -> Option<PathBuf> {
    home_from(
        std::env::var_os(sys::platform::HOME_VAR),
        crate::sys::env::user_home,
    )
}

/// [`home_dir`] from the home variable's value and the OS lookup.
fn home_from(
    var: Option<std::ffi::OsString>,
    os_lookup: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    match var.filter(|v| !v.is_empty()) {
        Some(h) => Some(PathBuf::from(h)),
        None => os_lookup(),
    }
}

/// Resolves a user-given directory as Qwen Code resolves `QWEN_HOME`
/// (`Storage.resolvePath`): `~` and `~/…` (or `~\…`) are joined to the home
/// directory, a relative path is made absolute against the current working
/// directory.
pub fn resolve_user_dir(value: &str) -> Result<PathBuf> {
    let cwd = std::env::current_dir().ok();
    let cwd = cwd.as_deref().and_then(Path::to_str);
    let home = home_dir();
    match resolve_user_dir_in(
        value,
        sys::platform::PATH_STYLE,
        home.as_deref().and_then(Path::to_str),
        cwd,
    ) {
        Ok(Some(p)) => Ok(PathBuf::from(p)),
        Ok(None) => Ok(absolute(Path::new(value))),
        Err(e) => Err(e),
    }
}

/// [`resolve_user_dir`] with the path rules of `style` (Node's `path.posix`
/// or `path.win32`), the home directory and the current directory given.
/// `Ok(None)` when the value is relative and the current directory is not
/// known as UTF-8 (the caller then resolves it natively).
pub(crate) fn resolve_user_dir_in(
    value: &str,
    style: PathStyle,
    home: Option<&str>,
    cwd: Option<&str>,
) -> Result<Option<String>> {
    let sep = style.separator();
    let joined = if value == "~" || value.starts_with("~/") || value.starts_with("~\\") {
        let home = home.ok_or_else(|| {
            Error::new(
                Status::Io,
                format!("{value:?} starts with ~ but the home directory is unknown"),
            )
        })?;
        let rest = if value == "~" { "" } else { &value[2..] };
        rest.split(['/', '\\'])
            .filter(|s| !s.is_empty())
            .fold(home.to_string(), |p, seg| format!("{p}{sep}{seg}"))
    } else {
        value.to_string()
    };
    let absolute = if style.is_absolute(&joined) {
        joined
    } else {
        match cwd {
            Some(cwd) => format!("{cwd}{sep}{joined}"),
            None => return Ok(None),
        }
    };
    style.normalize(&absolute).map(Some).ok_or_else(|| {
        Error::new(
            Status::Io,
            format!("{value:?} does not resolve to an absolute path"),
        )
    })
}

/// `path` made absolute against the current directory and lexically
/// normalised (`.` and `..` folded, as Node's `path.resolve` does). A drive
/// or UNC prefix (Windows) is kept.
pub fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(Component::RootDir);
    }
    out
}

/// Qwen Code's global directory, resolved exactly as the CLI resolves it
/// (`Storage.getGlobalQwenDir`): `$QWEN_HOME` when set and non-empty (see
/// [`resolve_user_dir`]), else `~/.qwen`, else `<tmpdir>/.qwen` when no home
/// directory is known. Every part of the library finds its files from here:
/// `ide/` (lock files), `sessions/` (registry), plugin data.
pub fn qwen_home() -> Result<PathBuf> {
    if let Some(v) = std::env::var("QWEN_HOME").ok().filter(|v| !v.is_empty()) {
        return resolve_user_dir(&v);
    }
    if let Some(v) = std::env::var_os("QWEN_HOME").filter(|v| !v.is_empty()) {
        // Not UTF-8: no `~` expansion is possible, the bytes are a path.
        return Ok(absolute(Path::new(&v)));
    }
    Ok(match home_dir() {
        Some(h) => h.join(".qwen"),
        None => std::env::temp_dir().join(".qwen"),
    })
}

/// Makes sure `dir` exists as a real directory owned by us with mode 0700
/// (its parents are created as needed with the default mode). A symlink, a
/// non-directory or a directory of another user is refused.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(&format!("create {}", parent.display()), e))?;
    }
    match sys::fs::dir_builder(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(&format!("create {}", dir.display()), e)),
    }
    let meta = check_owned_dir(dir)?;
    if sys::fs::mode(dir, &meta) & 0o077 != 0 {
        sys::fs::set_mode(dir, 0o700)
            .map_err(|e| Error::io(&format!("chmod 0700 {}", dir.display()), e))?;
    }
    Ok(())
}

/// `dir` is a real directory (not a symlink) owned by us; returns its metadata.
pub fn check_owned_dir(dir: &Path) -> Result<fs::Metadata> {
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
    let uid = sys::fs::current_owner();
    let owner = sys::fs::owner(dir, &meta);
    if owner != uid {
        return Err(Error::new(
            Status::Io,
            format!(
                "{} is owned by uid {owner}, not by us ({uid})",
                dir.display(),
            ),
        ));
    }
    Ok(meta)
}

/// How [`write_atomic`] writes.
#[derive(Debug, Clone, Copy)]
pub struct AtomicWrite {
    /// Mode of the new file (0600 for anything holding a token).
    pub mode: u32,
    /// fsync the file before the rename and the directory after it. Files
    /// that are stale after a crash anyway (lock files) skip that; atomicity
    /// comes from the rename either way.
    pub durable: bool,
    /// Create the parent as a private (0700) directory first.
    pub private_dir: bool,
}

impl AtomicWrite {
    /// 0600, fsynced, in a private directory.
    pub const PRIVATE_DURABLE: AtomicWrite = AtomicWrite {
        mode: 0o600,
        durable: true,
        private_dir: true,
    };
    /// 0600 in a private directory, not fsynced.
    pub const PRIVATE: AtomicWrite = AtomicWrite {
        mode: 0o600,
        durable: false,
        private_dir: true,
    };
}

/// Writes `bytes` to `path` atomically: a `<name>.<12 hex>.tmp` sibling is
/// created with `O_EXCL | O_NOFOLLOW` and `opts.mode`, written, optionally
/// fsynced, and renamed over the target — which replaces a symlink there
/// rather than writing through it, so a reader never sees a partial file.
/// The temporary name is the one Qwen's own listers sweep after a crash. On
/// any failure the temporary file is removed and the target is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8], opts: AtomicWrite) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| Error::invalid_argument(format!("{} has no directory", path.display())))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::invalid_argument(format!("{} has no file name", path.display())))?;
    if opts.private_dir {
        ensure_private_dir(dir)?;
    }
    let tmp = dir.join(format!("{name}.{}.tmp", super::rand::random_hex(6)?));
    let result = (|| {
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        let mut f = sys::fs::no_follow(sys::fs::create_mode(&mut o, opts.mode))
            .open(&tmp)
            .map_err(|e| Error::io(&format!("create {}", tmp.display()), e))?;
        // The umask may have narrowed the mode: set it exactly.
        sys::fs::set_file_mode(&f, opts.mode)
            .and_then(|_| f.write_all(bytes))
            .and_then(|_| if opts.durable { f.sync_all() } else { Ok(()) })
            .map_err(|e| Error::io(&format!("write {}", tmp.display()), e))?;
        sys::fs::replace(&tmp, path)
            .map_err(|e| Error::io(&format!("rename to {}", path.display()), e))?;
        if opts.durable {
            sys::fs::sync_dir(dir);
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes a file; a missing one is not an error (a symlink is removed
/// itself, never its target).
pub fn remove_file_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&format!("remove {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests;
