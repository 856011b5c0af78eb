//! Node's `json` IPC framing over the AF_UNIX socketpair shared with a
//! plugin's Node child.
//!
//! What Node does on its side (node 20, `internal/child_process`):
//! - every message is `JSON.stringify(msg) + "\n"`, raw UTF-8, no length
//!   prefix; the reader splits on `\n` and parses each line;
//! - a lone surrogate travels as an escape (`"\ud800"`), which serde_json
//!   refuses: [`repair_lone_surrogates`] turns it into `\ufffd` first, so one
//!   string from a plugin can never break the host's reader;
//! - an object whose `cmd` starts with `NODE_` is internal. A plugin that
//!   passes a handle (`process.send(msg, socket)`) sends `NODE_HANDLE` plus
//!   an fd (SCM_RIGHTS) and queues every later message until the parent
//!   answers `NODE_HANDLE_ACK`; we close every received fd and ACK;
//! - a non-JSON or EMPTY line sent to the child kills it (exit 1): the
//!   writer never sends one;
//! - a plugin that exits right after a big send delivers only part of its
//!   last line: a partial line at EOF is discarded, never parsed;
//! - there is no size limit: the host enforces its own per-message cap.
//!
//! Writes never raise SIGPIPE (see `crate::sys::ipc`): a write to a dead
//! plugin gives EPIPE instead of a signal that would kill the IDE.

use std::borrow::Cow;

use serde_json::Value;

/// Default per-message cap (16 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A line grew past the per-message cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    pub limit: usize,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a message is larger than {} bytes", self.limit)
    }
}

/// Splits a byte stream into `\n`-terminated lines with a size cap.
pub struct LineReader {
    buf: Vec<u8>,
    max: usize,
    failed: bool,
}

impl LineReader {
    pub fn new(max: usize) -> LineReader {
        LineReader {
            buf: Vec::new(),
            max: max.max(1),
            failed: false,
        }
    }

    /// Bytes of the current unfinished line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feeds `data`: complete lines (without the `\n`) are appended to `out`.
    /// A line longer than the cap gives `TooLarge` as soon as the cap is
    /// passed (lines completed before it are still in `out`); the reader
    /// then refuses everything after.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), TooLarge> {
        let too_large = TooLarge { limit: self.max };
        if self.failed {
            return Err(too_large);
        }
        while !data.is_empty() {
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if self.buf.len() + i > self.max {
                        return self.fail(too_large);
                    }
                    let line = if self.buf.is_empty() {
                        data[..i].to_vec()
                    } else {
                        let mut line = std::mem::take(&mut self.buf);
                        line.extend_from_slice(&data[..i]);
                        line
                    };
                    out.push(line);
                    data = &data[i + 1..];
                }
                None => {
                    if self.buf.len() + data.len() > self.max {
                        return self.fail(too_large);
                    }
                    self.buf.extend_from_slice(data);
                    break;
                }
            }
        }
        Ok(())
    }

    fn fail(&mut self, e: TooLarge) -> Result<(), TooLarge> {
        self.failed = true;
        self.buf = Vec::new();
        Err(e)
    }

    /// End of stream: the unfinished line (if any) is dropped; returns its length.
    pub fn finish(&mut self) -> usize {
        std::mem::take(&mut self.buf).len()
    }
}

fn hex4(b: &[u8]) -> Option<u16> {
    if b.len() < 4 {
        return None;
    }
    let s = std::str::from_utf8(&b[..4]).ok()?;
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(s, 16).ok()
}

/// Replaces every lone surrogate escape (`\ud800`-`\udbff` not followed by
/// a `\udc00`-`\udfff` escape, or a lone low one) with `\ufffd`. Escaped
/// backslashes are skipped as pairs, so `\\ud800` (a backslash then text)
/// stays as it is. Borrowed when nothing needs repair.
pub fn repair_lone_surrogates(line: &[u8]) -> Cow<'_, [u8]> {
    const REPLACEMENT: &[u8] = b"\\ufffd";
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0; // bytes of `line` already handled into `out`
    let mut i = 0;
    while i < line.len() {
        if line[i] != b'\\' {
            i += 1;
            continue;
        }
        if line.get(i + 1) != Some(&b'u') {
            i += 2; // any other escape, `\\` included
            continue;
        }
        let Some(unit) = hex4(&line[i + 2..]) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let next = &line[i + 6..];
                let paired = next.len() >= 6
                    && next[0] == b'\\'
                    && next[1] == b'u'
                    && matches!(hex4(&next[2..]), Some(0xDC00..=0xDFFF));
                if paired {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| Vec::with_capacity(line.len()));
            o.extend_from_slice(&line[copied..i]);
            o.extend_from_slice(REPLACEMENT);
            copied = i + 6;
        }
        i += 6;
    }
    match out {
        None => Cow::Borrowed(line),
        Some(mut o) => {
            o.extend_from_slice(&line[copied..]);
            Cow::Owned(o)
        }
    }
}

/// One line from the plugin, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A message for the host (what the plugin passed to `process.send`).
    Message(Value),
    /// Node's own traffic (`cmd` starting with `NODE_`).
    Internal(Value),
    /// Not JSON (stdout-like garbage, a truncated write): counted, logged, ignored.
    Invalid(String),
    /// An empty (or all-blank) line: skipped.
    Empty,
}

/// Parses one line (surrogates repaired first).
pub fn classify(line: &[u8]) -> Frame {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return Frame::Empty;
    }
    let repaired = repair_lone_surrogates(line);
    match serde_json::from_slice::<Value>(&repaired) {
        Ok(v) => {
            let internal = v
                .get("cmd")
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with("NODE_"));
            if internal {
                Frame::Internal(v)
            } else {
                Frame::Message(v)
            }
        }
        Err(e) => Frame::Invalid(e.to_string()),
    }
}

/// `JSON.stringify(msg) + "\n"`: compact JSON never contains a raw newline
/// and is never empty, so the child's reader always gets one valid line.
pub fn encode(msg: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(msg).unwrap_or_else(|_| b"null".to_vec());
    out.push(b'\n');
    out
}

/// Reads the next chunk from the plugin's socket (fds passed with it are
/// closed, their count returned; `Ok((0, _))` is EOF), and writes all of a
/// buffer to it (EPIPE, never SIGPIPE).
pub use crate::sys::ipc::{recv_chunk, send_all};

#[cfg(test)]
mod tests;
