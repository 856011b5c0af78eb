use std::time::{Duration, Instant};

use super::super::tests::frame;
use super::*;

#[test]
fn dropped_receipts_coalesce() {
    let t0 = Instant::now();
    let mut c = DropCoalescer::new(t0);
    let mut out = Vec::new();
    let f = |id: &str| frame(id, "/a", "x", None);
    for i in 0..7 {
        c.note(
            &f(&format!("d{i}")),
            &OriginKind::Peer,
            DropReason::RateLimited,
            t0,
            &mut out,
        );
    }
    // The first is answered at once, the rest wait for the trail.
    assert_eq!(out.len(), 1);
    assert!(
        matches!(&out[0], Action::Receipt(r) if r.orig_msg_id == "d0" && r.dropped_msg_ids.is_empty())
    );
    assert_eq!(c.next_deadline(), Some(t0 + DROP_TRAIL));
    out.clear();
    c.due(t0 + Duration::from_secs(4), &mut out);
    assert!(out.is_empty());
    c.due(t0 + DROP_TRAIL, &mut out);
    assert_eq!(out.len(), 1);
    let Action::Receipt(r) = &out[0] else {
        panic!()
    };
    assert_eq!(r.orig_msg_id, "d1");
    assert_eq!(r.dropped_msg_ids, vec!["d2", "d3", "d4", "d5", "d6"]);
    assert_eq!(r.drop_reason, Some(DropReason::RateLimited));
    assert_eq!(r.reply_token.as_deref(), Some("rt"));
    // Another reason is another key: answered at once.
    out.clear();
    c.note(
        &f("x1"),
        &OriginKind::Peer,
        DropReason::Duplicate,
        t0,
        &mut out,
    );
    assert_eq!(out.len(), 1);
    // No `from`: nothing.
    out.clear();
    c.note(
        &frame("z", "", "x", None),
        &OriginKind::Peer,
        DropReason::Duplicate,
        t0,
        &mut out,
    );
    assert!(out.is_empty());
    // At most 256 extra ids in one receipt.
    let mut c = DropCoalescer::new(t0);
    let mut out = Vec::new();
    for i in 0..300 {
        c.note(
            &f(&format!("e{i}")),
            &OriginKind::Peer,
            DropReason::QueueFull,
            t0,
            &mut out,
        );
    }
    out.clear();
    c.flush(t0, &mut out);
    let Action::Receipt(r) = &out[0] else {
        panic!()
    };
    assert_eq!(r.dropped_msg_ids.len(), 256);
}

#[test]
fn dropped_receipt_budget_is_40_a_minute() {
    let t0 = Instant::now();
    let mut c = DropCoalescer::new(t0);
    let mut out = Vec::new();
    for i in 0..45 {
        let f = frame(&format!("m{i}"), &format!("/s{i}"), "x", None);
        c.note(&f, &OriginKind::Peer, DropReason::RateLimited, t0, &mut out);
    }
    assert_eq!(out.len(), 40);
    out.clear();
    c.due(t0 + DROP_TRAIL, &mut out);
    assert!(out.is_empty(), "budget spent: re-armed");
    c.due(t0 + Duration::from_secs(60), &mut out);
    assert_eq!(out.len(), 5, "a new window");
    // A batch waiting on the budget for two minutes is abandoned.
    let mut c = DropCoalescer::new(t0);
    let mut out = Vec::new();
    for i in 0..41 {
        let f = frame(&format!("m{i}"), &format!("/s{i}"), "x", None);
        c.note(&f, &OriginKind::Peer, DropReason::RateLimited, t0, &mut out);
    }
    out.clear();
    c.due(t0 + Duration::from_secs(121), &mut out);
    assert!(out.is_empty());
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn replay_token_over_256_is_not_retained_for_drops() {
    let t0 = Instant::now();
    let mut c = DropCoalescer::new(t0);
    let mut out = Vec::new();
    let mut f = frame("m", "/a", "x", None);
    f.reply_token = Some("t".repeat(257));
    c.note(&f, &OriginKind::Peer, DropReason::Duplicate, t0, &mut out);
    assert!(matches!(&out[0], Action::Receipt(r) if r.reply_token.is_none()));
}
