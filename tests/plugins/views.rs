//! The view server (src/plugins/views) over real sockets with real plugins
//! (node): routes and headers, the traversal matrix (encoded dots and
//! slashes, symlinks out of the folder), capability isolation between
//! plugins, Host/Origin checks and the body cap, `invoke` result and error
//! shapes, SSE pushes and scheme changes, views following the host, the
//! `show_notification` view link, and `lastError`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use qc_test_support::mcp::{raw_request, Response, TempDir};
use qc_test_support::wait_until;
use qwen_companion::events::Dispatcher;
use qwen_companion::host::Logger;
use qwen_companion::plugins::host::{Config, HostAnswer, PluginEvent, PluginHost};
use qwen_companion::plugins::install;
use qwen_companion::plugins::views::{self, Scheme, ViewServer};
use serde_json::{json, Value};

const PROBE: &str = "test.view-probe";
const TODO: &str = "local.todo-quadrant";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/plugins/fixtures/{name}"))
}

struct Setup {
    host: Arc<PluginHost>,
    server: ViewServer,
    events: Arc<Mutex<Vec<Value>>>,
    dir: TempDir,
    _dispatcher: Arc<Dispatcher>,
}

fn setup(config: views::Config) -> Setup {
    let dir = TempDir::new("views");
    let plugins = dir.path().join("plugins");
    for f in ["view-probe", "todo-quadrant", "hello"] {
        install::install_from(&plugins, &fixture(f)).expect("install");
    }
    let host = Arc::new(
        PluginHost::new(Config {
            plugins_dir: Some(plugins),
            workspace_root: Some(dir.path().to_string_lossy().into_owned()),
            call_timeout_ms: Some(20_000),
            ..Default::default()
        })
        .unwrap(),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    host.set_event_sink(Some(Arc::new(move |e: PluginEvent| {
        sink.lock().unwrap().push(e.to_json());
        None
    })));
    let dispatcher = Arc::new(Dispatcher::new("qc-cb").unwrap());
    let logger = Arc::new(Logger::new(dispatcher.clone()));
    let server = ViewServer::start(host.clone(), config, logger).unwrap();
    Setup {
        host,
        server,
        events,
        dir,
        _dispatcher: dispatcher,
    }
}

impl Setup {
    fn port(&self) -> u16 {
        self.server.port()
    }
    fn url(&self, plugin: &str, view: Option<&str>) -> String {
        self.server.view_url(plugin, view).unwrap()
    }
    /// The capability in a page URL.
    fn cap(&self, plugin: &str, view: Option<&str>) -> String {
        let u = self.url(plugin, view);
        u.split('/').nth(4).unwrap().to_string()
    }
    fn get(&self, path: &str) -> Response {
        get_with(self.port(), path, "")
    }
    fn invoke(&self, cap: &str, body: &Value, extra: &str) -> Response {
        let head = format!(
            "POST /api/{cap}/invoke HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n{extra}",
            self.port()
        );
        raw_request(self.port(), &head, body.to_string().as_bytes())
    }
    fn finish(self) {
        self.server.stop().unwrap();
        let pids: Vec<i32> = [PROBE, TODO, "com.example.hello"]
            .iter()
            .filter_map(|id| self.host.running_pid(id))
            .collect();
        self.host.shutdown();
        for pid in pids {
            let gone = wait_until(Duration::from_secs(2), || !alive(pid));
            assert!(gone, "plugin process {pid} is left");
        }
        drop(self.dir);
    }
}

/// The process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

fn get_with(port: u16, path: &str, extra: &str) -> Response {
    raw_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}"),
        b"",
    )
}

fn json_of(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("JSON body: {}", r.text()))
}

/// An open SSE stream of a page: its frames as (event, data) pairs.
struct Sse {
    rx: mpsc::Receiver<(String, Value)>,
    stream: TcpStream,
}

impl Sse {
    fn open(port: u16, cap: &str) -> Sse {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "GET /api/{cap}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        let reader = BufReader::new(s.try_clone().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut event = String::new();
            for line in reader.lines() {
                let Ok(line) = line else { return };
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    if let Ok(v) = serde_json::from_str(d) {
                        if tx.send((event.clone(), v)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let sse = Sse { rx, stream: s };
        let (e, d) = sse.next(Duration::from_secs(5)).expect("ready frame");
        assert_eq!(e, "ready");
        assert!(d["colorScheme"].is_string());
        sse
    }
    fn next(&self, wait: Duration) -> Option<(String, Value)> {
        self.rx.recv_timeout(wait).ok()
    }
}

impl Drop for Sse {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

#[test]
fn pages_are_listed_served_with_the_script_first_and_strict_headers() {
    let s = setup(views::Config::default());
    let info = s.server.views_json().unwrap();
    assert_eq!(info["url"], format!("http://127.0.0.1:{}/", s.port()));
    assert_eq!(info["colorScheme"], "light");
    let views = info["views"].as_array().unwrap();
    let ids: Vec<(&str, &str)> = views
        .iter()
        .map(|v| (v["plugin"].as_str().unwrap(), v["id"].as_str().unwrap()))
        .collect();
    assert_eq!(ids, vec![(TODO, "quadrant"), (PROBE, "probe")]);
    assert_eq!(views[1]["title"], "View Probe");
    assert_eq!(views[1]["width"], 320);
    assert_eq!(views[1]["icon"], "beaker");
    let panels = info["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 1);
    assert_eq!(panels[0]["plugin"], PROBE);
    assert_eq!(panels[0]["title"], "Probe Panel");
    assert!(panels[0]["url"]
        .as_str()
        .unwrap()
        .ends_with("/panel/panel.html"));
    // Every page has its own capability.
    let (a, b, c) = (
        s.cap(TODO, Some("quadrant")),
        s.cap(PROBE, Some("probe")),
        s.cap(PROBE, None),
    );
    assert!(a != b && b != c && a.len() == 64);

    let page = s.get(&format!("/v/{b}/probe.html"));
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    let csp = page.header("content-security-policy").unwrap().to_string();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(csp.contains("connect-src 'self'") && !csp.contains("unsafe-eval"));
    let html = page.text();
    let injected = html.find("<script>(function").expect("injected script");
    assert!(
        injected < html.find("<meta charset").unwrap(),
        "the script comes first"
    );
    assert!(injected < html.find("<script src=\"probe.js\"").unwrap());
    assert!(html.contains(&format!("var BASE = '/api/{b}/';")));
    // The injected script and the page's own inline script/style are
    // allowed by hash; nothing else inline.
    let end = html[injected..].find("</script>").unwrap() + injected;
    let script = &html[injected + "<script>".len()..end];
    assert!(csp.contains(&views::inject::csp_hash(script)));
    let own = html.rfind("<script>\n'use strict';").unwrap() + "<script>".len();
    let own_end = html[own..].find("</script>").unwrap() + own;
    assert!(csp.contains(&views::inject::csp_hash(&html[own..own_end])));
    assert!(!csp.contains(&views::inject::csp_hash("window.unownedRan = true;")));

    for (path, mime) in [
        ("probe.css", "text/css; charset=utf-8"),
        ("probe.js", "text/javascript; charset=utf-8"),
        ("manifest.json", "application/json"),
    ] {
        let r = s.get(&format!("/v/{b}/{path}"));
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(mime), "{path}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    let panel = s.get(&format!("/v/{c}/panel/panel.html"));
    assert_eq!(panel.status, 200);
    assert!(panel.text().contains(&format!("/api/{c}/")));
    // The todo page keeps its own inline script and style.
    let todo = s.get(&format!("/v/{a}/view.html"));
    assert_eq!(todo.status, 200);
    assert!(todo.text().contains("manage_todo_quadrant"));
    // HEAD: the headers of the page, no body.
    let mut conn = TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    write!(
        conn,
        "HEAD /v/{a}/view.html HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        s.port()
    )
    .unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut conn, &mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw
        .to_ascii_lowercase()
        .contains("content-security-policy: default-src 'none'"));
    assert!(raw.ends_with("\r\n\r\n"), "HEAD has no body: {raw}");
    let post = raw_request(
        s.port(),
        &format!(
            "POST /v/{a}/view.html HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n",
            s.port()
        ),
        b"",
    );
    assert_eq!(post.status, 405);
    s.finish();
}

#[test]
fn files_outside_the_plugin_folder_are_never_served() {
    let s = setup(views::Config::default());
    let cap = s.cap(PROBE, Some("probe"));
    std::fs::write(s.dir.path().join("secret.txt"), "top secret").unwrap();
    // Symlinks are Unix here (creating one on Windows needs a privilege);
    // on Windows `leak.txt` below is simply absent and must not be served
    // either.
    #[cfg(unix)]
    {
        let root = s.host.manifest(PROBE).unwrap().root.clone();
        std::os::unix::fs::symlink(s.dir.path().join("secret.txt"), root.join("leak.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("probe.css"), root.join("alias.css")).unwrap();
        assert_eq!(
            s.get(&format!("/v/{cap}/alias.css")).status,
            200,
            "a symlink inside is fine"
        );
    }
    let outside = [
        "leak.txt",
        "../secret.txt",
        "..%2fsecret.txt",
        "%2e%2e/%2e%2e/%2e%2e/secret.txt",
        "%2E%2E/local.todo-quadrant/view.html",
        ".%2e/.%2e/.%2e/secret.txt",
        "panel/../../local.todo-quadrant/view.html",
        "panel/%2e%2e%2f%2e%2e%2flocal.todo-quadrant%2fview.html",
        "%2fetc%2fpasswd",
        "/etc/passwd",
        "panel%5c..%5c..%5csecret.txt",
        "probe.html%00.css",
        "panel",
        "panel/",
        "",
        "missing.html",
        "%zz",
    ];
    for p in outside {
        let r = s.get(&format!("/v/{cap}/{p}"));
        assert!(
            r.status == 404 || r.status == 403,
            "{p:?} gave {} {}",
            r.status,
            r.text()
        );
        assert!(!r.text().contains("top secret"), "{p:?}");
    }
    // Also outside any capability.
    assert_eq!(s.get("/../../etc/passwd").status, 404);
    s.finish();
}

#[test]
fn a_page_reaches_only_its_own_plugin() {
    let s = setup(views::Config::default());
    let probe = s.cap(PROBE, Some("probe"));
    let todo = s.cap(TODO, Some("quadrant"));
    // No capability: 401; a wrong one: 403 (pages and API alike).
    for p in ["/", "/v/", "/api/"] {
        assert_eq!(s.get(p).status, 401, "{p}");
    }
    let mut wrong = probe.clone().into_bytes();
    wrong[5] = if wrong[5] == b'a' { b'b' } else { b'a' };
    let wrong = String::from_utf8(wrong).unwrap();
    for p in [
        format!("/v/{wrong}/probe.html"),
        format!("/api/{wrong}/scheme"),
        format!("/v/{}/probe.html", &probe[..32]),
        "/v/local.todo-quadrant/view.html".to_string(),
    ] {
        assert_eq!(s.get(&p).status, 403, "{p}");
    }
    let r = s.invoke(
        &wrong,
        &json!({"toolName": "echo", "params": {"text": "x"}}),
        "",
    );
    assert_eq!(r.status, 403);
    // The todo page cannot call the probe's tool (nor any tool but its plugin's).
    let r = s.invoke(
        &todo,
        &json!({"toolName": "echo", "params": {"text": "x"}}),
        "",
    );
    assert_eq!(r.status, 200);
    let v = json_of(&r);
    assert_eq!(v["kind"], "unknown_tool", "{v}");
    assert!(v["error"].as_str().unwrap().contains("echo"));
    // The probe's pushes reach the probe's streams only.
    let probe_stream = Sse::open(s.port(), &probe);
    let todo_stream = Sse::open(s.port(), &todo);
    let r = s.invoke(
        &probe,
        &json!({"toolName": "echo", "params": {"text": "only me"}}),
        "",
    );
    assert_eq!(r.status, 200);
    let (e, d) = probe_stream.next(Duration::from_secs(10)).expect("push");
    assert_eq!(e, "push");
    assert_eq!(
        d,
        json!({"channel": "echo", "payload": {"text": "only me"}})
    );
    assert!(
        todo_stream.next(Duration::from_millis(500)).is_none(),
        "the todo page heard the probe"
    );
    drop((probe_stream, todo_stream));
    s.finish();
}

#[test]
fn host_origin_and_body_cap_are_checked() {
    let s = setup(views::Config {
        server: qwen_companion::loopback::ServerConfig {
            max_body_bytes: Some(1024),
            ..Default::default()
        },
        ..Default::default()
    });
    let cap = s.cap(PROBE, Some("probe"));
    let body = json!({"toolName": "echo", "params": {"text": "o"}});
    let own = format!("Origin: http://127.0.0.1:{}\r\n", s.port());
    assert_eq!(s.invoke(&cap, &body, &own).status, 200);
    for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
        let r = s.invoke(&cap, &body, &format!("Origin: {origin}\r\n"));
        assert_eq!(r.status, 403, "{origin}");
    }
    let r = get_with(
        s.port(),
        &format!("/api/{cap}/scheme"),
        "Origin: http://evil.example\r\n",
    );
    assert_eq!(r.status, 403);
    for host in ["evil.example", "127.0.0.1:1"] {
        let r = raw_request(
            s.port(),
            &format!("GET /v/{cap}/probe.html HTTP/1.1\r\nHost: {host}\r\n"),
            b"",
        );
        assert_eq!(r.status, 403, "{host}");
    }
    let big = json!({"toolName": "echo", "params": {"text": "x".repeat(2000)}});
    assert_eq!(s.invoke(&cap, &big, "").status, 413);
    s.finish();
}

#[test]
fn invoke_gives_the_result_or_the_error() {
    let s = setup(views::Config::default());
    let cap = s.cap(PROBE, Some("probe"));
    let call = |body: Value| {
        let r = s.invoke(&cap, &body, "");
        (r.status, json_of(&r))
    };
    let (st, v) = call(json!({"toolName": "echo", "params": {"text": "hi"}}));
    assert_eq!(st, 200);
    assert_eq!(
        v,
        json!({"content": [{"type": "text", "text": "echo: hi"}], "details": {"text": "hi"}})
    );
    let (_, v) = call(json!({"toolName": "fail", "params": {}}));
    assert_eq!(v["kind"], "tool_error");
    assert!(
        v["error"].as_str().unwrap().contains("probe failure"),
        "{v}"
    );
    assert!(v.get("content").is_none());
    let (_, v) = call(json!({"toolName": "echo", "params": {}}));
    assert_eq!(v["kind"], "schema", "{v}");
    let (_, v) = call(json!({"toolName": "echo"}));
    assert_eq!(v["kind"], "schema", "params default to {{}}: {v}");
    let (st, v) = call(json!({"params": {}}));
    assert_eq!((st, v["kind"].as_str()), (400, Some("request")));
    let r = s.invoke(&cap, &json!("x"), "");
    assert_eq!(r.status, 400);
    let r = get_with(s.port(), &format!("/api/{cap}/invoke"), "");
    assert_eq!(r.status, 405);
    assert_eq!(s.get(&format!("/api/{cap}/nope")).status, 404);
    s.finish();
}

#[test]
fn the_scheme_reaches_open_pages_once_per_change() {
    let s = setup(views::Config {
        server: qwen_companion::loopback::ServerConfig {
            keep_alive_ms: Some(50),
            ..Default::default()
        },
        ..Default::default()
    });
    let cap = s.cap(PROBE, Some("probe"));
    let scheme = || json_of(&s.get(&format!("/api/{cap}/scheme")))["colorScheme"].clone();
    assert_eq!(scheme(), "light");
    let stream = Sse::open(s.port(), &cap);
    s.server.set_color_scheme(Scheme::Dark);
    let (e, d) = stream.next(Duration::from_secs(5)).expect("scheme frame");
    assert_eq!((e.as_str(), d), ("scheme", json!({"colorScheme": "dark"})));
    s.server.set_color_scheme(Scheme::Dark);
    assert!(
        stream.next(Duration::from_millis(300)).is_none(),
        "no change, no frame"
    );
    assert_eq!(scheme(), "dark");
    assert_eq!(s.server.views_json().unwrap()["colorScheme"], "dark");
    // Keep-alive comments keep a quiet stream open past the idle timeout.
    let again = Sse::open(s.port(), &cap);
    drop(again);
    assert!(Scheme::parse("blue").is_err());
    let c = views::Config::from_json(Some(r#"{"colorScheme":"dark"}"#)).unwrap();
    assert_eq!(c.color_scheme.as_deref(), Some("dark"));
    assert!(views::Config::from_json(Some(r#"{"nope":1}"#)).is_err());
    drop(stream);
    s.finish();
}

#[test]
fn views_follow_the_host_and_notifications_link_their_view() {
    let s = setup(views::Config::default());
    let url = s.url(PROBE, Some("probe"));
    let cap = s.cap(PROBE, Some("probe"));
    let stream = Sse::open(s.port(), &cap);
    s.host.disable(PROBE).unwrap();
    let info = s.server.views_json().unwrap();
    assert_eq!(info["views"].as_array().unwrap().len(), 1);
    assert!(info["panels"].as_array().unwrap().is_empty());
    assert_eq!(s.get(&format!("/v/{cap}/probe.html")).status, 404);
    let e = s.server.view_url(PROBE, Some("probe")).unwrap_err();
    assert_eq!(e.status, qwen_companion::Status::NotFound);
    assert!(e.message.contains("disabled"), "{}", e.message);
    // Its open stream ends.
    let ended = (0..50).any(|_| {
        stream.next(Duration::from_millis(100)).is_none() && {
            matches!(stream.rx.try_recv(), Err(mpsc::TryRecvError::Disconnected))
        }
    });
    assert!(ended, "the disabled plugin's stream stays open");
    s.host.enable(PROBE).unwrap();
    assert_eq!(s.url(PROBE, Some("probe")), url, "the URL is stable");
    assert_eq!(s.get(&format!("/v/{cap}/probe.html")).status, 200);
    let changed = s
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "views_changed")
        .count();
    assert_eq!(changed, 2, "one views_changed per change");
    assert!(s.server.view_url("com.example.hello", None).is_err());
    assert!(s.server.view_url("no.such", Some("x")).is_err());
    assert!(s.server.view_url(PROBE, Some("nope")).is_err());

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    s.host.set_capability(
        "show_notification",
        Some(Arc::new(
            move |req: &qwen_companion::plugins::host::HostRequest| {
                sink.lock().unwrap().push(req.params.clone());
                HostAnswer::Now(Ok(json!({"shown": true})))
            },
        )),
    );
    let host = s.host.clone();
    let call = move |params: Value| {
        let h = host.clone();
        std::thread::spawn(move || h.call_tool(PROBE, "notify", params, Default::default()))
            .join()
            .unwrap()
            .unwrap()
    };
    let out = call(json!({"viewId": "probe"}));
    assert_eq!(out.details.unwrap()["answer"], json!({"shown": true}));
    call(json!({"viewId": "nope"}));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0]["viewId"], "probe");
    assert_eq!(
        seen[0]["view"],
        json!({"id": "probe", "title": "View Probe", "url": url})
    );
    assert!(seen[1].get("view").is_none(), "{:?}", seen[1]);
    drop(stream);
    s.finish();
}

#[test]
fn last_error_records_a_crash_and_list_carries_the_manifest() {
    let dir = TempDir::new("views-lasterror");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("manifest.json"),
        json!({"id": "test.crasher", "name": "Crasher", "version": "1.0.0", "main": "index.js",
               "tools": [{"name": "boom", "parameters": {"type": "object"}}]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        src.join("index.js"),
        "process.on('message', () => process.exit(7));",
    )
    .unwrap();
    let plugins = dir.path().join("plugins");
    install::install_from(&plugins, &src).unwrap();
    let host = PluginHost::new(Config {
        plugins_dir: Some(plugins.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(host.last_error("test.crasher"), None);
    let err = host
        .call_tool("test.crasher", "boom", json!({}), Default::default())
        .unwrap_err();
    assert_eq!(err.kind.as_str(), "exited");
    let ok = wait_until(Duration::from_secs(2), || {
        host.last_error("test.crasher").is_some()
    });
    assert!(ok, "no lastError after a crash");
    let last = host.last_error("test.crasher").unwrap();
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("exited unexpectedly"),
        "{last}"
    );
    assert!(last["at"].as_u64().unwrap() > 1_700_000_000_000);
    let list = install::list_json(&plugins).unwrap();
    assert_eq!(list[0]["manifest"]["tools"][0]["name"], "boom");
    assert_eq!(list[0]["manifest"]["main"], "index.js");
    host.shutdown();
}
