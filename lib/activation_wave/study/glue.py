"""Glue between a chapter notebook and the book: values and figures named for the prose
(``{glue:text}`` / ``{glue:figure}`` in myst-nb), without displaying them in place."""

from __future__ import annotations

from typing import Any


def glue_values(**values: Any) -> None:
    """``glue(name, value, display=False)`` for every keyword."""
    from myst_nb import glue

    for name, value in values.items():
        glue(name, value, display=False)


def glue_figure(name: str, fig: Any) -> None:
    """Glue a matplotlib figure under ``name`` and close it (the book places it)."""
    import matplotlib.pyplot as plt
    from myst_nb import glue

    glue(name, fig, display=False)
    plt.close(fig)
