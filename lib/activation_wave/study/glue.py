"""Glue between a chapter notebook and the book: values and figures named for the prose
(``{glue:text}`` / ``{glue:figure}`` in myst-nb), without displaying them in place."""

from __future__ import annotations

from typing import Any


def join_words(items: list[str]) -> str:
    """Items of a sentence joined as prose: ``a``, ``a and b``, ``a, b and c``.

    >>> join_words(["a"]), join_words(["a", "b"]), join_words(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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
