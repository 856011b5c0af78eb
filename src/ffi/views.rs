//! `qc_plugin_host_views_*`, `qc_plugin_host_view_url`,
//! `qc_plugin_host_set_color_scheme`: the plugin host's view server (the
//! pages plugins ship — `views[]` docked views and the `ui` panel — served
//! on `http://127.0.0.1:<random port>/` with `window.pluginHost` injected),
//! over the C ABI.
//!
//! Each page URL carries its own unguessable capability (256 bits from the
//! OS RNG) bound to that plugin and page: open it in any browser (JCEF,
//! the user's default browser). A page reaches only its own plugin's tools
//! (`pluginHost.invoke`) and `ui_push` messages (`pluginHost.onPush`) and
//! only files inside its plugin folder. URLs stay the same while the server
//! runs; a page of a plugin that is disabled or uninstalled answers 404.
//!
//! Events (on the host's event callback or pull queue): `{"type":
//! "views_changed"}` when the views or panels of the enabled plugins change
//! (install, uninstall, enable, disable, crash-loop disabling). While the
//! server runs, a `show_notification` request whose `viewId` names a view of
//! its plugin reaches the capability callback with `"view":{"id","title",
//! "url"}` added to its params (open that URL when the user clicks).
//!
//! ## Threading
//! Every function may be called from any thread, concurrently, also from
//! inside the host's callbacks. The server's log lines go to the host's log
//! callback. `qc_plugin_host_views_stop` and `qc_plugin_host_free` return
//! once the server's sockets are closed.

use std::ffi::c_char;

use super::plugins::{entry, qc_plugin_host};
use super::util::*;
use crate::plugins::views::{Config, Scheme};

/// Starts the view server of `host` on `127.0.0.1:<random port>` and writes
/// its pages to `*out_info_json` (owned; free with `qc_string_free`; may be
/// NULL when not wanted), as `qc_plugin_host_views_json` gives them.
///
/// `config_json` (nullable, borrowed) is a JSON object, every field
/// optional: `colorScheme` (`"light"`/`"dark"`; default the scheme last set
/// with `qc_plugin_host_set_color_scheme`, else `"light"`), `maxBodyBytes`
/// (an `invoke` request, default 4 MiB), `keepAliveMs` (SSE keep-alive,
/// 15000; 10..30000), `http` (the connection limits, as for
/// `qc_companion_new`). Unknown fields give `QC_INVALID_JSON`, bad values
/// `QC_INVALID_ARGUMENT`. `QC_ALREADY_RUNNING` when it runs. It runs until
/// `qc_plugin_host_views_stop` or `qc_plugin_host_free`.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_views_start(
    h: *mut qc_plugin_host,
    config_json: *const c_char,
    out_info_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let e = entry(h)?;
        let info = e.start_views(Config::from_json(opt_str_arg(config_json, "config_json")?)?)?;
        if !out_info_json.is_null() {
            write_json(out_info_json, &info)?;
        }
        Ok(())
    })
}

/// Stops the view server of `host`: ends every page's event stream, closes
/// its sockets and returns when that is done (open pages stop working;
/// their URLs are not valid for a later server). `QC_NOT_RUNNING` when it
/// does not run.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_views_stop(
    h: *mut qc_plugin_host,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || entry(h)?.stop_views())
}

/// `*out_json` (owned) receives the pages served now, for every enabled
/// plugin (sorted by id; views in manifest order):
/// `{"url":"http://127.0.0.1:PORT/","views":[{"plugin","id","title",
/// "icon","width","url"}],"panels":[{"plugin","title","url"}],
/// "colorScheme":"light"|"dark"}` (`title` defaults to the view id / the
/// plugin id; `icon` and `width` are null when the manifest gives none).
/// `QC_NOT_RUNNING` when the server does not run.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_views_json(
    h: *const qc_plugin_host,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    json_result(error, out_json, || entry(h)?.with_views(|v| v.views_json()))
}

/// `*out_url` (owned) receives the URL of view `view_id` of plugin
/// `plugin_id` (both borrowed), or with `view_id` NULL of the plugin's `ui`
/// panel. `QC_NOT_FOUND` for an unknown plugin, a disabled one, or a view
/// (panel) it does not declare; `QC_NOT_RUNNING` when the server does not
/// run.
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_view_url(
    h: *const qc_plugin_host,
    plugin_id: *const c_char,
    view_id: *const c_char,
    out_url: *mut *mut c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        out_arg(out_url, "out_url")?;
        let e = entry(h)?;
        let plugin = str_arg(plugin_id, "plugin_id")?;
        let view = opt_str_arg(view_id, "view_id")?;
        let url = e.with_views(|v| v.view_url(plugin, view))?;
        write_string(out_url, url)
    })
}

/// Sets the colour scheme pages see (`scheme`, borrowed: `"light"` or
/// `"dark"`, else `QC_INVALID_ARGUMENT`): `pluginHost.getColorScheme()`
/// resolves to it and every open page's `onColorSchemeChange` callbacks get
/// it when it changes. Allowed while the server does not run (a later
/// `qc_plugin_host_views_start` starts with it).
#[no_mangle]
pub unsafe extern "C" fn qc_plugin_host_set_color_scheme(
    h: *mut qc_plugin_host,
    scheme: *const c_char,
    error: *mut *mut c_char,
) -> qc_status {
    boundary(error, || {
        let scheme = Scheme::parse(str_arg(scheme, "scheme")?)?;
        entry(h)?.set_color_scheme(scheme);
        Ok(())
    })
}
