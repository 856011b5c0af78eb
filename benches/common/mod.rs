//! Helpers shared by the benchmark binaries (`benches/*.rs`): env knobs, raw HTTP/SSE reading,
//! percentiles, table cells, PASS/MISS lines, the load average, the node baselines' binary and
//! their dependencies, and stopping a child process (asked to quit, then killed by PID).
//!
//! Included by each bench as `mod common;` (cargo does not treat this file as a bench target).

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

// ======================================================================= environment knobs

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

// ======================================================================= statistics

#[derive(Clone, Debug)]
pub struct Stats {
    pub p50: f64,
    pub p99: f64,
    pub n: usize,
}

/// Percentiles (nearest rank) of samples in microseconds.
pub fn stats(mut v: Vec<f64>) -> Option<Stats> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = |p: f64| {
        let r = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[r - 1]
    };
    Some(Stats {
        p50: rank(0.50),
        p99: rank(0.99),
        n: v.len(),
    })
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

// ======================================================================= printing

pub fn fmt_opt(v: Option<f64>, unit_div: f64, prec: usize) -> String {
    v.map(|x| format!("{:.*}", prec, x / unit_div))
        .unwrap_or_else(|| "n/a".into())
}

pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".into(),
    }
}

pub fn target(ok: Option<bool>, text: String) {
    let tag = match ok {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "n/a ",
    };
    println!("  [{tag}] {text}");
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The end of a report: the problems met (if any), total time since `started`, and the load
/// average at the start and now.
pub fn print_footer(problems: &[String], load_start: &str, started: Instant) {
    if !problems.is_empty() {
        println!();
        println!("problems:");
        for p in problems {
            println!("  - {p}");
        }
    }
    println!();
    println!(
        "total bench time {:.1} s; load average at start {load_start}, at end {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
}

// ======================================================================= node baselines

pub fn node_bin() -> String {
    std::env::var("QC_BENCH_NODE").unwrap_or_else(|_| "node".into())
}

/// `bench/<name>`: a node baseline's directory.
pub fn baseline_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("bench")
        .join(name)
}

/// Makes sure `dir`'s node_modules holds the pinned dependencies: unless every one of `markers`
/// (paths under `dir`) exists, `npm ci` from the lock. `what` names the baseline in the progress
/// line.
pub fn ensure_npm_deps(dir: &Path, markers: &[&str], what: &str) -> Result<(), String> {
    if markers.iter().all(|m| dir.join(m).exists()) {
        return Ok(());
    }
    eprintln!("bench: installing the {what}'s dependencies (npm ci) ...");
    let st = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("npm: {e}"))?;
    if !st.success() {
        return Err(format!("npm ci failed ({st})"));
    }
    Ok(())
}

// ======================================================================= child processes

/// Asks a child to quit (`quit` line on its stdin), waits up to `grace` for it to exit, then
/// kills it by PID and reaps it.
pub fn quit_child(child: &mut Child, stdin: &mut ChildStdin, grace: Duration) {
    let _ = stdin.write_all(b"quit\n");
    let _ = stdin.flush();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill(); // by PID
    let _ = child.wait();
}

// ======================================================================= raw HTTP / SSE reading

pub fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A line without its CRLF; EOF is an error.
pub fn read_line(r: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    while line.ends_with('\n') || line.ends_with('\r') {
        line.pop();
    }
    Ok(line)
}

/// Incremental `text/event-stream` parser: yields the `data` of every complete event (events
/// without data, such as a priming event, are skipped).
#[derive(Default)]
pub struct SseParser {
    buf: String,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend(
            String::from_utf8_lossy(bytes)
                .chars()
                .filter(|&c| c != '\r'),
        );
        let mut out = Vec::new();
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !(data.is_empty() || data.len() == 1 && data[0].is_empty()) {
                out.push(data.join("\n"));
            }
        }
        out
    }
}
