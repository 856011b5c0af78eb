use super::*;

fn endpoint<'a>(roots: &'a [String], style: PathStyle) -> Endpoint<'a> {
    Endpoint {
        port: 41234,
        token: "t0k",
        roots,
        pid: 77,
        ide_name: "IntelliJ IDEA",
        ide_display_name: "IntelliJ IDEA",
        ide_id: "intellijidea",
        style,
    }
}

#[test]
fn the_option_names_one_two_or_both() {
    assert_eq!(Clis::parse("qwen").unwrap(), Clis::QWEN);
    assert_eq!(Clis::parse("gemini").unwrap(), Clis::GEMINI);
    assert_eq!(Clis::parse("both").unwrap(), Clis::BOTH);
    assert_eq!(Clis::default(), Clis::QWEN);
    for bad in ["", "QWEN", "both ", "claude"] {
        assert!(Clis::parse(bad).is_err(), "{bad:?}");
    }
    for c in [Clis::QWEN, Clis::GEMINI, Clis::BOTH] {
        assert_eq!(Clis::parse(c.name()).unwrap(), c);
    }
    assert_eq!(
        Clis::BOTH.iter().collect::<Vec<_>>(),
        [Cli::Qwen, Cli::Gemini]
    );
    assert_eq!(Clis::GEMINI.iter().collect::<Vec<_>>(), [Cli::Gemini]);
}

#[test]
fn each_cli_gets_its_own_fields() {
    let roots = vec!["/w".to_string()];
    let ep = endpoint(&roots, PathStyle::Posix);
    assert_eq!(
        ep.contents(Cli::Qwen),
        json!({"port": 41234, "workspacePath": "/w", "authToken": "t0k", "ppid": 77,
               "ideName": "IntelliJ IDEA",
               "ideInfo": {"name": "intellijidea", "displayName": "IntelliJ IDEA"}})
    );
    assert_eq!(
        ep.contents(Cli::Gemini),
        json!({"port": 41234, "workspacePath": "/w", "authToken": "t0k",
               "ideInfo": {"name": "intellijidea", "displayName": "IntelliJ IDEA"}})
    );
}

#[test]
fn terminal_variables_follow_the_clis_served() {
    let roots = vec!["C:\\w".to_string(), "D:\\x".to_string()];
    let ep = endpoint(&roots, PathStyle::Windows);
    assert_eq!(
        ep.terminal_env(Clis::QWEN),
        json!({"QWEN_CODE_IDE_SERVER_PORT": "41234", "QWEN_CODE_IDE_WORKSPACE_PATH": "C:\\w;D:\\x"})
    );
    assert_eq!(
        ep.terminal_env(Clis::GEMINI),
        json!({"GEMINI_CLI_IDE_SERVER_PORT": "41234", "GEMINI_CLI_IDE_WORKSPACE_PATH": "C:\\w;D:\\x",
               "GEMINI_CLI_IDE_PID": "77"})
    );
    let both = ep.terminal_env(Clis::BOTH);
    assert_eq!(both.as_object().unwrap().len(), 5);
    assert!(
        !both.to_string().contains("t0k"),
        "the token never goes into a terminal"
    );
}

#[test]
fn gemini_cannot_be_told_about_a_root_holding_the_delimiter() {
    let roots = vec!["/a".to_string(), "/b:c".to_string(), "/d".to_string()];
    let ep = endpoint(&roots, PathStyle::Posix);
    assert_eq!(ep.workspace_path(Cli::Gemini), "/a:/d");
    assert_eq!(ep.unreachable_roots(Cli::Gemini), ["/b:c"]);
    assert_eq!(ep.workspace_path(Cli::Qwen), r#"["/a","/b:c","/d"]"#);
    assert!(ep.unreachable_roots(Cli::Qwen).is_empty());
    // A drive colon is no delimiter on Windows.
    let win = vec!["C:\\a".to_string(), "D:\\b;c".to_string()];
    let ep = endpoint(&win, PathStyle::Windows);
    assert_eq!(ep.workspace_path(Cli::Gemini), "C:\\a");
    // No root at all: an empty value, which Gemini answers with "open a
    // workspace folder".
    let ep = endpoint(&[], PathStyle::Posix);
    assert_eq!(ep.workspace_path(Cli::Gemini), "");
}
