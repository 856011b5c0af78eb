//! The fixture plugins under tests/plugins/fixtures: the working ones
//! (hello, todo-quadrant, full) validate with no problem at all and their
//! entry scripts answer every tool as the plugin format says; every folder
//! under invalid/ fails with exactly the error paths its expect.json lists.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use qc_test_support::{wait_until, TempDir};
use qwen_companion::plugins::manifest::{self, Manifest};
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fixtures")
}

fn load_valid(name: &str) -> Manifest {
    match manifest::load_dir(&fixtures().join(name)) {
        Ok((m, warnings)) => {
            assert!(warnings.is_empty(), "{name}: warnings {warnings:?}");
            m
        }
        Err(e) => panic!("{name}: {e:#?}"),
    }
}

#[test]
fn the_working_fixtures_validate_cleanly() {
    let hello = load_valid("hello");
    assert_eq!(hello.id, "com.example.hello");
    assert_eq!(hello.tools.len(), 1);
    assert!(hello.tools[0].validator.is_valid(&json!({"name": "Ada"})));
    assert!(!hello.tools[0].validator.is_valid(&json!({})));

    let todo = load_valid("todo-quadrant");
    assert_eq!(todo.id, "local.todo-quadrant");
    assert_eq!(todo.views[0].id, "quadrant");
    assert!(todo.has_permission("notifications"));

    let full = load_valid("full");
    let tools: Vec<_> = full
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.model_visible))
        .collect();
    assert_eq!(
        tools,
        [
            ("do_something", true),
            ("is_available", true),
            ("list_modes", true),
            ("write_note", true),
            ("export_pdf", true),
            ("push_update", true),
            ("parse_markdown", false),
        ]
    );
    assert_eq!(full.configuration.len(), 4);
    assert_eq!(full.ui.as_ref().unwrap().entry, "ui.html");
    assert_eq!(full.menus["session/context"].len(), 1);
    assert_eq!(full.icon.as_deref(), Some("icon.png"));
    let png = std::fs::read(fixtures().join("full/icon.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn every_invalid_fixture_fails_with_exactly_its_expected_paths() {
    let dir = fixtures().join("invalid");
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for case in entries {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let expect: Value =
            serde_json::from_slice(&std::fs::read(case.join("expect.json")).unwrap()).unwrap();
        let mut want: Vec<String> = expect["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        want.sort();
        let problems = match manifest::load_dir(&case) {
            Ok(_) => panic!("{name}: the manifest was accepted"),
            Err(p) => p,
        };
        for p in &problems {
            assert!(
                p.message.len() > 10,
                "{name}: unhelpful message {:?}",
                p.message
            );
        }
        let mut got: Vec<String> = problems.iter().map(|p| p.path.clone()).collect();
        got.sort();
        assert_eq!(got, want, "{name}: {problems:#?}");
        seen += 1;
    }
    assert!(seen >= 40, "only {seen} invalid fixtures");
}

/// Runs the fixture driver; the node process is killed (by PID) if it hangs.
fn drive(plugin: &str, data: &Path, calls: Value) -> Value {
    let mut child = Command::new("node")
        .arg(fixtures().join("../drive_fixture.js"))
        .arg(fixtures().join(plugin))
        .arg(data)
        .arg(calls.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node is installed");
    let mut status = None;
    if !wait_until(Duration::from_secs(30), || {
        status = child.try_wait().unwrap();
        status.is_some()
    }) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the driver for {plugin} hung");
    }
    let status = status.unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "driver failed: {status} {out}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn text_of(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn hello_greets() {
    let data = TempDir::new("hello");
    let out = drive(
        "hello",
        data.path(),
        json!([{"tool": "say_hello", "params": {"name": "Ada"}}, {"tool": "nope"}]),
    );
    assert_eq!(out["results"][0]["type"], "tool_result");
    assert_eq!(text_of(&out["results"][0]), "Hello, Ada!");
    assert_eq!(out["results"][1]["type"], "tool_error");
}

#[test]
fn todo_quadrant_manages_todos_in_its_data_dir() {
    let data = TempDir::new("todo");
    let t = "manage_todo_quadrant";
    let out = drive(
        "todo-quadrant",
        data.path(),
        json!([
            {"tool": t, "params": {"action": "add", "content": "Write report", "quadrant": "urgent_important", "due_date": "2000-01-01"}},
            {"tool": t, "params": {"action": "add", "content": "Read book"}},
            {"tool": t, "params": {"action": "add", "content": "Bad", "quadrant": "someday"}},
            {"tool": t, "params": {"action": "update", "id": "2", "quadrant": "not_urgent_not_important", "remind_at": "2999-01-01 09:30"}},
            {"tool": t, "params": {"action": "complete", "id": "1"}},
            {"tool": t, "params": {"action": "set_reminder", "id": "2", "remind_at": "2999-02-02 10:00"}},
            {"tool": t, "params": {"action": "set_reminder", "remind_at": "08:15"}},
            {"tool": t, "params": {"action": "list"}},
            {"tool": t, "params": {"action": "remind_now"}},
            {"tool": t, "params": {"action": "delete", "id": "1"}},
            {"tool": t, "params": {"action": "complete", "id": "99"}},
            {"tool": t, "params": {"action": "list", "quadrant": "urgent_important"}}
        ]),
    );
    let r = out["results"].as_array().unwrap();
    let types: Vec<&str> = r.iter().map(|x| x["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "tool_result",
            "tool_result",
            "tool_error",
            "tool_result",
            "tool_result",
            "tool_result",
            "tool_result",
            "tool_result",
            "tool_result",
            "tool_result",
            "tool_error",
            "tool_result"
        ],
        "{r:#?}"
    );
    assert!(r[2]["message"].as_str().unwrap().contains("someday"));
    let listed = r[7]["details"]["todos"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["done"], true);
    assert_eq!(listed[1]["quadrant"], "not_urgent_not_important");
    assert_eq!(listed[1]["remind_at"], "2999-02-02 10:00");
    assert!(text_of(&r[7]).contains("Read book"));
    // remind_now asks the host for a notification naming the open todos
    // and the docked view to expand.
    let notes = out["hostRequests"].as_array().unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0]["capability"], "show_notification");
    assert_eq!(notes[0]["params"]["viewId"], "quadrant");
    assert_eq!(notes[0]["params"]["title"], "1 todo for today");
    assert!(notes[0]["params"]["body"]
        .as_str()
        .unwrap()
        .contains("Read book"));
    assert_eq!(r[8]["details"]["shown"], true);
    assert!(r[11]["details"]["todos"].as_array().unwrap().is_empty());
    // A ui_push after every change (4 changes + 1 reminder + 1 delete), none after reads.
    let pushes = out["pushes"].as_array().unwrap();
    assert_eq!(pushes.len(), 6, "{pushes:#?}");
    assert!(pushes.iter().all(|p| p["channel"] == "todos"));
    assert_eq!(
        pushes.last().unwrap()["payload"]["todos"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Stored in PLUGIN_DATA_DIR.
    let stored: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("todos.json")).unwrap()).unwrap();
    assert_eq!(stored["todos"].as_array().unwrap().len(), 1);
    assert_eq!(stored["digestAt"], "08:15");
}

#[test]
fn full_answers_every_contribution_point() {
    let data = TempDir::new("full");
    let git = TempDir::new("full-git");
    std::fs::create_dir(git.path().join(".git")).unwrap();
    let plain = TempDir::new("full-plain");
    let pdf = data.path().join("out/r.pdf");
    let out = drive(
        "full",
        data.path(),
        json!([
            {"tool": "do_something", "params": {}, "context": {"cwd": "/p", "config": {"mode": "fast", "verbose": false, "prefix": "> ", "limit": 2}}},
            {"tool": "is_available", "context": {"cwd": git.path()}},
            {"tool": "is_available", "context": {"cwd": plain.path()}},
            {"tool": "list_modes"},
            {"tool": "parse_markdown", "params": {"base64": "IyBUaXRsZQ=="}, "context": {"cwd": ""}},
            {"tool": "parse_markdown", "params": {}},
            {"tool": "write_note", "params": {"text": "# Note", "fileName": "n.md"}},
            {"tool": "export_pdf", "params": {"content": "# R", "outputPath": pdf}},
            {"tool": "push_update", "params": {"channel": "board", "payload": {"n": 1}}}
        ]),
    );
    let r = out["results"].as_array().unwrap();
    assert!(r.iter().all(|x| x["type"] == "tool_result"), "{r:#?}");
    let todos = r[0]["details"]["todos"].as_array().unwrap();
    assert_eq!(todos.len(), 2);
    assert_eq!(todos[0]["status"], "completed");
    assert_eq!(todos[1]["content"], "> Apply mode fast");
    assert_eq!(r[1]["details"]["visible"], true);
    assert_eq!(r[2]["details"]["visible"], false);
    assert_eq!(r[3]["details"]["options"][1]["value"], "accurate");
    assert_eq!(r[4]["details"], json!({"success": true, "text": "# Title"}));
    assert_eq!(r[5]["details"]["success"], false);
    let note = data.path().join("n.md");
    assert_eq!(r[6]["details"]["filePath"], note.to_str().unwrap());
    assert_eq!(r[6]["details"]["fileName"], "n.md");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "# Note");
    assert_eq!(r[7]["details"]["filePath"], pdf.to_str().unwrap());
    assert!(std::fs::read(&pdf).unwrap().starts_with(b"%PDF"));
    assert_eq!(out["hostRequests"][0]["capability"], "render_pdf");
    assert_eq!(out["hostRequests"][0]["params"]["content"], "# R");
    assert_eq!(
        out["pushes"],
        json!([{"channel": "board", "payload": {"n": 1}}])
    );
}
