use super::*;

#[test]
fn pull_mode_queues_coalesces_and_answers() {
    let link = HostLink::new().unwrap();
    assert_eq!(link.next_event().unwrap_err().status, Status::Refused);
    let fd = link.enable_pull().unwrap();
    assert_eq!(link.enable_pull().unwrap(), fd);
    assert!(link.notify(json!({"type": "a"}), None));
    for i in 0..3 {
        link.notify_latest("p\0c".into(), json!({"type": "ui_push", "n": i}), None);
    }
    let rx = link
        .pull_request(json!({"type": "host_request"}))
        .unwrap()
        .unwrap();
    assert_eq!(link.next_event().unwrap().unwrap()["type"], "a");
    assert_eq!(link.next_event().unwrap().unwrap()["n"], 2);
    let req = link.next_event().unwrap().unwrap();
    let id = req["id"].as_u64().unwrap();
    link.respond(id, Ok(Some("1".into()))).unwrap();
    assert_eq!(rx.blocking_recv().unwrap(), Ok(Some("1".into())));
    assert_eq!(link.next_event().unwrap(), None);
    assert_eq!(link.stats()["pulled"]["coalesced"], 2);
}

#[test]
fn sizes_follow_the_json_length() {
    let v = json!({"payload": "x".repeat(1000)});
    let n = approx_size(&v);
    assert!((1000..1100).contains(&n), "{n}");
}

#[test]
fn log_lines_become_bounded_pulled_events_in_order() {
    use crate::host::LogLevel;
    // A panic caught in another test of this process is logged to every
    // logger (see `crate::panics`): only this test's own lines are compared.
    let ours = |e: &Value| {
        !e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("panic in the library"))
    };
    let link = HostLink::new().unwrap();
    assert_eq!(
        link.enable_log_events(Some(LogLevel::Info))
            .unwrap_err()
            .status,
        Status::Refused
    );
    link.enable_pull().unwrap();
    link.enable_log_events(Some(LogLevel::Info)).unwrap();
    link.logger().info(|| "first".into());
    link.logger().debug(|| "too verbose".into());
    // Log lines reach the queue on the callback thread: wait for them.
    let wait = |n: usize| {
        let t = std::time::Instant::now();
        while lock(&link.pull).as_ref().unwrap().len() < n {
            assert!(t.elapsed() < std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    wait(1);
    assert!(link.notify(json!({"type": "event"}), None));
    link.logger().warn(|| "second".into());
    let t = std::time::Instant::now();
    let mut got: Vec<Value> = Vec::new();
    while got.len() < 3 {
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{got:?}");
        got.extend(std::iter::from_fn(|| link.next_event().unwrap()).filter(ours));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(
        got,
        vec![
            json!({"type": "log", "level": 3, "message": "first"}),
            json!({"type": "event"}),
            json!({"type": "log", "level": 2, "message": "second"}),
        ]
    );
    // Bounded: the oldest lines go first, and are counted.
    let total = pull::MAX_LOGS + 10;
    for i in 0..total {
        link.logger().info(move || format!("line {i}"));
    }
    let last = format!("line {}", total - 1);
    let t = std::time::Instant::now();
    while link.stats()["pulled"]["droppedLogs"].as_u64() < Some(10) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{}",
            link.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut got = Vec::new();
    while got.last().and_then(|e: &Value| e["message"].as_str()) != Some(last.as_str()) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{}",
            link.stats()
        );
        got.extend(std::iter::from_fn(|| link.next_event().unwrap()).filter(ours));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // What was kept is the newest lines, in order, at most MAX_LOGS of them.
    assert!(got.len() <= pull::MAX_LOGS, "{}", got.len());
    let numbers: Vec<usize> = got
        .iter()
        .map(|e| e["message"].as_str().unwrap()[5..].parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    assert!(
        numbers[0] >= 10,
        "the oldest lines were dropped: {numbers:?}"
    );
    // Off again.
    link.enable_log_events(None).unwrap();
    link.logger().error(|| "dropped".into());
    link.notify(json!({"type": "after"}), None);
    let rest: Vec<Value> = std::iter::from_fn(|| link.next_event().unwrap())
        .filter(ours)
        .collect();
    assert_eq!(rest, vec![json!({"type": "after"})]);
}
