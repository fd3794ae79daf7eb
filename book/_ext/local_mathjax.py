"""Sphinx extension: the book's MathJax must be on disk before a build starts.

The book serves MathJax itself (no CDN): ``scripts/fetch_mathjax.sh`` writes it to
``build/mathjax_site/`` (git-ignored), which ``html_extra_path`` copies into the site.
On a fresh clone that folder does not exist yet, and Sphinx would only warn
(``html_extra_path entry ... does not exist``), which ``-W`` turns into a failure that
does not say what to do. This check runs first and stops the build with one line on
stderr naming the command to run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

FETCH = "bash scripts/fetch_mathjax.sh"


def missing_mathjax(confdir: str | Path, extra_paths: list[str], mathjax_path: str) -> bool:
    """Whether a local ``mathjax_path`` (relative to the site's ``_static/``) is absent from
    every ``html_extra_path`` entry; a URL (CDN) is never missing."""
    if "://" in mathjax_path or mathjax_path.startswith("//"):
        return False
    return not any((Path(confdir) / entry / "_static" / mathjax_path).is_file() for entry in extra_paths)


def check(app: Any, config: Any) -> None:
    """``config-inited`` handler: exit with one line when the local MathJax is missing."""
    if missing_mathjax(app.confdir, list(config.html_extra_path), config.mathjax_path):
        print(f"book build: MathJax is not on disk (it is served with the book, not from a CDN): run `{FETCH}` "
              "once from the repository root, then build again", file=sys.stderr)
        sys.exit(2)


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", check, priority=100)  # before Sphinx's own html_extra_path warning (800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
