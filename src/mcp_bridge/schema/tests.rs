use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::mcp_bridge::naming::{assign, SERVER_NAME};

fn spec(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        summary: None,
        description: None,
        validator: Arc::new(jsonschema::validator_for(&parameters).unwrap()),
        parameters,
        render_as: None,
        annotations: None,
        model_visible: true,
    }
}

fn src(spec: &ToolSpec) -> ToolSource<'_> {
    ToolSource {
        plugin_id: "com.example.notes",
        plugin_name: "Notes",
        spec,
    }
}

#[test]
fn a_schema_without_dollar_schema_gets_the_hosts_dialect() {
    let s = input_schema(&json!({"type": "object", "properties": {"q": {"type": "string"}}}));
    assert_eq!(s["$schema"], DRAFT_2020_12);
    assert_eq!(s["properties"]["q"]["type"], "string");
    let d7 = "http://json-schema.org/draft-07/schema#";
    let s = input_schema(&json!({"$schema": d7, "type": "object"}));
    assert_eq!(s["$schema"], d7);
}

#[test]
fn a_root_id_is_removed_and_refs_against_it_made_local() {
    let s = input_schema(&json!({
        "$id": "urn:notes:search",
        "type": "object",
        "$defs": {"q": {"type": "string"}},
        "properties": {
            "a": {"$ref": "urn:notes:search#/$defs/q"},
            "b": {"$ref": "#/$defs/q"},
            "c": {"items": [{"$ref": "urn:notes:search"}]},
            "d": {"$ref": "urn:other#/x"},
            "$ref": {"type": "string"}
        }
    }));
    assert!(s.get("$id").is_none());
    assert_eq!(s["properties"]["a"]["$ref"], "#/$defs/q");
    assert_eq!(s["properties"]["b"]["$ref"], "#/$defs/q");
    assert_eq!(s["properties"]["c"]["items"][0]["$ref"], "#");
    assert_eq!(s["properties"]["d"]["$ref"], "urn:other#/x");
    // A property called "$ref" is a property, left alone.
    assert_eq!(s["properties"]["$ref"], json!({"type": "string"}));
}

#[test]
fn formats_and_other_keywords_are_kept() {
    let p = json!({"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "uniqueItems": true, "default": []}
    }, "additionalProperties": false});
    let s = input_schema(&p);
    let mut expected = p.clone();
    expected["$schema"] = json!(DRAFT_2020_12);
    assert_eq!(s, expected);
}

#[test]
fn the_description_is_never_empty() {
    let mut t = spec("search", json!({"type": "object"}));
    assert_eq!(
        description(&src(&t)),
        "The search tool of the Notes plugin (com.example.notes)."
    );
    t.summary = Some("Search notes".into());
    assert_eq!(description(&src(&t)), "Search notes");
    t.description = Some("  ".into());
    assert_eq!(description(&src(&t)), "Search notes");
    t.description = Some("Full-text search over every note.\nMore.".into());
    assert_eq!(
        description(&src(&t)),
        "Full-text search over every note.\nMore."
    );
}

#[test]
fn annotations_are_conservative_unless_the_manifest_says_otherwise() {
    let none = annotations(None, None);
    assert_eq!(
        none,
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
    );
    assert!(
        !replayable(&none),
        "a tool that says nothing is never replayed"
    );
    let ro = ToolAnnotations {
        read_only: Some(true),
        ..Default::default()
    };
    let v = annotations(Some(&ro), Some("Search"));
    assert_eq!(
        v,
        json!({"title": "Search", "readOnlyHint": true, "openWorldHint": true})
    );
    assert!(replayable(&v));
    let idem = ToolAnnotations {
        idempotent: Some(true),
        destructive: Some(false),
        open_world: Some(false),
        ..Default::default()
    };
    let v = annotations(Some(&idem), None);
    assert_eq!(
        v,
        json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    assert!(replayable(&v));
    let contradictory = ToolAnnotations {
        read_only: Some(true),
        destructive: Some(true),
        ..Default::default()
    };
    assert!(!replayable(&annotations(Some(&contradictory), None)));
}

/// The CLI's `canSafelyReplay` for a trusted server in a trusted folder.
fn replayable(a: &Value) -> bool {
    let t = |k: &str| a.get(k) == Some(&Value::Bool(true));
    let f = |k: &str| a.get(k) == Some(&Value::Bool(false));
    if t("readOnlyHint") && (t("destructiveHint") || f("idempotentHint")) {
        return false;
    }
    t("idempotentHint") || t("readOnlyHint")
}

#[test]
fn a_full_tool_passes_the_clis_check() {
    let mut t = spec(
        "search",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    );
    t.summary = Some("Search notes".into());
    let v = mcp_tool(&src(&t), "notes_search");
    assert_eq!(v["name"], "notes_search");
    assert_eq!(v["title"], "Search notes");
    assert_eq!(v["description"], "Search notes");
    assert_eq!(v["annotations"]["title"], "Search notes");
    assert_eq!(
        v["_meta"]["qwen-companion/plugin"],
        json!({"id": "com.example.notes", "tool": "search"})
    );
    assert_eq!(check_listed_tool(&v, SERVER_NAME), Ok(()));
}

#[test]
fn the_check_mirrors_the_sdk_schema() {
    let good = json!({"name": "n_t", "description": "d", "inputSchema": {"type": "object"}});
    assert_eq!(check_listed_tool(&good, SERVER_NAME), Ok(()));
    let bad = |patch: Value| {
        let mut v = good.clone();
        for (k, val) in patch.as_object().unwrap() {
            if val.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = val.clone();
            }
        }
        check_listed_tool(&v, SERVER_NAME).unwrap_err()
    };
    assert!(bad(json!({"name": null})).contains("name"));
    assert!(bad(json!({"name": "fs.read"})).contains("renamed"));
    assert!(bad(json!({"name": "x".repeat(35)})).contains("renamed"));
    assert!(bad(json!({"description": ""})).contains("description"));
    assert!(bad(json!({"title": 3})).contains("title"));
    assert!(bad(json!({"inputSchema": null})).contains("inputSchema"));
    assert!(bad(json!({"inputSchema": {"type": "array"}})).contains("type"));
    assert!(bad(json!({"inputSchema": {"type": ["object"]}})).contains("type"));
    assert!(
        bad(json!({"inputSchema": {"type": "object", "properties": []}})).contains("properties")
    );
    assert!(bad(json!({"inputSchema": {"type": "object", "required": "q"}})).contains("required"));
    assert!(bad(json!({"inputSchema": {"type": "object", "required": [1]}})).contains("required"));
    assert!(bad(json!({"annotations": {"readOnlyHint": "yes"}})).contains("readOnlyHint"));
    assert!(bad(json!({"annotations": []})).contains("annotations"));
    assert!(bad(json!({"outputSchema": {"$schema": 7}})).contains("outputSchema"));
    assert!(bad(json!({"_meta": []})).contains("_meta"));
    assert!(bad(json!({"icons": [{"mimeType": "x"}]})).contains("icons"));
}

#[test]
fn one_bad_tool_is_left_out_not_the_whole_list() {
    let good = spec("search", json!({"type": "object"}));
    let mut hidden = spec("parse", json!({"type": "object"}));
    hidden.model_visible = false;
    // A tool whose parameters are not an object schema (say, built by hand).
    let mut broken = spec("broken", json!({"type": "object"}));
    broken.parameters = json!({"type": "object", "required": "x"});
    let sources = [src(&good), src(&hidden), src(&broken)];
    let pairs: Vec<(&str, &str)> = sources
        .iter()
        .map(|s| (s.plugin_id, s.spec.name.as_str()))
        .collect();
    let names = assign(&pairs, SERVER_NAME).unwrap();
    let mut why = Vec::new();
    let list = tools_list(&sources, &names, SERVER_NAME, |id, tool, reason| {
        why.push(format!("{id}/{tool}: {reason}"))
    });
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "notes_search");
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].starts_with("com.example.notes/broken: "), "{why:?}");
    // A tool without a name in the assignment is left out too.
    let empty = assign(&[], SERVER_NAME).unwrap();
    let mut n = 0;
    assert!(tools_list(&sources[..1], &empty, SERVER_NAME, |_, _, _| n += 1).is_empty());
    assert_eq!(n, 1);
}
