//! Admission: the global and per-sender token buckets and the duplicate
//! window (Qwen's `PeerAdmission`).

use std::time::Instant;

use super::super::frames::{DropReason, UserFrame};
use super::super::limits::{body_hash, Lru, Now, Rate, TokenBucket};
use super::super::names::{canonical_msg_id, js_slice, OriginKind};

// Admission limits (Qwen's PEER_ADMISSION_LIMITS).
pub(crate) const BUCKET_CAPACITY: f64 = 30.0;
pub(crate) const REFILL_PER_SECOND: f64 = 0.5;
pub(crate) const DEDUP_WINDOW_MS: f64 = 30_000.0;
pub(crate) const GLOBAL_BUCKET_CAPACITY: f64 = 32.0;
pub(crate) const GLOBAL_REFILL_PER_SECOND: f64 = 1.0;
pub(crate) const MAX_TRACKED_SENDERS: usize = 256;
/// Time for an empty per-sender bucket to refill completely.
pub(crate) const BURST_WINDOW_MS: f64 = BUCKET_CAPACITY / REFILL_PER_SECOND * 1000.0;
/// One sender's bucket (the sender side mirrors it per inbox).
pub(crate) const SENDER_RATE: Rate = Rate {
    capacity: BUCKET_CAPACITY,
    per_second: REFILL_PER_SECOND,
};
const GLOBAL_RATE: Rate = Rate {
    capacity: GLOBAL_BUCKET_CAPACITY,
    per_second: GLOBAL_REFILL_PER_SECOND,
};
/// Characters of `from` used in a sender key.
pub(crate) const MAX_SENDER_KEY_CHARS: usize = 256;

#[derive(Debug, Clone)]
struct BodyRecord {
    msg_id: String,
    hash: [u8; 32],
    at: Now,
}

#[derive(Debug, Clone)]
struct Meter {
    bucket: TokenBucket,
    bodies: Vec<BodyRecord>,
}

/// Rate limits and the duplicate window, per sender key and overall.
#[derive(Debug, Clone)]
pub struct Admission {
    senders: Lru<Meter>,
    global: TokenBucket,
}

impl Admission {
    pub fn new(now: Instant) -> Admission {
        Admission {
            senders: Lru::default(),
            global: TokenBucket::full(GLOBAL_RATE, now),
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
        self.global.refill(GLOBAL_RATE, now.mono);
        if self.global.tokens < 1.0 {
            return Err(DropReason::RateLimited);
        }
        let meter = self.track(key, now.mono);
        meter.bodies.retain(|b| now.age_ms(b.at) < DEDUP_WINDOW_MS);
        let hash = (!exempt).then(|| body_hash(body));
        if hash.is_some() && meter.bodies.last().map(|b| b.hash) == hash {
            return Err(DropReason::Duplicate);
        }
        meter.bucket.refill(SENDER_RATE, now.mono);
        if meter.bucket.tokens < 1.0 {
            return Err(DropReason::RateLimited);
        }
        meter.bucket.tokens -= 1.0;
        if let Some(hash) = hash {
            meter.bodies.push(BodyRecord {
                msg_id: msg_id.to_string(),
                hash,
                at: now,
            });
        }
        self.global.tokens -= 1.0;
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
        self.senders.track_metered(
            key,
            MAX_TRACKED_SENDERS,
            SENDER_RATE,
            now,
            |m| &m.bucket,
            || Meter {
                bucket: TokenBucket::full(SENDER_RATE, now),
                bodies: Vec::new(),
            },
        )
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
