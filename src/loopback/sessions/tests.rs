use super::*;

#[test]
fn bound_evicts_stream_less_first_and_grace_reaps() {
    let s: Sessions<u32> = Sessions::new(Lifecycle {
        grace: Duration::from_millis(30),
        max_sessions: 2,
    });
    {
        let mut m = s.lock();
        s.entry(&mut m, "a");
        s.stream_opened(&mut m, "a");
        s.entry(&mut m, "b");
        s.entry(&mut m, "c"); // over the bound: b (no stream) is doomed, not a
        assert!(m["b"].life.doomed && !m["a"].life.doomed);
    }
    let due: Vec<String> = s.take_due(|_| false).into_iter().map(|(k, _)| k).collect();
    assert_eq!(due, vec!["b".to_string()]);
    // Time passing beyond the 30 ms grace is the behaviour under test
    // (the grace is measured on the wall clock).
    std::thread::sleep(Duration::from_millis(40));
    let due: Vec<String> = s.take_due(|_| false).into_iter().map(|(k, _)| k).collect();
    assert_eq!(due, vec!["c".to_string()], "a has a stream and stays");
    {
        let mut m = s.lock();
        let g = m["a"].life.stream_generation;
        assert!(
            s.stream_closed(&mut m, "a", g + 1).is_none(),
            "old generation"
        );
        assert!(s.stream_closed(&mut m, "a", g).is_some());
    }
    s.request_seen("a");
    assert!(s.take_due(|_| false).is_empty(), "within the grace");
    // The grace running out is the behaviour under test.
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(s.take_due(|_| false).len(), 1);
    assert!(s.is_empty());
}
