"""Tables formatted for reading in the book: fixed decimals, no index, no ``9.57e-01``.

>>> import pandas as pd
>>> format_table(pd.DataFrame({"x": [0.95700001], "n": [3]})).to_html().count("0.957")
1
>>> key_value_table({"N": 30, "hidden size": 576}).to_html().count("<td")
4
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: Format of float columns that ``formats`` does not name.
DEFAULT_FLOAT = "{:.3f}"


def format_table(df: pd.DataFrame, formats: Mapping[str, str] | None = None, *, caption: str | None = None,
                 na_rep: str = "-") -> Any:
    """A pandas Styler of ``df`` without its index: ``formats`` maps column -> format
    string (e.g. ``"{:.1%}"``); other float columns get :data:`DEFAULT_FLOAT`."""
    fmt = {c: DEFAULT_FLOAT for c in df.columns if pd.api.types.is_float_dtype(df[c])}
    fmt.update({c: f for c, f in (formats or {}).items() if c in df.columns})
    style = df.style.format(fmt, na_rep=na_rep).hide(axis="index")
    return style.set_caption(caption) if caption else style


def key_value_table(mapping: Mapping[str, Any]) -> Any:
    """A two-column table of ``mapping`` (names, values), without index or header row, as a
    Styler: the book renders it as an HTML table (a markdown table in an output reaches the
    page as raw pipes, since myst-nb renders outputs as CommonMark). An integer prints with
    thousands separators; every other value as its text."""
    rows = [(str(k), f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)) for k, v in mapping.items()]
    return pd.DataFrame(rows, columns=["name", "value"]).style.hide(axis="index").hide(axis="columns")
