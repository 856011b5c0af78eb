//! `qc_participant_*`: cross-session messaging over the C ABI.
//!
//! A participant is one inbox (a UNIX socket) plus one registry record per
//! registered session. Options and results travel as JSON documents (camelCase
//! fields, unknown fields refused), so the ABI stays small as features grow.
//!
//! Threading: every `qc_participant_*` function may be called from any thread,
//! concurrently. Callbacks of one participant run on its own library thread
//! (`qc-cb`), one at a time, never while a library lock is held; calling back
//! into the library from a callback is allowed, including `_close`/`_free`.
//! The blocking calls (`_register`, `_send`, `_wait`, `_close`) are fine on a
//! host thread or inside a callback; they wait on the library's runtime.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;

use super::util::*;
use crate::error::{Error, Result};
use crate::sessions::{
    Config, HeldInfo, InboundMessage, InboundSettings, ParentSendOptions, Participant,
    ReceiptEvent, RegisterOptions, SendOptions,
};

/// A cross-session participant: an inbox and the sessions registered behind
/// it. Opaque; created by `qc_participant_new`, released by `qc_participant_free`.
pub struct qc_participant {
    _private: [u8; 0],
}

static PARTICIPANTS: Lazy<HandleTable<Participant>> = Lazy::new(HandleTable::new);

pub(crate) fn participant(p: *const qc_participant) -> Result<Arc<Participant>> {
    PARTICIPANTS.get(p as usize)
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| Error::invalid_json(format!("invalid {what}: {e}")))
}

/// Creates a participant; nothing is bound or written until the first
/// `qc_participant_register`. `config_json` (nullable, borrowed) is a JSON
/// object, every field optional: `qwenHome` (default `$QWEN_HOME`, else
/// `~/.qwen`), `kind` (`external`), `version`, `multiSession` (several sessions
/// behind one inbox, one `<pid>-<8hex>.json` record each), `inboundPolicy`
/// (`accept`|`hold`|`refuse`, default: mode parity), `reviewClass`
/// (`prompting` default, `bypass`, or null), `heldExpiry` (`1m`|`5m`|`10m`|`never`),
/// `manualAck`, `controllerToken` (presented as given, on sends marked
/// `controller`; only an empty one is refused, the recipient judges the rest),
/// `parentSocket`/`parentToken` (default from `QWEN_CODE_MESSAGING_SOCKET`/`_TOKEN`),
/// `cleanupAtExit` (default true), and test overrides (`socketPath`,
/// `runtimeDir`, `tmpDir`, `sweepSockets`, `lineDeadlineMs`).
/// `*out` receives a handle owned by the caller (free with `qc_participant_free`).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_new(
    config_json: *const c_char,
    out: *mut *mut qc_participant,
    error: *mut *mut c_char,
) -> qc_status {
    PARTICIPANTS.create(config_json, out, error, |json| {
        Participant::new(Config::from_json(json)?)
    })
}

/// Releases a participant: unregisters every session (held and queued
/// messages settle as `expired`, records and the socket are removed), joins
/// its callback thread (unless called from inside one of its callbacks) and
/// finalizes the callbacks' `user_data`. NULL is a no-op; an unknown or freed
/// handle gives `QC_INVALID_HANDLE`.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_free(p: *mut qc_participant) -> qc_status {
    PARTICIPANTS.destroy(p, |p| {
        let _ = p.close();
    })
}

/// Unregisters every session (held and queued messages settle as `expired`)
/// and closes the inbox. The participant is then finished: later calls that
/// need it return `QC_NOT_RUNNING`; only `qc_participant_free` remains to do.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_close(
    p: *mut qc_participant,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || participant(p)?.close())
}

/// Registers a session: binds the inbox on the first one, then writes its
/// record. `options_json` (nullable, borrowed): `sessionId`, `name`, `cwd`,
/// `kind`, `inboundPolicy`, `reviewClass`, `heldExpiry`. `*out_session_json`
/// receives `{"sessionId","ref","name","kind","cwd","startedAt","recordPath","ipcPath"}`
/// (owned; free with `qc_string_free`).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_register(
    p: *mut qc_participant,
    options_json: *const c_char,
    out_session_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_session_json, || {
        let p = participant(p)?;
        let opts = RegisterOptions::from_json(opt_str_arg(options_json, "options_json")?)?;
        p.register(opts)
    })
}

/// Unregisters `session_id`: its held and queued messages settle as
/// `expired` and its record is removed (only if it still holds our pid and
/// session id). The last one closes the inbox.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_unregister(
    p: *mut qc_participant,
    session_id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        participant(p)?.unregister(str_arg(session_id, "session_id")?)
    })
}

/// Gives `session_id` a new id (`new_session_id`, or a fresh UUID when NULL),
/// rewriting the same record file. `*out_session_json` as for register.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_rotate_session_id(
    p: *mut qc_participant,
    session_id: *const c_char,
    new_session_id: *const c_char,
    out_session_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_session_json, || {
        let p = participant(p)?;
        let info = p.rotate_session_id(
            str_arg(session_id, "session_id")?,
            opt_str_arg(new_session_id, "new_session_id")?,
        )?;
        Ok(info)
    })
}

/// `*out_json`: a JSON array of our registered sessions (as register returns them).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_sessions_json(
    p: *const qc_participant,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || Ok(participant(p)?.sessions()))
}

/// `*out_json`: the environment for processes the host starts on behalf of
/// `session_id`, `{"QWEN_CODE_MESSAGING_SOCKET":…,"QWEN_CODE_MESSAGING_TOKEN":…}`;
/// their messages arrive with origin `own-process`. Keep the token out of logs.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_child_env_json(
    p: *const qc_participant,
    session_id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let env = participant(p)?.child_env(str_arg(session_id, "session_id")?)?;
        Ok(env)
    })
}

/// `*out_json`: every live record in the registry, newest first, with the
/// fields of `qwen sessions ps --json` plus `ref`, `reachable`, `recordPath`.
/// Tokens are never included.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_list_json(
    p: *const qc_participant,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || Ok(participant(p)?.list()))
}

/// `*out_json`: the sessions a message can be sent to (excluding
/// `from_session`, nullable), each with its shortest unambiguous address.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_peers_json(
    p: *const qc_participant,
    from_session: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let peers = participant(p)?.peers(opt_str_arg(from_session, "from_session")?)?;
        Ok(peers)
    })
}

/// Resolves `address` (`name`, `name [ref]`, `[ref]` or a bare ref) against a
/// fresh read of the registry. `QC_NOT_FOUND` when nothing matches;
/// `QC_INVALID_ARGUMENT` for an ambiguous name (the message lists the candidates).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_resolve_json(
    p: *const qc_participant,
    address: *const c_char,
    from_session: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let peer = participant(p)?.resolve(
            str_arg(address, "address")?,
            opt_str_arg(from_session, "from_session")?,
        )?;
        Ok(peer)
    })
}

/// Sends one message. `options_json` (borrowed): `{"to": ADDRESS, "content":
/// TEXT, "fromSession"?, "priority"? ("now"|"next"), "fromMode"?
/// ("prompting"|"bypass"; omitted unless given), "controller"? (present the
/// configured controller token)}`. Blocks until the recipient took the
/// connection (at most about 5 s). `*out_result_json`:
/// `{"msgId","address","toSessionId","confirmed"}`. `QC_REFUSED` when the send
/// would exceed the recipient's limits (the message says why).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_send(
    p: *mut qc_participant,
    options_json: *const c_char,
    out_result_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_result_json, || {
        let p = participant(p)?;
        let opts: SendOptions = parse(str_arg(options_json, "options_json")?, "send options")?;
        p.send(opts)
    })
}

/// Sends to the Qwen session that started this process (it set
/// `QWEN_CODE_MESSAGING_SOCKET`/`_TOKEN`, or the config names them), with the
/// own-process token. `options_json`: `{"content", "fromSession"?, "priority"?,
/// "fromMode"?, "toSessionId"?}` (`toSessionId` picks one of the parent inbox's
/// sessions; default: the only live record naming that inbox).
/// `QC_NOT_FOUND` when there is no parent session.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_send_to_parent(
    p: *mut qc_participant,
    options_json: *const c_char,
    out_result_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_result_json, || {
        let p = participant(p)?;
        let opts: ParentSendOptions =
            parse(str_arg(options_json, "options_json")?, "send options")?;
        p.send_to_parent(opts)
    })
}

/// `*out_json`: the delivery state of a message we sent:
/// `{"msgId","address","state","last"?}` where `state` is `pending`, `held`,
/// `delivered`, `denied`, `refused`, `expired`, `misaddressed` or `dropped`,
/// and `last` is the last transition (as the receipt callback gives it).
/// `QC_NOT_FOUND` for an id we never sent.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_send_state_json(
    p: *const qc_participant,
    msg_id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let state = participant(p)?.send_state(str_arg(msg_id, "msg_id")?)?;
        Ok(state)
    })
}

/// Waits up to `timeout_ms` for the message's next transition (or, with
/// `final_only` non-zero, for a final state: not `pending` or `held`), then
/// writes its state as `qc_participant_send_state_json` does. Returns the
/// state reached by the deadline; it does not fail on timeout.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_wait(
    p: *mut qc_participant,
    msg_id: *const c_char,
    timeout_ms: u32,
    final_only: i32,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let p = participant(p)?;
        let state = p.wait(
            str_arg(msg_id, "msg_id")?,
            Duration::from_millis(u64::from(timeout_ms)),
            final_only != 0,
        )?;
        Ok(state)
    })
}

/// `*out_json`: the messages held for the host's review (array of
/// `{"msgId","sessionId","content","text","from"?,"fromName"?,"fromMode"?,
/// "origin","controllerLabel"?,"cause","heldAt","expiresAt"?,"frame"}`), where
/// `frame` is the user frame as received, every field kept (as in the message callback).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_held_json(
    p: *const qc_participant,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || Ok(participant(p)?.held()))
}

/// The host releases a held message: it is delivered (`delivered` receipt).
/// `QC_NOT_FOUND` when it is no longer held; `QC_REFUSED` when the input
/// queue is full.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_release(
    p: *mut qc_participant,
    msg_id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        participant(p)?.release(str_arg(msg_id, "msg_id")?)
    })
}

/// The host denies a held message (`denied` receipt). `QC_NOT_FOUND` when it
/// is no longer held.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_deny(
    p: *mut qc_participant,
    msg_id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || participant(p)?.deny(str_arg(msg_id, "msg_id")?))
}

/// With `manualAck`, the host has consumed a delivered message (it leaves the
/// input queue). `QC_NOT_FOUND` when it is not queued.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_ack(
    p: *mut qc_participant,
    msg_id: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || participant(p)?.ack(str_arg(msg_id, "msg_id")?))
}

/// `*out_json`: the inbound settings of `session_id`:
/// `{"policy": "accept"|"hold"|"refuse"|null, "reviewClass": "prompting"|"bypass"|null,
/// "heldExpiry"}` (null policy = mode parity; null review class = unknown).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_inbound_settings_json(
    p: *const qc_participant,
    session_id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || {
        let s = participant(p)?.inbound_settings(str_arg(session_id, "session_id")?)?;
        Ok(s)
    })
}

/// Replaces the inbound settings of `session_id` (`settings_json` as
/// `qc_participant_inbound_settings_json` gives them); held messages are
/// judged again, as when a Qwen session changes mode.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_update_inbound(
    p: *mut qc_participant,
    session_id: *const c_char,
    settings_json: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let p = participant(p)?;
        let settings: InboundSettings =
            parse(str_arg(settings_json, "settings_json")?, "inbound settings")?;
        p.update_inbound(str_arg(session_id, "session_id")?, settings)
    })
}

/// `*out` receives the inbox socket path (owned); `QC_NOT_RUNNING` when no
/// session is registered.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_ipc_path(
    p: *const qc_participant,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out, "out")?;
        let path = participant(p)?.ipc_path().ok_or_else(Error::not_running)?;
        write_string(out, path)
    })
}

/// Sets (or with `cb` NULL removes) the log callback (see
/// `qc_companion_set_log_callback`). On failure `user_data` is not taken.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_set_log_callback(
    p: *mut qc_participant,
    cb: qc_log_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let p = participant(p)?;
        p.set_log_callback(log_sink(cb, user_data, free_user_data, max_level)?);
        Ok(())
    })
}

/// Sets (or with `cb` NULL removes) the message callback: each delivered
/// message as JSON `{"msgId","sessionId","content","text" (every '<'
/// escaped, for display),"envelope","display","from"?,"fromName"?,"fromMode"?,
/// "priority","origin" ("peer"|"own-process"|"controller"),"controllerLabel"?,
/// "frame"}`. `origin` is what the connection proved, never what the frame
/// claims. `frame` is the user frame as received (key order not preserved):
/// every field, unknown ones included, nothing flattened or checked, and its
/// `replyToken` (the sender's credential for receipts): keep it out of models
/// and logs.
/// Messages accepted while no callback is set wait (up to 50 per session).
/// On failure `user_data` is not taken.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_set_message_callback(
    p: *mut qc_participant,
    cb: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let p = participant(p)?;
        p.set_message_callback(json_callback::<InboundMessage>(
            cb,
            user_data,
            free_user_data,
        ))
    })
}

/// Sets (or with `cb` NULL removes) the receipt callback: every transition of
/// a message we sent, as JSON `{"msgId","address","status","previous",
/// "reason"?,"dropReason"?,"frame"}`, where `frame` is the control frame exactly
/// as received (a coalesced `dropped` receipt gives the same frame to each
/// message it settles). Only receipts whose connection proved our own token
/// count; duplicates and unknown statuses cause no call.
/// On failure `user_data` is not taken.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_set_receipt_callback(
    p: *mut qc_participant,
    cb: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let p = participant(p)?;
        p.set_receipt_callback(json_callback::<ReceiptEvent>(cb, user_data, free_user_data))
    })
}

/// Sets (or with `cb` NULL removes) the held callback: after every change of
/// the hold buffer, the whole buffer as a JSON array (as
/// `qc_participant_held_json`). On failure `user_data` is not taken.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_set_held_callback(
    p: *mut qc_participant,
    cb: qc_json_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let p = participant(p)?;
        p.set_held_callback(json_callback::<[HeldInfo]>(cb, user_data, free_user_data))
    })
}

/// In pull mode (after `qc_participant_enable_events`), delivers this object's log
/// lines up to `max_level` (`QC_LOG_ERROR` 1 .. `QC_LOG_TRACE` 5; 0 turns
/// them off) as events `{"type":"log","level":N,"message":"…"}` from
/// `qc_participant_next_event`, in place of a log callback (this replaces one set with
/// `qc_participant_set_log_callback`, and setting a callback later replaces the
/// events). For hosts that may not be called on a library thread (LuaJIT).
/// At most 256 log lines wait; past that the oldest is dropped and counted,
/// so log lines never crowd out the object's own events. `QC_REFUSED`
/// outside pull mode.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_enable_log_events(
    p: *mut qc_participant,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        participant(p)?.enable_log_events(log_events_level(max_level)?)
    })
}

/// Switches the participant to pull mode, for hosts that must never be
/// called on a library thread (LuaJIT, single-threaded loops): from now on
/// delivered messages, receipts and hold-buffer changes are queued instead
/// of given to the message, receipt and held callbacks (setting one of those
/// then fails `QC_REFUSED`; messages accepted before are handed over to the
/// queue). `*out_fd` receives the event handle, owned by the library (do not
/// close it; valid until `qc_participant_free`), that is ready while events
/// wait — a readable file descriptor on Linux and macOS, an event HANDLE on
/// Windows (`(HANDLE)(intptr_t)*out_fd`; see the conventions at the top):
/// watch it, then call `qc_participant_next_event` until it gives NULL.
/// Calling it again returns the same handle. The log callback still
/// runs on the callback thread (or see `qc_participant_enable_log_events`).
#[no_mangle]
pub unsafe extern "C" fn qc_participant_enable_events(
    p: *mut qc_participant,
    out_fd: *mut i32,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out_fd, || participant(p)?.enable_events())
}

/// Takes the next queued event (pull mode). `*out_json` receives an owned
/// JSON object (free with `qc_string_free`), or NULL when none waits:
/// `{"type":"message",…}` (the fields of the message callback's document),
/// `{"type":"receipt",…}` (the receipt callback's) or
/// `{"type":"held","held":[…]}` (the whole hold buffer after a change, as
/// `qc_participant_held_json`), in the order they happened. At most 1024
/// events wait; later ones are dropped until the host pulls. `QC_REFUSED`
/// when pull mode is not enabled.
#[no_mangle]
pub unsafe extern "C" fn qc_participant_next_event(
    p: *mut qc_participant,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out_json, "out_json")?;
        let event = participant(p)?.next_event()?;
        write_optional_json(out_json, event);
        Ok(())
    })
}
