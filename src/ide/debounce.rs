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
mod tests {
    use super::*;
    use std::sync::mpsc;

    const DEBOUNCE: Duration = Duration::from_millis(30);
    const MAX_WAIT: Duration = Duration::from_millis(100);

    /// Runs the debouncer's rule on a virtual clock (what `run` does, with
    /// time jumping to the next deadline or event): `events` are the times
    /// (ms) of `notify` calls; returns the times (ms) of the emissions up to
    /// `until` ms.
    fn simulate(events: &[u64], until: u64) -> Vec<u64> {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut st = State::default();
        let mut emitted = Vec::new();
        let mut pending = events.iter().copied().peekable();
        let mut now = 0;
        while now <= until {
            while pending.peek() == Some(&now) {
                st.record(at(now));
                pending.next();
            }
            let wake = match st.next(at(now), DEBOUNCE, MAX_WAIT) {
                Next::Emit => {
                    emitted.push(now);
                    continue;
                }
                Next::Stop => break,
                Next::Wait(None) => None,
                Next::Wait(Some(left)) => Some(now + left.as_millis() as u64),
            };
            // Woken by the deadline or the next event, whichever is first.
            now = match (wake, pending.peek()) {
                (Some(w), Some(&e)) => w.min(e),
                (Some(w), None) => w,
                (None, Some(&e)) => e,
                (None, None) => break,
            };
        }
        emitted
    }

    #[test]
    fn a_burst_is_one_emission_after_the_debounce() {
        assert_eq!(simulate(&[0, 0, 0, 0, 0], 1000), vec![30]);
        assert_eq!(simulate(&[0, 10, 20], 1000), vec![50]);
        assert_eq!(simulate(&[], 1000), Vec::<u64>::new());
    }

    #[test]
    fn max_wait_bounds_continuous_events() {
        // Events every 10 ms from 150 to 490 ms: max-wait forces emissions
        // 100 ms after each burst's first event, then the debounce settles
        // the last burst.
        let events: Vec<u64> = (150..500).step_by(10).collect();
        assert_eq!(simulate(&events, 2000), vec![250, 360, 470, 520]);
    }

    #[test]
    fn emit_now_settles_a_pending_burst() {
        let t0 = Instant::now();
        let mut st = State::default();
        st.record(t0);
        st.now = true;
        assert_eq!(st.next(t0, DEBOUNCE, MAX_WAIT), Next::Emit);
        assert_eq!(st.next(t0 + MAX_WAIT, DEBOUNCE, MAX_WAIT), Next::Wait(None));
        st.stop = true;
        assert_eq!(st.next(t0, DEBOUNCE, MAX_WAIT), Next::Stop);
    }

    #[test]
    fn the_thread_emits_on_its_deadline_and_at_once_on_emit_now() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let d = Debouncer::start(DEBOUNCE, MAX_WAIT, move || {
            let _ = tx.lock().unwrap().send(Instant::now());
        })
        .unwrap();
        let start = Instant::now();
        for _ in 0..5 {
            d.notify();
        }
        let at = rx.recv_timeout(Duration::from_secs(5)).expect("emitted");
        assert!(at - start >= DEBOUNCE, "{:?}", at - start);
        assert!(rx.try_recv().is_err(), "one emission for the burst");
        // emit_now does not wait for the debounce (here 1 h).
        let (tx, slow_rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let slow = Debouncer::start(Duration::from_secs(3600), Duration::from_secs(3600), {
            move || {
                let _ = tx.lock().unwrap().send(());
            }
        })
        .unwrap();
        slow.notify();
        slow.emit_now();
        slow_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("emit_now emits at once");
        d.stop();
        d.notify();
    }
}
