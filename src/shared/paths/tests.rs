use super::*;

const P: PathStyle = PathStyle::Posix;
const W: PathStyle = PathStyle::Windows;

#[test]
fn absolute_paths_follow_node() {
    assert!(P.is_absolute("/a"));
    assert!(!P.is_absolute("a/b"));
    assert!(!P.is_absolute("C:\\a"));
    assert!(W.is_absolute("C:\\a"));
    assert!(W.is_absolute("c:/a"));
    assert!(W.is_absolute("\\\\server\\share"));
    assert!(W.is_absolute("/a"));
    assert!(!W.is_absolute("C:a"));
    assert!(!W.is_absolute("a\\b"));
    assert!(!W.is_absolute(""));
}

#[test]
fn delimiters() {
    assert_eq!(P.delimiter(), ':');
    assert_eq!(W.delimiter(), ';');
}

#[test]
fn normalisation_folds_dots_and_separators() {
    assert_eq!(P.normalize("/a//b/./c/../d/").as_deref(), Some("/a/b/d"));
    assert_eq!(P.normalize("/../..").as_deref(), Some("/"));
    assert_eq!(P.normalize("a/b"), None);
    assert_eq!(W.normalize("C:/a//b/../c\\").as_deref(), Some("C:\\a\\c"));
    assert_eq!(W.normalize("d:\\").as_deref(), Some("d:\\"));
    assert_eq!(
        W.normalize("//server/share/x/./y").as_deref(),
        Some("\\\\server\\share\\x\\y")
    );
    assert_eq!(W.normalize("\\\\server"), None);
    assert_eq!(W.normalize("C:\\a\0b"), None);
}

#[test]
fn windows_containment_ignores_case_and_separator_kind() {
    assert!(W.contains("C:\\a", "c:/a/b"));
    assert!(W.contains("C:\\A\\", "c:\\a"));
    assert!(W.contains("c:\\", "C:\\x\\y"));
    assert!(!W.contains("C:\\a", "C:\\ab"));
    assert!(!W.contains("C:\\a\\b", "C:\\a"));
    assert!(!W.contains("C:\\a", "D:\\a"));
    assert!(!W.contains("C:\\a", "a\\b"));
    assert!(W.contains("\\\\Srv\\Share", "\\\\srv\\share\\dir"));
    assert!(!W.contains("\\\\srv\\share", "\\\\srv\\other\\dir"));
    assert!(W.contains("C:\\a", "C:\\a\\b\\..\\c"));
    assert!(W.same("C:\\Work", "c:/work/"));
}

#[test]
fn posix_containment_is_case_sensitive_and_segment_wise() {
    assert!(P.contains("/a", "/a/b"));
    assert!(P.contains("/a/", "/a"));
    assert!(P.contains("/", "/x"));
    assert!(!P.contains("/a", "/ab"));
    assert!(!P.contains("/A", "/a/b"));
    assert!(!P.contains("/a", "/a/../b"));
    assert!(!P.contains("a", "a/b"));
    // A backslash is an ordinary character on POSIX.
    assert!(!P.contains("/a", "/a\\b/../../c"));
}

#[test]
fn file_uris_from_paths() {
    assert_eq!(
        P.file_uri("/tmp/a b/ü%x#?.PDF").as_deref(),
        Some("file:///tmp/a%20b/%C3%BC%25x%23%3F.PDF")
    );
    assert_eq!(P.file_uri("/").as_deref(), Some("file:///"));
    assert_eq!(P.file_uri("/a\\b").as_deref(), Some("file:///a%5Cb"));
    assert_eq!(P.file_uri("rel"), None);
    assert_eq!(
        W.file_uri("C:\\Users\\Ann Lee\\ü.md").as_deref(),
        Some("file:///C:/Users/Ann%20Lee/%C3%BC.md")
    );
    assert_eq!(W.file_uri("c:/x/../y").as_deref(), Some("file:///c:/y"));
    assert_eq!(W.file_uri("D:\\").as_deref(), Some("file:///D:/"));
    assert_eq!(
        W.file_uri("\\\\Server\\share\\dir\\f 1.txt").as_deref(),
        Some("file://server/share/dir/f%201.txt")
    );
    assert_eq!(
        W.file_uri("\\\\server\\share").as_deref(),
        Some("file://server/share")
    );
    assert_eq!(W.file_uri("x\\y"), None);
}

#[test]
fn paths_from_file_uris() {
    assert_eq!(
        P.path_from_file_uri("file:///tmp/a%20b/%C3%BC").as_deref(),
        Some("/tmp/a b/ü")
    );
    assert_eq!(
        P.path_from_file_uri("file://localhost/x").as_deref(),
        Some("/x")
    );
    assert_eq!(P.path_from_file_uri("FILE:///x").as_deref(), Some("/x"));
    assert_eq!(P.path_from_file_uri("file://server/x"), None);
    assert_eq!(P.path_from_file_uri("file:///a%2Fb"), None);
    assert_eq!(P.path_from_file_uri("file:///a%00b"), None);
    assert_eq!(P.path_from_file_uri("file:///a%4"), None);
    assert_eq!(P.path_from_file_uri("file:///a%FF"), None);
    assert_eq!(P.path_from_file_uri("https://x/y"), None);
    assert_eq!(P.path_from_file_uri("file:///a?q#f").as_deref(), Some("/a"));
    assert_eq!(
        W.path_from_file_uri("file:///C:/Users/Ann%20Lee/x.md")
            .as_deref(),
        Some("C:\\Users\\Ann Lee\\x.md")
    );
    assert_eq!(W.path_from_file_uri("file:///c:").as_deref(), Some("c:\\"));
    assert_eq!(
        W.path_from_file_uri("file://server/share/f%201.txt")
            .as_deref(),
        Some("\\\\server\\share\\f 1.txt")
    );
    assert_eq!(W.path_from_file_uri("file:///tmp/x"), None);
    assert_eq!(W.path_from_file_uri("file:///C:/a%5Cb"), None);
    assert_eq!(W.path_from_file_uri("file:///C:/a%2fb"), None);
}

#[test]
fn file_uris_round_trip() {
    for p in ["C:\\a b\\c#d", "\\\\srv\\sh\\x y", "z:\\%25"] {
        let uri = W.file_uri(p).unwrap();
        assert_eq!(
            W.path_from_file_uri(&uri).unwrap().to_lowercase(),
            p.to_lowercase(),
            "{uri}"
        );
    }
    for p in ["/a b/c#d?", "/%25/ü/\\"] {
        let uri = P.file_uri(p).unwrap();
        assert_eq!(P.path_from_file_uri(&uri).as_deref(), Some(p), "{uri}");
    }
}

#[test]
fn the_temporary_directory_is_found_as_node_finds_it() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let p = PathStyle::Posix;
    assert_eq!(p.node_tmpdir(env(&[])), "/tmp");
    assert_eq!(
        p.node_tmpdir(env(&[("TMPDIR", "/var/folders/x/T/")])),
        "/var/folders/x/T"
    );
    assert_eq!(
        p.node_tmpdir(env(&[("TMPDIR", ""), ("TMP", "/t2"), ("TEMP", "/t3")])),
        "/t2"
    );
    assert_eq!(p.node_tmpdir(env(&[("TEMP", "/t3")])), "/t3");
    assert_eq!(p.node_tmpdir(env(&[("TMPDIR", "/")])), "/");
    let w = PathStyle::Windows;
    assert_eq!(
        w.node_tmpdir(env(&[
            ("TMP", "C:\\tmp"),
            ("TEMP", "C:\\Users\\u\\AppData\\Local\\Temp\\")
        ])),
        "C:\\Users\\u\\AppData\\Local\\Temp"
    );
    assert_eq!(w.node_tmpdir(env(&[("TMP", "D:\\")])), "D:\\");
    assert_eq!(
        w.node_tmpdir(env(&[("SystemRoot", "C:\\Windows")])),
        "C:\\Windows\\temp"
    );
    assert_eq!(
        w.node_tmpdir(env(&[("windir", "C:\\WINNT")])),
        "C:\\WINNT\\temp"
    );
}
