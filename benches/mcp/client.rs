//! The one MCP client of `benches/mcp.rs`, used against both servers: raw HTTP/1.1 over one
//! kept-alive `std::net::TcpStream` (TCP_NODELAY), bodies read as `application/json` or
//! `text/event-stream`, chunked or with a length. A session is `initialize` →
//! `notifications/initialized` (must be 202) → `tools/list` (must list the tool), then POSTs.

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{bad, read_line, SseParser};

/// The protocol version the client asks for (the server's answer is then sent back on every
/// request in `Mcp-Protocol-Version`).
const PROTOCOL_VERSION: &str = "2025-11-25";

pub struct Response {
    pub status: u16,
    headers: Vec<(String, String)>,
    /// JSON-RPC messages of the body (one for application/json, one per SSE event).
    pub messages: Vec<Value>,
    /// When the awaited JSON-RPC response had been parsed (else the end of the body).
    pub t_msg: Instant,
    /// When the whole HTTP response had been read (the connection is free again).
    pub t_end: Instant,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC response with `id`.
    pub fn reply(&self, id: i64) -> Option<&Value> {
        self.messages
            .iter()
            .find(|m| m.get("id").and_then(Value::as_i64) == Some(id))
    }
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    host: String,
}

impl Conn {
    fn open(port: u16) -> io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(15)))?;
        Ok(Conn {
            writer: s.try_clone()?,
            reader: BufReader::with_capacity(64 * 1024, s),
            host: format!("127.0.0.1:{port}"),
        })
    }

    /// Sends `method /mcp` with `body` (head and body in one write) and reads the whole
    /// response.
    fn request(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        want_id: Option<i64>,
    ) -> io::Result<Response> {
        let mut req = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.writer.write_all(&bytes)?;

        let (status, headers) = self.read_head()?;
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        let sse = get("content-type").is_some_and(|v| v.starts_with("text/event-stream"));
        let chunked = get("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let length = get("content-length").and_then(|v| v.parse::<usize>().ok());
        if !chunked && length.is_none() && status != 202 && status != 204 {
            return Err(bad(format!(
                "HTTP {status} without a length: cannot keep the connection"
            )));
        }
        let mut parser = SseParser::default();
        let mut raw = Vec::new();
        let mut messages = Vec::new();
        let mut t_msg = None;
        let mut on_piece = |piece: &[u8], messages: &mut Vec<Value>| -> io::Result<()> {
            if !sse {
                raw.extend_from_slice(piece);
                return Ok(());
            }
            for data in parser.feed(piece) {
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
            Ok(())
        };
        if chunked {
            loop {
                let line = read_line(&mut self.reader)?;
                let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
                if size == 0 {
                    while !read_line(&mut self.reader)?.is_empty() {}
                    break;
                }
                let mut buf = vec![0u8; size];
                self.reader.read_exact(&mut buf)?;
                if !read_line(&mut self.reader)?.is_empty() {
                    return Err(bad("chunk not followed by CRLF".into()));
                }
                on_piece(&buf, &mut messages)?;
            }
        } else {
            let mut buf = vec![0u8; length.unwrap_or(0)];
            self.reader.read_exact(&mut buf)?;
            on_piece(&buf, &mut messages)?;
        }
        let t_end = Instant::now();
        if !raw.is_empty() {
            let v: Value = serde_json::from_slice(&raw).map_err(|e| {
                bad(format!(
                    "HTTP {status}: body is not JSON ({e}): {:.200}",
                    String::from_utf8_lossy(&raw)
                ))
            })?;
            if t_msg.is_none() && want_id.is_some() {
                t_msg = Some(t_end);
            }
            messages.push(v);
        }
        Ok(Response {
            status,
            headers,
            messages,
            t_msg: t_msg.unwrap_or(t_end),
            t_end,
        })
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
            if !(100..200).contains(&status) {
                return Ok((status, headers));
            }
        }
    }
}

/// An initialized MCP session on its own kept-alive connection.
pub struct Session {
    conn: Conn,
    auth: String,
    sid: String,
    proto: String,
    next_id: i64,
}

impl Session {
    /// Opens a connection, initializes, and checks that `tools/list` lists `tool`.
    pub fn connect(port: u16, token: &str, tool: &str) -> Result<Session, String> {
        let mut conn = Conn::open(port).map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
        let auth = format!("Bearer {token}");
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name":"qc-mcp-bench","version":"1.0.0"}}});
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
            .ok_or("initialize: no mcp-session-id header")?
            .to_string();
        let proto = r
            .reply(0)
            .and_then(|m| m.pointer("/result/protocolVersion"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("initialize: no result {:?}", r.messages))?
            .to_string();
        let mut s = Session {
            conn,
            auth,
            sid,
            proto,
            next_id: 0,
        };
        let r = s
            .post(
                &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
                None,
            )
            .map_err(|e| format!("notifications/initialized: {e}"))?;
        if r.status != 202 {
            return Err(format!(
                "notifications/initialized answered HTTP {} (must be 202)",
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
            .reply(id)
            .and_then(|m| m.pointer("/result/tools")?.as_array())
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("name")?.as_str())
            .collect();
        if !names.contains(&tool) {
            return Err(format!("tools/list lacks {tool}: {names:?}"));
        }
        Ok(s)
    }

    pub fn take_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends `method /mcp` with the session's headers.
    fn send(&mut self, method: &str, body: &[u8], want_id: Option<i64>) -> io::Result<Response> {
        let Session {
            conn,
            auth,
            sid,
            proto,
            ..
        } = self;
        conn.request(
            method,
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", sid.as_str()),
                ("Mcp-Protocol-Version", proto.as_str()),
            ],
            body,
            want_id,
        )
    }

    pub fn post(&mut self, msg: &Value, want_id: Option<i64>) -> io::Result<Response> {
        self.send("POST", msg.to_string().as_bytes(), want_id)
    }

    /// Ends the session (`DELETE /mcp`); the server must accept it.
    pub fn close(mut self) -> Result<(), String> {
        let r = self
            .send("DELETE", b"", None)
            .map_err(|e| format!("DELETE /mcp: {e}"))?;
        if !(200..300).contains(&r.status) {
            return Err(format!("DELETE /mcp answered HTTP {}", r.status));
        }
        Ok(())
    }

    /// One `tools/call` of `tool` with `{"text": text}`; checks that the result is not an error
    /// and is exactly the text. Returns (to the JSON-RPC response, to the end of the response).
    pub fn echo(&mut self, tool: &str, text: &str) -> Result<(Duration, Duration), String> {
        self.echo_with(tool, text, false)
    }

    /// [`Session::echo`]; `progress`: the request carries `_meta.progressToken`, as Qwen
    /// Code's calls do (it passes `onprogress`), so the server answers with an SSE stream.
    pub fn echo_with(
        &mut self,
        tool: &str,
        text: &str,
        progress: bool,
    ) -> Result<(Duration, Duration), String> {
        let id = self.take_id();
        let mut params = json!({"name": tool, "arguments": {"text": text}});
        if progress {
            params["_meta"] = json!({"progressToken": format!("p{id}")});
        }
        let msg = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params": params});
        let t0 = Instant::now();
        let r = self
            .post(&msg, Some(id))
            .map_err(|e| format!("tools/call: {e}"))?;
        let reply = r.reply(id);
        let ok = r.status == 200
            && reply.is_some_and(|m| {
                m.pointer("/result/content/0/text").and_then(Value::as_str) == Some(text)
                    && !m
                        .pointer("/result/isError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
            });
        if !ok {
            return Err(format!(
                "tools/call {tool}: unexpected answer HTTP {} {:?}",
                r.status, r.messages
            ));
        }
        Ok((r.t_msg - t0, r.t_end - t0))
    }

    /// One MCP `ping` (the HTTP + MCP stack without a tool); time to the JSON-RPC response.
    pub fn ping(&mut self) -> Result<Duration, String> {
        let id = self.take_id();
        let t0 = Instant::now();
        let r = self
            .post(&json!({"jsonrpc":"2.0","id":id,"method":"ping"}), Some(id))
            .map_err(|e| format!("ping: {e}"))?;
        if r.status != 200 || r.reply(id).and_then(|m| m.get("result")).is_none() {
            return Err(format!("ping: HTTP {} {:?}", r.status, r.messages));
        }
        Ok(r.t_msg - t0)
    }
}
