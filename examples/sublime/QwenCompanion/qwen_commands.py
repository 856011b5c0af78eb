"""The package's window commands: the terminals ("Run Qwen Code", "Run
Gemini CLI", "Open Terminal in Terminus", "Terminal Environment"), "Restart
for This Window", Accept / Reject of a proposal, and the commands that reach
the agent: add a file or selection to the prompt of the agent terminal,
close every proposal, the health report, the log.

- "Run Qwen Code" / "Run Gemini CLI" open a Terminus terminal (tagged per
  window and CLI, see ``qwen_core/agents.py``) with the companion's whole
  environment (the variables of every CLI it serves), running
  ``qwen_command`` / ``gemini_command``. A CLI the companion does not serve
  (setting ``cli``) still starts; the status bar says that it has no IDE
  connection and which setting gives it one.
- "Qwen: Add File to Prompt" / "Qwen: Add Selection to Prompt" type an
  ``@path`` reference (see ``qwen_core/prompt_ref.py``; Gemini CLI reads the
  same syntax) into the agent terminal of this window the user started or
  focused last (Qwen Code's or Gemini CLI's) with ``terminus_send_string``,
  without Enter, and focus it. No such terminal running: a status message
  says so. (Sending to a session elsewhere stays "Qwen Sessions: Send
  Selection".)
- "Qwen: Close All Diffs" rejects every proposal of the window and closes
  their views.
- "Qwen: Health" shows the library's health report (``qc_health_json``):
  library, ``qwen``, ``gemini`` (when served) and ``node`` and their
  versions, the discovery files, the CLIs connected, the plugin MCP server
  and its registration, the participant; then the CLIs this window serves
  and each one's discovery file. It runs on Sublime's async thread (it
  waits for each ``--version``, at most 5 s each).
- "Qwen: Show Log" shows the package's log (the console lines, the newest
  2000) in an output panel.

``plugin.py`` (the companion) is imported lazily as ``core``.
"""

import os
import shlex

import sublime
import sublime_plugin

from .qwen_core import agents as _agents
from .qwen_core import logbuf as _logbuf
from .qwen_core import prompt_ref as _prompt_ref

PREFIX = "Qwen Companion: "
HEALTH_PANEL = "qwen_health"
LOG_PANEL = "qwen_log"


def _core():
    from . import plugin as core  # lazily: plugin.py is the companion's module

    return core


def show_panel(window, name, text):
    """Main thread: ``text`` in the output panel ``name``, shown."""
    panel = window.create_output_panel(name)
    panel.run_command("qwen_companion_set_content", {"text": text})
    window.run_command("show_panel", {"panel": "output." + name})
    return panel


# --------------------------------------------------------------------------
# terminals and the companion


class QwenCompanionShowEnvCommand(sublime_plugin.WindowCommand):
    """Shows (and copies) the lines that point ``qwen`` at this window, in the
    syntax of the shell of setting ``terminal_shell`` (see :func:`plugin.env_lines`)."""

    def run(self):
        core = _core()
        wc = core.companion_for(self.window)
        if wc is None:
            sublime.error_message(core.LOG_PREFIX + "not running (see the console)")
            return
        try:
            lines = core.env_lines(wc.terminal_env())
        except ValueError as e:
            sublime.error_message(core.LOG_PREFIX + "cannot write the terminal environment: {}".format(e))
            return
        text = "\n".join(lines) + "\n"
        sublime.set_clipboard(text)
        panel = self.window.create_output_panel("qwen_companion")
        panel.run_command("qwen_companion_set_content", {
            "text": "Copied to the clipboard; run these in your shell, then {}:\n\n".format(
                " or ".join(a for a in _agents.AGENT_ORDER if _agents.serves(wc.cli, a))) + text})
        self.window.run_command("show_panel", {"panel": "output.qwen_companion"})
        self.window.status_message("The {} environment copied to the clipboard".format(_agents.served_names(wc.cli)))


def terminus_args(wc, command, title, tag=None):
    """``terminus_open`` arguments: the window's env, its first folder as
    the cwd, ``command`` (a list: argv; a string: a shell command) and the
    Terminus ``tag`` that names the terminal (for ``terminus_send_string``)."""
    args = {"title": title, "env": wc.terminal_env()}
    if tag:
        args["tag"] = tag
    if wc.folders:
        args["cwd"] = wc.folders[0]
    if isinstance(command, (list, tuple)) and command:
        args["cmd"] = [str(c) for c in command]
    elif isinstance(command, str) and command.strip():
        args["shell_cmd"] = command
    return args


class QwenCompanionOpenTerminalCommand(sublime_plugin.WindowCommand):
    """Opens a Terminus terminal with the companion's environment (runs ``terminal_cmd``)."""

    def run(self):
        core = _core()
        wc = core.companion_for(self.window)
        if wc is None:
            return
        self.window.run_command("terminus_open", terminus_args(wc, core.settings().get("terminal_cmd"), "Qwen Code"))

    def is_enabled(self):
        core = _core()
        return core.terminus_installed()


def run_agent(window, agent):
    """"Run Qwen Code" (``agent`` "qwen") / "Run Gemini CLI" ("gemini"):
    Terminus in the window's first folder with the companion's environment,
    running the command of the setting ``qwen_command`` / ``gemini_command``."""
    core = _core()
    what = _agents.name(agent)
    wc = core.companion_for(window)
    if wc is None:
        sublime.error_message(core.LOG_PREFIX + "not running (see the console)")
        return
    if not core.terminus_installed():
        sublime.error_message(
            core.LOG_PREFIX + "Run {} needs the Terminus package (Package Control: Install Package, "
            "Terminus). Or run {} in any terminal after \"Qwen Companion: Terminal Environment\".".format(
                what, _agents.AGENTS[agent][2]))
        return
    command = _agents.command(core.settings(), agent)
    args = terminus_args(wc, command, what, core.terminal_tag(window, agent))
    core.remember_terminal(window, agent, args.get("cwd") or os.path.expanduser("~"))
    window.run_command("terminus_open", args)
    problem = _agents.not_served_message(wc.cli, agent)
    if problem is not None:
        window.status_message(PREFIX + problem)


class QwenCompanionRunQwenCommand(sublime_plugin.WindowCommand):
    """"Qwen Companion: Run Qwen Code": Terminus in the window's folder with
    the env, running ``qwen_command`` (default ``qwen``)."""

    def run(self):
        run_agent(self.window, "qwen")


class QwenCompanionRunGeminiCommand(sublime_plugin.WindowCommand):
    """"Qwen: Run Gemini CLI": Terminus in the window's folder with the env,
    running ``gemini_command`` (default ``gemini``)."""

    def run(self):
        run_agent(self.window, "gemini")


class QwenCompanionRestartCommand(sublime_plugin.WindowCommand):
    """Restarts this window's companion (new port, new lock file), and the
    plugin host if it failed to start."""

    def run(self):
        core = _core()
        core._library_problem[0] = None
        core.close_window_companion(self.window.id())
        core.start_companion(self.window)
        if core.plugin_host(create=False) is None:
            core._hosts.reset()
            core.plugin_host(create=True)


# --------------------------------------------------------------------------
# add to the prompt


NO_TERMINAL = ("no Qwen Code or Gemini CLI terminal runs in this window: start one with \"Qwen Companion: Run "
               "Qwen Code\" or \"Qwen: Run Gemini CLI\" (the reference was not typed)")


def send_to_agent(window, text, found=None):
    """Types ``text`` into the window's agent terminal used last (``found``:
    ``last_agent_terminal``'s answer) and focuses it. Returns False (and
    says why in the status bar) when none is running."""
    core = _core()
    found = found or core.last_agent_terminal(window)
    if found is None:
        window.status_message(PREFIX + NO_TERMINAL)
        return False
    agent, view, _ = found
    window.run_command("terminus_send_string", {"string": text, "tag": core.terminal_tag(window, agent)})
    window.focus_view(view)
    return True


def add_to_prompt(window, view, with_lines):
    """The reference to ``view``'s file (with the selected lines when
    ``with_lines``) typed into the agent terminal; False when nothing was typed."""
    core = _core()
    path = view.file_name() if view is not None else None
    if not path or view.settings().get(core.IS_DIFF):
        window.status_message(PREFIX + "this view is not a saved file: nothing to add to the prompt")
        return False
    found = core.last_agent_terminal(window)
    if found is None:
        return send_to_agent(window, "")
    lines = None
    if with_lines:
        lines = _prompt_ref.selection_lines(
            (view.rowcol(r.begin()), view.rowcol(r.end())) for r in view.sel() if not r.empty())
        if lines is None:  # no selection: the caret's line
            caret = view.sel()[0].b if len(view.sel()) else 0
            row = view.rowcol(caret)[0] + 1
            lines = (row, row)
    try:
        text = _prompt_ref.reference(path, found[2], lines[0] if lines else None, lines[1] if lines else None,
                                     windows=sublime.platform() == "windows")
    except _prompt_ref.ReferenceError_ as e:
        window.status_message(PREFIX + str(e))
        return False
    return send_to_agent(window, text, found)


class _AddToPrompt:
    """The view's file (``WITH_LINES``: and its selected lines) typed into the
    agent terminal; a mixin, so that Sublime registers only the two commands."""

    WITH_LINES = False

    def run(self, edit):
        window = self.view.window()
        if window is not None:
            add_to_prompt(window, self.view, with_lines=self.WITH_LINES)

    def is_enabled(self):
        return bool(self.view.file_name())


class QwenCompanionAddFileToPromptCommand(_AddToPrompt, sublime_plugin.TextCommand):
    """"Qwen: Add File to Prompt": ``@<file> `` in the agent terminal used last."""


class QwenCompanionAddSelectionToPromptCommand(_AddToPrompt, sublime_plugin.TextCommand):
    """"Qwen: Add Selection to Prompt": ``@<file> (lines A-B) `` in the agent terminal used last."""

    WITH_LINES = True


class QwenCompanionAddPathToPromptCommand(sublime_plugin.WindowCommand):
    """The side bar's "Qwen: Add to Prompt": ``@<file>`` for each file picked."""

    def run(self, paths=()):
        core = _core()
        found = core.last_agent_terminal(self.window)
        if found is None:
            send_to_agent(self.window, "")
            return
        refs = []
        for path in paths:
            if not os.path.isfile(path):
                continue
            try:
                refs.append(_prompt_ref.reference(path, found[2], windows=sublime.platform() == "windows"))
            except _prompt_ref.ReferenceError_ as e:
                self.window.status_message(PREFIX + str(e))
                return
        if refs:
            send_to_agent(self.window, "".join(refs), found)

    def is_visible(self, paths=()):
        return any(os.path.isfile(p) for p in paths)


# --------------------------------------------------------------------------
# diffs


class QwenCompanionSetContentCommand(sublime_plugin.TextCommand):
    """Internal: replaces the whole buffer (used for proposed diffs)."""

    def run(self, edit, text=""):
        self.view.replace(edit, sublime.Region(0, self.view.size()), text)
        self.view.sel().clear()
        self.view.sel().add(sublime.Region(0, 0))

    def is_visible(self):
        return False


def decide(view, accept):
    core = _core()
    wc = core.companion_for_view(view)
    if wc is None:  # its companion is gone: nothing waits for this view
        sublime.status_message("Qwen Code no longer waits for this diff")
        core.discard_diff_view(view)
        return
    wc.decide(view, accept)


class QwenCompanionAcceptDiffCommand(sublime_plugin.TextCommand):
    """Accept the proposed change, as edited in this view (also ctrl+s /
    cmd+s in the proposal view: see Default.sublime-keymap)."""

    def run(self, edit):
        decide(self.view, accept=True)

    def is_enabled(self):
        return _core()._is_diff(self.view)


class QwenCompanionRejectDiffCommand(sublime_plugin.TextCommand):
    """Reject the proposed change."""

    def run(self, edit):
        decide(self.view, accept=False)

    def is_enabled(self):
        return _core()._is_diff(self.view)


class QwenCompanionCloseAllDiffsCommand(sublime_plugin.WindowCommand):
    """"Qwen: Close All Diffs": reject every proposal of this window."""

    def run(self):
        wc = _core().companion_for(self.window, create=False)
        n = wc.close_all_diffs() if wc is not None else 0
        self.window.status_message(PREFIX + ("rejected and closed {} proposal{}".format(n, "" if n == 1 else "s")
                                             if n else "no proposal is open"))


# --------------------------------------------------------------------------
# health and log


def _program(command):
    """The program of a command setting (a list: its first item; a string:
    its first word), or None."""
    if isinstance(command, (list, tuple)) and command:
        return str(command[0])
    if isinstance(command, str) and command.strip():
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if words:
            return os.path.expanduser(words[0])
    return None


def health_options(settings, cli=None):
    """``qc_health_json`` options from the settings: the ``qwen`` program
    of ``qwen_command``, ``node_path``, and with ``cli`` "gemini" or "both"
    (the CLIs served) that ``cli`` and the ``gemini`` program of
    ``gemini_command`` (the ``gemini`` check)."""
    options = {}
    gemini = cli is not None and _agents.serves(cli, "gemini")
    for agent in _agents.AGENT_ORDER:
        program = _program(settings.get(_agents.AGENTS[agent][1]))
        if program and (agent != "gemini" or gemini):
            options[agent] = program
    if settings.get("node_path"):
        options["node"] = os.path.expanduser(settings.get("node_path"))
    if gemini:
        options["cli"] = cli
    return options


def discovery_lines(wc):
    """The CLIs the window's companion serves and each one's discovery file."""
    if wc is None:
        return ["This window has no companion running (see Qwen: Show Log)."]
    lines = ["This window serves {} (setting \"cli\": \"{}\"), port {}:".format(
        _agents.served_names(wc.cli), wc.cli, wc.port)]
    for agent in _agents.AGENT_ORDER:
        path = (wc.discovery or {}).get(agent)
        lines.append("  {}: {}".format(_agents.name(agent), path or "not served"))
    return lines


def health_text(qc, report, wc=None):
    return "\n".join(qc.health_report_lines(report) + [""] + discovery_lines(wc)) + "\n"


def run_health(window):
    """Async thread: the report for ``window``; shown from the main thread."""
    core = _core()
    try:
        qc = core.import_binding()
        wc = core.companion_for(window, create=False)
        host = core.plugin_host(create=False)
        participant = None
        try:
            from . import participant as sessions

            wp = sessions.participant_for(window)
            participant = wp.participant if wp is not None and not wp.closed else None
        except ImportError:
            participant = None
        s = core.settings()
        cli = wc.cli if wc is not None else core.cli_of(s)
        report = qc.health(health_options(s, cli), companion=wc.companion if wc is not None else None,
                           plugin_host=host, participant=participant, library=core.library_path())
        text = health_text(qc, report, wc)
    except Exception as e:
        text = "The health report could not be made: {}\n".format(e)
    core.log("health report:\n" + text.rstrip("\n"))
    sublime.set_timeout(lambda: show_panel(window, HEALTH_PANEL, text), 0)


class QwenCompanionHealthCommand(sublime_plugin.WindowCommand):
    """"Qwen: Health": the library's health report in an output panel."""

    def run(self):
        show_panel(self.window, HEALTH_PANEL, "Checking qwen-companion, the CLIs and node...\n")
        window = self.window
        sublime.set_timeout_async(lambda: run_health(window), 0)


class QwenCompanionShowLogCommand(sublime_plugin.WindowCommand):
    """"Qwen: Show Log": the package's log (its newest lines) in an output panel."""

    def run(self):
        show_panel(self.window, LOG_PANEL, _logbuf.text() or "(nothing logged yet)\n")
