//! Helpers of the plugin runtime tests: temp plugin dirs with inline JS
//! plugins, an in-memory state store, event capture, /proc scans.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use qwen_companion::plugins::host::{
    CallError, CallOptions, Config, ErrorKind, PluginEvent, PluginHost, PluginStore, StoredPlugin,
    ToolOutput,
};
use qwen_companion::plugins::manifest;
use serde_json::{json, Map, Value};

/// JS helpers every inline plugin starts with.
pub const PRELUDE: &str = r#"
const reply = (m, content, details) =>
  process.send({ type: 'tool_result', requestId: m.requestId, content, details });
const text = (t) => [{ type: 'text', text: String(t) }];
const crypto = require('crypto');
const pendingHost = new Map();
function requestHost(capability, params) {
  const requestId = crypto.randomUUID();
  return new Promise((resolve, reject) => {
    pendingHost.set(requestId, { resolve, reject });
    process.send({ type: 'host_request', requestId, capability, params });
  });
}
process.on('message', (msg) => {
  if (msg && (msg.type === 'host_response' || msg.type === 'host_error')) {
    const p = pendingHost.get(msg.requestId);
    if (!p) return;
    pendingHost.delete(msg.requestId);
    if (msg.type === 'host_error') p.reject(new Error(msg.message));
    else p.resolve(msg.result);
  }
});
"#;

/// A temp plugins directory (`installed/<id>/`) removed on drop.
pub struct Plugins {
    pub dir: PathBuf,
    _tmp: crate::TempDir,
}

impl Plugins {
    pub fn new(name: &str) -> Plugins {
        let tmp = crate::TempDir::new(&format!("prt-{name}"));
        let dir = tmp.path().to_path_buf();
        std::fs::create_dir_all(dir.join("installed")).unwrap();
        Plugins { dir, _tmp: tmp }
    }

    /// Writes a plugin: `manifest` gets `id`, `name`, `version`, `main` filled
    /// in unless given; `js` is appended to [`PRELUDE`].
    pub fn add(&self, id: &str, mut manifest: Value, js: &str) -> PathBuf {
        let root = self.dir.join("installed").join(id);
        std::fs::create_dir_all(&root).unwrap();
        let m = manifest.as_object_mut().unwrap();
        m.entry("id").or_insert(json!(id));
        m.entry("name").or_insert(json!(format!("Test {id}")));
        m.entry("version").or_insert(json!("1.0.0"));
        m.entry("description").or_insert(json!("a test plugin"));
        m.entry("main").or_insert(json!("index.js"));
        m.entry("permissions").or_insert(json!([]));
        std::fs::write(
            root.join("manifest.json"),
            serde_json::to_string_pretty(&manifest).unwrap(),
        )
        .unwrap();
        std::fs::write(root.join("index.js"), format!("{PRELUDE}\n{js}")).unwrap();
        root
    }

    pub fn remove(&self, id: &str) {
        std::fs::remove_dir_all(self.dir.join("installed").join(id)).unwrap();
    }
}

/// A tool declaration with an open object schema.
pub fn tool(name: &str) -> Value {
    json!({"name": name, "summary": format!("{name} tool"), "description": format!("Test tool {name}."),
        "parameters": {"type": "object", "properties": {}}})
}

/// The state store of the tests: manifests from `installed/`, flags and
/// values in memory.
pub struct MemStore {
    pub dir: PathBuf,
    pub enabled: Mutex<HashMap<String, bool>>,
    pub config: Mutex<HashMap<String, Map<String, Value>>>,
}

impl MemStore {
    pub fn new(dir: &Path) -> Arc<MemStore> {
        Arc::new(MemStore {
            dir: dir.to_path_buf(),
            enabled: Mutex::new(HashMap::new()),
            config: Mutex::new(HashMap::new()),
        })
    }
}

impl PluginStore for MemStore {
    fn list(&self) -> qwen_companion::Result<Vec<StoredPlugin>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(self.dir.join("installed"))
            .unwrap()
            .flatten()
        {
            let (m, _warnings) = manifest::load_dir(&e.path())
                .unwrap_or_else(|p| panic!("bad test manifest {:?}: {p:?}", e.path()));
            let id = m.id.clone();
            out.push(StoredPlugin {
                manifest: Arc::new(m),
                enabled: *self.enabled.lock().unwrap().get(&id).unwrap_or(&true),
                config: self
                    .config
                    .lock()
                    .unwrap()
                    .get(&id)
                    .cloned()
                    .unwrap_or_default(),
            });
        }
        Ok(out)
    }
    fn set_enabled(&self, id: &str, enabled: bool) -> qwen_companion::Result<()> {
        self.enabled.lock().unwrap().insert(id.into(), enabled);
        Ok(())
    }
    fn set_config_value(&self, id: &str, key: &str, value: Value) -> qwen_companion::Result<()> {
        self.config
            .lock()
            .unwrap()
            .entry(id.into())
            .or_default()
            .insert(key.into(), value);
        Ok(())
    }
}

/// A host over a test dir with short timeouts, recording its events.
pub struct TestHost {
    pub host: PluginHost,
    pub store: Arc<MemStore>,
    pub events: Arc<Mutex<Vec<PluginEvent>>>,
    /// Notified after each event is recorded (see [`TestHost::wait_event`]).
    events_changed: Arc<Condvar>,
    pub plugins: Plugins,
}

pub fn config(dir: &Path, extra: Value) -> Config {
    let mut c = json!({
        "pluginsDir": dir,
        "callTimeoutMs": 5000,
        "killGraceMs": 300,
        "startTimeoutMs": 8000,
        "probeTimeoutMs": 400,
        "hostRequestTimeoutMs": 1500,
        "workspaceRoot": "/work/root",
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    Config::from_json(Some(&c.to_string())).unwrap()
}

impl TestHost {
    pub fn new(plugins: Plugins, extra: Value) -> TestHost {
        let store = MemStore::new(&plugins.dir);
        let host = PluginHost::with_store(config(&plugins.dir, extra), store.clone()).unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let events_changed = Arc::new(Condvar::new());
        let (ev, changed) = (events.clone(), events_changed.clone());
        host.set_event_sink(Some(Arc::new(move |e| {
            ev.lock().unwrap().push(e);
            changed.notify_all();
            None
        })));
        TestHost {
            host,
            store,
            events,
            events_changed,
            plugins,
        }
    }

    pub fn call(&self, id: &str, tool: &str, params: Value) -> Result<ToolOutput, CallError> {
        self.host
            .call_tool(id, tool, params, CallOptions::default())
            .map_err(|e| {
                eprintln!("call {id}/{tool} failed: {e}");
                e
            })
    }

    pub fn call_ok(&self, id: &str, tool: &str, params: Value) -> ToolOutput {
        self.call(id, tool, params)
            .unwrap_or_else(|e| panic!("{id}/{tool}: {e}"))
    }

    pub fn stat(&self, id: &str, name: &str) -> u64 {
        self.host.stats(id).unwrap()[name].as_u64().unwrap()
    }

    pub fn events(&self) -> Vec<PluginEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Waits until an event matching `f` was seen (woken by each event).
    pub fn wait_event(&self, what: &str, f: impl Fn(&PluginEvent) -> bool) -> PluginEvent {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = self.events.lock().unwrap();
        loop {
            if let Some(e) = events.iter().find(|e| f(e)) {
                return e.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {what} event: {events:?}");
            events = self.events_changed.wait_timeout(events, left).unwrap().0;
        }
    }

    /// Waits until a call of `tool` reached plugin `id` (the inline plugins
    /// of the runtime tests mark it with a `received-<tool>` file in their
    /// data dir before acting on it).
    pub fn wait_received(&self, id: &str, tool: &str) {
        let mark = self
            .plugins
            .dir
            .join("data")
            .join(id)
            .join(format!("received-{tool}"));
        assert!(
            wait_until(Duration::from_secs(10), || mark.exists()),
            "{id} never received {tool}"
        );
    }

    /// Every pid the host reported as started (`PluginEvent::Started`).
    pub fn started_pids(&self) -> Vec<i32> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                PluginEvent::Started { pid, .. } => Some(*pid),
                _ => None,
            })
            .collect()
    }

    /// Shuts down and checks no process of this test's plugins is left: on
    /// Unix no process with this test's plugin data dir in its environment;
    /// on Windows (no way to read another process's environment) every
    /// plugin process the host reported as started has ended.
    pub fn finish(self) {
        let dir = self.plugins.dir.clone();
        let started = self.started_pids();
        drop(self.host);
        #[cfg(unix)]
        {
            let _ = started;
            assert_no_process_of(&dir);
        }
        #[cfg(windows)]
        {
            let _ = dir;
            assert_all_die(&started, "plugin processes left after the host was dropped");
        }
    }
}

/// The error kind of a result (panics on success).
pub fn kind<T: std::fmt::Debug>(r: Result<T, CallError>) -> (ErrorKind, CallError) {
    let e = r.expect_err("the call should fail");
    (e.kind, e)
}

/// Pids whose environment contains `needle` (`NAME=value` or a prefix of it).
/// Reads `/proc/<pid>/environ`: Unix only (Windows has no way to read another
/// process's environment; its tests follow the pids the host reports).
#[cfg(unix)]
pub fn pids_with_env(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env
                .split(|&b| b == 0)
                .any(|v| v.starts_with(needle.as_bytes()))
            {
                out.push(pid);
            }
        }
    }
    out
}

/// Every plugin process of a test has `PLUGIN_DATA_DIR=<dir>/data/…`; none
/// may be left (waits briefly for SIGKILLed ones to vanish).
#[cfg(unix)]
pub fn assert_no_process_of(dir: &Path) {
    let needle = format!("PLUGIN_DATA_DIR={}/data/", dir.display());
    if wait_until(Duration::from_secs(5), || pids_with_env(&needle).is_empty()) {
        return;
    }
    let left = pids_with_env(&needle);
    for p in &left {
        kill_hard(*p);
    }
    panic!("plugin processes left behind: {left:?}");
}

/// Ends `pid` at once (SIGKILL; TerminateProcess on Windows): cleanup of a
/// test's own leftovers before it fails.
pub fn kill_hard(pid: i32) {
    #[cfg(unix)]
    // SAFETY: kill(2) takes plain integers; the pid is a process this test
    // started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::CloseHandle;
        use windows_sys::Win32::System::Threading::{
            OpenProcess, TerminateProcess, PROCESS_TERMINATE,
        };
        // SAFETY: OpenProcess takes plain values; the handle it returns is
        // used once and closed here.
        unsafe {
            let h = OpenProcess(PROCESS_TERMINATE, 0, pid as u32);
            if !h.is_null() {
                TerminateProcess(h, 9);
                CloseHandle(h);
            }
        }
    }
}

/// Whether `pid` is a live process. On Windows: it can be opened and has no
/// exit code yet.
#[cfg(windows)]
pub fn alive(pid: i32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: OpenProcess and GetExitCodeProcess take plain values and a
    // pointer to a local; the handle is closed before returning.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid as u32);
        if h.is_null() {
            return false;
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(h, &mut code) != 0;
        CloseHandle(h);
        ok && code == STILL_ACTIVE as u32
    }
}

#[cfg(unix)]
pub fn alive(pid: i32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

pub fn wait_dead(pid: i32, limit: Duration) -> bool {
    wait_until(limit, || !alive(pid))
}

pub fn text_of(out: &ToolOutput) -> String {
    out.content[0]["text"].as_str().unwrap().to_string()
}

/// The repository's fixture plugins (`tests/plugins/fixtures/<name>`).
pub fn fixture(name: &str) -> PathBuf {
    crate::repo_root().join("tests/plugins/fixtures").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_dir(&e.path(), &dest);
        } else if t.is_file() {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

impl Plugins {
    /// Installs a copy of a fixture plugin (as `installed/<its id>`); returns the id.
    pub fn add_fixture(&self, path: &Path) -> String {
        let m: Value =
            serde_json::from_slice(&std::fs::read(path.join("manifest.json")).unwrap()).unwrap();
        let id = m["id"].as_str().unwrap().to_string();
        copy_dir(path, &self.dir.join("installed").join(&id));
        id
    }
}

/// Asserts every pid dies within 3 s; on failure kills them all first, so
/// a failing test leaves nothing running.
pub fn assert_all_die(pids: &[i32], what: &str) {
    let survivors: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !wait_dead(*p, Duration::from_secs(3)))
        .collect();
    if !survivors.is_empty() {
        for p in pids {
            kill_hard(*p);
        }
        panic!("{what}: {survivors:?} still running");
    }
}

pub use crate::{wait_until, TempDir};
