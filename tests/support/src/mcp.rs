//! A small, strict MCP-over-HTTP client for the integration tests: raw
//! HTTP/1.1 on a TcpStream, so every header and status is under the test's
//! control, with a reader thread for the GET SSE stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// JSON-RPC messages in the body (plain JSON or SSE `data:` events).
    pub fn messages(&self) -> Vec<Value> {
        let text = self.text();
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
        {
            return vec![serde_json::from_str(&text).expect("JSON body")];
        }
        sse_events(&text)
    }
}

/// Parses SSE text into the JSON values of its `data:` events (empty data skipped).
pub fn sse_events(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let data = data.join("\n");
        if !data.trim().is_empty() {
            if let Ok(v) = serde_json::from_str(&data) {
                out.push(v);
            }
        }
    }
    out
}

fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        reader.read_line(&mut l).expect("header line");
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

/// Reads the next chunk of a chunked body; `None` at the end.
fn read_chunk(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut size_line = String::new();
    if reader.read_line(&mut size_line).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(size_line.trim().split(';').next()?, 16).ok()?;
    let mut buf = vec![0; size + 2];
    reader.read_exact(&mut buf).ok()?;
    buf.truncate(size);
    if size == 0 {
        return None;
    }
    Some(buf)
}

fn read_body(reader: &mut BufReader<TcpStream>, headers: &[(String, String)]) -> Vec<u8> {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        while let Some(c) = read_chunk(reader) {
            body.extend_from_slice(&c);
        }
        body
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let mut body = vec![0; len];
        reader.read_exact(&mut body).expect("body");
        body
    } else {
        let mut body = Vec::new();
        let _ = reader.read_to_end(&mut body);
        body
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub fn raw_request(port: u16, head: &str, body: &[u8]) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = head.to_string();
    if !req.ends_with("\r\n\r\n") {
        req.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ));
    }
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut reader = BufReader::new(s);
    let (status, headers) = read_head(&mut reader);
    let body = read_body(&mut reader, &headers);
    Response {
        status,
        headers,
        body,
    }
}

/// The tool names of a `tools/list` answer, in order.
pub fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .expect("tools/list result")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The text blocks of a `tools/call` result, joined by newlines.
pub fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub struct Client {
    pub port: u16,
    pub token: String,
    pub session: Option<String>,
    next_id: u64,
}

impl Client {
    pub fn new(port: u16, token: &str) -> Client {
        Client {
            port,
            token: token.to_string(),
            session: None,
            next_id: 0,
        }
    }

    /// Reads port and token from a lock file, as the CLI does.
    pub fn from_lock(lock: &Path) -> Client {
        let v: Value = serde_json::from_slice(&std::fs::read(lock).expect("lock file")).unwrap();
        Client::new(
            v["port"].as_u64().unwrap() as u16,
            v["authToken"].as_str().unwrap(),
        )
    }

    fn head(&self, method: &str, extra: &str) -> String {
        let mut h = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n",
            self.port, self.token
        );
        if let Some(s) = &self.session {
            h.push_str(&format!(
                "mcp-session-id: {s}\r\nmcp-protocol-version: 2025-11-25\r\n"
            ));
        }
        h.push_str(extra);
        h
    }

    pub fn post(&self, msg: &Value) -> Response {
        raw_request(
            self.port,
            &self.head("POST", ""),
            msg.to_string().as_bytes(),
        )
    }

    /// Sends a request and returns its JSON-RPC response message.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let r = self.post(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        assert_eq!(r.status, 200, "{method}: {}", r.text());
        r.messages()
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(id)))
            .unwrap_or_else(|| panic!("no response to {method} in {}", r.text()))
    }

    pub fn tool(&mut self, name: &str, args: Value) -> Value {
        let r = self.call("tools/call", json!({"name": name, "arguments": args}));
        r["result"].clone()
    }

    /// initialize + notifications/initialized (asserts the 202).
    pub fn handshake(&mut self) {
        let r = self.post(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"streamable-http-client","version":"1.0.0"}}}),
        );
        assert_eq!(r.status, 200, "initialize: {}", r.text());
        self.session = Some(r.header("mcp-session-id").expect("session id").to_string());
        let r = self.post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        assert_eq!(r.status, 202, "initialized must be answered 202");
    }

    /// Opens the GET SSE stream; notifications arrive on the returned stream.
    pub fn open_stream(&self) -> Stream {
        self.open_stream_after(None)
    }

    /// Re-opens the GET stream as the CLI's transport does after a drop:
    /// with `Last-Event-ID` set to the last event id it received.
    pub fn open_stream_after(&self, last_event_id: Option<&str>) -> Stream {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let resume = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: text/event-stream\r\nmcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n{resume}\r\n",
            self.port,
            self.token,
            self.session.as_deref().expect("handshake first")
        );
        s.write_all(head.as_bytes()).unwrap();
        let closer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        let (status, headers) = read_head(&mut reader);
        assert_eq!(status, 200, "GET stream");
        assert!(headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("content-type")
                && v.starts_with("text/event-stream")));
        let (tx, rx) = mpsc::channel();
        let (ctx, crx) = mpsc::channel();
        let last_id = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let last = last_id.clone();
        std::thread::spawn(move || {
            let mut pending = String::new();
            while let Some(chunk) = read_chunk(&mut reader) {
                pending.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(pos) = pending.find("\n\n") {
                    let event: String = pending.drain(..pos + 2).collect();
                    if event.lines().any(|l| l.starts_with(':')) {
                        let _ = ctx.send(());
                    }
                    if let Some(id) = event.lines().find_map(|l| l.strip_prefix("id:")) {
                        *last.lock().unwrap() = Some(id.trim().to_string());
                    }
                    for v in sse_events(&event) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Stream {
            rx,
            comments: crx,
            conn: closer,
            last_id,
        }
    }
}

pub struct Stream {
    pub rx: mpsc::Receiver<Value>,
    pub comments: mpsc::Receiver<()>,
    conn: TcpStream,
    last_id: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Stream {
    /// The id of the last SSE event received (what `Last-Event-ID` carries).
    pub fn last_event_id(&self) -> Option<String> {
        self.last_id.lock().unwrap().clone()
    }

    /// Next notification with `method`, skipping others, within `timeout`.
    pub fn next_method(&self, method: &str, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.rx.recv_timeout(left) {
                Ok(v) if v["method"] == method => return Some(v),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }
    /// All notifications with `method` that arrive within `window`.
    pub fn collect(&self, method: &str, window: Duration) -> Vec<(Instant, Value)> {
        let deadline = Instant::now() + window;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(v) if v["method"] == method => out.push((Instant::now(), v)),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        out
    }
    /// True if the stream ended (server closed it) within `timeout`.
    pub fn ended(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.rx.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
    pub fn close(self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
    }
}

pub use crate::{wait_until, TempDir};
