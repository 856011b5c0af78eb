//! Property tests (bounded, a few seconds) for the inbox's line reader and
//! the frame and auth-line parsers.

use proptest::prelude::*;
use qwen_companion::sessions::frames::{
    parse_auth_line, parse_frame, user_frame_json, Frame, LineReader, Priority, ReviewClass,
    UserFrame,
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

    #[test]
    fn parsers_never_panic_on_json(v in json_value()) {
        let line = v.to_string();
        let _ = parse_frame(&line);
        let _ = parse_auth_line(&line);
        if let Some(Frame::User(f)) = parse_frame(&line) {
            prop_assert!(!f.content.is_empty());
            prop_assert!(f.msg_id.len() <= 64);
        }
    }

    #[test]
    fn parsers_never_panic_on_text(s in ".{0,80}", bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        let _ = parse_frame(&s);
        let _ = parse_auth_line(&s);
        let lossy = String::from_utf8_lossy(&bytes);
        let _ = parse_frame(&lossy);
        let _ = parse_auth_line(&lossy);
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
