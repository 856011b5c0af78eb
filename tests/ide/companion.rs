//! Integration tests of the IDE companion over real HTTP.

#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qc_test_support::mcp::*;
use qwen_companion::ide::{Companion, Config};
use qwen_companion::Status;
use serde_json::{json, Value};

struct Fixture {
    ws: TempDir,
    lock_dir: TempDir,
    companion: Companion,
    opened: Arc<Mutex<Vec<(String, String)>>>,
}

fn fixture_with(f: impl FnOnce(&mut Config)) -> Fixture {
    let ws = TempDir::new("ws");
    let lock_dir = TempDir::new("lock");
    let mut config = Config {
        workspace_roots: vec![ws.path().to_string_lossy().into_owned()],
        ide_name: Some("Test IDE".into()),
        lock_dir: Some(lock_dir.path().join("ide")),
        ..Config::default()
    };
    f(&mut config);
    let companion = Companion::new(config).unwrap();
    let opened = Arc::new(Mutex::new(Vec::new()));
    let o = opened.clone();
    companion.set_open_diff_callback(Some(Arc::new(move |p: &str, c: &str| {
        o.lock().unwrap().push((p.to_string(), c.to_string()));
        Ok(())
    })));
    Fixture {
        ws,
        lock_dir,
        companion,
        opened,
    }
}

fn fixture() -> Fixture {
    fixture_with(|_| {})
}

fn started() -> (Fixture, Client) {
    let f = fixture();
    f.companion.start().unwrap();
    let client = Client::from_lock(&f.companion.lock_file_path().unwrap());
    (f, client)
}

fn connected() -> (Fixture, Client, Stream) {
    let (f, mut c) = started();
    c.handshake();
    let s = c.open_stream();
    // The initial context arrives once the stream is open.
    s.next_method("ide/contextUpdate", Duration::from_secs(5))
        .expect("initial context");
    (f, c, s)
}

const SEC: Duration = Duration::from_secs(5);

fn head(port: u16, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\n{extra}"
    )
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[test]
fn auth_matrix() {
    let (f, c) = started();
    let port = c.port;
    let tok = &c.token;
    let cases: Vec<(&str, String, u16)> = vec![
        ("no token", head(port, ""), 401),
        (
            "wrong token",
            head(port, "Authorization: Bearer nope\r\n"),
            401,
        ),
        (
            "token prefix",
            head(port, &format!("Authorization: Bearer {}\r\n", &tok[..10])),
            401,
        ),
        (
            "basic",
            head(port, &format!("Authorization: Basic {tok}\r\n")),
            401,
        ),
        (
            "scheme-less",
            head(port, &format!("Authorization: {tok}\r\n")),
            401,
        ),
        (
            "wrong host",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: evil.example:{port}\r\nAuthorization: Bearer {tok}\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            ),
            403,
        ),
        (
            "wrong host port",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\nAuthorization: Bearer {tok}\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            ),
            403,
        ),
        (
            "origin",
            head(
                port,
                &format!("Authorization: Bearer {tok}\r\nOrigin: http://127.0.0.1:{port}\r\n"),
            ),
            403,
        ),
        (
            "unknown path",
            format!(
                "GET /nope HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {tok}\r\n"
            ),
            404,
        ),
        (
            "unknown path, no token",
            format!("GET /nope HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"),
            401,
        ),
    ];
    for (name, h, want) in cases {
        let r = raw_request(port, &h, INIT.as_bytes());
        assert_eq!(r.status, want, "{name}: {}", r.text());
    }
    // localhost and host.docker.internal are accepted like the official companion does.
    for host in ["localhost", "host.docker.internal"] {
        let h = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {tok}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        );
        assert_eq!(raw_request(port, &h, INIT.as_bytes()).status, 200, "{host}");
    }
    // Oversized body: refused from the declared length, and while streaming.
    let big = vec![b' '; 65 * 1024 * 1024];
    let r = raw_request(
        port,
        &head(port, &format!("Authorization: Bearer {tok}\r\n")),
        &big[..1024],
    );
    assert_ne!(r.status, 413);
    let h = head(
        port,
        &format!(
            "Authorization: Bearer {tok}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            big.len()
        ),
    );
    let r = raw_request(port, &h, b"");
    assert_eq!(r.status, 413);
    drop(f);
}

#[test]
fn oversized_streamed_body_is_refused() {
    let f = fixture_with(|c| c.server.max_body_bytes = Some(4096));
    f.companion.start().unwrap();
    let c = Client::from_lock(&f.companion.lock_file_path().unwrap());
    let mut body = INIT.as_bytes().to_vec();
    body.extend(std::iter::repeat_n(b' ', 8192));
    let r = raw_request(
        c.port,
        &head(c.port, &format!("Authorization: Bearer {}\r\n", c.token)),
        &body,
    );
    assert_eq!(r.status, 413, "{}", r.text());
}

#[test]
fn handshake_stream_and_tools() {
    let (f, mut c) = started();
    let file = f.ws.file("main.rs", "fn main() {}\n");
    // State set before any client connects is kept and sent when the stream opens.
    f.companion.file_focused(&file).unwrap();
    f.companion.set_cursor(None, 2, 9).unwrap();
    c.handshake();
    let r = c.post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert_eq!(r.status, 202);
    let s = c.open_stream();
    let ctx = s
        .next_method("ide/contextUpdate", SEC)
        .expect("initial context");
    let files = &ctx["params"]["workspaceState"]["openFiles"];
    assert_eq!(files[0]["path"], json!(file));
    assert_eq!(files[0]["isActive"], true);
    assert_eq!(files[0]["cursor"], json!({"line": 2, "character": 9}));
    assert_eq!(ctx["params"]["workspaceState"]["isTrusted"], true);

    let tools = c.call("tools/list", json!({}));
    let tools = tools["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["openDiff", "closeDiff"]);
    for t in tools {
        let a = &t["annotations"];
        assert_eq!(a["readOnlyHint"], false);
        assert_eq!(a["destructiveHint"], false);
        assert_eq!(a["idempotentHint"], true);
        assert_eq!(a["openWorldHint"], false);
        assert_eq!(t["inputSchema"]["type"], "object");
    }
}

#[test]
fn keep_alive_comments_flow() {
    // A stream silent for 300 s is dropped by the CLI: keep-alives must flow.
    let f = fixture_with(|c| c.server.keep_alive_ms = Some(100));
    f.companion.start().unwrap();
    let mut c = Client::from_lock(&f.companion.lock_file_path().unwrap());
    c.handshake();
    let s = c.open_stream();
    let mut seen = 0;
    let start = Instant::now();
    while seen < 3 && start.elapsed() < SEC {
        if s.comments.recv_timeout(SEC).is_ok() {
            seen += 1;
        }
    }
    assert_eq!(seen, 3, "keep-alive comments on an idle stream");
    // Out-of-range intervals are refused.
    for bad in [0, 30_001] {
        let e = Companion::new(Config {
            server: qwen_companion::loopback::ServerConfig {
                keep_alive_ms: Some(bad),
                ..Default::default()
            },
            ..Config::default()
        })
        .err()
        .expect("refused");
        assert_eq!(e.status, Status::InvalidArgument);
    }
}

#[test]
fn open_diff_accept_with_edit() {
    let (f, mut c, s) = connected();
    let path = f.ws.path().join("new.txt").to_string_lossy().into_owned();
    let r = c.tool(
        "openDiff",
        json!({"filePath": path, "newContent": "proposed\n"}),
    );
    assert_eq!(r["content"], json!([]));
    assert_ne!(r["isError"], true);
    assert_eq!(
        f.opened.lock().unwrap().as_slice(),
        [(path.clone(), "proposed\n".to_string())]
    );
    f.companion
        .diff_accept(&path, Some("proposed\nedited\n"))
        .unwrap();
    let n = s
        .next_method("ide/diffAccepted", SEC)
        .expect("diffAccepted");
    assert_eq!(
        n["params"],
        json!({"filePath": path, "content": "proposed\nedited\n"})
    );
    // The diff is settled: a second decision is an error.
    assert_eq!(
        f.companion.diff_reject(&path).unwrap_err().status,
        Status::NotFound
    );
}

#[test]
fn open_diff_accept_unchanged_reject_and_closed() {
    let (f, mut c, s) = connected();
    let a = f.ws.path().join("a.txt").to_string_lossy().into_owned();
    let b = f.ws.path().join("b.txt").to_string_lossy().into_owned();
    let d = f.ws.path().join("d.txt").to_string_lossy().into_owned();
    for p in [&a, &b, &d] {
        c.tool("openDiff", json!({"filePath": p, "newContent": "X"}));
    }
    f.companion.diff_accept(&a, None).unwrap();
    let n = s.next_method("ide/diffAccepted", SEC).unwrap();
    assert_eq!(n["params"]["content"], "X");
    f.companion.diff_reject(&b).unwrap();
    let n = s.next_method("ide/diffRejected", SEC).unwrap();
    assert_eq!(n["params"], json!({"filePath": b}));
    f.companion.diff_closed(&d).unwrap();
    let n = s.next_method("ide/diffClosed", SEC).unwrap();
    assert_eq!(n["params"]["filePath"], json!(d));
    assert_eq!(
        f.companion
            .diff_accept("/nowhere", None)
            .unwrap_err()
            .status,
        Status::NotFound
    );
}

#[test]
fn open_diff_errors() {
    let (f, mut c, _s) = connected();
    let r = c.tool(
        "openDiff",
        json!({"filePath": "relative.txt", "newContent": "x"}),
    );
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("absolute"));
    let r = c.tool("openDiff", json!({"filePath": "/abs/x"}));
    assert_eq!(r["isError"], true);
    // The host refuses.
    f.companion
        .set_open_diff_callback(Some(Arc::new(|_: &str, _: &str| Err("busy".to_string()))));
    let r = c.tool("openDiff", json!({"filePath": "/abs/x", "newContent": "x"}));
    assert_eq!(r["isError"], true);
    assert_eq!(r["content"][0]["text"], "busy");
    assert_eq!(
        f.companion.diff_accept("/abs/x", None).unwrap_err().status,
        Status::NotFound
    );
    // No callback at all.
    f.companion.set_open_diff_callback(None);
    let r = c.tool("openDiff", json!({"filePath": "/abs/x", "newContent": "x"}));
    assert_eq!(r["isError"], true);
    // Unknown tool is a protocol error.
    let r = c.call("tools/call", json!({"name": "nope", "arguments": {}}));
    assert!(r.get("error").is_some());
}

#[test]
fn close_diff_replies_json() {
    let (f, mut c, s) = connected();
    let p = f.ws.path().join("h.txt").to_string_lossy().into_owned();
    c.tool("openDiff", json!({"filePath": p, "newContent": "HOLD\n"}));
    // No close callback: the proposed text comes back, as JSON.
    let r = c.tool(
        "closeDiff",
        json!({"filePath": p, "suppressNotification": true}),
    );
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"content": "HOLD\n"})
    );
    assert!(s
        .next_method("ide/diffClosed", Duration::from_millis(300))
        .is_none());
    // Unknown diff: content null.
    let r = c.tool("closeDiff", json!({"filePath": p}));
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"content": null})
    );
    // With a close callback giving the edited buffer, and a notification.
    f.companion
        .set_close_diff_callback(Some(Arc::new(|_: &str| Ok(Some("EDITED".to_string())))));
    c.tool("openDiff", json!({"filePath": p, "newContent": "HOLD\n"}));
    let r = c.tool("closeDiff", json!({"filePath": p}));
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"content": "EDITED"})
    );
    let n = s.next_method("ide/diffClosed", SEC).unwrap();
    assert_eq!(n["params"], json!({"filePath": p, "content": "EDITED"}));
    // A failing close callback is an isError result.
    f.companion
        .set_close_diff_callback(Some(Arc::new(|_: &str| Err("gone".to_string()))));
    c.tool("openDiff", json!({"filePath": p, "newContent": "HOLD\n"}));
    let r = c.tool("closeDiff", json!({"filePath": p}));
    assert_eq!(r["isError"], true);
}

#[test]
fn debounce_coalesces_bursts() {
    let (f, _c, s) = connected();
    let files: Vec<String> = (0..5)
        .map(|i| f.ws.file(&format!("f{i}.txt"), "x"))
        .collect();
    for p in &files {
        f.companion.file_focused(p).unwrap();
    }
    let got = s.collect("ide/contextUpdate", Duration::from_millis(400));
    assert_eq!(got.len(), 1, "one update for a burst: {got:?}");
    let open = &got[0].1["params"]["workspaceState"]["openFiles"];
    assert_eq!(open[0]["path"], json!(files[4]));
    assert_eq!(open.as_array().unwrap().len(), 5);
}

#[test]
fn max_wait_bounds_continuous_motion() {
    let (f, _c, s) = connected();
    let file = f.ws.file("m.txt", "x");
    f.companion.file_focused(&file).unwrap();
    let start = Instant::now();
    let mut i = 1;
    // Cursor moves every 20 ms for 1 s: a plain trailing debounce would send nothing.
    let mover = std::thread::scope(|scope| {
        let companion = &f.companion;
        scope.spawn(move || {
            while start.elapsed() < Duration::from_millis(1000) {
                companion.set_cursor(None, i, 1).unwrap();
                i += 1;
                // The pace of the moves is the behaviour under test.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        s.collect("ide/contextUpdate", Duration::from_millis(1000))
    });
    assert!(
        mover.len() >= 3,
        "expected updates during continuous motion, got {}",
        mover.len()
    );
    let first = mover[0].0.duration_since(start);
    assert!(
        first < Duration::from_millis(600),
        "first update after {first:?}"
    );
}

#[test]
fn normalisation_drops_virtual_files_and_caps() {
    let (f, _c, s) = connected();
    let real: Vec<String> = (0..12)
        .map(|i| f.ws.file(&format!("r{i}.txt"), "x"))
        .collect();
    f.companion.file_opened("untitled:Untitled-1").unwrap();
    f.companion.file_opened("relative/path.txt").unwrap();
    f.companion
        .file_opened(&f.ws.path().join("missing.txt").to_string_lossy())
        .unwrap();
    f.companion
        .file_opened(&f.ws.path().to_string_lossy())
        .unwrap(); // a directory
    for p in &real {
        f.companion.file_focused(p).unwrap();
    }
    let n = s.next_method("ide/contextUpdate", SEC).unwrap();
    let files = n["params"]["workspaceState"]["openFiles"]
        .as_array()
        .unwrap();
    assert_eq!(files.len(), 10);
    assert_eq!(files[0]["path"], json!(real[11]));
    // The library writes paths with the platform's separator (`\` on Windows).
    let in_ws = format!("{}r", std::path::MAIN_SEPARATOR);
    assert!(files
        .iter()
        .all(|f| f["path"].as_str().unwrap().contains(&in_ws)));
    let active: Vec<_> = files.iter().filter(|f| f["isActive"] == true).collect();
    assert_eq!(active.len(), 1);
    let ts: Vec<u64> = files
        .iter()
        .map(|f| f["timestamp"].as_u64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] > w[1]), "MRU order {ts:?}");
}

#[test]
fn selection_truncated_at_emoji_boundary() {
    let (f, _c, s) = connected();
    let file = f.ws.file("sel.txt", "x");
    f.companion.file_focused(&file).unwrap();
    let marker = qwen_companion::ide::context::TRUNCATION_MARKER;
    let mut text = "a".repeat(16384 - marker.len() - 1);
    text.push('😀');
    text.push_str(&"b".repeat(100));
    f.companion.set_selection(None, Some(&text)).unwrap();
    let n = s.next_method("ide/contextUpdate", SEC).unwrap();
    let sel = n["params"]["workspaceState"]["openFiles"][0]["selectedText"]
        .as_str()
        .unwrap();
    assert!(sel.ends_with(marker));
    assert!(qwen_companion::ide::context::utf16_len(sel) <= 16384);
    assert!(!sel.contains('😀'));
    // Exactly at the limit: kept whole.
    let exact = format!("{}😀", "c".repeat(16382));
    f.companion.set_selection(None, Some(&exact)).unwrap();
    let n = s.next_method("ide/contextUpdate", SEC).unwrap();
    assert_eq!(
        n["params"]["workspaceState"]["openFiles"][0]["selectedText"],
        json!(exact)
    );
}

#[test]
fn whole_context_push_and_trust() {
    let (f, _c, s) = connected();
    let a = f.ws.file("a.txt", "x");
    let b = f.ws.file("b.txt", "x");
    let doc = json!({"workspaceState": {"openFiles": [
        {"path": a, "timestamp": 100, "isActive": true, "cursor": {"line": 1, "character": 2}, "selectedText": "hi"},
        {"path": b, "timestamp": 50, "isActive": true},
        {"path": "untitled:1", "timestamp": 200}
    ], "isTrusted": false}});
    f.companion.set_context_json(&doc.to_string()).unwrap();
    let n = s.next_method("ide/contextUpdate", SEC).unwrap();
    let ws = &n["params"]["workspaceState"];
    assert_eq!(ws["isTrusted"], false);
    assert_eq!(ws["openFiles"].as_array().unwrap().len(), 2);
    assert_eq!(ws["openFiles"][0]["selectedText"], "hi");
    assert_eq!(ws["openFiles"][1]["isActive"], false);
    assert!(ws["openFiles"][1].get("cursor").is_none());
    assert_eq!(
        f.companion
            .set_context_json("{\"workspaceState\":3}")
            .unwrap_err()
            .status,
        Status::InvalidJson
    );
    f.companion.set_trusted(true).unwrap();
    let n = s.next_method("ide/contextUpdate", SEC).unwrap();
    assert_eq!(n["params"]["workspaceState"]["isTrusted"], true);
}

#[test]
fn lock_file_fields_permissions_and_removal() {
    let f = fixture();
    f.companion.start().unwrap();
    let lock = f.companion.lock_file_path().unwrap();
    let port = f.companion.port().unwrap();
    assert_eq!(
        lock,
        f.lock_dir.path().join("ide").join(format!("{port}.lock"))
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    assert_eq!(v["port"], port);
    assert_eq!(v["workspacePath"], json!(f.ws.path().to_string_lossy()));
    assert_eq!(v["authToken"].as_str().unwrap().len(), 64);
    assert_eq!(v["ppid"], std::process::id());
    assert_eq!(v["ideName"], "Test IDE");
    assert_eq!(
        v["ideInfo"],
        json!({"name": "test-ide", "displayName": "Test IDE"})
    );
    // Mode bits are Unix; on Windows the owner-only DACL of the lock dir is
    // checked by the sys tests.
    #[cfg(unix)]
    {
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&lock), 0o600);
        assert_eq!(mode(lock.parent().unwrap()), 0o700);
    }
    // Atomic write leaves no temporary file behind.
    let entries: Vec<_> = std::fs::read_dir(lock.parent().unwrap()).unwrap().collect();
    assert_eq!(entries.len(), 1);
    let env = f.companion.terminal_env().unwrap();
    assert_eq!(env["QWEN_CODE_IDE_SERVER_PORT"], port.to_string());
    assert_eq!(
        env["QWEN_CODE_IDE_WORKSPACE_PATH"],
        json!(f.ws.path().to_string_lossy())
    );
    f.companion.stop().unwrap();
    assert!(!lock.exists());
    assert_eq!(f.companion.stop().unwrap_err().status, Status::NotRunning);
    assert_eq!(f.companion.port().unwrap_err().status, Status::NotRunning);
    // Restart gets a new port/token and a new lock file.
    f.companion.start().unwrap();
    assert!(f.companion.lock_file_path().unwrap().exists());
}

#[test]
// Unix symlinks (creating one on Windows needs a privilege).
#[cfg(unix)]
fn lock_dir_symlink_is_refused() {
    let target = TempDir::new("target");
    let base = TempDir::new("base");
    let link = base.path().join("ide");
    std::os::unix::fs::symlink(target.path(), &link).unwrap();
    let c = Companion::new(Config {
        lock_dir: Some(link),
        ..Config::default()
    })
    .unwrap();
    let e = c.start().unwrap_err();
    assert_eq!(e.status, Status::Io);
    assert!(!c.is_running());
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0);
}

#[test]
fn workspace_change_rewrites_lock() {
    let f = fixture();
    f.companion.start().unwrap();
    let other = TempDir::new("ws2");
    let roots = vec![
        f.ws.path().to_string_lossy().into_owned(),
        other.path().to_string_lossy().into_owned(),
    ];
    f.companion.set_workspace_roots(roots.clone()).unwrap();
    let v: Value =
        serde_json::from_slice(&std::fs::read(f.companion.lock_file_path().unwrap()).unwrap())
            .unwrap();
    // Node's `path.delimiter`: `;` on Windows, `:` elsewhere.
    let delimiter = if cfg!(windows) { ";" } else { ":" };
    assert_eq!(v["workspacePath"], json!(roots.join(delimiter)));
    // A root with the delimiter in it switches to the JSON-array form the CLI accepts.
    let odd = vec![format!("/tmp/a{delimiter}b")];
    f.companion.set_workspace_roots(odd.clone()).unwrap();
    let v: Value =
        serde_json::from_slice(&std::fs::read(f.companion.lock_file_path().unwrap()).unwrap())
            .unwrap();
    assert_eq!(
        v["workspacePath"],
        json!(serde_json::to_string(&odd).unwrap())
    );
    assert_eq!(
        f.companion
            .set_workspace_roots(vec!["relative".into()])
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
}

#[test]
fn two_clients_both_notified() {
    let (f, mut c1, s1) = connected();
    let mut c2 = Client::from_lock(&f.companion.lock_file_path().unwrap());
    c2.handshake();
    let s2 = c2.open_stream();
    s2.next_method("ide/contextUpdate", SEC).unwrap();
    assert!(wait_until(SEC, || f.companion.connected_clients() == 2));
    let p = f.ws.path().join("two.txt").to_string_lossy().into_owned();
    c1.tool("openDiff", json!({"filePath": p, "newContent": "2"}));
    // Each diff names the CLI session that proposed it (connection order).
    let q0 = f.ws.path().join("two-b.txt").to_string_lossy().into_owned();
    c2.tool("openDiff", json!({"filePath": q0, "newContent": "2b"}));
    let open = f.companion.open_diffs();
    assert_eq!(open["clients"], 2, "{open}");
    assert_eq!(open["diffs"][0]["filePath"], json!(p));
    assert_eq!(open["diffs"][0]["session"]["label"], "CLI #1", "{open}");
    assert_eq!(
        open["diffs"][0]["session"]["id"].as_str(),
        c1.session.as_deref()
    );
    assert_eq!(open["diffs"][1]["session"]["label"], "CLI #2", "{open}");
    f.companion.diff_reject(&q0).unwrap();
    assert_eq!(
        f.companion.open_diffs()["diffs"].as_array().unwrap().len(),
        1
    );
    f.companion.diff_accept(&p, None).unwrap();
    assert!(s1.next_method("ide/diffAccepted", SEC).is_some());
    assert!(s2.next_method("ide/diffAccepted", SEC).is_some());
    let file = f.ws.file("ctx.txt", "x");
    f.companion.file_focused(&file).unwrap();
    assert!(s1.next_method("ide/contextUpdate", SEC).is_some());
    assert!(s2.next_method("ide/contextUpdate", SEC).is_some());
    // A client that went away does not disturb the other.
    s1.close();
    let q = f.ws.path().join("three.txt").to_string_lossy().into_owned();
    c2.tool("openDiff", json!({"filePath": q, "newContent": "3"}));
    f.companion.diff_reject(&q).unwrap();
    assert!(s2.next_method("ide/diffRejected", SEC).is_some());
    assert!(wait_until(SEC, || f.companion.connected_clients() == 1));
}

#[test]
fn diff_result_before_stream_is_delivered_on_open() {
    let (f, mut c) = started();
    c.handshake();
    let p = f.ws.path().join("early.txt").to_string_lossy().into_owned();
    c.tool("openDiff", json!({"filePath": p, "newContent": "E"}));
    f.companion.diff_accept(&p, None).unwrap();
    let s = c.open_stream();
    assert!(s.next_method("ide/contextUpdate", SEC).is_some());
    assert!(s.next_method("ide/diffAccepted", SEC).is_some());
}

#[test]
fn two_companions_in_one_process() {
    let a = fixture();
    let b = fixture();
    a.companion.start().unwrap();
    b.companion.start().unwrap();
    assert_ne!(a.companion.port().unwrap(), b.companion.port().unwrap());
    assert_ne!(
        a.companion.auth_token().unwrap(),
        b.companion.auth_token().unwrap()
    );
    assert_ne!(
        a.companion.lock_file_path().unwrap(),
        b.companion.lock_file_path().unwrap()
    );
    // A's token does not open B.
    let mut wrong = Client::new(
        b.companion.port().unwrap(),
        &a.companion.auth_token().unwrap(),
    );
    let r = wrong.post(&serde_json::from_str(INIT).unwrap());
    assert_eq!(r.status, 401);
    wrong.token = b.companion.auth_token().unwrap();
    wrong.handshake();
    a.companion.stop().unwrap();
    assert!(b.companion.is_running());
    wrong.call("tools/list", json!({}));
}

#[test]
fn stop_with_connected_client() {
    let (f, mut c, s) = connected();
    let lock = f.companion.lock_file_path().unwrap();
    let t0 = Instant::now();
    f.companion.stop().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        t0.elapsed()
    );
    assert!(!lock.exists());
    assert!(s.ended(SEC), "the stream ends when the companion stops");
    let r = std::net::TcpStream::connect(("127.0.0.1", c.port));
    assert!(
        r.is_err() || {
            c.session = None;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                c.call("tools/list", json!({}))
            }))
            .is_err()
        }
    );
}

#[test]
fn diff_result_reaches_a_client_still_connecting() {
    let (f, mut a, _sa) = connected();
    let p = f.ws.path().join("late.txt").to_string_lossy().into_owned();
    a.tool("openDiff", json!({"filePath": p, "newContent": "L"}));
    // B has only been answered `initialize` when the user accepts.
    let mut b = Client::from_lock(&f.companion.lock_file_path().unwrap());
    let r = b.post(&serde_json::from_str(INIT).unwrap());
    assert_eq!(r.status, 200);
    b.session = Some(r.header("mcp-session-id").unwrap().to_string());
    f.companion.diff_accept(&p, None).unwrap();
    let r = b.post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert_eq!(r.status, 202);
    let sb = b.open_stream();
    assert!(sb.next_method("ide/diffAccepted", SEC).is_some());
}

#[test]
// Polls the pull-mode fd (an event HANDLE on Windows).
#[cfg(unix)]
fn pull_mode_events_and_answers() {
    let (f, mut c, s) = connected();
    let fd = f.companion.enable_event_queue().unwrap();
    assert_eq!(f.companion.enable_event_queue().unwrap(), fd);
    let readable = |fd: i32| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    };
    assert!(!readable(fd));
    assert!(f.companion.poll_event().unwrap().is_none());
    let p = f.ws.path().join("pull.txt").to_string_lossy().into_owned();
    let port = c.port;
    let token = c.token.clone();
    let session = c.session.clone();
    let caller = std::thread::spawn(move || {
        let mut c2 = Client::new(port, &token);
        c2.session = session;
        c2.tool("openDiff", json!({"filePath": p, "newContent": "PULLED"}))
    });
    assert!(wait_until(SEC, || readable(fd)));
    let e = f.companion.poll_event().unwrap().expect("event");
    assert_eq!(e["type"], "openDiff");
    assert_eq!(e["newContent"], "PULLED");
    assert_eq!(e["clients"], 1);
    assert_eq!(e["session"]["label"], "CLI #1");
    assert_eq!(e["session"]["id"].as_str(), c.session.as_deref());
    assert!(!readable(fd), "drained once empty");
    let id = e["id"].as_u64().unwrap();
    f.companion.respond(id, Ok(None)).unwrap();
    assert_eq!(
        f.companion.respond(id, Ok(None)).unwrap_err().status,
        Status::NotFound
    );
    let r = caller.join().unwrap();
    assert_eq!(r["content"], json!([]));
    // The callback is not used in pull mode.
    assert!(f.opened.lock().unwrap().is_empty());
    // closeDiff through the queue, answered with the edited text.
    let path = e["filePath"].as_str().unwrap().to_string();
    let (port, token, session) = (c.port, c.token.clone(), c.session.clone());
    let q = path.clone();
    let closer = std::thread::spawn(move || {
        let mut c2 = Client::new(port, &token);
        c2.session = session;
        c2.tool(
            "closeDiff",
            json!({"filePath": q, "suppressNotification": true}),
        )
    });
    assert!(wait_until(SEC, || readable(fd)));
    let e = f.companion.poll_event().unwrap().unwrap();
    assert_eq!(
        e,
        json!({"type": "closeDiff", "id": e["id"], "filePath": path})
    );
    f.companion
        .respond(e["id"].as_u64().unwrap(), Ok(Some("EDITED".into())))
        .unwrap();
    let r = closer.join().unwrap();
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"content": "EDITED"})
    );
    // A refusal.
    let (port, token, session) = (c.port, c.token.clone(), c.session.clone());
    let refused = std::thread::spawn(move || {
        let mut c2 = Client::new(port, &token);
        c2.session = session;
        c2.tool("openDiff", json!({"filePath": "/abs/r", "newContent": "x"}))
    });
    assert!(wait_until(SEC, || readable(fd)));
    let e = f.companion.poll_event().unwrap().unwrap();
    f.companion
        .respond(e["id"].as_u64().unwrap(), Err("not now".into()))
        .unwrap();
    let r = refused.join().unwrap();
    assert_eq!(r["isError"], true);
    assert_eq!(r["content"][0]["text"], "not now");
    drop(s);
    let _ = c.call("tools/list", json!({}));
}

#[test]
fn stop_answers_a_pending_open_diff() {
    let (f, c, _s) = connected();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    f.companion
        .set_open_diff_callback(Some(Arc::new(move |_: &str, _: &str| {
            let _ = entered_tx.lock().unwrap().send(());
            // A deliberately slow host (the behaviour under test): stop must
            // not wait for it.
            std::thread::sleep(Duration::from_millis(1500));
            Ok(())
        })));
    let (port, token, session) = (c.port, c.token.clone(), c.session.clone());
    let caller = std::thread::spawn(move || {
        let mut c2 = Client::new(port, &token);
        c2.session = session;
        c2.tool(
            "openDiff",
            json!({"filePath": "/abs/slow", "newContent": "x"}),
        )
    });
    // The openDiff is pending in the host's callback.
    entered
        .recv_timeout(Duration::from_secs(5))
        .expect("the open-diff callback runs");
    let t0 = Instant::now();
    f.companion.stop().unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(1200),
        "stop took {:?}",
        t0.elapsed()
    );
    let r = caller.join().expect("the CLI got a reply");
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("stopping"));
}

#[test]
fn lock_file_rewrites_are_atomic_for_readers() {
    let f = fixture();
    f.companion.start().unwrap();
    let lock = f.companion.lock_file_path().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Wine 8 has no POSIX-semantics rename (`FileRenameInfoEx` is "invalid
    // parameter") and its `MoveFileExW` refuses to replace a file anyone has
    // open, even with FILE_SHARE_DELETE; Windows 10+ replaces it under the
    // reader. Under Wine the rewrites run without a concurrent reader.
    let wine = qc_test_support::under_wine();
    if wine {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let reader = {
        let (lock, stop) = (lock.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = std::fs::read(&lock).expect("the lock file never disappears");
                let v: Value = serde_json::from_slice(&bytes).expect("never a partial file");
                assert!(v["workspacePath"].is_string());
                reads += 1;
            }
            reads
        })
    };
    let long = "x".repeat(4000);
    for i in 0..300 {
        let root = format!("/tmp/{long}/{i}");
        f.companion.set_workspace_roots(vec![root]).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(wine || reads > 0);
    let dir_entries = std::fs::read_dir(lock.parent().unwrap()).unwrap().count();
    assert_eq!(dir_entries, 1, "no temporary files left behind");
}

#[test]
fn pull_mode_request_that_timed_out_is_gone() {
    let f = fixture_with(|c| c.request_timeout_ms = Some(300));
    f.companion.start().unwrap();
    let mut c = Client::from_lock(&f.companion.lock_file_path().unwrap());
    c.handshake();
    let _s = c.open_stream();
    f.companion.enable_event_queue().unwrap();
    let t0 = Instant::now();
    let r = c.tool(
        "openDiff",
        json!({"filePath": "/abs/late", "newContent": "x"}),
    );
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().contains("300 ms"));
    assert!(t0.elapsed() < Duration::from_secs(3));
    // Nobody waits for it any more: it is not handed out, nor answerable.
    assert!(f.companion.poll_event().unwrap().is_none());
    assert_eq!(
        f.companion.respond(1, Ok(None)).unwrap_err().status,
        Status::NotFound
    );
    // Nor is a diff left open for it.
    assert_eq!(
        f.companion
            .diff_accept("/abs/late", None)
            .unwrap_err()
            .status,
        Status::NotFound
    );
    // Out-of-range timeouts are refused.
    for bad in [10, 600_001] {
        let e = Companion::new(Config {
            request_timeout_ms: Some(bad),
            ..Config::default()
        })
        .err()
        .expect("refused");
        assert_eq!(e.status, Status::InvalidArgument);
    }
}
