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
            if tokio::runtime::Handle::try_current().is_ok() {
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
