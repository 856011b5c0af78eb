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
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(now);
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

impl State {
    /// An event at `now`.
    fn record(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// What the debouncer thread does next at `now` (an emission settles the
    /// burst). The time is a parameter so the rule can be tested on a
    /// virtual clock.
    fn next(&mut self, now: Instant, debounce: Duration, max_wait: Duration) -> Next {
        if self.stop {
            return Next::Stop;
        }
        if self.now {
            self.now = false;
            self.first = None;
            self.last = None;
            return Next::Emit;
        }
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return Next::Wait(None);
        };
        let due = (last + debounce).min(first + max_wait);
        if now < due {
            return Next::Wait(Some(due - now));
        }
        self.first = None;
        self.last = None;
        Next::Emit
    }
}

/// The debouncer thread's next step.
#[derive(Debug, PartialEq)]
enum Next {
    Stop,
    Emit,
    /// Until notified, or for at most this long.
    Wait(Option<Duration>),
}

fn run(shared: &Shared, debounce: Duration, max_wait: Duration, emit: impl Fn()) {
    // This thread only sleeps until deadlines: ask the kernel not to add its
    // default 50 us of timer slack to them (a per-thread setting).
    crate::sys::thread::precise_timers();
    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        match st.next(Instant::now(), debounce, max_wait) {
            Next::Stop => return,
            Next::Emit => {
                drop(st);
                emit();
                st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            }
            Next::Wait(None) => st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
            Next::Wait(Some(left)) => {
                st = shared
                    .cv
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        }
    }
}

#[cfg(test)]
mod tests;
