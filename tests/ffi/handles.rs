//! One handle space: a companion handle is never a participant, a freed
//! handle is refused by every entry point, and no handle value is issued
//! twice. Companions are only created (never started): no socket is bound.

use std::collections::HashSet;
use std::ffi::{c_char, c_void, CString};
use std::ptr::null_mut;

use qc_test_support::mcp::TempDir;
use qwen_companion::ffi::*;
use serde_json::json;

type AnyHandle = *mut c_void;
/// An entry point under test: its name and a call with a given handle.
type Call = (&'static str, Box<dyn Fn(AnyHandle) -> qc_status>);

fn cs(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Every `qc_companion_*` entry point that takes a handle, called with valid
/// other arguments, so that only the handle can make it fail.
fn companion_calls() -> Vec<Call> {
    let path = cs("/tmp/qc-handles/a.txt");
    let path2 = cs("/tmp/qc-handles/b.txt");
    let roots = cs("[\"/tmp\"]");
    let ctx = cs("{\"workspaceState\":{\"openFiles\":[]}}");
    let p = path.as_ptr() as usize;
    let p2 = path2.as_ptr() as usize;
    let r = roots.as_ptr() as usize;
    let x = ctx.as_ptr() as usize;
    // The CStrings must outlive the closures: leak them (test process).
    std::mem::forget((path, path2, roots, ctx));
    let s = |v: usize| v as *const c_char;
    let e = null_mut::<*mut c_char>;
    macro_rules! call {
        ($name:literal, |$c:ident| $body:expr) => {
            (
                $name,
                Box::new(move |h: AnyHandle| {
                    let $c = h as *mut qc_companion;
                    unsafe { $body }
                }) as Box<dyn Fn(AnyHandle) -> qc_status>,
            )
        };
    }
    vec![
        call!("qc_companion_start", |c| qc_companion_start(c, e())),
        call!("qc_companion_stop", |c| qc_companion_stop(c, e())),
        call!("qc_companion_port", |c| {
            let mut port = 0u16;
            qc_companion_port(c, &mut port, e())
        }),
        call!("qc_companion_lock_file_path", |c| {
            let mut out = null_mut();
            qc_companion_lock_file_path(c, &mut out, e())
        }),
        call!("qc_companion_terminal_env_json", |c| {
            let mut out = null_mut();
            qc_companion_terminal_env_json(c, &mut out, e())
        }),
        call!("qc_companion_set_workspace_roots_json", |c| {
            qc_companion_set_workspace_roots_json(c, s(r), e())
        }),
        call!("qc_companion_file_opened", |c| qc_companion_file_opened(
            c,
            s(p),
            e()
        )),
        call!("qc_companion_file_focused", |c| qc_companion_file_focused(
            c,
            s(p),
            e()
        )),
        call!("qc_companion_file_closed", |c| qc_companion_file_closed(
            c,
            s(p),
            e()
        )),
        call!("qc_companion_file_renamed", |c| {
            qc_companion_file_renamed(c, s(p), s(p2), e())
        }),
        call!("qc_companion_set_cursor", |c| {
            qc_companion_set_cursor(c, s(p), 1, 1, e())
        }),
        call!("qc_companion_set_selection", |c| {
            qc_companion_set_selection(c, s(p), s(p), 3, e())
        }),
        call!("qc_companion_set_trusted", |c| qc_companion_set_trusted(
            c,
            1,
            e()
        )),
        call!("qc_companion_set_context_json", |c| {
            qc_companion_set_context_json(c, s(x), e())
        }),
        call!("qc_companion_context_json", |c| {
            let mut out = null_mut();
            qc_companion_context_json(c, &mut out, e())
        }),
        call!("qc_companion_diff_accept", |c| {
            qc_companion_diff_accept(c, s(p), s(p), 3, e())
        }),
        call!("qc_companion_diff_reject", |c| qc_companion_diff_reject(
            c,
            s(p),
            e()
        )),
        call!("qc_companion_diff_closed", |c| qc_companion_diff_closed(
            c,
            s(p),
            e()
        )),
        call!("qc_companion_set_log_callback", |c| {
            qc_companion_set_log_callback(c, None, null_mut(), None, QC_LOG_INFO, e())
        }),
        call!("qc_companion_set_open_diff_callback", |c| {
            qc_companion_set_open_diff_callback(c, None, null_mut(), None, e())
        }),
        call!("qc_companion_set_close_diff_callback", |c| {
            qc_companion_set_close_diff_callback(c, None, null_mut(), None, e())
        }),
        call!("qc_companion_enable_events", |c| {
            let mut fd = -1;
            qc_companion_enable_events(c, &mut fd, e())
        }),
        call!("qc_companion_next_event", |c| {
            let mut out = null_mut();
            qc_companion_next_event(c, &mut out, e())
        }),
        call!("qc_companion_respond", |c| {
            qc_companion_respond(c, 1, 1, s(p), 3, e())
        }),
        call!("qc_companion_free", |c| qc_companion_free(c)),
    ]
}

/// Every `qc_participant_*` entry point that takes a handle.
fn participant_calls() -> Vec<Call> {
    let sid = cs("s-1");
    let sid2 = cs("s-2");
    let send = cs("{\"to\":\"nobody\",\"content\":\"x\"}");
    let reg = cs("{\"name\":\"n\",\"cwd\":\"/tmp\"}");
    let inbound = cs("{\"inboundPolicy\":\"accept\"}");
    let (a, b, c0, d, f) = (
        sid.as_ptr() as usize,
        sid2.as_ptr() as usize,
        send.as_ptr() as usize,
        reg.as_ptr() as usize,
        inbound.as_ptr() as usize,
    );
    std::mem::forget((sid, sid2, send, reg, inbound));
    let s = |v: usize| v as *const c_char;
    let e = null_mut::<*mut c_char>;
    macro_rules! call {
        ($name:literal, |$p:ident, $out:ident| $body:expr) => {
            (
                $name,
                Box::new(move |h: AnyHandle| {
                    let $p = h as *mut qc_participant;
                    let mut out: *mut c_char = null_mut();
                    let $out = &mut out as *mut *mut c_char;
                    unsafe { $body }
                }) as Box<dyn Fn(AnyHandle) -> qc_status>,
            )
        };
    }
    vec![
        call!("qc_participant_close", |p, _o| qc_participant_close(p, e())),
        call!("qc_participant_register", |p, o| {
            qc_participant_register(p, s(d), o, e())
        }),
        call!("qc_participant_unregister", |p, _o| {
            qc_participant_unregister(p, s(a), e())
        }),
        call!("qc_participant_rotate_session_id", |p, o| {
            qc_participant_rotate_session_id(p, s(a), s(b), o, e())
        }),
        call!("qc_participant_sessions_json", |p, o| {
            qc_participant_sessions_json(p, o, e())
        }),
        call!("qc_participant_child_env_json", |p, o| {
            qc_participant_child_env_json(p, s(a), o, e())
        }),
        call!("qc_participant_list_json", |p, o| qc_participant_list_json(
            p,
            o,
            e()
        )),
        call!("qc_participant_peers_json", |p, o| {
            qc_participant_peers_json(p, s(a), o, e())
        }),
        call!("qc_participant_resolve_json", |p, o| {
            qc_participant_resolve_json(p, s(a), s(a), o, e())
        }),
        call!("qc_participant_send", |p, o| qc_participant_send(
            p,
            s(c0),
            o,
            e()
        )),
        call!("qc_participant_send_to_parent", |p, o| {
            qc_participant_send_to_parent(p, s(c0), o, e())
        }),
        call!("qc_participant_send_state_json", |p, o| {
            qc_participant_send_state_json(p, s(a), o, e())
        }),
        call!("qc_participant_wait", |p, o| {
            qc_participant_wait(p, s(a), 0, 1, o, e())
        }),
        call!("qc_participant_held_json", |p, o| qc_participant_held_json(
            p,
            o,
            e()
        )),
        call!("qc_participant_release", |p, _o| qc_participant_release(
            p,
            s(a),
            e()
        )),
        call!("qc_participant_deny", |p, _o| qc_participant_deny(
            p,
            s(a),
            e()
        )),
        call!("qc_participant_ack", |p, _o| qc_participant_ack(
            p,
            s(a),
            e()
        )),
        call!("qc_participant_inbound_settings_json", |p, o| {
            qc_participant_inbound_settings_json(p, s(a), o, e())
        }),
        call!("qc_participant_update_inbound", |p, _o| {
            qc_participant_update_inbound(p, s(a), s(f), e())
        }),
        call!("qc_participant_ipc_path", |p, o| qc_participant_ipc_path(
            p,
            o,
            e()
        )),
        call!("qc_participant_set_log_callback", |p, _o| {
            qc_participant_set_log_callback(p, None, null_mut(), None, QC_LOG_INFO, e())
        }),
        call!("qc_participant_set_message_callback", |p, _o| {
            qc_participant_set_message_callback(p, None, null_mut(), None, e())
        }),
        call!("qc_participant_set_receipt_callback", |p, _o| {
            qc_participant_set_receipt_callback(p, None, null_mut(), None, e())
        }),
        call!("qc_participant_set_held_callback", |p, _o| {
            qc_participant_set_held_callback(p, None, null_mut(), None, e())
        }),
        call!("qc_participant_enable_events", |p, _o| {
            let mut fd = -1;
            qc_participant_enable_events(p, &mut fd, e())
        }),
        call!("qc_participant_next_event", |p, o| {
            qc_participant_next_event(p, o, e())
        }),
        call!("qc_participant_free", |p, _o| qc_participant_free(p)),
    ]
}

fn new_companion(lock_dir: &std::path::Path) -> *mut qc_companion {
    let cfg = cs(&json!({"workspaceRoots": ["/tmp"], "lockDir": lock_dir}).to_string());
    let mut c = null_mut();
    assert_eq!(
        unsafe { qc_companion_new(cfg.as_ptr(), &mut c, null_mut()) },
        QC_OK
    );
    assert!(!c.is_null());
    c
}

fn new_participant(home: &std::path::Path) -> *mut qc_participant {
    let cfg = cs(&json!({
        "qwenHome": home,
        "runtimeDir": home.join("rt"),
        "sweepSockets": false,
        "cleanupAtExit": false,
    })
    .to_string());
    let mut p = null_mut();
    assert_eq!(
        unsafe { qc_participant_new(cfg.as_ptr(), &mut p, null_mut()) },
        QC_OK
    );
    assert!(!p.is_null());
    p
}

fn refused_by_all(what: &str, h: AnyHandle, calls: &[Call]) {
    for (name, f) in calls {
        assert_eq!(
            f(h),
            QC_INVALID_HANDLE,
            "{name} with {what} ({h:p}) must give QC_INVALID_HANDLE"
        );
    }
}

#[test]
fn handles_of_one_type_or_freed_are_refused_everywhere_and_never_reissued() {
    let home = TempDir::new("handles");
    let companions: Vec<*mut qc_companion> = (0..300)
        .map(|_| new_companion(&home.path().join("ide")))
        .collect();
    let participant = new_participant(home.path());
    let cc = companion_calls();
    let pc = participant_calls();
    assert_eq!(cc.len(), 25);
    assert_eq!(pc.len(), 27);

    let mut issued: HashSet<usize> = companions.iter().map(|c| *c as usize).collect();
    assert_eq!(issued.len(), 300, "300 distinct companion handles");
    assert!(
        issued.insert(participant as usize),
        "a participant handle is never a companion's"
    );

    // Every companion handle is refused by every participant entry point, and
    // the participant's handle by every companion entry point.
    for c in &companions {
        refused_by_all("a companion handle", *c as AnyHandle, &pc);
    }
    refused_by_all("a participant handle", participant as AnyHandle, &cc);
    // The objects are still alive and usable after the cross-type attempts.
    let mut out = null_mut();
    assert_eq!(
        unsafe { qc_companion_context_json(companions[0], &mut out, null_mut()) },
        QC_OK
    );
    unsafe { qc_string_free(out) };
    let mut out = null_mut();
    assert_eq!(
        unsafe { qc_participant_sessions_json(participant, &mut out, null_mut()) },
        QC_OK
    );
    unsafe { qc_string_free(out) };

    // Free everything; each freed handle is refused by every entry point of
    // both types (a second free included).
    for c in &companions {
        assert_eq!(unsafe { qc_companion_free(*c) }, QC_OK);
    }
    assert_eq!(unsafe { qc_participant_free(participant) }, QC_OK);
    for c in companions.iter().step_by(7) {
        refused_by_all("a freed companion handle", *c as AnyHandle, &cc);
        refused_by_all("a freed companion handle", *c as AnyHandle, &pc);
    }
    refused_by_all("a freed participant handle", participant as AnyHandle, &pc);
    refused_by_all("a freed participant handle", participant as AnyHandle, &cc);

    // New objects of both types never get a value issued before.
    for _ in 0..300 {
        let c = new_companion(&home.path().join("ide"));
        assert!(
            issued.insert(c as usize),
            "companion handle {c:p} issued twice"
        );
        let p = new_participant(home.path());
        assert!(
            issued.insert(p as usize),
            "participant handle {p:p} issued twice"
        );
        assert_eq!(unsafe { qc_companion_free(c) }, QC_OK);
        assert_eq!(unsafe { qc_participant_free(p) }, QC_OK);
    }
}
