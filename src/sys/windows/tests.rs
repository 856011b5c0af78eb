//! Unit tests of what the Windows layer adds (run under Windows or Wine).

use super::frame::{self, Decoder};
use super::{env, fs, io as sysio, process};

#[test]
fn frames_round_trip_over_any_split() {
    let mut wire = frame::encode(b"{\"a\":1}\n");
    wire.extend(frame::encode(b"{\"b\":2}\n"));
    for split in 1..wire.len() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for part in [&wire[..split], &wire[split..]] {
            let mut buf = part.to_vec();
            let (n, h) = d.decode_in_place(&mut buf).unwrap();
            assert_eq!(h, 0);
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"{\"a\":1}\n{\"b\":2}\n", "split at {split}");
    }
}

#[test]
fn frame_header_matches_libuv_layout() {
    let h = frame::header(0x0102_0304);
    assert_eq!(h, [1, 0, 0, 0, 0, 0, 0, 0, 4, 3, 2, 1, 0, 0, 0, 0]);
    assert_eq!(frame::header(0), [0; 16]);
}

#[test]
fn bad_frames_are_refused_and_socket_transfers_counted() {
    let mut bad = frame::header(1).to_vec();
    bad[0] = 0x08;
    bad.push(b'x');
    assert!(Decoder::default().decode_in_place(&mut bad).is_err());
    let mut reserved = frame::header(1).to_vec();
    reserved[12] = 1;
    reserved.push(b'x');
    assert!(Decoder::default().decode_in_place(&mut reserved).is_err());
    // A socket transfer: header with HAS_DATA|HAS_SOCKET_XFER, 632 bytes, data.
    let mut xfer = frame::header(2).to_vec();
    xfer[0] = 0x03;
    xfer.extend(std::iter::repeat_n(0xAA, 632));
    xfer.extend_from_slice(b"ok");
    let (n, h) = Decoder::default().decode_in_place(&mut xfer).unwrap();
    assert_eq!((&xfer[..n], h), (&b"ok"[..], 1));
}

#[test]
fn command_line_quotes_as_the_crt_parses() {
    let line = process::command_line(
        "C:\\Program Files\\node.exe".as_ref(),
        &[
            "a b".into(),
            "q\"x".into(),
            "tail\\".into(),
            "".into(),
            "sp ace\\".into(),
        ],
    )
    .unwrap();
    let s = String::from_utf16(&line[..line.len() - 1]).unwrap();
    assert_eq!(
        s,
        r#""C:\Program Files\node.exe" "a b" "q\"x" tail\ "" "sp ace\\""#
    );
}

#[test]
fn env_block_is_sorted_deduplicated_and_double_nul_terminated() {
    let block = process::env_block(&[
        ("b".into(), "2".into()),
        ("A".into(), "1".into()),
        ("B".into(), "3".into()),
    ])
    .unwrap();
    let s = String::from_utf16(&block).unwrap();
    assert_eq!(s, "A=1\0B=3\0\0");
    assert!(process::env_block(&[("a=b".into(), "1".into())]).is_err());
}

#[test]
fn crt_fd_block_layout() {
    let h = 0x1234usize as windows_sys::Win32::Foundation::HANDLE;
    let b = process::crt_fd_block(&[(0x01, h), (0x09, h)]);
    assert_eq!(&b[..4], &2i32.to_le_bytes());
    assert_eq!(&b[4..6], &[0x01, 0x09]);
    assert_eq!(b.len(), 4 + 2 + 2 * std::mem::size_of::<usize>());
}

#[test]
fn errno_names_map_windows_codes() {
    use windows_sys::Win32::Foundation as f;
    let name = |c: u32| sysio::errno_name(&std::io::Error::from_raw_os_error(c as i32));
    assert_eq!(name(f::ERROR_FILE_NOT_FOUND), Some("ENOENT"));
    assert_eq!(name(f::ERROR_PIPE_BUSY), Some("EBUSY"));
    assert_eq!(name(f::ERROR_NO_DATA), Some("EPIPE"));
    assert_eq!(name(10061), Some("ECONNREFUSED"));
}

#[test]
fn path_bytes_use_forward_slashes() {
    let p = std::path::Path::new(r"C:\Users\me\a b.txt");
    assert_eq!(&*env::path_bytes(p), b"C:/Users/me/a b.txt");
}

#[test]
fn private_dir_and_file_read_back_as_0700_and_0600() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("private");
    fs::dir_builder(0o700).create(&dir).unwrap();
    let meta = std::fs::metadata(&dir).unwrap();
    assert_eq!(fs::mode(&dir, &meta) & 0o777, 0o700);
    assert_eq!(fs::owner(&dir, &meta), fs::current_owner());
    let file = dir.join("f.exe");
    let f = std::fs::File::create(&file).unwrap();
    fs::set_file_mode(&f, 0o600).unwrap();
    let m = std::fs::metadata(&file).unwrap();
    assert_eq!(fs::mode(&file, &m) & 0o077, 0);
    assert_ne!(fs::mode(&file, &m) & 0o111, 0);
    fs::set_mode(&dir, 0o755).unwrap();
    let meta = std::fs::metadata(&dir).unwrap();
    assert_ne!(fs::mode(&dir, &meta) & 0o077, 0);
}

#[test]
fn replace_overwrites_and_liveness_of_self() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    std::fs::write(&a, "new").unwrap();
    std::fs::write(&b, "old").unwrap();
    fs::replace(&a, &b).unwrap();
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "new");
    let me = process::current_pid();
    assert!(process::exists(me) && process::is_alive(me));
    assert!(process::start_token(me).is_some_and(|t| t.starts_with("win:")));
}

#[test]
fn node_install_dirs_follow_the_installers_and_skip_unset_variables() {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};
    let vars = |name: &str| -> Option<OsString> {
        match name {
            "ProgramFiles" => Some(r"C:\Program Files".into()),
            "ProgramFiles(x86)" => Some(OsString::new()),
            "NVM_SYMLINK" => Some(r"C:\nvm4w\nodejs".into()),
            "LOCALAPPDATA" => Some(r"C:\Users\u\AppData\Local".into()),
            "APPDATA" => Some(r"C:\Users\u\AppData\Roaming".into()),
            _ => None,
        }
    };
    let dirs = super::env::node_install_dirs(Some(Path::new(r"C:\Users\u")), &vars);
    let want: Vec<PathBuf> = [
        r"C:\Program Files\nodejs",
        r"C:\nvm4w\nodejs",
        r"C:\Users\u\AppData\Local\Volta\bin",
        r"C:\Users\u\scoop\shims",
        r"C:\Users\u\scoop\apps\nodejs\current",
        r"C:\Users\u\AppData\Roaming\fnm\aliases\default",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(dirs, want);
    assert!(super::env::login_shell_path(None, std::time::Duration::from_secs(1)).is_err());
    assert!(!super::env::is_executable_file(Path::new(
        r"C:\no\such\node.exe"
    )));
}

#[test]
fn canonical_paths_come_back_in_their_plain_form() {
    use std::path::{Path, PathBuf};
    let plain = |p: &str| fs::plain_form(Path::new(p));
    assert_eq!(
        plain(r"\\?\C:\Users\u\x"),
        Some(PathBuf::from(r"C:\Users\u\x"))
    );
    assert_eq!(
        plain(r"\\?\UNC\srv\share\x"),
        Some(PathBuf::from(r"\\srv\share\x"))
    );
    assert_eq!(plain(r"C:\already\plain"), None);
    for kept in [
        r"\\?\C:\a\NUL",
        r"\\?\C:\a\com1.txt",
        r"\\?\C:\a\lpt9",
        r"\\?\C:\trailing.\x",
        r"\\?\C:\space \x",
        r"\\?\Volume{01234567-89ab-cdef-0123-456789abcdef}\x",
    ] {
        assert_eq!(plain(kept), None, "{kept}");
    }
    assert_eq!(plain(r"\\?\C:\a\com0"), Some(PathBuf::from(r"C:\a\com0")));
    let long = format!(r"\\?\C:\{}", "a".repeat(300));
    assert_eq!(plain(&long), None);
    let dir = tempfile::tempdir().unwrap();
    let real = fs::canonicalize(dir.path()).unwrap();
    assert!(
        !real.to_string_lossy().starts_with(r"\\?\"),
        "{}",
        real.display()
    );
    assert_eq!(
        std::fs::canonicalize(&real).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
}

#[test]
fn channel_pair_carries_libuv_frames_both_ways() {
    use std::os::windows::io::IntoRawHandle;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (ours, theirs) = super::ipc::channel_pair().unwrap();
        let ours = super::ipc::channel_stream(ours).unwrap();
        // SAFETY: the overlapped child end of the pair, owned here and
        // handed to tokio.
        let mut theirs = unsafe {
            tokio::net::windows::named_pipe::NamedPipeClient::from_raw_handle(
                theirs.0.into_raw_handle(),
            )
        }
        .unwrap();
        theirs
            .write_all(&frame::encode(b"{\"a\":1}\n"))
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        let (n, passed) = super::ipc::recv_chunk(&ours, &mut buf).await.unwrap();
        assert_eq!((&buf[..n], passed), (&b"{\"a\":1}\n"[..], 0));
        super::ipc::send_all(&ours, b"{\"b\":2}\n").await.unwrap();
        let want = frame::encode(b"{\"b\":2}\n");
        let mut got = vec![0u8; want.len()];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, want);
        // The child's end closing reads as EOF on ours.
        drop(theirs);
        let (n, _) = super::ipc::recv_chunk(&ours, &mut buf).await.unwrap();
        assert_eq!(n, 0);
    });
}
