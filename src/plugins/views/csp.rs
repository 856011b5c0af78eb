//! The security headers of the view server's responses.
//!
//! Pages get a strict `Content-Security-Policy`: nothing by default; scripts,
//! styles, images and fonts from the server itself (`'self'`: the page's
//! own files, reached through its capability) plus, by hash, the injected
//! `pluginHost` script and the page's own inline `<script>`/`<style>`
//! elements as written in its file; `connect-src 'self'` (its API);
//! no `'unsafe-inline'` for scripts and no `'unsafe-eval'`, so an inline
//! script the page did not ship (added by the DOM, an `on…=` attribute, an
//! injection) does not run. `style="…"` attributes are allowed
//! (`style-src-attr 'unsafe-inline'`: the desktop app's pages use them, and
//! CSS cannot run code); `<style>` elements need their hash like scripts. `frame-ancestors 'none'`: editors show pages as top-level
//! documents (JCEF, a browser tab). `Referrer-Policy: no-referrer` keeps the
//! capability in the URL from leaking to sites the page links to.

use axum::http::{header, HeaderMap, HeaderValue};

/// The page's CSP, allowing `script_hashes` and `style_hashes`.
pub fn page_policy(script_hashes: &[String], style_hashes: &[String]) -> String {
    let mut script = String::from("'self'");
    for h in script_hashes {
        script.push(' ');
        script.push_str(h);
    }
    let mut style = String::from("'self'");
    for h in style_hashes {
        style.push(' ');
        style.push_str(h);
    }
    format!(
        "default-src 'none'; script-src {script}; style-src {style}; \
         style-src-attr 'unsafe-inline'; img-src 'self'; font-src 'self'; \
         connect-src 'self'; media-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    )
}

/// Headers every response gets (pages, files, API answers).
pub fn common(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "Cross-Origin-Resource-Policy",
        HeaderValue::from_static("same-origin"),
    );
}

/// Headers of an HTML page with `policy` as its CSP.
pub fn page(headers: &mut HeaderMap, policy: &str) {
    common(headers);
    if let Ok(v) = HeaderValue::from_str(policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests;
