//! The script injected into every page a plugin serves: `window.pluginHost`
//! as the plugin format defines it (`invoke`, `onPush`, `getColorScheme`,
//! `onColorSchemeChange`), talking to this page's own API endpoints
//! (`/api/<capability>/…`), and where it goes in the page.

use base64::Engine;
use sha2::{Digest, Sha256};

/// The script (without `<script>` tags) for the page whose API lives under
/// `/api/<cap>/`. It opens one `EventSource` (`events`) for `ui_push`
/// messages and scheme changes; `invoke` waits until that stream is
/// subscribed (at most 3 s), so a push made during a call reaches the
/// `onPush` callbacks registered before it.
pub fn script(cap: &str) -> String {
    format!(
        r#"(function () {{
'use strict';
var BASE = '/api/{cap}/';
var pushCbs = [], schemeCbs = [], scheme = null, source = null, ready = null;
function each(list, args) {{
  list.slice().forEach(function (cb) {{
    try {{ cb.apply(null, args); }} catch (e) {{ setTimeout(function () {{ throw e; }}); }}
  }});
}}
function connect() {{
  if (source) return ready;
  ready = new Promise(function (resolve) {{
    source = new EventSource(BASE + 'events');
    source.addEventListener('ready', function (e) {{
      try {{ scheme = JSON.parse(e.data).colorScheme; }} catch (x) {{}}
      resolve();
    }});
    source.addEventListener('push', function (e) {{
      var m; try {{ m = JSON.parse(e.data); }} catch (x) {{ return; }}
      each(pushCbs, [m.channel, m.payload]);
    }});
    source.addEventListener('scheme', function (e) {{
      var s; try {{ s = JSON.parse(e.data).colorScheme; }} catch (x) {{ return; }}
      if (s === scheme) return;
      scheme = s;
      each(schemeCbs, [s]);
    }});
    setTimeout(resolve, 3000);
  }});
  return ready;
}}
function subscribe(list, cb) {{
  if (typeof cb !== 'function') throw new TypeError('callback must be a function');
  list.push(cb);
  connect();
  return function () {{ var i = list.indexOf(cb); if (i >= 0) list.splice(i, 1); }};
}}
function post(path, body) {{
  return fetch(BASE + path, {{
    method: 'POST', credentials: 'omit', cache: 'no-store',
    headers: {{ 'Content-Type': 'application/json' }}, body: JSON.stringify(body)
  }}).then(function (r) {{
    return r.json().catch(function () {{ return {{ error: 'HTTP ' + r.status }}; }});
  }}, function (e) {{ return {{ error: String(e && e.message || e) }}; }});
}}
var host = {{
  invoke: function (toolName, params) {{
    var body = {{ toolName: String(toolName), params: params === undefined ? {{}} : params }};
    return (ready || Promise.resolve()).then(function () {{ return post('invoke', body); }});
  }},
  onPush: function (cb) {{ return subscribe(pushCbs, cb); }},
  getColorScheme: function () {{
    return fetch(BASE + 'scheme', {{ credentials: 'omit', cache: 'no-store' }})
      .then(function (r) {{ return r.json(); }})
      .then(function (j) {{ scheme = j.colorScheme; return j.colorScheme; }});
  }},
  onColorSchemeChange: function (cb) {{ return subscribe(schemeCbs, cb); }}
}};
Object.defineProperty(window, 'pluginHost', {{
  value: Object.freeze(host), writable: false, configurable: false, enumerable: true
}});
}})();"#
    )
}

/// `'sha256-…'` of `text`, as a CSP source expression.
pub fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Finds `needle` (ASCII, lower case) in `hay` ignoring ASCII case, from `from`.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let h = hay.as_bytes();
    let n = needle.as_bytes();
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (from..=h.len() - n.len()).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

/// The end (index after `>`) of the start tag `<name` at or after `from`
/// (the name must end at whitespace, `/` or `>`, so `<header>` is not
/// `<head>`); also the tag's attribute text.
fn start_tag<'a>(html: &'a str, name: &str, from: usize) -> Option<(usize, usize, &'a str)> {
    let open = format!("<{name}");
    let mut at = from;
    loop {
        let i = find_ci(html, &open, at)?;
        let after = i + open.len();
        match html.as_bytes().get(after) {
            Some(b) if b.is_ascii_whitespace() || *b == b'>' || *b == b'/' => {
                let end = html[after..].find('>')? + after;
                return Some((i, end + 1, &html[after..end]));
            }
            Some(_) => at = after,
            None => return None,
        }
    }
}

/// The page with `<script>{script}</script>` inserted before any of its own
/// content: right after `<head …>`; without a head, after `<html …>`;
/// without either, after a leading `<!doctype …>` (before it the page would
/// fall into quirks mode), else at the very top.
pub fn inject(html: &str, script: &str) -> String {
    let tag = format!("<script>{script}</script>");
    let at = if let Some((_, end, _)) = start_tag(html, "head", 0) {
        end
    } else if let Some((_, end, _)) = start_tag(html, "html", 0) {
        end
    } else {
        let trimmed = html.trim_start();
        let lead = html.len() - trimmed.len();
        if trimmed.len() >= 9 && trimmed[..9].eq_ignore_ascii_case("<!doctype") {
            trimmed.find('>').map_or(0, |e| lead + e + 1)
        } else {
            0
        }
    };
    let mut out = String::with_capacity(html.len() + tag.len());
    out.push_str(&html[..at]);
    out.push_str(&tag);
    out.push_str(&html[at..]);
    out
}

/// The CSP hashes of the page's own inline `<script>` (those without `src`)
/// and `<style>` elements, as written in the file: they may run; a script
/// or style added later (by the DOM, a script, an injection) may not.
pub fn inline_hashes(html: &str) -> (Vec<String>, Vec<String>) {
    let mut scripts = Vec::new();
    let mut styles = Vec::new();
    for (name, out) in [("script", &mut scripts), ("style", &mut styles)] {
        let mut at = 0;
        while let Some((_, end, attrs)) = start_tag(html, name, at) {
            let close = format!("</{name}");
            let Some(stop) = find_ci(html, &close, end) else {
                break;
            };
            let has_src = name == "script"
                && find_ci(attrs, "src", 0).is_some_and(|i| {
                    let before = if i == 0 {
                        b' '
                    } else {
                        attrs.as_bytes()[i - 1]
                    };
                    before.is_ascii_whitespace()
                });
            if !has_src {
                out.push(csp_hash(&html[end..stop]));
            }
            at = stop + close.len();
        }
    }
    (scripts, styles)
}

#[cfg(test)]
mod tests;
