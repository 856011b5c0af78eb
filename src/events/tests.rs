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
