"""Qwen Companion for Sublime Text: the plugins' user interface.

The desktop app's plugins run in the package's plugin host (``plugin.py``,
``plugin_host()``); this module shows what their manifests contribute:

- views and the floating panel open in the user's browser from the
  library's view server (each URL carries its own capability);
- ``show_notification`` requests become a popup on the active view (with a
  link to the view the plugin named) and a status message; the last ones are
  listed by "Qwen Plugins: Notifications";
- ``commands`` in the Command Palette (generated entries) and in the
  "Qwen Plugins: Run Command" quick panel, together with the
  ``session/context`` menu entries and the ``sessionAction`` (shown only
  when its ``visibleTool`` says so for the window's folder);
- ``keybindings`` generated into a keymap of their own;
- ``configuration`` through quick panels (``plugin_config.py``);
- results: checklists, file cards and text in the "Qwen Plugins" output
  panel; a file card opens its file;
- ``documentParsers``: "Qwen Plugins: Parse Document" for the current file.

Generated files live in ``Packages/QwenCompanionPlugins/`` (setting
``plugin_ui_package``): ``Default (<platform>).sublime-keymap`` and
``Qwen Plugins.sublime-commands``, rewritten when the plugins change (the
host's ``views_changed`` event, an install, an uninstall, enable/disable)
and only when their text changes.

Threading: host calls that wait (``list``, ``visible``, ``options``,
``parse_document``...) run on Sublime's async thread; tool calls use
``call_async``. Results come back to the main thread with
``sublime.set_timeout``; library-thread callables never touch the UI.
"""

import base64
import html
import json
import os
import pathlib
import threading
import webbrowser

import sublime
import sublime_plugin

from . import qwen_ui_core as ui
from .qwen_core import logbuf as _logbuf

SETTINGS_FILE = "QwenCompanion.sublime-settings"
OUTPUT_PANEL = "qwen_plugins"
LOG_PREFIX = "Qwen Plugins: "
GENERATED_PACKAGE = "QwenCompanionPlugins"
COMMANDS_FILE = "Qwen Plugins.sublime-commands"

#: ``parse_document`` sends the file base64-encoded in one message; the host
#: refuses messages over 16 MiB, so larger files are refused here first.
MAX_PARSE_BYTES = 12 * 1024 * 1024

#: Notifications kept for "Qwen Plugins: Notifications".
MAX_NOTIFICATIONS = 50

_lock = threading.RLock()
_state = {
    "host": None,  # the host our capability and listener are attached to
    "bindings": [],  # the generated key bindings
    "notes": [],  # what keybinding generation reported
    "written": {},  # path -> text last written
    "notifications": [],  # newest first: {"title", "body", "view", "plugin"}
    "remove_hooks": None,
}


def log(message):
    print(LOG_PREFIX + message)
    _logbuf.add(LOG_PREFIX + message)  # "Qwen: Show Log"


def settings():
    return sublime.load_settings(SETTINGS_FILE)


def core():
    """The package's core module (``plugin.py``), imported lazily."""
    from . import plugin as core_module

    return core_module


def binding():
    return core().import_binding()


# --------------------------------------------------------------------------
# the host


def host(create=True):
    """The plugin host (attached to this module), or None when it is off."""
    h = core().plugin_host(create)
    if h is not None:
        attach(h)
    return h


def attach(h):
    """Once per host: starts its view server (so notifications can link to
    their view) and writes the generated files."""
    with _lock:
        if _state["host"] is h:
            return
        _state["host"] = h
    in_background(_attached, h)


def _attached(h):
    """Async thread: what ``attach`` starts."""
    try:
        ensure_views(h)
    except Exception as e:
        log("the view server did not start: {}".format(e))
    refresh(h)


def on_host_event(event):
    """Library thread: the host's events."""
    kind = event.get("type") if isinstance(event, dict) else None
    if kind == "views_changed":
        sublime.set_timeout_async(lambda: _safely(refresh), 0)
    elif kind == "plugin_disabled":
        reason = event.get("reason") or "disabled"
        message = "{} was disabled: {}".format(event.get("plugin"), reason)
        log(message)
        sublime.set_timeout(lambda: sublime.status_message(LOG_PREFIX + message), 0)
        sublime.set_timeout_async(lambda: _safely(refresh), 0)


def entries(h=None):
    """``PluginHost.list()`` (``[]`` without a host)."""
    h = h or host()
    if h is None:
        return []
    return h.list()


def refresh(h=None):
    """Rewrites the generated keymap and Command Palette entries from the
    installed plugins; returns the list entries."""
    h = h or host(create=False)
    if h is None:
        return []
    items = h.list()
    s = settings()
    bindings, notes = ui.keybindings(
        items,
        sublime.platform(),
        enabled=bool(s.get("plugin_keybindings", True)),
        overrides=s.get("plugin_key_overrides") or {},
    )
    for n in notes:
        if n not in _state["notes"]:
            log(n)
    with _lock:
        _state["bindings"] = bindings
        _state["notes"] = notes
    contributions = ui.collect_contributions(items)
    for c in contributions:
        c.key = ui.key_of(bindings, c.plugin, c.tool)
    folder = generated_dir()
    if folder is not None:
        _write(os.path.join(folder, ui.platform_file_name(sublime.platform())), ui.generated_json(bindings, notes))
        _write(os.path.join(folder, COMMANDS_FILE), ui.generated_json(ui.palette_entries(contributions)))
    return items


def generated_dir():
    """``Packages/QwenCompanionPlugins`` (setting ``plugin_ui_package``: a
    folder name under Packages, or an absolute folder); None when the
    setting is false."""
    name = settings().get("plugin_ui_package", GENERATED_PACKAGE)
    if not name:
        return None
    name = os.path.expanduser(str(name))
    if os.path.isabs(name):
        return name
    packages = getattr(sublime, "packages_path", None)  # absent from some test hosts
    return os.path.join(packages(), name) if packages is not None else None


def _write(path, text):
    """Writes ``path`` (atomically) when its text changed; Sublime Text
    reloads a resource file each time it is written."""
    with _lock:
        if _state["written"].get(path) == text:
            return False
    try:
        with open(path, "r", encoding="utf-8") as f:
            if f.read() == text:
                with _lock:
                    _state["written"][path] = text
                return False
    except (IOError, OSError):
        pass
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    tmp = "{}.tmp-{}".format(path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    with _lock:
        _state["written"][path] = text
    return True


def window_cwd(window):
    """``context.cwd`` of calls made from ``window``: its first folder (None:
    the host's workspace root)."""
    folders = window.folders() if window is not None else []
    return folders[0] if folders else None


# --------------------------------------------------------------------------
# small UI helpers (main thread)


def _safely(fn, *args):
    try:
        return fn(*args)
    except Exception as e:
        log("{} failed: {}".format(getattr(fn, "__name__", "call"), e))
        return None


def in_background(fn, *args):
    """Runs ``fn(*args)`` on Sublime's async thread (never raises into it)."""
    sublime.set_timeout_async(lambda: _safely(fn, *args), 0)


def on_main(fn, *args):
    sublime.set_timeout(lambda: _safely(fn, *args), 0)


def show_output(window, text, title=None):
    """Shows ``text`` in the "Qwen Plugins" output panel."""
    if window is None:
        return
    panel = window.create_output_panel(OUTPUT_PANEL)
    body = (title + "\n\n" if title else "") + text
    panel.run_command("qwen_plugins_set_content", {"text": body})
    window.run_command("show_panel", {"panel": "output." + OUTPUT_PANEL})


def open_url(url):
    """Opens a view URL in the user's default browser."""
    try:
        webbrowser.open(url)
    except Exception as e:
        log("cannot open {}: {}".format(url, e))
        sublime.status_message(LOG_PREFIX + "cannot open the browser: {}".format(e))


def no_host(window):
    msg = "the plugin host is not running (setting plugins_enabled, or see the console)"
    sublime.status_message(LOG_PREFIX + msg)
    if window is not None:
        show_output(window, msg + "\n")


def quick_panel(window, items, on_done, selected=-1, placeholder=None):
    """``window.show_quick_panel`` with ``[caption, detail]`` rows; ``on_done``
    gets the index (``-1``: cancelled)."""
    kwargs = {"selected_index": selected}
    if placeholder and int(sublime.version()) >= 4081:
        kwargs["placeholder"] = placeholder
    window.show_quick_panel([list(i) for i in items], on_done, **kwargs)


# --------------------------------------------------------------------------
# notifications (the show_notification capability)


def on_show_notification(request):
    """Library thread: answers ``show_notification`` and shows it later on
    the main thread (a popup with the view's link and a status message)."""
    if not settings().get("plugin_notifications", True):
        return {"shown": False, "reason": "disabled"}
    title, body, view = ui.notification_parts(request)
    record = {"title": title, "body": body, "view": view, "plugin": request.get("plugin")}
    with _lock:
        _state["notifications"].insert(0, record)
        del _state["notifications"][MAX_NOTIFICATIONS:]
    on_main(show_notification, record)
    return {"shown": True}


def notification_html(record):
    lines = [html.escape(line) for line in record["body"].splitlines()]
    out = "<body id='qwen-plugin-notification'><b>{}</b>".format(html.escape(record["title"]))
    if lines:
        out += "<br>" + "<br>".join(lines)
    if record["view"] is not None:
        out += "<br><br><a href='open'>Open {}</a>".format(html.escape(record["view"].get("title") or "the view"))
    out += " &nbsp; <a href='dismiss'>Dismiss</a></body>"
    return out


def show_notification(record):
    first = record["body"].splitlines()[0] if record["body"] else ""
    sublime.status_message("{}{}{}".format(LOG_PREFIX, record["title"], " \u2014 " + first if first else ""))
    window = sublime.active_window()
    view = window.active_view() if window is not None else None
    if view is None or not settings().get("plugin_notification_popups", True):
        return

    def navigate(href):
        view.hide_popup()
        if href == "open" and record["view"] is not None:
            open_url(record["view"]["url"])

    view.show_popup(
        notification_html(record),
        flags=getattr(sublime, "HIDE_ON_MOUSE_MOVE_AWAY", 0),
        location=-1,
        max_width=600,
        on_navigate=navigate,
    )


def notifications():
    with _lock:
        return list(_state["notifications"])


# --------------------------------------------------------------------------
# running tools and showing results


def run_tool(window, plugin_id, tool, params=None):
    """Calls ``tool`` of ``plugin_id`` (asking for its required arguments
    first when ``params`` is None) and shows the result."""
    h = host()
    if h is None:
        return no_host(window)
    in_background(_prepare_run, window, h, plugin_id, tool, params)


def _prepare_run(window, h, plugin_id, tool, params):
    entry = next((e for e in h.list() if e.get("id") == plugin_id), None)
    if entry is None:
        return on_main(show_output, window, "{} is not installed\n".format(plugin_id))
    spec = ui.tool_spec(ui.manifest_of(entry), tool)
    if params is None:
        skeleton = ui.required_params(spec)
        if skeleton is not None:
            return on_main(ask_params, window, plugin_id, tool, json.dumps(skeleton))
        params = {}
    start_call(window, h, plugin_id, tool, spec, params)


def ask_params(window, plugin_id, tool, text):
    """An input panel for the tool's arguments (JSON); a bad entry opens it
    again with the text kept."""

    def done(typed):
        try:
            params = ui.parse_params(typed)
        except ValueError as e:
            sublime.status_message(LOG_PREFIX + str(e))
            return ask_params(window, plugin_id, tool, typed)
        run_tool(window, plugin_id, tool, params)

    window.show_input_panel("{} arguments (JSON):".format(tool), text, done, None, None)


def start_call(window, h, plugin_id, tool, spec, params):
    sublime.status_message("{}running {}\u2026".format(LOG_PREFIX, tool))

    def finished(result, error):  # library thread
        on_main(show_result, window, plugin_id, tool, spec, params, result, error)

    try:
        h.call_async(plugin_id, tool, params, finished, cwd=window_cwd(window))
    except Exception as e:  # argument errors raise here
        on_main(show_result, window, plugin_id, tool, spec, params, None, e)


def show_result(window, plugin_id, tool, spec, params, result, error):
    title = "{} \u00b7 {}".format(plugin_id, tool)
    if error is not None:
        sublime.status_message("{}{} failed: {}".format(LOG_PREFIX, tool, getattr(error, "message", error)))
        return show_output(window, ui.error_text(error), title)
    kind, text, card = ui.present_result(spec, params, result)
    show_output(window, text, title)
    if card is not None:
        open_file_card(window, card)
    sublime.status_message("{}{} done".format(LOG_PREFIX, tool))


def open_file_card(window, card):
    """Opens a result's file: in Sublime Text, or in the system's default
    application for what Sublime Text cannot show (PDF, Office files...)."""
    if not os.path.exists(card["path"]):
        sublime.status_message(LOG_PREFIX + "{} does not exist".format(card["path"]))
        return
    if card["external"]:
        open_url(pathlib.Path(card["path"]).as_uri())
    else:
        window.open_file(card["path"])


# --------------------------------------------------------------------------
# the contributions quick panel


def contributions(window, h):
    """Async thread: the contributions to offer in ``window`` (session
    actions only where their ``visibleTool`` says so)."""
    items = h.list()
    out = []
    with _lock:
        bindings = list(_state["bindings"])
    cwd = window_cwd(window)
    for c in ui.collect_contributions(items):
        c.key = ui.key_of(bindings, c.plugin, c.tool)
        if c.kind == "session" and c.visible_tool:
            try:
                if not h.visible(c.plugin, cwd or ""):
                    continue
            except Exception as e:
                log("{}: {} failed: {}".format(c.plugin, c.visible_tool, e))
                continue
        out.append(c)
    return out


def show_contributions(window, found):
    if not found:
        sublime.status_message(LOG_PREFIX + "no plugin command (install or enable a plugin)")
        return

    def done(i):
        if i >= 0:
            run_tool(window, found[i].plugin, found[i].tool)

    quick_panel(window, [(c.caption(), c.detail()) for c in found], done, placeholder="Run a plugin command")


# --------------------------------------------------------------------------
# views


def open_view(window, plugin_id=None, view_id=None):
    """Opens a view (or the panel) in the browser: the one named, else a
    quick panel of every view and panel."""
    h = host()
    if h is None:
        return no_host(window)
    in_background(_open_view, window, h, plugin_id, view_id)


def ensure_views(h):
    """Starts the view server when it does not run yet; returns its document."""
    qc = binding()
    try:
        h.views_start()
    except qc.AlreadyRunningError:
        pass
    scheme = color_scheme()
    if scheme is not None:
        _safely(h.set_color_scheme, scheme)
        with _lock:
            _state["scheme"] = scheme
    return h.views()


def _open_view(window, h, plugin_id, view_id):
    try:
        doc = ensure_views(h)
    except Exception as e:
        return on_main(show_output, window, "the view server is not available: {}\n".format(e))
    if plugin_id is not None and view_id is not None:
        try:
            url = h.view_url(plugin_id, view_id)
        except Exception as e:
            return on_main(show_output, window, "{}: no view {}: {}\n".format(plugin_id, view_id, e))
        return open_url(url)
    items = ui.view_items(doc, h.list())
    if plugin_id is not None:
        items = [i for i in items if i[1].endswith(" " + plugin_id)]
    on_main(_pick_view, window, items)


def _pick_view(window, items):
    if not items:
        sublime.status_message(LOG_PREFIX + "no plugin has a view")
        return
    if len(items) == 1:
        return open_url(items[0][2])
    quick_panel(window, [(c, d) for c, d, _ in items], lambda i: i >= 0 and open_url(items[i][2]))


def _scheme_changed():
    """Main thread: the Preferences changed; open pages follow a new
    light/dark UI style."""
    scheme = color_scheme()
    with _lock:
        changed = scheme is not None and _state.get("scheme") != scheme
        _state["scheme"] = scheme
    h = host(create=False)
    if changed and h is not None:
        in_background(h.set_color_scheme, scheme)


def color_scheme():
    """``light`` / ``dark`` from the UI theme (Sublime Text 4), else None."""
    info = getattr(sublime, "ui_info", None)
    if info is None:
        return None
    try:
        style = ((info() or {}).get("theme") or {}).get("style")
    except Exception:
        return None
    return style if style in ("light", "dark") else None


# --------------------------------------------------------------------------
# documents


def parse_document(window, path):
    """Parses ``path`` with the plugin whose ``documentParsers`` takes its
    MIME type and shows the text in a new view."""
    h = host()
    if h is None:
        return no_host(window)
    if not path or not os.path.isfile(path):
        sublime.status_message(LOG_PREFIX + "parse a file saved on disk")
        return
    in_background(_parse, window, h, path)


def _parse(window, h, path):
    mime = ui.mime_for_path(path)
    found = ui.parser_for(h.list(), mime)
    if found is None:
        known = ", ".join(ui.parser_mimes(h.list())) or "none"
        return on_main(
            show_output, window, "no enabled plugin parses {} ({}); plugins parse: {}\n".format(
                os.path.basename(path), mime or "unknown type", known)
        )
    size = os.path.getsize(path)
    if size > MAX_PARSE_BYTES:
        return on_main(show_output, window, "{} is too large to parse ({} bytes, at most {})\n".format(path, size, MAX_PARSE_BYTES))
    with open(path, "rb") as f:
        data = f.read()
    try:
        out = h.parse_document(mime, data)
    except Exception as e:
        return on_main(show_output, window, ui.error_text(e), "parse {}".format(os.path.basename(path)))
    if not out.get("success"):
        return on_main(show_output, window, "{} could not be parsed: {}\n".format(path, out.get("reason") or "no reason given"))
    on_main(show_parsed, window, path, found[0], str(out.get("text") or ""))


def show_parsed(window, path, plugin_id, text):
    view = window.new_file()
    view.set_scratch(True)
    view.set_name("Parsed: " + os.path.basename(path))
    view.settings().set("qwen_plugins_parsed_from", path)
    view.run_command("qwen_plugins_set_content", {"text": text})
    sublime.status_message("{}{} parsed by {}".format(LOG_PREFIX, os.path.basename(path), plugin_id))


# --------------------------------------------------------------------------
# lifecycle


def _window_opened(window, wc=None):
    in_background(host)  # starts or attaches the host; regenerates the files


KEY_SETTINGS = ("plugin_keybindings", "plugin_key_overrides", "plugin_ui_package")


def _key_settings():
    s = settings()
    return json.dumps([s.get(k) for k in KEY_SETTINGS], sort_keys=True)


def _settings_changed():
    """Main thread: a key binding setting changed: regenerate."""
    now = _key_settings()
    with _lock:
        changed = _state.get("key_settings") != now
        _state["key_settings"] = now
    if changed and host(create=False) is not None:
        in_background(refresh)


def plugin_loaded():
    c = core()
    c.register_host_capability("show_notification", on_show_notification)
    c.add_host_listener(on_host_event)
    with _lock:
        _state["remove_hooks"] = c.register_window_hook(_window_opened, None)
        _state["key_settings"] = _key_settings()
    s = settings()
    if hasattr(s, "add_on_change"):
        s.add_on_change("qwen_plugins_keys", _settings_changed)
        prefs = sublime.load_settings("Preferences.sublime-settings")
        prefs.add_on_change("qwen_plugins_scheme", _scheme_changed)


def plugin_unloaded():
    c = core()
    with _lock:
        remove, _state["remove_hooks"] = _state["remove_hooks"], None
        _state["host"] = None
    if remove is not None:
        remove()
    _safely(c.remove_host_listener, on_host_event)
    s = settings()
    if hasattr(s, "clear_on_change"):
        s.clear_on_change("qwen_plugins_keys")
        sublime.load_settings("Preferences.sublime-settings").clear_on_change("qwen_plugins_scheme")


# --------------------------------------------------------------------------
# commands


class QwenPluginsSetContentCommand(sublime_plugin.TextCommand):
    """Internal: replaces the whole buffer."""

    def run(self, edit, text=""):
        self.view.replace(edit, sublime.Region(0, self.view.size()), text)

    def is_visible(self):
        return False


class QwenPluginsRunCommandCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Run Command… (commands, session menu, session actions)."""

    def run(self):
        h = host()
        if h is None:
            return no_host(self.window)
        window = self.window
        in_background(lambda: on_main(show_contributions, window, contributions(window, h)))


class QwenPluginRunCommand(sublime_plugin.WindowCommand):
    """Runs one plugin tool (the generated palette entries and key bindings)."""

    def run(self, plugin, tool, params=None):
        run_tool(self.window, plugin, tool, params)


class QwenPluginsOpenViewCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Open View… (in the browser)."""

    def run(self, plugin=None, view=None):
        open_view(self.window, plugin, view)


class QwenPluginsParseDocumentCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Parse Document… (the current file, or ``paths`` from the side bar)."""

    def run(self, paths=None):
        if paths:
            path = paths[0]
        else:
            view = self.window.active_view()
            path = view.file_name() if view is not None else None
        parse_document(self.window, path)

    def is_visible(self, paths=None):
        # the side bar: one file; the palette (no paths): always
        return paths is None or (len(paths) == 1 and os.path.isfile(paths[0]))


class QwenPluginsNotificationsCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Notifications (the last ones; picking one opens its view)."""

    def run(self):
        items = notifications()
        if not items:
            sublime.status_message(LOG_PREFIX + "no notifications yet")
            return
        window = self.window

        def done(i):
            if i < 0:
                return
            r = items[i]
            if r["view"] is not None:
                open_url(r["view"]["url"])
            else:
                show_output(window, r["body"] + "\n", r["title"])

        rows = [(r["title"], (r["body"].splitlines() or [""])[0] + ("  \u2192 " + (r["view"].get("title") or "view") if r["view"] else "")) for r in items]
        quick_panel(window, rows, done)


class QwenPluginsRegenerateCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Regenerate Key Bindings and Commands."""

    def run(self):
        h = host()
        if h is None:
            return no_host(self.window)
        window = self.window

        def job():
            refresh(h)
            with _lock:
                notes = list(_state["notes"])
                n = len(_state["bindings"])
            text = "{} key binding(s) generated in {}\n".format(n, generated_dir())
            on_main(show_output, window, text + "".join(x + "\n" for x in notes))

        in_background(job)
