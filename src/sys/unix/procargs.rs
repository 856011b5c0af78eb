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
mod tests;
