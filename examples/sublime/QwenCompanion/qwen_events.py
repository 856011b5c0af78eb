"""The companion's editor events: what Sublime Text reports about windows,
views, selections and commands, handed to the window's companion
(``plugin.py``, imported as ``core``).

As sublimelsp/LSP does, the synchronous handlers (the UI thread) only read
view settings and hand the work over; library calls, buffer reads
(``view.substr``) and companion start-ups run in the ``*_async`` handlers
(or ``set_timeout_async``), on Sublime Text's async thread, so typing and
moving the caret never wait for them.
"""

import sublime
import sublime_plugin

from . import plugin as core


class QwenCompanionEventListener(sublime_plugin.EventListener):
    def on_new_window_async(self, window):
        core.companion_for(window)

    def on_pre_close_window(self, window):
        core.window_closing(window.id())

    def on_load_project_async(self, window):
        wc = core.companion_for(window, create=False)
        if wc is not None:
            core.safely(wc.refresh_roots, window)

    def on_post_window_command(self, window, command_name, args):
        """(Sublime Text has no async variant of this one.)"""
        wc = core.companion_for(window, create=False)
        if wc is None:
            return

        def work():
            core.safely(wc.refresh_roots, window)  # add/remove folder, open project...
            if command_name in ("rename_path", "rename_file", "save_as", "move_path"):
                for view in window.views():
                    core.safely(wc.sync_view, view)

        sublime.set_timeout_async(work, 0)

    def on_window_command(self, window, command_name, args):
        """Gives every Terminus terminal of the window the companion's env
        (kept by the companion: no library call on the UI thread)."""
        if command_name != "terminus_open" or not core.settings().get("terminus_inject_env", True):
            return None
        wc = core.companion_for(window, create=False)
        if wc is None:
            return None
        args = dict(args or {})
        env = dict(args.get("env") or {})
        if "QWEN_CODE_IDE_SERVER_PORT" in env or "GEMINI_CLI_IDE_SERVER_PORT" in env:
            return None  # already set (by us or by the user)
        env.update(wc.terminal_env())
        args["env"] = env
        return (command_name, args)

    def on_activated_async(self, view):
        core.safely(core.terminal_focused, view)  # an agent terminal: Add to Prompt types there now
        window = view.window()
        wc = core.companion_for(window)
        if wc is None:
            return
        core.safely(wc.refresh_roots, window)
        core.safely(wc.view_activated, view)
        wc.update_status()

    def on_load_async(self, view):
        wc = core.companion_for(view.window())
        if wc is not None:
            core.safely(wc.sync_view, view)

    def on_post_save_async(self, view):
        wc = core.companion_for(view.window())
        if wc is None:
            return
        core.safely(wc.sync_view, view)  # first save of a new file, or "save as"
        window = view.window()
        if window is not None and window.active_view() is not None and window.active_view().id() == view.id():
            core.safely(wc.view_activated, view)

    def on_selection_modified_async(self, view):
        if core._is_diff(view):
            return
        wc = core.companion_for(view.window(), create=False)
        if wc is not None:
            core.safely(wc.selection_changed, view)

    def on_pre_move(self, view):
        """Sublime Text 4: a tab leaves its window (dragged to another one)."""
        if core._is_diff(view):
            return  # owned by DIFF_WINDOW's companion wherever it is
        wc = core.companion_for(view.window(), create=False)
        if wc is not None:
            view_id = view.id()
            sublime.set_timeout_async(lambda: core.safely(wc.view_closed, view_id), 0)

    def on_post_move_async(self, view):
        if core._is_diff(view):
            return
        window = view.window()
        wc = core.companion_for(window)
        if wc is None:
            return
        core.safely(wc.sync_view, view)
        if window.active_view() is not None and window.active_view().id() == view.id():
            core.safely(wc.view_activated, view)

    def on_pre_close(self, view):
        wc = core.companion_for_view(view)
        if wc is None:
            return
        if view.settings().get(core.DIFF_WINDOW) is not None:  # a proposal view: the layout may come back
            sublime.set_timeout(lambda: core.safely(wc.restore_layout_if_done), 0)
        if core._is_diff(view):
            core.safely(wc.diff_view_closing, view)
            return
        view_id = view.id()
        sublime.set_timeout_async(lambda: core.safely(wc.view_closed, view_id), 0)
