//! Ours: the plugin host through the crate's public API.

use std::path::{Path, PathBuf};

use qwen_companion::plugins::host::{CallOptions, Config, PluginHost};
use qwen_companion::plugins::install::install_from;
use serde_json::json;

use crate::common::node_bin;

pub struct Host {
    host: PluginHost,
    dir: PathBuf,
}

impl Host {
    pub fn new(plugins_dir: &Path) -> Result<Host, String> {
        let config = Config {
            plugins_dir: Some(plugins_dir.to_path_buf()),
            node: Some(node_bin()),
            ..Default::default()
        };
        PluginHost::new(config)
            .map(|host| Host {
                host,
                dir: plugins_dir.to_path_buf(),
            })
            .map_err(|e| format!("plugin host: {}", e.message))
    }

    /// Installs the plugin folder `src`; returns its id.
    pub fn install(&self, src: &Path) -> Result<String, String> {
        let id = install_from(&self.dir, src)
            .map(|o| o.manifest.id.clone())
            .map_err(|e| format!("install {}: {e}", src.display()))?;
        self.host
            .reload()
            .map_err(|e| format!("reload: {}", e.message))?;
        Ok(id)
    }

    /// One blocking `echo` call; checks the answer.
    pub fn echo(&self, id: &str, text: &str) -> Result<(), String> {
        let out = self
            .host
            .call_tool(id, "echo", json!({ "text": text }), CallOptions::default())
            .map_err(|e| format!("call {id}: {e}"))?;
        if out.content.first().and_then(|c| c["text"].as_str()) != Some(text) {
            return Err(format!("call {id}: unexpected answer {:?}", out.content));
        }
        Ok(())
    }

    /// The running plugin's pid.
    pub fn pid(&self, id: &str) -> Result<Option<i64>, String> {
        Ok(self.host.running_pid(id).map(i64::from))
    }
}

pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
