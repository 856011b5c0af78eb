//! The lifecycle of MCP sessions on a loopback server.
//!
//! The CLI never sends `DELETE /mcp`: every `qwen` run leaves its session
//! behind (initialize, initialized, GET stream, exit). A session is therefore
//! closed and freed — its rmcp worker, our per-session task, channels and
//! map entry — when its GET stream has been closed and it sent no request
//! for [`Lifecycle::grace`]. The grace is longer than the CLI's reconnect
//! behaviour: its MCP transport re-opens a dropped GET stream after the
//! server's SSE `retry` hint (rmcp sends 3 s), at most twice, so a live CLI
//! is back within about 7 s; the default grace is 30 s. A session that
//! reconnects within it keeps its state.
//!
//! The number of sessions is bounded ([`Lifecycle::max_sessions`]): a new
//! session beyond it evicts the oldest stream-less session first (and only
//! when every session has a stream, the oldest one). A session can also be
//! doomed at once (a client that stopped reading its stream).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::SessionManager;

use super::resume::McpSessions;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::host::Logger;

/// Session limits of one server.
#[derive(Debug, Clone, Copy)]
pub struct Lifecycle {
    /// How long a session without a stream and without requests is kept.
    pub grace: Duration,
    /// Most sessions kept at once.
    pub max_sessions: usize,
}

impl Lifecycle {
    /// From a server's config (`sessionGraceMs`: 1000 ..= 3600000,
    /// `maxSessions`: 1 ..= 4096; absent = the defaults).
    pub fn from_config(grace_ms: Option<u64>, max_sessions: Option<usize>) -> crate::Result<Self> {
        let mut l = Lifecycle::default();
        if let Some(ms) = grace_ms {
            if !(1000..=3_600_000).contains(&ms) {
                return Err(crate::Error::invalid_argument(
                    "sessionGraceMs must be between 1000 and 3600000",
                ));
            }
            l.grace = Duration::from_millis(ms);
        }
        if let Some(n) = max_sessions {
            if !(1..=4096).contains(&n) {
                return Err(crate::Error::invalid_argument(
                    "maxSessions must be between 1 and 4096",
                ));
            }
            l.max_sessions = n;
        }
        Ok(l)
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            grace: Duration::from_secs(30),
            max_sessions: 64,
        }
    }
}

/// Where a session stands.
#[derive(Debug, Clone)]
pub struct Life {
    pub created: Instant,
    pub stream_open: bool,
    pub stream_generation: u64,
    /// When the stream closed or the last request arrived (for the grace).
    pub idle_since: Instant,
    /// Close at the next reap, whatever the grace.
    pub doomed: bool,
}

/// A session: its lifecycle and the server's own data for it.
pub struct Entry<T> {
    pub life: Life,
    pub data: T,
}

/// The sessions of one server, with per-session data `T`.
pub struct Sessions<T> {
    map: Mutex<HashMap<String, Entry<T>>>,
    limits: Lifecycle,
    wake: Notify,
}

impl<T: Default> Sessions<T> {
    pub fn new(limits: Lifecycle) -> Sessions<T> {
        Sessions {
            map: Mutex::new(HashMap::new()),
            limits,
            wake: Notify::new(),
        }
    }

    pub fn limits(&self) -> Lifecycle {
        self.limits
    }

    /// The map, locked. Never call host code or await while holding it.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry<T>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `sid`, created when new. A new session beyond the bound
    /// dooms the oldest stream-less one (else the oldest one).
    pub fn entry<'a>(&self, map: &'a mut HashMap<String, Entry<T>>, sid: &str) -> &'a mut Entry<T> {
        if !map.contains_key(sid) {
            let live = map.values().filter(|e| !e.life.doomed).count();
            if live >= self.limits.max_sessions {
                let victim = map
                    .iter()
                    .filter(|(_, e)| !e.life.doomed)
                    .min_by_key(|(_, e)| (e.life.stream_open, e.life.idle_since))
                    .map(|(k, _)| k.clone());
                if let Some(k) = victim {
                    if let Some(e) = map.get_mut(&k) {
                        e.life.doomed = true;
                    }
                    self.wake.notify_one();
                }
            }
            let now = Instant::now();
            map.insert(
                sid.to_string(),
                Entry {
                    life: Life {
                        created: now,
                        stream_open: false,
                        stream_generation: 0,
                        idle_since: now,
                        doomed: false,
                    },
                    data: T::default(),
                },
            );
        }
        map.get_mut(sid).expect("just inserted")
    }

    /// A request of `sid` arrived (it keeps a stream-less session alive).
    pub fn request_seen(&self, sid: &str) {
        if let Some(e) = self.lock().get_mut(sid) {
            e.life.idle_since = Instant::now();
        }
    }

    /// The GET stream of `sid` opened; returns its generation.
    pub fn stream_opened(&self, map: &mut HashMap<String, Entry<T>>, sid: &str) -> u64 {
        let e = self.entry(map, sid);
        e.life.stream_generation += 1;
        e.life.stream_open = true;
        e.life.stream_generation
    }

    /// The GET stream `generation` of `sid` ended; returns the entry when it
    /// was the current stream.
    pub fn stream_closed<'a>(
        &self,
        map: &'a mut HashMap<String, Entry<T>>,
        sid: &str,
        generation: u64,
    ) -> Option<&'a mut Entry<T>> {
        let e = map.get_mut(sid)?;
        if e.life.stream_generation != generation {
            return None;
        }
        e.life.stream_open = false;
        e.life.idle_since = Instant::now();
        Some(e)
    }

    /// Closes `sid` at once (at the next reap, which this wakes).
    pub fn doom(&self, sid: &str) {
        if let Some(e) = self.lock().get_mut(sid) {
            e.life.doomed = true;
        }
        self.wake.notify_one();
    }

    /// Removes and returns the sessions due for closing: doomed ones, those
    /// `dead` says are gone, and stream-less ones idle past the grace.
    pub fn take_due(&self, dead: impl Fn(&T) -> bool) -> Vec<(String, T)> {
        let now = Instant::now();
        let mut map = self.lock();
        let due: Vec<String> = map
            .iter()
            .filter(|(_, e)| {
                e.life.doomed
                    || dead(&e.data)
                    || (!e.life.stream_open
                        && now.duration_since(e.life.idle_since) > self.limits.grace)
            })
            .map(|(k, _)| k.clone())
            .collect();
        due.into_iter()
            .filter_map(|k| map.remove(&k).map(|e| (k, e.data)))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, sid: &str) -> bool {
        self.lock().contains_key(sid)
    }

    /// Removes every session (the server stops).
    pub fn clear(&self) -> Vec<(String, T)> {
        self.lock().drain().map(|(k, e)| (k, e.data)).collect()
    }
}

/// Closes due sessions in rmcp too, until `cancel`: every `tick` (derived
/// from the grace) or at once when a session is doomed. rmcp sessions we do
/// not know (created by an `initialize` whose answer we never saw) are
/// closed once they stayed unknown for the grace. `closed` runs (outside
/// every lock) with the data of each removed session.
pub async fn reap_loop<T: Default + Send + 'static>(
    sessions: Arc<Sessions<T>>,
    manager: Arc<McpSessions>,
    cancel: CancellationToken,
    logger: Arc<Logger>,
    dead: impl Fn(&T) -> bool + Send + 'static,
    closed: impl Fn(&str, T) + Send + 'static,
) {
    let grace = sessions.limits().grace;
    let tick = (grace / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut unknown_since: HashMap<String, Instant> = HashMap::new();
    let mut trim = Trim::default();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = sessions.wake.notified() => {}
            _ = cancel.cancelled() => return,
        }
        let due = sessions.take_due(&dead);
        let freed = due.len();
        for (sid, data) in due {
            let _ = manager.close_session(&sid.as_str().into()).await;
            logger.debug(|| format!("session {sid}: closed and freed"));
            closed(&sid, data);
        }
        // rmcp's own table, reconciled with ours.
        let known: Vec<String> = manager
            .0
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let now = Instant::now();
        unknown_since.retain(|k, _| known.contains(k));
        let mut orphans = Vec::new();
        for k in known {
            if sessions.contains(&k) {
                unknown_since.remove(&k);
                continue;
            }
            let since = *unknown_since.entry(k.clone()).or_insert(now);
            if now.duration_since(since) > grace {
                orphans.push(k);
            }
        }
        let freed = freed + orphans.len();
        for k in orphans {
            unknown_since.remove(&k);
            let _ = manager.close_session(&k.as_str().into()).await;
            logger.debug(|| format!("session {k}: unknown to the server, closed"));
        }
        trim.after_free(freed);
    }
}

/// Gives memory freed with closed sessions back to the OS. The allocator
/// (glibc's) keeps freed blocks in its arenas, so without this an IDE that
/// saw a burst of sessions keeps the peak for its whole life. Trimming walks
/// the heap, so it runs at most every two seconds (a pass due sooner is
/// deferred to a later tick) and only after at least a few sessions were
/// freed since the last time.
#[derive(Default)]
struct Trim {
    freed_since: usize,
    last: Option<Instant>,
}

impl Trim {
    fn after_free(&mut self, n: usize) {
        self.freed_since += n;
        let due = self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(2));
        if self.freed_since >= 16 && due {
            self.freed_since = 0;
            self.last = Some(Instant::now());
            release_free_memory();
        }
    }
}

/// Returns free heap memory to the OS where the allocator supports it.
pub fn release_free_memory() {
    crate::sys::mem::release_free_memory();
}

/// Closes every rmcp session (the server stops).
pub async fn close_all(manager: &McpSessions) {
    let ids: Vec<_> = manager.0.sessions.read().await.keys().cloned().collect();
    for id in ids {
        let _ = manager.close_session(&id).await;
    }
}

#[cfg(test)]
mod tests;
