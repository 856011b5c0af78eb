//! UI contributions: `views[]`, `configuration[]`, `commands[]` and
//! `menus` items, and `keybindings[]`.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::super::{ConfigEntry, ConfigKind, Keybinding, ViewSpec};
use super::*;

pub(super) fn parse_views(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    root: Option<&Path>,
) -> Vec<ViewSpec> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "views")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/views", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let id = cx.req_str(o, &base, "id").and_then(|id| {
            let path = pointer(&base, "id");
            if !is_view_id(&id) {
                cx.err(
                    &path,
                    format!("{id:?} is not a valid view id: 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"),
                );
                return None;
            }
            if let Some(j) = seen.get(&id) {
                cx.err(&path, format!("duplicate view id {id:?} (already used by /views/{j})"));
                return None;
            }
            seen.insert(id.clone(), i);
            Some(id)
        });
        let title = cx.opt_str(o, &base, "title");
        let icon = cx.opt_str(o, &base, "icon");
        let entry = cx.req_str(o, &base, "entry");
        let entry_ok = entry
            .as_deref()
            .and_then(|e| file_field(cx, root, &pointer(&base, "entry"), e));
        let width = match o.get("width") {
            None => Some(None),
            Some(w) => match w
                .as_u64()
                .filter(|n| *n > 0)
                .and_then(|n| u32::try_from(n).ok())
            {
                Some(n) => Some(Some(n)),
                None => {
                    cx.err(
                        &pointer(&base, "width"),
                        format!("expected a positive integer (pixels) at {base}/width, found {w}"),
                    );
                    None
                }
            },
        };
        if let (Some(id), Some(entry), Some(_), Some(width)) = (id, entry, entry_ok, width) {
            out.push(ViewSpec {
                id,
                title,
                icon,
                entry,
                width,
            });
        }
    }
    out
}

pub(super) fn parse_configuration(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<ConfigEntry> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "configuration")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/configuration", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let id = cx.req_str(o, &base, "id").and_then(|id| {
            let path = pointer(&base, "id");
            if id.trim().is_empty() {
                cx.err(&path, "the configuration id must not be empty");
                return None;
            }
            if let Some(j) = seen.get(&id) {
                cx.err(
                    &path,
                    format!(
                        "duplicate configuration id {id:?} (already used by /configuration/{j})"
                    ),
                );
                return None;
            }
            seen.insert(id.clone(), i);
            Some(id)
        });
        let label = cx.opt_str(o, &base, "label");
        let description = cx.opt_str(o, &base, "description");
        let options_tool = cx.opt_str(o, &base, "optionsTool");
        let type_path = pointer(&base, "type");
        let kind = cx.req_str(o, &base, "type").and_then(|t| match t.as_str() {
            "select" => Some(ConfigKind::Select {
                options_tool: options_tool.clone(),
            }),
            "boolean" => Some(ConfigKind::Boolean),
            "string" => Some(ConfigKind::String),
            "number" => Some(ConfigKind::Number),
            _ => {
                cx.err(
                    &type_path,
                    format!(
                        "unknown configuration type {t:?} (use select, boolean, string or number)"
                    ),
                );
                None
            }
        });
        let opt_path = pointer(&base, "optionsTool");
        match (&kind, &options_tool) {
            (Some(ConfigKind::Select { .. }), Some(t)) => names_tool(cx, &opt_path, t),
            (Some(ConfigKind::Select { .. }), None) => cx.warn(
                &opt_path,
                "a select without optionsTool offers only the host's \"Auto\" option (the default value)",
            ),
            (Some(k), Some(_)) => cx.err(
                &opt_path,
                format!("optionsTool applies only to type \"select\", not {:?}", k.name()),
            ),
            _ => {}
        }
        let default_path = pointer(&base, "defaultValue");
        let default_value = match o.get("defaultValue") {
            None => {
                cx.missing(&default_path);
                None
            }
            Some(d) => match &kind {
                Some(k) if k.accepts(d) => Some(d.clone()),
                Some(k) => {
                    let expected = match k {
                        ConfigKind::Boolean => "a boolean",
                        ConfigKind::Number => "a number",
                        _ => "a string",
                    };
                    cx.err(
                        &default_path,
                        format!(
                            "expected {expected} at {default_path} (the entry's type is {}), found {}",
                            k.name(),
                            json_kind(d)
                        ),
                    );
                    None
                }
                None => None,
            },
        };
        if let (Some(id), Some(kind), Some(default_value)) = (id, kind, default_value) {
            out.push(ConfigEntry {
                id,
                label,
                description,
                kind,
                default_value,
            });
        }
    }
    out
}

/// `{tool, title?, icon?}` items of the array `obj[key]`, reported under `base/key`.
pub(super) fn parse_items(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    key: &str,
    base: &str,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut out = Vec::new();
    let arr_path = pointer(base, key);
    let arr = match obj.get(key) {
        None => return out,
        Some(Value::Array(a)) => a,
        Some(other) => {
            cx.wrong_type(&arr_path, "an array", other);
            return out;
        }
    };
    for (i, v) in arr.iter().enumerate() {
        let ib = at(&arr_path, i);
        let Some(o) = cx.as_object(v, &ib) else {
            continue;
        };
        let tool = cx.req_str(o, &ib, "tool");
        if let Some(t) = &tool {
            names_tool(cx, &pointer(&ib, "tool"), t);
        }
        let title = cx.opt_str(o, &ib, "title");
        let icon = cx.opt_str(o, &ib, "icon");
        if let Some(tool) = tool {
            out.push((tool, title, icon));
        }
    }
    out
}

pub(super) fn parse_keybindings(
    cx: &mut Cx,
    obj: &Map<String, Value>,
    names_tool: &dyn Fn(&mut Cx, &str, &str),
) -> Vec<Keybinding> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, v) in cx
        .opt_array(obj, "", "keybindings")
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = at("/keybindings", i);
        let Some(o) = cx.as_object(v, &base) else {
            continue;
        };
        let command = cx.req_str(o, &base, "command");
        if let Some(c) = &command {
            names_tool(cx, &pointer(&base, "command"), c);
        }
        let key = cx.req_str(o, &base, "key").and_then(|k| {
            let path = pointer(&base, "key");
            if let Some(e) = key_error(&k) {
                cx.err(&path, e);
                return None;
            }
            let canon = key_canonical(&k);
            if let Some(j) = seen.get(&canon) {
                cx.err(
                    &path,
                    format!("duplicate keybinding {k:?} (already bound by /keybindings/{j})"),
                );
                return None;
            }
            seen.insert(canon, i);
            Some(k)
        });
        if let (Some(command), Some(key)) = (command, key) {
            out.push(Keybinding { command, key });
        }
    }
    out
}
