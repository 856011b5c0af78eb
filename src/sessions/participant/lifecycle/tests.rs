use super::*;

fn id(start: Option<&str>, ns: Option<u64>) -> Identity {
    Identity {
        pid: 7,
        pid_ns: ns,
        boot_id: None,
        proc_start: start.map(str::to_string),
    }
}

#[test]
fn linux_needs_the_process_identity() {
    let full = id(Some("b:1"), Some(4));
    assert_eq!(checked_identity(full.clone(), true).unwrap(), full);
    assert!(checked_identity(id(None, Some(4)), true).is_err());
    assert!(checked_identity(id(Some("b:1"), None), true).is_err());
}

#[test]
fn elsewhere_the_record_carries_null_identity_as_the_cli_writes() {
    let got = checked_identity(id(Some("b:1"), Some(4)), false).unwrap();
    assert_eq!((got.proc_start, got.pid_ns), (None, None));
    assert!(checked_identity(id(None, None), false).is_ok());
}
