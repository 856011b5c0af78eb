//! The runtime against the hostile fixture plugins
//! (`tests/plugins/fixtures/hostile/<name>`): each misbehaviour hurts only
//! its own calls.

use std::time::{Duration, Instant};

use qwen_companion::plugins::host::{CallOptions, ErrorKind, PluginEvent};
use serde_json::{json, Value};

use qc_test_support::plugins::*;

fn hostile(names: &[&str], extra: Value) -> TestHost {
    let plugins = Plugins::new(&format!("hostile-{}", names[0]));
    for n in names {
        plugins.add_fixture(&fixture(&format!("hostile/{n}")));
    }
    TestHost::new(plugins, extra)
}

fn id(name: &str) -> String {
    format!("test.hostile.{name}")
}

fn with_timeout(
    t: &TestHost,
    name: &str,
    tool: &str,
    ms: u64,
) -> Result<qwen_companion::plugins::host::ToolOutput, qwen_companion::plugins::host::CallError> {
    t.host.call_tool(
        &id(name),
        tool,
        json!({}),
        CallOptions {
            cwd: None,
            timeout: Some(Duration::from_millis(ms)),
        },
    )
}

#[test]
fn crashing_fixtures_fail_exited_with_details() {
    let t = hostile(
        &[
            "crash-on-start",
            "crash-mid-call",
            "uncaught-async-throw",
            "no-listener",
            "exit-after-big-send",
        ],
        json!({"callTimeoutMs": 10000}),
    );
    let start = Instant::now();
    let (k, e) = kind(t.call(&id("crash-on-start"), "ping", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert_eq!(e.exit.unwrap().code, Some(1));
    assert!(!e.stderr_tail.unwrap().is_empty());
    let (k, e) = kind(t.call(&id("crash-mid-call"), "explode", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert_eq!(e.exit.unwrap().code, Some(3));
    assert!(e.message.contains("boom mid-call"), "{}", e.message);
    let (k, e) = kind(t.call(&id("uncaught-async-throw"), "throw_later", json!({})));
    assert_eq!(k, ErrorKind::Exited);
    assert_eq!(e.exit.unwrap().code, Some(1));
    let (k, e) = kind(t.call(&id("no-listener"), "ping", json!({})));
    assert_eq!(k, ErrorKind::Exited, "{e}");
    assert_eq!(e.exit.unwrap().code, Some(0));
    let (k, e) = kind(t.call(&id("exit-after-big-send"), "send_and_exit", json!({})));
    assert_eq!(k, ErrorKind::Exited, "{e}");
    assert_eq!(e.exit.unwrap().code, Some(0));
    assert_eq!(t.stat(&id("exit-after-big-send"), "invalidLines"), 0);
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    t.finish();
}

#[test]
fn hanging_fixtures_time_out_and_only_the_stuck_one_is_killed() {
    let t = hostile(&["idle-hang", "busy-hang"], json!({"callTimeoutMs": 5000}));
    // idle-hang: its loop runs, so it is kept and answers other calls.
    std::thread::scope(|s| {
        let hang = s.spawn(|| with_timeout(&t, "idle-hang", "hang", 800));
        // Kept: the hostile fixture gives no sign that the hang call reached
        // it (its files are checked as they are); the ping below asserts it.
        std::thread::sleep(Duration::from_millis(300));
        let out = t.call_ok(&id("idle-hang"), "ping", json!({}));
        assert_eq!(text_of(&out), "pong (1 hanging)");
        assert_eq!(kind(hang.join().unwrap()).0, ErrorKind::Timeout);
    });
    let idle_pid = t.host.running_pid(&id("idle-hang")).unwrap();
    // busy-hang ignores SIGTERM: killed after the probe fails, PID reaped.
    let b = id("busy-hang");
    let started = |t: &TestHost| -> Vec<i32> {
        t.events()
            .into_iter()
            .filter_map(|e| match e {
                PluginEvent::Started { plugin, pid } if plugin == b => Some(pid),
                _ => None,
            })
            .collect()
    };
    let (k, _) = kind(with_timeout(&t, "busy-hang", "spin", 300));
    assert_eq!(k, ErrorKind::Timeout);
    let busy_pid = started(&t)[0];
    assert!(wait_dead(busy_pid, Duration::from_secs(3)));
    assert!(alive(idle_pid), "the responsive plugin is kept");
    // The next call starts a fresh busy-hang.
    assert_eq!(
        kind(with_timeout(&t, "busy-hang", "spin", 300)).0,
        ErrorKind::Timeout
    );
    // (under load the fresh start may finish after the call timed out)
    wait_until(Duration::from_secs(5), || started(&t).len() >= 2);
    let pids = started(&t);
    assert_eq!(pids.len(), 2);
    assert_ne!(pids[1], busy_pid);
    assert!(wait_dead(pids[1], Duration::from_secs(3)));
    t.host.unload(&id("idle-hang")).unwrap();
    assert!(wait_dead(idle_pid, Duration::from_secs(3)));
    t.finish();
}

#[test]
fn lying_fixtures_are_ignored_and_counted() {
    let t = hostile(
        &[
            "wrong-ids",
            "stdout-garbage",
            "malformed-frames",
            "content-not-array",
        ],
        json!({}),
    );
    let w = id("wrong-ids");
    for _ in 0..2 {
        let out = t.call_ok(&w, "answer", json!({}));
        assert!(text_of(&out).starts_with("right answer for "), "{out:?}");
    }
    // Per call: the made-up id twice; from the 2nd call on, the previous
    // call's id (settled); after the answer, a duplicate result and a
    // tool_error for the settled id.
    assert!(
        wait_until(Duration::from_secs(5), || t.stat(&w, "unknownReplies") >= 4
            && t.stat(&w, "duplicateReplies") >= 5),
        "{}",
        t.host.stats(&w).unwrap()
    );
    // Not a wait for an event: no further reply may be counted in the next
    // 50 ms (the counts below are exact).
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        t.stat(&w, "unknownReplies"),
        4,
        "{}",
        t.host.stats(&w).unwrap()
    );
    assert_eq!(
        t.stat(&w, "duplicateReplies"),
        5,
        "{}",
        t.host.stats(&w).unwrap()
    );
    assert_eq!(t.stat(&w, "starts"), 1);
    let out = t.call_ok(&id("stdout-garbage"), "answer", json!({}));
    assert_eq!(text_of(&out), "real answer via IPC");
    let m = id("malformed-frames");
    let out = t.call_ok(&m, "malformed", json!({}));
    assert_eq!(text_of(&out), "before\u{fffd}after");
    assert_eq!(out.details.unwrap()["\u{fffd}"], "lone low");
    let push = t.wait_event("ui_push", |e| matches!(e, PluginEvent::UiPush { .. }));
    let PluginEvent::UiPush { channel, .. } = push else {
        unreachable!()
    };
    assert!(channel.contains('\u{fffd}'), "{channel:?}");
    let c = id("content-not-array");
    let pid = {
        let (k, _) = kind(t.call(&c, "bad_content", json!({})));
        assert_eq!(k, ErrorKind::Protocol);
        t.host.running_pid(&c).unwrap()
    };
    assert_eq!(
        kind(t.call(&c, "bad_content", json!({}))).0,
        ErrorKind::Protocol
    );
    assert_eq!(t.host.running_pid(&c), Some(pid), "plugin kept");
    t.finish();
}

#[test]
fn big_results_against_the_cap() {
    let t = hostile(
        &["big-results"],
        json!({"maxMessageBytes": 10 * 1024 * 1024}),
    );
    let b = id("big-results");
    let out = t.call_ok(&b, "big_5mib", json!({}));
    assert_eq!(text_of(&out).len(), 5 * 1024 * 1024);
    let (k, _) = kind(t.call(&b, "big_20mib", json!({})));
    assert_eq!(k, ErrorKind::TooLarge);
    assert_eq!(text_of(&t.call_ok(&b, "small", json!({}))), "small ok");
    t.finish();
}

#[test]
fn handles_capabilities_pushes_and_slow_start() {
    let t = hostile(
        &[
            "handle-passing",
            "unknown-capability",
            "no-permission",
            "ui-push",
            "slow-start",
        ],
        json!({}),
    );
    let out = t.call_ok(&id("handle-passing"), "send_handle", json!({}));
    assert_eq!(text_of(&out), "answered after the handle");
    assert!(t.stat(&id("handle-passing"), "fdsClosed") >= 1);
    let out = t.call_ok(&id("unknown-capability"), "teleport", json!({}));
    assert!(text_of(&out).contains("teleport"), "{out:?}");
    let out = t.call_ok(&id("no-permission"), "notify", json!({}));
    assert!(text_of(&out).starts_with("host_error"), "{out:?}");
    assert!(text_of(&out).contains("notifications"), "{out:?}");
    let u = id("ui-push");
    let out = t.call_ok(&u, "progress", json!({"steps": 3}));
    assert_eq!(text_of(&out), "pushed 3 updates");
    // Delivered in order, before the result.
    let steps: Vec<Value> = t
        .events()
        .into_iter()
        .filter_map(|e| match e {
            PluginEvent::UiPush {
                plugin,
                channel,
                payload,
            } if plugin == u && channel == "progress" => Some(payload),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            json!({"step": 1, "of": 3}),
            json!({"step": 2, "of": 3}),
            json!({"step": 3, "of": 3})
        ]
    );
    assert_eq!(
        kind(t.call(&u, "progress", json!({"steps": 0}))).0,
        ErrorKind::Schema
    );
    assert_eq!(
        kind(t.call(&u, "progress", json!({"steps": "x"}))).0,
        ErrorKind::Schema
    );
    // slow-start: a call sent during its 3 s start waits for it.
    let start = Instant::now();
    let out = t.call_ok(&id("slow-start"), "ping", json!({}));
    assert_eq!(text_of(&out), "pong after slow start");
    assert!(start.elapsed() >= Duration::from_millis(2500));
    t.finish();
}

#[test]
fn slow_start_with_a_short_call_timeout_is_a_timeout_and_leaves_nothing() {
    let t = hostile(&["slow-start"], json!({}));
    let (k, _) = kind(with_timeout(&t, "slow-start", "ping", 500));
    assert_eq!(k, ErrorKind::Timeout);
    // The start continues in the background and the process is tracked.
    assert!(
        wait_until(Duration::from_secs(8), || t
            .host
            .running_pid(&id("slow-start"))
            .is_some()),
        "the start was lost"
    );
    t.finish();
}

#[test]
fn grandchildren_fixture_leaves_nothing_after_unload() {
    let t = hostile(&["grandchildren"], json!({}));
    let g = id("grandchildren");
    let d = t.call_ok(&g, "spawn", json!({})).details.unwrap();
    let pids = [
        d["attached"].as_i64().unwrap() as i32,
        d["detached"].as_i64().unwrap() as i32,
    ];
    let main = t.host.running_pid(&g).unwrap();
    t.host.unload(&g).unwrap();
    assert_all_die(&[pids[0], pids[1], main], "survived unload");
    t.finish();
}

#[test]
fn crash_loop_fixture_is_disabled_without_further_spawns() {
    let t = hostile(&["crash-loop"], json!({"crashLoopMaxExits": 3}));
    let c = id("crash-loop");
    let mut exits = 0;
    let deadline = Instant::now() + Duration::from_secs(15);
    while t.host.is_enabled(&c) {
        assert!(Instant::now() < deadline, "never disabled");
        match t.call(&c, "ping", json!({})) {
            Ok(out) => assert_eq!(text_of(&out), "pong"),
            Err(e) => assert!(
                matches!(e.kind, ErrorKind::Exited | ErrorKind::Disabled),
                "{e}"
            ),
        }
        // Let it crash (it exits ~200 ms after each start).
        let before = exits;
        let left = deadline.saturating_duration_since(Instant::now());
        wait_until(left, || {
            exits = t
                .events()
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        PluginEvent::Exit {
                            expected: false,
                            ..
                        }
                    )
                })
                .count();
            exits != before
        });
    }
    assert_eq!(exits, 3);
    let starts = t.stat(&c, "starts");
    let (k, _) = kind(t.call(&c, "ping", json!({})));
    assert_eq!(k, ErrorKind::Disabled);
    assert_eq!(t.stat(&c, "starts"), starts);
    t.finish();
}
