//! The participant's pull mode through the C ABI (`qc_participant_enable_events`
//! / `qc_participant_next_event`), as a host that must never be called on a
//! library thread (Neovim's LuaJIT) uses it: no callback is registered; the
//! host watches the fd and pulls messages, receipts and hold-buffer changes.

use std::ptr::null_mut;
use std::time::{Duration, Instant};

use qc_test_support::sessions::{cs, json_out, new_participant, take, TempDir};
use qwen_companion::ffi::*;
use serde_json::{json, Value};

fn readable(fd: i32, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 && pfd.revents & libc::POLLIN != 0 }
}

/// Pulls events until `want` matches one (returned) or 10 s pass; every
/// event pulled on the way is appended to `seen`.
fn pull_until(
    p: *mut qc_participant,
    fd: i32,
    seen: &mut Vec<Value>,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "no matching event; pulled {seen:#?}"
        );
        if !readable(fd, 100) {
            continue;
        }
        loop {
            let mut out = null_mut();
            assert_eq!(
                unsafe { qc_participant_next_event(p, &mut out, null_mut()) },
                QC_OK
            );
            if out.is_null() {
                break;
            }
            let ev: Value = serde_json::from_str(&take(out)).unwrap();
            seen.push(ev.clone());
            if want(&ev) {
                return ev;
            }
        }
    }
}

#[test]
fn pull_mode_queues_messages_receipts_and_held_changes() {
    let home = TempDir::new("ffip");
    let editor = new_participant(&home, json!({"inboundPolicy": "hold"}));
    let peer = new_participant(&home, json!({"inboundPolicy": "accept"}));
    let mut err = null_mut();
    let mut out = null_mut();
    unsafe {
        // Not in pull mode yet.
        assert_eq!(
            qc_participant_next_event(editor, &mut out, &mut err),
            QC_REFUSED
        );
        assert!(take(err).contains("pull mode is not enabled"));
        assert_eq!(
            qc_participant_next_event(editor, null_mut(), null_mut()),
            QC_NULL_PARAMETER
        );
    }
    let mut fd = -1;
    let mut fd2 = -2;
    unsafe {
        assert_eq!(
            qc_participant_enable_events(editor, &mut fd, null_mut()),
            QC_OK
        );
        assert_eq!(
            qc_participant_enable_events(editor, &mut fd2, null_mut()),
            QC_OK
        );
        assert_eq!(
            qc_participant_enable_events(null_mut(), &mut fd2, null_mut()),
            QC_INVALID_HANDLE
        );
    }
    assert!(fd >= 0);
    assert_eq!(fd, fd2, "calling it again gives the same fd");
    unsafe {
        // The library owns the message, receipt and held callbacks now.
        assert_eq!(
            qc_participant_set_message_callback(editor, None, null_mut(), None, &mut err),
            QC_REFUSED
        );
        assert!(take(err).contains("pull mode"));
        assert_eq!(
            qc_participant_set_receipt_callback(editor, None, null_mut(), None, null_mut()),
            QC_REFUSED
        );
        assert_eq!(
            qc_participant_set_held_callback(editor, None, null_mut(), None, null_mut()),
            QC_REFUSED
        );
    }
    assert!(!readable(fd, 0), "nothing waits yet");

    let opts = cs(r#"{"name":"nvim-proj"}"#);
    json_out(|o, e| unsafe { qc_participant_register(editor, opts.as_ptr(), o, e) });
    let opts = cs(r#"{"name":"qwen-peer"}"#);
    json_out(|o, e| unsafe { qc_participant_register(peer, opts.as_ptr(), o, e) });

    // The editor sends: its receipts are pulled.
    let send = cs(r#"{"to":"qwen-peer","content":"from the editor"}"#);
    let sent = json_out(|o, e| unsafe { qc_participant_send(editor, send.as_ptr(), o, e) });
    let mut seen = Vec::new();
    let r = pull_until(editor, fd, &mut seen, |e| {
        e["type"] == "receipt" && e["status"] == "delivered"
    });
    assert_eq!(r["msgId"], sent["msgId"]);
    assert_eq!(r["frame"]["type"], "control");

    // The peer sends to the editor (policy hold): a held event, then release
    // gives the message and an empty hold buffer.
    let send = cs(r#"{"to":"nvim-proj","content":"see src/main.rs:12 <b>"}"#);
    let sent = json_out(|o, e| unsafe { qc_participant_send(peer, send.as_ptr(), o, e) });
    let held = pull_until(editor, fd, &mut seen, |e| {
        e["type"] == "held" && !e["held"].as_array().unwrap().is_empty()
    });
    let h = &held["held"][0];
    assert_eq!(h["msgId"], sent["msgId"]);
    assert_eq!(h["content"], "see src/main.rs:12 <b>");
    let id = cs(h["msgId"].as_str().unwrap());
    assert_eq!(
        unsafe { qc_participant_release(editor, id.as_ptr(), null_mut()) },
        QC_OK
    );
    let m = pull_until(editor, fd, &mut seen, |e| e["type"] == "message");
    assert_eq!(m["msgId"], sent["msgId"]);
    assert_eq!(m["content"], "see src/main.rs:12 <b>");
    assert!(
        !m["text"].as_str().unwrap().contains('<'),
        "display text is neutralised"
    );
    assert_eq!(m["origin"], "peer");
    pull_until(editor, fd, &mut seen, |e| {
        e["type"] == "held" && e["held"] == json!([])
    });
    let wait = cs(sent["msgId"].as_str().unwrap());
    let st = json_out(|o, e| unsafe { qc_participant_wait(peer, wait.as_ptr(), 5000, 1, o, e) });
    assert_eq!(st["state"], "delivered");

    // Denied: the sender sees `denied`, the editor gets no message.
    let send = cs(r#"{"to":"nvim-proj","content":"deny me"}"#);
    let sent = json_out(|o, e| unsafe { qc_participant_send(peer, send.as_ptr(), o, e) });
    pull_until(editor, fd, &mut seen, |e| {
        e["type"] == "held" && e["held"][0]["msgId"] == sent["msgId"]
    });
    let id = cs(sent["msgId"].as_str().unwrap());
    assert_eq!(
        unsafe { qc_participant_deny(editor, id.as_ptr(), null_mut()) },
        QC_OK
    );
    let st = json_out(|o, e| unsafe { qc_participant_wait(peer, id.as_ptr(), 5000, 1, o, e) });
    assert_eq!(st["state"], "denied");
    pull_until(editor, fd, &mut seen, |e| {
        e["type"] == "held" && e["held"] == json!([])
    });
    let messages = seen.iter().filter(|e| e["type"] == "message").count();
    assert_eq!(
        messages, 1,
        "only the released message was delivered: {seen:#?}"
    );
    assert!(!readable(fd, 200), "drained: the fd is no longer readable");
    unsafe {
        assert_eq!(qc_participant_free(editor), QC_OK);
        assert_eq!(
            qc_participant_next_event(editor, &mut out, null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(
            qc_participant_enable_events(editor, &mut fd2, null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(qc_participant_free(peer), QC_OK);
    }
}
