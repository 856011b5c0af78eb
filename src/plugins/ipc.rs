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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn lines(reader: &mut LineReader, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for c in chunks {
            reader.push(c, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn splits_and_discards_partial_tail() {
        let mut r = LineReader::new(100);
        let got = lines(&mut r, &[b"{\"a\":1}\n{\"b\"", b":2}\n{\"c\":"]);
        assert_eq!(got, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert_eq!(r.finish(), 5);
    }

    #[test]
    fn oversize_is_reported_at_once_without_buffering() {
        let mut r = LineReader::new(10);
        let mut out = Vec::new();
        r.push(b"ok\n12345", &mut out).unwrap();
        assert_eq!(out, vec![b"ok".to_vec()]);
        assert_eq!(r.push(b"678901", &mut out), Err(TooLarge { limit: 10 }));
        assert_eq!(r.buffered(), 0);
        // Refuses everything after, even a newline that would end the line.
        assert!(r.push(b"\n{}\n", &mut out).is_err());
        // Exactly at the limit is fine.
        let mut r = LineReader::new(3);
        let mut out = Vec::new();
        r.push(b"abc\n", &mut out).unwrap();
        assert!(r.push(b"abcd\n", &mut out).is_err());
    }

    #[test]
    fn surrogates_repaired_but_escaped_backslash_kept() {
        let cases: &[(&str, &str)] = &[
            (r#""\ud800""#, "\u{fffd}"),
            (r#""a\udc00b""#, "a\u{fffd}b"),
            (r#""\ud83d\ude00""#, "😀"),
            (r#""\ud83d\ud83d\ude00""#, "\u{fffd}😀"),
            (r#""\\ud800""#, "\\ud800"),
            (r#""\\\ud800""#, "\\\u{fffd}"),
            (r#""\ud800\n""#, "\u{fffd}\n"),
            (r#""\uD800x""#, "\u{fffd}x"),
            (r#""\ud800""#, "\u{fffd}"),
        ];
        for (raw, want) in cases {
            let fixed = repair_lone_surrogates(raw.as_bytes());
            let v: Value = serde_json::from_slice(&fixed).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(v, json!(want), "{raw}");
        }
        assert!(matches!(
            repair_lone_surrogates(br#"{"a":"\u00e9\\u"}"#),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn classify_frames() {
        assert_eq!(
            classify(br#"{"type":"tool_result"}"#),
            Frame::Message(json!({"type":"tool_result"}))
        );
        assert!(matches!(
            classify(br#"{"cmd":"NODE_HANDLE","msg":{}}"#),
            Frame::Internal(_)
        ));
        assert!(matches!(
            classify(br#"{"cmd":"NOTNODE"}"#),
            Frame::Message(_)
        ));
        assert!(matches!(classify(b"hello world"), Frame::Invalid(_)));
        assert_eq!(classify(b""), Frame::Empty);
        assert_eq!(classify(b"\r"), Frame::Empty);
        assert_eq!(classify(b"{\"x\":1}\r"), Frame::Message(json!({"x":1})));
    }

    #[test]
    fn encode_is_one_nonempty_line() {
        let v = json!({"text": "a\nb\u{2028}c", "n": null});
        let e = encode(&v);
        assert_eq!(e.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(*e.last().unwrap(), b'\n');
        assert_eq!(
            serde_json::from_slice::<Value>(&e[..e.len() - 1]).unwrap(),
            v
        );
        assert_eq!(encode(&Value::Null), b"null\n");
    }

    /// One UTF-16 unit or a character, as a plugin's string may hold them.
    #[derive(Debug, Clone)]
    enum Unit {
        Char(char),
        High(u16),
        Low(u16),
    }

    fn unit() -> impl Strategy<Value = Unit> {
        prop_oneof![
            4 => any::<char>().prop_map(Unit::Char),
            1 => prop_oneof![Just('\\'), Just('u'), Just('d'), Just('8'), Just('"')].prop_map(Unit::Char),
            1 => (0xD800u16..=0xDBFF).prop_map(Unit::High),
            1 => (0xDC00u16..=0xDFFF).prop_map(Unit::Low),
        ]
    }

    /// What Node's JSON.stringify writes for these units.
    fn node_encode(units: &[Unit]) -> String {
        let mut s = String::from("\"");
        for u in units {
            match u {
                Unit::Char(c) => {
                    let one = serde_json::to_string(&c.to_string()).unwrap();
                    s.push_str(&one[1..one.len() - 1]);
                }
                Unit::High(x) | Unit::Low(x) => s.push_str(&format!("\\u{x:04x}")),
            }
        }
        s.push('"');
        s
    }

    /// The model: pairs combine, every other surrogate becomes U+FFFD.
    fn model_decode(units: &[Unit]) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < units.len() {
            match (&units[i], units.get(i + 1)) {
                (Unit::High(h), Some(Unit::Low(l))) => {
                    let c = 0x10000 + (((*h as u32) - 0xD800) << 10) + ((*l as u32) - 0xDC00);
                    out.push(char::from_u32(c).unwrap());
                    i += 2;
                    continue;
                }
                (Unit::High(_), _) | (Unit::Low(_), _) => out.push('\u{fffd}'),
                (Unit::Char(c), _) => out.push(*c),
            }
            i += 1;
        }
        out
    }

    proptest! {
        #[test]
        fn surrogate_repair_matches_model(units in proptest::collection::vec(unit(), 0..24)) {
            let raw = node_encode(&units);
            let fixed = repair_lone_surrogates(raw.as_bytes());
            let v: Value = serde_json::from_slice(&fixed).unwrap();
            prop_assert_eq!(v, Value::String(model_decode(&units)));
        }

        #[test]
        fn any_chunking_gives_back_the_frames(
            texts in proptest::collection::vec(".{0,40}", 0..12),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
            tail in proptest::option::of("\\{\"partial\":[a-z]{0,10}"),
        ) {
            let frames: Vec<Value> = texts.iter().enumerate()
                .map(|(i, t)| json!({"type": "tool_result", "i": i, "text": t}))
                .collect();
            let mut stream: Vec<u8> = frames.iter().flat_map(encode).collect();
            if let Some(t) = &tail { stream.extend_from_slice(t.as_bytes()); }
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut reader = LineReader::new(1 << 20);
            let mut out = Vec::new();
            let mut prev = 0;
            for p in points.into_iter().chain([stream.len()]) {
                reader.push(&stream[prev..p], &mut out).unwrap();
                prev = p;
            }
            let discarded = reader.finish();
            prop_assert_eq!(discarded, tail.as_ref().map_or(0, |t| t.len()));
            let got: Vec<Value> = out.iter().map(|l| match classify(l) {
                Frame::Message(v) => v,
                other => panic!("unexpected {other:?}"),
            }).collect();
            prop_assert_eq!(got, frames);
        }

        #[test]
        fn oversize_detected_and_never_buffered(
            sizes in proptest::collection::vec(0usize..300, 1..10),
            limit in 1usize..200,
            chunk in 1usize..64,
        ) {
            let mut stream = Vec::new();
            for (i, s) in sizes.iter().enumerate() {
                stream.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, *s));
                stream.push(b'\n');
            }
            let mut reader = LineReader::new(limit);
            let mut out = Vec::new();
            let mut result = Ok(());
            for c in stream.chunks(chunk) {
                result = reader.push(c, &mut out);
                prop_assert!(reader.buffered() <= limit);
                if result.is_err() { break; }
            }
            let first_big = sizes.iter().position(|s| *s > limit);
            match first_big {
                Some(k) => {
                    prop_assert!(result.is_err());
                    prop_assert_eq!(out.len(), k);
                }
                None => {
                    prop_assert!(result.is_ok());
                    prop_assert_eq!(out.len(), sizes.len());
                }
            }
            for (l, s) in out.iter().zip(&sizes) {
                prop_assert_eq!(l.len(), *s);
            }
        }
    }
}
