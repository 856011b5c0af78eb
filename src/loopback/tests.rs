use super::*;

#[test]
fn limits_config_validates() {
    let l = LimitsConfig::default().limits().unwrap();
    assert_eq!(l.max_connections, 128);
    assert_eq!(l.header_timeout, Duration::from_secs(5));
    let bad = LimitsConfig {
        header_timeout_ms: Some(5),
        ..Default::default()
    };
    assert!(bad
        .limits()
        .unwrap_err()
        .message
        .contains("headerTimeoutMs"));
    let bad = LimitsConfig {
        max_connections: Some(0),
        ..Default::default()
    };
    assert!(bad.limits().is_err());
}

#[test]
fn admit_evicts_the_oldest_unproven_then_refuses() {
    let t = Table::default();
    let (a, pa, ka) = t.admit(2).unwrap();
    let (_b, pb, kb) = t.admit(2).unwrap();
    // Full: the oldest unproven (a) makes room.
    let (_c, pc, _kc) = t.admit(2).unwrap();
    assert!(ka.is_cancelled() && !kb.is_cancelled());
    assert!(!t.lock().contains_key(&a));
    pa.store(true, Ordering::Relaxed);
    pb.store(true, Ordering::Relaxed);
    pc.store(true, Ordering::Relaxed);
    // Every slot proven: refused.
    assert!(t.admit(2).is_none());
    let s = t.stats();
    assert_eq!((s.open, s.accepted, s.evicted), (2, 3, 1));
    assert_eq!(t.refusal_to_log(), Some(1));
    assert_eq!(t.refusal_to_log(), None);
    assert_eq!(t.stats().refused, 2);
}

#[test]
fn priming_events_lose_only_their_empty_data_line() {
    use super::mcp::without_empty_data;
    let t = |s: &'static str| {
        String::from_utf8(without_empty_data(Bytes::from_static(s.as_bytes())).to_vec()).unwrap()
    };
    // rmcp's priming event: the id and retry stay, the empty data goes.
    assert_eq!(
        t("data: \nid: 0\nretry: 3000\n\n"),
        "id: 0\nretry: 3000\n\n"
    );
    assert_eq!(t("data:\nid: 7\n\n"), "id: 7\n\n");
    // Messages, keep-alive comments and partial chunks are untouched.
    for same in [
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"ide/contextUpdate\"}\nid: 1\n\n",
        ":\n\n",
        ": keep-alive\n\n",
        "data: \nid: 0\nretry: 3000\n",
        "data: \n\n",
        "data: \ndata: x\nid: 2\n\n",
    ] {
        assert_eq!(t(same), same);
    }
    // Two events in one chunk: only the priming one changes.
    assert_eq!(
        t("data: \nid: 0\nretry: 3000\n\ndata: {}\nid: 1\n\n"),
        "id: 0\nretry: 3000\n\ndata: {}\nid: 1\n\n"
    );
}
