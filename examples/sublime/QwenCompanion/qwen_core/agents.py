"""The agent CLIs a window's companion serves and their terminals: Qwen Code
("Run Qwen Code") and Gemini CLI ("Run Gemini CLI").

- The setting ``cli`` (``"qwen"``, ``"gemini"`` or ``"both"``) becomes the
  companion config's ``cli``; :func:`cli_setting` checks it (another value:
  the default, and a message saying so).
- Each CLI's terminal is a Terminus view tagged with :func:`tag`; the
  folder it runs in and which of the window's agent terminals the user
  started or focused last are kept by :class:`AgentTerminals` (any thread),
  so that "Add to Prompt" types into that one.

The window-level functions (:func:`terminal`, :func:`last_terminal`,
:func:`remember`, :func:`focused`) are the plugin's (``plugin.py`` names them).
"""

import os
import threading

from .views import window_views

#: The values of the setting ``cli``; the first is the default.
CLI_VALUES = ("qwen", "gemini", "both")
DEFAULT_CLI = CLI_VALUES[0]

#: agent -> (name shown, the setting holding its command, the default command)
AGENTS = {
    "qwen": ("Qwen Code", "qwen_command", "qwen"),
    "gemini": ("Gemini CLI", "gemini_command", "gemini"),
}
#: The order "Add to Prompt" falls back to when no terminal was used yet.
AGENT_ORDER = ("qwen", "gemini")


def cli_setting(value):
    """``(cli, problem)``: the setting's value when valid (``None``: the
    default), else the default and a message naming the bad value."""
    if value is None:
        return DEFAULT_CLI, None
    if isinstance(value, str) and value in CLI_VALUES:
        return value, None
    return DEFAULT_CLI, ("the setting \"cli\" is {}, not one of \"qwen\", \"gemini\", \"both\": "
                         "serving Qwen Code only (the default)".format(_shown(value)))


def _shown(value):
    text = '"{}"'.format(value) if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:39] + "\u2026"


def serves(cli, agent):
    """Whether a companion with ``cli`` serves ``agent`` ("qwen" / "gemini")."""
    return cli == "both" or cli == agent


def served_names(cli):
    """The CLIs served, for people: "Qwen Code", "Gemini CLI", "Qwen Code and Gemini CLI"."""
    names = [AGENTS[a][0] for a in AGENT_ORDER if serves(cli, a)]
    return " and ".join(names)


def who(cli):
    """Who proposes an edit in a window whose companion serves ``cli``."""
    return AGENTS[cli][0] if cli in AGENTS else "The CLI"


def name(agent):
    return AGENTS[agent][0]


def command(settings, agent):
    """What "Run Qwen Code" / "Run Gemini CLI" starts: the setting, else the
    CLI's own name."""
    _, key, default = AGENTS[agent]
    return settings.get(key) or default


def tag(window_id, agent):
    """The Terminus tag of the window's terminal of ``agent``; Qwen Code's is
    the one the package always used (a terminal from before a reload is found)."""
    if agent == "qwen":
        return "qwen-companion-{}".format(window_id)
    return "qwen-companion-{}-{}".format(agent, window_id)


def agent_of_tag(window_id, value):
    """The agent whose terminal in window ``window_id`` has Terminus tag ``value``, else None."""
    for agent in AGENT_ORDER:
        if value == tag(window_id, agent):
            return agent
    return None


def running_view(views, wanted):
    """The view tagged ``wanted`` whose program still runs (Terminus marks a
    finished one), else None."""
    for view in views:
        s = view.settings()
        if s.get("terminus_view.tag") == wanted and not s.get("terminus_view.finished"):
            return view
    return None


def not_served_message(cli, agent):
    """What "Run …" tells the user when the companion does not serve
    ``agent`` (None when it does)."""
    if serves(cli, agent):
        return None
    other = "gemini" if agent == "qwen" else "qwen"
    wanted = '"{}" or "both"'.format(agent)
    return ("{} started without the IDE connection: this window's companion serves {} only; set \"cli\" to {} "
            "in Qwen Companion's settings".format(name(agent), name(other), wanted))


class AgentTerminals(object):
    """Per window: the folder each agent terminal runs in, and which one the
    user started or focused last. Any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cwd = {}  # (window id, agent) -> folder
        self._recent = {}  # window id -> agents, most recent first

    def started(self, window_id, agent, cwd):
        with self._lock:
            self._cwd[(window_id, agent)] = cwd
        self.used(window_id, agent)

    def used(self, window_id, agent):
        with self._lock:
            order = [a for a in self._recent.get(window_id, []) if a != agent]
            self._recent[window_id] = [agent] + order

    def cwd(self, window_id, agent):
        with self._lock:
            return self._cwd.get((window_id, agent))

    def order(self, window_id):
        """The agents, the one used last first (then the default order)."""
        with self._lock:
            recent = list(self._recent.get(window_id, []))
        return recent + [a for a in AGENT_ORDER if a not in recent]

    def forget(self, window_id):
        with self._lock:
            self._recent.pop(window_id, None)
            for key in [k for k in self._cwd if k[0] == window_id]:
                del self._cwd[key]


#: The package's record of the agent terminals (every window).
TERMINALS = AgentTerminals()


def remember(window, agent, cwd):
    """"Run Qwen Code" / "Run Gemini CLI" (``agent`` "qwen" / "gemini")
    started the window's terminal of ``agent`` in ``cwd``: the one used last now."""
    TERMINALS.started(window.id(), agent, cwd)


def focused(view):
    """A view got the focus: if it is one of its window's agent terminals,
    that terminal becomes the one used last (Add to Prompt types there)."""
    window = view.window()
    value = view.settings().get("terminus_view.tag")
    if window is None or not value:
        return
    agent = agent_of_tag(window.id(), value)
    if agent is not None:
        TERMINALS.used(window.id(), agent)


def terminal(window, agent):
    """``(view, cwd)`` of the window's terminal of ``agent`` while it runs
    (Terminus marks a finished one), else None. A terminal started before
    the package was reloaded keeps its tag; its folder is then the one
    "Run ..." uses, the window's first."""
    view = running_view(window_views(window), tag(window.id(), agent))
    if view is None:
        return None
    cwd = TERMINALS.cwd(window.id(), agent)
    if cwd is None:
        folders = window.folders()
        cwd = folders[0] if folders else os.path.expanduser("~")
    return view, cwd


def last_terminal(window):
    """``(agent, view, cwd)`` of the running agent terminal the user started
    or focused last in ``window`` (else another one running), or None."""
    for agent in TERMINALS.order(window.id()):
        found = terminal(window, agent)
        if found is not None:
            return (agent,) + found
    return None
