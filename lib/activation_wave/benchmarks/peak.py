"""Peak resident memory of a block of code, sampled in a thread (torch's allocations are
invisible to ``tracemalloc``, so the process's RSS is read instead)."""

from __future__ import annotations

import threading
from typing import Any

import psutil

__all__ = ["PeakRSS"]


class PeakRSS:
    """Sample this process's resident memory in a thread while the block runs: ``start``
    and ``peak`` in MiB."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.start, self.peak, self._stop = interval, 0.0, 0.0, threading.Event()
        self._proc = psutil.Process()

    def _rss(self) -> float:
        return self._proc.memory_info().rss / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = self._rss()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())
