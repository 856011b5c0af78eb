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
