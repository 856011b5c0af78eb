//! The receiver's gate, as Qwen Code 0.24.4 runs it (`PeerAdmission`,
//! `InboundGate`, `DropReceiptCoalescer`), as a synchronous state machine:
//! every call takes the time and returns the receipts to send, so it can be
//! tested without sockets or sleeping.
//!
//! Order for a user frame that reached a session (misaddressed frames never
//! get here): admission (global bucket, then the duplicate check, then the
//! sender's bucket; nothing is charged unless all pass) → settled-id replay
//! (canonical ids) → an id already held is held again → policy (`accept` /
//! `hold` / `refuse`, or the mode-parity default) → accept into the input
//! queue (50 per session) or park in the hold buffer (50 per session), else
//! `dropped`/`queue-full`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::frames::{DeliveryState, DropReason, ReviewClass, UserFrame, MAX_DROPPED_MSG_IDS};
use super::names::{canonical_msg_id, js_slice, OriginKind};

// Admission limits (Qwen's PEER_ADMISSION_LIMITS).
pub(crate) const BUCKET_CAPACITY: f64 = 30.0;
pub(crate) const REFILL_PER_SECOND: f64 = 0.5;
pub(crate) const DEDUP_WINDOW_MS: f64 = 30_000.0;
pub(crate) const GLOBAL_BUCKET_CAPACITY: f64 = 32.0;
pub(crate) const GLOBAL_REFILL_PER_SECOND: f64 = 1.0;
pub(crate) const MAX_TRACKED_SENDERS: usize = 256;
/// Time for an empty per-sender bucket to refill completely.
pub(crate) const BURST_WINDOW_MS: f64 = BUCKET_CAPACITY / REFILL_PER_SECOND * 1000.0;
/// Held messages per session.
pub(crate) const MAX_HELD: usize = 50;
/// Accepted messages per session not yet consumed by the host.
pub(crate) const MAX_QUEUED: usize = 50;
/// Settled ids remembered (canonical form).
pub(crate) const MAX_SETTLED: usize = 512;
/// Characters of `from` used in a sender key.
pub(crate) const MAX_SENDER_KEY_CHARS: usize = 256;

// Dropped-receipt coalescing (Qwen's peer-drop-reports).
const DROP_WINDOW: Duration = Duration::from_secs(60);
pub(crate) const DROP_TRAIL: Duration = Duration::from_secs(5);
const MAX_DEFERRED_AGE: Duration = Duration::from_secs(120);
const MAX_DROP_RECEIPTS_PER_WINDOW: usize = 40;
const MAX_DROP_KEYS: usize = 256;
const MAX_RETAINED_REPLY_TOKEN_CHARS: usize = 256;

/// A point in time on both clocks: ages are the larger of the monotonic
/// and the wall-clock difference (suspend advances only the wall clock; a
/// backward wall step then changes nothing).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub mono: Instant,
    pub wall_ms: f64,
}

impl Now {
    pub fn real() -> Now {
        Now {
            mono: Instant::now(),
            wall_ms: wall_ms(),
        }
    }
    /// `self` moved forward by `d` on both clocks (tests).
    pub fn plus(self, d: Duration) -> Now {
        Now {
            mono: self.mono + d,
            wall_ms: self.wall_ms + d.as_secs_f64() * 1000.0,
        }
    }
    pub fn age_ms(self, since: Now) -> f64 {
        let mono = self
            .mono
            .saturating_duration_since(since.mono)
            .as_secs_f64()
            * 1000.0;
        mono.max(self.wall_ms - since.wall_ms)
    }
}

/// Milliseconds since the epoch.
pub fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

fn secs_between(later: Instant, earlier: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64()
}

pub(crate) fn refill(
    tokens: f64,
    last: Instant,
    now: Instant,
    capacity: f64,
    per_second: f64,
) -> f64 {
    capacity.min(tokens + secs_between(now, last) * per_second)
}

pub fn body_hash(body: &str) -> [u8; 32] {
    Sha256::digest(body.as_bytes()).into()
}

/// A small insertion-ordered map whose `touch` moves a key to the end.
#[derive(Debug, Clone)]
pub struct Lru<V> {
    map: HashMap<String, (u64, V)>,
    order: VecDeque<(u64, String)>,
    seq: u64,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            map: HashMap::new(),
            order: VecDeque::new(),
            seq: 0,
        }
    }
}

impl<V> Lru<V> {
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, k: &str) -> Option<&V> {
        self.map.get(k).map(|(_, v)| v)
    }
    pub fn get_mut(&mut self, k: &str) -> Option<&mut V> {
        self.map.get_mut(k).map(|(_, v)| v)
    }
    /// Inserts (or replaces) `k`, making it the newest.
    pub fn insert(&mut self, k: String, v: V) {
        self.seq += 1;
        self.map.insert(k.clone(), (self.seq, v));
        self.order.push_back((self.seq, k));
        self.compact();
    }
    /// Makes `k` the newest; false when absent.
    pub fn touch(&mut self, k: &str) -> bool {
        let Some(entry) = self.map.get_mut(k) else {
            return false;
        };
        self.seq += 1;
        entry.0 = self.seq;
        self.order.push_back((self.seq, k.to_string()));
        self.compact();
        true
    }
    pub fn remove(&mut self, k: &str) -> Option<V> {
        self.map.remove(k).map(|(_, v)| v)
    }
    /// Keys from oldest to newest.
    pub fn keys_oldest_first(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|(s, k)| self.map.get(k).is_some_and(|(cur, _)| cur == s))
            .map(|(_, k)| k.clone())
            .collect()
    }
    pub fn pop_oldest(&mut self) -> Option<(String, V)> {
        while let Some((s, k)) = self.order.pop_front() {
            if self.map.get(&k).is_some_and(|(cur, _)| *cur == s) {
                let (_, v) = self.map.remove(&k)?;
                return Some((k, v));
            }
        }
        None
    }
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.map.values_mut().map(|(_, v)| v)
    }
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values().map(|(_, v)| v)
    }
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 32 {
            let map = &self.map;
            self.order
                .retain(|(s, k)| map.get(k).is_some_and(|(cur, _)| cur == s));
        }
    }
}

// ---------------------------------------------------------------------------
// Admission.

#[derive(Debug, Clone)]
struct BodyRecord {
    msg_id: String,
    hash: [u8; 32],
    at: Now,
}

#[derive(Debug, Clone)]
struct Meter {
    tokens: f64,
    last_refill: Instant,
    bodies: Vec<BodyRecord>,
}

/// Rate limits and the duplicate window, per sender key and overall.
#[derive(Debug, Clone)]
pub struct Admission {
    senders: Lru<Meter>,
    global_tokens: f64,
    global_refill: Instant,
}

impl Admission {
    pub fn new(now: Instant) -> Admission {
        Admission {
            senders: Lru::default(),
            global_tokens: GLOBAL_BUCKET_CAPACITY,
            global_refill: now,
        }
    }

    /// Whether a message may go on to the policy. `exempt` skips the
    /// duplicate check (own-process and controller senders).
    pub fn admit(
        &mut self,
        key: &str,
        body: &str,
        msg_id: &str,
        exempt: bool,
        now: Now,
    ) -> Result<(), DropReason> {
        self.global_tokens = refill(
            self.global_tokens,
            self.global_refill,
            now.mono,
            GLOBAL_BUCKET_CAPACITY,
            GLOBAL_REFILL_PER_SECOND,
        );
        self.global_refill = now.mono;
        if self.global_tokens < 1.0 {
            return Err(DropReason::RateLimited);
        }
        let meter = self.track(key, now.mono);
        meter.bodies.retain(|b| now.age_ms(b.at) < DEDUP_WINDOW_MS);
        let hash = (!exempt).then(|| body_hash(body));
        if hash.is_some() && meter.bodies.last().map(|b| b.hash) == hash {
            return Err(DropReason::Duplicate);
        }
        meter.tokens = refill(
            meter.tokens,
            meter.last_refill,
            now.mono,
            BUCKET_CAPACITY,
            REFILL_PER_SECOND,
        );
        meter.last_refill = now.mono;
        if meter.tokens < 1.0 {
            return Err(DropReason::RateLimited);
        }
        meter.tokens -= 1.0;
        if let Some(hash) = hash {
            meter.bodies.push(BodyRecord {
                msg_id: msg_id.to_string(),
                hash,
                at: now,
            });
        }
        self.global_tokens -= 1.0;
        Ok(())
    }

    /// Forgets the repeat record an admitted message left (its token stays spent).
    pub fn forget_body(&mut self, key: &str, body: &str, msg_id: &str) {
        if let Some(m) = self.senders.get_mut(key) {
            let h = body_hash(body);
            m.bodies.retain(|b| !(b.hash == h && b.msg_id == msg_id));
        }
    }

    /// Forgets every repeat record of one message id (canonical comparison).
    pub fn forget_message(&mut self, key: &str, msg_id: &str) {
        if let Some(m) = self.senders.get_mut(key) {
            let c = canonical_msg_id(msg_id);
            m.bodies.retain(|b| canonical_msg_id(&b.msg_id) != c);
        }
    }

    pub fn reset(&mut self, now: Instant) {
        *self = Admission::new(now);
    }

    pub fn tracked_senders(&self) -> usize {
        self.senders.len()
    }

    fn track(&mut self, key: &str, now: Instant) -> &mut Meter {
        if !self.senders.touch(key) {
            while self.senders.len() >= MAX_TRACKED_SENDERS {
                let keys = self.senders.keys_oldest_first();
                let victim = keys
                    .iter()
                    .find(|k| {
                        self.senders.get(k).is_some_and(|m| {
                            refill(
                                m.tokens,
                                m.last_refill,
                                now,
                                BUCKET_CAPACITY,
                                REFILL_PER_SECOND,
                            ) >= BUCKET_CAPACITY
                        })
                    })
                    .cloned();
                match victim {
                    Some(v) => {
                        self.senders.remove(&v);
                    }
                    None => {
                        self.senders.pop_oldest();
                    }
                }
            }
            self.senders.insert(
                key.to_string(),
                Meter {
                    tokens: BUCKET_CAPACITY,
                    last_refill: now,
                    bodies: Vec::new(),
                },
            );
        }
        self.senders.get_mut(key).expect("just inserted")
    }
}

/// The sender key a message is metered under: the proven origin first,
/// then the claimed `from` (so rotating `from` buys a fresh per-sender
/// bucket but never a global one).
pub fn sender_key(frame: &UserFrame, origin: &OriginKind) -> String {
    let address = js_slice(frame.from.as_deref().unwrap_or(""), MAX_SENDER_KEY_CHARS);
    match origin {
        OriginKind::Controller { id, .. } => format!("controller:{id}"),
        OriginKind::OwnProcess => format!("own:{address}"),
        OriginKind::Peer if address.is_empty() => "unknown".to_string(),
        OriginKind::Peer => format!("peer:{address}"),
    }
}

// ---------------------------------------------------------------------------
// Policy.

/// `agents.crossSessionInbound`: what to do with peer messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Accept,
    Hold,
    Refuse,
}

/// `agents.crossSessionHeldExpiry`: how long a held message waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HeldExpiry {
    #[serde(rename = "1m")]
    OneMinute,
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "10m")]
    TenMinutes,
    #[serde(rename = "never")]
    Never,
}

impl HeldExpiry {
    pub fn millis(self) -> Option<f64> {
        match self {
            HeldExpiry::OneMinute => Some(60_000.0),
            HeldExpiry::FiveMinutes => Some(300_000.0),
            HeldExpiry::TenMinutes => Some(600_000.0),
            HeldExpiry::Never => None,
        }
    }
}

/// How one session treats inbound peer messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundSettings {
    /// Explicit policy; `None` is "unset": own-process and controller
    /// senders are accepted, others by mode parity.
    #[serde(default)]
    pub policy: Option<Policy>,
    /// This session's review class; `None` is "unknown" (peers are held).
    #[serde(default)]
    pub review_class: Option<ReviewClass>,
    #[serde(default)]
    pub held_expiry: HeldExpiry,
}

/// Why a message is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldCause {
    ExplicitSetting,
    ModeMismatch,
    NoModeAsserted,
    ModeUnknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Accept,
    Hold(HoldCause),
    Refuse,
}

/// Qwen's `resolvePolicy` for one frame, origin and session settings.
pub fn resolve_policy(frame: &UserFrame, origin: &OriginKind, s: &InboundSettings) -> Decision {
    match s.policy {
        Some(Policy::Accept) => return Decision::Accept,
        Some(Policy::Hold) => return Decision::Hold(HoldCause::ExplicitSetting),
        Some(Policy::Refuse) => return Decision::Refuse,
        None => {}
    }
    if !matches!(origin, OriginKind::Peer) {
        return Decision::Accept;
    }
    let Some(mine) = s.review_class else {
        return Decision::Hold(HoldCause::ModeUnknown);
    };
    match frame.from_mode {
        None => Decision::Hold(HoldCause::NoModeAsserted),
        Some(m) if m == mine => Decision::Accept,
        Some(_) => Decision::Hold(HoldCause::ModeMismatch),
    }
}

// ---------------------------------------------------------------------------
// The gate.

/// A receipt to send to a message's `from`, authenticated with its `replyToken`.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    pub to: String,
    pub reply_token: Option<String>,
    pub status: DeliveryState,
    pub orig_msg_id: String,
    pub drop_reason: Option<DropReason>,
    pub dropped_msg_ids: Vec<String>,
}

/// What the caller must do after a gate call.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Receipt(Receipt),
    /// The input queue gained a message: hand it to the host.
    Deliver,
    /// The hold buffer changed: tell the host.
    HeldChanged,
}

/// A parked or queued message, with the session (slot) it was routed to.
#[derive(Debug, Clone)]
pub struct Entry {
    pub frame: UserFrame,
    pub origin: OriginKind,
    pub slot: u64,
    pub at: Now,
    pub cause: Option<HoldCause>,
    /// Handed to the host's message callback (queue entries only).
    pub dispatched: bool,
}

/// What the gate needs to know about our sessions.
pub trait SessionView {
    /// Settings of a registered session (`None`: it left).
    fn settings(&self, slot: u64) -> Option<InboundSettings>;
    /// Whether `frame`, routed to `slot` at arrival, still addresses it.
    fn pin_valid(&self, frame: &UserFrame, slot: u64) -> bool;
    /// The current session id of `slot` (admission resets when it changes).
    fn session_id(&self, slot: u64) -> Option<String>;
    /// Several sessions behind this inbox.
    fn multi(&self) -> bool;
    /// Whether a controller grant is still valid (`None`: don't know, keep it).
    fn controller_valid(&self, _id: &str) -> Option<bool> {
        None
    }
}

/// Result of a host decision on a held message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideOutcome {
    Done,
    /// No held message has that id (expired, decided, or never held).
    Gone,
    /// The message's session changed or left: settled `misaddressed`.
    Misaddressed,
    /// Approved but the input queue is full: parked again.
    QueueFull,
}

#[derive(Debug, Clone)]
pub struct Gate {
    admission: Admission,
    admission_session: Option<Option<String>>,
    settled: Lru<DeliveryState>,
    held: Vec<Entry>,
    queue: Vec<Entry>,
    drops: DropCoalescer,
    pub shutting_down: bool,
}

fn report(frame: &UserFrame, status: DeliveryState, out: &mut Vec<Action>) {
    if let Some(to) = &frame.from {
        out.push(Action::Receipt(Receipt {
            to: to.clone(),
            reply_token: frame.reply_token.clone(),
            status,
            orig_msg_id: frame.msg_id.clone(),
            drop_reason: None,
            dropped_msg_ids: Vec::new(),
        }));
    }
}

impl Gate {
    pub fn new(now: Now) -> Gate {
        Gate {
            admission: Admission::new(now.mono),
            admission_session: None,
            settled: Lru::default(),
            held: Vec::new(),
            queue: Vec::new(),
            drops: DropCoalescer::new(now.mono),
            shutting_down: false,
        }
    }

    pub fn held(&self) -> &[Entry] {
        &self.held
    }
    pub fn queue(&self) -> &[Entry] {
        &self.queue
    }
    pub fn queue_mut(&mut self) -> &mut Vec<Entry> {
        &mut self.queue
    }
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    fn record_settled(&mut self, msg_id: &str, v: DeliveryState) {
        let k = canonical_msg_id(msg_id);
        self.settled.remove(&k);
        self.settled.insert(k, v);
        while self.settled.len() > MAX_SETTLED {
            self.settled.pop_oldest();
        }
    }

    fn forget_admitted(&mut self, frame: &UserFrame, origin: &OriginKind) {
        self.admission
            .forget_body(&sender_key(frame, origin), &frame.content, &frame.msg_id);
    }

    /// Forgets the repeat record of a queued message invalidated outside the gate.
    pub fn forget_admitted_message(&mut self, frame: &UserFrame, origin: &OriginKind) {
        self.admission
            .forget_message(&sender_key(frame, origin), &frame.msg_id);
    }

    fn drop_message(
        &mut self,
        frame: &UserFrame,
        origin: &OriginKind,
        reason: DropReason,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        self.drops.note(frame, origin, reason, now.mono, out);
    }

    fn count(list: &[Entry], slot: u64) -> usize {
        list.iter().filter(|e| e.slot == slot).count()
    }

    fn try_deliver(&mut self, entry: Entry, out: &mut Vec<Action>) -> Result<(), Box<Entry>> {
        if self.shutting_down || Self::count(&self.queue, entry.slot) >= MAX_QUEUED {
            return Err(Box::new(entry));
        }
        self.queue.push(entry);
        out.push(Action::Deliver);
        Ok(())
    }

    /// Runs a freshly arrived frame, already routed to `slot`, through the gate.
    pub fn admit(
        &mut self,
        frame: UserFrame,
        origin: OriginKind,
        slot: u64,
        now: Now,
        view: &dyn SessionView,
        out: &mut Vec<Action>,
    ) {
        if !view.multi() {
            let sid = view.session_id(slot);
            if self.admission_session.as_ref().is_some_and(|s| *s != sid) {
                self.admission.reset(now.mono);
            }
            self.admission_session = Some(sid);
        }
        self.expire_overdue(now, view, out);
        let key = sender_key(&frame, &origin);
        let exempt = !matches!(origin, OriginKind::Peer);
        if let Err(reason) = self
            .admission
            .admit(&key, &frame.content, &frame.msg_id, exempt, now)
        {
            self.drop_message(&frame, &origin, reason, now, out);
            return;
        }
        let canon = canonical_msg_id(&frame.msg_id);
        if let Some(&verdict) = self.settled.get(&canon) {
            self.forget_admitted(&frame, &origin);
            report(&frame, verdict, out);
            return;
        }
        if self
            .held
            .iter()
            .any(|e| canonical_msg_id(&e.frame.msg_id) == canon)
        {
            self.forget_admitted(&frame, &origin);
            report(&frame, DeliveryState::Held, out);
            return;
        }
        let settings = view.settings(slot).unwrap_or(InboundSettings {
            policy: Some(Policy::Hold),
            review_class: None,
            held_expiry: HeldExpiry::default(),
        });
        let decision = resolve_policy(&frame, &origin, &settings);
        if decision == Decision::Refuse {
            self.forget_admitted(&frame, &origin);
            self.record_settled(&frame.msg_id, DeliveryState::Refused);
            report(&frame, DeliveryState::Refused, out);
            return;
        }
        if self.shutting_down {
            self.forget_admitted(&frame, &origin);
            report(&frame, DeliveryState::Expired, out);
            return;
        }
        let entry = Entry {
            frame,
            origin,
            slot,
            at: now,
            cause: None,
            dispatched: false,
        };
        match decision {
            Decision::Accept => match self.try_deliver(entry, out) {
                Ok(()) => {
                    let f = &self.queue.last().expect("just queued").frame;
                    let (id, f) = (f.msg_id.clone(), f.clone());
                    self.record_settled(&id, DeliveryState::Delivered);
                    report(&f, DeliveryState::Delivered, out);
                }
                Err(entry) => {
                    self.forget_admitted(&entry.frame, &entry.origin);
                    self.drop_message(&entry.frame, &entry.origin, DropReason::QueueFull, now, out);
                }
            },
            Decision::Hold(cause) => {
                if Self::count(&self.held, slot) >= MAX_HELD {
                    self.forget_admitted(&entry.frame, &entry.origin);
                    self.drop_message(&entry.frame, &entry.origin, DropReason::QueueFull, now, out);
                    return;
                }
                report(&entry.frame, DeliveryState::Held, out);
                self.held.push(Entry {
                    cause: Some(cause),
                    ..entry
                });
                out.push(Action::HeldChanged);
            }
            Decision::Refuse => unreachable!("handled above"),
        }
    }

    fn settle_misaddressed(&mut self, e: &Entry, out: &mut Vec<Action>) {
        self.forget_admitted(&e.frame, &e.origin);
        self.record_settled(&e.frame.msg_id, DeliveryState::Misaddressed);
        report(&e.frame, DeliveryState::Misaddressed, out);
    }

    /// Removes the authority of revoked controller grants from held messages
    /// (they are then judged as ordinary peers).
    pub fn forget_invalid_controllers(&mut self, view: &dyn SessionView, out: &mut Vec<Action>) {
        let mut changed = false;
        for i in 0..self.held.len() {
            let revoked = match &self.held[i].origin {
                OriginKind::Controller { id, .. } => view.controller_valid(id) == Some(false),
                _ => false,
            };
            if revoked {
                self.held[i].origin = OriginKind::Peer;
                let settings = view.settings(self.held[i].slot).unwrap_or(InboundSettings {
                    policy: None,
                    review_class: None,
                    held_expiry: HeldExpiry::default(),
                });
                if let Decision::Hold(c) =
                    resolve_policy(&self.held[i].frame, &OriginKind::Peer, &settings)
                {
                    self.held[i].cause = Some(c);
                }
                changed = true;
            }
        }
        if changed {
            out.push(Action::HeldChanged);
        }
    }

    /// The host's decision on a held message (`approve` = release).
    pub fn decide(
        &mut self,
        msg_id: &str,
        approve: bool,
        now: Now,
        view: &dyn SessionView,
        out: &mut Vec<Action>,
    ) -> DecideOutcome {
        self.expire_overdue(now, view, out);
        self.forget_invalid_controllers(view, out);
        let Some(index) = self.held.iter().position(|e| e.frame.msg_id == msg_id) else {
            return DecideOutcome::Gone;
        };
        let entry = self.held.remove(index);
        if approve {
            if !view.pin_valid(&entry.frame, entry.slot) {
                self.settle_misaddressed(&entry, out);
                out.push(Action::HeldChanged);
                return DecideOutcome::Misaddressed;
            }
            let frame = entry.frame.clone();
            let (held_at, cause) = (entry.at, entry.cause);
            let queued = Entry {
                cause: None,
                at: now,
                ..entry
            };
            if let Err(back) = self.try_deliver(queued, out) {
                report(&back.frame, DeliveryState::Held, out);
                let restored = Entry {
                    at: held_at,
                    cause,
                    ..*back
                };
                self.held.insert(index, restored);
                out.push(Action::HeldChanged);
                return DecideOutcome::QueueFull;
            }
            self.record_settled(&frame.msg_id, DeliveryState::Delivered);
            report(&frame, DeliveryState::Delivered, out);
        } else {
            self.forget_admitted(&entry.frame, &entry.origin);
            self.record_settled(&entry.frame.msg_id, DeliveryState::Denied);
            report(&entry.frame, DeliveryState::Denied, out);
        }
        out.push(Action::HeldChanged);
        DecideOutcome::Done
    }

    /// Re-judges every held message (after a policy or review-class change):
    /// what is now acceptable is delivered, `refuse` settles the backlog as
    /// `denied`, the rest stays held (oldest first). Returns how many were released.
    pub fn reevaluate(&mut self, now: Now, view: &dyn SessionView, out: &mut Vec<Action>) -> usize {
        self.expire_overdue(now, view, out);
        self.forget_invalid_controllers(view, out);
        if self.held.is_empty() {
            return 0;
        }
        let held = std::mem::take(&mut self.held);
        let mut still = Vec::new();
        let mut release = Vec::new();
        let mut changed = false;
        for mut e in held {
            if view.multi() && !view.pin_valid(&e.frame, e.slot) {
                self.settle_misaddressed(&e, out);
                changed = true;
                continue;
            }
            let settings = view.settings(e.slot).unwrap_or(InboundSettings {
                policy: Some(Policy::Hold),
                review_class: None,
                held_expiry: HeldExpiry::default(),
            });
            match resolve_policy(&e.frame, &e.origin, &settings) {
                Decision::Accept => release.push(e),
                Decision::Refuse => {
                    self.forget_admitted(&e.frame, &e.origin);
                    self.record_settled(&e.frame.msg_id, DeliveryState::Denied);
                    report(&e.frame, DeliveryState::Denied, out);
                    changed = true;
                }
                Decision::Hold(c) => {
                    e.cause = Some(c);
                    still.push(e);
                }
            }
        }
        let mut released = 0;
        for e in release {
            changed = true;
            if !view.pin_valid(&e.frame, e.slot) {
                self.settle_misaddressed(&e, out);
                continue;
            }
            let frame = e.frame.clone();
            let held_at = e.at;
            let cause = e.cause;
            let queued = Entry {
                cause: None,
                at: now,
                ..e
            };
            match self.try_deliver(queued, out) {
                Ok(()) => {
                    released += 1;
                    self.record_settled(&frame.msg_id, DeliveryState::Delivered);
                    report(&frame, DeliveryState::Delivered, out);
                }
                Err(back) => {
                    report(&back.frame, DeliveryState::Held, out);
                    still.push(Entry {
                        at: held_at,
                        cause,
                        ..*back
                    });
                }
            }
        }
        still.sort_by(|a, b| {
            now.age_ms(b.at)
                .partial_cmp(&now.age_ms(a.at))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        self.held = still;
        if changed {
            out.push(Action::HeldChanged);
        }
        released
    }

    /// Settles every held message whose hold ran out (judged against the
    /// session's current setting).
    pub fn expire_overdue(&mut self, now: Now, view: &dyn SessionView, out: &mut Vec<Action>) {
        if self.held.is_empty() {
            return;
        }
        let (expired, keep): (Vec<Entry>, Vec<Entry>) =
            std::mem::take(&mut self.held).into_iter().partition(|e| {
                let expiry = view
                    .settings(e.slot)
                    .map(|s| s.held_expiry)
                    .unwrap_or_default();
                expiry.millis().is_some_and(|ms| now.age_ms(e.at) >= ms)
            });
        self.held = keep;
        if expired.is_empty() {
            return;
        }
        for e in &expired {
            self.forget_admitted(&e.frame, &e.origin);
            self.record_settled(&e.frame.msg_id, DeliveryState::Expired);
            report(&e.frame, DeliveryState::Expired, out);
        }
        out.push(Action::HeldChanged);
    }

    /// Timers: held expiry and dropped-receipt batches that are due.
    pub fn tick(&mut self, now: Now, view: &dyn SessionView, out: &mut Vec<Action>) {
        self.expire_overdue(now, view, out);
        self.drops.due(now.mono, out);
    }

    /// When `tick` next has something to do.
    pub fn next_deadline(&self, now: Now, view: &dyn SessionView) -> Option<Instant> {
        let held = self
            .held
            .iter()
            .filter_map(|e| {
                let ms = view
                    .settings(e.slot)
                    .map(|s| s.held_expiry)
                    .unwrap_or_default()
                    .millis()?;
                let left = (ms - now.age_ms(e.at)).max(1.0);
                Some(now.mono + Duration::from_secs_f64(left / 1000.0))
            })
            .min();
        match (held, self.drops.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A session leaves: its held and not-yet-consumed queued messages are
    /// settled `expired` (a `delivered` message the host never consumed is
    /// corrected to `expired`).
    pub fn settle_slot(&mut self, slot: u64, out: &mut Vec<Action>) {
        let (gone, keep): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|e| e.slot == slot);
        self.held = keep;
        let had_held = !gone.is_empty();
        for e in gone {
            self.forget_admitted(&e.frame, &e.origin);
            self.record_settled(&e.frame.msg_id, DeliveryState::Expired);
            report(&e.frame, DeliveryState::Expired, out);
        }
        let (gone, keep): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|e| e.slot == slot);
        self.queue = keep;
        for e in gone {
            self.record_settled(&e.frame.msg_id, DeliveryState::Expired);
            report(&e.frame, DeliveryState::Expired, out);
        }
        if had_held {
            out.push(Action::HeldChanged);
        }
    }

    /// The inbox is closing: refuse new holds and send every waiting
    /// dropped receipt now.
    pub fn shutdown(&mut self, now: Now, out: &mut Vec<Action>) {
        self.shutting_down = true;
        self.drops.flush(now.mono, out);
    }

    /// Removes a consumed queue entry (by exact id and slot).
    pub fn consume(&mut self, msg_id: &str, slot: u64) -> bool {
        match self
            .queue
            .iter()
            .position(|e| e.frame.msg_id == msg_id && e.slot == slot)
        {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }
}

// ---------------------------------------------------------------------------
// Dropped receipts, coalesced.

#[derive(Debug, Clone)]
struct ReceiptTarget {
    msg_id: String,
    from: String,
    reply_token: Option<String>,
}

#[derive(Debug, Clone)]
struct Batch {
    last_immediate: Option<Instant>,
    first: Option<ReceiptTarget>,
    reason: Option<DropReason>,
    first_noted: Instant,
    ids: Vec<String>,
    pending: usize,
    timer: Option<Instant>,
}

/// Answers drops without answering a flood with a flood: per (sender,
/// reason) the first drop is answered at once (at most once a minute); later
/// ones are batched into one receipt 5 s later (`origMsgId` + up to 256
/// `droppedMsgIds`); at most 40 such receipts a minute; a batch waiting on
/// that budget for 2 minutes is abandoned.
#[derive(Debug, Clone)]
pub struct DropCoalescer {
    batches: Lru<Batch>,
    window_started: Instant,
    sent_in_window: usize,
    trail: Duration,
}

impl DropCoalescer {
    pub fn new(now: Instant) -> DropCoalescer {
        DropCoalescer {
            batches: Lru::default(),
            window_started: now,
            sent_in_window: 0,
            trail: DROP_TRAIL,
        }
    }

    fn budget_spent(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.window_started) >= DROP_WINDOW {
            self.window_started = now;
            self.sent_in_window = 0;
        }
        self.sent_in_window >= MAX_DROP_RECEIPTS_PER_WINDOW
    }

    fn dispatch(
        &mut self,
        target: ReceiptTarget,
        reason: DropReason,
        ids: Vec<String>,
        out: &mut Vec<Action>,
    ) {
        self.sent_in_window += 1;
        out.push(Action::Receipt(Receipt {
            to: target.from,
            reply_token: target.reply_token,
            status: DeliveryState::Dropped,
            orig_msg_id: target.msg_id,
            drop_reason: Some(reason),
            dropped_msg_ids: ids,
        }));
    }

    pub fn note(
        &mut self,
        frame: &UserFrame,
        origin: &OriginKind,
        reason: DropReason,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let reply = js_slice(frame.from.as_deref().unwrap_or(""), MAX_SENDER_KEY_CHARS);
        if reply.is_empty() {
            return;
        }
        let target = ReceiptTarget {
            msg_id: frame.msg_id.clone(),
            from: reply.to_string(),
            reply_token: frame
                .reply_token
                .clone()
                .filter(|t| super::names::utf16_len(t) <= MAX_RETAINED_REPLY_TOKEN_CHARS),
        };
        let key = format!("{}\0{}", sender_key(frame, origin), reason.as_str());
        self.touch(&key, now, out);
        let immediate = {
            let b = self.batches.get(&key).expect("touched");
            b.pending == 0
                && b.last_immediate
                    .is_none_or(|t| now.saturating_duration_since(t) >= DROP_WINDOW)
        };
        if immediate && !self.budget_spent(now) {
            self.batches.get_mut(&key).expect("touched").last_immediate = Some(now);
            self.dispatch(target, reason, Vec::new(), out);
            return;
        }
        let trail = self.trail;
        let b = self.batches.get_mut(&key).expect("touched");
        b.pending += 1;
        if b.first.is_none() {
            b.first = Some(target);
            b.reason = Some(reason);
            b.first_noted = now;
            if b.timer.is_none() {
                b.timer = Some(now + trail);
            }
        } else if b.ids.len() < MAX_DROPPED_MSG_IDS {
            b.ids.push(frame.msg_id.clone());
        }
    }

    fn touch(&mut self, key: &str, now: Instant, out: &mut Vec<Action>) {
        if self.batches.touch(key) {
            return;
        }
        while self.batches.len() >= MAX_DROP_KEYS {
            let Some((_, mut evicted)) = self.batches.pop_oldest() else {
                break;
            };
            if evicted.pending > 0 {
                self.send_batch(&mut evicted, false, now, out);
            }
        }
        self.batches.insert(
            key.to_string(),
            Batch {
                last_immediate: None,
                first: None,
                reason: None,
                first_noted: now,
                ids: Vec::new(),
                pending: 0,
                timer: None,
            },
        );
    }

    fn send_batch(&mut self, b: &mut Batch, force: bool, now: Instant, out: &mut Vec<Action>) {
        b.timer = None;
        let (Some(_), Some(reason)) = (&b.first, b.reason) else {
            b.pending = 0;
            b.ids.clear();
            return;
        };
        if !force && now.saturating_duration_since(b.first_noted) >= MAX_DEFERRED_AGE {
            b.first = None;
            b.reason = None;
            b.ids.clear();
            b.pending = 0;
            return;
        }
        if !force && self.budget_spent(now) {
            b.timer = Some(now + self.trail);
            return;
        }
        let target = b.first.take().expect("checked");
        b.reason = None;
        b.pending = 0;
        let ids = std::mem::take(&mut b.ids);
        self.dispatch(target, reason, ids, out);
    }

    /// Sends the batches whose trail has run out.
    pub fn due(&mut self, now: Instant, out: &mut Vec<Action>) {
        for key in self.batches.keys_oldest_first() {
            let due = self
                .batches
                .get(&key)
                .and_then(|b| b.timer)
                .is_some_and(|t| t <= now);
            if due {
                let mut b = self.batches.remove(&key).expect("listed");
                self.send_batch(&mut b, false, now, out);
                self.batches.insert(key, b);
            }
        }
    }

    /// Sends every waiting batch now (the inbox is closing).
    pub fn flush(&mut self, now: Instant, out: &mut Vec<Action>) {
        for key in self.batches.keys_oldest_first() {
            let mut b = self.batches.remove(&key).expect("listed");
            if b.pending > 0 {
                self.send_batch(&mut b, true, now, out);
            }
            b.timer = None;
            self.batches.insert(key, b);
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.batches.values().filter_map(|b| b.timer).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::frames::Priority;

    struct View {
        multi: bool,
        settings: InboundSettings,
        sessions: Vec<(u64, String)>,
        revoked: Vec<String>,
    }

    impl View {
        fn single(settings: InboundSettings) -> View {
            View {
                multi: false,
                settings,
                sessions: vec![(1, "sid".into())],
                revoked: vec![],
            }
        }
    }

    impl SessionView for View {
        fn settings(&self, slot: u64) -> Option<InboundSettings> {
            self.sessions
                .iter()
                .any(|(s, _)| *s == slot)
                .then_some(self.settings)
        }
        fn pin_valid(&self, frame: &UserFrame, slot: u64) -> bool {
            match self.sessions.iter().find(|(s, _)| *s == slot) {
                None => false,
                Some((_, id)) => frame.to_session_id.as_deref().is_none_or(|t| t == id),
            }
        }
        fn session_id(&self, slot: u64) -> Option<String> {
            self.sessions
                .iter()
                .find(|(s, _)| *s == slot)
                .map(|(_, id)| id.clone())
        }
        fn multi(&self) -> bool {
            self.multi
        }
        fn controller_valid(&self, id: &str) -> Option<bool> {
            Some(!self.revoked.iter().any(|r| r == id))
        }
    }

    fn frame(id: &str, from: &str, body: &str, mode: Option<ReviewClass>) -> UserFrame {
        UserFrame {
            msg_id: id.into(),
            from: (!from.is_empty()).then(|| from.to_string()),
            reply_token: Some("rt".into()),
            from_name: Some("peer".into()),
            from_mode: mode,
            to_session_id: None,
            priority: Priority::Next,
            content: body.into(),
            raw: None,
        }
    }

    fn statuses(out: &[Action]) -> Vec<(String, DeliveryState)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Receipt(r) => Some((r.orig_msg_id.clone(), r.status)),
                _ => None,
            })
            .collect()
    }

    fn settings(policy: Option<Policy>, class: Option<ReviewClass>) -> InboundSettings {
        InboundSettings {
            policy,
            review_class: class,
            held_expiry: HeldExpiry::FiveMinutes,
        }
    }

    #[test]
    fn policy_table() {
        use Decision::*;
        use HoldCause::*;
        use ReviewClass::*;
        let ctl = OriginKind::Controller {
            id: "c_1".into(),
            label: "x".into(),
        };
        // (policy, our class, frame mode, origin, expected)
        type Case = (
            Option<Policy>,
            Option<ReviewClass>,
            Option<ReviewClass>,
            OriginKind,
            Decision,
        );
        let cases: Vec<Case> = vec![
            (Some(Policy::Accept), None, None, OriginKind::Peer, Accept),
            (
                Some(Policy::Hold),
                Some(Bypass),
                Some(Bypass),
                ctl.clone(),
                Hold(ExplicitSetting),
            ),
            (
                Some(Policy::Refuse),
                None,
                None,
                OriginKind::OwnProcess,
                Refuse,
            ),
            (None, None, None, OriginKind::OwnProcess, Accept),
            (None, None, None, ctl.clone(), Accept),
            (
                None,
                None,
                Some(Bypass),
                OriginKind::Peer,
                Hold(ModeUnknown),
            ),
            (
                None,
                Some(Bypass),
                None,
                OriginKind::Peer,
                Hold(NoModeAsserted),
            ),
            (None, Some(Bypass), Some(Bypass), OriginKind::Peer, Accept),
            (
                None,
                Some(Bypass),
                Some(Prompting),
                OriginKind::Peer,
                Hold(ModeMismatch),
            ),
            (
                None,
                Some(Prompting),
                Some(Prompting),
                OriginKind::Peer,
                Accept,
            ),
            (
                None,
                Some(Prompting),
                Some(Bypass),
                OriginKind::Peer,
                Hold(ModeMismatch),
            ),
        ];
        for (p, c, m, o, want) in cases {
            let f = frame("m", "/a", "x", m);
            assert_eq!(
                resolve_policy(&f, &o, &settings(p, c)),
                want,
                "{p:?} {c:?} {m:?} {o:?}"
            );
        }
    }

    #[test]
    fn sender_keys() {
        let f = frame("m", "/a.sock", "x", None);
        assert_eq!(sender_key(&f, &OriginKind::Peer), "peer:/a.sock");
        assert_eq!(sender_key(&f, &OriginKind::OwnProcess), "own:/a.sock");
        assert_eq!(
            sender_key(
                &f,
                &OriginKind::Controller {
                    id: "c_1".into(),
                    label: "l".into()
                }
            ),
            "controller:c_1"
        );
        assert_eq!(
            sender_key(&frame("m", "", "x", None), &OriginKind::Peer),
            "unknown"
        );
        let long = format!("/{}", "a".repeat(400));
        assert_eq!(
            sender_key(&frame("m", &long, "x", None), &OriginKind::Peer).len(),
            5 + 256
        );
    }

    #[test]
    fn admission_buckets_and_duplicates() {
        let t0 = Now::real();
        let mut a = Admission::new(t0.mono);
        // Per-sender burst of 30, then 0.5/s.
        for i in 0..30 {
            assert_eq!(
                a.admit("peer:/a", &format!("b{i}"), &format!("m{i}"), false, t0),
                Ok(())
            );
        }
        assert_eq!(
            a.admit("peer:/a", "b30", "m30", false, t0),
            Err(DropReason::RateLimited)
        );
        let t2 = t0.plus(Duration::from_secs(2));
        assert_eq!(a.admit("peer:/a", "b31", "m31", false, t2), Ok(()));
        // The global bucket (32, 1/s) is shared: 2 left + 2 refilled - 1 = 3 more, then none.
        assert_eq!(a.admit("peer:/b", "x", "n1", false, t2), Ok(()));
        assert_eq!(a.admit("peer:/c", "y", "n2", false, t2), Ok(()));
        assert_eq!(a.admit("peer:/d", "z", "n3", false, t2), Ok(()));
        assert_eq!(
            a.admit("peer:/e", "w", "n4", false, t2),
            Err(DropReason::RateLimited)
        );
        // Duplicate: same body as this sender's last admitted one, within 30 s.
        let mut a = Admission::new(t0.mono);
        assert_eq!(a.admit("peer:/a", "same", "m1", false, t0), Ok(()));
        assert_eq!(
            a.admit("peer:/a", "same", "m2", false, t0),
            Err(DropReason::Duplicate)
        );
        assert_eq!(
            a.admit("peer:/b", "same", "m3", false, t0),
            Ok(()),
            "another sender may say it"
        );
        assert_eq!(a.admit("own:/a", "same", "m4", true, t0), Ok(()));
        assert_eq!(
            a.admit("own:/a", "same", "m5", true, t0),
            Ok(()),
            "exempt origins"
        );
        assert_eq!(
            a.admit(
                "peer:/a",
                "same",
                "m6",
                false,
                t0.plus(Duration::from_secs(30))
            ),
            Ok(()),
            "window over"
        );
        // A duplicate costs no token.
        let mut a = Admission::new(t0.mono);
        a.admit("peer:/a", "same", "m1", false, t0).unwrap();
        for _ in 0..100 {
            assert_eq!(
                a.admit("peer:/a", "same", "mx", false, t0),
                Err(DropReason::Duplicate)
            );
        }
        assert_eq!(a.admit("peer:/a", "other", "m2", false, t0), Ok(()));
        // Forgetting a body lets an honest retry through.
        let mut a = Admission::new(t0.mono);
        a.admit("peer:/a", "same", "m1", false, t0).unwrap();
        a.forget_body("peer:/a", "same", "m1");
        assert_eq!(a.admit("peer:/a", "same", "m2", false, t0), Ok(()));
        a.forget_message("peer:/a", "M-2");
        assert_eq!(a.admit("peer:/a", "same", "m3", false, t0), Ok(()));
        // Wall-clock jumps count as elapsed for the duplicate window.
        let mut a = Admission::new(t0.mono);
        a.admit("peer:/a", "same", "m1", false, t0).unwrap();
        let jumped = Now {
            mono: t0.mono,
            wall_ms: t0.wall_ms + 31_000.0,
        };
        assert_eq!(a.admit("peer:/a", "same", "m2", false, jumped), Ok(()));
    }

    #[test]
    fn admission_tracks_at_most_256_senders() {
        let t0 = Now::real();
        let mut a = Admission::new(t0.mono);
        let mut t = t0;
        for i in 0..300 {
            t = t.plus(Duration::from_secs(1));
            let _ = a.admit(&format!("peer:/{i}"), "x", &format!("m{i}"), false, t);
        }
        assert_eq!(a.tracked_senders(), 256);
    }

    fn gate_with(view: &View) -> (Gate, Now) {
        let now = Now::real();
        let _ = view;
        (Gate::new(now), now)
    }

    #[test]
    fn gate_accept_hold_refuse_and_replay() {
        let view = View::single(settings(None, Some(ReviewClass::Bypass)));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("m1", "/a", "one", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(
            statuses(&out),
            vec![("m1".into(), DeliveryState::Delivered)]
        );
        assert!(out.contains(&Action::Deliver));
        out.clear();
        g.admit(
            frame("m2", "/a", "two", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(statuses(&out), vec![("m2".into(), DeliveryState::Held)]);
        assert!(out.contains(&Action::HeldChanged));
        out.clear();
        // Replays: a settled id repeats its verdict (canonical form), a held id is held again.
        g.admit(
            frame("M-1", "/a", "new body", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        g.admit(
            frame("m2", "/a", "other body", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(
            statuses(&out),
            vec![
                ("M-1".into(), DeliveryState::Delivered),
                ("m2".into(), DeliveryState::Held)
            ]
        );
        assert_eq!(g.queue().len(), 1, "the replay is not delivered again");
        assert_eq!(g.held().len(), 1);
        out.clear();
        // Re-sending a settled id with the same body within 30 s is a duplicate first.
        g.admit(
            frame("m9", "/b", "dup", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        out.clear();
        g.admit(
            frame("m9", "/b", "dup", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert!(
            matches!(&out[..], [Action::Receipt(r)] if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::Duplicate))
        );
        // Refuse.
        let view = View::single(settings(Some(Policy::Refuse), None));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("r1", "/a", "x", None),
            OriginKind::OwnProcess,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(statuses(&out), vec![("r1".into(), DeliveryState::Refused)]);
        out.clear();
        g.admit(
            frame("r1", "/a", "y", None),
            OriginKind::OwnProcess,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(statuses(&out), vec![("r1".into(), DeliveryState::Refused)]);
        // No `from`: processed, but no receipt.
        let view = View::single(settings(None, Some(ReviewClass::Bypass)));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("n1", "", "x", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert!(statuses(&out).is_empty());
        assert_eq!(g.queue().len(), 1);
    }

    #[test]
    fn gate_caps_hold_and_queue_at_50() {
        let view = View::single(settings(Some(Policy::Hold), None));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        // One a second, so the global bucket (32, 1/s) never runs dry.
        let at = |i: u64| t.plus(Duration::from_secs(i));
        for i in 0..50 {
            let origin = OriginKind::Controller {
                id: format!("c_{i}"),
                label: "l".into(),
            };
            g.admit(
                frame(&format!("h{i}"), &format!("/s{i}"), "x", None),
                origin,
                1,
                at(i),
                &view,
                &mut out,
            );
        }
        assert_eq!(g.held().len(), 50);
        out.clear();
        g.admit(
            frame("h50", "/z", "x", None),
            OriginKind::OwnProcess,
            1,
            at(50),
            &view,
            &mut out,
        );
        assert!(
            matches!(&out[..], [Action::Receipt(r)] if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::QueueFull))
        );
        assert_eq!(g.held().len(), 50, "a full buffer evicts nothing");

        let view = View::single(settings(Some(Policy::Accept), None));
        let (mut g, _) = gate_with(&view);
        let mut out = Vec::new();
        for i in 0..51 {
            let origin = OriginKind::Controller {
                id: format!("c_{i}"),
                label: "l".into(),
            };
            g.admit(
                frame(&format!("q{i}"), &format!("/s{i}"), "x", None),
                origin,
                1,
                at(i),
                &view,
                &mut out,
            );
        }
        assert_eq!(g.queue().len(), 50);
        assert!(
            matches!(out.last(), Some(Action::Receipt(r)) if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::QueueFull))
        );
        // Consuming one makes room; the dropped id was not tombstoned.
        assert!(g.consume("q0", 1));
        out.clear();
        g.admit(
            frame("q50", "/s50", "x2", None),
            OriginKind::OwnProcess,
            1,
            at(52),
            &view,
            &mut out,
        );
        assert_eq!(
            statuses(&out),
            vec![("q50".into(), DeliveryState::Delivered)]
        );
    }

    #[test]
    fn decisions_and_reevaluation() {
        let mut view = View::single(settings(None, Some(ReviewClass::Prompting)));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        for (id, body, mode) in [
            ("a", "1", Some(ReviewClass::Bypass)),
            ("b", "2", Some(ReviewClass::Bypass)),
            ("c", "3", None),
            ("d", "4", None),
        ] {
            g.admit(
                frame(id, &format!("/{id}"), body, mode),
                OriginKind::Peer,
                1,
                t,
                &view,
                &mut out,
            );
        }
        assert_eq!(g.held().len(), 4);
        out.clear();
        assert_eq!(g.decide("a", true, t, &view, &mut out), DecideOutcome::Done);
        assert_eq!(
            g.decide("c", false, t, &view, &mut out),
            DecideOutcome::Done
        );
        assert_eq!(
            g.decide("c", false, t, &view, &mut out),
            DecideOutcome::Gone
        );
        assert_eq!(
            statuses(&out),
            vec![
                ("a".into(), DeliveryState::Delivered),
                ("c".into(), DeliveryState::Denied)
            ]
        );
        // A mode change releases what now matches; the rest stays held.
        view.settings.review_class = Some(ReviewClass::Bypass);
        out.clear();
        assert_eq!(g.reevaluate(t, &view, &mut out), 1);
        assert_eq!(statuses(&out), vec![("b".into(), DeliveryState::Delivered)]);
        assert_eq!(g.held().len(), 1);
        assert_eq!(g.held()[0].cause, Some(HoldCause::NoModeAsserted));
        // Switching to refuse settles the backlog as denied, not refused.
        view.settings.policy = Some(Policy::Refuse);
        out.clear();
        g.reevaluate(t, &view, &mut out);
        assert_eq!(statuses(&out), vec![("d".into(), DeliveryState::Denied)]);
        assert!(g.held().is_empty());
    }

    #[test]
    fn release_of_a_stale_pin_is_misaddressed() {
        let mut view = View::single(settings(Some(Policy::Hold), None));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        let mut f = frame("p", "/a", "x", None);
        f.to_session_id = Some("sid".into());
        g.admit(f, OriginKind::Peer, 1, t, &view, &mut out);
        view.sessions[0].1 = "rotated".into();
        out.clear();
        assert_eq!(
            g.decide("p", true, t, &view, &mut out),
            DecideOutcome::Misaddressed
        );
        assert_eq!(
            statuses(&out),
            vec![("p".into(), DeliveryState::Misaddressed)]
        );
    }

    #[test]
    fn held_messages_expire() {
        for (expiry, after, expired) in [
            (HeldExpiry::OneMinute, 59, false),
            (HeldExpiry::OneMinute, 60, true),
            (HeldExpiry::FiveMinutes, 299, false),
            (HeldExpiry::FiveMinutes, 300, true),
            (HeldExpiry::TenMinutes, 599, false),
            (HeldExpiry::TenMinutes, 600, true),
            (HeldExpiry::Never, 100_000, false),
        ] {
            let mut view = View::single(settings(Some(Policy::Hold), None));
            view.settings.held_expiry = expiry;
            let (mut g, t) = gate_with(&view);
            let mut out = Vec::new();
            g.admit(
                frame("e", "/a", "x", None),
                OriginKind::Peer,
                1,
                t,
                &view,
                &mut out,
            );
            let deadline = g.next_deadline(t, &view);
            assert_eq!(deadline.is_some(), expiry != HeldExpiry::Never);
            out.clear();
            g.tick(t.plus(Duration::from_secs(after)), &view, &mut out);
            assert_eq!(
                statuses(&out) == vec![("e".to_string(), DeliveryState::Expired)],
                expired,
                "{expiry:?} after {after}s"
            );
            // A replay of an expired id repeats `expired`.
            if expired {
                out.clear();
                g.admit(
                    frame("e", "/a", "y", None),
                    OriginKind::Peer,
                    1,
                    t.plus(Duration::from_secs(after)),
                    &view,
                    &mut out,
                );
                assert_eq!(statuses(&out), vec![("e".into(), DeliveryState::Expired)]);
            }
        }
    }

    #[test]
    fn leaving_session_expires_held_and_unconsumed() {
        let view = View {
            multi: true,
            settings: settings(None, Some(ReviewClass::Bypass)),
            sessions: vec![(1, "s1".into()), (2, "s2".into())],
            revoked: vec![],
        };
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("d1", "/a", "1", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        g.admit(
            frame("h1", "/a", "2", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        g.admit(
            frame("d2", "/a", "3", Some(ReviewClass::Bypass)),
            OriginKind::Peer,
            2,
            t,
            &view,
            &mut out,
        );
        out.clear();
        g.settle_slot(1, &mut out);
        let mut got = statuses(&out);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                ("d1".into(), DeliveryState::Expired),
                ("h1".into(), DeliveryState::Expired)
            ]
        );
        assert_eq!(g.queue().len(), 1);
        assert_eq!(g.queue()[0].frame.msg_id, "d2");
    }

    #[test]
    fn revoked_controller_loses_authority_while_held() {
        let mut view = View::single(settings(None, Some(ReviewClass::Bypass)));
        view.settings.policy = Some(Policy::Hold);
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        let origin = OriginKind::Controller {
            id: "c_1".into(),
            label: "l".into(),
        };
        g.admit(frame("c", "/a", "x", None), origin, 1, t, &view, &mut out);
        view.settings.policy = None;
        view.revoked.push("c_1".into());
        out.clear();
        g.reevaluate(t, &view, &mut out);
        assert_eq!(g.held().len(), 1, "no longer accepted as a controller");
        assert_eq!(g.held()[0].origin, OriginKind::Peer);
        assert_eq!(g.held()[0].cause, Some(HoldCause::NoModeAsserted));
    }

    #[test]
    fn admission_resets_when_the_session_id_changes() {
        let mut view = View::single(settings(Some(Policy::Accept), None));
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("a1", "/a", "same", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        g.consume("a1", 1);
        out.clear();
        g.admit(
            frame("a2", "/a", "same", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert!(
            matches!(&out[..], [Action::Receipt(r)] if r.drop_reason == Some(DropReason::Duplicate))
        );
        view.sessions[0].1 = "new".into();
        out.clear();
        g.admit(
            frame("a3", "/a", "same", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        assert_eq!(
            statuses(&out),
            vec![("a3".into(), DeliveryState::Delivered)]
        );
    }

    #[test]
    fn dropped_receipts_coalesce() {
        let t0 = Instant::now();
        let mut c = DropCoalescer::new(t0);
        let mut out = Vec::new();
        let f = |id: &str| frame(id, "/a", "x", None);
        for i in 0..7 {
            c.note(
                &f(&format!("d{i}")),
                &OriginKind::Peer,
                DropReason::RateLimited,
                t0,
                &mut out,
            );
        }
        // The first is answered at once, the rest wait for the trail.
        assert_eq!(out.len(), 1);
        assert!(
            matches!(&out[0], Action::Receipt(r) if r.orig_msg_id == "d0" && r.dropped_msg_ids.is_empty())
        );
        assert_eq!(c.next_deadline(), Some(t0 + DROP_TRAIL));
        out.clear();
        c.due(t0 + Duration::from_secs(4), &mut out);
        assert!(out.is_empty());
        c.due(t0 + DROP_TRAIL, &mut out);
        assert_eq!(out.len(), 1);
        let Action::Receipt(r) = &out[0] else {
            panic!()
        };
        assert_eq!(r.orig_msg_id, "d1");
        assert_eq!(r.dropped_msg_ids, vec!["d2", "d3", "d4", "d5", "d6"]);
        assert_eq!(r.drop_reason, Some(DropReason::RateLimited));
        assert_eq!(r.reply_token.as_deref(), Some("rt"));
        // Another reason is another key: answered at once.
        out.clear();
        c.note(
            &f("x1"),
            &OriginKind::Peer,
            DropReason::Duplicate,
            t0,
            &mut out,
        );
        assert_eq!(out.len(), 1);
        // No `from`: nothing.
        out.clear();
        c.note(
            &frame("z", "", "x", None),
            &OriginKind::Peer,
            DropReason::Duplicate,
            t0,
            &mut out,
        );
        assert!(out.is_empty());
        // At most 256 extra ids in one receipt.
        let mut c = DropCoalescer::new(t0);
        let mut out = Vec::new();
        for i in 0..300 {
            c.note(
                &f(&format!("e{i}")),
                &OriginKind::Peer,
                DropReason::QueueFull,
                t0,
                &mut out,
            );
        }
        out.clear();
        c.flush(t0, &mut out);
        let Action::Receipt(r) = &out[0] else {
            panic!()
        };
        assert_eq!(r.dropped_msg_ids.len(), 256);
    }

    #[test]
    fn dropped_receipt_budget_is_40_a_minute() {
        let t0 = Instant::now();
        let mut c = DropCoalescer::new(t0);
        let mut out = Vec::new();
        for i in 0..45 {
            let f = frame(&format!("m{i}"), &format!("/s{i}"), "x", None);
            c.note(&f, &OriginKind::Peer, DropReason::RateLimited, t0, &mut out);
        }
        assert_eq!(out.len(), 40);
        out.clear();
        c.due(t0 + DROP_TRAIL, &mut out);
        assert!(out.is_empty(), "budget spent: re-armed");
        c.due(t0 + Duration::from_secs(60), &mut out);
        assert_eq!(out.len(), 5, "a new window");
        // A batch waiting on the budget for two minutes is abandoned.
        let mut c = DropCoalescer::new(t0);
        let mut out = Vec::new();
        for i in 0..41 {
            let f = frame(&format!("m{i}"), &format!("/s{i}"), "x", None);
            c.note(&f, &OriginKind::Peer, DropReason::RateLimited, t0, &mut out);
        }
        out.clear();
        c.due(t0 + Duration::from_secs(121), &mut out);
        assert!(out.is_empty());
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn replay_token_over_256_is_not_retained_for_drops() {
        let t0 = Instant::now();
        let mut c = DropCoalescer::new(t0);
        let mut out = Vec::new();
        let mut f = frame("m", "/a", "x", None);
        f.reply_token = Some("t".repeat(257));
        c.note(&f, &OriginKind::Peer, DropReason::Duplicate, t0, &mut out);
        assert!(matches!(&out[0], Action::Receipt(r) if r.reply_token.is_none()));
    }
}
