//! `qc_plugin_host_mcp_*` and `qc_mcp_register` / `qc_mcp_unregister`: the
//! plugin host's MCP server (every enabled plugin's tools as MCP tools of
//! the server `qwen-companion-plugins`) and its entry in Qwen Code's
//! `settings.json`, over the C ABI.
//!
//! How Qwen Code reaches the server: the settings entry starts the stdio
//! bridge `qc-mcp-bridge` (`"command": <bridge>, "args": ["plugins"]`). The
//! bridge finds the running server through the lock file
//! `<qwen home>/companion/plugins-mcp/<pid>.lock` (port and token, written
//! while the server runs), so the entry holds no port and no token, and a
//! terminal needs no environment variable: `qwen` started from any terminal
//! inside the workspace finds the IDE (a terminal the IDE starts carries
//! `QWEN_COMPANION_PLUGINS_PID`, the `env` of `qc_plugin_host_mcp_info`, so
//! its `qwen` reaches this IDE first). (Qwen Code turns any 401 of an
//! `httpUrl` server into an OAuth prompt, and a project-scope approval is a
//! hash of the expanded entry: an entry with the port and token in it would
//! break on every IDE restart. The bridge keeps the entry the same text.)
//!
//! ## Threading
//! Every function may be called from any thread, concurrently, also from
//! inside the host's callbacks. The server's log lines go to the host's log
//! callback (`qc_plugin_host_set_log_callback`) on the host's callback
//! thread. `qc_plugin_host_mcp_stop` and `qc_plugin_host_free` wait until
//! the server's sockets are closed and its lock file is gone.

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::{json, Value};

use super::plugins::{entry, qc_plugin_host};
use super::util::*;
use crate::error::{Error, Result, Status};
use crate::host::{LogFn, LogLevel};
use crate::mcp_bridge::naming::SERVER_NAME;
use crate::mcp_bridge::server::Config;
use crate::mcp_bridge::settings::{self, Change, Outcome, Scope};
use crate::mcp_bridge::PluginMcpServer;

/// The `description` of our `mcpServers` entry.
pub(crate) const ENTRY_DESCRIPTION: &str =
    "Tools of the plugins installed in your IDE (qwen-companion)";

/// The plugin MCP server of one host handle (at most one).
#[derive(Default)]
pub(crate) struct McpSlot(Mutex<Option<PluginMcpServer>>);

impl McpSlot {
    fn lock(&self) -> MutexGuard<'_, Option<PluginMcpServer>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops and drops the server, if any (outside the slot's lock).
    pub(crate) fn shutdown(&self) {
        let server = self.lock().take();
        drop(server);
    }
}

/// Starts the plugin MCP server of `host`: streamable HTTP on
/// `127.0.0.1:<random port>/mcp` (bearer token, `Host` allow-list, every
/// `Origin` refused, capped bodies), listing the model-visible tools of the
/// enabled plugins (from their manifests; nothing is started to list) plus
/// the built-in `plugins-status`, and writes the lock file
/// `<qwen home>/companion/plugins-mcp/<pid>.lock` that `qc-mcp-bridge` reads.
///
/// `config_json` (nullable, borrowed) is a JSON object, every field
/// optional: `workspacePaths` (absolute folders written to the lock file;
/// default the host's `workspaceRoot`), `lockDir` (default
/// `<qwen home>/companion/plugins-mcp`), `maxBodyBytes` (16 MiB),
/// `keepAliveMs` (15000; 10..30000), `http` (the connection limits, as for
/// `qc_companion_new`), `sessionGraceMs` (30000; 1000..3600000),
/// `maxSessions` (64; 1..4096). Unknown fields give `QC_INVALID_JSON`,
/// values out of range `QC_INVALID_ARGUMENT`.
///
/// `QC_ALREADY_RUNNING` when this host's server runs, or another server of
/// this process uses the same lock file. The server runs until
/// `qc_plugin_host_mcp_stop` or `qc_plugin_host_free`; on a failure nothing
/// is left running and no lock file is written.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_mcp_start(
    h: *mut qc_plugin_host,
    config_json: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let config = Config::from_json(opt_str_arg(config_json, "config_json")?)?;
        let mut slot = e.mcp.lock();
        if slot.is_some() {
            return Err(Error::new(
                Status::AlreadyRunning,
                "the plugin MCP server of this host is already running",
            ));
        }
        let server = PluginMcpServer::start(e.host.clone(), config)?;
        let logger = e.logger();
        let forward: LogFn =
            Arc::new(move |level, message: &str| logger.log(level, || format!("mcp: {message}")));
        server.set_log_callback(Some((forward, LogLevel::Trace)));
        *slot = Some(server);
        Ok(())
    })
}

/// Stops the plugin MCP server of `host`: removes its lock file, closes
/// every session (a connected `qc-mcp-bridge` exits) and its sockets, and
/// returns when that is done. `QC_NOT_RUNNING` when it does not run.
/// `QC_IO` when the lock file could not be removed (the server is stopped
/// all the same).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_mcp_stop(
    h: *mut qc_plugin_host,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let Some(server) = e.mcp.lock().take() else {
            return Err(Error::not_running());
        };
        let stopped = server.stop();
        drop(server);
        stopped
    })
}

/// `*out_json` (owned; free with `qc_string_free`) receives what a client
/// of the running server needs:
/// `{"url":"http://127.0.0.1:PORT/mcp","port":PORT,
///   "headers":{"Authorization":"Bearer TOKEN"},
///   "env":{"QWEN_COMPANION_PLUGINS_PID":"PID"},
///   "lockFile":PATH,"serverName":"qwen-companion-plugins",
///   "tools":[MCP tool names, as `tools/list` gives them now],
///   "sessions":N}`.
/// `env` is what the terminals the IDE starts should carry: Qwen Code
/// reaches the server through the `qc-mcp-bridge` entry
/// (`qc_mcp_register`), which reads the lock file, so a terminal needs no
/// variable to find *an* IDE of its folder; with `env` the bridge of a
/// `qwen` in this IDE's terminal picks this IDE's server first even when
/// another IDE is open on the same folder. It holds no secret. The token
/// is a secret: give it only to a client you start yourself. `QC_NOT_RUNNING` when the server does not run.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_mcp_info(
    h: *const qc_plugin_host,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let e = entry(h)?;
        let slot = e.mcp.lock();
        let Some(server) = slot.as_ref() else {
            return Err(Error::not_running());
        };
        let port = server.port()?;
        let token = server.auth_token()?;
        let lock_file = server.lock_file_path()?;
        let tools: Vec<Value> = server
            .tools()
            .iter()
            .filter_map(|t| t.get("name").cloned())
            .collect();
        Ok(json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "port": port,
            "headers": {"Authorization": format!("Bearer {token}")},
            "env": server.terminal_env()?,
            "lockFile": lock_file,
            "serverName": SERVER_NAME,
            "tools": tools,
            "sessions": server.session_count(),
        }))
    })
}

/// `options_json` of `qc_mcp_register` / `qc_mcp_unregister`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    bridge: Option<String>,
    #[serde(default)]
    always_load_tools: bool,
}

/// The parsed options: the settings file and its scope.
struct Target {
    scope: Scope,
    path: PathBuf,
    options: Options,
}

fn target(options_json: *const c_char) -> Result<Target> {
    let text = str_arg(options_json, "options_json")?;
    let options: Options = serde_json::from_str(text)
        .map_err(|e| Error::invalid_json(format!("invalid options_json: {e}")))?;
    let scope = match options.scope.as_deref() {
        None | Some("user") => Scope::User,
        Some("project") => Scope::Project,
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "options_json.scope must be \"user\" or \"project\", not {other:?}"
            )))
        }
    };
    let path = match scope {
        Scope::User => settings::settings_path(Scope::User, Path::new("/"))?,
        Scope::Project => {
            let Some(project) = options.project.as_deref() else {
                return Err(Error::invalid_argument(
                    "options_json.project (the project folder) is required for the project scope",
                ));
            };
            let dir = Path::new(project);
            if !dir.is_absolute() {
                return Err(Error::invalid_argument(format!(
                    "options_json.project {project:?} is not an absolute path"
                )));
            }
            if !dir.is_dir() {
                return Err(Error::new(
                    Status::NotFound,
                    format!("options_json.project {project:?} is not a folder"),
                ));
            }
            settings::settings_path(Scope::Project, dir)?
        }
    };
    Ok(Target {
        scope,
        path,
        options,
    })
}

/// Checks the bridge path: absolute, a regular file, executable.
fn bridge_path(bridge: Option<&str>) -> Result<PathBuf> {
    let Some(bridge) = bridge else {
        return Err(Error::invalid_argument(
            "options_json.bridge (the path of qc-mcp-bridge) is required",
        ));
    };
    let path = PathBuf::from(bridge);
    if !path.is_absolute() {
        return Err(Error::invalid_argument(format!(
            "options_json.bridge {bridge:?} is not an absolute path (Qwen Code starts it from any folder)"
        )));
    }
    let meta = std::fs::metadata(&path).map_err(|e| {
        Error::new(
            Status::NotFound,
            format!("options_json.bridge {bridge:?}: {e}"),
        )
    })?;
    if !meta.is_file() || crate::sys::fs::mode(&meta) & 0o111 == 0 {
        return Err(Error::invalid_argument(format!(
            "options_json.bridge {bridge:?} is not an executable file"
        )));
    }
    Ok(path)
}

fn change_name(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Replaced => "replaced",
        Change::Unchanged => "unchanged",
        Change::Removed => "removed",
        Change::Absent => "absent",
    }
}

fn outcome_json(t: &Target, o: &Outcome) -> Value {
    json!({
        "ok": true,
        "scope": if t.scope == Scope::Project { "project" } else { "user" },
        "settings": o.path,
        "serverName": SERVER_NAME,
        "change": change_name(o.change),
        "created": o.created,
        "replacedSymlink": o.replaced_symlink,
        "serversLeft": o.servers_left,
    })
}

/// Makes a settings error name the file it is about.
fn about(path: &Path, e: Error) -> Error {
    let shown = path.display().to_string();
    if e.message.contains(&shown) {
        return e;
    }
    Error::new(e.status, format!("{shown}: {}", e.message))
}

/// Adds (or replaces) the `qwen-companion-plugins` entry of Qwen Code's
/// `mcpServers` in one settings file, touching nothing else of it (other
/// keys, comments, indentation, line endings, BOM and mode stay; the write
/// is atomic). Blocking file I/O; any thread.
///
/// `options_json` (borrowed) is `{"scope":"user"|"project","project":DIR,
/// "bridge":PATH,"alwaysLoadTools":BOOL}`: `scope` (default `user`:
/// `<qwen home>/settings.json`; `project`: `<project>/.qwen/settings.json`,
/// `project` then required, absolute, an existing folder, not the home
/// directory), `bridge` (required: the absolute path of an executable
/// `qc-mcp-bridge`, best a copy in a stable place such as
/// `<qwen home>/companion/bin/`, since the entry names it), `alwaysLoadTools`
/// (default false: Qwen Code then defers the tools; true declares every
/// tool's schema to the model up front). The entry written is
/// `{"command":BRIDGE,"args":["plugins"],"description":…}` (plus
/// `"alwaysLoadTools":true`): no port, no token.
///
/// `*out_json` (owned) receives `{"ok":true,"scope","settings":PATH,
/// "serverName","change":"added"|"replaced"|"unchanged","created",
/// "replacedSymlink","serversLeft"}`, plus for the project scope
/// `"approve":"qwen mcp approve qwen-companion-plugins"`: Qwen Code keeps a
/// project server pending until the user approves it (tell the user once).
/// A settings file Qwen Code could not read (not JSON after removing
/// comments, trailing commas, a non-object `mcpServers`) gives
/// `QC_INVALID_JSON` (`*error` names the file, and line and column), and
/// the file is left untouched; a project that is the home directory gives
/// `QC_REFUSED` (Qwen Code reads no project settings there).
#[no_mangle]
pub unsafe extern "C" fn qc_mcp_register(
    options_json: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let t = target(options_json)?;
        let bridge = bridge_path(t.options.bridge.as_deref())?;
        let mut entry = json!({
            "command": bridge,
            "args": ["plugins"],
            "description": ENTRY_DESCRIPTION,
        });
        if t.options.always_load_tools {
            entry["alwaysLoadTools"] = json!(true);
        }
        let o = settings::register(&t.path, SERVER_NAME, &entry).map_err(|e| about(&t.path, e))?;
        let mut out = outcome_json(&t, &o);
        if t.scope == Scope::Project {
            out["approve"] = json!(format!("qwen mcp approve {SERVER_NAME}"));
        }
        Ok(out)
    })
}

/// Removes the `qwen-companion-plugins` entry from one settings file
/// (same rules as `qc_mcp_register`; `bridge` and `alwaysLoadTools` are
/// ignored). A missing file or entry is success with `"change":"absent"`
/// (nothing written); otherwise `"change":"removed"` (the last entry
/// removed leaves `"mcpServers": {}`). `*out_json` (owned) as for
/// `qc_mcp_register`, without `approve`.
#[no_mangle]
pub unsafe extern "C" fn qc_mcp_unregister(
    options_json: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let t = target(options_json)?;
        let o = settings::unregister(&t.path, SERVER_NAME).map_err(|e| about(&t.path, e))?;
        Ok(outcome_json(&t, &o))
    })
}
