//! Dropped receipts, coalesced (Qwen's `DropReceiptCoalescer`).

use std::time::{Duration, Instant};

use super::super::frames::{DeliveryState, DropReason, UserFrame, MAX_DROPPED_MSG_IDS};
use super::super::limits::Lru;
use super::super::names::{js_slice, OriginKind};
use super::{sender_key, Action, Receipt, MAX_SENDER_KEY_CHARS};

// Dropped-receipt coalescing (Qwen's peer-drop-reports).
const DROP_WINDOW: Duration = Duration::from_secs(60);
pub(crate) const DROP_TRAIL: Duration = Duration::from_secs(5);
const MAX_DEFERRED_AGE: Duration = Duration::from_secs(120);
const MAX_DROP_RECEIPTS_PER_WINDOW: usize = 40;
const MAX_DROP_KEYS: usize = 256;
const MAX_RETAINED_REPLY_TOKEN_CHARS: usize = 256;

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
                .filter(|t| super::super::names::utf16_len(t) <= MAX_RETAINED_REPLY_TOKEN_CHARS),
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
mod tests;
