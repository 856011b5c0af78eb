//! A participant's inbound pipeline: the inbox handler (authentication and
//! frames), routing a user frame to a session through the gate, running the
//! gate's actions (receipts, deliveries to the host), the host's decisions
//! on held messages, and the housekeeping timer.

use super::*;

pub(super) fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

pub(super) fn origin_fields(o: &OriginKind) -> (Origin, Option<String>) {
    match o {
        OriginKind::Peer => (Origin::Peer, None),
        OriginKind::OwnProcess => (Origin::OwnProcess, None),
        OriginKind::Controller { label, .. } => (Origin::Controller, Some(label.clone())),
    }
}

pub(super) fn opt_flat(s: &Option<String>) -> Option<String> {
    s.as_deref().map(flatten_label).filter(|s| !s.is_empty())
}

pub(super) fn message_info(e: &Entry, session_id: &str) -> MessageInfo {
    let (origin, controller_label) = origin_fields(&e.origin);
    let f = &e.frame;
    MessageInfo {
        msg_id: f.msg_id.clone(),
        session_id: session_id.to_string(),
        content: f.content.clone(),
        text: defang(&f.content),
        from: opt_flat(&f.from),
        from_name: opt_flat(&f.from_name),
        from_mode: f.from_mode,
        origin,
        controller_label,
        frame: f.wire_value(),
    }
}

pub(super) fn inbound_message(e: &Entry, session_id: &str) -> InboundMessage {
    let f = &e.frame;
    let from_shown = f.from.clone().unwrap_or_else(|| {
        match e.origin {
            OriginKind::Controller { .. } => "controller",
            OriginKind::OwnProcess => "own process",
            OriginKind::Peer => "unknown session",
        }
        .to_string()
    });
    InboundMessage {
        message: message_info(e, session_id),
        envelope: format_envelope(&from_shown, f.from_name.as_deref(), &f.content, &e.origin),
        display: format_display(&from_shown, f.from_name.as_deref(), &f.content, &e.origin),
        priority: f.priority,
    }
}

pub(super) fn held_info(e: &Entry, session_id: &str, expiry: HeldExpiry) -> HeldInfo {
    HeldInfo {
        message: message_info(e, session_id),
        cause: e
            .cause
            .unwrap_or(super::super::gate::HoldCause::ModeUnknown),
        held_at: e.at.wall_ms as u64,
        expires_at: expiry.millis().map(|ms| (e.at.wall_ms + ms) as u64),
    }
}

impl Inner {
    pub(super) fn view<'a>(&self, st: &'a State, valid: Option<&'a HashSet<String>>) -> View<'a> {
        View {
            multi: self.settings.multi,
            regs: &st.regs,
            valid_controllers: valid,
        }
    }

    // -- the host's side of held and queued messages -------------------------

    pub(super) fn held(self: &Arc<Self>) -> Vec<HeldInfo> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (list, handle, from) = {
            let mut st = lock(&self.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            gate.expire_overdue(Now::real(), &view, &mut out);
            gate.forget_invalid_controllers(&view, &mut out);
            let list = self.held_snapshot(&st);
            (list, st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        list
    }

    pub(super) fn held_snapshot(&self, st: &State) -> Vec<HeldInfo> {
        st.gate
            .held()
            .iter()
            .map(|e| {
                let reg = st.reg(e.slot);
                let sid = reg.map(|r| r.session_id.clone()).unwrap_or_default();
                let expiry = reg.map(|r| r.inbound.held_expiry).unwrap_or_default();
                held_info(e, &sid, expiry)
            })
            .collect()
    }

    pub(super) fn decide(self: &Arc<Self>, msg_id: &str, approve: bool) -> Result<()> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (outcome, handle, from) = {
            let mut st = lock(&self.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            let outcome = gate.decide(msg_id, approve, Now::real(), &view, &mut out);
            (outcome, st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
        match outcome {
            DecideOutcome::Done => Ok(()),
            DecideOutcome::Gone => Err(Error::new(
                Status::NotFound,
                format!("no held message {msg_id:?} (it may have expired or been decided)"),
            )),
            DecideOutcome::Misaddressed => Err(Error::new(
                Status::NotFound,
                "the session this message was addressed to changed or left; it was settled as misaddressed",
            )),
            DecideOutcome::QueueFull => Err(Error::new(
                Status::Refused,
                "the input queue is full; the message stays held, retry later",
            )),
        }
    }

    /// Hands queued messages to the message callback, in order (runs on the
    /// callback thread).
    pub(super) fn pump(self: &Arc<Self>) {
        loop {
            let Some(cb) = self.message_cb.get() else {
                return;
            };
            let mut out = Vec::new();
            let next = {
                let mut st = lock(&self.state);
                let st = &mut *st;
                let Some(i) = st.gate.queue().iter().position(|e| !e.dispatched) else {
                    return;
                };
                let entry = st.gate.queue()[i].clone();
                let view = View {
                    multi: self.settings.multi,
                    regs: &st.regs,
                    valid_controllers: None,
                };
                if !view.pin_valid(&entry.frame, entry.slot) {
                    st.gate.queue_mut().remove(i);
                    st.gate.forget_admitted_message(&entry.frame, &entry.origin);
                    if let Some(to) = &entry.frame.from {
                        out.push(Action::Receipt(Receipt {
                            to: to.clone(),
                            reply_token: entry.frame.reply_token.clone(),
                            status: super::super::frames::DeliveryState::Misaddressed,
                            orig_msg_id: entry.frame.msg_id.clone(),
                            drop_reason: None,
                            dropped_msg_ids: Vec::new(),
                        }));
                    }
                    Err((out, st.handle(), st.inbox_path()))
                } else {
                    st.gate.queue_mut()[i].dispatched = true;
                    let sid = st
                        .reg(entry.slot)
                        .map(|r| r.session_id.clone())
                        .unwrap_or_default();
                    Ok((entry, sid))
                }
            };
            match next {
                Err((out, handle, from)) => self.run_actions(out, handle.as_ref(), from),
                Ok((mut entry, sid)) => {
                    if let OriginKind::Controller { id, .. } = &entry.origin {
                        if !self.controllers.valid_ids().contains(id) {
                            entry.origin = OriginKind::Peer;
                        }
                    }
                    let msg = inbound_message(&entry, &sid);
                    cb(&msg);
                    if !self.settings.manual_ack {
                        lock(&self.state)
                            .gate
                            .consume(&entry.frame.msg_id, entry.slot);
                    }
                }
            }
        }
    }

    /// Sends receipts, schedules delivery and held notifications.
    pub(super) fn run_actions(
        self: &Arc<Self>,
        actions: Vec<Action>,
        handle: Option<&Handle>,
        from: Option<String>,
    ) {
        let mut deliver = false;
        let mut held = false;
        for a in actions {
            match a {
                Action::Receipt(r) => {
                    if let Some(h) = handle {
                        self.spawn_receipt(h, r, from.clone());
                    }
                }
                Action::Deliver => deliver = true,
                Action::HeldChanged => held = true,
            }
        }
        if deliver {
            let inner = self.clone();
            self.link.dispatcher().post(move || inner.pump());
        }
        if held && self.held_cb.get().is_some() {
            let inner = self.clone();
            self.link.dispatcher().post(move || {
                let Some(cb) = inner.held_cb.get() else {
                    return;
                };
                let list = inner.held_snapshot(&lock(&inner.state));
                cb(&list);
            });
        }
    }

    pub(super) fn spawn_receipt(
        self: &Arc<Self>,
        handle: &Handle,
        r: Receipt,
        from: Option<String>,
    ) {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        let inner = self.clone();
        let logger = self.logger.clone();
        handle.spawn(async move {
            let msg_id = match uuid_v4() {
                Ok(id) => id,
                Err(e) => {
                    logger.warn(|| {
                        format!(
                            "receipt {} for {} not sent: {}",
                            r.status.as_str(),
                            r.orig_msg_id,
                            e.message
                        )
                    });
                    if inner.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
                        inner.outstanding_done.notify_waiters();
                    }
                    return;
                }
            };
            let json = status_frame_json(
                &msg_id,
                r.status,
                &r.orig_msg_id,
                from.as_deref(),
                r.drop_reason,
                &r.dropped_msg_ids,
            );
            if let Err(e) = send_lines(&r.to, r.reply_token.as_deref(), &json, SEND_TIMEOUT).await {
                logger.debug(|| {
                    format!(
                        "receipt {} for {} not sent: {}",
                        r.status.as_str(),
                        r.orig_msg_id,
                        e.message
                    )
                });
            }
            if inner.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
                inner.outstanding_done.notify_waiters();
            }
        });
    }

    // -- inbound --------------------------------------------------------------

    pub(super) fn on_user_frame(self: &Arc<Self>, frame: UserFrame, cred: &Credential) {
        let now = Now::real();
        let mut out = Vec::new();
        let mut misaddressed = false;
        let (handle, from) = {
            let mut st = lock(&self.state);
            let route = self.route(&st, &frame, cred);
            match route {
                None => {
                    misaddressed = true;
                    if let Some(to) = &frame.from {
                        out.push(Action::Receipt(Receipt {
                            to: to.clone(),
                            reply_token: frame.reply_token.clone(),
                            status: super::super::frames::DeliveryState::Misaddressed,
                            orig_msg_id: frame.msg_id.clone(),
                            drop_reason: None,
                            dropped_msg_ids: Vec::new(),
                        }));
                    }
                }
                Some(slot) => {
                    let origin = match cred {
                        Credential::Peer => OriginKind::Peer,
                        Credential::Child { .. } => OriginKind::OwnProcess,
                        Credential::Controller(Controller { id, label }) => {
                            OriginKind::Controller {
                                id: id.clone(),
                                label: label.clone(),
                            }
                        }
                    };
                    let State { gate, regs, .. } = &mut *st;
                    let view = View {
                        multi: self.settings.multi,
                        regs,
                        valid_controllers: None,
                    };
                    gate.admit(frame.clone(), origin, slot, now, &view, &mut out);
                }
            }
            (st.handle(), st.inbox_path())
        };
        if misaddressed {
            self.logger.debug(|| {
                format!(
                    "misaddressed message {} (toSessionId {:?})",
                    frame.msg_id, frame.to_session_id
                )
            });
            let inner = self.clone();
            if let Some(h) = &handle {
                h.spawn_blocking(move || inner.reassert());
            }
        }
        for a in &out {
            if let Action::Receipt(r) = a {
                if r.status == super::super::frames::DeliveryState::Dropped {
                    self.logger.debug(|| {
                        format!(
                            "dropped message {} ({})",
                            r.orig_msg_id,
                            r.drop_reason.map(|d| d.as_str()).unwrap_or("?")
                        )
                    });
                }
            }
        }
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
    }

    /// Which of our sessions a frame is for, or `None` (misaddressed).
    pub(super) fn route(&self, st: &State, frame: &UserFrame, cred: &Credential) -> Option<u64> {
        if let Credential::Child { slot } = cred {
            let reg = st.reg(*slot)?;
            return match &frame.to_session_id {
                None => Some(reg.slot),
                Some(id)
                    if id == &reg.session_id
                        || (self.settings.multi && id.eq_ignore_ascii_case(&reg.session_id)) =>
                {
                    Some(reg.slot)
                }
                Some(_) => None,
            };
        }
        if self.settings.multi {
            let id = frame.to_session_id.as_ref()?;
            return st
                .regs
                .iter()
                .find(|r| r.session_id.eq_ignore_ascii_case(id))
                .map(|r| r.slot);
        }
        let reg = st.regs.first()?;
        match &frame.to_session_id {
            Some(id) if *id != reg.session_id => None,
            _ => Some(reg.slot),
        }
    }

    pub(super) fn on_receipt(self: &Arc<Self>, frame: ControlFrame) {
        let events = lock(&self.state).outbox.apply(&frame, Now::real());
        if events.is_empty() {
            self.logger.debug(|| {
                format!(
                    "ignoring receipt {} for {}: unknown message or repeated receipt",
                    frame.status.as_str(),
                    frame.orig_msg_id
                )
            });
            return;
        }
        self.changed.notify_all();
        if self.receipt_cb.get().is_none() {
            return;
        }
        let inner = self.clone();
        self.link.dispatcher().post(move || {
            let Some(cb) = inner.receipt_cb.get() else {
                return;
            };
            for e in &events {
                cb(e);
            }
        });
    }
}

/// The inbox's view of a participant.
pub(super) struct InboxHandler(pub(super) Arc<Inner>);

impl Handler for InboxHandler {
    fn authenticate(&self, token: &str) -> Option<Credential> {
        let inner = &self.0;
        if ct_eq(&inner.ipc_token, token) {
            return Some(Credential::Peer);
        }
        let child = {
            let st = lock(&inner.state);
            let mut found = None;
            for r in &st.regs {
                if ct_eq(&r.child_token, token) {
                    found = Some(r.slot);
                }
            }
            found
        };
        if let Some(slot) = child {
            return Some(Credential::Child { slot });
        }
        inner.controllers.resolve(token).map(Credential::Controller)
    }

    fn revalidate(&self, token: &str) -> Option<Credential> {
        self.0
            .controllers
            .resolve(token)
            .map(Credential::Controller)
    }

    fn on_frame(&self, frame: Frame, cred: &Credential) {
        match frame {
            Frame::Control(c) => {
                if *cred == Credential::Peer {
                    self.0.on_receipt(c);
                } else {
                    self.0.logger.debug(|| {
                        "ignoring a receipt on a connection that did not prove our token".into()
                    });
                }
            }
            Frame::User(u) => self.0.on_user_frame(u, cred),
        }
    }
}

pub(super) async fn housekeeping(inner: Arc<Inner>, cancel: CancellationToken) {
    loop {
        let deadline = {
            let st = lock(&inner.state);
            st.gate.next_deadline(Now::real(), &inner.view(&st, None))
        };
        let sleep_until = deadline
            .map(tokio::time::Instant::from_std)
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = inner.wake.notified() => continue,
            _ = tokio::time::sleep_until(sleep_until) => {}
        }
        let mut out = Vec::new();
        let (handle, from) = {
            let mut st = lock(&inner.state);
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: inner.settings.multi,
                regs,
                valid_controllers: None,
            };
            gate.tick(Now::real(), &view, &mut out);
            (st.handle(), st.inbox_path())
        };
        inner.run_actions(out, handle.as_ref(), from);
    }
}
