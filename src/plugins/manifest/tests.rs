//! One test per validation rule: a valid manifest, then one invalid variant
//! per rule, asserting the exact problem path.

use super::*;
use crate::shared::testutil::TempDir;
use serde_json::json;
use std::fs;
use std::path::Path;

/// A plugin folder with the files a full manifest names.
fn folder() -> TempDir {
    let d = TempDir::new("mf");
    for f in ["index.js", "ui.html", "view.html", "icon.png"] {
        fs::write(d.path().join(f), b"x").unwrap();
    }
    d
}

fn base() -> Value {
    json!({
        "id": "com.example.full",
        "name": "Full",
        "version": "1.2.0",
        "main": "index.js",
        "icon": "icon.png",
        "permissions": ["filesystem"],
        "activationEvents": ["onStartupFinished"],
        "tools": [
            {"name": "do_something", "summary": "s", "description": "d",
             "parameters": {"type": "object", "properties": {}}, "renderAs": "checklist",
             "annotations": {"readOnlyHint": true, "openWorldHint": false}},
            {"name": "is_available", "parameters": {"type": "object"}},
            {"name": "list_modes", "parameters": {"type": "object"}}
        ],
        "documentParsers": [{"mimeType": "text/markdown", "toolName": "parse_markdown"}],
        "ui": {"entry": "ui.html", "title": "Panel"},
        "views": [{"id": "board", "title": "Board", "icon": "checklist", "entry": "view.html", "width": 380}],
        "sessionAction": {"tool": "do_something", "visibleTool": "is_available"},
        "configuration": [
            {"id": "mode", "type": "select", "optionsTool": "list_modes", "defaultValue": "auto"},
            {"id": "verbose", "type": "boolean", "defaultValue": false},
            {"id": "prefix", "type": "string", "defaultValue": ""},
            {"id": "limit", "type": "number", "defaultValue": 20}
        ],
        "commands": [{"tool": "do_something", "title": "Do"}],
        "keybindings": [{"command": "do_something", "key": "mod+shift+d"}],
        "menus": {"session/context": [{"tool": "do_something"}]},
        "x-vendor": {"kept": true}
    })
}

fn ok(v: &Value, dir: &TempDir) -> (Manifest, Vec<Problem>) {
    match parse(&v.to_string(), dir.path()) {
        Ok(r) => r,
        Err(e) => panic!("expected valid, got {e:#?}"),
    }
}

fn errors(v: &Value, dir: &TempDir) -> Vec<Problem> {
    match parse(&v.to_string(), dir.path()) {
        Ok(_) => panic!("expected errors for {v}"),
        Err(e) => e,
    }
}

/// The error paths after `edit` is applied to the base manifest.
fn paths_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let d = folder();
    let mut v = base();
    edit(&mut v);
    errors(&v, &d).into_iter().map(|p| p.path).collect()
}

fn assert_error_at(edit: impl FnOnce(&mut Value), path: &str) {
    let paths = paths_after(edit);
    assert!(
        paths.iter().any(|p| p == path),
        "expected an error at {path:?}, got {paths:?}"
    );
}

#[test]
fn the_base_manifest_is_valid_with_every_field_read() {
    let d = folder();
    let (m, warnings) = ok(&base(), &d);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(m.id, "com.example.full");
    assert_eq!(m.version, semver::Version::new(1, 2, 0));
    assert_eq!(
        m.main_path,
        crate::sys::fs::canonicalize(&d.path().join("index.js")).unwrap()
    );
    assert_eq!(m.root, crate::sys::fs::canonicalize(d.path()).unwrap());
    let names: Vec<_> = m
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.model_visible))
        .collect();
    assert_eq!(
        names,
        [
            ("do_something", true),
            ("is_available", true),
            ("list_modes", true),
            ("parse_markdown", false)
        ]
    );
    assert_eq!(m.tools[3].parameters, parser_tool_schema());
    assert!(m.tools[3].validator.is_valid(&json!({"base64": "aGk="})));
    assert!(!m.tools[3].validator.is_valid(&json!({})));
    assert_eq!(
        m.tools[0].annotations,
        Some(ToolAnnotations {
            read_only: Some(true),
            open_world: Some(false),
            ..Default::default()
        })
    );
    assert_eq!(m.tools[0].render_as.as_deref(), Some("checklist"));
    assert_eq!(
        m.parser_for("TEXT/Markdown").unwrap().name,
        "parse_markdown"
    );
    assert_eq!(m.views[0].width, Some(380));
    assert_eq!(
        m.configuration[0].kind,
        ConfigKind::Select {
            options_tool: Some("list_modes".into())
        }
    );
    assert_eq!(m.menus["session/context"][0].tool, "do_something");
    assert_eq!(m.keybindings[0].key, "mod+shift+d");
    assert_eq!(m.extra.get("x-vendor"), Some(&json!({"kept": true})));
    assert!(!m.extra.contains_key("id"));
    let s = m.summary_json();
    assert_eq!(s["id"], "com.example.full");
    assert_eq!(s["version"], "1.2.0");
    assert_eq!(
        s["tools"][3],
        json!({"name": "parse_markdown", "modelVisible": false})
    );
}

#[test]
fn strict_json_with_line_and_column() {
    let d = folder();
    let e = parse("{\n  \"id\": \"a.b\", // c\n}", d.path()).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(e[0].message.contains("line 2"), "{}", e[0].message);
    let e = parse("{\"id\": \"a.b\",}", d.path()).unwrap_err();
    assert!(e[0].message.contains("column"), "{}", e[0].message);
    let e = parse("{\"id\": \"a.b\",\n \"id\": \"c.d\"}", d.path()).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e[0].message.contains("duplicate key \"id\""),
        "{}",
        e[0].message
    );
    assert!(e[0].message.contains("line 2"), "{}", e[0].message);
    // Nested objects too; the same key in sibling objects is fine.
    let e = parse("{\"a\": [{\"k\": 1}, {\"k\": 2, \"k\": 3}]}", d.path()).unwrap_err();
    assert!(
        e[0].message.contains("duplicate key \"k\""),
        "{}",
        e[0].message
    );
    let e = parse("\u{feff}{}", d.path()).unwrap_err();
    assert!(e[0].message.contains("BOM"));
}

#[test]
fn top_level_must_be_an_object() {
    let d = folder();
    for t in ["[]", "1", "\"x\"", "null"] {
        let e = parse(t, d.path()).unwrap_err();
        assert_eq!(e[0].path, "");
        assert!(e[0].message.contains("expected a JSON object"));
    }
}

#[test]
fn all_problems_are_reported_at_once() {
    let paths = paths_after(|v| {
        v["id"] = json!("nodots");
        v["version"] = json!("1.0");
        v["tools"][1]["name"] = json!("bad name");
        v["views"][0]["width"] = json!(0);
    });
    for p in ["/id", "/version", "/tools/1/name", "/views/0/width"] {
        assert!(paths.contains(&p.to_string()), "{p} missing in {paths:?}");
    }
}

#[test]
fn id_rules() {
    for bad in [
        "hello",
        "com..hello",
        ".com.hello",
        "com.hello.",
        "com/hello",
        "com\\hello",
        "com.-hello",
        "com.he llo",
        "com.h\u{e9}llo",
        "com.a\u{0}b",
        "",
    ] {
        assert_error_at(|v| v["id"] = json!(bad), "/id");
    }
    assert_error_at(
        |v| v["id"] = json!(format!("a.{}", "b".repeat(MAX_ID_LEN))),
        "/id",
    );
    assert_error_at(|v| v["id"] = json!(7), "/id");
    assert_error_at(|v| drop(v.as_object_mut().unwrap().remove("id")), "/id");
    for good in ["local.todo-quadrant", "com.example.hello", "a_b.c-d.9"] {
        assert_eq!(id_error(good), None, "{good}");
    }
}

#[test]
fn name_and_version_rules() {
    assert_error_at(|v| v["name"] = json!(""), "/name");
    assert_error_at(|v| v["name"] = json!("   "), "/name");
    assert_error_at(|v| drop(v.as_object_mut().unwrap().remove("name")), "/name");
    for bad in ["1.0", "v1.0.0", "1", "1.0.0.0", "01.0.0", ""] {
        assert_error_at(|v| v["version"] = json!(bad), "/version");
    }
    assert_error_at(|v| v["version"] = json!(1.0), "/version");
    let d = folder();
    let mut v = base();
    v["version"] = json!("2.0.0-beta.1+build.5");
    assert_eq!(ok(&v, &d).0.version.to_string(), "2.0.0-beta.1+build.5");
}

#[test]
fn optional_strings_must_be_strings() {
    for key in ["description", "author", "readme"] {
        assert_error_at(|v| v[key] = json!(1), &format!("/{key}"));
    }
}

#[test]
fn icon_must_exist_inside() {
    assert_error_at(|v| v["icon"] = json!("missing.png"), "/icon");
    assert_error_at(|v| v["icon"] = json!("/etc/passwd"), "/icon");
    assert_error_at(|v| v["icon"] = json!("../icon.png"), "/icon");
}

#[test]
fn main_rules() {
    assert_error_at(|v| drop(v.as_object_mut().unwrap().remove("main")), "/main");
    assert_error_at(|v| v["main"] = json!("nope.js"), "/main");
    assert_error_at(|v| v["main"] = json!("/bin/sh"), "/main");
    assert_error_at(|v| v["main"] = json!("lib\\index.js"), "/main");
    assert_error_at(|v| v["main"] = json!("."), "/main");
    assert_error_at(|v| v["main"] = json!(""), "/main");
}

#[test]
fn main_symlink_outside_is_refused_and_inside_is_followed() {
    let d = folder();
    let outside = TempDir::new("mf-out");
    fs::write(outside.path().join("evil.js"), b"x").unwrap();
    crate::sys::fs::symlink(outside.path().join("evil.js"), d.path().join("link.js")).unwrap();
    let mut v = base();
    v["main"] = json!("link.js");
    let e = errors(&v, &d);
    assert_eq!(e[0].path, "/main");
    assert!(e[0].message.contains("outside"), "{}", e[0].message);

    fs::create_dir(d.path().join("lib")).unwrap();
    crate::sys::fs::symlink("../index.js", d.path().join("lib/inner.js")).unwrap();
    v["main"] = json!("lib/inner.js");
    let (m, _) = ok(&v, &d);
    assert_eq!(m.main, "lib/inner.js");
    assert_eq!(
        m.main_path,
        crate::sys::fs::canonicalize(&d.path().join("index.js")).unwrap()
    );
}

#[test]
fn permissions_and_activation_events() {
    let d = folder();
    let mut v = base();
    v["permissions"] = json!(["filesystem", "camera"]);
    v["activationEvents"] = json!(["onStartupFinished", "onLunch"]);
    v["tools"][0]["renderAs"] = json!("table");
    let (m, w) = ok(&v, &d);
    let paths: Vec<_> = w.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/permissions/1", "/activationEvents/1", "/tools/0/renderAs"]
    );
    assert!(m.has_permission("camera"));
    assert_error_at(|v| v["permissions"] = json!("filesystem"), "/permissions");
    assert_error_at(
        |v| v["permissions"] = json!(["network", 3]),
        "/permissions/1",
    );
    assert_error_at(|v| v["activationEvents"] = json!({}), "/activationEvents");
}

#[test]
fn tool_name_rules() {
    assert_error_at(
        |v| v["tools"][1]["name"] = json!("do_something"),
        "/tools/1/name",
    );
    assert_error_at(|v| v["tools"][1]["name"] = json!("a.b"), "/tools/1/name");
    assert_error_at(
        |v| v["tools"][1]["name"] = json!("x".repeat(65)),
        "/tools/1/name",
    );
    assert_error_at(|v| v["tools"][1]["name"] = json!(""), "/tools/1/name");
    assert_error_at(
        |v| drop(v["tools"][1].as_object_mut().unwrap().remove("name")),
        "/tools/1/name",
    );
    assert_error_at(|v| v["tools"] = json!({}), "/tools");
    assert_error_at(|v| v["tools"][2] = json!("list_modes"), "/tools/2");
    assert_error_at(
        |v| v["tools"][0]["summary"] = json!(false),
        "/tools/0/summary",
    );
    assert_error_at(
        |v| v["tools"][0]["description"] = json!([]),
        "/tools/0/description",
    );
    assert!(is_tool_name(&"x".repeat(64)));
}

#[test]
fn parameters_rules() {
    assert_error_at(
        |v| drop(v["tools"][0].as_object_mut().unwrap().remove("parameters")),
        "/tools/0/parameters",
    );
    assert_error_at(
        |v| v["tools"][0]["parameters"] = json!(true),
        "/tools/0/parameters",
    );
    assert_error_at(
        |v| v["tools"][0]["parameters"] = json!({"type": "string"}),
        "/tools/0/parameters/type",
    );
    assert_error_at(
        |v| v["tools"][0]["parameters"] = json!({"properties": {}}),
        "/tools/0/parameters/type",
    );
    // Meta-schema violations, all of them, at their place inside the schema.
    let paths = paths_after(|v| {
        v["tools"][0]["parameters"] = json!({
            "type": "object",
            "properties": {"a": {"type": "strin"}},
            "required": "a"
        })
    });
    assert!(
        paths.contains(&"/tools/0/parameters/properties/a/type".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/tools/0/parameters/required".to_string()),
        "{paths:?}"
    );
    // An unknown $schema is an error, not a panic.
    assert_error_at(
        |v| {
            v["tools"][0]["parameters"] =
                json!({"$schema": "https://example.com/nope", "type": "object"})
        },
        "/tools/0/parameters/$schema",
    );
    // A remote $ref is never fetched.
    let paths = paths_after(|v| {
        v["tools"][0]["parameters"] = json!({
            "type": "object",
            "properties": {"a": {"$ref": "https://example.com/s.json"}}
        })
    });
    assert!(
        paths.iter().any(|p| p.starts_with("/tools/0/parameters")),
        "{paths:?}"
    );
}

#[test]
fn draft7_parameters_are_accepted_and_compiled() {
    let d = folder();
    let mut v = base();
    v["tools"][0]["parameters"] = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"]
    });
    let (m, _) = ok(&v, &d);
    assert!(m.tools[0].validator.is_valid(&json!({"n": 2})));
    assert!(!m.tools[0].validator.is_valid(&json!({"n": 0})));
}

#[test]
fn annotations_rules() {
    assert_error_at(
        |v| v["tools"][0]["annotations"] = json!({"readOnlyHint": "yes"}),
        "/tools/0/annotations/readOnlyHint",
    );
    assert_error_at(
        |v| v["tools"][0]["annotations"] = json!({"title": "x"}),
        "/tools/0/annotations/title",
    );
    assert_error_at(
        |v| v["tools"][0]["annotations"] = json!([]),
        "/tools/0/annotations",
    );
}

#[test]
fn document_parser_rules() {
    for bad in [
        "text",
        "text/",
        "/md",
        "text/mark down",
        "text/md; charset=utf-8",
        "te\u{e9}xt/md",
    ] {
        assert_error_at(
            |v| v["documentParsers"][0]["mimeType"] = json!(bad),
            "/documentParsers/0/mimeType",
        );
    }
    for good in [
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "image/svg+xml",
    ] {
        assert_eq!(mime_error(good), None, "{good}");
    }
    assert_error_at(
        |v| v["documentParsers"][0]["toolName"] = json!("bad tool"),
        "/documentParsers/0/toolName",
    );
    assert_error_at(
        |v| {
            v["documentParsers"]
                .as_array_mut()
                .unwrap()
                .push(json!({"mimeType": "Text/Markdown", "toolName": "other"}))
        },
        "/documentParsers/1/mimeType",
    );
    assert_error_at(|v| v["documentParsers"] = json!({}), "/documentParsers");
}

#[test]
fn a_declared_parser_tool_stays_visible_and_a_shared_one_is_added_once() {
    let d = folder();
    let mut v = base();
    v["documentParsers"] = json!([
        {"mimeType": "text/markdown", "toolName": "do_something"},
        {"mimeType": "text/plain", "toolName": "parse_text"},
        {"mimeType": "text/csv", "toolName": "parse_text"}
    ]);
    let (m, _) = ok(&v, &d);
    assert!(m.tool("do_something").unwrap().model_visible);
    assert_eq!(m.tools.len(), 4);
    assert!(!m.tool("parse_text").unwrap().model_visible);
    assert_eq!(m.visible_tools().count(), 3);
}

#[test]
fn ui_and_view_rules() {
    assert_error_at(|v| v["ui"] = json!("ui.html"), "/ui");
    assert_error_at(|v| v["ui"] = json!({"title": "x"}), "/ui/entry");
    assert_error_at(|v| v["ui"]["entry"] = json!("missing.html"), "/ui/entry");
    assert_error_at(|v| v["ui"]["title"] = json!(1), "/ui/title");
    assert_error_at(|v| v["views"][0]["id"] = json!("a b"), "/views/0/id");
    assert_error_at(
        |v| {
            let dup = v["views"][0].clone();
            v["views"].as_array_mut().unwrap().push(dup)
        },
        "/views/1/id",
    );
    assert_error_at(
        |v| v["views"][0]["entry"] = json!("../view.html"),
        "/views/0/entry",
    );
    assert_error_at(
        |v| drop(v["views"][0].as_object_mut().unwrap().remove("entry")),
        "/views/0/entry",
    );
    assert_error_at(|v| v["views"][0]["title"] = json!(1), "/views/0/title");
    assert_error_at(|v| v["views"][0]["icon"] = json!({}), "/views/0/icon");
    assert_error_at(|v| v["views"] = json!({}), "/views");
    assert_error_at(|v| v["views"][0] = json!("board"), "/views/0");
    for w in [
        json!(0),
        json!(-5),
        json!(3.5),
        json!("380"),
        json!(1u64 << 40),
    ] {
        assert_error_at(|v| v["views"][0]["width"] = w, "/views/0/width");
    }
}

#[test]
fn session_action_rules() {
    assert_error_at(
        |v| v["sessionAction"]["tool"] = json!("ghost"),
        "/sessionAction/tool",
    );
    assert_error_at(
        |v| v["sessionAction"]["visibleTool"] = json!("ghost"),
        "/sessionAction/visibleTool",
    );
    let paths = paths_after(|v| v["sessionAction"] = json!({"icon": 1}));
    assert_eq!(paths, ["/sessionAction/tool", "/sessionAction/icon"]);
    assert_error_at(
        |v| v["sessionAction"]["tooltip"] = json!(2),
        "/sessionAction/tooltip",
    );
    // A hidden parser tool is not a declared tool.
    assert_error_at(
        |v| v["sessionAction"]["tool"] = json!("parse_markdown"),
        "/sessionAction/tool",
    );
}

#[test]
fn configuration_rules() {
    assert_error_at(
        |v| v["configuration"][1]["id"] = json!("mode"),
        "/configuration/1/id",
    );
    assert_error_at(
        |v| v["configuration"][1]["type"] = json!("bool"),
        "/configuration/1/type",
    );
    assert_error_at(
        |v| v["configuration"][1]["defaultValue"] = json!("false"),
        "/configuration/1/defaultValue",
    );
    assert_error_at(
        |v| v["configuration"][3]["defaultValue"] = json!("20"),
        "/configuration/3/defaultValue",
    );
    assert_error_at(
        |v| v["configuration"][0]["defaultValue"] = json!(1),
        "/configuration/0/defaultValue",
    );
    assert_error_at(
        |v| {
            drop(
                v["configuration"][2]
                    .as_object_mut()
                    .unwrap()
                    .remove("defaultValue"),
            )
        },
        "/configuration/2/defaultValue",
    );
    assert_error_at(
        |v| v["configuration"][0]["optionsTool"] = json!("ghost"),
        "/configuration/0/optionsTool",
    );
    assert_error_at(
        |v| v["configuration"][1]["optionsTool"] = json!("list_modes"),
        "/configuration/1/optionsTool",
    );
    assert_error_at(
        |v| v["configuration"][0]["label"] = json!(1),
        "/configuration/0/label",
    );
    assert_error_at(
        |v| v["configuration"][0]["description"] = json!(false),
        "/configuration/0/description",
    );
    assert_error_at(
        |v| v["configuration"][0]["id"] = json!(""),
        "/configuration/0/id",
    );
    assert_error_at(
        |v| {
            drop(
                v["configuration"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("type"),
            )
        },
        "/configuration/0/type",
    );
    assert_error_at(|v| v["configuration"] = json!({}), "/configuration");
    // A select without optionsTool: valid, with a warning.
    let d = folder();
    let mut v = base();
    v["configuration"][0]
        .as_object_mut()
        .unwrap()
        .remove("optionsTool");
    let (m, w) = ok(&v, &d);
    assert_eq!(w[0].path, "/configuration/0/optionsTool");
    assert_eq!(
        m.configuration[0].kind,
        ConfigKind::Select { options_tool: None }
    );
}

#[test]
fn effective_config_uses_defaults_for_missing_or_mistyped_values() {
    let d = folder();
    let (m, _) = ok(&base(), &d);
    let mut values = Map::new();
    values.insert("verbose".into(), json!(true));
    values.insert("limit".into(), json!("many"));
    let c = m.effective_config(&values).unwrap();
    assert_eq!(c["verbose"], json!(true));
    assert_eq!(c["limit"], json!(20));
    assert_eq!(c["mode"], json!("auto"));
}

#[test]
fn command_keybinding_and_menu_rules() {
    assert_error_at(
        |v| v["commands"][0]["tool"] = json!("ghost"),
        "/commands/0/tool",
    );
    assert_error_at(|v| v["commands"][0] = json!({}), "/commands/0/tool");
    assert_error_at(|v| v["commands"][0]["icon"] = json!(1), "/commands/0/icon");
    assert_error_at(
        |v| v["keybindings"][0]["command"] = json!("ghost"),
        "/keybindings/0/command",
    );
    for bad in [
        "",
        "mod+",
        "+d",
        "mod++d",
        "shift+mod",
        "hyper+d",
        "mod+mod+d",
        "mod+dd",
        "mod+f25",
        "mod+f0",
        "ctrl+\u{e9}",
    ] {
        assert_error_at(
            |v| v["keybindings"][0]["key"] = json!(bad),
            "/keybindings/0/key",
        );
    }
    for good in [
        "mod+shift+d",
        "ctrl+alt+f12",
        "Cmd+K",
        "f5",
        "alt+enter",
        "mod+/",
        "shift+plus",
    ] {
        assert_eq!(key_error(good), None, "{good}");
    }
    assert_error_at(
        |v| {
            v["keybindings"]
                .as_array_mut()
                .unwrap()
                .push(json!({"command": "is_available", "key": "Shift+MOD+D"}))
        },
        "/keybindings/1/key",
    );
    assert_error_at(
        |v| v["menus"]["session/context"][0]["tool"] = json!("ghost"),
        "/menus/session~1context/0/tool",
    );
    assert_error_at(
        |v| v["menus"]["session/context"] = json!({}),
        "/menus/session~1context",
    );
    assert_error_at(|v| v["menus"] = json!([]), "/menus");
    assert_error_at(
        |v| v["menus"]["session/context"][0]["title"] = json!(1),
        "/menus/session~1context/0/title",
    );
    assert_error_at(
        |v| v["commands"][0]["title"] = json!([]),
        "/commands/0/title",
    );
    assert_error_at(
        |v| v["keybindings"][0]["key"] = json!(4),
        "/keybindings/0/key",
    );
    assert_error_at(
        |v| {
            drop(
                v["keybindings"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("command"),
            )
        },
        "/keybindings/0/command",
    );
    assert_error_at(|v| v["keybindings"] = json!("mod+d"), "/keybindings");
    assert_error_at(|v| v["commands"] = json!({}), "/commands");
    assert_error_at(|v| v["menus"][""] = json!([]), "/menus/");
}

#[test]
fn pointer_escapes_tokens() {
    assert_eq!(pointer("/menus", "a/b~c"), "/menus/a~1b~0c");
}

#[test]
fn load_dir_reads_manifest_json_with_a_size_cap() {
    let d = folder();
    let e = load_dir(d.path()).unwrap_err();
    assert!(e[0].message.contains("not found"));
    fs::write(d.path().join(MANIFEST_FILE), base().to_string()).unwrap();
    let (m, _) = load_dir(d.path()).unwrap();
    assert_eq!(m.name, "Full");
    // Over the cap: refused before it is read whole.
    let big = format!(
        "{{\"pad\": \"{}\"}}",
        " ".repeat(MAX_MANIFEST_BYTES as usize)
    );
    fs::write(d.path().join(MANIFEST_FILE), big).unwrap();
    let e = load_dir(d.path()).unwrap_err();
    assert!(e[0].message.contains("limit"), "{}", e[0].message);
    // Not UTF-8.
    fs::write(d.path().join(MANIFEST_FILE), b"{\"id\": \"\xff\"}").unwrap();
    assert!(load_dir(d.path()).unwrap_err()[0].message.contains("UTF-8"));
    // A symlinked manifest is refused.
    fs::remove_file(d.path().join(MANIFEST_FILE)).unwrap();
    let other = d.path().join("other.json");
    fs::write(&other, base().to_string()).unwrap();
    crate::sys::fs::symlink(&other, d.path().join(MANIFEST_FILE)).unwrap();
    assert!(load_dir(d.path()).unwrap_err()[0]
        .message
        .contains("regular file"));
}

#[test]
fn a_missing_root_is_an_error_not_a_panic() {
    let e = parse(&base().to_string(), Path::new("/nonexistent/qc-plugin")).unwrap_err();
    assert!(e.iter().any(|p| p.path.is_empty()));
}

#[test]
fn a_broken_tool_is_still_a_name_others_may_reference() {
    // do_something is referenced by sessionAction, commands, keybindings and
    // menus: its broken schema must be the only problem reported.
    let paths = paths_after(|v| v["tools"][0]["parameters"] = json!({"type": "array"}));
    assert_eq!(paths, ["/tools/0/parameters/type"]);
}

#[test]
fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
    let d = folder();
    let text = format!("{{\"x\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    let e = parse(&text, d.path()).unwrap_err();
    assert!(e[0].message.contains("recursion"), "{}", e[0].message);
}
