//! The user's directories.

use std::ffi::OsString;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use std::time::Duration;

use windows_sys::Win32::Security::TOKEN_QUERY;
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};
use windows_sys::Win32::UI::Shell::GetUserProfileDirectoryW;

/// The profile directory of the user this process runs as, as Node's
/// `os.homedir()` gives it: `%USERPROFILE%`, else the profile directory of
/// the process token (`GetUserProfileDirectoryW`).
pub fn user_home() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("USERPROFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let mut token = std::ptr::null_mut();
    // SAFETY: opens our own process token for reading into a local.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return None;
    }
    let token = super::util::owned(token).ok()?;
    let mut len: u32 = 0;
    // SAFETY: a size query (null buffer), then a fill of a buffer of that size.
    unsafe { GetUserProfileDirectoryW(token.as_raw_handle(), std::ptr::null_mut(), &mut len) };
    if len == 0 || len > 32 * 1024 {
        return None;
    }
    let mut buf = vec![0u16; len as usize];
    // SAFETY: `buf` holds `len` UTF-16 units, as the call was told.
    let ok = unsafe { GetUserProfileDirectoryW(token.as_raw_handle(), buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return None;
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    (end > 0).then(|| PathBuf::from(OsString::from_wide(&buf[..end])))
}

/// The UTF-8 of `path` with every `\` turned into `/` (for a
/// `file:///C:/…` URI). Unpaired UTF-16 surrogates become U+FFFD.
pub fn path_bytes(path: &std::path::Path) -> std::borrow::Cow<'_, [u8]> {
    let s = path.to_string_lossy().replace('\\', "/");
    std::borrow::Cow::Owned(s.into_bytes())
}

/// Where Node is commonly installed on Windows when it is not on `Path`, in
/// the order searched: the official installer (`%ProgramFiles%\nodejs`,
/// then `%ProgramFiles(x86)%\nodejs`), nvm-windows' active version
/// (`%NVM_SYMLINK%`), Volta (`%VOLTA_HOME%\bin` or
/// `%LOCALAPPDATA%\Volta\bin`), scoop (`%SCOOP%\shims` or
/// `~\scoop\shims`, then `apps\nodejs\current`), fnm's default alias
/// (`%FNM_DIR%` or `%APPDATA%\fnm`, `aliases\default`), Chocolatey
/// (`%ChocolateyInstall%\bin`). `var` reads an environment variable (empty
/// = unset); `home` is the user's profile folder.
pub fn node_install_dirs(
    home: Option<&Path>,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<PathBuf> {
    let var = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut dirs = Vec::new();
    for pf in ["ProgramFiles", "ProgramFiles(x86)"] {
        if let Some(p) = var(pf) {
            dirs.push(p.join("nodejs"));
        }
    }
    dirs.extend(var("NVM_SYMLINK"));
    if let Some(v) = var("VOLTA_HOME").or_else(|| var("LOCALAPPDATA").map(|l| l.join("Volta"))) {
        dirs.push(v.join("bin"));
    }
    if let Some(scoop) = var("SCOOP").or_else(|| home.map(|h| h.join("scoop"))) {
        dirs.push(scoop.join("shims"));
        dirs.push(scoop.join("apps").join("nodejs").join("current"));
    }
    if let Some(fnm) = var("FNM_DIR").or_else(|| var("APPDATA").map(|a| a.join("fnm"))) {
        dirs.push(fnm.join("aliases").join("default"));
    }
    if let Some(choco) = var("ChocolateyInstall") {
        dirs.push(choco.join("bin"));
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let fresh = !seen.contains(d);
        seen.push(d.clone());
        fresh
    });
    dirs
}

/// Windows has no login shell whose start-up files set `Path`: a program
/// started from the Start menu or Explorer already gets the user's and the
/// machine's `Path` from the registry. Always `Err`, saying so.
pub fn login_shell_path(_shell: Option<&Path>, _timeout: Duration) -> Result<OsString, String> {
    Err("Windows has no login shell (programs get the registry's Path)".into())
}

/// Whether `path` is an existing regular file Windows can start directly
/// (`.exe` or `.com`; `.cmd`/`.bat` need `cmd.exe` and are not spawned as
/// Node).
pub fn is_executable_file(path: &Path) -> bool {
    let launchable = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("exe") || e.eq_ignore_ascii_case("com"));
    launchable && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}
