//! A participant's lifecycle: registering, rotating and unregistering
//! sessions (their registry records), binding and closing the inbox, and
//! closing the participant.

use super::inbound::{housekeeping, InboxHandler};
use super::settings::env_nonempty;
use super::*;
use crate::sys::platform::{IpcKind, IPC_KIND, PROC_IDENTITY};

pub(super) fn session_info(r: &Registration, ipc_path: &str) -> SessionInfo {
    SessionInfo {
        session_id: r.session_id.clone(),
        ref_: peer_ref(&r.session_id),
        name: r.name.clone(),
        kind: r.kind.clone(),
        cwd: r.cwd.clone(),
        started_at: r.started_at,
        record_path: r.record_path.to_string_lossy().into_owned(),
        ipc_path: ipc_path.to_string(),
    }
}

impl Inner {
    pub(super) fn record_out(&self, r: &Registration, id: &Identity, ipc_path: &str) -> RecordOut {
        RecordOut {
            schema_version: registry::SCHEMA_VERSION,
            pid: id.pid,
            proc_start: id.proc_start.clone(),
            pid_ns: id.pid_ns,
            session_id: r.session_id.clone(),
            cwd: r.cwd.clone(),
            name: r.name.clone(),
            started_at: r.started_at,
            qwen_version: self.settings.version.clone(),
            kind: r.kind.clone(),
            ipc_path: ipc_path.to_string(),
            ipc_token: self.ipc_token.clone(),
        }
    }

    pub(super) fn identity() -> Result<Identity> {
        checked_identity(Identity::current(), PROC_IDENTITY)
    }
}

/// `id` when it can be told apart from other processes: with
/// `proc_identity` (Linux) only when `procStart` and `pidNs` were read, as
/// Qwen refuses to register without them; elsewhere both are `null`, as the
/// CLI writes them there, and liveness is the PID alone.
pub(super) fn checked_identity(mut id: Identity, proc_identity: bool) -> Result<Identity> {
    if !proc_identity {
        id.proc_start = None;
        id.pid_ns = None;
    }
    if proc_identity && (id.proc_start.is_none() || id.pid_ns.is_none()) {
        return Err(Error::new(
            Status::Io,
            "cannot read this process's start token or PID namespace; a record without them could not be told apart from another process",
        ));
    }
    Ok(id)
}

impl Inner {
    // -- lifecycle ----------------------------------------------------------

    pub(super) fn register(self: &Arc<Self>, opts: RegisterOptions) -> Result<SessionInfo> {
        let _ops = lock(&self.ops);
        let kind = opts
            .kind
            .clone()
            .unwrap_or_else(|| self.settings.kind.clone());
        if !is_valid_kind(&kind) {
            return Err(Error::invalid_argument(format!(
                "kind {kind:?} is not valid"
            )));
        }
        let session_id = match opts.session_id.as_deref() {
            Some(s) if js_trim(s).is_empty() => {
                return Err(Error::invalid_argument("sessionId is blank"))
            }
            Some(s) => s.to_string(),
            None => uuid_v4()?,
        };
        let cwd = match opts.cwd.clone() {
            Some(c) if c.is_empty() => return Err(Error::invalid_argument("cwd is empty")),
            Some(c) => c,
            None => std::env::current_dir()
                .map_err(|e| Error::io("current directory", e))?
                .to_string_lossy()
                .into_owned(),
        };
        let identity = Self::identity()?;
        {
            let st = lock(&self.state);
            if st.closed {
                return Err(Error::new(Status::NotRunning, "the participant is closed"));
            }
            if !self.settings.multi && !st.regs.is_empty() {
                return Err(Error::new(
                    Status::AlreadyRunning,
                    "a session is already registered (set multiSession to host several)",
                ));
            }
            if st
                .regs
                .iter()
                .any(|r| r.session_id.eq_ignore_ascii_case(&session_id))
            {
                return Err(Error::invalid_argument(format!(
                    "session {session_id:?} is already registered"
                )));
            }
        }
        let bound_now = self.ensure_inbox()?;
        let result = (|| {
            let ipc_path = lock(&self.state)
                .inbox_path()
                .ok_or_else(|| Error::new(Status::Internal, "inbox vanished"))?;
            let path = registry::choose_record_path(
                &self.settings.sessions_dir,
                &identity,
                !self.settings.multi,
            )?;
            let reg = Registration {
                slot: 0,
                name: resolve_session_name(opts.name.as_deref(), &cwd, &session_id),
                session_id: session_id.clone(),
                cwd: cwd.clone(),
                kind: kind.clone(),
                started_at: super::super::gate::wall_ms() as u64,
                record_path: path.clone(),
                child_token: random_hex(32)?,
                inbound: InboundSettings {
                    policy: opts.inbound_policy.or(self.settings.inbound.policy),
                    review_class: opts.review_class.or(self.settings.inbound.review_class),
                    held_expiry: opts
                        .held_expiry
                        .unwrap_or(self.settings.inbound.held_expiry),
                },
            };
            registry::write_record(&path, &self.record_out(&reg, &identity, &ipc_path))?;
            Ok((reg, ipc_path))
        })();
        let (mut reg, ipc_path) = match result {
            Ok(v) => v,
            Err(e) => {
                if bound_now {
                    let inbox = {
                        let mut st = lock(&self.state);
                        if st.regs.is_empty() {
                            st.inbox.take()
                        } else {
                            None
                        }
                    };
                    if let Some(i) = inbox {
                        self.close_inbox(i);
                    }
                }
                return Err(e);
            }
        };
        {
            let mut st = lock(&self.state);
            reg.slot = st.next_slot;
            st.next_slot += 1;
            st.regs.push(reg.clone());
        }
        if self.settings.cleanup_at_exit {
            exit_add(
                self.owner,
                reg.slot,
                ExitItem::Record {
                    path: reg.record_path.clone(),
                    session_id: reg.session_id.clone(),
                },
            );
        }
        self.logger.info(|| {
            format!(
                "registered session {} at {}",
                reg.session_id,
                reg.record_path.display()
            )
        });
        Ok(session_info(&reg, &ipc_path))
    }

    /// Binds the inbox if none is bound; true when it bound one now.
    pub(super) fn ensure_inbox(self: &Arc<Self>) -> Result<bool> {
        if lock(&self.state).inbox.is_some() {
            return Ok(false);
        }
        runtime::refuse_on_runtime("register")?;
        let rt = runtime::acquire()?;
        let s = &self.settings;
        let explicit = s.socket_path.is_some();
        let candidates = match &s.socket_path {
            Some(p) => vec![p.clone()],
            None => {
                let xdg = s
                    .runtime_dir
                    .clone()
                    .or_else(|| env_nonempty("XDG_RUNTIME_DIR").map(PathBuf::from));
                let tmp = s.tmp_dir.clone().or_else(|| {
                    env_nonempty("TMPDIR")
                        .or_else(|| env_nonempty("TMP"))
                        .or_else(|| env_nonempty("TEMP"))
                        .map(PathBuf::from)
                });
                inbox::automatic_candidates(
                    IPC_KIND,
                    super::super::proc::own_pid(),
                    xdg.as_deref(),
                    tmp.as_deref(),
                    &random_hex(8)?,
                )
            }
        };
        let bound =
            inbox::bind_first(&candidates, explicit).map_err(|e| Error::new(Status::Io, e))?;
        let handle = rt.handle().clone();
        let listener = {
            let _enter = handle.enter();
            crate::sys::ipc::LocalListener::from_std(bound.listener)
                .map_err(|e| Error::io("register the inbox", e))?
        };
        let cancel = CancellationToken::new();
        let handler: Arc<dyn Handler> = Arc::new(InboxHandler(self.clone()));
        let mut tasks = vec![handle.spawn(inbox::serve(
            listener,
            handler,
            cancel.child_token(),
            s.line_deadline,
        ))];
        tasks.push(handle.spawn(housekeeping(self.clone(), cancel.child_token())));
        let sockets = IPC_KIND == IpcKind::UnixSockets;
        if s.sweep && !explicit && sockets {
            let own = bound.path.clone();
            let cands = candidates.clone();
            handle.spawn_blocking(move || {
                for c in &cands {
                    inbox::sweep_around(c, &own);
                }
            });
        }
        if s.cleanup_at_exit && sockets {
            exit_add(
                self.owner,
                SOCKET_KEY,
                ExitItem::Socket {
                    path: bound.path.clone(),
                },
            );
        }
        self.logger
            .info(|| format!("inbox listening at {}", bound.path.display()));
        let mut st = lock(&self.state);
        st.gate = Gate::new(Now::real());
        st.inbox = Some(InboxRt {
            path: bound.path,
            nonce_dir: bound.nonce_dir,
            cancel,
            tasks,
            runtime: rt,
        });
        Ok(true)
    }

    pub(super) fn close_inbox(&self, i: InboxRt) {
        i.cancel.cancel();
        if runtime::may_block() {
            let tasks = i.tasks;
            i.runtime.handle().block_on(async {
                for t in tasks {
                    let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
                }
                let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
                while self.outstanding.load(Ordering::Acquire) > 0 {
                    let notified = self.outstanding_done.notified();
                    if self.outstanding.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        break;
                    }
                }
            });
        }
        let _ = std::fs::remove_file(&i.path);
        if let Some(d) = &i.nonce_dir {
            let _ = std::fs::remove_dir(d);
        }
        exit_remove(self.owner, SOCKET_KEY);
        self.logger
            .info(|| format!("inbox closed ({})", i.path.display()));
        drop(i.runtime);
        self.changed.notify_all();
    }

    pub(super) fn unregister(self: &Arc<Self>, session_id: &str) -> Result<()> {
        let _ops = lock(&self.ops);
        self.unregister_locked(session_id)
    }

    pub(super) fn unregister_locked(self: &Arc<Self>, session_id: &str) -> Result<()> {
        let now = Now::real();
        let mut out = Vec::new();
        let (reg, inbox, handle, from) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            let reg = st.regs.remove(idx);
            st.gate.settle_slot(reg.slot, &mut out);
            let handle = st.handle();
            let from = st.inbox_path();
            let inbox = if st.regs.is_empty() {
                st.gate.shutdown(now, &mut out);
                st.inbox.take()
            } else {
                None
            };
            (reg, inbox, handle, from)
        };
        self.run_actions(out, handle.as_ref(), from);
        let pid = super::super::proc::own_pid();
        registry::remove_if_ours(&reg.record_path, pid, &reg.session_id);
        exit_remove(self.owner, reg.slot);
        self.logger
            .info(|| format!("unregistered session {}", reg.session_id));
        if let Some(i) = inbox {
            self.close_inbox(i);
        }
        self.changed.notify_all();
        Ok(())
    }

    pub(super) fn close(self: &Arc<Self>) -> Result<()> {
        let _ops = lock(&self.ops);
        let ids: Vec<String> = {
            let mut st = lock(&self.state);
            st.closed = true;
            st.regs.iter().map(|r| r.session_id.clone()).collect()
        };
        for id in ids {
            let _ = self.unregister_locked(&id);
        }
        let leftover = lock(&self.state).inbox.take();
        if let Some(i) = leftover {
            self.close_inbox(i);
        }
        self.changed.notify_all();
        Ok(())
    }

    pub(super) fn rotate(
        self: &Arc<Self>,
        session_id: &str,
        new_id: Option<&str>,
    ) -> Result<SessionInfo> {
        let _ops = lock(&self.ops);
        let new_id = match new_id {
            Some(s) if js_trim(s).is_empty() => {
                return Err(Error::invalid_argument("the new session id is blank"))
            }
            Some(s) => s.to_string(),
            None => uuid_v4()?,
        };
        let identity = Self::identity()?;
        let (before, after, ipc_path) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            if st
                .regs
                .iter()
                .enumerate()
                .any(|(i, r)| i != idx && r.session_id.eq_ignore_ascii_case(&new_id))
            {
                return Err(Error::invalid_argument(format!(
                    "session {new_id:?} is already registered"
                )));
            }
            let before = st.regs[idx].clone();
            st.regs[idx].session_id = new_id.clone();
            let path = st.inbox_path().unwrap_or_default();
            (before, st.regs[idx].clone(), path)
        };
        let write = match registry::read_record(&after.record_path) {
            ReadOutcome::Ok(r) if !registry::matches_local_identity(&r, &identity) => {
                Err(Error::new(
                    Status::Io,
                    format!(
                        "{} no longer holds this process's record",
                        after.record_path.display()
                    ),
                ))
            }
            ReadOutcome::Newer | ReadOutcome::ReadError => Err(Error::new(
                Status::Io,
                format!("{} cannot be rewritten safely", after.record_path.display()),
            )),
            _ => registry::write_record(
                &after.record_path,
                &self.record_out(&after, &identity, &ipc_path),
            ),
        };
        if let Err(e) = write {
            let mut st = lock(&self.state);
            if let Some(r) = st.regs.iter_mut().find(|r| r.slot == before.slot) {
                r.session_id = before.session_id.clone();
            }
            return Err(e);
        }
        if self.settings.cleanup_at_exit {
            exit_add(
                self.owner,
                after.slot,
                ExitItem::Record {
                    path: after.record_path.clone(),
                    session_id: after.session_id.clone(),
                },
            );
        }
        self.logger
            .info(|| format!("session {} is now {}", before.session_id, after.session_id));
        Ok(session_info(&after, &ipc_path))
    }

    /// Rewrites records that went missing or stale (after a misaddressed frame).
    pub(super) fn reassert(self: &Arc<Self>) {
        let Ok(_ops) = self.ops.try_lock() else {
            return;
        };
        let Ok(identity) = Self::identity() else {
            return;
        };
        let (regs, path) = {
            let st = lock(&self.state);
            (st.regs.clone(), st.inbox_path())
        };
        let Some(path) = path else { return };
        for r in regs {
            let rewrite = match registry::read_record(&r.record_path) {
                ReadOutcome::Missing => true,
                ReadOutcome::Ok(rec) => {
                    registry::matches_local_identity(&rec, &identity)
                        && (rec.session_id != r.session_id
                            || rec.ipc_path.as_deref() != Some(path.as_str()))
                }
                _ => false,
            };
            if rewrite {
                let _ =
                    registry::write_record(&r.record_path, &self.record_out(&r, &identity, &path));
            }
        }
    }

    pub(super) fn update_inbound(
        self: &Arc<Self>,
        session_id: &str,
        settings: InboundSettings,
    ) -> Result<()> {
        let valid = self.controllers.valid_ids();
        let mut out = Vec::new();
        let (handle, from) = {
            let mut st = lock(&self.state);
            let idx = st.find(session_id)?;
            st.regs[idx].inbound = settings;
            let State { gate, regs, .. } = &mut *st;
            let view = View {
                multi: self.settings.multi,
                regs,
                valid_controllers: Some(&valid),
            };
            gate.reevaluate(Now::real(), &view, &mut out);
            (st.handle(), st.inbox_path())
        };
        self.run_actions(out, handle.as_ref(), from);
        self.wake.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
