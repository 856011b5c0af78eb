//! Helpers for the cross-session integration tests: a participant config
//! isolated in a temporary directory, a fake inbox that records what arrives,
//! a raw client that writes lines as any peer would, and the C ABI string
//! helpers.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
#[cfg(unix)]
use std::time::{Duration, Instant};
#[cfg(unix)]
use std::{
    io::{Read, Write},
    os::fd::AsRawFd,
    os::unix::net::{UnixListener, UnixStream},
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
};

use qwen_companion::sessions::{Config, InboundMessage, Participant, ReceiptEvent};
use serde_json::{json, Value};

/// A config confined to `home` (registry there, sockets under `home/rt`).
pub fn config(home: &Path, extra: Value) -> Config {
    let mut v = json!({
        "qwenHome": home,
        "runtimeDir": home.join("rt"),
        "sweepSockets": false,
    });
    for (k, x) in extra.as_object().expect("object") {
        v[k] = x.clone();
    }
    serde_json::from_value(v).expect("valid config")
}

pub fn participant(home: &Path, extra: Value) -> Participant {
    Participant::new(config(home, extra)).expect("participant")
}

/// Collects delivered messages.
pub fn collect_messages(p: &Participant) -> mpsc::Receiver<InboundMessage> {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    p.set_message_callback(Some(Arc::new(move |m: &InboundMessage| {
        let _ = tx.lock().unwrap().send(m.clone());
    })))
    .unwrap();
    rx
}

/// Collects receipt transitions.
pub fn collect_receipts(p: &Participant) -> mpsc::Receiver<ReceiptEvent> {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    p.set_receipt_callback(Some(Arc::new(move |e: &ReceiptEvent| {
        let _ = tx.lock().unwrap().send(e.clone());
    })))
    .unwrap();
    rx
}

/// A listening socket that records every connection's lines. A UNIX-domain
/// socket: the sessions tests that talk to inboxes directly are Unix tests.
#[cfg(unix)]
pub struct FakeInbox {
    pub path: PathBuf,
    rx: mpsc::Receiver<Vec<String>>,
    stop: Arc<AtomicBool>,
    /// The listening socket, shut down on drop to wake the blocked accept.
    listener: UnixListener,
}

#[cfg(unix)]
impl FakeInbox {
    pub fn new(dir: &Path, name: &str) -> FakeInbox {
        let path = dir.join(name);
        let listener = UnixListener::bind(&path).unwrap();
        let accepting = listener.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match accepting.accept() {
                    Ok((mut s, _)) => {
                        let tx = tx.clone();
                        std::thread::spawn(move || {
                            s.set_nonblocking(false).unwrap();
                            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                            let mut buf = Vec::new();
                            let _ = s.read_to_end(&mut buf);
                            let text = String::from_utf8_lossy(&buf).into_owned();
                            let lines: Vec<String> = text
                                .lines()
                                .filter(|l| !l.trim().is_empty())
                                .map(str::to_string)
                                .collect();
                            let _ = tx.send(lines);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // Shut down by drop.
                    Err(_) => break,
                }
            }
        });
        FakeInbox {
            path,
            rx,
            stop,
            listener,
        }
    }

    pub fn path_str(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// The next connection's lines.
    pub fn next(&self, timeout: Duration) -> Option<Vec<String>> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Receipts (control frames) arriving within `timeout`, until `n` of them.
    pub fn receipts(&self, n: usize, timeout: Duration) -> Vec<(Option<String>, Value)> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(lines) = self.next(left) else { break };
            let mut auth = None;
            for l in lines {
                let v: Value = serde_json::from_str(&l).unwrap();
                if v["type"] == "auth" {
                    auth = v["token"].as_str().map(str::to_string);
                } else if v["type"] == "control" {
                    out.push((auth.clone(), v));
                }
            }
        }
        out
    }
}

#[cfg(unix)]
impl Drop for FakeInbox {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // SAFETY: shutting down our own listening socket; the accept blocked
        // on it returns an error and the accept thread ends.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// Writes `payload` to `path`, half-closes, and reports whether the peer
/// closed its side within `timeout` (and how long that took).
#[cfg(unix)]
pub fn raw_send(path: &str, payload: &str, timeout: Duration) -> (bool, Duration) {
    let start = Instant::now();
    let mut s = UnixStream::connect(path).unwrap();
    s.write_all(payload.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 64];
    let closed = matches!(s.read(&mut buf), Ok(0));
    (closed, start.elapsed())
}

pub fn auth(token: &str) -> String {
    format!("{}\n", json!({"msgV": 1, "type": "auth", "token": token}))
}

pub fn user_frame(
    id: &str,
    from: Option<&str>,
    reply: Option<&str>,
    to: Option<&str>,
    content: &str,
    mode: Option<&str>,
) -> String {
    let mut v = json!({"msgV": 1, "msgId": id, "type": "user", "fromName": "raw peer",
                       "message": {"role": "user", "content": content}});
    if let Some(f) = from {
        v["from"] = json!(f);
    }
    if let Some(r) = reply {
        v["replyToken"] = json!(r);
    }
    if let Some(t) = to {
        v["toSessionId"] = json!(t);
    }
    if let Some(m) = mode {
        v["fromMode"] = json!(m);
    }
    format!("{v}\n")
}

pub fn receipt_frame(orig: &str, status: &str) -> String {
    format!(
        "{}\n",
        json!({"msgV": 1, "msgId": format!("r{}", orig.replace('-', "")), "type": "control", "action": "delivery_status",
               "status": status, "origMsgId": orig, "reason": "test"})
    )
}

/// Reads a record file as JSON.
pub fn read_json(path: &str) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

// ---------------------------------------------------------------- C ABI helpers

/// A C string for a borrowed argument.
pub fn cs(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).unwrap()
}

/// Takes ownership of a library string (non-NULL) and frees it. Not
/// `unsafe` so tests stay terse: callers pass only what a library `char **`
/// out parameter returned.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn take(s: *mut std::ffi::c_char) -> String {
    assert!(!s.is_null());
    let out = unsafe { std::ffi::CStr::from_ptr(s) }
        .to_str()
        .unwrap()
        .to_string();
    unsafe { qwen_companion::ffi::qc_string_free(s) };
    out
}

/// The library's message in `err` (owned, freed), or "" for NULL.
pub fn take_err(err: *mut std::ffi::c_char) -> String {
    if err.is_null() {
        String::new()
    } else {
        take(err)
    }
}

/// Asserts `rc` is `QC_OK`, showing the library's message in `err`.
pub fn assert_ok(rc: qwen_companion::ffi::qc_status, err: *mut std::ffi::c_char) {
    assert_eq!(rc, qwen_companion::ffi::QC_OK, "{}", take_err(err));
}

/// Calls `f(&out, &error)` and decodes its owned JSON out (asserting OK).
pub fn json_out(
    f: impl FnOnce(
        *mut *mut std::ffi::c_char,
        *mut *mut std::ffi::c_char,
    ) -> qwen_companion::ffi::qc_status,
) -> Value {
    let mut out = std::ptr::null_mut();
    let mut err = std::ptr::null_mut();
    let rc = f(&mut out, &mut err);
    assert_ok(rc, err);
    serde_json::from_str(&take(out)).unwrap()
}

/// A `qc_participant` isolated in `home` (no socket sweep, no exit
/// cleanup), with the `extra` config keys on top; the library's message
/// when it refuses.
pub fn new_participant(home: &TempDir, extra: Value) -> *mut qwen_companion::ffi::qc_participant {
    let mut cfg = json!({
        "qwenHome": home.path(),
        "runtimeDir": home.path().join("rt"),
        "sweepSockets": false,
        "cleanupAtExit": false,
    });
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    let cfg = cs(&cfg.to_string());
    let mut p = std::ptr::null_mut();
    let mut err = std::ptr::null_mut();
    let rc = unsafe { qwen_companion::ffi::qc_participant_new(cfg.as_ptr(), &mut p, &mut err) };
    assert_ok(rc, err);
    p
}

pub use crate::{wait_until, TempDir};
