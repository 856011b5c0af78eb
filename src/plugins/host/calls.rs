//! `call_tool` and the helpers built on it (`visible`, `options`,
//! `parse_document`), lazy start and unload.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::instance::{kind_of, Instance, Reply};
use super::{CallError, Counters, ErrorKind, PluginEvent, PluginSlot, Shared};
use crate::host::LogLevel;
use crate::plugins::manifest::{ConfigKind, ToolSpec};

/// Per-call options.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// `context.cwd` (default: the host's `workspaceRoot`).
    pub cwd: Option<String>,
    /// Overrides `callTimeoutMs` for this call.
    pub timeout: Option<Duration>,
}

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Value>,
    pub details: Option<Value>,
}

impl ToolOutput {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"content": self.content});
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// What a document parser returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedDocument {
    Text(String),
    Failed(String),
}

impl ParsedDocument {
    pub fn to_json(&self) -> Value {
        match self {
            ParsedDocument::Text(t) => json!({"success": true, "text": t}),
            ParsedDocument::Failed(r) => json!({"success": false, "reason": r}),
        }
    }
}

fn validate(plugin: &str, tool: &ToolSpec, params: &Value) -> Result<(), CallError> {
    if tool.validator.is_valid(params) {
        return Ok(());
    }
    let errors: Vec<(String, String)> = tool
        .validator
        .iter_errors(params)
        .map(|e| {
            let path = e.instance_path().to_string();
            (path, e.to_string())
        })
        .collect();
    let list = errors
        .iter()
        .map(|(p, m)| format!("{}: {m}", if p.is_empty() { "(root)" } else { p }))
        .collect::<Vec<_>>()
        .join("; ");
    let mut e = CallError::new(
        ErrorKind::Schema,
        format!(
            "the arguments for {plugin}/{} do not match its parameters: {list}",
            tool.name
        ),
    );
    e.schema_errors = errors;
    Err(e)
}

/// The slot's running instance, or a fresh one (one start at a time). The
/// start runs in its own task: a caller that gives up (its timeout) does
/// not abort it half-way, so every spawned process ends up in the slot,
/// where unload and shutdown find it.
pub(crate) async fn ensure_instance(
    shared: &Arc<Shared>,
    slot: &Arc<PluginSlot>,
) -> Result<Arc<Instance>, CallError> {
    {
        let guard = slot.instance.lock().await;
        if let Some(i) = guard.as_ref() {
            if !i.is_dead() {
                return Ok(i.clone());
            }
        }
    }
    let (shared, slot) = (shared.clone(), slot.clone());
    let task = tokio::spawn(async move {
        let mut guard = slot.instance.clone().lock_owned().await;
        if let Some(i) = guard.as_ref() {
            if !i.is_dead() {
                return Ok(i.clone());
            }
        }
        if shared.closing.is_cancelled() {
            return Err(CallError::new(
                ErrorKind::Host,
                "the plugin host is shut down",
            ));
        }
        check_runnable(&slot)?;
        let inst = match Instance::start(&shared, &slot).await {
            Ok(i) => i,
            Err(e) => {
                slot.set_last_error(format!("start failed: {e}"));
                return Err(e);
            }
        };
        *guard = Some(inst.clone());
        drop(guard);
        let pid = inst.child.pid();
        shared.log(LogLevel::Info, || {
            format!("plugin {} started (pid {pid})", slot.id)
        });
        shared.emit(PluginEvent::Started {
            plugin: slot.id.clone(),
            pid,
        });
        Ok(inst)
    });
    task.await.unwrap_or_else(|e| {
        Err(CallError::new(
            ErrorKind::Host,
            format!("start failed: {e}"),
        ))
    })
}

fn check_runnable(slot: &PluginSlot) -> Result<(), CallError> {
    if !slot.entry().enabled {
        return Err(CallError::new(
            ErrorKind::Disabled,
            format!("the plugin {} is disabled", slot.id),
        ));
    }
    if let Some(reason) = slot.breaker() {
        return Err(CallError::new(
            ErrorKind::Disabled,
            format!(
                "the plugin {} was disabled because {reason}; enable it again to retry",
                slot.id
            ),
        ));
    }
    Ok(())
}

/// Ends the slot's instance gracefully (if one runs).
pub(crate) async fn unload_slot(shared: &Arc<Shared>, slot: &Arc<PluginSlot>) {
    let inst = slot.instance.lock().await.take();
    if let Some(inst) = inst {
        inst.stop(shared.settings.kill_grace).await;
    }
}

pub(crate) async fn call_tool(
    shared: &Arc<Shared>,
    plugin_id: &str,
    tool: &str,
    params: Value,
    options: CallOptions,
) -> Result<ToolOutput, CallError> {
    let slot = shared.slot(plugin_id)?;
    let entry = slot.entry();
    check_runnable(&slot)?;
    let spec = entry.manifest.tool(tool).ok_or_else(|| {
        CallError::new(
            ErrorKind::UnknownTool,
            format!("the plugin {plugin_id} has no tool named {tool:?}"),
        )
    })?;
    validate(plugin_id, spec, &params)?;
    let cwd = options
        .cwd
        .unwrap_or_else(|| shared.settings.workspace_root.clone());
    let timeout = options.timeout.unwrap_or(shared.settings.call_timeout);
    let mut context = Map::new();
    context.insert("cwd".into(), Value::String(cwd));
    if let Some(config) = entry.manifest.effective_config(&entry.config) {
        context.insert("config".into(), Value::Object(config));
    }
    let request_id = shared.request_ids.next_id();
    let msg = json!({
        "type": "call_tool",
        "requestId": request_id,
        "toolName": tool,
        "params": params,
        "context": context,
    });
    let deadline = tokio::time::Instant::now() + timeout;
    let inst = tokio::time::timeout_at(deadline, ensure_instance(shared, &slot))
        .await
        .map_err(|_| timeout_error(plugin_id, tool, timeout, "it was still starting"))??;
    let rx = inst.expect(&request_id);
    // A caller that drops this future (an MCP client's cancellation) gives
    // the request up: its late reply is counted as late, nothing waits.
    let _abandon = AbandonOnDrop {
        inst: &inst,
        request_id: &request_id,
    };
    let outcome = tokio::select! {
        // A reply that arrived wins over an exit seen at the same time.
        biased;
        r = async {
            if let Err(e) = inst.send(&msg).await {
                // Dead channel: the exit (or its absence) decides the error.
                tokio::select! {
                    _ = inst.dead.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                if inst.dead.is_cancelled() {
                    return Err(inst.failure());
                }
                return Err(CallError::new(
                    ErrorKind::Exited,
                    format!("cannot write to the plugin {plugin_id}: {e}"),
                ));
            }
            match await_reply(rx, shared.settings.reply_poll).await {
                Some(reply) => Ok(reply),
                None => {
                    inst.dead.cancelled().await;
                    Err(inst.failure())
                }
            }
        } => Some(r),
        _ = inst.dead.cancelled() => Some(Err(inst.failure())),
        _ = tokio::time::sleep_until(deadline) => None,
    };
    match outcome {
        Some(Ok(Reply::Result { content, details })) => Ok(ToolOutput { content, details }),
        Some(Ok(Reply::ToolError(m))) => {
            let mut e = CallError::new(
                ErrorKind::ToolError,
                format!("{plugin_id}/{tool} failed: {m}"),
            );
            e.plugin_message = Some(m);
            Err(e)
        }
        Some(Ok(Reply::Protocol(m))) => Err(CallError::new(
            ErrorKind::Protocol,
            format!("the plugin {plugin_id} answered {tool} wrongly: {m}"),
        )),
        Some(Err(e)) => {
            inst.abandon(&request_id);
            Err(e)
        }
        None => {
            inst.abandon(&request_id);
            Counters::bump(&slot.counters.timeouts);
            // Slow or stuck? Node answers the probe only if its loop runs.
            let alive = inst
                .probe(shared.settings.probe_timeout)
                .await
                .unwrap_or(false);
            let what = if alive {
                "the plugin is still running".to_string()
            } else if inst.dead.is_cancelled() {
                "the plugin has exited".to_string()
            } else {
                let e = timeout_error(
                    plugin_id,
                    tool,
                    timeout,
                    "its event loop was blocked, so it was stopped",
                );
                inst.kill(e, &slot.counters);
                "its event loop did not respond, so it was stopped; the next call starts it again"
                    .to_string()
            };
            Err(timeout_error(plugin_id, tool, timeout, &what))
        }
    }
}

/// Waits for a call's reply, polling for it first for up to `poll`.
///
/// A task that awaits the reply at once sleeps, and so does its worker
/// thread when it has nothing else to do; on an idle machine (above all a
/// virtual one) waking a sleeping thread again costs tens of microseconds
/// each time — as much as a fast plugin takes to answer. Polling, the task
/// yields between checks, so the worker keeps polling the I/O driver
/// (where the reply arrives) and runs every other task in between; a reply
/// within `poll` is seen without the sleep and the wakeup. A slower one
/// costs at most `poll` of CPU, then the task sleeps as usual. `None`: the
/// reply's sender is gone (the plugin's channel closed).
/// (`QC_MBENCH_REPLY_POLL_US=0 bench/run.sh` measures the MCP round trip
/// without it.)
async fn await_reply(
    mut rx: tokio::sync::oneshot::Receiver<Reply>,
    poll: Duration,
) -> Option<Reply> {
    use tokio::sync::oneshot::error::TryRecvError;
    if !poll.is_zero() {
        let until = std::time::Instant::now() + poll;
        loop {
            match rx.try_recv() {
                Ok(reply) => return Some(reply),
                // The receiver is spent: it must not be awaited.
                Err(TryRecvError::Closed) => return None,
                Err(TryRecvError::Empty) if std::time::Instant::now() < until => {
                    tokio::task::yield_now().await
                }
                Err(TryRecvError::Empty) => break,
            }
        }
    }
    rx.await.ok()
}

/// Abandons a pending request when dropped (a no-op once it was answered).
struct AbandonOnDrop<'a> {
    inst: &'a Instance,
    request_id: &'a str,
}

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        self.inst.abandon(self.request_id);
    }
}

fn timeout_error(plugin: &str, tool: &str, timeout: Duration, what: &str) -> CallError {
    CallError::new(
        ErrorKind::Timeout,
        format!(
            "{plugin}/{tool} did not answer within {} ms ({what})",
            timeout.as_millis()
        ),
    )
}

fn details<'a>(out: &'a ToolOutput, plugin: &str, tool: &str) -> Result<&'a Value, CallError> {
    out.details
        .as_ref()
        .filter(|d| d.is_object())
        .ok_or_else(|| {
            CallError::new(
                ErrorKind::Protocol,
                format!("{plugin}/{tool} returned no details object"),
            )
        })
}

pub(crate) async fn visible(
    shared: &Arc<Shared>,
    plugin_id: &str,
    cwd: &str,
) -> Result<bool, CallError> {
    let slot = shared.slot(plugin_id)?;
    let manifest = slot.entry().manifest;
    let action = manifest.session_action.as_ref().ok_or_else(|| {
        CallError::new(
            ErrorKind::UnknownTool,
            format!("the plugin {plugin_id} declares no sessionAction"),
        )
    })?;
    let Some(tool) = action.visible_tool.clone() else {
        return Ok(true);
    };
    let out = call_tool(
        shared,
        plugin_id,
        &tool,
        json!({}),
        CallOptions {
            cwd: Some(cwd.to_string()),
            timeout: None,
        },
    )
    .await?;
    match details(&out, plugin_id, &tool)?.get("visible") {
        Some(Value::Bool(b)) => Ok(*b),
        other => Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "{plugin_id}/{tool}: details.visible must be a boolean, got {}",
                other.map_or("nothing", kind_of)
            ),
        )),
    }
}

pub(crate) async fn options(
    shared: &Arc<Shared>,
    plugin_id: &str,
    config_id: &str,
) -> Result<Vec<Value>, CallError> {
    let slot = shared.slot(plugin_id)?;
    let manifest = slot.entry().manifest;
    let entry = manifest
        .configuration
        .iter()
        .find(|c| c.id == config_id)
        .ok_or_else(|| {
            CallError::new(
                ErrorKind::NotFound,
                format!("the plugin {plugin_id} declares no configuration entry {config_id:?}"),
            )
        })?;
    let ConfigKind::Select { options_tool } = &entry.kind else {
        return Err(CallError::new(
            ErrorKind::NotFound,
            format!(
                "configuration entry {config_id:?} of {plugin_id} is a {} entry, not a select",
                entry.kind.name()
            ),
        ));
    };
    let auto = json!({"value": entry.default_value, "label": "Auto"});
    let Some(tool) = options_tool.clone() else {
        return Ok(vec![auto]);
    };
    let out = call_tool(shared, plugin_id, &tool, json!({}), CallOptions::default()).await?;
    let bad = |why: String| {
        CallError::new(
            ErrorKind::Protocol,
            format!("{plugin_id}/{tool}: details.options {why}"),
        )
    };
    let list = match details(&out, plugin_id, &tool)?.get("options") {
        Some(Value::Array(a)) => a.clone(),
        other => {
            return Err(bad(format!(
                "must be an array, got {}",
                other.map_or("nothing", kind_of)
            )))
        }
    };
    let mut result = vec![auto];
    for (i, o) in list.into_iter().enumerate() {
        let (Some(value), Some(Value::String(label))) = (o.get("value"), o.get("label")) else {
            return Err(bad(format!(
                "[{i}] must be an object with a value and a string label"
            )));
        };
        if !value.is_string() {
            return Err(bad(format!("[{i}].value must be a string")));
        }
        if *value == entry.default_value {
            continue; // the host's "Auto" already stands for it
        }
        result.push(json!({"value": value, "label": label}));
    }
    Ok(result)
}

/// `type/subtype` lowercased, parameters (`; charset=…`) dropped.
fn essence(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

pub(crate) async fn parse_document(
    shared: &Arc<Shared>,
    mime: &str,
    bytes: &[u8],
) -> Result<ParsedDocument, CallError> {
    let want = essence(mime);
    let mut found = None;
    let mut ids: Vec<_> = shared.slots();
    ids.sort_by(|a, b| a.id.cmp(&b.id));
    for slot in ids {
        if check_runnable(&slot).is_err() {
            continue;
        }
        let m = slot.entry().manifest;
        if let Some(p) = m
            .document_parsers
            .iter()
            .find(|p| essence(&p.mime_type) == want)
        {
            found = Some((slot.id.clone(), p.tool_name.clone()));
            break;
        }
    }
    let (plugin_id, tool) = found.ok_or_else(|| {
        CallError::new(
            ErrorKind::NotFound,
            format!("no enabled plugin parses documents of type {want:?}"),
        )
    })?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let out = call_tool(
        shared,
        &plugin_id,
        &tool,
        json!({"base64": b64}),
        CallOptions {
            cwd: Some(String::new()),
            timeout: None,
        },
    )
    .await?;
    let d = details(&out, &plugin_id, &tool)?;
    let bad = |why: &str| {
        CallError::new(
            ErrorKind::Protocol,
            format!("{plugin_id}/{tool}: details {why}"),
        )
    };
    match (d.get("success"), d.get("text"), d.get("reason")) {
        (Some(Value::Bool(true)), Some(Value::String(t)), _) => Ok(ParsedDocument::Text(t.clone())),
        (Some(Value::Bool(true)), _, _) => Err(bad("has success: true but no string text")),
        (Some(Value::Bool(false)), _, Some(Value::String(r))) => {
            Ok(ParsedDocument::Failed(r.clone()))
        }
        (Some(Value::Bool(false)), _, _) => Err(bad("has success: false but no string reason")),
        _ => Err(bad("must have a boolean success")),
    }
}

#[cfg(test)]
mod tests;
