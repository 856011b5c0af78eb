//! Tests of the OS layer, written against its portable API (what every
//! platform's implementation must pass).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use super::{event, fs, ipc, process, ExitInfo, Signal};

/// A name no other test of this process (or a concurrent run) uses.
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{nanos:x}{:x}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!(
            "qc-sys-{name}-{}-{}",
            process::current_pid(),
            unique()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn private_modes_and_owner() {
    let d = Dir::new("modes");
    let p = d.0.join("private");
    fs::dir_builder(0o700).create(&p).unwrap();
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(fs::mode(&p, &meta) & 0o077, 0, "no access for others");
    assert_eq!(fs::owner(&p, &meta), fs::current_owner());
    let f = p.join("f");
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    let file = fs::no_follow(fs::create_mode(&mut o, 0o600))
        .open(&f)
        .unwrap();
    fs::set_file_mode(&file, 0o600).unwrap();
    assert_eq!(fs::mode(&f, &std::fs::metadata(&f).unwrap()) & 0o777, 0o600);
    fs::set_mode(&f, 0o644).unwrap();
    assert_eq!(fs::mode(&f, &std::fs::metadata(&f).unwrap()) & 0o777, 0o644);
    // A symlink at the final component is refused by `no_follow`.
    let link = p.join("link");
    fs::symlink(&f, &link).unwrap();
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    assert!(fs::no_follow(&mut o).open(&link).is_err());
    assert!(fs::no_follow_nonblocking(&mut o).open(&link).is_err());
    assert!(fs::no_follow(&mut o).open(&f).is_ok());
}

#[test]
fn replace_swaps_the_file_and_never_writes_through_a_link() {
    let d = Dir::new("replace");
    let target = d.0.join("target");
    let elsewhere = d.0.join("elsewhere");
    std::fs::write(&elsewhere, b"keep").unwrap();
    fs::symlink(&elsewhere, &target).unwrap();
    let tmp = d.0.join("tmp");
    std::fs::write(&tmp, b"new").unwrap();
    fs::replace(&tmp, &target).unwrap();
    assert!(!tmp.exists());
    assert!(!std::fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"new");
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
    fs::sync_dir(&d.0);
}

#[test]
fn dir_lock_is_exclusive() {
    let d = Dir::new("lock");
    let first = fs::DirLock::exclusive(&d.0).unwrap();
    let (tx, rx) = mpsc::channel();
    let path = d.0.clone();
    let t = std::thread::spawn(move || {
        let l = fs::DirLock::exclusive(&path).unwrap();
        tx.send(()).unwrap();
        drop(l);
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(200)),
        Err(mpsc::RecvTimeoutError::Timeout),
        "a second lock was granted while the first is held"
    );
    drop(first);
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the lock was not handed over");
    t.join().unwrap();
}

#[test]
fn file_identity_and_version() {
    let d = Dir::new("id");
    let a = d.0.join("a");
    let b = d.0.join("b");
    std::fs::write(&a, b"1").unwrap();
    std::fs::write(&b, b"1").unwrap();
    let hard = d.0.join("hard");
    std::fs::hard_link(&a, &hard).unwrap();
    let meta = |p: &PathBuf| std::fs::metadata(p).unwrap();
    assert_eq!(fs::FileId::of(&meta(&a)), fs::FileId::of(&meta(&hard)));
    assert_ne!(fs::FileId::of(&meta(&a)), fs::FileId::of(&meta(&b)));
    let before = fs::FileVersion::of(&meta(&a));
    assert_eq!(before, fs::FileVersion::of(&meta(&a)));
    assert_eq!(before.size(), 1);
    std::fs::write(&a, b"22").unwrap();
    let after = fs::FileVersion::of(&meta(&a));
    assert_ne!(before, after);
    assert_eq!(after.id(), before.id());
    assert_eq!(after.size(), 2);
}

fn sh(script: &str, env: Vec<(std::ffi::OsString, std::ffi::OsString)>) -> process::ChannelChild {
    let mut env = env;
    env.push(("PATH".into(), std::env::var_os("PATH").unwrap_or_default()));
    process::spawn_with_channel(process::ChannelCommand {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env,
    })
    .unwrap()
}

#[test]
fn spawn_with_channel_round_trip() {
    let child = sh(
        r#"read -r line <&3 && printf '%s|%s\n' "$line" "$NODE_CHANNEL_FD" >&3"#,
        vec![],
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let stream = ipc::channel_stream(child.channel).unwrap();
        ipc::send_all(&stream, b"ping\n").await.unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let (n, passed) = ipc::recv_chunk(&stream, &mut buf).await.unwrap();
            assert_eq!(passed, 0);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        ipc::shutdown_write(&stream);
        out
    });
    assert_eq!(got, format!("ping|{}\n", process::CHANNEL_FD).as_bytes());
    assert_eq!(
        child.process.wait(),
        ExitInfo {
            code: Some(0),
            signal: None
        }
    );
    // The child's pipes reach EOF once it is gone.
    rt.block_on(async {
        use tokio::io::AsyncReadExt;
        let mut out = child.stdout.into_async().unwrap();
        let mut s = Vec::new();
        out.read_to_end(&mut s).await.unwrap();
        assert!(s.is_empty());
    });
}

#[test]
fn kill_group_liveness_and_leftover_scan() {
    let tag = format!("QC_SYS_TEST_TAG={}", unique());
    let (k, v) = tag.split_once('=').unwrap();
    // A leader and a grandchild in its group, both carrying the tag.
    let child = sh(
        "sleep 30 & echo started >&3; wait",
        vec![(k.into(), v.into())],
    );
    let pid = child.process.pid();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stream = ipc::channel_stream(child.channel).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = ipc::recv_chunk(&stream, &mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"started\n");
    });
    assert!(process::exists(pid) && process::is_alive(pid));
    let tagged = process::find_by_env(&tag);
    assert_eq!(tagged.len(), 2, "leader and grandchild: {tagged:?}");
    assert!(tagged.contains(&pid));
    for &p in &tagged {
        assert!(child.process.group_contains(p), "{p} not in the group");
    }
    assert!(!child.process.group_contains(process::current_pid()));
    child.process.signal_group(Signal::Kill);
    let exit = child.process.wait();
    assert_eq!(exit.signal, Some(process::KILL_SIGNAL));
    assert_eq!(exit.to_string(), "killed by signal 9 (SIGKILL)");
    assert!(!process::is_alive(pid), "reaped");
    // The grandchild died with the group (it may linger as a zombie of
    // init for a moment; zombies have no environment and are not found).
    for _ in 0..500 {
        if process::find_by_env(&tag).is_empty() {
            break;
        }
        std::thread::yield_now();
        std::thread::park_timeout(Duration::from_millis(10));
    }
    assert!(process::find_by_env(&tag).is_empty());
    assert!(process::exists(process::current_pid()));
    assert!(process::exists(process::parent_pid()));
    assert!(!process::exists(0));
}

#[test]
fn process_identity() {
    let me = process::current_pid();
    assert!(process::is_alive(me));
    let token = process::start_token(me);
    assert_eq!(token, process::start_token(me), "stable");
    if let (Some(t), Some(b)) = (&token, process::boot_id()) {
        assert!(t.starts_with(&format!("{b}:")));
    }
    let _ = process::pid_namespace();
}

#[test]
fn event_handle_signal_and_drain() {
    let ev = event::EventHandle::new().unwrap();
    assert!(!readable(ev.raw()));
    ev.signal();
    ev.signal();
    assert!(readable(ev.raw()));
    ev.drain();
    assert!(!readable(ev.raw()));
    for _ in 0..100_000 {
        ev.signal(); // a full pipe does not block
    }
    assert!(readable(ev.raw()));
    ev.drain();
    assert!(!readable(ev.raw()));
}

/// Whether the host would see the handle ready (a zero-timeout wait): a
/// pollable fd on Unix, a (sign-extended) event HANDLE on Windows.
#[cfg(windows)]
fn readable(h: event::RawEventHandle) -> bool {
    use windows_sys::Win32::Foundation::{HANDLE, WAIT_OBJECT_0};
    use windows_sys::Win32::System::Threading::WaitForSingleObject;
    // SAFETY: a zero-timeout wait on the live event handle `h` (owned by
    // the caller's EventFd).
    unsafe { WaitForSingleObject(h as isize as HANDLE, 0) == WAIT_OBJECT_0 }
}

/// Whether the host would see the handle ready (a zero-timeout wait).
#[cfg(unix)]
fn readable(h: event::RawEventHandle) -> bool {
    let mut p = libc::pollfd {
        fd: h,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd with no timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn errno_names() {
    let e = std::io::Error::from(std::io::ErrorKind::Other);
    assert_eq!(super::io::errno_name(&e), None);
    let d = Dir::new("errno");
    let e = std::fs::File::open(d.0.join("none")).unwrap_err();
    assert_eq!(super::io::errno_name(&e), Some("ENOENT"));
}

#[test]
fn dial_once_verdicts() {
    let d = Dir::new("dial");
    let live = d.0.join("live.sock");
    let _l = ipc::bind(&live).unwrap();
    assert_eq!(ipc::dial_once(live.to_str().unwrap()), ipc::Dial::Answered);
    let dead = d.0.join("dead.sock");
    drop(ipc::bind(&dead).unwrap());
    assert_eq!(
        ipc::dial_once(dead.to_str().unwrap()),
        ipc::Dial::NobodyThere
    );
    let long = format!("/{}", "a".repeat(200));
    assert_eq!(ipc::dial_once(&long), ipc::Dial::Unknown);
    std::fs::write(d.0.join("file"), b"x").unwrap();
    assert_eq!(
        ipc::dial_once(d.0.join("file").to_str().unwrap()),
        ipc::Dial::NobodyThere
    );
    assert!(fs::is_socket(
        &std::fs::metadata(&live).unwrap().file_type()
    ));
    assert!(!fs::is_socket(
        &std::fs::metadata(d.0.join("file")).unwrap().file_type()
    ));
}

#[test]
fn exit_hooks_register_once() {
    fn hook() {}
    super::at_exit(hook);
    super::at_exit(hook);
    let n = super::exit::HOOKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|h| std::ptr::fn_addr_eq(**h, hook as fn()))
        .count();
    assert_eq!(n, 1);
}
