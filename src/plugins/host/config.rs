//! The plugin host's configuration: the JSON [`Config`] an embedder passes
//! and the validated [`Settings`] the host runs with (defaults and bounds).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::plugins::ipc::DEFAULT_MAX_MESSAGE_BYTES;

/// Plugin host configuration (a JSON object; every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Default `<qwen_home>/companion/plugins`.
    #[serde(default)]
    pub plugins_dir: Option<PathBuf>,
    /// The node binary: a path, or a name looked up in PATH, then in the
    /// login shell's PATH and the usual install folders (default `node`).
    #[serde(default)]
    pub node: Option<String>,
    /// The `node` binary is an Electron runtime (`ELECTRON_RUN_AS_NODE=1`).
    #[serde(default)]
    pub node_is_electron: bool,
    /// Default per-call timeout (30000; 50 ..= 3600000).
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// Largest message from a plugin in bytes (16 MiB; at least 1024).
    #[serde(default)]
    pub max_message_bytes: Option<usize>,
    /// Longest a start may take until Node's event loop answers (10000).
    #[serde(default)]
    pub start_timeout_ms: Option<u64>,
    /// Grace after closing the channel, and after SIGTERM (2000).
    #[serde(default)]
    pub kill_grace_ms: Option<u64>,
    /// Liveness probe after a timeout (1000).
    #[serde(default)]
    pub probe_timeout_ms: Option<u64>,
    /// How long a host_request waits for the embedding host (30000).
    #[serde(default)]
    pub host_request_timeout_ms: Option<u64>,
    /// `context.cwd` of calls that give none (default: empty string).
    #[serde(default)]
    pub workspace_root: Option<String>,
    /// Unexpected exits that disable a plugin (3; 0 = never).
    #[serde(default)]
    pub crash_loop_max_exits: Option<u32>,
    /// Window of the crash-loop breaker (60000).
    #[serde(default)]
    pub crash_loop_window_ms: Option<u64>,
    /// First delay before a background (`onStartupFinished`) plugin that
    /// exited unexpectedly is started again, doubled per recent crash
    /// (1000; 0 = only the next call starts it).
    #[serde(default)]
    pub restart_backoff_ms: Option<u64>,
    /// How long a call polls for the plugin's reply before its task sleeps,
    /// in microseconds (200; 0 ..= 10000; 0 = never poll). See
    /// `calls::await_reply`.
    #[serde(default)]
    pub reply_poll_us: Option<u64>,
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        match json.map(str::trim) {
            None | Some("") => Ok(Config::default()),
            Some(s) => serde_json::from_str(s)
                .map_err(|e| Error::invalid_json(format!("invalid plugin host config: {e}"))),
        }
    }
}

/// Validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub plugins_dir: PathBuf,
    pub node: String,
    pub electron: bool,
    pub call_timeout: Duration,
    pub max_message_bytes: usize,
    pub start_timeout: Duration,
    pub kill_grace: Duration,
    pub probe_timeout: Duration,
    pub host_request_timeout: Duration,
    pub workspace_root: String,
    pub crash_max: u32,
    pub crash_window: Duration,
    pub restart_backoff: Duration,
    pub reply_poll: Duration,
}

fn ms(v: Option<u64>, default: u64, min: u64, max: u64, name: &str) -> Result<Duration> {
    let v = v.unwrap_or(default);
    if v < min || v > max {
        return Err(Error::invalid_argument(format!(
            "{name} must be between {min} and {max}"
        )));
    }
    Ok(Duration::from_millis(v))
}

impl Settings {
    pub(super) fn from_config(c: Config) -> Result<Settings> {
        let plugins_dir = match c.plugins_dir {
            Some(d) => crate::shared::fs::absolute(&d),
            None => crate::shared::fs::qwen_home()?
                .join("companion")
                .join("plugins"),
        };
        let node = c
            .node
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "node".into());
        if node.contains('\0') {
            return Err(Error::invalid_argument("node contains NUL"));
        }
        let max_message_bytes = c.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES);
        if max_message_bytes < 1024 {
            return Err(Error::invalid_argument("maxMessageBytes must be >= 1024"));
        }
        Ok(Settings {
            plugins_dir,
            node,
            electron: c.node_is_electron,
            call_timeout: ms(c.call_timeout_ms, 30_000, 50, 3_600_000, "callTimeoutMs")?,
            max_message_bytes,
            start_timeout: ms(c.start_timeout_ms, 10_000, 50, 600_000, "startTimeoutMs")?,
            kill_grace: ms(c.kill_grace_ms, 2_000, 0, 60_000, "killGraceMs")?,
            probe_timeout: ms(c.probe_timeout_ms, 1_000, 10, 60_000, "probeTimeoutMs")?,
            host_request_timeout: ms(
                c.host_request_timeout_ms,
                30_000,
                10,
                3_600_000,
                "hostRequestTimeoutMs",
            )?,
            workspace_root: c.workspace_root.unwrap_or_default(),
            crash_max: c.crash_loop_max_exits.unwrap_or(3),
            crash_window: ms(
                c.crash_loop_window_ms,
                60_000,
                1,
                86_400_000,
                "crashLoopWindowMs",
            )?,
            restart_backoff: ms(c.restart_backoff_ms, 1_000, 0, 600_000, "restartBackoffMs")?,
            reply_poll: match c.reply_poll_us.unwrap_or(200) {
                us @ 0..=10_000 => Duration::from_micros(us),
                _ => {
                    return Err(Error::invalid_argument(
                        "replyPollUs must be between 0 and 10000",
                    ))
                }
            },
        })
    }
}
