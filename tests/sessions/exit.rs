//! Records and sockets are removed at normal process exit even when the
//! host never frees its participant (the `atexit` backstop), and not when
//! `cleanupAtExit` is off; then the next lister sweeps the dead record.
//! The child is this test binary re-run with an environment variable set
//! for the child only (this process's environment is never changed).

use std::path::Path;
use std::process::Command;

use qc_test_support::sessions::*;
use qwen_companion::sessions::{Participant, RegisterOptions};
use serde_json::json;

const CHILD_HOME: &str = "QC_SESSIONS_EXIT_CHILD_HOME";
const CHILD_CLEANUP: &str = "QC_SESSIONS_EXIT_CHILD_CLEANUP";

fn child_main(home: &str) -> ! {
    let cleanup = std::env::var(CHILD_CLEANUP).as_deref() == Ok("1");
    let p = Participant::new(config(Path::new(home), json!({"cleanupAtExit": cleanup}))).unwrap();
    let info = p
        .register(RegisterOptions {
            name: Some("exiting".into()),
            cwd: Some("/w".into()),
            ..Default::default()
        })
        .unwrap();
    println!("RECORD {}", info.record_path);
    println!("SOCKET {}", info.ipc_path);
    std::mem::forget(p);
    std::process::exit(0);
}

fn run_child(home: &Path, cleanup: bool) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "exit::records_are_removed_at_normal_exit",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_HOME, home)
        .env(CHILD_CLEANUP, if cleanup { "1" } else { "0" })
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let find = |tag: &str| {
        stdout
            .lines()
            .find_map(|l| l.find(tag).map(|i| l[i + tag.len()..].trim().to_string()))
            .unwrap_or_else(|| {
                panic!(
                    "child printed no {tag}: {stdout} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    };
    (find("RECORD "), find("SOCKET "))
}

#[test]
fn records_are_removed_at_normal_exit() {
    if let Ok(home) = std::env::var(CHILD_HOME) {
        child_main(&home);
    }
    let home = TempDir::new("exit");
    let (record, socket) = run_child(home.path(), true);
    assert!(!Path::new(&record).exists(), "record removed at exit");
    assert!(!Path::new(&socket).exists(), "socket removed at exit");

    let (record, socket) = run_child(home.path(), false);
    assert!(Path::new(&record).exists(), "left behind without the hook");
    assert!(Path::new(&socket).exists());
    // The next lister sweeps it: its process is gone.
    let p = Participant::new(config(home.path(), json!({}))).unwrap();
    assert!(p.list().is_empty());
    assert!(!Path::new(&record).exists(), "swept by the listing");
}
