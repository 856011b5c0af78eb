//! The `qc-mcp-bridge` executable end to end: spawned as Qwen Code spawns it
//! (stdio, its own QWEN_HOME), talking newline-delimited JSON-RPC to a real
//! plugin MCP server found through the lock file, and exiting with a reason
//! when no host runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qc_test_support::plugins::{config, MemStore, Plugins};
use qwen_companion::mcp_bridge::server::Config as ServerConfig;
use qwen_companion::mcp_bridge::PluginMcpServer;
use qwen_companion::plugins::host::PluginHost;
use serde_json::{json, Value};

const JS: &str = r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  reply(m, text('cwd=' + m.context.cwd + ' q=' + (m.params || {}).q));
});
"#;

fn manifest() -> Value {
    json!({"tools": [{"name": "echo", "summary": "Echo", "description": "Echo the query.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]})
}

/// A bridge process; killed (by its pid) and reaped on drop.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    stderr: mpsc::Receiver<String>,
}

impl Bridge {
    fn spawn(qwen_home: &std::path::Path, cwd: &std::path::Path) -> Bridge {
        Bridge::spawn_env(qwen_home, cwd, &[])
    }

    fn spawn_env(
        qwen_home: &std::path::Path,
        cwd: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Bridge {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qc-mcp-bridge"))
            .arg("plugins")
            .envs(env.iter().copied())
            .env("QWEN_HOME", qwen_home)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                let v: Value = serde_json::from_str(&l)
                    .unwrap_or_else(|e| panic!("bridge wrote a non-JSON line {l:?}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let (etx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(err), &mut s);
            let _ = etx.send(s);
        });
        Bridge {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    fn send(&mut self, v: Value) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{v}");
            let _ = s.flush();
        }
    }

    /// The next line satisfying `f` (others skipped).
    fn next(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no {what} from the bridge"));
            match self.lines.recv_timeout(left) {
                Ok(v) if f(&v) => return v,
                Ok(_) => continue,
                Err(_) => panic!("no {what} from the bridge"),
            }
        }
    }

    fn response(&self, id: u64) -> Value {
        self.next(&format!("response {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    /// Waits for the exit; returns (status code, stderr).
    fn exit(&mut self, limit: Duration) -> (Option<i32>, String) {
        let mut status = None;
        let exited = qc_test_support::wait_until(limit, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(exited, "the bridge did not exit");
        let err = self
            .stderr
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_default();
        (status.unwrap().code(), err)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize(b: &mut Bridge, capabilities: Value) -> Value {
    b.send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities": capabilities,
        "clientInfo":{"name":"qwen-cli-test","version":"1"}}}),
    );
    let r = b.response(0);
    b.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    r
}

#[test]
fn version_and_help_answer_without_looking_for_a_host() {
    let run = |arg: &str| {
        Command::new(env!("CARGO_BIN_EXE_qc-mcp-bridge"))
            .arg(arg)
            // No Qwen home at all: the answer must not depend on one.
            .env("QWEN_HOME", "/nonexistent/qwen-home")
            .stdin(Stdio::null())
            .output()
            .expect("run qc-mcp-bridge")
    };
    let v = run("--version");
    assert!(v.status.success(), "{v:?}");
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("qc-mcp-bridge {}", env!("CARGO_PKG_VERSION"))
    );
    let h = run("--help");
    assert!(h.status.success(), "{h:?}");
    assert!(String::from_utf8_lossy(&h.stdout).contains("usage: qc-mcp-bridge"));
    let bad = run("--serve");
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown argument"),
        "{bad:?}"
    );
    assert!(bad.stdout.is_empty(), "{bad:?}");
}

#[test]
fn no_host_running_exits_with_a_reason() {
    let home = qc_test_support::TempDir::new("bridge-none");
    let mut b = Bridge::spawn(home.path(), home.path());
    b.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}));
    let (code, err) = b.exit(Duration::from_secs(5));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no running IDE with qwen-companion plugins"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(b.lines.try_recv().is_err(), "nothing on stdout");

    // A stale lock file (dead pid) is the same.
    let dir = home.path().join("companion/plugins-mcp");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("1.lock"),
        json!({"port": 1, "authToken": "x", "pid": i32::MAX, "workspacePaths": []}).to_string(),
    )
    .unwrap();
    let mut b = Bridge::spawn(home.path(), home.path());
    let (code, err) = b.exit(Duration::from_secs(5));
    assert_eq!(code, Some(1));
    assert!(err.contains("no running IDE"), "{err}");

    // A live pid (ours) whose port refuses connections is skipped too.
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::write(
        dir.join("2.lock"),
        json!({"port": closed_port, "authToken": "x", "pid": std::process::id(),
            "workspacePaths": [home.path()]})
        .to_string(),
    )
    .unwrap();
    let mut b = Bridge::spawn(home.path(), home.path());
    let (code, err) = b.exit(Duration::from_secs(10));
    assert_eq!(code, Some(1));
    assert!(err.contains("no running IDE"), "{err}");
}

struct Host {
    server: PluginMcpServer,
    host: Arc<PluginHost>,
    home: qc_test_support::TempDir,
    _plugins: Plugins,
}

fn host(name: &str) -> Host {
    let plugins = Plugins::new(name);
    plugins.add("com.example.todo", manifest(), JS);
    let store = MemStore::new(&plugins.dir);
    let host = Arc::new(PluginHost::with_store(config(&plugins.dir, json!({})), store).unwrap());
    let home = qc_test_support::TempDir::new(name);
    let server = PluginMcpServer::start(
        host.clone(),
        ServerConfig {
            lock_dir: Some(home.path().join("companion/plugins-mcp")),
            workspace_paths: vec![home.path().to_string_lossy().into_owned()],
            ..ServerConfig::default()
        },
    )
    .unwrap();
    Host {
        server,
        host,
        home,
        _plugins: plugins,
    }
}

#[test]
fn relays_list_call_notifications_and_ends_with_the_host() {
    let h = host("bridge-relay");
    let mut b = Bridge::spawn(h.home.path(), h.home.path());
    let init = initialize(&mut b, json!({}));
    assert_eq!(
        init["result"]["serverInfo"]["name"], "qwen-companion-plugins",
        "{init}"
    );
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    // A line that is not JSON gets a parse error; the bridge goes on.
    if let Some(s) = b.stdin.as_mut() {
        writeln!(s, "this is not json").unwrap();
    }
    let e = b.next("parse error", |v| v["error"]["code"] == -32700);
    assert!(e["id"].is_null(), "{e}");
    b.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}));
    let list = b.response(1);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["todo_echo", "plugins-status"]);
    b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"todo_echo","arguments":{"q":"milk"}}}));
    let r = b.response(2);
    assert_eq!(r["result"]["content"][0]["text"], "cwd=/work/root q=milk");
    // A server notification reaches stdout through the GET stream.
    assert!(qc_test_support::wait_until(Duration::from_secs(5), || h
        .server
        .session_count()
        >= 1));
    // Kept: the server registers the session's peer (for list_changed) in
    // rmcp's on_initialized, asynchronously, with nothing to observe.
    std::thread::sleep(Duration::from_millis(300));
    h.host.disable("com.example.todo").unwrap();
    b.next("tools/list_changed", |v| {
        v["method"] == "notifications/tools/list_changed"
    });
    // The host stops: the bridge ends with a reason.
    h.server.stop().unwrap();
    let (code, err) = b.exit(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("qc-mcp-bridge:"), "{err}");
}

#[test]
fn roots_requests_are_relayed_both_ways() {
    let h = host("bridge-roots");
    let mut b = Bridge::spawn(h.home.path(), h.home.path());
    initialize(&mut b, json!({"roots": {"listChanged": true}}));
    b.send(json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
        "params":{"name":"todo_echo","arguments":{"q":"r"}}}));
    let req = b.next("roots/list", |v| v["method"] == "roots/list");
    b.send(json!({"jsonrpc":"2.0","id": req["id"],
        "result":{"roots":[{"uri":"file:///proj/x","name":"x"}]}}));
    let r = b.response(5);
    assert_eq!(r["result"]["content"][0]["text"], "cwd=/proj/x q=r");
    // stdin closes: the bridge ends cleanly.
    b.stdin.take();
    let (code, err) = b.exit(Duration::from_secs(5));
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_server_that_never_answers_initialize_ends_the_bridge() {
    let home = qc_test_support::TempDir::new("bridge-mute");
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = mute.local_addr().unwrap().port();
    let dir = home.path().join("companion/plugins-mcp");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("3.lock"),
        json!({"port": port, "authToken": "x", "pid": std::process::id(),
            "workspacePaths": [home.path()]})
        .to_string(),
    )
    .unwrap();
    let mut b = Bridge::spawn_env(
        home.path(),
        home.path(),
        &[("QC_MCP_BRIDGE_INITIALIZE_TIMEOUT_MS", "300")],
    );
    b.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}));
    let (code, err) = b.exit(Duration::from_secs(5));
    assert_eq!(code, Some(1));
    assert!(err.contains("qc-mcp-bridge:"), "{err}");
    drop(mute);
}
