//! A write to a dead plugin must never raise SIGPIPE (which would kill the
//! IDE hosting the library). Its own test binary: the test changes the
//! process-wide SIGPIPE disposition, which must not touch other tests.

// SIGPIPE is Unix by nature.
#![cfg(unix)]

use qwen_companion::plugins::ipc::send_all;

#[test]
fn write_to_closed_peer_is_epipe_not_sigpipe() {
    // Rust test binaries ignore SIGPIPE: restore the default (what a C or
    // JVM host has) so a plain write() would kill this process.
    // SAFETY: changing this test process's SIGPIPE disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let ours = tokio::net::UnixStream::from_std(ours).unwrap();
        drop(theirs);
        let big = vec![b'x'; 1 << 20];
        send_all(&ours, &big).await
    });
    let e = result.unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPIPE), "{e}");
}
