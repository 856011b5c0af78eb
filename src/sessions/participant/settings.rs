//! A participant's settings: the host's [`Config`](super::super::Config)
//! validated once (`$QWEN_HOME`, the sessions directory, controller
//! tokens, the parent session from the environment) into an immutable
//! [`Settings`].

use super::*;

/// Validated, immutable settings.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) sessions_dir: PathBuf,
    pub(super) controllers_path: PathBuf,
    pub(super) kind: String,
    pub(super) version: Option<String>,
    pub(super) multi: bool,
    pub(super) socket_path: Option<PathBuf>,
    pub(super) runtime_dir: Option<PathBuf>,
    pub(super) tmp_dir: Option<PathBuf>,
    pub(super) sweep: bool,
    pub(super) inbound: InboundSettings,
    pub(super) manual_ack: bool,
    pub(super) controller_token: Option<String>,
    pub(super) parent: Option<(String, String)>,
    pub(super) cleanup_at_exit: bool,
    pub(super) line_deadline: Duration,
}

pub(super) fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The configured home (made absolute, `~` expanded), else Qwen's own
/// resolution of `$QWEN_HOME` / `~/.qwen` ([`crate::shared::fs::qwen_home`]).
pub(super) fn resolve_qwen_home(over: Option<&Path>) -> Result<PathBuf> {
    match over {
        Some(p) => match p.to_str() {
            Some(s) => crate::shared::fs::resolve_user_dir(s),
            None => Ok(crate::shared::fs::absolute(p)),
        },
        None => crate::shared::fs::qwen_home(),
    }
}

/// A configured controller token goes on the auth line as given: only an
/// empty one is refused here. The receiving inbox is the judge (Qwen looks up
/// only `qpc_…` tokens of at most 256 characters it holds a grant for, and
/// drops every other connection silently, so such a send gets no receipt).
pub(super) fn validate_controller_token(t: &str) -> Result<()> {
    if t.is_empty() {
        Err(Error::invalid_argument(
            "controllerToken is empty; give the token `qwen sessions controllers add` printed",
        ))
    } else {
        Ok(())
    }
}

impl Settings {
    pub(super) fn from_config(c: Config) -> Result<Settings> {
        let qwen_home = resolve_qwen_home(c.qwen_home.as_deref())?;
        let kind = c.kind.unwrap_or_else(|| "external".into());
        if !is_valid_kind(&kind) {
            return Err(Error::invalid_argument(format!(
                "kind {kind:?} must start with a letter and use lowercase letters, digits and dashes (at most 16)"
            )));
        }
        if let Some(t) = &c.controller_token {
            validate_controller_token(t)?;
        }
        if let Some(p) = &c.socket_path {
            if !p.is_absolute() {
                return Err(Error::invalid_argument("socketPath must be absolute"));
            }
        }
        let parent = match (c.parent_socket, c.parent_token) {
            (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => Some((s, t)),
            (None, None) => match (
                env_nonempty(MESSAGING_SOCKET_ENV),
                env_nonempty(MESSAGING_TOKEN_ENV),
            ) {
                (Some(s), Some(t)) => Some((s, t)),
                _ => None,
            },
            _ => {
                return Err(Error::invalid_argument(
                    "parentSocket and parentToken are given together, non-empty",
                ))
            }
        };
        let line_deadline = Duration::from_millis(
            c.line_deadline_ms
                .unwrap_or(LINE_DEADLINE.as_millis() as u64),
        );
        if line_deadline < Duration::from_millis(50) || line_deadline > Duration::from_secs(600) {
            return Err(Error::invalid_argument(
                "lineDeadlineMs must be between 50 and 600000",
            ));
        }
        Ok(Settings {
            sessions_dir: qwen_home.join("sessions"),
            controllers_path: qwen_home.join("peer-controllers.json"),
            kind,
            version: c.version,
            multi: c.multi_session,
            socket_path: c.socket_path,
            runtime_dir: c.runtime_dir,
            tmp_dir: c.tmp_dir,
            sweep: c.sweep_sockets.unwrap_or(true),
            inbound: InboundSettings {
                policy: c.inbound_policy,
                review_class: c.review_class,
                held_expiry: c.held_expiry.unwrap_or_default(),
            },
            manual_ack: c.manual_ack,
            controller_token: c.controller_token,
            parent,
            cleanup_at_exit: c.cleanup_at_exit.unwrap_or(true),
            line_deadline,
        })
    }
}
