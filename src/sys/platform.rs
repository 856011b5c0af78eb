//! The small per-OS facts that portable code needs as values: how paths are
//! written, which variable holds the home directory, what the local IPC
//! transport is, which host variables a plugin may see and how a launchable
//! file is recognised.
//!
//! Every fact has one value per platform family, and both values are public
//! constants of their own (`POSIX_…` / `WINDOWS_…`). The one `cfg` choice for
//! each fact is made here, in the unsuffixed constant. Portable code takes the
//! fact as a parameter and is given the unsuffixed constant by its caller, so
//! its unit tests run the Windows variant on Linux as well.

/// How the operating system (and Node's `path`) writes paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// `/`-separated, case-sensitive, absolute when starting with `/`
    /// (Node's `path.posix`).
    Posix,
    /// `\` or `/` separators, drive letters or `\\server\share`, compared
    /// case-insensitively (Node's `path.win32`).
    Windows,
}

/// The local inter-process transport behind `sys::ipc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpcKind {
    /// UNIX-domain stream sockets: files in a directory, mode bits, sweeps.
    UnixSockets,
    /// Named pipes (`\\.\pipe\…`): no file, no directory, nothing to sweep;
    /// the pipe's security descriptor makes it owner-only.
    NamedPipes,
}

/// How a file is recognised as something the OS can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchRule {
    /// A regular file with at least one execute bit.
    #[cfg_attr(windows, allow(dead_code))]
    ExecuteBits,
    /// A regular file whose extension is one of these (compared
    /// case-insensitively, without the dot). Windows has no execute bit.
    #[cfg_attr(not(windows), allow(dead_code))]
    Extensions(&'static [&'static str]),
}

/// The host variables a plugin's Node child may see (see
/// `plugins::process::plugin_env`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvRules {
    /// The allowed names, in the platform's usual spelling.
    pub names: &'static [&'static str],
    /// Names match case-insensitively (Windows' environment does).
    pub case_insensitive: bool,
    /// Every `LC_*` variable is allowed too (POSIX locales).
    pub locale_prefix: bool,
}

/// The POSIX allowlist: what a Node program needs to find binaries, the
/// user's directories, the locale and the terminal.
#[cfg_attr(windows, allow(dead_code))] // used by tests of the POSIX rules
pub const POSIX_ENV: EnvRules = EnvRules {
    names: &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
    ],
    case_insensitive: false,
    locale_prefix: true,
};

/// The Windows allowlist. Each name is there because Node or the Windows
/// libraries it loads read it:
/// - `Path`, `PATHEXT`: finding programs (`child_process` with a bare name);
/// - `SystemRoot`, `windir`, `SystemDrive`: system DLLs and Winsock fail to
///   load or initialise without them;
/// - `USERPROFILE`, `HOMEDRIVE`, `HOMEPATH`: `os.homedir()`;
/// - `APPDATA`, `LOCALAPPDATA`: per-user configuration and caches (the
///   Windows counterparts of `XDG_CONFIG_HOME` / `XDG_CACHE_HOME`);
/// - `TEMP`, `TMP`: `os.tmpdir()`;
/// - `USERNAME`, `USERDOMAIN`: `os.userInfo()` fallbacks and the user's name;
/// - `COMSPEC`: the shell `child_process.exec` and `spawn({shell: true})` use;
/// - `ProgramFiles`, `ProgramFiles(x86)`, `ProgramW6432`, `CommonProgramFiles`,
///   `ProgramData`: where installed tools (fonts, runtimes) are found;
/// - `NUMBER_OF_PROCESSORS`, `PROCESSOR_ARCHITECTURE`, `OS`: what libuv and
///   native modules ask about the machine;
/// - `TZ`, `LANG`: the same time zone and locale overrides as on POSIX.
#[cfg_attr(not(windows), allow(dead_code))] // used by tests of the Windows rules
pub const WINDOWS_ENV: EnvRules = EnvRules {
    names: &[
        "Path",
        "PATHEXT",
        "SystemRoot",
        "SystemDrive",
        "windir",
        "USERPROFILE",
        "HOMEDRIVE",
        "HOMEPATH",
        "APPDATA",
        "LOCALAPPDATA",
        "TEMP",
        "TMP",
        "USERNAME",
        "USERDOMAIN",
        "COMSPEC",
        "ProgramFiles",
        "ProgramFiles(x86)",
        "ProgramW6432",
        "CommonProgramFiles",
        "ProgramData",
        "NUMBER_OF_PROCESSORS",
        "PROCESSOR_ARCHITECTURE",
        "OS",
        "TZ",
        "LANG",
    ],
    case_insensitive: true,
    locale_prefix: false,
};

/// Node's `os.homedir()` reads this variable before asking the OS.
#[cfg_attr(windows, allow(dead_code))] // used by tests of the POSIX rules
pub const POSIX_HOME_VAR: &str = "HOME";
/// See [`POSIX_HOME_VAR`].
#[cfg_attr(not(windows), allow(dead_code))] // used by tests of the Windows rules
pub const WINDOWS_HOME_VAR: &str = "USERPROFILE";

/// The file-name suffix of an executable.
#[cfg_attr(windows, allow(dead_code))] // used by tests of the POSIX rules
pub const POSIX_EXE_SUFFIX: &str = "";
/// See [`POSIX_EXE_SUFFIX`].
#[cfg_attr(not(windows), allow(dead_code))] // used by tests of the Windows rules
pub const WINDOWS_EXE_SUFFIX: &str = ".exe";

/// The suffix of the file `npm install -g` puts on `PATH` for a package's
/// command (`qwen`): none on POSIX (a symlink to the script), `.cmd` on
/// Windows (a shim that runs it with `node`).
#[cfg_attr(windows, allow(dead_code))] // used by tests of the POSIX rules
pub const POSIX_NPM_BIN_SUFFIX: &str = "";
/// See [`POSIX_NPM_BIN_SUFFIX`].
#[cfg_attr(not(windows), allow(dead_code))] // used by tests of the Windows rules
pub const WINDOWS_NPM_BIN_SUFFIX: &str = ".cmd";

/// What makes a file launchable on Windows: the extensions `CreateProcessW`
/// (`.exe`, `.com`) or `cmd.exe` (`.cmd`, `.bat`) start.
#[cfg_attr(not(windows), allow(dead_code))] // used by tests of the Windows rules
pub const WINDOWS_LAUNCH: LaunchRule = LaunchRule::Extensions(&["exe", "com", "cmd", "bat"]);

/// The process identity a session record carries: Linux reads `procStart`
/// (boot id and start time) and `pidNs` from `/proc`; elsewhere the CLI
/// writes both as `null` and liveness is `process.kill(pid, 0)` alone.
#[cfg(target_os = "linux")]
pub const PROC_IDENTITY: bool = true;
/// See the Linux variant.
#[cfg(not(target_os = "linux"))]
pub const PROC_IDENTITY: bool = false;

#[cfg(windows)]
mod chosen {
    use super::*;
    pub const PATH_STYLE: PathStyle = PathStyle::Windows;
    pub const IPC_KIND: IpcKind = IpcKind::NamedPipes;
    pub const HOME_VAR: &str = WINDOWS_HOME_VAR;
    pub const EXE_SUFFIX: &str = WINDOWS_EXE_SUFFIX;
    pub const NPM_BIN_SUFFIX: &str = WINDOWS_NPM_BIN_SUFFIX;
    pub const PLUGIN_ENV: EnvRules = WINDOWS_ENV;
    pub const LAUNCH_RULE: LaunchRule = WINDOWS_LAUNCH;
}

#[cfg(not(windows))]
mod chosen {
    use super::*;
    pub const PATH_STYLE: PathStyle = PathStyle::Posix;
    pub const IPC_KIND: IpcKind = IpcKind::UnixSockets;
    pub const HOME_VAR: &str = POSIX_HOME_VAR;
    pub const EXE_SUFFIX: &str = POSIX_EXE_SUFFIX;
    pub const NPM_BIN_SUFFIX: &str = POSIX_NPM_BIN_SUFFIX;
    pub const PLUGIN_ENV: EnvRules = POSIX_ENV;
    pub const LAUNCH_RULE: LaunchRule = LaunchRule::ExecuteBits;
}

/// This platform's path style.
pub const PATH_STYLE: PathStyle = chosen::PATH_STYLE;
/// This platform's local IPC transport.
pub const IPC_KIND: IpcKind = chosen::IPC_KIND;
/// This platform's home variable (`HOME`, or `USERPROFILE` on Windows).
pub const HOME_VAR: &str = chosen::HOME_VAR;
/// This platform's executable suffix (`""`, or `.exe` on Windows).
pub const EXE_SUFFIX: &str = chosen::EXE_SUFFIX;
/// The suffix of an npm-installed command here (`""`, or `.cmd` on Windows).
pub const NPM_BIN_SUFFIX: &str = chosen::NPM_BIN_SUFFIX;
/// This platform's plugin environment allowlist.
pub const PLUGIN_ENV: EnvRules = chosen::PLUGIN_ENV;
/// This platform's rule for a launchable file.
pub const LAUNCH_RULE: LaunchRule = chosen::LAUNCH_RULE;

/// True when `meta` (of `path`) describes a file this platform can start
/// under `rule`: a regular file with an execute bit, or a regular file with
/// one of the rule's extensions.
pub fn is_launchable(path: &std::path::Path, meta: &std::fs::Metadata, rule: LaunchRule) -> bool {
    if !meta.is_file() {
        return false;
    }
    match rule {
        LaunchRule::ExecuteBits => super::fs::mode(path, meta) & 0o111 != 0,
        LaunchRule::Extensions(exts) => path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.iter().any(|x| x.eq_ignore_ascii_case(e))),
    }
}
