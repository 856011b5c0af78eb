use super::*;
use std::sync::mpsc;

/// Blocks the callback thread until the returned sender is dropped or used.
fn block(d: &Dispatcher) -> mpsc::Sender<()> {
    let (release, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel();
    assert!(d.post(move || {
        started.send(()).unwrap();
        let _ = wait.recv();
    }));
    is_started.recv().unwrap();
    release
}

#[test]
fn jobs_run_in_order_and_the_queue_is_bounded_while_the_host_is_busy() {
    let d = Dispatcher::new("qc-cb-test").unwrap();
    let release = block(&d);
    let (tx, rx) = mpsc::channel();
    for i in 0..MAX_QUEUED_JOBS {
        let tx = tx.clone();
        assert!(d.post(move || tx.send(i).unwrap()));
    }
    assert!(!d.post(|| {}), "one past the bound is refused");
    let owed_tx = tx.clone();
    assert!(d.post_owed(move || owed_tx.send(usize::MAX).unwrap()));
    assert_eq!(d.stats().refused, 1);
    assert_eq!(d.stats().waiting, MAX_QUEUED_JOBS + 1);
    drop(release);
    let got: Vec<usize> = rx.iter().take(MAX_QUEUED_JOBS + 1).collect();
    let mut want: Vec<usize> = (0..MAX_QUEUED_JOBS).collect();
    want.push(usize::MAX);
    assert_eq!(got, want);
}

#[test]
fn latest_notifications_coalesce_and_room_opens_when_the_host_takes_them() {
    let d = Arc::new(Dispatcher::new("qc-cb-test").unwrap());
    let release = block(&d);
    let (tx, rx) = mpsc::channel();
    let mut full = false;
    for round in 0..3 {
        for key in 0..MAX_LATEST_KEYS {
            let tx = tx.clone();
            let push = d.post_latest(format!("k{key}"), 10, move || {
                tx.send((key, round)).unwrap()
            });
            full |= push == Push::Full;
        }
    }
    assert!(full, "the key bound asks the producer to wait");
    assert_eq!(d.stats().coalesced, 2 * MAX_LATEST_KEYS as u64);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let waiter = {
        let d = d.clone();
        std::thread::spawn(move || rt.block_on(d.room()))
    };
    drop(release);
    waiter.join().unwrap();
    let got: Vec<(usize, i32)> = rx.iter().take(MAX_LATEST_KEYS).collect();
    assert!(got.iter().all(|(_, round)| *round == 2), "only the newest");
    assert_eq!(
        got.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        (0..MAX_LATEST_KEYS).collect::<Vec<_>>()
    );
}

#[test]
fn logs_past_their_bound_are_dropped_and_counted() {
    let d = Dispatcher::new("qc-cb-test").unwrap();
    let release = block(&d);
    for _ in 0..MAX_PENDING_LOGS {
        assert!(d.post_log(|| {}));
    }
    assert!(!d.post_log(|| {}));
    assert!(!d.try_post_log(|| {}));
    assert_eq!(d.stats().dropped_logs, 2);
    // Logs do not take the room of events.
    assert!(d.post(|| {}));
    drop(release);
    d.shutdown();
    assert!(!d.post(|| {}), "nothing is taken after shutdown");
}
