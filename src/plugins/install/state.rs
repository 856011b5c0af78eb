//! `<dir>/state.json`: per plugin, whether it is enabled and the user's
//! configuration values.
//!
//! ```json
//! { "plugins": { "com.example.full": { "enabled": false, "config": { "verbose": true } } } }
//! ```
//! A missing file, plugin entry, `enabled` or `config` means the default:
//! enabled, no values (the manifest's `defaultValue`s apply). The file is
//! written atomically (0600, fsynced); fields this host does not know are
//! kept as they are.
//!
//! **A corrupt file is never overwritten.** Reading it fails with
//! `corrupt_state`, naming the file and the parse error, and every
//! operation that needs it (listing included) refuses until the user fixes
//! or removes it, or calls [`reset_state`], which renames it to
//! `state.json.corrupt-<unix time>-<hex>` and starts again from the
//! defaults. Refusing is deliberate: guessing defaults would silently
//! re-enable plugins the user disabled.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{check_id, check_plugins_dir, codes, DirLock, InstallError, DATA_DIR, INSTALLED_DIR};
use crate::plugins::manifest::{self, Manifest, Problem};
use crate::shared::fs::{write_atomic, AtomicWrite};

/// The state file's name inside the plugins directory.
pub const STATE_FILE: &str = "state.json";
/// Largest state file read.
pub const MAX_STATE_BYTES: u64 = 4 << 20;

/// One folder of `<dir>/installed/`, with its state.
#[derive(Debug, Clone)]
pub struct InstalledPlugin {
    /// The folder's name (the manifest's id when it loads).
    pub id: String,
    /// `<dir>/installed/<id>`.
    pub path: PathBuf,
    /// `<dir>/data/<id>` (`PLUGIN_DATA_DIR`).
    pub data_dir: PathBuf,
    /// `None` when the manifest no longer validates (see `load_error`).
    pub manifest: Option<Manifest>,
    pub warnings: Vec<Problem>,
    /// Why the installed manifest does not load.
    pub load_error: Option<Vec<Problem>>,
    pub enabled: bool,
    /// The stored configuration values (not the defaults; see
    /// [`Manifest::effective_config`]).
    pub config: Map<String, Value>,
}

impl InstalledPlugin {
    /// `{id, name, version, enabled, tools: [{name, modelVisible}], …,
    /// manifest}` from [`Manifest::summary_json`] (`manifest`: the installed
    /// manifest object as written); for a broken plugin `{id, enabled, tools:
    /// [], error: {code: "broken_plugin", message, problems}}`.
    pub fn summary_json(&self) -> Value {
        match (&self.manifest, &self.load_error) {
            (Some(m), _) => {
                let mut v = m.summary_json();
                v["enabled"] = json!(self.enabled);
                v["manifest"] = Value::Object((*m.document).clone());
                v
            }
            (None, problems) => {
                let problems = problems.clone().unwrap_or_default();
                json!({
                    "id": self.id,
                    "enabled": self.enabled,
                    "tools": [],
                    "error": {
                        "code": codes::BROKEN_PLUGIN,
                        "message": format!("the installed manifest of {} does not validate", self.id),
                        "problems": problems,
                    }
                })
            }
        }
    }
}

/// The state document, validated on load, written back whole.
struct State {
    doc: Map<String, Value>,
}

impl State {
    fn plugins(&self) -> Option<&Map<String, Value>> {
        self.doc.get("plugins").and_then(Value::as_object)
    }
    fn entry(&self, id: &str) -> Option<&Map<String, Value>> {
        self.plugins()?.get(id)?.as_object()
    }
    fn enabled(&self, id: &str) -> bool {
        self.entry(id)
            .and_then(|e| e.get("enabled"))
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }
    fn config(&self, id: &str) -> Map<String, Value> {
        self.entry(id)
            .and_then(|e| e.get("config"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }
    fn entry_mut(&mut self, id: &str) -> &mut Map<String, Value> {
        let plugins = self
            .doc
            .entry("plugins")
            .or_insert_with(|| Value::Object(Map::new()));
        if !plugins.is_object() {
            *plugins = Value::Object(Map::new());
        }
        let plugins = plugins.as_object_mut().expect("made an object above");
        let e = plugins
            .entry(id.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !e.is_object() {
            *e = Value::Object(Map::new());
        }
        e.as_object_mut().expect("made an object above")
    }
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

fn corrupt(path: &Path, why: String) -> InstallError {
    InstallError::new(
        codes::CORRUPT_STATE,
        format!(
            "{} is corrupt ({why}); it was left as it is: fix or delete it, or reset it (it is then kept as {STATE_FILE}.corrupt-…)",
            path.display()
        ),
    )
}

fn read_state(dir: &Path) -> Result<State, InstallError> {
    let path = state_path(dir);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State { doc: Map::new() }),
        Err(e) => return Err(InstallError::io(&format!("stat {}", path.display()), e)),
    };
    if !meta.file_type().is_file() {
        return Err(corrupt(&path, "not a regular file".into()));
    }
    let mut bytes = Vec::new();
    fs::File::open(&path)
        .and_then(|f| f.take(MAX_STATE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| InstallError::io(&format!("read {}", path.display()), e))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(corrupt(
            &path,
            format!("larger than {MAX_STATE_BYTES} bytes"),
        ));
    }
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| {
        corrupt(
            &path,
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
    })?;
    let Value::Object(doc) = doc else {
        return Err(corrupt(&path, "the top level is not an object".into()));
    };
    match doc.get("plugins") {
        None => {}
        Some(Value::Object(plugins)) => {
            for (id, e) in plugins {
                let Some(e) = e.as_object() else {
                    return Err(corrupt(&path, format!("/plugins/{id} is not an object")));
                };
                if e.get("enabled").is_some_and(|v| !v.is_boolean()) {
                    return Err(corrupt(
                        &path,
                        format!("/plugins/{id}/enabled is not a boolean"),
                    ));
                }
                if e.get("config").is_some_and(|v| !v.is_object()) {
                    return Err(corrupt(
                        &path,
                        format!("/plugins/{id}/config is not an object"),
                    ));
                }
            }
        }
        Some(_) => return Err(corrupt(&path, "/plugins is not an object".into())),
    }
    Ok(State { doc })
}

fn write_state(dir: &Path, state: &State) -> Result<(), InstallError> {
    let mut text = serde_json::to_string_pretty(&state.doc)
        .map_err(|e| InstallError::new(codes::IO, format!("serialize the state: {e}")))?;
    text.push('\n');
    write_atomic(
        &state_path(dir),
        text.as_bytes(),
        AtomicWrite::PRIVATE_DURABLE,
    )?;
    Ok(())
}

/// Read-modify-write of the state under the directory lock.
fn update(dir: &Path, f: impl FnOnce(&mut State)) -> Result<(), InstallError> {
    check_plugins_dir(dir)?;
    let _lock = DirLock::exclusive(dir)?;
    update_locked(dir, f)
}

fn update_locked(dir: &Path, f: impl FnOnce(&mut State)) -> Result<(), InstallError> {
    let mut state = read_state(dir)?;
    f(&mut state);
    write_state(dir, &state)
}

/// Drops `id`'s state entry; the caller holds the directory lock.
pub(crate) fn forget_locked(dir: &Path, id: &str) -> Result<(), InstallError> {
    let state = read_state(dir)?;
    if state.entry(id).is_none() {
        return Ok(());
    }
    update_locked(dir, |s| {
        if let Some(p) = s.doc.get_mut("plugins").and_then(Value::as_object_mut) {
            p.remove(id);
        }
    })
}

fn installed_path(dir: &Path, id: &str) -> Result<PathBuf, InstallError> {
    check_id(id)?;
    let path = dir.join(INSTALLED_DIR).join(id);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_dir() => Ok(path),
        _ => Err(InstallError::new(
            codes::NOT_FOUND,
            format!("no plugin {id:?} is installed in {}", dir.display()),
        )),
    }
}

fn load(dir: &Path, id: &str, path: PathBuf, state: &State) -> InstalledPlugin {
    let (manifest, warnings, load_error) = match manifest::load_dir(&path) {
        Ok((m, _)) if m.id != id => (
            None,
            Vec::new(),
            Some(vec![manifest::problem(
                "/id",
                format!(
                    "the manifest's id {:?} does not match its folder {INSTALLED_DIR}/{id}",
                    m.id
                ),
            )]),
        ),
        Ok((m, w)) => (Some(m), w, None),
        Err(p) => (None, Vec::new(), Some(p)),
    };
    InstalledPlugin {
        id: id.to_string(),
        path,
        data_dir: dir.join(DATA_DIR).join(id),
        manifest,
        warnings,
        load_error,
        enabled: state.enabled(id),
        config: state.config(id),
    }
}

/// Every installed plugin, sorted by id, with its state. A folder whose
/// manifest no longer validates is listed with `load_error`; a folder whose
/// name is not a plugin id is listed as broken too. No plugins directory
/// means no plugins.
pub fn list(dir: &Path) -> Result<Vec<InstalledPlugin>, InstallError> {
    let root = dir.join(INSTALLED_DIR);
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(InstallError::io(&format!("read {}", root.display()), e)),
    };
    let state = read_state(dir)?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| InstallError::io(&format!("read {}", root.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if !is_dir || name.starts_with('.') {
            continue;
        }
        if let Some(why) = manifest::id_error(&name) {
            out.push(InstalledPlugin {
                id: name.clone(),
                path: entry.path(),
                data_dir: dir.join(DATA_DIR).join(&name),
                manifest: None,
                warnings: Vec::new(),
                load_error: Some(vec![manifest::problem(
                    "",
                    format!("the folder name {name:?} is not a plugin id: {why}"),
                )]),
                enabled: false,
                config: Map::new(),
            });
            continue;
        }
        out.push(load(dir, &name, entry.path(), &state));
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// [`list`] as the JSON array `[{id, name, version, enabled, tools: [{name, modelVisible}], …}]`.
pub fn list_json(dir: &Path) -> Result<Value, InstallError> {
    Ok(Value::Array(
        list(dir)?
            .iter()
            .map(InstalledPlugin::summary_json)
            .collect(),
    ))
}

/// The installed plugin `id` with its state.
pub fn get(dir: &Path, id: &str) -> Result<InstalledPlugin, InstallError> {
    let path = installed_path(dir, id)?;
    let state = read_state(dir)?;
    Ok(load(dir, id, path, &state))
}

/// Enables or disables the installed plugin `id`.
pub fn set_enabled(dir: &Path, id: &str, enabled: bool) -> Result<(), InstallError> {
    installed_path(dir, id)?;
    update(dir, |s| {
        s.entry_mut(id).insert("enabled".into(), json!(enabled));
    })
}

/// Stores the configuration value `key` of plugin `id`, checked against the
/// manifest's `configuration` entry: an unknown key is `not_found`, a value
/// of the wrong type `invalid_config`. `Value::Null` removes the stored
/// value (the default applies again). A plugin whose manifest no longer
/// validates is `broken_plugin`.
pub fn set_config_value(dir: &Path, id: &str, key: &str, value: Value) -> Result<(), InstallError> {
    let path = installed_path(dir, id)?;
    let m = match manifest::load_dir(&path) {
        Ok((m, _)) => m,
        Err(problems) => {
            return Err(InstallError {
                code: codes::BROKEN_PLUGIN,
                message: format!("the installed manifest of {id} does not validate"),
                problems,
            })
        }
    };
    let Some(entry) = m.config_entry(key) else {
        let known: Vec<&str> = m.configuration.iter().map(|c| c.id.as_str()).collect();
        return Err(InstallError::new(
            codes::NOT_FOUND,
            format!(
                "{id} has no configuration entry {key:?} (it has: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    };
    if !value.is_null() && !entry.kind.accepts(&value) {
        let expected = match entry.kind {
            manifest::ConfigKind::Boolean => "a boolean",
            manifest::ConfigKind::Number => "a number",
            _ => "a string",
        };
        return Err(InstallError::new(
            codes::INVALID_CONFIG,
            format!(
                "{key} of {id} is a {} setting: expected {expected}, got {value}",
                entry.kind.name()
            ),
        ));
    }
    update(dir, |s| {
        let e = s.entry_mut(id);
        let config = e
            .entry("config")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(c) = config.as_object_mut() {
            if value.is_null() {
                c.remove(key);
            } else {
                c.insert(key.to_string(), value);
            }
        }
    })
}

/// The stored configuration values of the installed plugin `id` (without
/// defaults; [`Manifest::effective_config`] adds them).
pub fn config_values(dir: &Path, id: &str) -> Result<Map<String, Value>, InstallError> {
    installed_path(dir, id)?;
    Ok(read_state(dir)?.config(id))
}

/// Moves a (corrupt) `state.json` aside as `state.json.corrupt-<unix
/// time>-<hex>` so the defaults apply again; returns the new name, or None
/// when there was no state file.
pub fn reset_state(dir: &Path) -> Result<Option<PathBuf>, InstallError> {
    check_plugins_dir(dir)?;
    let _lock = DirLock::exclusive(dir)?;
    let path = state_path(dir);
    if fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let aside = dir.join(format!(
        "{STATE_FILE}.corrupt-{secs}-{}",
        crate::shared::rand::random_hex(3)?
    ));
    fs::rename(&path, &aside)
        .map_err(|e| InstallError::io(&format!("rename {}", path.display()), e))?;
    Ok(Some(aside))
}
