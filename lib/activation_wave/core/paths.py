"""Where things live: the repository, the package, its profiles, and the cache root.

The one place that knows the layout on disk, so that modules needing a path (results
files, the study runner, the capture cache) do not import a model loader to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The package folder (``lib/activation_wave``).
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The repository root (the folder holding ``lib/``, ``data/``, ``book/``).
REPO_ROOT = PACKAGE_DIR.parents[1]
#: The run profiles shipped with the package (``smoke``, ``default``, ``paper``).
PROFILE_DIR = PACKAGE_DIR / "profiles"


def cache_root() -> Path:
    """Root of all caches: ``$WAVE_CACHE`` or ``~/.cache/activation_wave``. A ``WAVE_CACHE`` set
    but empty raises ``ValueError`` (it would cache into the current folder)."""
    raw = os.environ.get("WAVE_CACHE")
    if raw is None:
        return Path.home() / ".cache" / "activation_wave"
    if not raw.strip():
        raise ValueError(f"WAVE_CACHE is set but empty ({raw!r}), which would put the caches (gigabytes) in the "
                         "current folder; unset it (unset WAVE_CACHE) for ~/.cache/activation_wave, or set it to a "
                         "folder, e.g. export WAVE_CACHE=$HOME/.cache/activation_wave")
    return Path(raw)
