//! [`Participant`]: the registry records, the inbox and the gate of one host
//! object, and the sends it makes. See the module documentation.

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
use crate::events::Dispatcher;
use crate::host::{LogFn, LogLevel, Logger, Slot};
use crate::runtime::{self, RuntimeRef};
use crate::shared::rand::{random_hex, uuid_v4};

mod exit;
mod send;

use exit::{exit_add, exit_remove, ExitItem};

fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Validated, immutable settings.
#[derive(Debug, Clone)]
struct Settings {
    sessions_dir: PathBuf,
    controllers_path: PathBuf,
    kind: String,
    version: Option<String>,
    multi: bool,
    socket_path: Option<PathBuf>,
    runtime_dir: Option<PathBuf>,
    tmp_dir: Option<PathBuf>,
    sweep: bool,
    inbound: InboundSettings,
    manual_ack: bool,
    controller_token: Option<String>,
    parent: Option<(String, String)>,
    cleanup_at_exit: bool,
    line_deadline: Duration,
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The configured home (made absolute, `~` expanded), else Qwen's own
/// resolution of `$QWEN_HOME` / `~/.qwen` ([`crate::shared::fs::qwen_home`]).
fn resolve_qwen_home(over: Option<&Path>) -> Result<PathBuf> {
    match over {
        Some(p) => match p.to_str() {
            Some(s) => crate::shared::fs::resolve_user_dir(s),
            None => Ok(crate::shared::fs::absolute(p)),
        },
        None => crate::shared::fs::qwen_home(),
    }
}

/// A configured controller token goes on the auth line as given: only an
/// empty one is refused here. The receiving inbox is the judge (Qwen looks up
/// only `qpc_…` tokens of at most 256 characters it holds a grant for, and
/// drops every other connection silently, so such a send gets no receipt).
fn validate_controller_token(t: &str) -> Result<()> {
    if t.is_empty() {
        Err(Error::invalid_argument(
            "controllerToken is empty; give the token `qwen sessions controllers add` printed",
        ))
    } else {
        Ok(())
    }
}

impl Settings {
    fn from_config(c: Config) -> Result<Settings> {
        let qwen_home = resolve_qwen_home(c.qwen_home.as_deref())?;
        let kind = c.kind.unwrap_or_else(|| "external".into());
        if !is_valid_kind(&kind) {
            return Err(Error::invalid_argument(format!(
                "kind {kind:?} must start with a letter and use lowercase letters, digits and dashes (at most 16)"
            )));
        }
        if let Some(t) = &c.controller_token {
            validate_controller_token(t)?;
        }
        if let Some(p) = &c.socket_path {
            if !p.is_absolute() {
                return Err(Error::invalid_argument("socketPath must be absolute"));
            }
        }
        let parent = match (c.parent_socket, c.parent_token) {
            (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => Some((s, t)),
            (None, None) => match (
                env_nonempty(MESSAGING_SOCKET_ENV),
                env_nonempty(MESSAGING_TOKEN_ENV),
            ) {
                (Some(s), Some(t)) => Some((s, t)),
                _ => None,
            },
            _ => {
                return Err(Error::invalid_argument(
                    "parentSocket and parentToken are given together, non-empty",
                ))
            }
        };
        let line_deadline = Duration::from_millis(
            c.line_deadline_ms
                .unwrap_or(LINE_DEADLINE.as_millis() as u64),
        );
        if line_deadline < Duration::from_millis(50) || line_deadline > Duration::from_secs(600) {
            return Err(Error::invalid_argument(
                "lineDeadlineMs must be between 50 and 600000",
            ));
        }
        Ok(Settings {
            sessions_dir: qwen_home.join("sessions"),
            controllers_path: qwen_home.join("peer-controllers.json"),
            kind,
            version: c.version,
            multi: c.multi_session,
            socket_path: c.socket_path,
            runtime_dir: c.runtime_dir,
            tmp_dir: c.tmp_dir,
            sweep: c.sweep_sockets.unwrap_or(true),
            inbound: InboundSettings {
                policy: c.inbound_policy,
                review_class: c.review_class,
                held_expiry: c.held_expiry.unwrap_or_default(),
            },
            manual_ack: c.manual_ack,
            controller_token: c.controller_token,
            parent,
            cleanup_at_exit: c.cleanup_at_exit.unwrap_or(true),
            line_deadline,
        })
    }
}

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
    dispatcher: Arc<Dispatcher>,
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

/// A cross-session participant: one inbox, one or more registered sessions.
pub struct Participant {
    inner: Arc<Inner>,
}

impl Participant {
    /// Validates the configuration. Nothing is bound or written until [`register`](Self::register).
    pub fn new(config: Config) -> Result<Participant> {
        let settings = Settings::from_config(config)?;
        let dispatcher = Arc::new(
            Dispatcher::new("qc-cb")
                .map_err(|e| Error::io("cannot start the callback thread", e))?,
        );
        let controllers = Grants::new(settings.controllers_path.clone());
        Ok(Participant {
            inner: Arc::new(Inner {
                settings,
                ipc_token: random_hex(32)?,
                controllers,
                owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
                logger: Arc::new(Logger::new(dispatcher.clone())),
                dispatcher,
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

    /// Messages delivered to our sessions. Setting one hands over any
    /// messages accepted while none was set.
    pub fn set_message_callback(&self, cb: Option<Arc<MessageFn>>) {
        let set = cb.is_some();
        self.inner.message_cb.set(cb);
        if set {
            let inner = self.inner.clone();
            self.inner.dispatcher.post(move || inner.pump());
        }
    }

    pub fn set_receipt_callback(&self, cb: Option<Arc<ReceiptFn>>) {
        self.inner.receipt_cb.set(cb);
    }

    pub fn set_held_callback(&self, cb: Option<Arc<HeldFn>>) {
        self.inner.held_cb.set(cb);
    }

    /// True when called on this participant's callback thread.
    pub fn on_callback_thread(&self) -> bool {
        self.inner.dispatcher.is_current_thread()
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
        self.inner.dispatcher.shutdown();
    }
}

fn session_info(r: &Registration, ipc_path: &str) -> SessionInfo {
    SessionInfo {
        session_id: r.session_id.clone(),
        ref_: peer_ref(&r.session_id),
        name: r.name.clone(),
        kind: r.kind.clone(),
        cwd: r.cwd.clone(),
        started_at: r.started_at,
        record_path: r.record_path.to_string_lossy().into_owned(),
        ipc_path: ipc_path.to_string(),
    }
}

fn origin_fields(o: &OriginKind) -> (Origin, Option<String>) {
    match o {
        OriginKind::Peer => (Origin::Peer, None),
        OriginKind::OwnProcess => (Origin::OwnProcess, None),
        OriginKind::Controller { label, .. } => (Origin::Controller, Some(label.clone())),
    }
}

fn opt_flat(s: &Option<String>) -> Option<String> {
    s.as_deref().map(flatten_label).filter(|s| !s.is_empty())
}

fn message_info(e: &Entry, session_id: &str) -> MessageInfo {
    let (origin, controller_label) = origin_fields(&e.origin);
    let f = &e.frame;
    MessageInfo {
        msg_id: f.msg_id.clone(),
        session_id: session_id.to_string(),
        content: f.content.clone(),
        text: defang(&f.content),
        from: opt_flat(&f.from),
        from_name: opt_flat(&f.from_name),
        from_mode: f.from_mode,
        origin,
        controller_label,
        frame: f.wire_value(),
    }
}

fn inbound_message(e: &Entry, session_id: &str) -> InboundMessage {
    let f = &e.frame;
    let from_shown = f.from.clone().unwrap_or_else(|| {
        match e.origin {
            OriginKind::Controller { .. } => "controller",
            OriginKind::OwnProcess => "own process",
            OriginKind::Peer => "unknown session",
        }
        .to_string()
    });
    InboundMessage {
        message: message_info(e, session_id),
        envelope: format_envelope(&from_shown, f.from_name.as_deref(), &f.content, &e.origin),
        display: format_display(&from_shown, f.from_name.as_deref(), &f.content, &e.origin),
        priority: f.priority,
    }
}

fn held_info(e: &Entry, session_id: &str, expiry: HeldExpiry) -> HeldInfo {
    HeldInfo {
        message: message_info(e, session_id),
        cause: e.cause.unwrap_or(super::gate::HoldCause::ModeUnknown),
        held_at: e.at.wall_ms as u64,
        expires_at: expiry.millis().map(|ms| (e.at.wall_ms + ms) as u64),
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

impl Inner {
    fn view<'a>(&self, st: &'a State, valid: Option<&'a HashSet<String>>) -> View<'a> {
        View {
            multi: self.settings.multi,
            regs: &st.regs,
            valid_controllers: valid,
        }
    }

    fn record_out(&self, r: &Registration, id: &Identity, ipc_path: &str) -> RecordOut {
        RecordOut {
            schema_version: registry::SCHEMA_VERSION,
            pid: id.pid,
            proc_start: id.proc_start.clone(),
            pid_ns: id.pid_ns,
            session_id: r.session_id.clone(),
            cwd: r.cwd.clone(),
            name: r.name.clone(),
            started_at: r.started_at,
            qwen_version: self.settings.version.clone(),
            kind: r.kind.clone(),
            ipc_path: ipc_path.to_string(),
            ipc_token: self.ipc_token.clone(),
        }
    }

    fn identity() -> Result<Identity> {
        let id = Identity::current();
        if cfg!(target_os = "linux") && (id.proc_start.is_none() || id.pid_ns.is_none()) {
            return Err(Error::new(
                Status::Io,
                "cannot read this process's start token or PID namespace; a record without them could not be told apart from another process",
            ));
        }
        Ok(id)
    }

    // -- lifecycle ----------------------------------------------------------

    fn register(self: &Arc<Self>, opts: RegisterOptions) -> Result<SessionInfo> {
        let _ops = lock(&self.ops);
        let kind = opts
            .kind
            .clone()
            .unwrap_or_else(|| self.settings.kind.clone());
        if !is_valid_kind(&kind) {
            return Err(Error::invalid_argument(format!(
                "kind {kind:?} is not valid"
            )));
        }
        let session_id = match opts.session_id.as_deref() {
            Some(s) if js_trim(s).is_empty() => {
                return Err(Error::invalid_argument("sessionId is blank"))
            }
            Some(s) => s.to_string(),
            None => uuid_v4()?,
        };
        let cwd = match opts.cwd.clone() {
            Some(c) if c.is_empty() => return Err(Error::invalid_argument("cwd is empty")),
            Some(c) => c,
            None => std::env::current_dir()
                .map_err(|e| Error::io("current directory", e))?
                .to_string_lossy()
                .into_owned(),
        };
        let identity = Self::identity()?;
        {
            let st = lock(&self.state);
            if st.closed {
                return Err(Error::new(Status::NotRunning, "the participant is closed"));
            }
            if !self.settings.multi && !st.regs.is_empty() {
                return Err(Error::new(
                    Status::AlreadyRunning,
                    "a session is already registered (set multiSession to host several)",
                ));
            }
            if st
                .regs
                .iter()
                .any(|r| r.session_id.eq_ignore_ascii_case(&session_id))
            {
                return Err(Error::invalid_argument(format!(
                    "session {session_id:?} is already registered"
                )));
            }
        }
        let bound_now = self.ensure_inbox()?;
        let result = (|| {
            let ipc_path = lock(&self.state)
                .inbox_path()
                .ok_or_else(|| Error::new(Status::Internal, "inbox vanished"))?;
            let path = registry::choose_record_path(
                &self.settings.sessions_dir,
                &identity,
                !self.settings.multi,
            )?;
            let reg = Registration {
                slot: 0,
                name: resolve_session_name(opts.name.as_deref(), &cwd, &session_id),
                session_id: session_id.clone(),
                cwd: cwd.clone(),
                kind: kind.clone(),
                started_at: super::gate::wall_ms() as u64,
                record_path: path.clone(),
                child_token: random_hex(32)?,
                inbound: InboundSettings {
                    policy: opts.inbound_policy.or(self.settings.inbound.policy),
                    review_class: opts.review_class.or(self.settings.inbound.review_class),
                    held_expiry: opts
                        .held_expiry
                        .unwrap_or(self.settings.inbound.held_expiry),
                },
            };
            registry::write_record(&path, &self.record_out(&reg, &identity, &ipc_path))?;
            Ok((reg, ipc_path))
        })();
        let (mut reg, ipc_path) = match result {
            Ok(v) => v,
            Err(e) => {
                if bound_now {
                    let inbox = {
                        let mut st = lock(&self.state);
                        if st.regs.is_empty() {
                            st.inbox.take()
                        } else {
                            None
                        }
                    };
                    if let Some(i) = inbox {
                        self.close_inbox(i);
                    }
                }
                return Err(e);
            }
        };
        {
            let mut st = lock(&self.state);
            reg.slot = st.next_slot;
            st.next_slot += 1;
            st.regs.push(reg.clone());
        }
        if self.settings.cleanup_at_exit {
            exit_add(
                self.owner,
                reg.slot,
                ExitItem::Record {
                    path: reg.record_path.clone(),
                    session_id: reg.session_id.clone(),
                },
            );
        }
        self.logger.info(|| {
            format!(
                "registered session {} at {}",
                reg.session_id,
                reg.record_path.display()
            )
        });
        Ok(session_info(&reg, &ipc_path))
    }

    /// Binds the inbox if none is bound; true when it bound one now.
    fn ensure_inbox(self: &Arc<Self>) -> Result<bool> {
        if lock(&self.state).inbox.is_some() {
            return Ok(false);
        }
        runtime::refuse_on_runtime("register")?;
        let rt = runtime::acquire()?;
        let s = &self.settings;
        let explicit = s.socket_path.is_some();
        let candidates = match &s.socket_path {
            Some(p) => vec![p.clone()],
            None => {
                let xdg = s
                    .runtime_dir
                    .clone()
                    .or_else(|| env_nonempty("XDG_RUNTIME_DIR").map(PathBuf::from));
                let tmp = s.tmp_dir.clone().or_else(|| {
                    env_nonempty("TMPDIR")
                        .or_else(|| env_nonempty("TMP"))
                        .or_else(|| env_nonempty("TEMP"))
                        .map(PathBuf::from)
                });
                inbox::candidates(
                    super::proc::own_pid(),
                    xdg.as_deref(),
                    tmp.as_deref(),
                    &random_hex(8)?,
                )
            }
        };
        let bound =
            inbox::bind_first(&candidates, explicit).map_err(|e| Error::new(Status::Io, e))?;
        let handle = rt.handle().clone();
        let listener = {
            let _enter = handle.enter();
            tokio::net::UnixListener::from_std(bound.listener)
                .map_err(|e| Error::io("register the inbox", e))?
        };
        let cancel = CancellationToken::new();
        let handler: Arc<dyn Handler> = Arc::new(InboxHandler(self.clone()));
        let mut tasks = vec![handle.spawn(inbox::serve(
            listener,
            handler,
            cancel.child_token(),
            s.line_deadline,
        ))];
        tasks.push(handle.spawn(housekeeping(self.clone(), cancel.child_token())));
        if s.sweep && !explicit {
            let own = bound.path.clone();
            let cands = candidates.clone();
            handle.spawn_blocking(move || {
                for c in &cands {
                    inbox::sweep_around(c, &own);
                }
            });
        }
        if s.cleanup_at_exit {
            exit_add(
                self.owner,
                SOCKET_KEY,
                ExitItem::Socket {
                    path: bound.path.clone(),
                },
            );
        }
        self.logger
            .info(|| format!("inbox listening at {}", bound.path.display()));
        let mut st = lock(&self.state);
        st.gate = Gate::new(Now::real());
        st.inbox = Some(InboxRt {
            path: bound.path,
            nonce_dir: bound.nonce_dir,
            cancel,
            tasks,
            runtime: rt,
        });
        Ok(true)
    }

    fn close_inbox(&self, i: InboxRt) {
        i.cancel.cancel();
        if runtime::may_block() {
            let tasks = i.tasks;
            i.runtime.handle().block_on(async {
                for t in tasks {
                    let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
                }
                let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
                while self.outstanding.load(Ordering::Acquire) > 0 {
                    let notified = self.outstanding_done.notified();
                    if self.outstanding.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        break;
                    }
                }
            });
        }
        let _ = std::fs::remove_file(&i.path);
        if let Some(d) = &i.nonce_dir {
            let _ = std::fs::remove_dir(d);
        }
        exit_remove(self.owner, SOCKET_KEY);
        self.logger
            .info(|| format!("inbox closed ({})", i.path.display()));
        drop(i.runtime);
        self.changed.notify_all();
    }

    fn unregister(self: &Arc<Self>, session_id: &str) -> Result<()> {
        let _ops = lock(&self.ops);
        self.unregister_locked(session_id)
    }

    fn unregister_locked(self: &Arc<Self>, session_id: &str) -> Result<()> {
        let now = Now::real();
        let mut out = Vec::new();
        let (reg, inbox, handle, from) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            let reg = st.regs.remove(idx);
            st.gate.settle_slot(reg.slot, &mut out);
            let handle = st.handle();
            let from = st.inbox_path();
            let inbox = if st.regs.is_empty() {
                st.gate.shutdown(now, &mut out);
                st.inbox.take()
            } else {
                None
            };
            (reg, inbox, handle, from)
        };
        self.run_actions(out, handle.as_ref(), from);
        let pid = super::proc::own_pid();
        registry::remove_if_ours(&reg.record_path, pid, &reg.session_id);
        exit_remove(self.owner, reg.slot);
        self.logger
            .info(|| format!("unregistered session {}", reg.session_id));
        if let Some(i) = inbox {
            self.close_inbox(i);
        }
        self.changed.notify_all();
        Ok(())
    }

    fn close(self: &Arc<Self>) -> Result<()> {
        let _ops = lock(&self.ops);
        let ids: Vec<String> = {
            let mut st = lock(&self.state);
            st.closed = true;
            st.regs.iter().map(|r| r.session_id.clone()).collect()
        };
        for id in ids {
            let _ = self.unregister_locked(&id);
        }
        let leftover = lock(&self.state).inbox.take();
        if let Some(i) = leftover {
            self.close_inbox(i);
        }
        self.changed.notify_all();
        Ok(())
    }

    fn rotate(self: &Arc<Self>, session_id: &str, new_id: Option<&str>) -> Result<SessionInfo> {
        let _ops = lock(&self.ops);
        let new_id = match new_id {
            Some(s) if js_trim(s).is_empty() => {
                return Err(Error::invalid_argument("the new session id is blank"))
            }
            Some(s) => s.to_string(),
            None => uuid_v4()?,
        };
        let identity = Self::identity()?;
        let (before, after, ipc_path) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            if st
                .regs
                .iter()
                .enumerate()
                .any(|(i, r)| i != idx && r.session_id.eq_ignore_ascii_case(&new_id))
            {
                return Err(Error::invalid_argument(format!(
                    "session {new_id:?} is already registered"
                )));
            }
            let before = st.regs[idx].clone();
            st.regs[idx].session_id = new_id.clone();
            let path = st.inbox_path().unwrap_or_default();
            (before, st.regs[idx].clone(), path)
        };
        let write = match registry::read_record(&after.record_path) {
            ReadOutcome::Ok(r) if !registry::matches_local_identity(&r, &identity) => {
                Err(Error::new(
                    Status::Io,
                    format!(
                        "{} no longer holds this process's record",
                        after.record_path.display()
                    ),
                ))
            }
            ReadOutcome::Newer | ReadOutcome::ReadError => Err(Error::new(
                Status::Io,
                format!("{} cannot be rewritten safely", after.record_path.display()),
            )),
            _ => registry::write_record(
                &after.record_path,
                &self.record_out(&after, &identity, &ipc_path),
            ),
        };
        if let Err(e) = write {
            let mut st = lock(&self.state);
            if let Some(r) = st.regs.iter_mut().find(|r| r.slot == before.slot) {
                r.session_id = before.session_id.clone();
            }
            return Err(e);
        }
        if self.settings.cleanup_at_exit {
            exit_add(
                self.owner,
                after.slot,
                ExitItem::Record {
                    path: after.record_path.clone(),
                    session_id: after.session_id.clone(),
                },
            );
        }
        self.logger
            .info(|| format!("session {} is now {}", before.session_id, after.session_id));
        Ok(session_info(&after, &ipc_path))
    }

    /// Rewrites records that went missing or stale (after a misaddressed frame).
    fn reassert(self: &Arc<Self>) {
        let Ok(_ops) = self.ops.try_lock() else {
            return;
        };
        let Ok(identity) = Self::identity() else {
            return;
        };
        let (regs, path) = {
            let st = lock(&self.state);
            (st.regs.clone(), st.inbox_path())
        };
        let Some(path) = path else { return };
        for r in regs {
            let rewrite = match registry::read_record(&r.record_path) {
                ReadOutcome::Missing => true,
                ReadOutcome::Ok(rec) => {
                    registry::matches_local_identity(&rec, &identity)
                        && (rec.session_id != r.session_id
                            || rec.ipc_path.as_deref() != Some(path.as_str()))
                }
                _ => false,
            };
            if rewrite {
                let _ =
                    registry::write_record(&r.record_path, &self.record_out(&r, &identity, &path));
            }
        }
    }

    fn update_inbound(self: &Arc<Self>, session_id: &str, settings: InboundSettings) -> Result<()> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (handle, from) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            st.regs[idx].inbound = settings;
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            gate.reevaluate(Now::real(), &view, &mut out);
            (st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
        Ok(())
    }

    // -- the host's side of held and queued messages -------------------------

    fn held(self: &Arc<Self>) -> Vec<HeldInfo> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (list, handle, from) = {
            let mut st = lock(&self.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            gate.expire_overdue(Now::real(), &view, &mut out);
            gate.forget_invalid_controllers(&view, &mut out);
            let list = self.held_snapshot(&st);
            (list, st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        list
    }

    fn held_snapshot(&self, st: &State) -> Vec<HeldInfo> {
        st.gate
            .held()
            .iter()
            .map(|e| {
                let reg = st.reg(e.slot);
                let sid = reg.map(|r| r.session_id.clone()).unwrap_or_default();
                let expiry = reg.map(|r| r.inbound.held_expiry).unwrap_or_default();
                held_info(e, &sid, expiry)
            })
            .collect()
    }

    fn decide(self: &Arc<Self>, msg_id: &str, approve: bool) -> Result<()> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (outcome, handle, from) = {
            let mut st = lock(&self.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            let outcome = gate.decide(msg_id, approve, Now::real(), &view, &mut out);
            (outcome, st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
        match outcome {
            DecideOutcome::Done => Ok(()),
            DecideOutcome::Gone => Err(Error::new(
                Status::NotFound,
                format!("no held message {msg_id:?} (it may have expired or been decided)"),
            )),
            DecideOutcome::Misaddressed => Err(Error::new(
                Status::NotFound,
                "the session this message was addressed to changed or left; it was settled as misaddressed",
            )),
            DecideOutcome::QueueFull => Err(Error::new(
                Status::Refused,
                "the input queue is full; the message stays held, retry later",
            )),
        }
    }

    /// Hands queued messages to the message callback, in order (runs on the
    /// callback thread).
    fn pump(self: &Arc<Self>) {
        loop {
            let Some(cb) = self.message_cb.get() else {
                return;
            };
            let mut out = Vec::new();
            let next = {
                let mut st = lock(&self.state);
                let st = &mut *st;
                let Some(i) = st.gate.queue().iter().position(|e| !e.dispatched) else {
                    return;
                };
                let entry = st.gate.queue()[i].clone();
                let view = View {
                    multi: self.settings.multi,
                    regs: &st.regs,
                    valid_controllers: None,
                };
                if !view.pin_valid(&entry.frame, entry.slot) {
                    st.gate.queue_mut().remove(i);
                    st.gate.forget_admitted_message(&entry.frame, &entry.origin);
                    if let Some(to) = &entry.frame.from {
                        out.push(Action::Receipt(Receipt {
                            to: to.clone(),
                            reply_token: entry.frame.reply_token.clone(),
                            status: super::frames::DeliveryState::Misaddressed,
                            orig_msg_id: entry.frame.msg_id.clone(),
                            drop_reason: None,
                            dropped_msg_ids: Vec::new(),
                        }));
                    }
                    Err((out, st.handle(), st.inbox_path()))
                } else {
                    st.gate.queue_mut()[i].dispatched = true;
                    let sid = st
                        .reg(entry.slot)
                        .map(|r| r.session_id.clone())
                        .unwrap_or_default();
                    Ok((entry, sid))
                }
            };
            match next {
                Err((out, handle, from)) => self.run_actions(out, handle.as_ref(), from),
                Ok((mut entry, sid)) => {
                    if let OriginKind::Controller { id, .. } = &entry.origin {
                        if !self.controllers.valid_ids().contains(id) {
                            entry.origin = OriginKind::Peer;
                        }
                    }
                    let msg = inbound_message(&entry, &sid);
                    cb(&msg);
                    if !self.settings.manual_ack {
                        lock(&self.state)
                            .gate
                            .consume(&entry.frame.msg_id, entry.slot);
                    }
                }
            }
        }
    }

    /// Sends receipts, schedules delivery and held notifications.
    fn run_actions(
        self: &Arc<Self>,
        actions: Vec<Action>,
        handle: Option<&Handle>,
        from: Option<String>,
    ) {
        let mut deliver = false;
        let mut held = false;
        for a in actions {
            match a {
                Action::Receipt(r) => {
                    if let Some(h) = handle {
                        self.spawn_receipt(h, r, from.clone());
                    }
                }
                Action::Deliver => deliver = true,
                Action::HeldChanged => held = true,
            }
        }
        if deliver {
            let inner = self.clone();
            self.dispatcher.post(move || inner.pump());
        }
        if held && self.held_cb.get().is_some() {
            let inner = self.clone();
            self.dispatcher.post(move || {
                let Some(cb) = inner.held_cb.get() else {
                    return;
                };
                let list = inner.held_snapshot(&lock(&inner.state));
                cb(&list);
            });
        }
    }

    fn spawn_receipt(self: &Arc<Self>, handle: &Handle, r: Receipt, from: Option<String>) {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        let inner = self.clone();
        let logger = self.logger.clone();
        handle.spawn(async move {
            let msg_id = match uuid_v4() {
                Ok(id) => id,
                Err(e) => {
                    logger.warn(|| {
                        format!(
                            "receipt {} for {} not sent: {}",
                            r.status.as_str(),
                            r.orig_msg_id,
                            e.message
                        )
                    });
                    if inner.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
                        inner.outstanding_done.notify_waiters();
                    }
                    return;
                }
            };
            let json = status_frame_json(
                &msg_id,
                r.status,
                &r.orig_msg_id,
                from.as_deref(),
                r.drop_reason,
                &r.dropped_msg_ids,
            );
            if let Err(e) = send_lines(&r.to, r.reply_token.as_deref(), &json, SEND_TIMEOUT).await {
                logger.debug(|| {
                    format!(
                        "receipt {} for {} not sent: {}",
                        r.status.as_str(),
                        r.orig_msg_id,
                        e.message
                    )
                });
            }
            if inner.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
                inner.outstanding_done.notify_waiters();
            }
        });
    }

    // -- inbound --------------------------------------------------------------

    fn on_user_frame(self: &Arc<Self>, frame: UserFrame, cred: &Credential) {
        let now = Now::real();
        let mut out = Vec::new();
        let mut misaddressed = false;
        let (handle, from) = {
            let mut st = lock(&self.state);
            let route = self.route(&st, &frame, cred);
            match route {
                None => {
                    misaddressed = true;
                    if let Some(to) = &frame.from {
                        out.push(Action::Receipt(Receipt {
                            to: to.clone(),
                            reply_token: frame.reply_token.clone(),
                            status: super::frames::DeliveryState::Misaddressed,
                            orig_msg_id: frame.msg_id.clone(),
                            drop_reason: None,
                            dropped_msg_ids: Vec::new(),
                        }));
                    }
                }
                Some(slot) => {
                    let origin = match cred {
                        Credential::Peer => OriginKind::Peer,
                        Credential::Child { .. } => OriginKind::OwnProcess,
                        Credential::Controller(Controller { id, label }) => {
                            OriginKind::Controller {
                                id: id.clone(),
                                label: label.clone(),
                            }
                        }
                    };
                    let State { gate, regs, .. } = &mut *st;
                    let view = View {
                        multi: self.settings.multi,
                        regs,
                        valid_controllers: None,
                    };
                    gate.admit(frame.clone(), origin, slot, now, &view, &mut out);
                }
            }
            (st.handle(), st.inbox_path())
        };
        if misaddressed {
            self.logger.debug(|| {
                format!(
                    "misaddressed message {} (toSessionId {:?})",
                    frame.msg_id, frame.to_session_id
                )
            });
            let inner = self.clone();
            if let Some(h) = &handle {
                h.spawn_blocking(move || inner.reassert());
            }
        }
        for a in &out {
            if let Action::Receipt(r) = a {
                if r.status == super::frames::DeliveryState::Dropped {
                    self.logger.debug(|| {
                        format!(
                            "dropped message {} ({})",
                            r.orig_msg_id,
                            r.drop_reason.map(|d| d.as_str()).unwrap_or("?")
                        )
                    });
                }
            }
        }
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
    }

    /// Which of our sessions a frame is for, or `None` (misaddressed).
    fn route(&self, st: &State, frame: &UserFrame, cred: &Credential) -> Option<u64> {
        if let Credential::Child { slot } = cred {
            let reg = st.reg(*slot)?;
            return match &frame.to_session_id {
                None => Some(reg.slot),
                Some(id)
                    if id == &reg.session_id
                        || (self.settings.multi && id.eq_ignore_ascii_case(&reg.session_id)) =>
                {
                    Some(reg.slot)
                }
                Some(_) => None,
            };
        }
        if self.settings.multi {
            let id = frame.to_session_id.as_ref()?;
            return st
                .regs
                .iter()
                .find(|r| r.session_id.eq_ignore_ascii_case(id))
                .map(|r| r.slot);
        }
        let reg = st.regs.first()?;
        match &frame.to_session_id {
            Some(id) if *id != reg.session_id => None,
            _ => Some(reg.slot),
        }
    }

    fn on_receipt(self: &Arc<Self>, frame: ControlFrame) {
        let events = lock(&self.state).outbox.apply(&frame, Now::real());
        if events.is_empty() {
            self.logger.debug(|| {
                format!(
                    "ignoring receipt {} for {}: unknown message or repeated receipt",
                    frame.status.as_str(),
                    frame.orig_msg_id
                )
            });
            return;
        }
        self.changed.notify_all();
        if self.receipt_cb.get().is_none() {
            return;
        }
        let inner = self.clone();
        self.dispatcher.post(move || {
            let Some(cb) = inner.receipt_cb.get() else {
                return;
            };
            for e in &events {
                cb(e);
            }
        });
    }
}

/// The inbox's view of a participant.
struct InboxHandler(Arc<Inner>);

impl Handler for InboxHandler {
    fn authenticate(&self, token: &str) -> Option<Credential> {
        let inner = &self.0;
        if ct_eq(&inner.ipc_token, token) {
            return Some(Credential::Peer);
        }
        let child = {
            let st = lock(&inner.state);
            let mut found = None;
            for r in &st.regs {
                if ct_eq(&r.child_token, token) {
                    found = Some(r.slot);
                }
            }
            found
        };
        if let Some(slot) = child {
            return Some(Credential::Child { slot });
        }
        inner.controllers.resolve(token).map(Credential::Controller)
    }

    fn revalidate(&self, token: &str) -> Option<Credential> {
        self.0
            .controllers
            .resolve(token)
            .map(Credential::Controller)
    }

    fn on_frame(&self, frame: Frame, cred: &Credential) {
        match frame {
            Frame::Control(c) => {
                if *cred == Credential::Peer {
                    self.0.on_receipt(c);
                } else {
                    self.0.logger.debug(|| {
                        "ignoring a receipt on a connection that did not prove our token".into()
                    });
                }
            }
            Frame::User(u) => self.0.on_user_frame(u, cred),
        }
    }
}

async fn housekeeping(inner: Arc<Inner>, cancel: CancellationToken) {
    loop {
        let deadline = {
            let st = lock(&inner.state);
            st.gate.next_deadline(Now::real(), &inner.view(&st, None))
        };
        let sleep_until = deadline
            .map(tokio::time::Instant::from_std)
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = inner.wake.notified() => continue,
            _ = tokio::time::sleep_until(sleep_until) => {}
        }
        let mut out = Vec::new();
        let (handle, from) = {
            let mut st = lock(&inner.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: inner.settings.multi,
                regs,
                valid_controllers: None,
            };
            gate.tick(Now::real(), &view, &mut out);
            (st.handle(), st.inbox_path())
        };
        inner.run_actions(out, handle.as_ref(), from);
    }
}
