//! The runtime against the repository's fixture plugins (the seed's
//! examples, unchanged).

use std::time::Duration;

use qwen_companion::plugins::host::{CallOptions, ErrorKind, ParsedDocument, PluginEvent};
use serde_json::json;

use qc_test_support::plugins::*;

#[test]
fn hello_fixture_says_hello() {
    let plugins = Plugins::new("fx-hello");
    let id = plugins.add_fixture(&fixture("hello"));
    let t = TestHost::new(plugins, json!({}));
    let out = t.call_ok(&id, "say_hello", json!({"name": "Ada"}));
    assert_eq!(
        out.content,
        vec![json!({"type": "text", "text": "Hello, Ada!"})]
    );
    assert_eq!(
        kind(t.call(&id, "say_hello", json!({}))).0,
        ErrorKind::Schema
    );
    t.finish();
}

#[test]
fn full_fixture_every_contribution_point() {
    let plugins = Plugins::new("fx-full");
    let id = plugins.add_fixture(&fixture("full"));
    let t = TestHost::new(plugins, json!({}));
    // onStartupFinished starts it.
    let started = t.host.startup_finished();
    assert_eq!(started.len(), 1);
    assert!(started[0].1.is_ok(), "{:?}", started[0].1);
    assert!(t.host.running_pid(&id).is_some());
    // context.config carries every configuration default.
    t.host
        .set_config_value(&id, "prefix", json!(">> "))
        .unwrap();
    let out = t.call_ok(&id, "do_something", json!({}));
    let todos = out.details.unwrap()["todos"].clone();
    assert_eq!(todos[0]["content"], ">> Inspect /work/root");
    assert_eq!(todos[1]["content"], ">> Apply mode auto");
    // visibleTool: a git repo or not.
    let repo = t.plugins.dir.join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    assert!(t.host.visible(&id, repo.to_str().unwrap()).unwrap());
    assert!(!t.host.visible(&id, "/").unwrap());
    // select options with the host's Auto first.
    let opts = t.host.options(&id, "mode").unwrap();
    assert_eq!(opts[0], json!({"value": "auto", "label": "Auto"}));
    assert_eq!(opts.len(), 3);
    // document parser.
    assert_eq!(
        t.host
            .parse_document("text/markdown", "# 안녕".as_bytes())
            .unwrap(),
        ParsedDocument::Text("# 안녕".into())
    );
    assert_eq!(
        t.host
            .parse_document("text/markdown", &[0xff, 0xfe])
            .unwrap(),
        ParsedDocument::Failed("the file is not UTF-8 text".into())
    );
    // ui_push.
    t.call_ok(
        &id,
        "push_update",
        json!({"channel": "board", "payload": {"a": 1}}),
    );
    t.wait_event("ui_push", |e| {
        matches!(e, PluginEvent::UiPush { channel, payload, .. }
            if channel == "board" && payload == &json!({"a": 1}))
    });
    // render_pdf through the library default.
    let pdf = t.plugins.dir.join("out").join("r.pdf");
    let out = t.host.call_tool(
        &id,
        "export_pdf",
        json!({"title": "R", "content": "# Title\n\nBody", "outputPath": pdf}),
        CallOptions {
            cwd: None,
            timeout: Some(Duration::from_secs(60)),
        },
    );
    match out {
        // A fresh Wine prefix has no TrueType fonts the renderer can use
        // (Windows has them in C:\Windows\Fonts): it says so, as on a Linux
        // without fonts; the PDF itself is checked everywhere else.
        Err(e) if qc_test_support::under_wine() && e.message.contains("no usable font") => {
            eprintln!("skipped under Wine: {}", e.message);
        }
        out => {
            let d = out.unwrap().details.unwrap();
            assert!(d["result"]["bytes"].as_u64().unwrap() > 100, "{d}");
            assert!(std::fs::read(&pdf).unwrap().starts_with(b"%PDF"));
        }
    }
    // Its `disconnect` handler makes unload quick and clean.
    let pid = t.host.running_pid(&id).unwrap();
    t.host.unload(&id).unwrap();
    assert!(wait_dead(pid, Duration::from_secs(3)));
    t.finish();
}

#[test]
fn todo_fixture_keeps_its_data_across_restarts() {
    let plugins = Plugins::new("fx-todo");
    let id = plugins.add_fixture(&fixture("todo-quadrant"));
    let t = TestHost::new(plugins, json!({}));
    t.call_ok(
        &id,
        "manage_todo_quadrant",
        json!({"action": "add", "content": "Write weekly report", "quadrant": "urgent_important"}),
    );
    assert_eq!(
        kind(t.call(&id, "manage_todo_quadrant", json!({"action": "fly"}))).0,
        ErrorKind::Schema
    );
    let pid = t.host.running_pid(&id).unwrap();
    // The plugin keeps a setInterval: only the host's kill sequence ends it.
    t.host.unload(&id).unwrap();
    assert!(wait_dead(pid, Duration::from_secs(3)));
    let out = t.call_ok(&id, "manage_todo_quadrant", json!({"action": "list"}));
    let todos = out.details.unwrap()["todos"].clone();
    assert_eq!(todos.as_array().unwrap().len(), 1);
    assert_eq!(todos[0]["content"], "Write weekly report");
    assert!(t
        .plugins
        .dir
        .join("data")
        .join(&id)
        .join("todos.json")
        .exists());
    t.finish();
}

#[test]
fn the_default_store_is_the_install_apis_plugins_dir() {
    use qwen_companion::plugins::host::PluginHost;
    use qwen_companion::plugins::install;
    let plugins = Plugins::new("fx-install");
    let dir = plugins.dir.clone();
    install::install_from(&dir, &fixture("full")).unwrap();
    let host = PluginHost::new(config(&dir, json!({}))).unwrap();
    let id = "com.example.full";
    assert_eq!(host.plugin_ids(), vec![id.to_string()]);
    // Values go to state.json and reach the plugin.
    host.set_config_value(id, "mode", json!("fast")).unwrap();
    assert_eq!(install::config_values(&dir, id).unwrap()["mode"], "fast");
    let out = host
        .call_tool(id, "do_something", json!({}), CallOptions::default())
        .unwrap();
    assert_eq!(
        out.details.unwrap()["todos"][1]["content"],
        "Apply mode fast"
    );
    let pid = host.running_pid(id).unwrap();
    // Disable persists and unloads.
    host.disable(id).unwrap();
    assert!(!install::get(&dir, id).unwrap().enabled);
    assert!(wait_dead(pid, Duration::from_secs(3)));
    assert_eq!(
        host.call_tool(id, "do_something", json!({}), CallOptions::default())
            .unwrap_err()
            .kind,
        ErrorKind::Disabled
    );
    host.enable(id).unwrap();
    assert!(install::get(&dir, id).unwrap().enabled);
    host.call_tool(id, "list_modes", json!({}), CallOptions::default())
        .unwrap();
    let pid = host.running_pid(id).unwrap();
    // A re-install of the same version is an update: reload unloads it.
    host.reload().unwrap();
    assert_eq!(host.running_pid(id), Some(pid), "nothing changed");
    install::install_from(&dir, &fixture("full")).unwrap();
    host.reload().unwrap();
    assert!(wait_dead(pid, Duration::from_secs(3)));
    host.call_tool(id, "list_modes", json!({}), CallOptions::default())
        .unwrap();
    let pid = host.running_pid(id).unwrap();
    // Uninstall + reload: the running instance is unloaded, the id is gone.
    install::uninstall(&dir, id, false).unwrap();
    host.reload().unwrap();
    assert!(wait_dead(pid, Duration::from_secs(3)));
    assert_eq!(
        host.call_tool(id, "list_modes", json!({}), CallOptions::default())
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    drop(host);
    // The leftover scan reads /proc (Unix); on Windows the plugin's Job
    // Object ends its processes with it, and `wait_dead` above saw it go.
    #[cfg(unix)]
    assert_no_process_of(&dir);
}
