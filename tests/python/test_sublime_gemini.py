"""The Sublime Text package's issue-22 features, on the stub editor and the
real library: the setting ``cli`` (checked; a change restarts the
companions) and ``gemini_dir``, "Run Gemini CLI" (its command, tag and
environment; the message when the companion does not serve Gemini CLI),
Add to Prompt into the agent terminal used last, the Terminus environment,
the health panel's gemini check and discovery files, the menus."""

import importlib
import json
import os
import sys

import pytest

from conftest import HERE, SUBLIME_PACKAGE_DIR

STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.insert(0, STUBS)

import sublime  # noqa: E402  (the stub)

from sublime_harness import open_terminal, sent, st  # noqa: E402,F401
from test_sublime_plugin import read_jsonc, text_of  # noqa: E402

GEMINI_ENV = ("GEMINI_CLI_IDE_SERVER_PORT", "GEMINI_CLI_IDE_WORKSPACE_PATH", "GEMINI_CLI_IDE_PID")


def agents():
    return importlib.import_module("QwenCompanion.qwen_core.agents")


@pytest.fixture
def cmds(st):
    return importlib.import_module("QwenCompanion.qwen_commands")


def settings():
    return sublime.load_settings("QwenCompanion.sublime-settings")


def need_gemini(wc):
    if not hasattr(wc.companion._lib, "qc_companion_discovery_files_json"):
        pytest.fail("the library has no qc_companion_discovery_files_json (issue 22's core)")


@pytest.fixture
def serve(st, tmp_path):
    """``serve(cli)``: the window's companion restarted for ``cli`` (Gemini's
    discovery file in a private folder); returns the new WindowCompanion."""
    settings().set("gemini_dir", str(tmp_path / "gemini-ide"))

    def serve(cli):
        settings().set("cli", cli)
        wc = st.wc()
        need_gemini(wc)
        assert wc.cli == cli
        return wc

    return serve


def terminus(st):
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")


run = open_terminal  # "Run Qwen Code" / "Run Gemini CLI" -> (view, terminus_open args)


# -- the setting cli ---------------------------------------------------------


def test_cli_setting_values(st):
    a = agents()
    assert a.cli_setting(None) == ("qwen", None)
    for value in ("qwen", "gemini", "both"):
        assert a.cli_setting(value) == (value, None)
    for bad in ("claude", "Gemini", "", 2, ["both"]):
        cli, problem = a.cli_setting(bad)
        assert cli == "qwen" and "serving Qwen Code only" in problem, bad
    assert '"claude"' in a.cli_setting("claude")[1] and "2" in a.cli_setting(2)[1]
    assert len(a.cli_setting("x" * 500)[1]) < 200  # a long value is cut
    assert [a.serves("both", x) for x in ("qwen", "gemini")] == [True, True]
    assert [a.serves("gemini", x) for x in ("qwen", "gemini")] == [False, True]
    assert a.served_names("both") == "Qwen Code and Gemini CLI" and a.served_names("gemini") == "Gemini CLI"
    assert a.not_served_message("both", "gemini") is None
    assert '"gemini" or "both"' in a.not_served_message("qwen", "gemini")
    assert '"qwen" or "both"' in a.not_served_message("gemini", "qwen")
    assert a.tag(7, "qwen") == "qwen-companion-7" and a.tag(7, "gemini") == "qwen-companion-gemini-7"
    assert a.agent_of_tag(7, "qwen-companion-gemini-7") == "gemini" and a.agent_of_tag(8, "qwen-companion-7") is None


def test_a_bad_cli_setting_is_said_and_the_default_served(st):
    old = st.wc()
    assert old.cli == "qwen" and "cli" not in old.config  # the default is left to the library
    settings().set("cli", "claude")
    sublime.pump()
    msgs = [m for m in sublime.status_messages if '"claude"' in m]
    assert msgs and "serving Qwen Code only" in msgs[-1]
    wc = st.wc()
    assert wc.cli == "qwen" and not wc.companion.closed and os.path.exists(wc.companion.lock_file)
    # said once per value, not at every companion start
    n = len(msgs)
    st.plugin.companion_config(settings())
    sublime.pump()
    assert len([m for m in sublime.status_messages if '"claude"' in m]) == n


def test_changing_cli_restarts_the_companions(st, serve, tmp_path, lock_dir):
    old = st.wc()
    old_lock = old.companion.lock_file
    both = serve("both")
    assert both is not old and old.companion.closed and not os.path.exists(old_lock)
    files = both.discovery
    assert files["qwen"] == os.path.join(lock_dir, "{}.lock".format(both.port))
    assert files["gemini"] == os.path.join(str(tmp_path / "gemini-ide"),
                                           "gemini-ide-server-{}-{}.json".format(os.getpid(), both.port))
    with open(files["gemini"], encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["ideInfo"] == {"name": "sublime-text", "displayName": "Sublime Text"}
    assert doc["workspacePath"] == st.window.folders()[0]

    gemini = serve("gemini")
    assert gemini is not both and not os.path.exists(files["qwen"]) and not os.path.exists(files["gemini"])
    assert gemini.discovery["qwen"] is None and os.path.isfile(gemini.discovery["gemini"])
    assert set(GEMINI_ENV) == set(gemini.env)
    logged = importlib.import_module("QwenCompanion.qwen_core.logbuf").text()
    assert "listening on port {} for Gemini CLI ({})".format(gemini.port, gemini.discovery["gemini"]) in logged


# -- Run Gemini CLI ------------------------------------------------------------


def test_run_gemini_cli_opens_terminus_with_every_variable(st, serve, workspace):
    terminus(st)
    wc = serve("both")
    n = len(sublime.status_messages)
    st.window.run_command("qwen_companion_run_gemini")
    name, args = st.window.commands[-1]
    assert name == "terminus_open"
    assert args["shell_cmd"] == "gemini" and args["title"] == "Gemini CLI" and args["cwd"] == workspace
    assert args["tag"] == "qwen-companion-gemini-{}".format(st.window.id())
    env = args["env"]
    assert env["GEMINI_CLI_IDE_SERVER_PORT"] == env["QWEN_CODE_IDE_SERVER_PORT"] == str(wc.port)
    assert env["GEMINI_CLI_IDE_WORKSPACE_PATH"] == workspace and env["GEMINI_CLI_IDE_PID"] == str(os.getpid())
    assert not [m for m in sublime.status_messages[n:] if "without the IDE connection" in m]

    settings().set("gemini_command", ["gemini", "--approval-mode", "default"])
    st.window.run_command("qwen_companion_run_gemini")
    assert st.window.commands[-1][1]["cmd"] == ["gemini", "--approval-mode", "default"]
    # Run Qwen Code gets the same variables, under its own tag
    st.window.run_command("qwen_companion_run_qwen")
    name, args = st.window.commands[-1]
    assert args["tag"] == "qwen-companion-{}".format(st.window.id()) and set(GEMINI_ENV) <= set(args["env"])


def test_run_gemini_cli_without_gemini_served_starts_it_and_says_so(st, workspace):
    terminus(st)
    st.window.run_command("qwen_companion_run_gemini")
    name, args = st.window.commands[-1]
    assert name == "terminus_open" and args["shell_cmd"] == "gemini"
    assert args["env"]["QWEN_CODE_IDE_SERVER_PORT"] == str(st.wc().port)
    assert not set(GEMINI_ENV) & set(args["env"])
    msg = sublime.status_messages[-1]
    assert "Gemini CLI started without the IDE connection" in msg and '"gemini" or "both"' in msg
    assert st.plugin.agent_terminal(st.window, "gemini") is None  # Terminus has not made it (stub)


def test_run_qwen_code_with_gemini_only_says_so(st, serve):
    terminus(st)
    serve("gemini")
    st.window.run_command("qwen_companion_run_qwen")
    assert st.window.commands[-1][0] == "terminus_open"
    assert '"qwen" or "both"' in sublime.status_messages[-1]


def test_run_gemini_cli_without_terminus_says_what_to_install(st):
    st.window.run_command("qwen_companion_run_gemini")
    assert not [c for c in st.window.commands if c[0] == "terminus_open"]
    assert any("Run Gemini CLI needs the Terminus package" in m and "run gemini" in m for m in sublime.error_messages)


def test_terminus_terminals_get_geminis_env(st, serve):
    terminus(st)
    wc = serve("gemini")
    st.window.run_command("terminus_open", {"cmd": ["bash"]})
    env = st.window.commands[-1][1]["env"]
    assert env["GEMINI_CLI_IDE_SERVER_PORT"] == str(wc.port) and "QWEN_CODE_IDE_SERVER_PORT" not in env
    # a terminal that sets Gemini's port already is left alone
    st.window.run_command("terminus_open", {"env": {"GEMINI_CLI_IDE_SERVER_PORT": "1"}})
    assert st.window.commands[-1][1]["env"] == {"GEMINI_CLI_IDE_SERVER_PORT": "1"}


# -- Add to Prompt: the agent terminal used last ---------------------------------


def test_add_to_prompt_types_into_the_terminal_used_last(st, cmds, workspace):
    terminus(st)
    qwen_term, qwen_args = run(st, "qwen_companion_run_qwen")
    gemini_term, gemini_args = run(st, "qwen_companion_run_gemini")  # started last
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)

    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st)[-1] == {"string": "@main.py ", "tag": gemini_args["tag"]}
    assert st.window.active_view() is gemini_term

    st.window.focus_view(qwen_term)  # the user went to the qwen terminal: it is the one used last now
    st.window.focus_view(view)
    view.run_command("qwen_companion_add_selection_to_prompt")
    assert sent(st)[-1] == {"string": "@main.py (line 1) ", "tag": qwen_args["tag"]}

    st.window.focus_view(gemini_term)
    st.window.run_command("qwen_companion_add_path_to_prompt", {"paths": [main]})
    assert sent(st)[-1] == {"string": "@main.py ", "tag": gemini_args["tag"]}

    # the terminal used last has exited: the other one gets it
    gemini_term.settings().set("terminus_view.finished", True)
    st.window.focus_view(view)
    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st)[-1]["tag"] == qwen_args["tag"]

    # neither runs: nothing typed, and the status bar names both commands
    qwen_term.settings().set("terminus_view.finished", True)
    n = len(sent(st))
    view.run_command("qwen_companion_add_file_to_prompt")
    assert len(sent(st)) == n
    assert "Run Qwen Code" in sublime.status_messages[-1] and "Run Gemini CLI" in sublime.status_messages[-1]


def test_a_gemini_terminal_from_before_a_reload_is_found(st, cmds, workspace):
    """The package reloaded: the record of which terminal was used is gone;
    a tagged Gemini CLI terminal still gets the reference."""
    term = st.window.new_file()
    term.settings().set("terminus_view.tag", "qwen-companion-gemini-{}".format(st.window.id()))
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))
    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st) == [{"string": "@main.py ", "tag": "qwen-companion-gemini-{}".format(st.window.id())}]


# -- health, menus ---------------------------------------------------------------------


def test_health_options_for_gemini(cmds):
    s = sublime.Settings({"qwen_command": "qwen", "gemini_command": "~/bin/gemini --yolo"})
    assert cmds.health_options(s, "both") == {"qwen": "qwen", "gemini": os.path.expanduser("~/bin/gemini"),
                                              "cli": "both"}
    assert cmds.health_options(s, "qwen") == {"qwen": "qwen"}  # no gemini check asked for
    assert cmds.health_options(sublime.Settings({}), "gemini") == {"cli": "gemini"}


def test_the_health_panel_shows_gemini_and_the_discovery_files(st, serve):
    wc = serve("both")
    st.window.run_command("qwen_companion_health")
    panel = st.window.find_output_panel("qwen_health")
    assert st.pump_until(lambda: "This window serves" in text_of(panel), timeout=30)
    text = text_of(panel)
    assert text.startswith("qwen-companion ")
    assert "] gemini: " in text and "] qwen: " in text and "] lock_file: " in text
    assert "This window serves Qwen Code and Gemini CLI (setting \"cli\": \"both\"), port {}".format(wc.port) in text
    assert "  Qwen Code: {}\n".format(wc.discovery["qwen"]) in text
    assert "  Gemini CLI: {}\n".format(wc.discovery["gemini"]) in text
    assert sublime.ui_violations == []


def test_the_health_panel_says_what_is_not_served(st, cmds):
    wc = st.wc()
    lines = cmds.discovery_lines(wc)
    assert lines[0].startswith("This window serves Qwen Code (setting \"cli\": \"qwen\")")
    assert lines[1:] == ["  Qwen Code: {}".format(wc.companion.lock_file), "  Gemini CLI: not served"]
    assert cmds.discovery_lines(None) == ["This window has no companion running (see Qwen: Show Log)."]


def test_run_gemini_cli_is_in_the_palette_and_next_to_run_qwen_code():
    commands = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "QwenCompanion.sublime-commands"))
    assert {"caption": "Qwen: Run Gemini CLI", "command": "qwen_companion_run_gemini"} in commands
    menu = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "Main.sublime-menu"))
    tools = [m for m in menu if m["id"] == "tools"][0]["children"][0]["children"]
    names = [c.get("command") for c in tools]
    i = names.index("qwen_companion_run_qwen")
    assert tools[i + 1] == {"caption": "Run Gemini CLI", "command": "qwen_companion_run_gemini"}
    readme = open(os.path.join(SUBLIME_PACKAGE_DIR, "README.md"), encoding="utf-8").read()
    for needed in ("Gemini CLI 0.61.0", "0.61.0 supported", "~/.gemini/settings.json",
                   '`{"ide": {"enabled": true}}`', "Qwen: Run Gemini CLI", "`gemini_command`", "`cli`"):
        assert needed in readme, needed
