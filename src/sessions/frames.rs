//! Wire format: the NDJSON line reader, the auth line, user frames and
//! delivery-status (receipt) frames, parsed exactly as Qwen Code parses them
//! (anything malformed is `None`: ignored, never an error).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::names::{is_addressable_msg_id, js_trim};

/// Frame version we speak; frames with a higher `msgV` are ignored.
pub(crate) const FRAME_VERSION: u32 = 1;
/// Longest line, in UTF-16 code units, a reader buffers without a newline
/// (and the longest frame a sender may write).
pub(crate) const MAX_FRAME_UNITS: usize = 1024 * 1024;
/// Most extra ids one `dropped` receipt carries.
pub(crate) const MAX_DROPPED_MSG_IDS: usize = 256;

/// The review class a sender asserts (`fromMode`) or a receiver has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewClass {
    /// The user reviews each action.
    Prompting,
    /// Some actions are applied without review.
    Bypass,
}

impl ReviewClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewClass::Prompting => "prompting",
            ReviewClass::Bypass => "bypass",
        }
    }
}

/// `priority` of a user frame; anything but `now` reads as `next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Now,
    #[default]
    Next,
}

impl Priority {
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Now => "now",
            Priority::Next => "next",
        }
    }
}

/// What became of a message (receipt `status`), plus `pending` for a sent
/// message no receipt has moved yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Held,
    Delivered,
    Denied,
    Refused,
    Expired,
    Misaddressed,
    Dropped,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        use DeliveryState::*;
        match self {
            Pending => "pending",
            Held => "held",
            Delivered => "delivered",
            Denied => "denied",
            Refused => "refused",
            Expired => "expired",
            Misaddressed => "misaddressed",
            Dropped => "dropped",
        }
    }

    fn from_wire(s: &str) -> Option<DeliveryState> {
        use DeliveryState::*;
        Some(match s {
            "held" => Held,
            "delivered" => Delivered,
            "denied" => Denied,
            "refused" => Refused,
            "expired" => Expired,
            "misaddressed" => Misaddressed,
            "dropped" => Dropped,
            _ => return None,
        })
    }

    /// The receipt state machine: which statuses may follow this one.
    /// Everything else is a duplicate (or a reused id) and is ignored.
    pub fn can_become(self, next: DeliveryState) -> bool {
        use DeliveryState::*;
        match self {
            Pending => next != Pending,
            Held => matches!(next, Delivered | Denied | Expired | Misaddressed),
            Delivered => matches!(next, Expired | Misaddressed),
            Denied | Refused | Expired | Misaddressed | Dropped => false,
        }
    }

    /// No receipt can move this state any more.
    pub fn is_final(self) -> bool {
        !matches!(self, DeliveryState::Pending | DeliveryState::Held)
    }
}

/// Why an inbox turned a message away before its policy ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropReason {
    RateLimited,
    Duplicate,
    QueueFull,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::RateLimited => "rate-limited",
            DropReason::Duplicate => "duplicate",
            DropReason::QueueFull => "queue-full",
        }
    }
    fn from_wire(s: &str) -> Option<DropReason> {
        match s {
            "rate-limited" => Some(DropReason::RateLimited),
            "duplicate" => Some(DropReason::Duplicate),
            "queue-full" => Some(DropReason::QueueFull),
            _ => None,
        }
    }
}

/// A parsed `type: "user"` frame. Every field but the content is a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct UserFrame {
    pub msg_id: String,
    pub from: Option<String>,
    pub reply_token: Option<String>,
    pub from_name: Option<String>,
    pub from_mode: Option<ReviewClass>,
    pub to_session_id: Option<String>,
    pub priority: Priority,
    pub content: String,
    /// The whole frame exactly as it was received (unknown fields and
    /// `replyToken` included); `None` for a frame built here.
    pub raw: Option<Arc<Value>>,
}

impl UserFrame {
    /// The frame as received, or (for a frame built here) as we write it.
    pub fn wire_value(&self) -> Value {
        match &self.raw {
            Some(v) => Value::clone(v),
            None => serde_json::from_str(&user_frame_json(self)).expect("our own frame is JSON"),
        }
    }

    /// The same frame without its received form (to compare meanings).
    pub fn without_raw(self) -> UserFrame {
        UserFrame { raw: None, ..self }
    }
}

/// A parsed `delivery_status` control frame (a receipt).
#[derive(Debug, Clone, PartialEq)]
pub struct ControlFrame {
    pub msg_id: String,
    pub status: DeliveryState,
    pub orig_msg_id: String,
    pub from: Option<String>,
    pub reason: Option<String>,
    pub drop_reason: Option<DropReason>,
    pub dropped_msg_ids: Vec<String>,
    /// The whole frame exactly as it was received; `None` for a frame built here.
    pub raw: Option<Arc<Value>>,
}

impl ControlFrame {
    /// The frame as received, or (for a frame built here) its fields as JSON.
    pub fn wire_value(&self) -> Value {
        if let Some(v) = &self.raw {
            return Value::clone(v);
        }
        let mut m = Map::new();
        m.insert("msgV".into(), FRAME_VERSION.into());
        m.insert("msgId".into(), self.msg_id.clone().into());
        m.insert("type".into(), "control".into());
        m.insert("action".into(), "delivery_status".into());
        m.insert("status".into(), self.status.as_str().into());
        m.insert("origMsgId".into(), self.orig_msg_id.clone().into());
        if let Some(f) = &self.from {
            m.insert("from".into(), f.clone().into());
        }
        if let Some(r) = &self.reason {
            m.insert("reason".into(), r.clone().into());
        }
        if let Some(d) = self.drop_reason {
            m.insert("dropReason".into(), d.as_str().into());
        }
        if !self.dropped_msg_ids.is_empty() {
            m.insert("droppedMsgIds".into(), self.dropped_msg_ids.clone().into());
        }
        Value::Object(m)
    }

    /// The same frame without its received form (to compare meanings).
    pub fn without_raw(self) -> ControlFrame {
        ControlFrame { raw: None, ..self }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    User(UserFrame),
    Control(ControlFrame),
}

impl Frame {
    /// The same frame without its received form (to compare meanings).
    pub fn without_raw(self) -> Frame {
        match self {
            Frame::User(u) => Frame::User(u.without_raw()),
            Frame::Control(c) => Frame::Control(c.without_raw()),
        }
    }
}

fn parse_object(line: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(line).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// `msgV` must be a JSON number no greater than our version.
fn version_ok(obj: &Map<String, Value>) -> bool {
    matches!(obj.get("msgV"), Some(Value::Number(n)) if n.as_f64().is_some_and(|v| v <= FRAME_VERSION as f64))
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Option<String> {
    match obj.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The token of an auth line (`{"msgV":1,"type":"auth","token":"…"}`), or
/// `None` when the line is anything else.
pub fn parse_auth_line(line: &str) -> Option<String> {
    let obj = parse_object(line)?;
    if !version_ok(&obj) || obj.get("type") != Some(&Value::String("auth".into())) {
        return None;
    }
    opt_string(&obj, "token").filter(|t| !t.is_empty())
}

/// A user or receipt frame, or `None` for anything Qwen would drop.
pub fn parse_frame(line: &str) -> Option<Frame> {
    let obj = parse_object(line)?;
    if !version_ok(&obj) {
        return None;
    }
    let msg_id = match obj.get("msgId") {
        Some(Value::String(s)) if is_addressable_msg_id(s) => s.clone(),
        _ => return None,
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("user") => {
            let message = obj.get("message")?.as_object()?;
            if message.get("role").and_then(Value::as_str) != Some("user") {
                return None;
            }
            let content = match message.get("content") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => return None,
            };
            let from_mode = match obj.get("fromMode").and_then(Value::as_str) {
                Some("prompting") => Some(ReviewClass::Prompting),
                Some("bypass") => Some(ReviewClass::Bypass),
                _ => None,
            };
            let priority = match obj.get("priority").and_then(Value::as_str) {
                Some("now") => Priority::Now,
                _ => Priority::Next,
            };
            let (from, reply_token, from_name, to_session_id) = (
                opt_string(&obj, "from"),
                opt_string(&obj, "replyToken"),
                opt_string(&obj, "fromName"),
                opt_string(&obj, "toSessionId"),
            );
            Some(Frame::User(UserFrame {
                msg_id,
                from,
                reply_token,
                from_name,
                from_mode,
                to_session_id,
                priority,
                content,
                raw: Some(Arc::new(Value::Object(obj))),
            }))
        }
        Some("control") => {
            if obj.get("action").and_then(Value::as_str) != Some("delivery_status") {
                return None;
            }
            let status = DeliveryState::from_wire(obj.get("status")?.as_str()?)?;
            let orig_msg_id = match obj.get("origMsgId") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => return None,
            };
            let (drop_reason, dropped_msg_ids) = if status == DeliveryState::Dropped {
                let reason = obj
                    .get("dropReason")
                    .and_then(Value::as_str)
                    .and_then(DropReason::from_wire);
                let ids = match obj.get("droppedMsgIds") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|s| is_addressable_msg_id(s))
                        .take(MAX_DROPPED_MSG_IDS)
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                };
                (reason, ids)
            } else {
                (None, Vec::new())
            };
            let (from, reason) = (opt_string(&obj, "from"), opt_string(&obj, "reason"));
            Some(Frame::Control(ControlFrame {
                msg_id,
                status,
                orig_msg_id,
                from,
                reason,
                drop_reason,
                dropped_msg_ids,
                raw: Some(Arc::new(Value::Object(obj))),
            }))
        }
        _ => None,
    }
}

/// The auth line, newline included.
pub fn auth_line(token: &str) -> String {
    let mut s = serde_json::to_string(
        &serde_json::json!({"msgV": FRAME_VERSION, "type": "auth", "token": token}),
    )
    .expect("serialising a JSON object");
    s.push('\n');
    s
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UserFrameOut<'a> {
    msg_v: u32,
    msg_id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reply_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to_session_id: Option<&'a str>,
    priority: &'static str,
    message: MessageOut<'a>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: &'a str,
}

/// A user frame as one JSON line (without the newline).
pub fn user_frame_json(f: &UserFrame) -> String {
    serde_json::to_string(&UserFrameOut {
        msg_v: FRAME_VERSION,
        msg_id: &f.msg_id,
        kind: "user",
        from: f.from.as_deref(),
        reply_token: f.reply_token.as_deref(),
        from_name: f.from_name.as_deref(),
        from_mode: f.from_mode.map(ReviewClass::as_str),
        to_session_id: f.to_session_id.as_deref(),
        priority: f.priority.as_str(),
        message: MessageOut {
            role: "user",
            content: &f.content,
        },
    })
    .expect("serialising a user frame")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusFrameOut<'a> {
    msg_v: u32,
    msg_id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    action: &'static str,
    status: &'static str,
    orig_msg_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'a str>,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    drop_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    dropped_msg_ids: &'a [String],
}

/// The free-text `reason` we put in our receipts.
pub fn describe_status(status: DeliveryState) -> &'static str {
    use DeliveryState::*;
    match status {
        Pending => "The message has not been answered yet.",
        Held => "Your message is waiting for the recipient's user to review it.",
        Delivered => "Your message was handed to the recipient.",
        Denied => "The recipient's user reviewed your message and declined it.",
        Refused => "The recipient does not take messages from other sessions, so nobody saw this one. Do not re-send it.",
        Expired => "Your message was not delivered: it waited too long, or the recipient closed first.",
        Misaddressed => "That address now belongs to a different session than the one you named. Look it up again before re-sending.",
        Dropped => "Your message was turned away at the recipient's inbox before anyone saw it (too fast, a repeat, or a full queue). Treat it as unsent.",
    }
}

/// A receipt frame as one JSON line (without the newline), with a fresh id.
pub fn status_frame_json(
    msg_id: &str,
    status: DeliveryState,
    orig_msg_id: &str,
    from: Option<&str>,
    drop_reason: Option<DropReason>,
    dropped_msg_ids: &[String],
) -> String {
    let dropped = status == DeliveryState::Dropped;
    let ids = if dropped {
        &dropped_msg_ids[..dropped_msg_ids.len().min(MAX_DROPPED_MSG_IDS)]
    } else {
        &[]
    };
    serde_json::to_string(&StatusFrameOut {
        msg_v: FRAME_VERSION,
        msg_id,
        kind: "control",
        action: "delivery_status",
        status: status.as_str(),
        orig_msg_id,
        from,
        reason: describe_status(status),
        drop_reason: if dropped {
            drop_reason.map(DropReason::as_str)
        } else {
            None
        },
        dropped_msg_ids: ids,
    })
    .expect("serialising a receipt")
}

/// Counts the UTF-16 code units a byte stream decodes to (invalid bytes
/// count one replacement character each), across chunk boundaries.
#[derive(Debug, Default, Clone)]
struct Utf16Counter {
    units: usize,
    need: u8,
    pending: u8,
}

impl Utf16Counter {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.need > 0 {
                if (0x80..=0xbf).contains(&b) {
                    self.need -= 1;
                    if self.need == 0 {
                        self.units += self.pending as usize;
                    }
                    continue;
                }
                // Truncated sequence: one replacement character, then `b` afresh.
                self.units += 1;
                self.need = 0;
            }
            match b {
                0x00..=0x7f => self.units += 1,
                0xc2..=0xdf => (self.need, self.pending) = (1, 1),
                0xe0..=0xef => (self.need, self.pending) = (2, 1),
                0xf0..=0xf4 => (self.need, self.pending) = (3, 2),
                _ => self.units += 1,
            }
        }
    }
    fn units(&self) -> usize {
        self.units + usize::from(self.need > 0)
    }
}

/// Splits a byte stream into lines as Qwen's inbox does: on `\n` only, each
/// line decoded as UTF-8 (invalid bytes become U+FFFD), blank and
/// whitespace-only lines skipped; after each chunk the unterminated
/// remainder may not exceed 1 MiB counted in UTF-16 code units.
#[derive(Debug, Default)]
pub struct LineReader {
    buf: Vec<u8>,
    counter: Utf16Counter,
    limit: Option<usize>,
}

/// The unterminated remainder went over the limit; the connection must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

impl LineReader {
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// A reader with a smaller limit (tests).
    pub fn with_limit(limit: usize) -> LineReader {
        LineReader {
            limit: Some(limit),
            ..LineReader::default()
        }
    }

    /// Feeds one chunk; complete non-blank lines are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), Overflow> {
        let searched_from = self.buf.len();
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        let mut found = false;
        let mut i = searched_from;
        while let Some(pos) = self.buf[i..].iter().position(|&b| b == b'\n') {
            let end = i + pos;
            let line = String::from_utf8_lossy(&self.buf[start..end]);
            if !js_trim(&line).is_empty() {
                out.push(line.into_owned());
            }
            start = end + 1;
            i = start;
            found = true;
        }
        if found {
            self.buf.drain(..start);
            self.counter = Utf16Counter::default();
            self.counter.push(&self.buf);
        } else {
            self.counter.push(chunk);
        }
        if self.counter.units() > self.limit.unwrap_or(MAX_FRAME_UNITS) {
            self.buf = Vec::new();
            self.counter = Utf16Counter::default();
            return Err(Overflow);
        }
        Ok(())
    }

    /// Bytes waiting for their newline.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests;
