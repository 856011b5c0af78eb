//! `qc-mcp-bridge`: the stdio MCP server Qwen Code starts for the
//! `qwen-companion-plugins` entry. It finds the IDE's running plugin MCP
//! server through its lock file and relays every JSON-RPC message between
//! stdio (one message per line) and the server's streamable HTTP endpoint.
//!
//! - Discovery: `<qwen_home>/companion/plugins-mcp/*.lock` (see
//!   `qwen_companion::mcp_bridge::discovery`): live pid; the IDE named by
//!   `QWEN_COMPANION_PLUGINS_PID` (set in the terminals an IDE starts)
//!   first, then a workspace containing the working directory, then the
//!   newest.
//! - No running IDE (or one that refuses us): one line on stderr saying so
//!   and exit status 1, before any MCP message is answered. Qwen Code shows
//!   the server disconnected and retries later; a stdio server never enters
//!   its OAuth mode.
//! - Each stdin message is one POST (its own thread, so a server request
//!   such as `roots/list` sent on a call's stream can be answered while the
//!   call runs); JSON and SSE answers are written to stdout as they come.
//!   After `notifications/initialized` a GET stream carries the server's
//!   own notifications (`tools/list_changed`, …) and requests.
//! - The server stopping (the IDE closed) ends the bridge with a message;
//!   stdin closing ends it with status 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qwen_companion::mcp_bridge::discovery::{self, LockInfo};
use qwen_companion::mcp_bridge::server::default_lock_dir;
use serde_json::{json, Value};

const PROTOCOL_FALLBACK: &str = "2025-06-18";
/// Longest wait for any part of the server's answer to `initialize`
/// (20 s; `QC_MCP_BRIDGE_INITIALIZE_TIMEOUT_MS` overrides it).
fn initialize_timeout() -> Duration {
    std::env::var("QC_MCP_BRIDGE_INITIALIZE_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(20))
}

fn fail(message: &str) -> ! {
    eprintln!("qc-mcp-bridge: {message}");
    std::process::exit(1);
}

/// A blocking HTTP/1.1 response: status, headers (lowercase names), body reader.
struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Box<dyn BufRead + Send>,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Decodes a `Transfer-Encoding: chunked` body as it arrives.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let size = line.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size")
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            self.done = true;
            return Ok(0);
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = String::new();
            self.inner.read_line(&mut crlf)?;
        }
        Ok(n)
    }
}

/// Sends one request (`Connection: close`) and reads the head; `limit`
/// bounds every read of the answer (none for calls, which may run long).
fn http(
    lock: &LockInfo,
    method: &str,
    extra: &[(&str, String)],
    body: &[u8],
    limit: Option<Duration>,
) -> std::io::Result<HttpResponse> {
    let mut s = TcpStream::connect(("127.0.0.1", lock.port))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(limit)?;
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n",
        lock.port, lock.token
    );
    if !body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let body: Box<dyn BufRead + Send> = if chunked {
        Box::new(BufReader::new(Chunked {
            inner: r,
            left: 0,
            done: false,
        }))
    } else if let Some(n) = length {
        Box::new(BufReader::new(r.take(n)))
    } else {
        Box::new(r)
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Calls `each` with the data of every SSE event of `body` until it ends.
fn sse_events(body: &mut dyn BufRead, mut each: impl FnMut(&str)) {
    let mut data = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        match body.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            if !data.is_empty() {
                each(&data);
                data.clear();
            }
        } else if let Some(d) = l.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    if !data.is_empty() {
        each(&data);
    }
}

struct Bridge {
    lock: LockInfo,
    /// stdin closed: the end of the streams is ours, not the server's.
    closing: AtomicBool,
    out: Mutex<std::io::Stdout>,
    session: Mutex<Option<String>>,
    protocol: Mutex<String>,
}

impl Bridge {
    /// Writes one message to stdout as one line.
    fn emit(&self, text: &str) {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let messages = match v {
            Value::Array(a) => a,
            v => vec![v],
        };
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        for m in messages {
            // Remember what initialize negotiated.
            if let Some(p) = m
                .get("result")
                .and_then(|r| r.get("protocolVersion"))
                .and_then(Value::as_str)
            {
                *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = p.to_string();
            }
            let _ = writeln!(out, "{m}");
        }
        let _ = out.flush();
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = Vec::new();
        if let Some(s) = self
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            h.push(("mcp-session-id", s));
            h.push((
                "mcp-protocol-version",
                self.protocol
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ));
        }
        h
    }

    /// An error answer for request `id` (when the message was a request).
    fn error_reply(&self, id: Option<&Value>, message: &str) {
        if let Some(id) = id {
            self.emit(
                &json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32603, "message": message}})
                .to_string(),
            );
        }
    }

    /// Relays one message from stdin.
    fn relay(self: &Arc<Self>, msg: Value) {
        let id = msg
            .get("id")
            .filter(|_| msg.get("method").is_some())
            .cloned();
        let is_initialize = msg.get("method") == Some(&json!("initialize"));
        let is_initialized = msg.get("method") == Some(&json!("notifications/initialized"));
        let body = msg.to_string();
        // The handshake must not hang the CLI's discovery (30 s for stdio).
        let limit = is_initialize.then(initialize_timeout);
        let mut r = match http(&self.lock, "POST", &self.headers(), body.as_bytes(), limit) {
            Ok(r) => r,
            Err(e) => fail(&format!(
                "the IDE's plugin server on port {} is gone ({e}); `/mcp` → reconnect after restarting the IDE",
                self.lock.port
            )),
        };
        match r.status {
            200 => {}
            202 => {
                if is_initialized {
                    self.open_stream();
                }
                return;
            }
            401 | 403 => fail(&format!(
                "the IDE's plugin server refused the bridge (HTTP {}); restart the IDE",
                r.status
            )),
            404 if !is_initialize => {
                fail("the IDE's plugin server lost this session; `/mcp` → reconnect")
            }
            s => {
                let mut text = String::new();
                let _ = r.body.take(4096).read_to_string(&mut text);
                self.error_reply(id.as_ref(), &format!("HTTP {s}: {}", text.trim()));
                return;
            }
        }
        if is_initialize {
            if let Some(s) = r.header("mcp-session-id") {
                *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.to_string());
            }
        }
        let sse = r
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let mut answered = false;
        if sse {
            sse_events(&mut r.body, |data| {
                answered = true;
                self.emit(data)
            });
        } else {
            let mut text = String::new();
            let _ = r.body.read_to_string(&mut text);
            if !text.trim().is_empty() {
                answered = true;
                self.emit(&text);
            }
        }
        if is_initialize && !answered {
            fail("the IDE's plugin server did not answer initialize; `/mcp` → reconnect");
        }
    }

    /// The GET stream for the server's own messages; when it ends, the
    /// server has stopped (or dropped the session): the bridge ends too.
    fn open_stream(self: &Arc<Self>) {
        let me = self.clone();
        std::thread::spawn(move || {
            let mut r = match http(&me.lock, "GET", &me.headers(), b"", None) {
                Ok(r) if r.status == 200 => r,
                Ok(r) if r.status == 405 => return,
                Ok(r) => fail(&format!(
                    "the IDE's plugin server refused the event stream (HTTP {})",
                    r.status
                )),
                Err(e) => fail(&format!("the IDE's plugin server is gone ({e})")),
            };
            sse_events(&mut r.body, |data| me.emit(data));
            if me.closing.load(Ordering::SeqCst) {
                return;
            }
            fail("the IDE's plugin server closed the connection (the IDE stopped?); `/mcp` → reconnect");
        });
    }
}

/// `--version` and `--help` answer and exit 0 (installers and bindings check
/// the bridge they unpacked this way). The settings.json entry starts the
/// bridge as `qc-mcp-bridge plugins` (the one server it relays to); no
/// argument means the same. Anything else is refused with status 2.
fn answer_arguments() {
    let Some(arg) = std::env::args_os().nth(1) else {
        return;
    };
    match arg.to_str() {
        Some("plugins") => {}
        Some("--version" | "-V") => {
            println!("qc-mcp-bridge {}", env!("CARGO_PKG_VERSION"));
            std::process::exit(0);
        }
        Some("--help" | "-h") => {
            println!(
                "qc-mcp-bridge {}: the stdio MCP server Qwen Code starts for the \
                 qwen-companion-plugins entry of settings.json. It relays to the plugin \
                 MCP server of the IDE running for the current directory.\n\n\
                 usage: qc-mcp-bridge [plugins]  (started by Qwen Code, stdio)\n       \
                 qc-mcp-bridge --version\n       qc-mcp-bridge --help",
                env!("CARGO_PKG_VERSION")
            );
            std::process::exit(0);
        }
        _ => {
            eprintln!(
                "qc-mcp-bridge: unknown argument {:?} (Qwen Code starts the bridge as `qc-mcp-bridge plugins`; try --help)",
                arg
            );
            std::process::exit(2);
        }
    }
}

fn main() {
    answer_arguments();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let dir = match default_lock_dir() {
        Ok(d) => d,
        Err(e) => fail(&format!(
            "cannot find the Qwen home directory: {}",
            e.message
        )),
    };
    // A live pid whose port refuses connections (its server stopped
    // without removing the file, or the pid was reused) is skipped.
    let reachable = |l: &LockInfo| {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], l.port));
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
    };
    let preferred = discovery::preferred_pid_from_env();
    let Some(lock) = discovery::candidates_preferring(&dir, &cwd, preferred)
        .into_iter()
        .find(reachable)
    else {
        fail(&format!(
            "no running IDE with qwen-companion plugins for {}; start the IDE, then `/mcp` → reconnect",
            cwd.display()
        ));
    };
    let bridge = Arc::new(Bridge {
        lock,
        closing: AtomicBool::new(false),
        out: Mutex::new(std::io::stdout()),
        session: Mutex::new(None),
        protocol: Mutex::new(PROTOCOL_FALLBACK.to_string()),
    });
    let stdin = std::io::stdin();
    let mut workers = Vec::new();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                bridge.emit(
                    &json!({"jsonrpc": "2.0", "id": null,
                        "error": {"code": -32700, "message": format!("parse error: {e}")}})
                    .to_string(),
                );
                continue;
            }
        };
        // initialize must finish first: later messages need its session.
        if msg.get("method") == Some(&json!("initialize")) {
            bridge.relay(msg);
            continue;
        }
        let b = bridge.clone();
        workers.retain(|w: &std::thread::JoinHandle<()>| !w.is_finished());
        workers.push(std::thread::spawn(move || b.relay(msg)));
    }
    // stdin closed: let answers in flight finish briefly, end the session.
    bridge.closing.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while workers.iter().any(|w| !w.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if bridge
        .session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some()
    {
        let _ = http(
            &bridge.lock,
            "DELETE",
            &bridge.headers(),
            b"",
            Some(Duration::from_secs(2)),
        );
    }
    std::process::exit(0);
}

#[cfg(test)]
mod tests;
