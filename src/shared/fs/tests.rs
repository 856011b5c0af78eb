use super::*;

#[test]
fn absolute_folds_dots() {
    let cwd = std::env::current_dir().unwrap();
    // The file system's root: `/`, or the current drive's (`C:\`) on
    // Windows, where `/a` alone is relative to the current drive.
    let root = cwd.ancestors().last().unwrap();
    assert_eq!(absolute(&root.join("a/./b/../c")), root.join("a").join("c"));
    assert_eq!(absolute(&root.join("../x")), root.join("x"));
    if cfg!(unix) {
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
    assert_eq!(absolute(Path::new("q")), cwd.join("q"));
}

#[test]
fn tilde_is_home() {
    let home = home_dir().unwrap();
    assert_eq!(resolve_user_dir("~").unwrap(), home);
    assert_eq!(
        resolve_user_dir("~/q//r").unwrap(),
        home.join("q").join("r")
    );
    assert_eq!(resolve_user_dir("~\\q").unwrap(), home.join("q"));
    // `~user` is not expanded (Qwen does not either): it is relative.
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(resolve_user_dir("~x/y").unwrap(), cwd.join("~x").join("y"));
}

#[test]
fn atomic_write_replaces_a_symlink_instead_of_following_it() {
    let dir = std::env::temp_dir().join(format!("qc-fs-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    ensure_private_dir(&dir).unwrap();
    let outside = dir.join("outside");
    fs::write(&outside, b"keep").unwrap();
    let target = dir.join("t.json");
    crate::sys::fs::symlink(&outside, &target).unwrap();
    write_atomic(&target, b"new", AtomicWrite::PRIVATE).unwrap();
    assert_eq!(fs::read(&outside).unwrap(), b"keep");
    assert_eq!(fs::read(&target).unwrap(), b"new");
    assert!(!fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_symlink());
    let mode = crate::sys::fs::mode(
        std::path::Path::new(&target),
        &fs::metadata(&target).unwrap(),
    ) & 0o777;
    assert_eq!(mode, 0o600);
    let leftovers: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_home_variable_wins_over_the_os_lookup_unless_empty() {
    let os = || Some(PathBuf::from("/from-os"));
    assert_eq!(
        home_from(Some("C:\\Users\\ann".into()), os),
        Some(PathBuf::from("C:\\Users\\ann"))
    );
    assert_eq!(
        home_from(Some("".into()), os),
        Some(PathBuf::from("/from-os"))
    );
    assert_eq!(home_from(None, os), Some(PathBuf::from("/from-os")));
    assert_eq!(home_from(None, || None), None);
}

#[test]
fn qwen_home_resolves_with_windows_path_rules() {
    let w = PathStyle::Windows;
    let home = Some("C:\\Users\\Ann");
    let cwd = Some("D:\\proj");
    let r = |v: &str| resolve_user_dir_in(v, w, home, cwd).unwrap();
    assert_eq!(r("~").as_deref(), Some("C:\\Users\\Ann"));
    assert_eq!(r("~/q//r").as_deref(), Some("C:\\Users\\Ann\\q\\r"));
    assert_eq!(r("~\\q").as_deref(), Some("C:\\Users\\Ann\\q"));
    assert_eq!(r("E:/x/../y").as_deref(), Some("E:\\y"));
    assert_eq!(r("rel\\dir").as_deref(), Some("D:\\proj\\rel\\dir"));
    assert_eq!(r("\\\\srv\\share\\q").as_deref(), Some("\\\\srv\\share\\q"));
    // `/x` is absolute for path.win32 too.
    assert_eq!(r("/x").as_deref(), Some("\\x"));
    assert!(resolve_user_dir_in("~", w, None, cwd).is_err());
    assert_eq!(resolve_user_dir_in("rel", w, home, None).unwrap(), None);
    // POSIX: a drive path is relative.
    let p = |v: &str| resolve_user_dir_in(v, PathStyle::Posix, Some("/h"), Some("/c")).unwrap();
    assert_eq!(p("C:\\x").as_deref(), Some("/c/C:\\x"));
    assert_eq!(p("~\\q").as_deref(), Some("/h/q"));
}
