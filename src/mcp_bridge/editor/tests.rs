use serde_json::{json, Map, Value};

use super::*;
use crate::shared::paths::PathStyle;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn tool(name: &str) -> &'static EditorTool {
    find(name).unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content[0].as_text().unwrap().text.clone()
}

#[test]
fn names_cannot_clash_with_plugin_tools_and_are_valid() {
    for t in &TOOLS {
        assert!(!t.name.contains('_'), "{}", t.name);
        assert!(t.capability.starts_with("editor_"));
        let listed = t.listed();
        assert_eq!(listed["name"], t.name);
        assert_eq!(listed["inputSchema"]["type"], "object");
        assert_eq!(listed["annotations"]["readOnlyHint"], json!(t.read_only));
        assert_eq!(
            listed["inputSchema"]["$schema"],
            crate::mcp_bridge::schema::DRAFT_2020_12
        );
        // What the CLI checks when it lists the server's tools.
        crate::mcp_bridge::schema::check_listed_tool(
            &listed,
            crate::mcp_bridge::naming::SERVER_NAME,
        )
        .unwrap();
    }
    assert!(find("editor-open-file").is_some());
    assert!(find("editor_open_file").is_none());
    assert_eq!(
        tool("editor-open-file").listed()["annotations"]["destructiveHint"],
        json!(false)
    );
}

#[test]
fn relative_paths_are_taken_against_the_root() {
    let t = tool("editor-diagnostics");
    let p = t
        .params(
            &args(json!({"path": "src/../a.py"})),
            "/ws",
            PathStyle::Posix,
        )
        .unwrap();
    assert_eq!(p, json!({"path": "/ws/a.py"}));
    let p = t.params(&args(json!({})), "/ws", PathStyle::Posix).unwrap();
    assert_eq!(p, json!({}));
    let p = t
        .params(
            &args(json!({"path": "b\\c.py"})),
            "C:\\ws",
            PathStyle::Windows,
        )
        .unwrap();
    assert_eq!(p["path"], "C:\\ws\\b\\c.py");
    let e = t
        .params(&args(json!({"path": "x"})), "", PathStyle::Posix)
        .unwrap_err();
    assert!(e.contains("workspace root is not known"), "{e}");
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let d = tool("editor-diagnostics");
    let o = tool("editor-open-file");
    let cases: Vec<(&EditorTool, Value, &str)> = vec![
        (d, json!({"severity": "fatal"}), "severity"),
        (d, json!({"path": 3}), "must be a string"),
        (d, json!({"path": "a\u{0}b"}), "NUL"),
        (d, json!({"other": 1}), "unknown argument"),
        (o, json!({}), "required"),
        (o, json!({"path": "/a", "line": 0}), "≥ 1"),
        (o, json!({"path": "/a", "line": -2}), "≥ 1"),
        (o, json!({"path": "/a", "line": 1.5}), "≥ 1"),
        (o, json!({"path": "/a", "column": 3}), "needs `line`"),
        (o, json!({"path": "/a", "line": 5, "endLine": 2}), "before"),
        (o, json!({"path": "/a", "endLine": 2}), "needs `line`"),
        (
            o,
            json!({"path": "/a", "line": 1, "endColumn": 2}),
            "needs `endLine`",
        ),
        (
            tool("editor-selection"),
            json!({"x": 1}),
            "unknown argument",
        ),
    ];
    for (t, a, want) in cases {
        let e = t
            .params(&args(a.clone()), "/ws", PathStyle::Posix)
            .unwrap_err();
        assert!(e.contains(want), "{a}: {e}");
    }
    let ok = o
        .params(
            &args(json!({"path": "/a", "line": 2, "column": 3, "endLine": 2, "endColumn": 9})),
            "/ws",
            PathStyle::Posix,
        )
        .unwrap();
    assert_eq!(
        ok,
        json!({"path": "/a", "line": 2, "column": 3, "endLine": 2, "endColumn": 9})
    );
}

#[test]
fn diagnostics_are_filtered_sorted_and_bounded() {
    let t = tool("editor-diagnostics");
    let answer = json!({"diagnostics": [
        {"path": "/ws/b.py", "line": 9, "column": 1, "severity": "hint", "message": "h"},
        {"path": "/ws/a.py", "line": 3, "column": 5, "severity": "warning", "message": "w",
         "source": "pyright", "code": 12},
        {"path": "/ws/a.py", "line": 1, "column": 2, "endLine": 1, "endColumn": 4,
         "severity": "error", "message": "e", "source": "", "code": "E1"},
    ]});
    let r = t.result(&json!({"severity": "warning"}), Ok(answer.clone()));
    assert_eq!(r.is_error, Some(false));
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(v["count"], 2);
    assert_eq!(v["errors"], 1);
    assert_eq!(v["diagnostics"][0]["message"], "e");
    assert_eq!(v["diagnostics"][0]["code"], "E1");
    assert!(v["diagnostics"][0].get("source").is_none());
    assert_eq!(v["diagnostics"][1]["code"], "12");
    assert_eq!(v["diagnostics"][1]["source"], "pyright");
    let r = t.result(&json!({"path": "/ws/b.py"}), Ok(answer));
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(v["count"], 1);
    assert_eq!(v["path"], "/ws/b.py");

    let many: Vec<Value> = (0..MAX_DIAGNOSTICS + 7)
        .map(|i| {
            json!({"path": "/ws/x", "line": i + 1, "severity": "warning",
            "message": "m".repeat(MAX_MESSAGE_CHARS + 10)})
        })
        .collect();
    let r = t.result(&json!({}), Ok(json!({"diagnostics": many})));
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(v["count"], MAX_DIAGNOSTICS + 7);
    assert_eq!(v["diagnostics"].as_array().unwrap().len(), MAX_DIAGNOSTICS);
    assert_eq!(
        v["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        MAX_MESSAGE_CHARS
    );
    assert!(v["note"].as_str().unwrap().contains("most severe"));
}

#[test]
fn malformed_answers_and_failures_are_error_results() {
    let cases = [
        ("editor-diagnostics", json!({})),
        (
            "editor-diagnostics",
            json!({"diagnostics": [{"path": "/a", "line": 1}]}),
        ),
        (
            "editor-diagnostics",
            json!({"diagnostics": [{"path": "/a", "line": 1, "message": "m", "severity": "bad"}]}),
        ),
        (
            "editor-open-editors",
            json!({"editors": [{"active": true}]}),
        ),
        ("editor-open-editors", json!([])),
        ("editor-selection", json!({})),
        (
            "editor-selection",
            json!({"selection": {"path": "/a", "text": "t"}}),
        ),
        (
            "editor-selection",
            json!({"selection": {"path": "/a", "text": "t", "start": {"line": 0, "column": 1},
                "end": {"line": 1, "column": 1}}}),
        ),
        ("editor-open-file", json!("yes")),
    ];
    for (name, answer) in cases {
        let r = tool(name).result(&json!({"path": "/a"}), Ok(answer.clone()));
        assert_eq!(r.is_error, Some(true), "{name} {answer}");
        assert!(text(&r).contains("malformed"), "{}", text(&r));
    }
    let r = tool("editor-selection").result(&json!({}), Err("busy".into()));
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("busy"));
}

#[test]
fn selection_editors_and_open_file_answers() {
    let r = tool("editor-selection").result(&json!({}), Ok(json!({"selection": null})));
    assert_eq!(text(&r), r#"{"selection":null}"#);
    let long = "é".repeat(MAX_SELECTION_CHARS + 1);
    let r = tool("editor-selection").result(
        &json!({}),
        Ok(json!({"selection": {"path": "/a", "text": long,
            "start": {"line": 1, "column": 1}, "end": {"line": 1, "column": 2}}})),
    );
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(
        v["selection"]["text"].as_str().unwrap().chars().count(),
        MAX_SELECTION_CHARS
    );
    assert!(v["note"].is_string());
    let r = tool("editor-open-editors").result(
        &json!({}),
        Ok(
            json!({"editors": [{"path": "/a", "active": true, "language": "rust"},
            {"path": "/b", "dirty": true}]}),
        ),
    );
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(v["count"], 2);
    assert_eq!(
        v["editors"][0],
        json!({"path": "/a", "active": true, "dirty": false, "language": "rust"})
    );
    let r = tool("editor-open-file").result(
        &json!({"path": "/a", "line": 4}),
        Ok(json!({"opened": true})),
    );
    assert_eq!(text(&r), r#"{"line":4,"opened":true,"path":"/a"}"#);
}
