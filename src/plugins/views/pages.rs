//! The pages of the enabled plugins (each `views[]` entry, the `ui` panel)
//! and their capabilities.
//!
//! A capability is 256 bits from the OS RNG (64 hex digits), made the first
//! time the server lists a page and kept while the server runs (a page's
//! URL stays the same across reloads, disables and re-enables). It is bound
//! to one (plugin, page): it opens that plugin's files and that page's API
//! only, and only while the plugin is enabled and still declares the page.
//! Lookups compare the presented value with every capability in constant
//! time ([`crate::loopback::guard::token_matches`]), without stopping at
//! the first match.

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::files::encode_segment;
use crate::error::Result;
use crate::loopback::guard::token_matches;
use crate::plugins::host::PluginHost;

/// Which page of a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PageKey {
    /// `views[]` entry with this id.
    View(String),
    /// The `ui` floating panel.
    Panel,
}

/// One page as served now.
#[derive(Debug, Clone)]
pub struct Page {
    pub plugin: String,
    pub key: PageKey,
    pub title: Option<String>,
    pub icon: Option<String>,
    pub width: Option<u32>,
    /// `entry` as written (relative to the plugin folder).
    pub entry: String,
    /// The plugin folder (canonical).
    pub root: PathBuf,
}

struct Entry {
    plugin: String,
    key: PageKey,
    cap: String,
}

/// Capabilities issued by one server.
#[derive(Default)]
pub struct Capabilities(Mutex<Vec<Entry>>);

impl Capabilities {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The capability of (plugin, key), made on first use.
    pub fn of(&self, plugin: &str, key: &PageKey) -> Result<String> {
        let mut list = self.lock();
        if let Some(e) = list.iter().find(|e| e.plugin == plugin && &e.key == key) {
            return Ok(e.cap.clone());
        }
        let cap = crate::shared::rand::random_hex(32)?;
        list.push(Entry {
            plugin: plugin.to_string(),
            key: key.clone(),
            cap: cap.clone(),
        });
        Ok(cap)
    }

    /// The (plugin, key) `presented` opens, comparing with every entry in
    /// constant time.
    pub fn lookup(&self, presented: &str) -> Option<(String, PageKey)> {
        let list = self.lock();
        let mut found = None;
        for e in list.iter() {
            if token_matches(presented, &e.cap) && found.is_none() {
                found = Some((e.plugin.clone(), e.key.clone()));
            }
        }
        found
    }
}

/// Every page of every plugin that may run (enabled, not stopped by the
/// crash-loop breaker), sorted by plugin id, views in manifest order, then
/// the panel.
pub fn current(host: &PluginHost) -> Vec<Page> {
    let mut out = Vec::new();
    for id in host.plugin_ids() {
        if !host.is_enabled(&id) {
            continue;
        }
        let Some(m) = host.manifest(&id) else {
            continue;
        };
        for v in &m.views {
            out.push(Page {
                plugin: id.clone(),
                key: PageKey::View(v.id.clone()),
                title: v.title.clone(),
                icon: v.icon.clone(),
                width: v.width,
                entry: v.entry.clone(),
                root: m.root.clone(),
            });
        }
        if let Some(p) = &m.ui {
            out.push(Page {
                plugin: id.clone(),
                key: PageKey::Panel,
                title: p.title.clone(),
                icon: None,
                width: None,
                entry: p.entry.clone(),
                root: m.root.clone(),
            });
        }
    }
    out
}

/// The page (plugin, key) if it is served now.
pub fn find(host: &PluginHost, plugin: &str, key: &PageKey) -> Option<Page> {
    current(host)
        .into_iter()
        .find(|p| p.plugin == plugin && &p.key == key)
}

/// The URL path of `entry` under capability `cap` (`/v/<cap>/<entry>`,
/// each segment percent-encoded; a leading `./` dropped).
pub fn page_path(cap: &str, entry: &str) -> String {
    let mut path = format!("/v/{cap}");
    for seg in entry.split('/').filter(|s| !s.is_empty() && *s != ".") {
        path.push('/');
        path.push_str(&encode_segment(seg));
    }
    path
}

/// `{"plugin","id","title","icon","width","url"}` of a view, or
/// `{"plugin","title","url"}` of a panel.
pub fn page_json(page: &Page, url: &str) -> Value {
    match &page.key {
        PageKey::View(id) => json!({
            "plugin": page.plugin,
            "id": id,
            "title": page.title.clone().unwrap_or_else(|| id.clone()),
            "icon": page.icon,
            "width": page.width,
            "url": url,
        }),
        PageKey::Panel => json!({
            "plugin": page.plugin,
            "title": page.title.clone().unwrap_or_else(|| page.plugin.clone()),
            "url": url,
        }),
    }
}

#[cfg(test)]
mod tests;
