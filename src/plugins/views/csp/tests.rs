use super::*;

#[test]
fn the_page_policy() {
    let p = page_policy(&["'sha256-A'".into()], &["'sha256-B'".into()]);
    assert!(p.starts_with("default-src 'none'; "));
    assert!(p.contains("script-src 'self' 'sha256-A';"));
    assert!(p.contains("style-src 'self' 'sha256-B';"));
    assert!(p.contains("connect-src 'self'") && p.contains("frame-ancestors 'none'"));
    assert!(!p.contains("unsafe-eval"));
    let script_src = p
        .split(';')
        .find(|d| d.trim().starts_with("script-src "))
        .unwrap();
    assert!(!script_src.contains("unsafe"));
    assert!(p.contains("style-src-attr 'unsafe-inline'"));
    let mut h = HeaderMap::new();
    page(&mut h, &p);
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(h[header::CONTENT_SECURITY_POLICY], p.as_str());
    assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
}
