"""The editor-independent logic of the plugin UI (no ``sublime`` import).

Everything here works on the plugin host's documents as plain dicts:

- list entries (``PluginHost.list()``): ``{"id", "name", "version",
  "enabled", "tools", "manifest", "lastError"}``; ``manifest`` is the
  installed, validated ``manifest.json`` as the plugin author wrote it and
  ``lastError`` is ``null`` or ``{"message", "at"}`` (unix ms);
- call results: ``{"content": [...], "details"?: ...}``;
- the view server's document: ``{"url", "views": [...], "panels": [...]}``.

The Sublime Text glue (``plugin_ui.py``, ``plugin_manager.py``) turns what
these functions return into quick panels, output panels and files. Runs on
Python 3.8 (Sublime Text's plugin host).
"""

import json
import math
import mimetypes
import os
import time

# --------------------------------------------------------------------------
# manifests and contributions


def manifest_of(entry):
    """The manifest of a list entry (``{}`` for a broken plugin)."""
    m = entry.get("manifest") if isinstance(entry, dict) else None
    return m if isinstance(m, dict) else {}


def plugin_name(entry):
    return str(manifest_of(entry).get("name") or entry.get("name") or entry.get("id") or "?")


def tool_spec(manifest, name):
    """The ``tools[]`` entry ``name`` of ``manifest`` (or None)."""
    for t in manifest.get("tools") or []:
        if isinstance(t, dict) and t.get("name") == name:
            return t
    return None


def usable(entry):
    """An enabled plugin whose manifest loaded."""
    return bool(entry.get("enabled")) and not entry.get("error") and bool(manifest_of(entry))


class Contribution(object):
    """One thing the user can run: a ``commands`` entry, a ``session/context``
    menu entry or the ``sessionAction`` (``kind`` ``command`` / ``menu`` /
    ``session``)."""

    __slots__ = ("plugin", "plugin_name", "tool", "title", "kind", "visible_tool", "key")

    def __init__(self, plugin, plugin_name, tool, title, kind, visible_tool=None, key=None):
        self.plugin = plugin
        self.plugin_name = plugin_name
        self.tool = tool
        self.title = title
        self.kind = kind
        self.visible_tool = visible_tool
        self.key = key  # the Sublime key of its keybinding, when it has one

    def caption(self):
        return "{}: {}".format(self.plugin_name, self.title)

    def detail(self):
        what = {"command": "command", "menu": "session menu", "session": "session action"}[self.kind]
        text = "{} · {} · {}".format(what, self.plugin, self.tool)
        if self.key:
            text += " · " + self.key
        return text

    def args(self):
        return {"plugin": self.plugin, "tool": self.tool}

    def __repr__(self):
        return "Contribution({!r}, {!r}, {!r}, {!r})".format(self.plugin, self.tool, self.kind, self.title)


def collect_contributions(entries):
    """Every runnable contribution of the enabled plugins, in list order:
    their ``commands``, ``menus["session/context"]`` and ``sessionAction``.
    Entries naming a tool the manifest does not declare are skipped. The
    session action carries its ``visibleTool`` (the caller asks
    ``PluginHost.visible`` before offering it)."""
    out = []
    for entry in entries:
        if not usable(entry):
            continue
        m = manifest_of(entry)
        pid = entry["id"]
        name = plugin_name(entry)

        def add(tool, title, kind, visible_tool=None):
            spec = tool_spec(m, tool)
            if spec is None:
                return
            title = title or spec.get("summary") or tool
            out.append(Contribution(pid, name, tool, str(title), kind, visible_tool))

        for c in m.get("commands") or []:
            if isinstance(c, dict):
                add(c.get("tool"), c.get("title"), "command")
        menus = m.get("menus") if isinstance(m.get("menus"), dict) else {}
        for c in menus.get("session/context") or []:
            if isinstance(c, dict):
                add(c.get("tool"), c.get("title"), "menu")
        sa = m.get("sessionAction")
        if isinstance(sa, dict):
            add(sa.get("tool"), sa.get("tooltip"), "session", sa.get("visibleTool"))
    return out


def palette_entries(contributions):
    """The generated Command Palette entries (``.sublime-commands``): one per
    ``commands`` entry (menus and the session action stay in the quick panel,
    where their visibility is checked)."""
    return [
        {"caption": "Qwen Plugin: " + c.caption(), "command": "qwen_plugin_run", "args": c.args()}
        for c in contributions
        if c.kind == "command"
    ]


# --------------------------------------------------------------------------
# keybindings

MODIFIER_ORDER = ("super", "ctrl", "alt", "shift")

_MODIFIERS = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "alt": "alt",
    "option": "alt",
    "opt": "alt",
    "shift": "shift",
    "cmd": "super",
    "command": "super",
    "meta": "super",
    "super": "super",
    "win": "super",
}
_PRIMARY = ("mod", "cmdorctrl", "commandorcontrol", "ctrlorcmd")

_NAMED_KEYS = {
    "enter": "enter",
    "return": "enter",
    "esc": "escape",
    "escape": "escape",
    "space": "space",
    "tab": "tab",
    "backspace": "backspace",
    "delete": "delete",
    "del": "delete",
    "insert": "insert",
    "ins": "insert",
    "home": "home",
    "end": "end",
    "pageup": "pageup",
    "page_up": "pageup",
    "pgup": "pageup",
    "pagedown": "pagedown",
    "page_down": "pagedown",
    "pgdn": "pagedown",
    "up": "up",
    "arrowup": "up",
    "down": "down",
    "arrowdown": "down",
    "left": "left",
    "arrowleft": "left",
    "right": "right",
    "arrowright": "right",
    "plus": "+",
    "minus": "-",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "quote": "'",
    "backquote": "`",
    "equal": "=",
    "equals": "=",
    "bracketleft": "[",
    "bracketright": "]",
}
_PUNCTUATION = set(",./;'[]\\-=`+")


class KeyError_(ValueError):
    """A keybinding that cannot be expressed in Sublime Text's syntax."""


def primary_modifier(platform):
    """``mod`` is ``super`` (cmd) on macOS and ``ctrl`` elsewhere."""
    return "super" if platform == "osx" else "ctrl"


def _split_plus(chord):
    """Splits ``ctrl+shift++`` into ``["ctrl", "shift", "+"]``."""
    parts = chord.split("+")
    out = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if p == "" and i + 1 < len(parts) and parts[i + 1] == "" and i + 2 == len(parts):
            out.append("+")  # a trailing "++": the plus key itself
            break
        out.append(p)
        i += 1
    return out


def map_chord(chord, platform):
    """One chord (``mod+shift+d``) in Sublime's syntax for ``platform``
    (``osx`` / ``linux`` / ``windows``): lower case, modifiers in Sublime's
    order (``super+ctrl+alt+shift``, as its default keymaps write them), key names Sublime knows. Raises
    :class:`KeyError_` with the reason."""
    parts = [p.strip().lower() for p in _split_plus(chord.strip())]
    if not parts or any(p == "" for p in parts):
        raise KeyError_("{!r} is not a key combination".format(chord))
    *mods, key = parts
    seen = set()
    for m in mods:
        if m in _PRIMARY:
            seen.add(primary_modifier(platform))
        elif m in _MODIFIERS:
            seen.add(_MODIFIERS[m])
        else:
            raise KeyError_("{!r}: unknown modifier {!r}".format(chord, m))
    if key in _MODIFIERS or key in _PRIMARY:
        raise KeyError_("{!r} has no key, only modifiers".format(chord))
    if len(key) == 1 and (key.isalnum() or key in _PUNCTUATION):
        name = key
    elif key in _NAMED_KEYS:
        name = _NAMED_KEYS[key]
    elif key.startswith("f") and key[1:].isdigit() and 1 <= int(key[1:]) <= 20:
        name = key
    else:
        raise KeyError_("{!r}: unknown key {!r}".format(chord, key))
    return "+".join([m for m in MODIFIER_ORDER if m in seen] + [name])


def map_key(key, platform):
    """A manifest ``key`` (chords separated by spaces: ``mod+k mod+s``) as
    Sublime's ``keys`` list."""
    if not isinstance(key, str) or not key.strip():
        raise KeyError_("the key is empty")
    return [map_chord(c, platform) for c in key.split()]


# Sublime Text's own default bindings that plugin keybindings most often
# hit (a generated binding overrides them, since packages load after the
# Default package). Known, not exhaustive.
_DEFAULTS_CTRL = {
    "ctrl+shift+d": "Duplicate Line",
    "ctrl+shift+p": "Command Palette",
    "ctrl+p": "Goto Anything",
    "ctrl+shift+k": "Delete Line",
    "ctrl+d": "Quick Add Next",
    "ctrl+l": "Expand Selection to Line",
    "ctrl+shift+f": "Find in Files",
    "ctrl+f": "Find",
    "ctrl+h": "Replace",
    "ctrl+g": "Goto Line",
    "ctrl+r": "Goto Symbol",
    "ctrl+shift+r": "Goto Symbol in Project",
    "ctrl+s": "Save",
    "ctrl+shift+s": "Save As",
    "ctrl+n": "New File",
    "ctrl+shift+n": "New Window",
    "ctrl+w": "Close",
    "ctrl+shift+w": "Close Window",
    "ctrl+o": "Open File",
    "ctrl+z": "Undo",
    "ctrl+y": "Redo",
    "ctrl+shift+z": "Redo",
    "ctrl+a": "Select All",
    "ctrl+c": "Copy",
    "ctrl+x": "Cut",
    "ctrl+v": "Paste",
    "ctrl+shift+v": "Paste and Indent",
    "ctrl+/": "Toggle Comment",
    "ctrl+shift+/": "Toggle Block Comment",
    "ctrl+b": "Build",
    "ctrl+shift+b": "Build With",
    "ctrl+`": "Show Console",
    "ctrl+shift+t": "Reopen Closed File",
    "ctrl+t": "Transpose",
    "ctrl+j": "Join Lines",
    "ctrl+shift+j": "Expand Selection to Indentation",
    "ctrl+m": "Jump to Matching Bracket",
    "ctrl+shift+m": "Expand Selection to Brackets",
    "ctrl+shift+a": "Expand Selection to Tag",
    "ctrl+shift+l": "Split into Lines",
    "ctrl+enter": "Insert Line After",
    "ctrl+shift+enter": "Insert Line Before",
    "ctrl+]": "Indent",
    "ctrl+[": "Unindent",
    "ctrl+i": "Incremental Find",
    "ctrl+u": "Soft Undo",
    "ctrl+shift+u": "Soft Redo",
    "ctrl+q": "Record Macro",
    "ctrl+shift+q": "Playback Macro",
    "ctrl+k": "the ctrl+k chords",
    "ctrl+pageup": "Previous View",
    "ctrl+pagedown": "Next View",
    "ctrl+tab": "Next View in Stack",
    "f2": "Next Bookmark",
    "f3": "Find Next",
    "f9": "Sort Lines",
    "f11": "Toggle Full Screen",
    "f12": "Goto Definition",
}
_DEFAULTS_SUPER = {
    "super+shift+d": "Duplicate Line",
    "super+shift+p": "Command Palette",
    "super+p": "Goto Anything",
    "ctrl+shift+k": "Delete Line",
    "super+d": "Quick Add Next",
    "super+l": "Expand Selection to Line",
    "super+shift+f": "Find in Files",
    "super+f": "Find",
    "super+alt+f": "Replace",
    "ctrl+g": "Goto Line",
    "super+r": "Goto Symbol",
    "super+shift+r": "Goto Symbol in Project",
    "super+s": "Save",
    "super+shift+s": "Save As",
    "super+n": "New File",
    "super+shift+n": "New Window",
    "super+w": "Close",
    "super+shift+w": "Close Window",
    "super+o": "Open File",
    "super+z": "Undo",
    "super+shift+z": "Redo",
    "super+y": "Redo or Repeat",
    "super+a": "Select All",
    "super+c": "Copy",
    "super+x": "Cut",
    "super+v": "Paste",
    "super+shift+v": "Paste and Indent",
    "super+/": "Toggle Comment",
    "super+alt+/": "Toggle Block Comment",
    "super+b": "Build",
    "super+shift+b": "Build With",
    "ctrl+`": "Show Console",
    "super+shift+t": "Reopen Closed File",
    "super+j": "Join Lines",
    "super+shift+j": "Expand Selection to Indentation",
    "ctrl+m": "Jump to Matching Bracket",
    "ctrl+shift+m": "Expand Selection to Brackets",
    "super+shift+a": "Expand Selection to Tag",
    "super+shift+l": "Split into Lines",
    "super+enter": "Insert Line After",
    "super+shift+enter": "Insert Line Before",
    "super+]": "Indent",
    "super+[": "Unindent",
    "super+e": "Use Selection for Find",
    "super+i": "Incremental Find",
    "super+u": "Soft Undo",
    "super+shift+u": "Soft Redo",
    "super+q": "Quit",
    "super+h": "Hide Sublime Text",
    "super+m": "Minimize",
    "super+g": "Find Next",
    "super+shift+g": "Find Previous",
    "super+k": "the super+k chords",
    "f2": "Next Bookmark",
    "f5": "Sort Lines",
    "f12": "Goto Definition",
}


def sublime_default(keys, platform):
    """The Sublime Text default command that ``keys`` (a mapped list)
    overrides, or None. A sequence (``ctrl+alt+k ctrl+alt+s``) takes its
    first chord away from a single-chord default too."""
    table = _DEFAULTS_SUPER if platform == "osx" else _DEFAULTS_CTRL
    if len(keys) == 1:
        return table.get(keys[0])
    first = table.get(keys[0])
    if first is None or first.endswith(" chords"):
        return None  # a chord prefix of Sublime's own: sequences coexist
    return first


def keybindings(entries, platform, enabled=True, overrides=None):
    """The generated key bindings and the problems found.

    Returns ``(bindings, notes)``: ``bindings`` are ``.sublime-keymap``
    entries running ``qwen_plugin_run``; ``notes`` are human sentences (an
    unknown command, a key Sublime cannot express, two plugins on one key,
    a Sublime default overridden). ``overrides`` maps ``"<plugin>/<command>"``
    to another manifest-style key, or to ``None`` / ``""`` to drop it.
    With ``enabled`` false nothing is generated."""
    bindings = []
    notes = []
    if not enabled:
        return bindings, notes
    overrides = overrides or {}
    owner = {}  # mapped keys (tuple) -> "plugin/command"
    for entry in entries:
        if not usable(entry):
            continue
        m = manifest_of(entry)
        pid = entry["id"]
        commands = [c.get("tool") for c in m.get("commands") or [] if isinstance(c, dict)]
        for kb in m.get("keybindings") or []:
            if not isinstance(kb, dict):
                continue
            command = kb.get("command")
            ref = "{}/{}".format(pid, command)
            if command not in commands or tool_spec(m, command) is None:
                notes.append("{}: keybinding for {!r}, which is not one of its commands: skipped".format(pid, command))
                continue
            key = kb.get("key")
            if ref in overrides:
                key = overrides[ref]
                if not key:
                    notes.append("{}: turned off by plugin_key_overrides".format(ref))
                    continue
            try:
                keys = map_key(key, platform)
            except KeyError_ as e:
                notes.append("{}: {}: skipped".format(ref, e))
                continue
            taken = owner.get(tuple(keys))
            if taken is not None:
                notes.append("{}: {} is already bound to {}: skipped".format(ref, " ".join(keys), taken))
                continue
            owner[tuple(keys)] = ref
            default = sublime_default(keys, platform)
            if default:
                notes.append("{}: {} overrides Sublime Text's {}".format(ref, " ".join(keys), default))
            bindings.append({"keys": keys, "command": "qwen_plugin_run", "args": {"plugin": pid, "tool": command}})
    return bindings, notes


def key_of(bindings, plugin, tool):
    """The key (``ctrl+shift+d``) bound to ``plugin``'s ``tool``, or None."""
    for b in bindings:
        if b["args"] == {"plugin": plugin, "tool": tool}:
            return " ".join(b["keys"])
    return None


def platform_file_name(platform):
    """The keymap file Sublime loads on ``platform`` only."""
    return "Default ({}).sublime-keymap".format({"osx": "OSX", "windows": "Windows"}.get(platform, "Linux"))


def generated_json(doc, notes=()):
    """A generated Sublime resource file: a comment header, then JSON."""
    head = "// Generated by Qwen Companion from the installed plugins' manifests.\n"
    head += "// Do not edit: it is rewritten whenever plugins change.\n"
    for n in notes:
        head += "// " + n.replace("\n", " ") + "\n"
    return head + json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------
# configuration

CONFIG_TYPES = ("select", "boolean", "string", "number")


def config_entries(entry):
    """The valid ``configuration`` entries of a list entry."""
    out = []
    for c in manifest_of(entry).get("configuration") or []:
        if isinstance(c, dict) and c.get("type") in CONFIG_TYPES and isinstance(c.get("id"), str):
            out.append(c)
    return out


def current_value(config_entry, values):
    """The user's value for the entry when it has the entry's type, else
    its ``defaultValue`` (what the host passes as ``context.config``)."""
    cid = config_entry["id"]
    if isinstance(values, dict) and cid in values and accepts(config_entry, values[cid]):
        return values[cid]
    return config_entry.get("defaultValue")


def accepts(config_entry, value):
    kind = config_entry.get("type")
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, str)


def show_value(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def option_items(options, default):
    """The options of a ``select`` entry as the host offers them: the
    host's ``Auto`` option (value = the entry's ``defaultValue``) first,
    then the plugin's options in their order, without another copy of the
    default value. ``options`` is what ``PluginHost.options`` returned
    (``[{"value", "label"}]``); malformed items are dropped."""
    out = [{"value": default, "label": "Auto"}]
    seen = {json.dumps(default)}
    for o in options or []:
        if not isinstance(o, dict) or "value" not in o:
            continue
        k = json.dumps(o["value"])
        if k in seen:
            continue
        seen.add(k)
        label = o.get("label")
        out.append({"value": o["value"], "label": str(label) if label not in (None, "") else str(o["value"])})
    return out


def parse_number(text):
    """A number typed by the user: an int when it is one, else a float;
    raises ValueError (with the reason) for anything else."""
    t = (text or "").strip()
    if not t:
        raise ValueError("enter a number")
    try:
        return int(t)
    except ValueError:
        pass
    try:
        v = float(t)
    except ValueError:
        raise ValueError("{!r} is not a number".format(t))
    if not math.isfinite(v):
        raise ValueError("{!r} is not a finite number".format(t))
    return v


# --------------------------------------------------------------------------
# results

STATUS_ICONS = {
    "completed": "\u2714",  # heavy check mark
    "done": "\u2714",
    "in_progress": "\u25d0",  # circle with left half black
    "pending": "\u25cb",  # white circle
    "cancelled": "\u2718",  # heavy ballot x
    "failed": "\u2718",
}


def checklist_todos(params, result):
    """The todos of a ``renderAs: "checklist"`` call: from the call's
    arguments (what the model passed), else from ``details.todos``."""
    for source in (params, (result or {}).get("details")):
        if isinstance(source, dict) and isinstance(source.get("todos"), list):
            return [t for t in source["todos"] if isinstance(t, dict)]
    return None


def render_checklist(todos, title=None):
    """The checklist as text, one todo a line with its status icon and a
    summary line (``2/3 done``)."""
    lines = []
    if title:
        lines.append(title)
    done = 0
    for t in todos:
        status = str(t.get("status") or "pending")
        if status in ("completed", "done"):
            done += 1
        icon = STATUS_ICONS.get(status, "?")
        content = " ".join(str(t.get("content") or "").split()) or "(no text)"
        lines.append("{} {}{}".format(icon, content, "" if status in STATUS_ICONS else " ({})".format(status)))
    lines.append("{}/{} done".format(done, len(todos)))
    return "\n".join(lines) + "\n"


# Files Sublime Text cannot show: opened with the system's default application.
EXTERNAL_EXTENSIONS = {
    ".pdf", ".docx", ".doc", ".xlsx", ".xls", ".pptx", ".ppt", ".odt", ".ods",
    ".odp", ".epub", ".zip", ".mp3", ".mp4", ".wav", ".mov",
}


def file_card(result):
    """``{"path", "name", "external"}`` when the result is a file
    (``details.filePath``, absolute), else None."""
    details = (result or {}).get("details")
    if not isinstance(details, dict):
        return None
    path = details.get("filePath")
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    name = details.get("fileName")
    if not isinstance(name, str) or not name:
        name = os.path.basename(path)
    ext = os.path.splitext(path)[1].lower()
    return {"path": path, "name": name, "external": ext in EXTERNAL_EXTENSIONS}


def content_text(result):
    """The result's content blocks as text (images and other blocks named)."""
    parts = []
    for block in (result or {}).get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append("[{}: {}]".format(kind, block.get("mimeType") or "?"))
        elif kind == "resource":
            res = block.get("resource") if isinstance(block.get("resource"), dict) else {}
            parts.append(str(res.get("text") or "[resource: {}]".format(res.get("uri") or "?")))
        elif kind == "resource_link":
            parts.append("[{}]({})".format(block.get("name") or "link", block.get("uri") or ""))
        else:
            parts.append("[{} block]".format(kind))
    return "\n".join(parts)


def present_result(spec, params, result):
    """How to show a call's result: ``("checklist", text, None)``,
    ``("file", text, card)`` or ``("text", text, None)``."""
    title = (spec or {}).get("summary") or (spec or {}).get("name")
    if (spec or {}).get("renderAs") == "checklist":
        todos = checklist_todos(params, result)
        if todos is not None:
            return ("checklist", render_checklist(todos, title), None)
    card = file_card(result)
    text = content_text(result)
    if card is not None:
        return ("file", "{}\n\u2192 {}\n".format(text, card["path"]) if text else card["path"] + "\n", card)
    if not text.strip():
        details = (result or {}).get("details")
        text = json.dumps(details, indent=2, ensure_ascii=False) if details is not None else "(no output)"
    return ("text", text.rstrip("\n") + "\n", None)


def error_text(error):
    """A call error (``PluginCallError``-like: ``kind``, ``message``,
    ``plugin_message``, ``errors``, ``stderr_tail``) as text."""
    lines = ["{}: {}".format(getattr(error, "kind", "error"), getattr(error, "message", None) or error)]
    pm = getattr(error, "plugin_message", None)
    if pm and pm not in lines[0]:
        lines.append("plugin: " + str(pm))
    for e in getattr(error, "errors", None) or []:
        if isinstance(e, dict):
            lines.append("  {} {}".format(e.get("path") or "/", e.get("message") or ""))
    tail = getattr(error, "stderr_tail", None)
    if tail:
        lines.append("stderr:\n" + str(tail).rstrip())
    return "\n".join(lines) + "\n"


def required_params(spec):
    """A skeleton of the tool's required parameters (``{"name": ""}``) for
    the user to fill in, or None when the tool needs none."""
    params = (spec or {}).get("parameters")
    if not isinstance(params, dict):
        return None
    required = [r for r in params.get("required") or [] if isinstance(r, str)]
    if not required:
        return None
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    skeleton = {}
    for name in required:
        p = props.get(name) if isinstance(props.get(name), dict) else {}
        kind = p.get("type")
        if isinstance(p.get("enum"), list) and p["enum"]:
            skeleton[name] = p["enum"][0]
        elif kind in ("number", "integer"):
            skeleton[name] = 0
        elif kind == "boolean":
            skeleton[name] = False
        elif kind == "array":
            skeleton[name] = []
        elif kind == "object":
            skeleton[name] = {}
        else:
            skeleton[name] = ""
    return skeleton


def parse_params(text):
    """The JSON object the user typed as a tool's arguments (ValueError otherwise)."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError("not JSON: {}".format(e))
    if not isinstance(value, dict):
        raise ValueError("the arguments must be a JSON object")
    return value


# --------------------------------------------------------------------------
# document parsers

_MIME_BY_EXTENSION = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdown": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".html": "text/html",
    ".htm": "text/html",
    ".json": "application/json",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".rtf": "application/rtf",
    ".pdf": "application/pdf",
    ".doc": "application/msword",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xls": "application/vnd.ms-excel",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".epub": "application/epub+zip",
    ".hwp": "application/x-hwp",
    ".hwpx": "application/haansofthwpx",
}


def mime_for_path(path):
    """The MIME type of a file from its extension (our table first, then
    Python's ``mimetypes``), or None."""
    ext = os.path.splitext(path or "")[1].lower()
    if ext in _MIME_BY_EXTENSION:
        return _MIME_BY_EXTENSION[ext]
    guessed = mimetypes.guess_type("x" + ext)[0] if ext else None
    return guessed.lower() if guessed else None


def parser_for(entries, mime):
    """``(plugin_id, tool_name)`` of the first enabled plugin whose
    ``documentParsers`` lists ``mime`` (compared in lower case), or None."""
    if not mime:
        return None
    want = mime.lower()
    for entry in entries:
        if not usable(entry):
            continue
        m = manifest_of(entry)
        for p in m.get("documentParsers") or []:
            # a parser's tool need not be in tools[] (a hidden, parse-only tool)
            if isinstance(p, dict) and str(p.get("mimeType", "")).lower() == want and isinstance(p.get("toolName"), str):
                return (entry["id"], p["toolName"])
    return None


def parser_mimes(entries):
    """Every MIME type some enabled plugin parses (sorted)."""
    out = set()
    for entry in entries:
        if usable(entry):
            for p in manifest_of(entry).get("documentParsers") or []:
                if isinstance(p, dict) and isinstance(p.get("mimeType"), str):
                    out.add(p["mimeType"].lower())
    return sorted(out)


# --------------------------------------------------------------------------
# views, notifications, the plugin manager


def view_items(doc, entries=()):
    """The pages of the view server's document as ``(caption, detail, url)``:
    every view, then every panel, with the plugin's name."""
    names = dict((e.get("id"), plugin_name(e)) for e in entries)
    out = []
    for v in (doc or {}).get("views") or []:
        if isinstance(v, dict) and v.get("url"):
            owner = names.get(v.get("plugin"), v.get("plugin"))
            out.append(("{}: {}".format(owner, v.get("title") or v.get("id")), "view · {}".format(v.get("plugin")), v["url"]))
    for p in (doc or {}).get("panels") or []:
        if isinstance(p, dict) and p.get("url"):
            owner = names.get(p.get("plugin"), p.get("plugin"))
            out.append(("{}: {}".format(owner, p.get("title") or "Panel"), "panel · {}".format(p.get("plugin")), p["url"]))
    return out


def notification_parts(request):
    """A ``show_notification`` host request as ``(title, body, view)``;
    ``view`` is ``{"id", "title", "url"}`` when the host attached the
    page the notification opens, else None."""
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    title = str(params.get("title") or request.get("plugin") or "Plugin")
    body = str(params.get("body") or "")
    view = params.get("view")
    if not (isinstance(view, dict) and isinstance(view.get("url"), str) and view["url"]):
        view = None
    return title, body, view


def format_time(ms):
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ms) / 1000.0))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def last_error_text(entry):
    """``lastError`` of a list entry as one line, or None."""
    le = entry.get("lastError")
    if isinstance(le, dict) and le.get("message"):
        return "{} ({})".format(le["message"], format_time(le.get("at")))
    err = entry.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return None


def manager_row(entry):
    """``(caption, detail)`` of a plugin in the manager's list."""
    if entry.get("error"):
        state = "\u26a0 broken"
    elif entry.get("enabled"):
        state = "\u2714 enabled"
    else:
        state = "\u2718 disabled"
    caption = "{} {}".format(plugin_name(entry), entry.get("version") or "").strip()
    detail = "{} · {}".format(state, entry.get("id"))
    err = last_error_text(entry)
    if err:
        detail += " · last error: " + err
    return caption, detail


def manager_actions(entry, has_views=False):
    """The actions the manager offers for one plugin, as ``(action, label)``."""
    actions = []
    if entry.get("enabled"):
        if entry.get("lastError"):
            # the crash-loop breaker may hold it: enabling again clears it
            actions.append(("enable", "Restart (clears the crash-loop breaker)"))
        actions.append(("disable", "Disable"))
    else:
        actions.append(("enable", "Enable" + (" (clears the crash-loop breaker)" if entry.get("lastError") else "")))
    if usable(entry) and config_entries(entry):
        actions.append(("configure", "Configure\u2026"))
    if usable(entry) and has_views:
        actions.append(("views", "Open a view\u2026"))
    if last_error_text(entry):
        actions.append(("error", "Show the last error"))
    actions.append(("uninstall", "Uninstall (keep its data)"))
    actions.append(("uninstall_data", "Uninstall and remove its data"))
    return actions


def install_error_text(error):
    """A failed install (``PluginInstallError``-like: ``code``, ``message``,
    ``problems``) as text, one problem a line with its JSON path."""
    lines = ["{}: {}".format(getattr(error, "code", "error"), getattr(error, "message", None) or error)]
    for p in getattr(error, "problems", None) or []:
        if isinstance(p, dict):
            lines.append("  {} {}".format(p.get("path") or "/", p.get("message") or ""))
        else:
            lines.append("  " + str(p))
    return "\n".join(lines) + "\n"


def install_source(text):
    """The folder or ``.zip`` the user typed (``~`` expanded), or ValueError."""
    path = os.path.expanduser((text or "").strip())
    if not path:
        raise ValueError("enter the path of a plugin folder or .zip")
    if not os.path.isabs(path):
        raise ValueError("{!r} is not an absolute path".format(path))
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "manifest.json")):
            raise ValueError("{} has no manifest.json".format(path))
        return path
    if os.path.isfile(path):
        if not path.lower().endswith(".zip"):
            raise ValueError("{} is neither a folder nor a .zip".format(path))
        return path
    raise ValueError("{} does not exist".format(path))
