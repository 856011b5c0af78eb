//! Cross-session participant, end to end on real UNIX sockets, each test in
//! its own QWEN_HOME (config override; the environment is never touched).

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use qc_test_support::sessions::*;
use qwen_companion::error::Status;
use qwen_companion::sessions::{
    DeliveryState, HeldInfo, InboundSettings, Origin, ParentSendOptions, Policy, RegisterOptions,
    ReviewClass, SendOptions,
};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(5);

fn reg(name: &str) -> RegisterOptions {
    RegisterOptions {
        name: Some(name.into()),
        cwd: Some(format!("/work/{name}")),
        ..Default::default()
    }
}

fn send(to: &str, content: &str, mode: Option<ReviewClass>) -> SendOptions {
    SendOptions {
        to: to.into(),
        content: content.into(),
        from_mode: mode,
        ..Default::default()
    }
}

fn token_of(record_path: &str) -> String {
    read_json(record_path)["ipcToken"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn record_and_inbox_are_published_and_removed() {
    let home = TempDir::new("pub");
    let p = participant(home.path(), json!({"version": "editor 1.2"}));
    let info = p
        .register(RegisterOptions {
            cwd: Some("/home/me/My Project".into()),
            ..Default::default()
        })
        .unwrap();
    let pid = std::process::id();
    // The bare name, in a 0700 directory, mode 0600, not a symlink.
    assert_eq!(
        info.record_path,
        home.path()
            .join("sessions")
            .join(format!("{pid}.json"))
            .to_string_lossy()
    );
    let meta = std::fs::symlink_metadata(&info.record_path).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(home.path().join("sessions"))
            .unwrap()
            .mode()
            & 0o777,
        0o700
    );
    // Fields, in Qwen's order and shape.
    let raw = std::fs::read_to_string(&info.record_path).unwrap();
    let keys: Vec<&str> = raw
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
        .collect();
    assert_eq!(
        keys,
        vec![
            "schemaVersion",
            "pid",
            "procStart",
            "pidNs",
            "sessionId",
            "cwd",
            "name",
            "startedAt",
            "qwenVersion",
            "kind",
            "ipcPath",
            "ipcToken"
        ]
    );
    let r: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(r["schemaVersion"], 1);
    assert_eq!(r["pid"], pid);
    assert_eq!(r["kind"], "external");
    assert_eq!(r["qwenVersion"], "editor 1.2");
    assert_eq!(r["cwd"], "/home/me/My Project");
    assert_eq!(r["sessionId"].as_str().unwrap(), info.session_id);
    assert_eq!(info.session_id.len(), 36);
    assert_eq!(&info.session_id[14..15], "4", "a v4 UUID");
    assert!(r["name"].as_str().unwrap().starts_with("My-Project-"));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let ticks = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(r["procStart"], format!("{boot}:{ticks}"));
    assert_eq!(
        r["pidNs"].as_u64().unwrap(),
        std::fs::metadata("/proc/self/ns/pid").unwrap().ino()
    );
    let token = r["ipcToken"].as_str().unwrap();
    assert!(
        token.len() == 64
            && token
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // The socket: 0600 in a 0700 directory, named after our PID.
    let sock = r["ipcPath"].as_str().unwrap();
    assert_eq!(sock, info.ipc_path);
    assert_eq!(
        sock,
        home.path()
            .join("rt/qwen-socks")
            .join(format!("{pid}.sock"))
            .to_string_lossy()
    );
    let sm = std::fs::metadata(sock).unwrap();
    assert!(sm.file_type().is_socket());
    assert_eq!(sm.mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(home.path().join("rt/qwen-socks"))
            .unwrap()
            .mode()
            & 0o777,
        0o700
    );
    // Listed (as `qwen sessions ps --json` would), reachable, newest first.
    let listed = p.list();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].reachable);
    let v = serde_json::to_value(&listed[0]).unwrap();
    assert!(v.get("ipcToken").is_none(), "the token is never listed");
    assert_eq!(v["sessionId"].as_str(), Some(info.session_id.as_str()));
    // Removed on unregister, socket included.
    p.unregister(&info.session_id).unwrap();
    assert!(!std::path::Path::new(&info.record_path).exists());
    assert!(!std::path::Path::new(sock).exists());
    assert!(p.ipc_path().is_none());
    assert_eq!(
        p.unregister(&info.session_id).unwrap_err().status,
        Status::NotFound
    );
}

#[test]
fn record_is_removed_only_while_it_is_ours() {
    let home = TempDir::new("ours");
    let p = participant(home.path(), json!({}));
    let info = p.register(reg("a")).unwrap();
    // Someone replaced our file with another session's record: left alone.
    let mut r = read_json(&info.record_path);
    r["sessionId"] = json!("someone-else");
    std::fs::write(&info.record_path, r.to_string()).unwrap();
    p.unregister(&info.session_id).unwrap();
    assert!(std::path::Path::new(&info.record_path).exists());
}

#[test]
fn a_taken_bare_name_gets_a_suffixed_record_and_a_sibling_socket() {
    let home = TempDir::new("twin");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({}));
    let ia = a.register(reg("a")).unwrap();
    let ib = b.register(reg("b")).unwrap();
    let pid = std::process::id();
    assert!(ia.record_path.ends_with(&format!("/{pid}.json")));
    let name_b = std::path::Path::new(&ib.record_path)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        name_b.starts_with(&format!("{pid}-"))
            && name_b.len() == format!("{pid}-12345678.json").len(),
        "{name_b}"
    );
    assert_ne!(ia.ipc_path, ib.ipc_path);
    assert!(
        ib.ipc_path.contains(&format!("/{pid}-")),
        "sibling socket {}",
        ib.ipc_path
    );
    assert_eq!(a.list().len(), 2);
    // A symlink at <pid>.json is never replaced or written through.
    drop(a);
    let victim = home.path().join("victim.json");
    std::fs::write(&victim, b"{}").unwrap();
    let bare = home.path().join("sessions").join(format!("{pid}.json"));
    std::os::unix::fs::symlink(&victim, &bare).unwrap();
    let c = participant(home.path(), json!({}));
    let ic = c.register(reg("c")).unwrap();
    assert_ne!(ic.record_path, bare.to_string_lossy());
    assert_eq!(std::fs::read(&victim).unwrap(), b"{}");
    // A newer-schema record under our PID is skipped and never deleted.
    let newer = home
        .path()
        .join("sessions")
        .join(format!("{pid}-0000abcd.json"));
    std::fs::write(&newer, json!({"schemaVersion": 2, "pid": pid}).to_string()).unwrap();
    assert!(c
        .list()
        .iter()
        .all(|r| r.schema_version.as_u64() == Some(1)));
    assert!(newer.exists());
}

#[test]
fn symlinked_registry_or_socket_directories_are_refused() {
    let home = TempDir::new("links");
    let real = home.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, home.path().join("sessions")).unwrap();
    let p = participant(home.path(), json!({}));
    let e = p.register(reg("a")).unwrap_err();
    assert_eq!(e.status, Status::Io, "{e}");
    assert!(std::fs::read_dir(&real).unwrap().next().is_none());
    assert!(
        p.ipc_path().is_none(),
        "the inbox is closed again when the record cannot be written"
    );

    let home = TempDir::new("links2");
    std::os::unix::fs::symlink(&real, home.path().join("rt")).unwrap();
    std::fs::create_dir(real.join("qwen-socks")).unwrap();
    std::fs::set_permissions(
        real.join("qwen-socks"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    // `rt` is a symlink but `rt/qwen-socks` is a real directory we own:
    // allowed (as Qwen checks only the socket's own directory), and tightened.
    let p = participant(home.path(), json!({}));
    p.register(reg("a")).unwrap();
    assert_eq!(
        std::fs::metadata(real.join("qwen-socks")).unwrap().mode() & 0o777,
        0o700
    );
    let home = TempDir::new("links3");
    std::fs::create_dir(home.path().join("rt")).unwrap();
    std::os::unix::fs::symlink(&real, home.path().join("rt/qwen-socks")).unwrap();
    let p = participant(home.path(), json!({"tmpDir": home.path().join("tmp")}));
    let info = p.register(reg("a")).unwrap();
    assert!(
        !info.ipc_path.contains("/rt/"),
        "a symlinked socket directory is skipped: {}",
        info.ipc_path
    );
    assert!(info.ipc_path.contains("/qwen-socks-"));
}

#[test]
fn peers_message_each_other_with_receipts() {
    let home = TempDir::new("msg");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"reviewClass": "bypass"}));
    let ia = a.register(reg("alice")).unwrap();
    let ib = b.register(reg("bob")).unwrap();
    let inbox_b = collect_messages(&b);
    let receipts_a = collect_receipts(&a);
    // Resolution by name, by [ref], by bare ref.
    assert_eq!(a.resolve("bob", None).unwrap().session_id, ib.session_id);
    assert_eq!(
        a.resolve(&format!("[{}]", ib.ref_), None)
            .unwrap()
            .session_id,
        ib.session_id
    );
    assert_eq!(
        a.resolve(&ib.ref_.to_uppercase(), None).unwrap().session_id,
        ib.session_id
    );
    assert_eq!(a.resolve("bob", None).unwrap().address, "bob");
    assert_eq!(
        a.resolve("alice", None).unwrap_err().status,
        Status::InvalidArgument,
        "ourselves: not a peer"
    );
    let e = a.send(send("alice", "hi me", None)).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    assert!(e.message.contains("itself"));
    let e = a.send(send("bo", "x", None)).unwrap_err();
    assert_eq!(e.status, Status::NotFound);
    assert!(e.message.contains("bob"), "suggestion: {e}");
    // Matching review class: delivered.
    let sent = a
        .send(send("bob", "build <done> & ok", Some(ReviewClass::Bypass)))
        .unwrap();
    assert!(sent.confirmed);
    assert_eq!(sent.to_session_id.as_deref(), Some(ib.session_id.as_str()));
    let m = inbox_b.recv_timeout(T).unwrap();
    assert_eq!(m.message.msg_id, sent.msg_id);
    assert_eq!(m.message.session_id, ib.session_id);
    assert_eq!(m.message.content, "build <done> & ok");
    assert_eq!(m.message.text, "build &lt;done> & ok");
    assert!(m.envelope.contains("build &lt;done> & ok"));
    assert_eq!(m.message.origin, Origin::Peer);
    assert_eq!(m.message.from.as_deref(), Some(ia.ipc_path.as_str()));
    assert_eq!(m.message.from_name.as_deref(), Some("alice"));
    assert_eq!(m.message.from_mode, Some(ReviewClass::Bypass));
    let ev = receipts_a.recv_timeout(T).unwrap();
    assert_eq!(
        (ev.previous, ev.status),
        (DeliveryState::Pending, DeliveryState::Delivered)
    );
    assert_eq!(ev.address, "bob");
    assert_eq!(
        a.wait(&sent.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
    // No fromMode: held (mode parity fails closed), then released.
    let held_tx = Arc::new(Mutex::new(Vec::<Vec<HeldInfo>>::new()));
    let h2 = held_tx.clone();
    b.set_held_callback(Some(Arc::new(move |h: &[HeldInfo]| {
        h2.lock().unwrap().push(h.to_vec())
    })))
    .unwrap();
    let s2 = a.send(send("bob", "second", None)).unwrap();
    assert_eq!(
        a.wait(&s2.msg_id, T, false).unwrap().state,
        DeliveryState::Held
    );
    let held = b.held();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].message.msg_id, s2.msg_id);
    assert_eq!(
        serde_json::to_value(held[0].cause).unwrap(),
        "no-mode-asserted"
    );
    assert!(held[0].expires_at.unwrap() > held[0].held_at);
    assert!(
        wait_until(T, || !held_tx.lock().unwrap().is_empty()),
        "held callback"
    );
    b.release(&s2.msg_id).unwrap();
    assert_eq!(inbox_b.recv_timeout(T).unwrap().message.msg_id, s2.msg_id);
    assert_eq!(
        a.wait(&s2.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
    assert_eq!(b.release(&s2.msg_id).unwrap_err().status, Status::NotFound);
    // Denied.
    let s3 = a
        .send(send("bob", "third", Some(ReviewClass::Prompting)))
        .unwrap();
    assert_eq!(
        a.wait(&s3.msg_id, T, false).unwrap().state,
        DeliveryState::Held
    );
    b.deny(&s3.msg_id).unwrap();
    let st = a.wait(&s3.msg_id, T, true).unwrap();
    assert_eq!(st.state, DeliveryState::Denied);
    assert_eq!(st.last.unwrap().previous, DeliveryState::Held);
    // Held, then the recipient leaves: expired.
    let s4 = a.send(send("bob", "fourth", None)).unwrap();
    assert_eq!(
        a.wait(&s4.msg_id, T, false).unwrap().state,
        DeliveryState::Held
    );
    b.unregister(&ib.session_id).unwrap();
    assert_eq!(
        a.wait(&s4.msg_id, T, true).unwrap().state,
        DeliveryState::Expired
    );
    // Gone from the registry now.
    assert_eq!(
        a.send(send("bob", "x", None)).unwrap_err().status,
        Status::NotFound
    );
    // Every transition reached the callback, in order per message.
    let mut seen: Vec<(String, DeliveryState)> = Vec::new();
    while let Ok(e) = receipts_a.recv_timeout(Duration::from_millis(300)) {
        seen.push((e.msg_id, e.status));
    }
    for (id, st) in [
        (&s2.msg_id, DeliveryState::Held),
        (&s2.msg_id, DeliveryState::Delivered),
        (&s3.msg_id, DeliveryState::Held),
        (&s3.msg_id, DeliveryState::Denied),
        (&s4.msg_id, DeliveryState::Expired),
    ] {
        assert!(seen.contains(&(id.clone(), st)), "{id} {st:?} in {seen:?}");
    }
}

#[test]
fn refuse_policy_and_reevaluation() {
    let home = TempDir::new("policy");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"inboundPolicy": "refuse"}));
    a.register(reg("alice")).unwrap();
    let ib = b.register(reg("bob")).unwrap();
    let s = a
        .send(send("bob", "knock", Some(ReviewClass::Prompting)))
        .unwrap();
    assert_eq!(
        a.wait(&s.msg_id, T, true).unwrap().state,
        DeliveryState::Refused
    );
    // Switch to hold: messages wait; to accept: released.
    let held = InboundSettings {
        policy: Some(Policy::Hold),
        review_class: Some(ReviewClass::Prompting),
        held_expiry: Default::default(),
    };
    b.update_inbound(&ib.session_id, held).unwrap();
    let rx = collect_messages(&b);
    let s2 = a
        .send(send("bob", "knock again", Some(ReviewClass::Prompting)))
        .unwrap();
    assert_eq!(
        a.wait(&s2.msg_id, T, false).unwrap().state,
        DeliveryState::Held
    );
    b.update_inbound(
        &ib.session_id,
        InboundSettings {
            policy: None,
            ..held
        },
    )
    .unwrap();
    assert_eq!(rx.recv_timeout(T).unwrap().message.msg_id, s2.msg_id);
    assert_eq!(
        a.wait(&s2.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
}

#[test]
fn auth_line_is_required_and_checked() {
    let home = TempDir::new("auth");
    let p = participant(home.path(), json!({"inboundPolicy": "accept"}));
    let info = p.register(reg("a")).unwrap();
    let rx = collect_messages(&p);
    let token = token_of(&info.record_path);
    let fake = FakeInbox::new(home.path(), "fake.sock");
    let f = fake.path_str();
    let frame = |id: &str| user_frame(id, Some(&f), Some("rt"), None, &format!("hello {id}"), None);
    // (payload, delivered?)
    let cases: Vec<(String, bool)> = vec![
        (frame("m1"), false),
        (format!("{}{}", auth("wrong"), frame("m2")), false),
        (
            format!("{}{}", auth(&token.to_uppercase()), frame("m3")),
            false,
        ),
        (format!("{}{}", auth(&token[..63]), frame("m4")), false),
        (
            format!(
                "{{\"msgV\":2,\"type\":\"auth\",\"token\":\"{token}\"}}\n{}",
                frame("m5")
            ),
            false,
        ),
        (format!("\n  \n{}{}", auth(&token), frame("m6")), true),
        (format!("{}{}", auth(&token), frame("m7")), true),
        (format!("{}not json\n{}", auth(&token), frame("m8")), true),
        (
            format!("{}{}{}", auth(&token), frame("m9"), frame("m10")),
            true,
        ),
    ];
    for (payload, delivered) in &cases {
        let (closed, took) = raw_send(&info.ipc_path, payload, T);
        assert!(
            closed && took < Duration::from_secs(2),
            "the inbox closes promptly"
        );
        let _ = delivered;
    }
    let mut got = Vec::new();
    while let Ok(m) = rx.recv_timeout(Duration::from_millis(500)) {
        got.push(m.message.msg_id);
    }
    got.sort();
    assert_eq!(got, vec!["m10", "m6", "m7", "m8", "m9"]);
    // Rejected connections got no receipt; accepted ones did, authenticated with replyToken.
    let receipts = fake.receipts(5, T);
    assert_eq!(receipts.len(), 5);
    for (auth_token, r) in &receipts {
        assert_eq!(auth_token.as_deref(), Some("rt"));
        assert_eq!(r["status"], "delivered");
        assert_eq!(r["from"].as_str(), Some(info.ipc_path.as_str()));
        assert!(r["msgId"].as_str().unwrap().len() == 36);
    }
    assert!(fake.next(Duration::from_millis(300)).is_none());
}

#[test]
fn child_tokens_prove_own_process_origin() {
    let home = TempDir::new("child");
    let p = participant(home.path(), json!({"reviewClass": null}));
    let info = p.register(reg("a")).unwrap();
    let rx = collect_messages(&p);
    let env = p.child_env(&info.session_id).unwrap();
    assert_eq!(env["QWEN_CODE_MESSAGING_SOCKET"], info.ipc_path);
    let child = &env["QWEN_CODE_MESSAGING_TOKEN"];
    assert_ne!(child, &token_of(&info.record_path));
    // No fromMode, review class unknown: still delivered, as own-process.
    let payload = format!(
        "{}{}",
        auth(child),
        user_frame("c1", Some("/nowhere.sock"), None, None, "from a hook", None)
    );
    raw_send(&info.ipc_path, &payload, T);
    let m = rx.recv_timeout(T).unwrap();
    assert_eq!(m.message.origin, Origin::OwnProcess);
    assert!(m.envelope.contains("origin=\"own-process\""));
    // The same frame from a plain peer is held (review class unknown).
    let payload = format!(
        "{}{}",
        auth(&token_of(&info.record_path)),
        user_frame("c2", None, None, None, "as peer", None)
    );
    raw_send(&info.ipc_path, &payload, T);
    assert!(wait_until(T, || p.held().len() == 1));
    assert_eq!(
        serde_json::to_value(p.held()[0].cause).unwrap(),
        "mode-unknown"
    );
    // A child token names its session: another toSessionId is misaddressed.
    let fake = FakeInbox::new(home.path(), "fake.sock");
    let payload = format!(
        "{}{}",
        auth(child),
        user_frame(
            "c3",
            Some(&fake.path_str()),
            Some("rt"),
            Some("other"),
            "x",
            None
        )
    );
    raw_send(&info.ipc_path, &payload, T);
    let r = fake.receipts(1, T);
    assert_eq!(r[0].1["status"], "misaddressed");
}

#[test]
fn controller_tokens_are_read_per_auth_line() {
    let home = TempDir::new("ctl");
    let p = participant(home.path(), json!({"reviewClass": null}));
    let info = p.register(reg("a")).unwrap();
    let rx = collect_messages(&p);
    let token = format!("qpc_{}", "7".repeat(64));
    let hash: String = {
        use sha2::Digest;
        sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let grants = home.path().join("peer-controllers.json");
    let payload = format!(
        "{}{}",
        auth(&token),
        user_frame("k1", None, None, None, "do it", None)
    );
    // No grant yet: dropped.
    raw_send(&info.ipc_path, &payload, T);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // Grant added while running: accepted, with the grant's label (not fromName).
    std::fs::write(
        &grants,
        json!({"schemaVersion": 1, "controllers": [{"id": "c_0a0b0c0d", "label": "Voice\nfront end", "tokenHash": hash, "createdAt": 1}]}).to_string(),
    )
    .unwrap();
    raw_send(&info.ipc_path, &payload.replace("k1", "k2"), T);
    let m = rx.recv_timeout(T).unwrap();
    assert_eq!(m.message.origin, Origin::Controller);
    assert_eq!(
        m.message.controller_label.as_deref(),
        Some("Voice front end")
    );
    assert!(m.envelope.contains("controller=\"Voice front end\""));
    // Revoked: dropped again.
    std::fs::write(
        &grants,
        json!({"schemaVersion": 1, "controllers": []}).to_string(),
    )
    .unwrap();
    raw_send(&info.ipc_path, &payload.replace("k1", "k3"), T);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // Deleted: no controllers.
    std::fs::write(
        &grants,
        json!({"schemaVersion": 1, "controllers": [{"id": "c_0a0b0c0d", "label": "back", "tokenHash": hash, "createdAt": 1}]}).to_string(),
    )
    .unwrap();
    raw_send(&info.ipc_path, &payload.replace("k1", "k4"), T);
    assert_eq!(
        rx.recv_timeout(T)
            .unwrap()
            .message
            .controller_label
            .as_deref(),
        Some("back")
    );
    std::fs::remove_file(&grants).unwrap();
    raw_send(&info.ipc_path, &payload.replace("k1", "k5"), T);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn controller_file_is_parsed_only_when_it_changes() {
    let home = TempDir::new("ctlflood");
    let p = participant(home.path(), json!({"reviewClass": null}));
    let info = p.register(reg("a")).unwrap();
    let token = format!("qpc_{}", "8".repeat(64));
    let hash: String = {
        use sha2::Digest;
        sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    std::fs::write(
        home.path().join("peer-controllers.json"),
        json!({"schemaVersion": 1, "controllers": [{"id": "c_0a0b0c0d", "label": "ci", "tokenHash": hash, "createdAt": 1}]}).to_string(),
    )
    .unwrap();
    let before = p.controller_file_parses();
    // 1000 connections, each with a controller auth line (and no frame).
    for _ in 0..1000 {
        let (closed, _) = raw_send(&info.ipc_path, &auth(&token), T);
        assert!(closed);
    }
    assert_eq!(
        p.controller_file_parses() - before,
        1,
        "1000 auth lines against an unchanged file parse it once"
    );
    // Replaced atomically (as `qwen sessions controllers remove` does): read again.
    let tmp = home.path().join("peer-controllers.json.tmp");
    std::fs::write(
        &tmp,
        json!({"schemaVersion": 1, "controllers": []}).to_string(),
    )
    .unwrap();
    std::fs::rename(&tmp, home.path().join("peer-controllers.json")).unwrap();
    raw_send(&info.ipc_path, &auth(&token), T);
    assert_eq!(p.controller_file_parses() - before, 2);
}

#[test]
fn receipts_count_only_on_our_own_token() {
    let home = TempDir::new("rcpt");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"inboundPolicy": "hold"}));
    let ia = a.register(reg("alice")).unwrap();
    b.register(reg("bob")).unwrap();
    let s = a.send(send("bob", "hello", None)).unwrap();
    assert_eq!(
        a.wait(&s.msg_id, T, false).unwrap().state,
        DeliveryState::Held
    );
    // A forged `delivered` on a child-token connection is ignored.
    let child = a.child_env(&ia.session_id).unwrap()["QWEN_CODE_MESSAGING_TOKEN"].clone();
    raw_send(
        &ia.ipc_path,
        &format!("{}{}", auth(&child), receipt_frame(&s.msg_id, "delivered")),
        T,
    );
    // An unknown status and an id we never sent are ignored too.
    let own = token_of(&ia.record_path);
    raw_send(
        &ia.ipc_path,
        &format!("{}{}", auth(&own), receipt_frame(&s.msg_id, "read")),
        T,
    );
    raw_send(
        &ia.ipc_path,
        &format!("{}{}", auth(&own), receipt_frame("never-sent", "delivered")),
        T,
    );
    // The behaviour under test: neither receipt changes the state (nothing
    // happens within 200 ms).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(a.send_state(&s.msg_id).unwrap().state, DeliveryState::Held);
    // On our token, with a canonicalised id: applied. Refused cannot follow held.
    raw_send(
        &ia.ipc_path,
        &format!(
            "{}{}",
            auth(&own),
            receipt_frame(&s.msg_id.to_uppercase(), "refused")
        ),
        T,
    );
    raw_send(
        &ia.ipc_path,
        &format!(
            "{}{}",
            auth(&own),
            receipt_frame(&s.msg_id.to_uppercase(), "expired")
        ),
        T,
    );
    assert_eq!(
        a.wait(&s.msg_id, T, true).unwrap().state,
        DeliveryState::Expired
    );
    assert_eq!(
        a.wait("unknown-id", T, true).unwrap_err().status,
        Status::NotFound
    );
}

#[test]
fn misaddressed_frames_and_rotation() {
    let home = TempDir::new("rot");
    let p = participant(home.path(), json!({"inboundPolicy": "accept"}));
    let info = p.register(reg("a")).unwrap();
    let rx = collect_messages(&p);
    let token = token_of(&info.record_path);
    let fake = FakeInbox::new(home.path(), "fake.sock");
    let f = fake.path_str();
    let send_to = |id: &str, to: Option<&str>| {
        raw_send(
            &info.ipc_path,
            &format!(
                "{}{}",
                auth(&token),
                user_frame(id, Some(&f), Some("rt"), to, id, None)
            ),
            T,
        );
    };
    send_to("r1", Some("not-me"));
    assert_eq!(fake.receipts(1, T)[0].1["status"], "misaddressed");
    send_to("r2", None);
    send_to("r3", Some(&info.session_id));
    assert_eq!(
        rx.recv_timeout(T).unwrap().message.msg_id,
        "r2",
        "single session: absent toSessionId is ours"
    );
    assert_eq!(rx.recv_timeout(T).unwrap().message.msg_id, "r3");
    let _ = fake.receipts(2, T);
    // Rotation rewrites the same file; the old id is now misaddressed.
    let rotated = p
        .rotate_session_id(&info.session_id, Some("new-session"))
        .unwrap();
    assert_eq!(rotated.record_path, info.record_path);
    assert_eq!(read_json(&info.record_path)["sessionId"], "new-session");
    assert_eq!(
        read_json(&info.record_path)["startedAt"].as_u64(),
        Some(info.started_at)
    );
    send_to("r4", Some(&info.session_id));
    assert_eq!(fake.receipts(1, T)[0].1["status"], "misaddressed");
    send_to("r5", Some("new-session"));
    assert_eq!(rx.recv_timeout(T).unwrap().message.msg_id, "r5");
    // A record deleted under us is re-asserted after a misaddressed frame.
    std::fs::remove_file(&info.record_path).unwrap();
    send_to("r6", Some("stale"));
    assert!(wait_until(T, || std::path::Path::new(&info.record_path).exists()));
    p.unregister("new-session").unwrap();
    assert!(!std::path::Path::new(&info.record_path).exists());
}

#[test]
fn several_sessions_behind_one_inbox() {
    let home = TempDir::new("multi");
    let p = participant(
        home.path(),
        json!({"multiSession": true, "inboundPolicy": "accept"}),
    );
    let s1 = p.register(reg("one")).unwrap();
    let s2 = p.register(reg("two")).unwrap();
    let pid = std::process::id();
    for s in [&s1, &s2] {
        let n = std::path::Path::new(&s.record_path)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            n.starts_with(&format!("{pid}-"))
                && n.ends_with(".json")
                && n.len() == format!("{pid}-12345678.json").len()
        );
    }
    assert_eq!(s1.ipc_path, s2.ipc_path);
    assert_eq!(
        read_json(&s1.record_path)["ipcToken"],
        read_json(&s2.record_path)["ipcToken"]
    );
    let rx = collect_messages(&p);
    let token = token_of(&s1.record_path);
    let fake = FakeInbox::new(home.path(), "fake.sock");
    let f = fake.path_str();
    let send_to = |id: &str, to: Option<&str>| {
        raw_send(
            &s1.ipc_path,
            &format!(
                "{}{}",
                auth(&token),
                user_frame(id, Some(&f), Some("rt"), to, id, None)
            ),
            T,
        );
    };
    send_to("x1", None);
    assert_eq!(
        fake.receipts(1, T)[0].1["status"],
        "misaddressed",
        "a missing toSessionId names no session"
    );
    send_to("x2", Some(&s2.session_id.to_uppercase()));
    let m = rx.recv_timeout(T).unwrap();
    assert_eq!(
        (m.message.msg_id.as_str(), m.message.session_id.as_str()),
        ("x2", s2.session_id.as_str())
    );
    send_to("x3", Some(&s1.session_id));
    assert_eq!(
        rx.recv_timeout(T).unwrap().message.session_id,
        s1.session_id
    );
    // Sending needs to know which session speaks.
    let q = participant(home.path(), json!({}));
    q.register(reg("three")).unwrap();
    assert_eq!(
        p.send(send("three", "hi", None)).unwrap_err().status,
        Status::InvalidArgument
    );
    let mut o = send("three", "hi", None);
    o.from_session = Some(s2.session_id.clone());
    assert!(p.send(o).is_ok());
    // One session leaves: its record goes, the inbox stays for the other.
    p.unregister(&s1.session_id).unwrap();
    assert!(!std::path::Path::new(&s1.record_path).exists());
    assert!(std::path::Path::new(&s2.ipc_path).exists());
    assert_eq!(p.sessions().len(), 1);
}

#[test]
fn ambiguous_names_are_errors_listing_the_candidates() {
    let home = TempDir::new("amb");
    let a = participant(home.path(), json!({}));
    a.register(reg("sender")).unwrap();
    let b = participant(home.path(), json!({}));
    let c = participant(home.path(), json!({}));
    let ib = b.register(reg("twin")).unwrap();
    let ic = c.register(reg("twin")).unwrap();
    let e = a.send(send("twin", "x", None)).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains(&format!("twin [{}]", ib.ref_))
            && e.message.contains(&format!("twin [{}]", ic.ref_)),
        "{e}"
    );
    let r = a.resolve(&format!("twin [{}]", ic.ref_), None).unwrap();
    assert_eq!(r.session_id, ic.session_id);
    assert_eq!(r.address, format!("twin [{}]", ic.ref_));
    let peers = a.peers(None).unwrap();
    assert_eq!(peers.len(), 2);
}

#[test]
fn sends_are_paced_like_the_receiver() {
    let home = TempDir::new("pace");
    let a = participant(home.path(), json!({}));
    let b = participant(
        home.path(),
        json!({"inboundPolicy": "accept", "manualAck": true}),
    );
    a.register(reg("alice")).unwrap();
    b.register(reg("bob")).unwrap();
    let first = a.send(send("bob", "same words", None)).unwrap();
    let e = a.send(send("bob", "same words", None)).unwrap_err();
    assert_eq!(e.status, Status::Refused);
    assert!(e.message.contains("30 seconds"), "{e}");
    for i in 1..30 {
        a.send(send("bob", &format!("message {i}"), None)).unwrap();
    }
    let e = a.send(send("bob", "one too many", None)).unwrap_err();
    assert_eq!(e.status, Status::Refused);
    assert!(e.message.contains("30 were sent"), "{e}");
    assert_eq!(
        a.wait(&first.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
    // An empty message is not sent at all.
    assert_eq!(
        a.send(send("bob", "", None)).unwrap_err().status,
        Status::InvalidArgument
    );
}

#[test]
fn rate_limits_drop_with_receipts() {
    let home = TempDir::new("rate");
    let p = participant(
        home.path(),
        json!({"inboundPolicy": "accept", "manualAck": true}),
    );
    let info = p.register(reg("a")).unwrap();
    let token = token_of(&info.record_path);
    let fake = FakeInbox::new(home.path(), "fake.sock");
    let f = fake.path_str();
    let mut payload = auth(&token);
    for i in 0..32 {
        payload.push_str(&user_frame(
            &format!("b{i}"),
            Some(&f),
            Some("rt"),
            None,
            &format!("body {i}"),
            None,
        ));
    }
    // Several frames on one connection are all processed.
    raw_send(&info.ipc_path, &payload, T);
    let r = fake.receipts(31, T);
    let delivered = r.iter().filter(|(_, v)| v["status"] == "delivered").count();
    let dropped: Vec<&Value> = r
        .iter()
        .filter(|(_, v)| v["status"] == "dropped")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(delivered, 30, "a sender's burst is 30");
    assert_eq!(
        dropped.len(),
        1,
        "the first drop is answered at once; the rest are batched"
    );
    assert_eq!(dropped[0]["dropReason"], "rate-limited");
    assert_eq!(dropped[0]["origMsgId"], "b30");
    // A repeat of this sender's last admitted body within 30 s: duplicate.
    // (2.1 s lets the wall-clock rate limit refill: time passing is the
    // behaviour; the limiter has no injectable clock.)
    std::thread::sleep(Duration::from_millis(2100));
    let dup = format!(
        "{}{}",
        auth(&token),
        user_frame("d1", Some(&f), Some("rt"), None, "body 29", None)
    );
    raw_send(&info.ipc_path, &dup, T);
    // The drops after the first were batched: one receipt, 5 s after the first.
    let r = fake.receipts(2, Duration::from_secs(8));
    let dup = r
        .iter()
        .find(|(_, v)| v["dropReason"] == "duplicate")
        .expect("duplicate receipt");
    assert_eq!(dup.1["origMsgId"], "d1");
    let batch = r
        .iter()
        .find(|(_, v)| v["dropReason"] == "rate-limited")
        .expect("coalesced receipt");
    assert_eq!(batch.1["origMsgId"], "b31");
    assert!(
        batch.1.get("droppedMsgIds").is_none(),
        "nothing else was dropped"
    );
}

#[test]
fn a_busy_host_never_makes_senders_wait() {
    let home = TempDir::new("busy");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"inboundPolicy": "accept"}));
    a.register(reg("alice")).unwrap();
    b.register(reg("bob")).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    b.set_message_callback(Some(Arc::new(
        move |m: &qwen_companion::sessions::InboundMessage| {
            // A deliberately slow host (the behaviour under test).
            std::thread::sleep(Duration::from_millis(1500));
            let _ = tx.lock().unwrap().send(m.message.msg_id.clone());
        },
    )))
    .unwrap();
    let start = Instant::now();
    let mut ids = Vec::new();
    for i in 0..3 {
        let s = a.send(send("bob", &format!("m{i}"), None)).unwrap();
        assert!(s.confirmed);
        ids.push(s.msg_id);
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "sends took {:?}",
        start.elapsed()
    );
    for id in &ids {
        assert_eq!(
            a.wait(id, Duration::from_secs(1), false).unwrap().state,
            DeliveryState::Delivered
        );
    }
    let got: Vec<String> = (0..3)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    assert_eq!(got, ids, "delivered in order");
}

#[test]
fn unconsumed_deliveries_expire_when_the_session_leaves() {
    let home = TempDir::new("ack");
    let a = participant(home.path(), json!({}));
    let b = participant(
        home.path(),
        json!({"inboundPolicy": "accept", "manualAck": true}),
    );
    a.register(reg("alice")).unwrap();
    let ib = b.register(reg("bob")).unwrap();
    let rx = collect_messages(&b);
    let s1 = a.send(send("bob", "one", None)).unwrap();
    let s2 = a.send(send("bob", "two", None)).unwrap();
    assert_eq!(rx.recv_timeout(T).unwrap().message.msg_id, s1.msg_id);
    assert_eq!(rx.recv_timeout(T).unwrap().message.msg_id, s2.msg_id);
    b.ack(&s1.msg_id).unwrap();
    assert_eq!(b.ack(&s1.msg_id).unwrap_err().status, Status::NotFound);
    b.unregister(&ib.session_id).unwrap();
    assert_eq!(
        a.wait(&s2.msg_id, T, true).unwrap().state,
        DeliveryState::Expired
    );
    // The behaviour under test: s1's state does not change afterwards.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        a.send_state(&s1.msg_id).unwrap().state,
        DeliveryState::Delivered
    );
}

#[test]
fn messages_wait_for_a_message_callback() {
    let home = TempDir::new("nocb");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"inboundPolicy": "accept"}));
    a.register(reg("alice")).unwrap();
    b.register(reg("bob")).unwrap();
    let s = a.send(send("bob", "early", None)).unwrap();
    assert_eq!(
        a.wait(&s.msg_id, T, false).unwrap().state,
        DeliveryState::Delivered
    );
    let rx = collect_messages(&b);
    assert_eq!(rx.recv_timeout(T).unwrap().message.content, "early");
}

#[test]
fn line_limit_deadline_and_connection_cap() {
    let home = TempDir::new("limits");
    let p = participant(home.path(), json!({"lineDeadlineMs": 300}));
    let info = p.register(reg("a")).unwrap();
    use std::io::{Read, Write};
    // An idle connection is closed after the line deadline.
    let mut s = std::os::unix::net::UnixStream::connect(&info.ipc_path).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let start = Instant::now();
    assert_eq!(s.read(&mut [0u8; 8]).unwrap(), 0);
    assert!(
        start.elapsed() >= Duration::from_millis(250) && start.elapsed() < Duration::from_secs(3)
    );
    // Over 1 MiB (UTF-16 units) without a newline: closed.
    let mut s = std::os::unix::net::UnixStream::connect(&info.ipc_path).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut written = 0;
    while written <= 1024 * 1024 + 64 * 1024 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        written += chunk.len();
    }
    assert!(matches!(s.read(&mut [0u8; 8]), Ok(0) | Err(_)));
    // 64 connections at once; the 65th is closed at once.
    let p = participant(home.path(), json!({"lineDeadlineMs": 5000}));
    let info = p.register(reg("b")).unwrap();
    let held: Vec<_> = (0..64)
        .map(|_| std::os::unix::net::UnixStream::connect(&info.ipc_path).unwrap())
        .collect();
    // Kept: the participant has no count of accepted connections to wait
    // for; 200 ms lets its accept loop take all 64.
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = std::os::unix::net::UnixStream::connect(&info.ipc_path).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let start = Instant::now();
    assert_eq!(extra.read(&mut [0u8; 8]).unwrap(), 0);
    assert!(start.elapsed() < Duration::from_secs(1));
    drop(held);
    // Kept: nothing observable tells that the participant saw the 64
    // connections close; 200 ms lets it.
    std::thread::sleep(Duration::from_millis(200));
    let (closed, _) = raw_send(&info.ipc_path, &auth("x"), T);
    assert!(closed);
}

#[test]
fn send_to_the_parent_session_uses_the_child_token() {
    let home = TempDir::new("parent");
    let fake = FakeInbox::new(home.path(), "parent.sock");
    let p = participant(
        home.path(),
        json!({"parentSocket": fake.path_str(), "parentToken": "child-token-of-parent"}),
    );
    // Without a registered session: no `from`, no receipts.
    let r = p
        .send_to_parent(ParentSendOptions {
            content: "done".into(),
            ..Default::default()
        })
        .unwrap();
    assert!(r.confirmed);
    let lines = fake.next(T).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&lines[0]).unwrap()["token"],
        "child-token-of-parent"
    );
    let frame: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(frame["message"]["content"], "done");
    assert!(
        frame.get("from").is_none()
            && frame.get("fromMode").is_none()
            && frame.get("toSessionId").is_none()
    );
    // With one: `from` and `replyToken` are ours, so receipts come back.
    let info = p.register(reg("child")).unwrap();
    let r = p
        .send_to_parent(ParentSendOptions {
            content: "again".into(),
            from_mode: Some(ReviewClass::Bypass),
            ..Default::default()
        })
        .unwrap();
    let lines = fake.next(T).unwrap();
    let frame: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(frame["from"].as_str(), Some(info.ipc_path.as_str()));
    assert_eq!(
        frame["replyToken"].as_str(),
        Some(token_of(&info.record_path).as_str())
    );
    assert_eq!(frame["fromMode"], "bypass");
    assert_eq!(frame["fromName"], "child");
    raw_send(
        &info.ipc_path,
        &format!(
            "{}{}",
            auth(&token_of(&info.record_path)),
            receipt_frame(&r.msg_id, "delivered")
        ),
        T,
    );
    assert_eq!(
        p.wait(&r.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
    // A chosen session of the parent's inbox (one process hosting several).
    p.send_to_parent(ParentSendOptions {
        content: "pinned".into(),
        to_session_id: Some("sess-2".into()),
        ..Default::default()
    })
    .unwrap();
    let lines = fake.next(T).unwrap();
    let frame: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(frame["toSessionId"], "sess-2");
    assert_eq!(
        p.send_to_parent(ParentSendOptions {
            content: "x".into(),
            to_session_id: Some(" ".into()),
            ..Default::default()
        })
        .unwrap_err()
        .status,
        Status::InvalidArgument
    );
}

#[test]
fn controller_tokens_go_on_the_auth_line_as_given() {
    let home = TempDir::new("ctlsend");
    let b = participant(home.path(), json!({"reviewClass": null}));
    let ib = b.register(reg("target")).unwrap();
    let rx = collect_messages(&b);
    // Not a token Qwen would look up: sent all the same, dropped by the
    // recipient without a receipt.
    let odd = participant(home.path(), json!({"controllerToken": "not a qpc token"}));
    odd.register(reg("odd")).unwrap();
    let s = odd
        .send(SendOptions {
            controller: true,
            ..send("target", "from odd", None)
        })
        .unwrap();
    assert!(s.confirmed, "the recipient closed the connection");
    assert_eq!(
        odd.wait(&s.msg_id, Duration::from_millis(500), false)
            .unwrap()
            .state,
        DeliveryState::Pending
    );
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    // A granted one: controller origin, delivered although the recipient's
    // mode is unknown.
    let token = format!("qpc_{}", "5".repeat(64));
    let hash: String = {
        use sha2::Digest;
        sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    std::fs::write(
        home.path().join("peer-controllers.json"),
        json!({"schemaVersion": 1, "controllers": [{"id": "c_01020304", "label": "ci", "tokenHash": hash, "createdAt": 1}]}).to_string(),
    )
    .unwrap();
    let ctl = participant(home.path(), json!({"controllerToken": token}));
    ctl.register(reg("ctl")).unwrap();
    let s = ctl
        .send(SendOptions {
            controller: true,
            ..send("target", "from ctl", None)
        })
        .unwrap();
    let m = rx.recv_timeout(T).unwrap();
    assert_eq!(m.message.origin, Origin::Controller);
    assert_eq!(m.message.controller_label.as_deref(), Some("ci"));
    assert_eq!(m.message.frame["toSessionId"], ib.session_id.as_str());
    assert_eq!(
        ctl.wait(&s.msg_id, T, true).unwrap().state,
        DeliveryState::Delivered
    );
}

#[test]
fn config_is_validated() {
    let home = TempDir::new("cfg");
    for bad in [
        json!({"kind": "Bad"}),
        json!({"kind": "1abc"}),
        json!({"kind": "abcdefghijklmnopq"}),
        json!({"controllerToken": ""}),
        json!({"socketPath": "relative.sock"}),
        json!({"parentSocket": "/x.sock"}),
        json!({"lineDeadlineMs": 1}),
    ] {
        let c = config(home.path(), bad.clone());
        assert!(
            qwen_companion::sessions::Participant::new(c).is_err(),
            "{bad}"
        );
    }
    let p = participant(home.path(), json!({"kind": "voice-ui"}));
    let i = p.register(reg("a")).unwrap();
    assert_eq!(read_json(&i.record_path)["kind"], "voice-ui");
    assert_eq!(
        p.register(reg("b")).unwrap_err().status,
        Status::AlreadyRunning
    );
    let e = p.register(RegisterOptions {
        kind: Some("X".into()),
        ..Default::default()
    });
    assert!(e.is_err());
    // A controller send needs a configured token.
    assert_eq!(
        p.send(SendOptions {
            controller: true,
            ..send("x", "y", None)
        })
        .unwrap_err()
        .status,
        Status::InvalidArgument
    );
}

#[test]
fn explicit_socket_path_and_freeing_from_a_callback() {
    let home = TempDir::new("explicit");
    let path = home.path().join("my.sock");
    let p = Arc::new(Mutex::new(Some(participant(
        home.path(),
        json!({"socketPath": path, "inboundPolicy": "accept"}),
    ))));
    let info = p
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .register(reg("a"))
        .unwrap();
    assert_eq!(info.ipc_path, path.to_string_lossy());
    let sender = participant(home.path(), json!({}));
    sender.register(reg("s")).unwrap();
    // The host frees the participant from inside its own message callback.
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let slot = p.clone();
    p.lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .set_message_callback(Some(Arc::new(
            move |_m: &qwen_companion::sessions::InboundMessage| {
                let taken = slot.lock().unwrap().take();
                drop(taken);
                let _ = tx.lock().unwrap().send(());
            },
        )))
        .unwrap();
    sender.send(send("a", "bye", None)).unwrap();
    rx.recv_timeout(T).unwrap();
    assert!(wait_until(T, || !std::path::Path::new(&info.record_path).exists()));
    assert!(!path.exists());
}

#[test]
fn hosts_get_frames_as_received() {
    let home = TempDir::new("raw");
    let a = participant(home.path(), json!({}));
    let b = participant(home.path(), json!({"inboundPolicy": "hold"}));
    let ia = a.register(reg("alice")).unwrap();
    let ib = b.register(reg("bob")).unwrap();
    let inbox_b = collect_messages(&b);
    let receipts_a = collect_receipts(&a);
    let held_b = Arc::new(Mutex::new(Vec::<Vec<HeldInfo>>::new()));
    let h2 = held_b.clone();
    b.set_held_callback(Some(Arc::new(move |h: &[HeldInfo]| {
        h2.lock().unwrap().push(h.to_vec())
    })))
    .unwrap();
    // A raw peer frame with unknown fields, odd values and a multi-line name:
    // the host gets it whole, replyToken included, nothing flattened.
    let own_a = token_of(&ia.record_path);
    let frame = json!({
        "msgV": 0.5, "msgId": "Raw-Frame-1", "type": "user",
        "from": ia.ipc_path, "replyToken": own_a, "fromName": "two\nlines",
        "fromMode": "BYPASS", "priority": "soon", "toSessionId": ib.session_id,
        "x-extra": {"nested": [1, null, "é"]},
        "message": {"role": "user", "content": "hi <there>", "attachments": []}
    });
    raw_send(
        &ib.ipc_path,
        &format!("{}{frame}\n", auth(&token_of(&ib.record_path))),
        T,
    );
    assert!(wait_until(T, || !b.held().is_empty()));
    let held = b.held();
    assert_eq!(held[0].message.frame, frame);
    assert_eq!(held[0].message.from_name.as_deref(), Some("two lines"));
    assert!(wait_until(T, || held_b
        .lock()
        .unwrap()
        .last()
        .is_some_and(|h| h.len() == 1 && h[0].message.frame == frame)));
    // As JSON (what the FFI hands over): `frame` is the object itself.
    let j = serde_json::to_value(&held[0]).unwrap();
    assert_eq!(j["frame"]["replyToken"], own_a);
    assert_eq!(j["frame"]["x-extra"]["nested"][2], "é");
    b.release("Raw-Frame-1").unwrap();
    let m = inbox_b.recv_timeout(T).unwrap();
    assert_eq!(m.message.frame, frame);
    assert_eq!(m.message.content, "hi <there>");
    let j = serde_json::to_value(&m).unwrap();
    assert_eq!(j["frame"]["msgV"], 0.5);
    // alice never tracked Raw-Frame-1 (a raw send): its receipts move nothing.
    let ev = receipts_a.recv_timeout(Duration::from_millis(500));
    assert!(ev.is_err(), "{ev:?}");
    // A message alice sends through the library: each receipt's frame is the
    // control frame on the wire.
    let s = a.send(send("bob", "tracked", None)).unwrap();
    let ev = receipts_a.recv_timeout(T).unwrap();
    assert_eq!(ev.status, DeliveryState::Held);
    assert_eq!(ev.frame["type"], "control");
    assert_eq!(ev.frame["action"], "delivery_status");
    assert_eq!(ev.frame["status"], "held");
    assert_eq!(ev.frame["origMsgId"], s.msg_id.as_str());
    assert_eq!(ev.frame["from"], ib.ipc_path.as_str());
    assert!(ev.frame["msgId"].as_str().is_some_and(|id| id != s.msg_id));
    // A forged receipt with extra fields, on alice's own token: kept whole,
    // also in the message's state.
    let forged = json!({"msgV": 1, "msgId": "rcpt-9", "type": "control",
        "action": "delivery_status", "status": "denied", "origMsgId": s.msg_id.to_uppercase(),
        "reason": "line\nbreak", "extra": [true]});
    raw_send(&ia.ipc_path, &format!("{}{forged}\n", auth(&own_a)), T);
    let ev = receipts_a.recv_timeout(T).unwrap();
    assert_eq!(ev.status, DeliveryState::Denied);
    assert_eq!(ev.frame, forged);
    assert_eq!(ev.reason.as_deref(), Some("line break"));
    let st = a.send_state(&s.msg_id).unwrap();
    assert_eq!(st.last.unwrap().frame, forged);
}

#[test]
fn a_session_without_an_inbox_is_refused_without_a_dial() {
    let home = TempDir::new("noinbox");
    let p = participant(home.path(), json!({}));
    let info = p.register(reg("a")).unwrap();
    // A live session with no `ipcPath`, as Qwen Code writes its record on
    // Windows (this process stands in for it, so the record is live).
    let mut r = read_json(&info.record_path);
    r["sessionId"] = json!("00000000-0000-4000-8000-000000000001");
    r["name"] = json!("winbox");
    let o = r.as_object_mut().unwrap();
    o.remove("ipcPath");
    o.remove("ipcToken");
    let other = home
        .path()
        .join("sessions")
        .join(format!("{}-0badf00d.json", std::process::id()));
    std::fs::write(&other, r.to_string()).unwrap();
    let e = p.send(send("winbox", "hi", None)).unwrap_err();
    assert_eq!(e.status, Status::Refused, "{}", e.message);
    assert!(
        e.message.starts_with("winbox [") && e.message.contains("unsupported_platform"),
        "{}",
        e.message
    );
    let e = p.send(send("nobody", "hi", None)).unwrap_err();
    assert_eq!(e.status, Status::NotFound, "{}", e.message);
    p.unregister(&info.session_id).unwrap();
}
