//! The sending side of a participant: the peer directory from a fresh
//! registry read, address resolution, frame delivery, sends to a peer or to
//! the parent session, and waiting for receipts.

use super::*;

impl Inner {
    /// Messageable peers from a fresh registry read, without `exclude` (or
    /// all our sessions when `None`).
    pub(super) fn directory(&self, exclude: Option<&str>, collapse: bool) -> Result<Vec<PeerInfo>> {
        let own: Vec<String> = {
            let st = lock(&self.state);
            match exclude {
                Some(id) => vec![st.regs[st.find(id)?].session_id.clone()],
                None => st.regs.iter().map(|r| r.session_id.clone()).collect(),
            }
        };
        let live = registry::list_live(&self.settings.sessions_dir);
        Ok(registry::messageable(&live, probe, collapse)
            .into_iter()
            .filter(|p| !own.contains(&p.session_id))
            .collect())
    }

    pub(super) fn resolve_in(
        &self,
        peers: &[PeerInfo],
        address: &str,
        from_session: Option<&str>,
    ) -> Result<usize> {
        match registry::resolve_target(peers, address) {
            Resolution::One(i) => Ok(i),
            Resolution::Ambiguous(ix) => {
                let list: Vec<String> = ix
                    .iter()
                    .map(|&i| match registry::advertisable_address(peers, i) {
                        Some(a) => format!("{a} in {}", peers[i].cwd),
                        None => format!(
                            "{} [{}] in {} (no address reaches this one while its twin is running)",
                            peers[i].name, peers[i].ref_, peers[i].cwd
                        ),
                    })
                    .collect();
                Err(Error::invalid_argument(format!(
                    "{:?} matches several sessions: {}",
                    js_trim(address),
                    list.join("; ")
                )))
            }
            Resolution::None => {
                let st = lock(&self.state);
                let mine: Vec<PeerInfo> = st
                    .regs
                    .iter()
                    .filter(|r| from_session.is_none_or(|f| f == r.session_id))
                    .map(|r| PeerInfo {
                        session_id: r.session_id.clone(),
                        name: flatten_label(&r.name),
                        ref_: peer_ref(&r.session_id),
                        address: String::new(),
                        cwd: flatten_label(&r.cwd),
                        pid: crate::sessions::proc::own_pid(),
                        kind: r.kind.clone(),
                        started_at: r.started_at.into(),
                        ipc_path: String::new(),
                        ipc_token: None,
                    })
                    .collect();
                if registry::resolve_target(&mine, address) != Resolution::None {
                    return Err(Error::invalid_argument(format!(
                        "{:?} is this session itself",
                        js_trim(address)
                    )));
                }
                let s = registry::suggestions(peers, address);
                Err(Error::new(
                    Status::NotFound,
                    if s.is_empty() {
                        format!("no reachable session answers to {:?}", js_trim(address))
                    } else {
                        format!(
                            "no reachable session answers to {:?}; did you mean: {}",
                            js_trim(address),
                            s.join(", ")
                        )
                    },
                ))
            }
        }
    }

    pub(super) fn check_size(frame: &UserFrame) -> Result<String> {
        let json = user_frame_json(frame);
        let units = utf16_len(&json);
        if units > MAX_FRAME_UNITS {
            return Err(Error::invalid_argument(format!(
                "the frame is {units} characters, over the {MAX_FRAME_UNITS} a peer accepts"
            )));
        }
        Ok(json)
    }

    /// Reserves pacing, tracks, writes; refunds when nothing was written.
    pub(super) fn deliver_frame(
        self: &Arc<Self>,
        handle: &Handle,
        frame: &UserFrame,
        json: &str,
        ipc_path: &str,
        auth: Option<&str>,
        address: &str,
    ) -> Result<bool> {
        {
            let mut st = lock(&self.state);
            let now = Now::real();
            st.outbox
                .reserve(ipc_path, &frame.content, &frame.msg_id, now)
                .map_err(|r| Error::new(Status::Refused, r.describe()))?;
            st.outbox.track(&frame.msg_id, address, ipc_path, now);
        }
        match crate::runtime::block_on(
            handle,
            "send",
            send_lines(ipc_path, auth, json, SEND_TIMEOUT),
        )? {
            Ok(()) => Ok(true),
            Err(e) if e.code == Some("ETIMEDOUT") => Ok(false),
            Err(e) => {
                if e.definitely_unwritten() {
                    lock(&self.state)
                        .outbox
                        .refund_unsent(ipc_path, &frame.msg_id);
                }
                Err(describe_send_error(&e))
            }
        }
    }

    pub(super) fn send(self: &Arc<Self>, o: SendOptions) -> Result<SendResult> {
        if o.content.is_empty() {
            return Err(Error::invalid_argument(
                "the message is empty; there is nothing to deliver",
            ));
        }
        let controller_token = if o.controller {
            Some(self.settings.controller_token.clone().ok_or_else(|| {
                Error::invalid_argument("a controller send needs controllerToken in the config")
            })?)
        } else {
            None
        };
        let (me, from, handle) = {
            let st = lock(&self.state);
            let me = st.sender(o.from_session.as_deref())?;
            let from = st
                .inbox_path()
                .ok_or_else(|| Error::new(Status::NotRunning, "the inbox is not bound"))?;
            (me, from, st.handle().expect("bound with the inbox"))
        };
        let live = registry::list_live(&self.settings.sessions_dir);
        let others: Vec<PeerInfo> = registry::messageable(&live, probe, !o.controller)
            .into_iter()
            .filter(|p| p.session_id != me.session_id)
            .collect();
        let i = match self.resolve_in(&others, &o.to, Some(&me.session_id)) {
            Ok(i) => i,
            Err(e) if e.status == Status::NotFound => {
                // Refused at once, no dial: a session without an inbox
                // (Qwen Code on Windows) cannot receive.
                return Err(
                    match registry::inboxless_match(&live, &o.to, &me.session_id) {
                        Some(p) => Error::new(
                            Status::Refused,
                            format!(
                                "{} [{}] has no inbox: {}",
                                p.name,
                                p.ref_,
                                registry::NO_INBOX_REASON
                            ),
                        ),
                        None => e,
                    },
                );
            }
            Err(e) => return Err(e),
        };
        let peer = &others[i];
        let address = registry::advertisable_address(&others, i)
            .unwrap_or_else(|| js_trim(&o.to).to_string());
        let frame = UserFrame {
            msg_id: uuid_v4()?,
            from: Some(from),
            reply_token: Some(self.ipc_token.clone()),
            from_name: Some(flatten_label(&me.name)),
            from_mode: o.from_mode,
            to_session_id: Some(peer.session_id.clone()),
            priority: o.priority.unwrap_or_default(),
            content: o.content,
            raw: None,
        };
        let json = Self::check_size(&frame)?;
        let auth = controller_token.or_else(|| peer.ipc_token.clone());
        let confirmed = self.deliver_frame(
            &handle,
            &frame,
            &json,
            &peer.ipc_path,
            auth.as_deref(),
            &address,
        )?;
        self.logger.debug(|| {
            format!(
                "sent {} to {address} (confirmed: {confirmed})",
                frame.msg_id
            )
        });
        Ok(SendResult {
            msg_id: frame.msg_id,
            address,
            to_session_id: Some(peer.session_id.clone()),
            confirmed,
        })
    }

    pub(super) fn send_to_parent(self: &Arc<Self>, o: ParentSendOptions) -> Result<SendResult> {
        let (socket, token) = self.settings.parent.clone().ok_or_else(|| {
            Error::new(
                Status::NotFound,
                format!("this process was not started by a Qwen Code session ({MESSAGING_SOCKET_ENV} / {MESSAGING_TOKEN_ENV} unset)"),
            )
        })?;
        if o.content.is_empty() {
            return Err(Error::invalid_argument(
                "the message is empty; there is nothing to deliver",
            ));
        }
        let (from, name, handle) = {
            let st = lock(&self.state);
            let me = match o.from_session.as_deref() {
                Some(id) => Some(st.regs[st.find(id)?].clone()),
                None if st.regs.len() == 1 => Some(st.regs[0].clone()),
                None => None,
            };
            (
                st.inbox_path(),
                me.map(|m| flatten_label(&m.name)),
                st.handle(),
            )
        };
        let pinned: Vec<String> = {
            let mut ids: Vec<String> = registry::list_live(&self.settings.sessions_dir)
                .into_iter()
                .filter(|r| r.record.ipc_path.as_deref() == Some(socket.as_str()))
                .map(|r| r.record.session_id)
                .collect();
            ids.sort();
            ids.dedup();
            ids
        };
        let to_session_id = match o.to_session_id {
            Some(id) if js_trim(&id).is_empty() => {
                return Err(Error::invalid_argument("toSessionId is blank"))
            }
            Some(id) => Some(id),
            None => (pinned.len() == 1).then(|| pinned[0].clone()),
        };
        let frame = UserFrame {
            msg_id: uuid_v4()?,
            reply_token: from.as_ref().map(|_| self.ipc_token.clone()),
            from,
            from_name: name,
            from_mode: o.from_mode,
            to_session_id: to_session_id.clone(),
            priority: o.priority.unwrap_or_default(),
            content: o.content,
            raw: None,
        };
        let json = Self::check_size(&frame)?;
        let rt_keep;
        let handle = match handle {
            Some(h) => h,
            None => {
                rt_keep = runtime::acquire()?;
                rt_keep.handle().clone()
            }
        };
        let confirmed =
            self.deliver_frame(&handle, &frame, &json, &socket, Some(&token), "parent")?;
        Ok(SendResult {
            msg_id: frame.msg_id,
            address: "parent".into(),
            to_session_id,
            confirmed,
        })
    }

    pub(super) fn wait(
        &self,
        msg_id: &str,
        timeout: Duration,
        final_only: bool,
    ) -> Result<SendState> {
        let deadline = std::time::Instant::now() + timeout;
        let mut st = lock(&self.state);
        loop {
            let s = st.outbox.state(msg_id).ok_or_else(|| {
                Error::new(Status::NotFound, format!("no tracked message {msg_id:?}"))
            })?;
            let done = if final_only {
                s.state.is_final()
            } else {
                s.state != crate::sessions::frames::DeliveryState::Pending
            };
            let now = std::time::Instant::now();
            if done || st.inbox.is_none() || now >= deadline {
                if st.closed && !done {
                    return Err(Error::new(Status::NotRunning, "the participant is closed"));
                }
                return Ok(s);
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
