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


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun, singular or plural as the count asks, for a page to glue
    (``{glue:text}`n_compartments_text```) where a sentence counts things on any model.

    >>> counted(1, "compartment"), counted(4, "compartment"), counted(0, "token"), counted(2, "child", "children")
    ('1 compartment', '4 compartments', '0 tokens', '2 children')
    """
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


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


def glue_fields(obj: Any, prefix: str = "") -> None:
    """Glue every field of a dataclass as ``<prefix><field>`` (a nested dataclass as
    ``<prefix><field>_<its field>``), so a page's markdown names each number it prints.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class S:
    ...     ratio: float
    >>> sorted(_fields(S(1.5), "loop_"))
    [('loop_ratio', 1.5)]
    """
    glue_values(**dict(_fields(obj, prefix)))


def _fields(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    import dataclasses

    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += _fields(value, f"{prefix}{f.name}_")
        else:  # a list of layer ids reads as text, so another page can paste it (with :s)
            out.append((f"{prefix}{f.name}", str(value) if isinstance(value, (list, tuple)) else value))
    return out
