//! The library's panic hook (src/panics.rs): installed once, lazily, by the
//! first library object; quiet for panics inside the library or on its own
//! `qc-*` threads (logged instead); every other panic reaches the host's
//! hook unchanged. Own test binary: the panic hook is process-wide.

use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qc_test_support::wait_until;
use qwen_companion::ffi::*;

static HOST_SAW: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static LOGGED: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_log(_: *mut c_void, level: u32, message: *const c_char) {
    let m = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    // Records only: no assertion inside an `extern "C"` callback.
    if let Ok(mut l) = LOGGED.lock() {
        l.push((level, m));
    }
}

fn host_saw(needle: &str) -> bool {
    HOST_SAW
        .lock()
        .unwrap()
        .iter()
        .any(|(_, m)| m.contains(needle))
}

fn logged(needle: &str) -> bool {
    LOGGED
        .lock()
        .unwrap()
        .iter()
        .any(|(_, m)| m.contains(needle))
}

fn panic_on_thread(name: &str, message: &'static str) {
    let t = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || std::panic::panic_any(message))
        .unwrap();
    assert!(t.join().is_err());
}

#[test]
fn library_panics_are_quiet_and_host_panics_untouched() {
    // The host's own hook, set before the library is used.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let m = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let t = std::thread::current().name().unwrap_or("").to_string();
        HOST_SAW.lock().unwrap().push((t, m));
        default(info);
    }));

    // Before any library object the library has no hook: even a `qc-*`
    // thread's panic is the host's.
    panic_on_thread("qc-early", "early-panic");
    assert!(host_saw("early-panic"));

    // The first object installs the hook.
    let mut c: *mut qc_companion = std::ptr::null_mut();
    let cfg = c"{\"workspaceRoots\":[\"/tmp\"]}";
    let st = unsafe { qc_companion_new(cfg.as_ptr(), &mut c, std::ptr::null_mut()) };
    assert_eq!(st, QC_OK);
    let st = unsafe {
        qc_companion_set_log_callback(
            c,
            Some(on_log),
            std::ptr::null_mut(),
            None,
            QC_LOG_ERROR,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(st, QC_OK);

    // A host thread's panic: the host hook sees it, the log does not.
    panic_on_thread("host-worker", "host-panic");
    assert!(host_saw("host-panic"));
    assert!(!logged("host-panic"));
    // The test thread itself too.
    assert!(std::panic::catch_unwind(|| std::panic::panic_any("host-main-panic")).is_err());
    assert!(host_saw("host-main-panic"));

    // A library-owned thread's panic: not the host's, logged instead.
    panic_on_thread("qc-rt", "rt-panic");
    assert!(
        wait_until(Duration::from_secs(5), || logged("rt-panic")),
        "{:?}",
        LOGGED.lock().unwrap()
    );
    assert!(!host_saw("rt-panic"));
    let line = LOGGED
        .lock()
        .unwrap()
        .iter()
        .find(|(_, m)| m.contains("rt-panic"))
        .cloned()
        .unwrap();
    assert_eq!(line.0, QC_LOG_ERROR);
    assert!(line.1.contains("thread qc-rt"), "{}", line.1);
    assert!(
        line.1.contains("panic_hook.rs"),
        "location given: {}",
        line.1
    );

    // A panic inside a library entry point on a host thread: quiet, and its
    // message (with the location) is what the call reports.
    let r = std::panic::catch_unwind(|| {
        let _inside = qwen_companion::panics::Boundary::enter();
        std::panic::panic_any("boundary-panic")
    });
    assert!(r.is_err());
    assert!(!host_saw("boundary-panic"));
    let last = qwen_companion::panics::take_last().expect("recorded");
    assert!(
        last.contains("boundary-panic") && last.contains("panic_hook.rs"),
        "{last}"
    );
    assert!(wait_until(Duration::from_secs(5), || logged(
        "boundary-panic"
    )));
    // Once the entry point returned, the same thread is the host's again.
    assert!(std::panic::catch_unwind(|| std::panic::panic_any("after-boundary")).is_err());
    assert!(host_saw("after-boundary"));

    unsafe { qc_companion_free(c) };
    a_panicking_log_callback_is_not_logged_again();
}

/// Part of the test above (one test: the order of hook installation matters).
fn a_panicking_log_callback_is_not_logged_again() {
    let dispatcher = Arc::new(qwen_companion::events::Dispatcher::new("qc-cb").unwrap());
    let logger = qwen_companion::host::Logger::new(dispatcher.clone());
    let calls = Arc::new(Mutex::new(0u32));
    let seen = calls.clone();
    logger.set(Some((
        Arc::new(move |_, _: &str| {
            *seen.lock().unwrap() += 1;
            panic!("log callback panics");
        }),
        qwen_companion::host::LogLevel::Error,
    )));
    logger.error(|| "loop-check".into());
    assert!(wait_until(Duration::from_secs(5), || *calls
        .lock()
        .unwrap()
        >= 1));
    // The behaviour under test: no second call follows within 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        *calls.lock().unwrap(),
        1,
        "the callback's own panic is not fed back to it"
    );
    assert!(
        !host_saw("log callback panics"),
        "quiet: it ran on a qc-cb thread"
    );
    drop(logger);
    dispatcher.shutdown();
}
