//! Spawning a plugin's Node child and ending it with all its descendants.
//!
//! ## The channel
//! Node attaches its IPC channel to the fd named by `NODE_CHANNEL_FD`, which
//! must be one end of an AF_UNIX SOCK_STREAM socketpair (with a pipe the
//! child silently receives nothing). We create the pair with SOCK_CLOEXEC,
//! move the child's end to fd 3 in the child only (clearing CLOEXEC there),
//! and close our copy of it right after the spawn — otherwise we would never
//! see EOF. fds 0–2 are never used for the channel (fd 1 would be shared with
//! stdout; a closed fd number would be reused by Node for its epoll fd and
//! hang it). stdin is /dev/null; stdout and stderr are pipes drained all the
//! time into bounded tails (the last [`TAIL_BYTES`] of each), which appear in
//! error messages. stdout is never parsed.
//!
//! ## The environment
//! An allowlist only ([`ALLOWED_ENV`], `LC_*`), plus `PLUGIN_ID`,
//! `PLUGIN_DATA_DIR`, the channel variables and the instance tag. Never
//! `NODE_OPTIONS` (it would run code of the host's choosing in the plugin) nor
//! `NODE_UNIQUE_ID` (the child would become a cluster worker).
//!
//! ## In the child, before exec
//! Only async-signal-safe calls: `setpgid(0, 0)` (own process group),
//! `prctl(PR_SET_PDEATHSIG, SIGKILL)` then a `getppid()` check (the parent
//! may already be gone), marking every inherited fd ≥ 3 close-on-exec
//! (`close_range(…, CLOSE_RANGE_CLOEXEC)`, best effort, so the plugin gets
//! none of the IDE's files even if the IDE leaked one without O_CLOEXEC),
//! then `dup2` of the channel to fd 3.
//!
//! PR_SET_PDEATHSIG fires when the spawning THREAD exits, not the process.
//! So every spawn of a host happens on one dedicated, long-lived thread
//! ([`Spawner`], `qc-plugin-spawn`), never on a tokio worker or blocking-pool
//! thread (those retire when idle and would kill the plugin with them). If
//! the whole host process dies, the kernel kills every plugin.
//!
//! ## Exit detection
//! One waiter thread per child blocks in `waitpid(pid)` on that pid only.
//! We never call `waitpid(-1)` / `wait()` (it would steal the exit status of
//! the IDE's own children), install no SIGCHLD handler and set no subreaper:
//! all of these are process-wide and the process is the IDE's. Exit is known
//! from waitpid, not from stdout EOF, which an attached grandchild can hold
//! open long after the plugin died.
//!
//! ## Ending a plugin and its descendants
//! [`Child::end`]: (the caller first closes the channel,) wait a grace
//! period, SIGTERM the process group, wait, SIGKILL the group, then kill
//! every process still carrying the instance tag. The tag is an environment
//! variable ([`TAG_VAR`] = random hex per instance) that every descendant
//! inherits, also those that called `setsid()` and left the group. We find
//! them by scanning `/proc/*/environ` of processes of our uid. Why not the
//! alternatives: cgroups need a delegated subtree, which a process inside an
//! IDE does not have; `PR_SET_CHILD_SUBREAPER` is process-wide and would
//! make every orphan of the IDE its child (it would have to be set on the
//! IDE). A process that wipes its own environment escapes the scan; the
//! process group and PDEATHSIG still cover the ordinary cases.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::error::{Error, Result, Status};

/// The per-instance tag variable every descendant of a plugin inherits.
pub const TAG_VAR: &str = "QWEN_COMPANION_PLUGIN_INSTANCE";
/// The fd the child's channel end is moved to.
pub const CHANNEL_FD: i32 = 3;
/// Bytes of stdout and of stderr kept for error messages.
pub const TAIL_BYTES: usize = 8 * 1024;

/// Host variables a plugin may see (plus every `LC_*`).
pub const ALLOWED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The node (or Electron) binary: a path or a name looked up in PATH.
    pub program: OsString,
    /// Arguments (the entry script's path).
    pub args: Vec<OsString>,
    /// Working directory (the plugin folder).
    pub cwd: PathBuf,
    /// Variables added to the allowlisted host environment.
    pub env: Vec<(OsString, OsString)>,
    /// Set `ELECTRON_RUN_AS_NODE=1` (the binary is an Electron runtime).
    pub electron: bool,
}

/// The environment of a plugin: the allowlisted host variables, then `extra`.
pub fn plugin_env(extra: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| ALLOWED_ENV.contains(&k) || (k.starts_with("LC_") && k.len() > 3))
        })
        .collect();
    for (k, v) in extra {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitInfo {
    fn from_status(status: libc::c_int) -> ExitInfo {
        if libc::WIFEXITED(status) {
            ExitInfo {
                code: Some(libc::WEXITSTATUS(status)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(status) {
            ExitInfo {
                code: None,
                signal: Some(libc::WTERMSIG(status)),
            }
        } else {
            ExitInfo {
                code: None,
                signal: None,
            }
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s} ({})", signal_name(s)),
            _ => write!(f, "unknown exit status"),
        }
    }
}

/// The last bytes of a stream.
#[derive(Default)]
pub struct Tail {
    buf: Mutex<VecDeque<u8>>,
}

impl Tail {
    fn push(&self, data: &[u8]) {
        let mut b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        let data = &data[data.len().saturating_sub(TAIL_BYTES)..];
        let excess = (b.len() + data.len()).saturating_sub(TAIL_BYTES);
        b.drain(..excess);
        b.extend(data);
    }
    /// The tail as text (invalid UTF-8 replaced), trimmed.
    pub fn text(&self) -> String {
        let b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        let (x, y) = b.as_slices();
        let mut v = x.to_vec();
        v.extend_from_slice(y);
        String::from_utf8_lossy(&v).trim().to_string()
    }
}

/// What the spawn thread hands back.
struct Spawned {
    pid: i32,
    channel: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

type SpawnJob = (SpawnSpec, mpsc::Sender<io::Result<Spawned>>);

/// The dedicated `qc-plugin-spawn` thread of one plugin host (see the
/// module docs: PR_SET_PDEATHSIG follows the spawning thread). Dropping it
/// ends the thread — the kernel then kills any child still running.
pub struct Spawner {
    tx: Mutex<Option<mpsc::Sender<SpawnJob>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two new fds into the array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A CLOEXEC duplicate of `fd` numbered 10 or higher (so the child's end is
/// never 0–3, whatever the IDE closed).
fn dup_high(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new fd we own.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: n is a new fd.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

fn spawn_now(spec: SpawnSpec) -> io::Result<Spawned> {
    let (parent_end, child_end) = socketpair()?;
    let child_end = dup_high(&child_end)?;
    let child_fd = child_end.as_raw_fd();
    // SAFETY: getpid has no preconditions.
    let parent_pid = unsafe { libc::getpid() };
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(plugin_env(&spec.env))
        .env("NODE_CHANNEL_FD", CHANNEL_FD.to_string())
        .env("NODE_CHANNEL_SERIALIZATION_MODE", "json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if spec.electron {
        cmd.env("ELECTRON_RUN_AS_NODE", "1");
    }
    // SAFETY: the closure only makes async-signal-safe calls (setpgid,
    // prctl, getppid, syscall(close_range), dup2, _exit) on values
    // captured by copy; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent_pid {
                // The spawner died between fork and prctl: nobody to serve.
                libc::_exit(1);
            }
            // Best effort (Linux >= 5.11): no inherited fd survives exec.
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            // dup2 gives fd 3 without CLOEXEC (child_fd >= 10, never 3).
            if libc::dup2(child_fd, CHANNEL_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(child_end);
    let stdout = OwnedFd::from(child.stdout.take().expect("piped"));
    let stderr = OwnedFd::from(child.stderr.take().expect("piped"));
    Ok(Spawned {
        pid: child.id() as i32,
        channel: parent_end,
        stdout,
        stderr,
    })
}

impl Spawner {
    pub fn new() -> io::Result<Spawner> {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let thread = std::thread::Builder::new()
            .name("qc-plugin-spawn".into())
            .spawn(move || {
                while let Ok((spec, reply)) = rx.recv() {
                    let _ = reply.send(spawn_now(spec));
                }
            })?;
        Ok(Spawner {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn spawn_raw(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        let (reply_tx, reply_rx) = mpsc::channel();
        {
            let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
            let tx = tx
                .as_ref()
                .ok_or_else(|| io::Error::other("the plugin host is shut down"))?;
            tx.send((spec, reply_tx))
                .map_err(|_| io::Error::other("the spawn thread is gone"))?;
        }
        reply_rx
            .recv()
            .map_err(|_| io::Error::other("the spawn thread is gone"))?
    }

    /// Spawns on the spawn thread (blocks the caller until done; call it off
    /// the runtime workers, e.g. in `spawn_blocking`). `rt` runs the drain
    /// tasks. The tag variable is added to `spec.env` here.
    pub fn spawn(&self, mut spec: SpawnSpec, rt: &tokio::runtime::Handle) -> Result<Child> {
        let tag = crate::shared::rand::random_hex(16)?;
        spec.env.push((TAG_VAR.into(), tag.clone().into()));
        let program = spec.program.clone();
        let s = self.spawn_raw(spec).map_err(|e| {
            Error::new(
                Status::Io,
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )
        })?;
        let _enter = rt.enter();
        let (exit_tx, exit_rx) = watch::channel(None);
        let pid = s.pid;
        let waiter = std::thread::Builder::new()
            .name("qc-plugin-wait".into())
            .spawn(move || {
                let mut status: libc::c_int = 0;
                let info = loop {
                    // SAFETY: waitpid on the one pid we spawned.
                    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
                    if r == pid {
                        break ExitInfo::from_status(status);
                    }
                    if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    // ECHILD: someone else reaped it (a waitpid(-1) in the host).
                    break ExitInfo {
                        code: None,
                        signal: None,
                    };
                };
                let _ = exit_tx.send(Some(info));
            });
        if let Err(e) = waiter {
            // Without a waiter we could never tell its exit: end it now.
            kill_group(pid, libc::SIGKILL);
            // SAFETY: reaping the pid we just killed.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            return Err(Error::io("cannot start the plugin's waiter thread", e));
        }
        let stdout_tail = Arc::new(Tail::default());
        let stderr_tail = Arc::new(Tail::default());
        let (err_done_tx, err_done_rx) = watch::channel(false);
        let (out_done_tx, _out_done_rx) = watch::channel(false);
        drain(s.stdout, stdout_tail.clone(), out_done_tx);
        drain(s.stderr, stderr_tail.clone(), err_done_tx);
        Ok(Child {
            pid,
            tag,
            channel: Mutex::new(Some(s.channel)),
            exit: exit_rx,
            stdout_tail,
            stderr_tail,
            stderr_done: err_done_rx,
        })
    }

    /// Ends the spawn thread.
    pub fn shutdown(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn drain(fd: OwnedFd, tail: Arc<Tail>, done: watch::Sender<bool>) {
    let rx = match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
        Ok(rx) => rx,
        Err(_) => {
            let _ = done.send(true);
            return;
        }
    };
    tokio::spawn(async move {
        let mut rx = rx;
        let mut buf = vec![0u8; 4096];
        loop {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => tail.push(&buf[..n]),
            }
        }
        let _ = done.send(true);
    });
}

/// A running (or ended) plugin process.
pub struct Child {
    pid: i32,
    tag: String,
    channel: Mutex<Option<OwnedFd>>,
    exit: watch::Receiver<Option<ExitInfo>>,
    stdout_tail: Arc<Tail>,
    stderr_tail: Arc<Tail>,
    stderr_done: watch::Receiver<bool>,
}

fn kill_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: signalling the process group we created (pgid = child pid).
        unsafe { libc::kill(-pgid, sig) };
    }
}

impl Child {
    pub fn pid(&self) -> i32 {
        self.pid
    }
    /// The instance tag (value of [`TAG_VAR`] in its descendants).
    pub fn tag(&self) -> &str {
        &self.tag
    }
    /// Our end of the channel (once: the host wraps it in its stream).
    pub fn take_channel(&self) -> Option<OwnedFd> {
        self.channel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
    pub fn exited(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }
    /// Waits for the exit (`None` when `limit` passed first).
    pub async fn wait_exit(&self, limit: Duration) -> Option<ExitInfo> {
        let mut rx = self.exit.clone();
        let r = tokio::time::timeout(limit, rx.wait_for(|e| e.is_some())).await;
        match r {
            Ok(Ok(e)) => *e,
            _ => self.exited(),
        }
    }
    /// The stderr tail, after giving the pipe up to `limit` to reach EOF
    /// (a grandchild holding it open cannot delay this longer).
    pub async fn stderr_tail_settled(&self, limit: Duration) -> String {
        let mut rx = self.stderr_done.clone();
        let _ = tokio::time::timeout(limit, rx.wait_for(|d| *d)).await;
        self.stderr_tail.text()
    }
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail.text()
    }
    pub fn stdout_tail(&self) -> String {
        self.stdout_tail.text()
    }

    /// Whether signalling the process group `-pid` reaches our processes
    /// only: while the leader is not reaped its pid (= the pgid) cannot be
    /// reused; after that, only while a tagged process is still in the
    /// group (a pgid is not reused while its group has members). Blocking
    /// (may scan /proc).
    fn group_is_ours(&self) -> bool {
        self.exited().is_none()
            || find_tagged(&self.tag)
                .into_iter()
                // SAFETY: getpgid only reads another process's group id.
                .any(|p| unsafe { libc::getpgid(p) } == self.pid)
    }

    /// Signals the process group when it is still ours (blocking).
    pub fn signal_group_blocking(&self, sig: i32) {
        if self.group_is_ours() {
            kill_group(self.pid, sig);
        }
    }

    /// SIGKILLs the group and every tagged descendant now (blocking: scans /proc).
    pub fn kill_all_blocking(&self) {
        // After the leader is reaped the group may live on in attached
        // grandchildren; `signal_group_blocking` checks it is still ours.
        self.signal_group_blocking(libc::SIGKILL);
        kill_tagged(&self.tag);
    }

    /// Ends the process and all its descendants: waits `grace` for it to
    /// exit by itself (the caller closed the channel), SIGTERMs the group,
    /// waits `grace` again, SIGKILLs the group, then kills every process
    /// still tagged. Returns the exit status.
    pub async fn end(self: &Arc<Self>, grace: Duration) -> Option<ExitInfo> {
        let mut exit = self.wait_exit(grace).await;
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || me.signal_group_blocking(libc::SIGTERM)).await;
        if exit.is_none() {
            exit = self.wait_exit(grace).await;
        }
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || me.kill_all_blocking()).await;
        if exit.is_none() {
            exit = self.wait_exit(Duration::from_secs(2)).await;
        }
        exit
    }
}

/// Pids of our uid's processes whose environment holds `TAG_VAR=tag`.
pub fn find_tagged(tag: &str) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let needle = format!("{TAG_VAR}={tag}");
    // SAFETY: getuid/getpid have no preconditions.
    let (uid, me) = unsafe { (libc::getuid(), libc::getpid()) };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me || entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Stops then kills every tagged process, rescanning until none is left
/// (a process may fork while we scan). Zombies have no environment and do
/// not match.
pub fn kill_tagged(tag: &str) {
    for _ in 0..20 {
        let pids = find_tagged(tag);
        if pids.is_empty() {
            return;
        }
        for &p in &pids {
            // SAFETY: signalling a process that carries our instance tag.
            unsafe { libc::kill(p, libc::SIGSTOP) };
        }
        for &p in &pids {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_is_an_allowlist() {
        let extra = vec![
            ("PLUGIN_ID".into(), "x".into()),
            ("PATH".into(), "/p".into()),
        ];
        let env = plugin_env(&extra);
        for (k, _) in &env {
            let k = k.to_str().unwrap();
            assert!(
                ALLOWED_ENV.contains(&k) || k.starts_with("LC_") || k == "PLUGIN_ID",
                "{k} leaked"
            );
        }
        assert_eq!(
            env.iter().filter(|(k, _)| k == "PATH").count(),
            1,
            "PATH overridden once"
        );
        assert!(env.iter().any(|(k, v)| k == "PATH" && v == "/p"));
    }

    #[test]
    fn tail_keeps_the_last_bytes() {
        let t = Tail::default();
        t.push(&vec![b'a'; TAIL_BYTES]);
        t.push(b"end");
        let s = t.text();
        assert_eq!(s.len(), TAIL_BYTES);
        assert!(s.ends_with("aend"));
        t.push(&vec![b'z'; TAIL_BYTES * 2]);
        assert_eq!(t.text(), "z".repeat(TAIL_BYTES));
    }

    #[test]
    fn exit_info_text() {
        assert_eq!(
            ExitInfo {
                code: Some(3),
                signal: None
            }
            .to_string(),
            "exit code 3"
        );
        assert_eq!(
            ExitInfo {
                code: None,
                signal: Some(9)
            }
            .to_string(),
            "killed by signal 9 (SIGKILL)"
        );
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                let st = s.rsplit(')').next().unwrap_or("").trim_start();
                !st.starts_with('Z') && !st.starts_with('X')
            })
            .unwrap_or(false)
    }

    fn wait_dead(pid: i32) -> bool {
        for _ in 0..300 {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn child_setup_and_pdeathsig_follow_the_spawn_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let spawner = Arc::new(Spawner::new().unwrap());
        // A file the IDE opened without O_CLOEXEC must not reach the child.
        let leaked = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: clearing FD_CLOEXEC on our own fd.
        unsafe { libc::fcntl(leaked.as_raw_fd(), libc::F_SETFD, 0) };
        let (s2, h) = (spawner.clone(), rt.handle().clone());
        // Requested from a thread that ends right away (like a retiring
        // blocking-pool thread): the child must not die with it.
        let child = std::thread::spawn(move || {
            s2.spawn(
                SpawnSpec {
                    program: "sleep".into(),
                    args: vec!["30".into()],
                    cwd: "/".into(),
                    env: vec![("PLUGIN_ID".into(), "a.b".into())],
                    electron: false,
                },
                &h,
            )
            .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.pid();
        std::thread::sleep(Duration::from_millis(200));
        assert!(alive(pid), "the child died with the requesting thread");
        // SAFETY: getpgid reads the child's group.
        assert_eq!(unsafe { libc::getpgid(pid) }, pid, "own process group");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        assert!(vars.contains(&&b"NODE_CHANNEL_FD=3"[..]));
        assert!(vars.contains(&&b"NODE_CHANNEL_SERIALIZATION_MODE=json"[..]));
        assert!(vars.contains(&&b"PLUGIN_ID=a.b"[..]));
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut fds: Vec<i32> = fds.iter().map(|f| f.parse().unwrap()).collect();
        fds.sort_unstable();
        assert_eq!(fds, vec![0, 1, 2, 3], "only stdio and the channel");
        let fd3 = std::fs::read_link(format!("/proc/{pid}/fd/3")).unwrap();
        assert!(fd3.to_string_lossy().starts_with("socket:"), "{fd3:?}");
        assert_eq!(
            std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap(),
            PathBuf::from("/dev/null")
        );
        assert_eq!(find_tagged(child.tag()), vec![pid]);
        drop(leaked);
        // The spawn thread ends: the kernel kills its children.
        spawner.shutdown();
        assert!(wait_dead(pid), "PR_SET_PDEATHSIG did not fire");
        let exit = rt
            .block_on(child.wait_exit(Duration::from_secs(3)))
            .unwrap();
        assert_eq!(exit.signal, Some(libc::SIGKILL));
    }
}
