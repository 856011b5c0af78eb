//! The user's directories, and where the user's `node` may be: the login
//! shell's `PATH` and the usual install folders.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The home directory of the user this process runs as, from the user
/// database (the passwd entry of our uid; the profile directory on
/// Windows). Callers look at `$HOME` first, as Node's `os.homedir()` does.
pub fn user_home() -> Option<PathBuf> {
    passwd_path(|p| p.pw_dir)
}

/// A path field of our uid's passwd entry (`None` when unset or empty).
fn passwd_path(field: fn(&libc::passwd) -> *mut libc::c_char) -> Option<PathBuf> {
    // SAFETY: getpwuid_r with a heap buffer; the result points into `buf`,
    // which outlives every use of it.
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
        let value = field(&pwd);
        if rc != 0 || result.is_null() || value.is_null() {
            return None;
        }
        let value = std::ffi::CStr::from_ptr(value);
        let value = PathBuf::from(OsString::from_vec(value.to_bytes().to_vec()));
        (!value.as_os_str().is_empty()).then_some(value)
    }
}

/// The raw bytes of a path (for percent-encoding it into a `file://` URI).
/// A Windows implementation gives the UTF-8 of its `/`-separated form.
pub fn path_bytes(path: &std::path::Path) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(path.as_os_str().as_bytes())
}

/// Where Node is commonly installed when it is not on `PATH`, in the order
/// searched: Homebrew (`/opt/homebrew/bin`, `/usr/local/bin`,
/// `/home/linuxbrew/.linuxbrew/bin`), MacPorts (`/opt/local/bin`), nvm
/// (`$NVM_DIR` or `~/.nvm`, `versions/node/*/bin`, newest version first),
/// Volta (`$VOLTA_HOME` or `~/.volta`, `bin`), asdf (`$ASDF_DATA_DIR` or
/// `~/.asdf`, `shims`), mise (`$MISE_DATA_DIR` or
/// `$XDG_DATA_HOME/mise`, `shims`), fnm (`$FNM_DIR`, `~/.local/share/fnm`
/// or `~/Library/Application Support/fnm`, `aliases/default/bin`), n
/// (`$N_PREFIX/bin`), then `~/.local/bin`. `var` reads an environment
/// variable (empty = unset); `home` is the user's home directory.
pub fn node_install_dirs(
    home: Option<&Path>,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<PathBuf> {
    let var = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let under_home = |rel: &str| home.map(|h| h.join(rel));
    let mut dirs: Vec<PathBuf> = [
        "/opt/homebrew/bin",
        "/usr/local/bin",
        "/home/linuxbrew/.linuxbrew/bin",
        "/opt/local/bin",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(nvm) = var("NVM_DIR").or_else(|| under_home(".nvm")) {
        dirs.extend(newest_first(&nvm.join("versions").join("node")));
    }
    dirs.extend(
        var("VOLTA_HOME")
            .or_else(|| under_home(".volta"))
            .map(|d| d.join("bin")),
    );
    dirs.extend(
        var("ASDF_DATA_DIR")
            .or_else(|| under_home(".asdf"))
            .map(|d| d.join("shims")),
    );
    let data_home = var("XDG_DATA_HOME").or_else(|| under_home(".local/share"));
    dirs.extend(
        var("MISE_DATA_DIR")
            .or_else(|| data_home.as_ref().map(|d| d.join("mise")))
            .map(|d| d.join("shims")),
    );
    let fnm = match var("FNM_DIR") {
        Some(d) => vec![d],
        None => [
            data_home.as_ref().map(|d| d.join("fnm")),
            under_home("Library/Application Support/fnm"),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    dirs.extend(fnm.into_iter().map(|d| d.join("aliases/default/bin")));
    dirs.extend(var("N_PREFIX").map(|d| d.join("bin")));
    dirs.extend(under_home(".local/bin"));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let new = !seen.contains(d);
        seen.push(d.clone());
        new
    });
    dirs
}

/// The `<version>/bin` folders of an nvm-style `versions` folder, newest
/// version first (`v20.10.0` before `v20.9.1`; names that are not versions
/// last, by name).
fn newest_first(versions: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(versions) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u64>, OsString)> = entries
        .flatten()
        .map(|e| {
            let name = e.file_name();
            let key = name
                .to_str()
                .map(|s| s.trim_start_matches('v'))
                .map(|s| s.split('.').map_while(|p| p.parse::<u64>().ok()).collect())
                .unwrap_or_default();
            (key, name)
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found
        .into_iter()
        .map(|(_, name)| versions.join(name).join("bin"))
        .collect()
}

/// The markers around the login shell's `env` output.
const PATH_BEGIN: &str = "__QWEN_COMPANION_ENV_BEGIN__";
const PATH_END: &str = "__QWEN_COMPANION_ENV_END__";
/// Most output read from the login shell.
const SHELL_OUTPUT_CAP: u64 = 1 << 20;

/// The `PATH` the user's login shell sets up (what a terminal would have),
/// for an IDE started from the Dock or a desktop launcher with a short
/// `PATH`. Runs `shell` (default `$SHELL`, else the user database's shell)
/// as an interactive login shell (`-i -l -c`; `-i -c` for csh and tcsh)
/// printing its environment between markers, in a new session with no
/// terminal, stdin from the null device, stderr discarded, and only the
/// basic variables of ours (`HOME`, `USER`, `LOGNAME`, `SHELL`, `PATH`,
/// `LANG`, `LC_*`, `TMPDIR`) plus `QWEN_COMPANION_RESOLVING_ENVIRONMENT=1`
/// (so start-up files can skip slow work). Killed with its session after
/// `timeout`. `Err` says why no `PATH` came back.
pub fn login_shell_path(shell: Option<&Path>, timeout: Duration) -> Result<OsString, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let shell = shell
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("SHELL")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
        .or_else(user_shell)
        .ok_or("no login shell is known ($SHELL is unset)")?;
    let flags: &[&str] = match shell.file_name().and_then(|n| n.to_str()) {
        Some("csh" | "tcsh") => &["-i", "-c"],
        _ => &["-i", "-l", "-c"],
    };
    let script = format!("echo {PATH_BEGIN}; env; echo {PATH_END}");
    let mut cmd = std::process::Command::new(&shell);
    cmd.args(flags)
        .arg(&script)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| {
            k.to_str().is_some_and(|k| {
                matches!(
                    k,
                    "HOME" | "USER" | "LOGNAME" | "SHELL" | "PATH" | "LANG" | "TMPDIR"
                ) || k.starts_with("LC_")
            })
        }))
        .env("QWEN_COMPANION_RESOLVING_ENVIRONMENT", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure only calls setsid and the fd sweep, both
    // async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            // A new session: no controlling terminal for an interactive
            // shell to take, and one id to kill it and its children with.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            super::os::child_cloexec_from(3);
            Ok(())
        });
    }
    let shown = shell.display().to_string();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run the login shell {shown}: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no shell output pipe")?;
    let (tx, rx) = std::sync::mpsc::channel();
    // The reader ends at EOF, once the shell's session is gone (a process
    // that left the session and kept the pipe keeps only this thread).
    let reader = std::thread::Builder::new()
        .name("qc-login-shell".into())
        .spawn(move || {
            let mut out = Vec::new();
            let r = (&mut stdout).take(SHELL_OUTPUT_CAP).read_to_end(&mut out);
            let _ = tx.send(r.map(|_| out));
        });
    let got = match reader {
        Ok(_) => rx.recv_timeout(timeout).ok(),
        Err(_) => None,
    };
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill of the session (process group) we created; harmless if gone.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let _ = child.wait();
    let out = match got {
        Some(Ok(out)) => out,
        Some(Err(e)) => return Err(format!("cannot read the output of {shown}: {e}")),
        None => {
            return Err(format!(
                "the login shell {shown} did not answer within {} ms",
                timeout.as_millis()
            ))
        }
    };
    parse_env_path(&out).ok_or_else(|| format!("the login shell {shown} printed no PATH"))
}

/// The `PATH=` line between the markers of [`login_shell_path`]'s output.
fn parse_env_path(out: &[u8]) -> Option<OsString> {
    let mut lines = out.split(|&b| b == b'\n');
    lines.by_ref().find(|l| *l == PATH_BEGIN.as_bytes())?;
    let mut path = None;
    for line in lines {
        if line == PATH_END.as_bytes() {
            return path.filter(|p: &OsString| !p.is_empty());
        }
        if let Some(v) = line.strip_prefix(b"PATH=") {
            path = Some(OsString::from_vec(v.to_vec()));
        }
    }
    None
}

/// The login shell of our uid in the user database.
fn user_shell() -> Option<PathBuf> {
    passwd_path(|p| p.pw_shell)
}

/// Whether `path` is a file this user may execute.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads the NUL-terminated path only.
    let x = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    x && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests;
