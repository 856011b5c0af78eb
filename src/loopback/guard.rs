//! The checks every loopback server applies to every request, before any of
//! its own handling: no browser `Origin` (or only the server's own, for the
//! view server's API), an allowed `Host` (DNS rebinding), the bearer token
//! compared in constant time, and a capped declared body.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::ConnInfo;

/// Which `Origin` header a server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginPolicy {
    /// Any request carrying an `Origin` is refused (MCP servers: only
    /// non-browser clients talk to them, as the official companion does).
    RefuseAll,
    /// Requests without `Origin`, or with exactly this server's own origin
    /// (`http://127.0.0.1:<port>` / `http://localhost:<port>`).
    SameOrigin,
}

/// The request policy of one server.
#[derive(Debug, Clone)]
pub struct Policy {
    pub token: String,
    pub port: u16,
    pub origin: OriginPolicy,
    pub max_body_bytes: usize,
}

/// Why a request was refused (the response says it in one short line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Origin,
    Host,
    Token,
    TooLarge,
}

impl Refusal {
    /// A log line for the refusal.
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Origin => "refused a request with an Origin header",
            Refusal::Host => "refused a request with a bad Host header",
            Refusal::Token => "refused a request without the right bearer token",
            Refusal::TooLarge => "refused a request body over the size cap",
        }
    }

    pub fn response(self) -> Response {
        let (status, text) = match self {
            Refusal::Origin => (StatusCode::FORBIDDEN, "Forbidden: Origin not allowed"),
            Refusal::Host => (StatusCode::FORBIDDEN, "Forbidden: invalid Host"),
            Refusal::Token => (StatusCode::UNAUTHORIZED, "Unauthorized"),
            Refusal::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large"),
        };
        (status, text).into_response()
    }
}

/// True when `auth` is exactly `Bearer <token>` (compared in constant time).
pub fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let Some(presented) = value.as_bytes().strip_prefix(b"Bearer ") else {
        return false;
    };
    presented.ct_eq(token.as_bytes()).into()
}

/// True when `presented` equals `token` (constant time; for tokens that
/// arrive by cookie or query rather than the `Authorization` header).
pub fn token_matches(presented: &str, token: &str) -> bool {
    presented.as_bytes().ct_eq(token.as_bytes()).into()
}

/// The Host values the official companion accepts, on our port.
pub fn host_allowed(headers: &HeaderMap, port: u16) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let Some((name, p)) = host.rsplit_once(':') else {
        return false;
    };
    p.parse::<u16>().ok() == Some(port)
        && matches!(
            name.to_ascii_lowercase().as_str(),
            "localhost" | "127.0.0.1" | "host.docker.internal"
        )
}

fn origin_allowed(headers: &HeaderMap, policy: &Policy) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    match policy.origin {
        OriginPolicy::RefuseAll => false,
        OriginPolicy::SameOrigin => origin.to_str().is_ok_and(|o| {
            o == format!("http://127.0.0.1:{}", policy.port)
                || o == format!("http://localhost:{}", policy.port)
        }),
    }
}

/// The declared body length is over the cap.
pub fn declared_too_large(headers: &HeaderMap, max: usize) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|len| len > max as u64)
}

/// Origin and Host only (for pages a browser loads, whose capability is
/// checked by the server itself).
pub fn check_origin_and_host(headers: &HeaderMap, policy: &Policy) -> Result<(), Refusal> {
    if !origin_allowed(headers, policy) {
        return Err(Refusal::Origin);
    }
    if !host_allowed(headers, policy.port) {
        return Err(Refusal::Host);
    }
    Ok(())
}

/// Every check, in the order the official companion applies them. On
/// success the connection is marked proven (it keeps its slot under a
/// connection flood).
pub fn check(
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    policy: &Policy,
) -> Result<(), Refusal> {
    check_origin_and_host(headers, policy)?;
    if !bearer_matches(headers, &policy.token) {
        return Err(Refusal::Token);
    }
    if let Some(info) = extensions.get::<ConnInfo>() {
        info.mark_proven();
    }
    if declared_too_large(headers, policy.max_body_bytes) {
        return Err(Refusal::TooLarge);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
