//! One running plugin process: its channel, pending calls, reader and exit
//! monitor.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::{lock, CallError, Counters, ErrorKind, PluginEvent, PluginSlot, Shared};
use crate::host::LogLevel;
use crate::plugins::ipc::{self, Frame, LineReader};
use crate::plugins::process::{Child, SpawnSpec};

/// A plugin's answer to one call.
pub(crate) enum Reply {
    Result {
        content: Vec<Value>,
        details: Option<Value>,
    },
    ToolError(String),
    Protocol(String),
}

/// Request ids answered or given up recently (to tell duplicates and late
/// replies from made-up ids).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finished {
    Answered,
    Abandoned,
}

const RECENT_IDS: usize = 1024;
/// Invalid lines logged per instance (the rest are only counted).
const LOGGED_INVALID: u64 = 10;

pub(crate) struct Instance {
    pub plugin_id: String,
    pub child: Arc<Child>,
    stream: Arc<crate::sys::ipc::LocalStream>,
    write_lock: tokio::sync::Mutex<()>,
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    recent: Mutex<VecDeque<(String, Finished)>>,
    /// NODE_HANDLE_NACK answers seen.
    nacks: watch::Sender<u64>,
    /// Cancelled when the process has exited (after `failure` is set).
    pub dead: CancellationToken,
    /// Cancelled when the reader has stopped (EOF, error, oversize).
    reader_done: CancellationToken,
    /// Cancelled when the host stops this instance: waiting host requests
    /// answer `host_error` at once.
    pub closing: CancellationToken,
    /// Why calls fail from now on.
    failure: Mutex<Option<CallError>>,
    /// The host ends (or ended) it: its exit is expected.
    expected: AtomicBool,
    /// Being killed: no new call goes to it.
    killing: AtomicBool,
    /// host_request answers in flight (unload lets them leave first).
    pub host_tasks: AtomicUsize,
    invalid_logged: std::sync::atomic::AtomicU64,
}

impl Instance {
    pub fn is_dead(&self) -> bool {
        self.dead.is_cancelled() || self.killing.load(Ordering::Acquire)
    }

    pub fn mark_expected(&self) {
        self.expected.store(true, Ordering::Release);
    }

    fn set_failure(&self, e: CallError) {
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(e);
        }
    }

    /// The error of calls that cannot complete on this instance.
    pub fn failure(&self) -> CallError {
        lock(&self.failure).clone().unwrap_or_else(|| {
            CallError::new(
                ErrorKind::Exited,
                format!("the plugin {} stopped", self.plugin_id),
            )
        })
    }

    /// Spawns the plugin and waits until Node's event loop answers (the
    /// caller announces the start once no lock is held).
    pub async fn start(
        shared: &Arc<Shared>,
        slot: &Arc<PluginSlot>,
    ) -> Result<Arc<Instance>, CallError> {
        let entry = slot.entry();
        let m = entry.manifest.clone();
        let s = &shared.settings;
        let data_dir = s.plugins_dir.join("data").join(&m.id);
        let spec = SpawnSpec {
            program: s.node.clone().into(),
            args: vec![m.main_path.clone().into_os_string()],
            cwd: m.root.clone(),
            env: vec![
                ("PLUGIN_ID".into(), m.id.clone().into()),
                ("PLUGIN_DATA_DIR".into(), data_dir.clone().into_os_string()),
            ],
            electron: s.electron,
        };
        let sh = shared.clone();
        let handle = shared.rt.handle().clone();
        let child = tokio::task::spawn_blocking(move || {
            crate::shared::fs::ensure_private_dir(&data_dir)?;
            sh.spawner.spawn(spec, &handle)
        })
        .await
        .map_err(|e| CallError::new(ErrorKind::Host, format!("spawn failed: {e}")))?
        .map_err(|e| {
            CallError::new(
                ErrorKind::Host,
                format!("cannot start the plugin {}: {}", m.id, e.message),
            )
        })?;
        let child = Arc::new(child);
        Counters::bump(&slot.counters.starts);
        let stream = match child.take_channel().map(crate::sys::ipc::channel_stream) {
            Some(Ok(s)) => Arc::new(s),
            other => {
                let c = child.clone();
                let _ = tokio::task::spawn_blocking(move || c.kill_all_blocking()).await;
                let why = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "no channel".into(),
                };
                return Err(CallError::new(
                    ErrorKind::Host,
                    format!("cannot open the channel to plugin {}: {why}", m.id),
                ));
            }
        };
        let inst = Arc::new(Instance {
            plugin_id: m.id.clone(),
            child,
            stream,
            write_lock: tokio::sync::Mutex::new(()),
            pending: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            nacks: watch::channel(0).0,
            dead: CancellationToken::new(),
            reader_done: CancellationToken::new(),
            closing: CancellationToken::new(),
            failure: Mutex::new(None),
            expected: AtomicBool::new(false),
            killing: AtomicBool::new(false),
            host_tasks: AtomicUsize::new(0),
            invalid_logged: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(read_loop(
            Arc::downgrade(shared),
            slot.clone(),
            inst.clone(),
        ));
        tokio::spawn(exit_monitor(
            Arc::downgrade(shared),
            slot.clone(),
            inst.clone(),
        ));

        // Started = the event loop answers (the entry script's synchronous
        // part is done and its listeners are installed).
        match inst.probe(s.start_timeout).await {
            Ok(true) => Ok(inst),
            Ok(false) => {
                let e = CallError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the plugin {} did not start within {} ms; it was stopped",
                        m.id,
                        s.start_timeout.as_millis()
                    ),
                );
                inst.kill(e.clone(), &slot.counters);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends `{"cmd":"NODE_HANDLE"}` (no fd), which Node answers itself
    /// with `NODE_HANDLE_NACK`: `Ok(true)` when the answer came within
    /// `limit`, `Ok(false)` when not, `Err` when the process died.
    pub async fn probe(&self, limit: Duration) -> Result<bool, CallError> {
        let mut rx = self.nacks.subscribe();
        let seen = *rx.borrow_and_update();
        let wait = async {
            if self.send(&json!({"cmd": "NODE_HANDLE"})).await.is_err() {
                // The write failing means the channel is gone: wait for death.
                self.dead.cancelled().await;
            }
            let _ = rx.wait_for(|n| *n > seen).await;
        };
        tokio::select! {
            r = tokio::time::timeout(limit, wait) => Ok(r.is_ok()),
            _ = self.dead.cancelled() => Err(self.failure()),
        }
    }

    /// Writes one message (serialised with other writers).
    pub async fn send(&self, msg: &Value) -> std::io::Result<()> {
        let bytes = ipc::encode(msg);
        let _g = self.write_lock.lock().await;
        ipc::send_all(&self.stream, &bytes).await
    }

    /// Registers a pending call.
    pub fn expect(&self, request_id: &str) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(request_id.to_string(), tx);
        rx
    }

    /// Gives up a pending call (timeout, caller gone).
    pub fn abandon(&self, request_id: &str) {
        if lock(&self.pending).remove(request_id).is_some() {
            self.remember(request_id, Finished::Abandoned);
        }
    }

    fn remember(&self, id: &str, how: Finished) {
        let mut r = lock(&self.recent);
        if r.len() >= RECENT_IDS {
            r.pop_front();
        }
        r.push_back((id.to_string(), how));
    }

    /// Kills the process group and descendants now; calls fail with `why`.
    pub fn kill(&self, why: CallError, counters: &Counters) {
        self.set_failure(why);
        self.mark_expected();
        if !self.killing.swap(true, Ordering::AcqRel) {
            Counters::bump(&counters.kills);
            let child = self.child.clone();
            tokio::task::spawn_blocking(move || child.kill_all_blocking());
        }
    }

    /// Graceful end: host requests in flight are answered, the channel is
    /// closed, then the process group gets the grace / SIGTERM / SIGKILL
    /// sequence and every tagged descendant is killed.
    pub async fn stop(self: &Arc<Self>, grace: Duration) {
        self.mark_expected();
        self.killing.store(true, Ordering::Release);
        self.set_failure(CallError::new(
            ErrorKind::Exited,
            format!("the plugin {} was stopped by the host", self.plugin_id),
        ));
        self.closing.cancel();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
        while self.host_tasks.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Node sees EOF.
        crate::sys::ipc::shutdown_write(&self.stream);
        self.child.end(grace).await;
        // Wait for the monitor to publish the exit (bounded: a reaped
        // child's monitor runs at once).
        let _ = tokio::time::timeout(Duration::from_secs(3), self.dead.cancelled()).await;
    }

    fn dispatch_reply(&self, counters: &Counters, msg: &Value, reply: Reply) {
        let Some(id) = msg.get("requestId").and_then(Value::as_str) else {
            Counters::bump(&counters.unknown_replies);
            return;
        };
        let tx = lock(&self.pending).remove(id);
        match tx {
            Some(tx) => {
                self.remember(id, Finished::Answered);
                let _ = tx.send(reply);
            }
            None => {
                let known = lock(&self.recent)
                    .iter()
                    .rev()
                    .find(|(r, _)| r == id)
                    .map(|(_, f)| *f);
                match known {
                    Some(Finished::Answered) => Counters::bump(&counters.duplicate_replies),
                    Some(Finished::Abandoned) => Counters::bump(&counters.late_replies),
                    None => Counters::bump(&counters.unknown_replies),
                }
            }
        }
    }
}

fn tool_result(msg: &Value) -> Reply {
    match msg.get("content") {
        Some(Value::Array(c)) => Reply::Result {
            content: c.clone(),
            details: msg.get("details").cloned(),
        },
        other => Reply::Protocol(format!(
            "tool_result.content must be an array, got {}",
            match other {
                None => "nothing".to_string(),
                Some(v) => kind_of(v).to_string(),
            }
        )),
    }
}

pub(crate) use crate::shared::json::kind as kind_of;

fn tool_error(msg: &Value) -> Reply {
    let text = match msg.get("message") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "the tool failed without a message".to_string(),
        Some(v) => v.to_string(),
    };
    Reply::ToolError(text)
}

async fn read_loop(shared: Weak<Shared>, slot: Arc<PluginSlot>, inst: Arc<Instance>) {
    read_frames(&shared, &slot, &inst).await;
    inst.reader_done.cancel();
}

async fn read_frames(shared: &Weak<Shared>, slot: &Arc<PluginSlot>, inst: &Arc<Instance>) {
    let max = shared
        .upgrade()
        .map(|s| s.settings.max_message_bytes)
        .unwrap_or(ipc::DEFAULT_MAX_MESSAGE_BYTES);
    let mut reader = LineReader::new(max);
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = Vec::new();
    loop {
        let r = tokio::select! {
            r = ipc::recv_chunk(&inst.stream, &mut buf) => r,
            _ = inst.dead.cancelled() => return,
        };
        let (n, fds) = match r {
            Ok(x) => x,
            Err(e) => {
                on_channel_closed(shared, slot, inst, Some(e.to_string())).await;
                return;
            }
        };
        if fds > 0 {
            slot.counters
                .fds_closed
                .fetch_add(fds as u64, Ordering::Relaxed);
        }
        if n == 0 {
            let partial = reader.finish();
            if partial > 0 {
                if let Some(s) = shared.upgrade() {
                    s.log(LogLevel::Warn, || {
                        format!(
                            "plugin {}: discarded a partial message of {partial} bytes at end of stream",
                            inst.plugin_id
                        )
                    });
                }
            }
            on_channel_closed(shared, slot, inst, None).await;
            return;
        }
        lines.clear();
        let pushed = reader.push(&buf[..n], &mut lines);
        let mut slow_down = None;
        for line in lines.drain(..) {
            if let Some(wait) = handle_line(shared, slot, inst, &line) {
                slow_down = Some(wait);
            }
        }
        if let Some(wait) = slow_down {
            // The embedder is not taking this plugin's events: read no more
            // of it until it does (the plugin's own send queue holds the
            // rest). Other plugins have readers of their own.
            tokio::select! {
                _ = wait => {}
                _ = inst.dead.cancelled() => return,
            }
        }
        if let Err(e) = pushed {
            let err = CallError::new(
                ErrorKind::TooLarge,
                format!(
                    "the plugin {} sent a message larger than {} bytes; it was stopped",
                    inst.plugin_id, e.limit
                ),
            );
            if let Some(s) = shared.upgrade() {
                s.log(LogLevel::Warn, || err.message.clone());
            }
            inst.kill(err, &slot.counters);
            return;
        }
    }
}

/// EOF or a read error on the channel: if the process is exiting, the exit
/// monitor reports it; else the plugin closed its channel — kill it.
async fn on_channel_closed(
    shared: &Weak<Shared>,
    slot: &Arc<PluginSlot>,
    inst: &Arc<Instance>,
    error: Option<String>,
) {
    let grace = shared
        .upgrade()
        .map(|s| s.settings.kill_grace)
        .unwrap_or(Duration::from_secs(2))
        .max(Duration::from_millis(500));
    if inst.child.wait_exit(grace).await.is_some() {
        return;
    }
    let why = match error {
        Some(e) => format!("reading from the plugin {} failed: {e}", inst.plugin_id),
        None => format!(
            "the plugin {} closed its IPC channel and can no longer answer",
            inst.plugin_id
        ),
    };
    inst.kill(CallError::new(ErrorKind::Protocol, why), &slot.counters);
}

/// Handles one line of the plugin; gives back what the embedder asks of the
/// reader (see [`super::SlowDown`]).
fn handle_line(
    shared: &Weak<Shared>,
    slot: &Arc<PluginSlot>,
    inst: &Arc<Instance>,
    line: &[u8],
) -> super::SlowDown {
    let c = &slot.counters;
    match ipc::classify(line) {
        Frame::Empty => {}
        Frame::Invalid(e) => {
            Counters::bump(&c.invalid_lines);
            if inst.invalid_logged.fetch_add(1, Ordering::Relaxed) < LOGGED_INVALID {
                if let Some(s) = shared.upgrade() {
                    s.log(LogLevel::Warn, || {
                        format!(
                            "plugin {}: ignored a line that is not JSON ({} bytes): {e}",
                            inst.plugin_id,
                            line.len()
                        )
                    });
                }
            }
        }
        Frame::Internal(v) => {
            Counters::bump(&c.internal_messages);
            match v.get("cmd").and_then(Value::as_str) {
                Some("NODE_HANDLE") => {
                    // The fd (if any) is closed already; without an ACK
                    // Node would hold back every later message.
                    let inst = inst.clone();
                    tokio::spawn(async move {
                        let _ = inst.send(&json!({"cmd": "NODE_HANDLE_ACK"})).await;
                    });
                }
                Some("NODE_HANDLE_NACK") => {
                    inst.nacks.send_modify(|n| *n += 1);
                }
                _ => {}
            }
        }
        Frame::Message(msg) => match msg.get("type").and_then(Value::as_str) {
            Some("tool_result") => inst.dispatch_reply(c, &msg, tool_result(&msg)),
            Some("tool_error") => inst.dispatch_reply(c, &msg, tool_error(&msg)),
            Some("host_request") => {
                Counters::bump(&c.host_requests);
                if let Some(s) = shared.upgrade() {
                    super::capability::spawn_host_request(s, slot.clone(), inst.clone(), msg);
                }
            }
            Some("ui_push") => match msg.get("channel").and_then(Value::as_str) {
                Some(channel) => {
                    Counters::bump(&c.ui_pushes);
                    if let Some(s) = shared.upgrade() {
                        return s.emit(PluginEvent::UiPush {
                            plugin: inst.plugin_id.clone(),
                            channel: channel.to_string(),
                            payload: msg.get("payload").cloned().unwrap_or(Value::Null),
                        });
                    }
                }
                None => Counters::bump(&c.ignored_messages),
            },
            _ => Counters::bump(&c.ignored_messages),
        },
    }
    None
}

async fn exit_monitor(shared: Weak<Shared>, slot: Arc<PluginSlot>, inst: Arc<Instance>) {
    let exit = loop {
        if let Some(e) = inst.child.wait_exit(Duration::from_secs(3600)).await {
            break e;
        }
    };
    // What the plugin wrote before exiting is still in the socket: let the
    // reader deliver it (a reply sent right before `process.exit()` counts).
    let _ = tokio::time::timeout(Duration::from_millis(500), inst.reader_done.cancelled()).await;
    let tail = inst
        .child
        .stderr_tail_settled(Duration::from_millis(200))
        .await;
    let expected = inst.expected.load(Ordering::Acquire);
    let mut e = CallError::new(
        ErrorKind::Exited,
        if tail.is_empty() {
            format!("the plugin {} exited ({exit})", inst.plugin_id)
        } else {
            format!(
                "the plugin {} exited ({exit}); its last error output: {tail}",
                inst.plugin_id
            )
        },
    );
    e.exit = Some(exit);
    e.stderr_tail = Some(tail.clone());
    {
        // A failure set before (timeout kill, oversize, unload) keeps its
        // kind; it gains the exit details.
        let mut f = lock(&inst.failure);
        match f.as_mut() {
            Some(prev) => {
                prev.exit = Some(exit);
                prev.stderr_tail = Some(tail.clone());
            }
            None => *f = Some(e),
        }
    }
    inst.dead.cancel();
    // Wake every pending call (they see `dead`) and drop their senders.
    lock(&inst.pending).clear();
    // Leave no descendant behind (an attached or setsid'd grandchild).
    let child = inst.child.clone();
    let _ = tokio::task::spawn_blocking(move || child.kill_all_blocking()).await;
    let Some(shared) = shared.upgrade() else {
        return;
    };
    shared.log(
        if expected {
            LogLevel::Info
        } else {
            LogLevel::Warn
        },
        || {
            if tail.is_empty() {
                format!("plugin {} exited ({exit})", inst.plugin_id)
            } else {
                format!("plugin {} exited ({exit}); stderr: {tail}", inst.plugin_id)
            }
        },
    );
    shared.emit(PluginEvent::Exit {
        plugin: inst.plugin_id.clone(),
        code: exit.code,
        signal: exit.signal,
        expected,
        stderr_tail: tail,
    });
    if !expected {
        shared.on_crash(&slot, &exit);
    }
}
