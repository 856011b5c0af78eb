//! One companion for Qwen Code and Gemini CLI (the `cli` option): each
//! CLI's discovery file and terminal variables, one server behind both.

#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use qc_test_support::mcp::*;
use qwen_companion::ide::{Companion, Config};
use qwen_companion::Status;
use serde_json::{json, Value};

struct Dirs {
    ws: TempDir,
    qwen: TempDir,
    gemini: TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs {
            ws: TempDir::new("ws"),
            qwen: TempDir::new("qwen"),
            gemini: TempDir::new("gemini"),
        }
    }
    fn qwen_dir(&self) -> PathBuf {
        self.qwen.path().join("ide")
    }
    fn gemini_dir(&self) -> PathBuf {
        self.gemini.path().join("gemini").join("ide")
    }
    fn root(&self) -> String {
        self.ws.path().to_string_lossy().into_owned()
    }
    fn companion(&self, cli: Option<&str>) -> Companion {
        Companion::new(Config {
            workspace_roots: vec![self.root()],
            ide_name: Some("Sublime Text".into()),
            ide_id: Some("sublimetext".into()),
            lock_dir: Some(self.qwen_dir()),
            gemini_dir: Some(self.gemini_dir()),
            cli: cli.map(str::to_string),
            ..Config::default()
        })
        .unwrap()
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

#[test]
fn gemini_only_writes_geminis_file_and_variables() {
    let d = Dirs::new();
    let c = d.companion(Some("gemini"));
    c.start().unwrap();
    let port = c.port().unwrap();
    let pid = std::process::id();
    let file = d
        .gemini_dir()
        .join(format!("gemini-ide-server-{pid}-{port}.json"));
    assert_eq!(c.lock_file_path().unwrap(), file);
    assert_eq!(
        c.discovery_files().unwrap(),
        json!({"qwen": null, "gemini": file.to_string_lossy()})
    );
    // Gemini's fields only: no `ppid`/`ideName` (Qwen's).
    let v = read_json(&file);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["authToken", "ideInfo", "port", "workspacePath"]);
    assert_eq!(v["port"], port);
    assert_eq!(v["workspacePath"], json!(d.root()));
    assert_eq!(
        v["ideInfo"],
        json!({"name": "sublimetext", "displayName": "Sublime Text"})
    );
    assert_eq!(v["authToken"], json!(c.auth_token().unwrap()));
    #[cfg(unix)]
    {
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&d.gemini_dir()), 0o700);
    }
    // No Qwen lock file.
    assert!(names(&d.qwen_dir()).is_empty());
    // The terminal gets Gemini's variables, never the token.
    let env = c.terminal_env().unwrap();
    assert_eq!(
        env,
        json!({
            "GEMINI_CLI_IDE_SERVER_PORT": port.to_string(),
            "GEMINI_CLI_IDE_WORKSPACE_PATH": d.root(),
            "GEMINI_CLI_IDE_PID": pid.to_string(),
        })
    );
    // A client that found the server through Gemini's file is served.
    let mut client = Client::from_lock(&file);
    client.handshake();
    let listed = tool_names(&client.call("tools/list", json!({})));
    assert!(
        listed.iter().any(|t| t == "openDiff") && listed.iter().any(|t| t == "closeDiff"),
        "{listed:?}"
    );
    c.stop().unwrap();
    assert!(!file.exists());
    assert_eq!(c.discovery_files().unwrap_err().status, Status::NotRunning);
}

#[test]
fn both_clis_share_one_server_port_and_token() {
    let d = Dirs::new();
    let c = d.companion(Some("both"));
    c.start().unwrap();
    let port = c.port().unwrap();
    let files = c.discovery_files().unwrap();
    let qwen = PathBuf::from(files["qwen"].as_str().unwrap());
    let gemini = PathBuf::from(files["gemini"].as_str().unwrap());
    assert_eq!(qwen, d.qwen_dir().join(format!("{port}.lock")));
    assert_eq!(c.lock_file_path().unwrap(), qwen);
    let (q, g) = (read_json(&qwen), read_json(&gemini));
    assert_eq!(q["port"], g["port"]);
    assert_eq!(q["authToken"], g["authToken"]);
    assert_eq!(q["ppid"], std::process::id());
    assert!(g.get("ppid").is_none());
    let env = c.terminal_env().unwrap();
    for k in [
        "QWEN_CODE_IDE_SERVER_PORT",
        "QWEN_CODE_IDE_WORKSPACE_PATH",
        "GEMINI_CLI_IDE_SERVER_PORT",
        "GEMINI_CLI_IDE_WORKSPACE_PATH",
        "GEMINI_CLI_IDE_PID",
    ] {
        assert!(env.get(k).is_some(), "{k} missing from {env}");
    }
    // One session per CLI, both on the same server: both get the context.
    let mut a = Client::from_lock(&qwen);
    let mut b = Client::from_lock(&gemini);
    a.handshake();
    b.handshake();
    let (sa, sb) = (a.open_stream(), b.open_stream());
    let sec = std::time::Duration::from_secs(5);
    sa.next_method("ide/contextUpdate", sec).unwrap();
    sb.next_method("ide/contextUpdate", sec).unwrap();
    assert_eq!(c.connected_clients(), 2);
    // A workspace change rewrites both files.
    let other = TempDir::new("ws2");
    let root2 = other.path().to_string_lossy().into_owned();
    c.set_workspace_roots(vec![root2.clone()]).unwrap();
    assert_eq!(read_json(&qwen)["workspacePath"], json!(root2));
    assert_eq!(read_json(&gemini)["workspacePath"], json!(root2));
    c.stop().unwrap();
    assert!(!qwen.exists() && !gemini.exists());
}

#[test]
fn qwen_stays_the_default_and_unknown_clis_are_refused() {
    let d = Dirs::new();
    let c = d.companion(None);
    c.start().unwrap();
    let files = c.discovery_files().unwrap();
    assert!(files["qwen"].is_string());
    assert!(files["gemini"].is_null());
    assert!(names(&d.gemini_dir()).is_empty());
    let env = c.terminal_env().unwrap();
    assert!(env.get("GEMINI_CLI_IDE_PID").is_none(), "{env}");
    c.stop().unwrap();
    for bad in ["", "Gemini", "codex", "qwen,gemini"] {
        let e = Companion::new(Config {
            cli: Some(bad.into()),
            ..Config::default()
        })
        .err()
        .unwrap_or_else(|| panic!("{bad:?} was accepted"));
        assert_eq!(e.status, Status::InvalidArgument, "{bad:?}");
        assert!(e.message.contains("cli must be"), "{}", e.message);
    }
    // A value of the wrong type is refused when the JSON is read.
    assert!(Config::from_json(Some(r#"{"cli": 2}"#)).is_err());
}

/// A Gemini directory that cannot be used fails the start as a whole: the
/// Qwen lock file written first is removed again.
#[cfg(unix)]
#[test]
fn both_files_or_neither() {
    let d = Dirs::new();
    let target = TempDir::new("elsewhere");
    std::fs::create_dir_all(d.gemini.path().join("gemini")).unwrap();
    std::os::unix::fs::symlink(target.path(), d.gemini_dir()).unwrap();
    let c = d.companion(Some("both"));
    let e = c.start().unwrap_err();
    assert_eq!(e.status, Status::Io, "{}", e.message);
    assert!(!c.is_running());
    assert!(
        names(&d.qwen_dir()).is_empty(),
        "{:?}",
        names(&d.qwen_dir())
    );
    assert!(names(target.path()).is_empty());
}

#[test]
fn files_of_editors_that_exited_are_swept() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.gemini_dir()).unwrap();
    // A pid that was alive a moment ago and is not any more.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--list")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dead = child.id();
    child.wait().unwrap();
    // On Windows the handle keeps the process object: let it go.
    drop(child);
    let me = std::process::id();
    let stale = format!("gemini-ide-server-{dead}-4242.json");
    let live = format!("gemini-ide-server-{me}-4243.json");
    for name in [&stale, &live, &"notes.json".to_string()] {
        std::fs::write(d.gemini_dir().join(name), "{}").unwrap();
    }
    let c = d.companion(Some("gemini"));
    c.start().unwrap();
    let port = c.port().unwrap();
    let left = names(&d.gemini_dir());
    assert!(!left.contains(&stale), "{left:?}");
    assert!(left.contains(&live), "{left:?}");
    assert!(left.contains(&"notes.json".to_string()), "{left:?}");
    assert!(left.contains(&format!("gemini-ide-server-{me}-{port}.json")));
    c.stop().unwrap();
}

/// Gemini CLI splits `workspacePath` on the delimiter and nothing else: a
/// root holding it is left out of Gemini's value (Qwen gets the JSON-array
/// form it understands).
#[cfg(unix)]
#[test]
fn a_root_with_the_delimiter_is_left_out_for_gemini_only() {
    let d = Dirs::new();
    let odd = d.ws.path().join("a:b");
    std::fs::create_dir_all(&odd).unwrap();
    let plain = d.root();
    let odd = odd.to_string_lossy().into_owned();
    let c = Companion::new(Config {
        workspace_roots: vec![plain.clone(), odd.clone()],
        lock_dir: Some(d.qwen_dir()),
        gemini_dir: Some(d.gemini_dir()),
        cli: Some("both".into()),
        ..Config::default()
    })
    .unwrap();
    c.start().unwrap();
    let files = c.discovery_files().unwrap();
    let q = read_json(Path::new(files["qwen"].as_str().unwrap()));
    let g = read_json(Path::new(files["gemini"].as_str().unwrap()));
    assert_eq!(
        q["workspacePath"],
        json!(serde_json::to_string(&[&plain, &odd]).unwrap())
    );
    assert_eq!(g["workspacePath"], json!(plain));
    assert_eq!(
        c.terminal_env().unwrap()["GEMINI_CLI_IDE_WORKSPACE_PATH"],
        json!(plain)
    );
    c.stop().unwrap();
}

/// Gemini CLI's MCP client parses every SSE message event's data as JSON:
/// the server's streams carry no event with empty data (rmcp's priming
/// event keeps only its `id` and `retry`).
#[test]
fn streams_carry_no_event_with_empty_data() {
    let d = Dirs::new();
    let c = d.companion(Some("gemini"));
    c.start().unwrap();
    let mut client = Client::from_lock(&c.lock_file_path().unwrap());
    client.handshake();
    let r = raw_request(
        client.port,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             mcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n",
            client.port,
            client.token,
            client.session.as_deref().unwrap()
        ),
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.text();
    assert!(
        body.contains("retry: "),
        "the priming event's retry stays: {body:?}"
    );
    for event in body.split("\n\n").filter(|e| !e.trim().is_empty()) {
        for line in event.lines().filter(|l| l.starts_with("data")) {
            let data = line
                .trim_start_matches("data")
                .trim_start_matches(':')
                .trim();
            assert!(
                serde_json::from_str::<Value>(data).is_ok(),
                "an event whose data is not JSON: {event:?}"
            );
        }
    }
    assert_eq!(r.messages().len(), 1, "{body:?}");
    c.stop().unwrap();
}
