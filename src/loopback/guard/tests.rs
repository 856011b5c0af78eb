use super::*;
use axum::http::HeaderValue;

fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
    }
    h
}

fn policy(origin: OriginPolicy) -> Policy {
    Policy {
        token: "t0k".into(),
        port: 4242,
        origin,
        max_body_bytes: 10,
    }
}

#[test]
fn the_matrix() {
    let ext = axum::http::Extensions::new();
    let good = [
        (header::HOST, "127.0.0.1:4242"),
        (header::AUTHORIZATION, "Bearer t0k"),
    ];
    let p = policy(OriginPolicy::RefuseAll);
    assert_eq!(check(&headers(&good), &ext, &p), Ok(()));
    let mut h = headers(&good);
    h.insert(
        header::ORIGIN,
        HeaderValue::from_static("http://127.0.0.1:4242"),
    );
    assert_eq!(check(&h, &ext, &p), Err(Refusal::Origin));
    assert_eq!(check(&h, &ext, &policy(OriginPolicy::SameOrigin)), Ok(()));
    h.insert(
        header::ORIGIN,
        HeaderValue::from_static("http://evil.example"),
    );
    assert_eq!(
        check(&h, &ext, &policy(OriginPolicy::SameOrigin)),
        Err(Refusal::Origin)
    );
    for host in ["127.0.0.1:4243", "evil:4242", "127.0.0.1", ""] {
        let h = headers(&[(header::HOST, host), (header::AUTHORIZATION, "Bearer t0k")]);
        assert_eq!(check(&h, &ext, &p), Err(Refusal::Host), "{host}");
    }
    for auth in ["Bearer t0K", "Bearer t0k ", "bearer t0k", "t0k", "Bearer "] {
        let h = headers(&[
            (header::HOST, "localhost:4242"),
            (header::AUTHORIZATION, auth),
        ]);
        assert_eq!(check(&h, &ext, &p), Err(Refusal::Token), "{auth}");
    }
    let mut h = headers(&good);
    h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("11"));
    assert_eq!(check(&h, &ext, &p), Err(Refusal::TooLarge));
    assert!(token_matches("abc", "abc") && !token_matches("abd", "abc"));
}
