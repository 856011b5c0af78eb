//! The plugin MCP server with a real MCP client (raw streamable HTTP) and
//! real `node` plugins: listing without spawning, calls and their results,
//! errors, progress, live tool lists, roots, the auth matrix, the lock file.

use std::sync::Arc;
use std::time::Duration;

use qc_test_support::mcp::{raw_request, result_text as text, tool_names as names, Client};
use qc_test_support::plugins::{config, MemStore, Plugins};
use qwen_companion::mcp_bridge::server::Config as ServerConfig;
use qwen_companion::mcp_bridge::tools::STATUS_TOOL;
use qwen_companion::mcp_bridge::PluginMcpServer;
use qwen_companion::plugins::host::PluginHost;
use serde_json::{json, Value};

const JS: &str = r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const p = m.params || {};
  switch (m.toolName) {
    case 'echo':
      return reply(m, text('cwd=' + m.context.cwd + ' q=' + p.q),
        { filePath: 'out/report.md', internal: 'not for the model' });
    case 'fail':
      return process.send({ type: 'tool_error', requestId: m.requestId, message: 'no such note' });
    case 'push':
      process.send({ type: 'ui_push', channel: 'board', payload: { step: 1 } });
      process.send({ type: 'ui_push', channel: 'board', payload: { step: 2 } });
      return setTimeout(() => reply(m, text('pushed')), 200);
    case 'slow':
      return setTimeout(() => reply(m, text('late')), p.ms);
    case 'search':
      return reply(m, text('found'));
    case 'crash':
      process.exit(3);
  }
});
"#;

fn manifest() -> Value {
    json!({"tools": [
        {"name": "echo", "summary": "Echo", "description": "Echo the query.\nMore text.",
         "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                        "required": ["q"], "additionalProperties": false},
         "annotations": {"readOnlyHint": true}},
        {"name": "fail", "summary": "Fail", "description": "Always fails.",
         "parameters": {"type": "object", "properties": {}}},
        {"name": "push", "summary": "Push", "description": "Pushes UI updates.",
         "parameters": {"type": "object", "properties": {}}},
        {"name": "slow", "summary": "Slow", "description": "Answers late.",
         "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}}},
        {"name": "search", "summary": "Search", "description": "Search notes.",
         "parameters": {"type": "object", "properties": {}}},
        {"name": "crash", "summary": "Crash", "description": "Exits at once.",
         "parameters": {"type": "object", "properties": {}}}
    ]})
}

struct Fixture {
    server: PluginMcpServer,
    host: Arc<PluginHost>,
    store: Arc<MemStore>,
    plugins: Plugins,
    _lock_dir: qc_test_support::TempDir,
}

impl Fixture {
    fn new(name: &str, ids: &[&str]) -> Fixture {
        Fixture::with_config(name, ids, json!({}))
    }

    fn with_config(name: &str, ids: &[&str], host_config: Value) -> Fixture {
        Fixture::with_server(name, ids, host_config, ServerConfig::default())
    }

    fn with_server(
        name: &str,
        ids: &[&str],
        host_config: Value,
        server_config: ServerConfig,
    ) -> Fixture {
        let plugins = Plugins::new(name);
        for id in ids {
            plugins.add(id, manifest(), JS);
        }
        let store = MemStore::new(&plugins.dir);
        let host = Arc::new(
            PluginHost::with_store(config(&plugins.dir, host_config), store.clone()).unwrap(),
        );
        let lock_dir = qc_test_support::TempDir::new(&format!("mcpb-{name}"));
        let server = PluginMcpServer::start(
            host.clone(),
            ServerConfig {
                lock_dir: Some(lock_dir.path().to_path_buf()),
                ..server_config
            },
        )
        .unwrap();
        Fixture {
            server,
            host,
            store,
            plugins,
            _lock_dir: lock_dir,
        }
    }

    fn client(&self) -> Client {
        let mut c = Client::new(
            self.server.port().unwrap(),
            &self.server.auth_token().unwrap(),
        );
        c.handshake();
        c
    }
}

impl Fixture {
    /// Until the todo plugin runs, and a little longer (the call reached it).
    fn wait_call_running(&self) {
        assert!(qc_test_support::wait_until(Duration::from_secs(8), || self
            .host
            .running_pid("com.example.todo")
            .is_some()));
        // Kept: the todo fixture plugin gives no sign that the call reached
        // it (its files are shared with other suites).
        std::thread::sleep(Duration::from_millis(200));
    }

    /// Until the host counted `n` late replies of the todo plugin (calls it
    /// gave up whose answers came anyway).
    fn wait_late_replies(&self, n: u64) {
        let stats = || self.host.stats("com.example.todo").unwrap();
        assert!(
            qc_test_support::wait_until(Duration::from_secs(5), || stats()["lateReplies"] == n),
            "{}",
            stats()
        );
    }
}

/// A second client on the same session (for concurrent requests).
fn twin(c: &Client) -> Client {
    let mut n = Client::new(c.port, &c.token);
    n.session = c.session.clone();
    n
}

/// Sends `msg` as a POST of `c`'s session on a connection of its own, with
/// `extra` header lines, and returns the connection unread.
fn send_post(c: &Client, msg: &Value, extra: &str) -> std::net::TcpStream {
    use std::io::Write;
    let body = msg.to_string();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         mcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n\
         Content-Length: {}\r\n{extra}\r\n{body}",
        c.port,
        c.token,
        c.session.as_deref().unwrap(),
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s
}

/// POSTs `msg` and delivers each JSON-RPC message of its SSE answer as it
/// arrives (a server request on the call's own stream included).
fn post_stream(c: &Client, msg: &Value) -> std::sync::mpsc::Receiver<Value> {
    use std::io::{BufRead, BufReader};
    let s = send_post(c, msg, "Connection: close\r\n");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            // An SSE event, or a whole `application/json` answer (one line).
            let data = line
                .strip_prefix("data:")
                .or_else(|| line.starts_with('{').then_some(&line[..]));
            if let Some(data) = data {
                if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

#[test]
fn lists_from_manifests_without_spawning_and_names_collisions() {
    let f = Fixture::new("list", &["com.a.notes", "org.b.notes", "com.example.todo"]);
    let mut c = f.client();
    let list = c.call("tools/list", json!({}));
    let mut got = names(&list);
    got.sort();
    assert!(got.contains(&"todo_echo".to_string()), "{got:?}");
    assert!(got.contains(&"a-notes_search".to_string()), "{got:?}");
    assert!(got.contains(&"b-notes_search".to_string()), "{got:?}");
    assert!(got.contains(&STATUS_TOOL.to_string()));
    assert_eq!(got.len(), 3 * 6 + 1, "{got:?}");
    for id in ["com.a.notes", "org.b.notes", "com.example.todo"] {
        assert_eq!(f.host.running_pid(id), None, "listing must not spawn {id}");
    }
    // Shapes and annotations as the CLI wants them.
    let tools = list["result"]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "todo_echo").unwrap();
    assert_eq!(echo["inputSchema"]["type"], "object");
    assert_eq!(
        echo["inputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(echo["inputSchema"]["required"], json!(["q"]));
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    assert_eq!(echo["title"], "Echo");
    let fail = tools.iter().find(|t| t["name"] == "todo_fail").unwrap();
    assert_eq!(fail["annotations"]["readOnlyHint"], false);
    assert_eq!(fail["annotations"]["destructiveHint"], true);
    assert_eq!(fail["annotations"]["idempotentHint"], false);
    // Each colliding name maps back to its own plugin.
    let r = c.tool("a-notes_search", json!({}));
    assert_eq!(text(&r), "found");
    assert!(f.host.running_pid("com.a.notes").is_some());
    assert_eq!(f.host.running_pid("org.b.notes"), None);
    let status = c.tool(STATUS_TOOL, json!({}));
    let v: Value = serde_json::from_str(&text(&status)).unwrap();
    assert_eq!(v["plugins"].as_array().unwrap().len(), 3);
    drop(f);
}

#[test]
fn an_empty_host_still_lists_the_status_tool() {
    let f = Fixture::new("empty", &[]);
    let mut c = f.client();
    assert_eq!(names(&c.call("tools/list", json!({}))), vec![STATUS_TOOL]);
    let status = c.tool(STATUS_TOOL, json!({}));
    assert_ne!(status["isError"], json!(true));
    assert_eq!(text(&status), r#"{"plugins":[]}"#);
}

#[test]
fn calls_map_results_and_errors() {
    let f = Fixture::new("call", &["com.example.todo"]);
    let mut c = f.client();
    let r = c.tool("todo_echo", json!({"q": "milk"}));
    assert_ne!(r["isError"], json!(true), "{r}");
    // No roots capability: the host's workspace root.
    assert_eq!(r["content"][0]["text"], "cwd=/work/root q=milk");
    assert_eq!(
        r["content"][1],
        json!({"type": "resource_link", "uri": "file:///work/root/out/report.md",
            "name": "report.md", "mimeType": "text/markdown"})
    );
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert!(!r.to_string().contains("not for the model"));
    // Schema error: isError, nothing called.
    let before = f.host.stats("com.example.todo").unwrap()["starts"].clone();
    let r = c.tool("todo_echo", json!({"q": 5}));
    assert_eq!(r["isError"], true);
    let t = text(&r);
    assert!(t.starts_with("schema:") && t.contains("/q"), "{t}");
    let r = c.tool("todo_echo", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("q"), "{r}");
    assert_eq!(f.host.stats("com.example.todo").unwrap()["starts"], before);
    // tool_error: isError with the plugin's message.
    let r = c.tool("todo_fail", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("no such note"), "{r}");
    // Unknown tool.
    let r = c.tool("nope_nothing", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("not available"), "{r}");
}

#[test]
fn ui_push_becomes_progress() {
    let f = Fixture::new("progress", &["com.example.todo"]);
    let c = f.client();
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "todo_push", "arguments": {}, "_meta": {"progressToken": "tok-1"}}}));
    assert_eq!(r.status, 200);
    // Progress needs a stream; without a token the answer is one JSON body.
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let msgs = r.messages();
    let progress: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 2, "{msgs:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "tok-1");
    assert_eq!(progress[0]["params"]["progress"], 1.0);
    assert_eq!(progress[1]["params"]["progress"], 2.0);
    assert!(progress[1]["params"]["message"]
        .as_str()
        .unwrap()
        .contains("\"step\":2"));
    let result = msgs.iter().find(|m| m["id"] == 7).unwrap();
    assert_eq!(text(&result["result"]), "pushed");
    // Without a token: no progress, same result.
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "todo_push", "arguments": {}}}));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let msgs = r.messages();
    assert!(msgs.iter().all(|m| m["method"] != "notifications/progress"));
    assert_eq!(
        text(&msgs.iter().find(|m| m["id"] == 8).unwrap()["result"]),
        "pushed"
    );
}

#[test]
fn list_changed_follows_disable_enable_and_reload() {
    let f = Fixture::new("changed", &["com.example.todo", "com.example.other"]);
    let mut c = f.client();
    let stream = c.open_stream();
    // Kept: the server registers the session's peer (for list_changed) in
    // rmcp's on_initialized, asynchronously, with nothing to observe.
    std::thread::sleep(Duration::from_millis(100));
    f.host.disable("com.example.other").unwrap();
    assert!(
        stream
            .next_method("notifications/tools/list_changed", Duration::from_secs(5))
            .is_some(),
        "disable must send list_changed"
    );
    let got = names(&c.call("tools/list", json!({})));
    assert!(!got.iter().any(|n| n.starts_with("other_")), "{got:?}");
    let r = c.tool("other_echo", json!({"q": "x"}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("not available"));
    // Nothing changed: no notification.
    f.host.reload().unwrap();
    assert!(stream
        .next_method(
            "notifications/tools/list_changed",
            Duration::from_millis(400)
        )
        .is_none());
    f.host.enable("com.example.other").unwrap();
    assert!(stream
        .next_method("notifications/tools/list_changed", Duration::from_secs(5))
        .is_some());
    // Uninstall + reload.
    f.plugins.remove("com.example.other");
    f.host.reload().unwrap();
    assert!(stream
        .next_method("notifications/tools/list_changed", Duration::from_secs(5))
        .is_some());
    let got = names(&c.call("tools/list", json!({})));
    assert_eq!(got.len(), 6 + 1, "{got:?}");
    let _ = &f.store;
    stream.close();
}

#[test]
fn roots_give_the_cwd_and_are_asked_again_after_a_change() {
    let f = Fixture::new("roots", &["com.example.todo"]);
    let mut c = Client::new(f.server.port().unwrap(), &f.server.auth_token().unwrap());
    let r = c.post(
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},
        "clientInfo":{"name":"test","version":"1"}}}),
    );
    assert_eq!(r.status, 200);
    c.session = Some(r.header("mcp-session-id").unwrap().to_string());
    assert_eq!(
        c.post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .status,
        202
    );
    let stream = c.open_stream();
    let call = |c: &Client, id: u64| {
        post_stream(
            c,
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":"todo_echo","arguments":{"q":"r"}}}),
        )
    };
    // The question may come on the call's own stream or on the GET stream.
    let answer_roots = |call: &std::sync::mpsc::Receiver<Value>, c: &Client, dir: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let req = loop {
            assert!(
                std::time::Instant::now() < deadline,
                "no roots/list request"
            );
            if let Ok(m) = call.recv_timeout(Duration::from_millis(20)) {
                assert_eq!(m["method"], "roots/list", "{m}");
                break m;
            }
            if let Some(m) = stream.next_method("roots/list", Duration::from_millis(20)) {
                break m;
            }
        };
        let r = c.post(&json!({"jsonrpc":"2.0","id": req["id"],
            "result": {"roots": [{"uri": format!("file://{dir}"), "name": "w"}]}}));
        assert_eq!(r.status, 202);
    };
    let result = |call: std::sync::mpsc::Receiver<Value>| {
        call.recv_timeout(Duration::from_secs(10))
            .expect("call result")["result"]
            .clone()
    };
    let t = call(&c, 1);
    answer_roots(&t, &c, "/proj/one%20two");
    assert_eq!(result(t)["content"][0]["text"], "cwd=/proj/one two q=r");
    // Cached: no second question.
    let r = result(call(&c, 2));
    assert_eq!(r["content"][0]["text"], "cwd=/proj/one two q=r");
    // After roots/list_changed it asks again.
    assert_eq!(
        c.post(&json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}))
            .status,
        202
    );
    let t = call(&c, 3);
    answer_roots(&t, &c, "/proj/three");
    assert_eq!(result(t)["content"][0]["text"], "cwd=/proj/three q=r");
    stream.close();
}

#[test]
fn a_call_with_a_progress_token_is_answered_whole_or_streamed() {
    let f = Fixture::with_server(
        "sse-answers",
        &["com.example.todo"],
        json!({}),
        ServerConfig {
            server: qwen_companion::loopback::ServerConfig {
                keep_alive_ms: Some(300),
                ..Default::default()
            },
            ..ServerConfig::default()
        },
    );
    let mut c = f.client();
    // The plugin's start takes longer than the keep-alive interval here.
    assert_eq!(c.tool("todo_echo", json!({"q": "start"}))["isError"], false);
    // Done before anything else was to be sent: answered like a call
    // without a token, one `application/json` body of known length.
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "todo_echo", "arguments": {"q": "whole"},
                   "_meta": {"progressToken": 5}}}));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.header("content-length").map(str::to_string),
        Some(r.body.len().to_string()),
        "{:?}",
        r.headers
    );
    assert!(r.header("transfer-encoding").is_none(), "{:?}", r.headers);
    let msgs = r.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 11);
    assert!(text(&msgs[0]["result"]).contains("q=whole"), "{msgs:?}");
    // A client that takes only SSE gets the same answer as one SSE event.
    let r = qc_test_support::mcp::raw_request(
        c.port,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: text/event-stream\r\nContent-Type: application/json\r\n\
             mcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n",
            c.port,
            c.token,
            c.session.as_deref().unwrap()
        ),
        json!({"jsonrpc": "2.0", "id": 14, "method": "tools/call",
            "params": {"name": "todo_echo", "arguments": {"q": "sse"},
                       "_meta": {"progressToken": 8}}})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(r.header("content-length").is_some(), "{:?}", r.headers);
    let msgs = r.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(text(&msgs[0]["result"]).contains("q=sse"), "{msgs:?}");
    // Progress first: the head goes out with it and the rest is streamed.
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call",
        "params": {"name": "todo_push", "arguments": {}, "_meta": {"progressToken": 6}}}));
    assert_eq!(
        r.header("transfer-encoding"),
        Some("chunked"),
        "{:?}",
        r.headers
    );
    let msgs = r.messages();
    let methods: Vec<&str> = msgs
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(result)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/progress",
            "(result)"
        ],
        "{msgs:?}"
    );
    assert_eq!(text(&msgs[2]["result"]), "pushed");
    // Silent for longer than a keep-alive interval: the head waits no
    // longer, then keep-alive comments until the answer.
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call",
        "params": {"name": "todo_slow", "arguments": {"ms": 1500},
                   "_meta": {"progressToken": 7}}}));
    assert_eq!(
        r.header("transfer-encoding"),
        Some("chunked"),
        "{:?}",
        r.headers
    );
    let body = r.text();
    let answer_at = body.find("data:").expect("the answer");
    assert!(
        body[..answer_at].lines().any(|l| l.starts_with(':')),
        "no keep-alive before the answer: {body:?}"
    );
    let msgs = r.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(text(&msgs[0]["result"]), "late");
}

#[test]
fn cancelled_ends_the_plugin_call() {
    let f = Fixture::new("cancel", &["com.example.todo"]);
    let c = f.client();
    // Without a progress token (a JSON answer), and with one: an SSE answer
    // whose head is still held, which then ends without a result.
    for (n, meta) in [(1, json!({})), (2, json!({"progressToken": 51}))] {
        let c2 = twin(&c);
        let id = 40 + n;
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"todo_slow","arguments":{"ms": 1500},"_meta":meta}});
        let t = std::thread::spawn(move || c2.post(&call));
        f.wait_call_running();
        let r = c.post(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":id,"reason":"user"}}));
        assert_eq!(r.status, 202);
        // The host gave the request up: the plugin's answer arrives late.
        f.wait_late_replies(n);
        let answer = t.join().unwrap();
        assert_eq!(answer.status, 200);
        if n == 2 {
            assert!(answer.messages().is_empty(), "{}", answer.text());
        }
    }
}

#[test]
fn a_client_that_drops_its_call_stream_ends_the_plugin_call() {
    let f = Fixture::new("drop", &["com.example.todo"]);
    let mut c = f.client();
    // A first call: the plugin runs and the server has taken in the handshake
    // (`notifications/initialized` is answered before rmcp reports it, and
    // until then calls go through rmcp's own handler, which does not give a
    // call up when its client goes).
    assert_eq!(c.tool("todo_echo", json!({"q": "warm"}))["isError"], false);
    // Without a progress token, and with one (the SSE answer's head held).
    for (n, meta) in [(1, json!({})), (2, json!({"progressToken": 52}))] {
        let s = send_post(
            &c,
            &json!({"jsonrpc":"2.0","id":41 + n,"method":"tools/call",
                "params":{"name":"todo_slow","arguments":{"ms": 1500},"_meta":meta}}),
            "",
        );
        f.wait_call_running();
        // Gone without a word: nobody will read the answer, so the host gives
        // the call up (the plugin's answer then arrives late).
        drop(s);
        f.wait_late_replies(n);
    }
    // The session goes on: the next call is answered.
    let r = c.tool("todo_echo", json!({"q": "after"}));
    assert_eq!(r["isError"], false, "{r}");
}

#[test]
fn auth_matrix_and_lock_file() {
    let f = Fixture::new("auth", &[]);
    let port = f.server.port().unwrap();
    let token = f.server.auth_token().unwrap();
    assert_eq!(token.len(), 64);
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let head = |host: &str, auth: &str, extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n{extra}"
        )
    };
    let good_host = format!("127.0.0.1:{port}");
    let r = raw_request(port, &head(&good_host, "Bearer wrong", ""), body);
    assert_eq!(r.status, 401);
    let r = raw_request(
        port,
        &head(
            &good_host,
            &format!("Bearer {token}"),
            "Origin: http://127.0.0.1\r\n",
        ),
        body,
    );
    assert_eq!(r.status, 403);
    let r = raw_request(
        port,
        &head("evil.example:80", &format!("Bearer {token}"), ""),
        body,
    );
    assert_eq!(r.status, 403);
    // The lock file, private, removed on stop.
    let lock = f.server.lock_file_path().unwrap();
    assert_eq!(
        lock.file_name().unwrap().to_str().unwrap(),
        format!("{}.lock", std::process::id())
    );
    // Mode bits are Unix; the owner-only DACL is checked by the sys tests.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(lock.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    assert_eq!(v["port"], port);
    assert_eq!(v["authToken"], token);
    assert_eq!(v["pid"], std::process::id());
    assert_eq!(v["workspacePaths"], json!(["/work/root"]));
    // A second server on the same lock file of this process is refused.
    let e = PluginMcpServer::start(
        f.host.clone(),
        ServerConfig {
            lock_dir: Some(lock.parent().unwrap().to_path_buf()),
            ..ServerConfig::default()
        },
    )
    .err()
    .unwrap();
    assert_eq!(e.status, qwen_companion::Status::AlreadyRunning);
    f.server.stop().unwrap();
    assert!(!lock.exists());
    assert!(f.server.port().is_err());
}

#[test]
fn a_crash_loop_disable_sends_list_changed_and_the_call_fails_at_once() {
    let f = Fixture::with_config(
        "crashloop",
        &["com.example.todo"],
        json!({"crashLoopMaxExits": 1}),
    );
    let mut c = f.client();
    let stream = c.open_stream();
    // Kept: the server registers the session's peer (for list_changed) in
    // rmcp's on_initialized, asynchronously, with nothing to observe.
    std::thread::sleep(Duration::from_millis(100));
    let r = c.tool("todo_crash", json!({}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).starts_with("exited:"), "{r}");
    assert!(
        stream
            .next_method("notifications/tools/list_changed", Duration::from_secs(5))
            .is_some(),
        "the breaker's disable must send list_changed"
    );
    assert_eq!(names(&c.call("tools/list", json!({}))), vec![STATUS_TOOL]);
    let r = c.tool("todo_echo", json!({"q": "x"}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("not available"), "{r}");
    stream.close();
}

#[test]
fn body_cap_session_bound_and_reaping() {
    let f = Fixture::with_server(
        "limits",
        &[],
        json!({}),
        ServerConfig::from_json(Some(
            r#"{"maxBodyBytes": 1024, "sessionGraceMs": 1000, "maxSessions": 2}"#,
        ))
        .unwrap(),
    );
    let port = f.server.port().unwrap();
    let token = f.server.auth_token().unwrap();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2000)
    );
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    );
    assert_eq!(raw_request(port, &head, big.as_bytes()).status, 413);
    // Three stream-less sessions with a bound of two: one is closed at once;
    // the grace then closes the others.
    let clients: Vec<Client> = (0..3).map(|_| f.client()).collect();
    assert!(qc_test_support::wait_until(Duration::from_secs(3), || f
        .server
        .session_count()
        <= 2));
    assert!(qc_test_support::wait_until(Duration::from_secs(5), || f
        .server
        .session_count()
        == 0));
    // A reaped session is gone for rmcp too.
    let c = clients.into_iter().next().unwrap();
    let r = c.post(&json!({"jsonrpc":"2.0","id":9,"method":"tools/list"}));
    assert_eq!(r.status, 404, "{}", r.text());
    // Bad configuration is refused before anything starts.
    let scratch = qc_test_support::TempDir::new("limits-scratch");
    for bad in [
        r#"{"sessionGraceMs": 10}"#,
        r#"{"maxSessions": 0}"#,
        r#"{"keepAliveMs": 5}"#,
        r#"{"workspacePaths": ["relative"]}"#,
    ] {
        let mut config = ServerConfig::from_json(Some(bad)).unwrap();
        config.lock_dir = Some(scratch.path().to_path_buf());
        let e = PluginMcpServer::start(f.host.clone(), config)
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert_eq!(e.status, qwen_companion::Status::InvalidArgument, "{bad}");
    }
    assert!(ServerConfig::from_json(Some(r#"{"nope": 1}"#)).is_err());
}
