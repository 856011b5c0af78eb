use std::time::Duration;

use super::*;
use crate::sessions::frames::{DeliveryState, DropReason, Priority, ReviewClass, UserFrame};
use crate::sessions::names::OriginKind;

struct View {
    multi: bool,
    settings: InboundSettings,
    sessions: Vec<(u64, String)>,
    revoked: Vec<String>,
}

impl View {
    fn single(settings: InboundSettings) -> View {
        View {
            multi: false,
            settings,
            sessions: vec![(1, "sid".into())],
            revoked: vec![],
        }
    }
}

impl SessionView for View {
    fn settings(&self, slot: u64) -> Option<InboundSettings> {
        self.sessions
            .iter()
            .any(|(s, _)| *s == slot)
            .then_some(self.settings)
    }
    fn pin_valid(&self, frame: &UserFrame, slot: u64) -> bool {
        match self.sessions.iter().find(|(s, _)| *s == slot) {
            None => false,
            Some((_, id)) => frame.to_session_id.as_deref().is_none_or(|t| t == id),
        }
    }
    fn session_id(&self, slot: u64) -> Option<String> {
        self.sessions
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, id)| id.clone())
    }
    fn multi(&self) -> bool {
        self.multi
    }
    fn controller_valid(&self, id: &str) -> Option<bool> {
        Some(!self.revoked.iter().any(|r| r == id))
    }
}

pub(super) fn frame(id: &str, from: &str, body: &str, mode: Option<ReviewClass>) -> UserFrame {
    UserFrame {
        msg_id: id.into(),
        from: (!from.is_empty()).then(|| from.to_string()),
        reply_token: Some("rt".into()),
        from_name: Some("peer".into()),
        from_mode: mode,
        to_session_id: None,
        priority: Priority::Next,
        content: body.into(),
        raw: None,
    }
}

fn statuses(out: &[Action]) -> Vec<(String, DeliveryState)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Receipt(r) => Some((r.orig_msg_id.clone(), r.status)),
            _ => None,
        })
        .collect()
}

fn settings(policy: Option<Policy>, class: Option<ReviewClass>) -> InboundSettings {
    InboundSettings {
        policy,
        review_class: class,
        held_expiry: HeldExpiry::FiveMinutes,
    }
}

#[test]
fn policy_table() {
    use Decision::*;
    use HoldCause::*;
    use ReviewClass::*;
    let ctl = OriginKind::Controller {
        id: "c_1".into(),
        label: "x".into(),
    };
    // (policy, our class, frame mode, origin, expected)
    type Case = (
        Option<Policy>,
        Option<ReviewClass>,
        Option<ReviewClass>,
        OriginKind,
        Decision,
    );
    let cases: Vec<Case> = vec![
        (Some(Policy::Accept), None, None, OriginKind::Peer, Accept),
        (
            Some(Policy::Hold),
            Some(Bypass),
            Some(Bypass),
            ctl.clone(),
            Hold(ExplicitSetting),
        ),
        (
            Some(Policy::Refuse),
            None,
            None,
            OriginKind::OwnProcess,
            Refuse,
        ),
        (None, None, None, OriginKind::OwnProcess, Accept),
        (None, None, None, ctl.clone(), Accept),
        (
            None,
            None,
            Some(Bypass),
            OriginKind::Peer,
            Hold(ModeUnknown),
        ),
        (
            None,
            Some(Bypass),
            None,
            OriginKind::Peer,
            Hold(NoModeAsserted),
        ),
        (None, Some(Bypass), Some(Bypass), OriginKind::Peer, Accept),
        (
            None,
            Some(Bypass),
            Some(Prompting),
            OriginKind::Peer,
            Hold(ModeMismatch),
        ),
        (
            None,
            Some(Prompting),
            Some(Prompting),
            OriginKind::Peer,
            Accept,
        ),
        (
            None,
            Some(Prompting),
            Some(Bypass),
            OriginKind::Peer,
            Hold(ModeMismatch),
        ),
    ];
    for (p, c, m, o, want) in cases {
        let f = frame("m", "/a", "x", m);
        assert_eq!(
            resolve_policy(&f, &o, &settings(p, c)),
            want,
            "{p:?} {c:?} {m:?} {o:?}"
        );
    }
}

#[test]
fn sender_keys() {
    let f = frame("m", "/a.sock", "x", None);
    assert_eq!(sender_key(&f, &OriginKind::Peer), "peer:/a.sock");
    assert_eq!(sender_key(&f, &OriginKind::OwnProcess), "own:/a.sock");
    assert_eq!(
        sender_key(
            &f,
            &OriginKind::Controller {
                id: "c_1".into(),
                label: "l".into()
            }
        ),
        "controller:c_1"
    );
    assert_eq!(
        sender_key(&frame("m", "", "x", None), &OriginKind::Peer),
        "unknown"
    );
    let long = format!("/{}", "a".repeat(400));
    assert_eq!(
        sender_key(&frame("m", &long, "x", None), &OriginKind::Peer).len(),
        5 + 256
    );
}

#[test]
fn admission_buckets_and_duplicates() {
    let t0 = Now::real();
    let mut a = Admission::new(t0.mono);
    // Per-sender burst of 30, then 0.5/s.
    for i in 0..30 {
        assert_eq!(
            a.admit("peer:/a", &format!("b{i}"), &format!("m{i}"), false, t0),
            Ok(())
        );
    }
    assert_eq!(
        a.admit("peer:/a", "b30", "m30", false, t0),
        Err(DropReason::RateLimited)
    );
    let t2 = t0.plus(Duration::from_secs(2));
    assert_eq!(a.admit("peer:/a", "b31", "m31", false, t2), Ok(()));
    // The global bucket (32, 1/s) is shared: 2 left + 2 refilled - 1 = 3 more, then none.
    assert_eq!(a.admit("peer:/b", "x", "n1", false, t2), Ok(()));
    assert_eq!(a.admit("peer:/c", "y", "n2", false, t2), Ok(()));
    assert_eq!(a.admit("peer:/d", "z", "n3", false, t2), Ok(()));
    assert_eq!(
        a.admit("peer:/e", "w", "n4", false, t2),
        Err(DropReason::RateLimited)
    );
    // Duplicate: same body as this sender's last admitted one, within 30 s.
    let mut a = Admission::new(t0.mono);
    assert_eq!(a.admit("peer:/a", "same", "m1", false, t0), Ok(()));
    assert_eq!(
        a.admit("peer:/a", "same", "m2", false, t0),
        Err(DropReason::Duplicate)
    );
    assert_eq!(
        a.admit("peer:/b", "same", "m3", false, t0),
        Ok(()),
        "another sender may say it"
    );
    assert_eq!(a.admit("own:/a", "same", "m4", true, t0), Ok(()));
    assert_eq!(
        a.admit("own:/a", "same", "m5", true, t0),
        Ok(()),
        "exempt origins"
    );
    assert_eq!(
        a.admit(
            "peer:/a",
            "same",
            "m6",
            false,
            t0.plus(Duration::from_secs(30))
        ),
        Ok(()),
        "window over"
    );
    // A duplicate costs no token.
    let mut a = Admission::new(t0.mono);
    a.admit("peer:/a", "same", "m1", false, t0).unwrap();
    for _ in 0..100 {
        assert_eq!(
            a.admit("peer:/a", "same", "mx", false, t0),
            Err(DropReason::Duplicate)
        );
    }
    assert_eq!(a.admit("peer:/a", "other", "m2", false, t0), Ok(()));
    // Forgetting a body lets an honest retry through.
    let mut a = Admission::new(t0.mono);
    a.admit("peer:/a", "same", "m1", false, t0).unwrap();
    a.forget_body("peer:/a", "same", "m1");
    assert_eq!(a.admit("peer:/a", "same", "m2", false, t0), Ok(()));
    a.forget_message("peer:/a", "M-2");
    assert_eq!(a.admit("peer:/a", "same", "m3", false, t0), Ok(()));
    // Wall-clock jumps count as elapsed for the duplicate window.
    let mut a = Admission::new(t0.mono);
    a.admit("peer:/a", "same", "m1", false, t0).unwrap();
    let jumped = Now {
        mono: t0.mono,
        wall_ms: t0.wall_ms + 31_000.0,
    };
    assert_eq!(a.admit("peer:/a", "same", "m2", false, jumped), Ok(()));
}

#[test]
fn admission_tracks_at_most_256_senders() {
    let t0 = Now::real();
    let mut a = Admission::new(t0.mono);
    let mut t = t0;
    for i in 0..300 {
        t = t.plus(Duration::from_secs(1));
        let _ = a.admit(&format!("peer:/{i}"), "x", &format!("m{i}"), false, t);
    }
    assert_eq!(a.tracked_senders(), 256);
}

fn gate_with(view: &View) -> (Gate, Now) {
    let now = Now::real();
    let _ = view;
    (Gate::new(now), now)
}

#[test]
fn gate_accept_hold_refuse_and_replay() {
    let view = View::single(settings(None, Some(ReviewClass::Bypass)));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    g.admit(
        frame("m1", "/a", "one", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(
        statuses(&out),
        vec![("m1".into(), DeliveryState::Delivered)]
    );
    assert!(out.contains(&Action::Deliver));
    out.clear();
    g.admit(
        frame("m2", "/a", "two", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(statuses(&out), vec![("m2".into(), DeliveryState::Held)]);
    assert!(out.contains(&Action::HeldChanged));
    out.clear();
    // Replays: a settled id repeats its verdict (canonical form), a held id is held again.
    g.admit(
        frame("M-1", "/a", "new body", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    g.admit(
        frame("m2", "/a", "other body", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(
        statuses(&out),
        vec![
            ("M-1".into(), DeliveryState::Delivered),
            ("m2".into(), DeliveryState::Held)
        ]
    );
    assert_eq!(g.queue().len(), 1, "the replay is not delivered again");
    assert_eq!(g.held().len(), 1);
    out.clear();
    // Re-sending a settled id with the same body within 30 s is a duplicate first.
    g.admit(
        frame("m9", "/b", "dup", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    out.clear();
    g.admit(
        frame("m9", "/b", "dup", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert!(
        matches!(&out[..], [Action::Receipt(r)] if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::Duplicate))
    );
    // Refuse.
    let view = View::single(settings(Some(Policy::Refuse), None));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    g.admit(
        frame("r1", "/a", "x", None),
        OriginKind::OwnProcess,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(statuses(&out), vec![("r1".into(), DeliveryState::Refused)]);
    out.clear();
    g.admit(
        frame("r1", "/a", "y", None),
        OriginKind::OwnProcess,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(statuses(&out), vec![("r1".into(), DeliveryState::Refused)]);
    // No `from`: processed, but no receipt.
    let view = View::single(settings(None, Some(ReviewClass::Bypass)));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    g.admit(
        frame("n1", "", "x", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert!(statuses(&out).is_empty());
    assert_eq!(g.queue().len(), 1);
}

#[test]
fn gate_caps_hold_and_queue_at_50() {
    let view = View::single(settings(Some(Policy::Hold), None));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    // One a second, so the global bucket (32, 1/s) never runs dry.
    let at = |i: u64| t.plus(Duration::from_secs(i));
    for i in 0..50 {
        let origin = OriginKind::Controller {
            id: format!("c_{i}"),
            label: "l".into(),
        };
        g.admit(
            frame(&format!("h{i}"), &format!("/s{i}"), "x", None),
            origin,
            1,
            at(i),
            &view,
            &mut out,
        );
    }
    assert_eq!(g.held().len(), 50);
    out.clear();
    g.admit(
        frame("h50", "/z", "x", None),
        OriginKind::OwnProcess,
        1,
        at(50),
        &view,
        &mut out,
    );
    assert!(
        matches!(&out[..], [Action::Receipt(r)] if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::QueueFull))
    );
    assert_eq!(g.held().len(), 50, "a full buffer evicts nothing");

    let view = View::single(settings(Some(Policy::Accept), None));
    let (mut g, _) = gate_with(&view);
    let mut out = Vec::new();
    for i in 0..51 {
        let origin = OriginKind::Controller {
            id: format!("c_{i}"),
            label: "l".into(),
        };
        g.admit(
            frame(&format!("q{i}"), &format!("/s{i}"), "x", None),
            origin,
            1,
            at(i),
            &view,
            &mut out,
        );
    }
    assert_eq!(g.queue().len(), 50);
    assert!(
        matches!(out.last(), Some(Action::Receipt(r)) if r.status == DeliveryState::Dropped && r.drop_reason == Some(DropReason::QueueFull))
    );
    // Consuming one makes room; the dropped id was not tombstoned.
    assert!(g.consume("q0", 1));
    out.clear();
    g.admit(
        frame("q50", "/s50", "x2", None),
        OriginKind::OwnProcess,
        1,
        at(52),
        &view,
        &mut out,
    );
    assert_eq!(
        statuses(&out),
        vec![("q50".into(), DeliveryState::Delivered)]
    );
}

#[test]
fn decisions_and_reevaluation() {
    let mut view = View::single(settings(None, Some(ReviewClass::Prompting)));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    for (id, body, mode) in [
        ("a", "1", Some(ReviewClass::Bypass)),
        ("b", "2", Some(ReviewClass::Bypass)),
        ("c", "3", None),
        ("d", "4", None),
    ] {
        g.admit(
            frame(id, &format!("/{id}"), body, mode),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
    }
    assert_eq!(g.held().len(), 4);
    out.clear();
    assert_eq!(g.decide("a", true, t, &view, &mut out), DecideOutcome::Done);
    assert_eq!(
        g.decide("c", false, t, &view, &mut out),
        DecideOutcome::Done
    );
    assert_eq!(
        g.decide("c", false, t, &view, &mut out),
        DecideOutcome::Gone
    );
    assert_eq!(
        statuses(&out),
        vec![
            ("a".into(), DeliveryState::Delivered),
            ("c".into(), DeliveryState::Denied)
        ]
    );
    // A mode change releases what now matches; the rest stays held.
    view.settings.review_class = Some(ReviewClass::Bypass);
    out.clear();
    assert_eq!(g.reevaluate(t, &view, &mut out), 1);
    assert_eq!(statuses(&out), vec![("b".into(), DeliveryState::Delivered)]);
    assert_eq!(g.held().len(), 1);
    assert_eq!(g.held()[0].cause, Some(HoldCause::NoModeAsserted));
    // Switching to refuse settles the backlog as denied, not refused.
    view.settings.policy = Some(Policy::Refuse);
    out.clear();
    g.reevaluate(t, &view, &mut out);
    assert_eq!(statuses(&out), vec![("d".into(), DeliveryState::Denied)]);
    assert!(g.held().is_empty());
}

#[test]
fn release_of_a_stale_pin_is_misaddressed() {
    let mut view = View::single(settings(Some(Policy::Hold), None));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    let mut f = frame("p", "/a", "x", None);
    f.to_session_id = Some("sid".into());
    g.admit(f, OriginKind::Peer, 1, t, &view, &mut out);
    view.sessions[0].1 = "rotated".into();
    out.clear();
    assert_eq!(
        g.decide("p", true, t, &view, &mut out),
        DecideOutcome::Misaddressed
    );
    assert_eq!(
        statuses(&out),
        vec![("p".into(), DeliveryState::Misaddressed)]
    );
}

#[test]
fn held_messages_expire() {
    for (expiry, after, expired) in [
        (HeldExpiry::OneMinute, 59, false),
        (HeldExpiry::OneMinute, 60, true),
        (HeldExpiry::FiveMinutes, 299, false),
        (HeldExpiry::FiveMinutes, 300, true),
        (HeldExpiry::TenMinutes, 599, false),
        (HeldExpiry::TenMinutes, 600, true),
        (HeldExpiry::Never, 100_000, false),
    ] {
        let mut view = View::single(settings(Some(Policy::Hold), None));
        view.settings.held_expiry = expiry;
        let (mut g, t) = gate_with(&view);
        let mut out = Vec::new();
        g.admit(
            frame("e", "/a", "x", None),
            OriginKind::Peer,
            1,
            t,
            &view,
            &mut out,
        );
        let deadline = g.next_deadline(t, &view);
        assert_eq!(deadline.is_some(), expiry != HeldExpiry::Never);
        out.clear();
        g.tick(t.plus(Duration::from_secs(after)), &view, &mut out);
        assert_eq!(
            statuses(&out) == vec![("e".to_string(), DeliveryState::Expired)],
            expired,
            "{expiry:?} after {after}s"
        );
        // A replay of an expired id repeats `expired`.
        if expired {
            out.clear();
            g.admit(
                frame("e", "/a", "y", None),
                OriginKind::Peer,
                1,
                t.plus(Duration::from_secs(after)),
                &view,
                &mut out,
            );
            assert_eq!(statuses(&out), vec![("e".into(), DeliveryState::Expired)]);
        }
    }
}

#[test]
fn leaving_session_expires_held_and_unconsumed() {
    let view = View {
        multi: true,
        settings: settings(None, Some(ReviewClass::Bypass)),
        sessions: vec![(1, "s1".into()), (2, "s2".into())],
        revoked: vec![],
    };
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    g.admit(
        frame("d1", "/a", "1", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    g.admit(
        frame("h1", "/a", "2", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    g.admit(
        frame("d2", "/a", "3", Some(ReviewClass::Bypass)),
        OriginKind::Peer,
        2,
        t,
        &view,
        &mut out,
    );
    out.clear();
    g.settle_slot(1, &mut out);
    let mut got = statuses(&out);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("d1".into(), DeliveryState::Expired),
            ("h1".into(), DeliveryState::Expired)
        ]
    );
    assert_eq!(g.queue().len(), 1);
    assert_eq!(g.queue()[0].frame.msg_id, "d2");
}

#[test]
fn revoked_controller_loses_authority_while_held() {
    let mut view = View::single(settings(None, Some(ReviewClass::Bypass)));
    view.settings.policy = Some(Policy::Hold);
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    let origin = OriginKind::Controller {
        id: "c_1".into(),
        label: "l".into(),
    };
    g.admit(frame("c", "/a", "x", None), origin, 1, t, &view, &mut out);
    view.settings.policy = None;
    view.revoked.push("c_1".into());
    out.clear();
    g.reevaluate(t, &view, &mut out);
    assert_eq!(g.held().len(), 1, "no longer accepted as a controller");
    assert_eq!(g.held()[0].origin, OriginKind::Peer);
    assert_eq!(g.held()[0].cause, Some(HoldCause::NoModeAsserted));
}

#[test]
fn admission_resets_when_the_session_id_changes() {
    let mut view = View::single(settings(Some(Policy::Accept), None));
    let (mut g, t) = gate_with(&view);
    let mut out = Vec::new();
    g.admit(
        frame("a1", "/a", "same", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    g.consume("a1", 1);
    out.clear();
    g.admit(
        frame("a2", "/a", "same", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert!(
        matches!(&out[..], [Action::Receipt(r)] if r.drop_reason == Some(DropReason::Duplicate))
    );
    view.sessions[0].1 = "new".into();
    out.clear();
    g.admit(
        frame("a3", "/a", "same", None),
        OriginKind::Peer,
        1,
        t,
        &view,
        &mut out,
    );
    assert_eq!(
        statuses(&out),
        vec![("a3".into(), DeliveryState::Delivered)]
    );
}
