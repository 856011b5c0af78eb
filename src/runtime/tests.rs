use super::*;

#[test]
fn blocking_is_refused_on_a_runtime_thread_and_allowed_elsewhere() {
    let rt = acquire().unwrap();
    assert!(may_block());
    assert_eq!(block_on(rt.handle(), "x", async { 7 }).unwrap(), 7);
    let inner = rt.handle().clone();
    let refused = rt.handle().block_on(async move {
        assert!(!may_block());
        block_on(&inner, "the call", async { 7 }).unwrap_err()
    });
    assert_eq!(refused.status, Status::Refused);
    assert!(refused.message.starts_with("the call blocks"));
}
