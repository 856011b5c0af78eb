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
    let real = std::fs::canonicalize(&p).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
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
mod tests {
    use super::*;

    #[test]
    fn segments_refuse_every_escape() {
        assert_eq!(segments("a/b.html").unwrap(), vec!["a", "b.html"]);
        assert_eq!(segments("my%20page.html").unwrap(), vec!["my page.html"]);
        for bad in [
            "", "..", "a/../b", "%2e%2e/x", "%2E%2E", "a/%2e", ".", "a//b", "a/", "%2fetc",
            "a%2fb", "a%5cb", "a%00", "%zz", "%e9", "%",
        ] {
            assert!(segments(bad).is_none(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn resolve_stays_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("qc-views-files-{}", std::process::id()));
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.css"), "x").unwrap();
        std::fs::write(dir.join("secret.txt"), "s").unwrap();
        crate::sys::fs::symlink(dir.join("secret.txt"), root.join("out.txt")).unwrap();
        crate::sys::fs::symlink(root.join("sub/a.css"), root.join("in.css")).unwrap();
        assert!(resolve(&root, "sub/a.css").is_some());
        assert!(
            resolve(&root, "in.css").is_some(),
            "a symlink inside is fine"
        );
        assert!(
            resolve(&root, "out.txt").is_none(),
            "a symlink out is refused"
        );
        assert!(resolve(&root, "sub").is_none(), "a folder is not a file");
        assert!(resolve(&root, "sub/%2e%2e/%2e%2e/secret.txt").is_none());
        assert!(resolve(&root, "missing").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_mime_table() {
        for (name, mime) in [
            ("a.html", "text/html; charset=utf-8"),
            ("A.HTM", "text/html; charset=utf-8"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("a.mjs", "text/javascript; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.json", "application/json"),
            ("a.svg", "image/svg+xml"),
            ("a.png", "image/png"),
            ("a.jpeg", "image/jpeg"),
            ("a.woff2", "font/woff2"),
            ("a.wasm", "application/wasm"),
            ("a.exe", "application/octet-stream"),
            ("Makefile", "application/octet-stream"),
        ] {
            assert_eq!(mime_type(Path::new(name)), mime, "{name}");
        }
        assert!(is_html("text/html; charset=utf-8") && !is_html("text/css"));
        assert_eq!(encode_segment("a b/ü.html"), "a%20b%2F%C3%BC.html");
    }
}
