use super::*;
use serde_json::json;

fn user(extra: Value) -> String {
    let mut base = json!({
        "msgV": 1, "msgId": "m1", "type": "user",
        "message": {"role": "user", "content": "hi"}
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base.to_string()
}

#[test]
fn auth_lines() {
    let cases: &[(&str, Option<&str>)] = &[
        (r#"{"msgV":1,"type":"auth","token":"t"}"#, Some("t")),
        (r#"{"msgV":0,"type":"auth","token":"t","x":1}"#, Some("t")),
        (r#"{"msgV":0.5,"type":"auth","token":"t"}"#, Some("t")),
        (r#"{"msgV":2,"type":"auth","token":"t"}"#, None),
        (r#"{"msgV":"1","type":"auth","token":"t"}"#, None),
        (r#"{"msgV":true,"type":"auth","token":"t"}"#, None),
        (r#"{"type":"auth","token":"t"}"#, None),
        (r#"{"msgV":1,"type":"auth","token":""}"#, None),
        (r#"{"msgV":1,"type":"auth","token":5}"#, None),
        (r#"{"msgV":1,"type":"user","token":"t"}"#, None),
        (r#"[1]"#, None),
        (r#"not json"#, None),
        (
            " {\"msgV\":1,\"type\":\"auth\",\"token\":\"t\"}\r",
            Some("t"),
        ),
    ];
    for (line, want) in cases {
        assert_eq!(parse_auth_line(line).as_deref(), *want, "{line}");
    }
}

#[test]
fn user_frames_table() {
    // (extra fields, accepted?)
    let cases: Vec<(Value, bool)> = vec![
        (json!({}), true),
        (json!({"msgV": 0}), true),
        (json!({"msgV": -1}), true),
        (json!({"msgV": 2}), false),
        (json!({"msgV": "1"}), false),
        (json!({"msgV": null}), false),
        (json!({"msgId": "a".repeat(64)}), true),
        (json!({"msgId": "a".repeat(65)}), false),
        (json!({"msgId": "-a"}), false),
        (json!({"msgId": "ALL"}), false),
        (json!({"msgId": "a-l-l"}), false),
        (json!({"msgId": 5}), false),
        (json!({"type": "other"}), false),
        (json!({"type": "auth"}), false),
        (
            json!({"message": {"role": "assistant", "content": "x"}}),
            false,
        ),
        (json!({"message": {"role": "user", "content": ""}}), false),
        (json!({"message": {"role": "user", "content": "   "}}), true),
        (json!({"message": {"role": "user", "content": 5}}), false),
        (json!({"message": "x"}), false),
        (json!({"unknown": {"deep": 1}}), true),
    ];
    for (extra, ok) in cases {
        let line = user(extra.clone());
        assert_eq!(parse_frame(&line).is_some(), ok, "{extra}");
    }
}

#[test]
fn user_frame_fields() {
    let line = user(json!({
        "from": "/s.sock", "replyToken": "rt", "fromName": "n",
        "fromMode": "BYPASS", "toSessionId": "sid", "priority": "urgent"
    }));
    let Some(Frame::User(f)) = parse_frame(&line) else {
        panic!()
    };
    assert_eq!(f.from.as_deref(), Some("/s.sock"));
    assert_eq!(f.reply_token.as_deref(), Some("rt"));
    assert_eq!(f.from_mode, None, "fromMode is case-sensitive");
    assert_eq!(f.priority, Priority::Next);
    assert_eq!(f.to_session_id.as_deref(), Some("sid"));
    let line = user(json!({"fromMode": "bypass", "priority": "now", "from": 7}));
    let Some(Frame::User(f)) = parse_frame(&line) else {
        panic!()
    };
    assert_eq!(f.from_mode, Some(ReviewClass::Bypass));
    assert_eq!(f.priority, Priority::Now);
    assert_eq!(f.from, None);
    // Round trip through our own writer.
    let again = parse_frame(&user_frame_json(&f)).unwrap();
    assert_eq!(again.without_raw(), Frame::User(f.without_raw()));
}

#[test]
fn frames_keep_their_received_form() {
    // Unknown fields (nested too), odd-but-valid values, replyToken: all kept.
    let line = r#"{"zeta":[1,{"deep":null}],"msgV":0.5,"msgId":"Raw-1","type":"user","from":"/s.sock","replyToken":"rt","fromMode":"BYPASS","priority":"urgent","from":7,"message":{"role":"user","content":"a<b","extra":true}}"#;
    let Some(Frame::User(f)) = parse_frame(line) else {
        panic!()
    };
    let want: Value = serde_json::from_str(line).unwrap();
    assert_eq!(f.raw.as_deref(), Some(&want));
    assert_eq!(f.wire_value(), want);
    assert_eq!(want["replyToken"], "rt");
    assert_eq!(
        want["from"], 7,
        "a repeated key keeps its last value, as JSON.parse does"
    );
    assert_eq!(f.from, None);
    assert_eq!(f.from_mode, None);
    // A frame built here has no received form; its wire value is what we write.
    let built = f.clone().without_raw();
    assert_eq!(built.raw, None);
    let written: Value = serde_json::from_str(&user_frame_json(&built)).unwrap();
    assert_eq!(built.wire_value(), written);

    let line = r#"{"msgV":1,"msgId":"r1","type":"control","action":"delivery_status","status":"dropped","origMsgId":"m1","from":"/x.sock","reason":"r\nx","dropReason":"queue-full","droppedMsgIds":["a",5],"extra":{"k":"v"}}"#;
    let Some(Frame::Control(c)) = parse_frame(line) else {
        panic!()
    };
    let want: Value = serde_json::from_str(line).unwrap();
    assert_eq!(c.wire_value(), want);
    assert_eq!(c.dropped_msg_ids, vec!["a"]);
    let rebuilt = c.clone().without_raw().wire_value();
    assert_eq!(rebuilt["droppedMsgIds"], json!(["a"]));
    assert_eq!(rebuilt["dropReason"], "queue-full");
    assert_eq!(rebuilt["reason"], "r\nx");
    assert!(rebuilt.get("extra").is_none());
}

#[test]
fn control_frames() {
    let base = |extra: Value| {
        let mut v = json!({"msgV":1,"msgId":"r1","type":"control","action":"delivery_status","status":"held","origMsgId":"m1"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string()
    };
    assert!(
        matches!(parse_frame(&base(json!({}))), Some(Frame::Control(c)) if c.status == DeliveryState::Held)
    );
    assert!(
        parse_frame(&base(json!({"status": "read"}))).is_none(),
        "unknown status"
    );
    assert!(parse_frame(&base(json!({"status": "pending"}))).is_none());
    assert!(parse_frame(&base(json!({"action": "other"}))).is_none());
    assert!(parse_frame(&base(json!({"origMsgId": ""}))).is_none());
    assert!(
        parse_frame(&base(json!({"origMsgId": "any thing é"}))).is_some(),
        "origMsgId is not checked"
    );
    assert!(
        parse_frame(&base(json!({"msgId": "-bad"}))).is_none(),
        "receipt ids are checked"
    );
    let Some(Frame::Control(c)) = parse_frame(&base(json!({
        "status": "dropped", "dropReason": "duplicate",
        "droppedMsgIds": ["a", "-bad", 5, "b"]
    }))) else {
        panic!()
    };
    assert_eq!(c.drop_reason, Some(DropReason::Duplicate));
    assert_eq!(c.dropped_msg_ids, vec!["a", "b"]);
    let Some(Frame::Control(c)) = parse_frame(&base(json!({
        "status": "held", "dropReason": "duplicate", "droppedMsgIds": ["a"]
    }))) else {
        panic!()
    };
    assert_eq!(c.drop_reason, None);
    assert!(c.dropped_msg_ids.is_empty());
    let many: Vec<String> = (0..300).map(|i| format!("id{i}")).collect();
    let Some(Frame::Control(c)) =
        parse_frame(&base(json!({"status":"dropped","droppedMsgIds": many})))
    else {
        panic!()
    };
    assert_eq!(c.dropped_msg_ids.len(), 256);
}

#[test]
fn status_frames_round_trip() {
    let ids = vec!["x1".to_string(), "x2".to_string()];
    let line = status_frame_json(
        "r1",
        DeliveryState::Dropped,
        "m1",
        Some("/me.sock"),
        Some(DropReason::RateLimited),
        &ids,
    );
    let Some(Frame::Control(c)) = parse_frame(&line) else {
        panic!()
    };
    assert_eq!(c.dropped_msg_ids, ids);
    assert_eq!(c.drop_reason, Some(DropReason::RateLimited));
    let line = status_frame_json(
        "r2",
        DeliveryState::Held,
        "m1",
        None,
        Some(DropReason::Duplicate),
        &ids,
    );
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        v.get("dropReason").is_none()
            && v.get("droppedMsgIds").is_none()
            && v.get("from").is_none()
    );
    let line = status_frame_json("r3", DeliveryState::Dropped, "m1", None, None, &[]);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        v.get("droppedMsgIds").is_none(),
        "an empty list is left off"
    );
}

#[test]
fn transitions() {
    use DeliveryState::*;
    let all = [
        Pending,
        Held,
        Delivered,
        Denied,
        Refused,
        Expired,
        Misaddressed,
        Dropped,
    ];
    let allowed: &[(DeliveryState, &[DeliveryState])] = &[
        (
            Pending,
            &[
                Held,
                Delivered,
                Denied,
                Refused,
                Expired,
                Misaddressed,
                Dropped,
            ],
        ),
        (Held, &[Delivered, Denied, Expired, Misaddressed]),
        (Delivered, &[Expired, Misaddressed]),
        (Denied, &[]),
        (Refused, &[]),
        (Expired, &[]),
        (Misaddressed, &[]),
        (Dropped, &[]),
    ];
    for (from, to) in allowed {
        for next in all {
            assert_eq!(
                from.can_become(next),
                to.contains(&next),
                "{from:?} -> {next:?}"
            );
        }
    }
}

fn lines_of(chunks: &[&[u8]]) -> (Vec<String>, Result<(), Overflow>) {
    let mut r = LineReader::new();
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = r.push(c, &mut out) {
            return (out, Err(e));
        }
    }
    (out, Ok(()))
}

#[test]
fn line_reader_table() {
    let (l, _) = lines_of(&[b"a\nb\n"]);
    assert_eq!(l, vec!["a", "b"]);
    let (l, _) = lines_of(&[b"\n  \n\t\r\nx\r\n"]);
    assert_eq!(
        l,
        vec!["x\r"],
        "blank lines skipped; \\r kept (JSON ignores it)"
    );
    let (l, _) = lines_of(&[b"ab", b"c\nd", b"e\n"]);
    assert_eq!(l, vec!["abc", "de"]);
    // A multi-byte character split across chunks.
    let s = "é😀\n".as_bytes();
    let (l, _) = lines_of(&[&s[..1], &s[1..3], &s[3..]]);
    assert_eq!(l, vec!["é😀"]);
    let (l, _) = lines_of(&[b"\xff\xfe\n"]);
    assert_eq!(l, vec!["\u{fffd}\u{fffd}"]);
    let (l, _) = lines_of(&[b"no newline"]);
    assert!(l.is_empty());
}

#[test]
fn line_cap_counts_utf16_units() {
    // 600k × é: 1.2 MB of UTF-8 but 600k units: accepted.
    let e = "é".repeat(600_000);
    let (l, r) = lines_of(&[e.as_bytes(), b"\n"]);
    assert!(r.is_ok());
    assert_eq!(l.len(), 1);
    // 300k × 😀: 1.2 MB, 600k units: accepted.
    let f = "😀".repeat(300_000);
    let (_, r) = lines_of(&[f.as_bytes()]);
    assert!(r.is_ok());
    // 540k × 😀: 1.08M units: overflow.
    let g = "😀".repeat(540_000);
    let chunks: Vec<&[u8]> = g.as_bytes().chunks(65536).collect();
    let (_, r) = lines_of(&chunks);
    assert_eq!(r, Err(Overflow));
    // Exactly the limit is fine; one more unit is not.
    let exact = "a".repeat(MAX_FRAME_UNITS);
    assert!(lines_of(&[exact.as_bytes()]).1.is_ok());
    let over = "a".repeat(MAX_FRAME_UNITS + 1);
    assert_eq!(lines_of(&[over.as_bytes()]).1, Err(Overflow));
    // Stray continuation bytes count as one unit each.
    let junk = vec![0x80u8; MAX_FRAME_UNITS + 1];
    assert_eq!(lines_of(&[&junk]).1, Err(Overflow));
    // Only the unterminated remainder counts: complete lines are taken out first.
    let mut two = "a".repeat(MAX_FRAME_UNITS);
    two.push('\n');
    two.push_str(&"b".repeat(10));
    let (l, r) = lines_of(&[two.as_bytes()]);
    assert!(r.is_ok());
    assert_eq!(l.len(), 1);
}
