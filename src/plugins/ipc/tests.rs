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
