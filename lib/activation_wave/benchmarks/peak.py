"""What a benchmark records of the machine: the peak resident memory of a block of code,
sampled in a thread (torch's allocations are invisible to ``tracemalloc``, so the process's
RSS is read instead), and the CPU (:func:`cpu_model`)."""

from __future__ import annotations

import platform
import threading
from pathlib import Path
from typing import Any

import psutil

__all__ = ["PeakRSS", "cpu_model"]


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


def cpu_model(cpuinfo: str | None = None) -> dict[str, Any]:
    r"""The CPU's model name and whether it has bf16 matrix units (``avx512_bf16`` / ``amx_bf16``
    in ``/proc/cpuinfo``): bf16 training and decoding are fast only where it does.

    >>> cpu_model("model name\t: AMD EPYC\nflags\t\t: fpu avx2\n")
    {'cpu': 'AMD EPYC', 'bf16_units': False}
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {"cpu": platform.processor() or "unknown", "bf16_units": None}
    fields = dict(line.split(":", 1) for line in cpuinfo.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"cpu": fields.get("model name", "unknown"), "bf16_units": bool(flags & {"avx512_bf16", "amx_bf16"})}
