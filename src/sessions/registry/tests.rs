use serde_json::{json, Value};

use super::store::is_temp_file_name;
use super::*;
use crate::sessions::names::peer_ref;
use crate::sessions::net::Verdict;
use crate::shared::testutil::TempDir;

fn me() -> Identity {
    Identity::current()
}

fn good(pid: u64, extra: &[(&str, Value)]) -> Value {
    let own = me();
    let mut v = json!({
        "schemaVersion": 1, "pid": pid, "procStart": own.proc_start, "pidNs": own.pid_ns,
        "sessionId": "s1", "cwd": "/w", "name": "w-ab", "startedAt": 1000,
        "qwenVersion": null, "kind": "external", "ipcPath": "/x.sock", "ipcToken": "t"
    });
    for (k, x) in extra {
        if x.is_null() {
            v.as_object_mut().unwrap().remove(*k);
        } else {
            v[*k] = x.clone();
        }
    }
    v
}

#[test]
fn parse_table() {
    let ok = |v: Value| matches!(parse_record(v.to_string().as_bytes()), ReadOutcome::Ok(_));
    assert!(ok(good(5, &[])));
    assert!(ok(good(5, &[("schemaVersion", json!(0.5))])));
    assert_eq!(
        parse_record(
            good(5, &[("schemaVersion", json!(2))])
                .to_string()
                .as_bytes()
        ),
        ReadOutcome::Newer
    );
    for (k, v) in [
        ("schemaVersion", json!("1")),
        ("schemaVersion", Value::Null),
        ("pid", json!(0)),
        ("pid", json!(-3)),
        ("pid", json!(1.5)),
        ("pid", json!("5")),
        ("sessionId", json!(5)),
        ("cwd", Value::Null),
        ("name", json!(null)),
        ("startedAt", json!("x")),
    ] {
        assert!(!ok(good(5, &[(k, v.clone())])), "{k}={v}");
    }
    assert_eq!(parse_record(b"[1]"), ReadOutcome::Unreadable);
    assert_eq!(parse_record(b"nope"), ReadOutcome::Unreadable);
    // Normalisation.
    let ReadOutcome::Ok(r) = parse_record(
        good(
            5,
            &[
                ("procStart", json!(7)),
                ("pidNs", json!("x")),
                ("qwenVersion", json!(1)),
                ("kind", json!("Bad")),
                ("ipcPath", json!("")),
                ("ipcToken", json!(3)),
            ],
        )
        .to_string()
        .as_bytes(),
    ) else {
        panic!()
    };
    assert_eq!(
        (
            r.proc_start,
            r.pid_ns,
            r.qwen_version,
            r.kind,
            r.ipc_path,
            r.ipc_token
        ),
        (None, None, None, None, None, None)
    );
    let ReadOutcome::Ok(r) = parse_record(good(5, &[("kind", json!("1x"))]).to_string().as_bytes())
    else {
        panic!()
    };
    assert_eq!(r.kind_or_tui(), "tui", "a kind must start with a letter");
}

#[test]
fn file_names() {
    let cases: &[(&str, Option<u64>)] = &[
        ("123.json", Some(123)),
        ("123-0a1b2c3d.json", Some(123)),
        ("0123.json", None),
        ("0.json", None),
        ("123-0A1B2C3D.json", None),
        ("123-0a1b2c3.json", None),
        ("123-0a1b2c3d4.json", None),
        ("x123.json", None),
        ("123.json.tmp", None),
        ("123.lock", None),
    ];
    for (n, want) in cases {
        assert_eq!(record_file_pid(n), *want, "{n}");
    }
    assert!(is_temp_file_name("123.json.0123456789ab.tmp"));
    assert!(is_temp_file_name("123-0a1b2c3d.json.0123456789ab.tmp"));
    assert!(!is_temp_file_name(".123.json.0123456789ab.tmp"));
    assert!(!is_temp_file_name("123.json.0123456789a.tmp"));
}

// Needs start tokens (Linux's /proc).
#[cfg(target_os = "linux")]
#[test]
fn liveness_and_sweep_table() {
    use crate::sessions::proc::{boot_id, own_pid, pid_namespace, proc_start_token};
    use std::time::Duration;
    let dir = TempDir::new("reg");
    let d = dir.path();
    let own = me();
    let pid = own_pid();
    let ps = own.proc_start.clone().unwrap();
    let boot = boot_id().unwrap();
    // A dead PID: a child we start and reap.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id() as u64;
    child.wait().unwrap();
    let dead_ps = format!("{boot}:1");
    let put = |name: &str, v: Value| std::fs::write(d.join(name), v.to_string()).unwrap();
    // (file, content, listed?, still there?)
    put(
        &format!("{pid}.json"),
        good(pid, &[("startedAt", json!(5))]),
    );
    put(
        &format!("{pid}-0000000a.json"),
        good(pid, &[("startedAt", json!(9))]),
    );
    put(&format!("{pid}-0000000b.json"), good(pid + 1, &[]));
    put(
        &format!("{dead}.json"),
        good(dead, &[("procStart", json!(dead_ps))]),
    );
    put(
        &format!("{pid}-0000000c.json"),
        good(pid, &[("procStart", json!(format!("{boot}:1")))]),
    );
    put(
        &format!("{pid}-0000000d.json"),
        good(pid, &[("procStart", json!("nocolon"))]),
    );
    put(
        &format!("{pid}-0000000e.json"),
        good(pid, &[("procStart", json!("other-boot:1"))]),
    );
    put(
        &format!("{pid}-0000000f.json"),
        good(pid, &[("pidNs", json!(1))]),
    );
    put(
        &format!("{pid}-00000010.json"),
        good(pid, &[("pidNs", Value::Null)]),
    );
    put(
        &format!("{pid}-00000011.json"),
        good(pid, &[("schemaVersion", json!(2))]),
    );
    put(
        &format!("{dead}-00000012.json"),
        good(dead, &[("schemaVersion", json!(2))]),
    );
    put(&format!("0{pid}.json"), good(pid, &[]));
    put(
        &format!("{pid}-00000013.json"),
        good(pid, &[("procStart", Value::Null)]),
    );
    std::fs::write(d.join("junk.txt"), b"x").unwrap();
    std::fs::write(d.join(format!("{pid}-00000014.json")), b"not json").unwrap();
    std::fs::create_dir(d.join(format!("{pid}-00000015.json"))).unwrap();
    let big = good(pid, &[("pad", json!("p".repeat(70_000)))]);
    put(&format!("{pid}-00000016.json"), big);
    // A symlinked record is still read (stat follows).
    put("target.txt", good(pid, &[("startedAt", json!(7))]));
    crate::sys::fs::symlink(d.join("target.txt"), d.join(format!("{pid}-00000017.json"))).unwrap();
    // Temp files: an old one is swept, a fresh one is not.
    let old_tmp = d.join(format!("{pid}.json.0123456789ab.tmp"));
    std::fs::write(&old_tmp, b"x").unwrap();
    let past = std::time::SystemTime::now() - Duration::from_secs(600);
    std::fs::File::options()
        .write(true)
        .open(&old_tmp)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let new_tmp = d.join(format!("{pid}.json.ba9876543210.tmp"));
    std::fs::write(&new_tmp, b"x").unwrap();
    let odd_tmp = d.join(format!(".{pid}.json.0123456789ab.tmp"));
    std::fs::write(&odd_tmp, b"x").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&odd_tmp)
        .unwrap()
        .set_modified(past)
        .unwrap();

    let live = list_live(d);
    let names: Vec<String> = live
        .iter()
        .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec![
            format!("{pid}-00000013.json"),
            format!("{pid}-0000000a.json"),
            format!("{pid}-00000017.json"),
            format!("{pid}.json"),
        ],
        "live records, newest first"
    );
    // Newest first.
    let started: Vec<f64> = live.iter().map(|l| l.record.started_at_f64()).collect();
    assert!(started.windows(2).all(|w| w[0] >= w[1]));
    let exists = |n: &str| d.join(n).exists() || d.join(n).symlink_metadata().is_ok();
    // Swept: dead PID, live PID with other ticks, malformed procStart.
    assert!(!exists(&format!("{dead}.json")));
    assert!(!exists(&format!("{pid}-0000000c.json")));
    assert!(!exists(&format!("{pid}-0000000d.json")));
    // Skipped but kept.
    for keep in [
        format!("{pid}-0000000b.json"),
        format!("{pid}-0000000e.json"),
        format!("{pid}-0000000f.json"),
        format!("{pid}-00000010.json"),
        format!("{pid}-00000011.json"),
        format!("{dead}-00000012.json"),
        format!("0{pid}.json"),
        format!("{pid}-00000014.json"),
        format!("{pid}-00000015.json"),
        format!("{pid}-00000016.json"),
        "junk.txt".to_string(),
    ] {
        assert!(exists(&keep), "{keep} kept");
    }
    assert!(!old_tmp.exists(), "old temp file swept");
    assert!(new_tmp.exists());
    assert!(odd_tmp.exists(), "other temp names are never swept");
    let _ = (proc_start_token(pid), pid_namespace(), ps);
}

// Needs start tokens (Linux's /proc).
#[cfg(target_os = "linux")]
#[test]
fn choose_names() {
    use std::path::Path;
    let dir = TempDir::new("choose");
    let d = dir.path();
    let own = me();
    let pid = own.pid;
    let bare = d.join(format!("{pid}.json"));
    assert_eq!(choose_record_path(d, &own, true).unwrap(), bare);
    let is_suffixed = |p: &Path| {
        let n = p.file_name().unwrap().to_str().unwrap();
        n.starts_with(&format!("{pid}-")) && record_file_pid(n) == Some(pid)
    };
    assert!(is_suffixed(&choose_record_path(d, &own, false).unwrap()));
    let boot = own.boot_id.clone().unwrap();
    // (content at <pid>.json, may it be replaced?)
    let cases: Vec<(Value, bool)> = vec![
        (
            good(pid, &[("procStart", json!(format!("{boot}:1")))]),
            true,
        ),
        (good(pid, &[]), false),
        (
            good(pid + 1, &[("procStart", json!(format!("{boot}:1")))]),
            false,
        ),
        (good(pid, &[("procStart", json!("otherboot:1"))]), false),
        (good(pid, &[("procStart", Value::Null)]), false),
        (
            good(
                pid,
                &[
                    ("pidNs", json!(1)),
                    ("procStart", json!(format!("{boot}:1"))),
                ],
            ),
            false,
        ),
        (
            good(
                pid,
                &[
                    ("schemaVersion", json!(2)),
                    ("procStart", json!(format!("{boot}:1"))),
                ],
            ),
            false,
        ),
    ];
    for (content, replace) in cases {
        std::fs::write(&bare, content.to_string()).unwrap();
        let got = choose_record_path(d, &own, true).unwrap();
        assert_eq!(got == bare, replace, "{content}");
        if !replace {
            assert!(is_suffixed(&got));
        }
    }
    std::fs::write(&bare, b"garbage").unwrap();
    assert!(
        is_suffixed(&choose_record_path(d, &own, true).unwrap()),
        "unparseable: not provably ours"
    );
    std::fs::remove_file(&bare).unwrap();
    crate::sys::fs::symlink(d.join("elsewhere"), &bare).unwrap();
    assert!(
        is_suffixed(&choose_record_path(d, &own, true).unwrap()),
        "a symlink is never replaced"
    );
}

#[test]
fn atomic_write_modes_and_symlinks() {
    let dir = TempDir::new("write");
    let sessions = dir.path().join("sessions");
    let target = sessions.join("1.json");
    write_file_atomic(&target, b"{}").unwrap();
    assert_eq!(
        crate::sys::fs::mode(
            std::path::Path::new(&sessions),
            &std::fs::metadata(&sessions).unwrap()
        ) & 0o777,
        0o700
    );
    assert_eq!(
        crate::sys::fs::mode(
            std::path::Path::new(&target),
            &std::fs::metadata(&target).unwrap()
        ) & 0o777,
        0o600
    );
    // Replacing a symlink replaces the link, never its target.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let link = sessions.join("2.json");
    crate::sys::fs::symlink(&victim, &link).unwrap();
    write_file_atomic(&link, b"{\"a\":1}").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A symlinked registry directory is refused.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let linked = dir.path().join("linked");
    crate::sys::fs::symlink(&real, &linked).unwrap();
    assert!(write_file_atomic(&linked.join("1.json"), b"{}").is_err());
    assert!(std::fs::read_dir(&real).unwrap().next().is_none());
    // Loose permissions on the directory are tightened.
    crate::sys::fs::set_mode(&sessions, 0o755).unwrap();
    write_file_atomic(&target, b"{}").unwrap();
    assert_eq!(
        crate::sys::fs::mode(
            std::path::Path::new(&sessions),
            &std::fs::metadata(&sessions).unwrap()
        ) & 0o777,
        0o700
    );
    // No temp file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn remove_only_ours() {
    let dir = TempDir::new("rm");
    let p = dir.path().join("5.json");
    std::fs::write(&p, good(5, &[("sessionId", json!("a"))]).to_string()).unwrap();
    assert!(!remove_if_ours(&p, 5, "b"));
    assert!(!remove_if_ours(&p, 6, "a"));
    assert!(p.exists());
    assert!(remove_if_ours(&p, 5, "a"));
    assert!(!p.exists());
}

fn peer(name: &str, sid: &str, started: u64) -> Peer {
    Peer {
        session_id: sid.into(),
        name: name.into(),
        ref_: peer_ref(sid),
        address: String::new(),
        cwd: "/w".into(),
        pid: 1,
        kind: "tui".into(),
        started_at: started.into(),
        ipc_path: format!("/{sid}.sock"),
        ipc_token: None,
    }
}

#[test]
fn resolve_table() {
    let peers = vec![
        peer("alpha", "s1", 3),
        peer("alpha", "s2", 2),
        peer("beta", "s3", 1),
        peer("x [abcd]", "s4", 0),
    ];
    let r1 = peer_ref("s1");
    let r3 = peer_ref("s3");
    let cases: Vec<(String, Resolution)> = vec![
        ("beta".into(), Resolution::One(2)),
        ("  beta ".into(), Resolution::One(2)),
        ("Beta".into(), Resolution::None),
        ("alpha".into(), Resolution::Ambiguous(vec![0, 1])),
        (format!("alpha [{r1}]"), Resolution::One(0)),
        (format!("alpha[{}]", r1.to_uppercase()), Resolution::One(0)),
        (format!("beta [{r1}]"), Resolution::None),
        (format!("[{r3}]"), Resolution::One(2)),
        (r3.clone(), Resolution::One(2)),
        (r3.to_uppercase(), Resolution::One(2)),
        (format!("[{}]", &r3[..4]), Resolution::None),
        ("x [abcd]".into(), Resolution::One(3)),
        ("".into(), Resolution::None),
        ("nobody".into(), Resolution::None),
    ];
    for (t, want) in cases {
        assert_eq!(resolve_target(&peers, &t), want, "{t:?}");
    }
    assert_eq!(advertisable_address(&peers, 2).as_deref(), Some("beta"));
    assert_eq!(
        advertisable_address(&peers, 0),
        Some(format!("alpha [{r1}]"))
    );
    let with = with_addresses(peers.clone());
    assert_eq!(with.len(), 4);
    assert_eq!(
        suggestions(&peers, "alp"),
        vec![
            format!("alpha [{r1}]"),
            format!("alpha [{}]", peer_ref("s2"))
        ]
    );
    assert_eq!(suggestions(&peers, "ET [12]"), vec!["beta".to_string()]);
    assert!(suggestions(&peers, "  ").is_empty());
}

#[test]
fn messageable_collapses_twins() {
    let dir = TempDir::new("msg");
    let mk = |sid: &str, name: &str, started: u64, ipc: Option<&str>| LiveRecord {
        path: dir.path().join(format!("{sid}.json")),
        record: match parse_record(
            good(
                1,
                &[
                    ("sessionId", json!(sid)),
                    ("name", json!(name)),
                    ("startedAt", json!(started)),
                    ("ipcPath", ipc.map(|s| json!(s)).unwrap_or(Value::Null)),
                ],
            )
            .to_string()
            .as_bytes(),
        ) {
            ReadOutcome::Ok(r) => r,
            _ => panic!(),
        },
    };
    let records = vec![
        mk("a", "n", 9, Some("/a.sock")),
        mk("a", "n", 5, Some("/a2.sock")),
        mk("b", " \u{200b} ", 4, Some("/b.sock")),
        mk("c", "c", 3, None),
        mk("d", "d", 2, Some("/dead.sock")),
        mk("e", "e", 1, Some("/unknown.sock")),
    ];
    let probe = |p: &str| match p {
        "/dead.sock" => Verdict::Dead,
        "/unknown.sock" => Verdict::Unknown,
        _ => Verdict::Alive,
    };
    let got = messageable(&records, probe, true);
    assert_eq!(
        got.iter().map(|p| p.ipc_path.as_str()).collect::<Vec<_>>(),
        vec!["/a.sock"]
    );
    let got = messageable(&records, probe, false);
    assert_eq!(
        got.iter().map(|p| p.ipc_path.as_str()).collect::<Vec<_>>(),
        vec!["/a.sock", "/a2.sock"]
    );
}

#[test]
fn a_session_without_an_inbox_is_found_for_the_refusal() {
    let dir = TempDir::new("inboxless");
    let mk = |sid: &str, name: &str, ipc: Option<&str>| LiveRecord {
        path: dir.path().join(format!("{sid}.json")),
        record: match parse_record(
            good(
                1,
                &[
                    ("sessionId", json!(sid)),
                    ("name", json!(name)),
                    ("ipcPath", ipc.map(|s| json!(s)).unwrap_or(Value::Null)),
                    ("procStart", Value::Null),
                    ("pidNs", Value::Null),
                ],
            )
            .to_string()
            .as_bytes(),
        ) {
            ReadOutcome::Ok(r) => r,
            other => panic!("{other:?}"),
        },
    };
    let records = vec![
        mk("w", "winbox", None),
        mk("s", "sockbox", Some("/s.sock")),
        mk("me", "self", None),
    ];
    let hit = inboxless_match(&records, "winbox", "me").unwrap();
    assert_eq!(hit.session_id, "w");
    assert_eq!(inboxless_match(&records, "sockbox", "me"), None);
    assert_eq!(inboxless_match(&records, "self", "me"), None);
    assert_eq!(inboxless_match(&records, "nobody", "me"), None);
    assert!(NO_INBOX_REASON.contains("automatic peer inbox paths are not supported on Windows"));
}
