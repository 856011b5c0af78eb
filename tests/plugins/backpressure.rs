//! The callback queue stays bounded while the host does not take its events
//! (an IDE whose UI thread is busy; a demo whose stdout is not read).
//!
//! With the host's event callback blocked for 20 s:
//! 1. a plugin sends 200 000 `ui_push` messages of 1 KB on 16 channels: they
//!    coalesce (the newest per channel waits), the call completes while the
//!    host is still blocked, and the coalesced count is reported;
//! 2. the plugin then sends 200 000 messages of 1 KB on 200 000 distinct
//!    channels: past the bound of waiting channels the library stops reading
//!    that plugin's socket (backpressure), so its call waits — while a call to
//!    another plugin goes through at once;
//! 3. the host process grows by less than 32 MB over all of it; once the
//!    callback returns, the waiting call completes, the plugin's next call
//!    succeeds, and each of the 16 channels delivered its newest payload.
//!
//! The host runs in a child process (this test binary re-executed) so the RSS
//! measured is its own. The figures are printed (`--nocapture`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qc_test_support::plugins::*;
use qwen_companion::events::EventFn;
use qwen_companion::plugins::host::{CallOptions, PluginHost};
use qwen_companion::service::PluginService;
use serde_json::{json, Value};

const PUSHES: u64 = 200_000;
const SAME_CHANNELS: u64 = 16;
const BLOCK: Duration = Duration::from_secs(20);

const FLOOD_JS: &str = r#"
const pad = 'x'.repeat(1000);
process.on('message', (m) => {
  if (!m || m.type !== 'call_tool') return;
  if (m.toolName === 'ping') return reply(m, text('pong'));
  const { n, channels } = m.params;
  for (let i = 0; i < n; i++) {
    const channel = channels ? 'c' + (i % channels) : 'd' + i;
    process.send({ type: 'ui_push', channel, payload: { i, pad } });
  }
  reply(m, text('sent ' + n));
});
"#;

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The host side, in the child: prints one `QC {json}` line with its figures.
#[test]
fn backpressure_child() {
    if std::env::var_os("QC_BACKPRESSURE_CHILD").is_none() {
        return; // only as the child of `the_callback_queue_stays_bounded_while_the_host_is_busy`
    }
    let plugins = Plugins::new("backpressure");
    let tools = json!({"tools": [tool("flood"), tool("ping")]});
    plugins.add("com.example.flood", tools.clone(), FLOOD_JS);
    plugins.add("com.example.other", tools, FLOOD_JS);
    let dir = plugins.dir.clone();
    let store = MemStore::new(&dir);
    let host = PluginHost::with_store(
        config(&dir, json!({"callTimeoutMs": 300_000})),
        store.clone(),
    )
    .unwrap();
    let service =
        Arc::new(PluginService::with_host(Arc::new(host), Duration::from_secs(30)).unwrap());

    // The event callback: blocks on the first ui_push until released, then
    // records the newest payload per channel.
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(Some(released));
    let (blocked_tx, blocked) = mpsc::channel::<()>();
    let blocked_tx = Mutex::new(blocked_tx);
    let newest: Arc<Mutex<std::collections::HashMap<String, u64>>> = Arc::default();
    let seen = newest.clone();
    let cb: Arc<EventFn> = Arc::new(move |e: &Value| {
        if e["type"] != "ui_push" {
            return;
        }
        if let Some(rx) = released.lock().unwrap().take() {
            let _ = blocked_tx.lock().unwrap().send(());
            let _ = rx.recv();
        }
        let channel = e["channel"].as_str().unwrap().to_string();
        seen.lock()
            .unwrap()
            .insert(channel, e["payload"]["i"].as_u64().unwrap());
    });
    service.set_event_callback(Some(cb));

    let call = |plugin: &str, params: Value| {
        service.host().call_tool(
            plugin,
            if params.is_null() { "ping" } else { "flood" },
            if params.is_null() { json!({}) } else { params },
            CallOptions::default(),
        )
    };
    // Both plugins running before the baseline.
    call("com.example.flood", Value::Null).unwrap();
    call("com.example.other", Value::Null).unwrap();
    let base = rss_kb();
    let peak = Arc::new(Mutex::new(base));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            // Measuring, not waiting for anything: one sample every 50 ms.
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                let now = rss_kb();
                let mut p = peak.lock().unwrap();
                *p = (*p).max(now);
                drop(p);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let started = Instant::now();

    // 1. Same channels: coalesced, done while the host is still blocked.
    let same = call(
        "com.example.flood",
        json!({"n": PUSHES, "channels": SAME_CHANNELS}),
    );
    blocked
        .recv_timeout(Duration::from_secs(60))
        .expect("the callback was reached");
    let same_done_blocked = started.elapsed() < BLOCK;
    let coalesced_while_blocked = service.callback_stats()["coalesced"].as_u64().unwrap();

    // 2. Distinct channels: the reader stops; the call waits for the host.
    let flooding = {
        let service = service.clone();
        std::thread::spawn(move || {
            service.host().call_tool(
                "com.example.flood",
                "flood",
                json!({"n": PUSHES, "channels": 0}),
                CallOptions::default(),
            )
        })
    };
    // Another plugin answers meanwhile.
    let other_start = Instant::now();
    let other = call("com.example.other", Value::Null);
    let other_ms = other_start.elapsed().as_millis() as u64;
    let flood_finished_early = flooding.is_finished();

    // 3. The host takes its events again after BLOCK.
    let wait = BLOCK.saturating_sub(started.elapsed());
    let stalled_while_blocked = {
        // The distinct flood cannot finish while the host is blocked.
        let until = Instant::now() + wait;
        let mut finished = false;
        while Instant::now() < until {
            if flooding.is_finished() {
                finished = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        !finished
    };
    release.send(()).unwrap();
    let distinct = flooding.join().unwrap();
    let next = call("com.example.flood", Value::Null);
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let stats = service.callback_stats();
    let newest = newest.lock().unwrap().clone();
    let same_newest_ok = (0..SAME_CHANNELS).all(|c| {
        let want = (0..PUSHES).rev().find(|i| i % SAME_CHANNELS == c).unwrap();
        newest.get(&format!("c{c}")) == Some(&want)
    });
    let report = json!({
        "baseKb": base,
        "peakKb": *peak.lock().unwrap(),
        "sameOk": same.is_ok(),
        "sameDoneWhileBlocked": same_done_blocked,
        "coalescedWhileBlocked": coalesced_while_blocked,
        "otherOk": other.is_ok(),
        "otherMs": other_ms,
        "floodFinishedEarly": flood_finished_early,
        "stalledWhileBlocked": stalled_while_blocked,
        "distinctOk": distinct.is_ok(),
        "nextOk": next.is_ok(),
        "sameNewestOk": same_newest_ok,
        "distinctSeen": newest.keys().filter(|k| k.starts_with('d')).count(),
        "stats": stats,
    });
    println!("\nQC {report}");
    drop(service);
    // The leftover scan reads /proc (Unix); on Windows the plugin's Job
    // Object ends its processes when the service drops it.
    #[cfg(unix)]
    assert_no_process_of(&dir);
}

#[test]
fn the_callback_queue_stays_bounded_while_the_host_is_busy() {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "backpressure_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("QC_BACKPRESSURE_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut child = scopeguard(child);
    let stdout = child.0.stdout.take().unwrap();
    // Read to the end (the child still prints the harness's lines after the report).
    let mut report = None;
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        // The harness may print "test … ... " before the report on its line.
        if let Some((_, j)) = line.split_once("QC {") {
            report = Some(serde_json::from_str::<Value>(&format!("{{{j}")).unwrap());
        }
    }
    let report = report.unwrap_or_else(|| panic!("the child (pid {pid}) printed no report"));
    let status = child.0.wait().unwrap();
    assert!(status.success(), "child failed: {status}");
    let grew_kb = report["peakKb"].as_i64().unwrap() - report["baseKb"].as_i64().unwrap();
    println!(
        "callback queue under a blocked host: RSS grew {:.1} MB (base {:.1} MB); {}",
        grew_kb as f64 / 1024.0,
        report["baseKb"].as_f64().unwrap() / 1024.0,
        report
    );
    assert!(report["sameOk"].as_bool().unwrap(), "{report}");
    assert!(
        report["sameDoneWhileBlocked"].as_bool().unwrap(),
        "{report}"
    );
    assert!(
        report["coalescedWhileBlocked"].as_u64().unwrap() > PUSHES / 2,
        "{report}"
    );
    assert!(report["otherOk"].as_bool().unwrap(), "{report}");
    assert!(!report["floodFinishedEarly"].as_bool().unwrap(), "{report}");
    assert!(report["stalledWhileBlocked"].as_bool().unwrap(), "{report}");
    assert!(report["distinctOk"].as_bool().unwrap(), "{report}");
    assert!(report["nextOk"].as_bool().unwrap(), "{report}");
    assert!(report["sameNewestOk"].as_bool().unwrap(), "{report}");
    assert_eq!(report["distinctSeen"].as_u64().unwrap(), PUSHES, "{report}");
    assert!(grew_kb < 32 * 1024, "RSS grew {grew_kb} kB: {report}");
}

/// Kills the child if the test fails before it exits.
struct Guard(std::process::Child);
fn scopeguard(c: std::process::Child) -> Guard {
    Guard(c)
}
impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
