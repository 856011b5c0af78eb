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
//!
//! The parts: `admission` (the buckets and the duplicate window), `policy`
//! (settings and `resolve_policy`), `inbound` (the [`Gate`] state machine:
//! replay, hold buffer, input queue, decisions, expiry) and `coalesce`
//! (dropped receipts). The clock, the LRU and the token bucket are shared
//! with the sender's side and live in `sessions::limits`.

mod admission;
mod coalesce;
mod inbound;
mod policy;
#[cfg(test)]
mod tests;

pub use super::limits::{body_hash, wall_ms, Lru, Now};
pub use admission::{sender_key, Admission};
pub(crate) use admission::{BURST_WINDOW_MS, DEDUP_WINDOW_MS, MAX_SENDER_KEY_CHARS, SENDER_RATE};
pub use coalesce::DropCoalescer;
pub use inbound::{Action, DecideOutcome, Entry, Gate, Receipt, SessionView};
pub use policy::{resolve_policy, Decision, HeldExpiry, HoldCause, InboundSettings, Policy};
