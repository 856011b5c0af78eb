//! The C ABI used the way a C host would (through the exported functions).

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::mpsc;
use std::time::Duration;

use qc_test_support::mcp::*;
use qwen_companion::ffi::*;
use serde_json::json;

fn take(s: *mut c_char) -> String {
    assert!(!s.is_null());
    let out = unsafe { CStr::from_ptr(s) }.to_str().unwrap().to_string();
    unsafe { qc_string_free(s) };
    out
}

struct Host {
    lock: TempDir,
    ws: TempDir,
    c: *mut qc_companion,
}

fn new_companion() -> Host {
    let lock = TempDir::new("ffilock");
    let ws = TempDir::new("ffiws");
    let cfg = CString::new(
        json!({"workspaceRoots": [ws.path()], "lockDir": lock.path().join("ide"), "ideName": "FFI"})
            .to_string(),
    )
    .unwrap();
    let mut c = null_mut();
    let mut err = null_mut();
    assert_eq!(
        unsafe { qc_companion_new(cfg.as_ptr(), &mut c, &mut err) },
        QC_OK
    );
    assert!(err.is_null());
    Host { lock, ws, c }
}

#[test]
fn misuse_matrix() {
    let h = new_companion();
    let c = h.c;
    let mut err = null_mut();
    unsafe {
        // NULL out-params and arguments.
        assert_eq!(
            qc_companion_new(null(), null_mut(), &mut err),
            QC_NULL_PARAMETER
        );
        assert!(take(err).contains("out"));
        assert_eq!(
            qc_companion_file_opened(c, null(), &mut err),
            QC_NULL_PARAMETER
        );
        take(err);
        assert_eq!(
            qc_companion_port(c, null_mut(), null_mut()),
            QC_NULL_PARAMETER
        );
        // Invalid UTF-8.
        let bad = [0x66u8, 0xff, 0xfe, 0];
        assert_eq!(
            qc_companion_file_focused(c, bad.as_ptr() as *const c_char, &mut err),
            QC_INVALID_UTF8
        );
        take(err);
        assert_eq!(
            qc_companion_set_selection(c, null(), bad.as_ptr() as *const c_char, 3, &mut err),
            QC_INVALID_UTF8
        );
        take(err);
        // Malformed JSON.
        let mut c2 = null_mut();
        for bad_json in [
            "{",
            "[1]",
            "{\"workspaceRoots\": 5}",
            "{\"unknown\": 1}",
            "{\"workspaceRoots\":[\"rel\"]}",
        ] {
            let j = CString::new(bad_json).unwrap();
            let rc = qc_companion_new(j.as_ptr(), &mut c2, &mut err);
            assert!(
                rc == QC_INVALID_JSON || rc == QC_INVALID_ARGUMENT,
                "{bad_json}: {rc}"
            );
            assert!(c2.is_null(), "out untouched on failure");
            take(err);
        }
        let j = CString::new("{\"workspaceState\": ").unwrap();
        assert_eq!(
            qc_companion_set_context_json(c, j.as_ptr(), &mut err),
            QC_INVALID_JSON
        );
        take(err);
        let j = CString::new("[\"/a\", 3]").unwrap();
        assert_eq!(
            qc_companion_set_workspace_roots_json(c, j.as_ptr(), &mut err),
            QC_INVALID_JSON
        );
        take(err);
        // Bad arguments.
        assert_eq!(
            qc_companion_set_cursor(c, null(), 1, 1, &mut err),
            QC_NOT_FOUND
        );
        take(err);
        let p = CString::new("/x").unwrap();
        assert_eq!(
            qc_companion_set_cursor(c, p.as_ptr(), 0, 0, &mut err),
            QC_INVALID_ARGUMENT
        );
        take(err);
        assert_eq!(
            qc_companion_set_log_callback(c, None, null_mut(), None, 9, &mut err),
            QC_INVALID_ARGUMENT
        );
        take(err);
        // Not running yet.
        let mut port = 0u16;
        assert_eq!(qc_companion_port(c, &mut port, &mut err), QC_NOT_RUNNING);
        take(err);
        assert_eq!(
            qc_companion_diff_accept(c, p.as_ptr(), null(), 0, &mut err),
            QC_NOT_RUNNING
        );
        take(err);
        assert_eq!(qc_companion_stop(c, &mut err), QC_NOT_RUNNING);
        take(err);
        // Start, then double start, stop, double stop.
        assert_eq!(qc_companion_start(c, &mut err), QC_OK);
        assert!(err.is_null());
        assert_eq!(qc_companion_start(c, &mut err), QC_ALREADY_RUNNING);
        take(err);
        assert_eq!(qc_companion_port(c, &mut port, null_mut()), QC_OK);
        assert!(port > 0);
        let mut out = null_mut();
        assert_eq!(
            qc_companion_terminal_env_json(c, &mut out, null_mut()),
            QC_OK
        );
        let env: serde_json::Value = serde_json::from_str(&take(out)).unwrap();
        assert_eq!(env["QWEN_CODE_IDE_SERVER_PORT"], port.to_string());
        assert_eq!(
            qc_companion_diff_reject(c, p.as_ptr(), &mut err),
            QC_NOT_FOUND
        );
        take(err);
        assert_eq!(qc_companion_stop(c, null_mut()), QC_OK);
        assert_eq!(qc_companion_stop(c, &mut err), QC_NOT_RUNNING);
        take(err);
        // Reply outside a callback.
        let fake = 0x10 as *mut qc_reply;
        assert_eq!(qc_reply_set_text(fake, p.as_ptr(), 2, &mut err), QC_REFUSED);
        take(err);
        assert_eq!(
            qc_reply_set_text(null_mut(), p.as_ptr(), 2, null_mut()),
            QC_NULL_PARAMETER
        );
        // Free, then use after free and double free.
        assert_eq!(qc_companion_free(c), QC_OK);
        assert_eq!(qc_companion_start(c, &mut err), QC_INVALID_HANDLE);
        take(err);
        assert_eq!(qc_companion_free(c), QC_INVALID_HANDLE);
        // Garbage and NULL handles.
        assert_eq!(
            qc_companion_start(0xdead_beef as *mut qc_companion, null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(
            qc_companion_start(null_mut(), null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(qc_companion_free(null_mut()), QC_OK);
        qc_string_free(null_mut());
        assert_eq!(qc_abi_version(), QC_ABI_VERSION);
        assert_eq!(
            CStr::from_ptr(qc_version()).to_str().unwrap(),
            env!("CARGO_PKG_VERSION")
        );
    }
    drop(h.lock);
    drop(h.ws);
}

struct Reentry {
    c: *mut qc_companion,
    tx: mpsc::Sender<String>,
}

unsafe extern "C" fn reentrant_open(
    ud: *mut c_void,
    path: *const c_char,
    content: *const c_char,
    len: usize,
    reply: *mut qc_reply,
) -> i32 {
    let r = unsafe { &*(ud as *const Reentry) };
    // No assertion or unwrap in here: a panic in an `extern "C"` callback
    // aborts the test process instead of failing the test. The callback only
    // records; the test thread asserts.
    let path_s = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let bytes = unsafe { std::slice::from_raw_parts(content as *const u8, len) };
    let mut out = null_mut();
    // Calling back into the library from inside the callback must work.
    let rc = unsafe { qc_companion_context_json(r.c, &mut out, null_mut()) };
    if rc == QC_OK {
        unsafe { qc_string_free(out) };
    }
    if path_s.ends_with("refuse.txt") {
        let msg = "the user is busy";
        unsafe { qc_reply_set_text(reply, msg.as_ptr() as *const c_char, msg.len(), null_mut()) };
        let _ = r.tx.send(format!("refused {path_s}"));
        return 7;
    }
    if path_s.ends_with("keep.txt") {
        // Left open: the CLI's closeDiff then reaches the close callback.
        let _ = r.tx.send(format!("kept {path_s} ctx={rc}"));
        return 0;
    }
    // Accept immediately, from inside the callback, with edited text.
    let edited = format!("{}+edited", String::from_utf8_lossy(bytes));
    let rc2 = unsafe {
        qc_companion_diff_accept(
            r.c,
            path,
            edited.as_ptr() as *const c_char,
            edited.len(),
            null_mut(),
        )
    };
    let _ = r.tx.send(format!("opened {path_s} ctx={rc} accept={rc2}"));
    0
}

/// What the close callback saw: (path, status of the invalid-UTF-8 reply,
/// status of the valid reply). Asserted on the test thread.
static CLOSE_SEEN: std::sync::Mutex<Vec<(String, u32, u32)>> = std::sync::Mutex::new(Vec::new());

unsafe extern "C" fn close_cb(_ud: *mut c_void, path: *const c_char, reply: *mut qc_reply) -> i32 {
    let bad = [0xffu8, 0xfe];
    // Invalid UTF-8 is refused, then valid text is taken.
    let rc_bad = unsafe { qc_reply_set_text(reply, bad.as_ptr() as *const c_char, 2, null_mut()) };
    let text = "FINAL";
    let rc_good = unsafe {
        qc_reply_set_text(
            reply,
            text.as_ptr() as *const c_char,
            text.len(),
            null_mut(),
        )
    };
    let path = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    if let Ok(mut seen) = CLOSE_SEEN.lock() {
        seen.push((path, rc_bad, rc_good));
    }
    0
}

unsafe extern "C" fn free_reentry(ud: *mut c_void) {
    drop(unsafe { Box::from_raw(ud as *mut Reentry) });
}

unsafe extern "C" fn log_cb(ud: *mut c_void, level: u32, msg: *const c_char) {
    let tx = unsafe { &*(ud as *const mpsc::Sender<String>) };
    let m = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    let _ = tx.send(format!("{level} {m}"));
}

unsafe extern "C" fn free_sender(ud: *mut c_void) {
    drop(unsafe { Box::from_raw(ud as *mut mpsc::Sender<String>) });
}

#[test]
fn callbacks_reenter_and_reply() {
    let h = new_companion();
    let (tx, rx) = mpsc::channel();
    let (ltx, lrx) = mpsc::channel();
    let ud = Box::into_raw(Box::new(Reentry { c: h.c, tx })) as *mut c_void;
    let lud = Box::into_raw(Box::new(ltx)) as *mut c_void;
    unsafe {
        assert_eq!(
            qc_companion_set_open_diff_callback(
                h.c,
                Some(reentrant_open),
                ud,
                Some(free_reentry),
                null_mut()
            ),
            QC_OK
        );
        assert_eq!(
            qc_companion_set_close_diff_callback(h.c, Some(close_cb), null_mut(), None, null_mut()),
            QC_OK
        );
        assert_eq!(
            qc_companion_set_log_callback(
                h.c,
                Some(log_cb),
                lud,
                Some(free_sender),
                QC_LOG_INFO,
                null_mut()
            ),
            QC_OK
        );
        assert_eq!(qc_companion_start(h.c, null_mut()), QC_OK);
    }
    let mut lock = null_mut();
    unsafe { qc_companion_lock_file_path(h.c, &mut lock, null_mut()) };
    let mut client = Client::from_lock(std::path::Path::new(&take(lock)));
    client.handshake();
    let s = client.open_stream();
    let p = h.ws.path().join("n.txt").to_string_lossy().into_owned();
    let r = client.tool("openDiff", json!({"filePath": p, "newContent": "NEW"}));
    assert_eq!(r["content"], json!([]));
    let msg = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(msg, format!("opened {p} ctx=0 accept=0"));
    let n = s
        .next_method("ide/diffAccepted", Duration::from_secs(5))
        .unwrap();
    assert_eq!(n["params"]["content"], "NEW+edited");
    // Refusal with a message.
    let q =
        h.ws.path()
            .join("refuse.txt")
            .to_string_lossy()
            .into_owned();
    let r = client.tool("openDiff", json!({"filePath": q, "newContent": "x"}));
    assert_eq!(r["isError"], true);
    assert_eq!(r["content"][0]["text"], "the user is busy");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        format!("refused {q}")
    );
    // A diff accepted from inside the callback is no longer open: closeDiff
    // answers null content and does not reach the close callback.
    let z = h.ws.path().join("z.txt").to_string_lossy().into_owned();
    let _ = client.tool("openDiff", json!({"filePath": z, "newContent": "x"}));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        format!("opened {z} ctx=0 accept=0")
    );
    let r = client.tool("closeDiff", json!({"filePath": z}));
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap(),
        json!({"content": null})
    );
    assert!(CLOSE_SEEN.lock().unwrap().is_empty());
    // closeDiff text from the host: a diff left open, closed by the CLI. The
    // close callback runs and its text is what the CLI gets.
    let k = h.ws.path().join("keep.txt").to_string_lossy().into_owned();
    let r = client.tool("openDiff", json!({"filePath": k, "newContent": "x"}));
    assert_eq!(r["content"], json!([]));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        format!("kept {k} ctx=0")
    );
    let r = client.tool("closeDiff", json!({"filePath": k}));
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap(),
        json!({"content": "FINAL"})
    );
    assert_eq!(
        *CLOSE_SEEN.lock().unwrap(),
        vec![(k.clone(), QC_INVALID_UTF8, QC_OK)]
    );
    // Logs reached the host.
    let logs: Vec<String> = lrx.try_iter().collect();
    assert!(
        logs.iter().any(|l| l.contains("listening on 127.0.0.1")),
        "{logs:?}"
    );
    unsafe { assert_eq!(qc_companion_free(h.c), QC_OK) };
    // Finalizers ran: the senders are gone.
    let end = loop {
        match rx.recv_timeout(Duration::from_secs(2)) {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(end, mpsc::RecvTimeoutError::Disconnected);
}

struct FreeFromCallback {
    c: *mut qc_companion,
    done: mpsc::Sender<(u32, u32)>,
}

unsafe extern "C" fn stop_and_free_open(
    ud: *mut c_void,
    _path: *const c_char,
    _content: *const c_char,
    _len: usize,
    _reply: *mut qc_reply,
) -> i32 {
    let r = unsafe { &*(ud as *const FreeFromCallback) };
    let stop = unsafe { qc_companion_stop(r.c, null_mut()) };
    let free = unsafe { qc_companion_free(r.c) };
    let _ = r.done.send((stop, free));
    0
}

#[test]
fn stop_and_free_from_inside_a_callback() {
    let h = new_companion();
    let (tx, rx) = mpsc::channel();
    let ud = Box::into_raw(Box::new(FreeFromCallback { c: h.c, done: tx }));
    unsafe {
        qc_companion_set_open_diff_callback(
            h.c,
            Some(stop_and_free_open),
            ud as *mut c_void,
            None,
            null_mut(),
        );
        assert_eq!(qc_companion_start(h.c, null_mut()), QC_OK);
    }
    let mut lock = null_mut();
    unsafe { qc_companion_lock_file_path(h.c, &mut lock, null_mut()) };
    let lock = take(lock);
    let mut client = Client::from_lock(std::path::Path::new(&lock));
    client.handshake();
    let p = h.ws.path().join("s.txt").to_string_lossy().into_owned();
    std::thread::spawn(move || {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            client.tool("openDiff", json!({"filePath": p, "newContent": "x"}))
        }));
    });
    let (stop, free) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("no deadlock");
    assert_eq!((stop, free), (QC_OK, QC_OK));
    assert!(!std::path::Path::new(&lock).exists());
    unsafe { assert_eq!(qc_companion_start(h.c, null_mut()), QC_INVALID_HANDLE) };
    drop(unsafe { Box::from_raw(ud) });
}

#[test]
fn open_diffs_and_health_through_the_c_abi() {
    let h = new_companion();
    let mut out = null_mut();
    let mut err = null_mut();
    unsafe {
        assert_eq!(qc_companion_open_diffs_json(h.c, &mut out, &mut err), QC_OK);
        assert_eq!(take(out), r#"{"clients":0,"diffs":[]}"#);
        assert_eq!(
            qc_companion_open_diffs_json(null(), &mut out, &mut err),
            QC_INVALID_HANDLE
        );
        take(err);
        assert_eq!(
            qc_companion_open_diffs_json(h.c, null_mut(), &mut err),
            QC_NULL_PARAMETER
        );
        take(err);

        // Every handle may be NULL: those parts are "off".
        let opts =
            CString::new(r#"{"qwen":"/nonexistent/qwen","node":"/nonexistent/node"}"#).unwrap();
        assert_eq!(
            qc_health_json(opts.as_ptr(), h.c, null(), null(), &mut out, &mut err),
            QC_OK
        );
        let report: serde_json::Value = serde_json::from_str(&take(out)).unwrap();
        assert_eq!(report["library"]["abi"], qc_abi_version());
        let status = |id: &str| {
            report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == id)
                .unwrap()["status"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(status("qwen"), "error");
        assert_eq!(status("lock_file"), "warn", "{report}");
        assert_eq!(status("plugin_mcp"), "off");
        assert_eq!(status("participant"), "off");
        let bad = CString::new(r#"{"qwen": 1}"#).unwrap();
        assert_eq!(
            qc_health_json(bad.as_ptr(), null(), null(), null(), &mut out, &mut err),
            QC_INVALID_JSON
        );
        take(err);
        let stale = 0x10 as *const qc_companion;
        assert_eq!(
            qc_health_json(null(), stale, null(), null(), &mut out, &mut err),
            QC_INVALID_HANDLE
        );
        take(err);
        qc_companion_free(h.c);
    }
}

#[test]
fn log_lines_as_pulled_events() {
    let h = new_companion();
    let mut err = null_mut();
    let mut fd = 0i32;
    unsafe {
        assert_eq!(qc_companion_enable_log_events(h.c, 3, &mut err), QC_REFUSED);
        assert!(take(err).contains("pull mode"));
        assert_eq!(qc_companion_enable_events(h.c, &mut fd, &mut err), QC_OK);
        assert_eq!(
            qc_companion_enable_log_events(h.c, 6, &mut err),
            QC_INVALID_ARGUMENT
        );
        take(err);
        assert_eq!(
            qc_companion_enable_log_events(h.c, QC_LOG_INFO, &mut err),
            QC_OK
        );
        assert_eq!(qc_companion_start(h.c, &mut err), QC_OK);
        // Starting logs at info level; the line arrives as a pulled event.
        let mut found = None;
        let t = std::time::Instant::now();
        while found.is_none() && t.elapsed() < Duration::from_secs(5) {
            let mut ev = null_mut();
            assert_eq!(qc_companion_next_event(h.c, &mut ev, &mut err), QC_OK);
            if ev.is_null() {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&take(ev)).unwrap();
            if v["type"] == "log" {
                found = Some(v);
            }
        }
        let v = found.expect("a log event");
        assert!(v["level"].as_u64().unwrap() <= 3, "{v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert_eq!(qc_companion_enable_log_events(h.c, 0, &mut err), QC_OK);
        assert_eq!(
            qc_plugin_host_enable_log_events(null_mut(), 3, &mut err),
            QC_INVALID_HANDLE
        );
        take(err);
        assert_eq!(
            qc_participant_enable_log_events(null_mut(), 3, &mut err),
            QC_INVALID_HANDLE
        );
        take(err);
        qc_companion_free(h.c);
    }
}

#[test]
fn discovery_files_and_the_cli_option_through_the_c_abi() {
    let lock = TempDir::new("ffilock");
    let gem = TempDir::new("ffigem");
    let ws = TempDir::new("ffiws");
    let mut c = null_mut();
    let mut err = null_mut();
    let mut out = null_mut();
    unsafe {
        let bad = CString::new(r#"{"cli": "codex"}"#).unwrap();
        assert_eq!(
            qc_companion_new(bad.as_ptr(), &mut c, &mut err),
            QC_INVALID_ARGUMENT
        );
        assert!(take(err).contains("cli must be"));
        let cfg = CString::new(
            json!({"workspaceRoots": [ws.path()], "lockDir": lock.path().join("ide"),
                   "geminiDir": gem.path().join("ide"), "cli": "both", "ideName": "FFI"})
            .to_string(),
        )
        .unwrap();
        assert_eq!(qc_companion_new(cfg.as_ptr(), &mut c, &mut err), QC_OK);
        assert_eq!(
            qc_companion_discovery_files_json(c, &mut out, &mut err),
            QC_NOT_RUNNING
        );
        take(err);
        assert_eq!(qc_companion_start(c, null_mut()), QC_OK);
        assert_eq!(
            qc_companion_discovery_files_json(c, &mut out, &mut err),
            QC_OK
        );
        let files: serde_json::Value = serde_json::from_str(&take(out)).unwrap();
        let mut port = 0u16;
        assert_eq!(qc_companion_port(c, &mut port, null_mut()), QC_OK);
        assert_eq!(
            files["gemini"],
            json!(gem.path().join("ide").join(format!(
                "gemini-ide-server-{}-{port}.json",
                std::process::id()
            )))
        );
        assert!(std::path::Path::new(files["qwen"].as_str().unwrap()).is_file());
        assert_eq!(qc_companion_terminal_env_json(c, &mut out, &mut err), QC_OK);
        let env: serde_json::Value = serde_json::from_str(&take(out)).unwrap();
        assert_eq!(env["GEMINI_CLI_IDE_SERVER_PORT"], port.to_string());
        assert_eq!(env["QWEN_CODE_IDE_SERVER_PORT"], port.to_string());
        assert_eq!(
            qc_companion_discovery_files_json(null(), &mut out, &mut err),
            QC_INVALID_HANDLE
        );
        take(err);
        assert_eq!(
            qc_companion_discovery_files_json(c, null_mut(), &mut err),
            QC_NULL_PARAMETER
        );
        take(err);
        // The health report follows the CLIs the companion serves.
        let opts = CString::new(
            r#"{"qwen":"/nonexistent/qwen","gemini":"/nonexistent/gemini","node":"/nonexistent/node"}"#,
        )
        .unwrap();
        assert_eq!(
            qc_health_json(opts.as_ptr(), c, null(), null(), &mut out, &mut err),
            QC_OK
        );
        let report: serde_json::Value = serde_json::from_str(&take(out)).unwrap();
        assert_eq!(report["cli"], "both");
        let lock_check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "lock_file")
            .unwrap()
            .clone();
        assert_eq!(lock_check["status"], "ok", "{lock_check}");
        assert_eq!(lock_check["files"], files);
        assert_eq!(qc_companion_stop(c, null_mut()), QC_OK);
        assert!(!std::path::Path::new(files["gemini"].as_str().unwrap()).exists());
        assert!(!std::path::Path::new(files["qwen"].as_str().unwrap()).exists());
        qc_companion_free(c);
    }
}
