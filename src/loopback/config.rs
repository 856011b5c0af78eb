//! The settings every loopback server shares, declared once and embedded
//! (flattened) in each server's own JSON config: the IDE companion's, the
//! plugin MCP server's and the view server's.
//!
//! JSON keys: `maxBodyBytes`, `keepAliveMs`, `http` ([`LimitsConfig`]),
//! `sessionGraceMs` and `maxSessions` (MCP servers only). A key that neither
//! the server's own config nor this one knows is refused, as before.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::IgnoredAny;

use super::sessions::Lifecycle;
use super::{Limits, LimitsConfig};
use crate::error::{Error, Result};

/// The shared part of a server's config (every field optional). Embed it with
/// `#[serde(flatten)] pub server: ServerConfig` and no `deny_unknown_fields`
/// on the outer struct: this part collects the keys nobody knows and
/// [`ServerConfig::settings`] refuses them.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    /// Largest accepted request body in bytes (at least 1024; the default is
    /// the server's own).
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// Interval of SSE keep-alive comments on every stream, in milliseconds
    /// (default 15000; 10 ..= 30000: the CLI drops a stream silent for 300 s).
    #[serde(default)]
    pub keep_alive_ms: Option<u64>,
    /// Connection limits and timeouts of the HTTP server.
    #[serde(default)]
    pub http: Option<LimitsConfig>,
    /// How long an MCP session without a stream and without requests is
    /// kept, in milliseconds (default 30000; 1000 ..= 3600000). Longer than
    /// the CLI's reconnect window (about 7 s).
    #[serde(default)]
    pub session_grace_ms: Option<u64>,
    /// Most MCP sessions kept at once (default 64; 1 ..= 4096).
    #[serde(default)]
    pub max_sessions: Option<usize>,
    /// Keys that neither the server's config nor this one knows (refused
    /// by [`ServerConfig::settings`]; empty when built in Rust).
    #[serde(flatten)]
    pub unknown: BTreeMap<String, IgnoredAny>,
}

/// [`ServerConfig`] checked, with the defaults filled in.
#[derive(Debug, Clone, Copy)]
pub struct ServerSettings {
    pub max_body_bytes: usize,
    pub keep_alive: Duration,
    pub limits: Limits,
    pub lifecycle: Lifecycle,
}

impl ServerConfig {
    /// Checks the values (and that no unknown key was given) and fills in
    /// the defaults; `default_max_body` is the server's own body cap.
    pub fn settings(&self, default_max_body: usize) -> Result<ServerSettings> {
        if let Some(key) = self.unknown.keys().next() {
            return Err(Error::invalid_json(format!("unknown field `{key}`")));
        }
        Ok(ServerSettings {
            max_body_bytes: self.max_body_bytes.unwrap_or(default_max_body).max(1024),
            keep_alive: keep_alive_from_ms(self.keep_alive_ms)?,
            limits: self.http.clone().unwrap_or_default().limits()?,
            lifecycle: Lifecycle::from_config(self.session_grace_ms, self.max_sessions)?,
        })
    }

    /// As [`settings`](Self::settings), for a server that keeps no MCP
    /// sessions: `sessionGraceMs` and `maxSessions` are refused there.
    pub fn settings_without_sessions(&self, default_max_body: usize) -> Result<ServerSettings> {
        if self.session_grace_ms.is_some() || self.max_sessions.is_some() {
            return Err(Error::invalid_json(
                "sessionGraceMs and maxSessions apply to MCP servers only",
            ));
        }
        self.settings(default_max_body)
    }
}

/// The SSE keep-alive interval from `keepAliveMs` (default 15 s; 10 ms ..= 30 s).
fn keep_alive_from_ms(ms: Option<u64>) -> Result<Duration> {
    let keep_alive = Duration::from_millis(ms.unwrap_or(15_000));
    if keep_alive < Duration::from_millis(10) || keep_alive > Duration::from_secs(30) {
        return Err(Error::invalid_argument(
            "keepAliveMs must be between 10 and 30000",
        ));
    }
    Ok(keep_alive)
}

/// A server's config, which embeds the shared [`ServerConfig`].
pub trait EmbedsServerConfig {
    fn server_config(&self) -> &ServerConfig;
}

/// Parses a server's JSON config (`None` or blank = defaults), refusing keys
/// that neither it nor the embedded [`ServerConfig`] knows; `what` names the
/// server in the error.
pub fn parse<T>(json: Option<&str>, what: &str) -> Result<T>
where
    T: serde::de::DeserializeOwned + Default + EmbedsServerConfig,
{
    let config: T = match json.map(str::trim) {
        None | Some("") => return Ok(T::default()),
        Some(s) => serde_json::from_str(s)
            .map_err(|e| Error::invalid_json(format!("invalid {what} config: {e}")))?,
    };
    if let Some(key) = config.server_config().unknown.keys().next() {
        return Err(Error::invalid_json(format!(
            "invalid {what} config: unknown field `{key}`"
        )));
    }
    Ok(config)
}

#[cfg(test)]
mod tests;
