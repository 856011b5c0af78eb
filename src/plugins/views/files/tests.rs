use super::*;

#[test]
fn segments_refuse_every_escape() {
    assert_eq!(segments("a/b.html").unwrap(), vec!["a", "b.html"]);
    assert_eq!(segments("my%20page.html").unwrap(), vec!["my page.html"]);
    for bad in [
        "", "..", "a/../b", "%2e%2e/x", "%2E%2E", "a/%2e", ".", "a//b", "a/", "%2fetc", "a%2fb",
        "a%5cb", "a%00", "%zz", "%e9", "%",
    ] {
        assert!(segments(bad).is_none(), "{bad:?} must be refused");
    }
}

#[test]
fn resolve_stays_inside_the_root() {
    let dir = std::env::temp_dir().join(format!("qc-views-files-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/a.css"), "x").unwrap();
    std::fs::write(dir.join("secret.txt"), "s").unwrap();
    crate::sys::fs::symlink(dir.join("secret.txt"), root.join("out.txt")).unwrap();
    crate::sys::fs::symlink(root.join("sub/a.css"), root.join("in.css")).unwrap();
    assert!(resolve(&root, "sub/a.css").is_some());
    assert!(
        resolve(&root, "in.css").is_some(),
        "a symlink inside is fine"
    );
    assert!(
        resolve(&root, "out.txt").is_none(),
        "a symlink out is refused"
    );
    assert!(resolve(&root, "sub").is_none(), "a folder is not a file");
    assert!(resolve(&root, "sub/%2e%2e/%2e%2e/secret.txt").is_none());
    assert!(resolve(&root, "missing").is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_mime_table() {
    for (name, mime) in [
        ("a.html", "text/html; charset=utf-8"),
        ("A.HTM", "text/html; charset=utf-8"),
        ("a.js", "text/javascript; charset=utf-8"),
        ("a.mjs", "text/javascript; charset=utf-8"),
        ("a.css", "text/css; charset=utf-8"),
        ("a.json", "application/json"),
        ("a.svg", "image/svg+xml"),
        ("a.png", "image/png"),
        ("a.jpeg", "image/jpeg"),
        ("a.woff2", "font/woff2"),
        ("a.wasm", "application/wasm"),
        ("a.exe", "application/octet-stream"),
        ("Makefile", "application/octet-stream"),
    ] {
        assert_eq!(mime_type(Path::new(name)), mime, "{name}");
    }
    assert!(is_html("text/html; charset=utf-8") && !is_html("text/css"));
    assert_eq!(encode_segment("a b/ü.html"), "a%20b%2F%C3%BC.html");
}
