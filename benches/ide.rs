//! `cargo bench --bench ide` — qwen-companion against a Node baseline and a loopback floor.
//!
//! Three servers are measured in one run, with one client:
//! * **ours**: the companion, started in-process through the C ABI (`qc_companion_new/start`),
//!   port and token read from the lock file written into a temporary lock dir;
//! * **node**: `bench/node-baseline/server.mjs`, the official VS Code companion's stack
//!   (express + `@modelcontextprotocol/sdk` `StreamableHTTPServerTransport`, stateful sessions);
//! * **floor**: a bare keep-alive HTTP/1.1 server on std::net answering every POST with a fixed
//!   small JSON body (and, for events, writing an SSE frame on a GET stream when told to).
//!
//! The client is a raw HTTP/1.1 client over one keep-alive `std::net::TcpStream` (TCP_NODELAY)
//! that reads `application/json` and `text/event-stream` bodies, chunked or not.
//!
//! Measured: `tools/call openDiff` round trip, context event -> `ide/contextUpdate` latency minus
//! the debounce, RSS growth of `start` (in a fresh child process: this binary run with
//! `--rss-child`), and the wall time of `qc_companion_start` (returns after the lock file is
//! written). Targets are printed as PASS/MISS; a miss never fails the process.
//!
//! Knobs (environment): `QC_BENCH_N` (default 2000 round trips), `QC_BENCH_WARMUP` (200),
//! `QC_BENCH_EVENTS` (200), `QC_BENCH_STARTS` (20), `QC_BENCH_NODE` (node binary, default `node`),
//! `QC_BENCH_SKIP_NODE=1`, `QC_BENCH_DEBOUNCE_MS` (50, ours and node), `QC_BENCH_BUDGET_S` (20 s of
//! wall time at most per measurement loop). Build with `RUSTFLAGS="--cfg qc_bench_no_ffi"` to measure node and the
//! floor only (when the library does not build).

#![allow(unexpected_cfgs)]
#![cfg_attr(qc_bench_no_ffi, allow(unused_mut, dead_code))]

#[cfg(not(qc_bench_no_ffi))]
extern crate qwen_companion;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[allow(dead_code)] // shared with the other benches; not every helper is used here
mod common;
use common::*;

/// The debounce configured for ours and node (subtracted from the event latency).
fn debounce_ms() -> u64 {
    env_usize("QC_BENCH_DEBOUNCE_MS", 50) as u64
}

/// Wall-time budget of one measurement loop, so a slow server cannot stretch the run.
fn budget() -> Duration {
    Duration::from_secs(env_usize("QC_BENCH_BUDGET_S", 20) as u64)
}
const PROTOCOL_VERSION: &str = "2025-11-25";

// ======================================================================= statistics

fn median(v: &[f64]) -> Option<f64> {
    stats(v.to_vec()).map(|s| s.p50)
}

// ======================================================================= HTTP client

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    host: String,
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    /// JSON-RPC messages of the body (one for application/json, one per SSE event otherwise).
    messages: Vec<Value>,
    /// When the awaited JSON-RPC response (or, without one, the whole body) had arrived.
    t_msg: Instant,
    /// When the whole HTTP response had been read.
    t_end: Instant,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

enum Framing {
    Chunked,
    Length(usize),
    UntilClose,
}

/// Reads a body piece by piece (a chunk at a time for chunked encoding).
struct Body {
    framing: Framing,
    done: bool,
}

impl Body {
    fn next_piece(&mut self, r: &mut BufReader<TcpStream>) -> io::Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        match &mut self.framing {
            Framing::Chunked => {
                let line = read_line(r)?;
                let size_hex = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_hex, 16)
                    .map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
                if size == 0 {
                    // trailers up to the empty line
                    while !read_line(r)?.is_empty() {}
                    self.done = true;
                    return Ok(None);
                }
                let mut buf = vec![0u8; size];
                r.read_exact(&mut buf)?;
                let crlf = read_line(r)?;
                if !crlf.is_empty() {
                    return Err(bad("chunk not followed by CRLF".into()));
                }
                Ok(Some(buf))
            }
            Framing::Length(left) => {
                if *left == 0 {
                    self.done = true;
                    return Ok(None);
                }
                let avail = r.fill_buf()?;
                if avail.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "body cut short",
                    ));
                }
                let n = avail.len().min(*left);
                let piece = avail[..n].to_vec();
                r.consume(n);
                *left -= n;
                Ok(Some(piece))
            }
            Framing::UntilClose => {
                let avail = r.fill_buf()?;
                if avail.is_empty() {
                    self.done = true;
                    return Ok(None);
                }
                let piece = avail.to_vec();
                r.consume(piece.len());
                Ok(Some(piece))
            }
        }
    }
}

impl Conn {
    fn open(port: u16) -> io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn {
            writer: s.try_clone()?,
            reader: BufReader::with_capacity(64 * 1024, s),
            host: format!("127.0.0.1:{port}"),
        })
    }

    fn send_head(&mut self, method: &str, headers: &[(&str, &str)], body: &[u8]) -> io::Result<()> {
        let mut req = format!("{method} /mcp HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (k, v) in headers {
            req.push_str(k);
            req.push_str(": ");
            req.push_str(v);
            req.push_str("\r\n");
        }
        if method != "GET" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.writer.write_all(&bytes)
    }

    fn read_head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        loop {
            let status_line = read_line(&mut self.reader)?;
            let status: u16 = status_line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
            let mut headers = Vec::new();
            loop {
                let line = read_line(&mut self.reader)?;
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            if (100..200).contains(&status) {
                continue; // 100 Continue and friends
            }
            return Ok((status, headers));
        }
    }

    fn framing(method: &str, status: u16, headers: &[(String, String)]) -> Framing {
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        if method == "HEAD" || status == 204 || status == 304 {
            Framing::Length(0)
        } else if get("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            Framing::Chunked
        } else if let Some(n) = get("content-length").and_then(|v| v.parse().ok()) {
            Framing::Length(n)
        } else {
            Framing::UntilClose
        }
    }

    /// Sends a request and reads the whole response. With `want_id`, `t_msg` is the moment the
    /// JSON-RPC response with that id was complete (SSE bodies can carry it before they end).
    fn request(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        want_id: Option<i64>,
    ) -> io::Result<Response> {
        self.send_head(method, headers, body)?;
        let (status, rheaders) = self.read_head()?;
        let sse = rheaders
            .iter()
            .any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream"));
        let mut b = Body {
            framing: Self::framing(method, status, &rheaders),
            done: false,
        };
        let mut parser = SseParser::default();
        let mut raw = Vec::new();
        let mut messages = Vec::new();
        let mut t_msg = None;
        while let Some(piece) = b.next_piece(&mut self.reader)? {
            if sse {
                for data in parser.feed(&piece) {
                    let v: Value = serde_json::from_str(&data)
                        .map_err(|e| bad(format!("bad SSE JSON {data:?}: {e}")))?;
                    if t_msg.is_none()
                        && want_id.is_some()
                        && v.get("id").and_then(Value::as_i64) == want_id
                    {
                        t_msg = Some(Instant::now());
                    }
                    messages.push(v);
                }
            } else {
                raw.extend_from_slice(&piece);
            }
        }
        let t_end = Instant::now();
        if !sse && !raw.is_empty() {
            if let Ok(v) = serde_json::from_slice::<Value>(&raw) {
                messages.push(v);
            }
        }
        Ok(Response {
            status,
            headers: rheaders,
            messages,
            t_msg: t_msg.unwrap_or(t_end),
            t_end,
        })
    }
}

// ======================================================================= MCP session

struct Session {
    conn: Conn,
    port: u16,
    token: String,
    sid: String,
    proto: String,
    next_id: i64,
}

impl Session {
    fn connect(port: u16, token: &str) -> Result<Session, String> {
        let mut conn = Conn::open(port).map_err(|e| format!("connect: {e}"))?;
        let auth = format!("Bearer {token}");
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name":"qc-bench","version":"1.0.0"}}});
        let r = conn
            .request(
                "POST",
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                ],
                init.to_string().as_bytes(),
                Some(0),
            )
            .map_err(|e| format!("initialize: {e}"))?;
        if r.status != 200 {
            return Err(format!("initialize: HTTP {} {:?}", r.status, r.messages));
        }
        let sid = r
            .header("mcp-session-id")
            .ok_or("initialize: no mcp-session-id")?
            .to_string();
        let proto = r
            .messages
            .iter()
            .find(|m| m.get("id").and_then(Value::as_i64) == Some(0))
            .and_then(|m| m.pointer("/result/protocolVersion"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("initialize: no result {:?}", r.messages))?
            .to_string();
        let mut s = Session {
            conn,
            port,
            token: token.to_string(),
            sid,
            proto,
            next_id: 1,
        };
        let r = s
            .post(
                &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
                None,
            )
            .map_err(|e| format!("notifications/initialized: {e}"))?;
        if r.status != 202 {
            return Err(format!(
                "notifications/initialized answered {} (must be 202)",
                r.status
            ));
        }
        let id = s.take_id();
        let r = s
            .post(
                &json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{}}),
                Some(id),
            )
            .map_err(|e| format!("tools/list: {e}"))?;
        let names: Vec<&str> = r
            .messages
            .iter()
            .filter_map(|m| m.pointer("/result/tools")?.as_array())
            .flatten()
            .filter_map(|t| t.get("name")?.as_str())
            .collect();
        if !names.contains(&"openDiff") || !names.contains(&"closeDiff") {
            return Err(format!(
                "tools/list lacks openDiff/closeDiff: {:?}",
                r.messages
            ));
        }
        Ok(s)
    }

    fn take_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn post(&mut self, msg: &Value, want_id: Option<i64>) -> io::Result<Response> {
        let auth = format!("Bearer {}", self.token);
        self.conn.request(
            "POST",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", &self.sid),
                ("Mcp-Protocol-Version", &self.proto),
            ],
            msg.to_string().as_bytes(),
            want_id,
        )
    }

    /// Opens the GET SSE stream of this session on a second connection. Every JSON-RPC message
    /// that arrives on it is sent, with its arrival time, to the returned receiver.
    fn open_stream(&self) -> Result<EventStream, String> {
        open_event_stream(
            self.port,
            &[
                ("Authorization", &format!("Bearer {}", self.token)),
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &self.sid),
                ("Mcp-Protocol-Version", &self.proto),
            ],
        )
    }
}

struct EventStream {
    rx: Receiver<(Instant, Value)>,
    socket: TcpStream,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn open_event_stream(port: u16, headers: &[(&str, &str)]) -> Result<EventStream, String> {
    let mut conn = Conn::open(port).map_err(|e| format!("GET connect: {e}"))?;
    conn.reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(|e| e.to_string())?;
    conn.send_head("GET", headers, b"")
        .map_err(|e| format!("GET: {e}"))?;
    let (status, rheaders) = conn.read_head().map_err(|e| format!("GET: {e}"))?;
    if status != 200 {
        return Err(format!("GET /mcp answered HTTP {status}"));
    }
    let socket = conn.writer.try_clone().map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    let thread = thread::Builder::new()
        .name("sse-reader".into())
        .spawn(move || {
            let mut body = Body {
                framing: Conn::framing("GET", status, &rheaders),
                done: false,
            };
            let mut parser = SseParser::default();
            while let Ok(Some(piece)) = body.next_piece(&mut conn.reader) {
                let now = Instant::now();
                for data in parser.feed(&piece) {
                    if let Ok(v) = serde_json::from_str::<Value>(&data) {
                        if tx.send((now, v)).is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(EventStream {
        rx,
        socket,
        thread: Some(thread),
    })
}

fn open_diff_msg(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"openDiff",
        "arguments":{"filePath":"/tmp/qc-bench-ws/src/bench.txt","newContent":"fn main() {}\n"}}})
}

/// `tools/call openDiff` round trips on the session's keep-alive connection.
/// Returns (time to the JSON-RPC response, time to the end of the HTTP response), in µs.
fn bench_open_diff(
    s: &mut Session,
    warmup: usize,
    n: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mut msg_us = Vec::with_capacity(n);
    let mut end_us = Vec::with_capacity(n);
    let t_start = Instant::now();
    for i in 0..warmup + n {
        if t_start.elapsed() > budget() {
            eprintln!(
                "bench: round-trip loop stopped by the {:?} budget at #{i}",
                budget()
            );
            break;
        }
        let id = s.take_id();
        let msg = open_diff_msg(id);
        let t0 = Instant::now();
        let r = s
            .post(&msg, Some(id))
            .map_err(|e| format!("openDiff #{i}: {e}"))?;
        let ok = r.status == 200
            && r.messages.iter().any(|m| {
                m.get("id").and_then(Value::as_i64) == Some(id)
                    && m.pointer("/result/content")
                        .is_some_and(|c| c == &json!([]))
                    && !m
                        .pointer("/result/isError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
            });
        if !ok {
            return Err(format!(
                "openDiff #{i}: unexpected answer HTTP {} {:?}",
                r.status, r.messages
            ));
        }
        if i >= warmup {
            msg_us.push(us(r.t_msg - t0));
            end_us.push(us(r.t_end - t0));
        }
    }
    Ok((msg_us, end_us))
}

/// MCP `ping` round trips (the transport and MCP stack without a tool or callback), in µs.
fn bench_ping(s: &mut Session, warmup: usize, n: usize) -> Result<Vec<f64>, String> {
    let mut out = Vec::with_capacity(n);
    let t_start = Instant::now();
    for i in 0..warmup + n {
        if t_start.elapsed() > budget() {
            break;
        }
        let id = s.take_id();
        let msg = json!({"jsonrpc":"2.0","id":id,"method":"ping"});
        let t0 = Instant::now();
        let r = s
            .post(&msg, Some(id))
            .map_err(|e| format!("ping #{i}: {e}"))?;
        if r.status != 200
            || !r.messages.iter().any(|m| {
                m.get("id").and_then(Value::as_i64) == Some(id) && m.get("result").is_some()
            })
        {
            return Err(format!("ping #{i}: HTTP {} {:?}", r.status, r.messages));
        }
        if i >= warmup {
            out.push(us(r.t_msg - t0));
        }
    }
    Ok(out)
}

/// A `closeDiff` call, checked once for shape (not timed).
fn check_close_diff(s: &mut Session) -> Result<String, String> {
    let id = s.take_id();
    let msg = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"closeDiff",
        "arguments":{"filePath":"/tmp/qc-bench-ws/src/bench.txt","suppressNotification":true}}});
    let r = s
        .post(&msg, Some(id))
        .map_err(|e| format!("closeDiff: {e}"))?;
    let m = r
        .messages
        .iter()
        .find(|m| m.get("id").and_then(Value::as_i64) == Some(id))
        .ok_or_else(|| format!("closeDiff: no response {:?}", r.messages))?;
    Ok(m.get("result")
        .or(m.get("error"))
        .map(|v| v.to_string())
        .unwrap_or_default())
}

/// Drains notifications until `quiet` passes without one.
fn drain(rx: &Receiver<(Instant, Value)>, quiet: Duration) {
    while rx.recv_timeout(quiet).is_ok() {}
}

fn cursor_line_in(v: &Value) -> Option<u64> {
    if v.get("method").and_then(Value::as_str) != Some("ide/contextUpdate") {
        return None;
    }
    v.pointer("/params/workspaceState/openFiles")?
        .as_array()?
        .iter()
        .find_map(|f| f.pointer("/cursor/line")?.as_u64())
}

/// Context event -> `ide/contextUpdate` latency minus `debounce`, in µs (may be negative).
/// `trigger(line)` fires one event that sets the cursor to `line` (1-based).
fn bench_events(
    stream: &EventStream,
    events: usize,
    debounce: Duration,
    mut trigger: impl FnMut(u32) -> Result<(), String>,
) -> Result<(Vec<f64>, usize), String> {
    drain(&stream.rx, Duration::from_millis(150));
    let mut out = Vec::with_capacity(events);
    let mut timeouts = 0;
    let t_start = Instant::now();
    for i in 0..events {
        if t_start.elapsed() > budget() {
            eprintln!(
                "bench: event loop stopped by the {:?} budget at #{i}",
                budget()
            );
            break;
        }
        let line = 10 + i as u32;
        let t0 = Instant::now();
        trigger(line)?;
        let deadline = t0 + Duration::from_secs(2);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match stream.rx.recv_timeout(left) {
                Ok((t, v)) if cursor_line_in(&v) == Some(line as u64) => {
                    out.push(us(t - t0) - us(debounce));
                    break;
                }
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    timeouts += 1;
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => return Err("event stream closed".into()),
            }
        }
        if timeouts > 5 {
            return Err(format!("{timeouts} events never reached the client"));
        }
        // space events further apart than the debounce (and let trailing messages arrive)
        thread::sleep(Duration::from_millis(15));
        while stream.rx.try_recv().is_ok() {}
    }
    Ok((out, timeouts))
}

// ======================================================================= floor server

struct Floor {
    port: u16,
    /// Tells the notifier thread to write one SSE frame (carrying this cursor line) on every
    /// open GET stream.
    notify: Sender<u32>,
}

const FLOOR_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;

fn start_floor() -> io::Result<Floor> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    let port = listener.local_addr()?.port();
    let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let (notify, rx) = mpsc::channel::<u32>();
    {
        let streams = streams.clone();
        thread::Builder::new().name("floor-notify".into()).spawn(move || {
            for line in rx {
                let data = format!(
                    "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"ide/contextUpdate\",\"params\":{{\"workspaceState\":{{\"openFiles\":[{{\"path\":\"/f\",\"cursor\":{{\"line\":{line},\"character\":1}}}}]}}}}}}\n\n"
                );
                let frame = format!("{:x}\r\n{data}\r\n", data.len());
                for s in streams.lock().unwrap().iter_mut() {
                    let _ = s.write_all(frame.as_bytes());
                }
            }
        })?;
    }
    thread::Builder::new()
        .name("floor-accept".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let streams = streams.clone();
                let _ = thread::Builder::new()
                    .name("floor-conn".into())
                    .spawn(move || {
                        let _ = floor_conn(conn, &streams);
                    });
            }
        })?;
    Ok(Floor { port, notify })
}

fn floor_conn(conn: TcpStream, streams: &Mutex<Vec<TcpStream>>) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut w = conn.try_clone()?;
    let mut r = BufReader::with_capacity(64 * 1024, conn);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{FLOOR_BODY}",
        FLOOR_BODY.len()
    );
    loop {
        let request_line = read_line(&mut r)?;
        let mut len = 0usize;
        loop {
            let line = read_line(&mut r)?;
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        if request_line.starts_with("GET") {
            w.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
            )?;
            streams.lock().unwrap().push(w.try_clone()?);
            // hold the connection until the client goes away
            let mut sink = [0u8; 64];
            while r.read(&mut sink)? > 0 {}
            return Ok(());
        }
        w.write_all(response.as_bytes())?;
    }
}

/// Plain POST round trips against the floor (same request bytes as an MCP openDiff call).
fn bench_floor_rtt(port: u16, warmup: usize, n: usize) -> Result<Vec<f64>, String> {
    let mut c = Conn::open(port).map_err(|e| e.to_string())?;
    let auth = "Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let mut out = Vec::with_capacity(n);
    let t_start = Instant::now();
    for i in 0..warmup + n {
        if t_start.elapsed() > budget() {
            eprintln!(
                "bench: round-trip loop stopped by the {:?} budget at #{i}",
                budget()
            );
            break;
        }
        let body = open_diff_msg(i as i64 + 2).to_string();
        let t0 = Instant::now();
        let r = c
            .request(
                "POST",
                &[
                    ("Authorization", auth),
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("Mcp-Session-Id", "00000000-0000-0000-0000-000000000000"),
                    ("Mcp-Protocol-Version", PROTOCOL_VERSION),
                ],
                body.as_bytes(),
                None,
            )
            .map_err(|e| e.to_string())?;
        if r.status != 200 || r.messages.is_empty() {
            return Err(format!("floor answered HTTP {}", r.status));
        }
        if i >= warmup {
            out.push(us(r.t_end - t0));
        }
    }
    Ok(out)
}

// ======================================================================= node baseline

fn node_dir() -> PathBuf {
    baseline_dir("node-baseline")
}

/// Makes sure bench/node-baseline/node_modules exists (`npm ci` from the pinned lock).
fn ensure_node_modules() -> Result<(), String> {
    ensure_npm_deps(
        &node_dir(),
        &[
            "node_modules/@modelcontextprotocol/sdk/package.json",
            "node_modules/express/package.json",
        ],
        "node baseline",
    )
}

struct NodeServer {
    child: Child,
    stdin: ChildStdin,
    port: u16,
    token: String,
    rss_idle_kb: u64,
    rss_listening_kb: u64,
    /// spawn -> first stdout line
    ready: Duration,
}

impl NodeServer {
    fn spawn() -> Result<NodeServer, String> {
        let t0 = Instant::now();
        let mut child = Command::new(node_bin())
            .arg("server.mjs")
            .current_dir(node_dir())
            .env("BASELINE_DEBOUNCE_MS", debounce_ms().to_string())
            .env("BASELINE_WORKSPACE", "/tmp/qc-bench-ws")
            .env_remove("NODE_OPTIONS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn node: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {} // keep draining
        });
        let first = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("node baseline did not start: {other:?}"));
            }
        };
        let ready = t0.elapsed();
        let v: Value =
            serde_json::from_str(&first).map_err(|e| format!("node said {first:?}: {e}"))?;
        let port = v["port"].as_u64().ok_or("no port")? as u16;
        Ok(NodeServer {
            child,
            stdin,
            port,
            token: v["token"].as_str().ok_or("no token")?.to_string(),
            rss_idle_kb: v["rssIdleKb"].as_u64().unwrap_or(0),
            rss_listening_kb: v["rssListeningKb"].as_u64().unwrap_or(0),
            ready,
        })
    }

    fn cursor(&mut self, line: u32) -> Result<(), String> {
        self.stdin
            .write_all(format!("cursor {line} 1\n").as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("node stdin: {e}"))
    }

    fn rss_kb(&self) -> Option<u64> {
        proc_rss_kb(&format!("/proc/{}/status", self.child.id()))
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        quit_child(&mut self.child, &mut self.stdin, Duration::from_millis(500));
    }
}

fn proc_rss_kb(path: &str) -> Option<u64> {
    let s = std::fs::read_to_string(path).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

// ======================================================================= ours (C ABI)

#[cfg(not(qc_bench_no_ffi))]
mod ours {
    use super::*;
    use std::ffi::{c_char, c_void, CStr, CString};

    // The crate's own C ABI (the same symbols a C host links), not a hand-made copy.
    use qwen_companion::ffi::{
        qc_companion, qc_companion_file_focused, qc_companion_free, qc_companion_lock_file_path,
        qc_companion_new, qc_companion_set_cursor, qc_companion_set_open_diff_callback,
        qc_companion_start, qc_companion_stop, qc_reply, qc_string_free, qc_version,
    };

    unsafe extern "C" fn open_diff_shown(
        _ud: *mut c_void,
        _path: *const c_char,
        _content: *const c_char,
        _len: usize,
        _reply: *mut qc_reply,
    ) -> i32 {
        0
    }

    pub fn version() -> String {
        unsafe { CStr::from_ptr(qc_version()) }
            .to_string_lossy()
            .into_owned()
    }

    fn check(what: &str, status: u32, err: *mut c_char) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        let msg = if err.is_null() {
            String::new()
        } else {
            let m = unsafe { CStr::from_ptr(err) }
                .to_string_lossy()
                .into_owned();
            unsafe { qc_string_free(err) };
            m
        };
        Err(format!("{what} -> status {status}: {msg}"))
    }

    /// A companion handle; stopped and freed on drop.
    pub struct Companion {
        h: *mut qc_companion,
        pub lock_dir: PathBuf,
    }

    pub struct Running {
        pub port: u16,
        pub token: String,
        pub lock_file: PathBuf,
    }

    impl Companion {
        pub fn new(tag: &str) -> Result<Companion, String> {
            let base = std::env::temp_dir().join(format!("qc-bench-{}-{tag}", std::process::id()));
            let lock_dir = base.join("ide");
            let ws = base.join("ws");
            std::fs::create_dir_all(ws.join("src")).map_err(|e| e.to_string())?;
            std::fs::create_dir_all(&lock_dir).map_err(|e| e.to_string())?;
            let config = json!({
                "workspaceRoots": [ws.to_string_lossy()],
                "ideName": "qc-bench", "ideDisplayName": "qc-bench",
                "lockDir": lock_dir.to_string_lossy(),
                "trusted": true, "debounceMs": debounce_ms(), "maxWaitMs": 200,
            });
            let config = CString::new(config.to_string()).unwrap();
            let mut h = std::ptr::null_mut();
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_new",
                unsafe { qc_companion_new(config.as_ptr(), &mut h, &mut err) },
                err,
            )?;
            let c = Companion { h, lock_dir };
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_set_open_diff_callback",
                unsafe {
                    qc_companion_set_open_diff_callback(
                        c.h,
                        Some(open_diff_shown),
                        std::ptr::null_mut(),
                        None,
                        &mut err,
                    )
                },
                err,
            )?;
            Ok(c)
        }

        pub fn workspace(&self) -> PathBuf {
            self.lock_dir.parent().unwrap().join("ws")
        }

        /// `qc_companion_start`, returning its wall time.
        pub fn start(&self) -> Result<Duration, String> {
            let mut err = std::ptr::null_mut();
            let t0 = Instant::now();
            let st = unsafe { qc_companion_start(self.h, &mut err) };
            let dt = t0.elapsed();
            check("qc_companion_start", st, err)?;
            Ok(dt)
        }

        pub fn stop(&self) -> Result<(), String> {
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_stop",
                unsafe { qc_companion_stop(self.h, &mut err) },
                err,
            )
        }

        pub fn lock_file(&self) -> Result<PathBuf, String> {
            let mut out = std::ptr::null_mut();
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_lock_file_path",
                unsafe { qc_companion_lock_file_path(self.h, &mut out, &mut err) },
                err,
            )?;
            if out.is_null() {
                return Err("qc_companion_lock_file_path gave NULL".into());
            }
            let p = unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned();
            unsafe { qc_string_free(out) };
            Ok(PathBuf::from(p))
        }

        /// Port and token from the lock file (which must exist once start returned).
        pub fn running(&self) -> Result<Running, String> {
            let lock_file = self.lock_file()?;
            let text = std::fs::read_to_string(&lock_file)
                .map_err(|e| format!("lock file {}: {e}", lock_file.display()))?;
            let v: Value =
                serde_json::from_str(&text).map_err(|e| format!("lock file JSON: {e}"))?;
            let port = v["port"]
                .as_u64()
                .ok_or_else(|| format!("lock file has no port: {text}"))?
                as u16;
            let token = v["authToken"]
                .as_str()
                .ok_or_else(|| format!("lock file has no authToken: {text}"))?
                .to_string();
            Ok(Running {
                port,
                token,
                lock_file,
            })
        }

        pub fn file_focused(&self, path: &Path) -> Result<(), String> {
            let p = CString::new(path.to_string_lossy().as_bytes()).unwrap();
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_file_focused",
                unsafe { qc_companion_file_focused(self.h, p.as_ptr(), &mut err) },
                err,
            )
        }

        pub fn set_cursor(&self, line: u32, character: u32) -> Result<(), String> {
            let mut err = std::ptr::null_mut();
            check(
                "qc_companion_set_cursor",
                unsafe {
                    qc_companion_set_cursor(self.h, std::ptr::null(), line, character, &mut err)
                },
                err,
            )
        }
    }

    impl Drop for Companion {
        fn drop(&mut self) {
            unsafe { qc_companion_free(self.h) };
            if let Some(base) = self.lock_dir.parent() {
                let _ = std::fs::remove_dir_all(base);
            }
        }
    }
}

// ======================================================================= RSS child

/// `ide --rss-child`: measures VmRSS of this fresh process around `new` and `start`, and the cold
/// `start` time; prints one JSON line.
#[cfg(not(qc_bench_no_ffi))]
fn rss_child() -> Result<(), String> {
    let rss = || proc_rss_kb("/proc/self/status").unwrap_or(0);
    let before = rss();
    let c = ours::Companion::new("rss")?;
    let after_new = rss();
    let cold = c.start()?;
    let after_start = rss();
    let run = c.running()?;
    // some use: one session, 100 openDiff calls, a GET stream (client buffers included)
    let mut s = Session::connect(run.port, &run.token)?;
    let stream = s.open_stream()?;
    bench_open_diff(&mut s, 0, 100)?;
    drop(stream);
    drop(s);
    thread::sleep(Duration::from_millis(50));
    let after_use = rss();
    c.stop()?;
    drop(c);
    println!(
        "{}",
        json!({"before": before, "afterNew": after_new, "afterStart": after_start,
               "afterUse": after_use, "coldStartUs": us(cold)})
    );
    Ok(())
}

// ======================================================================= main

#[derive(Default)]
struct Row {
    ours: Option<Stats>,
    node: Option<Stats>,
    floor: Option<Stats>,
}

fn print_row(name: &str, r: &Row, pick: fn(&Stats) -> f64) {
    let o = r.ours.as_ref().map(pick);
    let n = r.node.as_ref().map(pick);
    let f = r.floor.as_ref().map(pick);
    println!(
        "{name:<34} {:>10} {:>10} {:>10} {:>11} {:>11}",
        fmt_opt(o, 1.0, 1),
        fmt_opt(n, 1.0, 1),
        fmt_opt(f, 1.0, 1),
        ratio(n, o),
        ratio(o, f)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    #[cfg(not(qc_bench_no_ffi))]
    if args.iter().any(|a| a == "--rss-child") {
        if let Err(e) = rss_child() {
            eprintln!("rss child: {e}");
            std::process::exit(2);
        }
        return;
    }
    let _ = &args;

    let t_total = Instant::now();
    let load_start = loadavg();
    let n = env_usize("QC_BENCH_N", 2000);
    let warmup = env_usize("QC_BENCH_WARMUP", 200);
    let events = env_usize("QC_BENCH_EVENTS", 200);
    let starts = env_usize("QC_BENCH_STARTS", 20);
    let debounce = Duration::from_millis(debounce_ms());
    let mut problems: Vec<String> = Vec::new();

    #[cfg(not(qc_bench_no_ffi))]
    let ours_version = ours::version();
    #[cfg(qc_bench_no_ffi)]
    let ours_version = "not built (--cfg qc_bench_no_ffi)".to_string();
    println!("qwen-companion IDE benchmark: ours {ours_version} (in-process, C ABI) vs node baseline vs loopback floor");
    println!(
        "  {n} sequential tools/call openDiff after {warmup} warm-up on one keep-alive connection; \
         {events} context events (debounce {} ms subtracted); {starts} start cycles; {} cores",
        debounce.as_millis(),
        thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );

    let mut rtt = Row::default();
    let mut rtt_end = Row::default();
    let mut ev = Row::default();
    let mut ping = Row::default();
    let mut ours_timeouts = 0usize;
    let mut node_timeouts = 0usize;

    // ---------------- floor
    match start_floor() {
        Ok(floor) => {
            match bench_floor_rtt(floor.port, warmup, n) {
                Ok(v) => {
                    rtt.floor = stats(v.clone());
                    rtt_end.floor = stats(v.clone());
                    ping.floor = stats(v);
                }
                Err(e) => problems.push(format!("floor RTT: {e}")),
            }
            match open_event_stream(floor.port, &[("Accept", "text/event-stream")]) {
                Ok(stream) => {
                    let tx = floor.notify.clone();
                    match bench_events(&stream, events.min(100), Duration::ZERO, |line| {
                        tx.send(line).map_err(|e| e.to_string())
                    }) {
                        Ok((v, _)) => ev.floor = stats(v),
                        Err(e) => problems.push(format!("floor events: {e}")),
                    }
                }
                Err(e) => problems.push(format!("floor stream: {e}")),
            }
        }
        Err(e) => problems.push(format!("floor: {e}")),
    }

    // ---------------- ours
    let mut ours_rss: Option<Value> = None;
    let mut ours_start: Vec<f64> = Vec::new();
    let mut ours_new: Vec<f64> = Vec::new();
    let mut ours_close_diff = String::new();
    #[cfg(not(qc_bench_no_ffi))]
    {
        let mut run = || -> Result<(), String> {
            let c = ours::Companion::new("main")?;
            c.start()?;
            let running = c.running()?;
            let active = c.workspace().join("src").join("main.rs");
            std::fs::write(&active, "fn main() {}\n").map_err(|e| e.to_string())?;
            c.file_focused(&active)?;
            let mut s = Session::connect(running.port, &running.token)?;
            let stream = s.open_stream()?;
            let (m, e) = bench_open_diff(&mut s, warmup, n)?;
            rtt.ours = stats(m);
            rtt_end.ours = stats(e);
            ours_close_diff = check_close_diff(&mut s).unwrap_or_else(|e| e);
            ping.ours = stats(bench_ping(&mut s, warmup / 2, n / 2)?);
            let (v, t) = bench_events(&stream, events, debounce, |line| c.set_cursor(line, 1))?;
            ev.ours = stats(v);
            ours_timeouts = t;
            drop(stream);
            drop(s);
            c.stop()?;
            if running.lock_file.exists() {
                return Err("lock file still there after stop".into());
            }
            Ok(())
        };
        if let Err(e) = run() {
            problems.push(format!("ours: {e}"));
        }

        // start -> lock file, fresh companion per cycle
        for i in 0..starts {
            let r = (|| -> Result<(), String> {
                let t0 = Instant::now();
                let c = ours::Companion::new(&format!("start{i}"))?;
                ours_new.push(us(t0.elapsed()));
                let dt = c.start()?;
                let lock = c.lock_file()?;
                if !lock.exists() {
                    return Err(format!(
                        "lock file {} missing when start returned",
                        lock.display()
                    ));
                }
                ours_start.push(us(dt));
                c.stop()?;
                Ok(())
            })();
            if let Err(e) = r {
                problems.push(format!("ours start cycle {i}: {e}"));
                break;
            }
        }

        // RSS in a fresh child process
        let out = std::env::current_exe()
            .map_err(|e| e.to_string())
            .and_then(|exe| {
                Command::new(exe)
                    .arg("--rss-child")
                    .output()
                    .map_err(|e| e.to_string())
            });
        match out {
            Ok(o) if o.status.success() => {
                let line = String::from_utf8_lossy(&o.stdout);
                match serde_json::from_str::<Value>(line.trim()) {
                    Ok(v) => ours_rss = Some(v),
                    Err(e) => problems.push(format!("rss child output {line:?}: {e}")),
                }
            }
            Ok(o) => problems.push(format!(
                "rss child failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => problems.push(format!("rss child: {e}")),
        }
    }

    // ---------------- node
    let mut node_ready: Vec<f64> = Vec::new();
    let mut node_rss: Option<(u64, u64, Option<u64>)> = None;
    let mut node_close_diff = String::new();
    if env_flag("QC_BENCH_SKIP_NODE") {
        problems.push("node baseline skipped (QC_BENCH_SKIP_NODE=1)".into());
    } else {
        let mut run = || -> Result<(), String> {
            ensure_node_modules()?;
            let mut node = NodeServer::spawn()?;
            node_ready.push(us(node.ready));
            let mut s = Session::connect(node.port, &node.token)?;
            let stream = s.open_stream()?;
            let (m, e) = bench_open_diff(&mut s, warmup, n)?;
            rtt.node = stats(m);
            rtt_end.node = stats(e);
            node_close_diff = check_close_diff(&mut s).unwrap_or_else(|e| e);
            ping.node = stats(bench_ping(&mut s, warmup / 2, n / 2)?);
            let (v, t) = bench_events(&stream, events, debounce, |line| node.cursor(line))?;
            ev.node = stats(v);
            node_timeouts = t;
            node_rss = Some((node.rss_idle_kb, node.rss_listening_kb, node.rss_kb()));
            drop(stream);
            drop(s);
            drop(node);
            for _ in 0..2 {
                let extra = NodeServer::spawn()?;
                node_ready.push(us(extra.ready));
            }
            Ok(())
        };
        if let Err(e) = run() {
            problems.push(format!("node: {e}"));
        }
    }

    // ---------------- report
    println!();
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>11} {:>11}",
        "latency (us)", "ours", "node", "floor", "node/ours", "ours/floor"
    );
    print_row("openDiff RTT p50", &rtt, |s| s.p50);
    print_row("openDiff RTT p99", &rtt, |s| s.p99);
    print_row("openDiff RTT p50 (to end of body)", &rtt_end, |s| s.p50);
    print_row("openDiff RTT p99 (to end of body)", &rtt_end, |s| s.p99);
    print_row("MCP ping RTT p50 (no tool call)", &ping, |s| s.p50);
    print_row("MCP ping RTT p99 (no tool call)", &ping, |s| s.p99);
    print_row("contextUpdate - debounce p50", &ev, |s| s.p50);
    print_row("contextUpdate - debounce p99", &ev, |s| s.p99);
    println!(
        "  (samples: RTT ours {} / node {} / floor {}; events ours {} / node {} / floor {}; \
         lost events ours {ours_timeouts} / node {node_timeouts}; the floor has no debounce)",
        rtt.ours.as_ref().map_or(0, |s| s.n),
        rtt.node.as_ref().map_or(0, |s| s.n),
        rtt.floor.as_ref().map_or(0, |s| s.n),
        ev.ours.as_ref().map_or(0, |s| s.n),
        ev.node.as_ref().map_or(0, |s| s.n),
        ev.floor.as_ref().map_or(0, |s| s.n),
    );

    println!();
    let growth_kb = ours_rss
        .as_ref()
        .and_then(|v| Some(v["afterStart"].as_f64()? - v["before"].as_f64()?));
    if let Some(v) = &ours_rss {
        println!(
            "ours RSS (fresh process): before new {} kB, after new {} kB, after start {} kB \
             (+{} kB), after 1 session + 100 openDiff {} kB",
            v["before"],
            v["afterNew"],
            v["afterStart"],
            growth_kb.map_or("?".into(), |g| format!("{g:.0}")),
            v["afterUse"]
        );
    } else {
        println!("ours RSS: n/a");
    }
    let node_growth = node_rss.map(|(idle, listening, _)| listening as f64 - idle as f64);
    match node_rss {
        Some((idle, listening, after)) => println!(
            "node RSS: idle node {idle} kB, server listening {listening} kB (+{} kB), after the benchmark {} kB",
            listening as i64 - idle as i64,
            after.map_or("?".into(), |a| a.to_string())
        ),
        None => println!("node RSS: n/a"),
    }
    let start_med = median(&ours_start);
    println!(
        "ours qc_companion_start (returns after the lock file is written): median {} ms, p99/max {} ms over {} cycles; \
         cold start in a fresh process {} ms; qc_companion_new median {} ms",
        fmt_opt(start_med, 1000.0, 3),
        fmt_opt(stats(ours_start.clone()).map(|s| s.p99), 1000.0, 3),
        ours_start.len(),
        fmt_opt(ours_rss.as_ref().and_then(|v| v["coldStartUs"].as_f64()), 1000.0, 3),
        fmt_opt(median(&ours_new), 1000.0, 3),
    );
    println!(
        "node spawn -> first stdout line (port+token): median {} ms over {} spawns (context only)",
        fmt_opt(median(&node_ready), 1000.0, 1),
        node_ready.len()
    );
    println!("closeDiff answers: ours {ours_close_diff} | node {node_close_diff}");

    println!();
    println!("targets:");
    let sp = |o: &Option<Stats>, nd: &Option<Stats>| match (o, nd) {
        (Some(o), Some(nd)) if o.p50 > 0.0 => Some(nd.p50 / o.p50),
        _ => None,
    };
    let rtt_speedup = sp(&rtt.ours, &rtt.node);
    target(
        rtt_speedup.map(|x| x >= 5.0),
        format!(
            "openDiff RTT p50 >= 5x faster than node: {}",
            rtt_speedup.map_or("n/a".into(), |x| format!("{x:.2}x"))
        ),
    );
    let ev_speedup = match (&ev.ours, &ev.node) {
        (Some(o), Some(nd)) if o.p50 > 0.0 => Some(nd.p50 / o.p50),
        _ => None,
    };
    target(
        ev_speedup.map(|x| x >= 5.0),
        format!(
            "contextUpdate p50 (minus debounce) >= 5x faster than node: {}",
            ev_speedup.map_or("n/a".into(), |x| format!("{x:.2}x"))
        ),
    );
    let p99 = rtt.ours.as_ref().map(|s| s.p99);
    target(
        p99.map(|x| x < 1000.0),
        format!(
            "ours openDiff RTT p99 < 1 ms: {} ms",
            fmt_opt(p99, 1000.0, 3)
        ),
    );
    let ev99 = ev.ours.as_ref().map(|s| s.p99);
    target(
        ev99.map(|x| x < 1000.0),
        format!(
            "ours contextUpdate p99 (minus debounce) < 1 ms: {} ms",
            fmt_opt(ev99, 1000.0, 3)
        ),
    );
    target(
        growth_kb.map(|g| g < 8.0 * 1024.0),
        format!(
            "ours RSS growth of new+start < 8 MiB: {} MiB (node: {} MiB)",
            fmt_opt(growth_kb, 1024.0, 2),
            fmt_opt(node_growth, 1024.0, 2)
        ),
    );
    target(
        start_med.map(|x| x < 10_000.0),
        format!("ours start < 10 ms: {} ms", fmt_opt(start_med, 1000.0, 3)),
    );

    print_footer(&problems, &load_start, t_total);
}
