use super::*;

fn lanes() -> Lanes<String> {
    Lanes::new(Limits {
        max_kept: 3,
        max_keys: 2,
        max_key_bytes: 10,
    })
}

#[test]
fn kept_entries_are_delivered_in_order_and_refused_past_the_bound() {
    let mut l = lanes();
    for i in 0..3 {
        l.push_kept(format!("k{i}")).unwrap();
    }
    assert_eq!(l.push_kept("k3".into()), Err("k3".to_string()));
    assert_eq!(l.stats().refused, 1);
    assert_eq!(l.pop().as_deref(), Some("k0"));
    l.push_kept("k4".into()).unwrap();
    let rest: Vec<_> = std::iter::from_fn(|| l.pop()).collect();
    assert_eq!(rest, ["k1", "k2", "k4"]);
    assert!(l.is_empty());
}

#[test]
fn latest_entries_coalesce_in_place_and_ask_for_room_past_their_bounds() {
    let mut l = lanes();
    l.push_kept("first".into()).unwrap();
    assert_eq!(l.push_latest("a".into(), 1, "a1".into()), Push::Taken);
    l.push_kept("middle".into()).unwrap();
    assert_eq!(l.push_latest("a".into(), 1, "a2".into()), Push::Taken);
    assert_eq!(l.stats().coalesced, 1);
    // A second key reaches max_keys: taken, but the producer must wait.
    assert_eq!(l.push_latest("b".into(), 1, "b1".into()), Push::Full);
    assert!(!l.has_room());
    assert_eq!(l.len(), 4);
    let all: Vec<_> = std::iter::from_fn(|| l.pop()).collect();
    // "a" kept its first place, with its newest content.
    assert_eq!(all, ["first", "a2", "middle", "b1"]);
    assert!(l.has_room());
    // Bytes count too.
    assert_eq!(l.push_latest("big".into(), 11, "x".into()), Push::Full);
    assert_eq!(l.pop().as_deref(), Some("x"));
    assert!(l.has_room());
}
