//! The floor of `benches/mcp.rs`: a bare keep-alive HTTP/1.1 server on std::net (a thread per
//! connection, blocking reads, no runtime, no plugin) that speaks just enough MCP for the
//! bench's client — `initialize` (with a session id), notifications (202), `tools/list` (the
//! one tool), `tools/call` (echoes `arguments.text`), `ping`, `DELETE` — each answer a small SSE
//! body with a length, as the real servers send. What the client measures against it is the
//! loopback TCP round trip plus the client's own work; ours minus this is what the MCP stack
//! and the plugin add.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{json, Value};

pub struct Floor {
    pub port: u16,
    pub token: String,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    accept: Option<thread::JoinHandle<()>>,
}

impl Floor {
    pub fn start(tool: &'static str) -> io::Result<Floor> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let (c, s) = (conns.clone(), stop.clone());
        let accept = thread::Builder::new()
            .name("mcp-floor".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let _ = conn.set_nodelay(true);
                    if let Ok(clone) = conn.try_clone() {
                        c.lock().unwrap_or_else(|p| p.into_inner()).push(clone);
                    }
                    thread::spawn(move || {
                        let _ = serve(conn, tool);
                    });
                }
            })?;
        Ok(Floor {
            port,
            token: "floor".into(),
            conns,
            stop,
            accept: Some(accept),
        })
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = c.shutdown(Shutdown::Both);
        }
        // wake the accept loop so it sees `stop`
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: TcpStream, tool: &str) -> io::Result<()> {
    let mut writer = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let method = line.split_whitespace().next().unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let reply = match (method.as_str(), msg["method"].as_str(), msg.get("id")) {
            ("DELETE", _, _) => None,
            (_, _, None) => {
                writer.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")?;
                continue;
            }
            (_, Some("initialize"), Some(id)) => Some(json!({"jsonrpc":"2.0","id":id,"result":{
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"0"}}})),
            (_, Some("tools/list"), Some(id)) => Some(
                json!({"jsonrpc":"2.0","id":id,"result":{"tools":[{"name":tool,"inputSchema":{"type":"object"}}]}}),
            ),
            (_, Some("tools/call"), Some(id)) => Some(json!({"jsonrpc":"2.0","id":id,"result":{
                "content":[{"type":"text","text":msg["params"]["arguments"]["text"]}]}})),
            (_, _, Some(id)) => Some(json!({"jsonrpc":"2.0","id":id,"result":{}})),
        };
        let body = reply
            .map(|r| format!("event: message\ndata: {r}\n\n"))
            .unwrap_or_default();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: floor-session\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        writer.write_all(format!("{head}{body}").as_bytes())?;
    }
}
