use super::*;

#[test]
fn workspace_path_uses_the_platform_delimiter() {
    let roots = vec!["/a".to_string(), "/b c".to_string()];
    assert_eq!(workspace_path_value(&roots, PathStyle::Posix), "/a:/b c");
    let win = vec!["C:\\a".to_string(), "D:\\b".to_string()];
    assert_eq!(
        workspace_path_value(&win, PathStyle::Windows),
        "C:\\a;D:\\b"
    );
}

#[test]
fn a_root_holding_the_delimiter_gives_the_json_array() {
    let roots = vec!["/a:b".to_string(), "/c".to_string()];
    assert_eq!(
        workspace_path_value(&roots, PathStyle::Posix),
        r#"["/a:b","/c"]"#
    );
    // A drive colon is not the Windows delimiter; a `;` in a folder name is.
    let win = vec!["C:\\a".to_string()];
    assert_eq!(workspace_path_value(&win, PathStyle::Windows), "C:\\a");
    let win = vec!["C:\\a;b".to_string(), "D:\\".to_string()];
    assert_eq!(
        workspace_path_value(&win, PathStyle::Windows),
        r#"["C:\\a;b","D:\\"]"#
    );
}

#[test]
fn gemini_file_names_are_recognised_as_the_cli_does() {
    assert_eq!(gemini_file_name(12, 3456), "gemini-ide-server-12-3456.json");
    assert_eq!(gemini_file_pid("gemini-ide-server-12-3456.json"), Some(12));
    for other in [
        "gemini-ide-server-12.json",
        "gemini-ide-server--3456.json",
        "gemini-ide-server-12-.json",
        "gemini-ide-server-1a-3456.json",
        "gemini-ide-server-12-3456.json.x1y2.tmp",
        "3456.lock",
    ] {
        assert_eq!(gemini_file_pid(other), None, "{other}");
    }
}

#[test]
fn the_sweep_takes_only_dead_editors_files() {
    let dir = crate::shared::testutil::TempDir::new("sweep");
    let d = dir.path();
    for name in [
        "gemini-ide-server-100-1.json",
        "gemini-ide-server-200-2.json",
        "gemini-ide-server-100.json",
        "other.json",
    ] {
        std::fs::write(d.join(name), "{}").unwrap();
    }
    std::fs::create_dir(d.join("gemini-ide-server-300-3.json")).unwrap();
    let removed = sweep_gemini(d, |pid| pid == 200);
    assert_eq!(removed, 1);
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "gemini-ide-server-100.json",
            "gemini-ide-server-200-2.json",
            "gemini-ide-server-300-3.json",
            "other.json"
        ]
    );
    assert_eq!(sweep_gemini(&d.join("missing"), |_| false), 0);
}
