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
mod tests;
