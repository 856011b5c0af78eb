use super::*;

#[test]
fn uris_round_trip_and_mime() {
    let p = Path::new("/tmp/a b/ü%x.PDF");
    let uri = file_uri(p);
    assert_eq!(uri, "file:///tmp/a%20b/%C3%BC%25x.PDF");
    assert_eq!(uri_path(&uri).as_deref(), Some("/tmp/a b/ü%x.PDF"));
    assert_eq!(uri_path("file://localhost/x").as_deref(), Some("/x"));
    assert_eq!(uri_path("file://server/x"), None);
    assert_eq!(uri_path("https://x/y"), None);
    assert_eq!(uri_path("file:///a%00b"), None);
    assert_eq!(uri_path("file:///a%4"), None);
    assert_eq!(mime_type(p), Some("application/pdf"));
    assert_eq!(mime_type(Path::new("/x/noext")), None);
    let link = file_link("/w/report.md", "", PathStyle::Posix).unwrap();
    assert_eq!(
        link,
        json!({"type": "resource_link", "uri": "file:///w/report.md",
                "name": "report.md", "mimeType": "text/markdown"})
    );
}

#[test]
fn output_maps_blocks_and_file_path_but_not_details() {
    let out = ToolOutput {
        content: vec![
            json!({"type": "text", "text": "hi"}),
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
            json!({"type": "checklist", "items": []}),
        ],
        details: Some(json!({"filePath": "out/r.csv", "secret": 1})),
    };
    let r = serde_json::to_value(output(&out, "/w")).unwrap();
    let content = r["content"].as_array().unwrap();
    assert_eq!(content.len(), 4, "{r}");
    assert_eq!(content[0], json!({"type": "text", "text": "hi"}));
    assert_eq!(content[1]["type"], "image");
    assert!(content[2]["text"].as_str().unwrap().contains("checklist"));
    assert_eq!(content[3]["uri"], "file:///w/out/r.csv");
    assert_eq!(content[3]["mimeType"], "text/csv");
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert_ne!(r["isError"], json!(true));
    // No cwd and a relative path: no link.
    let out = ToolOutput {
        content: vec![],
        details: Some(json!({"filePath": "rel"})),
    };
    let r = serde_json::to_value(output(&out, "")).unwrap();
    assert_eq!(r["content"], json!([]));
}

#[test]
fn file_links_for_windows_and_posix_paths() {
    let w = PathStyle::Windows;
    assert_eq!(
        file_link("C:\\Users\\Ann Lee\\out\\report.md", "", w),
        Some(
            json!({"type": "resource_link", "uri": "file:///C:/Users/Ann%20Lee/out/report.md",
                    "name": "report.md", "mimeType": "text/markdown"})
        )
    );
    assert_eq!(
        file_link("out/../r.pdf", "D:\\proj", w).unwrap()["uri"],
        json!("file:///D:/proj/r.pdf")
    );
    assert_eq!(
        file_link("x.txt", "\\\\srv\\share\\w", w).unwrap()["uri"],
        json!("file://srv/share/w/x.txt")
    );
    assert_eq!(file_link("x.txt", "", w), None);
    assert_eq!(
        file_link("x.txt", "/w", PathStyle::Posix).unwrap()["uri"],
        json!("file:///w/x.txt")
    );
    assert_eq!(file_link("C:\\x.txt", "", PathStyle::Posix), None);
}
