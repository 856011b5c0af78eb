//! Property tests (bounded, a few seconds) for the inbox's line reader and
//! the frame and auth-line parsers. The parsers are checked against a model
//! of Qwen's frame rules (below), on arbitrary JSON, on arbitrary text, and
//! on valid frames from the model with one mutation each.

use proptest::prelude::*;
use qwen_companion::sessions::frames::{
    auth_line, parse_auth_line, parse_frame, status_frame_json, user_frame_json, ControlFrame,
    DeliveryState, DropReason, Frame, LineReader, Priority, ReviewClass, UserFrame,
};
use serde_json::{json, Value};

fn js_blank(s: &str) -> bool {
    qwen_companion::sessions::names::js_trim(s).is_empty()
}

/// The reference: concatenate, split on `\n`, decode each line, skip blank ones.
fn reference_lines(chunks: &[Vec<u8>]) -> Vec<String> {
    let all: Vec<u8> = chunks.concat();
    let mut parts: Vec<&[u8]> = all.split(|b| *b == b'\n').collect();
    parts.pop();
    parts
        .into_iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|l| !js_blank(l))
        .collect()
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        (-10.0f64..10.0).prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("user"),
            Just("control"),
            Just("auth"),
            Just("delivery_status"),
            Just("held"),
            Just("dropped")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("msgV".to_string()),
                    Just("msgId".to_string()),
                    Just("type".to_string()),
                    Just("message".to_string()),
                    Just("role".to_string()),
                    Just("content".to_string()),
                    Just("token".to_string()),
                    Just("status".to_string()),
                    Just("origMsgId".to_string()),
                    Just("droppedMsgIds".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn msg_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
        .prop_filter("not all", |s| s.replace('-', "").to_lowercase() != "all")
}

// -- the model ---------------------------------------------------------------
// Qwen's frame rules, written out independently of the parser:
// * the line is a JSON object whose `msgV` is a number no greater than 1;
// * auth: `type` is "auth" and `token` a non-empty string;
// * every frame: `msgId` matches `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$` and is not
//   "all" once dashes are dropped and it is lowercased;
// * user: `message` is an object with `role` "user" and a non-empty string
//   `content`; `fromMode` counts only as "prompting"/"bypass", `priority`
//   only as "now" (else "next"); `from`, `replyToken`, `fromName`,
//   `toSessionId` count only as strings;
// * control: `action` "delivery_status", a known `status`, a non-empty
//   string `origMsgId`; for "dropped" only, a known `dropReason` and the
//   addressable string ids of `droppedMsgIds` (at most 256).

fn model_str(o: &serde_json::Map<String, Value>, k: &str) -> Option<String> {
    o.get(k).and_then(Value::as_str).map(str::to_string)
}

fn model_object(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    let o = v.as_object()?;
    match o.get("msgV") {
        Some(Value::Number(n)) if n.as_f64()? <= 1.0 => Some(o),
        _ => None,
    }
}

fn model_auth(v: &Value) -> Option<String> {
    let o = model_object(v)?;
    if o.get("type")?.as_str()? != "auth" {
        return None;
    }
    model_str(o, "token").filter(|t| !t.is_empty())
}

fn model_msg_id(s: &str) -> bool {
    let mut chars = s.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    first_ok
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !s.replace('-', "").eq_ignore_ascii_case("all")
}

const STATES: [(&str, DeliveryState); 7] = [
    ("held", DeliveryState::Held),
    ("delivered", DeliveryState::Delivered),
    ("denied", DeliveryState::Denied),
    ("refused", DeliveryState::Refused),
    ("expired", DeliveryState::Expired),
    ("misaddressed", DeliveryState::Misaddressed),
    ("dropped", DeliveryState::Dropped),
];

const REASONS: [(&str, DropReason); 3] = [
    ("rate-limited", DropReason::RateLimited),
    ("duplicate", DropReason::Duplicate),
    ("queue-full", DropReason::QueueFull),
];

fn model_frame(v: &Value) -> Option<Frame> {
    let o = model_object(v)?;
    let msg_id = o
        .get("msgId")?
        .as_str()
        .filter(|s| model_msg_id(s))?
        .to_string();
    match o.get("type")?.as_str()? {
        "user" => {
            let m = o.get("message")?.as_object()?;
            if m.get("role")?.as_str()? != "user" {
                return None;
            }
            let content = m
                .get("content")?
                .as_str()
                .filter(|c| !c.is_empty())?
                .to_string();
            Some(Frame::User(UserFrame {
                msg_id,
                from: model_str(o, "from"),
                reply_token: model_str(o, "replyToken"),
                from_name: model_str(o, "fromName"),
                from_mode: match o.get("fromMode").and_then(Value::as_str) {
                    Some("prompting") => Some(ReviewClass::Prompting),
                    Some("bypass") => Some(ReviewClass::Bypass),
                    _ => None,
                },
                to_session_id: model_str(o, "toSessionId"),
                priority: if o.get("priority").and_then(Value::as_str) == Some("now") {
                    Priority::Now
                } else {
                    Priority::Next
                },
                content,
                raw: None,
            }))
        }
        "control" => {
            if o.get("action")?.as_str()? != "delivery_status" {
                return None;
            }
            let wire = o.get("status")?.as_str()?;
            let status = STATES.iter().find(|(w, _)| *w == wire)?.1;
            let orig_msg_id = o
                .get("origMsgId")?
                .as_str()
                .filter(|s| !s.is_empty())?
                .to_string();
            let dropped = status == DeliveryState::Dropped;
            let drop_reason = o
                .get("dropReason")
                .and_then(Value::as_str)
                .and_then(|r| REASONS.iter().find(|(w, _)| *w == r))
                .map(|(_, r)| *r)
                .filter(|_| dropped);
            let dropped_msg_ids = match (dropped, o.get("droppedMsgIds")) {
                (true, Some(Value::Array(a))) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|s| model_msg_id(s))
                    .take(256)
                    .map(str::to_string)
                    .collect(),
                _ => Vec::new(),
            };
            Some(Frame::Control(ControlFrame {
                msg_id,
                status,
                orig_msg_id,
                from: model_str(o, "from"),
                reason: model_str(o, "reason"),
                drop_reason,
                dropped_msg_ids,
                raw: None,
            }))
        }
        _ => None,
    }
}

fn control_frame() -> impl Strategy<Value = Value> {
    (
        msg_id(),
        0usize..7,
        msg_id(),
        proptest::option::of("/[a-z]{1,8}\\.sock"),
        proptest::option::of(0usize..3),
        prop::collection::vec(msg_id(), 0..4),
    )
        .prop_map(|(id, st, orig, from, reason, ids)| {
            let status = STATES[st].1;
            let line = status_frame_json(
                &id,
                status,
                &orig,
                from.as_deref(),
                reason.map(|r| REASONS[r].1),
                &ids,
            );
            serde_json::from_str(&line).unwrap()
        })
}

fn auth_value() -> impl Strategy<Value = Value> {
    ".{1,40}".prop_map(|t| serde_json::from_str(auth_line(&t).trim_end()).unwrap())
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Drop a field.
    Remove(&'static str),
    /// Replace a field with arbitrary JSON.
    Replace(&'static str),
    /// Replace a field of `message` with arbitrary JSON.
    ReplaceInMessage(&'static str),
    /// Set `msgV`.
    Version(f64),
    /// Add an unknown field.
    Extra(String),
    /// Not an object at all.
    NotAnObject,
}

impl Mutation {
    fn apply(&self, base: &Value, junk: &Value) -> Value {
        let mut v = base.clone();
        let o = v.as_object_mut().unwrap();
        match self {
            Mutation::Remove(k) => {
                o.remove(*k);
            }
            Mutation::Replace(k) => {
                o.insert(k.to_string(), junk.clone());
            }
            Mutation::ReplaceInMessage(k) => {
                if let Some(Value::Object(m)) = o.get_mut("message") {
                    m.insert(k.to_string(), junk.clone());
                }
            }
            Mutation::Version(n) => {
                o.insert("msgV".into(), json!(n));
            }
            Mutation::Extra(k) => {
                o.insert(format!("x{k}"), junk.clone());
            }
            Mutation::NotAnObject => return json!([base.clone()]),
        }
        v
    }
}

const FIELDS: [&str; 16] = [
    "msgV",
    "msgId",
    "type",
    "message",
    "token",
    "from",
    "replyToken",
    "fromName",
    "fromMode",
    "toSessionId",
    "priority",
    "action",
    "status",
    "origMsgId",
    "dropReason",
    "droppedMsgIds",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0..FIELDS.len()).prop_map(|i| Mutation::Remove(FIELDS[i])),
        (0..FIELDS.len()).prop_map(|i| Mutation::Replace(FIELDS[i])),
        prop_oneof![Just("role"), Just("content")].prop_map(Mutation::ReplaceInMessage),
        prop_oneof![
            Just(0.0),
            Just(1.0),
            Just(0.5),
            Just(1.5),
            Just(2.0),
            Just(-3.0)
        ]
        .prop_map(Mutation::Version),
        "[a-z]{1,6}".prop_map(Mutation::Extra),
        Just(Mutation::NotAnObject),
    ]
}

prop_compose! {
    fn user_frame()(
        msg_id in msg_id(),
        from in proptest::option::of("/[a-z]{1,8}\\.sock"),
        reply_token in proptest::option::of("[0-9a-f]{1,64}"),
        from_name in proptest::option::of(".{0,20}"),
        from_mode in proptest::option::of(prop_oneof![Just(ReviewClass::Prompting), Just(ReviewClass::Bypass)]),
        to_session_id in proptest::option::of("[0-9a-f-]{1,36}"),
        now in any::<bool>(),
        content in ".{1,40}",
    ) -> UserFrame {
        UserFrame { msg_id, from, reply_token, from_name, from_mode, to_session_id,
                    priority: if now { Priority::Now } else { Priority::Next }, content, raw: None }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn line_reader_matches_the_reference(chunks in prop::collection::vec(
        prop::collection::vec(prop_oneof![Just(b'\n'), Just(b' '), Just(b'{'), Just(0xc3u8), Just(0xa9u8), Just(0xf0u8), any::<u8>()], 0..40),
        0..12,
    )) {
        let mut r = LineReader::new();
        let mut out = Vec::new();
        for c in &chunks {
            prop_assert!(r.push(c, &mut out).is_ok());
        }
        prop_assert_eq!(out, reference_lines(&chunks));
    }

    #[test]
    fn line_cap_matches_utf16_for_valid_text(
        text in prop::collection::vec(prop_oneof![Just("a"), Just("é"), Just("😀"), Just("\n"), Just("中")], 0..200),
        split in prop::collection::vec(1usize..30, 1..20),
        limit in 1usize..60,
    ) {
        let bytes = text.concat().into_bytes();
        let mut chunks = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < bytes.len() {
            let n = split[i % split.len()].min(bytes.len() - at);
            chunks.push(bytes[at..at + n].to_vec());
            at += n;
            i += 1;
        }
        let mut r = LineReader::with_limit(limit);
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for c in &chunks {
            seen.extend_from_slice(c);
            let tail = match seen.iter().rposition(|b| *b == b'\n') {
                Some(p) => &seen[p + 1..],
                None => &seen[..],
            };
            let want_overflow = String::from_utf8_lossy(tail).encode_utf16().count() > limit;
            let got = r.push(c, &mut out);
            prop_assert_eq!(got.is_err(), want_overflow);
            if got.is_err() {
                break;
            }
            prop_assert!(r.pending() <= 4 * limit + 4);
        }
    }

    /// Any JSON line: the parsers give exactly what the model says (a frame,
    /// or a rejection), never something else.
    #[test]
    fn parsers_match_the_model_on_json(v in json_value()) {
        let line = v.to_string();
        prop_assert_eq!(parse_frame(&line).map(Frame::without_raw), model_frame(&v));
        prop_assert_eq!(parse_auth_line(&line), model_auth(&v));
    }

    /// A valid frame from the model, serialised, then mutated: the parser
    /// agrees with the model on the mutated line, and the mutations that
    /// must reject (or must not matter) do.
    #[test]
    fn mutated_frames_match_the_model(
        base in prop_oneof![
            user_frame().prop_map(|f| serde_json::from_str::<Value>(&user_frame_json(&f)).unwrap()),
            control_frame(),
            auth_value(),
        ],
        m in mutation(),
        junk in json_value(),
    ) {
        let before = model_frame(&base);
        let auth_before = model_auth(&base);
        prop_assert!(before.is_some() || auth_before.is_some(), "the generator makes valid lines");
        prop_assert_eq!(parse_frame(&base.to_string()).map(Frame::without_raw), before.clone());
        prop_assert_eq!(parse_auth_line(&base.to_string()), auth_before.clone());
        let mutated = m.apply(&base, &junk);
        let line = mutated.to_string();
        let parsed = parse_frame(&line).map(Frame::without_raw);
        let auth = parse_auth_line(&line);
        prop_assert_eq!(&parsed, &model_frame(&mutated));
        prop_assert_eq!(&auth, &model_auth(&mutated));
        match m {
            Mutation::Extra(_) => {
                prop_assert_eq!(parsed, before);
                prop_assert_eq!(auth, auth_before);
            }
            Mutation::Version(n) if n > 1.0 => {
                prop_assert_eq!(parsed, None);
                prop_assert_eq!(auth, None);
            }
            Mutation::Remove("msgV") | Mutation::Remove("type") | Mutation::NotAnObject => {
                prop_assert_eq!(parsed, None);
                prop_assert_eq!(auth, None);
            }
            Mutation::Remove("msgId") => prop_assert_eq!(parsed, None),
            Mutation::Remove("token") => prop_assert_eq!(auth, None),
            _ => {}
        }
    }

    #[test]
    fn parsers_match_the_model_on_text(s in ".{0,80}", bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        for line in [s.as_str(), lossy.as_str()] {
            let v = serde_json::from_str::<Value>(line).ok();
            let want = v.as_ref().and_then(model_frame);
            prop_assert_eq!(parse_frame(line).map(Frame::without_raw), want);
            prop_assert_eq!(parse_auth_line(line), v.as_ref().and_then(model_auth));
        }
    }

    #[test]
    fn user_frames_round_trip(f in user_frame()) {
        let line = user_frame_json(&f);
        let parsed = parse_frame(&line);
        prop_assert_eq!(parsed.clone().map(Frame::without_raw), Some(Frame::User(f.clone())));
        // The received form is kept as it was.
        let want: Value = serde_json::from_str(&line).unwrap();
        prop_assert!(matches!(&parsed, Some(Frame::User(u)) if u.raw.as_deref() == Some(&want)));
        // Unknown fields are ignored; a higher msgV is not.
        let mut v: Value = serde_json::from_str(&line).unwrap();
        v["extra"] = json!({"nested": [1, 2]});
        let parsed = parse_frame(&v.to_string());
        prop_assert_eq!(parsed.clone().map(Frame::without_raw), Some(Frame::User(f)));
        prop_assert!(matches!(&parsed, Some(Frame::User(u)) if u.raw.as_deref() == Some(&v)));
        v["msgV"] = json!(2);
        prop_assert_eq!(parse_frame(&v.to_string()), None);
    }

    #[test]
    fn auth_lines_round_trip(token in ".{1,80}") {
        let line = qwen_companion::sessions::frames::auth_line(&token);
        prop_assert_eq!(parse_auth_line(line.trim_end()), Some(token));
    }
}
