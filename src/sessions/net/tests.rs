use super::*;
use crate::shared::testutil::TempDir;

#[test]
fn local_paths() {
    assert!(is_local_ipc_path("/run/user/1/qwen-socks/1.sock"));
    for bad in ["", "rel/x.sock", "//host/share", "/a\0b"] {
        assert!(!is_local_ipc_path(bad), "{bad:?}");
    }
}

#[test]
fn probe_verdicts() {
    let dir = TempDir::new("probe");
    let live = dir.path().join("live.sock");
    let _l = crate::sys::ipc::bind(&live).unwrap();
    assert_eq!(probe(live.to_str().unwrap()), Verdict::Alive);
    let dead = dir.path().join("dead.sock");
    drop(crate::sys::ipc::bind(&dead).unwrap());
    assert_eq!(
        probe(dead.to_str().unwrap()),
        Verdict::Dead,
        "stale socket file"
    );
    assert_eq!(
        probe(dir.path().join("none.sock").to_str().unwrap()),
        Verdict::Dead
    );
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        probe(file.to_str().unwrap()),
        Verdict::Dead,
        "a regular file refuses"
    );
    assert_eq!(probe("relative.sock"), Verdict::Unknown);
    let long = format!("/{}", "a".repeat(200));
    assert_eq!(probe(&long), Verdict::Unknown);
}

#[test]
fn local_ipc_paths_by_transport() {
    let u = IpcKind::UnixSockets;
    assert!(is_local_ipc_path_in("/run/user/1/qwen-socks/1.sock", u));
    assert!(!is_local_ipc_path_in("//server/x.sock", u));
    assert!(!is_local_ipc_path_in("\\\\.\\pipe\\qwen", u));
    assert!(!is_local_ipc_path_in("", u));
    let p = IpcKind::NamedPipes;
    assert!(is_local_ipc_path_in("\\\\.\\pipe\\qwen-socks-ab-12", p));
    assert!(is_local_ipc_path_in("//./PIPE/x", p));
    assert!(is_local_ipc_path_in("\\\\?\\pipe\\x", p));
    assert!(!is_local_ipc_path_in("\\\\server\\pipe\\x", p));
    assert!(!is_local_ipc_path_in("\\\\.\\pipex", p));
    assert!(!is_local_ipc_path_in("/tmp/qwen-socks/1.sock", p));
    assert!(!is_local_ipc_path_in("C:\\x.sock", p));
    assert!(!is_local_ipc_path_in("\\\\.\\pipe\\a\0b", p));
}
