"""Sphinx extension: a page that glues a value from a notebook depends on that notebook.

A static page can quote a value glued in an executed notebook
(``{glue:text}`chapters/06b_drafter_strength.ipynb::strength_advice:s```, the rerun page's
short answer). Sphinx does not know that the page depends on the notebook, so an
incremental build after the notebook is re-executed keeps the old value. This extension
records the dependency when the page is read, and Sphinx re-reads the page whenever the
notebook changes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: ``{glue}`` / ``{glue:text}`` / ``{glue:md}`` ... roles whose key names another document.
CROSS_GLUE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`:]+\.ipynb)::")


def glued_notebooks(text: str) -> list[str]:
    """The notebooks (paths as written, relative to the page) that ``text`` glues from, once each.

    >>> glued_notebooks("a {glue:text}`chapters/x.ipynb::k:s` b {glue}`chapters/x.ipynb::j` {glue:text}`local`")
    ['chapters/x.ipynb']
    """
    return list(dict.fromkeys(CROSS_GLUE.findall(text)))


def note(app: Any, docname: str, source: list[str]) -> None:
    """``source-read`` handler: record each glued notebook (relative to the page) as a
    dependency of ``docname``, by absolute path."""
    here = Path(app.env.doc2path(docname)).parent
    for path in glued_notebooks(source[0]):
        app.env.note_dependency(str((here / path).resolve()))


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", note)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
