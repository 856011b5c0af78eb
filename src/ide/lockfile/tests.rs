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
