//! Bounded soak of the IDE server as a days-long IDE sees it (one test, run
//! alone in its own process so RSS and descriptor counts are its own):
//! 1. two batches of 1 000 abandoned sessions (initialize, initialized, GET
//!    stream, gone — as every `qwen` run leaves them): after the grace the
//!    session count is back to the real client and the second batch adds
//!    less than 5 MB of RSS;
//! 2. a session whose stream never reads while 3 000 large context updates
//!    are pushed: RSS stays within a few MB, a fresh client gets the latest
//!    context at once;
//! 3. 1 000 half-open connections: all closed within the header timeout (5 s),
//!    descriptors back to the start value, a legitimate client served
//!    throughout without added latency worth naming.
//!
//! The figures are printed (`--nocapture`) for the record. The companion
//! runs in a child process (this test binary re-executed) so that the RSS and
//! descriptors measured are the server's alone, as an IDE would see them.

// Counts the server's descriptors in /proc and raises RLIMIT_NOFILE: Unix.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use qc_test_support::mcp::*;
use qwen_companion::ide::{Companion, Config};
use qwen_companion::loopback::{LimitsConfig, ServerConfig};
use serde_json::{json, Value};

const SEC: Duration = Duration::from_secs(5);

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn raise_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on our own process.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max.min(16384);
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
}

fn mb(kb: i64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

/// The server side, in the child: a companion driven by stdin lines
/// (`stats`, `updates N FILE`), answering one JSON line each.
#[test]
fn soak_server() {
    if std::env::var_os("QC_SOAK_SERVER").is_none() {
        return; // only as the child of `soak`
    }
    raise_fd_limit();
    let ws = std::env::var("QC_SOAK_WS").unwrap();
    let lock_dir = std::env::var("QC_SOAK_LOCK").unwrap();
    let companion = Companion::new(Config {
        workspace_roots: vec![ws],
        lock_dir: Some(lock_dir.into()),
        debounce_ms: Some(0),
        max_wait_ms: Some(0),
        stalled_client_ms: Some(60_000),
        server: ServerConfig {
            session_grace_ms: Some(1000),
            max_sessions: Some(4096),
            http: Some(LimitsConfig {
                // The default header timeout (5 s), room for the whole flood.
                max_connections: Some(4096),
                ..LimitsConfig::default()
            }),
            ..ServerConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    companion.start().unwrap();
    let out = std::io::stdout();
    let say = |v: Value| {
        let mut o = out.lock();
        writeln!(o, "QC {v}").unwrap();
        o.flush().unwrap();
    };
    say(json!({"lock": companion.lock_file_path().unwrap()}));
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let mut words = line.splitn(3, ' ');
        match words.next() {
            Some("stats") => say(companion.server_stats().unwrap()),
            Some("updates") => {
                let n: usize = words.next().unwrap().parse().unwrap();
                let file = words.next().unwrap();
                let big = "s".repeat(16_000);
                let rss0 = rss_kb(std::process::id());
                let mut peak = rss0;
                for i in 0..n {
                    companion.file_focused(file).unwrap();
                    companion
                        .set_selection(None, Some(&format!("{i}:{big}")))
                        .unwrap();
                    // Paces the updates (a load generator, not a wait).
                    std::thread::sleep(Duration::from_millis(1));
                    if i % 50 == 0 {
                        peak = peak.max(rss_kb(std::process::id()));
                    }
                }
                // Let the last update go out before measuring (a settling
                // time for the RSS figure: the stream never reads, so there
                // is no delivery to wait for).
                std::thread::sleep(Duration::from_millis(200));
                let end = rss_kb(std::process::id());
                say(json!({"rss0": rss0, "peak": peak.max(end), "end": end}));
            }
            _ => break,
        }
    }
}

struct ServerProc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl ServerProc {
    fn start(ws: &str, lock_dir: &std::path::Path) -> (ServerProc, Value) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "soak_server", "--nocapture", "--test-threads=1"])
            .env("QC_SOAK_SERVER", "1")
            .env("QC_SOAK_WS", ws)
            .env("QC_SOAK_LOCK", lock_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut p = ServerProc {
            child,
            stdin,
            stdout,
        };
        let first = p.read();
        (p, first)
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn read(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server exited"
            );
            // The harness prints "test soak_server ... " before the first line.
            if let Some((_, v)) = line.split_once("QC ") {
                return serde_json::from_str(v).unwrap();
            }
        }
    }
    fn ask(&mut self, cmd: &str) -> Value {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        self.read()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        if wait_until(SEC, || matches!(self.child.try_wait(), Ok(Some(_)))) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One abandoned session: handshake, stream opened and read up to its first
/// event, then every connection dropped.
fn abandon(port: u16, token: &str) {
    let mut c = Client::new(port, token);
    c.handshake();
    let s = c.open_stream();
    s.next_method("ide/contextUpdate", SEC).expect("context");
    s.close();
}

fn batch(server: &mut ServerProc, port: u16, token: &str, n: usize) {
    for _ in 0..n {
        abandon(port, token);
    }
    let mut s = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            s = server.ask("stats");
            s["sessions"] == 1 && s["rmcpSessions"] == 1
        }),
        "abandoned sessions not freed: {s}"
    );
    // Freed memory goes back to the OS at most every 2 s: a settling time
    // for the RSS figure, not a wait for an event.
    std::thread::sleep(Duration::from_millis(2500));
}

#[test]
fn soak() {
    raise_fd_limit();
    let ws = TempDir::new("ws");
    let lock_dir = TempDir::new("lock");
    let ws_path = ws.path().to_string_lossy().into_owned();
    let (mut server, first) = ServerProc::start(&ws_path, &lock_dir.path().join("ide"));
    let pid = server.pid();
    let lock = Client::from_lock(std::path::Path::new(first["lock"].as_str().unwrap()));
    let (port, token) = (lock.port, lock.token.clone());
    // The real client, connected throughout.
    let mut real = Client::new(port, &token);
    real.handshake();
    let real_stream = real.open_stream();
    real_stream
        .next_method("ide/contextUpdate", SEC)
        .expect("context");

    // 1. Abandoned sessions.
    let t = Instant::now();
    let rss0 = rss_kb(pid) as i64;
    batch(&mut server, port, &token, 1000);
    let rss1 = rss_kb(pid) as i64;
    batch(&mut server, port, &token, 1000);
    let rss2 = rss_kb(pid) as i64;
    eprintln!(
        "abandoned sessions: server RSS {} -> {} (batch 1: +{}) -> {} (batch 2: +{}), {:.1} s",
        mb(rss0),
        mb(rss1),
        mb(rss1 - rss0),
        mb(rss2),
        mb(rss2 - rss1),
        t.elapsed().as_secs_f64()
    );
    assert!(
        rss2 - rss1 < 5 * 1024,
        "the second batch of 1000 abandoned sessions added {}",
        mb(rss2 - rss1)
    );

    // 2. A stalled stream while the editor keeps moving.
    let mut stalled = Client::new(port, &token);
    stalled.handshake();
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(
        format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\nmcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n",
            stalled.session.as_deref().unwrap()
        )
        .as_bytes(),
    )
    .unwrap();
    assert!(wait_until(SEC, || server_active(&mut server) == 2));
    let file = format!("{ws_path}/main.rs");
    std::fs::write(&file, "fn main() {}\n").unwrap();
    // The real client reads its stream meanwhile (and drops what it read).
    let drain = std::thread::spawn(move || {
        let mut n = 0usize;
        while real_stream
            .next_method("ide/contextUpdate", Duration::from_secs(2))
            .is_some()
        {
            n += 1;
        }
        (n, real_stream)
    });
    let t = Instant::now();
    let r = server.ask(&format!("updates 3000 {file}"));
    let (received, real_stream) = drain.join().unwrap();
    let (rss_before, peak, end) = (
        r["rss0"].as_i64().unwrap(),
        r["peak"].as_i64().unwrap(),
        r["end"].as_i64().unwrap(),
    );
    eprintln!(
        "stalled client: 3000 updates in {:.1} s (the live client got {received}), server RSS {} -> {} (peak +{})",
        t.elapsed().as_secs_f64(),
        mb(rss_before),
        mb(end),
        mb(peak - rss_before)
    );
    assert!(
        peak - rss_before < 8 * 1024,
        "a stalled client grew the host by {}",
        mb(peak - rss_before)
    );
    let mut fresh = Client::new(port, &token);
    fresh.handshake();
    let s = fresh.open_stream();
    let t = Instant::now();
    let ctx = s.next_method("ide/contextUpdate", SEC).expect("context");
    let sel = ctx["params"]["workspaceState"]["openFiles"][0]["selectedText"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(sel.starts_with("2999:"), "latest context, got {:.20}", sel);
    eprintln!(
        "fresh client got the latest context in {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    s.close();
    drop(raw);

    // 3. Half-open connections.
    let fd0 = fds(pid);
    let latency = |c: &mut Client| {
        let t = Instant::now();
        let v: Value = c.call("tools/list", json!({}));
        assert!(v.get("result").is_some());
        t.elapsed()
    };
    let mut base = Vec::new();
    for _ in 0..20 {
        base.push(latency(&mut real));
    }
    let t = Instant::now();
    let mut silent: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes())
                .unwrap();
            s
        })
        .collect();
    let opened_in = t.elapsed();
    let mut during = Vec::new();
    while t.elapsed() < opened_in + Duration::from_millis(600) {
        during.push(latency(&mut real));
    }
    let peak_fds = fds(pid);
    // Every silent connection is closed by the server.
    let mut closed = 0;
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Ok(0) => closed += 1,
            Err(e)
                if e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut =>
            {
                closed += 1
            }
            _ => {}
        }
    }
    let all_closed_in = t.elapsed();
    drop(silent);
    assert!(
        wait_until(SEC, || fds(pid) <= fd0),
        "fds {} vs {fd0}",
        fds(pid)
    );
    let p = |v: &mut Vec<Duration>, q: f64| {
        v.sort();
        v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0
    };
    eprintln!(
        "half-open: 1000 opened in {:.0} ms, server fds {fd0} -> {peak_fds} -> {}, all closed after {:.1} s; \
         legit tools/list p50 {:.2} ms / max {:.2} ms before, p50 {:.2} ms / max {:.2} ms during ({} calls)",
        opened_in.as_secs_f64() * 1000.0,
        fds(pid),
        all_closed_in.as_secs_f64(),
        p(&mut base, 0.5),
        p(&mut base, 1.0),
        p(&mut during, 0.5),
        p(&mut during, 1.0),
        during.len()
    );
    assert_eq!(closed, 1000);
    assert!(
        all_closed_in < opened_in + Duration::from_secs(7),
        "{all_closed_in:?}"
    );
    assert!(peak_fds >= fd0 + 900, "the flood reached the server");
    assert!(during.len() >= 5);
    assert!(p(&mut during, 0.5) < 50.0, "legit client slowed down");
    // The real client is still connected and served.
    let file2 = format!("{ws_path}/end.rs");
    std::fs::write(&file2, "x").unwrap();
    real.call("tools/list", json!({}));
    drop(real_stream);
    let _ = (file2, &mut server);
}

fn server_active(server: &mut ServerProc) -> u64 {
    server.ask("stats")["activeSessions"].as_u64().unwrap()
}
