//! The gate's state machine: replay of settled ids, the hold buffer and
//! the input queue per session, host decisions, expiry and re-evaluation.

use std::time::{Duration, Instant};

use super::super::frames::{DeliveryState, DropReason, UserFrame};
use super::super::limits::{Lru, Now};
use super::super::names::{canonical_msg_id, OriginKind};
use super::{
    resolve_policy, sender_key, Admission, Decision, DropCoalescer, HeldExpiry, HoldCause,
    InboundSettings, Policy,
};

/// Held messages per session.
pub(crate) const MAX_HELD: usize = 50;
/// Accepted messages per session not yet consumed by the host.
pub(crate) const MAX_QUEUED: usize = 50;
/// Settled ids remembered (canonical form).
pub(crate) const MAX_SETTLED: usize = 512;

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
