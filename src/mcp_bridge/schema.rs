//! A plugin tool as Qwen Code 0.24.4 wants it in `tools/list`, and the
//! per-tool check that keeps one bad tool from emptying the whole server.
//!
//! ## What the CLI does with a listed tool (verified in its bundle)
//! - `tools/list` is parsed with the MCP SDK's `ListToolsResultSchema`
//!   (zod). Per tool: `name` a string; `title`, `description` optional
//!   strings; `inputSchema` an object whose `type` is the literal
//!   `"object"`, whose `properties` (optional) is an object and whose
//!   `required` (optional) is an array of strings; `annotations` optional,
//!   with `title` a string and the four hints booleans; `outputSchema` an
//!   object with an optional string `$schema`; `_meta` an object; `icons`
//!   an array of `{src: string, …}`. **One tool failing this fails the
//!   whole page**: `discoverToolsWithMetadata` catches the error and the
//!   server has no tools at all. Then `McpCallableTool.initialize` throws
//!   on a duplicate tool name, with the same effect. [`check_listed_tool`]
//!   mirrors these rules (plus our own naming rules) and
//!   [`tools_list`] leaves out a failing tool with a logged reason.
//! - Discovery copies `inputSchema` unchanged into the tool's parameter
//!   schema. Before a call the CLI validates the model's arguments with Ajv
//!   (`SchemaValidator.validate`, `strictSchema: false`, ajv-formats, so
//!   `format` **is** enforced): with the 2020-12 dialect only when
//!   `$schema` is exactly `https://json-schema.org/draft/2020-12/schema`
//!   (`getValidator`), else draft-07. A schema that does not compile makes
//!   it skip the check. Invalid arguments never reach us.
//! - The OpenAI-compatible provider path drops `$schema`, `$id` and
//!   `uniqueItems` from the copy it sends the model
//!   (`relaxSchemaForFunctionCalling`), and a schema with a root `$id` is
//!   never "validated locally" there. The Anthropic path **skips a tool with
//!   an empty description**. The deferred-tool list shows the first line of
//!   the description, cut to 160 characters (`MAX_DEFERRED_TOOL_DESC_LEN`).
//!
//! ## So, from the manifest to the listed tool ([`mcp_tool`])
//! - `inputSchema` = the manifest's `parameters` with two changes
//!   ([`input_schema`]): **`$schema` is set to the 2020-12 URI when the
//!   manifest has none**, because the host validates a schema without
//!   `$schema` as 2020-12 and the CLI's Ajv would read it as draft-07 (a
//!   `$schema` the manifest names is kept as written; for a draft other than
//!   07 and 2020-12 the CLI skips its own check and the host's validation
//!   remains). **A root `$id` is removed** (same-document `$ref`s written
//!   against it are rewritten to `#…`): Ajv keeps every compiled `$id` in one
//!   process-wide instance, so the second compile of a schema with that id
//!   — the next tool with the same id, or the same tool after a reconnect —
//!   throws "already exists" and silently turns the CLI's check off.
//!   Nothing else is touched: `format`, `uniqueItems`, `default` etc. keep
//!   their meaning for both validators and are information for the model.
//! - `description` = the manifest's description; else its summary; else a
//!   sentence naming the tool and plugin — never empty. `title` = summary.
//! - `annotations` ([`annotations`]): `title` = summary; `readOnlyHint` as
//!   the manifest says, else `false`. For a tool that is not read-only,
//!   `destructiveHint` and `idempotentHint` are the manifest's values, else
//!   `true` and `false` (the MCP defaults, conservative); for a read-only
//!   tool they are passed only when the manifest gives them (MCP gives them
//!   meaning only for tools that write). `openWorldHint` as the manifest
//!   says, else `true`. What the CLI does with them: `readOnlyHint: true`
//!   makes the call kind "read" (run in parallel with other reads; no
//!   confirmation is skipped); the hints feed the AUTO-mode classifier; and
//!   `canSafelyReplay` replays a call cut off by a lost connection only for
//!   a `trust: true` server in a trusted folder whose tool says
//!   `idempotentHint: true`, or `readOnlyHint: true` without
//!   `destructiveHint: true` / `idempotentHint: false`. A plugin tool that
//!   declares nothing is therefore never replayed.
//! - `_meta["qwen-companion/plugin"] = {id, tool}` so a reader of the list
//!   can tell where a tool comes from (the CLI ignores unknown `_meta`).

use serde_json::{json, Map, Value};

use super::naming::{cli_registered_name, tool_budget, Assignment};
use crate::plugins::manifest::{ToolAnnotations, ToolSpec};

/// The dialect the host validates a schema without `$schema` in.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// A plugin's tool with what the listing needs to know about its plugin.
#[derive(Debug, Clone, Copy)]
pub struct ToolSource<'a> {
    pub plugin_id: &'a str,
    pub plugin_name: &'a str,
    pub spec: &'a ToolSpec,
}

/// The `inputSchema` for a manifest's `parameters` (rules in the module docs).
pub fn input_schema(parameters: &Value) -> Value {
    let mut schema = parameters.clone();
    let Some(obj) = schema.as_object_mut() else {
        return schema;
    };
    if !obj.contains_key("$schema") {
        obj.insert("$schema".into(), Value::from(DRAFT_2020_12));
    }
    if let Some(Value::String(id)) = obj.remove("$id") {
        let base = id.trim_end_matches('#').to_string();
        rewrite_refs(&mut schema, &base);
    }
    schema
}

/// Rewrites `$ref: "<base>#frag"` (and `"<base>"`) to `"#frag"` (`"#"`).
fn rewrite_refs(v: &mut Value, base: &str) {
    match v {
        Value::Object(o) => {
            for (k, child) in o.iter_mut() {
                if k == "$ref" {
                    if let Value::String(r) = child {
                        if let Some(rest) = r.strip_prefix(base) {
                            if rest.is_empty() || rest.starts_with('#') {
                                *r = if rest.is_empty() {
                                    "#".to_string()
                                } else {
                                    rest.to_string()
                                };
                            }
                        }
                    }
                } else {
                    rewrite_refs(child, base);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| rewrite_refs(c, base)),
        _ => {}
    }
}

/// The tool's description for the model: never empty (rules in the module docs).
pub fn description(src: &ToolSource) -> String {
    let nonblank = |s: &Option<String>| s.as_ref().filter(|s| !s.trim().is_empty()).cloned();
    nonblank(&src.spec.description)
        .or_else(|| nonblank(&src.spec.summary))
        .unwrap_or_else(|| {
            format!(
                "The {} tool of the {} plugin ({}).",
                src.spec.name, src.plugin_name, src.plugin_id
            )
        })
}

/// MCP `annotations` for a tool (rules in the module docs).
pub fn annotations(a: Option<&ToolAnnotations>, title: Option<&str>) -> Value {
    let a = a.copied().unwrap_or_default();
    let read_only = a.read_only.unwrap_or(false);
    let mut out = Map::new();
    if let Some(t) = title {
        out.insert("title".into(), Value::from(t));
    }
    out.insert("readOnlyHint".into(), Value::from(read_only));
    if read_only {
        if let Some(d) = a.destructive {
            out.insert("destructiveHint".into(), Value::from(d));
        }
        if let Some(i) = a.idempotent {
            out.insert("idempotentHint".into(), Value::from(i));
        }
    } else {
        out.insert(
            "destructiveHint".into(),
            Value::from(a.destructive.unwrap_or(true)),
        );
        out.insert(
            "idempotentHint".into(),
            Value::from(a.idempotent.unwrap_or(false)),
        );
    }
    out.insert(
        "openWorldHint".into(),
        Value::from(a.open_world.unwrap_or(true)),
    );
    Value::Object(out)
}

/// The `tools/list` entry of a plugin tool named `mcp_name`.
pub fn mcp_tool(src: &ToolSource, mcp_name: &str) -> Value {
    let summary = src.spec.summary.as_deref().filter(|s| !s.trim().is_empty());
    let mut tool = json!({
        "name": mcp_name,
        "description": description(src),
        "inputSchema": input_schema(&src.spec.parameters),
        "annotations": annotations(src.spec.annotations.as_ref(), summary),
        "_meta": { "qwen-companion/plugin": { "id": src.plugin_id, "tool": src.spec.name } },
    });
    if let Some(s) = summary {
        tool["title"] = Value::from(s);
    }
    tool
}

/// Why the CLI would reject `tool` in a `tools/list` result of server
/// `server` (or rename it), if it would. Mirrors the SDK's `ToolSchema`
/// (see the module docs) and adds: a name valid as is under the CLI's
/// naming rule, a non-empty description (the Anthropic path drops a tool
/// without one).
pub fn check_listed_tool(tool: &Value, server: &str) -> Result<(), String> {
    let obj = tool.as_object().ok_or("the tool is not an object")?;
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => return Err("\"name\" must be a non-empty string".into()),
    };
    if name.len() > tool_budget(server)
        || cli_registered_name(server, name) != format!("mcp__{server}__{name}")
    {
        return Err(format!(
            "the name {name:?} would be renamed by Qwen Code (characters outside A-Za-z0-9_- or too long)"
        ));
    }
    for key in ["title", "description"] {
        if !matches!(obj.get(key), None | Some(Value::String(_))) {
            return Err(format!("\"{key}\" must be a string"));
        }
    }
    match obj.get("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => {}
        _ => return Err("\"description\" must not be empty".into()),
    }
    let schema = match obj.get("inputSchema") {
        Some(Value::Object(s)) => s,
        _ => return Err("\"inputSchema\" must be an object".into()),
    };
    if schema.get("type") != Some(&Value::from("object")) {
        return Err("\"inputSchema.type\" must be \"object\"".into());
    }
    if !matches!(schema.get("properties"), None | Some(Value::Object(_))) {
        return Err("\"inputSchema.properties\" must be an object".into());
    }
    match schema.get("required") {
        None => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        _ => return Err("\"inputSchema.required\" must be an array of strings".into()),
    }
    if let Some(out) = obj.get("outputSchema") {
        let o = out
            .as_object()
            .ok_or("\"outputSchema\" must be an object")?;
        if !matches!(o.get("$schema"), None | Some(Value::String(_))) {
            return Err("\"outputSchema.$schema\" must be a string".into());
        }
    }
    if let Some(a) = obj.get("annotations") {
        let a = a.as_object().ok_or("\"annotations\" must be an object")?;
        if !matches!(a.get("title"), None | Some(Value::String(_))) {
            return Err("\"annotations.title\" must be a string".into());
        }
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            if !matches!(a.get(hint), None | Some(Value::Bool(_))) {
                return Err(format!("\"annotations.{hint}\" must be a boolean"));
            }
        }
    }
    if !matches!(obj.get("_meta"), None | Some(Value::Object(_))) {
        return Err("\"_meta\" must be an object".into());
    }
    if let Some(icons) = obj.get("icons") {
        let ok = icons
            .as_array()
            .is_some_and(|a| a.iter().all(|i| i.get("src").is_some_and(Value::is_string)));
        if !ok {
            return Err("\"icons\" must be an array of {src: string}".into());
        }
    }
    Ok(())
}

/// The `tools/list` result's tools for `sources` (model-visible tools only;
/// hidden document-parser tools are skipped), named by `names` for server
/// `server`. A tool without a name in `names`, one failing
/// [`check_listed_tool`], or a second tool of the same name is left out and
/// `left_out` is told why (plugin id, tool, reason).
pub fn tools_list(
    sources: &[ToolSource],
    names: &Assignment,
    server: &str,
    mut left_out: impl FnMut(&str, &str, &str),
) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for src in sources.iter().filter(|s| s.spec.model_visible) {
        let Some(name) = names.name_of(src.plugin_id, &src.spec.name) else {
            left_out(src.plugin_id, &src.spec.name, "the tool has no MCP name");
            continue;
        };
        let tool = mcp_tool(src, name);
        if let Err(why) = check_listed_tool(&tool, server) {
            left_out(src.plugin_id, &src.spec.name, &why);
            continue;
        }
        if !seen.insert(name.to_string()) {
            left_out(
                src.plugin_id,
                &src.spec.name,
                &format!("the name {name:?} is listed already (the CLI would drop every tool)"),
            );
            continue;
        }
        out.push(tool);
    }
    out
}

#[cfg(test)]
mod tests;
