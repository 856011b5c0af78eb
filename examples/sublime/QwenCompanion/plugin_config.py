"""Qwen Companion for Sublime Text: the plugins' ``configuration`` in quick panels.

"Qwen Plugins: Configure…" picks a plugin, then one of its entries:

- ``select``: the options of its ``optionsTool`` (``PluginHost.options``),
  the host's "Auto" option (the entry's ``defaultValue``) first;
- ``boolean``: On / Off;
- ``string``: an input panel;
- ``number``: an input panel; what is not a finite number is refused and
  the panel opens again with the text kept;

and every entry offers "Reset to default". A value is stored by the host
(``set_config_value``, in the plugins directory's ``state.json``; every
call's ``context.config`` has it) and mirrored in the package settings
(``plugin_config``: ``{"<plugin id>": {"<entry id>": value}}``). Editing
``plugin_config`` in the settings file sets the changed values in the host
too (a value the host refuses is logged and left out).
"""

import json
import os
import threading

import sublime
import sublime_plugin

from . import plugin_ui as pui
from . import qwen_ui_core as ui

_lock = threading.Lock()
_seen = {"mirror": None}  # the plugin_config we last wrote or applied


def stored_values(h, plugin_id):
    """The values the host stores for ``plugin_id`` (its ``state.json``),
    else the settings mirror."""
    try:
        with open(os.path.join(h.plugins_dir, "state.json"), encoding="utf-8") as f:
            doc = json.load(f)
        values = ((doc.get("plugins") or {}).get(plugin_id) or {}).get("config")
        if isinstance(values, dict):
            return values
    except (IOError, OSError, ValueError, AttributeError):
        pass
    mirror = pui.settings().get("plugin_config") or {}
    values = mirror.get(plugin_id) if isinstance(mirror, dict) else None
    return values if isinstance(values, dict) else {}


def _mirror():
    m = pui.settings().get("plugin_config") or {}
    return json.loads(json.dumps(m)) if isinstance(m, dict) else {}


def set_value(h, plugin_id, config_id, value):
    """Stores ``value`` (``None``: back to the default) in the host, then in
    the settings mirror. Raises the host's error (nothing is mirrored then)."""
    h.set_config_value(plugin_id, config_id, value)
    mirror = _mirror()
    values = mirror.setdefault(plugin_id, {})
    if value is None:
        values.pop(config_id, None)
        if not values:
            mirror.pop(plugin_id, None)
    else:
        values[config_id] = value
    with _lock:
        _seen["mirror"] = json.loads(json.dumps(mirror))
    s = pui.settings()
    s.set("plugin_config", mirror)
    sublime.save_settings(pui.SETTINGS_FILE)


def apply_mirror_changes():
    """The settings' ``plugin_config`` changed (the user edited the file):
    sets every value that differs from what we saw last in the host."""
    h = pui.host(create=False)
    mirror = _mirror()
    with _lock:
        before = _seen["mirror"]
        _seen["mirror"] = json.loads(json.dumps(mirror))
    if h is None or before is None or before == mirror:
        return []
    applied = []
    for pid in set(before) | set(mirror):
        old = before.get(pid) if isinstance(before.get(pid), dict) else {}
        new = mirror.get(pid) if isinstance(mirror.get(pid), dict) else {}
        for key in set(old) | set(new):
            if key in new and old.get(key) == new[key] and key in old:
                continue
            value = new.get(key)  # removed: the default applies again
            try:
                h.set_config_value(pid, key, value)
                applied.append((pid, key, value))
            except Exception as e:
                pui.log("plugin_config {}.{}: {}".format(pid, key, e))
    return applied


def _settings_changed():
    pui._safely(apply_mirror_changes)


# --------------------------------------------------------------------------
# quick panels (main thread; host calls on the async thread)


def configure(window, plugin_id=None):
    h = pui.host()
    if h is None:
        return pui.no_host(window)
    pui.in_background(_configure, window, h, plugin_id)


def _configure(window, h, plugin_id):
    items = [e for e in h.list() if ui.usable(e) and ui.config_entries(e)]
    if plugin_id is not None:
        items = [e for e in items if e.get("id") == plugin_id]
    if not items:
        return pui.on_main(sublime.status_message, pui.LOG_PREFIX + "no enabled plugin has settings")
    if len(items) == 1:
        return pui.on_main(pick_entry, window, h, items[0], stored_values(h, items[0]["id"]))

    def done(i):
        if i >= 0:
            pui.in_background(lambda: pui.on_main(pick_entry, window, h, items[i], stored_values(h, items[i]["id"])))

    rows = [(ui.plugin_name(e), e["id"]) for e in items]
    pui.on_main(pui.quick_panel, window, rows, done)


def pick_entry(window, h, entry, values):
    pid = entry["id"]
    configs = ui.config_entries(entry)
    rows = []
    for c in configs:
        value = ui.current_value(c, values)
        rows.append((c.get("label") or c["id"], "{} \u00b7 {}".format(c["type"], ui.show_value(value))))

    def done(i):
        if i >= 0:
            edit_entry(window, h, pid, configs[i], ui.current_value(configs[i], values))

    pui.quick_panel(window, rows, done, placeholder=ui.plugin_name(entry) + " settings")


def _store(window, h, pid, config, value):
    def job():
        try:
            set_value(h, pid, config["id"], value)
        except Exception as e:
            pui.on_main(pui.show_output, window, "{}: {}\n".format(config.get("label") or config["id"], e))
            return
        shown = "the default" if value is None else ui.show_value(value)
        pui.on_main(sublime.status_message, "{}{}: {} set to {}".format(pui.LOG_PREFIX, pid, config.get("label") or config["id"], shown))

    pui.in_background(job)


def edit_entry(window, h, pid, config, current):
    kind = config["type"]
    label = config.get("label") or config["id"]
    if kind == "select":
        return pui.in_background(_load_options, window, h, pid, config, current)
    if kind == "boolean":
        choices = [("On", True), ("Off", False), ("Reset to default ({})".format(ui.show_value(config.get("defaultValue"))), None)]

        def done(i):
            if i >= 0:
                _store(window, h, pid, config, choices[i][1])

        selected = 0 if current is True else 1
        return pui.quick_panel(window, [(c, label) for c, _ in choices], done, selected=selected)
    ask_text(window, h, pid, config, "" if current is None else str(current))


def ask_text(window, h, pid, config, text):
    """Input panel for a ``string`` / ``number`` entry. An empty number
    resets it to its default; an invalid one opens the panel again."""
    label = config.get("label") or config["id"]

    def done(typed):
        if config["type"] == "number":
            if not typed.strip():
                return _store(window, h, pid, config, None)
            try:
                value = ui.parse_number(typed)
            except ValueError as e:
                sublime.status_message("{}{}: {}".format(pui.LOG_PREFIX, label, e))
                return ask_text(window, h, pid, config, typed)
        else:
            value = typed
        _store(window, h, pid, config, value)

    hint = " (a number; empty: the default)" if config["type"] == "number" else ""
    window.show_input_panel("{}{}:".format(label, hint), text, done, None, None)


def _load_options(window, h, pid, config, current):
    try:
        options = h.options(pid, config["id"])
    except Exception as e:
        return pui.on_main(pui.show_output, window, ui.error_text(e), "{} \u00b7 options of {}".format(pid, config["id"]))
    items = ui.option_items(options, config.get("defaultValue"))

    def done(i):
        if i >= 0:
            value = items[i]["value"]
            # "Auto" stores nothing: the default applies (and follows the manifest).
            _store(window, h, pid, config, None if i == 0 else value)

    selected = 0
    for i, o in enumerate(items):
        if i > 0 and o["value"] == current:
            selected = i
    rows = [(o["label"], ui.show_value(o["value"])) for o in items]
    pui.on_main(pui.quick_panel, window, rows, done, selected)


# --------------------------------------------------------------------------
# lifecycle and commands


def plugin_loaded():
    with _lock:
        _seen["mirror"] = _mirror()
    s = pui.settings()
    if hasattr(s, "add_on_change"):
        s.add_on_change("qwen_plugins_config", _settings_changed)


def plugin_unloaded():
    s = pui.settings()
    if hasattr(s, "clear_on_change"):
        s.clear_on_change("qwen_plugins_config")


class QwenPluginsConfigureCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Configure… (``plugin``: only that plugin)."""

    def run(self, plugin=None):
        configure(self.window, plugin)
