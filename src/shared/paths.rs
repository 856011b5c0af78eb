//! Paths as Qwen Code (Node's `path.posix` / `path.win32`) sees them, for
//! either platform whatever the build: absolute-path tests, lexical
//! normalisation, containment (`C:\a` contains `c:/a/b`, not `C:\ab`), the
//! `workspacePath` delimiter and `file://` URIs (Node's `pathToFileURL` /
//! `fileURLToPath`, UNC paths as `file://server/share/…`).
//!
//! The functions are methods of [`PathStyle`]; callers pass
//! [`sys::platform::PATH_STYLE`](crate::sys::platform::PATH_STYLE), tests
//! pass both.

pub use crate::sys::platform::PathStyle;

/// An absolute path split into its root and its normal segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    /// `/` (POSIX); `C:\`, `\\server\share\` or `\` (Windows).
    root: String,
    segments: Vec<String>,
}

impl PathStyle {
    /// The separator written between segments.
    pub fn separator(self) -> char {
        match self {
            PathStyle::Posix => '/',
            PathStyle::Windows => '\\',
        }
    }

    /// Node's `path.delimiter`: between the roots of a `workspacePath`.
    pub fn delimiter(self) -> char {
        match self {
            PathStyle::Posix => ':',
            PathStyle::Windows => ';',
        }
    }

    /// Node's `os.tmpdir()` for this style, from the environment `var`
    /// gives: POSIX `TMPDIR`, `TMP`, `TEMP`, else `/tmp`; Windows `TEMP`,
    /// `TMP`, else `%SystemRoot%\temp` (or `%windir%`). One trailing
    /// separator is dropped, except after a bare root (`/`, `C:\`). Empty
    /// variables count as unset, as in Node.
    pub fn node_tmpdir(self, var: impl Fn(&str) -> Option<String>) -> String {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        let mut dir = match self {
            PathStyle::Posix => get("TMPDIR")
                .or_else(|| get("TMP"))
                .or_else(|| get("TEMP"))
                .unwrap_or_else(|| "/tmp".to_string()),
            PathStyle::Windows => get("TEMP").or_else(|| get("TMP")).unwrap_or_else(|| {
                let root = get("SystemRoot")
                    .or_else(|| get("windir"))
                    .unwrap_or_default();
                format!("{root}\\temp")
            }),
        };
        let sep = self.separator();
        if dir.len() > 1
            && dir.ends_with(sep)
            && !(self == PathStyle::Windows && dir.ends_with(":\\"))
        {
            dir.pop();
        }
        dir
    }

    fn is_sep(self, c: char) -> bool {
        c == '/' || (self == PathStyle::Windows && c == '\\')
    }

    /// Node's `path.isAbsolute`: POSIX, a leading `/`; Windows, a leading
    /// `\` or `/`, or a drive letter followed by one.
    pub fn is_absolute(self, p: &str) -> bool {
        let mut chars = p.chars();
        match (self, chars.next(), chars.next(), chars.next()) {
            (_, Some(c), _, _) if self.is_sep(c) => true,
            (PathStyle::Windows, Some(d), Some(':'), Some(s)) => {
                d.is_ascii_alphabetic() && self.is_sep(s)
            }
            _ => false,
        }
    }

    fn parse(self, p: &str) -> Option<Parsed> {
        if !self.is_absolute(p) || p.contains('\0') {
            return None;
        }
        let (root, rest) = match self {
            PathStyle::Posix => ("/".to_string(), p),
            PathStyle::Windows => {
                let b = p.as_bytes();
                if b.len() >= 2 && b[1] == b':' {
                    (format!("{}:\\", &p[..1]), &p[2..])
                } else if b.len() > 2 && self.is_sep(b[0] as char) && self.is_sep(b[1] as char) {
                    // `\\server\share`, `\\.\pipe`, `\\?\…`: the first two
                    // segments are the root.
                    let rest = &p[2..];
                    let server_end = rest.find(['\\', '/'])?;
                    let after = &rest[server_end + 1..];
                    let share_end = after.find(['\\', '/']).unwrap_or(after.len());
                    let (server, share) = (&rest[..server_end], &after[..share_end]);
                    if server.is_empty() || share.is_empty() {
                        return None;
                    }
                    return Some(Parsed {
                        root: format!("\\\\{server}\\{share}\\"),
                        segments: fold(self, &after[share_end..]),
                    });
                } else {
                    ("\\".to_string(), p)
                }
            }
        };
        Some(Parsed {
            root,
            segments: fold(self, rest),
        })
    }

    /// `p` normalised as Node's `path.resolve` would for an absolute path
    /// (`.` and `..` folded, repeated and trailing separators removed,
    /// Windows separators written `\`); `None` when `p` is not absolute.
    pub fn normalize(self, p: &str) -> Option<String> {
        let parsed = self.parse(p)?;
        Some(format!(
            "{}{}",
            parsed.root,
            parsed.segments.join(&self.separator().to_string())
        ))
    }

    fn key(self, s: &str) -> String {
        match self {
            PathStyle::Posix => s.to_string(),
            PathStyle::Windows => s.to_lowercase(),
        }
    }

    /// True when `path` is `root` or inside it, segment by segment, after
    /// normalising both (case-insensitively on Windows). A relative path on
    /// either side contains nothing.
    pub fn contains(self, root: &str, path: &str) -> bool {
        let (Some(r), Some(p)) = (self.parse(root), self.parse(path)) else {
            return false;
        };
        self.key(&r.root) == self.key(&p.root)
            && r.segments.len() <= p.segments.len()
            && r.segments
                .iter()
                .zip(&p.segments)
                .all(|(a, b)| self.key(a) == self.key(b))
    }

    /// True when `a` and `b` name the same absolute path (see [`Self::contains`]).
    pub fn same(self, a: &str, b: &str) -> bool {
        self.contains(a, b) && self.contains(b, a)
    }

    /// Node's `url.pathToFileURL` for an absolute path: `file:///a%20b`,
    /// `file:///C:/a%20b`, `file://server/share/x` for a UNC path. `None`
    /// for a relative path.
    pub fn file_uri(self, path: &str) -> Option<String> {
        let parsed = self.parse(path)?;
        let tail = parsed.segments.join("/");
        Some(match self {
            PathStyle::Posix => format!("file:///{}", encode_uri_path(tail.as_bytes())),
            PathStyle::Windows if parsed.root.starts_with("\\\\") => {
                let host_share = parsed.root.trim_start_matches('\\').trim_end_matches('\\');
                let (host, share) = host_share.split_once('\\')?;
                let mut out = format!(
                    "file://{}/{}",
                    host.to_lowercase(),
                    encode_uri_path(share.as_bytes())
                );
                if !tail.is_empty() {
                    out.push('/');
                    out.push_str(&encode_uri_path(tail.as_bytes()));
                }
                out
            }
            PathStyle::Windows if parsed.root == "\\" => {
                format!("file:///{}", encode_uri_path(tail.as_bytes()))
            }
            PathStyle::Windows => format!(
                "file:///{}/{}",
                &parsed.root[..2],
                encode_uri_path(tail.as_bytes())
            ),
        })
    }

    /// Node's `url.fileURLToPath`: the local path of a `file:` URI, or
    /// `None` when it is not one, names another host (POSIX), carries an
    /// encoded separator or NUL, or is not UTF-8 once decoded. On Windows a
    /// host gives a UNC path and the path must start with a drive letter.
    pub fn path_from_file_uri(self, uri: &str) -> Option<String> {
        let scheme = uri.get(..7)?;
        if !scheme.eq_ignore_ascii_case("file://") {
            return None;
        }
        let rest = &uri[7..];
        let rest = rest.split(['?', '#']).next().unwrap_or(rest);
        let slash = rest.find('/').unwrap_or(rest.len());
        let (host, path) = rest.split_at(slash);
        let host = if host.eq_ignore_ascii_case("localhost") {
            ""
        } else {
            host
        };
        let raw = path.as_bytes();
        let lower = path.to_ascii_lowercase();
        if lower.contains("%2f") || (self == PathStyle::Windows && lower.contains("%5c")) {
            return None;
        }
        let decoded = String::from_utf8(percent_decode(raw)?).ok()?;
        if decoded.contains('\0') {
            return None;
        }
        match self {
            PathStyle::Posix => (host.is_empty() && decoded.starts_with('/')).then_some(decoded),
            PathStyle::Windows if !host.is_empty() => {
                Some(format!("\\\\{host}{}", decoded.replace('/', "\\")))
            }
            PathStyle::Windows => {
                let b = decoded.as_bytes();
                let drive = b.len() >= 3
                    && b[0] == b'/'
                    && b[1].is_ascii_alphabetic()
                    && b[2] == b':'
                    && (b.len() == 3 || b[3] == b'/');
                drive.then(|| {
                    let p = decoded[1..].replace('/', "\\");
                    if p.len() == 2 {
                        format!("{p}\\")
                    } else {
                        p
                    }
                })
            }
        }
    }
}

fn fold(style: PathStyle, rest: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for seg in rest.split(|c| style.is_sep(c)) {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s.to_string()),
        }
    }
    out
}

/// Percent-encodes the path part of a `file:` URL as Node's `pathToFileURL`
/// does: `%`, `\`, tab, CR, LF, `?` and `#` by Node, then the URL path set
/// (controls, space, `"`, `<`, `>`, `` ` ``, `{`, `}`, DEL and every byte
/// above ASCII).
pub fn encode_uri_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let encode = b <= 0x20
            || b >= 0x7f
            || matches!(
                b,
                b'%' | b'\\' | b'?' | b'#' | b'"' | b'<' | b'>' | b'`' | b'{' | b'}'
            );
        if encode {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

fn percent_decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
