//! `host_request`: a plugin asks the host for a capability
//! (`show_notification`, `render_pdf`, or whatever the embedding host
//! registered). Every request gets exactly one answer — `host_response` or
//! `host_error` — also when no handler exists, the handler never answers
//! (timeout), drops the request, or the host shuts down.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};

use super::instance::{kind_of, Instance};
use super::{lock, PluginSlot, Shared};
use crate::error::{Error, Result, Status};
use crate::host::LogLevel;

/// A capability request as the embedding host's handler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRequest {
    /// Answer with [`super::PluginHost::respond`] when the handler returned
    /// [`HostAnswer::Later`].
    pub id: u64,
    /// The plugin that asks; `None` when Qwen Code asks through the plugin
    /// MCP server (an editor tool, see [`super::PluginHost::ask`]).
    pub plugin_id: Option<String>,
    pub capability: String,
    pub params: Value,
}

impl HostRequest {
    /// `{id, plugin, from, capability, params}` (what a pull-mode host
    /// receives): `plugin` is the plugin id and `from` `"plugin"`, or
    /// `plugin` is `null` and `from` `"mcp"` for an editor tool's call.
    pub fn to_json(&self) -> Value {
        let from = if self.plugin_id.is_some() {
            "plugin"
        } else {
            "mcp"
        };
        json!({"id": self.id, "plugin": self.plugin_id, "from": from,
            "capability": self.capability, "params": self.params})
    }
}

/// A handler's immediate outcome.
pub enum HostAnswer {
    /// The answer now: `Ok(result)` or `Err(message)` (→ `host_error`).
    Now(std::result::Result<Value, String>),
    /// The host answers later through `respond(id, …)`, from any thread,
    /// before `hostRequestTimeoutMs`.
    Later,
}

/// A capability handler. It runs on a blocking-pool thread, never under a
/// library lock; keep it short (post UI work and answer `Later`).
pub type CapabilityFn = dyn Fn(&HostRequest) -> HostAnswer + Send + Sync;

/// The capability that needs a manifest permission: `show_notification`
/// needs `notifications`, the editor's tools (`editor_*`) need `editor`.
fn required_permission(capability: &str) -> Option<&'static str> {
    match capability {
        "show_notification" => Some("notifications"),
        c if c.starts_with(EDITOR_PREFIX) => Some("editor"),
        _ => None,
    }
}

/// The prefix of the editor's own capabilities (diagnostics, open file, …),
/// which the plugin MCP server also serves to Qwen Code as tools.
pub const EDITOR_PREFIX: &str = "editor_";

/// The library's `render_pdf` (Markdown → PDF), run on a blocking thread.
fn default_render_pdf(params: &Value) -> std::result::Result<Value, String> {
    crate::plugins::pdf::render_pdf_request(params)
}

pub(crate) fn respond(
    shared: &Shared,
    id: u64,
    answer: std::result::Result<Value, String>,
) -> Result<()> {
    let (_, tx) = lock(&shared.host_requests).remove(&id).ok_or_else(|| {
        Error::new(
            Status::NotFound,
            format!("no pending host request with id {id} (answered, timed out or cancelled)"),
        )
    })?;
    tx.send(answer).map_err(|_| {
        Error::new(
            Status::NotFound,
            format!("host request {id} is no longer waited for"),
        )
    })
}

/// Answers every waiting request with `message` (shutdown).
pub(crate) fn fail_all(shared: &Shared, message: &str) {
    let waiting: Vec<_> = lock(&shared.host_requests).drain().collect();
    for (_, (_, tx)) in waiting {
        let _ = tx.send(Err(message.to_string()));
    }
}

/// Answers the waiting requests of one capability with `message` (its
/// handler was removed or replaced).
pub(crate) fn fail_capability(shared: &Shared, capability: &str, message: &str) {
    let waiting: Vec<HostAnswerTxOf> = {
        let mut map = lock(&shared.host_requests);
        let ids: Vec<u64> = map
            .iter()
            .filter(|(_, (c, _))| c == capability)
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter().filter_map(|id| map.remove(&id)).collect()
    };
    for (_, tx) in waiting {
        let _ = tx.send(Err(message.to_string()));
    }
}

type HostAnswerTxOf = (
    String,
    tokio::sync::oneshot::Sender<std::result::Result<Value, String>>,
);

/// Runs the capability and returns its outcome.
async fn run(
    shared: &Arc<Shared>,
    slot: &PluginSlot,
    inst: &Instance,
    capability: &str,
    params: Value,
) -> std::result::Result<Value, String> {
    let manifest = slot.entry().manifest;
    if let Some(p) = required_permission(capability) {
        if !manifest.has_permission(p) {
            return Err(format!(
                "the plugin {} may not use {capability}: its manifest does not declare the \"{p}\" permission",
                manifest.id
            ));
        }
    }
    ask(
        shared,
        Some(&manifest.id),
        capability,
        params,
        Some(&inst.closing),
    )
    .await
}

/// Removes a waiting request's entry however its wait ends (answer,
/// timeout, or the waiting future dropped by a cancelled caller).
struct Waiting<'a>(&'a Shared, u64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.0.host_requests).remove(&self.1);
    }
}

/// Asks the embedding host's handler of `capability` (or the library
/// default) on behalf of `plugin` (`None`: Qwen Code through the plugin MCP
/// server) and waits for the answer, at most `hostRequestTimeoutMs`, until
/// `stop` (the asking plugin is stopping) or the host shuts down.
pub(crate) async fn ask(
    shared: &Arc<Shared>,
    plugin: Option<&str>,
    capability: &str,
    params: Value,
    stop: Option<&tokio_util::sync::CancellationToken>,
) -> std::result::Result<Value, String> {
    let handler = lock(&shared.capabilities).get(capability).cloned();
    let Some(handler) = handler else {
        return match capability {
            "show_notification" => Ok(json!({"shown": false, "reason": "unsupported"})),
            "render_pdf" => tokio::task::spawn_blocking(move || default_render_pdf(&params))
                .await
                .unwrap_or_else(|_| Err("render_pdf failed unexpectedly".into())),
            other => Err(format!("the host does not offer the capability {other:?}")),
        };
    };
    let mut params = params;
    if let Some(plugin) = plugin {
        for l in shared.listeners() {
            l.decorate_request(plugin, capability, &mut params);
        }
    }
    let id = shared.next_host_request.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = tokio::sync::oneshot::channel();
    lock(&shared.host_requests).insert(id, (capability.to_string(), tx));
    let _waiting = Waiting(shared, id);
    let request = HostRequest {
        id,
        plugin_id: plugin.map(str::to_string),
        capability: capability.to_string(),
        params,
    };
    let sh = shared.clone();
    let immediate = tokio::task::spawn_blocking(move || {
        match catch_unwind(AssertUnwindSafe(|| handler(&request))) {
            Ok(HostAnswer::Now(r)) => {
                let _ = respond(&sh, request.id, r);
            }
            Ok(HostAnswer::Later) => {}
            Err(_) => {
                let _ = respond(
                    &sh,
                    request.id,
                    Err("the host's handler failed".to_string()),
                );
            }
        }
    });
    drop(immediate);
    let limit = shared.settings.host_request_timeout;
    let stopping = async {
        match stop {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = tokio::time::timeout(limit, rx) => match r {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err("the host dropped the request without answering".to_string()),
            Err(_) => Err(format!(
                "the host did not answer {capability} within {} ms",
                limit.as_millis()
            )),
        },
        _ = stopping => Err("the plugin is being stopped".to_string()),
        _ = shared.closing.cancelled() => Err("the plugin host is shutting down".to_string()),
    }
}

/// Handles one `host_request` frame in its own task.
pub(crate) fn spawn_host_request(
    shared: Arc<Shared>,
    slot: Arc<PluginSlot>,
    inst: Arc<Instance>,
    msg: Value,
) {
    let Some(request_id) = msg
        .get("requestId")
        .and_then(Value::as_str)
        .map(String::from)
    else {
        shared.log(LogLevel::Warn, || {
            format!(
                "plugin {}: host_request without a string requestId ignored",
                inst.plugin_id
            )
        });
        return;
    };
    inst.host_tasks.fetch_add(1, Ordering::AcqRel);
    tokio::spawn(async move {
        let outcome = match msg.get("capability") {
            Some(Value::String(c)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                run(&shared, &slot, &inst, c, params).await
            }
            other => Err(format!(
                "host_request.capability must be a string, got {}",
                other.map_or("nothing", kind_of)
            )),
        };
        let reply = match outcome {
            Ok(result) => {
                json!({"type": "host_response", "requestId": request_id, "result": result})
            }
            Err(message) => {
                json!({"type": "host_error", "requestId": request_id, "message": message})
            }
        };
        if let Err(e) = inst.send(&reply).await {
            shared.log(LogLevel::Debug, || {
                format!(
                    "plugin {}: could not deliver the host_request answer: {e}",
                    inst.plugin_id
                )
            });
        }
        inst.host_tasks.fetch_sub(1, Ordering::AcqRel);
    });
}
