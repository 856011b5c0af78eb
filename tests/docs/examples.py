#!/usr/bin/env python3
"""Extracts the code examples of the project's Markdown files so that the
test suites run them (tests/python for Python and C, bindings/kotlin/run-tests.sh
for Kotlin, tests/neovim/run.sh for Lua).

Every fenced block with a language is an example:
  ```python / ```c / ```kotlin / ```lua   run (or, for Kotlin, compiled);
  ```sh / ```bash / ```console             shell commands, not run;
  a fence without a language              a listing (layout, output), not run;
  any other language                      an error (so nothing is skipped by accident).

An example may be a fragment. HTML comments right before its fence (invisible
when the Markdown is rendered) say how to make it a program:

  <!-- example: wrap=main -->        C: the block becomes the body of
                                     `int main(void) { ... return 0; }`
                                     (Kotlin: of `fun main() { ... }`);
  <!-- example-prelude
  code                               hidden code put before the block (C: before
  -->                                main; Kotlin: at top level; Python/Lua: first);
  <!-- example-epilogue
  code                               hidden code put after the block (inside
  -->                                main for C with wrap=main).

Usage:
  examples.py list LANG                 one line per example: FILE:LINE
  examples.py write LANG DIR            writes DIR/<n>-<file>-<line>.<ext> per example
                                        and prints their paths
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_LANGS = {"python": "py", "c": "c", "kotlin": "kt", "lua": "lua"}
SKIP_LANGS = {"sh", "bash", "console", "shell"}


def doc_files():
    """README.md, the bindings' READMEs and examples/*/README.md."""
    out = [os.path.join(ROOT, "README.md")]
    for base in ("bindings", "examples"):
        d = os.path.join(ROOT, base)
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name, "README.md")
            if os.path.isfile(p):
                out.append(p)
    return out


class Example(object):
    def __init__(self, path, line, lang, code, wrap, prelude, epilogue):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.wrap, self.prelude, self.epilogue = wrap, prelude, epilogue

    @property
    def where(self):
        return "%s:%d" % (os.path.relpath(self.path, ROOT), self.line)

    def program(self):
        pre = "\n".join(self.prelude)
        post = "\n".join(self.epilogue)
        if self.lang == "c" and self.wrap == "main":
            body = "\n".join("    " + l for l in (self.code + "\n" + post).splitlines())
            return "%s\nint main(void) {\n#line %d \"%s\"\n%s\n    return 0;\n}\n" % (
                pre, self.line + 1, self.where.split(":")[0], body)
        if self.lang == "kotlin" and self.wrap == "main":
            body = "\n".join("    " + l for l in (self.code + "\n" + post).splitlines())
            return "%s\nfun main() {\n%s\n}\n" % (pre, body)
        if self.wrap not in (None, ""):
            raise ValueError("%s: wrap=%s is not known for %s" % (self.where, self.wrap, self.lang))
        return "%s\n%s\n%s\n" % (pre, self.code, post)


FENCE = re.compile(r"^```\s*([A-Za-z0-9_+-]*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
BLOCK_COMMENT = re.compile(r"^<!--\s*example-(prelude|epilogue)\s*$")


def parse(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    examples = []
    pending = {"wrap": None, "prelude": [], "epilogue": []}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE.match(line)
        if m:
            for part in m.group(1).split():
                k, _, v = part.partition("=")
                if k != "wrap":
                    raise ValueError("%s:%d: unknown example directive %r" % (path, i + 1, part))
                pending["wrap"] = v
            i += 1
            continue
        m = BLOCK_COMMENT.match(line)
        if m:
            j = i + 1
            while j < len(lines) and lines[j].strip() != "-->":
                j += 1
            if j == len(lines):
                raise ValueError("%s:%d: unterminated example-%s" % (path, i + 1, m.group(1)))
            pending[m.group(1)].extend(lines[i + 1:j])
            i = j + 1
            continue
        m = FENCE.match(line)
        if m:
            lang = m.group(1).lower()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                raise ValueError("%s:%d: unterminated code block" % (path, i + 1))
            code = "\n".join(lines[i + 1:j])
            if lang in RUN_LANGS:
                examples.append(Example(path, i + 1, lang, code, pending["wrap"],
                                        pending["prelude"], pending["epilogue"]))
            elif lang and lang not in SKIP_LANGS:
                raise ValueError("%s:%d: code block in %r: neither run nor a known skip "
                                 "language" % (path, i + 1, lang))
            elif pending["wrap"] or pending["prelude"] or pending["epilogue"]:
                raise ValueError("%s:%d: example directives before a block that is not run"
                                 % (path, i + 1))
            pending = {"wrap": None, "prelude": [], "epilogue": []}
            i = j + 1
            continue
        if line.strip() and (pending["wrap"] or pending["prelude"] or pending["epilogue"]):
            raise ValueError("%s:%d: example directives must come right before a code block"
                             % (path, i + 1))
        i += 1
    return examples


def examples(lang):
    out = []
    for p in doc_files():
        out.extend(e for e in parse(p) if e.lang == lang)
    return out


def main(argv):
    if len(argv) < 3 or argv[1] not in ("list", "write") or argv[2] not in RUN_LANGS:
        sys.stderr.write(__doc__)
        return 2
    lang = argv[2]
    found = examples(lang)
    if argv[1] == "list":
        for e in found:
            print(e.where)
        return 0
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    out_dir = argv[3]
    os.makedirs(out_dir, exist_ok=True)
    for n, e in enumerate(found):
        slug = re.sub(r"[^A-Za-z0-9]+", "_", os.path.relpath(e.path, ROOT)).strip("_")
        name = "ex%d_%s_%d.%s" % (n, slug, e.line, RUN_LANGS[lang])
        p = os.path.join(out_dir, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write(e.program())
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
