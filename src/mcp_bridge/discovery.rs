//! How the `qc-mcp-bridge` executable finds the running plugin MCP server:
//! the lock files `<qwen_home>/companion/plugins-mcp/<pid>.lock` written by
//! [`super::server::PluginMcpServer`].
//!
//! A lock file counts only when it parses, names a port and a token, and
//! its `pid` is alive (a stale file of a crashed IDE is skipped). Among
//! those, the server of the IDE named by [`PREFERRED_PID_ENV`] comes first
//! (a terminal the IDE started carries it, so two IDEs open on the same
//! folder each reach their own plugins), then the servers whose
//! `workspacePaths` contain the bridge's working directory, then the newest
//! file (modification time); when none contains it, the newest live server
//! is used. A variable naming an IDE that is gone changes nothing: the
//! bridge falls back to the working directory as in any other terminal.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

/// The variable a terminal started by the IDE carries (the `env` of
/// `qc_plugin_host_mcp_info`): the pid of the IDE whose plugin MCP server
/// the bridge should use first. Qwen Code passes its environment to the
/// stdio servers it starts (minus a few of its own secrets), so the bridge
/// sees it.
pub const PREFERRED_PID_ENV: &str = "QWEN_COMPANION_PLUGINS_PID";

/// The pid [`PREFERRED_PID_ENV`] holds (`None` when unset, empty, or not a
/// positive number: a malformed value is ignored, never an error).
pub fn preferred_pid_from_env() -> Option<i32> {
    parse_pid(std::env::var(PREFERRED_PID_ENV).ok()?.as_str())
}

fn parse_pid(v: &str) -> Option<i32> {
    v.trim().parse::<i32>().ok().filter(|&p| p > 0)
}

/// A live plugin MCP server, as its lock file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub path: PathBuf,
    pub port: u16,
    pub token: String,
    pub pid: i32,
    pub workspace_paths: Vec<String>,
}

/// True when a process `pid` exists (ours or another user's).
pub fn pid_alive(pid: i32) -> bool {
    pid > 0 && crate::sys::process::exists(pid as u32)
}

fn parse(path: &Path, bytes: &[u8]) -> Option<LockInfo> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let port = u16::try_from(v.get("port")?.as_u64()?).ok()?;
    let token = v.get("authToken")?.as_str()?.to_string();
    let pid = i32::try_from(v.get("pid")?.as_i64()?).ok()?;
    if port == 0 || token.is_empty() {
        return None;
    }
    let workspace_paths = v
        .get("workspacePaths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Some(LockInfo {
        path: path.to_path_buf(),
        port,
        token,
        pid,
        workspace_paths,
    })
}

/// True when `dir` is `root` or inside it (component-wise, also after
/// resolving symlinks of both).
pub fn contains(root: &str, dir: &Path) -> bool {
    let root = Path::new(root);
    if !root.is_absolute() {
        return false;
    }
    if dir.starts_with(root) {
        return true;
    }
    match (root.canonicalize(), dir.canonicalize()) {
        (Ok(r), Ok(d)) => d.starts_with(r),
        _ => false,
    }
}

/// Every live server's lock in `dir`, best first for a bridge running in
/// `cwd`. A missing directory is no server.
pub fn candidates(dir: &Path, cwd: &Path) -> Vec<LockInfo> {
    candidates_preferring(dir, cwd, None)
}

/// [`candidates`], with the live server of the process `preferred` (see
/// [`PREFERRED_PID_ENV`]) first whatever its workspace.
pub fn candidates_preferring(dir: &Path, cwd: &Path, preferred: Option<i32>) -> Vec<LockInfo> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(bool, bool, SystemTime, LockInfo)> = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("lock") {
            continue;
        }
        // Regular files only (never follow a planted link).
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 64 * 1024 {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Some(info) = parse(&path, &bytes) else {
            continue;
        };
        if !pid_alive(info.pid) {
            continue;
        }
        let inside = info.workspace_paths.iter().any(|r| contains(r, cwd));
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let wanted = preferred == Some(info.pid);
        found.push((wanted, inside, mtime, info));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    found.into_iter().map(|(_, _, _, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(dir: &Path, name: &str, v: Value, age_s: u64) {
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        let t = SystemTime::now() - Duration::from_secs(age_s);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(t).unwrap();
    }

    #[test]
    fn live_inside_first_then_newest_and_bad_files_skipped() {
        let dir = std::env::temp_dir().join(format!("qc-disc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id() as i32;
        let lock = |port: u16, ws: &[&str]| serde_json::json!({"port": port, "authToken": "t", "pid": me, "workspacePaths": ws});
        write(&dir, "a.lock", lock(1001, &["/elsewhere"]), 10);
        write(&dir, "b.lock", lock(1002, &["/elsewhere"]), 1);
        write(&dir, "c.lock", lock(1003, &["/proj"]), 100);
        // Dead pid, garbage, wrong extension, missing token: skipped.
        write(
            &dir,
            "d.lock",
            serde_json::json!({"port": 1004, "authToken": "t", "pid": i32::MAX,
                "workspacePaths": ["/proj"]}),
            0,
        );
        std::fs::write(dir.join("e.lock"), "not json").unwrap();
        write(&dir, "f.txt", lock(1006, &["/proj"]), 0);
        write(
            &dir,
            "g.lock",
            serde_json::json!({"port": 1007, "pid": me}),
            0,
        );
        crate::sys::fs::symlink(dir.join("c.lock"), dir.join("h.lock")).unwrap();
        let ports = |cwd: &str| -> Vec<u16> {
            candidates(&dir, Path::new(cwd))
                .into_iter()
                .map(|i| i.port)
                .collect()
        };
        assert_eq!(ports("/proj/sub"), vec![1003, 1002, 1001]);
        assert_eq!(ports("/other"), vec![1002, 1001, 1003]);
        assert_eq!(
            ports("/projector"),
            vec![1002, 1001, 1003],
            "prefix is not containment"
        );
        assert!(candidates(&dir.join("missing"), Path::new("/")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(pid_alive(me) && !pid_alive(0) && !pid_alive(-5));
    }

    #[test]
    fn the_ides_own_server_comes_first_and_a_gone_one_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("qc-disc-pref-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id() as i32;
        // Another live process of ours: the test runner's parent is alive.
        let parent = crate::sys::process::parent_pid() as i32;
        let lock = |port: u16, pid: i32, ws: &[&str]| serde_json::json!({"port": port, "authToken": "t", "pid": pid, "workspacePaths": ws});
        write(&dir, "a.lock", lock(2001, me, &["/proj"]), 1);
        write(&dir, "b.lock", lock(2002, parent, &["/elsewhere"]), 50);
        let ports = |cwd: &str, pref: Option<i32>| -> Vec<u16> {
            candidates_preferring(&dir, Path::new(cwd), pref)
                .into_iter()
                .map(|i| i.port)
                .collect()
        };
        assert_eq!(ports("/proj", None), vec![2001, 2002]);
        assert_eq!(
            ports("/proj", Some(parent)),
            vec![2002, 2001],
            "the env wins over the cwd"
        );
        assert_eq!(
            ports("/proj", Some(i32::MAX)),
            vec![2001, 2002],
            "a gone IDE: as without"
        );
        assert_eq!(parse_pid(" 42 "), Some(42));
        for bad in ["", "0", "-3", "x", "42x", "99999999999"] {
            assert_eq!(parse_pid(bad), None, "{bad:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
