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

A bar opened while another is running is a step of it (a drafter's batches inside "training
drafters"): it reports its own count to the outermost bar, whose line carries it as a *part*
(``[training drafters] 0/2 drafter (0%), 540 s; draft [2, 15, 27] 212/430 batch (49%, ~560 s
left)``), so a relayed or heartbeat line says how far each drafter is, not only how many are
done. Drafters trained in worker processes report the same way through small files
(:class:`PartFiles`: each worker's outermost bar writes its count to the file named in
:data:`PART_ENV`; the parent reads them into its line).
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
#: Environment variable naming the file a worker process's outermost bar writes its count to
#: (see :class:`PartFiles`).
PART_ENV = "WAVE_PROGRESS_PART"
#: A part file is rewritten at most this often while its bar advances (and when it ends).
PART_EVERY_S = 1.0

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


def part_text(desc: str, n: int, total: int | None, unit: str, elapsed: float, free: int = 0) -> str:
    """One part of a line: a step's own count, share and time left.

    >>> part_text("draft [2, 15, 27]", 212, 430, "batch", 540.0)
    'draft [2, 15, 27] 212/430 batch (49%, ~555 s left)'
    >>> part_text("draft [7, 27, 29]", 0, 430, "batch", 3.0)
    'draft [7, 27, 29] 0/430 batch (0%)'
    """
    if not total:
        return f"{desc} {n} {unit}"
    return f"{desc} {n}/{total} {unit} ({100 * n / total:.0f}%{_eta(elapsed, n, total, free)})"


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
        part = os.environ.get(PART_ENV)
        self.part_file = Path(part) if part and not any(b.part_file and not b.done for b in _OPEN) else None
        self._parted_at = 0.0
        #: the outermost running bar this one is a step of (None: this one is outermost)
        self.parent = next((b for b in _OPEN if not b.done), None)
        #: the steps running inside this bar, by name: their :func:`part_text`
        self.parts: dict[str, str] = {}
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
        if self.parent is not None:
            self.parent.child_moved(self)
        if self.part_file is not None and (self.done or _now() - self._parted_at >= PART_EVERY_S):
            self._write_part()
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

    def set_parts(self, parts: dict[str, str]) -> None:
        """Replace the parts this bar's line carries (steps running elsewhere: :class:`PartFiles`)."""
        self.parts = dict(parts)

    def part(self, now: float | None = None) -> str:
        """This bar as a part of another's line (:func:`part_text`)."""
        elapsed = (_now() if now is None else now) - self.t0
        return part_text(self.desc, self.n, self.total, self.unit, elapsed, self.free)

    def child_moved(self, child: LineProgress) -> None:
        """A step inside this bar advanced: carry its count, and relay the line when
        :data:`RELAY_EVERY_S` have passed (the child's own lines do not reach the relay)."""
        self.parts[child.desc] = child.part()
        if self.relay is not None and not self.done and _now() - self._relayed_at >= RELAY_EVERY_S:
            self._print(to_file=False)

    def _write_part(self) -> None:
        """This bar's count into its part file, for the parent process (atomic: a reader never
        sees half of it)."""
        import json

        now = _now()
        doc = {"desc": self.desc, "n": self.n, "total": self.total, "unit": self.unit, "elapsed": now - self.t0,
               "free": self.free, "closed": self.closed}
        tmp = self.part_file.with_name(self.part_file.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.part_file)
        except OSError:  # the parent is gone or cleaned up: progress is never worth an error
            self.part_file = None
        self._parted_at = now

    def line(self, now: float | None = None) -> str:
        """The current progress line (at time ``now``, default the clock's), with the parts of
        the steps running inside it."""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        elapsed = (_now() if now is None else now) - self.t0
        parts = "".join(f"; {p}" for p in self.parts.values())
        return (f"[{self.desc}] {self.n}/{self.total} {self.unit}{pct}, {elapsed:.0f} s"
                f"{_eta(elapsed, self.n, self.total, self.free)}{extra}{parts}")

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
        if self.closed:
            return
        self.closed = True
        if self.parent is not None:
            self.parent.parts.pop(self.desc, None)
        if self.part_file is not None:
            self._write_part()
        if self in _OPEN:
            _OPEN.remove(self)


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, disable: bool = False) -> Any:
    """tqdm on a terminal, :class:`LineProgress` otherwise, or a silent tqdm when ``disable``.

    Under :func:`relay` (``$WAVE_PROGRESS_RELAY`` set) it is always a :class:`LineProgress`
    that relays, printing to stderr only when not ``disable``."""
    relayed = os.environ.get(RELAY_ENV)
    if relayed or os.environ.get(PART_ENV):  # a worker's bar reports to its parent even when not shown
        return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial, quiet=disable,
                            relay=relayed)
    from tqdm import tqdm

    if disable or sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, disable=disable)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial)


class PartFiles:
    """The counts of steps running in worker processes (a drafter's batches), for the parent's
    line: :meth:`env` names job ``key``'s file for the worker (:data:`PART_ENV`), whose
    outermost bar writes its count there; :meth:`parts` reads every running one back as
    :func:`part_text`; :meth:`done` forgets a finished job. A context manager that removes its
    folder."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="wave-parts-"))

    def path(self, key: Any) -> str:
        return str(self.folder / f"{key}.json")

    def env(self, key: Any) -> dict[str, str]:
        """The environment entry a worker sets for job ``key``."""
        return {PART_ENV: self.path(key)}

    def done(self, key: Any) -> None:
        Path(self.path(key)).unlink(missing_ok=True)

    def parts(self) -> dict[str, str]:
        """Each running job's count (a file a worker is still writing is read next time)."""
        import json

        out = {}
        for f in sorted(self.folder.glob("*.json")):
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if not d.get("closed"):
                out[f.stem] = part_text(d["desc"], d["n"], d.get("total"), d["unit"], d["elapsed"], d.get("free", 0))
        return out

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PartFiles:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def show_parts(bar: Any, parts: dict[str, str]) -> None:
    """Put ``parts`` on ``bar``'s line: a :class:`LineProgress`'s parts, a tqdm's postfix."""
    if hasattr(bar, "set_parts"):
        bar.set_parts(parts)
    elif hasattr(bar, "set_postfix_str"):
        bar.set_postfix_str("; ".join(parts.values()), refresh=False)


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
