"""A proposal as shown in a Sublime Text view, and the way back from the
view's text to what Qwen Code gets (line endings kept)."""

import difflib


def _line_endings(text):
    """The ending of each line of ``text`` that has one ("\r\n" or "\n")."""
    return ["\r\n" if line.endswith("\r") else "\n" for line in text.split("\n")[:-1]]


class ShownProposal(object):
    """A proposal as shown in a view, and the way back from the view's text.

    Sublime Text buffers hold "\n" only, so every "\r\n" of the proposal
    is shown as "\n" (a lone "\r" stays text). The text sent back (Accept,
    closeDiff) is:

    - the proposal itself, exactly, when the buffer is unchanged;
    - for a proposal with only CRLF endings (the view says "Windows"), the
      buffer with every "\n" as "\r\n";
    - for a proposal with only LF endings, the buffer as it is;
    - for mixed endings, the buffer's lines matched against the proposal's
      (difflib): a kept line keeps its ending, a changed line takes the
      ending of the line it replaces, an added line the ending of the line
      before it. So the lines the user did not touch keep their endings.
    """

    def __init__(self, proposed):
        self.proposed = proposed
        self.text = proposed.replace("\r\n", "\n")
        self.endings = _line_endings(proposed)
        crlf = self.endings.count("\r\n")
        self.crlf = crlf > 0 and crlf == len(self.endings)
        self.mixed = 0 < crlf < len(self.endings)

    def final(self, buffer):
        if buffer == self.text:
            return self.proposed
        if self.crlf:
            return buffer.replace("\n", "\r\n")
        if not self.mixed:
            return buffer
        return self._restore(buffer)

    def _restore(self, buffer):
        old = self.text.split("\n")
        new = buffer.split("\n")
        got = [None] * (len(new) - 1)  # the ending after each new line but the last

        def ending(i):
            return self.endings[i] if 0 <= i < len(self.endings) else None

        # Unchanged head and tail first (linear), difflib for the middle; its
        # autojunk keeps big files fast (frequent lines such as blank ones
        # are matched by extending the matches around them).
        n = min(len(old), len(new))
        head = 0
        while head < n and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < n - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        blocks = [("equal", 0, head, 0, head), ("equal", len(old) - tail, len(old), len(new) - tail, len(new))]
        matcher = difflib.SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            blocks.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
        for tag, i1, i2, j1, j2 in blocks:
            for j in range(j1, min(j2, len(got))):
                if tag == "equal":
                    got[j] = ending(i1 + j - j1)
                elif tag == "replace":
                    got[j] = ending(min(i1 + j - j1, i2 - 1))
                # "insert": filled below from the line before
        counts = (self.endings.count("\r\n"), self.endings.count("\n"))
        previous = "\r\n" if counts[0] > counts[1] else "\n"
        if got and got[0] is None:
            previous = ending(0) or previous  # added before the first line
        for j, e in enumerate(got):
            if e is None:
                got[j] = previous
            previous = got[j]
        return "".join(line + e for line, e in zip(new, got)) + new[-1]


class DiffState(object):
    """One proposed diff, shared by the library thread and the UI thread
    (always under WindowCompanion.diff_lock)."""

    def __init__(self, path, proposed):
        self.path = path
        self.proposed = proposed  # the newest proposal from the CLI
        self.generation = 1  # bumped by each new proposal for the path
        self.view = None  # the scratch view, once the UI thread made it
        self.shown = None  # the ShownProposal in the view
        self.shown_generation = 0  # the generation it shows
        self.label = None  # "CLI #2": which CLI proposed it, when more than one is connected

    def is_answered_by(self, view):
        """True when ``view`` is this diff's view (not a stale one)."""
        return self.view is not None and view is not None and self.view.id() == view.id()

    def up_to_date(self):
        return self.shown is not None and self.shown_generation == self.generation
