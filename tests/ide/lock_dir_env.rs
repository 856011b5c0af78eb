//! `$QWEN_HOME` moves the lock directory and the session registry (its own
//! test binary: it changes the process environment and the current
//! directory, which must not race other tests' threads; the tests here take
//! one lock so they run one at a time).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use qc_test_support::TempDir;
use qwen_companion::ide::lockfile::lock_dir;
use qwen_companion::ide::{Companion, Config as IdeConfig};
use qwen_companion::sessions::{Config as SessionsConfig, Participant, RegisterOptions};

static ENV: Mutex<()> = Mutex::new(());

#[test]
fn qwen_home_moves_lock_dir() {
    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    let home = std::env::temp_dir().join(format!("qc-qh-{}", std::process::id()));
    std::env::set_var("QWEN_HOME", &home);
    assert_eq!(lock_dir(None).unwrap(), home.join("ide"));
    std::env::set_var("QWEN_HOME", "");
    assert!(lock_dir(None).unwrap().ends_with(".qwen/ide"));
    std::env::remove_var("QWEN_HOME");
    let default = lock_dir(None).unwrap();
    assert!(default.ends_with(".qwen/ide"));
    let over = std::path::Path::new("/some/where");
    assert_eq!(lock_dir(Some(over)).unwrap(), over);
}

/// Starts a companion and registers a participant with only the environment
/// to go by (no lockDir, no qwenHome), and checks where their files land.
fn files_land_under(expected_home: &Path, workspace: &Path) {
    let cfg = serde_json::json!({"workspaceRoots": [workspace]}).to_string();
    let c = Companion::new(IdeConfig::from_json(Some(&cfg)).unwrap()).unwrap();
    c.start().unwrap();
    let port = c.port().unwrap();
    let lock = expected_home.join("ide").join(format!("{port}.lock"));
    assert_eq!(c.lock_file_path().unwrap(), lock);
    assert!(lock.is_file(), "{} written", lock.display());

    let p = Participant::new(
        SessionsConfig::from_json(Some(
            &serde_json::json!({
                "runtimeDir": expected_home.join("rt"),
                "sweepSockets": false,
                "cleanupAtExit": false,
            })
            .to_string(),
        ))
        .unwrap(),
    )
    .unwrap();
    let opts = RegisterOptions::from_json(Some(
        &serde_json::json!({"name": "env", "cwd": workspace}).to_string(),
    ))
    .unwrap();
    let info = p.register(opts).unwrap();
    let record = PathBuf::from(&info.record_path);
    assert_eq!(record.parent().unwrap(), expected_home.join("sessions"));
    assert!(record.is_file(), "{} written", record.display());

    c.stop().unwrap();
    assert!(!lock.exists(), "the lock file is removed on stop");
    p.close().unwrap();
    assert!(!record.exists(), "the record is removed on close");
}

#[test]
fn tilde_qwen_home_is_expanded_against_home() {
    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    let home = TempDir::new("home");
    let old_home = std::env::var_os("HOME");
    std::env::set_var("HOME", home.path());
    // As a user writes it where the shell does not expand it.
    std::env::set_var("QWEN_HOME", "~/q");
    files_land_under(&home.path().join("q"), home.path());
    std::env::set_var("QWEN_HOME", "~");
    assert_eq!(lock_dir(None).unwrap(), home.path().join("ide"));
    std::env::remove_var("QWEN_HOME");
    match old_home {
        Some(h) => std::env::set_var("HOME", h),
        None => std::env::remove_var("HOME"),
    }
}

#[test]
fn relative_qwen_home_is_made_absolute_against_cwd() {
    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    let cwd = TempDir::new("cwd");
    let old_cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(cwd.path()).unwrap();
    std::env::set_var("QWEN_HOME", "rel/q");
    files_land_under(&cwd.path().join("rel/q"), cwd.path());
    std::env::remove_var("QWEN_HOME");
    std::env::set_current_dir(old_cwd).unwrap();
}
