use super::*;
use crate::shared::testutil::TempDir;

#[test]
fn candidate_table() {
    let c = candidates(
        42,
        Some(Path::new("/run/user/1")),
        Some(Path::new("/var/tmp/")),
        "0123456789abcdef",
    );
    assert_eq!(
        c,
        vec![
            PathBuf::from("/run/user/1/qwen-socks/42.sock"),
            PathBuf::from("/var/tmp/qwen-socks-0123456789abcdef/42.sock"),
            PathBuf::from("/tmp/qwen-socks-0123456789abcdef/42.sock"),
        ]
    );
    let c = candidates(42, None, None, "0123456789abcdef");
    assert_eq!(
        c,
        vec![PathBuf::from("/tmp/qwen-socks-0123456789abcdef/42.sock")],
        "duplicates removed"
    );
    let c = candidates(
        42,
        Some(Path::new("")),
        Some(Path::new("/tmp")),
        "0123456789abcdef",
    );
    assert_eq!(c.len(), 1, "an empty XDG_RUNTIME_DIR is unset");
    // 103 bytes is allowed, 104 is not.
    let base = "/r".to_string();
    let fill = 103 - (base.len() + "/qwen-socks/42.sock".len());
    let rt = format!("{base}{}", "x".repeat(fill));
    let c = candidates(42, Some(Path::new(&rt)), None, "0123456789abcdef");
    assert_eq!(c[0].as_os_str().len(), 103);
    let rt = format!("{base}{}", "x".repeat(fill + 1));
    let c = candidates(42, Some(Path::new(&rt)), None, "0123456789abcdef");
    assert!(c.iter().all(|p| p.as_os_str().len() <= 103));
    assert_eq!(c.len(), 1);
}

#[test]
fn macos_per_user_tmpdir_fits() {
    // macOS: no XDG_RUNTIME_DIR, and os.tmpdir() is the long per-user
    // `$TMPDIR` (with its trailing slash), as in Qwen Code's candidates.
    let tmpdir = "/var/folders/7x/4kq1mnzs2zd0lbr0h3wz6b4r0000gn/T/";
    let c = candidates(99_998, None, Some(Path::new(tmpdir)), "0123456789abcdef");
    assert_eq!(
        c,
        vec![
            PathBuf::from(
                "/var/folders/7x/4kq1mnzs2zd0lbr0h3wz6b4r0000gn/T/qwen-socks-0123456789abcdef/99998.sock"
            ),
            PathBuf::from("/tmp/qwen-socks-0123456789abcdef/99998.sock"),
        ]
    );
    assert!(c[0].as_os_str().len() <= MAX_SOCKET_PATH_BYTES);
    // A sandboxed app's container tmp is too long: only /tmp is left.
    let container =
        "/Users/someone.with.a.long.name/Library/Containers/com.example.editor/Data/tmp/";
    let c = candidates(99_998, None, Some(Path::new(container)), "0123456789abcdef");
    assert_eq!(
        c,
        vec![PathBuf::from("/tmp/qwen-socks-0123456789abcdef/99998.sock")]
    );
}

#[test]
fn file_name_rules() {
    assert_eq!(socket_file_pid("12.sock"), Some(12));
    assert_eq!(socket_file_pid("12-0a0b0c0d.sock"), Some(12));
    assert_eq!(socket_file_pid("12-0A0B0C0D.sock"), None);
    assert_eq!(socket_file_pid("x.sock"), None);
    assert_eq!(socket_file_pid("0.sock"), None);
    assert!(is_nonce_dir_name("qwen-socks-0123456789abcdef"));
    assert!(!is_nonce_dir_name("qwen-socks-0123456789ABCDEF"));
    assert!(!is_nonce_dir_name("qwen-socks"));
}

#[test]
fn binding_modes_and_sibling() {
    let dir = TempDir::new("bind");
    let rt = dir.path().join("rt");
    let first = candidates(
        std::process::id() as u64,
        Some(&rt),
        None,
        "0123456789abcdef",
    );
    let a = bind_first(&first[..1], false).unwrap();
    assert_eq!(a.path, first[0]);
    assert_eq!(
        sys::fs::mode(
            a.path.parent().unwrap(),
            &fs::metadata(a.path.parent().unwrap()).unwrap()
        ) & 0o777,
        0o700
    );
    let m = fs::metadata(&a.path).unwrap();
    assert!(sys::fs::is_socket(&m.file_type()));
    assert_eq!(sys::fs::mode(&a.path, &m) & 0o777, 0o600);
    // The PID name is taken by a live listener: a sibling.
    let b = bind_first(&first[..1], false).unwrap();
    assert_ne!(b.path, a.path);
    let name = b.path.file_name().unwrap().to_str().unwrap();
    assert_eq!(socket_file_pid(name), Some(std::process::id() as u64));
    assert_eq!(
        name.len(),
        format!("{}-01234567.sock", std::process::id()).len()
    );
    // A stale socket file at the PID name is replaced.
    drop(a);
    let c = bind_first(&first[..1], false).unwrap();
    assert_eq!(c.path, first[0]);
    // A symlinked directory is refused.
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    sys::fs::symlink(&real, &link).unwrap();
    assert!(bind_at(&link.join("1.sock"), false).is_err());
    // A file where the directory should be is refused.
    let f = dir.path().join("file");
    fs::write(&f, b"x").unwrap();
    assert!(bind_at(&f.join("1.sock"), false).is_err());
    // Loose modes on our directory are tightened.
    sys::fs::set_mode(&rt.join(SOCKET_DIR_NAME), 0o755).unwrap();
    let d = bind_first(&first[..1], false).unwrap();
    assert_eq!(
        sys::fs::mode(
            d.path.parent().unwrap(),
            &fs::metadata(d.path.parent().unwrap()).unwrap()
        ) & 0o777,
        0o700
    );
}

#[test]
// Sweeps stale UNIX-domain socket files: Unix only (named pipes leave none).
#[cfg(unix)]
fn sweeping() {
    let dir = TempDir::new("sweep");
    let socks = dir.path().join(SOCKET_DIR_NAME);
    fs::create_dir_all(&socks).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    // A stale socket of a dead PID, a live listener of a dead PID name, another file.
    let stale = socks.join(format!("{dead}.sock"));
    drop(StdUnixListener::bind(&stale).unwrap());
    let answering = socks.join(format!("{dead}-0a0b0c0d.sock"));
    let _keep = StdUnixListener::bind(&answering).unwrap();
    let other = socks.join("notes.txt");
    fs::write(&other, b"x").unwrap();
    let own = socks.join(format!("{}.sock", std::process::id()));
    sweep_around(&own, &own);
    assert!(!stale.exists());
    assert!(answering.exists(), "still answers");
    assert!(other.exists());
    // Nonce directories.
    let gone = dir.path().join("qwen-socks-00000000000000aa");
    fs::create_dir(&gone).unwrap();
    drop(StdUnixListener::bind(gone.join(format!("{dead}.sock"))).unwrap());
    let mixed = dir.path().join("qwen-socks-00000000000000bb");
    fs::create_dir(&mixed).unwrap();
    fs::write(mixed.join("x.txt"), b"x").unwrap();
    let empty_young = dir.path().join("qwen-socks-00000000000000cc");
    fs::create_dir(&empty_young).unwrap();
    let mine = dir.path().join("qwen-socks-00000000000000dd");
    fs::create_dir(&mine).unwrap();
    let own = mine.join(format!("{}.sock", std::process::id()));
    sweep_around(&own, &own);
    assert!(!gone.exists());
    assert!(mixed.exists());
    assert!(empty_young.exists());
    assert!(mine.exists());
}

#[test]
fn named_pipe_inboxes_have_one_automatic_candidate() {
    let c = automatic_candidates(
        IpcKind::NamedPipes,
        4242,
        Some(Path::new("/run/user/1")),
        Some(Path::new("/tmp")),
        "0123456789abcdef",
    );
    assert_eq!(
        c,
        vec![PathBuf::from(
            "\\\\.\\pipe\\qwen-socks-0123456789abcdef-4242"
        )]
    );
    let name = c[0].to_str().unwrap();
    assert!(check_pipe_name(name).is_ok());
    let sibling = pipe_sibling(name).unwrap();
    assert!(sibling.starts_with(&format!("{name}-")) && sibling.len() == name.len() + 9);
    let sockets = automatic_candidates(IpcKind::UnixSockets, 7, None, None, "0123456789abcdef");
    assert_eq!(sockets, candidates(7, None, None, "0123456789abcdef"));
}

#[test]
fn pipe_names_are_checked() {
    assert!(check_pipe_name("//./pipe/x").is_ok());
    let e = check_pipe_name("/tmp/x.sock").unwrap_err();
    assert!(e.contains("non-local"), "{e}");
    let long = format!("\\\\.\\pipe\\{}", "a".repeat(MAX_PIPE_NAME_CHARS));
    let e = check_pipe_name(&long).unwrap_err();
    assert!(e.contains("longer than 256"), "{e}");
}
