//! The companion's configuration: [`Config`], the JSON object given to
//! `qc_companion_new`, and [`Settings`], the checked values a companion runs
//! with.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::discovery;
use crate::error::{Error, Result};
use crate::loopback::sessions::Lifecycle;
use crate::loopback::{self, Limits};
use crate::sys::platform::PATH_STYLE;

const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Companion configuration (the JSON object given to `qc_companion_new`).
/// Unknown keys are refused (by the embedded [`loopback::ServerConfig`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Absolute workspace root folders.
    #[serde(default)]
    pub workspace_roots: Vec<String>,
    /// Human-readable IDE name (`ideName`, `ideInfo.displayName`).
    #[serde(default)]
    pub ide_name: Option<String>,
    /// Display name for `ideInfo.displayName` (defaults to `ideName`).
    #[serde(default)]
    pub ide_display_name: Option<String>,
    /// Identifier for `ideInfo.name` (defaults to a slug of `ideName`).
    #[serde(default)]
    pub ide_id: Option<String>,
    /// Directory for lock files (default `$QWEN_HOME/ide` or `~/.qwen/ide`).
    #[serde(default)]
    pub lock_dir: Option<PathBuf>,
    /// The CLIs served: `"qwen"` (default), `"gemini"` or `"both"`.
    #[serde(default)]
    pub cli: Option<String>,
    /// Directory for Gemini CLI's discovery file (default
    /// `<os.tmpdir()>/gemini/ide`).
    #[serde(default)]
    pub gemini_dir: Option<PathBuf>,
    /// `ppid` written to the lock file; defaults to this process's pid, which
    /// lives exactly as long as the IDE hosting the library.
    #[serde(default)]
    pub ppid: Option<u32>,
    /// Initial workspace trust.
    #[serde(default = "default_true")]
    pub trusted: bool,
    /// Trailing debounce of context updates in milliseconds (default 50).
    #[serde(default)]
    pub debounce_ms: Option<u64>,
    /// Longest a context update may be held back by continuous events (default 200).
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    /// How long openDiff/closeDiff wait for the host's answer, in milliseconds
    /// (default 30000; 100 ..= 600000). After it the CLI gets an error.
    #[serde(default)]
    pub request_timeout_ms: Option<u64>,
    /// A client whose stream has not taken a notification for this long is
    /// dropped like an abandoned session, in milliseconds (default 30000;
    /// 100 ..= 600000).
    #[serde(default)]
    pub stalled_client_ms: Option<u64>,
    /// The settings every loopback server shares (`maxBodyBytes`, default
    /// 64 MiB; `keepAliveMs`; `http`; `sessionGraceMs`; `maxSessions`).
    #[serde(flatten)]
    pub server: loopback::ServerConfig,
}

fn default_true() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workspace_roots: Vec::new(),
            ide_name: None,
            ide_display_name: None,
            ide_id: None,
            lock_dir: None,
            cli: None,
            gemini_dir: None,
            ppid: None,
            trusted: true,
            debounce_ms: None,
            max_wait_ms: None,
            request_timeout_ms: None,
            server: loopback::ServerConfig::default(),
            stalled_client_ms: None,
        }
    }
}

impl loopback::config::EmbedsServerConfig for Config {
    fn server_config(&self) -> &loopback::ServerConfig {
        &self.server
    }
}

impl Config {
    /// Parses the JSON configuration (`None` or empty = defaults).
    pub fn from_json(json: Option<&str>) -> Result<Config> {
        loopback::config::parse(json, "companion")
    }
}

/// Validated settings derived from [`Config`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub workspace_roots: Vec<String>,
    pub ide_name: String,
    pub ide_display_name: String,
    pub ide_id: String,
    pub lock_dir: Option<PathBuf>,
    pub clis: discovery::Clis,
    pub gemini_dir: Option<PathBuf>,
    pub ppid: u32,
    pub debounce: Duration,
    pub max_wait: Duration,
    pub max_body_bytes: usize,
    pub keep_alive: Duration,
    pub request_timeout: Duration,
    pub limits: Limits,
    pub lifecycle: Lifecycle,
    pub stalled_client: Duration,
}

pub(super) fn validate_roots(roots: &[String]) -> Result<()> {
    for r in roots {
        if !PATH_STYLE.is_absolute(r) {
            return Err(Error::invalid_argument(format!(
                "workspace root {r:?} is not an absolute path"
            )));
        }
        if r.contains('\0') {
            return Err(Error::invalid_argument("workspace root contains NUL"));
        }
    }
    Ok(())
}

fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .filter_map(|c| {
            if c.is_ascii_alphanumeric() {
                Some(c.to_ascii_lowercase())
            } else if c == ' ' || c == '-' || c == '_' {
                Some('-')
            } else {
                None
            }
        })
        .collect();
    if s.is_empty() {
        "qwen-companion".into()
    } else {
        s
    }
}

impl Settings {
    pub(super) fn from_config(c: Config) -> Result<Settings> {
        validate_roots(&c.workspace_roots)?;
        let clis = match c.cli.as_deref() {
            Some(v) => discovery::Clis::parse(v)?,
            None => discovery::Clis::default(),
        };
        let ide_name = c
            .ide_name
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "Qwen Companion".to_string());
        let ide_display_name = c
            .ide_display_name
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| ide_name.clone());
        let ide_id = c
            .ide_id
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| slug(&ide_name));
        let debounce = Duration::from_millis(c.debounce_ms.unwrap_or(50));
        let max_wait = Duration::from_millis(c.max_wait_ms.unwrap_or(200));
        if debounce > Duration::from_secs(10) || max_wait > Duration::from_secs(60) {
            return Err(Error::invalid_argument(
                "debounceMs must be <= 10000 and maxWaitMs <= 60000",
            ));
        }
        let server = c.server.settings(DEFAULT_MAX_BODY_BYTES)?;
        let request_timeout = Duration::from_millis(c.request_timeout_ms.unwrap_or(30_000));
        if request_timeout < Duration::from_millis(100)
            || request_timeout > Duration::from_secs(600)
        {
            return Err(Error::invalid_argument(
                "requestTimeoutMs must be between 100 and 600000",
            ));
        }
        let stalled_client = Duration::from_millis(c.stalled_client_ms.unwrap_or(30_000));
        if stalled_client < Duration::from_millis(100) || stalled_client > Duration::from_secs(600)
        {
            return Err(Error::invalid_argument(
                "stalledClientMs must be between 100 and 600000",
            ));
        }
        Ok(Settings {
            stalled_client,
            limits: server.limits,
            lifecycle: server.lifecycle,
            keep_alive: server.keep_alive,
            request_timeout,
            workspace_roots: c.workspace_roots,
            ide_name,
            ide_display_name,
            ide_id,
            lock_dir: c.lock_dir,
            clis,
            gemini_dir: c.gemini_dir,
            ppid: c.ppid.unwrap_or_else(crate::sys::process::current_pid),
            debounce,
            max_wait: max_wait.max(debounce),
            max_body_bytes: server.max_body_bytes,
        })
    }
}
