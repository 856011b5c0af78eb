//! Connected MCP sessions and the notifications sent to them.
//!
//! A session becomes *active* once its client has both finished the
//! handshake (`notifications/initialized`) and opened its GET SSE stream.
//! Only then is anything sent to it, starting with the current context; diff
//! results that happen before that wait in a small per-session queue.
//!
//! Memory stays bounded whatever a client does:
//! - Context is state, not a log: there is one latest context for the whole
//!   companion (a `watch` channel); each session's sender sends it when it
//!   changed since what that session last received, so a stalled client
//!   holds nothing but its place. A session that reconnects gets the context
//!   again only if it changed meanwhile (no duplicate).
//! - Diff notifications go through a bounded per-session queue; a client
//!   whose queue overflows, or whose stream does not take a notification
//!   within [`STUCK_AFTER`], is dropped like an abandoned session.
//! - Sessions themselves follow [`crate::loopback::sessions`]: reaped after
//!   the grace without a stream, bounded in number.
//!
//! No context is computed here: snapshots (which `stat()` the open files)
//! are made on the debounce thread and only published to the hub, so the
//! HTTP handlers on the runtime threads never touch the disk.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::host::Logger;
use crate::loopback::sessions::{Lifecycle, Sessions};

/// Diff results kept for a session that has no stream yet (oldest dropped).
const MAX_PENDING: usize = 32;
/// Diff results queued for an active session before it counts as stuck.
const MAX_QUEUED: usize = 64;
/// A notification the client's stream has not taken after this long marks
/// the client as stuck (a `qwen` suspended with Ctrl-Z looks like this).
pub const STUCK_AFTER: Duration = Duration::from_secs(30);
/// Longest wait for a fresh snapshot before a new stream's first context.
const FRESH_WAIT: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct Notification {
    pub method: &'static str,
    pub params: Value,
}

impl Notification {
    pub fn new(method: &'static str, params: Value) -> Notification {
        Notification { method, params }
    }
}

/// The latest published context: a publication number (grows with every
/// change published), the editor-state version it shows, and the value.
#[derive(Clone)]
struct Published {
    seq: u64,
    version: u64,
    value: Arc<Value>,
}

#[derive(Default)]
pub struct IdeSession {
    peer: Option<Peer<RoleServer>>,
    /// Set while a sender task serves the current stream.
    notes: Option<mpsc::Sender<Notification>>,
    pending: VecDeque<Notification>,
    /// The publication number last delivered to this session (kept across
    /// stream reconnects).
    sent_seq: Arc<AtomicU64>,
    /// This session's place in connection order (1 for the first session
    /// since the companion started; 0 until numbered).
    number: u64,
}

pub struct Hub {
    sessions: Arc<Sessions<IdeSession>>,
    context: watch::Sender<Published>,
    /// Publishing is serialised so versions and publication numbers agree.
    publish_lock: Mutex<()>,
    /// Asks for a fresh snapshot at once (the debounce thread makes it).
    refresh: Box<dyn Fn() + Send + Sync>,
    /// The editor-state version now (cheap: no snapshot is made).
    state_version: Box<dyn Fn() -> u64 + Send + Sync>,
    logger: Arc<Logger>,
    runtime: tokio::runtime::Handle,
    stuck_after: Duration,
    /// The last session number given (see [`Hub::session_label`]).
    numbered: AtomicU64,
}

impl Hub {
    pub fn new(
        initial: (u64, Value),
        refresh: Box<dyn Fn() + Send + Sync>,
        state_version: Box<dyn Fn() -> u64 + Send + Sync>,
        lifecycle: Lifecycle,
        logger: Arc<Logger>,
        runtime: tokio::runtime::Handle,
    ) -> Hub {
        let (context, _) = watch::channel(Published {
            seq: 1,
            version: initial.0,
            value: Arc::new(initial.1),
        });
        Hub {
            sessions: Arc::new(Sessions::new(lifecycle)),
            context,
            publish_lock: Mutex::new(()),
            refresh,
            state_version,
            logger,
            runtime,
            stuck_after: STUCK_AFTER,
            numbered: AtomicU64::new(0),
        }
    }

    fn number(&self, s: &mut IdeSession) {
        if s.number == 0 {
            s.number = self.numbered.fetch_add(1, Ordering::Relaxed) + 1;
        }
    }

    /// How the user is shown session `session_id`: `CLI #n`, numbered in
    /// connection order since the companion started. Qwen Code sends no
    /// identity of its own (every CLI's `clientInfo` is the same), so the
    /// order is all that tells two CLIs apart.
    pub fn session_label(&self, session_id: &str) -> Option<String> {
        let map = self.sessions.lock();
        let n = map.get(session_id)?.data.number;
        (n > 0).then(|| format!("CLI #{n}"))
    }

    /// Overrides [`STUCK_AFTER`] (the `stalledClientMs` setting).
    pub fn set_stuck_after(&mut self, d: Duration) {
        self.stuck_after = d;
    }

    pub fn sessions(&self) -> &Arc<Sessions<IdeSession>> {
        &self.sessions
    }

    /// `session_id` was just created by an `initialize` request.
    pub fn session_created(&self, session_id: &str) {
        let mut map = self.sessions.lock();
        let e = self.sessions.entry(&mut map, session_id);
        self.number(&mut e.data);
    }

    /// A request of `session_id` arrived.
    pub fn request_seen(&self, session_id: &str) {
        self.sessions.request_seen(session_id);
    }

    /// The handshake of `session_id` finished.
    pub fn peer_initialized(&self, session_id: &str, peer: Peer<RoleServer>) {
        let mut map = self.sessions.lock();
        let e = self.sessions.entry(&mut map, session_id);
        self.number(&mut e.data);
        e.data.peer = Some(peer);
        let start = e.life.stream_open;
        if start {
            self.activate(session_id, &mut e.data);
        }
    }

    /// The client opened its GET stream; returns the stream's generation.
    pub fn stream_opened(&self, session_id: &str) -> u64 {
        let generation = {
            let mut map = self.sessions.lock();
            let generation = self.sessions.stream_opened(&mut map, session_id);
            let e = map.get_mut(session_id).expect("entry exists");
            e.data.notes = None; // a new stream gets a fresh sender
            self.activate(session_id, &mut e.data);
            generation
        };
        // A fresh snapshot (files deleted meanwhile are dropped), made off
        // the runtime; sent if it differs from what the session has.
        (self.refresh)();
        generation
    }

    /// The GET stream `generation` of `session_id` ended.
    pub fn stream_closed(&self, session_id: &str, generation: u64) {
        let mut map = self.sessions.lock();
        if let Some(e) = self
            .sessions
            .stream_closed(&mut map, session_id, generation)
        {
            e.data.notes = None;
            self.logger
                .debug(|| format!("session {session_id}: notification stream closed"));
        }
    }

    /// Starts a sender for a session that has both a peer and a stream.
    fn activate(&self, session_id: &str, s: &mut IdeSession) {
        if s.notes.is_some() {
            return;
        }
        let Some(peer) = s.peer.clone() else { return };
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        for n in s.pending.drain(..) {
            let _ = tx.try_send(n);
        }
        s.notes = Some(tx);
        self.logger
            .info(|| format!("session {session_id}: connected, sending context"));
        let task = Sender {
            sid: session_id.to_string(),
            peer,
            notes: rx,
            context: self.context.subscribe(),
            fresh_from: (self.state_version)(),
            sent_seq: s.sent_seq.clone(),
            sessions: Arc::downgrade(&self.sessions),
            logger: self.logger.clone(),
            stuck_after: self.stuck_after,
        };
        self.runtime.spawn(task.run());
    }

    /// Sends `n` to every active session; sessions still connecting get it
    /// when their stream opens. A session whose queue is full is stuck and
    /// gets dropped.
    pub fn broadcast(&self, n: Notification) {
        let mut stuck = Vec::new();
        {
            let mut map = self.sessions.lock();
            for (sid, e) in map.iter_mut() {
                let s = &mut e.data;
                match &s.notes {
                    Some(tx) => match tx.try_send(n.clone()) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => stuck.push(sid.clone()),
                        Err(mpsc::error::TrySendError::Closed(n)) => {
                            s.notes = None;
                            push_pending(&mut s.pending, n);
                        }
                    },
                    None => push_pending(&mut s.pending, n.clone()),
                }
            }
        }
        for sid in stuck {
            self.logger.warn(|| {
                format!("session {sid}: the client stopped reading its stream; dropping it")
            });
            self.sessions.doom(&sid);
        }
    }

    /// Publishes the context of state `version`; returns false when it is
    /// older than the last one published, or the same value.
    pub fn publish_context(&self, version: u64, context: Value) -> bool {
        let _serial = self.publish_lock.lock().unwrap_or_else(|p| p.into_inner());
        let last = self.context.borrow().clone();
        if version < last.version {
            return false;
        }
        if *last.value == context {
            if version > last.version {
                self.context.send_modify(|p| p.version = version);
            }
            return false;
        }
        self.context.send_replace(Published {
            seq: last.seq + 1,
            version,
            value: Arc::new(context),
        });
        true
    }

    /// Number of sessions with an open notification stream.
    pub fn active_sessions(&self) -> usize {
        self.sessions
            .lock()
            .values()
            .filter(|e| e.data.notes.is_some())
            .count()
    }

    /// Number of sessions known (with or without a stream).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    pub fn clear(&self) {
        drop(self.sessions.clear());
    }
}

impl crate::loopback::mcp::SessionEvents for Hub {
    fn request_seen(&self, sid: &str) {
        Hub::request_seen(self, sid)
    }
    fn created(&self, sid: &str) {
        self.session_created(sid)
    }
    fn stream_opened(&self, sid: &str) -> u64 {
        Hub::stream_opened(self, sid)
    }
    fn stream_closed(&self, sid: &str, generation: u64) {
        Hub::stream_closed(self, sid, generation)
    }
}

/// Whether a session's transport is gone (for the reaper).
pub fn session_dead(s: &IdeSession) -> bool {
    s.peer.as_ref().is_some_and(|p| p.is_transport_closed())
}

fn push_pending(q: &mut VecDeque<Notification>, n: Notification) {
    if q.len() >= MAX_PENDING {
        q.pop_front();
    }
    q.push_back(n);
}

/// Sends one session's notifications over its current stream.
struct Sender {
    sid: String,
    peer: Peer<RoleServer>,
    notes: mpsc::Receiver<Notification>,
    context: watch::Receiver<Published>,
    /// The first context sent shows at least this editor-state version.
    fresh_from: u64,
    sent_seq: Arc<AtomicU64>,
    sessions: std::sync::Weak<Sessions<IdeSession>>,
    logger: Arc<Logger>,
    stuck_after: Duration,
}

impl Sender {
    /// The current context if this session does not have it yet.
    fn context_due(&mut self) -> Option<Value> {
        let p = self.context.borrow_and_update().clone();
        if p.seq <= self.sent_seq.load(Ordering::Acquire) {
            return None;
        }
        self.sent_seq.store(p.seq, Ordering::Release);
        Some((*p.value).clone())
    }

    /// Sends one notification; false when the session is gone or stuck.
    async fn send(&self, method: &'static str, params: Value) -> bool {
        let note = CustomNotification::new(method, Some(params));
        let send = self
            .peer
            .send_notification(ServerNotification::CustomNotification(note));
        let sid = &self.sid;
        match tokio::time::timeout(self.stuck_after, send).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                self.logger
                    .debug(|| format!("session {sid}: send failed: {e}"));
                false
            }
            Err(_) => {
                self.logger.warn(|| {
                    format!("session {sid}: the client stopped reading its stream; dropping it")
                });
                if let Some(s) = self.sessions.upgrade() {
                    s.doom(sid);
                }
                false
            }
        }
    }

    async fn run(mut self) {
        // The current context first (unless this session already has it),
        // then queued diff results, then whatever comes. "Current" is a
        // snapshot of the editor state as it was when the stream opened
        // (the hub asked the debounce thread for it); a snapshot that does
        // not come in time is not waited for.
        let fresh_from = self.fresh_from;
        let _ = tokio::time::timeout(
            FRESH_WAIT,
            self.context.wait_for(|p| p.version >= fresh_from),
        )
        .await;
        if let Some(ctx) = self.context_due() {
            if !self.send("ide/contextUpdate", ctx).await {
                return;
            }
        }
        loop {
            let (method, params) = tokio::select! {
                biased;
                n = self.notes.recv() => match n {
                    Some(n) => (n.method, n.params),
                    None => return, // replaced by a newer stream, or session gone
                },
                changed = self.context.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    match self.context_due() {
                        Some(ctx) => ("ide/contextUpdate", ctx),
                        None => continue,
                    }
                }
            };
            if !self.send(method, params).await {
                return;
            }
        }
    }
}
