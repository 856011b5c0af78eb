"""The reference "Add File/Selection to Prompt" types into the qwen terminal.

Qwen Code 0.24.4 reads ``@<path>`` in a prompt: a path relative to its
working folder (or absolute, inside it) whose content it adds to the request.
The reference ends at whitespace or at one of ``, ; ! ? ( ) [ ] { }``, and
Qwen Code un-escapes a backslash before any character, so every character of
``SPECIAL`` in the path is typed with a backslash before it (POSIX). On
Windows Qwen Code does not un-escape: a path with one of those characters
cannot be referenced there, and :func:`reference` says so instead of typing
a broken one.

There is no line-range syntax in 0.24.4 (the path goes to ``fs.realpath``),
so a range is typed as words after the reference: ``@src/app.py (lines
10-20) ``. The model gets the whole file plus the words saying which lines.
The text always ends with a space and never with Enter: the user goes on
typing the prompt.
"""

import ntpath
import posixpath

#: Characters typed with a backslash before them (Qwen Code's escapePath).
SPECIAL = " \t()[]{};|*?$`'\"#&<>!~,"


class ReferenceError_(ValueError):
    """The file cannot be referenced (the message says why)."""


def escape_path(path, windows=False):
    """``path`` with every character of :data:`SPECIAL` escaped (POSIX).
    On Windows (``windows``) a path holding one raises :class:`ReferenceError_`."""
    if "\n" in path or "\r" in path:
        raise ReferenceError_("the path {!r} has a line break: Qwen Code cannot reference it".format(path))
    if windows:
        bad = sorted(set(ch for ch in path if ch in SPECIAL))
        if bad:
            raise ReferenceError_(
                "on Windows Qwen Code cannot reference a path with {} in it ({}): "
                "rename the file, or paste its text".format(" ".join(repr(c) for c in bad), path))
        return path
    return "".join("\\" + ch if ch in SPECIAL else ch for ch in path)


def relative_path(path, cwd, windows=False):
    """``path`` relative to ``cwd`` ('/' separators), or raises
    :class:`ReferenceError_` when it is not inside ``cwd``."""
    mod = ntpath if windows else posixpath
    path, cwd = mod.normpath(path), mod.normpath(cwd)
    if windows:
        same = mod.normcase(path) == mod.normcase(cwd)
        inside = mod.normcase(path).startswith(mod.normcase(cwd).rstrip("\\") + "\\")
    else:
        same = path == cwd
        inside = path.startswith(cwd.rstrip("/") + "/")
    if same or not inside:
        raise ReferenceError_(
            "{} is not inside {}, the folder qwen runs in: Qwen Code only reads files of its workspace".format(
                path, cwd))
    rel = mod.relpath(path, cwd)
    return rel.replace("\\", "/") if windows else rel


def reference(path, cwd, first_line=None, last_line=None, windows=False):
    """The text to type: ``@<escaped relative path>`` plus `` (line N)`` or
    `` (lines A-B)`` (1-based) when lines are given, and a trailing space."""
    text = "@" + escape_path(relative_path(path, cwd, windows), windows)
    if first_line is not None:
        if last_line is None or last_line == first_line:
            text += " (line {})".format(first_line)
        else:
            a, b = sorted((first_line, last_line))
            text += " (lines {}-{})".format(a, b)
    return text + " "


def selection_lines(rowcols):
    """``[(first_row, last_row)]`` (0-based, from each non-empty region's
    begin and end ``rowcol``; an end at column 0 of a later line does not
    count that line) -> ``(first, last)`` 1-based over all, or None."""
    first = last = None
    for (r1, _c1), (r2, c2) in rowcols:
        if r2 > r1 and c2 == 0:
            r2 -= 1
        first = r1 if first is None else min(first, r1)
        last = r2 if last is None else max(last, r2)
    if first is None:
        return None
    return first + 1, last + 1
