use super::*;

#[test]
fn a_poisoned_lock_is_taken_over() {
    let m = std::sync::Arc::new(Mutex::new(1));
    let m2 = m.clone();
    let _ = std::thread::spawn(move || {
        let _g = m2.lock().unwrap();
        panic!("poison it");
    })
    .join();
    assert!(m.is_poisoned());
    *lock(&m) += 1;
    assert_eq!(*lock(&m), 2);
}
