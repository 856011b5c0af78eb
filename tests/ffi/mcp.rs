//! The plugin MCP server and its settings entry through the C ABI
//! (`qc_plugin_host_mcp_*`, `qc_mcp_register`, `qc_mcp_unregister`): start,
//! info, a raw MCP client on the advertised url and header, stop and free,
//! project and user scope registration keeping comments, refused settings
//! files, and misuse.

use std::ffi::{c_char, CStr, CString};
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::OnceLock;

use qc_test_support::mcp::{tool_names, Client, TempDir};
use qwen_companion::ffi::*;
use serde_json::{json, Value};

/// Every test here first points `QWEN_HOME` at one private folder (before it
/// creates any library object), so nothing touches the real `~/.qwen`. The
/// other tests of this binary pass their directories in their configs.
fn qwen_home() -> PathBuf {
    static HOME: OnceLock<TempDir> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = TempDir::new("ffi-mcp-home");
        std::env::set_var("QWEN_HOME", dir.path());
        dir
    })
    .path()
    .to_path_buf()
}

fn cs(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn take(s: *mut c_char) -> String {
    assert!(!s.is_null());
    let out = unsafe { CStr::from_ptr(s) }.to_str().unwrap().to_string();
    unsafe { qc_string_free(s) };
    out
}

fn take_json(s: *mut c_char) -> Value {
    serde_json::from_str(&take(s)).unwrap()
}

fn take_err(err: *mut c_char) -> String {
    if err.is_null() {
        String::new()
    } else {
        take(err)
    }
}

/// A host over a fresh plugins directory with the `hello` fixture
/// installed; freed (and checked for leftover plugin processes) on drop.
struct Host {
    h: *mut qc_plugin_host,
    dir: TempDir,
}

impl Host {
    fn new() -> Host {
        qwen_home();
        let dir = TempDir::new("ffi-mcp");
        let cfg = json!({
            "pluginsDir": dir.path().join("plugins"),
            "workspaceRoot": dir.path(),
            "killGraceMs": 300,
        });
        let cfg = cs(&cfg.to_string());
        let mut h = null_mut();
        let mut err = null_mut();
        let rc = unsafe { qc_plugin_host_new(cfg.as_ptr(), &mut h, &mut err) };
        assert_eq!(rc, QC_OK, "{}", take_err(err));
        let src = cs(&qc_test_support::plugins::fixture("hello").to_string_lossy());
        let mut out = null_mut();
        let rc = unsafe { qc_plugin_host_install(h, src.as_ptr(), &mut out, null_mut(), &mut err) };
        assert_eq!(rc, QC_OK, "{}", take_err(err));
        take(out);
        Host { h, dir }
    }

    fn lock_dir(&self) -> PathBuf {
        self.dir.path().join("locks")
    }

    fn start(&self, config: Option<Value>) -> (u32, String) {
        let config = config.map(|c| cs(&c.to_string()));
        let mut err = null_mut();
        let rc = unsafe {
            qc_plugin_host_mcp_start(
                self.h,
                config.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                &mut err,
            )
        };
        (rc, take_err(err))
    }

    fn start_ok(&self) {
        let (rc, err) = self.start(Some(json!({"lockDir": self.lock_dir()})));
        assert_eq!(rc, QC_OK, "{err}");
    }

    fn info(&self) -> (u32, Option<Value>) {
        let mut out = null_mut();
        let mut err = null_mut();
        let rc = unsafe { qc_plugin_host_mcp_info(self.h, &mut out, &mut err) };
        if rc == QC_OK {
            assert!(err.is_null());
            (rc, Some(take_json(out)))
        } else {
            assert!(out.is_null());
            take_err(err);
            (rc, None)
        }
    }

    fn stop(&self) -> u32 {
        let mut err = null_mut();
        let rc = unsafe { qc_plugin_host_mcp_stop(self.h, &mut err) };
        take_err(err);
        rc
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        unsafe { qc_plugin_host_free(self.h) };
        // The leftover scan reads other processes' environments (/proc, Unix);
        // on Windows each plugin's Job Object ends its processes with the host.
        #[cfg(unix)]
        let left = qc_test_support::plugins::pids_with_env(&format!(
            "PLUGIN_DATA_DIR={}/plugins/data/",
            self.dir.path().display()
        ));
        #[cfg(unix)]
        assert!(left.is_empty(), "plugin processes left: {left:?}");
    }
}

#[test]
fn start_info_request_stop_and_free() {
    let host = Host::new();
    assert_eq!(host.info().0, QC_NOT_RUNNING, "info before start");
    assert_eq!(host.stop(), QC_NOT_RUNNING, "stop before start");
    host.start_ok();
    let (rc, err) = host.start(None);
    assert_eq!(rc, QC_ALREADY_RUNNING, "second start: {err}");

    let (rc, info) = host.info();
    assert_eq!(rc, QC_OK);
    let info = info.unwrap();
    let port = info["port"].as_u64().unwrap() as u16;
    assert_eq!(info["url"], json!(format!("http://127.0.0.1:{port}/mcp")));
    assert_eq!(info["serverName"], "qwen-companion-plugins");
    assert_eq!(
        info["env"],
        json!({"QWEN_COMPANION_PLUGINS_PID": std::process::id().to_string()}),
        "a terminal's bridge prefers this process's server"
    );
    let auth = info["headers"]["Authorization"].as_str().unwrap();
    let token = auth.strip_prefix("Bearer ").expect("a bearer header");
    assert_eq!(token.len(), 64, "{token}");
    let lock_file = PathBuf::from(info["lockFile"].as_str().unwrap());
    assert_eq!(lock_file.parent().unwrap(), host.lock_dir());
    let lock: Value = serde_json::from_slice(&std::fs::read(&lock_file).unwrap()).unwrap();
    assert_eq!(lock["port"], json!(port));
    assert_eq!(lock["authToken"], json!(token));
    // Mode bits are Unix; on Windows the lock dir's owner-only DACL is
    // checked by the sys tests.
    #[cfg(unix)]
    assert_eq!(
        std::fs::metadata(&lock_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let tools: Vec<String> = info["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert!(tools.contains(&"hello_say_hello".to_string()), "{tools:?}");
    assert!(tools.contains(&"plugins-status".to_string()), "{tools:?}");

    // A raw MCP client with the advertised header lists the same tools.
    let mut client = Client::new(port, token);
    client.handshake();
    let listed = tool_names(&client.call("tools/list", json!({})));
    let mut a = listed.clone();
    a.sort();
    let mut b = tools.clone();
    b.sort();
    assert_eq!(a, b);
    let (_, info) = host.info();
    assert!(info.unwrap()["sessions"].as_u64().unwrap() >= 1);
    // A wrong token is refused.
    let r = Client::new(port, "0000").post(&json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
    assert_eq!(r.status, 401);

    // Disabling the plugin takes its tool out of the listing.
    let id = cs("com.example.hello");
    assert_eq!(
        unsafe { qc_plugin_host_disable(host.h, id.as_ptr(), null_mut()) },
        QC_OK
    );
    let (_, info) = host.info();
    assert_eq!(info.unwrap()["tools"], json!(["plugins-status"]));
    assert_eq!(
        unsafe { qc_plugin_host_enable(host.h, id.as_ptr(), null_mut()) },
        QC_OK
    );

    assert_eq!(host.stop(), QC_OK);
    assert!(!lock_file.exists(), "stop removes the lock file");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the port is closed after stop"
    );
    assert_eq!(host.info().0, QC_NOT_RUNNING);
    assert_eq!(host.stop(), QC_NOT_RUNNING);

    // It starts again, and freeing the host stops it.
    host.start_ok();
    let (_, info) = host.info();
    let info = info.unwrap();
    let lock_file = PathBuf::from(info["lockFile"].as_str().unwrap());
    let port = info["port"].as_u64().unwrap() as u16;
    assert!(lock_file.exists());
    drop(host);
    assert!(!lock_file.exists(), "free removes the lock file");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn bad_server_config_starts_nothing() {
    let host = Host::new();
    let lock_dir = host.lock_dir();
    let (rc, err) = host.start(Some(json!({"lockDir": lock_dir, "bogus": 1})));
    assert_eq!(rc, QC_INVALID_JSON, "{err}");
    assert!(err.contains("bogus"), "{err}");
    let (rc, err) = host.start(Some(json!({"lockDir": lock_dir, "keepAliveMs": 5})));
    assert_eq!(rc, QC_INVALID_ARGUMENT, "{err}");
    let (rc, err) = host.start(Some(
        json!({"lockDir": lock_dir, "workspacePaths": ["rel"]}),
    ));
    assert_eq!(rc, QC_INVALID_ARGUMENT, "{err}");
    let bad = cs("{not json");
    let mut err = null_mut();
    let rc = unsafe { qc_plugin_host_mcp_start(host.h, bad.as_ptr(), &mut err) };
    assert_eq!(rc, QC_INVALID_JSON);
    take_err(err);
    assert_eq!(host.info().0, QC_NOT_RUNNING);
    let locks = std::fs::read_dir(&lock_dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(locks, 0, "no lock file after failed starts");
    // A good config still starts afterwards.
    host.start_ok();
}

/// An executable stand-in for `qc-mcp-bridge` in `dir`.
fn fake_bridge(dir: &Path) -> String {
    // Launchable by its execute bit on Unix, by its `.exe` name on Windows.
    let p = dir.join(format!("qc-mcp-bridge{}", std::env::consts::EXE_SUFFIX));
    std::fs::write(&p, "#!/bin/sh\nexit 1\n").unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_string_lossy().into_owned()
}

fn register(options: &Value) -> (u32, Option<Value>, String) {
    call_settings(qc_mcp_register, options)
}

fn unregister(options: &Value) -> (u32, Option<Value>, String) {
    call_settings(qc_mcp_unregister, options)
}

type SettingsFn = unsafe extern "C" fn(*const c_char, *mut *mut c_char, *mut *mut c_char) -> u32;

fn call_settings(f: SettingsFn, options: &Value) -> (u32, Option<Value>, String) {
    let o = cs(&options.to_string());
    let mut out = null_mut();
    let mut err = null_mut();
    let rc = unsafe { f(o.as_ptr(), &mut out, &mut err) };
    if rc == QC_OK {
        assert!(err.is_null());
        (rc, Some(take_json(out)), String::new())
    } else {
        assert!(out.is_null(), "out is written only on success");
        (rc, None, take_err(err))
    }
}

const COMMENTED: &str = "{\n  // my theme\n  \"theme\": \"dark\", /* keep */\n  \"mcpServers\": {\n    // theirs\n    \"other\": {\"command\": \"x\"}\n  }\n}\n";

#[test]
fn project_scope_register_keeps_comments_and_unregister_removes() {
    qwen_home();
    let dir = TempDir::new("ffi-mcp-proj");
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join(".qwen")).unwrap();
    let settings = project.join(".qwen/settings.json");
    std::fs::write(&settings, COMMENTED).unwrap();
    let bridge = fake_bridge(dir.path());
    let opts = json!({"scope": "project", "project": project, "bridge": bridge});

    let (rc, out, err) = register(&opts);
    assert_eq!(rc, QC_OK, "{err}");
    let out = out.unwrap();
    assert_eq!(out["ok"], true);
    assert_eq!(out["change"], "added");
    assert_eq!(out["scope"], "project");
    assert_eq!(out["settings"], json!(settings));
    assert_eq!(out["approve"], "qwen mcp approve qwen-companion-plugins");
    assert_eq!(out["serversLeft"], 2);
    let text = std::fs::read_to_string(&settings).unwrap();
    for kept in ["// my theme", "/* keep */", "// theirs", "\"other\""] {
        assert!(text.contains(kept), "{kept} lost:\n{text}");
    }
    let parsed = qwen_companion::mcp_bridge::settings::qwen_parse(&text).unwrap();
    let entry = &parsed["mcpServers"]["qwen-companion-plugins"];
    assert_eq!(entry["command"], json!(bridge));
    assert_eq!(entry["args"], json!(["plugins"]));
    assert!(entry.get("alwaysLoadTools").is_none());
    assert!(entry.get("httpUrl").is_none() && entry.get("headers").is_none());

    // The same entry again: unchanged, byte-identical.
    let (rc, out, _) = register(&opts);
    assert_eq!(rc, QC_OK);
    assert_eq!(out.unwrap()["change"], "unchanged");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);

    // alwaysLoadTools replaces the entry.
    let mut opts_always = opts.clone();
    opts_always["alwaysLoadTools"] = json!(true);
    let (rc, out, _) = register(&opts_always);
    assert_eq!(rc, QC_OK);
    assert_eq!(out.unwrap()["change"], "replaced");
    let parsed = qwen_companion::mcp_bridge::settings::qwen_parse(
        &std::fs::read_to_string(&settings).unwrap(),
    )
    .unwrap();
    assert_eq!(
        parsed["mcpServers"]["qwen-companion-plugins"]["alwaysLoadTools"],
        true
    );

    let (rc, out, _) = unregister(&json!({"scope": "project", "project": project}));
    assert_eq!(rc, QC_OK);
    let out = out.unwrap();
    assert_eq!(out["change"], "removed");
    assert_eq!(out["serversLeft"], 1);
    assert!(out.get("approve").is_none());
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(!text.contains("qwen-companion-plugins"));
    assert!(text.contains("// my theme") && text.contains("\"other\""));
    let (rc, out, _) = unregister(&json!({"scope": "project", "project": project}));
    assert_eq!(rc, QC_OK);
    assert_eq!(out.unwrap()["change"], "absent");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
}

#[test]
fn user_scope_writes_the_qwen_home_settings() {
    let home = qwen_home();
    let dir = TempDir::new("ffi-mcp-user");
    let bridge = fake_bridge(dir.path());
    let settings = home.join("settings.json");
    let (rc, out, err) = register(&json!({"scope": "user", "bridge": bridge}));
    assert_eq!(rc, QC_OK, "{err}");
    let out = out.unwrap();
    assert_eq!(out["settings"], json!(settings));
    assert_eq!(out["scope"], "user");
    assert!(out.get("approve").is_none(), "no approval in user scope");
    assert!(matches!(
        out["change"].as_str(),
        Some("added" | "replaced" | "unchanged")
    ));
    let v = qwen_companion::mcp_bridge::settings::qwen_parse(
        &std::fs::read_to_string(&settings).unwrap(),
    )
    .unwrap();
    assert_eq!(
        v["mcpServers"]["qwen-companion-plugins"]["command"],
        json!(bridge)
    );
    // The scope defaults to user.
    let (rc, out, _) = unregister(&json!({}));
    assert_eq!(rc, QC_OK);
    assert_eq!(out.unwrap()["change"], "removed");
}

#[test]
fn a_settings_file_qwen_cannot_read_is_refused_and_untouched() {
    qwen_home();
    let dir = TempDir::new("ffi-mcp-bad");
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join(".qwen")).unwrap();
    let settings = project.join(".qwen/settings.json");
    let bridge = fake_bridge(dir.path());
    let opts = json!({"scope": "project", "project": project, "bridge": bridge});
    for (text, status) in [
        ("{\n  \"theme\": \"dark\",\n}\n", QC_INVALID_JSON),
        ("{ 'theme': 1 }", QC_INVALID_JSON),
        ("{\"mcpServers\": []}", QC_INVALID_JSON),
    ] {
        std::fs::write(&settings, text).unwrap();
        let (rc, _, err) = register(&opts);
        assert_eq!(rc, status, "{text}: {err}");
        assert_eq!(
            err.matches("settings.json").count(),
            1,
            "names the file once: {err}"
        );
        assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
        let (rc, _, _) = unregister(&opts);
        assert_eq!(rc, status, "{text}");
        assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
    }
    let (_, _, err) = {
        std::fs::write(&settings, "{\n  \"a\": 1,\n}\n").unwrap();
        register(&opts)
    };
    assert!(err.contains("line 3"), "line and column: {err}");
}

#[test]
fn misuse_gives_the_documented_status() {
    qwen_home();
    let dir = TempDir::new("ffi-mcp-misuse");
    let bridge = fake_bridge(dir.path());
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    let project = dir.path().to_string_lossy().into_owned();
    let cases: Vec<(Value, u32)> = vec![
        (
            json!({"scope": "global", "bridge": bridge}),
            QC_INVALID_ARGUMENT,
        ),
        (
            json!({"scope": "project", "bridge": bridge}),
            QC_INVALID_ARGUMENT,
        ),
        (
            json!({"scope": "project", "project": "rel", "bridge": bridge}),
            QC_INVALID_ARGUMENT,
        ),
        (
            json!({"scope": "project", "project": format!("{project}/nope"), "bridge": bridge}),
            QC_NOT_FOUND,
        ),
        (json!({"scope": "user"}), QC_INVALID_ARGUMENT),
        (json!({"bridge": "qc-mcp-bridge"}), QC_INVALID_ARGUMENT),
        (
            json!({"bridge": format!("{project}/missing")}),
            QC_NOT_FOUND,
        ),
        (json!({"bridge": plain}), QC_INVALID_ARGUMENT),
        (json!({"bridge": project}), QC_INVALID_ARGUMENT),
        (json!({"bridge": bridge, "extra": 1}), QC_INVALID_JSON),
        (
            json!({"bridge": bridge, "alwaysLoadTools": "yes"}),
            QC_INVALID_JSON,
        ),
        (json!([1]), QC_INVALID_JSON),
    ];
    for (opts, status) in cases {
        let (rc, _, err) = register(&opts);
        assert_eq!(rc, status, "{opts}: {err}");
        assert!(!err.is_empty());
    }
    let (rc, _, _) = unregister(&json!({"scope": "nope"}));
    assert_eq!(rc, QC_INVALID_ARGUMENT);
    assert!(!dir.path().join(".qwen").exists(), "nothing written");

    unsafe {
        let mut out = null_mut();
        let mut err = null_mut();
        assert_eq!(
            qc_mcp_register(std::ptr::null(), &mut out, &mut err),
            QC_NULL_PARAMETER
        );
        take_err(err);
        let o = cs("{}");
        assert_eq!(
            qc_mcp_register(o.as_ptr(), null_mut(), null_mut()),
            QC_NULL_PARAMETER
        );
        assert_eq!(
            qc_mcp_unregister(o.as_ptr(), null_mut(), null_mut()),
            QC_NULL_PARAMETER
        );
        let bad = b"{\"scope\":\"\xff\"}\0";
        assert_eq!(
            qc_mcp_register(bad.as_ptr() as *const c_char, &mut out, null_mut()),
            QC_INVALID_UTF8
        );
        let nj = cs("{nope");
        assert_eq!(
            qc_mcp_unregister(nj.as_ptr(), &mut out, null_mut()),
            QC_INVALID_JSON
        );
        assert!(out.is_null());

        // Handles: NULL, made up, freed.
        assert_eq!(
            qc_plugin_host_mcp_start(null_mut(), std::ptr::null(), null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(
            qc_plugin_host_mcp_stop(null_mut(), null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(
            qc_plugin_host_mcp_info(std::ptr::null(), &mut out, null_mut()),
            QC_INVALID_HANDLE
        );
        let fake = 0x7777_0000usize as *mut qc_plugin_host;
        assert_eq!(
            qc_plugin_host_mcp_start(fake, std::ptr::null(), &mut err),
            QC_INVALID_HANDLE
        );
        take_err(err);
        let host = Host::new();
        assert_eq!(
            qc_plugin_host_mcp_info(host.h, null_mut(), null_mut()),
            QC_NULL_PARAMETER
        );
        let bad_cfg = b"{\"lockDir\":\"\xfe\"}\0";
        assert_eq!(
            qc_plugin_host_mcp_start(host.h, bad_cfg.as_ptr() as *const c_char, null_mut()),
            QC_INVALID_UTF8
        );
        let h = host.h;
        drop(host);
        assert_eq!(
            qc_plugin_host_mcp_start(h, std::ptr::null(), null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(qc_plugin_host_mcp_stop(h, null_mut()), QC_INVALID_HANDLE);
        assert_eq!(
            qc_plugin_host_mcp_info(h, &mut out, null_mut()),
            QC_INVALID_HANDLE
        );
        assert!(out.is_null());
    }
}
