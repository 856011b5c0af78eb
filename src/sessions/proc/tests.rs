use super::*;

// Start tokens and pid namespaces come from Linux's /proc (none elsewhere,
// as in Qwen Code).
#[cfg(target_os = "linux")]
#[test]
fn own_identity_is_readable() {
    let token = proc_start_token(own_pid()).expect("start token");
    let (boot, ticks) = token.split_once(':').unwrap();
    assert_eq!(Some(boot.to_string()), boot_id());
    assert!(ticks.parse::<u64>().is_ok());
    assert!(pid_namespace().is_some());
    assert!(is_same_process(own_pid(), Some(&token)));
    assert!(!is_same_process(own_pid(), Some(&format!("{boot}:1"))));
    assert!(is_same_process(own_pid(), None));
    assert!(!is_pid_alive(0));
    assert!(!is_pid_alive(u64::MAX));
    assert_eq!(boot_id_of("abc:12"), Some("abc"));
    assert_eq!(boot_id_of("abc"), None);
}

#[test]
fn a_reaped_child_is_dead_and_a_zombie_is_dead() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id() as u64;
    // Not yet reaped: a zombie once it exits.
    for _ in 0..200 {
        if !is_pid_alive(pid) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(!is_pid_alive(pid), "an exited, unreaped child is a zombie");
    child.wait().unwrap();
    assert!(!is_pid_alive(pid));
}
