"""A small stand-in for Sublime Text's ``sublime_plugin`` module, for tests.

Command and listener classes register themselves when the plugin module
defines them; :func:`emit` delivers an event to every listener instance.

As in Sublime Text, an event ``on_X`` is delivered to ``on_X`` on the
calling (UI) thread, then to ``on_X_async`` on the one async thread (see
``sublime.run_async``). Here :func:`emit` waits until that async work (and
what the sync hooks queued with ``set_timeout_async``) is done before it
returns, so a test sees its effects at once; it still runs
on the other thread (UI calls made there are violations).
"""

import re

#: The event callbacks Sublime Text 4 delivers to an EventListener (its
#: sublime_plugin.all_callbacks); only these ``*_async`` variants exist.
ALL_CALLBACKS = frozenset("""
on_init on_new on_clone on_load on_revert on_reload on_pre_close on_close on_pre_save
on_post_save on_pre_move on_post_move on_modified on_selection_modified on_activated
on_deactivated on_query_context on_query_completions on_hover on_text_command
on_window_command on_post_text_command on_post_window_command on_modified_async
on_selection_modified_async on_pre_save_async on_post_save_async on_post_move_async
on_activated_async on_deactivated_async on_new_async on_load_async on_revert_async
on_reload_async on_clone_async on_new_buffer on_new_buffer_async on_associate_buffer
on_associate_buffer_async on_close_buffer on_close_buffer_async on_new_project
on_new_project_async on_load_project on_load_project_async on_pre_save_project
on_post_save_project on_post_save_project_async on_pre_close_project on_new_window
on_new_window_async on_pre_close_window on_exit
""".split())

_text_commands = {}
_window_commands = {}
_listener_classes = []
_listeners = []


def reset():
    _text_commands.clear()
    _window_commands.clear()
    del _listener_classes[:]
    del _listeners[:]


def command_name(cls_name):
    base = cls_name[: -len("Command")] if cls_name.endswith("Command") else cls_name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


def text_command(name):
    return _text_commands.get(name)


def window_command(name):
    return _window_commands.get(name)


def listeners():
    if not _listeners and _listener_classes:
        _listeners.extend(cls() for cls in _listener_classes)
    return list(_listeners)


def emit(event, *args):
    import sublime  # the stub (imported lazily: it imports this module)

    async_hooks = []
    for listener in listeners():
        hook = getattr(listener, event, None)
        if hook is not None:
            hook(*args)
        async_name = event + "_async"
        async_hook = getattr(listener, async_name, None) if async_name in ALL_CALLBACKS else None
        if async_hook is not None:
            async_hooks.append(async_hook)
    for hook in async_hooks:
        sublime.run_async(lambda hook=hook: hook(*args))
    sublime.wait_async()  # also what the sync hooks handed over (set_timeout_async)


class Command(object):
    def is_enabled(self, *args, **kwargs):
        return True

    def is_visible(self, *args, **kwargs):
        return True


class TextCommand(Command):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _text_commands[command_name(cls.__name__)] = cls

    def __init__(self, view):
        self.view = view


class WindowCommand(Command):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _window_commands[command_name(cls.__name__)] = cls

    def __init__(self, window):
        self.window = window


class ApplicationCommand(Command):
    pass


class EventListener(object):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _listener_classes.append(cls)


class ViewEventListener(object):
    def __init__(self, view):
        self.view = view

    @classmethod
    def is_applicable(cls, settings):
        return True
