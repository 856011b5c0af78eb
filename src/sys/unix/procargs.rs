//! The layout of macOS's `sysctl(KERN_PROCARGS2)` answer: a native-endian
//! `int argc`, the executable path and its NUL padding, `argc` NUL-ended
//! arguments, then the environment's `NAME=value` strings up to an empty
//! string or the end of the buffer. Kept apart from `macos.rs` so it is
//! tested on every Unix.

/// The environment entries of a `KERN_PROCARGS2` buffer (empty when the
/// buffer is malformed or truncated before the environment).
pub(super) fn env_entries(buf: &[u8]) -> Vec<&[u8]> {
    let Some(argc) = buf
        .get(..4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    else {
        return Vec::new();
    };
    let Ok(argc) = usize::try_from(argc) else {
        return Vec::new();
    };
    let rest = &buf[4..];
    // The executable path, then the NULs that pad it.
    let Some(path_end) = rest.iter().position(|&b| b == 0) else {
        return Vec::new();
    };
    let mut at = path_end;
    while rest.get(at) == Some(&0) {
        at += 1;
    }
    let mut strings = rest[at..].split(|&b| b == 0);
    for _ in 0..argc {
        if strings.next().is_none() {
            return Vec::new();
        }
    }
    strings.take_while(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
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
}
