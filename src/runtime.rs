//! The library's one tokio runtime, shared by every running object and shut
//! down when the last user lets go of it, so no library thread outlives the
//! last handle.

use once_cell::sync::Lazy;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::error::{Error, Result, Status};

/// A counted reference to the shared runtime. Dropping the last one shuts the
/// runtime down (its worker threads exit).
pub struct RuntimeRef {
    rt: Option<tokio::runtime::Runtime>,
}

impl RuntimeRef {
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt
            .as_ref()
            .expect("runtime present until drop")
            .handle()
    }
}

impl Drop for RuntimeRef {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            if !may_block() {
                // Dropped from inside an async context: blocking is not allowed here.
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(2));
            }
        }
    }
}

static SHARED: Lazy<Mutex<Weak<RuntimeRef>>> = Lazy::new(|| Mutex::new(Weak::new()));

/// Returns the shared runtime, creating it when no one holds it.
pub fn acquire() -> Result<Arc<RuntimeRef>> {
    let mut slot = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = slot.upgrade() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("qc-rt")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::new(Status::Io, format!("cannot start the runtime: {e}")))?;
    let rt = Arc::new(RuntimeRef { rt: Some(rt) });
    *slot = Arc::downgrade(&rt);
    Ok(rt)
}

/// True when the calling thread may block: it is not a thread of a tokio
/// runtime (ours or one of the embedding host's), where blocking would stall
/// every task of that runtime. The one test for "never block on a runtime
/// thread": blocking calls refuse with [`block_on`], teardown that cannot
/// wait there takes a non-blocking path instead.
pub fn may_block() -> bool {
    tokio::runtime::Handle::try_current().is_err()
}

/// Refuses (with `Status::Refused`) when the calling thread may not block;
/// `what` names the call in the message.
pub fn refuse_on_runtime(what: &str) -> Result<()> {
    if may_block() {
        Ok(())
    } else {
        Err(Error::new(
            Status::Refused,
            format!("{what} blocks and cannot be called from inside an async runtime"),
        ))
    }
}

/// Runs `fut` on `handle` and blocks the calling host thread until it ends;
/// refused on a runtime thread (see [`refuse_on_runtime`]).
pub fn block_on<F: std::future::Future>(
    handle: &tokio::runtime::Handle,
    what: &str,
    fut: F,
) -> Result<F::Output> {
    refuse_on_runtime(what)?;
    Ok(handle.block_on(fut))
}

#[cfg(test)]
mod tests;
