//! No library thread outlives the last handle (its own test binary, so no
//! other test's threads are counted).

use std::ffi::CString;
use std::ptr::null_mut;
use std::time::Duration;

use qwen_companion::ffi::*;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn no_thread_left_after_last_free() {
    let before = threads();
    let dir = qc_test_support::TempDir::new("threads");
    let cfg = CString::new(format!("{{\"lockDir\":{:?}}}", dir.path().join("ide"))).unwrap();
    for _ in 0..3 {
        let (mut a, mut b) = (null_mut(), null_mut());
        unsafe {
            assert_eq!(qc_companion_new(cfg.as_ptr(), &mut a, null_mut()), QC_OK);
            assert_eq!(qc_companion_new(cfg.as_ptr(), &mut b, null_mut()), QC_OK);
            assert_eq!(qc_companion_start(a, null_mut()), QC_OK);
            assert_eq!(qc_companion_start(b, null_mut()), QC_OK);
        }
        assert!(threads() > before);
        unsafe {
            assert_eq!(qc_companion_free(a), QC_OK);
            assert_eq!(qc_companion_free(b), QC_OK);
        }
        qc_test_support::wait_until(Duration::from_secs(5), || threads() <= before);
        assert_eq!(
            threads(),
            before,
            "threads left running after the last free"
        );
    }
}
