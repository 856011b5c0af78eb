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
//! ## In the child, before exec (`crate::sys::process::spawn_with_channel`)
//! Only async-signal-safe calls: `setpgid(0, 0)` (own process group),
//! `prctl(PR_SET_PDEATHSIG, SIGKILL)` then a `getppid()` check (the parent
//! may already be gone), marking every inherited fd ≥ 3 close-on-exec
//! (`close_range(…, CLOSE_RANGE_CLOEXEC)`, best effort, so the plugin gets
//! none of the IDE's files even if the IDE leaked one without O_CLOEXEC),
//! then `dup2` of the channel to fd 3.
//!
//! On macOS, which has no parent death signal, a small watchdog forked in
//! the child before exec waits in kqueue for the host's exit and then kills
//! the plugin's process group (see `crate::sys`'s `unix/macos.rs`).
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
//! them by scanning the environments of our user's processes
//! ([`crate::sys::process::find_by_env`]). Why not the
//! alternatives: cgroups need a delegated subtree, which a process inside an
//! IDE does not have; `PR_SET_CHILD_SUBREAPER` is process-wide and would
//! make every orphan of the IDE its child (it would have to be set on the
//! IDE). A process that wipes its own environment escapes the scan; the
//! process group and PDEATHSIG still cover the ordinary cases.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::error::{Error, Result, Status};
use crate::sys::platform::EnvRules;
use crate::sys::process::{ChannelChild, ChannelCommand, ChannelEnd, PipeReader, Process};
pub use crate::sys::ExitInfo;
use crate::sys::Signal;

pub mod node;

/// The per-instance tag variable every descendant of a plugin inherits.
pub const TAG_VAR: &str = "QWEN_COMPANION_PLUGIN_INSTANCE";
/// The fd the child's channel end is moved to.
pub const CHANNEL_FD: i32 = crate::sys::process::CHANNEL_FD;
/// Bytes of stdout and of stderr kept for error messages.
pub const TAIL_BYTES: usize = 8 * 1024;

/// Host variables a plugin may see on this platform (plus every `LC_*` on
/// POSIX); see `sys::platform::PLUGIN_ENV`.
pub const ALLOWED_ENV: &[&str] = crate::sys::platform::PLUGIN_ENV.names;

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The node (or Electron) binary: a path, or a name looked up in PATH,
    /// the login shell's PATH and the usual install folders ([`node`]).
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
    env_with(std::env::vars_os(), extra, crate::sys::platform::PLUGIN_ENV)
}

/// [`plugin_env`] from a given host environment under `rules`: a host
/// variable is kept (with the host's spelling of its name) when `rules`
/// allows it, then each of `extra` replaces any variable of the same name —
/// names compared case-insensitively where the platform does (Windows).
pub fn env_with(
    host: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(OsString, OsString)],
    rules: EnvRules,
) -> Vec<(OsString, OsString)> {
    let same = |a: &str, b: &str| {
        if rules.case_insensitive {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    let mut env: Vec<(OsString, OsString)> = host
        .into_iter()
        .filter(|(k, _)| {
            k.to_str().is_some_and(|k| {
                rules.names.iter().any(|n| same(n, k))
                    || (rules.locale_prefix && k.starts_with("LC_") && k.len() > 3)
            })
        })
        .collect();
    for (k, v) in extra {
        env.retain(|(ek, _)| match (ek.to_str(), k.to_str()) {
            (Some(a), Some(b)) => !same(a, b),
            _ => ek != k,
        });
        env.push((k.clone(), v.clone()));
    }
    env
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

type SpawnJob = (SpawnSpec, mpsc::Sender<io::Result<ChannelChild>>);

/// The dedicated `qc-plugin-spawn` thread of one plugin host (see the
/// module docs: PR_SET_PDEATHSIG follows the spawning thread). Dropping it
/// ends the thread — the kernel then kills any child still running.
pub struct Spawner {
    tx: Mutex<Option<mpsc::Sender<SpawnJob>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn spawn_now(spec: SpawnSpec) -> io::Result<ChannelChild> {
    let mut env = plugin_env(&spec.env);
    if spec.electron {
        env.retain(|(k, _)| k != "ELECTRON_RUN_AS_NODE");
        env.push(("ELECTRON_RUN_AS_NODE".into(), "1".into()));
    }
    crate::sys::process::spawn_with_channel(ChannelCommand {
        program: spec.program,
        args: spec.args,
        cwd: spec.cwd,
        env,
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

    fn spawn_raw(&self, spec: SpawnSpec) -> io::Result<ChannelChild> {
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

    /// Spawns on the spawn thread (blocks the caller until done, the first
    /// time for up to [`node::SHELL_TIMEOUT`] more while `node` is looked
    /// for: call it off the runtime workers, e.g. in `spawn_blocking`). A
    /// bare program name is resolved to an absolute path by
    /// [`node::resolve`]. `rt` runs the drain tasks. The tag variable is
    /// added to `spec.env` here.
    pub fn spawn(&self, mut spec: SpawnSpec, rt: &tokio::runtime::Handle) -> Result<Child> {
        let program = spec.program.clone();
        let resolved = node::resolve(&program).map_err(|msg| Error::new(Status::NotFound, msg))?;
        if let Some(path) = node::path_with_node_dir(&resolved, std::env::var_os("PATH").as_deref())
        {
            spec.env.push(("PATH".into(), path));
        }
        spec.program = resolved.into_os_string();
        let tag = crate::shared::rand::random_hex(16)?;
        spec.env.push((TAG_VAR.into(), tag.clone().into()));
        let s = self.spawn_raw(spec).map_err(|e| {
            Error::new(
                Status::Io,
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )
        })?;
        let _enter = rt.enter();
        let (exit_tx, exit_rx) = watch::channel(None);
        let process = Arc::new(s.process);
        let pid = process.pid() as i32;
        let waiting = process.clone();
        let waiter = std::thread::Builder::new()
            .name("qc-plugin-wait".into())
            .spawn(move || {
                let _ = exit_tx.send(Some(waiting.wait()));
            });
        if let Err(e) = waiter {
            // Without a waiter we could never tell its exit: end it now.
            process.signal_group(Signal::Kill);
            process.wait();
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
            process,
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

fn drain(pipe: PipeReader, tail: Arc<Tail>, done: watch::Sender<bool>) {
    let rx = match pipe.into_async() {
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
    process: Arc<Process>,
    tag: String,
    channel: Mutex<Option<ChannelEnd>>,
    exit: watch::Receiver<Option<ExitInfo>>,
    stdout_tail: Arc<Tail>,
    stderr_tail: Arc<Tail>,
    stderr_done: watch::Receiver<bool>,
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
    pub fn take_channel(&self) -> Option<ChannelEnd> {
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
                .any(|p| self.process.group_contains(p as u32))
    }

    /// Signals the process group when it is still ours (blocking).
    pub fn signal_group_blocking(&self, sig: Signal) {
        if self.group_is_ours() {
            self.process.signal_group(sig);
        }
    }

    /// SIGKILLs the group and every tagged descendant now (blocking: scans /proc).
    pub fn kill_all_blocking(&self) {
        // After the leader is reaped the group may live on in attached
        // grandchildren; `signal_group_blocking` checks it is still ours.
        self.signal_group_blocking(Signal::Kill);
        kill_tagged(&self.tag);
    }

    /// Ends the process and all its descendants: waits `grace` for it to
    /// exit by itself (the caller closed the channel), SIGTERMs the group,
    /// waits `grace` again, SIGKILLs the group, then kills every process
    /// still tagged. Returns the exit status.
    pub async fn end(self: &Arc<Self>, grace: Duration) -> Option<ExitInfo> {
        let mut exit = self.wait_exit(grace).await;
        let me = self.clone();
        let _ =
            tokio::task::spawn_blocking(move || me.signal_group_blocking(Signal::Terminate)).await;
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
    crate::sys::process::find_by_env(&format!("{TAG_VAR}={tag}"))
        .into_iter()
        .map(|p| p as i32)
        .collect()
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
            crate::sys::process::signal(p as u32, Signal::Stop);
        }
        for &p in &pids {
            crate::sys::process::signal(p as u32, Signal::Kill);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests;
