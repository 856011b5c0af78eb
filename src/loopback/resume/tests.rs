use super::next_event_id;

#[test]
fn next_ids() {
    assert_eq!(next_event_id("0"), "1");
    assert_eq!(next_event_id("41/7"), "42/7");
    assert_eq!(next_event_id("x"), "x");
    assert_eq!(
        next_event_id(&usize::MAX.to_string()),
        usize::MAX.to_string()
    );
}
