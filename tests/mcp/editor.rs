//! The editor's own tools on the plugin MCP server: listed while the editor
//! offers their capabilities, arguments checked and normalised before the
//! editor sees them, answers checked and shaped, failures as error results.

use std::sync::{Arc, Mutex};

use qc_test_support::mcp::{result_text as text, tool_names as names, Client};
use qc_test_support::plugins::{config, MemStore, Plugins};
use qwen_companion::mcp_bridge::server::Config as ServerConfig;
use qwen_companion::mcp_bridge::tools::STATUS_TOOL;
use qwen_companion::mcp_bridge::PluginMcpServer;
use qwen_companion::plugins::host::{HostAnswer, HostRequest, PluginHost};
use serde_json::{json, Value};

struct Fixture {
    server: PluginMcpServer,
    host: Arc<PluginHost>,
    _plugins: Plugins,
    _lock_dir: qc_test_support::TempDir,
}

fn fixture(name: &str) -> Fixture {
    let plugins = Plugins::new(name);
    let store = MemStore::new(&plugins.dir);
    let host = Arc::new(
        PluginHost::with_store(
            config(&plugins.dir, json!({"hostRequestTimeoutMs": 700})),
            store,
        )
        .unwrap(),
    );
    let lock_dir = qc_test_support::TempDir::new(&format!("mcpe-{name}"));
    let server = PluginMcpServer::start(
        host.clone(),
        ServerConfig {
            lock_dir: Some(lock_dir.path().to_path_buf()),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    Fixture {
        server,
        host,
        _plugins: plugins,
        _lock_dir: lock_dir,
    }
}

impl Fixture {
    fn client(&self) -> Client {
        let mut c = Client::new(
            self.server.port().unwrap(),
            &self.server.auth_token().unwrap(),
        );
        c.handshake();
        c
    }

    /// Offers `capability`, answered by `answer` from the request; the
    /// requests it got are kept in the returned list.
    fn offer(
        &self,
        capability: &str,
        answer: impl Fn(&HostRequest) -> HostAnswer + Send + Sync + 'static,
    ) -> Arc<Mutex<Vec<HostRequest>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        self.host.set_capability(
            capability,
            Some(Arc::new(move |r: &HostRequest| {
                log.lock().unwrap().push(r.clone());
                answer(r)
            })),
        );
        seen
    }
}

#[test]
fn editor_tools_are_listed_while_offered() {
    let f = fixture("list");
    let mut c = f.client();
    assert_eq!(names(&c.call("tools/list", json!({}))), vec![STATUS_TOOL]);
    f.offer("editor_diagnostics", |_| {
        HostAnswer::Now(Ok(json!({"diagnostics": []})))
    });
    f.offer("editor_selection", |_| {
        HostAnswer::Now(Ok(json!({"selection": null})))
    });
    let list = c.call("tools/list", json!({}));
    assert_eq!(
        names(&list),
        vec!["editor-diagnostics", "editor-selection", STATUS_TOOL]
    );
    let diag = &list["result"]["tools"][0];
    assert_eq!(diag["annotations"]["readOnlyHint"], true);
    assert_eq!(
        diag["inputSchema"]["properties"]["severity"]["enum"][0],
        "error"
    );
    // Withdrawn: no longer listed, and a call is refused at once.
    f.host.set_capability("editor_selection", None);
    assert_eq!(
        names(&c.call("tools/list", json!({}))),
        vec!["editor-diagnostics", STATUS_TOOL]
    );
    let r = c.tool("editor-selection", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("not available"), "{r}");
}

#[test]
fn calls_reach_the_editor_with_checked_arguments() {
    let f = fixture("call");
    let seen = f.offer("editor_diagnostics", |r| {
        let path = r.params["path"]
            .as_str()
            .unwrap_or("/work/root/a.py")
            .to_string();
        HostAnswer::Now(Ok(json!({"diagnostics": [
            {"path": path, "line": 3, "column": 5, "severity": "error",
             "message": "undefined name 'x'", "source": "pyflakes", "code": "F821"},
            {"path": path, "line": 1, "column": 1, "severity": "hint", "message": "unused"},
        ]})))
    });
    let opened = f.offer("editor_open_file", |_| {
        HostAnswer::Now(Ok(json!({"opened": true})))
    });
    let mut c = f.client();
    let r = c.tool(
        "editor-diagnostics",
        json!({"path": "src/../a.py", "severity": "warning"}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["diagnostics"][0]["message"], "undefined name 'x'");
    assert_eq!(v["diagnostics"][0]["path"], "/work/root/a.py");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        // No plugin asked: Qwen Code did, through the MCP server.
        assert_eq!(seen[0].plugin_id, None);
        assert_eq!(seen[0].to_json()["from"], "mcp");
        assert_eq!(
            seen[0].params,
            json!({"path": "/work/root/a.py", "severity": "warning"})
        );
    }
    // Bad arguments never reach the editor.
    let r = c.tool("editor-open-file", json!({"path": "a.py", "line": 0}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("≥ 1"), "{r}");
    assert!(opened.lock().unwrap().is_empty());
    let r = c.tool("editor-open-file", json!({"path": "/x/b.py", "line": 7}));
    assert_eq!(text(&r), r#"{"line":7,"opened":true,"path":"/x/b.py"}"#);
    assert_eq!(
        opened.lock().unwrap()[0].params,
        json!({"path": "/x/b.py", "line": 7})
    );
}

#[test]
fn editor_failures_are_error_results() {
    let f = fixture("fail");
    f.offer("editor_open_file", |r| {
        HostAnswer::Now(Err(format!(
            "{} does not exist",
            r.params["path"].as_str().unwrap()
        )))
    });
    f.offer("editor_open_editors", |_| {
        HostAnswer::Now(Ok(json!({"editors": "all"})))
    });
    // Never answers: the host request times out (700 ms here).
    f.offer("editor_selection", |_| HostAnswer::Later);
    let mut c = f.client();
    let r = c.tool("editor-open-file", json!({"path": "/nope.py"}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("/nope.py does not exist"), "{r}");
    let r = c.tool("editor-open-editors", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("malformed"), "{r}");
    let r = c.tool("editor-selection", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("did not answer"), "{r}");
}
