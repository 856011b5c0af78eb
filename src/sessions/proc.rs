//! Process identity as Qwen Code computes it: the boot id, a process's start
//! ticks, the PID namespace, and whether a PID is still the process a record
//! describes.

use once_cell::sync::OnceCell;

/// `/proc/sys/kernel/random/boot_id`, trimmed; cached once read successfully.
pub fn boot_id() -> Option<String> {
    static CACHE: OnceCell<String> = OnceCell::new();
    if let Some(v) = CACHE.get() {
        return Some(v.clone());
    }
    let raw = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let value = raw.trim();
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    Some(CACHE.get_or_init(|| value.to_string()).clone())
}

/// The fields of `/proc/<pid>/stat` after the command name (which may itself
/// contain spaces and parentheses, hence the last `)`).
fn stat_fields(pid: u64) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    let end = raw.rfind(')')?;
    Some(
        raw[end + 1..]
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

/// `"<boot id>:<start ticks>"` for `pid` (field 22 of `/proc/<pid>/stat`),
/// or `None` off Linux or when unreadable.
pub fn proc_start_token(pid: u64) -> Option<String> {
    if !cfg!(target_os = "linux") || pid == 0 {
        return None;
    }
    let boot = boot_id()?;
    let fields = stat_fields(pid)?;
    let start = fields.get(19)?;
    if start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("{boot}:{start}"))
}

/// The inode of `/proc/self/ns/pid` (the link is followed, as `stat` does).
pub fn pid_namespace() -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// This process's PID.
pub fn own_pid() -> u64 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u64 }
}

fn is_zombie(pid: u64) -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    stat_fields(pid)
        .and_then(|f| f.first().cloned())
        .is_some_and(|s| s.starts_with('Z'))
}

/// `kill(pid, 0)` succeeds or fails with EPERM/EACCES, and the process is
/// not a zombie.
pub fn is_pid_alive(pid: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u64 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let alive = rc == 0 || {
        let e = std::io::Error::last_os_error().raw_os_error();
        e == Some(libc::EPERM) || e == Some(libc::EACCES)
    };
    alive && !is_zombie(pid)
}

/// Whether `pid` is still the process whose start token is `proc_start`:
/// alive, and (when both tokens are known) started at the same tick.
pub fn is_same_process(pid: u64, proc_start: Option<&str>) -> bool {
    if !is_pid_alive(pid) {
        return false;
    }
    let Some(recorded) = proc_start else {
        return true;
    };
    match proc_start_token(pid) {
        None => true,
        Some(current) => current == recorded,
    }
}

/// The boot id part of a start token (`None` when it has no `:`).
pub fn boot_id_of(proc_start: &str) -> Option<&str> {
    proc_start.find(':').map(|i| &proc_start[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_identity_is_readable() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let token = proc_start_token(own_pid()).expect("start token");
        let (boot, ticks) = token.split_once(':').unwrap();
        assert_eq!(Some(boot.to_string()), boot_id());
        assert!(ticks.parse::<u64>().is_ok());
        assert!(pid_namespace().is_some());
        assert!(is_same_process(own_pid(), Some(&token)));
        assert!(!is_same_process(own_pid(), Some(&format!("{boot}:1"))));
        assert!(is_same_process(own_pid(), None));
        assert!(!is_pid_alive(0));
        assert!(!is_pid_alive(u64::MAX));
        assert_eq!(boot_id_of("abc:12"), Some("abc"));
        assert_eq!(boot_id_of("abc"), None);
    }

    #[test]
    fn a_reaped_child_is_dead_and_a_zombie_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as u64;
        // Not yet reaped: a zombie once it exits.
        for _ in 0..200 {
            if !is_pid_alive(pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_pid_alive(pid), "an exited, unreaped child is a zombie");
        child.wait().unwrap();
        assert!(!is_pid_alive(pid));
    }
}
