"""Paths and user strings written into generated scripts and configs: one quoting function per format.

A hand-off folder (``wave export --engine specforge``'s ``launch.sh`` and ``run.yaml``, the
serve command ``wave export --engine vllm`` prints) carries paths and text a user typed. Each
such string goes through the function of the format it lands in, and every one of them first
refuses control characters (:func:`check_text`): a newline in a folder name would end a
comment line of ``launch.sh`` and run the rest as a command, and no quoting keeps a comment
line one line. Exports call :func:`check_text` on every path and string they take before they
write anything.

>>> print(shell("runs/it's here"))
'runs/it'"'"'s here'
>>> yaml_scalar("a: b # c")
'"a: b # c"'
>>> json_text("x\\\\y")
'"x\\\\\\\\y"'
>>> check_text("runs/a\\nrm -rf ~", what="--run-dir")
Traceback (most recent call last):
...
ValueError: --run-dir 'runs/a\\nrm -rf ~' holds a control character ('\\n' at 6): a path or name written into a script or config must not; rename it without one
"""

from __future__ import annotations

import json
import shlex
import unicodedata
from collections.abc import Iterable
from pathlib import Path


def _control(text: str) -> int | None:
    """Index of the first control character in ``text`` (C0, DEL, C1, line and paragraph separators), or None."""
    for i, c in enumerate(text):
        if unicodedata.category(c) in ("Cc", "Zl", "Zp"):
            return i
    return None


def check_text(text: str | Path, *, what: str) -> str:
    """``text`` as a string, or ``ValueError`` naming ``what`` when it holds a control character."""
    text = str(text)
    i = _control(text)
    if i is not None:
        raise ValueError(f"{what} {text!r} holds a control character ({text[i]!r} at {i}): a path or name written "
                         "into a script or config must not; rename it without one")
    return text


def check_texts(items: Iterable[tuple[str, str | Path | None]]) -> None:
    """:func:`check_text` on each ``(what, text)`` that is not None: the up-front check of an export."""
    for what, text in items:
        if text is not None:
            check_text(text, what=what)


def shell(text: str | Path, *, what: str = "a value") -> str:
    """One bash word that is exactly ``text`` (:func:`shlex.quote`), control characters refused."""
    return shlex.quote(check_text(text, what=what))


def shell_join(argv: Iterable[str | Path], *, what: str = "a command's argument") -> str:
    """A command line whose words are exactly ``argv``, each through :func:`shell`."""
    return " ".join(shell(a, what=what) for a in argv)


def yaml_scalar(text: str | Path, *, what: str = "a value") -> str:
    """A YAML scalar that is exactly ``text`` (a double-quoted flow scalar: JSON's string syntax
    is valid YAML 1.2 and 1.1 for text without control characters), control characters refused."""
    return json.dumps(check_text(text, what=what), ensure_ascii=False)


def json_text(text: str | Path, *, what: str = "a value") -> str:
    """A JSON string that is exactly ``text``, control characters refused."""
    return json.dumps(check_text(text, what=what), ensure_ascii=False)


def comment(text: str | Path, *, what: str = "a value") -> str:
    """``text`` for a ``#`` comment line of a script or YAML file: the same text, which
    :func:`check_text` guarantees stays on its line."""
    return check_text(text, what=what)
