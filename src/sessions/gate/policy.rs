//! Policy: what a session does with a peer message that passed admission
//! (`accept` / `hold` / `refuse`, or the mode-parity default).

use serde::{Deserialize, Serialize};

use super::super::frames::{ReviewClass, UserFrame};
use super::super::names::OriginKind;

/// `agents.crossSessionInbound`: what to do with peer messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Accept,
    Hold,
    Refuse,
}

/// `agents.crossSessionHeldExpiry`: how long a held message waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HeldExpiry {
    #[serde(rename = "1m")]
    OneMinute,
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "10m")]
    TenMinutes,
    #[serde(rename = "never")]
    Never,
}

impl HeldExpiry {
    pub fn millis(self) -> Option<f64> {
        match self {
            HeldExpiry::OneMinute => Some(60_000.0),
            HeldExpiry::FiveMinutes => Some(300_000.0),
            HeldExpiry::TenMinutes => Some(600_000.0),
            HeldExpiry::Never => None,
        }
    }
}

/// How one session treats inbound peer messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundSettings {
    /// Explicit policy; `None` is "unset": own-process and controller
    /// senders are accepted, others by mode parity.
    #[serde(default)]
    pub policy: Option<Policy>,
    /// This session's review class; `None` is "unknown" (peers are held).
    #[serde(default)]
    pub review_class: Option<ReviewClass>,
    #[serde(default)]
    pub held_expiry: HeldExpiry,
}

/// Why a message is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldCause {
    ExplicitSetting,
    ModeMismatch,
    NoModeAsserted,
    ModeUnknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Accept,
    Hold(HoldCause),
    Refuse,
}

/// Qwen's `resolvePolicy` for one frame, origin and session settings.
pub fn resolve_policy(frame: &UserFrame, origin: &OriginKind, s: &InboundSettings) -> Decision {
    match s.policy {
        Some(Policy::Accept) => return Decision::Accept,
        Some(Policy::Hold) => return Decision::Hold(HoldCause::ExplicitSetting),
        Some(Policy::Refuse) => return Decision::Refuse,
        None => {}
    }
    if !matches!(origin, OriginKind::Peer) {
        return Decision::Accept;
    }
    let Some(mine) = s.review_class else {
        return Decision::Hold(HoldCause::ModeUnknown);
    };
    match frame.from_mode {
        None => Decision::Hold(HoldCause::NoModeAsserted),
        Some(m) if m == mine => Decision::Accept,
        Some(_) => Decision::Hold(HoldCause::ModeMismatch),
    }
}
