"""The process-wide plugin host of the package (``qwen_companion.PluginHost``).

One host per Sublime Text process, next to the per-window companions: it runs
the desktop app's plugins of the plugins directory (setting ``plugins_dir``;
default the library's ``$QWEN_HOME/companion/plugins``, else
``~/.qwen/companion/plugins``), their MCP server (``mcp_start``: the plugin
tools as the MCP tools of ``qwen-companion-plugins``), and the
``mcpServers`` entry of the user's ``~/.qwen/settings.json`` that makes every
``qwen`` reach that server (``register_mcp("user", ...)``; the library leaves
the file untouched when the same entry is already there).

The entry starts the ``qc-mcp-bridge`` executable, which holds no port and no
token: it finds the running host through the lock file the MCP server writes
(``<qwen home>/companion/plugins-mcp/<pid>.lock``), so the entry stays valid
across restarts. The bridge built next to the library is copied to
``<qwen home>/companion/bin/qc-mcp-bridge`` (``.exe`` on Windows; a place that survives package
updates) unless the setting ``mcp_bridge_path`` names one.

Errors (no library, a bad plugins directory, a settings file Qwen Code could
not read...) are logged to the console and shown once in the status bar;
the host then stays off (``get`` returns None) until :meth:`reset`.
"""

import os
import shutil
import threading

import sublime

from . import binding as _binding_mod


def bridge_name(qc):
    """``qc-mcp-bridge`` (``qc-mcp-bridge.exe`` on Windows), from the binding ``qc``."""
    return qc.platforms.bridge_file_name()


def _same_file(a, b):
    """Same size and modification time (the copy keeps the source's)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns


def install_bridge(source, dest, windows=None):
    """Copies the bridge ``source`` to ``dest`` (atomically, mode 0700: user-only, with
    the source's modification time; its folder 0700) unless ``dest`` already
    has the source's size and modification time. Returns ``dest``.

    Windows cannot overwrite an executable that a running ``qwen`` has
    started, but it can rename it: there (``windows``, default: this OS) the
    old bridge is moved aside to ``<dest>.old-<pid>`` first and removed when
    it no longer runs (now or at a later install)."""
    if windows is None:
        windows = os.name == "nt"
    if os.path.isfile(dest) and _same_file(source, dest):
        return dest
    folder = os.path.dirname(dest)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
    _remove_old_bridges(dest)
    tmp = "{}.tmp-{}".format(dest, os.getpid())
    try:
        shutil.copyfile(source, tmp)
        shutil.copystat(source, tmp)
        os.chmod(tmp, 0o700)  # user-only, as every editor installs it
        try:
            os.replace(tmp, dest)
        except PermissionError:
            if not windows or not os.path.exists(dest):
                raise
            os.replace(dest, "{}.old-{}".format(dest, os.getpid()))
            os.replace(tmp, dest)
            _remove_old_bridges(dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def _remove_old_bridges(dest):
    """Removes the ``<dest>.old-*`` copies that no running process holds."""
    folder, base = os.path.split(dest)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(base + ".old-"):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass  # still running (Windows): a later install removes it


class PluginHostManager(object):
    """Starts, holds and stops the one plugin host (see the module docs).

    ``binding()`` returns the ``qwen_companion`` module, ``settings()`` the
    package settings, ``log(message)`` prints to the console.
    """

    def __init__(self, binding, settings, log, library=None):
        self._binding = binding
        self._settings = settings
        self._log = log
        # library(settings) -> the native library's path (None: the binding's search)
        self._library = library or (lambda s: s.get("library_path") or None)
        self._lock = threading.RLock()
        self.host = None
        self.mcp = None  # mcp_info() of the running MCP server
        self.registration = None  # the outcome of register_mcp
        self.error = None  # the last error message (status indicator)
        self.workspace_paths = []
        self._failed = False  # the host could not start: no retry until reset()
        self._shown = set()  # error messages already shown in the status bar
        self._capabilities = {}  # name -> handler(request), applied to every host
        self._listeners = []  # fn(event) for the host's events

    # -- what the package's modules use ------------------------------------

    def get(self, create=True, folders=()):
        """The running host, started first when ``create`` (None when the
        setting ``plugins_enabled`` is false or it cannot start)."""
        with self._lock:
            if self.host is not None and not self.host.closed:
                return self.host
            self.host = None
            if not create or self._failed or not self._settings().get("plugins_enabled", True):
                return None
            try:
                self.host = self._start(list(folders))
            except _binding_mod.MissingLibraryError as e:  # the companions say the same: once
                self._failed = True
                if str(e) in self._shown:
                    self.error = str(e)
                else:
                    self.fail(str(e))
                return None
            except Exception as e:
                self._failed = True
                self.fail("cannot start the plugin host: {}".format(e))
                return None
            return self.host

    def set_capability(self, name, handler):
        """Offers capability ``name`` to plugins, answered by ``handler(request)``
        on the library thread (see ``PluginHost.set_capability``); it replaces
        the package's default (``show_notification``) and survives restarts."""
        with self._lock:
            self._capabilities[name] = handler
            host = self.host
        if host is not None and not host.closed:
            host.set_capability(name, handler)

    def add_listener(self, fn):
        """``fn(event)`` gets every event of the host (library thread)."""
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn):
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def terminal_env(self):
        """The variables a terminal needs for the plugin MCP server (the
        library gives none today: the bridge finds the server by its lock file)."""
        with self._lock:
            mcp = self.mcp
        return dict((mcp or {}).get("env") or {})

    def stop(self):
        with self._lock:
            host, self.host, self.mcp = self.host, None, None
        if host is not None:
            try:
                host.close()  # stops its MCP server (lock file removed) and every plugin
            except Exception as e:
                self._log("closing the plugin host failed: {}".format(e))

    def reset(self):
        """Stops the host and forgets a failure: the next ``get`` starts anew."""
        self.stop()
        with self._lock:
            self._failed = False
            self.error = None
            self._shown.clear()

    def fail(self, message):
        """Logs ``message``; shows it in the status bar once per process."""
        self._log(message)
        with self._lock:
            self.error = message
            first = message not in self._shown
            self._shown.add(message)
        if first:
            sublime.set_timeout(lambda: sublime.status_message("Qwen Companion: " + message), 0)

    # -- starting -----------------------------------------------------------

    def _start(self, folders):
        qc = self._binding()
        s = self._settings()
        kwargs = {"on_event": self._on_event, "log": self._on_log, "log_level": max(1, min(5, int(s.get("log_level", 2))))}
        plugins_dir = s.get("plugins_dir")
        if plugins_dir:
            kwargs["plugins_dir"] = os.path.expanduser(plugins_dir)
        if s.get("node_path"):
            kwargs["node"] = os.path.expanduser(s.get("node_path"))
        if folders:
            kwargs["workspace_root"] = folders[0]
        library = self._library(s)
        host = qc.PluginHost(library=library, **kwargs)
        try:
            with self._lock:
                capabilities = dict(self._capabilities)
            capabilities.setdefault("show_notification", self._show_notification)
            for name, handler in capabilities.items():
                host.set_capability(name, handler)
            self.workspace_paths = folders
            self.mcp = None
            if s.get("plugins_mcp", True):
                try:
                    self.mcp = host.mcp_start({"workspacePaths": folders} if folders else None)
                except qc.CompanionError as e:
                    self.fail("the plugin MCP server did not start: {}".format(e))
            if self.mcp is not None and s.get("register_mcp", True):
                self._register(qc, library, s)
        except BaseException:
            host.close()
            raise
        self._log("plugin host on {} (MCP server {})".format(
            host.plugins_dir, self.mcp["url"] if self.mcp else "off"))
        return host

    def bridge_path(self, qc, library, s):
        """The ``qc-mcp-bridge`` the settings entry starts."""
        configured = s.get("mcp_bridge_path")
        if configured:
            return os.path.abspath(os.path.expanduser(configured))
        name = bridge_name(qc)
        built = os.path.join(os.path.dirname(qc.load_library(library).path), name)
        if not os.path.isfile(built):
            raise OSError("no {} next to the library {} (set mcp_bridge_path)".format(
                name, qc.load_library(library).path))
        # <qwen home>/companion/plugins-mcp/<pid>.lock -> <qwen home>/companion/bin
        companion_dir = os.path.dirname(os.path.dirname(self.mcp["lockFile"]))
        return install_bridge(built, os.path.join(companion_dir, "bin", name))

    def _register(self, qc, library, s):
        try:
            bridge = self.bridge_path(qc, library, s)
            self.registration = qc.register_mcp(
                "user", bridge=bridge, always_load_tools=bool(s.get("mcp_always_load_tools", False)), library=library)
        except (qc.CompanionError, OSError) as e:
            self.fail("Qwen Code settings not updated: {}".format(e))
            return
        if self.registration.get("change") != "unchanged":
            self._log("{} the {} server in {}".format(
                self.registration.get("change"), self.registration.get("serverName"),
                self.registration.get("settings")))

    # -- library thread -----------------------------------------------------

    def _on_log(self, level, message):
        if level <= int(self._settings().get("log_level", 2)):
            self._log("plugins: " + message)

    def _on_event(self, event):
        if event.get("type") == "plugin_disabled":
            self.fail("plugin {} disabled: {}".format(event.get("plugin"), event.get("reason")))
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(event)
            except Exception as e:
                self._log("a plugin host listener failed: {}".format(e))

    def _show_notification(self, request):
        """The default ``show_notification``: a popup in the active view and
        the status bar (the plugin's ``title`` and ``body``)."""
        params = request.get("params") or {}
        title = str(params.get("title") or request.get("plugin") or "")
        body = str(params.get("body") or "")
        sublime.set_timeout(lambda: show_notification(title, body), 0)
        return {"shown": True}


def _escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notification_html(title, body):
    lines = "<br>".join(_escape(line) for line in body.split("\n"))
    return "<b>{}</b>{}".format(_escape(title), "<br>" + lines if body else "")


def show_notification(title, body):
    """Main thread: status bar plus a popup on the active view, if any."""
    sublime.status_message("{}: {}".format(title, body.replace("\n", " ")) if body else title)
    window = sublime.active_window()
    view = window.active_view() if window is not None else None
    if view is not None and hasattr(view, "show_popup"):
        view.show_popup(notification_html(title, body), max_width=640)
