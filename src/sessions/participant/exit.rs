//! Exit cleanup, the one process-wide hook (see the module docs of
//! `sessions`): on normal exit, the records and sockets still registered by
//! this process are removed. Registered through [`crate::sys::at_exit`],
//! which owns the `atexit` trampoline.

use std::path::PathBuf;
use std::sync::Mutex;

use once_cell::sync::Lazy;

use super::{lock, registry};

pub(super) enum ExitItem {
    Record { path: PathBuf, session_id: String },
    Socket { path: PathBuf },
}

struct ExitEntry {
    owner: u64,
    key: u64,
    pid: u64,
    item: ExitItem,
}

static EXIT_ITEMS: Lazy<Mutex<Vec<ExitEntry>>> = Lazy::new(|| Mutex::new(Vec::new()));

/// Registered with [`crate::sys::at_exit`] (which owns the `atexit` trampoline).
fn run_exit_cleanup() {
    let _ = std::panic::catch_unwind(|| {
        let mut items = match EXIT_ITEMS.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        let pid = crate::sessions::proc::own_pid();
        for e in items.drain(..) {
            if e.pid != pid {
                continue;
            }
            match e.item {
                ExitItem::Record { path, session_id } => {
                    registry::remove_if_ours(&path, pid, &session_id);
                }
                ExitItem::Socket { path } => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    });
}

pub(super) fn exit_add(owner: u64, key: u64, item: ExitItem) {
    crate::sys::at_exit(run_exit_cleanup);
    let mut items = lock(&EXIT_ITEMS);
    items.retain(|e| !(e.owner == owner && e.key == key));
    items.push(ExitEntry {
        owner,
        key,
        pid: crate::sessions::proc::own_pid(),
        item,
    });
}

pub(super) fn exit_remove(owner: u64, key: u64) {
    lock(&EXIT_ITEMS).retain(|e| !(e.owner == owner && e.key == key));
}
