//! The session registry, `$QWEN_HOME/sessions/`: reading records as Qwen
//! Code reads them (and sweeping the ones it would sweep), choosing and
//! writing our own record file, and resolving a typed address to a session.
//!
//! The parts: `store` (record files: reading, liveness, sweeping, writing,
//! listing) and `resolve` (messageable peers and address resolution).

mod resolve;
mod store;
#[cfg(test)]
mod tests;

pub use resolve::{
    advertisable_address, inboxless_match, messageable, resolve_target, suggestions, to_peer,
    with_addresses, Peer, Resolution, NO_INBOX_REASON,
};
pub(crate) use store::SCHEMA_VERSION;
pub use store::{
    choose_record_path, is_provably_stale_own, list_live, matches_local_identity, parse_record,
    read_record, record_file_pid, record_json, remove_if_ours, write_file_atomic, write_record,
    Identity, LiveRecord, ReadOutcome, Record, RecordInfo, RecordOut,
};
