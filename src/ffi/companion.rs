//! `qc_companion_*`: the IDE companion over the C ABI.
//!
//! Threading: every `qc_companion_*` function may be called from any thread,
//! concurrently, and from inside this library's callbacks. Callbacks of one
//! companion run on that companion's own callback thread (named `qc-cb`), one
//! at a time, never while a library lock is held; the host must not assume
//! any other thread. `user_data` is used only from that thread (and its
//! finalizer wherever the last reference drops).

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use once_cell::sync::Lazy;

use super::util::*;
use crate::error::{Error, Result, Status};
use crate::ide::{Companion, Config};

/// An IDE companion: an MCP server for Qwen Code plus its lock file. Opaque;
/// created by `qc_companion_new`, released by `qc_companion_free`.
pub struct qc_companion {
    _private: [u8; 0],
}

/// A reply slot handed to a diff callback; valid only during that callback,
/// on the callback thread. Fill it with `qc_reply_set_text`.
pub struct qc_reply {
    _private: [u8; 0],
}

/// Asked to show a diff. `file_path` (absolute) and `new_content` are borrowed
/// for the call; `new_content` is NUL-terminated and `new_content_len` bytes
/// long (it may contain NUL bytes; use the length). Return 0 when the diff view
/// is shown (the CLI gets `content: []`), non-zero to refuse (the CLI gets
/// `isError` with the text set by `qc_reply_set_text`, or a default message).
pub type qc_open_diff_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        file_path: *const c_char,
        new_content: *const c_char,
        new_content_len: usize,
        reply: *mut qc_reply,
    ) -> i32,
>;

/// Asked (by the CLI's `closeDiff`) to close the diff view of `file_path`.
/// Return 0 when closed, with the buffer's final text set by
/// `qc_reply_set_text` (not set = `{"content": null}`); non-zero for a
/// failure, with an optional message set the same way.
pub type qc_close_diff_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        file_path: *const c_char,
        reply: *mut qc_reply,
    ) -> i32,
>;

static COMPANIONS: Lazy<HandleTable<Companion>> = Lazy::new(HandleTable::new);

pub(crate) fn companion(c: *const qc_companion) -> Result<Arc<Companion>> {
    COMPANIONS.get(c as usize)
}

struct Reply {
    text: Option<String>,
}

thread_local! {
    /// The reply of the callback running on this thread (NULL outside one).
    static CURRENT_REPLY: Cell<*mut Reply> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` with a fresh reply published as the current one for this thread.
fn with_reply(f: impl FnOnce(*mut qc_reply) -> i32) -> (i32, Option<String>) {
    let mut reply = Reply { text: None };
    let ptr: *mut Reply = &mut reply;
    let previous = CURRENT_REPLY.with(|c| c.replace(ptr));
    let code = f(ptr as *mut qc_reply);
    CURRENT_REPLY.with(|c| c.set(previous));
    (code, reply.text)
}

/// Creates a companion (not yet listening).
///
/// `config_json` (nullable, borrowed) is a JSON object; every field is optional:
/// `workspaceRoots` (array of absolute paths), `ideName`, `ideDisplayName`,
/// `ideId` (the lock file's `ideInfo.name`), `cli` (the CLIs served by the one
/// server: `"qwen"` (default), `"gemini"` or `"both"`; anything else is
/// `QC_INVALID_ARGUMENT`), `lockDir` (Qwen Code's lock files; default
/// `$QWEN_HOME/ide`, else `~/.qwen/ide`), `geminiDir` (Gemini CLI's discovery
/// file; default `<os.tmpdir()>/gemini/ide`, the temporary directory as Node
/// finds it), `ppid` (default: this process, which lives as long as the IDE;
/// also the pid in Gemini's file name and `GEMINI_CLI_IDE_PID`), `trusted` (default true), `debounceMs` (50),
/// `maxWaitMs` (200), `maxBodyBytes` (64 MiB), `requestTimeoutMs` (30000: how long
/// openDiff/closeDiff wait for the host), `keepAliveMs` (15000, SSE
/// keep-alive interval, at most 30000).
/// On success `*out` receives a handle owned by the caller: release it with
/// `qc_companion_free`. Starts the companion's callback thread.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_new(
    config_json: *const c_char,
    out: *mut *mut qc_companion,
    error: *mut *mut c_char,
) -> qc_status {
    COMPANIONS.create(config_json, out, error, |json| {
        Companion::new(Config::from_json(json)?)
    })
}

/// Releases a companion: stops it if running (the lock file is removed),
/// joins its callback thread (unless called from inside one of its own
/// callbacks), and drops the callbacks' `user_data` (finalizers run).
/// NULL is a no-op returning `QC_OK`; an unknown or already freed handle gives
/// `QC_INVALID_HANDLE`. Calls already running on other threads finish first
/// (the companion lives until the last of them returns).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_free(c: *mut qc_companion) -> qc_status {
    COMPANIONS.destroy(c, |_| {})
}

/// Starts serving: binds 127.0.0.1 on a free port and writes the discovery
/// file of every CLI served: Qwen Code's `<lockDir>/<port>.lock`, Gemini
/// CLI's `<geminiDir>/gemini-ide-server-<ppid>-<port>.json` (dirs 0700, files
/// 0600, atomic; all or none). Gemini files left by editors that have exited
/// are removed from that directory first. Returns
/// `QC_ALREADY_RUNNING` if running; may be called again after a stop.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_start(
    c: *mut qc_companion,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.start())
}

/// Stops serving: removes the discovery files, then closes every client
/// session. Returns
/// `QC_NOT_RUNNING` when not running (e.g. a second stop). Allowed from inside
/// a callback.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_stop(
    c: *mut qc_companion,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.stop())
}

/// Writes the listening port to `*out` (`QC_NOT_RUNNING` when stopped).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_port(
    c: *const qc_companion,
    out: *mut u16,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out, || companion(c)?.port())
}

/// Writes to `*out` how many Qwen Code CLIs are connected now: MCP sessions
/// with an open notification stream (each running `qwen` holds one). 0 when
/// stopped; never blocks.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_connected_clients(
    c: *const qc_companion,
    out: *mut u32,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out, || {
        Ok(u32::try_from(companion(c)?.connected_clients()).unwrap_or(u32::MAX))
    })
}

/// `*out` receives the diffs open now, oldest first, with the CLI session
/// that proposed each (owned; free with `qc_string_free`):
/// `{"clients": n, "diffs": [{"filePath": "…", "session": {"id": "<MCP
/// session id>", "label": "CLI #2"} | null}]}`. Qwen Code sends no identity
/// of its own, so sessions are labelled in connection order since the
/// companion started; show the label only when `clients` is above 1.
/// Never blocks; may be called from any thread, also from inside the
/// open-diff callback (the diff is already listed then).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_open_diffs_json(
    c: *const qc_companion,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out, || Ok(companion(c)?.open_diffs()))
}

/// `*out` receives the lock file's path (owned; free with `qc_string_free`):
/// Qwen Code's lock file, or Gemini CLI's discovery file when the companion
/// serves only Gemini CLI. `QC_NOT_RUNNING` when stopped.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_lock_file_path(
    c: *const qc_companion,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out, "out")?;
        let path = companion(c)?.lock_file_path()?;
        write_string(out, path.to_string_lossy().into_owned())
    })
}

/// `*out` receives the discovery file written for each CLI, as JSON:
/// `{"qwen": "/home/u/.qwen/ide/41234.lock" | null, "gemini":
/// "/tmp/gemini/ide/gemini-ide-server-123-41234.json" | null}` (null for a CLI
/// the companion does not serve). Owned; free with `qc_string_free`.
/// `QC_NOT_RUNNING` when stopped. Any thread, also inside a callback.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_discovery_files_json(
    c: *const qc_companion,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out, || companion(c)?.discovery_files())
}

/// `*out` receives a JSON object of the environment variables the host must
/// set in its integrated terminals: those of every CLI the companion serves
/// (the `cli` option), e.g. for `"qwen"`
/// `{"QWEN_CODE_IDE_SERVER_PORT":"41234","QWEN_CODE_IDE_WORKSPACE_PATH":"/a:/b"}`
/// and for `"gemini"` `GEMINI_CLI_IDE_SERVER_PORT`,
/// `GEMINI_CLI_IDE_WORKSPACE_PATH` and `GEMINI_CLI_IDE_PID` (this process's
/// pid, the one in Gemini's discovery file name). Put all of them into every
/// terminal the editor starts. The token is never among them.
/// (owned; free with `qc_string_free`). `QC_NOT_RUNNING` when stopped.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_terminal_env_json(
    c: *const qc_companion,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out, || companion(c)?.terminal_env())
}

/// Replaces the workspace roots with `roots_json`, a JSON array of absolute
/// paths (borrowed). When running, the lock file is rewritten.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_workspace_roots_json(
    c: *mut qc_companion,
    roots_json: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let json = str_arg(roots_json, "roots_json")?;
        let roots: Vec<String> = serde_json::from_str(json).map_err(|e| {
            Error::invalid_json(format!("roots_json must be an array of strings: {e}"))
        })?;
        c.set_workspace_roots(roots)
    })
}

/// The editor opened `path` (borrowed). Paths that are not absolute paths to
/// regular files on disk are kept but never sent (checked at each update).
/// Updates are sent to clients after the debounce; the call never blocks.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_file_opened(
    c: *mut qc_companion,
    path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.file_opened(str_arg(path, "path")?))
}

/// `path` (borrowed) got the focus: it becomes the active file (cursor and
/// selection belong to it from now on). Like every event, it is sent after
/// the debounce, only if `path` is a regular file on disk.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_file_focused(
    c: *mut qc_companion,
    path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.file_focused(str_arg(path, "path")?))
}

/// The editor closed `path` (borrowed).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_file_closed(
    c: *mut qc_companion,
    path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.file_closed(str_arg(path, "path")?))
}

/// The file `old_path` was renamed to `new_path` (both borrowed).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_file_renamed(
    c: *mut qc_companion,
    old_path: *const c_char,
    new_path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.file_renamed(
            str_arg(old_path, "old_path")?,
            str_arg(new_path, "new_path")?,
        )
    })
}

/// Sets the cursor (1-based `line` and `character`) of `path`, or of the active
/// file when `path` is NULL. A path other than the active file gets the focus.
/// `QC_INVALID_ARGUMENT` for 0; `QC_NOT_FOUND` when `path` is NULL and no file
/// has the focus.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_cursor(
    c: *mut qc_companion,
    path: *const c_char,
    line: u32,
    character: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.set_cursor(opt_str_arg(path, "path")?, line, character)
    })
}

/// Sets the selected text (`len` bytes of UTF-8 at `text`, borrowed) of `path`
/// or of the active file (`path` NULL). `text` NULL or `len` 0 clears it. Text
/// over 16384 UTF-16 units is cut on a character boundary and marked
/// `... [TRUNCATED]`, staying within the limit.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_selection(
    c: *mut qc_companion,
    path: *const c_char,
    text: *const c_char,
    len: usize,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let path = opt_str_arg(path, "path")?;
        let text = if text.is_null() {
            None
        } else {
            Some(text_arg(text, len, "text")?)
        };
        c.set_selection(path, text)
    })
}

/// Sets whether the workspace is trusted (`isTrusted`); 0 = false, else true.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_trusted(
    c: *mut qc_companion,
    trusted: i32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || companion(c)?.set_trusted(trusted != 0))
}

/// Replaces the whole editor state with an `IdeContext` JSON document
/// (borrowed): `{"workspaceState":{"openFiles":[{"path","timestamp","isActive",
/// "cursor":{"line","character"},"selectedText"}],"isTrusted"}}`. It is
/// normalised like every other update. `QC_INVALID_JSON` on a bad document.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_context_json(
    c: *mut qc_companion,
    ide_context_json: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.set_context_json(str_arg(ide_context_json, "ide_context_json")?)
    })
}

/// `*out` receives the normalised `IdeContext` JSON as clients get it (owned;
/// free with `qc_string_free`). Works whether or not the companion runs.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_context_json(
    c: *const qc_companion,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out, || Ok(companion(c)?.context()))
}

/// The user accepted the diff of `path`: sends `ide/diffAccepted` with the
/// final text to every client. `content` (`len` bytes, borrowed) is the text
/// as the user may have edited it; NULL means the proposed text unchanged.
/// `QC_NOT_FOUND` when no diff is open for `path`.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_diff_accept(
    c: *mut qc_companion,
    path: *const c_char,
    content: *const c_char,
    len: usize,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let path = str_arg(path, "path")?;
        let content = if content.is_null() {
            None
        } else {
            Some(text_arg(content, len, "content")?)
        };
        c.diff_accept(path, content)
    })
}

/// The user rejected the diff of `path`: sends `ide/diffRejected`.
/// `QC_NOT_FOUND` when no diff is open for `path`.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_diff_reject(
    c: *mut qc_companion,
    path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.diff_reject(str_arg(path, "path")?)
    })
}

/// The user closed the diff view of `path` without deciding: sends
/// `ide/diffClosed` (the CLI treats it as a rejection).
/// `QC_NOT_FOUND` when no diff is open for `path`.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_diff_closed(
    c: *mut qc_companion,
    path: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.diff_closed(str_arg(path, "path")?)
    })
}

/// Sets (or with `cb` NULL removes) the log callback. Lines up to `max_level`
/// (`QC_LOG_ERROR`..`QC_LOG_TRACE`) are delivered on the callback thread; the
/// library never prints anything itself. If more than 4096 lines wait, newer
/// ones are dropped. The previous callback's `user_data` is finalized. On
/// failure the library does not take `user_data` (`free_user_data` is not called).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_log_callback(
    c: *mut qc_companion,
    cb: qc_log_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        c.set_log_callback(log_sink(cb, user_data, free_user_data, max_level)?);
        Ok(())
    })
}

/// Sets (or with `cb` NULL removes) the open-diff callback. Without one,
/// `openDiff` answers `isError` ("no diff view"). The previous callback's
/// `user_data` is finalized. On failure the library does not take
/// `user_data` (`free_user_data` is not called).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_open_diff_callback(
    c: *mut qc_companion,
    cb: qc_open_diff_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let ud = UserData::new(user_data, free_user_data);
        match cb {
            None => c.set_open_diff_callback(None),
            Some(f) => c.set_open_diff_callback(Some(Arc::new(
                move |path: &str, content: &str| -> std::result::Result<(), String> {
                    let cpath = callback_cstring(path);
                    let mut buf = Vec::with_capacity(content.len() + 1);
                    buf.extend_from_slice(content.as_bytes());
                    buf.push(0);
                    let (code, text) = with_reply(|reply| {
                        // SAFETY: host callback; arguments live for the call.
                        unsafe {
                            f(
                                ud.ptr(),
                                cpath.as_ptr(),
                                buf.as_ptr() as *const c_char,
                                content.len(),
                                reply,
                            )
                        }
                    });
                    if code == 0 {
                        Ok(())
                    } else {
                        Err(text.unwrap_or_else(|| {
                            format!("the IDE refused to open the diff (code {code})")
                        }))
                    }
                },
            ))),
        }
        Ok(())
    })
}

/// Sets (or with `cb` NULL removes) the close-diff callback. Without one,
/// `closeDiff` answers with the proposed text of that diff. The previous
/// callback's `user_data` is finalized. On failure the library does not take
/// `user_data` (`free_user_data` is not called).
#[no_mangle]
pub unsafe extern "C" fn qc_companion_set_close_diff_callback(
    c: *mut qc_companion,
    cb: qc_close_diff_fn,
    user_data: *mut c_void,
    free_user_data: qc_free_fn,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let ud = UserData::new(user_data, free_user_data);
        match cb {
            None => c.set_close_diff_callback(None),
            Some(f) => c.set_close_diff_callback(Some(Arc::new(
                move |path: &str| -> std::result::Result<Option<String>, String> {
                    let cpath = callback_cstring(path);
                    // SAFETY: host callback; arguments live for the call.
                    let (code, text) =
                        with_reply(|reply| unsafe { f(ud.ptr(), cpath.as_ptr(), reply) });
                    if code == 0 {
                        Ok(text)
                    } else {
                        Err(text.unwrap_or_else(|| {
                            format!("the IDE could not close the diff (code {code})")
                        }))
                    }
                },
            ))),
        }
        Ok(())
    })
}

/// Sets the text of the reply of the diff callback currently running on this
/// thread: `len` bytes of UTF-8 at `text` (copied). Only valid inside that
/// callback; elsewhere `QC_REFUSED`. A second call replaces the text.
#[no_mangle]
pub unsafe extern "C" fn qc_reply_set_text(
    reply: *mut qc_reply,
    text: *const c_char,
    len: usize,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        if reply.is_null() {
            return Err(Error::new(Status::NullParameter, "reply is NULL"));
        }
        let current = CURRENT_REPLY.with(|c| c.get());
        if current.is_null() || current != reply as *mut Reply {
            return Err(Error::new(
                Status::Refused,
                "this reply does not belong to a callback running on this thread",
            ));
        }
        let text = text_arg(text, len, "text")?.to_string();
        // SAFETY: `current` points to the live Reply of the running callback on this thread.
        unsafe { (*current).text = Some(text) };
        Ok(())
    })
}

/// In pull mode (after `qc_companion_enable_events`), delivers this object's log
/// lines up to `max_level` (`QC_LOG_ERROR` 1 .. `QC_LOG_TRACE` 5; 0 turns
/// them off) as events `{"type":"log","level":N,"message":"…"}` from
/// `qc_companion_next_event`, in place of a log callback (this replaces one set with
/// `qc_companion_set_log_callback`, and setting a callback later replaces the
/// events). For hosts that may not be called on a library thread (LuaJIT).
/// At most 256 log lines wait; past that the oldest is dropped, so log
/// lines never crowd out the object's own events. `QC_REFUSED` outside pull
/// mode.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_enable_log_events(
    c: *mut qc_companion,
    max_level: u32,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        companion(c)?.enable_log_events(log_events_level(max_level)?)
    })
}

/// Switches the companion to pull mode, for hosts that must not be called on
/// a library thread (LuaJIT, single-threaded event loops): from now on
/// openDiff/closeDiff requests are queued as events instead of calling the
/// diff callbacks. `*out_fd` receives the event handle, owned by the
/// library (do not close it; valid until `qc_companion_free`), that is
/// ready while events wait — a readable file descriptor on Linux and macOS,
/// an event HANDLE on Windows (`(HANDLE)(intptr_t)*out_fd`; see the
/// conventions at the top): watch it with your event loop, then call
/// `qc_companion_next_event` until it gives NULL. Calling it again returns
/// the same handle.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_enable_events(
    c: *mut qc_companion,
    out_fd: *mut i32,
    error: *mut *mut c_char,
) -> qc_status {
    value_result(error, out_fd, || companion(c)?.enable_event_queue())
}

/// Takes the next queued event (pull mode). `*out_json` receives an owned JSON
/// object (free with `qc_string_free`), or NULL when no event waits:
/// `{"type":"openDiff","id":N,"filePath":…,"newContent":…}` or
/// `{"type":"closeDiff","id":N,"filePath":…}`. Answer each request with
/// `qc_companion_respond` within the request timeout (config
/// `requestTimeoutMs`, default 30 s; after it the CLI gets an error and the
/// request is dropped from the queue if still waiting).
/// `QC_REFUSED` when pull mode is not enabled.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_next_event(
    c: *mut qc_companion,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out_json, "out_json")?;
        let event = companion(c)?.poll_event()?;
        write_optional_json(out_json, event);
        Ok(())
    })
}

/// Answers the pulled request `id`. `ok` non-zero: openDiff — the diff is
/// shown; closeDiff — closed, with `text` (`len` bytes, borrowed; NULL =
/// none) as the final buffer text. `ok` zero: refused, `text` is the message.
/// `QC_NOT_FOUND` for an unknown, already answered or timed-out id.
#[no_mangle]
pub unsafe extern "C" fn qc_companion_respond(
    c: *mut qc_companion,
    id: u64,
    ok: i32,
    text: *const c_char,
    len: usize,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let c = companion(c)?;
        let text = if text.is_null() {
            None
        } else {
            Some(text_arg(text, len, "text")?.to_string())
        };
        let answer = if ok != 0 {
            Ok(text)
        } else {
            Err(text.unwrap_or_else(|| "the IDE refused the request".to_string()))
        };
        c.respond(id, answer)
    })
}
