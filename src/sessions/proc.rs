//! Process identity as Qwen Code computes it: the boot id, a process's start
//! ticks, the PID namespace, and whether a PID is still the process a record
//! describes.

/// The kernel's boot id (Linux), trimmed; cached once read successfully.
pub fn boot_id() -> Option<String> {
    crate::sys::process::boot_id()
}

/// `"<boot id>:<start ticks>"` for `pid` (Linux: field 22 of the process's
/// `stat` file), or `None` off Linux or when unreadable.
pub fn proc_start_token(pid: u64) -> Option<String> {
    crate::sys::process::start_token(u32::try_from(pid).ok()?)
}

/// The id of our PID namespace (Linux: the inode of this process's `ns/pid`
/// link, followed as `stat` does).
pub fn pid_namespace() -> Option<u64> {
    crate::sys::process::pid_namespace()
}

/// This process's PID.
pub fn own_pid() -> u64 {
    crate::sys::process::current_pid() as u64
}

/// `kill(pid, 0)` succeeds or fails with EPERM/EACCES, and the process is
/// not a zombie.
pub fn is_pid_alive(pid: u64) -> bool {
    u32::try_from(pid).is_ok_and(crate::sys::process::is_alive)
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
mod tests;
