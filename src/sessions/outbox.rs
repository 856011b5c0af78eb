//! The sender's side: the messages we sent, moved through the receipt state
//! machine, and the per-address mirror of the receiver's limits (Qwen's
//! `reservePacerToken`) that refuses a send the receiver would drop.

use serde::Serialize;

use super::frames::{ControlFrame, DeliveryState, DropReason};
use super::gate::{body_hash, Lru, Now, BURST_WINDOW_MS, DEDUP_WINDOW_MS, SENDER_RATE};
use super::limits::TokenBucket;
use super::names::{canonical_msg_id, flatten_label};

/// Sends remembered for their receipts (oldest forgotten first).
pub(crate) const MAX_TRACKED_SENDS: usize = 200;
/// Addresses whose pacing is remembered.
pub(crate) const MAX_PACED_TARGETS: usize = 256;

/// One transition of a sent message, as reported to the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptEvent {
    pub msg_id: String,
    /// The address the message was sent to (as resolved).
    pub address: String,
    pub status: DeliveryState,
    pub previous: DeliveryState,
    /// The receiver's free text, flattened (never parse it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_reason: Option<DropReason>,
    /// The control frame exactly as received (a coalesced `dropped` receipt
    /// gives the same frame to each message it settles).
    pub frame: serde_json::Value,
}

/// The current state of a sent message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendState {
    pub msg_id: String,
    pub address: String,
    pub state: DeliveryState,
    /// The last transition, when a receipt moved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<ReceiptEvent>,
}

#[derive(Debug, Clone)]
struct Tracked {
    msg_id: String,
    address: String,
    ipc_path: String,
    sent_at: Now,
    state: DeliveryState,
    last: Option<ReceiptEvent>,
}

#[derive(Debug, Clone)]
struct PacedBody {
    msg_id: String,
    hash: [u8; 32],
    at: Now,
    generation: u64,
    token_spent: bool,
}

#[derive(Debug, Clone)]
struct Target {
    bucket: TokenBucket,
    sent_in_burst: u32,
    burst_started: std::time::Instant,
    bodies: Vec<PacedBody>,
    generation: u64,
}

/// Why a send was refused before it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceRefusal {
    /// The same body went to that inbox within the duplicate window.
    Repeat,
    /// The inbox's bucket for us is empty; `sent_in_burst` were sent in this burst.
    RateLimited { sent_in_burst: u32 },
}

impl PaceRefusal {
    pub fn describe(self) -> String {
        match self {
            PaceRefusal::Repeat => format!(
                "that exact message went to that inbox within the last {} seconds, and it turns a repeat away before anyone reads it, so this one was not sent; say something different or wait for a reply",
                DEDUP_WINDOW_MS as u64 / 1000
            ),
            PaceRefusal::RateLimited { sent_in_burst: 0 } => {
                "that inbox is still over its rate limit for us, so this message was not sent; wait a little before sending more".to_string()
            }
            PaceRefusal::RateLimited { sent_in_burst } => format!(
                "too many messages to that inbox just now: {sent_in_burst} were sent in the last {} seconds and more would be dropped by its rate limit, so this one was not sent; batch what remains into one message or wait",
                BURST_WINDOW_MS as u64 / 1000
            ),
        }
    }
}

#[derive(Debug, Default)]
pub struct Outbox {
    sends: Lru<Tracked>,
    targets: Lru<Target>,
}

impl Outbox {
    fn target(&mut self, ipc_path: &str, now: Now) -> &mut Target {
        self.targets.track_metered(
            ipc_path,
            MAX_PACED_TARGETS,
            SENDER_RATE,
            now.mono,
            |t| &t.bucket,
            || Target {
                bucket: TokenBucket::full(SENDER_RATE, now.mono),
                sent_in_burst: 0,
                burst_started: now.mono,
                bodies: Vec::new(),
                generation: 0,
            },
        )
    }

    /// Takes a token for a send of `body` to `ipc_path`, or says why not.
    pub fn reserve(
        &mut self,
        ipc_path: &str,
        body: &str,
        msg_id: &str,
        now: Now,
    ) -> Result<(), PaceRefusal> {
        let t = self.target(ipc_path, now);
        t.bucket.refill(SENDER_RATE, now.mono);
        t.bodies.retain(|b| now.age_ms(b.at) < DEDUP_WINDOW_MS);
        let hash = body_hash(body);
        if t.bodies.last().map(|b| b.hash) == Some(hash) {
            return Err(PaceRefusal::Repeat);
        }
        if t.bucket.tokens < 1.0 {
            return Err(PaceRefusal::RateLimited {
                sent_in_burst: t.sent_in_burst,
            });
        }
        let since_burst = now
            .mono
            .saturating_duration_since(t.burst_started)
            .as_secs_f64()
            * 1000.0;
        if t.bucket.tokens >= SENDER_RATE.capacity || since_burst > BURST_WINDOW_MS {
            t.sent_in_burst = 0;
            t.burst_started = now.mono;
        }
        t.bucket.tokens -= 1.0;
        let generation = t.generation;
        t.bodies.push(PacedBody {
            msg_id: canonical_msg_id(msg_id),
            hash,
            at: now,
            generation,
            token_spent: true,
        });
        t.sent_in_burst += 1;
        Ok(())
    }

    fn refund_record(t: &mut Target, canon: &str, decrement_burst: bool) {
        let generation = t.generation;
        let Some(b) = t.bodies.iter_mut().find(|b| b.msg_id == canon) else {
            return;
        };
        if !b.token_spent {
            return;
        }
        b.token_spent = false;
        if decrement_burst {
            t.sent_in_burst = t.sent_in_burst.saturating_sub(1);
        }
        if b.generation == generation {
            t.bucket.tokens = (t.bucket.tokens + 1.0).min(SENDER_RATE.capacity);
        }
    }

    /// The frame was never written: give the token back and forget the body.
    pub fn refund_unsent(&mut self, ipc_path: &str, msg_id: &str) {
        let canon = canonical_msg_id(msg_id);
        if let Some(t) = self.targets.get_mut(ipc_path) {
            Self::refund_record(t, &canon, true);
            t.bodies.retain(|b| b.msg_id != canon);
        }
        self.sends.remove(&canon);
    }

    fn refund_message(&mut self, ipc_path: &str, canon: &str) {
        if let Some(t) = self.targets.get_mut(ipc_path) {
            Self::refund_record(t, canon, false);
            t.bodies.retain(|b| b.msg_id != canon);
        }
    }

    fn refund_token(&mut self, ipc_path: &str, canon: &str) {
        if let Some(t) = self.targets.get_mut(ipc_path) {
            Self::refund_record(t, canon, false);
        }
    }

    fn forget_bodies(&mut self, ipc_path: &str, canon: &str) {
        if let Some(t) = self.targets.get_mut(ipc_path) {
            t.bodies.retain(|b| b.msg_id != canon);
        }
    }

    fn drain(&mut self, ipc_path: &str, now: Now) {
        if let Some(t) = self.targets.get_mut(ipc_path) {
            t.bucket.tokens = 0.0;
            t.bucket.last_refill = now.mono;
            t.generation += 1;
        }
    }

    /// Starts tracking a message (before it is written, so a fast receipt finds it).
    pub fn track(&mut self, msg_id: &str, address: &str, ipc_path: &str, now: Now) {
        let canon = canonical_msg_id(msg_id);
        self.sends.remove(&canon);
        self.sends.insert(
            canon,
            Tracked {
                msg_id: msg_id.to_string(),
                address: address.to_string(),
                ipc_path: ipc_path.to_string(),
                sent_at: now,
                state: DeliveryState::Pending,
                last: None,
            },
        );
        while self.sends.len() > MAX_TRACKED_SENDS {
            self.sends.pop_oldest();
        }
    }

    pub fn state(&self, msg_id: &str) -> Option<SendState> {
        self.sends
            .get(&canonical_msg_id(msg_id))
            .map(|t| SendState {
                msg_id: t.msg_id.clone(),
                address: t.address.clone(),
                state: t.state,
                last: t.last.clone(),
            })
    }

    fn settle(&mut self, id: &str, frame: &ControlFrame) -> Option<(ReceiptEvent, String, Now)> {
        let t = self.sends.get_mut(&canonical_msg_id(id))?;
        if !t.state.can_become(frame.status) {
            return None;
        }
        let event = ReceiptEvent {
            msg_id: t.msg_id.clone(),
            address: t.address.clone(),
            status: frame.status,
            previous: t.state,
            reason: frame.reason.as_deref().map(flatten_label),
            drop_reason: frame.drop_reason,
            frame: frame.wire_value(),
        };
        t.state = frame.status;
        t.last = Some(event.clone());
        Some((event, t.ipc_path.clone(), t.sent_at))
    }

    /// Applies a receipt that arrived on a connection authenticated with our
    /// own token. Returns the transitions it made (none for unknown ids or
    /// repeated receipts); a `dropped` receipt settles each id it names.
    pub fn apply(&mut self, frame: &ControlFrame, now: Now) -> Vec<ReceiptEvent> {
        let mut events = Vec::new();
        if frame.status == DeliveryState::Dropped {
            let ids: Vec<String> = std::iter::once(frame.orig_msg_id.clone())
                .chain(frame.dropped_msg_ids.iter().cloned())
                .collect();
            let mut drain = Vec::new();
            for id in &ids {
                let Some((event, ipc_path, sent_at)) = self.settle(id, frame) else {
                    continue;
                };
                let canon = canonical_msg_id(id);
                if frame.drop_reason == Some(DropReason::Duplicate) {
                    self.refund_token(&ipc_path, &canon);
                } else {
                    self.forget_bodies(&ipc_path, &canon);
                }
                if frame.drop_reason == Some(DropReason::RateLimited)
                    && now.age_ms(sent_at) <= BURST_WINDOW_MS
                {
                    drain.push(ipc_path);
                }
                events.push(event);
            }
            drain.dedup();
            for p in drain {
                self.drain(&p, now);
            }
            return events;
        }
        if let Some((event, ipc_path, _)) = self.settle(&frame.orig_msg_id, frame) {
            let canon = canonical_msg_id(&frame.orig_msg_id);
            match frame.status {
                DeliveryState::Held | DeliveryState::Delivered => {}
                DeliveryState::Misaddressed => self.refund_message(&ipc_path, &canon),
                _ => self.forget_bodies(&ipc_path, &canon),
            }
            events.push(event);
        }
        events
    }
}

#[cfg(test)]
mod tests;
