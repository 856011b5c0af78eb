use super::*;

fn all(_: &str) -> bool {
    true
}

#[test]
fn truncation_keeps_pairs_and_cap() {
    let marker = TRUNCATION_MARKER.len();
    // emoji (2 units) straddling the cut point
    let mut s = "a".repeat(MAX_SELECTED_TEXT_UNITS - marker - 1);
    s.push('😀');
    s.push_str(&"tail".repeat(10));
    let t = truncate_selection(&s);
    assert!(t.ends_with(TRUNCATION_MARKER));
    assert!(utf16_len(&t) <= MAX_SELECTED_TEXT_UNITS);
    assert!(!t.contains('😀'));
    let exact = "b".repeat(MAX_SELECTED_TEXT_UNITS);
    assert_eq!(truncate_selection(&exact), exact);
}

#[test]
fn only_newest_focused_is_active() {
    let mut c = ContextState::new(true);
    c.focused("/a");
    c.set_cursor(None, 3, 4).unwrap();
    c.opened("/b");
    let v = c.normalized(all);
    let files = v["workspaceState"]["openFiles"].as_array().unwrap();
    assert_eq!(files[0]["path"], "/a");
    assert_eq!(files[0]["isActive"], true);
    assert_eq!(files[0]["cursor"]["line"], 3);
    assert_eq!(files[1]["isActive"], false);
    c.closed("/a");
    let v = c.normalized(all);
    assert_eq!(v["workspaceState"]["openFiles"][0]["isActive"], false);
}

#[test]
fn eleven_files_cut_to_ten() {
    let mut c = ContextState::new(true);
    for i in 0..11 {
        c.focused(&format!("/f{i}"));
    }
    let v = c.normalized(all);
    let files = v["workspaceState"]["openFiles"].as_array().unwrap();
    assert_eq!(files.len(), 10);
    assert_eq!(files[0]["path"], "/f10");
    assert!(files.iter().all(|f| f["path"] != "/f0"));
}

#[test]
fn hostile_json_is_rejected() {
    let mut c = ContextState::new(true);
    assert!(c.replace_from_json("{").is_err());
    assert!(c.replace_from_json(&"[".repeat(10000)).is_err());
    assert!(c
        .replace_from_json(r#"{"workspaceState":{"openFiles":[{"path":1}]}}"#)
        .is_err());
    assert!(c.replace_from_json(r#"{"workspaceState":{"openFiles":[{"path":"/a","timestamp":1,"cursor":{"line":0,"character":1}}]}}"#).is_err());
    c.replace_from_json(r#"{"workspaceState":{"openFiles":[{"path":"/a","timestamp":5,"isActive":true,"selectedText":"x"},{"path":"/b","timestamp":9}],"isTrusted":false}}"#).unwrap();
    let v = c.normalized(all);
    assert_eq!(v["workspaceState"]["isTrusted"], false);
    // /b is newer but not active: the CLI would drop all cursors; so do we.
    assert_eq!(v["workspaceState"]["openFiles"][0]["path"], "/b");
    assert_eq!(v["workspaceState"]["openFiles"][0]["isActive"], false);
    assert!(v["workspaceState"]["openFiles"][1]
        .get("selectedText")
        .is_none());
}

#[test]
fn rename_keeps_focus() {
    let mut c = ContextState::new(true);
    c.focused("/old");
    c.set_selection(None, Some("sel")).unwrap();
    c.renamed("/old", "/new");
    let v = c.normalized(all);
    assert_eq!(v["workspaceState"]["openFiles"][0]["path"], "/new");
    assert_eq!(v["workspaceState"]["openFiles"][0]["selectedText"], "sel");
}
