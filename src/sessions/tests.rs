use super::*;

#[test]
fn config_parsing() {
    let c = Config::from_json(None).unwrap();
    assert_eq!(c.review_class, Some(ReviewClass::Prompting));
    let c = Config::from_json(Some(
        r#"{"reviewClass":null,"inboundPolicy":"hold","heldExpiry":"never","multiSession":true}"#,
    ))
    .unwrap();
    assert_eq!(c.review_class, None);
    assert_eq!(c.inbound_policy, Some(Policy::Hold));
    assert_eq!(c.held_expiry, Some(HeldExpiry::Never));
    assert!(c.multi_session);
    let e = Config::from_json(Some(r#"{"bogus":1}"#)).unwrap_err();
    assert_eq!(e.status, crate::error::Status::InvalidJson);
    assert!(Config::from_json(Some(r#"{"heldExpiry":"2m"}"#)).is_err());
    let o = RegisterOptions::from_json(Some(r#"{"name":"n","cwd":"/w","sessionId":"s"}"#)).unwrap();
    assert_eq!(o.name.as_deref(), Some("n"));
    assert!(RegisterOptions::from_json(Some(r#"{"nope":1}"#)).is_err());
    let s: SendOptions =
        serde_json::from_str(r#"{"to":"x","content":"y","fromMode":"bypass","priority":"now"}"#)
            .unwrap();
    assert_eq!(s.from_mode, Some(ReviewClass::Bypass));
    assert_eq!(s.priority, Some(Priority::Now));
}
