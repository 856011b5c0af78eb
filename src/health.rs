//! The health report an editor shows when the user asks "is everything
//! working?": the library, the `qwen`, `gemini` and `node` programs found
//! and their versions against the ones tested, the discovery files, the
//! connected CLIs, the
//! plugin MCP server and its `settings.json` registration, the
//! cross-session participant. One report for every editor
//! (`qc_health_json`); each editor only displays it.
//!
//! Building it runs `qwen --version` (or `gemini --version`, for the CLIs
//! served) and `node --version` (each bounded by
//! [`VERSION_TIMEOUT`]), so it blocks for up to a few seconds: never on a
//! runtime thread.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::ide::discovery::{Cli, Clis};
use crate::ide::Companion;
use crate::mcp_bridge::registration::{self, Found};
use crate::mcp_bridge::settings::{self, Scope};
use crate::plugins::process::node;
use crate::service::PluginService;
use crate::sessions::Participant;

/// The Qwen Code release this library is tested against.
pub const TESTED_QWEN: &str = "0.24.4";
/// The oldest Node.js major version Qwen Code 0.24.4 runs on.
pub const MIN_NODE_MAJOR: u64 = 22;
/// The Gemini CLI release this library is tested against.
pub const TESTED_GEMINI: &str = "0.61.0";
/// The oldest Node.js major version Gemini CLI 0.61.0 runs on.
pub const MIN_NODE_MAJOR_GEMINI: u64 = 20;

/// What the report needs to know of a CLI program.
struct Program {
    cli: Cli,
    /// The program's name and the check's id.
    name: &'static str,
    display: &'static str,
    package: &'static str,
    tested: &'static str,
    min_node: u64,
}

const QWEN: Program = Program {
    cli: Cli::Qwen,
    name: "qwen",
    display: "Qwen Code",
    package: "@qwen-code/qwen-code",
    tested: TESTED_QWEN,
    min_node: MIN_NODE_MAJOR,
};

const GEMINI: Program = Program {
    cli: Cli::Gemini,
    name: "gemini",
    display: "Gemini CLI",
    package: "@google/gemini-cli",
    tested: TESTED_GEMINI,
    min_node: MIN_NODE_MAJOR_GEMINI,
};
/// Longest wait for a `--version` answer.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// `options_json` of `qc_health_json` (every field optional).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The `qwen` to check: a bare name (searched) or a path. Default `qwen`.
    #[serde(default)]
    pub qwen: Option<String>,
    /// The `gemini` to check, like `qwen`. Default `gemini`.
    #[serde(default)]
    pub gemini: Option<String>,
    /// The CLIs to check (`"qwen"`, `"gemini"`, `"both"`). Default: those
    /// the companion passed serves, else `qwen`.
    #[serde(default)]
    pub cli: Option<String>,
    /// The `node` to check, as the plugin host's `node` setting. Default `node`.
    #[serde(default)]
    pub node: Option<String>,
    /// The `PATH` to search instead of this process's (an editor whose own
    /// `PATH` differs from its terminals').
    #[serde(default)]
    pub path: Option<String>,
}

impl Options {
    pub fn from_json(text: Option<&str>) -> Result<Options> {
        match text {
            None => Ok(Options::default()),
            Some(t) => {
                let options: Options = serde_json::from_str(t)
                    .map_err(|e| Error::invalid_json(format!("invalid options_json: {e}")))?;
                if let Some(cli) = &options.cli {
                    Clis::parse(cli)?;
                }
                Ok(options)
            }
        }
    }
}

/// What the report is about: every part optional.
pub struct Parts<'a> {
    pub companion: Option<&'a Companion>,
    pub plugins: Option<&'a PluginService>,
    pub participant: Option<&'a Participant>,
}

fn check(id: &str, status: &str, summary: String) -> Value {
    json!({"id": id, "status": status, "summary": summary})
}

/// The report: `{"library": {...}, "checks": [{id, status, summary, ...}]}`
/// with `status` one of `ok`, `warn`, `error`, `off` (the part is not in
/// use).
pub fn report(options: &Options, abi: u32, parts: &Parts<'_>) -> Value {
    let platform = format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH);
    let version = env!("CARGO_PKG_VERSION");
    let search_path = options
        .path
        .as_ref()
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"));
    // `from_json` checked the value.
    let clis = match options.cli.as_deref().map(Clis::parse) {
        Some(Ok(clis)) => clis,
        Some(Err(_)) | None => parts.companion.map(Companion::clis).unwrap_or_default(),
    };
    // Node must be new enough for every CLI served.
    let min_node = [&QWEN, &GEMINI]
        .iter()
        .filter(|p| clis.serves(p.cli))
        .map(|p| p.min_node)
        .max()
        .unwrap_or(MIN_NODE_MAJOR);
    let node_check = node_check(options.node.as_deref().unwrap_or("node"), min_node, clis);
    let node_path = node_check
        .get("path")
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let program_check = |p: &Program, setting: &Option<String>| {
        if clis.serves(p.cli) {
            cli_check(
                p,
                setting.as_deref().unwrap_or(p.name),
                search_path.clone(),
                node_path.as_deref(),
            )
        } else {
            let mut c = check(
                p.name,
                "off",
                format!("{} is not served (cli = {})", p.display, clis.name()),
            );
            c["tested"] = json!(p.tested);
            c
        }
    };
    let checks = vec![
        check(
            "library",
            "ok",
            format!("qwen-companion {version} (C ABI {abi}) for {platform}"),
        ),
        program_check(&QWEN, &options.qwen),
        program_check(&GEMINI, &options.gemini),
        node_check,
        lock_check(parts.companion),
        clis_check(parts.companion),
        plugin_mcp_check(parts.plugins),
        participant_check(parts.participant),
    ];
    json!({
        "library": {"version": version, "abi": abi, "platform": platform},
        "cli": clis.name(),
        "tested": {"qwen": TESTED_QWEN, "gemini": TESTED_GEMINI, "node": format!(">= {min_node}")},
        "checks": checks,
    })
}

/// Runs `program --version` with `path` as its `PATH`; the first line of
/// its output, or why there is none.
fn version_of(program: &Path, path: Option<&OsStr>) -> std::result::Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", program.display()))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} --version did not answer within {} s",
                    program.display(),
                    VERSION_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("{}: {e}", program.display())),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let first = |t: &str| {
        t.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    match (status.success(), first(&out)) {
        (true, Some(line)) => Ok(line),
        _ => Err(format!(
            "{} --version failed ({status}){}",
            program.display(),
            first(&err).map(|l| format!(": {l}")).unwrap_or_default()
        )),
    }
}

/// `v22.3.0` / `0.24.4` → its numbers.
fn numbers(version: &str) -> Vec<u64> {
    version
        .trim()
        .trim_start_matches('v')
        .split(['.', '-', '+', ' '])
        .map_while(|p| p.parse().ok())
        .collect()
}

fn node_check(setting: &str, min_major: u64, clis: Clis) -> Value {
    let needs = match (clis.qwen, clis.gemini) {
        (true, true) => format!("Qwen Code {TESTED_QWEN} and Gemini CLI {TESTED_GEMINI} need"),
        (false, true) => format!("Gemini CLI {TESTED_GEMINI} needs"),
        _ => format!("Qwen Code {TESTED_QWEN} needs"),
    };
    let found = node::resolve(OsStr::new(setting));
    let path = match found {
        Ok(p) => p,
        Err(e) => {
            let mut c = check(
                "node",
                "error",
                format!("node was not found (setting {setting:?})"),
            );
            c["detail"] = json!(e);
            c["tested"] = json!(format!(">= {min_major}"));
            return c;
        }
    };
    let mut c = match version_of(&path, None) {
        Ok(v) => {
            let major = numbers(&v).first().copied().unwrap_or(0);
            let mut c = if major >= min_major {
                check("node", "ok", format!("node {v} at {}", path.display()))
            } else {
                check(
                    "node",
                    "error",
                    format!(
                        "node {v} at {} is too old: {needs} Node.js {min_major} or newer",
                        path.display()
                    ),
                )
            };
            c["version"] = json!(v.trim_start_matches('v'));
            c
        }
        Err(e) => {
            let mut c = check(
                "node",
                "error",
                format!("node at {} does not run", path.display()),
            );
            c["detail"] = json!(e);
            c
        }
    };
    c["path"] = json!(path.display().to_string());
    c["tested"] = json!(format!(">= {min_major}"));
    c
}

fn cli_check(
    p: &Program,
    setting: &str,
    search_path: Option<OsString>,
    node: Option<&Path>,
) -> Value {
    let id = p.name;
    let tested = p.tested;
    let name = if Path::new(setting).extension().is_none() {
        format!("{setting}{}", crate::sys::platform::NPM_BIN_SUFFIX)
    } else {
        setting.to_string()
    };
    let home = crate::shared::fs::home_dir();
    let found = if node::is_bare_name(OsStr::new(&name)) {
        node::search(
            OsStr::new(&name),
            node::Places {
                path: search_path.clone(),
                login_path: &mut || crate::sys::env::login_shell_path(None, node::SHELL_TIMEOUT),
                install_dirs: &|| {
                    crate::sys::env::node_install_dirs(home.as_deref(), &|k| std::env::var_os(k))
                },
            },
        )
    } else {
        Ok(PathBuf::from(&name))
    };
    let mut c = match found {
        Err(e) => {
            let mut c = check(
                id,
                "error",
                format!(
                    "{id} was not found: install it with npm install -g {}@{tested}",
                    p.package
                ),
            );
            c["detail"] = json!(e);
            c
        }
        Ok(path) => {
            // The CLI is a Node script: it runs with the node found above.
            let run_path = node.and_then(|n| node::path_with_node_dir(n, search_path.as_deref()));
            let mut c = match version_of(&path, run_path.as_deref().or(search_path.as_deref())) {
                Ok(v) => {
                    let mut c = if numbers(&v) == numbers(tested) {
                        check(id, "ok", format!("{id} {v} at {}", path.display()))
                    } else {
                        check(
                            id,
                            "warn",
                            format!(
                                "{id} {v} at {}: this companion is tested with {tested}",
                                path.display()
                            ),
                        )
                    };
                    c["version"] = json!(v);
                    c
                }
                Err(e) => {
                    let mut c = check(
                        id,
                        "error",
                        format!("{id} at {} does not run", path.display()),
                    );
                    c["detail"] = json!(e);
                    c
                }
            };
            c["path"] = json!(path.display().to_string());
            c
        }
    };
    c["tested"] = json!(tested);
    c
}

fn lock_check(companion: Option<&Companion>) -> Value {
    let Some(c) = companion else {
        return check("lock_file", "off", "no IDE companion in this editor".into());
    };
    let (Ok(files), Ok(first)) = (c.discovery_files(), c.lock_file_path()) else {
        return check(
            "lock_file",
            "warn",
            "the IDE companion is not running: no CLI can connect to this editor".into(),
        );
    };
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for p in [&QWEN, &GEMINI] {
        if let Some(path) = files[p.cli.key()].as_str() {
            if Path::new(path).is_file() {
                found.push(format!("{} ({})", path, p.display));
            } else {
                missing.push(format!(
                    "{path} is missing: {} cannot find this editor",
                    p.name
                ));
            }
        }
    }
    let mut out = if missing.is_empty() {
        check(
            "lock_file",
            "ok",
            format!("{} (port {})", found.join(", "), c.port().unwrap_or(0)),
        )
    } else {
        check(
            "lock_file",
            "error",
            format!("the companion runs but {}", missing.join("; ")),
        )
    };
    out["path"] = json!(first.display().to_string());
    out["files"] = files;
    out
}

fn clis_check(companion: Option<&Companion>) -> Value {
    let Some(c) = companion.filter(|c| c.is_running()) else {
        return check("clis", "off", "no running IDE companion".into());
    };
    let n = c.connected_clients();
    let clis = c.clis();
    let (one, many, start) = match (clis.qwen, clis.gemini) {
        (true, true) => ("CLI (Qwen Code or Gemini CLI)", "CLIs", "qwen or gemini"),
        (false, true) => ("Gemini CLI", "Gemini CLIs", "gemini"),
        _ => ("Qwen Code CLI", "Qwen Code CLIs", "qwen"),
    };
    let mut out = match n {
        0 => check(
            "clis",
            "warn",
            format!(
                "no {one} is connected: start {start} in a terminal of this editor (or run /ide enable in it)"
            ),
        ),
        1 => check("clis", "ok", format!("1 {one} is connected")),
        n => check("clis", "ok", format!("{n} {many} are connected")),
    };
    out["count"] = json!(n);
    out["cli"] = json!(clis.name());
    out
}

fn plugin_mcp_check(plugins: Option<&PluginService>) -> Value {
    let Some(service) = plugins else {
        return check("plugin_mcp", "off", "no plugin host in this editor".into());
    };
    let server = service.with_mcp(|m| m.info());
    let mut files = Vec::new();
    if let Ok(user) = settings::settings_path(Scope::User, Path::new("/")) {
        files.push(user);
    }
    let root = service.host().workspace_root();
    if !root.is_empty() {
        if let Ok(project) = settings::settings_path(Scope::Project, Path::new(&root)) {
            files.push(project);
        }
    }
    let mut registered = Vec::new();
    let mut problems = Vec::new();
    for f in &files {
        match registration::find(f) {
            Found::Absent => {}
            Found::Entry {
                command,
                problem: None,
            } => registered.push(format!("{} (bridge {command})", f.display())),
            Found::Entry {
                command,
                problem: Some(p),
            } => problems.push(format!(
                "{}: the bridge {command:?} cannot start: {p}",
                f.display()
            )),
            Found::Unreadable(e) => problems.push(e),
        }
    }
    let (status, summary) = match (&server, registered.is_empty(), problems.is_empty()) {
        (Ok(info), false, true) => (
            "ok",
            format!(
                "the plugin MCP server runs on port {} with {} tool(s); registered in {}",
                info["port"],
                info["tools"].as_array().map_or(0, Vec::len),
                registered.join(", ")
            ),
        ),
        (Ok(_), true, true) => (
            "warn",
            "the plugin MCP server runs but is not registered in settings.json: qwen will not see the editor's tools"
                .to_string(),
        ),
        (Err(_), _, true) => ("warn", "the plugin MCP server is not running".to_string()),
        (_, _, false) => ("error", problems.join("; ")),
    };
    let mut out = check("plugin_mcp", status, summary);
    if let Ok(info) = &server {
        out["tools"] = info["tools"].clone();
        out["port"] = info["port"].clone();
    }
    out["settings"] = json!(files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>());
    out
}

fn participant_check(participant: Option<&Participant>) -> Value {
    let Some(p) = participant else {
        return check(
            "participant",
            "off",
            "cross-session messaging is off in this editor".into(),
        );
    };
    let sessions = p.sessions();
    let mut out = match sessions.first() {
        None => check(
            "participant",
            "warn",
            "the cross-session participant is not registered: other sessions cannot reach this editor".into(),
        ),
        Some(s) => check(
            "participant",
            "ok",
            format!(
                "registered as {} ({} session{}, socket {})",
                s.name,
                sessions.len(),
                if sessions.len() == 1 { "" } else { "s" },
                s.ipc_path
            ),
        ),
    };
    out["sessions"] = json!(sessions.len());
    out
}

#[cfg(test)]
mod tests;
