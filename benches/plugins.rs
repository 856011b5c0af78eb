//! `cargo bench --bench plugins` — the plugin host (seed 004) against the desktop app's way of
//! running a plugin: a Node parent doing plain `child_process.fork` with an IPC channel
//! (`bench/plugins-baseline/fork_parent.mjs`, no npm dependency).
//!
//! Both sides run the same plugin, `bench/plugins-baseline/echo/` (one tool, `echo`, answered
//! at once with a `tool_result`), with the same message (`call_tool`, params `{"text": …}`).
//!
//! **1. Warm round trip.** One running plugin, one call at a time, after `QC_PBENCH_WARMUP`
//! unmeasured calls:
//! * **ours**: the blocking call of the C ABI, `qc_plugin_host_call` (params as JSON text in, the
//!   result as an owned JSON string out): schema check, `call_tool` frame, the plugin's reply read
//!   by the runtime, the caller woken;
//! * **node**: `child.send(call_tool)` → the matching `tool_result` in `child.on('message')`.
//!
//! * **floor**: the same plugin on a raw channel (socketpair as fd 3, `NODE_CHANNEL_FD=3`)
//!   driven with blocking writes and reads from the measuring thread: no host, no runtime, no
//!   thread hop; ours minus the floor is what the host adds.
//!
//! The three run in `QC_PBENCH_ROUNDS` interleaved rounds (node, floor, ours; each round a fresh
//! plugin and its own warm-up), so a change of the machine's load hits every side alike.
//!
//! **2. Cold: spawn → first result.** Each iteration a fresh host over a plugins directory holding
//! the echo plugin (so a fresh plugin process) and its first call; the host is then freed (which
//! ends the plugin) before the next one. One idle host stays alive across the loop so the shared
//! runtime is not torn down and rebuilt every iteration (an IDE keeps it).
//! Node: `fork()` → the first `tool_result` of a call sent right after it.
//!
//! **3. Host RSS per running plugin** (the plugins' own memory excluded — they are separate
//! processes): this binary re-run as `--rss-child N` starts one warm-up plugin, reads its own
//! VmRSS, starts N more (N installed copies of echo with distinct ids, one call each), reads it
//! again; growth / N. Node: the parent's RSS growth after forking N children that each answered
//! one call, / N.
//!
//! Targets (PASS/MISS; a miss never fails the process): ours round-trip p50 ≤ 1.1× node's.
//!
//! Knobs (environment): `QC_PBENCH_CALLS` (3000, over all rounds), `QC_PBENCH_ROUNDS` (3),
//! `QC_PBENCH_WARMUP` (300 per round), `QC_PBENCH_COLD` (15),
//! `QC_PBENCH_RSS_N` (10), `QC_BENCH_NODE` (node binary, default `node`), `QC_BENCH_SKIP_NODE=1`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

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
            "qcpb-{tag}-{}-{}",
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

fn echo_dir() -> PathBuf {
    baseline_dir("plugins-baseline").join("echo")
}

fn proc_rss_kb() -> Option<u64> {
    proc_status("VmRSS:")
}

/// A number field of /proc/self/status (`VmRSS:`, `Threads:`).
fn proc_status(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
                .unwrap_or(false)
        })
        .unwrap_or(false)
}

/// The live child processes of this process (the plugins: the host spawns them directly).
fn children() -> Vec<i64> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1).map(|pp| pp == me)
                })
                .unwrap_or(false)
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// `count` copies of the echo plugin under `dir/src`, ids `bench.echo`, `bench.echo1`, ….
fn echo_copies(dir: &Path, count: usize) -> Result<Vec<PathBuf>, String> {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(echo_dir().join("manifest.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let index = std::fs::read(echo_dir().join("index.js")).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..count {
        let d = dir.join("src").join(format!("echo{i}"));
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        let mut m = manifest.clone();
        if i > 0 {
            m["id"] = json!(format!("bench.echo{i}"));
        }
        std::fs::write(d.join("manifest.json"), m.to_string()).map_err(|e| e.to_string())?;
        std::fs::write(d.join("index.js"), &index).map_err(|e| e.to_string())?;
        out.push(d);
    }
    Ok(out)
}

// ======================================================================= ours (C ABI)

#[path = "plugins/ours.rs"]
mod ours;

fn ours_round_trips(warmup: usize, n: usize) -> Result<Vec<f64>, String> {
    let tmp = TempDir::new("rtt")?;
    let dir = tmp.path().join("plugins");
    let host = ours::Host::new(&dir)?;
    let id = host.install(&echo_copies(tmp.path(), 1)?[0])?;
    for i in 0..warmup {
        host.echo(&id, &format!("warm {i}"))?;
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let text = format!("call {i}");
        let t0 = Instant::now();
        host.echo(&id, &text)?;
        v.push(us(t0.elapsed()));
    }
    Ok(v)
}

fn ours_cold(iterations: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let tmp = TempDir::new("cold")?;
    let dir = tmp.path().join("plugins");
    let id = ours::Host::new(&dir)?.install(&echo_copies(tmp.path(), 1)?[0])?;
    let _idle = ours::Host::new(&tmp.path().join("idle"))?; // keeps the shared runtime alive
    let mut first = Vec::new();
    let mut call_only = Vec::new();
    for i in 0..iterations {
        let t0 = Instant::now();
        let host = ours::Host::new(&dir)?;
        let t1 = Instant::now();
        host.echo(&id, &format!("cold {i}"))?;
        first.push(us(t0.elapsed()));
        call_only.push(us(t1.elapsed()));
        let pids = children();
        drop(host);
        // freeing the host ends its plugins (and waits for them)
        if let Some(pid) = pids.into_iter().find(|&p| alive(p)) {
            return Err(format!(
                "plugin {pid} still running after its host was freed"
            ));
        }
    }
    Ok((first, call_only))
}

/// `plugins --rss-child N`: VmRSS of this fresh process around starting N plugins.
fn rss_child(n: usize) -> Result<(), String> {
    let tmp = TempDir::new("rss")?;
    let dir = tmp.path().join("plugins");
    let host = ours::Host::new(&dir)?;
    let mut ids = Vec::new();
    for src in echo_copies(tmp.path(), n + 1)? {
        ids.push(host.install(&src)?);
    }
    host.echo(&ids[0], "warm")?;
    thread::sleep(Duration::from_millis(50));
    let before = proc_rss_kb().unwrap_or(0);
    let threads_before = proc_status("Threads:").unwrap_or(0);
    for id in &ids[1..] {
        host.echo(id, "rss")?;
    }
    thread::sleep(Duration::from_millis(50));
    let after = proc_rss_kb().unwrap_or(0);
    let threads_after = proc_status("Threads:").unwrap_or(0);
    drop(host);
    println!(
        "{}",
        json!({"before": before, "after": after, "n": n,
               "threadsBefore": threads_before, "threadsAfter": threads_after})
    );
    Ok(())
}

/// (RSS growth per plugin in KiB, threads added per plugin).
fn ours_rss(n: usize) -> Result<(f64, f64), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("--rss-child")
        .arg(n.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("rss child: {e}"))?;
    if !out.status.success() {
        return Err(format!("rss child failed ({})", out.status));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| format!("rss child: {e}"))?;
    let before = v["before"].as_f64().unwrap_or(0.0);
    let after = v["after"].as_f64().unwrap_or(0.0);
    let threads =
        v["threadsAfter"].as_f64().unwrap_or(0.0) - v["threadsBefore"].as_f64().unwrap_or(0.0);
    Ok(((after - before) / n as f64, threads / n as f64))
}

/// The floor: the same echo plugin on a raw Node IPC channel (an AF_UNIX socketpair as fd 3,
/// `NODE_CHANNEL_FD=3`) driven with blocking writes and reads from this thread — no host, no
/// runtime, no thread hop. Ours minus this is what the host adds per call.
/// The floor on Windows: not measured (it is a raw socketpair passed as fd 3).
#[cfg(not(unix))]
fn floor_round_trips(_warmup: usize, _n: usize) -> Result<Vec<f64>, String> {
    Err("the floor (a socketpair passed as fd 3) is measured on Unix only".into())
}

#[cfg(unix)]
fn floor_round_trips(warmup: usize, n: usize) -> Result<Vec<f64>, String> {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;

    let (mut parent, child_end) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    let child_fd = child_end.as_raw_fd();
    let mut cmd = Command::new(node_bin());
    cmd.arg(echo_dir().join("index.js"))
        .env("NODE_CHANNEL_FD", "3")
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_UNIQUE_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if child_fd == 3 {
                // dup2(3, 3) would keep FD_CLOEXEC: clear it instead
                if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(child_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", node_bin()))?;
    drop(child_end);
    let result = (|| -> Result<Vec<f64>, String> {
        parent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(parent.try_clone().map_err(|e| e.to_string())?);
        let mut line = String::new();
        let mut v = Vec::with_capacity(n);
        for i in 0..warmup + n {
            let id = format!("f{i}");
            let msg = json!({"type": "call_tool", "requestId": id, "toolName": "echo",
                "params": {"text": format!("call {i}")}, "context": {"cwd": ""}});
            let t0 = Instant::now();
            parent
                .write_all(format!("{msg}\n").as_bytes())
                .map_err(|e| format!("write: {e}"))?;
            loop {
                line.clear();
                if reader
                    .read_line(&mut line)
                    .map_err(|e| format!("read: {e}"))?
                    == 0
                {
                    return Err("the plugin closed its channel".into());
                }
                let reply: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
                if reply["requestId"] == id.as_str() && reply["type"] == "tool_result" {
                    break;
                }
            }
            if i >= warmup {
                v.push(us(t0.elapsed()));
            }
        }
        Ok(v)
    })();
    drop(parent); // EOF: the plugin's channel closes and it exits
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return result;
        }
        thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill(); // by PID
    let _ = child.wait();
    result
}

// ======================================================================= node

struct NodeResult {
    version: String,
    rtt: Vec<f64>,
    cold: Vec<f64>,
    rss_per_child_kb: f64,
}

fn run_node(calls: usize, warmup: usize, cold: usize, rss_n: usize) -> Result<NodeResult, String> {
    let script = baseline_dir("plugins-baseline").join("fork_parent.mjs");
    let mut child = Command::new(node_bin())
        .arg("--expose-gc") // RSS is read after a full GC, so heap slack does not count
        .arg(&script)
        .arg(echo_dir())
        .args([calls, warmup, cold, rss_n].map(|n| n.to_string()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{}: {e}", node_bin()))?;
    let stdout = child.stdout.take();
    let reader = thread::spawn(move || {
        let mut text = String::new();
        stdout.map(|mut s| s.read_to_string(&mut text).map(|_| text))
    });
    // bounded wait, then killed by PID
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("node baseline did not finish in 120 s".into());
            }
        }
    };
    let text = match reader.join() {
        Ok(Some(Ok(t))) => t,
        _ => return Err("node baseline: stdout unreadable".into()),
    };
    if !status.success() {
        return Err(format!("node baseline failed ({status})"));
    }
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("node baseline output: {e}: {text:.200}"))?;
    let nums = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let before = v["rssBeforeKb"].as_f64().unwrap_or(0.0);
    let after = v["rssAfterKb"].as_f64().unwrap_or(0.0);
    Ok(NodeResult {
        version: v["node"].as_str().unwrap_or("?").to_string(),
        rtt: nums("roundTripUs"),
        cold: nums("coldUs"),
        rss_per_child_kb: (after - before) / rss_n.max(1) as f64,
    })
}

// ======================================================================= main

fn row(name: &str, ours: Option<f64>, node: Option<f64>, unit: &str, div: f64, prec: usize) {
    println!(
        "{name:<40} {:>10} {:>10}  {unit:<4} {:>9}",
        fmt_opt(ours, div, prec),
        fmt_opt(node, div, prec),
        ratio(ours, node)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rss-child") {
        let n = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(10);
        if let Err(e) = rss_child(n) {
            eprintln!("rss child: {e}");
            std::process::exit(2);
        }
        return;
    }

    let started = Instant::now();
    let load_start = loadavg();
    let calls = env_usize("QC_PBENCH_CALLS", 3000);
    let warmup = env_usize("QC_PBENCH_WARMUP", 300);
    let cold_n = env_usize("QC_PBENCH_COLD", 15).max(1);
    let rss_n = env_usize("QC_PBENCH_RSS_N", 10).max(1);
    let rounds = env_usize("QC_PBENCH_ROUNDS", 3).max(1);
    let mut problems = Vec::new();

    println!(
        "qwen-companion plugin-host benchmark: ours {} (in-process, C ABI) vs node child_process.fork",
        ours::version()
    );
    println!(
        "  plugin bench/plugins-baseline/echo; {calls} sequential calls in {rounds} interleaved rounds \
         (each after {warmup} warm-up); {cold_n} cold starts; RSS over {rss_n} plugins; {} cores",
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    // Round trips: `rounds` interleaved rounds (node, floor, ours), each with its own warm-up,
    // so a change of the machine's load during the run hits every side alike.
    let skip_node = env_flag("QC_BENCH_SKIP_NODE");
    let per_round = calls.div_ceil(rounds);
    let (mut node_rtt_v, mut floor_v, mut ours_v) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        if !skip_node {
            match run_node(per_round, warmup, 0, 0) {
                Ok(r) => node_rtt_v.extend(r.rtt),
                Err(e) => problems.push(format!("node round {round}: {e}")),
            }
        }
        match floor_round_trips(warmup, per_round) {
            Ok(v) => floor_v.extend(v),
            Err(e) => problems.push(format!("floor round {round}: {e}")),
        }
        match ours_round_trips(warmup, per_round) {
            Ok(v) => ours_v.extend(v),
            Err(e) => problems.push(format!("ours round {round}: {e}")),
        }
    }
    let rtt = stats(ours_v);
    let floor_rtt = stats(floor_v);
    let node = if skip_node {
        None
    } else {
        match run_node(0, 0, cold_n, rss_n) {
            Ok(mut r) => {
                r.rtt = node_rtt_v;
                Some(r)
            }
            Err(e) => {
                problems.push(format!("node: {e}"));
                None
            }
        }
    };
    let (cold, cold_call) = match ours_cold(cold_n) {
        Ok((a, b)) => (stats(a), stats(b)),
        Err(e) => {
            problems.push(format!("ours cold: {e}"));
            (None, None)
        }
    };
    let (rss, threads) = match ours_rss(rss_n) {
        Ok((r, t)) => (Some(r), Some(t)),
        Err(e) => {
            problems.push(format!("ours RSS: {e}"));
            (None, None)
        }
    };

    let node_rtt = node.as_ref().and_then(|n| stats(n.rtt.clone()));
    let node_cold = node.as_ref().and_then(|n| stats(n.cold.clone()));
    if let Some(n) = &node {
        println!("  node {}", n.version);
    }
    println!();
    println!(
        "{:<40} {:>10} {:>10}  {:<4} {:>9}",
        "measure", "ours", "node", "unit", "ours/node"
    );
    let p50 = |s: &Option<Stats>| s.as_ref().map(|s| s.p50);
    let p99 = |s: &Option<Stats>| s.as_ref().map(|s| s.p99);
    row(
        "call_tool round trip p50",
        p50(&rtt),
        p50(&node_rtt),
        "µs",
        1.0,
        1,
    );
    row(
        "call_tool round trip p99",
        p99(&rtt),
        p99(&node_rtt),
        "µs",
        1.0,
        1,
    );
    row(
        "  floor: raw channel, this thread p50",
        p50(&floor_rtt),
        None,
        "µs",
        1.0,
        1,
    );
    row(
        "  floor: raw channel, this thread p99",
        p99(&floor_rtt),
        None,
        "µs",
        1.0,
        1,
    );
    row(
        "spawn → first result p50",
        p50(&cold),
        p50(&node_cold),
        "ms",
        1000.0,
        2,
    );
    row(
        "spawn → first result p99",
        p99(&cold),
        p99(&node_cold),
        "ms",
        1000.0,
        2,
    );
    row(
        "  of which the first call p50 (ours)",
        p50(&cold_call),
        None,
        "ms",
        1000.0,
        2,
    );
    row(
        "host RSS per running plugin",
        rss,
        node.as_ref().map(|n| n.rss_per_child_kb),
        "KiB",
        1.0,
        0,
    );
    row(
        "  host threads per running plugin (ours)",
        threads,
        None,
        "",
        1.0,
        1,
    );
    println!();
    let (o, n) = (p50(&rtt), p50(&node_rtt));
    target(
        o.zip(n).map(|(o, n)| o <= 1.1 * n),
        format!(
            "call_tool round trip p50 ≤ 1.1× node's (ours {} µs, node {} µs, {})",
            fmt_opt(o, 1.0, 1),
            fmt_opt(n, 1.0, 1),
            ratio(o, n)
        ),
    );
    print_footer(&problems, &load_start, started);
}
