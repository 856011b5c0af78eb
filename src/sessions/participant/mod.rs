//! [`Participant`]: the registry records, the inbox and the gate of one host
//! object, and the sends it makes. See the module documentation.
//!
//! This file holds the shared state and the public API; the work is in
//! `settings` (the validated configuration), `lifecycle` (sessions, records,
//! the inbox), `inbound` (frames in, the gate, the host's decisions), `send`
//! (peers, addresses, sends, receipts) and `exit` (the exit-time cleanup).

use crate::shared::sync::lock;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use subtle::ConstantTimeEq;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::controllers::{Controller, Grants};
use super::frames::{
    status_frame_json, user_frame_json, ControlFrame, Frame, UserFrame, MAX_FRAME_UNITS,
};
use super::gate::{
    Action, DecideOutcome, Entry, Gate, HeldExpiry, InboundSettings, Now, Receipt, SessionView,
};
use super::inbox::{self, Credential, Handler, LINE_DEADLINE};
use super::names::{
    defang, flatten_label, format_display, format_envelope, is_valid_kind, js_trim, peer_ref,
    resolve_session_name, utf16_len, OriginKind,
};
use super::net::{self, probe, send_lines, Verdict, SEND_TIMEOUT};
use super::outbox::{Outbox, SendState};
use super::registry::{self, Identity, ReadOutcome, RecordInfo, RecordOut, Resolution};
use super::{
    Config, HeldFn, HeldInfo, InboundMessage, MessageFn, MessageInfo, Origin, ParentSendOptions,
    PeerInfo, ReceiptFn, RegisterOptions, SendOptions, SendResult, SessionInfo,
    MESSAGING_SOCKET_ENV, MESSAGING_TOKEN_ENV,
};
use crate::error::{Error, Result, Status};
use crate::events::HostLink;
use crate::host::{LogFn, LogLevel, Logger, Slot};
use crate::runtime::{self, RuntimeRef};
use crate::shared::rand::{random_hex, uuid_v4};

mod exit;
mod inbound;
mod lifecycle;
mod send;
mod settings;

use exit::{exit_add, exit_remove, ExitItem};
use lifecycle::session_info;
use settings::Settings;

/// One registered session.
#[derive(Debug, Clone)]
struct Registration {
    slot: u64,
    session_id: String,
    name: String,
    cwd: String,
    kind: String,
    started_at: u64,
    record_path: PathBuf,
    child_token: String,
    inbound: InboundSettings,
}

struct InboxRt {
    path: PathBuf,
    nonce_dir: Option<PathBuf>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    runtime: Arc<RuntimeRef>,
}

struct State {
    closed: bool,
    regs: Vec<Registration>,
    next_slot: u64,
    inbox: Option<InboxRt>,
    gate: Gate,
    outbox: Outbox,
}

impl State {
    fn handle(&self) -> Option<Handle> {
        self.inbox.as_ref().map(|i| i.runtime.handle().clone())
    }
    fn inbox_path(&self) -> Option<String> {
        self.inbox
            .as_ref()
            .map(|i| i.path.to_string_lossy().into_owned())
    }
    fn reg(&self, slot: u64) -> Option<&Registration> {
        self.regs.iter().find(|r| r.slot == slot)
    }
    fn find(&self, session_id: &str) -> Result<usize> {
        self.regs
            .iter()
            .position(|r| r.session_id == session_id)
            .ok_or_else(|| {
                Error::new(
                    Status::NotFound,
                    format!("no registered session {session_id:?}"),
                )
            })
    }
    /// The sending session: the named one, or the only one.
    fn sender(&self, from: Option<&str>) -> Result<Registration> {
        match from {
            Some(id) => Ok(self.regs[self.find(id)?].clone()),
            None => match self.regs.len() {
                0 => Err(Error::new(Status::NotRunning, "no session is registered")),
                1 => Ok(self.regs[0].clone()),
                _ => Err(Error::invalid_argument(
                    "several sessions are registered: say which one sends (fromSession)",
                )),
            },
        }
    }
}

/// The gate's window on our sessions.
struct View<'a> {
    multi: bool,
    regs: &'a [Registration],
    valid_controllers: Option<&'a HashSet<String>>,
}

impl SessionView for View<'_> {
    fn settings(&self, slot: u64) -> Option<InboundSettings> {
        self.regs.iter().find(|r| r.slot == slot).map(|r| r.inbound)
    }
    fn pin_valid(&self, frame: &UserFrame, slot: u64) -> bool {
        let Some(reg) = self.regs.iter().find(|r| r.slot == slot) else {
            return false;
        };
        match &frame.to_session_id {
            None => true,
            Some(id) if self.multi => id.eq_ignore_ascii_case(&reg.session_id),
            Some(id) => *id == reg.session_id,
        }
    }
    fn session_id(&self, slot: u64) -> Option<String> {
        self.regs
            .iter()
            .find(|r| r.slot == slot)
            .map(|r| r.session_id.clone())
    }
    fn multi(&self) -> bool {
        self.multi
    }
    fn controller_valid(&self, id: &str) -> Option<bool> {
        self.valid_controllers.map(|v| v.contains(id))
    }
}

// ---------------------------------------------------------------------------
// Exit cleanup (the one process-wide hook; see the module docs): exit.rs.

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
const SOCKET_KEY: u64 = u64::MAX;

// ---------------------------------------------------------------------------

struct Inner {
    settings: Settings,
    ipc_token: String,
    owner: u64,
    /// The callback thread and pull mode.
    link: HostLink,
    logger: Arc<Logger>,
    message_cb: Slot<MessageFn>,
    receipt_cb: Slot<ReceiptFn>,
    held_cb: Slot<HeldFn>,
    state: Mutex<State>,
    changed: Condvar,
    wake: Notify,
    ops: Mutex<()>,
    outstanding: AtomicUsize,
    outstanding_done: Notify,
    /// `peer-controllers.json`, parsed again only when it changed.
    controllers: Grants,
}

impl Inner {
    fn set_message_callback(self: &Arc<Self>, cb: Option<Arc<MessageFn>>) {
        let set = cb.is_some();
        self.message_cb.set(cb);
        if set {
            let inner = self.clone();
            self.link.dispatcher().post(move || inner.pump());
        }
    }
}

/// `{"type": kind, ...value's fields}` (`value` must serialise to an object).
fn typed_event<T: serde::Serialize + ?Sized>(kind: &str, value: &T) -> serde_json::Value {
    let mut v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
    if !v.is_object() {
        v = serde_json::json!({ "value": v });
    }
    v["type"] = serde_json::Value::String(kind.to_string());
    v
}

/// A cross-session participant: one inbox, one or more registered sessions.
pub struct Participant {
    inner: Arc<Inner>,
}

impl Participant {
    /// Validates the configuration. Nothing is bound or written until [`register`](Self::register).
    pub fn new(config: Config) -> Result<Participant> {
        let settings = Settings::from_config(config)?;
        let link = HostLink::new()?;
        let controllers = Grants::new(settings.controllers_path.clone());
        Ok(Participant {
            inner: Arc::new(Inner {
                settings,
                ipc_token: random_hex(32)?,
                controllers,
                owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
                logger: link.logger().clone(),
                link,
                message_cb: Slot::default(),
                receipt_cb: Slot::default(),
                held_cb: Slot::default(),
                state: Mutex::new(State {
                    closed: false,
                    regs: Vec::new(),
                    next_slot: 1,
                    inbox: None,
                    gate: Gate::new(Now::real()),
                    outbox: Outbox::default(),
                }),
                changed: Condvar::new(),
                wake: Notify::new(),
                ops: Mutex::new(()),
                outstanding: AtomicUsize::new(0),
                outstanding_done: Notify::new(),
            }),
        })
    }

    pub fn set_log_callback(&self, sink: Option<(LogFn, LogLevel)>) {
        self.inner.logger.set(sink);
    }

    /// In pull mode, delivers this object's log lines up to `max_level` as
    /// pulled `{"type":"log"}` events instead of a log callback (`None`: off;
    /// see [`crate::events::HostLink::enable_log_events`]).
    pub fn enable_log_events(&self, max_level: Option<LogLevel>) -> Result<()> {
        self.inner.link.enable_log_events(max_level)
    }

    /// Messages delivered to our sessions. Setting one hands over any
    /// messages accepted while none was set. Refused in pull mode.
    pub fn set_message_callback(&self, cb: Option<Arc<MessageFn>>) -> Result<()> {
        self.refuse_in_pull_mode()?;
        self.inner.set_message_callback(cb);
        Ok(())
    }

    /// Every transition of a message we sent. Refused in pull mode.
    pub fn set_receipt_callback(&self, cb: Option<Arc<ReceiptFn>>) -> Result<()> {
        self.refuse_in_pull_mode()?;
        self.inner.receipt_cb.set(cb);
        Ok(())
    }

    /// The whole hold buffer after each change. Refused in pull mode.
    pub fn set_held_callback(&self, cb: Option<Arc<HeldFn>>) -> Result<()> {
        self.refuse_in_pull_mode()?;
        self.inner.held_cb.set(cb);
        Ok(())
    }

    fn refuse_in_pull_mode(&self) -> Result<()> {
        if self.inner.link.pulling() {
            return Err(Error::new(
                Status::Refused,
                "pull mode is enabled: messages, receipts and held changes are queued \
                 (qc_participant_next_event), not given to callbacks",
            ));
        }
        Ok(())
    }

    /// Switches to pull mode: from now on delivered messages, receipts and
    /// hold-buffer changes are queued as `{"type":"message"|"receipt",…}` /
    /// `{"type":"held","held":[…]}` events instead of given to the callbacks
    /// (messages accepted before are handed over to the queue). Returns the
    /// handle that is readable while events wait (the same on every call).
    pub fn enable_events(&self) -> Result<crate::sys::event::RawEventHandle> {
        let was_pulling = self.inner.link.pulling();
        let handle = self.inner.link.enable_pull()?;
        if !was_pulling {
            let inner = &self.inner;
            let queue = |inner: &Arc<Inner>| {
                let weak = Arc::downgrade(inner);
                move |event: serde_json::Value| {
                    if let Some(inner) = weak.upgrade() {
                        inner.link.notify(event, None);
                    }
                }
            };
            let push = queue(inner);
            inner
                .receipt_cb
                .set(Some(Arc::new(move |r: &super::ReceiptEvent| {
                    push(typed_event("receipt", r))
                })));
            let push = queue(inner);
            inner.held_cb.set(Some(Arc::new(move |held: &[HeldInfo]| {
                push(serde_json::json!({ "type": "held", "held": held }))
            })));
            let push = queue(inner);
            inner.set_message_callback(Some(Arc::new(move |m: &InboundMessage| {
                push(typed_event("message", m))
            })));
        }
        Ok(handle)
    }

    /// The next queued event in pull mode (`None` when none waits); refused
    /// outside pull mode.
    pub fn next_event(&self) -> Result<Option<serde_json::Value>> {
        self.inner.link.next_event()
    }

    /// True when called on this participant's callback thread.
    pub fn on_callback_thread(&self) -> bool {
        self.inner.link.on_callback_thread()
    }

    /// Registers a session: binds the inbox if none is bound, then writes
    /// the record.
    pub fn register(&self, opts: RegisterOptions) -> Result<SessionInfo> {
        self.inner.register(opts)
    }

    /// Unregisters a session: its held and queued messages settle `expired`,
    /// its record is removed (if it still holds our pid and session id); the
    /// last one closes the inbox.
    pub fn unregister(&self, session_id: &str) -> Result<()> {
        self.inner.unregister(session_id)
    }

    /// Gives a session a new id (`None`: a fresh UUID), rewriting the same record file.
    pub fn rotate_session_id(
        &self,
        session_id: &str,
        new_session_id: Option<&str>,
    ) -> Result<SessionInfo> {
        self.inner.rotate(session_id, new_session_id)
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        let st = lock(&self.inner.state);
        let path = st.inbox_path().unwrap_or_default();
        st.regs.iter().map(|r| session_info(r, &path)).collect()
    }

    pub fn inbound_settings(&self, session_id: &str) -> Result<InboundSettings> {
        let st = lock(&self.inner.state);
        Ok(st.regs[st.find(session_id)?].inbound)
    }

    /// Changes how a session treats inbound messages and re-judges the held ones.
    pub fn update_inbound(&self, session_id: &str, settings: InboundSettings) -> Result<()> {
        self.inner.update_inbound(session_id, settings)
    }

    /// The variables a process the host starts for `session_id` needs to
    /// message it with origin `own-process`.
    pub fn child_env(&self, session_id: &str) -> Result<BTreeMap<String, String>> {
        let st = lock(&self.inner.state);
        let reg = &st.regs[st.find(session_id)?];
        let path = st
            .inbox_path()
            .ok_or_else(|| Error::new(Status::NotRunning, "the inbox is not bound"))?;
        Ok(BTreeMap::from([
            (MESSAGING_SOCKET_ENV.to_string(), path),
            (MESSAGING_TOKEN_ENV.to_string(), reg.child_token.clone()),
        ]))
    }

    /// Our inbox socket, while bound.
    pub fn ipc_path(&self) -> Option<String> {
        lock(&self.inner.state).inbox_path()
    }

    /// Every live record in the registry, newest first (sweeping what Qwen
    /// sweeps), with whether its inbox answered a dial.
    pub fn list(&self) -> Vec<RecordInfo> {
        let live = registry::list_live(&self.inner.settings.sessions_dir);
        let mut verdicts: BTreeMap<String, bool> = BTreeMap::new();
        live.iter()
            .map(|r| {
                let reachable = r.record.ipc_path.as_ref().is_some_and(|p| {
                    *verdicts
                        .entry(p.clone())
                        .or_insert_with(|| probe(p) == Verdict::Alive)
                });
                RecordInfo::from_live(r, reachable)
            })
            .collect()
    }

    /// The sessions that can be messaged, with their shortest address.
    /// Excludes `from_session`, or all of ours when `None`.
    pub fn peers(&self, from_session: Option<&str>) -> Result<Vec<PeerInfo>> {
        Ok(registry::with_addresses(
            self.inner.directory(from_session, true)?,
        ))
    }

    /// Resolves an address (`name`, `name [ref]`, `[ref]`, bare ref) against
    /// a fresh read of the registry.
    pub fn resolve(&self, address: &str, from_session: Option<&str>) -> Result<PeerInfo> {
        let peers = self.inner.directory(from_session, true)?;
        let i = self.inner.resolve_in(&peers, address, from_session)?;
        let mut p = peers[i].clone();
        p.address = registry::advertisable_address(&peers, i)
            .unwrap_or_else(|| js_trim(address).to_string());
        Ok(p)
    }

    /// Sends a message to another session; see [`SendOptions`].
    pub fn send(&self, opts: SendOptions) -> Result<SendResult> {
        self.inner.send(opts)
    }

    /// Sends a message to the Qwen session that started this process
    /// (`QWEN_CODE_MESSAGING_SOCKET`/`_TOKEN`), with origin `own-process`.
    pub fn send_to_parent(&self, opts: ParentSendOptions) -> Result<SendResult> {
        self.inner.send_to_parent(opts)
    }

    /// The current state of a message we sent.
    pub fn send_state(&self, msg_id: &str) -> Result<SendState> {
        lock(&self.inner.state)
            .outbox
            .state(msg_id)
            .ok_or_else(|| Error::new(Status::NotFound, format!("no tracked message {msg_id:?}")))
    }

    /// Waits until a sent message leaves `pending` (or, with `final_only`,
    /// reaches a final state), at most `timeout`; returns its state then
    /// (still `pending`/`held` on timeout, and at once when no inbox is bound,
    /// since no receipt can arrive). `NotFound` for an id we are not tracking
    /// (the 200 most recent sends are); `NotRunning` once closed.
    pub fn wait(&self, msg_id: &str, timeout: Duration, final_only: bool) -> Result<SendState> {
        self.inner.wait(msg_id, timeout, final_only)
    }

    /// How many times `peer-controllers.json` was read and parsed (a test
    /// hook: the file is parsed again only when it changed).
    #[doc(hidden)]
    pub fn controller_file_parses(&self) -> usize {
        self.inner.controllers.parses()
    }

    /// The held messages, oldest first.
    pub fn held(&self) -> Vec<HeldInfo> {
        self.inner.held()
    }

    /// Releases a held message into the input queue (receipt `delivered`).
    pub fn release(&self, msg_id: &str) -> Result<()> {
        self.inner.decide(msg_id, true)
    }

    /// Denies a held message (receipt `denied`).
    pub fn deny(&self, msg_id: &str) -> Result<()> {
        self.inner.decide(msg_id, false)
    }

    /// Marks a delivered message as consumed (needed with `manualAck`).
    pub fn ack(&self, msg_id: &str) -> Result<()> {
        let mut st = lock(&self.inner.state);
        let q = st.gate.queue_mut();
        match q
            .iter()
            .position(|e| e.dispatched && e.frame.msg_id == msg_id)
        {
            Some(i) => {
                q.remove(i);
                Ok(())
            }
            None => Err(Error::new(
                Status::NotFound,
                format!("no delivered message {msg_id:?} awaits acknowledgement"),
            )),
        }
    }

    /// Unregisters every session and closes the inbox. Idempotent; also done on drop.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        let _ = self.inner.close();
        self.inner.message_cb.set(None);
        self.inner.receipt_cb.set(None);
        self.inner.held_cb.set(None);
        self.inner.logger.set(None);
        self.inner.link.shutdown();
    }
}

fn describe_send_error(e: &net::SendError) -> Error {
    match e.code {
        Some("ENOENT") | Some("ECONNREFUSED") => Error::new(
            Status::NotFound,
            "that session has exited and its address is stale; list the sessions again",
        ),
        Some("EAGAIN") | Some("EBUSY") => Error::new(
            Status::Io,
            format!(
                "that session is alive but momentarily busy; retry shortly ({})",
                e.message
            ),
        ),
        _ => Error::new(Status::Io, e.message.clone()),
    }
}
