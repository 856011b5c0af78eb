//! Tools and schemas: `tools[]` (names, `parameters` checked against the
//! JSON Schema meta-schema and compiled once, annotations) and
//! `documentParsers[]` with their implied hidden tools.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::super::{DocumentParser, ToolAnnotations, ToolSpec};
use super::*;

/// The implied `parameters` of a document-parser tool that `tools[]` does
/// not declare: the host calls it with the dropped file as base64.
pub fn parser_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "base64": { "type": "string" } },
        "required": ["base64"]
    })
}

/// Compiles a tool's `parameters` (already meta-validated). A panic inside
/// the schema crate is turned into an error: a plugin's schema must never
/// take the host down.
pub(super) fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    match catch_unwind(AssertUnwindSafe(|| jsonschema::validator_for(schema))) {
        Ok(Ok(v)) => Ok(Arc::new(v)),
        Ok(Err(e)) => Err(format!("the schema cannot be compiled: {e}")),
        Err(_) => Err("the schema cannot be compiled (the validator failed internally)".into()),
    }
}

/// Every meta-schema violation of `schema` as (pointer inside the schema, message).
pub(super) fn meta_errors(schema: &Value) -> Vec<(String, String)> {
    let run = || -> Vec<(String, String)> {
        match jsonschema::meta::validator_for(schema) {
            Ok(meta) => meta
                .iter_errors(schema)
                .map(|e| (e.instance_path().as_str().to_string(), e.to_string()))
                .collect(),
            Err(e) => vec![("/$schema".to_string(), format!("unsupported $schema: {e}"))],
        }
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|_| {
        vec![(
            String::new(),
            "the schema cannot be checked against its meta-schema".into(),
        )]
    })
}

pub(super) fn parse_tools(
    cx: &mut Cx,
    obj: &Map<String, Value>,
) -> (Vec<ToolSpec>, HashSet<String>) {
    let mut tools = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "tools")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/tools", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let name = cx.req_str(o, &base, "name");
        let name_path = pointer(&base, "name");
        if let Some(n) = &name {
            if !is_tool_name(n) {
                cx.err(&name_path, tool_name_error(n));
            } else if let Some(j) = seen.get(n) {
                cx.err(
                    &name_path,
                    format!("duplicate tool name {n:?} (already used by /tools/{j})"),
                );
            } else {
                seen.insert(n.clone(), i);
            }
        }
        let summary = cx.opt_str(o, &base, "summary");
        let description = cx.opt_str(o, &base, "description");
        let params_path = pointer(&base, "parameters");
        let parameters = match o.get("parameters") {
            None => {
                cx.err(
                    &params_path,
                    format!("{params_path} is required: a JSON Schema with \"type\": \"object\""),
                );
                None
            }
            Some(Value::Object(p)) => {
                let schema = Value::Object(p.clone());
                let mut ok = true;
                if p.get("type") != Some(&Value::String("object".into())) {
                    cx.err(
                        &pointer(&params_path, "type"),
                        "the parameters schema must have \"type\": \"object\"",
                    );
                    ok = false;
                }
                for (sub, msg) in meta_errors(&schema) {
                    cx.err(
                        &format!("{params_path}{sub}"),
                        format!("invalid JSON Schema: {msg}"),
                    );
                    ok = false;
                }
                ok.then_some(schema)
            }
            Some(other) => {
                cx.wrong_type(&params_path, "an object (a JSON Schema)", other);
                None
            }
        };
        let validator = parameters.as_ref().and_then(|s| match compile(s) {
            Ok(v) => Some(v),
            Err(m) => {
                cx.err(&params_path, m);
                None
            }
        });
        let render_as = cx.opt_str(o, &base, "renderAs");
        if let Some(r) = &render_as {
            if !KNOWN_RENDER_AS.contains(&r.as_str()) {
                cx.warn(
                    &pointer(&base, "renderAs"),
                    format!(
                        "unknown renderAs {r:?} (known: {}); the result is shown as text",
                        KNOWN_RENDER_AS.join(", ")
                    ),
                );
            }
        }
        let annotations = o
            .get("annotations")
            .and_then(|a| parse_annotations(cx, a, &pointer(&base, "annotations")));
        if let (Some(name), Some(parameters), Some(validator)) = (name, parameters, validator) {
            tools.push(ToolSpec {
                name,
                summary,
                description,
                parameters,
                validator,
                render_as,
                annotations,
                model_visible: true,
            });
        }
    }
    (tools, seen.into_keys().collect())
}

pub(super) fn parse_annotations(cx: &mut Cx, v: &Value, base: &str) -> Option<ToolAnnotations> {
    let o = cx.as_object(v, base)?;
    let mut a = ToolAnnotations::default();
    for (k, v) in o {
        let path = pointer(base, k);
        let slot = match k.as_str() {
            "readOnlyHint" => &mut a.read_only,
            "destructiveHint" => &mut a.destructive,
            "idempotentHint" => &mut a.idempotent,
            "openWorldHint" => &mut a.open_world,
            _ => {
                cx.err(
                    &path,
                    format!("unknown annotation {k:?} (allowed: readOnlyHint, destructiveHint, idempotentHint, openWorldHint)"),
                );
                continue;
            }
        };
        match v {
            Value::Bool(b) => *slot = Some(*b),
            other => cx.wrong_type(&path, "a boolean", other),
        }
    }
    Some(a)
}

pub(super) fn parse_document_parsers(cx: &mut Cx, obj: &Map<String, Value>) -> Vec<DocumentParser> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "documentParsers")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/documentParsers", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let mime = cx.req_str(o, &base, "mimeType").and_then(|m| {
            let path = pointer(&base, "mimeType");
            if let Some(e) = mime_error(&m) {
                cx.err(&path, e);
                return None;
            }
            let lower = m.to_ascii_lowercase();
            if let Some(j) = seen.get(&lower) {
                cx.err(
                    &path,
                    format!("duplicate mimeType {m:?} (already handled by /documentParsers/{j})"),
                );
                return None;
            }
            seen.insert(lower.clone(), i);
            Some(lower)
        });
        let tool = cx.req_str(o, &base, "toolName").and_then(|t| {
            if is_tool_name(&t) {
                Some(t)
            } else {
                cx.err(&pointer(&base, "toolName"), tool_name_error(&t));
                None
            }
        });
        if let (Some(mime_type), Some(tool_name)) = (mime, tool) {
            out.push(DocumentParser {
                mime_type,
                tool_name,
            });
        }
    }
    out
}
