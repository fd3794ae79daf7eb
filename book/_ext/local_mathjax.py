"""Sphinx extension: the book's MathJax must be on disk before a build starts.

The book serves MathJax itself (no CDN): ``scripts/fetch_mathjax.sh`` writes it to
``build/mathjax_site/`` (git-ignored), which ``html_extra_path`` copies into the site.
On a fresh clone that folder does not exist yet, and Sphinx would only warn
(``html_extra_path entry ... does not exist``), which ``-W`` turns into a failure that
does not say what to do. This check runs first: it fetches MathJax with that script (from
the npm registry, checksum pinned), so ``jupyter-book build book`` works on a fresh clone,
and stops the build with one line on stderr naming the command only when the fetch fails.
"""

from __future__ import annotations

import subprocess
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


def fetch(confdir: str | Path) -> bool:
    """Run the fetch script from the repository holding ``confdir``; whether it succeeded."""
    script = Path(confdir).resolve().parent / "scripts" / "fetch_mathjax.sh"
    if not script.is_file():
        return False
    print("book build: MathJax is not on disk yet; fetching it once (scripts/fetch_mathjax.sh)", file=sys.stderr)
    return subprocess.run(["bash", str(script)], stdout=subprocess.DEVNULL).returncode == 0


def check(app: Any, config: Any) -> None:
    """``config-inited`` handler: fetch the local MathJax when it is missing; exit with one
    line when it is still missing after that."""
    extra, path = list(config.html_extra_path), config.mathjax_path
    if missing_mathjax(app.confdir, extra, path) and (not fetch(app.confdir) or
                                                      missing_mathjax(app.confdir, extra, path)):
        print(f"book build: MathJax is not on disk (it is served with the book, not from a CDN) and fetching it "
              f"failed: run `{FETCH}` once from the repository root (it needs npm and the npm registry), then "
              "build again", file=sys.stderr)
        sys.exit(2)


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", check, priority=100)  # before Sphinx's own html_extra_path warning (800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
