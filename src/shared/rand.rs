//! Hex encoding and the OS random number generator.

use crate::error::{Error, Result, Status};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Fills `buf` from the OS RNG; a failing RNG is an error, never a panic
/// and never a predictable value.
pub fn fill(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| {
        Error::new(
            Status::Io,
            format!("the OS random number generator failed: {e}"),
        )
    })
}

/// `n` random bytes from the OS RNG as lowercase hex (`2 * n` characters).
pub fn random_hex(n: usize) -> Result<String> {
    let mut b = vec![0u8; n];
    fill(&mut b)?;
    Ok(hex(&b))
}

/// Ids unique among those one sequence gives (e.g. the `requestId`s of one
/// plugin host): a random prefix drawn once from the OS RNG, then a
/// counter, so an id costs no RNG call. Not secret: the peer sees and
/// echoes them.
pub struct IdSequence {
    prefix: String,
    next: std::sync::atomic::AtomicU64,
}

impl IdSequence {
    pub fn new() -> Result<IdSequence> {
        Ok(IdSequence {
            prefix: random_hex(8)?,
            next: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// `<16 hex digits>-<n>`, n counting from 1.
    pub fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}-{n}", self.prefix)
    }
}

/// A random (version 4) UUID from the OS RNG, lowercase.
pub fn uuid_v4() -> Result<String> {
    let mut b = [0u8; 16];
    fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_uuid_shapes() {
        assert_eq!(hex(&[0, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(random_hex(6).unwrap().len(), 12);
        let u = uuid_v4().unwrap();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(uuid_v4().unwrap(), u);
    }

    #[test]
    fn id_sequences_never_repeat() {
        let (a, b) = (IdSequence::new().unwrap(), IdSequence::new().unwrap());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(a.next_id()));
            assert!(seen.insert(b.next_id()));
        }
        let id = a.next_id();
        let (prefix, n) = id.split_once('-').unwrap();
        assert_eq!(prefix.len(), 16);
        assert_eq!(n, "1001");
    }
}
