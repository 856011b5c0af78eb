//! The view server's answers.
//!
//! | request | answer |
//! |---|---|
//! | `GET /v/<cap>/<file>` | the file from the page's plugin folder; HTML with `pluginHost` injected and its CSP |
//! | `POST /api/<cap>/invoke` `{"toolName","params"}` | `{content, details?}` or `{error, kind}` (200) |
//! | `GET /api/<cap>/events` | SSE: `ready`, then `push` `{channel,payload}` and `scheme` `{colorScheme}` |
//! | `GET /api/<cap>/scheme` | `{"colorScheme":"light"\|"dark"}` |
//!
//! Refusals: a bad `Host` or a foreign `Origin` 403, no capability 401, a
//! wrong one 403, a page no longer served (plugin disabled, uninstalled)
//! or a file that is not inside the plugin folder 404, a body over the cap
//! 413, another method 405.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use super::pages::{self, PageKey};
use super::{csp, files, inject, State};
use crate::loopback::guard;
use crate::loopback::ConnInfo;
use crate::plugins::host::CallOptions;

pub(super) fn router(state: Arc<State>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

fn text(status: StatusCode, body: &'static str) -> Response {
    let mut r = (status, body).into_response();
    csp::common(r.headers_mut());
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    csp::common(r.headers_mut());
    r
}

enum Route<'a> {
    Page { cap: &'a str, rest: &'a str },
    Api { cap: &'a str, op: &'a str },
    NoCapability,
    Unknown,
}

fn route(path: &str) -> Route<'_> {
    if let Some(after) = path.strip_prefix("/v/") {
        let (cap, rest) = after.split_once('/').unwrap_or((after, ""));
        if cap.is_empty() {
            return Route::NoCapability;
        }
        return Route::Page { cap, rest };
    }
    if let Some(after) = path.strip_prefix("/api/") {
        let (cap, op) = after.split_once('/').unwrap_or((after, ""));
        if cap.is_empty() {
            return Route::NoCapability;
        }
        return Route::Api { cap, op };
    }
    match path {
        "/" | "/v" | "/api" => Route::NoCapability,
        _ => Route::Unknown,
    }
}

async fn handle(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    if let Err(r) = guard::check_origin_and_host(req.headers(), &state.policy) {
        state.logger.debug(|| format!("views: {}", r.describe()));
        let mut resp = r.response();
        csp::common(resp.headers_mut());
        return resp;
    }
    let path = req.uri().path().to_string();
    let (cap, page_rest, api_op) = match route(&path) {
        Route::Page { cap, rest } => (cap.to_string(), Some(rest.to_string()), None),
        Route::Api { cap, op } => (cap.to_string(), None, Some(op.to_string())),
        Route::NoCapability => {
            return text(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: open a page by the URL the editor gives (it carries the page's capability)",
            )
        }
        Route::Unknown => return text(StatusCode::NOT_FOUND, "Not Found"),
    };
    let Some((plugin, key)) = state.caps.lookup(&cap) else {
        state
            .logger
            .debug(|| "views: refused a request with a wrong capability".into());
        return text(StatusCode::FORBIDDEN, "Forbidden: wrong capability");
    };
    if let Some(info) = req.extensions().get::<ConnInfo>() {
        info.mark_proven();
    }
    let Some(page) = pages::find(&state.host, &plugin, &key) else {
        return text(
            StatusCode::NOT_FOUND,
            "Not Found: this page is not served now (its plugin was disabled or removed)",
        );
    };
    match (page_rest, api_op) {
        (Some(rest), _) => {
            if req.method() != Method::GET && req.method() != Method::HEAD {
                return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
            }
            let head = req.method() == Method::HEAD;
            serve_file(&cap, &page, &rest, head).await
        }
        (None, Some(op)) => match (op.as_str(), req.method().clone()) {
            ("invoke", Method::POST) => invoke(&state, &plugin, req).await,
            ("events", Method::GET) => events(&state, &plugin, &key),
            ("scheme", Method::GET) => json_response(
                StatusCode::OK,
                &json!({"colorScheme": super::lock(&state.scheme).as_str()}),
            ),
            ("invoke" | "events" | "scheme", _) => {
                text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
            }
            _ => text(StatusCode::NOT_FOUND, "Not Found"),
        },
        (None, None) => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// A file of the page's plugin folder (`rest`: the encoded path after the
/// capability).
async fn serve_file(cap: &str, page: &pages::Page, rest: &str, head: bool) -> Response {
    let root = page.root.clone();
    let rest = rest.to_string();
    let read = tokio::task::spawn_blocking(
        move || -> Result<(std::path::PathBuf, Vec<u8>), StatusCode> {
            let path = files::resolve(&root, &rest).ok_or(StatusCode::NOT_FOUND)?;
            let meta = std::fs::metadata(&path).map_err(|_| StatusCode::NOT_FOUND)?;
            if meta.len() > files::MAX_FILE_BYTES {
                return Err(StatusCode::PAYLOAD_TOO_LARGE);
            }
            let bytes = std::fs::read(&path).map_err(|_| StatusCode::NOT_FOUND)?;
            Ok((path, bytes))
        },
    )
    .await
    .unwrap_or(Err(StatusCode::INTERNAL_SERVER_ERROR));
    let (path, bytes) = match read {
        Ok(x) => x,
        Err(StatusCode::PAYLOAD_TOO_LARGE) => {
            return text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large")
        }
        Err(StatusCode::NOT_FOUND) => return text(StatusCode::NOT_FOUND, "Not Found"),
        Err(s) => return text(s, "Internal Server Error"),
    };
    let mime = files::mime_type(&path);
    let (body, policy) = if files::is_html(mime) {
        let html = String::from_utf8_lossy(&bytes);
        let script = inject::script(cap);
        let (mut scripts, styles) = inject::inline_hashes(&html);
        scripts.insert(0, inject::csp_hash(&script));
        let page = inject::inject(&html, &script);
        (page.into_bytes(), csp::page_policy(&scripts, &styles))
    } else {
        (
            bytes,
            "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; sandbox"
                .to_string(),
        )
    };
    let len = body.len();
    let mut r = Response::new(if head {
        Body::empty()
    } else {
        Body::from(body)
    });
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    csp::page(h, &policy);
    r
}

/// `POST invoke`: `{"toolName": NAME, "params": {…}}` → the host's call.
async fn invoke(state: &Arc<State>, plugin: &str, req: Request) -> Response {
    let max = state.policy.max_body_bytes;
    if guard::declared_too_large(req.headers(), max) {
        return text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
    }
    let bytes = match axum::body::to_bytes(req.into_body(), max).await {
        Ok(b) => b,
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large"),
    };
    let bad = |m: String| {
        json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": m, "kind": "request"}),
        )
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return bad(format!("the request body is not JSON: {e}")),
    };
    let Some(tool) = body.get("toolName").and_then(Value::as_str) else {
        return bad("toolName must be a string".into());
    };
    let params = body.get("params").cloned().unwrap_or_else(|| json!({}));
    let out = state
        .host
        .call_tool_async(plugin, tool, params, CallOptions::default())
        .await;
    match out {
        Ok(o) => json_response(StatusCode::OK, &o.to_json()),
        Err(e) => json_response(
            StatusCode::OK,
            &json!({"error": e.message, "kind": e.kind.as_str()}),
        ),
    }
}

/// `GET events`: the page's SSE stream.
fn events(state: &Arc<State>, plugin: &str, key: &PageKey) -> Response {
    let Some(rx) = state.open_stream(plugin, key) else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many open page streams",
        );
    };
    let mut ticker = tokio::time::interval(state.keep_alive);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = futures_util::stream::unfold(
        (rx, ticker, true),
        |(mut rx, mut ticker, first)| async move {
            if first {
                // The first tick of an interval fires at once.
                ticker.tick().await;
            }
            let chunk = tokio::select! {
                m = rx.recv() => m?,
                _ = ticker.tick() => ": keep-alive\n\n".to_string(),
            };
            Some((Ok::<_, Infallible>(chunk), (rx, ticker, false)))
        },
    );
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    csp::common(h);
    r
}
