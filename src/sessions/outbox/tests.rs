use super::*;
use std::time::Duration;

fn receipt(orig: &str, status: DeliveryState) -> ControlFrame {
    ControlFrame {
        msg_id: "r".into(),
        status,
        orig_msg_id: orig.into(),
        from: None,
        reason: Some("line\nbreak".into()),
        drop_reason: None,
        dropped_msg_ids: vec![],
        raw: None,
    }
}

#[test]
fn receipts_follow_the_state_machine() {
    use DeliveryState::*;
    let now = Now::real();
    let mut o = Outbox::default();
    o.track("Msg-1", "peer", "/p.sock", now);
    assert!(
        o.apply(&receipt("nobody", Held), now).is_empty(),
        "ids we never sent are ignored"
    );
    let e = o.apply(&receipt("msg1", Held), now);
    assert_eq!(e.len(), 1, "canonical ids match");
    assert_eq!((e[0].previous, e[0].status), (Pending, Held));
    assert_eq!(e[0].msg_id, "Msg-1");
    assert_eq!(e[0].reason.as_deref(), Some("line break"));
    assert!(o.apply(&receipt("Msg-1", Held), now).is_empty(), "repeat");
    assert!(
        o.apply(&receipt("Msg-1", Refused), now).is_empty(),
        "refused never follows held"
    );
    assert!(o.apply(&receipt("Msg-1", Dropped), now).is_empty());
    assert_eq!(o.apply(&receipt("Msg-1", Delivered), now).len(), 1);
    assert_eq!(o.apply(&receipt("Msg-1", Expired), now).len(), 1);
    assert!(o.apply(&receipt("Msg-1", Misaddressed), now).is_empty());
    assert_eq!(o.state("msg-1").unwrap().state, Expired);
}

#[test]
fn dropped_receipts_settle_every_listed_id() {
    let now = Now::real();
    let mut o = Outbox::default();
    for id in ["a", "b", "c"] {
        o.reserve("/p", id, id, now).unwrap();
        o.track(id, "peer", "/p", now);
    }
    o.track("held", "peer", "/p", now);
    o.apply(&receipt("held", DeliveryState::Held), now);
    let mut f = receipt("a", DeliveryState::Dropped);
    f.drop_reason = Some(DropReason::RateLimited);
    f.dropped_msg_ids = vec!["b".into(), "held".into(), "zz".into()];
    let e = o.apply(&f, now);
    assert_eq!(
        e.iter().map(|e| e.msg_id.as_str()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert!(e
        .iter()
        .all(|e| e.drop_reason == Some(DropReason::RateLimited)));
    assert_eq!(o.state("held").unwrap().state, DeliveryState::Held);
    // A fresh rate-limited drop drains the mirror for that address.
    assert!(matches!(
        o.reserve("/p", "new", "n1", now),
        Err(PaceRefusal::RateLimited { .. })
    ));
}

#[test]
fn pacer_mirrors_receiver_limits() {
    let t0 = Now::real();
    let mut o = Outbox::default();
    for i in 0..30 {
        o.reserve("/p", &format!("b{i}"), &format!("m{i}"), t0)
            .unwrap();
    }
    assert_eq!(
        o.reserve("/p", "b30", "m30", t0),
        Err(PaceRefusal::RateLimited { sent_in_burst: 30 })
    );
    assert!(o.reserve("/q", "b30", "m30", t0).is_ok(), "per address");
    assert!(o
        .reserve("/p", "b31", "m31", t0.plus(Duration::from_secs(2)))
        .is_ok());
    // Repeat of the last body within 30 s.
    let mut o = Outbox::default();
    o.reserve("/p", "same", "a", t0).unwrap();
    assert_eq!(o.reserve("/p", "same", "b", t0), Err(PaceRefusal::Repeat));
    assert!(o
        .reserve("/p", "same", "c", t0.plus(Duration::from_secs(30)))
        .is_ok());
    // An unwritten send is refunded and forgotten.
    let mut o = Outbox::default();
    o.reserve("/p", "same", "a", t0).unwrap();
    o.track("a", "x", "/p", t0);
    o.refund_unsent("/p", "a");
    assert!(o.state("a").is_none());
    assert!(o.reserve("/p", "same", "b", t0).is_ok());
    // A duplicate drop refunds the token but keeps the body; misaddressed refunds both.
    let mut o = Outbox::default();
    for i in 0..30 {
        o.reserve("/p", &format!("b{i}"), &format!("m{i}"), t0)
            .unwrap();
        o.track(&format!("m{i}"), "x", "/p", t0);
    }
    let mut f = receipt("m29", DeliveryState::Dropped);
    f.drop_reason = Some(DropReason::Duplicate);
    o.apply(&f, t0);
    assert_eq!(
        o.reserve("/p", "b29", "again", t0),
        Err(PaceRefusal::Repeat)
    );
    assert!(o.reserve("/p", "fresh", "n", t0).is_ok(), "token refunded");
    o.apply(&receipt("m0", DeliveryState::Misaddressed), t0);
    assert!(
        o.reserve("/p", "fresh2", "n2", t0).is_ok(),
        "misaddressed refunds too"
    );
    assert!(o.reserve("/p", "fresh3", "n3", t0).is_err());
}

#[test]
fn at_most_200_sends_are_tracked() {
    let now = Now::real();
    let mut o = Outbox::default();
    for i in 0..250 {
        o.track(&format!("m{i}"), "x", "/p", now);
    }
    assert!(o.state("m0").is_none());
    assert!(o.state("m49").is_none());
    assert!(o.state("m50").is_some());
    assert!(o.state("m249").is_some());
}

#[test]
fn describe_refusals() {
    assert!(PaceRefusal::Repeat.describe().contains("30 seconds"));
    assert!(PaceRefusal::RateLimited { sent_in_burst: 30 }
        .describe()
        .contains("30 were sent in the last 60 seconds"));
}
