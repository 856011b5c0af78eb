"""Qwen Companion for Sublime Text: the plugin manager ("Qwen Plugins: Manage…").

A quick panel with "Install from a folder or .zip…" and every installed
plugin (name, version, enabled / disabled / broken, and the last error of a
plugin that crashed or that the crash-loop breaker disabled). Picking a
plugin offers: Enable / Disable, Configure…, Open a view…, Show the last
error, Uninstall (keeping or removing its data). Install asks for a path in
an input panel; a refused install shows every problem of the manifest
(with its JSON path) and opens the panel again with the path kept.
After every change the generated key bindings and palette entries are
rewritten.
"""

import os

import sublime
import sublime_plugin

from . import plugin_ui as pui
from . import qwen_ui_core as ui

INSTALL_LABEL = "Install from a folder or .zip\u2026"

#: The folder of the last install, offered in the next install's panel.
_last_folder = ["~/"]


def manage(window):
    h = pui.host()
    if h is None:
        return pui.no_host(window)
    pui.in_background(_manage, window, h)


def _manage(window, h):
    try:
        items = h.list()
    except Exception as e:
        return pui.on_main(pui.show_output, window, ui.install_error_text(e), "plugins")
    try:
        doc = h.views()
        with_views = set(v.get("plugin") for v in (doc.get("views") or []) + (doc.get("panels") or []))
    except Exception:  # the view server does not run yet: offer views for manifests that have them
        with_views = set(e.get("id") for e in items if ui.manifest_of(e).get("views") or ui.manifest_of(e).get("ui"))
    pui.on_main(show_manager, window, h, items, with_views)


def show_manager(window, h, items, with_views):
    rows = [(INSTALL_LABEL, "a plugin folder with manifest.json, or a .zip with manifest.json at its root")]
    rows += [ui.manager_row(e) for e in items]

    def done(i):
        if i == 0:
            ask_install(window, _last_folder[0])
        elif i > 0:
            show_actions(window, h, items[i - 1], items[i - 1].get("id") in with_views)

    pui.quick_panel(window, rows, done, placeholder="Qwen plugins")


def show_actions(window, h, entry, has_views):
    actions = ui.manager_actions(entry, has_views)
    caption, detail = ui.manager_row(entry)

    def done(i):
        if i >= 0:
            act(window, h, entry, actions[i][0])

    pui.quick_panel(window, [(label, caption) for _, label in actions], done, placeholder=detail)


def act(window, h, entry, action):
    pid = entry["id"]
    if action == "configure":
        return window.run_command("qwen_plugins_configure", {"plugin": pid})
    if action == "views":
        return window.run_command("qwen_plugins_open_view", {"plugin": pid})
    if action == "error":
        return pui.show_output(window, (ui.last_error_text(entry) or "no error recorded") + "\n", "{} \u00b7 last error".format(pid))
    if action in ("uninstall", "uninstall_data"):
        what = "Uninstall {}{}?".format(ui.plugin_name(entry), " and remove its data" if action == "uninstall_data" else "")
        if not sublime.ok_cancel_dialog(what, "Uninstall"):
            return
    pui.in_background(_change, window, h, pid, action)


def _change(window, h, pid, action):
    try:
        if action == "enable":
            h.enable(pid)
            done = "enabled"
        elif action == "disable":
            h.disable(pid)
            done = "disabled"
        else:
            h.uninstall(pid, remove_data=(action == "uninstall_data"))
            done = "uninstalled" + (" (data removed)" if action == "uninstall_data" else "")
    except Exception as e:
        return pui.on_main(pui.show_output, window, ui.install_error_text(e), "{} \u00b7 {}".format(pid, action))
    pui.refresh(h)
    pui.on_main(sublime.status_message, "{}{} {}".format(pui.LOG_PREFIX, pid, done))


def ask_install(window, text):
    def done(typed):
        try:
            src = ui.install_source(typed)
        except ValueError as e:
            sublime.status_message(pui.LOG_PREFIX + str(e))
            return ask_install(window, typed)
        install(window, src, typed)

    window.show_input_panel("Install a Qwen plugin (folder or .zip):", text, done, None, None)


def install(window, src, typed=None):
    h = pui.host()
    if h is None:
        return pui.no_host(window)
    pui.in_background(_install, window, h, src, typed if typed is not None else src)


def _install(window, h, src, typed):
    try:
        out = h.install(src)
    except Exception as e:
        pui.on_main(pui.show_output, window, ui.install_error_text(e), "install {}".format(src))
        return pui.on_main(ask_install, window, typed)
    _last_folder[0] = os.path.dirname(src.rstrip(os.sep)) + os.sep
    pui.refresh(h)
    verb = "updated" if out.get("replaced") else "installed"
    lines = ["{} {} {} ({})".format(verb, out.get("name") or out.get("id"), out.get("version") or "", out.get("id"))]
    for w in out.get("warnings") or []:
        lines.append("warning: {} {}".format(w.get("path") or "/", w.get("message") or "") if isinstance(w, dict) else "warning: " + str(w))
    pui.on_main(pui.show_output, window, "\n".join(lines) + "\n", "install {}".format(src))
    pui.on_main(sublime.status_message, "{}{} {}".format(pui.LOG_PREFIX, out.get("id"), verb))


class QwenPluginsManageCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Manage… (install, enable/disable, uninstall, last error)."""

    def run(self):
        manage(self.window)


class QwenPluginsInstallCommand(sublime_plugin.WindowCommand):
    """Qwen Plugins: Install from Folder or .zip… (``path``: no prompt)."""

    def run(self, path=None):
        if path is None:
            return ask_install(self.window, _last_folder[0])
        try:
            src = ui.install_source(path)
        except ValueError as e:
            return pui.show_output(self.window, str(e) + "\n", "install")
        install(self.window, src)


class QwenPluginsInstallPathsCommand(sublime_plugin.WindowCommand):
    """Side bar: installs the plugin folder or .zip clicked."""

    def run(self, paths=()):
        if len(paths) == 1:
            self.window.run_command("qwen_plugins_install", {"path": paths[0]})

    def is_visible(self, paths=()):
        if len(paths) != 1:
            return False
        p = paths[0]
        return os.path.isfile(os.path.join(p, "manifest.json")) or (os.path.isfile(p) and p.lower().endswith(".zip"))
