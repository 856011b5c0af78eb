//! The context-update debouncer: a trailing debounce with a max-wait, on a
//! small dedicated thread so the deadline is kept to the microsecond instead
//! of the runtime timer's millisecond ticks.
//!
//! An update is emitted once `debounce` has passed without a new event, or
//! `max_wait` after the first event of a burst, whichever comes first, so
//! continuous cursor motion cannot starve updates.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    first: Option<Instant>,
    last: Option<Instant>,
    /// Emit at once, without waiting for the debounce.
    now: bool,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

pub struct Debouncer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Debouncer {
    /// Starts the thread; `emit` runs on it for every update due.
    pub fn start(
        debounce: Duration,
        max_wait: Duration,
        emit: impl Fn() + Send + 'static,
    ) -> std::io::Result<Debouncer> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("qc-debounce".into())
            .spawn(move || run(&s, debounce, max_wait, emit))?;
        Ok(Debouncer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Records an event (cheap; never blocks on the emission).
    pub fn notify(&self) {
        let now = Instant::now();
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.first.get_or_insert(now);
        st.last = Some(now);
        drop(st);
        self.shared.cv.notify_one();
    }

    /// Asks for an emission at once (it also settles a pending burst).
    pub fn emit_now(&self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.now = true;
        drop(st);
        self.shared.cv.notify_one();
    }

    /// Stops the thread (pending updates are dropped) and joins it.
    pub fn stop(&self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stop = true;
        self.shared.cv.notify_one();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Debouncer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, debounce: Duration, max_wait: Duration, emit: impl Fn()) {
    // This thread only sleeps until deadlines: ask the kernel not to add its
    // default 50 us of timer slack to them (a per-thread setting).
    crate::sys::thread::precise_timers();
    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if st.stop {
            return;
        }
        if st.now {
            st.now = false;
            st.first = None;
            st.last = None;
            drop(st);
            emit();
            st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            continue;
        }
        let (Some(first), Some(last)) = (st.first, st.last) else {
            st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let due = (last + debounce).min(first + max_wait);
        let now = Instant::now();
        if now < due {
            st = shared
                .cv
                .wait_timeout(st, due - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            continue;
        }
        st.first = None;
        st.last = None;
        drop(st);
        emit();
        st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn burst_coalesces_and_max_wait_bounds() {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let d = Debouncer::start(
            Duration::from_millis(30),
            Duration::from_millis(100),
            move || {
                c.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
        for _ in 0..5 {
            d.notify();
        }
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(count.load(Ordering::SeqCst), 1);
        // Continuous events every 10 ms for 350 ms: max-wait forces emissions.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(350) {
            d.notify();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            count.load(Ordering::SeqCst) >= 3,
            "{}",
            count.load(Ordering::SeqCst)
        );
        let before = count.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        let settled = count.load(Ordering::SeqCst);
        assert!(settled <= before + 1);
        d.emit_now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            count.load(Ordering::SeqCst),
            settled + 1,
            "emit_now does not wait"
        );
        d.stop();
        d.notify();
    }
}
