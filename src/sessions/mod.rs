//! Cross-session messaging: a participant. An editor (or any host) joins
//! Qwen Code's cross-session messaging as a peer: it publishes a registry
//! record, binds an inbox that applies the receiver's gate, and sends
//! messages whose delivery receipts it tracks. Behaviour follows Qwen Code
//! 0.24.4 where it differs from the written contract (the list below); the
//! official joining side
//! (`@qwen-code/sdk` `PeerEndpoint`) was the model for the API's shape.
//!
//! # Rust API (the FFI layer wraps it 1:1)
//!
//! ```text
//! Participant::new(Config) -> Result<Participant>          // nothing bound or written yet
//! p.set_log_callback(Option<(LogFn, LogLevel)>)
//! p.set_message_callback(Option<Arc<MessageFn>>)           // fn(&InboundMessage)
//! p.set_receipt_callback(Option<Arc<ReceiptFn>>)           // fn(&ReceiptEvent): every transition of a sent message
//! p.set_held_callback(Option<Arc<HeldFn>>)                 // fn(&[HeldInfo]): the hold buffer after each change
//! p.on_callback_thread() -> bool
//!
//! p.register(RegisterOptions) -> Result<SessionInfo>       // binds the inbox on the first one, then writes the record
//! p.unregister(&str session_id) -> Result<()>              // held/queued → `expired`; record removed; last one closes the inbox
//! p.rotate_session_id(&str, Option<&str> new) -> Result<SessionInfo>   // same record file, rewritten
//! p.sessions() -> Vec<SessionInfo>
//! p.inbound_settings(&str) -> Result<InboundSettings>
//! p.update_inbound(&str, InboundSettings) -> Result<()>     // re-judges held messages
//! p.child_env(&str) -> Result<BTreeMap<String, String>>    // QWEN_CODE_MESSAGING_SOCKET / _TOKEN for processes the host starts
//! p.ipc_path() -> Option<String>
//!
//! p.list() -> Vec<RecordInfo>                              // every live record (as `qwen sessions ps --json`) + ref, reachable
//! p.peers(Option<&str> from_session) -> Vec<PeerInfo>      // messageable sessions with their shortest address
//! p.resolve(&str address, Option<&str> from_session) -> Result<PeerInfo>
//! p.send(SendOptions) -> Result<SendResult>                // fresh registry read, pacing mirror, one connection
//! p.send_to_parent(ParentSendOptions) -> Result<SendResult>// to the Qwen session that started this process
//! p.send_state(&str msg_id) -> Result<SendState>
//! p.wait(&str msg_id, Duration, bool final_only) -> Result<SendState>
//!
//! p.held() -> Vec<HeldInfo>
//! p.release(&str msg_id) -> Result<()>                     // NotFound: gone / session changed; Refused: input queue full
//! p.deny(&str msg_id) -> Result<()>
//! p.ack(&str msg_id) -> Result<()>                         // with `manualAck`: the host consumed a delivered message
//! p.close() -> Result<()>                                  // unregister everything; also done on drop
//! ```
//!
//! # What each piece does
//!
//! **Registry.** `$QWEN_HOME/sessions/` (`qwenHome` in the config wins;
//! default `~/.qwen`). A record is written only after the inbox is bound,
//! atomically (`<name>.<12 hex>.tmp`, `O_EXCL|O_NOFOLLOW`, 0600, fsync,
//! rename; directory 0700), with `procStart` and `pidNs` computed as Qwen
//! computes them (registration is refused on Linux without them). A
//! single-session participant writes `<pid>.json`, or `<pid>-<8 hex>.json`
//! when that name holds anything but a provably stale record of our PID
//! (same namespace and boot, other start ticks). With `multiSession`, every
//! session gets its own `<pid>-<8 hex>.json`, all naming one shared inbox.
//! A record is removed on unregister/close only if it still holds our pid
//! and session id. Listing applies every liveness rule and sweeps what Qwen
//! sweeps (see [`registry::list_live`]).
//!
//! **Inbox.** One UNIX socket per participant, bound on the first
//! `register` and closed with the last `unregister`. It is served on the
//! library's runtime, so a busy host thread never makes a sender time out.
//! Auth tokens: our record token (origin `peer`), a per-session child token
//! handed out by [`Participant::child_env`] (origin `own-process`), and
//! controller tokens from `$QWEN_HOME/peer-controllers.json`, checked on
//! every auth line as Qwen does (so a grant added or revoked counts for the
//! next connection) but parsed again only when the file changed, and looked
//! up on the blocking pool, never on a runtime worker (origin `controller`
//! with the grant's label). Anything
//! else is dropped silently. The origin a host sees is always the one the
//! connection proved.
//!
//! **Windows.** The inbox is a named pipe, `\\.\pipe\qwen-socks-<nonce>-<pid>`
//! unless one is configured (a configured path must be `\\.\pipe\…` or
//! `\\?\pipe\…`, as Qwen's `isLocalIpcPath` requires); there are no socket
//! directories, modes or sweeps, and the pipe is owner-only by its security
//! descriptor. Records carry `procStart` and `pidNs` as `null`, as the CLI
//! writes them outside Linux. Qwen Code itself has no automatic inbox on
//! Windows, so its records have no `ipcPath`: such a session is listed but
//! not reachable, and a send to it is refused at once (`QC_REFUSED`, quoting
//! the CLI's `unsupported_platform` reason).
//!
//! **The gate** ([`gate`]): rate limits, duplicate window, settled-id
//! replay, policy or mode parity, the hold buffer (50, with expiry), the
//! input queue (50), coalesced `dropped` receipts; every outcome is
//! receipted to the frame's `from` with its `replyToken`.
//!
//! **The input queue, for an embedder.** Qwen's input queue holds accepted
//! messages until the model consumes them. Here a message is *queued* from
//! its acceptance (the `delivered` receipt goes out then, as in Qwen) until
//! the host consumes it: by default when the message callback returns; with
//! `manualAck: true`, when the host calls [`Participant::ack`]. At most 50
//! per session are queued; more are `dropped`/`queue-full`. A message
//! accepted while no message callback is set waits in the queue until one
//! is. When its session unregisters, whatever is still queued is corrected
//! to `expired` (held ones too); a queued message whose session id rotated
//! away before the host got it is settled `misaddressed`.
//!
//! **Sending.** Each send re-reads the registry, dials candidates (a
//! short probe), resolves `name`, `name [ref]`, `[ref]` or a bare ref (an
//! ambiguous address is an error listing the candidates), checks the
//! per-address pacing mirror (30 burst, 0.5/s, no repeat within 30 s:
//! refused with [`Status::Refused`](crate::error::Status::Refused) and a
//! reason), writes auth line + frame in one write, half-closes and waits
//! (≤ 5 s) for the peer to close. Receipts move each message through the
//! state machine (unknown statuses and ids are ignored; only connections
//! that proved our own token count); every transition reaches the receipt
//! callback and [`Participant::wait`].
//!
//! # Where Qwen Code's code wins over the written contract
//! - `kind` must also start with a letter (`^[a-z][a-z0-9-]{0,15}$`).
//! - The duplicate check compares a body with the *same sender key's* last
//!   admitted body (30 s); own-process and controller senders are exempt;
//!   bodies settled as refused/denied/expired/misaddressed/queue-full are
//!   forgotten so an honest retry passes.
//! - Every `<` of the content is escaped for display, not only tag-looking text.
//! - Listers delete a record whose process is gone *or* whose `procStart`
//!   differs (a malformed one without `:` included), after a re-read.
//! - The socket directory's `<16 hex>` is a random nonce; several frames per
//!   connection are processed; the 1 MiB cap is on the unterminated
//!   remainder after each read, in UTF-16 units; blank lines before the auth
//!   line are skipped.
//! - msgIds are canonicalised (dashes removed, lowercased) for settled-id
//!   replay and receipt matching; a `dropped` receipt settles each listed id.
//! - `pidNs` and `procStart` are required on Linux; records over 64 KiB are
//!   ignored; orphaned `<record>.<12 hex>.tmp` files older than 5 min are swept.
//! - Dropped receipts are coalesced (first at once, the rest 5 s later).
//! - Without `replyToken` receipts would carry no auth line, so we always send it.
//! - A single-session participant accepts a frame without `toSessionId` (as
//!   the TUI does); a multi-session one answers it `misaddressed` (as ACP does).
//!
//! # Threads
//! Host callbacks run on this participant's own `qc-cb` thread, in order,
//! never under a library lock; calling back into the participant from a
//! callback is allowed (including `close`). Blocking calls (`send`, `wait`,
//! `register`, `unregister`, `close`) must not be made from inside an async
//! runtime; they return `Refused` there.
//!
//! # Process exit
//! Records and sockets are removed when the participant is closed or
//! dropped; hosts should free their handles before exiting. As a backstop
//! (config `cleanupAtExit`, default true) the library registers one
//! `atexit` hook, once per process: on normal exit it removes the records
//! still registered (only those that still hold this PID and their session
//! id) and their sockets. It never blocks (a busy registry lock is skipped),
//! never panics across the C boundary, does nothing in a forked child (the
//! PID differs), and runs at most once. A process killed by a signal leaves
//! both behind; Qwen sweeps such records later (their `procStart` proves the
//! process gone).

pub mod controllers;
pub mod frames;
pub mod gate;
pub mod inbox;
pub(crate) mod limits;
pub mod names;
pub mod net;
pub mod outbox;
mod participant;
pub mod proc;
pub mod registry;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use frames::{DeliveryState, DropReason, Priority, ReviewClass};
pub use gate::{HeldExpiry, HoldCause, InboundSettings, Policy};
pub use outbox::{ReceiptEvent, SendState};
pub use participant::Participant;
pub use registry::{Peer as PeerInfo, RecordInfo};

/// Environment variable naming the inbox socket, set for processes the host starts.
pub(crate) const MESSAGING_SOCKET_ENV: &str = "QWEN_CODE_MESSAGING_SOCKET";
/// Environment variable carrying the child token, set for processes the host starts.
pub(crate) const MESSAGING_TOKEN_ENV: &str = "QWEN_CODE_MESSAGING_TOKEN";

/// Host callback for a delivered message.
pub type MessageFn = dyn Fn(&InboundMessage) + Send + Sync;
/// Host callback for a transition of a message we sent.
pub type ReceiptFn = dyn Fn(&ReceiptEvent) + Send + Sync;
/// Host callback with the hold buffer after it changed.
pub type HeldFn = dyn Fn(&[HeldInfo]) + Send + Sync;

fn default_review_class() -> Option<ReviewClass> {
    Some(ReviewClass::Prompting)
}

/// Participant configuration (the JSON object given to the FFI constructor).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The Qwen directory to join (default `$QWEN_HOME`, else `~/.qwen`).
    #[serde(default)]
    pub qwen_home: Option<PathBuf>,
    /// Default `kind` of our records (default `external`):
    /// `^[a-z][a-z0-9-]{0,15}$`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Free text written as `qwenVersion` (default `null`).
    #[serde(default)]
    pub version: Option<String>,
    /// Host several sessions behind one inbox: one `<pid>-<8 hex>.json`
    /// record each; frames must carry `toSessionId`.
    #[serde(default)]
    pub multi_session: bool,
    /// Bind the inbox here instead of choosing a path (a live listener
    /// there makes it `<pid>-<8 hex>.sock` beside it).
    #[serde(default)]
    pub socket_path: Option<PathBuf>,
    /// Used instead of `$XDG_RUNTIME_DIR` when choosing the socket path.
    #[serde(default)]
    pub runtime_dir: Option<PathBuf>,
    /// Used instead of `$TMPDIR` when choosing the socket path.
    #[serde(default)]
    pub tmp_dir: Option<PathBuf>,
    /// Sweep orphaned sockets around our candidates after binding, as Qwen
    /// does (default true).
    #[serde(default)]
    pub sweep_sockets: Option<bool>,
    /// Default inbound policy: `accept`, `hold`, `refuse`, or unset (mode parity).
    #[serde(default)]
    pub inbound_policy: Option<Policy>,
    /// Our review class for mode parity: `prompting` (default) or `bypass`;
    /// `null` means unknown (peer messages are held). Qwen sessions in their
    /// default `auto` approval mode assert `bypass`, so with `prompting`
    /// their messages are held for the host's review unless a policy says otherwise.
    #[serde(default = "default_review_class")]
    pub review_class: Option<ReviewClass>,
    /// How long held messages wait: `1m`, `5m` (default), `10m`, `never`.
    #[serde(default)]
    pub held_expiry: Option<HeldExpiry>,
    /// Delivered messages stay queued until [`Participant::ack`] (default:
    /// until the message callback returns).
    #[serde(default)]
    pub manual_ack: bool,
    /// A controller token (`qpc_…`, from `qwen sessions controllers add`)
    /// presented on sends marked `controller`. It goes on the auth line as
    /// given (only an empty one is refused): the recipient judges it, and
    /// Qwen drops a connection whose token it holds no grant for silently.
    #[serde(default)]
    pub controller_token: Option<String>,
    /// The parent session's inbox (default `$QWEN_CODE_MESSAGING_SOCKET`).
    #[serde(default)]
    pub parent_socket: Option<String>,
    /// The parent session's child token (default `$QWEN_CODE_MESSAGING_TOKEN`).
    #[serde(default)]
    pub parent_token: Option<String>,
    /// Remove our records and sockets at normal process exit (default true).
    #[serde(default)]
    pub cleanup_at_exit: Option<bool>,
    /// Line deadline of inbox connections in ms (default 30000; tests).
    #[serde(default)]
    pub line_deadline_ms: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            qwen_home: None,
            kind: None,
            version: None,
            multi_session: false,
            socket_path: None,
            runtime_dir: None,
            tmp_dir: None,
            sweep_sockets: None,
            inbound_policy: None,
            review_class: default_review_class(),
            held_expiry: None,
            manual_ack: false,
            controller_token: None,
            parent_socket: None,
            parent_token: None,
            cleanup_at_exit: None,
            line_deadline_ms: None,
        }
    }
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        match json.map(str::trim) {
            None | Some("") => Ok(Config::default()),
            Some(s) => serde_json::from_str(s)
                .map_err(|e| Error::invalid_json(format!("invalid participant config: {e}"))),
        }
    }
}

/// Options of one registration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterOptions {
    /// Default: a fresh random UUID.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Display name (flattened, 40 code points at most); blank = derived
    /// from `cwd` as Qwen derives it.
    #[serde(default)]
    pub name: Option<String>,
    /// Working directory recorded (default: the process's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Overrides the config's `kind`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Overrides the config's inbound policy for this session.
    #[serde(default)]
    pub inbound_policy: Option<Policy>,
    /// Overrides the config's review class for this session.
    #[serde(default)]
    pub review_class: Option<ReviewClass>,
    /// Overrides the config's held expiry for this session.
    #[serde(default)]
    pub held_expiry: Option<HeldExpiry>,
}

impl RegisterOptions {
    pub fn from_json(json: Option<&str>) -> Result<RegisterOptions> {
        match json.map(str::trim) {
            None | Some("") => Ok(RegisterOptions::default()),
            Some(s) => serde_json::from_str(s)
                .map_err(|e| Error::invalid_json(format!("invalid register options: {e}"))),
        }
    }
}

/// One of our registered sessions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    #[serde(rename = "ref")]
    pub ref_: String,
    pub name: String,
    pub kind: String,
    pub cwd: String,
    pub started_at: u64,
    pub record_path: String,
    pub ipc_path: String,
}

/// What to send, and to whom.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendOptions {
    /// Which of our sessions sends (needed when several are registered).
    #[serde(default)]
    pub from_session: Option<String>,
    /// `name`, `name [ref]`, `[ref]` or a bare ref.
    pub to: String,
    pub content: String,
    #[serde(default)]
    pub priority: Option<Priority>,
    /// The review class to assert; omitted unless given (a program that is
    /// not a coding session has no honest value to give).
    #[serde(default)]
    pub from_mode: Option<ReviewClass>,
    /// Present the configured controller token instead of the recipient's own.
    #[serde(default)]
    pub controller: bool,
}

/// A message to the Qwen session that started this process.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentSendOptions {
    #[serde(default)]
    pub from_session: Option<String>,
    /// Which of the parent's sessions the message is for (its `toSessionId`);
    /// default: the session of the only live record naming the parent's inbox.
    #[serde(default)]
    pub to_session_id: Option<String>,
    pub content: String,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub from_mode: Option<ReviewClass>,
}

/// A message that was written to its recipient.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    pub msg_id: String,
    /// The address it went to (the shortest one that selects the recipient).
    pub address: String,
    /// The recipient's session id (absent for a parent send we could not pin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_session_id: Option<String>,
    /// False when the recipient accepted the connection but did not close it
    /// within 5 s: it may still read the message; wait for a receipt.
    pub confirmed: bool,
}

/// Where a message came from, as its connection proved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    Peer,
    OwnProcess,
    Controller,
}

/// What the host learns of a message it is given or asked about: who sent
/// it (as the connection proved and as the frame claims) and what it says.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageInfo {
    pub msg_id: String,
    /// Our session it was addressed to.
    pub session_id: String,
    /// The raw content (untrusted).
    pub content: String,
    /// The content with every `<` escaped, for display.
    pub text: String,
    /// The sender's claimed inbox (flattened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The sender's claimed name (flattened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_mode: Option<ReviewClass>,
    pub origin: Origin,
    /// The grant's label, for `origin == controller`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_label: Option<String>,
    /// The user frame as received (key order not preserved): every field, unknown ones and
    /// `replyToken` (the sender's credential for receipts) included. Its
    /// claims are unchecked and unflattened; keep it out of models and logs.
    pub frame: serde_json::Value,
}

/// A message delivered to the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundMessage {
    #[serde(flatten)]
    pub message: MessageInfo,
    /// The `<cross_session_message …>` element plus an authority notice, for a model.
    pub envelope: String,
    /// One line with the sender and a preview, for a notification.
    pub display: String,
    pub priority: Priority,
}

/// A message waiting for the host's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldInfo {
    #[serde(flatten)]
    pub message: MessageInfo,
    pub cause: HoldCause,
    /// Epoch milliseconds.
    pub held_at: u64,
    /// Epoch milliseconds; absent when holds do not expire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

#[cfg(test)]
mod tests;
