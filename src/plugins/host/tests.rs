//! Unit tests of the host's settings, errors, events and breaker.

use std::time::Duration;

use serde_json::{json, Map};

use super::*;
use crate::plugins::process::ExitInfo;

fn settings(json: &str) -> Result<Settings> {
    Settings::from_config(Config::from_json(Some(json))?)
}

#[test]
fn config_defaults_and_bounds() {
    // An absolute path on this platform (`/tmp/p` is relative to the
    // current drive on Windows).
    let dir = std::env::temp_dir().join("p");
    let s = settings(&serde_json::json!({ "pluginsDir": dir }).to_string()).unwrap();
    assert_eq!(s.plugins_dir, dir);
    assert_eq!(s.node, "node");
    assert!(!s.electron);
    assert_eq!(s.call_timeout, Duration::from_secs(30));
    assert_eq!(s.max_message_bytes, 16 * 1024 * 1024);
    assert_eq!(s.kill_grace, Duration::from_secs(2));
    assert_eq!(s.crash_max, 3);
    assert_eq!(s.crash_window, Duration::from_secs(60));
    assert_eq!(s.restart_backoff, Duration::from_secs(1));
    assert!(settings(r#"{"restartBackoffMs": 0}"#)
        .unwrap()
        .restart_backoff
        .is_zero());
    assert_eq!(s.workspace_root, "");
    assert_eq!(s.reply_poll, Duration::from_micros(200));
    assert!(settings(r#"{"replyPollUs": 0}"#)
        .unwrap()
        .reply_poll
        .is_zero());
    let e = settings(r#"{"replyPollUs": 10001}"#).unwrap_err();
    assert!(e.message.contains("replyPollUs"), "{}", e.message);
    let e = Config::from_json(Some(r#"{"callTimeout": 5}"#)).unwrap_err();
    assert_eq!(e.status, Status::InvalidJson);
    assert!(e.message.contains("callTimeout"), "{}", e.message);
    let e = settings(r#"{"callTimeoutMs": 10}"#).unwrap_err();
    assert!(e.message.contains("callTimeoutMs"), "{}", e.message);
    assert!(settings(r#"{"maxMessageBytes": 10}"#).is_err());
    assert!(settings(r#"{"node": "no\u0000de"}"#).is_err());
    // The default directory follows QWEN_HOME resolution.
    let d = settings("{}").unwrap().plugins_dir;
    assert!(d.ends_with("companion/plugins"), "{}", d.display());
    assert!(d.starts_with(crate::shared::fs::qwen_home().unwrap()));
}

#[test]
fn call_error_json_and_status() {
    let mut e = CallError::new(ErrorKind::Exited, "the plugin x exited (exit code 3)");
    e.exit = Some(ExitInfo {
        code: Some(3),
        signal: None,
    });
    e.stderr_tail = Some("boom".into());
    assert_eq!(
        e.to_json(),
        json!({"kind": "exited", "message": "the plugin x exited (exit code 3)",
            "exitCode": 3, "signal": null, "stderrTail": "boom"})
    );
    let mut s = CallError::new(ErrorKind::Schema, "bad");
    s.schema_errors = vec![("/a".into(), "not a string".into())];
    assert_eq!(
        s.to_json()["errors"],
        json!([{"path": "/a", "message": "not a string"}])
    );
    assert_eq!(s.clone().into_error().status, Status::InvalidArgument);
    assert!(s.into_error().message.starts_with("schema: "));
    let names: Vec<&str> = [
        ErrorKind::Schema,
        ErrorKind::UnknownTool,
        ErrorKind::Timeout,
        ErrorKind::Exited,
        ErrorKind::Protocol,
        ErrorKind::TooLarge,
        ErrorKind::ToolError,
        ErrorKind::Disabled,
        ErrorKind::NotFound,
        ErrorKind::Host,
    ]
    .iter()
    .map(|k| k.as_str())
    .collect();
    assert_eq!(
        names,
        [
            "schema",
            "unknown_tool",
            "timeout",
            "exited",
            "protocol",
            "too_large",
            "tool_error",
            "disabled",
            "not_found",
            "host"
        ]
    );
}

#[test]
fn event_json() {
    let e = PluginEvent::Exit {
        plugin: "a.b".into(),
        code: None,
        signal: Some(9),
        expected: true,
        stderr_tail: String::new(),
    };
    assert_eq!(
        e.to_json(),
        json!({"type": "plugin_exit", "plugin": "a.b", "code": null, "signal": 9,
            "expected": true, "stderrTail": ""})
    );
    assert_eq!(
        PluginEvent::Disabled {
            plugin: "a.b".into(),
            reason: "r".into()
        }
        .to_json(),
        json!({"type": "plugin_disabled", "plugin": "a.b", "reason": "r"})
    );
    assert_eq!(
        PluginEvent::Started {
            plugin: "a.b".into(),
            pid: 7
        }
        .to_json(),
        json!({"type": "plugin_started", "plugin": "a.b", "pid": 7})
    );
}

fn slot() -> PluginSlot {
    let dir = std::env::temp_dir().join(format!("qc-host-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.js"), "").unwrap();
    let text = r#"{"id": "a.b", "name": "A", "version": "1.0.0", "description": "d",
        "main": "index.js", "tools": []}"#;
    let (m, _) = crate::plugins::manifest::parse(text, &dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    PluginSlot::new(StoredPlugin {
        manifest: Arc::new(m),
        enabled: true,
        config: Map::new(),
    })
}

#[test]
fn breaker_counts_exits_within_the_window_only() {
    let exit = ExitInfo {
        code: Some(1),
        signal: None,
    };
    let mut s = settings(r#"{"pluginsDir": "/tmp/p", "crashLoopWindowMs": 200}"#).unwrap();
    let slot = slot();
    assert!(slot.record_crash(&s, &exit).is_none());
    assert!(slot.record_crash(&s, &exit).is_none());
    std::thread::sleep(Duration::from_millis(250));
    // The first two fell out of the window.
    assert!(slot.record_crash(&s, &exit).is_none());
    assert!(slot.record_crash(&s, &exit).is_none());
    assert!(slot.breaker().is_none());
    let reason = slot.record_crash(&s, &exit).unwrap();
    assert!(
        reason.contains("3 times") && reason.contains("exit code 1"),
        "{reason}"
    );
    assert_eq!(slot.breaker(), Some(reason));
    // 0 = never trips.
    s.crash_max = 0;
    let other = self::slot();
    for _ in 0..10 {
        assert!(other.record_crash(&s, &exit).is_none());
    }
}
