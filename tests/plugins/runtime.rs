//! The plugin runtime with real `node`: calls, errors, hostile plugins,
//! host requests, events, lifecycle, and no process left behind.

mod fixtures;

mod hostile;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qc_test_support::plugins::*;
use qwen_companion::plugins::host::{
    CallOptions, ErrorKind, HostAnswer, HostRequest, ParsedDocument, PluginEvent,
};
use qwen_companion::plugins::process::TAG_VAR;
use serde_json::{json, Value};

/// A plugin with one tool per behaviour.
const BASIC: &str = r#"
// Marks in the plugin's data dir that a call reached it (see `received`).
const received = (tool) =>
  require('fs').writeFileSync(process.env.PLUGIN_DATA_DIR + '/received-' + tool, '');
process.on('message', async (m) => {
  if (!m || m.type !== 'call_tool') return;
  const p = m.params || {};
  switch (m.toolName) {
    case 'strict':
      return reply(m, text('strict ' + p.name));
    case 'echo':
      return reply(m, text('hi ' + (p.name || '')), {
        params: p, context: m.context, pid: process.pid, env: process.env, cwd: process.cwd() });
    case 'fail':
      return process.send({ type: 'tool_error', requestId: m.requestId, message: 'boom: ' + p.why });
    case 'notarray':
      return process.send({ type: 'tool_result', requestId: m.requestId, content: 'oops' });
    case 'slow':
      received(m.toolName);
      return setTimeout(() => reply(m, text('late')), p.ms);
    case 'wrongids':
      process.send({ type: 'tool_result', requestId: 'made-up', content: [] });
      reply(m, text('first'));
      reply(m, text('again'));
      return;
    case 'crash':
      process.stderr.write('fatal: the thing broke\n');
      process.exit(7);
    case 'garbage': {
      // A line that is not JSON. On Windows the channel is framed (libuv's
      // 16-byte header, flags HAS_DATA, before every write): one frame for it.
      let raw = Buffer.from('this is not json\n');
      if (process.platform === 'win32') {
        const h = Buffer.alloc(16);
        h.writeUInt32LE(1, 0);
        h.writeUInt32LE(raw.length, 8);
        raw = Buffer.concat([h, raw]);
      }
      require('fs').writeSync(3, raw);
      process.send({ type: 'no_such_type' });
      process.send({ cmd: 'NODE_SOMETHING' });
      return reply(m, text('x\ud800y\udc00z'));
    }
    case 'push':
      process.send({ type: 'ui_push', channel: 'board', payload: { n: p.n } });
      process.send({ type: 'ui_push', payload: 'no channel' });
      return reply(m, text('pushed'));
    case 'host':
      try {
        const r = await requestHost(p.capability, p.params);
        return reply(m, text('ok'), { result: r });
      } catch (e) {
        return reply(m, text('err'), { error: e.message });
      }
    case 'big':
      return reply(m, text('x'.repeat(p.n)));
    case 'hang':
      received(m.toolName);
      for (;;) {}
  }
});
"#;

fn basic_manifest(extra: Value) -> Value {
    let mut tools: Vec<Value> = [
        "echo", "fail", "notarray", "slow", "wrongids", "crash", "garbage", "push", "host", "big",
        "hang",
    ]
    .iter()
    .map(|n| tool(n))
    .collect();
    tools.push(
        json!({"name": "strict", "summary": "s", "description": "A strict tool.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"},
        "count": {"type": "integer", "minimum": 1}}, "required": ["name"]}}),
    );
    let mut m = json!({ "tools": tools });
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    m
}

fn basic(name: &str, extra_manifest: Value, extra_config: Value) -> TestHost {
    let plugins = Plugins::new(name);
    plugins.add("test.basic", basic_manifest(extra_manifest), BASIC);
    TestHost::new(plugins, extra_config)
}

#[test]
fn call_tool_roundtrip_context_and_env() {
    // The host process has NODE_OPTIONS and a secret: neither may reach a plugin.
    std::env::set_var("NODE_OPTIONS", "--max-old-space-size=64");
    std::env::set_var("QC_PRT_SECRET", "hunter2");
    let t = basic("echo", json!({}), json!({}));
    let out = t.call_ok("test.basic", "echo", json!({"name": "Ada"}));
    assert_eq!(text_of(&out), "hi Ada");
    let d = out.details.unwrap();
    assert_eq!(d["params"], json!({"name": "Ada"}));
    // No configuration declared: context has only cwd (the workspace root).
    assert_eq!(d["context"], json!({"cwd": "/work/root"}));
    let env = d["env"].as_object().unwrap();
    assert!(!env.contains_key("NODE_OPTIONS"), "NODE_OPTIONS leaked");
    assert!(!env.contains_key("QC_PRT_SECRET"), "a host variable leaked");
    assert!(!env.contains_key("NODE_UNIQUE_ID"));
    assert_eq!(env["PLUGIN_ID"], "test.basic");
    let data = t.plugins.dir.join("data").join("test.basic");
    assert_eq!(env["PLUGIN_DATA_DIR"], json!(data.to_str().unwrap()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&data).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }
    assert!(env.contains_key(TAG_VAR));
    assert!(env.contains_key("PATH"));
    let root = t.plugins.dir.join("installed").join("test.basic");
    assert_eq!(
        d["cwd"],
        json!(qc_test_support::plain(root.canonicalize().unwrap())
            .to_str()
            .unwrap())
    );
    // Per-call cwd; the process is reused.
    let out2 = t
        .host
        .call_tool(
            "test.basic",
            "echo",
            json!({}),
            CallOptions {
                cwd: Some("/elsewhere".into()),
                timeout: None,
            },
        )
        .unwrap();
    let d2 = out2.details.unwrap();
    assert_eq!(d2["context"]["cwd"], "/elsewhere");
    assert_eq!(d2["pid"], d["pid"]);
    assert_eq!(t.stat("test.basic", "starts"), 1);
    assert!(t
        .events()
        .iter()
        .any(|e| matches!(e, PluginEvent::Started { plugin, .. } if plugin == "test.basic")));
    std::env::remove_var("QC_PRT_SECRET");
    t.finish();
}

#[test]
fn refusals_happen_before_any_spawn() {
    let t = basic("refuse", json!({}), json!({}));
    // Schema errors list every problem with its instance path.
    let (k, e) = kind(t.call("test.basic", "strict", json!({"count": 0})));
    assert_eq!(k, ErrorKind::Schema);
    let paths: Vec<&str> = e.schema_errors.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"/count"), "{e:?}");
    assert!(paths.contains(&""), "{e:?}"); // missing "name" is reported at the root
    assert!(e.message.contains("/count"), "{}", e.message);
    let (k, _) = kind(t.call("test.basic", "strict", json!("not an object")));
    assert_eq!(k, ErrorKind::Schema);
    let (k, e) = kind(t.call("test.basic", "nope", json!({})));
    assert_eq!(k, ErrorKind::UnknownTool);
    assert!(e.message.contains("nope"));
    let (k, _) = kind(t.call("no.such", "echo", json!({})));
    assert_eq!(k, ErrorKind::NotFound);
    t.host.disable("test.basic").unwrap();
    let (k, _) = kind(t.call("test.basic", "echo", json!({})));
    assert_eq!(k, ErrorKind::Disabled);
    assert_eq!(t.stat("test.basic", "starts"), 0, "nothing may be spawned");
    assert!(t.host.running_pid("test.basic").is_none());
    t.host.enable("test.basic").unwrap();
    t.call_ok("test.basic", "strict", json!({"name": "x", "count": 2}));
    assert_eq!(t.stat("test.basic", "starts"), 1);
    t.finish();
}

#[test]
fn tool_errors_protocol_errors_and_counted_replies() {
    let t = basic("errors", json!({}), json!({}));
    let (k, e) = kind(t.call("test.basic", "fail", json!({"why": "disk full"})));
    assert_eq!(k, ErrorKind::ToolError);
    assert_eq!(e.plugin_message.as_deref(), Some("boom: disk full"));
    assert!(e.message.contains("boom: disk full"));
    let (k, e) = kind(t.call("test.basic", "notarray", json!({})));
    assert_eq!(k, ErrorKind::Protocol);
    assert!(e.message.contains("array"), "{}", e.message);
    // One made-up id, one repeated reply: ignored, counted.
    let out = t.call_ok("test.basic", "wrongids", json!({}));
    assert_eq!(text_of(&out), "first");
    // A later call is served by the same process and its answers are in order.
    t.call_ok("test.basic", "echo", json!({}));
    assert_eq!(t.stat("test.basic", "unknownReplies"), 1);
    assert_eq!(t.stat("test.basic", "duplicateReplies"), 1);
    // Garbage on the channel, unknown types and NODE_* frames never hurt;
    // lone surrogates arrive as U+FFFD.
    let out = t.call_ok("test.basic", "garbage", json!({}));
    assert_eq!(text_of(&out), "x\u{fffd}y\u{fffd}z");
    assert_eq!(t.stat("test.basic", "invalidLines"), 1);
    assert!(t.stat("test.basic", "ignoredMessages") >= 1);
    assert!(t.stat("test.basic", "internalMessages") >= 2); // the start probe's NACK + NODE_SOMETHING
    assert_eq!(t.stat("test.basic", "starts"), 1);
    t.finish();
}

#[test]
fn slow_plugin_times_out_but_is_kept() {
    let t = basic("slow", json!({}), json!({}));
    let pid = t.call_ok("test.basic", "echo", json!({})).details.unwrap()["pid"].clone();
    let start = Instant::now();
    let r = t.host.call_tool(
        "test.basic",
        "slow",
        json!({"ms": 1500}),
        CallOptions {
            cwd: None,
            timeout: Some(Duration::from_millis(300)),
        },
    );
    let (k, e) = kind(r);
    assert_eq!(k, ErrorKind::Timeout);
    assert!(e.message.contains("300 ms"), "{}", e.message);
    assert!(e.message.contains("still running"), "{}", e.message);
    assert!(start.elapsed() < Duration::from_millis(1400));
    let again = t.call_ok("test.basic", "echo", json!({})).details.unwrap()["pid"].clone();
    assert_eq!(pid, again, "a responsive plugin is kept");
    // Its late answer is counted, not delivered anywhere.
    assert!(
        wait_until(Duration::from_secs(5), || t
            .stat("test.basic", "lateReplies")
            != 0),
        "{}",
        t.host.stats("test.basic").unwrap()
    );
    assert_eq!(t.stat("test.basic", "lateReplies"), 1);
    assert_eq!(t.stat("test.basic", "unknownReplies"), 0);
    assert_eq!(t.stat("test.basic", "timeouts"), 1);
    t.finish();
}

#[test]
fn a_dropped_call_is_abandoned() {
    // An MCP client's cancellation drops the call's future: the request is
    // given up at once (its late reply is counted as late), the plugin kept.
    let t = basic("dropped", json!({}), json!({}));
    let pid = t.call_ok("test.basic", "echo", json!({})).details.unwrap()["pid"].clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gave_up = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(150),
            t.host.call_tool_async(
                "test.basic",
                "slow",
                json!({"ms": 400}),
                CallOptions::default(),
            ),
        )
        .await
        .is_err()
    });
    assert!(gave_up, "the slow call must still be running at 150 ms");
    assert!(
        wait_until(Duration::from_secs(5), || t
            .stat("test.basic", "lateReplies")
            != 0),
        "{}",
        t.host.stats("test.basic").unwrap()
    );
    assert_eq!(t.stat("test.basic", "timeouts"), 0);
    assert_eq!(t.stat("test.basic", "unknownReplies"), 0);
    let again = t.call_ok("test.basic", "echo", json!({})).details.unwrap()["pid"].clone();
    assert_eq!(pid, again, "the plugin is kept");
    t.finish();
}

#[test]
fn busy_plugin_ignoring_sigterm_is_killed_and_restarted() {
    let plugins = Plugins::new("busy");
    plugins.add(
        "test.basic",
        basic_manifest(json!({})),
        &format!("process.on('SIGTERM', () => {{}});\n{BASIC}"),
    );
    let t = TestHost::new(plugins, json!({"callTimeoutMs": 300}));
    let pid = t.call_ok("test.basic", "echo", json!({})).details.unwrap()["pid"]
        .as_i64()
        .unwrap() as i32;
    let (k, e) = kind(t.call("test.basic", "hang", json!({})));
    assert_eq!(k, ErrorKind::Timeout);
    assert!(e.message.contains("stopped"), "{}", e.message);
    assert!(
        wait_dead(pid, Duration::from_secs(3)),
        "the stuck plugin must be killed"
    );
    let out = t.call_ok("test.basic", "echo", json!({}));
    let new_pid = out.details.unwrap()["pid"].as_i64().unwrap() as i32;
    assert_ne!(new_pid, pid);
    assert_eq!(t.stat("test.basic", "starts"), 2);
    assert_eq!(
        t.stat("test.basic", "unexpectedExits"),
        0,
        "a kill is no crash"
    );
    // Unload of a plugin that ignores SIGTERM still ends it.
    t.host.unload("test.basic").unwrap();
    assert!(wait_dead(new_pid, Duration::from_secs(3)));
    let exit = t.wait_event("exit", |e| {
        matches!(e, PluginEvent::Exit { expected: true, .. })
    });
    assert!(matches!(exit, PluginEvent::Exit { .. }));
    t.finish();
}

#[test]
fn crash_mid_call_fails_at_once_with_status_and_stderr() {
    let t = basic("crash", json!({}), json!({"callTimeoutMs": 20000}));
    let start = Instant::now();
    let (k, e) = kind(t.call("test.basic", "crash", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(e.exit.unwrap().code, Some(7));
    assert!(e
        .stderr_tail
        .as_deref()
        .unwrap()
        .contains("fatal: the thing broke"));
    assert!(e.message.contains("exit code 7"), "{}", e.message);
    assert!(e.message.contains("fatal: the thing broke"));
    let ev = t.wait_event("exit", |e| matches!(e, PluginEvent::Exit { .. }));
    match ev {
        PluginEvent::Exit {
            code,
            expected,
            stderr_tail,
            ..
        } => {
            assert_eq!(code, Some(7));
            assert!(!expected);
            assert!(stderr_tail.contains("fatal"));
        }
        _ => unreachable!(),
    }
    // The next call starts a fresh process.
    t.call_ok("test.basic", "echo", json!({}));
    assert_eq!(t.stat("test.basic", "unexpectedExits"), 1);
    t.finish();
}

#[test]
// Finds the grandchild by its environment in /proc.
#[cfg(unix)]
fn exit_with_attached_grandchild_holding_stdout_fails_at_once() {
    let plugins = Plugins::new("grandout");
    plugins.add(
        "test.gc",
        json!({"tools": [tool("go")]}),
        r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const { spawn } = require('child_process');
  // Inherits stdout/stderr: the pipes stay open after the plugin dies.
  spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: ['ignore', 'inherit', 'inherit'] });
  setTimeout(() => process.exit(3), 100);
});
"#,
    );
    let t = TestHost::new(plugins, json!({"callTimeoutMs": 20000}));
    let start = Instant::now();
    let (k, e) = kind(t.call("test.gc", "go", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert_eq!(e.exit.unwrap().code, Some(3));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // The grandchild is cleaned up after the exit, even without an unload.
    let needle = format!("PLUGIN_DATA_DIR={}/data/", t.plugins.dir.display());
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_env(&needle).is_empty()),
        "grandchild left after the plugin's exit"
    );
    t.finish();
}

#[test]
fn oversized_message_fails_too_large_and_kills() {
    let t = basic("big", json!({}), json!({"maxMessageBytes": 65536}));
    let out = t.call_ok("test.basic", "big", json!({"n": 1000}));
    assert_eq!(text_of(&out).len(), 1000);
    let pid = t.host.running_pid("test.basic").unwrap();
    let (k, e) = kind(t.call("test.basic", "big", json!({"n": 300000})));
    assert_eq!(k, ErrorKind::TooLarge);
    assert!(e.message.contains("65536"), "{}", e.message);
    assert!(wait_dead(pid, Duration::from_secs(3)));
    t.call_ok("test.basic", "echo", json!({}));
    t.finish();
}

#[test]
fn exit_right_after_a_big_send_discards_the_partial_line() {
    let plugins = Plugins::new("exitbig");
    plugins.add(
        "test.eb",
        json!({"tools": [tool("go")]}),
        r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  process.send({ type: 'tool_result', requestId: m.requestId, content: [{ type: 'text', text: 'y'.repeat(4 << 20) }] });
  process.exit(0);
});
"#,
    );
    let t = TestHost::new(plugins, json!({}));
    let (k, e) = kind(t.call("test.eb", "go", json!({})));
    assert_eq!(k, ErrorKind::Exited, "{e}");
    assert_eq!(e.exit.unwrap().code, Some(0));
    assert_eq!(
        t.stat("test.eb", "invalidLines"),
        0,
        "a partial line is never parsed"
    );
    t.finish();
}

#[test]
fn host_requests_are_always_answered() {
    let plugins = Plugins::new("hostreq");
    plugins.add("test.basic", basic_manifest(json!({})), BASIC);
    plugins.add(
        "test.notify",
        basic_manifest(json!({"permissions": ["notifications"]})),
        BASIC,
    );
    let t = TestHost::new(plugins, json!({}));
    let host_call = |id: &str, cap: &str, params: Value| {
        t.call_ok(id, "host", json!({"capability": cap, "params": params}))
            .details
            .unwrap()
    };
    // Without the permission: refused, handler not called.
    let called = Arc::new(Mutex::new(Vec::<HostRequest>::new()));
    let d = host_call("test.basic", "show_notification", json!({"title": "t"}));
    assert!(
        d["error"].as_str().unwrap().contains("notifications"),
        "{d}"
    );
    // Library default with the permission.
    let d = host_call("test.notify", "show_notification", json!({"title": "t"}));
    assert_eq!(
        d["result"],
        json!({"shown": false, "reason": "unsupported"})
    );
    // A registered handler answering now.
    let c2 = called.clone();
    t.host.set_capability(
        "show_notification",
        Some(Arc::new(move |r: &HostRequest| {
            c2.lock().unwrap().push(r.clone());
            HostAnswer::Now(Ok(json!({"shown": true})))
        })),
    );
    let d = host_call(
        "test.notify",
        "show_notification",
        json!({"title": "3 todos"}),
    );
    assert_eq!(d["result"], json!({"shown": true}));
    let d = host_call("test.basic", "show_notification", json!({"title": "x"}));
    assert!(d["error"].is_string());
    {
        let seen = called.lock().unwrap();
        assert_eq!(seen.len(), 1, "no handler call without the permission");
        assert_eq!(seen[0].plugin_id.as_deref(), Some("test.notify"));
        assert_eq!(seen[0].params["title"], "3 todos");
        let j = seen[0].to_json();
        assert_eq!(j["plugin"], "test.notify");
        assert_eq!(j["from"], "plugin");
        assert_eq!(j["capability"], "show_notification");
        assert_eq!(j["id"], seen[0].id);
    }
    // Unknown capability.
    let d = host_call("test.basic", "teleport", json!({}));
    assert!(d["error"].as_str().unwrap().contains("teleport"), "{d}");
    // The editor's tools need the `editor` permission, even when offered.
    t.host.set_capability(
        "editor_diagnostics",
        Some(Arc::new(|_: &HostRequest| {
            HostAnswer::Now(Ok(json!({"diagnostics": []})))
        })),
    );
    let d = host_call("test.basic", "editor_diagnostics", json!({}));
    assert!(
        d["error"]
            .as_str()
            .unwrap()
            .contains("\"editor\" permission"),
        "{d}"
    );
    // A handler answering later from another thread, through respond().
    let host = Arc::new(Mutex::new(None::<u64>));
    let h2 = host.clone();
    t.host.set_capability(
        "ask",
        Some(Arc::new(move |r: &HostRequest| {
            *h2.lock().unwrap() = Some(r.id);
            HostAnswer::Later
        })),
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(wait_until(Duration::from_secs(5), || host
                .lock()
                .unwrap()
                .is_some()));
            let id = host.lock().unwrap().unwrap();
            t.host.respond(id, Ok(json!({"answer": 42}))).unwrap();
            // A second answer is refused.
            assert!(t.host.respond(id, Ok(json!(1))).is_err());
        });
        let d = host_call("test.basic", "ask", json!({}));
        assert_eq!(d["result"], json!({"answer": 42}));
    });
    // A handler that never answers: host_error after hostRequestTimeoutMs.
    t.host.set_capability(
        "never",
        Some(Arc::new(|_r: &HostRequest| HostAnswer::Later)),
    );
    let start = Instant::now();
    let d = host_call("test.basic", "never", json!({}));
    assert!(
        d["error"].as_str().unwrap().contains("did not answer"),
        "{d}"
    );
    assert!(start.elapsed() >= Duration::from_millis(1400));
    // A panicking handler.
    t.host.set_capability(
        "panics",
        Some(Arc::new(|_r: &HostRequest| panic!("handler bug"))),
    );
    let d = host_call("test.basic", "panics", json!({}));
    assert!(d["error"].as_str().unwrap().contains("failed"), "{d}");
    // render_pdf default: the library's renderer answers (a bad request
    // here: its error comes back as host_error).
    let d = host_call("test.basic", "render_pdf", json!({"content": "# x"}));
    assert!(d["error"].as_str().unwrap().contains("outputPath"), "{d}");
    assert_eq!(t.stat("test.basic", "hostRequests"), 8);
    t.finish();
}

#[test]
fn host_request_without_a_pending_call_is_answered() {
    let plugins = Plugins::new("hostidle");
    plugins.add(
        "test.idle",
        json!({"tools": [tool("result")], "activationEvents": ["onStartupFinished"]}),
        r#"
let got = null;
requestHost('teleport', {}).then((r) => { got = { r }; }, (e) => { got = { error: e.message }; });
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const wait = () => got ? reply(m, text('done'), got) : setTimeout(wait, 10);
  wait();
});
"#,
    );
    let t = TestHost::new(plugins, json!({}));
    let started = t.host.startup_finished();
    assert_eq!(started.len(), 1);
    assert!(started[0].1.is_ok());
    let d = t.call_ok("test.idle", "result", json!({})).details.unwrap();
    assert!(d["error"].as_str().unwrap().contains("teleport"), "{d}");
    t.finish();
}

#[test]
fn ui_push_becomes_an_event() {
    let t = basic("push", json!({}), json!({}));
    t.call_ok("test.basic", "push", json!({"n": 5}));
    let e = t.wait_event("ui_push", |e| matches!(e, PluginEvent::UiPush { .. }));
    assert_eq!(
        e,
        PluginEvent::UiPush {
            plugin: "test.basic".into(),
            channel: "board".into(),
            payload: json!({"n": 5})
        }
    );
    assert_eq!(
        e.to_json(),
        json!({"type": "ui_push", "plugin": "test.basic", "channel": "board", "payload": {"n": 5}})
    );
    assert_eq!(t.stat("test.basic", "uiPushes"), 1);
    assert_eq!(t.stat("test.basic", "ignoredMessages"), 1); // the one without a channel
    t.finish();
}

#[test]
fn passed_handles_are_closed_and_acked() {
    let plugins = Plugins::new("handle");
    plugins.add(
        "test.handle",
        json!({"tools": [tool("go")]}),
        r#"
const net = require('net');
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1', () => {
    process.send({ type: 'take_this' }, srv);
    // Node holds this back until the host ACKs the handle.
    reply(m, text('after handle'));
  });
});
"#,
    );
    let t = TestHost::new(plugins, json!({"callTimeoutMs": 4000}));
    let out = t.call_ok("test.handle", "go", json!({}));
    assert_eq!(text_of(&out), "after handle");
    assert!(t.stat("test.handle", "fdsClosed") >= 1);
    t.finish();
}

#[test]
fn crash_loop_disables_until_enabled() {
    let t = basic("loop", json!({}), json!({"crashLoopMaxExits": 3}));
    for _ in 0..3 {
        let (k, _) = kind(t.call("test.basic", "crash", json!({})));
        assert_eq!(k, ErrorKind::Exited);
    }
    let ev = t.wait_event("disabled", |e| matches!(e, PluginEvent::Disabled { .. }));
    match ev {
        PluginEvent::Disabled { plugin, reason } => {
            assert_eq!(plugin, "test.basic");
            assert!(reason.contains("3 times"), "{reason}");
        }
        _ => unreachable!(),
    }
    let starts = t.stat("test.basic", "starts");
    let (k, e) = kind(t.call("test.basic", "echo", json!({})));
    assert_eq!(k, ErrorKind::Disabled);
    assert!(e.message.contains("enable"), "{}", e.message);
    assert_eq!(
        t.stat("test.basic", "starts"),
        starts,
        "no spawn while disabled"
    );
    assert!(!t.host.is_enabled("test.basic"));
    t.host.enable("test.basic").unwrap();
    t.call_ok("test.basic", "echo", json!({}));
    t.finish();
}

#[test]
fn hanging_plugin_does_not_slow_a_healthy_one_and_calls_run_concurrently() {
    let plugins = Plugins::new("iso");
    plugins.add("test.basic", basic_manifest(json!({})), BASIC);
    plugins.add("test.other", basic_manifest(json!({})), BASIC);
    let t = TestHost::new(plugins, json!({"callTimeoutMs": 4000}));
    t.call_ok("test.other", "echo", json!({}));
    std::thread::scope(|s| {
        let hung = s.spawn(|| t.call("test.basic", "hang", json!({})));
        t.wait_received("test.basic", "hang");
        let start = Instant::now();
        for i in 0..5 {
            let out = t.call_ok("test.other", "echo", json!({"name": i.to_string()}));
            assert_eq!(text_of(&out), format!("hi {i}"));
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        // Several calls to one plugin pending at once, answered out of order.
        let slow = s.spawn(|| t.call("test.other", "slow", json!({"ms": 600})));
        let fast = s.spawn(|| t.call("test.other", "slow", json!({"ms": 50})));
        let f = fast.join().unwrap().unwrap();
        assert_eq!(text_of(&f), "late");
        assert!(slow.join().unwrap().is_ok());
        let (k, _) = kind(hung.join().unwrap());
        assert_eq!(k, ErrorKind::Timeout);
    });
    t.finish();
}

#[test]
// Process groups and setsid (Windows: the Job Object, see tests/plugins/windows.rs).
#[cfg(unix)]
fn unload_kills_attached_and_setsid_grandchildren() {
    let plugins = Plugins::new("gc");
    plugins.add(
        "test.gc",
        json!({"tools": [tool("spawn")]}),
        r#"
const { spawn } = require('child_process');
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  const a = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  const b = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', detached: true });
  b.unref();
  setInterval(() => {}, 1000);
  reply(m, text('spawned'), { attached: a.pid, detached: b.pid });
});
"#,
    );
    let t = TestHost::new(plugins, json!({}));
    let d = t.call_ok("test.gc", "spawn", json!({})).details.unwrap();
    let a = d["attached"].as_i64().unwrap() as i32;
    let b = d["detached"].as_i64().unwrap() as i32;
    let main = t.host.running_pid("test.gc").unwrap();
    assert!(alive(a) && alive(b) && alive(main));
    // The detached one left our process group: only the tag finds it.
    // SAFETY: getpgid on a pid of this test.
    assert_ne!(unsafe { libc::getpgid(b) }, main);
    t.host.unload("test.gc").unwrap();
    assert_all_die(&[main, a, b], "survived unload");
    assert!(t.host.running_pid("test.gc").is_none());
    t.finish();
}

#[test]
fn configuration_visible_options_and_documents() {
    let plugins = Plugins::new("full");
    plugins.add(
        "test.full",
        json!({
            "tools": [tool("echo"), tool("is_available"), tool("list_modes")],
            "sessionAction": {"tool": "echo", "visibleTool": "is_available"},
            "documentParsers": [{"mimeType": "text/markdown", "toolName": "parse_md"}],
            "configuration": [
                {"id": "mode", "label": "Mode", "type": "select", "optionsTool": "list_modes", "defaultValue": "auto"},
                {"id": "verbose", "label": "Verbose", "type": "boolean", "defaultValue": false}
            ]
        }),
        r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  switch (m.toolName) {
    case 'echo': return reply(m, text('e'), { context: m.context });
    case 'is_available': return reply(m, text('v'), { visible: m.context.cwd === '/yes' });
    case 'list_modes': return reply(m, text('2'), { options: [
      { value: 'auto', label: 'dup of default' }, { value: 'fast', label: 'Fast' }, { value: 'accurate', label: 'Accurate' }] });
    case 'parse_md': {
      const t = Buffer.from(m.params.base64, 'base64').toString('utf8');
      if (t === 'bad') return reply(m, text('p'), { success: false, reason: 'unreadable' });
      return reply(m, text('p'), { success: true, text: t.toUpperCase() + '|' + JSON.stringify(m.context) });
    }
  }
});
"#,
    );
    let t = TestHost::new(plugins, json!({}));
    let ctx = |t: &TestHost| {
        t.call_ok("test.full", "echo", json!({})).details.unwrap()["context"].clone()
    };
    assert_eq!(
        ctx(&t),
        json!({"cwd": "/work/root", "config": {"mode": "auto", "verbose": false}})
    );
    t.host
        .set_config_value("test.full", "verbose", json!(true))
        .unwrap();
    assert!(t
        .host
        .set_config_value("test.full", "verbose", json!("yes"))
        .is_err());
    assert!(t
        .host
        .set_config_value("test.full", "nope", json!(1))
        .is_err());
    assert_eq!(ctx(&t)["config"], json!({"mode": "auto", "verbose": true}));
    t.host
        .set_config_value("test.full", "verbose", Value::Null)
        .unwrap();
    assert_eq!(ctx(&t)["config"], json!({"mode": "auto", "verbose": false}));
    t.host
        .set_config_value("test.full", "verbose", json!(true))
        .unwrap();
    assert!(t.host.visible("test.full", "/yes").unwrap());
    assert!(!t.host.visible("test.full", "/no").unwrap());
    let opts = t.host.options("test.full", "mode").unwrap();
    assert_eq!(
        opts,
        vec![
            json!({"value": "auto", "label": "Auto"}),
            json!({"value": "fast", "label": "Fast"}),
            json!({"value": "accurate", "label": "Accurate"}),
        ]
    );
    assert_eq!(
        kind(t.host.options("test.full", "verbose")).0,
        ErrorKind::NotFound
    );
    let doc = t
        .host
        .parse_document("text/markdown; charset=utf-8", b"# hi")
        .unwrap();
    let ParsedDocument::Text(doc) = doc else {
        panic!("{doc:?}")
    };
    let (upper, context) = doc.split_once('|').unwrap();
    assert_eq!(upper, "# HI");
    assert_eq!(
        serde_json::from_str::<Value>(context).unwrap(),
        json!({"cwd": "", "config": {"mode": "auto", "verbose": true}})
    );
    assert_eq!(
        t.host.parse_document("text/markdown", b"bad").unwrap(),
        ParsedDocument::Failed("unreadable".into())
    );
    assert_eq!(
        kind(t.host.parse_document("application/pdf", b"x")).0,
        ErrorKind::NotFound
    );
    t.finish();
}

#[test]
fn reload_unloads_removed_and_updated_plugins() {
    let plugins = Plugins::new("reload");
    plugins.add("test.basic", basic_manifest(json!({})), BASIC);
    plugins.add("test.other", basic_manifest(json!({})), BASIC);
    let t = TestHost::new(plugins, json!({}));
    t.call_ok("test.basic", "echo", json!({}));
    t.call_ok("test.other", "echo", json!({}));
    let a = t.host.running_pid("test.basic").unwrap();
    let b = t.host.running_pid("test.other").unwrap();
    t.plugins.remove("test.basic");
    t.plugins.add(
        "test.other",
        basic_manifest(json!({"version": "1.1.0"})),
        BASIC,
    );
    t.host.reload().unwrap();
    assert!(wait_dead(a, Duration::from_secs(3)));
    assert!(wait_dead(b, Duration::from_secs(3)));
    assert_eq!(
        kind(t.call("test.basic", "echo", json!({}))).0,
        ErrorKind::NotFound
    );
    t.call_ok("test.other", "echo", json!({}));
    assert_eq!(
        t.host.manifest("test.other").unwrap().version.to_string(),
        "1.1.0"
    );
    t.finish();
}

#[test]
// Scans /proc environments for leftovers.
#[cfg(unix)]
fn start_failures_are_reported() {
    let plugins = Plugins::new("startfail");
    plugins.add(
        "test.dies",
        json!({"tools": [tool("x")]}),
        "console.error('cannot load config'); process.exit(2);",
    );
    plugins.add("test.basic", basic_manifest(json!({})), BASIC);
    let t = TestHost::new(plugins, json!({}));
    let (k, e) = kind(t.call("test.dies", "x", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert_eq!(e.exit.unwrap().code, Some(2));
    assert!(e.message.contains("cannot load config"), "{}", e.message);
    drop(t.host);
    let plugins = t.plugins;
    let store = MemStore::new(&plugins.dir);
    let host = qwen_companion::plugins::host::PluginHost::with_store(
        config(&plugins.dir, json!({"node": "/nonexistent/node"})),
        store,
    )
    .unwrap();
    let r = host.call_tool("test.basic", "echo", json!({}), CallOptions::default());
    let (k, e) = kind(r);
    assert_eq!(k, ErrorKind::Host);
    assert!(e.message.contains("/nonexistent/node"), "{}", e.message);
    drop(host);
    assert_no_process_of(&plugins.dir);
}

#[test]
fn drop_of_the_host_ends_every_plugin() {
    let plugins = Plugins::new("drop");
    plugins.add(
        "test.basic",
        basic_manifest(json!({"activationEvents": ["onStartupFinished"]})),
        &format!("setInterval(() => {{}}, 1000);\n{BASIC}"),
    );
    plugins.add("test.lazy", basic_manifest(json!({})), BASIC);
    let t = TestHost::new(plugins, json!({}));
    let r = t.host.startup_finished();
    assert_eq!(r.len(), 1, "only onStartupFinished plugins start");
    assert!(t.host.running_pid("test.basic").is_some());
    assert!(t.host.running_pid("test.lazy").is_none());
    // A call pending while the host goes away fails instead of hanging.
    std::thread::scope(|s| {
        let pending = s.spawn(|| t.call("test.basic", "slow", json!({"ms": 10000})));
        t.wait_received("test.basic", "slow");
        t.host.shutdown();
        let (k, _) = kind(pending.join().unwrap());
        assert_eq!(k, ErrorKind::Exited);
    });
    assert_eq!(
        kind(t.call("test.basic", "echo", json!({}))).0,
        ErrorKind::Host
    );
    t.finish();
}

/// Not a test on its own: the body of `a_killed_host_leaves_no_plugin`'s
/// helper process (selected by an environment variable).
#[test]
// The helper of a_killed_host_leaves_no_plugin.
#[cfg(unix)]
fn pdeathsig_helper() {
    let Ok(dir) = std::env::var("QC_PRT_HELPER_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let store = MemStore::new(&dir);
    let host =
        qwen_companion::plugins::host::PluginHost::with_store(config(&dir, json!({})), store)
            .unwrap();
    let out = host
        .call_tool("test.basic", "echo", json!({}), CallOptions::default())
        .unwrap();
    let pid = out.details.unwrap()["pid"].as_i64().unwrap();
    std::fs::write(dir.join("pid.tmp"), pid.to_string()).unwrap();
    std::fs::rename(dir.join("pid.tmp"), dir.join("pid")).unwrap();
    // Waits for the parent's SIGKILL (no wake-up comes: park may return
    // spuriously, hence the loop).
    loop {
        std::thread::park();
    }
}

#[test]
// SIGKILLs the host and scans /proc (Windows: the Job Object ends plugins with the host).
#[cfg(unix)]
fn a_killed_host_leaves_no_plugin() {
    let plugins = Plugins::new("pdeath");
    plugins.add(
        "test.basic",
        basic_manifest(json!({})),
        &format!("setInterval(() => {{}}, 1000);\n{BASIC}"),
    );
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "runtime::pdeathsig_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("QC_PRT_HELPER_DIR", &plugins.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = plugins.dir.join("pid");
    if !wait_until(Duration::from_secs(20), || pid_file.exists()) {
        let _ = helper.kill();
        let _ = helper.wait();
        panic!("the helper never started its plugin");
    }
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert!(alive(pid));
    helper.kill().unwrap(); // SIGKILL: no destructor runs in the helper
    helper.wait().unwrap();
    if !wait_dead(pid, Duration::from_secs(5)) {
        // SAFETY: cleaning up the plugin this test started before failing.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the plugin outlived its host");
    }
    assert_no_process_of(&plugins.dir);
}

#[test]
fn start_timeout_electron_flag_and_logs() {
    let plugins = Plugins::new("start");
    // Synchronous work at load time: the event loop answers only after it.
    plugins.add(
        "test.slowstart",
        json!({"tools": [tool("env")]}),
        r#"
const t0 = Date.now();
while (Date.now() - t0 < Number(process.env.QC_NEVER || 4000)) {}
process.on('message', (m) => {
  if (m && m.type === 'call_tool') reply(m, text('ok'), { env: process.env, waited: Date.now() - t0 });
});
"#,
    );
    plugins.add("test.basic", basic_manifest(json!({})), BASIC);
    let t = TestHost::new(
        plugins,
        // Long enough for node's own start on a loaded machine, far below
        // the slow plugin's 4 s of synchronous work.
        json!({"startTimeoutMs": 1500, "nodeIsElectron": true}),
    );
    let logs = Arc::new(Mutex::new(Vec::<String>::new()));
    let l2 = logs.clone();
    t.host.set_log_sink(Some(Arc::new(move |_lvl, m: &str| {
        l2.lock().unwrap().push(m.to_string())
    })));
    let (k, e) = kind(t.call("test.slowstart", "env", json!({})));
    assert_eq!(k, ErrorKind::Timeout);
    assert!(
        e.message.contains("did not start within 1500 ms"),
        "{}",
        e.message
    );
    // The configured binary is treated as Electron: ELECTRON_RUN_AS_NODE=1.
    let out = t.call_ok("test.basic", "echo", json!({}));
    assert_eq!(out.details.unwrap()["env"]["ELECTRON_RUN_AS_NODE"], "1");
    t.call_ok("test.basic", "garbage", json!({}));
    assert!(
        wait_until(Duration::from_secs(5), || logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("not JSON"))),
        "{:?}",
        logs.lock().unwrap()
    );
    drop(t.host);
    let plugins = t.plugins;
    // With a long enough start timeout the same plugin works.
    let t = TestHost::new(
        plugins,
        json!({"startTimeoutMs": 15000, "callTimeoutMs": 20000}),
    );
    let out = t.call_ok("test.slowstart", "env", json!({}));
    let d = out.details.unwrap();
    assert!(d["waited"].as_u64().unwrap() >= 4000);
    assert!(d["env"].get("ELECTRON_RUN_AS_NODE").is_none());
    t.finish();
}

#[test]
fn plugin_host_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<qwen_companion::plugins::host::PluginHost>();
}

#[test]
fn a_reply_sent_right_before_exit_is_delivered() {
    let plugins = Plugins::new("replyexit");
    plugins.add(
        "test.re",
        json!({"tools": [tool("go")]}),
        r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  // Fits the socket buffer (about 200 KiB): all of it is sent before the exit.
  reply(m, text('bye'), { pad: 'p'.repeat(150000) });
  process.exit(0);
});
"#,
    );
    let t = TestHost::new(plugins, json!({"crashLoopMaxExits": 0}));
    for _ in 0..5 {
        assert_eq!(text_of(&t.call_ok("test.re", "go", json!({}))), "bye");
        t.wait_event("exit", |e| matches!(e, PluginEvent::Exit { .. }));
        t.events.lock().unwrap().clear();
    }
    t.finish();
}

#[test]
fn waiting_host_requests_are_answered_when_the_handler_goes_or_the_plugin_stops() {
    let plugins = Plugins::new("hostgone");
    plugins.add(
        "test.hg",
        json!({"tools": [tool("ask")]}),
        r#"
const fs = require('fs');
const path = require('path');
const log = (line) => fs.appendFileSync(path.join(process.env.PLUGIN_DATA_DIR, 'log'), line + '\n');
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  requestHost(m.params.capability, {}).then(
    (r) => log('response ' + JSON.stringify(r)),
    (e) => log('error ' + e.message));
  reply(m, text('asked'));
});
setInterval(() => {}, 1000);
"#,
    );
    let t = TestHost::new(plugins, json!({"hostRequestTimeoutMs": 60000}));
    let log = t.plugins.dir.join("data/test.hg/log");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let wait_lines = |n: usize| {
        assert!(
            wait_until(Duration::from_secs(5), || read_log().lines().count() >= n),
            "log: {:?}",
            read_log()
        );
        read_log()
    };
    // The handler counts the requests it was given (left waiting: Later).
    let asked = Arc::new(AtomicUsize::new(0));
    let asked2 = asked.clone();
    let later = move |_r: &HostRequest| {
        asked2.fetch_add(1, Ordering::SeqCst);
        HostAnswer::Later
    };
    let later = Arc::new(later);
    t.host.set_capability("ask_user", Some(later.clone()));
    t.call_ok("test.hg", "ask", json!({"capability": "ask_user"}));
    assert!(wait_until(Duration::from_secs(5), || asked
        .load(Ordering::SeqCst)
        == 1));
    // The handler goes away: the waiting request is answered at once.
    t.host.set_capability("ask_user", None);
    let text = wait_lines(1);
    assert!(
        text.contains("error the host removed its handler"),
        "{text}"
    );
    // The plugin is unloaded while a request waits: host_error first.
    t.host.set_capability("ask_user", Some(later));
    t.call_ok("test.hg", "ask", json!({"capability": "ask_user"}));
    assert!(wait_until(Duration::from_secs(5), || asked
        .load(Ordering::SeqCst)
        == 2));
    t.host.unload("test.hg").unwrap();
    let text = wait_lines(2);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .contains("error the plugin is being stopped"),
        "{text}"
    );
    t.finish();
}

#[test]
fn closed_channel_and_noisy_output() {
    let plugins = Plugins::new("noisy");
    plugins.add(
        "test.noisy",
        json!({"tools": [tool("noise"), tool("leave")]}),
        r#"
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  if (m.toolName === 'noise') {
    const chunk = 'o'.repeat(1 << 16) + '\n';
    for (let i = 0; i < 64; i++) { process.stdout.write(chunk); process.stderr.write('e' + chunk); }
    process.stderr.write('LAST LINE\n');
    return reply(m, text('noisy'));
  }
  // Closes its IPC channel but keeps running.
  process.disconnect();
  setInterval(() => {}, 1000);
});
"#,
    );
    let t = TestHost::new(plugins, json!({}));
    assert_eq!(
        text_of(&t.call_ok("test.noisy", "noise", json!({}))),
        "noisy"
    );
    let pid = t.host.running_pid("test.noisy").unwrap();
    let start = Instant::now();
    let (k, e) = kind(t.call("test.noisy", "leave", json!({})));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(k, ErrorKind::Protocol, "{e}");
    assert!(
        e.message.contains("closed its IPC channel"),
        "{}",
        e.message
    );
    assert!(wait_dead(pid, Duration::from_secs(3)));
    // The stderr tail is bounded and ends with the last output.
    let PluginEvent::Exit {
        stderr_tail: tail, ..
    } = t.wait_event("exit", |e| matches!(e, PluginEvent::Exit { .. }))
    else {
        unreachable!()
    };
    assert!(tail.len() <= 8192, "{}", tail.len());
    assert!(
        tail.ends_with("LAST LINE"),
        "{:?}",
        &tail[tail.len().saturating_sub(40)..]
    );
    t.finish();
}

#[test]
fn a_crashing_background_plugin_is_restarted_with_backoff_then_disabled() {
    let plugins = Plugins::new("restart");
    plugins.add(
        "test.bg",
        json!({"tools": [tool("x")], "activationEvents": ["onStartupFinished"]}),
        "setTimeout(() => { console.error('bg crash'); process.exit(1); }, 150);\nsetInterval(() => {}, 1000);",
    );
    let t = TestHost::new(
        plugins,
        json!({"restartBackoffMs": 100, "crashLoopMaxExits": 3}),
    );
    assert!(t.host.startup_finished()[0].1.is_ok());
    t.wait_event("disabled", |e| matches!(e, PluginEvent::Disabled { .. }));
    let starts = t
        .events()
        .iter()
        .filter(|e| matches!(e, PluginEvent::Started { .. }))
        .count();
    assert_eq!(starts, 3, "{:?}", t.events());
    // Disabled: no further restart (the behaviour under test: nothing
    // happens for 600 ms).
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(t.stat("test.bg", "starts"), 3);
    assert_eq!(
        kind(t.call("test.bg", "x", json!({}))).0,
        ErrorKind::Disabled
    );
    t.finish();
}
