//! The shared loopback layer's limits on the IDE server: connection cap,
//! header/body/idle timeouts, SSE streams untouched by them, session reaping
//! and bounds, stalled clients dropped, open diffs bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use qc_test_support::mcp::*;
use qwen_companion::ide::{Companion, Config};
use qwen_companion::loopback::LimitsConfig;
use serde_json::{json, Value};

struct Fixture {
    _ws: TempDir,
    _lock_dir: TempDir,
    ws_path: String,
    companion: Companion,
}

fn start(f: impl FnOnce(&mut Config)) -> (Fixture, Client) {
    let ws = TempDir::new("ws");
    let lock_dir = TempDir::new("lock");
    let ws_path = ws.path().to_string_lossy().into_owned();
    let mut config = Config {
        workspace_roots: vec![ws_path.clone()],
        lock_dir: Some(lock_dir.path().join("ide")),
        ..Config::default()
    };
    f(&mut config);
    let companion = Companion::new(config).unwrap();
    companion.set_open_diff_callback(Some(std::sync::Arc::new(|_: &str, _: &str| Ok(()))));
    companion.start().unwrap();
    let client = Client::from_lock(&companion.lock_file_path().unwrap());
    (
        Fixture {
            _ws: ws,
            _lock_dir: lock_dir,
            ws_path,
            companion,
        },
        client,
    )
}

fn stats(f: &Fixture) -> Value {
    f.companion.server_stats().unwrap()
}

fn http(f: impl FnOnce(&mut LimitsConfig)) -> Option<LimitsConfig> {
    let mut l = LimitsConfig::default();
    f(&mut l);
    Some(l)
}

/// True when the server closes `s` (EOF or reset) within `timeout`.
fn closed_within(s: &mut TcpStream, timeout: Duration) -> bool {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // a response; keep reading to the close
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

fn keep_alive_request(s: &mut TcpStream, port: u16, token: &str) -> String {
    let body = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    // Read until the (small, complete) response is in.
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") || got.len() < 40 {
        let n = s.read(&mut buf).expect("response");
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&got).contains("\"result\"") {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn cap_refuses_the_excess_only_when_every_slot_is_proven() {
    let (f, c) = start(|c| c.server.http = http(|l| l.max_connections = Some(3)));
    let mut proven: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
            let r = keep_alive_request(&mut s, c.port, &c.token);
            assert!(r.starts_with("HTTP/1.1 200"), "{r}");
            s
        })
        .collect();
    let mut extra = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut text = String::new();
    let _ = extra.read_to_string(&mut text);
    assert!(
        text.starts_with("HTTP/1.1 503"),
        "refused at once: {text:?}"
    );
    assert_eq!(stats(&f)["connections"]["refused"], 1);
    // Free a slot; a silent (unproven) connection takes it, and a newcomer
    // evicts that one instead of being refused.
    drop(proven.pop());
    assert!(wait_until(SEC, || stats(&f)["connections"]["open"] == 2));
    let mut silent = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    assert!(wait_until(SEC, || stats(&f)["connections"]["open"] == 3));
    let mut newcomer = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    let r = keep_alive_request(&mut newcomer, c.port, &c.token);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(
        closed_within(&mut silent, SEC),
        "the unproven connection made room"
    );
    assert_eq!(stats(&f)["connections"]["evicted"], 1);
}

const SEC: Duration = Duration::from_secs(5);

#[test]
fn header_timeout_closes_a_silent_connection() {
    let (f, c) = start(|c| c.server.http = http(|l| l.header_timeout_ms = Some(300)));
    let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n", c.port).as_bytes())
        .unwrap();
    let t = Instant::now();
    assert!(closed_within(&mut s, SEC));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(wait_until(SEC, || stats(&f)["connections"]["open"] == 0));
}

#[test]
fn body_timeout_ends_a_slow_body() {
    let (_f, c) = start(|c| c.server.http = http(|l| l.body_timeout_ms = Some(300)));
    let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: 100\r\n\r\n{{\"jsonrpc\":",
            c.port, c.token
        )
        .as_bytes(),
    )
    .unwrap();
    let t = Instant::now();
    assert!(closed_within(&mut s, SEC), "the slow body is cut");
    assert!(t.elapsed() >= Duration::from_millis(250));
}

#[test]
fn idle_keep_alive_is_closed_but_an_sse_stream_is_not() {
    let (f, mut c) = start(|c| {
        c.server.http = http(|l| {
            l.idle_timeout_ms = Some(300);
            l.header_timeout_ms = Some(200);
        });
        c.server.keep_alive_ms = Some(100);
    });
    let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    keep_alive_request(&mut s, c.port, &c.token);
    assert!(
        closed_within(&mut s, SEC),
        "idle keep-alive connection closed"
    );
    c.handshake();
    let stream = c.open_stream();
    stream
        .next_method("ide/contextUpdate", SEC)
        .expect("initial context");
    // The behaviour under test: the stream stays open while idle for well
    // over the idle timeout (300 ms).
    std::thread::sleep(Duration::from_millis(1500));
    let file = format!("{}/late.rs", f.ws_path);
    std::fs::write(&file, "x").unwrap();
    f.companion.file_focused(&file).unwrap();
    let ctx = stream
        .next_method("ide/contextUpdate", SEC)
        .expect("the stream outlived every timeout");
    assert_eq!(
        ctx["params"]["workspaceState"]["openFiles"][0]["path"],
        json!(file)
    );
}

#[test]
fn reconnect_within_grace_keeps_state_without_duplicate_context() {
    let (f, mut c) = start(|c| c.server.session_grace_ms = Some(1000));
    c.handshake();
    let s = c.open_stream();
    s.next_method("ide/contextUpdate", SEC)
        .expect("first context");
    let last = s.last_event_id().expect("events carry ids");
    let diff = format!("{}/missed.txt", f.ws_path);
    c.tool("openDiff", json!({"filePath": diff, "newContent": "new"}));
    s.close();
    // The server saw the stream go (the client is away).
    assert!(
        wait_until(SEC, || stats(&f)["activeSessions"] == 0),
        "{}",
        stats(&f)
    );
    // Decided while the client was away: delivered on its return, once.
    f.companion.diff_accept(&diff, None).unwrap();
    let s = c.open_stream_after(Some(&last));
    let mut got: Vec<Value> = Vec::new();
    let until = Instant::now() + Duration::from_millis(1200);
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match s.rx.recv_timeout(left) {
            Ok(v) => got.push(v),
            Err(_) => break,
        }
    }
    let count = |m: &str| got.iter().filter(|v| v["method"] == m).count();
    assert_eq!(count("ide/diffAccepted"), 1, "delivered once: {got:?}");
    assert_eq!(
        count("ide/contextUpdate"),
        0,
        "unchanged context is not sent again: {got:?}"
    );
    // Still the same session, with its state.
    let tools = c.call("tools/list", json!({}));
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 2);
    let file = format!("{}/after.rs", f.ws_path);
    std::fs::write(&file, "x").unwrap();
    f.companion.file_focused(&file).unwrap();
    let ctx = s
        .next_method("ide/contextUpdate", SEC)
        .expect("new context");
    assert_eq!(
        ctx["params"]["workspaceState"]["openFiles"][0]["path"],
        json!(file)
    );
    assert_eq!(stats(&f)["sessions"], 1);
}

#[test]
fn abandoned_sessions_are_freed_after_the_grace() {
    let (f, mut c) = start(|c| c.server.session_grace_ms = Some(1000));
    c.handshake();
    let s = c.open_stream();
    s.next_method("ide/contextUpdate", SEC)
        .expect("first context");
    s.close();
    assert!(wait_until(SEC, || stats(&f)["sessions"] == 1
        && stats(&f)["activeSessions"] == 0));
    assert!(
        wait_until(Duration::from_secs(6), || stats(&f)["sessions"] == 0
            && stats(&f)["rmcpSessions"] == 0),
        "{}",
        stats(&f)
    );
    // Gone for rmcp too: the old session id is unknown.
    let r = c.post(&json!({"jsonrpc":"2.0","id":9,"method":"tools/list"}));
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn the_session_count_is_bounded_oldest_stream_less_first() {
    let (f, mut keep) = start(|c| c.server.max_sessions = Some(3));
    keep.handshake();
    let live = keep.open_stream();
    live.next_method("ide/contextUpdate", SEC).expect("context");
    let mut others: Vec<Client> = (0..4)
        .map(|_| {
            let mut c = Client::new(keep.port, &keep.token);
            c.handshake();
            // Spaces the sessions' creation times, so which is "oldest" is
            // unambiguous (not a wait for an event).
            std::thread::sleep(Duration::from_millis(5));
            c
        })
        .collect();
    assert!(
        wait_until(SEC, || stats(&f)["sessions"] == 3
            && stats(&f)["rmcpSessions"] == 3),
        "{}",
        stats(&f)
    );
    // The session with a stream survived; the oldest stream-less ones went.
    let tools = keep.call("tools/list", json!({}));
    assert!(tools.get("result").is_some());
    let first = others.remove(0);
    let r = first.post(&json!({"jsonrpc":"2.0","id":9,"method":"tools/list"}));
    assert_eq!(r.status, 404);
    let newest = others.pop().unwrap();
    let r = newest.post(&json!({"jsonrpc":"2.0","id":9,"method":"tools/list"}));
    assert_eq!(r.status, 200);
}

#[test]
fn a_client_that_stops_reading_is_dropped() {
    let (f, mut c) = start(|c| {
        c.stalled_client_ms = Some(300);
        c.debounce_ms = Some(0);
        c.max_wait_ms = Some(0);
    });
    c.handshake();
    // A raw GET stream nobody reads (a suspended `qwen`).
    let mut raw = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    raw.write_all(
        format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: text/event-stream\r\nmcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n",
            c.port,
            c.token,
            c.session.as_deref().unwrap()
        )
        .as_bytes(),
    )
    .unwrap();
    assert!(wait_until(SEC, || stats(&f)["activeSessions"] == 1));
    let file = format!("{}/big.rs", f.ws_path);
    std::fs::write(&file, "x").unwrap();
    let big = "y".repeat(16_000);
    let t = Instant::now();
    let mut i = 0u32;
    while stats(&f)["sessions"] != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "never dropped: {}",
            stats(&f)
        );
        f.companion.file_focused(&file).unwrap();
        f.companion
            .set_selection(None, Some(&format!("{i}{big}")))
            .unwrap();
        i += 1;
        // Paces the updates like an editor (not a wait: the loop ends on
        // the drop, checked above).
        std::thread::sleep(Duration::from_millis(2));
    }
    // A fresh client still gets the latest context at once.
    let mut fresh = Client::new(c.port, &c.token);
    fresh.handshake();
    let s = fresh.open_stream();
    let ctx = s.next_method("ide/contextUpdate", SEC).expect("context");
    let sel = ctx["params"]["workspaceState"]["openFiles"][0]["selectedText"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sel.starts_with(&format!("{}y", i - 1)), "latest selection");
    drop(raw);
}

#[test]
fn open_diffs_are_bounded_oldest_closed_first() {
    let (f, mut c) = start(|_| {});
    c.handshake();
    let s = c.open_stream();
    s.next_method("ide/contextUpdate", SEC).expect("context");
    for i in 0..40 {
        let r = c.tool(
            "openDiff",
            json!({"filePath": format!("{}/d{i}.txt", f.ws_path), "newContent": format!("v{i}")}),
        );
        assert_ne!(r["isError"], json!(true), "{r}");
    }
    let closed = s.collect("ide/diffClosed", Duration::from_millis(800));
    let paths: Vec<String> = closed
        .iter()
        .map(|(_, v)| v["params"]["filePath"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..8).map(|i| format!("{}/d{i}.txt", f.ws_path)).collect();
    assert_eq!(paths, expected, "the 8 oldest of 40 are closed (32 kept)");
    // The oldest are gone, the newest are still open.
    assert!(f
        .companion
        .diff_accept(&format!("{}/d0.txt", f.ws_path), None)
        .is_err());
    f.companion
        .diff_accept(&format!("{}/d39.txt", f.ws_path), None)
        .unwrap();
}
