use super::*;
use std::time::Duration;

fn write(dir: &Path, name: &str, v: Value, age_s: u64) {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    let t = SystemTime::now() - Duration::from_secs(age_s);
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(t).unwrap();
}

#[test]
fn live_inside_first_then_newest_and_bad_files_skipped() {
    let dir = std::env::temp_dir().join(format!("qc-disc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let me = std::process::id() as i32;
    let lock = |port: u16, ws: &[&str]| serde_json::json!({"port": port, "authToken": "t", "pid": me, "workspacePaths": ws});
    write(&dir, "a.lock", lock(1001, &["/elsewhere"]), 10);
    write(&dir, "b.lock", lock(1002, &["/elsewhere"]), 1);
    write(&dir, "c.lock", lock(1003, &["/proj"]), 100);
    // Dead pid, garbage, wrong extension, missing token: skipped.
    write(
        &dir,
        "d.lock",
        serde_json::json!({"port": 1004, "authToken": "t", "pid": i32::MAX,
                "workspacePaths": ["/proj"]}),
        0,
    );
    std::fs::write(dir.join("e.lock"), "not json").unwrap();
    write(&dir, "f.txt", lock(1006, &["/proj"]), 0);
    write(
        &dir,
        "g.lock",
        serde_json::json!({"port": 1007, "pid": me}),
        0,
    );
    crate::sys::fs::symlink(dir.join("c.lock"), dir.join("h.lock")).unwrap();
    let ports = |cwd: &str| -> Vec<u16> {
        candidates(&dir, Path::new(cwd))
            .into_iter()
            .map(|i| i.port)
            .collect()
    };
    assert_eq!(ports("/proj/sub"), vec![1003, 1002, 1001]);
    assert_eq!(ports("/other"), vec![1002, 1001, 1003]);
    assert_eq!(
        ports("/projector"),
        vec![1002, 1001, 1003],
        "prefix is not containment"
    );
    assert!(candidates(&dir.join("missing"), Path::new("/")).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(pid_alive(me) && !pid_alive(0) && !pid_alive(-5));
}

#[test]
fn the_ides_own_server_comes_first_and_a_gone_one_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("qc-disc-pref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let me = std::process::id() as i32;
    // Another live process of ours: the test runner's parent is alive.
    let parent = crate::sys::process::parent_pid() as i32;
    let lock = |port: u16, pid: i32, ws: &[&str]| serde_json::json!({"port": port, "authToken": "t", "pid": pid, "workspacePaths": ws});
    write(&dir, "a.lock", lock(2001, me, &["/proj"]), 1);
    write(&dir, "b.lock", lock(2002, parent, &["/elsewhere"]), 50);
    let ports = |cwd: &str, pref: Option<i32>| -> Vec<u16> {
        candidates_preferring(&dir, Path::new(cwd), pref)
            .into_iter()
            .map(|i| i.port)
            .collect()
    };
    assert_eq!(ports("/proj", None), vec![2001, 2002]);
    assert_eq!(
        ports("/proj", Some(parent)),
        vec![2002, 2001],
        "the env wins over the cwd"
    );
    assert_eq!(
        ports("/proj", Some(i32::MAX)),
        vec![2001, 2002],
        "a gone IDE: as without"
    );
    assert_eq!(parse_pid(" 42 "), Some(42));
    for bad in ["", "0", "-3", "x", "42x", "99999999999"] {
        assert_eq!(parse_pid(bad), None, "{bad:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn containment_follows_the_platform_path_rules() {
    let w = PathStyle::Windows;
    assert!(contains("C:\\Work", Path::new("c:/work/src"), w));
    assert!(!contains("C:\\Work", Path::new("C:\\Workshop"), w));
    assert!(!contains("Work", Path::new("Work/src"), w));
    let p = PathStyle::Posix;
    assert!(contains("/w", Path::new("/w/src"), p));
    assert!(!contains("/w", Path::new("/ws"), p));
    assert!(!contains("/W", Path::new("/w/x-does-not-exist"), p));
}
