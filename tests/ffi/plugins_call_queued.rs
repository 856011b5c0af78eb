//! `qc_plugin_host_call_queued`: a plugin call whose completion is a pulled
//! event, so a host without callbacks (Neovim's LuaJIT) keeps its loop
//! running — and answers the plugin's capability requests — during the call.

use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use qc_test_support::sessions::{cs, take, take_err, TempDir};
use qwen_companion::ffi::*;
use serde_json::{json, Value};

fn new_host(dir: &TempDir) -> *mut qc_plugin_host {
    let cfg = json!({
        "pluginsDir": dir.path().join("plugins"),
        "callTimeoutMs": 8000,
        "killGraceMs": 300,
        "startTimeoutMs": 8000,
        "hostRequestTimeoutMs": 5000,
        "workspaceRoot": dir.path(),
    });
    let cfg = cs(&cfg.to_string());
    let mut h = null_mut();
    assert_eq!(
        unsafe { qc_plugin_host_new(cfg.as_ptr(), &mut h, null_mut()) },
        QC_OK
    );
    for name in ["hello", "todo-quadrant"] {
        let src = cs(&qc_test_support::plugins::fixture(name).to_string_lossy());
        let (mut out, mut ej, mut err) = (null_mut(), null_mut(), null_mut());
        let rc = unsafe { qc_plugin_host_install(h, src.as_ptr(), &mut out, &mut ej, &mut err) };
        assert_eq!(rc, QC_OK, "install {name}: {}", take(err));
        take(out);
    }
    h
}

fn queue_call(
    h: *mut qc_plugin_host,
    plugin: &str,
    tool: &str,
    params: &str,
) -> (u32, u64, String) {
    let (p, t, a) = (cs(plugin), cs(tool), cs(params));
    let mut id = 0u64;
    let mut err = null_mut();
    let rc = unsafe {
        qc_plugin_host_call_queued(
            h,
            p.as_ptr(),
            t.as_ptr(),
            a.as_ptr(),
            null(),
            &mut id,
            &mut err,
        )
    };
    (rc, id, take_err(err))
}

/// Events pulled and not yet matched, and the notifications answered.
#[derive(Default)]
struct Pulled {
    backlog: Vec<Value>,
    shown: Vec<Value>,
}

/// The first event (already pulled, or pulled now) that matches `want`;
/// every `show_notification` request pulled on the way is answered.
fn pull_until(
    h: *mut qc_plugin_host,
    fd: i32,
    pulled: &mut Pulled,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(i) = pulled.backlog.iter().position(&want) {
            return pulled.backlog.remove(i);
        }
        assert!(
            Instant::now() < deadline,
            "no matching event (unmatched: {:?})",
            pulled.backlog
        );
        // A wait for the next event (a descriptor on Unix, a HANDLE on Windows).
        qc_test_support::wait_event_handle(fd, 200);
        let mut ev = null_mut();
        assert_eq!(
            unsafe { qc_plugin_host_next_event(h, &mut ev, null_mut()) },
            QC_OK
        );
        if ev.is_null() {
            continue;
        }
        let v: Value = serde_json::from_str(&take(ev)).unwrap();
        if v["type"] == "host_request" && v["capability"] == "show_notification" {
            pulled.shown.push(v.clone());
            let ok = cs(r#"{"shown":true}"#);
            let id = v["id"].as_u64().unwrap();
            assert_eq!(
                unsafe { qc_plugin_host_respond(h, id, ok.as_ptr(), null(), null_mut()) },
                QC_OK
            );
        }
        pulled.backlog.push(v);
    }
}

#[test]
fn queued_calls_complete_as_events_while_requests_are_answered() {
    let dir = TempDir::new("callq");
    let h = new_host(&dir);

    // Without pull mode: refused, nothing started.
    let (rc, id, msg) = queue_call(h, "com.example.hello", "say_hello", r#"{"name":"x"}"#);
    assert_eq!((rc, id), (QC_REFUSED, 0));
    assert!(msg.contains("pull mode"), "{msg}");

    let mut fd = -1;
    assert_eq!(
        unsafe { qc_plugin_host_enable_events(h, &mut fd, null_mut()) },
        QC_OK
    );
    let cap = cs("show_notification");
    assert_eq!(
        unsafe { qc_plugin_host_offer_capability(h, cap.as_ptr(), null_mut()) },
        QC_OK
    );

    // Bad arguments fail at once; a null out pointer too.
    let (rc, _, _) = queue_call(h, "com.example.hello", "say_hello", "{");
    assert_eq!(rc, QC_INVALID_JSON);
    let (p, t) = (cs("com.example.hello"), cs("say_hello"));
    assert_eq!(
        unsafe {
            qc_plugin_host_call_queued(
                h,
                p.as_ptr(),
                t.as_ptr(),
                null(),
                null(),
                null_mut(),
                null_mut(),
            )
        },
        QC_NULL_PARAMETER
    );

    // Two calls at once: ids differ, each completion names its id.
    let (rc, a, _) = queue_call(h, "com.example.hello", "say_hello", r#"{"name":"Neovim"}"#);
    assert_eq!(rc, QC_OK);
    let (rc, b, _) = queue_call(h, "com.example.hello", "say_hello", r#"{}"#);
    assert_eq!(rc, QC_OK);
    assert!(a > 0 && b > 0 && a != b);
    let mut shown = Pulled::default();
    let done_a = pull_until(h, fd, &mut shown, |e| {
        e["type"] == "call_done" && e["callId"] == json!(a)
    });
    assert_eq!(done_a["ok"], true, "{done_a}");
    assert_eq!(done_a["result"]["content"][0]["text"], "Hello, Neovim!");
    let done_b = pull_until(h, fd, &mut shown, |e| {
        e["type"] == "call_done" && e["callId"] == json!(b)
    });
    assert_eq!(done_b["ok"], false);
    assert_eq!(done_b["error"]["kind"], "schema", "{done_b}");

    // A tool that waits for a host capability during the call: the request
    // is pulled and answered before the completion arrives.
    let (rc, c, _) = queue_call(
        h,
        "local.todo-quadrant",
        "manage_todo_quadrant",
        r#"{"action":"remind_now"}"#,
    );
    assert_eq!(rc, QC_OK);
    let done_c = pull_until(h, fd, &mut shown, |e| {
        e["type"] == "call_done" && e["callId"] == json!(c)
    });
    assert_eq!(done_c["ok"], true, "{done_c}");
    let shown = &shown.shown;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["plugin"], "local.todo-quadrant");
    assert_eq!(shown[0]["params"]["viewId"], "quadrant");

    assert_eq!(unsafe { qc_plugin_host_free(h) }, QC_OK);
    let (rc, _, _) = queue_call(h, "com.example.hello", "say_hello", "{}");
    assert_eq!(rc, QC_INVALID_HANDLE, "a freed host is refused");
    // The leftover scan reads other processes' environments (/proc, Unix);
    // on Windows each plugin's Job Object ends its processes with the host.
    #[cfg(unix)]
    {
        let left = qc_test_support::plugins::pids_with_env(&format!(
            "PLUGIN_DATA_DIR={}/data/",
            dir.path().join("plugins").display()
        ));
        assert!(left.is_empty(), "plugin processes left: {left:?}");
    }
}
