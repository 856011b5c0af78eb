"""Small helpers on Sublime Text views and windows, shared by the package's
modules (``plugin.py`` re-exports them)."""

import os

import sublime

IS_DIFF = "qwen_companion_is_diff"  # view setting of a proposal view; true: key bindings' context

#: Selected text read per caret move is capped a little above what Qwen Code
#: keeps (16384 UTF-16 units), so a huge selection is never copied whole; the
#: library still sees it is too long and marks it "... [TRUNCATED]".
MAX_SELECTION_CHARS = 16400


def file_path(view):
    """The path of a view backed by a regular file on disk, else None."""
    if view is None or not view.is_valid():
        return None
    if view.settings().get(IS_DIFF):
        return None
    name = view.file_name()
    if name and os.path.isfile(name):
        return name
    return None


def selected_text(view, regions):
    """The selected text of ``regions`` (joined by newlines), capped."""
    parts = []
    left = MAX_SELECTION_CHARS
    for r in regions:
        if r.empty():
            continue
        if left <= 0:
            break
        end = min(r.end(), r.begin() + left)
        parts.append(view.substr(sublime.Region(r.begin(), end)))
        left -= end - r.begin() + 1
    return "\n".join(parts)


def window_by_id(window_id):
    for w in sublime.windows():
        if w.id() == window_id:
            return w
    return None


def view_text(view):
    return view.substr(sublime.Region(0, view.size()))


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return ""


def window_views(window):
    """Every view of ``window``, the transient (preview) one included."""
    try:
        return window.views(include_transient=True)  # Sublime Text 4081+
    except TypeError:
        return window.views()


def close_view(view):
    if view is None or not view.is_valid():
        return
    view.set_scratch(True)  # never ask to save a proposal
    if hasattr(view, "close"):
        view.close()
    else:  # Sublime Text 3
        window = view.window()
        if window is not None:
            window.focus_view(view)
            window.run_command("close_file")


def discard_diff_view(view):
    """Closes a diff view that answers nothing (any more)."""
    if view is None or not view.is_valid():
        return
    view.settings().set(IS_DIFF, False)  # closing it is not a diffClosed
    close_view(view)
