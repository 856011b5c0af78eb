"""The side-by-side proposal: the original file left, Qwen Code's proposal right.

As the Claude Code and Gemini companions show a proposal in VS Code (a diff
editor, original left, proposal right), a window with one group is split in
two columns while a proposal is shown: the file (as it is on disk) in the
left group, the "Proposed:" view in the right one. When the window's last
proposal is decided or closed, the layout it had before comes back. A window
the user already split keeps its layout: the proposal goes to the group
right of the original (or the first group other than the original's).
"""

#: Two columns of equal width.
TWO_COLUMNS = {"cols": [0.0, 0.5, 1.0], "rows": [0.0, 1.0], "cells": [[0, 0, 1, 1], [1, 0, 2, 1]]}


class SideBySide(object):
    """The layout state of one window (main thread only)."""

    def __init__(self):
        self.saved = None  # the layout before we split the window, while we hold it split

    def show(self, window, proposal, original=None):
        """Puts ``proposal`` beside ``original`` (a view of the file, or
        None: the proposal goes right of the active group)."""
        if window.num_groups() == 1:
            if self.saved is None:
                self.saved = window.get_layout()
            window.set_layout(TWO_COLUMNS)
        left = 0
        if original is not None and original.window() is window:
            group, _ = window.get_view_index(original)
            if self.saved is not None and group != 0:
                window.set_view_index(original, 0, len(window.views_in_group(0)))
                group = 0
            left = group
        target = (left + 1) % window.num_groups()
        group, _ = window.get_view_index(proposal)
        if group != target:
            window.set_view_index(proposal, target, len(window.views_in_group(target)))
        if original is not None and original.window() is window:
            window.focus_view(original)
        window.focus_view(proposal)

    def restore(self, window):
        """The layout from before :meth:`show` split the window (if it did)."""
        saved, self.saved = self.saved, None
        if saved is not None and window is not None:
            window.set_layout(saved)
        return saved is not None
