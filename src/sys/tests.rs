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
    let mode = fs::mode(&f, &std::fs::metadata(&f).unwrap());
    assert_ne!(mode & 0o077, 0, "others get access again");
    // Exact bits exist only on Unix; Windows synthesises 0o666 for a file
    // that is not owner-only (its access is what the parent hands down).
    #[cfg(unix)]
    assert_eq!(mode & 0o777, 0o644);
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
    let id = |p: &PathBuf| fs::FileId::of(p, &std::fs::metadata(p).unwrap());
    let version = |p: &PathBuf| fs::FileVersion::of(p, &std::fs::metadata(p).unwrap());
    assert_eq!(id(&a), id(&hard));
    assert_ne!(id(&a), id(&b));
    let before = version(&a);
    assert_eq!(before, version(&a));
    assert_eq!(before.size(), 1);
    std::fs::write(&a, b"22").unwrap();
    let after = version(&a);
    assert_ne!(before, after);
    assert_eq!(after.id(), before.id());
    assert_eq!(after.size(), 2);
}

/// A child on a channel: `sh -c unix` on Unix; on Windows (no `sh`) the
/// Windows Node of `QC_TEST_NODE` (set by tests/windows/wine-runner.sh)
/// running `node -e windows`. Both speak the channel in JSON lines.
fn child(
    unix: &str,
    windows: &str,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> process::ChannelChild {
    let mut env = env;
    // What a plugin would get of this environment (Windows Node needs
    // SystemRoot and the profile folders to start at all).
    // NODE_SKIP_PLATFORM_CHECK: set by tests/windows/env.sh, as Node's
    // Windows version check fails under Wine.
    let names = crate::sys::platform::PLUGIN_ENV.names.iter();
    for var in names.chain(&["NODE_SKIP_PLATFORM_CHECK"]) {
        if let Some(v) = std::env::var_os(var) {
            env.push((var.into(), v));
        }
    }
    let (program, args) = match crate::sys::platform::IPC_KIND {
        crate::sys::platform::IpcKind::UnixSockets => ("sh".into(), ["-c", unix]),
        crate::sys::platform::IpcKind::NamedPipes => (
            std::env::var_os("QC_TEST_NODE").expect(
                "QC_TEST_NODE (node.exe) is not set: run through tests/windows/wine-runner.sh",
            ),
            ["-e", windows],
        ),
    };
    process::spawn_with_channel(process::ChannelCommand {
        program,
        args: args.iter().map(Into::into).collect(),
        cwd: std::env::temp_dir(),
        env,
    })
    .unwrap()
}

/// Everything a child wrote to `pipe` until it closed, as text.
async fn read_all(pipe: process::PipeReader) -> String {
    use tokio::io::AsyncReadExt;
    let mut s = Vec::new();
    let _ = pipe.into_async().unwrap().read_to_end(&mut s).await;
    String::from_utf8_lossy(&s).into_owned()
}

#[test]
fn spawn_with_channel_round_trip() {
    let child = child(
        r#"read -r line <&3 && line=${line#\"} && printf '"%s|%s"\n' "${line%\"}" "$NODE_CHANNEL_FD" >&3"#,
        "process.once('message', m => process.send(m + '|' + (process.connected ? 'connected' : 'no'), \
         () => process.disconnect()))",
        vec![],
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let stream = ipc::channel_stream(child.channel).unwrap();
        ipc::send_all(&stream, b"\"ping\"\n").await.unwrap();
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
    assert_eq!(
        String::from_utf8_lossy(&got),
        // sh sees the channel's fd number; Node deletes NODE_CHANNEL_FD
        // once it has opened that fd, so it reports being connected.
        match crate::sys::platform::IPC_KIND {
            crate::sys::platform::IpcKind::UnixSockets =>
                format!("\"ping|{}\"\n", process::CHANNEL_FD),
            crate::sys::platform::IpcKind::NamedPipes => "\"ping|connected\"\n".to_string(),
        },
        "child stderr: {}",
        rt.block_on(read_all(child.stderr))
    );
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
    let child = child(
        r#"sleep 30 & echo '"started"' >&3; wait"#,
        "require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], \
         { stdio: 'ignore' }); process.send('started'); setInterval(() => {}, 1000)",
        vec![(k.into(), v.into())],
    );
    let pid = child.process.pid();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (started, _stream) = rt.block_on(async {
        let stream = ipc::channel_stream(child.channel).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = ipc::recv_chunk(&stream, &mut buf).await.unwrap();
        (buf[..n].to_vec(), stream)
    });
    if started != b"\"started\"\n" {
        panic!(
            "no \"started\" ({:?}); child stderr: {}",
            String::from_utf8_lossy(&started),
            rt.block_on(read_all(child.stderr))
        );
    }
    assert!(process::exists(pid) && process::is_alive(pid));
    let tagged = process::find_by_env(&tag);
    // Unix finds exactly the two tagged processes. Windows finds every
    // process of the leader's Job Object, where the console host Windows
    // starts for a console program without a console may sit too.
    #[cfg(unix)]
    assert_eq!(tagged.len(), 2, "leader and grandchild: {tagged:?}");
    #[cfg(windows)]
    assert!(tagged.len() >= 2, "leader and grandchild: {tagged:?}");
    assert!(tagged.contains(&pid));
    for &p in &tagged {
        assert!(child.process.group_contains(p), "{p} not in the group");
    }
    assert!(!child.process.group_contains(process::current_pid()));
    child.process.signal_group(Signal::Kill);
    let exit = child.process.wait();
    assert_eq!(exit, process::KILLED);
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
    // Under Wine a program started from Linux has a parent pid that no
    // Windows process has (its parent is the Linux side's wine).
    #[cfg(windows)]
    let parent_visible = !super::windows::util::is_wine();
    #[cfg(unix)]
    let parent_visible = true;
    if parent_visible {
        assert!(process::exists(process::parent_pid()));
    }
    assert!(!process::exists(0));
}

// Only Unix reports a kill as a signal (Windows: the exit code the
// terminating call set).
#[cfg(unix)]
#[test]
fn a_kill_reads_as_sigkill() {
    assert_eq!(process::KILLED.to_string(), "killed by signal 9 (SIGKILL)");
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
    use crate::sys::platform::{IpcKind, IPC_KIND};
    let d = Dir::new("dial");
    // A local socket's name: a file on Unix, `\\.\pipe\<name>` on Windows.
    let name = |n: &str| match IPC_KIND {
        IpcKind::UnixSockets => d.0.join(format!("{n}.sock")),
        IpcKind::NamedPipes => PathBuf::from(format!(
            r"\\.\pipe\qc-sys-dial-{}-{}-{n}",
            process::current_pid(),
            unique()
        )),
    };
    let live = name("live");
    let _l = ipc::bind(&live).unwrap();
    assert_eq!(ipc::dial_once(live.to_str().unwrap()), ipc::Dial::Answered);
    let dead = name("dead");
    drop(ipc::bind(&dead).unwrap());
    assert_eq!(
        ipc::dial_once(dead.to_str().unwrap()),
        ipc::Dial::NobodyThere
    );
    std::fs::write(d.0.join("file"), b"x").unwrap();
    let file = d.0.join("file");
    assert!(!fs::is_socket(
        &std::fs::metadata(&file).unwrap().file_type()
    ));
    match IPC_KIND {
        IpcKind::UnixSockets => {
            let long = format!("/{}", "a".repeat(200));
            assert_eq!(ipc::dial_once(&long), ipc::Dial::Unknown);
            // A file refuses the connection like a socket nobody serves.
            assert_eq!(
                ipc::dial_once(file.to_str().unwrap()),
                ipc::Dial::NobodyThere
            );
            assert!(fs::is_socket(
                &std::fs::metadata(&live).unwrap().file_type()
            ));
        }
        IpcKind::NamedPipes => {
            // A file where a pipe was expected is not "nobody there".
            assert_eq!(ipc::dial_once(file.to_str().unwrap()), ipc::Dial::Unknown);
            assert_eq!(
                ipc::dial_once(d.0.join("none").to_str().unwrap()),
                ipc::Dial::NobodyThere
            );
        }
    }
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
