//! Finding the `node` binary when the IDE was not started from a shell.
//!
//! An IDE started from the macOS Dock or Finder (or a desktop launcher)
//! inherits a short `PATH` (launchd's `/usr/bin:/bin:/usr/sbin:/sbin`) that
//! misses the Node a terminal finds. When the `node` setting is a bare name
//! (the default `node`) and it is not on our `PATH`, we look, in order, in
//! the `PATH` of the user's login shell (Unix; see
//! [`crate::sys::env::login_shell_path`]), then in the usual install
//! folders ([`crate::sys::env::node_install_dirs`]: Homebrew, nvm newest
//! first, Volta, asdf, mise, fnm, …; on Windows the Node installer's folder,
//! nvm-windows, Volta, scoop). The absolute path found is what is spawned,
//! and when its folder is not on our `PATH` the plugin's `PATH` starts with
//! it (so the plugin's own `node`, `npm` or `npx` children are found). A
//! setting with a path in it is used as it is.
//!
//! Results are cached per process and setting: a path found is reused while
//! it is still an executable file; a failed search is repeated after
//! [`RETRY_AFTER`] at the earliest (the login shell may take seconds).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest wait for the login shell's answer.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(5);
/// A failed search is not repeated sooner than this.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Most settings cached (one per host configuration in practice).
const CACHE_CAP: usize = 16;

type Cached = (Instant, Result<PathBuf, String>);
static CACHE: Mutex<Option<HashMap<OsString, Cached>>> = Mutex::new(None);

/// Where to look, so tests can give a fake `PATH`, shell and folders.
pub(crate) struct Places<'a> {
    /// Our own `PATH`.
    pub path: Option<OsString>,
    /// The login shell's `PATH`, asked only when needed.
    pub login_path: &'a mut dyn FnMut() -> Result<OsString, String>,
    /// The usual install folders, listed only when needed.
    pub install_dirs: &'a dyn Fn() -> Vec<PathBuf>,
}

/// The program to spawn for the `node` setting `program` (cached).
pub fn resolve(program: &OsStr) -> Result<PathBuf, String> {
    if !is_bare_name(program) {
        return Ok(PathBuf::from(program));
    }
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    match cache.get(program) {
        Some((_, Ok(p))) if crate::sys::env::is_executable_file(p) => return Ok(p.clone()),
        Some((at, Err(e))) if at.elapsed() < RETRY_AFTER => return Err(e.clone()),
        _ => {}
    }
    let home = crate::shared::fs::home_dir();
    let found = search(
        program,
        Places {
            path: std::env::var_os("PATH"),
            login_path: &mut || crate::sys::env::login_shell_path(None, SHELL_TIMEOUT),
            install_dirs: &|| {
                crate::sys::env::node_install_dirs(home.as_deref(), &|k| std::env::var_os(k))
            },
        },
    );
    let found = found.map_err(|e| {
        format!(
            "{e}. Install Node.js or set the plugin host's \"node\" setting to the full path of the \
             node binary"
        )
    });
    if cache.len() >= CACHE_CAP {
        cache.clear();
    }
    cache.insert(program.to_os_string(), (Instant::now(), found.clone()));
    found
}

/// The `PATH` a plugin gets when `node` was found outside `path` (our
/// own): its folder first, so the plugin's own `node`, `npm` or `npx`
/// children are found too. `None` when `path` has it already.
pub fn path_with_node_dir(node: &Path, path: Option<&OsStr>) -> Option<OsString> {
    let dir = node.parent().filter(|d| !d.as_os_str().is_empty())?;
    let mut dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    if dirs.iter().any(|d| d == dir) {
        return None;
    }
    dirs.insert(0, dir.to_path_buf());
    std::env::join_paths(dirs).ok()
}

/// A name without any path separator (looked up in folders).
pub(crate) fn is_bare_name(program: &OsStr) -> bool {
    let p = Path::new(program);
    p.components().count() == 1 && p.file_name() == Some(program)
}

/// `dir/name` (with the OS's executable suffix when `name` has no
/// extension: `node` → `node.exe`, `qwen.cmd` stays) when it is an
/// executable file.
fn in_dir(dir: &Path, name: &OsStr) -> Option<PathBuf> {
    let mut file = name.to_os_string();
    let suffix = std::env::consts::EXE_SUFFIX;
    if !suffix.is_empty() && Path::new(name).extension().is_none() {
        file.push(suffix);
    }
    let candidate = dir.join(file);
    crate::sys::env::is_executable_file(&candidate).then_some(candidate)
}

fn in_path_var(path: &OsStr, name: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .find_map(|d| in_dir(&d, name))
}

/// The search itself (uncached): our `PATH`, the login shell's, then the
/// install folders. The error names everything searched. `qwen` (installed
/// by npm next to `node`) is searched the same way by the health report.
pub(crate) fn search(name: &OsStr, places: Places<'_>) -> Result<PathBuf, String> {
    if let Some(found) = places.path.as_deref().and_then(|p| in_path_var(p, name)) {
        return Ok(found);
    }
    let shell = (places.login_path)();
    if let Ok(Some(found)) = shell.as_deref().map(|p| in_path_var(p, name)) {
        return Ok(found);
    }
    let dirs = (places.install_dirs)();
    if let Some(found) = dirs.iter().find_map(|d| in_dir(d, name)) {
        return Ok(found);
    }
    let shell = match shell {
        Ok(p) => format!("the login shell's PATH ({})", p.to_string_lossy()),
        Err(e) => format!("no login shell PATH ({e})"),
    };
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "{name} was not found: searched PATH ({path}), {shell}, and {dirs}",
        name = name.to_string_lossy(),
        path = places
            .path
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dirs = dirs.join(", "),
    ))
}

#[cfg(test)]
mod tests;
