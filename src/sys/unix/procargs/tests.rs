use super::env_entries;

fn buffer(argc: i32, path: &str, pad: usize, args: &[&str], env: &[&str]) -> Vec<u8> {
    let mut b = argc.to_ne_bytes().to_vec();
    b.extend_from_slice(path.as_bytes());
    b.extend(std::iter::repeat_n(0u8, 1 + pad));
    for s in args.iter().chain(env) {
        b.extend_from_slice(s.as_bytes());
        b.push(0);
    }
    b
}

#[test]
fn env_follows_the_arguments() {
    let b = buffer(
        2,
        "/usr/local/bin/node",
        5,
        &["node", "A=not-env"],
        &["HOME=/Users/me", "QWEN_COMPANION_PLUGIN_INSTANCE=ab"],
    );
    let env = env_entries(&b);
    assert_eq!(
        env,
        vec![
            &b"HOME=/Users/me"[..],
            &b"QWEN_COMPANION_PLUGIN_INSTANCE=ab"[..]
        ]
    );
    // An empty string ends the environment (apple's own strings follow).
    let mut b = buffer(1, "/bin/sh", 0, &["sh"], &["X=1"]);
    b.push(0);
    b.extend_from_slice(b"executable_path=/bin/sh\0");
    assert_eq!(env_entries(&b), vec![&b"X=1"[..]]);
}

#[test]
fn malformed_buffers_give_nothing() {
    assert!(env_entries(b"").is_empty());
    assert!(env_entries(&[1, 0, 0]).is_empty());
    assert!(env_entries(&(-1i32).to_ne_bytes()).is_empty());
    // No NUL after the path.
    let mut b = 1i32.to_ne_bytes().to_vec();
    b.extend_from_slice(b"/bin/sh");
    assert!(env_entries(&b).is_empty());
    // Fewer arguments than argc: no environment to read.
    let b = buffer(3, "/bin/sh", 2, &["sh"], &[]);
    assert!(env_entries(&b).is_empty());
}
