//! `cargo bench --bench sessions` — cross-session messaging (seed 002): ours against the
//! official `@qwen-code/sdk` 0.1.14 `PeerEndpoint`, and our inbox under a hostile flood.
//!
//! **1. send → `delivered` receipt latency.** Two participants in one process on each side:
//! * **ours**: two `qwen_companion::sessions::Participant`s (Rust API) in this process;
//! * **sdk**: two `PeerEndpoint`s in one Node process (`bench/sdk-baseline/pair.mjs`, the SDK
//!   pinned by its package.json + package-lock.json).
//!
//! Both run the same schedule: `QC_SBENCH_ROUNDS` rounds, each in a fresh Qwen home with a
//! fresh receiver (`bench-rx`) and sender (`bench-tx`), so the registry holds exactly those two
//! records; per round `QC_SBENCH_WARMUP` unmeasured then `QC_SBENCH_PER_ROUND` measured messages,
//! one at a time, distinct bodies, `fromMode: "prompting"` (our receiver's review class, so the
//! gate delivers). A round stays inside every limit of the receiver's gate (per-sender burst 30,
//! global burst 32) and of our sender's pacing mirror (30 per address), so no message is
//! rate-limited and no pacing is needed; a fresh receiver per round is what buys the next burst.
//! Latency = just before `send()` (which re-reads the registry, probes, resolves the name, writes
//! auth line + frame, half-closes and waits for the peer's close) → the sender's receipt
//! callback seeing `delivered` (stamped inside the callback). When `send()` returns is reported
//! too.
//!
//! **2. Flood.** The receiver runs in a child process (this binary with `--flood-child`), so its
//! CPU time is its own (`getrusage(RUSAGE_SELF)` deltas it reports on request). This process
//! sends `QC_SBENCH_FLOOD` hostile frames, paced evenly over `QC_SBENCH_FLOOD_S` seconds by 4
//! writer threads, shuffled together:
//! * bad auth (one connection each): wrong token, upper-cased token, unknown `qpc_` controller
//!   token, token with a suffix, `msgV:"1"`, `type:"Auth"`, a user frame first, binary junk —
//!   each followed by a canary user frame that must never be seen;
//! * bad frames after a valid auth line (5 per connection): truncated JSON, invalid UTF-8,
//!   non-objects, `msgV` 2 / `"1"`, bad msgIds, unknown type, wrong role, empty content, 5000-deep
//!   nesting, a second auth line, forged receipts for unknown ids, and misaddressed frames
//!   (valid, wrong `toSessionId`: answered `misaddressed` without admission);
//! * over-rate: one sender key (`from` = a sink here) sending distinct valid bodies; its first 30
//!   pass (held for review: no `fromMode`), the rest are `dropped`/`rate-limited`;
//! * duplicates: another sender key repeating one body (`fromMode` prompting): the first is
//!   delivered, the rest are `dropped`/`duplicate`;
//! * oversized lines: 30 connections writing 1.5 M ASCII / 1.4 M UTF-16-unit emoji lines (a
//!   line under 1 Mi + 64 Ki units can pass when its newline arrives in the last read, as in
//!   Qwen, whose cap is also checked per read on the unterminated remainder).
//!
//! Interleaved: `QC_SBENCH_LEGIT` legitimate messages from a `Participant` in this process, at
//! evenly spaced times. The receiver's global bucket (32 burst, 1/s, charged to every sender,
//! exempt or not) is the one limit hostile traffic shares with legit traffic: the over-rate
//! sender's 30-burst plus the duplicate sender's first leave ~1 token, and the over-rate sender
//! is re-admitted once per 2 s, so ~0.5 msg/s is what stays free for everyone else — the default
//! (6 in 12 s) stays inside it, and every legit message must then get exactly one receipt,
//! `delivered`, and reach the receiver's message callback exactly once. Receiver CPU is measured
//! over the flood, then again after the 5 s trail of coalesced `dropped` receipts.
//!
//! Targets (PASS/MISS; a miss never fails the process): ours send→receipt p50 ≥ 3× lower than
//! the SDK's; receiver CPU for the flood < 1 core-second; no legit message lost or mis-receipted.
//!
//! Knobs (environment): `QC_SBENCH_ROUNDS` (8), `QC_SBENCH_PER_ROUND` (25), `QC_SBENCH_WARMUP`
//! (3), `QC_SBENCH_FLOOD` (10000), `QC_SBENCH_FLOOD_S` (12), `QC_SBENCH_LEGIT` (6),
//! `QC_SBENCH_SKIP_FLOOD=1`, `QC_SBENCH_FLOOD_ONLY=auth|bad|rate|dup` (diagnosis: all frames but
//! the 30 oversized in one category), `QC_BENCH_NODE` (node binary, default `node`), `QC_BENCH_SKIP_NODE=1`.

// UNIX-domain sockets, the SDK's Unix peer endpoint and getrusage: the bench
// runs on Unix only (elsewhere it builds to nothing and has no `main`).
#![cfg_attr(not(unix), no_main)]
#![cfg(unix)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use qwen_companion::sessions::{
    Config, DeliveryState, HeldInfo, InboundMessage, Participant, ReceiptEvent, RegisterOptions,
    ReviewClass, SendOptions,
};
use serde_json::{json, Value};

#[allow(dead_code)] // shared with the other benches; not every helper is used here
mod common;
use common::*;

// ======================================================================= setup helpers

/// A private directory under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Result<TempDir, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "qcsb-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).map_err(|e| format!("mkdir {}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A participant config confined to `home` (registry there, sockets under `home/rt`).
fn config(home: &Path) -> Result<Config, String> {
    serde_json::from_value(json!({
        "qwenHome": home,
        "runtimeDir": home.join("rt"),
        "sweepSockets": false,
    }))
    .map_err(|e| format!("config: {e}"))
}

fn reg(name: &str) -> RegisterOptions {
    RegisterOptions {
        name: Some(name.into()),
        cwd: Some(format!("/bench/{name}")),
        ..Default::default()
    }
}

fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ======================================================================= 1. latency: ours

struct Latency {
    receipt_us: Vec<f64>,
    send_us: Vec<f64>,
    received: usize,
    errors: Vec<String>,
}

fn ours_latency(rounds: usize, per_round: usize, warmup: usize) -> Latency {
    let mut out = Latency {
        receipt_us: Vec::new(),
        send_us: Vec::new(),
        received: 0,
        errors: Vec::new(),
    };
    let received = Arc::new(AtomicUsize::new(0));
    for r in 0..rounds {
        let res = (|| -> Result<(), String> {
            let home = TempDir::new("lat")?;
            let rx = Participant::new(config(home.path())?).map_err(e2s)?;
            let n = received.clone();
            rx.set_message_callback(Some(Arc::new(move |_m: &InboundMessage| {
                n.fetch_add(1, Ordering::Relaxed);
            })))
            .unwrap();
            rx.register(reg("bench-rx")).map_err(e2s)?;
            let tx = Participant::new(config(home.path())?).map_err(e2s)?;
            let (etx, erx) = mpsc::channel::<(String, DeliveryState, Instant)>();
            let etx = Mutex::new(etx);
            tx.set_receipt_callback(Some(Arc::new(move |e: &ReceiptEvent| {
                let t = Instant::now();
                let _ = etx.lock().unwrap().send((e.msg_id.clone(), e.status, t));
            })))
            .unwrap();
            tx.register(reg("bench-tx")).map_err(e2s)?;
            let mut early: HashMap<String, (DeliveryState, Instant)> = HashMap::new();
            for i in 0..warmup + per_round {
                let t0 = Instant::now();
                let sent = tx.send(SendOptions {
                    to: "bench-rx".into(),
                    content: format!(
                        "bench round {r} message {i}: the build finished with 0 failures"
                    ),
                    from_mode: Some(ReviewClass::Prompting),
                    ..Default::default()
                });
                let t1 = Instant::now();
                let sent = match sent {
                    Ok(s) => s,
                    Err(e) => {
                        out.errors.push(format!("round {r} message {i}: send: {e}"));
                        continue;
                    }
                };
                let got = match early.remove(&sent.msg_id) {
                    Some(x) => Some(x),
                    None => loop {
                        match erx.recv_timeout(Duration::from_secs(5)) {
                            Ok((id, st, t)) if id == sent.msg_id => break Some((st, t)),
                            Ok((id, st, t)) => {
                                early.insert(id, (st, t));
                            }
                            Err(_) => break None,
                        }
                    },
                };
                match got {
                    Some((DeliveryState::Delivered, t2)) => {
                        if i >= warmup {
                            out.receipt_us.push(us(t2 - t0));
                            out.send_us.push(us(t1 - t0));
                        }
                    }
                    Some((st, _)) => out
                        .errors
                        .push(format!("round {r} message {i}: receipt {}", st.as_str())),
                    None => out
                        .errors
                        .push(format!("round {r} message {i}: no receipt within 5 s")),
                }
            }
            // the delivered receipt leaves at acceptance; let the last callbacks run before closing
            let want = (r + 1) * (warmup + per_round);
            let deadline = Instant::now() + Duration::from_secs(1);
            while received.load(Ordering::Relaxed) < want && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            tx.close().map_err(e2s)?;
            rx.close().map_err(e2s)?;
            Ok(())
        })();
        if let Err(e) = res {
            out.errors.push(format!("round {r}: {e}"));
        }
    }
    out.received = received.load(Ordering::Relaxed);
    out
}

// ======================================================================= 1. latency: sdk

fn sdk_dir() -> PathBuf {
    baseline_dir("sdk-baseline")
}

/// Makes sure bench/sdk-baseline/node_modules holds the pinned SDK (`npm ci` from the lock).
fn ensure_sdk_modules() -> Result<(), String> {
    ensure_npm_deps(
        &sdk_dir(),
        &["node_modules/@qwen-code/sdk/dist/peer/index.js"],
        "SDK baseline",
    )
}

/// Runs pair.mjs (bounded: killed by PID after `limit`) and parses its one JSON line.
fn sdk_latency(
    rounds: usize,
    per_round: usize,
    warmup: usize,
    limit: Duration,
) -> Result<(Latency, String), String> {
    ensure_sdk_modules()?;
    let base = TempDir::new("sdk")?;
    let arg = json!({"rounds": rounds, "perRound": per_round, "warmup": warmup,
                     "baseDir": base.path(), "timeoutMs": 5000})
    .to_string();
    let mut child = Command::new(node_bin())
        .arg("pair.mjs")
        .arg(arg)
        .current_dir(sdk_dir())
        .env_remove("NODE_OPTIONS")
        .env_remove("QWEN_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn node: {e}"))?;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(stdout).read_to_string(&mut s);
        let _ = tx.send(s);
    });
    let text = match rx.recv_timeout(limit) {
        Ok(s) => s,
        Err(_) => {
            let _ = child.kill(); // by PID
            let _ = child.wait();
            return Err(format!("node baseline did not finish within {limit:?}"));
        }
    };
    let status = child.wait().map_err(|e| e.to_string())?;
    let line = text.lines().last().unwrap_or("").trim().to_string();
    let v: Value = serde_json::from_str(&line)
        .map_err(|e| format!("node baseline ({status}) said {line:?}: {e}"))?;
    let nums = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let lat = Latency {
        receipt_us: nums("receiptUs"),
        send_us: nums("sendUs"),
        received: v["received"].as_u64().unwrap_or(0) as usize,
        errors: v["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(|s| format!("sdk: {s}")))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let version = format!(
        "@qwen-code/sdk {} on node {}",
        v["sdk"].as_str().unwrap_or("?"),
        v["node"].as_str().unwrap_or("?")
    );
    Ok((lat, version))
}

// ======================================================================= 2. flood: the receiver child

fn rusage_self() -> (f64, f64, i64) {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (tv(ru.ru_utime), tv(ru.ru_stime), ru.ru_maxrss)
}

fn proc_threads() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Threads:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// `sessions --flood-child <home>`: one receiving participant ("flood-rx", default gate:
/// review class prompting, policy unset) that answers `mark` (CPU so far), `stats` (what its
/// message callback saw) and `quit` on stdin, one JSON line each.
fn flood_child(home: &Path) -> Result<(), String> {
    let p = Participant::new(config(home)?).map_err(e2s)?;
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let s2 = seen.clone();
    p.set_message_callback(Some(Arc::new(move |m: &InboundMessage| {
        *s2.lock()
            .unwrap()
            .entry(m.message.msg_id.clone())
            .or_default() += 1;
    })))
    .map_err(e2s)?;
    let held_max = Arc::new(AtomicUsize::new(0));
    let h2 = held_max.clone();
    p.set_held_callback(Some(Arc::new(move |h: &[HeldInfo]| {
        h2.fetch_max(h.len(), Ordering::Relaxed);
    })))
    .map_err(e2s)?;
    let info = p.register(reg("flood-rx")).map_err(e2s)?;
    let rec: Value =
        serde_json::from_slice(&std::fs::read(&info.record_path).map_err(e2s)?).map_err(e2s)?;
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock, v: Value| -> Result<(), String> {
        writeln!(out, "{v}").and_then(|_| out.flush()).map_err(e2s)
    };
    say(
        &mut out,
        json!({"ipcPath": info.ipc_path, "token": rec["ipcToken"], "sessionId": info.session_id,
               "pid": std::process::id()}),
    )?;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "mark" => {
                let (u, s, rss) = rusage_self();
                say(
                    &mut out,
                    json!({"utimeUs": u, "stimeUs": s, "maxRssKb": rss, "threads": proc_threads()}),
                )?;
            }
            "stats" => {
                let seen = seen.lock().unwrap().clone();
                say(
                    &mut out,
                    json!({"seen": seen, "heldMax": held_max.load(Ordering::Relaxed),
                           "heldNow": p.held().len()}),
                )?;
            }
            "quit" => break,
            _ => {}
        }
    }
    p.close().map_err(e2s)?;
    Ok(())
}

/// The parent's handle on the child: line requests, cleanup by PID.
struct ChildRx {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl ChildRx {
    fn spawn(home: &Path) -> Result<(ChildRx, Value), String> {
        let exe = std::env::current_exe().map_err(e2s)?;
        let mut child = Command::new(exe)
            .arg("--flood-child")
            .arg(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn flood child: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut c = ChildRx {
            child,
            stdin,
            lines: rx,
        };
        let hello = c.read(Duration::from_secs(10))?;
        Ok((c, hello))
    }

    fn read(&mut self, timeout: Duration) -> Result<Value, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => serde_json::from_str(&l).map_err(|e| format!("child said {l:?}: {e}")),
            Err(RecvTimeoutError::Timeout) => Err("flood child did not answer".into()),
            Err(RecvTimeoutError::Disconnected) => Err("flood child exited".into()),
        }
    }

    fn ask(&mut self, cmd: &str) -> Result<Value, String> {
        writeln!(self.stdin, "{cmd}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("flood child stdin: {e}"))?;
        self.read(Duration::from_secs(10))
    }
}

impl Drop for ChildRx {
    fn drop(&mut self) {
        quit_child(&mut self.child, &mut self.stdin, Duration::from_secs(3));
    }
}

// ======================================================================= 2. flood: sinks

/// A listening socket standing in for a hostile sender's `from`: counts the receipts sent there.
struct Sink {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<SinkSeen>>,
    thread: Option<thread::JoinHandle<()>>,
}

#[derive(Default, Clone)]
struct SinkSeen {
    connections: usize,
    /// status (+ dropReason) → receipts
    statuses: BTreeMap<String, usize>,
    /// every id a receipt settled (origMsgId + droppedMsgIds)
    ids: HashSet<String>,
}

impl Sink {
    fn new(path: PathBuf) -> Result<Sink, String> {
        let listener = UnixListener::bind(&path).map_err(|e| format!("bind sink: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<SinkSeen>> = Arc::default();
        let (stop2, seen2) = (stop.clone(), seen.clone());
        let thread = thread::spawn(move || {
            for s in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut s) = s else { continue };
                let seen = seen2.clone();
                thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = Vec::new();
                    let _ = s.read_to_end(&mut buf);
                    let mut g = seen.lock().unwrap();
                    g.connections += 1;
                    for l in String::from_utf8_lossy(&buf).lines() {
                        let Ok(v) = serde_json::from_str::<Value>(l) else {
                            continue;
                        };
                        if v["type"] != "control" {
                            continue;
                        }
                        let mut k = v["status"].as_str().unwrap_or("?").to_string();
                        if let Some(r) = v["dropReason"].as_str() {
                            k = format!("{k}/{r}");
                        }
                        *g.statuses.entry(k).or_default() += 1;
                        if let Some(id) = v["origMsgId"].as_str() {
                            g.ids.insert(id.to_string());
                        }
                        for id in v["droppedMsgIds"].as_array().into_iter().flatten() {
                            if let Some(id) = id.as_str() {
                                g.ids.insert(id.to_string());
                            }
                        }
                    }
                });
            }
        });
        Ok(Sink {
            path,
            stop,
            seen,
            thread: Some(thread),
        })
    }

    fn path_str(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    fn seen(&self) -> SinkSeen {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = UnixStream::connect(&self.path); // wakes the accept loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ======================================================================= 2. flood: hostile frames

/// xorshift64*: deterministic variety, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        while s.len() < n {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(n);
        s
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Cat {
    BadAuth,
    BadFrame,
    OverRate,
    Duplicate,
    Oversized,
}

impl Cat {
    fn name(self) -> &'static str {
        match self {
            Cat::BadAuth => "bad auth",
            Cat::BadFrame => "bad frames",
            Cat::OverRate => "over-rate",
            Cat::Duplicate => "duplicates",
            Cat::Oversized => "oversized",
        }
    }
}

/// One hostile connection.
struct Job {
    cat: Cat,
    payload: Vec<u8>,
    /// hostile frames it carries (what the 10 000 count)
    frames: usize,
}

fn auth_line(token: &str) -> String {
    format!("{}\n", json!({"msgV": 1, "type": "auth", "token": token}))
}

fn user_line(
    id: &str,
    from: Option<&str>,
    reply: Option<&str>,
    to: Option<&str>,
    content: &str,
    mode: Option<&str>,
) -> String {
    let mut v = json!({"msgV": 1, "msgId": id, "type": "user", "fromName": "hostile peer",
                       "priority": "next", "message": {"role": "user", "content": content}});
    if let Some(f) = from {
        v["from"] = json!(f);
    }
    if let Some(r) = reply {
        v["replyToken"] = json!(r);
    }
    if let Some(t) = to {
        v["toSessionId"] = json!(t);
    }
    if let Some(m) = mode {
        v["fromMode"] = json!(m);
    }
    format!("{v}\n")
}

struct FloodPlan {
    jobs: Vec<Job>,
    per_cat: BTreeMap<Cat, (usize, usize)>, // frames, connections
    /// ids of valid-token user frames by what they are, to classify what the host saw
    over_rate_ids: HashSet<String>,
    duplicate_ids: HashSet<String>,
    misaddressed_ids: HashSet<String>,
    /// ids that must never reach the host (behind bad auth or malformed)
    never_ids: HashSet<String>,
    misaddressed: usize,
    forged: usize,
}

impl FloodPlan {
    fn known(&self, id: &String, legit: &HashSet<&String>) -> bool {
        legit.contains(id)
            || self.over_rate_ids.contains(id)
            || self.duplicate_ids.contains(id)
            || self.misaddressed_ids.contains(id)
            || self.never_ids.contains(id)
    }
}

struct Sinks<'a> {
    over_rate: &'a Sink,
    duplicate: &'a Sink,
    misaddressed: &'a Sink,
    canary: &'a Sink,
}

fn plan_flood(total: usize, token: &str, session_id: &str, sinks: &Sinks) -> FloodPlan {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let n_over = 30.min(total);
    let rem = total - n_over;
    let (mut n_auth, mut n_bad, mut n_rate) = (rem / 4, (rem / 4) / 5 * 5, rem / 4);
    let mut n_dup = rem - n_auth - n_bad - n_rate;
    // diagnosis: every frame but the 30 oversized ones in one category
    match std::env::var("QC_SBENCH_FLOOD_ONLY").as_deref() {
        Ok("auth") => (n_auth, n_bad, n_rate, n_dup) = (rem, 0, 0, 0),
        Ok("bad") => (n_auth, n_bad, n_rate, n_dup) = (0, rem / 5 * 5, 0, 0),
        Ok("rate") => (n_auth, n_bad, n_rate, n_dup) = (0, 0, rem, 0),
        Ok("dup") => (n_auth, n_bad, n_rate, n_dup) = (0, 0, 0, rem),
        _ => {}
    }
    let mut p = FloodPlan {
        jobs: Vec::new(),
        per_cat: BTreeMap::new(),
        over_rate_ids: HashSet::new(),
        duplicate_ids: HashSet::new(),
        misaddressed_ids: HashSet::new(),
        never_ids: HashSet::new(),
        misaddressed: 0,
        forged: 0,
    };
    let canary_from = sinks.canary.path_str();
    let rate_from = sinks.over_rate.path_str();
    let dup_from = sinks.duplicate.path_str();
    let mis_from = sinks.misaddressed.path_str();
    let hostile_reply = rng.hex(64);

    // bad auth: one connection each, the first line fails, then a canary frame
    for i in 0..n_auth {
        let first = match i % 8 {
            0 => auth_line(&rng.hex(64)),
            1 => auth_line(&token.to_uppercase()),
            2 => auth_line(&format!("qpc_{}", rng.hex(64))),
            3 => auth_line(&format!("{token}0")),
            4 => format!("{}\n", json!({"msgV": "1", "type": "auth", "token": token})),
            5 => format!("{}\n", json!({"msgV": 1, "type": "Auth", "token": token})),
            6 => user_line(
                &format!("bafirst{i}"),
                Some(&canary_from),
                Some(&hostile_reply),
                Some(session_id),
                "no auth line at all",
                Some("prompting"),
            ),
            _ => "\u{0}\u{1}GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
        };
        let id = format!("ba{i}");
        p.never_ids.insert(id.clone());
        p.never_ids.insert(format!("bafirst{i}"));
        let canary = user_line(
            &id,
            Some(&canary_from),
            Some(&hostile_reply),
            Some(session_id),
            "canary behind a bad auth line",
            Some("prompting"),
        );
        let mut payload = first.into_bytes();
        if i % 8 == 7 {
            payload.extend_from_slice(&[0xff, 0xfe, b'\n']);
        }
        payload.extend_from_slice(canary.as_bytes());
        p.jobs.push(Job {
            cat: Cat::BadAuth,
            payload,
            frames: 1,
        });
    }

    // bad frames: valid auth line, then 5 lines that must all be ignored (or, for the
    // misaddressed variant, answered `misaddressed` without reaching the gate)
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let mut k = 0usize;
    for _ in 0..n_bad / 5 {
        let mut payload = auth_line(token).into_bytes();
        for _ in 0..5 {
            let id = format!("bf{k}");
            let valid = |id: &str| {
                user_line(
                    id,
                    Some(&canary_from),
                    Some(&hostile_reply),
                    Some(session_id),
                    "malformed frame",
                    Some("prompting"),
                )
            };
            let line = match k % 15 {
                0 => format!(
                    "{{\"msgV\":1,\"msgId\":\"{id}\",\"type\":\"user\",\"message\":{{\"role\n"
                ),
                1 => {
                    let mut v = vec![0xff, 0xfe, 0xfd];
                    v.extend_from_slice(valid(&id).as_bytes());
                    p.never_ids.insert(id.clone());
                    payload.extend_from_slice(&v);
                    k += 1;
                    continue;
                }
                2 => "[1,2,3]\n".into(),
                3 => "null\n".into(),
                4 => valid(&id).replacen("\"msgV\":1", "\"msgV\":2", 1),
                5 => valid(&id).replacen("\"msgV\":1", "\"msgV\":\"1\"", 1),
                6 => valid("all"),
                7 => valid(&format!("x{}", "a".repeat(64))),
                8 => valid(&id).replacen("\"type\":\"user\"", "\"type\":\"bogus\"", 1),
                9 => valid(&id).replacen("\"role\":\"user\"", "\"role\":\"assistant\"", 1),
                10 => valid(&id).replacen("\"content\":\"malformed frame\"", "\"content\":\"\"", 1),
                11 => format!("{deep}\n"),
                12 => {
                    p.forged += 1;
                    format!(
                        "{}\n",
                        json!({"msgV": 1, "msgId": format!("fr{k}"), "type": "control",
                               "action": "delivery_status", "status": "delivered",
                               "origMsgId": rng.hex(32), "from": canary_from, "reason": "forged"})
                    )
                }
                13 => {
                    p.misaddressed += 1;
                    p.misaddressed_ids.insert(id.clone());
                    user_line(
                        &id,
                        Some(&mis_from),
                        Some(&hostile_reply),
                        Some("00000000-0000-4000-8000-000000000000"),
                        "wrong session",
                        Some("prompting"),
                    )
                }
                _ => auth_line(token),
            };
            if k % 15 != 13 {
                p.never_ids.insert(id.clone());
            }
            payload.extend_from_slice(line.as_bytes());
            k += 1;
        }
        p.jobs.push(Job {
            cat: Cat::BadFrame,
            payload,
            frames: 5,
        });
    }

    // over-rate: one sender key, distinct valid bodies, no fromMode (held if admitted)
    for i in 0..n_rate {
        let id = format!("or{i}");
        p.over_rate_ids.insert(id.clone());
        let mut payload = auth_line(token);
        payload.push_str(&user_line(
            &id,
            Some(&rate_from),
            Some(&hostile_reply),
            Some(session_id),
            &format!("status update #{i} from a chatty peer: still compiling"),
            None,
        ));
        p.jobs.push(Job {
            cat: Cat::OverRate,
            payload: payload.into_bytes(),
            frames: 1,
        });
    }

    // duplicates: another sender key, one body again and again (fresh ids)
    for i in 0..n_dup {
        let id = format!("du{i}");
        p.duplicate_ids.insert(id.clone());
        let mut payload = auth_line(token);
        payload.push_str(&user_line(
            &id,
            Some(&dup_from),
            Some(&hostile_reply),
            Some(session_id),
            "please run rm -rf build/ and rebuild everything now",
            Some("prompting"),
        ));
        p.jobs.push(Job {
            cat: Cat::Duplicate,
            payload: payload.into_bytes(),
            frames: 1,
        });
    }

    // oversized lines: > 1 Mi UTF-16 units without a newline in the first 64 KiB chunks
    for i in 0..n_over {
        let id = format!("ov{i}");
        p.never_ids.insert(id.clone());
        let head = format!(
            "{{\"msgV\":1,\"msgId\":\"{id}\",\"type\":\"user\",\"fromMode\":\"prompting\",\"message\":{{\"role\":\"user\",\"content\":\""
        );
        let mut payload = auth_line(token).into_bytes();
        payload.extend_from_slice(head.as_bytes());
        // The cap is checked on the unterminated remainder after each read (<= 64 KiB), so a
        // line up to 1 Mi + 64 Ki units whose newline lands in the last read passes, in Qwen
        // too: these are well past that.
        if i % 2 == 0 {
            payload.extend(std::iter::repeat_n(b'A', 1_500_000));
        } else {
            payload.extend("\u{1F600}".repeat(700_000).into_bytes()); // 1.4 M UTF-16 units
        }
        payload.extend_from_slice(b"\"}}\n");
        p.jobs.push(Job {
            cat: Cat::Oversized,
            payload,
            frames: 1,
        });
    }

    for j in &p.jobs {
        let e = p.per_cat.entry(j.cat).or_default();
        e.0 += j.frames;
        e.1 += 1;
    }
    // shuffle (Fisher–Yates) so every category is spread over the whole flood
    for i in (1..p.jobs.len()).rev() {
        let j = rng.below(i + 1);
        p.jobs.swap(i, j);
    }
    p
}

/// Writes one job's bytes, half-closes, waits (bounded) for the receiver's close.
fn run_job(path: &Path, job: &Job) -> Result<(), String> {
    let mut s = None;
    for _ in 0..50 {
        match UnixStream::connect(path) {
            Ok(c) => {
                s = Some(c);
                break;
            }
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    }
    let mut s = s.ok_or("connect failed")?;
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    // a receiver that cuts the connection mid-write (oversized) is the expected outcome
    let _ = s.write_all(&job.payload);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => Ok(()),
        Ok(_) => Err("the receiver wrote on an inbox connection".into()),
        Err(e)
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            Err("the receiver did not close within 5 s".into())
        }
        Err(_) => Ok(()), // reset: closed
    }
}

// ======================================================================= 2. flood: run

struct FloodResult {
    plan_summary: String,
    frames: usize,
    connections: usize,
    wall: Duration,
    cpu_flood_s: f64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    cpu_total_s: f64,
    trail: Duration,
    job_errors: BTreeMap<String, usize>,
    legit_sent: usize,
    legit_ok: usize,
    legit_report: Vec<String>,
    host_saw: String,
    sinks: String,
    held_now: u64,
    threads: u64,
    max_rss_kb: i64,
    problems: Vec<String>,
}

/// A legit send: msg id (or `#k` when it failed), `Ok(confirmed)` or the error, seconds into the flood.
type LegitSend = (String, Result<bool, String>, f64);

fn cpu_us(v: &Value) -> (f64, f64) {
    (
        v["utimeUs"].as_f64().unwrap_or(0.0),
        v["stimeUs"].as_f64().unwrap_or(0.0),
    )
}

fn flood(total: usize, duration: Duration, legit: usize) -> Result<FloodResult, String> {
    let home = TempDir::new("flood")?;
    let sink_rate = Sink::new(home.path().join("h-rate.sock"))?;
    let sink_dup = Sink::new(home.path().join("h-dup.sock"))?;
    let sink_mis = Sink::new(home.path().join("h-mis.sock"))?;
    let sink_canary = Sink::new(home.path().join("h-canary.sock"))?;
    let (mut child, hello) = ChildRx::spawn(home.path())?;
    let ipc_path = PathBuf::from(hello["ipcPath"].as_str().ok_or("child: no ipcPath")?);
    let token = hello["token"]
        .as_str()
        .ok_or("child: no token")?
        .to_string();
    let session_id = hello["sessionId"]
        .as_str()
        .ok_or("child: no sessionId")?
        .to_string();

    // the legitimate sender
    let tx = Participant::new(config(home.path())?).map_err(e2s)?;
    let events: Arc<Mutex<Vec<ReceiptEvent>>> = Arc::default();
    let ev2 = events.clone();
    tx.set_receipt_callback(Some(Arc::new(move |e: &ReceiptEvent| {
        ev2.lock().unwrap().push(e.clone());
    })))
    .map_err(e2s)?;
    tx.register(reg("flood-tx")).map_err(e2s)?;

    let plan = plan_flood(
        total,
        &token,
        &session_id,
        &Sinks {
            over_rate: &sink_rate,
            duplicate: &sink_dup,
            misaddressed: &sink_mis,
            canary: &sink_canary,
        },
    );
    let frames: usize = plan.jobs.iter().map(|j| j.frames).sum();
    let connections = plan.jobs.len();
    let plan_summary = plan
        .per_cat
        .iter()
        .map(|(c, (f, n))| format!("{} {f} ({n} conns)", c.name()))
        .collect::<Vec<_>>()
        .join(", ");

    let m0 = child.ask("mark")?;
    let t0 = Instant::now();
    let next = AtomicUsize::new(0);
    let job_errors: Mutex<BTreeMap<String, usize>> = Mutex::default();
    let n_jobs = plan.jobs.len().max(1);
    let legit_sent: Mutex<Vec<LegitSend>> = Mutex::default();
    thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = plan.jobs.get(i) else { break };
                let at = t0 + duration.mul_f64(i as f64 / n_jobs as f64);
                if let Some(d) = at.checked_duration_since(Instant::now()) {
                    thread::sleep(d);
                }
                if let Err(e) = run_job(&ipc_path, job) {
                    *job_errors
                        .lock()
                        .unwrap()
                        .entry(format!("{}: {e}", job.cat.name()))
                        .or_default() += 1;
                }
            });
        }
        sc.spawn(|| {
            for k in 0..legit {
                let at = t0 + duration.mul_f64((k as f64 + 0.5) / legit as f64);
                if let Some(d) = at.checked_duration_since(Instant::now()) {
                    thread::sleep(d);
                }
                let r = tx.send(SendOptions {
                    to: "flood-rx".into(),
                    content: format!("legit message {k}: the tests passed on the CI runner"),
                    from_mode: Some(ReviewClass::Prompting),
                    ..Default::default()
                });
                let when = t0.elapsed().as_secs_f64();
                let mut g = legit_sent.lock().unwrap();
                match r {
                    Ok(s) => g.push((s.msg_id, Ok(s.confirmed), when)),
                    Err(e) => g.push((format!("#{k}"), Err(e.to_string()), when)),
                }
            }
        });
    });
    let wall = t0.elapsed();
    let m1 = child.ask("mark")?;
    // coalesced `dropped` receipts trail the last drop by 5 s
    let trail = Duration::from_millis(5600);
    thread::sleep(trail);
    let m2 = child.ask("mark")?;
    let st = child.ask("stats")?;

    let (u0, s0) = cpu_us(&m0);
    let (u1, s1) = cpu_us(&m1);
    let (u2, s2) = cpu_us(&m2);
    let cpu_flood_s = ((u1 - u0) + (s1 - s0)) / 1e6;
    let cpu_total_s = ((u2 - u0) + (s2 - s0)) / 1e6;

    // ---- verification
    let mut problems = Vec::new();
    let seen: HashMap<String, u64> = st["seen"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let sent = legit_sent.into_inner().unwrap();
    let events = events.lock().unwrap().clone();
    let sink_views = [
        ("over-rate", sink_rate.seen()),
        ("duplicates", sink_dup.seen()),
        ("misaddressed", sink_mis.seen()),
        ("canary", sink_canary.seen()),
    ];
    let mut legit_ok = 0;
    let mut legit_report = Vec::new();
    for (id, r, when) in &sent {
        let mut faults = Vec::new();
        match r {
            Err(e) => faults.push(format!("send failed: {e}")),
            Ok(false) => faults.push("receiver did not close the connection within 5 s".into()),
            Ok(true) => {}
        }
        let mine: Vec<&ReceiptEvent> = events.iter().filter(|e| &e.msg_id == id).collect();
        let transitions: Vec<String> = mine
            .iter()
            .map(|e| {
                format!(
                    "{}->{}{}",
                    e.previous.as_str(),
                    e.status.as_str(),
                    e.drop_reason
                        .map(|d| format!("/{}", d.as_str()))
                        .unwrap_or_default()
                )
            })
            .collect();
        if transitions != ["pending->delivered"] {
            faults.push(format!(
                "receipts {transitions:?} (expected [pending->delivered])"
            ));
        }
        let n = seen.get(id).copied().unwrap_or(0);
        if n != 1 {
            faults.push(format!("host callback saw it {n} times"));
        }
        for (name, v) in &sink_views {
            if v.ids.contains(id) {
                faults.push(format!("a receipt for it went to the {name} sink"));
            }
        }
        if faults.is_empty() {
            legit_ok += 1;
        } else {
            legit_report.push(format!("{id} (sent at {when:.2} s): {}", faults.join("; ")));
        }
    }
    if sent.len() < legit {
        legit_report.push(format!("only {} of {legit} legit sends ran", sent.len()));
    }
    // what reached the host besides the legit messages
    let legit_ids: HashSet<&String> = sent.iter().map(|(id, _, _)| id).collect();
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for (id, n) in &seen {
        let k = if legit_ids.contains(id) {
            "legit"
        } else if plan.over_rate_ids.contains(id) {
            "over-rate"
        } else if plan.duplicate_ids.contains(id) {
            "duplicates"
        } else if plan.misaddressed_ids.contains(id) {
            "misaddressed"
        } else if plan.never_ids.contains(id) {
            "BAD AUTH / MALFORMED"
        } else {
            "unknown"
        };
        *by.entry(k).or_default() += n;
    }
    if by.contains_key("BAD AUTH / MALFORMED") || by.contains_key("unknown") {
        let mut ids: Vec<&String> = seen
            .keys()
            .filter(|id| plan.never_ids.contains(*id) || !plan.known(id, &legit_ids))
            .collect();
        ids.sort();
        ids.truncate(12);
        problems.push(format!(
            "frames that must be ignored reached the host: {by:?}; ids {ids:?}"
        ));
    }
    if by.get("misaddressed").copied().unwrap_or(0) > 0 {
        problems.push("misaddressed frames reached the host".into());
    }
    let canary = &sink_views[3].1;
    if !canary.statuses.is_empty() {
        problems.push(format!(
            "receipts were sent for frames that must be ignored: {:?}",
            canary.statuses
        ));
    }
    let host_saw = by
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sinks = sink_views
        .iter()
        .map(|(name, v)| {
            format!(
                "{name}: {} conns {:?} covering {} ids",
                v.connections,
                v.statuses,
                v.ids.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    drop(tx);
    let res = FloodResult {
        plan_summary: format!(
            "{plan_summary}; bad frames include {} misaddressed and {} forged receipts",
            plan.misaddressed, plan.forged
        ),
        frames,
        connections,
        wall,
        cpu_flood_s,
        cpu_user_s: (u2 - u0) / 1e6,
        cpu_sys_s: (s2 - s0) / 1e6,
        cpu_total_s,
        trail,
        job_errors: job_errors.into_inner().unwrap(),
        legit_sent: sent.len(),
        legit_ok,
        legit_report,
        host_saw,
        sinks,
        held_now: st["heldNow"].as_u64().unwrap_or(0),
        threads: m2["threads"].as_u64().unwrap_or(0),
        max_rss_kb: m2["maxRssKb"].as_i64().unwrap_or(0),
        problems,
    };
    drop(child);
    Ok(res)
}

// ======================================================================= main

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--flood-child") {
        let home = PathBuf::from(args.get(i + 1).cloned().unwrap_or_default());
        if let Err(e) = flood_child(&home) {
            eprintln!("flood child: {e}");
            std::process::exit(2);
        }
        return;
    }

    let t_total = Instant::now();
    let load_start = loadavg();
    let rounds = env_usize("QC_SBENCH_ROUNDS", 8).max(1);
    let per_round = env_usize("QC_SBENCH_PER_ROUND", 25).max(1);
    let warmup = env_usize("QC_SBENCH_WARMUP", 3);
    if warmup + per_round > 30 {
        eprintln!(
            "bench: warm-up + per-round = {} exceeds the receiver's 30-message burst; \
             later messages will be dropped/rate-limited",
            warmup + per_round
        );
    }
    let flood_n = env_usize("QC_SBENCH_FLOOD", 10_000);
    let flood_s = env_usize("QC_SBENCH_FLOOD_S", 12).max(1);
    let legit = env_usize("QC_SBENCH_LEGIT", 6);
    if legit as f64 / flood_s as f64 > 0.5 {
        eprintln!(
            "bench: {legit} legit messages in {flood_s} s is more than the ~0.5/s the receiver's \
             global bucket leaves free during the flood; expect dropped/rate-limited receipts"
        );
    }
    let mut problems: Vec<String> = Vec::new();

    println!(
        "qwen-companion sessions benchmark: ours {} (Rust API, in-process) vs @qwen-code/sdk PeerEndpoint (node)",
        env!("CARGO_PKG_VERSION")
    );
    println!(
        "  latency: {rounds} rounds x ({warmup} warm-up + {per_round} measured) sequential messages, \
         fresh registry + receiver + sender per round; flood: {flood_n} hostile frames over {flood_s} s \
         + {legit} legit messages, receiver in a child process; {} cores",
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    // ---------------- 1. latency
    let ours = ours_latency(rounds, per_round, warmup);
    problems.extend(ours.errors.iter().map(|e| format!("ours: {e}")));
    let expected = rounds * (warmup + per_round);
    if ours.received != expected {
        problems.push(format!(
            "ours: the receivers' message callbacks saw {} of {expected} messages",
            ours.received
        ));
    }
    let mut sdk: Option<Latency> = None;
    let mut sdk_version = "not run".to_string();
    if env_flag("QC_BENCH_SKIP_NODE") {
        problems.push("SDK baseline skipped (QC_BENCH_SKIP_NODE=1)".into());
    } else {
        match sdk_latency(rounds, per_round, warmup, Duration::from_secs(60)) {
            Ok((l, v)) => {
                problems.extend(l.errors.iter().cloned());
                if l.received != expected {
                    problems.push(format!(
                        "sdk: the receivers' onMessage saw {} of {expected} messages",
                        l.received
                    ));
                }
                if !v.starts_with("@qwen-code/sdk 0.1.14 ") {
                    problems.push(format!(
                        "sdk: expected @qwen-code/sdk 0.1.14, ran {v} (npm ci in bench/sdk-baseline)"
                    ));
                }
                sdk = Some(l);
                sdk_version = v;
            }
            Err(e) => problems.push(format!("sdk: {e}")),
        }
    }

    // ---------------- 2. flood
    let fl = if env_flag("QC_SBENCH_SKIP_FLOOD") {
        problems.push("flood skipped (QC_SBENCH_SKIP_FLOOD=1)".into());
        None
    } else {
        match flood(flood_n, Duration::from_secs(flood_s as u64), legit) {
            Ok(r) => {
                problems.extend(r.problems.iter().cloned());
                Some(r)
            }
            Err(e) => {
                problems.push(format!("flood: {e}"));
                None
            }
        }
    };

    // ---------------- report
    let o_r = stats(ours.receipt_us.clone());
    let o_s = stats(ours.send_us.clone());
    let s_r = sdk.as_ref().and_then(|l| stats(l.receipt_us.clone()));
    let s_s = sdk.as_ref().and_then(|l| stats(l.send_us.clone()));
    println!();
    println!("baseline: {sdk_version}");
    println!(
        "{:<38} {:>10} {:>10} {:>10}",
        "latency (us)", "ours", "sdk", "sdk/ours"
    );
    let row = |name: &str, o: &Option<Stats>, s: &Option<Stats>, pick: fn(&Stats) -> f64| {
        let (o, s) = (o.as_ref().map(pick), s.as_ref().map(pick));
        println!(
            "{name:<38} {:>10} {:>10} {:>10}",
            fmt_opt(o, 1.0, 1),
            fmt_opt(s, 1.0, 1),
            ratio(s, o)
        );
    };
    row("send -> delivered receipt p50", &o_r, &s_r, |s| s.p50);
    row("send -> delivered receipt p99", &o_r, &s_r, |s| s.p99);
    row("send() returns (peer closed) p50", &o_s, &s_s, |s| s.p50);
    row("send() returns (peer closed) p99", &o_s, &s_s, |s| s.p99);
    println!(
        "  (samples: ours {} / sdk {}; messages seen by the receivers: ours {} / sdk {} of {expected})",
        o_r.as_ref().map_or(0, |s| s.n),
        s_r.as_ref().map_or(0, |s| s.n),
        ours.received,
        sdk.as_ref().map_or(0, |l| l.received),
    );

    println!();
    if let Some(f) = &fl {
        println!(
            "flood: {} hostile frames on {} connections in {:.1} s ({:.0} frames/s): {}",
            f.frames,
            f.connections,
            f.wall.as_secs_f64(),
            f.frames as f64 / f.wall.as_secs_f64().max(1e-9),
            f.plan_summary
        );
        println!(
            "  receiver CPU (child process, getrusage): {:.3} s during the flood; {:.3} s including the {:.1} s \
             trail of coalesced receipts (user {:.3} s, sys {:.3} s) = {:.1} us per hostile frame",
            f.cpu_flood_s,
            f.cpu_total_s,
            f.trail.as_secs_f64(),
            f.cpu_user_s,
            f.cpu_sys_s,
            f.cpu_total_s * 1e6 / f.frames.max(1) as f64
        );
        println!(
            "  receiver afterwards: {} threads, max RSS {} kB, {} messages held for review",
            f.threads, f.max_rss_kb, f.held_now
        );
        println!(
            "  legit: {} sent, {} with exactly one receipt (pending->delivered) and seen exactly once by the host",
            f.legit_sent, f.legit_ok
        );
        for l in &f.legit_report {
            println!("    ! {l}");
        }
        println!("  host message callback saw: {}", f.host_saw);
        println!("  receipts at the hostile senders' sinks: {}", f.sinks);
        if !f.job_errors.is_empty() {
            println!(
                "  hostile writer outcomes other than a clean close: {:?}",
                f.job_errors
            );
        }
    } else {
        println!("flood: n/a");
    }

    println!();
    println!("targets:");
    let speedup = match (&o_r, &s_r) {
        (Some(o), Some(s)) if o.p50 > 0.0 => Some(s.p50 / o.p50),
        _ => None,
    };
    target(
        speedup.map(|x| x >= 3.0),
        format!(
            "send -> delivered receipt p50 >= 3x lower than the SDK's: {} (ours {} us, sdk {} us)",
            speedup.map_or("n/a".into(), |x| format!("{x:.2}x")),
            fmt_opt(o_r.as_ref().map(|s| s.p50), 1.0, 1),
            fmt_opt(s_r.as_ref().map(|s| s.p50), 1.0, 1)
        ),
    );
    let cpu = fl.as_ref().map(|f| f.cpu_total_s);
    target(
        cpu.map(|c| c < 1.0),
        format!(
            "receiver CPU for {} hostile frames < 1 core-second: {} s",
            fl.as_ref().map_or(flood_n, |f| f.frames),
            fmt_opt(cpu, 1.0, 3)
        ),
    );
    target(
        fl.as_ref()
            .map(|f| f.legit_ok == legit && f.legit_sent == legit && legit > 0),
        format!(
            "no legit message lost or mis-receipted in the flood: {}",
            fl.as_ref()
                .map_or("n/a".into(), |f| format!("{}/{legit} ok", f.legit_ok))
        ),
    );

    print_footer(&problems, &load_start, t_total);
}
