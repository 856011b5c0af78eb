use super::*;

#[test]
fn injected_first_in_head() {
    let s = "X";
    assert_eq!(
        inject(
            "<!doctype html><html><HEAD lang=x><script>own()</script></head>",
            s
        ),
        "<!doctype html><html><HEAD lang=x><script>X</script><script>own()</script></head>"
    );
    assert_eq!(
        inject("<html><header></header><script>a</script>", s),
        "<html><script>X</script><header></header><script>a</script>"
    );
    assert_eq!(
        inject("<!DOCTYPE html>\n<script>a</script>", s),
        "<!DOCTYPE html><script>X</script>\n<script>a</script>"
    );
    assert_eq!(
        inject("<p>hi<script>a</script>", s),
        "<script>X</script><p>hi<script>a</script>"
    );
}

#[test]
fn hashes_of_own_inline_elements_only() {
    let html = "<style>a{}</style><script src=x.js></script><script>one()</script>\
                    <SCRIPT type=module>two()</SCRIPT><scripts>no</scripts>";
    let (scripts, styles) = inline_hashes(html);
    assert_eq!(scripts, vec![csp_hash("one()"), csp_hash("two()")]);
    assert_eq!(styles, vec![csp_hash("a{}")]);
    // The known value of an empty script (CSP level 2 examples).
    assert_eq!(
        csp_hash(""),
        "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
    );
}

#[test]
fn the_script_names_the_page_api() {
    let s = script("abc123");
    assert!(s.contains("var BASE = '/api/abc123/';"));
    assert!(s.contains("'pluginHost'") && !s.contains("eval("));
}
