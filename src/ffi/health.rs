//! `qc_health_json`: the health report every editor shows (see
//! [`crate::health`]).

use std::ffi::c_char;

use super::companion::{companion, qc_companion};
use super::plugins::{entry, qc_plugin_host};
use super::sessions::{participant, qc_participant};
use super::util::*;
use crate::health::{self, Options, Parts};

/// `*out_json` receives the health report (owned; free with
/// `qc_string_free`): `{"library": {"version", "abi", "platform"},
/// "cli", "tested": {"qwen", "gemini", "node"}, "checks": [{"id", "status",
/// "summary", "detail"?, …}]}`, the checks in this order: `library`, `qwen`,
/// `gemini`, `node`, `lock_file` (every discovery file: `files` is
/// `{"qwen": path | null, "gemini": path | null}`), `clis`, `plugin_mcp`,
/// `participant`; `status` is `ok`, `warn`, `error` or `off` (that part is
/// not in use: its handle is NULL, or the CLI is not served).
/// Show each check as one line with its status, `detail` below it.
///
/// `options_json` (borrowed, may be NULL): `{"qwen": "<name or path>",
/// "gemini": "<name or path>", "cli": "qwen" | "gemini" | "both", "node":
/// "<name or path>", "path": "<PATH to search>"}`, each optional (`cli`
/// defaults to the CLIs `c` serves, else `qwen`; only the CLIs in it are run
/// and checked; the programs default to `qwen`, `gemini`, `node` — searched
/// like the plugin host's `node`
/// setting: `PATH`, the login shell's `PATH`, the usual install folders —
/// and this process's `PATH`). `c`, `h` and `p` are borrowed and may each be
/// NULL; `h` reports its plugin MCP server and the `settings.json` entries
/// (user, and the workspace's project settings) that start its bridge.
///
/// Blocks while it runs `qwen --version` / `gemini --version` and `node
/// --version` (each at most
/// 5 s; typically well under a second): call it from a thread that may
/// wait, never from inside a library callback. `QC_REFUSED` on a library
/// runtime thread; `QC_INVALID_JSON` for bad `options_json` (unknown keys
/// included); `QC_INVALID_ARGUMENT` for an unknown `cli`.
#[no_mangle]
pub unsafe extern "C" fn qc_health_json(
    options_json: *const c_char,
    c: *const qc_companion,
    h: *const qc_plugin_host,
    p: *const qc_participant,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let options = Options::from_json(opt_str_arg(options_json, "options_json")?)?;
        crate::runtime::refuse_on_runtime("qc_health_json")?;
        let companion = if c.is_null() {
            None
        } else {
            Some(companion(c)?)
        };
        let plugins = if h.is_null() { None } else { Some(entry(h)?) };
        let participant = if p.is_null() {
            None
        } else {
            Some(participant(p)?)
        };
        Ok(health::report(
            &options,
            QC_ABI_VERSION,
            &Parts {
                companion: companion.as_deref(),
                plugins: plugins.as_deref(),
                participant: participant.as_deref(),
            },
        ))
    })
}
