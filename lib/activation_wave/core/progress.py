"""Progress of long steps: a tqdm bar on a terminal, a plain line every few percent in a log.

tqdm redraws one line with carriage returns, which a log file (``wave study > log``,
CI) shows as nothing at all until the end. When stderr is not a terminal,
:func:`progress_bar` returns a :class:`LineProgress` instead: the same ``update`` /
``set_postfix`` / ``close`` calls, printing one line each time another ``every`` share
of the work is done, with the time elapsed and an estimate of the rest.

>>> import io
>>> out = io.StringIO()
>>> bar = LineProgress(total=272, desc="dequantize", unit="tensor", every=0.25, file=out)
>>> for _ in range(272):
...     bar.update(1)
>>> bar.close()
>>> [line.split(",")[0] for line in out.getvalue().splitlines()]
['[dequantize] 68/272 tensor (25%)', '[dequantize] 136/272 tensor (50%)', '[dequantize] 204/272 tensor (75%)', '[dequantize] 272/272 tensor (100%)']

Inside ``wave study`` a chapter runs in a notebook kernel, whose stderr ends up in the
executed notebook, not in the study's log. :func:`relay` bridges that: while a notebook
runs, it names a file in :data:`RELAY_ENV`, which the kernel inherits; the outermost
progress bar of the kernel (drafter k of n, capture shard k of n, ...) appends its lines
there, whether or not the caller asked for a visible bar, at least every
:data:`RELAY_EVERY_S` seconds while it advances; and :func:`relay` prints them to the
study's stderr as they come.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

#: Environment variable naming the file that progress lines are relayed through (see :func:`relay`).
RELAY_ENV = "WAVE_PROGRESS_RELAY"
#: A relayed bar writes a line at least this often while it advances (and at every ``every`` share).
RELAY_EVERY_S = 60.0

#: Bars of this process that are still running, outermost first (only the outermost relays).
_OPEN: list[LineProgress] = []


def _now() -> float:
    """The clock of every bar (one place for tests to replace)."""
    return time.time()


def _eta(elapsed: float, n: int, total: int | None, free: int = 0) -> str:
    """``", ~N s left"`` from the rate so far (nothing before the first step or after the last);
    ``free`` of the ``n`` steps done cost nothing (resumed from a cache) and are left out of the rate.

    >>> _eta(30.0, 3, 10), _eta(30.0, 0, 10), _eta(30.0, 10, 10), _eta(30.0, 8, 10, free=5)
    (', ~70 s left', '', '', ', ~20 s left')
    """
    if not total or n - free <= 0 or n >= total:
        return ""
    return f", ~{elapsed / (n - free) * (total - n):.0f} s left"


class LineProgress:
    """A minimal tqdm stand-in that prints ``[desc] n/total unit (p%), elapsed, ~rest left`` lines.

    ``quiet``: print nothing to ``file`` (stderr); ``relay``: also append every line to this
    file, and between ``every`` shares whenever :data:`RELAY_EVERY_S` have passed, as long as
    no other relaying bar of this process is still open (a bar inside another's step stays
    silent there: the outer bar already counts it)."""

    def __init__(self, iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, every: float = 0.1, file: TextIO | None = None,
                 quiet: bool = False, relay: str | Path | None = None):
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
        self.desc, self.unit, self.n, self.every = desc, unit, initial, every
        self.free = initial  # steps done before this run or from a cache (:meth:`resumed`): not in the estimate
        self.file, self.quiet = file, quiet
        self.postfix = ""
        self.t0 = self._relayed_at = self._said_at = _now()
        self._last = self._bucket(initial)
        self.closed = False
        self.relay = Path(relay) if relay and not any(b.relay and not b.done for b in _OPEN) else None
        _OPEN.append(self)

    @property
    def done(self) -> bool:
        return self.closed or (self.total is not None and self.n >= self.total)

    def _bucket(self, n: int) -> int:
        """How many whole ``every`` shares of the total ``n`` completes (a line per new one)."""
        if not self.total:
            return 0
        return int(n / self.total / self.every + 1e-9)

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable or ():
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        bucket = self._bucket(self.n)
        if bucket > self._last:
            self._print(to_file=True)
            self._last = bucket
        elif self.relay is not None and _now() - self._relayed_at >= RELAY_EVERY_S:
            self._print(to_file=False)
        elif self.relay is None and not self.quiet and _now() - self._said_at >= RELAY_EVERY_S:
            # slow steps (a drafter every half hour) in a plain log: a line per step once a minute has passed
            self._print(to_file=True)

    def resumed(self, n: int = 1) -> None:
        """Count ``n`` of the steps done as free (read back from a cache, not computed), so the
        estimate of the time left rests on the steps that did cost time."""
        self.free += n

    def announce(self) -> None:
        """Print the bar's first line now (``0/total``): for steps whose first unit takes
        many minutes (a drafter trained in a worker), so a log says at once what started."""
        self._print(to_file=True)

    def set_postfix(self, **kwargs: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kwargs.items())

    def line(self, now: float | None = None) -> str:
        """The current progress line (at time ``now``, default the clock's)."""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        elapsed = (_now() if now is None else now) - self.t0
        return f"[{self.desc}] {self.n}/{self.total} {self.unit}{pct}, {elapsed:.0f} s{_eta(elapsed, self.n, self.total, self.free)}{extra}"

    def _print(self, to_file: bool) -> None:
        now = _now()
        text = self.line(now)
        if to_file and not self.quiet:
            print(text, file=self.file or sys.stderr, flush=True)
            self._said_at = now
        if self.relay is not None:
            try:
                with open(self.relay, "a") as fh:
                    fh.write(text + "\n")
            except OSError:  # the study is gone or moved on: progress is never worth an error
                self.relay = None
            self._relayed_at = now

    def close(self) -> None:
        """Forget the bar (every line it printed is already complete)."""
        self.closed = True
        if self in _OPEN:
            _OPEN.remove(self)


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, disable: bool = False) -> Any:
    """tqdm on a terminal, :class:`LineProgress` otherwise, or a silent tqdm when ``disable``.

    Under :func:`relay` (``$WAVE_PROGRESS_RELAY`` set) it is always a :class:`LineProgress`
    that relays, printing to stderr only when not ``disable``."""
    relayed = os.environ.get(RELAY_ENV)
    if relayed:
        return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial, quiet=disable,
                            relay=relayed)
    from tqdm import tqdm

    if disable or sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, disable=disable)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial)


def silence_relay() -> None:
    """Stop relaying in this process (a worker's bars: its parent's bar counts its jobs)."""
    os.environ.pop(RELAY_ENV, None)


@contextmanager
def relay(prefix: str, *, file: TextIO | None = None, interval: float = 1.0,
          enabled: bool | None = None) -> Iterator[Path | None]:
    """Relay the progress lines of child processes started inside the block (a notebook's
    kernel) to ``file`` (stderr) as ``<prefix>: <line>``, every ``interval`` seconds and once
    more at the end. ``enabled`` None: only when stderr is not a terminal (on a terminal the
    study draws its own bar). Yields the relay file (None when disabled)."""
    if enabled is None:
        enabled = not sys.stderr.isatty()
    if not enabled:
        yield None
        return
    fd, name = tempfile.mkstemp(prefix="wave-progress-", suffix=".log")
    os.close(fd)
    path = Path(name)
    previous = os.environ.get(RELAY_ENV)
    os.environ[RELAY_ENV] = str(path)
    stop = threading.Event()
    pos = 0

    def drain() -> None:
        nonlocal pos
        try:
            with open(path, "rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next pass
        pos += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if line.strip():
                print(f"{prefix}: {line}", file=file or sys.stderr, flush=True)

    def loop() -> None:
        while not stop.wait(interval):
            drain()

    thread = threading.Thread(target=loop, name="wave-progress-relay", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()
        drain()
        if previous is None:
            os.environ.pop(RELAY_ENV, None)
        else:
            os.environ[RELAY_ENV] = previous
        path.unlink(missing_ok=True)
