"""The plugin UI of the Sublime Text package (plugin_ui.py, plugin_config.py,
plugin_manager.py, qwen_ui_core.py).

The pure logic (qwen_ui_core) is unit-tested; then the Sublime commands run
under the stub editor against the real library with the fixture plugins
(examples/plugins/hello, todo-quadrant, tests/plugins/fixtures/full) in a
private plugins directory and Packages folder. At the end no plugin
process of ours may be left."""

import json
import os
import sys
import time

import pytest

import qwen_companion
from conftest import REPO, SUBLIME_PACKAGE_DIR, wait_for
from sublime_package import load_package

import sublime_ui_stubs as stubs  # noqa: E402  (extends the stub editor)

import sublime  # noqa: E402  (the stub)

sys.path.insert(0, SUBLIME_PACKAGE_DIR)
import qwen_ui_core as ui  # noqa: E402  (pure: imports no sublime)

sys.path.remove(SUBLIME_PACKAGE_DIR)

FIXTURES = os.path.join(REPO, "tests", "plugins", "fixtures")
EXAMPLES = os.path.join(REPO, "examples", "plugins")
FULL = os.path.join(FIXTURES, "full")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def entry(path, enabled=True, **extra):
    """A list entry as the host gives it, for the manifest at ``path``."""
    m = read_json(os.path.join(path, "manifest.json"))
    e = {"id": m["id"], "name": m["name"], "version": m["version"], "enabled": enabled, "manifest": m, "lastError": None}
    e.update(extra)
    return e


# ==========================================================================
# pure logic


def test_keys_map_mod_to_the_platform_modifier():
    assert ui.map_key("mod+shift+d", "linux") == ["ctrl+shift+d"]
    assert ui.map_key("mod+shift+d", "windows") == ["ctrl+shift+d"]
    assert ui.map_key("mod+shift+d", "osx") == ["super+shift+d"]
    # case, order and aliases normalised to Sublime's syntax
    assert ui.map_key("Shift+Mod+D", "linux") == ["ctrl+shift+d"]
    assert ui.map_key("CmdOrCtrl+Alt+Enter", "osx") == ["super+alt+enter"]
    assert ui.map_key("cmd+option+ArrowUp", "osx") == ["super+alt+up"]
    assert ui.map_key("ctrl+Esc", "osx") == ["ctrl+escape"]
    assert ui.map_key("mod+k mod+s", "linux") == ["ctrl+k", "ctrl+s"]
    assert ui.map_key("ctrl++", "linux") == ["ctrl++"]
    assert ui.map_key("mod+plus", "linux") == ["ctrl++"]
    assert ui.map_key("alt+F12", "linux") == ["alt+f12"]
    assert ui.map_key("mod+PageDown", "windows") == ["ctrl+pagedown"]
    for bad in ("", "mod+", "mod+shift", "hyper+x", "mod+foo", "mod+f99"):
        with pytest.raises(ui.KeyError_):
            ui.map_key(bad, "linux")


def test_keybindings_from_manifests_with_overrides_and_conflicts():
    full = entry(FULL)
    b, notes = ui.keybindings([full], "linux")
    assert b == [{"keys": ["ctrl+shift+d"], "command": "qwen_plugin_run",
                  "args": {"plugin": "com.example.full", "tool": "do_something"}}]
    assert any("overrides Sublime Text's Duplicate Line" in n for n in notes)
    b, _ = ui.keybindings([full], "osx")
    assert b[0]["keys"] == ["super+shift+d"]
    # overrides: another key, or none
    b, notes = ui.keybindings([full], "linux", overrides={"com.example.full/do_something": "ctrl+alt+q"})
    assert b[0]["keys"] == ["ctrl+alt+q"] and not any("overrides" in n for n in notes)
    b, notes = ui.keybindings([full], "linux", overrides={"com.example.full/do_something": None})
    assert b == [] and any("turned off" in n for n in notes)
    assert ui.keybindings([full], "linux", enabled=False) == ([], [])
    assert ui.keybindings([entry(FULL, enabled=False)], "linux") == ([], [])
    # two plugins on one key: the first keeps it
    other = entry(FULL)
    other = json.loads(json.dumps(other))
    other["id"] = "com.example.other"
    b, notes = ui.keybindings([full, other], "linux")
    assert [x["args"]["plugin"] for x in b] == ["com.example.full"]
    assert any("com.example.other/do_something" in n and "already bound" in n for n in notes)
    # a keybinding for something that is not a command, and a bad key
    bad = json.loads(json.dumps(full))
    bad["manifest"]["keybindings"] = [{"command": "list_modes", "key": "mod+m"}, {"command": "do_something", "key": "mod+nope"}]
    b, notes = ui.keybindings([bad], "linux")
    assert b == [] and len(notes) == 2
    assert ui.key_of(ui.keybindings([full], "linux")[0], "com.example.full", "do_something") == "ctrl+shift+d"
    assert ui.platform_file_name("osx") == "Default (OSX).sublime-keymap"
    assert ui.platform_file_name("linux") == "Default (Linux).sublime-keymap"
    assert ui.platform_file_name("windows") == "Default (Windows).sublime-keymap"


def test_sublime_default_conflicts():
    assert ui.sublime_default(["ctrl+shift+d"], "linux") == "Duplicate Line"
    assert ui.sublime_default(["super+shift+d"], "osx") == "Duplicate Line"
    assert ui.sublime_default(["ctrl+shift+d"], "osx") is None
    assert ui.sublime_default(["ctrl+alt+q"], "linux") is None
    assert ui.sublime_default(["ctrl+s", "ctrl+x"], "linux") == "Save"  # its first chord
    assert ui.sublime_default(["ctrl+k", "ctrl+x"], "linux") is None  # a chord prefix of Sublime's own


def test_contributions_from_manifests():
    full, hello = entry(FULL), entry(os.path.join(EXAMPLES, "hello"))
    found = ui.collect_contributions([hello, full])
    assert [(c.kind, c.tool, c.title) for c in found] == [
        ("command", "do_something", "Do one thing to the current project"),
        ("menu", "do_something", "Do one thing to this session"),
        ("session", "do_something", "Do one thing to the current project"),
    ]
    assert found[2].visible_tool == "is_available"
    assert found[0].caption() == "Full Example: Do one thing to the current project"
    assert ui.palette_entries(found) == [{
        "caption": "Qwen Plugin: Full Example: Do one thing to the current project",
        "command": "qwen_plugin_run",
        "args": {"plugin": "com.example.full", "tool": "do_something"},
    }]
    assert ui.collect_contributions([entry(FULL, enabled=False)]) == []
    broken = json.loads(json.dumps(full))
    broken["manifest"]["commands"] = [{"tool": "nope", "title": "x"}]
    assert [c.kind for c in ui.collect_contributions([broken])] == ["menu", "session"]


def test_option_items_put_auto_first():
    got = ui.option_items([{"value": "fast", "label": "Fast"}, {"value": "accurate", "label": "Accurate"}], "auto")
    assert got == [{"value": "auto", "label": "Auto"}, {"value": "fast", "label": "Fast"},
                   {"value": "accurate", "label": "Accurate"}]
    # the host's Auto already first, a repeated default, bad rows, a missing label
    got = ui.option_items([{"value": "auto", "label": "Auto"}, {"value": "auto", "label": "Again"}, "x", {"label": "no value"},
                           {"value": 3}], "auto")
    assert got == [{"value": "auto", "label": "Auto"}, {"value": 3, "label": "3"}]
    assert ui.option_items(None, "d") == [{"value": "d", "label": "Auto"}]


def test_config_values_and_numbers():
    limit = {"id": "limit", "type": "number", "defaultValue": 20}
    assert ui.current_value(limit, {"limit": 5}) == 5
    assert ui.current_value(limit, {"limit": "5"}) == 20  # wrong type: the default
    assert ui.current_value(limit, {"limit": True}) == 20
    assert ui.current_value({"id": "v", "type": "boolean", "defaultValue": False}, {"v": True}) is True
    assert ui.parse_number(" 42 ") == 42 and isinstance(ui.parse_number("42"), int)
    assert ui.parse_number("-1.5") == -1.5
    for bad in ("", "abc", "nan", "inf", "1e999", "1,5"):
        with pytest.raises(ValueError):
            ui.parse_number(bad)
    assert [c["id"] for c in ui.config_entries(entry(FULL))] == ["mode", "verbose", "prefix", "limit"]
    assert ui.show_value(True) == "on" and ui.show_value("") == '""' and ui.show_value(20) == "20"


def test_checklist_rendering():
    todos = [
        {"id": "1", "content": "Initialize repository", "status": "completed"},
        {"id": "2", "content": "Write unit tests", "status": "in_progress"},
        {"id": "3", "content": "Publish", "status": "pending"},
        {"id": "4", "content": "Odd\nline", "status": "weird"},
    ]
    text = ui.render_checklist(todos, "Plan")
    assert text.splitlines() == [
        "Plan",
        "\u2714 Initialize repository",
        "\u25d0 Write unit tests",
        "\u25cb Publish",
        "? Odd line (weird)",
        "1/4 done",
    ]
    spec = {"name": "do_something", "summary": "Do it", "renderAs": "checklist"}
    # from the call's arguments first, else from details.todos
    kind, text, _ = ui.present_result(spec, {"todos": todos[:1]}, {"content": [], "details": {"todos": todos}})
    assert kind == "checklist" and "1/1 done" in text
    kind, text, _ = ui.present_result(spec, {}, {"content": [], "details": {"todos": todos[:2]}})
    assert kind == "checklist" and "1/2 done" in text
    kind, text, _ = ui.present_result(spec, {}, {"content": [{"type": "text", "text": "no todos"}]})
    assert (kind, text) == ("text", "no todos\n")


def test_file_cards_and_other_results():
    card = ui.file_card({"details": {"filePath": "/tmp/n/note.md", "fileName": "note.md"}})
    assert card == {"path": "/tmp/n/note.md", "name": "note.md", "external": False}
    assert ui.file_card({"details": {"filePath": "/x/report.PDF"}}) == {"path": "/x/report.PDF", "name": "report.PDF", "external": True}
    assert ui.file_card({"details": {"filePath": "relative.md"}}) is None
    assert ui.file_card({"details": {"fileName": "x"}}) is None
    assert ui.file_card({"content": []}) is None
    kind, text, card = ui.present_result({"name": "w"}, {}, {"content": [{"type": "text", "text": "Generated"}],
                                                             "details": {"filePath": "/a/b.md"}})
    assert kind == "file" and card["path"] == "/a/b.md" and "/a/b.md" in text
    kind, text, _ = ui.present_result({"name": "x"}, {}, {"content": [{"type": "image", "mimeType": "image/png", "data": "…"},
                                                                      {"type": "text", "text": "hi"}]})
    assert (kind, text) == ("text", "[image: image/png]\nhi\n")
    kind, text, _ = ui.present_result({"name": "x"}, {}, {"content": [], "details": {"visible": True}})
    assert json.loads(text) == {"visible": True}


def test_mime_types_and_parser_selection():
    assert ui.mime_for_path("/a/b/Notes.MD") == "text/markdown"
    assert ui.mime_for_path("/a/report.docx").endswith("wordprocessingml.document")
    assert ui.mime_for_path("/a/x.pdf") == "application/pdf"
    assert ui.mime_for_path("/a/x.unknownext") is None
    assert ui.mime_for_path("/a/noext") is None
    full, hello = entry(FULL), entry(os.path.join(EXAMPLES, "hello"))
    assert ui.parser_for([hello, full], "text/markdown") == ("com.example.full", "parse_markdown")
    assert ui.parser_for([hello, full], "TEXT/Markdown") == ("com.example.full", "parse_markdown")
    assert ui.parser_for([hello, full], "text/plain") is None
    assert ui.parser_for([entry(FULL, enabled=False)], "text/markdown") is None
    assert ui.parser_for([full], None) is None
    assert ui.parser_mimes([hello, full]) == ["text/markdown"]


def test_manager_rows_actions_and_install_sources(tmp_path):
    full = entry(FULL)
    assert ui.manager_row(full) == ("Full Example 1.2.0", "\u2714 enabled \u00b7 com.example.full")
    crashed = entry(FULL, enabled=False, lastError={"message": "exited 3 times in 60 s", "at": 0})
    caption, detail = ui.manager_row(crashed)
    assert detail.startswith("\u2718 disabled \u00b7 com.example.full \u00b7 last error: exited 3 times in 60 s (")
    assert [a for a, _ in ui.manager_actions(crashed)] == ["enable", "error", "uninstall", "uninstall_data"]
    assert [a for a, _ in ui.manager_actions(full, has_views=True)] == [
        "disable", "configure", "views", "uninstall", "uninstall_data"]
    broken = {"id": "x.broken", "enabled": True, "tools": [], "error": {"code": "broken_plugin", "message": "does not validate"}}
    assert ui.manager_row(broken)[1].startswith("\u26a0 broken")
    assert ui.last_error_text(broken) == "does not validate"

    assert ui.install_source(" " + FULL + " ") == FULL
    z = tmp_path / "p.zip"
    z.write_bytes(b"PK")
    assert ui.install_source(str(z)) == str(z)
    (tmp_path / "empty").mkdir()
    (tmp_path / "f.txt").write_text("x")
    for bad, why in (("", "enter the path"), ("rel/path", "not an absolute"), (str(tmp_path / "empty"), "no manifest.json"),
                     (str(tmp_path / "f.txt"), "neither a folder nor a .zip"), (str(tmp_path / "gone"), "does not exist")):
        with pytest.raises(ValueError, match=why):
            ui.install_source(bad)


def test_params_notifications_and_views_documents():
    hello = read_json(os.path.join(EXAMPLES, "hello", "manifest.json"))
    assert ui.required_params(hello["tools"][0]) == {"name": ""}
    assert ui.required_params({"parameters": {"type": "object", "properties": {}}}) is None
    todo = read_json(os.path.join(EXAMPLES, "todo-quadrant", "manifest.json"))
    assert ui.required_params(todo["tools"][0]) == {"action": "add"}  # the enum's first value
    assert ui.parse_params('{"a": 1}') == {"a": 1}
    for bad in ("[1]", "nope", ""):
        with pytest.raises(ValueError):
            ui.parse_params(bad)

    req = {"plugin": "local.todo-quadrant", "params": {"title": "3 todos", "body": "• a\n• b",
                                                       "view": {"id": "quadrant", "title": "Todo Quadrant", "url": "http://127.0.0.1:1/v"}}}
    assert ui.notification_parts(req) == ("3 todos", "• a\n• b", {"id": "quadrant", "title": "Todo Quadrant", "url": "http://127.0.0.1:1/v"})
    assert ui.notification_parts({"plugin": "p", "params": {"viewId": "board"}}) == ("p", "", None)

    doc = {"views": [{"plugin": "com.example.full", "id": "board", "title": "Example Board", "url": "http://h/b"}],
           "panels": [{"plugin": "com.example.full", "title": "Example Panel", "url": "http://h/p"}]}
    assert ui.view_items(doc, [entry(FULL)]) == [
        ("Full Example: Example Board", "view \u00b7 com.example.full", "http://h/b"),
        ("Full Example: Example Panel", "panel \u00b7 com.example.full", "http://h/p"),
    ]


# ==========================================================================
# the Sublime commands against the real library


def node_children():
    me = str(os.getpid())
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(name)) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if rest[1] == me and rest[0] != "Z":
            out.append(int(name))
    return out


class Ui(object):
    def __init__(self, pkg, window, packages, workspace, opened):
        self.pkg = pkg
        self.window = window
        self.packages = packages
        self.workspace = workspace
        self.opened = opened  # URLs given to webbrowser.open

    def host(self):
        return self.pkg.plugin.plugin_host(create=False)

    @property
    def plugins_dir(self):
        return self.host().plugins_dir

    def pump_until(self, predicate, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sublime.pump(timeout=0.05)
            if predicate():
                return True
        return predicate()

    def run(self, name, args=None):
        self.window.run_command(name, args)

    def output(self):
        panel = self.window.find_output_panel("qwen_plugins")
        return panel.substr(sublime.Region(0, panel.size())) if panel is not None else ""

    def wait_output(self, needle, timeout=20.0):
        assert self.pump_until(lambda: needle in self.output(), timeout), "output panel: {!r}".format(self.output())
        return self.output()

    def wait_quick_panel(self, count=None):
        n = stubs.quick_panel_count(self.window) if count is None else count
        assert self.pump_until(lambda: stubs.quick_panel_count(self.window) > n - (1 if count is None else 0) and
                               stubs.quick_panel_count(self.window) > 0)
        return stubs.rows(self.window)

    def keymap(self):
        path = os.path.join(self.packages, "QwenCompanionPlugins", ui.platform_file_name(sublime.platform()))
        return json.loads("".join(l for l in open(path, encoding="utf-8") if not l.startswith("//")))

    def palette(self):
        path = os.path.join(self.packages, "QwenCompanionPlugins", "Qwen Plugins.sublime-commands")
        return json.loads("".join(l for l in open(path, encoding="utf-8") if not l.startswith("//")))

    def install(self, path):
        self.run("qwen_plugins_install", {"path": path})
        assert self.pump_until(lambda: "installed" in self.output() or "updated" in self.output()), self.output()


@pytest.fixture
def stui(lib_path, lock_dir, tmp_path, workspace, monkeypatch):
    sublime.reset()
    stubs.reset()
    packages = str(tmp_path / "Packages")
    os.makedirs(packages)
    stubs.set_packages_path(packages)
    opened = []
    import webbrowser

    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("library_path", lib_path)
    s.set("lock_dir", lock_dir)
    s.set("plugins_enabled", True)
    s.set("plugins_dir", str(tmp_path / "plugins"))
    s.set("plugins_mcp", False)  # the MCP server and its registration have their own tests
    window = sublime.Editor().new_window([workspace])
    pkg = load_package()
    pkg.loaded()
    env = Ui(pkg, window, packages, workspace, opened)
    try:
        assert env.pump_until(lambda: env.host() is not None)
        yield env
    finally:
        pkg.unloaded()
        assert sublime.ui_violations == [], "UI touched off the UI thread"
        wait_for(lambda: not node_children())
        assert node_children() == [], "plugin processes left"


def test_install_generates_keymap_and_palette_and_follows_changes(stui):
    stui.install(FULL)
    stui.install(os.path.join(EXAMPLES, "hello"))
    assert stui.keymap() == [{"keys": ["ctrl+shift+d"], "command": "qwen_plugin_run",
                              "args": {"plugin": "com.example.full", "tool": "do_something"}}]
    head = open(os.path.join(stui.packages, "QwenCompanionPlugins", "Default (Linux).sublime-keymap"), encoding="utf-8").read()
    assert "overrides Sublime Text's Duplicate Line" in head
    assert [e["caption"] for e in stui.palette()] == ["Qwen Plugin: Full Example: Do one thing to the current project"]

    # disable from the manager: its binding and entry go away; enable brings them back
    stui.run("qwen_plugins_manage")
    stui.wait_quick_panel()
    assert stubs.rows(stui.window)[0][0].startswith("Install from a folder")
    assert ["Full Example 1.2.0", "\u2714 enabled \u00b7 com.example.full"] in stubs.rows(stui.window)
    stubs.pick(stui.window, "Full Example")
    assert stubs.rows(stui.window)[0][0] == "Disable"
    stubs.pick(stui.window, "Disable")
    assert stui.pump_until(lambda: stui.keymap() == [])
    assert stui.palette() == []
    assert stui.host().list()[0]["enabled"] is False

    stui.run("qwen_plugins_manage")
    stui.wait_quick_panel()
    assert ["Full Example 1.2.0", "\u2718 disabled \u00b7 com.example.full"] in stubs.rows(stui.window)
    stubs.pick(stui.window, "Full Example")
    stubs.pick(stui.window, "Enable")
    assert stui.pump_until(lambda: len(stui.keymap()) == 1)

    # uninstall (asks first; "cancel" changes nothing)
    stubs.answer_dialogs(False)
    stui.run("qwen_plugins_manage")
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Full Example")
    stubs.pick(stui.window, "Uninstall (keep")
    assert stubs.dialogs() == ["Uninstall Full Example?"]
    stubs.answer_dialogs(True)
    stui.run("qwen_plugins_manage")
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Full Example")
    stubs.pick(stui.window, "Uninstall and remove")
    assert stui.pump_until(lambda: stui.keymap() == [])
    assert [e["id"] for e in stui.host().list()] == ["com.example.hello"]


def test_keymap_on_macos_uses_super(stui, monkeypatch):
    monkeypatch.setattr(sublime, "platform", lambda: "osx")
    stui.install(FULL)
    assert stui.keymap()[0]["keys"] == ["super+shift+d"]
    # overrides from the settings, after a regeneration
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("plugin_key_overrides", {"com.example.full/do_something": "mod+alt+d"})  # on_change regenerates
    assert stui.pump_until(lambda: stui.keymap() and stui.keymap()[0]["keys"] == ["super+alt+d"])
    s.set("plugin_keybindings", False)
    assert stui.pump_until(lambda: stui.keymap() == [])
    s.set("plugin_keybindings", True)
    assert stui.pump_until(lambda: stui.keymap() != [])
    stui.run("qwen_plugins_regenerate")
    out = stui.wait_output("1 key binding(s) generated in ")
    assert "QwenCompanionPlugins" in out


def test_install_errors_show_problems_and_keep_the_path(stui):
    bad = os.path.join(FIXTURES, "invalid", "command-unknown-tool")
    stui.run("qwen_plugins_install")
    stubs.type_into(stui.window, bad)
    out = stui.wait_output("invalid_manifest")
    assert "/commands/0/tool" in out
    assert stui.pump_until(lambda: stubs.input_panel_count(stui.window) == 1)
    assert stubs.last_input_panel(stui.window)["text"] == bad  # nothing lost
    stubs.type_into(stui.window, "relative/path")  # refused before the host sees it
    assert stubs.last_input_panel(stui.window)["text"] == "relative/path"
    assert any("not an absolute path" in m for m in sublime.status_messages)
    stubs.type_into(stui.window, FULL)
    stui.wait_output("installed Full Example 1.2.0 (com.example.full)")
    stui.run("qwen_plugins_install")  # the next one starts in the same folder
    assert stubs.last_input_panel(stui.window)["text"] == os.path.dirname(FULL) + os.sep
    stubs.type_into(stui.window, FULL)
    stui.wait_output("updated Full Example 1.2.0")


def test_run_command_panel_gates_the_session_action(stui):
    stui.install(FULL)
    stui.run("qwen_plugins_run_command")
    rows = stui.wait_quick_panel()
    # not a git repository: no session action
    assert [r[0] for r in rows] == ["Full Example: Do one thing to the current project", "Full Example: Do one thing to this session"]
    assert rows[0][1] == "command \u00b7 com.example.full \u00b7 do_something \u00b7 ctrl+shift+d"
    stubs.pick(stui.window, "this session")
    out = stui.wait_output("1/3 done")
    assert "\u2714 Inspect {}".format(stui.workspace) in out
    assert "\u25d0 Apply mode auto" in out and "\u25cb Report" in out and "1/3 done" in out

    os.mkdir(os.path.join(stui.workspace, ".git"))
    stui.run("qwen_plugins_run_command")
    assert stui.pump_until(lambda: stubs.quick_panel_count(stui.window) == 1)
    assert [r[1].split(" \u00b7 ")[0] for r in stubs.rows(stui.window)] == ["command", "session menu", "session action"]


def test_keybinding_command_and_arguments_prompt(stui):
    stui.install(os.path.join(EXAMPLES, "hello"))
    stui.run("qwen_plugin_run", {"plugin": "com.example.hello", "tool": "say_hello"})
    assert stui.pump_until(lambda: stubs.input_panel_count(stui.window) == 1)
    assert json.loads(stubs.last_input_panel(stui.window)["text"]) == {"name": ""}
    stubs.type_into(stui.window, '{"name": ')  # not JSON: asked again, text kept
    assert stubs.last_input_panel(stui.window)["text"] == '{"name": '
    stubs.type_into(stui.window, '{"name": "Ada"}')
    assert "Hello, Ada!" in stui.wait_output("Hello, Ada!")
    # a schema error from the host is shown, nothing is lost
    stui.run("qwen_plugin_run", {"plugin": "com.example.hello", "tool": "say_hello", "params": {"name": 3}})
    stui.wait_output("schema:")


def test_file_card_opens_the_file(stui):
    stui.install(FULL)
    stui.run("qwen_plugin_run", {"plugin": "com.example.full", "tool": "write_note",
                                 "params": {"text": "# Note\nbody\n", "fileName": "n1.md"}})
    assert stui.pump_until(lambda: any((v.file_name() or "").endswith("n1.md") for v in stui.window.views()))
    view = [v for v in stui.window.views() if (v.file_name() or "").endswith("n1.md")][0]
    assert view.substr(sublime.Region(0, view.size())) == "# Note\nbody\n"
    assert "Generated [n1.md]" in stui.output() and view.file_name() in stui.output()
    # a PDF card goes to the system's viewer
    stui.run("qwen_plugin_run", {"plugin": "com.example.full", "tool": "export_pdf", "params": {"content": "# Hi"}})
    assert stui.pump_until(lambda: any(u.startswith("file://") and u.endswith("report.pdf") for u in stui.opened))
    assert open(stui.opened[-1][len("file://"):], "rb").read(5) == b"%PDF-"


def test_configuration_through_quick_panels(stui):
    stui.install(FULL)
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    stui.run("qwen_plugins_configure")
    rows = stui.wait_quick_panel()
    assert rows == [["Mode", "select \u00b7 \"auto\""], ["Verbose output", "boolean \u00b7 off"],
                    ["Prefix", "string \u00b7 \"\""], ["Max items", "number \u00b7 20"]]
    # select: Auto first, then the optionsTool's options
    stubs.pick(stui.window, "Mode")
    assert stui.pump_until(lambda: stubs.rows(stui.window)[0][0] == "Auto")
    assert [r[0] for r in stubs.rows(stui.window)] == ["Auto", "Fast", "Accurate"]
    stubs.pick(stui.window, "Accurate")
    assert stui.pump_until(lambda: (s.get("plugin_config") or {}).get("com.example.full", {}).get("mode") == "accurate")
    state = read_json(os.path.join(stui.plugins_dir, "state.json"))
    assert state["plugins"]["com.example.full"]["config"]["mode"] == "accurate"
    assert "QwenCompanion.sublime-settings" in stubs.saved_settings()

    # number: refused until it is one, the text kept
    stui.run("qwen_plugins_configure", {"plugin": "com.example.full"})
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Max items")
    assert stubs.last_input_panel(stui.window)["text"] == "20"
    stubs.type_into(stui.window, "two")
    assert stubs.last_input_panel(stui.window)["text"] == "two"
    stubs.type_into(stui.window, "2")
    assert stui.pump_until(lambda: s.get("plugin_config")["com.example.full"].get("limit") == 2)
    # boolean and string
    stui.run("qwen_plugins_configure", {"plugin": "com.example.full"})
    rows = stui.wait_quick_panel()
    assert rows[0] == ["Mode", "select \u00b7 \"accurate\""] and rows[3] == ["Max items", "number \u00b7 2"]
    stubs.pick(stui.window, "Verbose")
    stubs.pick(stui.window, "On")
    stui.run("qwen_plugins_configure", {"plugin": "com.example.full"})
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Prefix")
    stubs.type_into(stui.window, "> ")
    assert stui.pump_until(lambda: s.get("plugin_config")["com.example.full"].get("prefix") == "> ")
    assert s.get("plugin_config")["com.example.full"]["verbose"] is True

    # every call's context.config has them
    stui.run("qwen_plugin_run", {"plugin": "com.example.full", "tool": "do_something"})
    out = stui.wait_output("done\n")
    assert "> Apply mode accurate" in out and "1/2 done" in out
    assert "\u25cb" not in out  # the limit (2) cut "Report"

    # Auto stores nothing: the default applies again
    stui.run("qwen_plugins_configure", {"plugin": "com.example.full"})
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Mode")
    assert stui.pump_until(lambda: stubs.rows(stui.window)[0][0] == "Auto")
    assert stubs.last_quick_panel(stui.window)["selected"] == 2  # the current value
    stubs.pick(stui.window, "Auto")
    assert stui.pump_until(lambda: "mode" not in s.get("plugin_config")["com.example.full"])


def test_settings_mirror_edits_reach_the_host(stui, capsys):
    stui.install(FULL)
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("plugin_config", {"com.example.full": {"limit": 1, "mode": 7}})  # its on_change applies it
    state = read_json(os.path.join(stui.plugins_dir, "state.json"))
    assert state["plugins"]["com.example.full"]["config"] == {"limit": 1}  # a number for a select is refused
    assert "plugin_config com.example.full.mode:" in capsys.readouterr().out
    stui.run("qwen_plugin_run", {"plugin": "com.example.full", "tool": "do_something"})
    stui.wait_output("1/1 done")  # limit 1: one step
    s.set("plugin_config", {})
    state = read_json(os.path.join(stui.plugins_dir, "state.json"))
    assert not state["plugins"]["com.example.full"].get("config")


def test_parse_document_opens_the_text_in_a_new_view(stui, tmp_path):
    stui.install(FULL)
    md = tmp_path / "doc.md"
    md.write_text("# Title\n\nBody ✓\n", encoding="utf-8")
    stui.window.open_file(str(md))
    stui.run("qwen_plugins_parse_document")
    assert stui.pump_until(lambda: any(v.name() == "Parsed: doc.md" for v in stui.window.views()))
    view = [v for v in stui.window.views() if v.name() == "Parsed: doc.md"][0]
    assert view.substr(sublime.Region(0, view.size())) == "# Title\n\nBody ✓\n"
    assert view.is_scratch()
    # a type no plugin parses, and a failed parse
    txt = tmp_path / "plain.txt"
    txt.write_text("x")
    stui.run("qwen_plugins_parse_document", {"paths": [str(txt)]})
    out = stui.wait_output("no enabled plugin parses plain.txt")
    assert "text/plain" in out and "plugins parse: text/markdown" in out
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\xff\xfe\x00bad")
    stui.run("qwen_plugins_parse_document", {"paths": [str(bad)]})
    stui.wait_output("could not be parsed: the file is not UTF-8 text")


def test_notifications_popup_and_list(stui):
    stui.install(os.path.join(EXAMPLES, "todo-quadrant"))
    stui.window.open_file(os.path.join(stui.workspace, "main.py"))
    stui.run("qwen_plugin_run", {"plugin": "local.todo-quadrant", "tool": "manage_todo_quadrant",
                                 "params": {"action": "add", "content": "Write weekly report"}})
    stui.wait_output("Added [1]")
    stui.run("qwen_plugin_run", {"plugin": "local.todo-quadrant", "tool": "manage_todo_quadrant",
                                 "params": {"action": "remind_now"}})
    stui.wait_output("Reminder shown.")  # we answered {"shown": true}
    view = stui.window.active_view()
    assert stui.pump_until(lambda: getattr(view, "popup", None) is not None)
    assert "<b>1 todo for today</b>" in view.popup["content"]
    assert "• Write weekly report" in view.popup["content"]
    assert any(m.startswith("Qwen Plugins: 1 todo for today") for m in sublime.status_messages)
    stui.run("qwen_plugins_notifications")
    assert stubs.rows(stui.window)[0][0] == "1 todo for today"

    # turned off: the plugin hears it was not shown
    sublime.load_settings("QwenCompanion.sublime-settings").set("plugin_notifications", False)
    stui.run("qwen_plugin_run", {"plugin": "local.todo-quadrant", "tool": "manage_todo_quadrant",
                                 "params": {"action": "remind_now"}})
    stui.wait_output("Reminder not shown (disabled).")


def test_notification_with_a_view_opens_it(stui):
    """The host attaches ``params.view`` when ``viewId`` names a view (the
    library's part); a click on the popup's link opens its URL."""
    req = {"plugin": "local.todo-quadrant", "capability": "show_notification",
           "params": {"title": "Todo reminder", "body": "Publish", "viewId": "quadrant",
                      "view": {"id": "quadrant", "title": "Todo Quadrant", "url": "http://127.0.0.1:9/v?cap=x"}}}
    view = stui.window.open_file(os.path.join(stui.workspace, "main.py"))
    assert stui.pkg.plugin_ui.on_show_notification(req) == {"shown": True}
    assert stui.pump_until(lambda: getattr(view, "popup", None) is not None)
    assert "<a href='open'>Open Todo Quadrant</a>" in view.popup["content"]
    view.popup["on_navigate"]("open")
    assert stui.opened == ["http://127.0.0.1:9/v?cap=x"]
    assert view.popup is None
    stui.run("qwen_plugins_notifications")
    stubs.pick(stui.window, "Todo reminder")
    assert stui.opened[-1] == "http://127.0.0.1:9/v?cap=x"


def fetch(url):
    """GET ``url`` (the loopback view server): ``(status, body)``."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_open_view_in_the_browser(stui):
    stui.install(FULL)
    stui.install(os.path.join(EXAMPLES, "todo-quadrant"))
    stui.run("qwen_plugins_open_view")
    rows = stui.wait_quick_panel()
    assert [r[0] for r in rows] == ["Full Example: Example Board", "Todo Quadrant: Todo Quadrant", "Full Example: Example Panel"]
    stubs.pick(stui.window, "Todo Quadrant: Todo Quadrant")
    assert len(stui.opened) == 1
    url = stui.opened[0]
    assert url.startswith("http://127.0.0.1:")
    status, page = fetch(url)  # what the browser gets: the plugin's view.html with window.pluginHost
    assert status == 200 and "pluginHost" in page
    stui.run("qwen_plugins_open_view", {"plugin": "com.example.full", "view": "board"})
    assert stui.pump_until(lambda: len(stui.opened) == 2)
    assert stui.opened[1] == stui.host().view_url("com.example.full", "board")
    assert fetch(stui.opened[1])[0] == 200
    stui.run("qwen_plugins_open_view", {"plugin": "com.example.full", "view": "nope"})
    stui.wait_output("com.example.full: no view nope")
    # only one plugin's pages
    stui.run("qwen_plugins_open_view", {"plugin": "com.example.full"})
    rows = stui.wait_quick_panel()
    assert [r[0] for r in rows] == ["Full Example: Example Board", "Full Example: Example Panel"]
    stubs.pick(stui.window, "Example Panel")
    assert fetch(stui.opened[-1])[0] == 200 and stui.opened[-1] == stui.host().view_url("com.example.full")


def test_host_changes_regenerate_the_generated_files(stui):
    """An install made behind the UI's back (another editor, qcdemo) comes as
    ``views_changed``: the key bindings follow."""
    assert stui.pump_until(lambda: os.path.exists(os.path.join(stui.packages, "QwenCompanionPlugins")))
    stui.host().install(FULL)
    assert stui.pump_until(lambda: len(stui.keymap()) == 1)
    stui.host().disable("com.example.full")
    assert stui.pump_until(lambda: stui.keymap() == [])


def test_a_notification_links_to_the_plugins_view(stui):
    stui.install(os.path.join(EXAMPLES, "todo-quadrant"))
    view = stui.window.open_file(os.path.join(stui.workspace, "main.py"))
    stui.run("qwen_plugin_run", {"plugin": "local.todo-quadrant", "tool": "manage_todo_quadrant",
                                 "params": {"action": "remind_now"}})
    stui.wait_output("Reminder shown.")
    assert stui.pump_until(lambda: getattr(view, "popup", None) is not None)
    assert "<a href='open'>Open Todo Quadrant</a>" in view.popup["content"]
    view.popup["on_navigate"]("open")
    assert len(stui.opened) == 1
    status, page = fetch(stui.opened[0])
    assert status == 200 and "pluginHost" in page


def test_views_follow_the_ui_style(stui, monkeypatch):
    stui.install(FULL)
    style = ["dark"]
    monkeypatch.setattr(sublime, "ui_info", lambda: {"theme": {"style": style[0]}}, raising=False)
    sent = []
    h = stui.host()
    real = h.set_color_scheme
    monkeypatch.setattr(h, "set_color_scheme", lambda scheme: sent.append(scheme) or real(scheme))
    stui.run("qwen_plugins_open_view", {"plugin": "com.example.full", "view": "board"})
    assert stui.pump_until(lambda: len(stui.opened) == 1)
    assert sent == ["dark"]
    prefs = sublime.load_settings("Preferences.sublime-settings")
    style[0] = "light"
    prefs.set("theme", "Adaptive.sublime-theme")  # its on_change reads the new style
    assert stui.pump_until(lambda: sent == ["dark", "light"])
    prefs.set("font_size", 12)  # the style is unchanged: nothing sent
    sublime.pump(timeout=0.1)
    assert sent == ["dark", "light"]
    assert stui.host().views()["colorScheme"] == "light"


def test_crashed_plugin_shows_its_last_error(stui):
    stui.install(os.path.join(FIXTURES, "hostile", "crash-loop"))
    pid = "test.hostile.crash-loop"
    for _ in range(6):
        exits = stui.host().stats(pid)["unexpectedExits"]
        try:
            stui.host().call(pid, "ping", {})
        except qwen_companion.PluginCallError as e:
            if e.kind == "disabled":
                break
        # Let it crash: wait for its next unexpected exit (it exits ~200 ms
        # after each start).
        wait_for(lambda: stui.host().stats(pid)["unexpectedExits"] > exits)
    assert stui.pump_until(lambda: any("test.hostile.crash-loop was disabled" in m for m in sublime.status_messages))
    stui.run("qwen_plugins_manage")
    rows = stui.wait_quick_panel()
    row = [r for r in rows if r[0].startswith("Hostile: crash-loop")][0]
    assert " \u00b7 test.hostile.crash-loop \u00b7 last error: " in row[1] and "it exited unexpectedly 3 times" in row[1]
    stubs.pick(stui.window, "Hostile: crash-loop")
    assert [r[0] for r in stubs.rows(stui.window)][:3] == ["Restart (clears the crash-loop breaker)", "Disable", "Show the last error"]
    stubs.pick(stui.window, "Show the last error")
    assert stui.output().startswith("test.hostile.crash-loop \u00b7 last error\n\n")
    assert "it exited unexpectedly 3 times" in stui.output()
    with pytest.raises(qwen_companion.PluginCallError) as e:
        stui.host().call(pid, "ping", {})
    assert e.value.kind == "disabled"
    # restart: the breaker is cleared, the plugin answers again
    stui.run("qwen_plugins_manage")
    stui.wait_quick_panel()
    stubs.pick(stui.window, "Hostile: crash-loop")
    stubs.pick(stui.window, "Restart")
    assert stui.pump_until(lambda: any(m.endswith("test.hostile.crash-loop enabled") for m in sublime.status_messages))
    assert stui.host().call(pid, "ping", {})["content"][0]["text"] == "pong"
