//! Serving a plugin's files: the request path (still percent-encoded) is
//! resolved inside the plugin folder or refused, and the MIME type comes
//! from a small table.
//!
//! Refused (as "not found", so a probe learns nothing): a segment that is
//! `.` or `..` once percent-decoded (`%2e%2e`), a decoded `/`, `\` or NUL
//! inside a segment (`%2f`, `%5c`, `%00`), an empty segment (`a//b`),
//! invalid percent-encoding or UTF-8, and any path whose canonical form
//! (symlinks resolved) is not a regular file under the canonical plugin
//! folder.

use std::path::{Path, PathBuf};

/// Largest file served (bigger files are refused with 413).
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Decodes `%XX` escapes; `None` for a bad escape or invalid UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let h = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes one path segment for a URL (unreserved characters kept).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// The relative path of `raw` (the URL path after the capability, without
/// its leading `/`, still encoded), as checked segments.
pub fn segments(raw: &str) -> Option<Vec<String>> {
    if raw.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for seg in raw.split('/') {
        let d = percent_decode(seg)?;
        if d.is_empty()
            || d == "."
            || d == ".."
            || d.contains('/')
            || d.contains('\\')
            || d.contains('\0')
        {
            return None;
        }
        out.push(d);
    }
    Some(out)
}

/// The file `raw` names inside `root` (canonical), or `None`.
pub fn resolve(root: &Path, raw: &str) -> Option<PathBuf> {
    let segs = segments(raw)?;
    let mut p = root.to_path_buf();
    for s in &segs {
        p.push(s);
    }
    let real = crate::sys::fs::canonicalize(&p).ok()?;
    let root = crate::sys::fs::canonicalize(root).ok()?;
    if !real.starts_with(&root) || !real.is_file() {
        return None;
    }
    Some(real)
}

/// The `Content-Type` of a file, from its extension.
pub fn mime_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "avif" => "image/avif",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// Whether a `Content-Type` from [`mime_type`] is an HTML page.
pub fn is_html(mime: &str) -> bool {
    mime.starts_with("text/html")
}

#[cfg(test)]
mod tests;
