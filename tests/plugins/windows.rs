//! The plugin host on Windows with the real Windows Node: `node.exe` (the
//! `QC_TEST_NODE` path the Wine runner sets, else `node` on `PATH`) runs a
//! tiny plugin that answers a call over Node's IPC channel (a libuv-framed
//! named pipe), then leaves when it is unloaded; nothing it started may
//! outlive the unload (the plugin's Job Object).

use std::time::Duration;

use qc_test_support::plugins::*;
use qwen_companion::plugins::host::PluginEvent;
use serde_json::{json, Value};

const PLUGIN: &str = r#"
const path = require('path');
const fs = require('fs');
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const p = m.params || {};
  if (m.toolName === 'echo') return reply(m, text('hi ' + p.name), { pid: process.pid });
  if (m.toolName === 'spawn') {
    // A detached grandchild that would run forever on its own.
    const c = require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e6)'],
      { stdio: 'ignore', detached: true });
    return reply(m, text('spawned'), { child: c.pid });
  }
});
// The host closes the channel to unload: the plugin notes it and leaves.
process.on('disconnect', () => {
  fs.writeFileSync(path.join(process.env.PLUGIN_DATA_DIR, 'disconnected'), String(process.pid));
  process.exit(0);
});
"#;

fn host() -> TestHost {
    let plugins = Plugins::new("winnode");
    plugins.add(
        "test.win",
        json!({"tools": [tool("echo"), tool("spawn")]}),
        PLUGIN,
    );
    // Windows Node under Wine takes seconds to start.
    let node = std::env::var("QC_TEST_NODE").unwrap_or_else(|_| "node".into());
    TestHost::new(
        plugins,
        json!({"node": node, "startTimeoutMs": 60000, "callTimeoutMs": 60000, "killGraceMs": 5000}),
    )
}

fn detail(out: &qwen_companion::plugins::host::ToolOutput, key: &str) -> i32 {
    let d: &Value = out.details.as_ref().expect("details");
    d[key].as_i64().unwrap_or_else(|| panic!("no {key} in {d}")) as i32
}

#[test]
fn windows_node_answers_over_the_channel_and_unload_leaves_no_process() {
    let t = host();
    let out = t.call_ok("test.win", "echo", json!({"name": "wine"}));
    assert_eq!(text_of(&out), "hi wine");
    let pid = detail(&out, "pid");
    assert_eq!(t.host.running_pid("test.win"), Some(pid));
    assert!(alive(pid));
    // A second call on the same channel.
    let again = t.call_ok("test.win", "echo", json!({"name": "again"}));
    assert_eq!(text_of(&again), "hi again");
    assert_eq!(detail(&again, "pid"), pid);

    let child = detail(&t.call_ok("test.win", "spawn", json!({})), "child");
    assert!(alive(child), "the grandchild runs");

    t.host.unload("test.win").unwrap();
    // The plugin saw the channel close and left by itself (exit code 0),
    // and the host saw that exit.
    let exit = t.wait_event("exit", |e| matches!(e, PluginEvent::Exit { .. }));
    let PluginEvent::Exit { code, expected, .. } = exit else {
        unreachable!()
    };
    assert!(expected, "an unload is an expected exit");
    let mark = t.plugins.dir.join("data/test.win/disconnected");
    assert_eq!(
        std::fs::read_to_string(&mark).ok(),
        Some(pid.to_string()),
        "the plugin saw its channel close"
    );
    assert_eq!(code, Some(0), "the plugin left by itself");
    assert!(wait_dead(pid, Duration::from_secs(10)), "the plugin ended");
    assert!(
        wait_dead(child, Duration::from_secs(10)),
        "the Job Object ended the detached grandchild"
    );
    assert_eq!(t.host.running_pid("test.win"), None);
    t.finish();
}
