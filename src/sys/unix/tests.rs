//! Tests of what only the POSIX implementation does (they read Linux's
//! `/proc`, so they run on Linux only).

use std::os::fd::AsRawFd;

use super::ipc::{channel_pair, channel_stream, recv_chunk};

/// Open fds of this process that are the pipe with inode `ino`.
fn fds_on_pipe(ino: u64) -> usize {
    let want = format!("pipe:[{ino}]");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy() == want)
        .count()
}

#[test]
fn passed_fds_are_closed() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (ours, theirs) = channel_pair().unwrap();
        let ours = channel_stream(ours).unwrap();
        let theirs = theirs.0;
        // Pass three fds (a pipe's two ends and /dev/null) with a frame.
        let mut p = [0; 2];
        // SAFETY: pipe writes two fds.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(format!("/proc/self/fd/{}", p[0]))
            .unwrap()
            .ino();
        let null = std::fs::File::open("/dev/null").unwrap();
        let fds = [p[0], p[1], null.as_raw_fd()];
        let payload = b"{\"cmd\":\"NODE_HANDLE\"}\n";
        // SAFETY: building an SCM_RIGHTS message from local buffers.
        unsafe {
            let size = std::mem::size_of_val(&fds) as u32;
            let mut control = vec![0u64; (libc::CMSG_SPACE(size) as usize).div_ceil(8)];
            let mut iov = libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = libc::CMSG_SPACE(size) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr() as *const u8,
                libc::CMSG_DATA(c),
                size as usize,
            );
            assert!(libc::sendmsg(theirs.as_raw_fd(), &msg, 0) > 0);
            libc::close(p[0]);
            libc::close(p[1]);
        }
        drop(null);
        let mut buf = [0u8; 256];
        let (n, closed) = recv_chunk(&ours, &mut buf).await.unwrap();
        assert_eq!(&buf[..n], payload);
        assert_eq!(closed, 3);
        assert_eq!(fds_on_pipe(ino), 0, "received fds were not closed");
        drop(theirs);
        let (n, _) = recv_chunk(&ours, &mut buf).await.unwrap();
        assert_eq!(n, 0);
    });
}
