use super::*;

#[test]
fn capabilities_are_long_random_and_bound() {
    let caps = Capabilities::default();
    let a = caps.of("p.a", &PageKey::View("v".into())).unwrap();
    let b = caps.of("p.b", &PageKey::View("v".into())).unwrap();
    let pa = caps.of("p.a", &PageKey::Panel).unwrap();
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert!(a != b && a != pa);
    assert_eq!(caps.of("p.a", &PageKey::View("v".into())).unwrap(), a);
    assert_eq!(
        caps.lookup(&a),
        Some(("p.a".into(), PageKey::View("v".into())))
    );
    assert_eq!(caps.lookup(&b).unwrap().0, "p.b");
    assert_eq!(caps.lookup(&pa).unwrap().1, PageKey::Panel);
    assert!(caps.lookup(&a[..63]).is_none());
    assert!(caps.lookup("").is_none());
    let mut flipped = a.clone().into_bytes();
    flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
    assert!(caps
        .lookup(std::str::from_utf8(&flipped).unwrap())
        .is_none());
}

#[test]
fn page_paths_are_encoded() {
    assert_eq!(page_path("c", "view.html"), "/v/c/view.html");
    assert_eq!(
        page_path("c", "./ui/my page.html"),
        "/v/c/ui/my%20page.html"
    );
}
