//! The cross-session API used through the C ABI, as a C host would.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::mpsc;
use std::time::Duration;

use qc_test_support::sessions::{cs, json_out, new_participant, take, TempDir};
use qwen_companion::ffi::*;
use serde_json::{json, Value};

/// Records what the library passed; never asserts (a panic in an `extern
/// "C"` callback aborts the process instead of failing the test). A
/// document that is not UTF-8 JSON is passed on as a string saying so, which
/// fails the test thread's assertions on it.
unsafe extern "C" fn on_json(ud: *mut c_void, json: *const c_char) {
    let tx = unsafe { &*(ud as *const mpsc::Sender<Value>) };
    let text = unsafe { CStr::from_ptr(json) }.to_string_lossy();
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| Value::String(format!("callback got invalid JSON ({e}): {text}")));
    let _ = tx.send(v);
}

unsafe extern "C" fn free_sender(ud: *mut c_void) {
    drop(unsafe { Box::from_raw(ud as *mut mpsc::Sender<Value>) });
}

fn channel_ud() -> (*mut c_void, mpsc::Receiver<Value>) {
    let (tx, rx) = mpsc::channel();
    (Box::into_raw(Box::new(tx)) as *mut c_void, rx)
}

#[test]
fn send_receive_and_receipts_through_the_abi() {
    let home = TempDir::new("ffis");
    let a = new_participant(&home, json!({}));
    let b = new_participant(&home, json!({"inboundPolicy": "accept"}));
    let (mud, messages) = channel_ud();
    let (rud, receipts) = channel_ud();
    unsafe {
        assert_eq!(
            qc_participant_set_message_callback(
                b,
                Some(on_json),
                mud,
                Some(free_sender),
                null_mut()
            ),
            QC_OK
        );
        assert_eq!(
            qc_participant_set_receipt_callback(
                a,
                Some(on_json),
                rud,
                Some(free_sender),
                null_mut()
            ),
            QC_OK
        );
    }
    let opts = cs(r#"{"name":"alpha"}"#);
    let sa = json_out(|o, e| unsafe { qc_participant_register(a, opts.as_ptr(), o, e) });
    let opts = cs(r#"{"name":"bravo"}"#);
    let sb = json_out(|o, e| unsafe { qc_participant_register(b, opts.as_ptr(), o, e) });
    assert_eq!(sa["name"], "alpha");
    assert_eq!(sb["ref"].as_str().unwrap().len(), 6);
    assert!(std::path::Path::new(sb["recordPath"].as_str().unwrap()).exists());

    let list = json_out(|o, e| unsafe { qc_participant_list_json(a, o, e) });
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"alpha") && names.contains(&"bravo"),
        "{names:?}"
    );
    assert!(
        !list.to_string().contains("ipcToken"),
        "tokens are never listed"
    );

    let send = cs(r#"{"to":"bravo","content":"hello from the ABI"}"#);
    let sent = json_out(|o, e| unsafe { qc_participant_send(a, send.as_ptr(), o, e) });
    let msg_id = sent["msgId"].as_str().unwrap().to_string();
    let m = messages
        .recv_timeout(Duration::from_secs(10))
        .expect("delivered");
    assert_eq!(m["content"], "hello from the ABI");
    assert_eq!(m["origin"], "peer");
    // The frame as received, replyToken (alpha's record token) included.
    let record_a: Value =
        serde_json::from_slice(&std::fs::read(sa["recordPath"].as_str().unwrap()).unwrap())
            .unwrap();
    assert_eq!(m["frame"]["msgId"], json!(msg_id));
    assert_eq!(
        m["frame"]["message"],
        json!({"role": "user", "content": "hello from the ABI"})
    );
    assert_eq!(m["frame"]["replyToken"], record_a["ipcToken"]);
    assert_eq!(m["frame"]["from"], sa["ipcPath"]);
    assert_eq!(m["frame"]["toSessionId"], sb["sessionId"]);
    let r = receipts
        .recv_timeout(Duration::from_secs(10))
        .expect("receipt");
    assert_eq!(r["msgId"], json!(msg_id));
    assert_eq!(r["status"], "delivered");
    // The control frame as received.
    assert_eq!(r["frame"]["type"], "control");
    assert_eq!(r["frame"]["status"], "delivered");
    assert_eq!(r["frame"]["origMsgId"], json!(msg_id));
    assert_eq!(r["frame"]["from"], sb["ipcPath"]);
    let id = cs(&msg_id);
    let st = json_out(|o, e| unsafe { qc_participant_wait(a, id.as_ptr(), 2000, 1, o, e) });
    assert_eq!(st["state"], "delivered");

    // Child env for processes the host starts.
    let sid = cs(sb["sessionId"].as_str().unwrap());
    let env = json_out(|o, e| unsafe { qc_participant_child_env_json(b, sid.as_ptr(), o, e) });
    assert!(env["QWEN_CODE_MESSAGING_TOKEN"].as_str().unwrap().len() >= 32);
    assert_eq!(env["QWEN_CODE_MESSAGING_SOCKET"], sb["ipcPath"]);

    unsafe {
        assert_eq!(qc_participant_free(a), QC_OK);
        assert_eq!(qc_participant_free(b), QC_OK);
    }
    assert!(!std::path::Path::new(sb["recordPath"].as_str().unwrap()).exists());
    // Finalizers ran: the channels are closed.
    assert!(matches!(
        messages.recv_timeout(Duration::from_secs(2)),
        Err(mpsc::RecvTimeoutError::Disconnected)
    ));
}

#[test]
fn participant_misuse_matrix() {
    let home = TempDir::new("ffim");
    let p = new_participant(&home, json!({}));
    let mut err = null_mut();
    let mut out = null_mut();
    unsafe {
        let bad = cs("{");
        let mut q = null_mut();
        assert_eq!(
            qc_participant_new(bad.as_ptr(), &mut q, &mut err),
            QC_INVALID_JSON
        );
        assert!(q.is_null());
        take(err);
        let unknown = cs(r#"{"nope": 1}"#);
        assert_eq!(
            qc_participant_new(unknown.as_ptr(), &mut q, &mut err),
            QC_INVALID_JSON
        );
        take(err);
        assert_eq!(
            qc_participant_new(null(), null_mut(), &mut err),
            QC_NULL_PARAMETER
        );
        take(err);
        // Not registered yet.
        assert_eq!(
            qc_participant_ipc_path(p, &mut out, &mut err),
            QC_NOT_RUNNING
        );
        take(err);
        let opts = cs(r#"{"kind":"9bad"}"#);
        assert_ne!(
            qc_participant_register(p, opts.as_ptr(), &mut out, &mut err),
            QC_OK
        );
        take(err);
        let s = json_out(|o, e| qc_participant_register(p, null(), o, e));
        assert_eq!(s["kind"], "external");
        // Sends: bad JSON, unknown address.
        let bad = cs(r#"{"to": 3}"#);
        assert_eq!(
            qc_participant_send(p, bad.as_ptr(), &mut out, &mut err),
            QC_INVALID_JSON
        );
        take(err);
        let nobody = cs(r#"{"to":"nobody-here","content":"x"}"#);
        assert_eq!(
            qc_participant_send(p, nobody.as_ptr(), &mut out, &mut err),
            QC_NOT_FOUND
        );
        take(err);
        let invalid = [0xffu8, 0];
        assert_eq!(
            qc_participant_release(p, invalid.as_ptr() as *const c_char, &mut err),
            QC_INVALID_UTF8
        );
        take(err);
        let unknown = cs("not-held");
        assert_eq!(
            qc_participant_release(p, unknown.as_ptr(), &mut err),
            QC_NOT_FOUND
        );
        take(err);
        assert_eq!(
            qc_participant_send_state_json(p, unknown.as_ptr(), &mut out, &mut err),
            QC_NOT_FOUND
        );
        take(err);
        assert_eq!(
            qc_participant_set_log_callback(p, None, null_mut(), None, 0, &mut err),
            QC_INVALID_ARGUMENT
        );
        take(err);
        // Handles.
        assert_eq!(qc_participant_free(p), QC_OK);
        assert_eq!(qc_participant_free(p), QC_INVALID_HANDLE);
        assert_eq!(qc_participant_close(p, null_mut()), QC_INVALID_HANDLE);
        assert_eq!(qc_participant_free(null_mut()), QC_OK);
        // A companion handle is not a participant handle.
        let mut c = null_mut();
        assert_eq!(qc_companion_new(null(), &mut c, null_mut()), QC_OK);
        assert_eq!(
            qc_participant_close(c as *mut qc_participant, null_mut()),
            QC_INVALID_HANDLE
        );
        assert_eq!(qc_companion_free(c), QC_OK);
    }
}
