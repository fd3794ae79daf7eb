"""Progress of long steps: a tqdm bar on a terminal, a plain line every few percent in a log.

tqdm redraws one line with carriage returns, which a log file (``wave study > log``,
CI) shows as nothing at all until the end. When stderr is not a terminal,
:func:`progress_bar` returns a :class:`LineProgress` instead: the same ``update`` /
``set_postfix`` / ``close`` calls, printing one line each time another ``every`` share
of the work is done.

>>> import io
>>> out = io.StringIO()
>>> bar = LineProgress(total=272, desc="dequantize", unit="tensor", every=0.25, file=out)
>>> for _ in range(272):
...     bar.update(1)
>>> bar.close()
>>> [line.split(",")[0] for line in out.getvalue().splitlines()]
['[dequantize] 68/272 tensor (25%)', '[dequantize] 136/272 tensor (50%)', '[dequantize] 204/272 tensor (75%)', '[dequantize] 272/272 tensor (100%)']
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO


class LineProgress:
    """A minimal tqdm stand-in that prints ``[desc] n/total unit (p%), elapsed`` lines."""

    def __init__(self, iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, every: float = 0.1, file: TextIO | None = None):
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
        self.desc, self.unit, self.n, self.every = desc, unit, initial, every
        self.file = file
        self.postfix = ""
        self.t0 = time.time()
        self._last = self._bucket(initial)

    def _bucket(self, n: int) -> int:
        """How many whole ``every`` shares of the total ``n`` completes (a line per new one)."""
        if not self.total:
            return 0
        return int(n / self.total / self.every + 1e-9)

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable or ():
            yield item
            self.update(1)

    def update(self, n: int = 1) -> None:
        self.n += n
        bucket = self._bucket(self.n)
        if bucket > self._last:
            self._print()
            self._last = bucket

    def set_postfix(self, **kwargs: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kwargs.items())

    def _print(self) -> None:
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        print(f"[{self.desc}] {self.n}/{self.total} {self.unit}{pct}, {time.time() - self.t0:.0f} s{extra}",
              file=self.file or sys.stderr, flush=True)

    def close(self) -> None:
        """Nothing to tidy: every line is already complete."""


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, disable: bool = False) -> Any:
    """tqdm on a terminal, :class:`LineProgress` otherwise, or a silent tqdm when ``disable``."""
    from tqdm import tqdm

    if disable or sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, disable=disable)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial)
