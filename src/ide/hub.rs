//! Connected MCP sessions and the notifications sent to them.
//!
//! A session becomes *active* once its client has both finished the
//! handshake (`notifications/initialized`) and opened its GET SSE stream.
//! Only then is anything sent to it, starting with the current context; diff
//! results that happen before that wait in a small per-session queue. Each
//! active session has its own sender task, so a slow client never delays
//! another. Sessions whose stream stayed closed for a grace period are
//! reaped (the CLI never sends `DELETE`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::host::Logger;

/// Diff results kept for a session that has no stream yet.
const MAX_PENDING: usize = 32;

#[derive(Debug, Clone)]
pub struct Notification {
    pub method: &'static str,
    pub params: Value,
    /// For context updates: the version of the editor state they show. A
    /// session never receives an older context after a newer one.
    pub context_version: Option<u64>,
}

impl Notification {
    pub fn new(method: &'static str, params: Value) -> Notification {
        Notification {
            method,
            params,
            context_version: None,
        }
    }
    fn context(version: u64, params: Value) -> Notification {
        Notification {
            method: "ide/contextUpdate",
            params,
            context_version: Some(version),
        }
    }
}

/// Produces the current context and its version.
pub type ContextSource = Box<dyn Fn() -> Option<(u64, Value)> + Send + Sync>;

struct Session {
    peer: Option<Peer<RoleServer>>,
    stream_generation: u64,
    stream_open: bool,
    tx: Option<mpsc::UnboundedSender<Notification>>,
    pending: Vec<Notification>,
    idle_since: Instant,
}

impl Session {
    fn new() -> Session {
        Session {
            peer: None,
            stream_generation: 0,
            stream_open: false,
            tx: None,
            pending: Vec::new(),
            idle_since: Instant::now(),
        }
    }
}

pub struct Hub {
    sessions: Mutex<HashMap<String, Session>>,
    last_context: Mutex<(u64, Value)>,
    context_source: ContextSource,
    logger: Arc<Logger>,
    runtime: tokio::runtime::Handle,
}

impl Hub {
    pub fn new(
        context_source: ContextSource,
        logger: Arc<Logger>,
        runtime: tokio::runtime::Handle,
    ) -> Hub {
        let initial = context_source().unwrap_or((0, Value::Null));
        Hub {
            sessions: Mutex::new(HashMap::new()),
            last_context: Mutex::new(initial),
            context_source,
            logger,
            runtime,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `session_id` was just created by an `initialize` request.
    pub fn session_created(&self, session_id: &str) {
        self.lock()
            .entry(session_id.to_string())
            .or_insert_with(Session::new);
    }

    /// The handshake of `session_id` finished.
    pub fn peer_initialized(&self, session_id: &str, peer: Peer<RoleServer>) {
        let fresh = (self.context_source)();
        let mut sessions = self.lock();
        let s = sessions
            .entry(session_id.to_string())
            .or_insert_with(Session::new);
        s.peer = Some(peer);
        self.activate(session_id, s, fresh);
    }

    /// The client opened its GET stream; returns the stream's generation.
    pub fn stream_opened(&self, session_id: &str) -> u64 {
        let fresh = (self.context_source)();
        let mut sessions = self.lock();
        let s = sessions
            .entry(session_id.to_string())
            .or_insert_with(Session::new);
        s.stream_generation += 1;
        s.stream_open = true;
        s.tx = None; // a new stream gets a fresh sender and the current context
        let generation = s.stream_generation;
        self.activate(session_id, s, fresh);
        generation
    }

    /// The GET stream `generation` of `session_id` ended.
    pub fn stream_closed(&self, session_id: &str, generation: u64) {
        let mut sessions = self.lock();
        if let Some(s) = sessions.get_mut(session_id) {
            if s.stream_generation == generation {
                s.stream_open = false;
                s.tx = None;
                s.idle_since = Instant::now();
                self.logger
                    .debug(|| format!("session {session_id}: notification stream closed"));
            }
        }
    }

    /// Starts sending to a session that has both a peer and a stream. Its first
    /// notification is the freshest context known (`fresh` was computed just
    /// before the sessions lock was taken).
    fn activate(&self, session_id: &str, s: &mut Session, fresh: Option<(u64, Value)>) {
        if s.tx.is_some() || !s.stream_open {
            return;
        }
        let Some(peer) = s.peer.clone() else { return };
        let (tx, rx) = mpsc::unbounded_channel();
        let last = self
            .last_context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (version, context) = match fresh {
            Some(f) if f.0 >= last.0 => f,
            _ => last,
        };
        let _ = tx.send(Notification::context(version, context));
        for n in s.pending.drain(..) {
            let _ = tx.send(n);
        }
        s.tx = Some(tx);
        self.logger
            .info(|| format!("session {session_id}: connected, sending context"));
        let logger = self.logger.clone();
        let sid = session_id.to_string();
        self.runtime.spawn(async move {
            let mut rx = rx;
            let mut sent_version: Option<u64> = None;
            while let Some(n) = rx.recv().await {
                if let Some(v) = n.context_version {
                    if sent_version.is_some_and(|sent| v <= sent) {
                        continue; // never resend or go back to an older editor state
                    }
                    sent_version = Some(v);
                }
                let note = CustomNotification::new(n.method, Some(n.params));
                if let Err(e) = peer
                    .send_notification(ServerNotification::CustomNotification(note))
                    .await
                {
                    logger.debug(|| format!("session {sid}: send failed: {e}"));
                    break;
                }
            }
        });
    }

    /// Sends `n` to every active session; sessions still connecting get it
    /// when their stream opens.
    pub fn broadcast(&self, n: Notification) {
        let mut sessions = self.lock();
        for s in sessions.values_mut() {
            match &s.tx {
                Some(tx) if tx.send(n.clone()).is_ok() => {}
                _ => {
                    if s.pending.len() >= MAX_PENDING {
                        s.pending.remove(0);
                    }
                    s.pending.push(n.clone());
                }
            }
        }
    }

    /// Publishes the context of state `version`; returns false when it is
    /// older than, or equal to, the last one published.
    pub fn publish_context(&self, version: u64, context: Value) -> bool {
        let mut sessions = self.lock();
        {
            let mut last = self.last_context.lock().unwrap_or_else(|p| p.into_inner());
            if version < last.0 {
                return false;
            }
            if last.1 == context {
                last.0 = version;
                return false;
            }
            *last = (version, context.clone());
        }
        for s in sessions.values_mut() {
            if let Some(tx) = &s.tx {
                let _ = tx.send(Notification::context(version, context.clone()));
            }
        }
        true
    }

    /// Forgets sessions without a stream for longer than `grace` (and those
    /// whose transport closed); returns their ids so the MCP layer closes them.
    pub fn reap(&self, grace: Duration) -> Vec<String> {
        let mut sessions = self.lock();
        let now = Instant::now();
        let dead: Vec<String> = sessions
            .iter()
            .filter(|(_, s)| {
                let transport_closed = s.peer.as_ref().is_some_and(|p| p.is_transport_closed());
                transport_closed || (!s.stream_open && now.duration_since(s.idle_since) > grace)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in &dead {
            sessions.remove(k);
        }
        dead
    }

    /// Number of sessions with an open notification stream.
    pub fn active_sessions(&self) -> usize {
        self.lock().values().filter(|s| s.tx.is_some()).count()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }
}
