//! `qc_plugin_host_*`: the plugin host over the C ABI.
//!
//! A plugin host runs the plugins installed in one plugins directory (a
//! folder with `manifest.json` and a Node entry script each), calls their
//! tools, forwards their `ui_push` messages and answers their capability
//! requests with the embedding host's callbacks.
//!
//! ## Errors: one rule for every plugin call
//! Every function returns a `qc_status` and takes a last `char **error` (the
//! house convention). The functions whose failures have a stable,
//! machine-readable form also take a nullable `char **error_json` right
//! before `error`. On such a failure it receives an owned JSON object (free
//! with `qc_string_free`); on success, and on argument or handle errors
//! (NULL, bad UTF-8, bad JSON, bad handle), it is set to NULL:
//! * plugins directory operations (`_install`, `_uninstall`, `_list`):
//!   `{"code", "message", "problems"?}` with `code` one of
//!   `invalid_manifest`, `not_a_zip`, `unsupported_source`, `unsafe_archive`,
//!   `archive_too_large`, `corrupt_archive`, `manifest_not_at_root`,
//!   `unsafe_source`, `source_too_large`, `not_found`, `invalid_id`,
//!   `invalid_config`, `corrupt_state`, `broken_plugin`, `io`. The status is
//!   `QC_NOT_FOUND` for `not_found`, `QC_INVALID_ARGUMENT` for `invalid_id`
//!   and `invalid_config`, `QC_IO` for `io`, `QC_REFUSED` for the others.
//! * calls (`_call`, `_visible`, `_options`, `_parse_document`, `_unload`):
//!   `{"kind", "message", …}` with `kind` one of `schema` (`errors`:
//!   `[{path, message}]`), `unknown_tool`, `timeout`, `exited` (`exitCode`,
//!   `signal`, `stderrTail`), `protocol`, `too_large`, `tool_error`
//!   (`pluginMessage`: the plugin's own message), `disabled`, `not_found`,
//!   `host`. The status is `QC_INVALID_ARGUMENT` for `schema`, `QC_NOT_FOUND`
//!   for `unknown_tool` and `not_found`, `QC_IO` for `host`, `QC_REFUSED` for
//!   the others. `*error` then reads `"<kind>: <message>"`.
//!
//! `_call_async` gives the same outcome to its callback as one document:
//! `{"ok":true,"result":{"content":[…],"details":…}}` or
//! `{"ok":false,"error":{"kind",…}}`.
//!
//! ## Threading
//! Every function may be called from any thread, concurrently. All callbacks
//! of one host (events, logs, capabilities, `_call_async` completions) run on
//! that host's own callback thread (`qc-cb`), one at a time, in order, never
//! while a library lock is held. Any `qc_` function may be called from inside
//! them, including `qc_plugin_host_free` of the same host (the callback
//! thread then ends after the callback returns). A blocking call (`_call`,
//! `_visible`, …) made from inside a callback holds the callback thread, so
//! the callbacks it would cause (a capability request of that very call)
//! wait until it returns: use `_call_async` there.

use std::ffi::{c_char, c_void};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;
use serde::Deserialize;
use serde_json::{json, Value};

use super::util::*;
use crate::error::{Error, Result, Status};
use crate::events::EventFn;
use crate::plugins::host::{CallError, CallOptions, Config};
use crate::plugins::install::{codes, InstallError};
use crate::service::{CapabilityCall, ChangeError, Offer, PluginService};

/// A plugin host over one plugins directory. Opaque; created by
/// `qc_plugin_host_new`, released by `qc_plugin_host_free`.
pub struct qc_plugin_host {
    _private: [u8; 0],
}

/// A capability request. `request_json` (borrowed for the call) is
/// `{"id":N,"plugin":ID,"capability":NAME,"params":…}`; `request_id` is the
/// same `N`. Answer it with `qc_plugin_host_respond(host, request_id, …)` from
/// any thread, inside the callback or later; unanswered requests are answered
/// with an error by the library after `hostRequestTimeoutMs`.
pub type qc_plugin_capability_fn = Option<
    unsafe extern "C" fn(user_data: *mut c_void, request_id: u64, request_json: *const c_char),
>;

static HOSTS: Lazy<HandleTable<PluginService>> = Lazy::new(HandleTable::new);

pub(crate) fn entry(h: *const qc_plugin_host) -> Result<Arc<PluginService>> {
    HOSTS.get(h as usize)
}

/// The status of a plugins directory error (see the module docs).
fn install_status(e: &InstallError) -> Status {
    match e.code {
        codes::NOT_FOUND => Status::NotFound,
        codes::INVALID_ID | codes::INVALID_CONFIG => Status::InvalidArgument,
        codes::IO => Status::Io,
        _ => Status::Refused,
    }
}

/// A failure with its JSON form, written to `error_json` by [`with_json_error`].
enum Failure {
    Plain(Error),
    Json(Error, Value),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Plain(e)
    }
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        let json = e.to_json();
        Failure::Json(e.into_error(), json)
    }
}

impl From<ChangeError> for Failure {
    fn from(e: ChangeError) -> Failure {
        match e {
            ChangeError::Install(e) => e.into(),
            ChangeError::Reload(e) => Failure::Plain(e),
        }
    }
}

impl From<InstallError> for Failure {
    fn from(e: InstallError) -> Failure {
        let json = e.to_json();
        Failure::Json(Error::new(install_status(&e), e.to_string()), json)
    }
}

/// [`boundary`] for functions with an `error_json` out-parameter.
fn with_json_error(
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
    f: impl FnOnce() -> std::result::Result<(), Failure>,
) -> qc_status {
    if !error_json.is_null() {
        // SAFETY: the caller passes a writable `char **` or NULL.
        unsafe { *error_json = std::ptr::null_mut() };
    }
    boundary(error, || match f() {
        Ok(()) => Ok(()),
        Err(Failure::Plain(e)) => Err(e),
        Err(Failure::Json(e, json)) => {
            if !error_json.is_null() {
                // SAFETY: as above.
                unsafe { *error_json = to_c_string(json.to_string()) };
            }
            Err(e)
        }
    })
}

fn parse_json(ptr: *const c_char, name: &str) -> Result<Value> {
    let s = str_arg(ptr, name)?;
    serde_json::from_str(s).map_err(|e| Error::invalid_json(format!("{name} is not JSON: {e}")))
}

/// `options_json` of the call functions: `{cwd?, timeoutMs?}` (NULL = none).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallOptionsJson {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

fn call_options(ptr: *const c_char) -> Result<CallOptions> {
    let Some(s) = opt_str_arg(ptr, "options_json")? else {
        return Ok(CallOptions::default());
    };
    let o: CallOptionsJson = serde_json::from_str(s)
        .map_err(|e| Error::invalid_json(format!("invalid options_json: {e}")))?;
    let timeout = match o.timeout_ms {
        None => None,
        Some(ms @ 1..=3_600_000) => Some(Duration::from_millis(ms)),
        Some(_) => {
            return Err(Error::invalid_argument(
                "options_json.timeoutMs must be between 1 and 3600000",
            ))
        }
    };
    Ok(CallOptions {
        cwd: o.cwd,
        timeout,
    })
}

/// The arguments of `_call`, `_call_async` and `_call_queued`, checked before anything runs.
struct CallArgs {
    plugin: String,
    tool: String,
    params: Value,
    options: CallOptions,
}

fn call_args(
    plugin_id: *const c_char,
    tool: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
) -> Result<CallArgs> {
    Ok(CallArgs {
        plugin: str_arg(plugin_id, "plugin_id")?.to_string(),
        tool: str_arg(tool, "tool")?.to_string(),
        params: if params_json.is_null() {
            json!({})
        } else {
            parse_json(params_json, "params_json")?
        },
        options: call_options(options_json)?,
    })
}

/// Creates a plugin host over a plugins directory; no plugin runs until its
/// first call (or `qc_plugin_host_startup_finished`).
///
/// `config_json` (nullable, borrowed) is a JSON object, every field
/// optional: `pluginsDir` (default `$QWEN_HOME/companion/plugins`, else
/// `~/.qwen/companion/plugins`), `node` (path or name in PATH, default
/// `node`), `nodeIsElectron` (run it with `ELECTRON_RUN_AS_NODE=1`),
/// `callTimeoutMs` (30000; 50..3600000), `maxMessageBytes` (16 MiB; a
/// plugin message over it fails `too_large`), `startTimeoutMs` (10000),
/// `killGraceMs` (2000), `probeTimeoutMs` (1000), `hostRequestTimeoutMs`
/// (30000: how long a capability request waits for the host),
/// `workspaceRoot` (`context.cwd` of calls that give none), and the
/// crash-loop breaker `crashLoopMaxExits` (3; 0 = never) within
/// `crashLoopWindowMs` (60000), `restartBackoffMs` (1000: first delay
/// before a crashed `onStartupFinished` plugin is started again, doubled per
/// recent crash; 0 = only the next call starts it) and `replyPollUs` (200;
/// 0..10000: how long a call polls for the plugin's reply before its thread
/// sleeps — a fast reply is seen without a thread wakeup, a slow one costs
/// at most this much CPU; 0 = never poll). Unknown fields are refused
/// (`QC_INVALID_JSON`); values out of range give `QC_INVALID_ARGUMENT`.
/// On success `*out` receives a handle owned by the caller: release it with
/// `qc_plugin_host_free`. Starts the host's callback thread.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_new(
    config_json: *const c_char,
    out: *mut *mut qc_plugin_host,
    error: *mut *mut c_char,
) -> qc_status {
    HOSTS.create(config_json, out, error, |json| {
        PluginService::new(Config::from_json(json)?)
    })
}

/// Releases a plugin host: ends every plugin process (with all its
/// descendants), answers waiting capability requests with an error, joins
/// the callback thread (unless called from inside one of its own callbacks:
/// the thread then ends after that callback returns) and finalizes every
/// callback's `user_data`. `_call_async` calls still running complete with
/// `{"ok":false,"error":{"kind":"host",…}}` on the callback thread first.
/// A plugin MCP server started with `qc_plugin_host_mcp_start` is stopped
/// first (its lock file removed), as is a view server
/// (`qc_plugin_host_views_start`). NULL is a no-op returning `QC_OK`; an unknown or already freed handle
/// gives `QC_INVALID_HANDLE`. Calls running on other threads finish first
/// (they fail with `host`).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_free(h: *mut qc_plugin_host) -> qc_status {
    HOSTS.destroy(h, |e| e.shutdown())
}

/// `*out` receives the plugins directory in use, as an absolute path
/// (owned; free with `qc_string_free`).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_plugins_dir(
    h: *const qc_plugin_host,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out, "out")?;
        let e = entry(h)?;
        write_string(out, e.plugins_dir().to_string_lossy().into_owned())
    })
}

/// Re-reads the plugins directory: new plugins appear, removed ones are
/// ended and forgotten, an updated (re-installed or edited) or disabled one
/// is ended so its next call runs the new version. Blocks until the ended
/// processes are gone.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_reload(
    h: *mut qc_plugin_host,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || entry(h)?.host().reload())
}

/// Starts every enabled plugin that declares the `onStartupFinished`
/// activation event (concurrently) and waits for the starts. `*out_json`
/// (owned) receives one entry per such plugin, sorted by id:
/// `[{"plugin":ID,"ok":true}, {"plugin":ID,"ok":false,"error":{"kind",…}}]`.
/// A failed start is reported there, not as a status.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_startup_finished(
    h: *mut qc_plugin_host,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let e = entry(h)?;
        Ok(Value::Array(
            e.host()
                .startup_finished()
                .into_iter()
                .map(|(id, r)| match r {
                    Ok(()) => json!({"plugin": id, "ok": true}),
                    Err(err) => json!({"plugin": id, "ok": false, "error": err.to_json()}),
                })
                .collect(),
        ))
    })
}

/// Ends the process of plugin `id` (borrowed) and all its descendants; its
/// next call starts it again. Not running is fine. An unknown id fails
/// `not_found` (`QC_NOT_FOUND`, `*error_json` as in the module docs).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_unload(
    h: *mut qc_plugin_host,
    id: *const c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        let e = entry(h)?;
        let id = str_arg(id, "id")?;
        Ok(e.host().unload(id)?)
    })
}

/// Enables plugin `id` (borrowed; persisted in the plugins directory's
/// state) and clears its crash-loop breaker. `QC_NOT_FOUND` for an unknown id.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_enable(
    h: *mut qc_plugin_host,
    id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || entry(h)?.host().enable(str_arg(id, "id")?))
}

/// Disables plugin `id` (borrowed; persisted) and ends its process; its
/// calls then fail `disabled`. `QC_NOT_FOUND` for an unknown id.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_disable(
    h: *mut qc_plugin_host,
    id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || entry(h)?.host().disable(str_arg(id, "id")?))
}

/// Sets the configuration value `key` of plugin `id` (persisted; later
/// calls see it in `context.config`). `value_json` (borrowed) is a JSON
/// value of the entry's type; `null` removes the value (the default applies
/// again). `QC_NOT_FOUND` for an unknown plugin or a key its manifest does
/// not declare, `QC_INVALID_ARGUMENT` for a value of the wrong type,
/// `QC_INVALID_JSON` for text that is not JSON.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_set_config_value(
    h: *mut qc_plugin_host,
    id: *const c_char,
    key: *const c_char,
    value_json: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let id = str_arg(id, "id")?;
        let key = str_arg(key, "key")?;
        let value = parse_json(value_json, "value_json")?;
        e.host().set_config_value(id, key, value)
    })
}

/// Installs the plugin at `src_path` (borrowed): a folder, or a `.zip` file
/// (recognised by its content) with `manifest.json` at its root, validated
/// before anything is replaced. An installed version of the same id is
/// replaced atomically (its data folder is kept); the host is then reloaded
/// (a running old version is ended). `*out_json` (owned) receives the
/// plugin's summary: `{"id","name","version","description","tools":
/// [{"name","modelVisible"}],…,"replaced","previousVersion","warnings"}`.
/// On failure the plugins directory is unchanged and `*error_json` gets
/// `{"code","message","problems"?}` (see the module docs).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_install(
    h: *mut qc_plugin_host,
    src_path: *const c_char,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let e = entry(h)?;
        let src = str_arg(src_path, "src_path")?;
        let summary = e.install(Path::new(src))?;
        Ok(write_json(out_json, &summary)?)
    })
}

/// Uninstalls plugin `id` (borrowed): ends its process and removes its
/// files; with `remove_data` non-zero also its data folder and its state
/// (enabled flag, configuration), otherwise they are kept for a later
/// re-install. `*out_json` (owned) receives `{"id","dataRemoved"}`.
/// Failures as for `qc_plugin_host_install` (e.g. code `not_found`).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_uninstall(
    h: *mut qc_plugin_host,
    id: *const c_char,
    remove_data: i32,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let e = entry(h)?;
        let id = str_arg(id, "id")?;
        let summary = e.uninstall(id, remove_data != 0)?;
        Ok(write_json(out_json, &summary)?)
    })
}

/// `*out_json` (owned) receives every installed plugin, sorted by id:
/// `[{"id","name","version","enabled","tools":[{"name","modelVisible"}],…,
/// "manifest":{…},"lastError":null|{"message","at"}}]` (document-parser
/// tools are listed with `modelVisible: false`; `manifest` is the installed,
/// validated `manifest.json` object as its author wrote it; `lastError` is
/// the crash-loop breaker's reason when it disabled the plugin, else the
/// last unexpected exit or failed start, `at` in unix ms, kept while the
/// host lives). A plugin
/// whose installed manifest no longer validates is listed as `{"id",
/// "enabled","tools":[],"error":{"code":"broken_plugin",…}}`. Failures (a
/// corrupt state file, I/O) as for `qc_plugin_host_install`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_list(
    h: *const qc_plugin_host,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let list = entry(h)?.list()?;
        Ok(write_json(out_json, &list)?)
    })
}

/// Calls `tool` of plugin `plugin_id` and waits for its answer (the plugin
/// is started first if it does not run). All strings are borrowed.
/// `params_json` is the arguments object (NULL = `{}`), checked against the
/// tool's `parameters` schema before the plugin sees it. `options_json`
/// (nullable) is `{"cwd":DIR,"timeoutMs":N}` (both optional: `cwd` is the
/// call's `context.cwd`, default the config's `workspaceRoot`; `timeoutMs`
/// 1..3600000 overrides `callTimeoutMs`). On success `*out_json` (owned)
/// receives `{"content":[…],"details":…}` (`details` only when the plugin
/// gave one). A failed call gives the status of its kind and `*error_json`
/// `{"kind",…}` (see the module docs). Must not be called on a library
/// runtime thread (fails `host`); see the module docs about callbacks.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_call(
    h: *mut qc_plugin_host,
    plugin_id: *const c_char,
    tool: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let e = entry(h)?;
        let a = call_args(plugin_id, tool, params_json, options_json)?;
        let out = e
            .host()
            .call_tool(&a.plugin, &a.tool, a.params, a.options)?;
        Ok(write_json(out_json, &out.to_json())?)
    })
}

/// Starts a call like `qc_plugin_host_call` and returns at once. `on_done`
/// (required) runs exactly once, on the host's callback thread, with
/// `{"ok":true,"result":{"content":[…],"details":…}}` or
/// `{"ok":false,"error":{"kind",…}}` (borrowed for the call); then
/// `free_user_data` (nullable) runs. Arguments are checked first: on a
/// failure status nothing runs and the library does not take `user_data`
/// (`free_user_data` is not called). Freeing the host makes a running call
/// complete at once with kind `host`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_call_async(
    h: *mut qc_plugin_host,
    plugin_id: *const c_char,
    tool: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    on_done: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let Some(f) = on_done else {
            return Err(Error::new(Status::NullParameter, "on_done is NULL"));
        };
        let a = call_args(plugin_id, tool, params_json, options_json)?;
        let ud = UserData::new(user_data, free_user_data);
        e.call_async(a.plugin, a.tool, a.params, a.options, move |doc| {
            let json = callback_cstring(&doc.to_string());
            // SAFETY: host callback with its own user_data; the string lives for the call.
            unsafe { f(ud.ptr(), json.as_ptr()) };
            drop(ud);
        })
    })
}

/// Starts a call like `qc_plugin_host_call_async`, for pull mode (hosts
/// that cannot take a callback on a library thread): its completion is
/// queued as the event `{"type":"call_done","callId":N,"ok":true,"result":
/// {"content":[…],"details":…}}` or `{"type":"call_done","callId":N,
/// "ok":false,"error":{"kind",…}}`, and `*out_call_id` receives `N` (unique
/// in the process, never 0). Capability requests the plugin makes during
/// the call are queued as usual, so the host answers them while the call
/// runs. `QC_REFUSED` when pull mode is not enabled; argument failures as
/// for `qc_plugin_host_call_async` (nothing is started). Freeing the host
/// ends a running call without an event.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_call_queued(
    h: *mut qc_plugin_host,
    plugin_id: *const c_char,
    tool: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    out_call_id: *mut u64,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out_call_id, || {
        let e = entry(h)?;
        if !e.pulling() {
            return Err(Error::new(
                Status::Refused,
                "pull mode is not enabled (qc_plugin_host_enable_events)",
            ));
        }
        let a = call_args(plugin_id, tool, params_json, options_json)?;
        e.call_queued(a.plugin, a.tool, a.params, a.options)
    })
}

/// Whether the session action of plugin `plugin_id` shows for the session
/// folder `cwd` (both borrowed): calls its `sessionAction.visibleTool` with
/// `{}` and `context.cwd = cwd`, and writes its `details.visible` to `*out`
/// (1 or 0; 1 when the plugin declares no `visibleTool`). Failures as for
/// `qc_plugin_host_call`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_visible(
    h: *mut qc_plugin_host,
    plugin_id: *const c_char,
    cwd: *const c_char,
    out: *mut i32,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out, "out")?;
        let e = entry(h)?;
        let visible = e
            .host()
            .visible(str_arg(plugin_id, "plugin_id")?, str_arg(cwd, "cwd")?)?;
        // SAFETY: checked non-NULL above.
        unsafe { out.write(visible as i32) };
        Ok(())
    })
}

/// The options of the `select` configuration entry `config_id` of plugin
/// `plugin_id` (both borrowed): `*out_json` (owned) receives an array,
/// "Auto" (`{"value":<default>,"label":"Auto"}`) first, then what the
/// entry's `optionsTool` returned in `details.options`. Failures as for
/// `qc_plugin_host_call`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_options(
    h: *mut qc_plugin_host,
    plugin_id: *const c_char,
    config_id: *const c_char,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let e = entry(h)?;
        let options = e.host().options(
            str_arg(plugin_id, "plugin_id")?,
            str_arg(config_id, "config_id")?,
        )?;
        Ok(write_json(out_json, &options)?)
    })
}

/// Parses a dropped file with the enabled plugin whose `documentParsers`
/// lists `mime` (borrowed): `data` is `len` bytes (borrowed; NULL with `len`
/// 0 is an empty file), sent to the parser tool as base64. `*out_json`
/// (owned) receives `{"success":true,"text":…}` or
/// `{"success":false,"reason":…}`. No parser for `mime` fails `not_found`;
/// other failures as for `qc_plugin_host_call`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_parse_document(
    h: *mut qc_plugin_host,
    mime: *const c_char,
    data: *const u8,
    len: usize,
    out_json: *mut *mut c_char,
    error_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    with_json_error(error_json, error, || {
        out_arg(out_json, "out_json")?;
        let e = entry(h)?;
        let mime = str_arg(mime, "mime")?;
        let bytes: &[u8] = if data.is_null() {
            if len != 0 {
                return Err(Error::new(Status::NullParameter, "data is NULL").into());
            }
            &[]
        } else if len > isize::MAX as usize {
            return Err(Error::invalid_argument("len is too large").into());
        } else {
            // SAFETY: the caller passes `len` readable bytes at `data`.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        let parsed = e.host().parse_document(mime, bytes)?;
        Ok(write_json(out_json, &parsed.to_json())?)
    })
}

/// Sets (or with `cb` NULL removes) the event callback. It runs on the
/// host's callback thread with one JSON event (borrowed for the call):
/// `{"type":"plugin_started","plugin","pid"}`,
/// `{"type":"plugin_exit","plugin","code","signal","expected","stderrTail"}`
/// (`expected` is true when the host ended it),
/// `{"type":"plugin_disabled","plugin","reason"}` (crash-loop breaker),
/// `{"type":"ui_push","plugin","channel","payload"}` (in the order the
/// plugin sent them; while the host does not take its events, only the
/// newest per plugin and channel waits, and past 256 waiting channels or
/// 8 MiB the library reads no more from that plugin until the host catches
/// up), or `{"type":"views_changed"}` (the views or panels
/// of the enabled plugins changed; see `qc_plugin_host_views_json`). Not called in pull mode. The previous callback's
/// `user_data` is finalized. On failure the library does not take
/// `user_data`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_set_event_callback(
    h: *mut qc_plugin_host,
    cb: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let cb = json_callback::<Value>(cb, user_data, free_user_data);
        e.set_event_callback(cb.map(|f| {
            let f: Arc<EventFn> = Arc::new(move |v: &Value| f(v));
            f
        }));
        Ok(())
    })
}

/// Sets (or with `cb` NULL removes) the log callback: lines up to
/// `max_level` (`QC_LOG_ERROR`..`QC_LOG_TRACE`) about plugin starts, exits,
/// stray frames and so on, on the callback thread; the library prints
/// nothing itself. If more than 4096 lines wait, newer ones are dropped. The
/// previous callback's `user_data` is finalized. On failure the library does
/// not take `user_data`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_set_log_callback(
    h: *mut qc_plugin_host,
    cb: qc_log_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        e.set_log_callback(log_sink(cb, user_data, free_user_data, max_level)?);
        Ok(())
    })
}

fn capability_name<'a>(name: *const c_char) -> Result<&'a str> {
    let name = str_arg(name, "name")?;
    if name.is_empty() {
        return Err(Error::invalid_argument("name is empty"));
    }
    Ok(name)
}

/// Offers capability `name` (borrowed, e.g. `show_notification`) to plugins,
/// answered by `cb`; with `cb` NULL the host's handler is removed and the
/// library default applies again (`show_notification`: `{"shown":false,
/// "reason":"unsupported"}`; `render_pdf`: the library renders the Markdown
/// to a PDF; any other name: refused with `host_error`). `cb` runs on the
/// host's callback thread (see `qc_plugin_capability_fn`); each request
/// must be answered with `qc_plugin_host_respond`. Plugins need the
/// manifest permission `notifications` for `show_notification`. Replacing
/// or removing a callback answers the requests it left waiting with an
/// error and finalizes the old `user_data`. Not called in pull mode (the
/// requests are queued). On failure the library does not take `user_data`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_set_capability_callback(
    h: *mut qc_plugin_host,
    name: *const c_char,
    cb: qc_plugin_capability_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let name = capability_name(name)?;
        let ud = UserData::new(user_data, free_user_data);
        let offer: Option<Offer> = cb.map(|f| {
            let call: Arc<CapabilityCall> = Arc::new(move |id: u64, request: &Value| {
                let json = callback_cstring(&request.to_string());
                // SAFETY: host callback with its own user_data; the string lives for the call.
                unsafe { f(ud.ptr(), id, json.as_ptr()) }
            });
            Some(call)
        });
        e.offer_capability(name, offer);
        Ok(())
    })
}

/// Offers capability `name` (borrowed) without a callback, for pull mode:
/// its requests are queued as `host_request` events (see
/// `qc_plugin_host_next_event`). Outside pull mode they are refused with
/// `host_error`. Remove the offer with `qc_plugin_host_set_capability_callback(h,
/// name, NULL, …)`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_offer_capability(
    h: *mut qc_plugin_host,
    name: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        e.offer_capability(capability_name(name)?, Some(None));
        Ok(())
    })
}

/// Answers capability request `request_id` (from a capability callback, or
/// the `id` of a pulled `host_request` event in pull mode), from any thread,
/// at any time before the request times out. With `error_message`
/// (borrowed) non-NULL the plugin gets `host_error` with it; otherwise it
/// gets `host_response` with `result_json` (borrowed JSON; NULL = `null`).
/// `QC_INVALID_JSON` for a bad `result_json` (the request stays waiting);
/// `QC_NOT_FOUND` for an unknown, already answered or timed-out id.
/// After `qc_plugin_host_enable_events` ids refer to pulled events only.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_respond(
    h: *mut qc_plugin_host,
    request_id: u64,
    result_json: *const c_char,
    error_message: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let failure = opt_str_arg(error_message, "error_message")?;
        let result = match failure {
            Some(_) => None,
            None if result_json.is_null() => Some(Value::Null),
            None => Some(parse_json(result_json, "result_json")?),
        };
        let answer = match (failure, result) {
            (Some(m), _) => Err(m.to_string()),
            (None, r) => Ok(r.unwrap_or(Value::Null)),
        };
        e.respond(request_id, answer)
    })
}

/// In pull mode (after `qc_plugin_host_enable_events`), delivers this object's log
/// lines up to `max_level` (`QC_LOG_ERROR` 1 .. `QC_LOG_TRACE` 5; 0 turns
/// them off) as events `{"type":"log","level":N,"message":"…"}` from
/// `qc_plugin_host_next_event`, in place of a log callback (this replaces one set with
/// `qc_plugin_host_set_log_callback`, and setting a callback later replaces the
/// events). For hosts that may not be called on a library thread (LuaJIT).
/// At most 256 log lines wait; past that the oldest is dropped and counted
/// (`callbackQueue.pulled.droppedLogs` of `qc_plugin_host_stats`), so log
/// lines never crowd out the object's own events. `QC_REFUSED` outside pull
/// mode.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_enable_log_events(
    h: *mut qc_plugin_host,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        entry(h)?.enable_log_events(log_events_level(max_level)?)
    })
}

/// Switches the host to pull mode, for hosts that must never be called on
/// a library thread (LuaJIT, single-threaded loops): from now on no event
/// or capability callback runs; events and capability requests are queued.
/// `*out_fd` receives the event handle, owned by the library (do not close
/// it; valid until `qc_plugin_host_free`), that is ready while events wait
/// — a readable file descriptor on Linux and macOS, an event HANDLE on
/// Windows (`(HANDLE)(intptr_t)*out_fd`; see the conventions at the top):
/// watch it, then call `qc_plugin_host_next_event` until it gives NULL.
/// Calling it again returns the same handle. Log and `_call_async`
/// callbacks still run on the callback thread.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_enable_events(
    h: *mut qc_plugin_host,
    out_fd: *mut i32,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out_fd, || entry(h)?.enable_events())
}

/// Takes the next queued event (pull mode). `*out_json` receives an owned
/// JSON object (free with `qc_string_free`), or NULL when none waits: the
/// events of `qc_plugin_host_set_event_callback`, and capability requests
/// `{"type":"host_request","id":N,"plugin","capability","params"}` to answer
/// with `qc_plugin_host_respond(h, N, …)` (a request whose plugin stopped
/// waiting is skipped). At most 1024 events wait; beyond that events are
/// dropped (logged) and requests refused; `ui_push`es are coalesced as for
/// the event callback (the newest per plugin and channel waits). `QC_REFUSED` when pull mode is
/// not enabled.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_next_event(
    h: *mut qc_plugin_host,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out_json, "out_json")?;
        let event = entry(h)?.next_event()?;
        write_optional_json(out_json, event);
        Ok(())
    })
}

/// `*out_json` (owned) receives the counters of plugin `plugin_id`
/// (borrowed), for debugging: `{"starts","unexpectedExits","invalidLines",
/// "unknownReplies","duplicateReplies","lateReplies","ignoredMessages",
/// "internalMessages","fdsClosed","hostRequests","uiPushes","timeouts",
/// "kills","running","disabledReason","callbackQueue"}`, where
/// `callbackQueue` is the host's (shared by its plugins):
/// `{"waiting","coalesced","refused","droppedLogs"}` of the callback thread
/// (`coalesced`: `ui_push`es replaced by a newer one on the same plugin and
/// channel before the host took them; `refused`: events dropped and requests
/// answered with an error because 4096 were waiting), plus in pull mode
/// `"pulled": {"waiting","coalesced","refused"}`. `QC_NOT_FOUND` for an
/// unknown id.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_stats(
    h: *const qc_plugin_host,
    plugin_id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let e = entry(h)?;
        let id = str_arg(plugin_id, "plugin_id")?;
        let mut stats = e.host().stats(id).ok_or_else(|| {
            Error::new(
                Status::NotFound,
                format!("no plugin with id {id:?} is installed"),
            )
        })?;
        stats["callbackQueue"] = e.callback_stats();
        Ok(stats)
    })
}
