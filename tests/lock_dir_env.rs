//! `$QWEN_HOME` moves the lock directory (its own test binary: it changes the
//! process environment, which must not race other tests' threads).

use qwen_companion::ide::lockfile::lock_dir;

#[test]
fn qwen_home_moves_lock_dir() {
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
