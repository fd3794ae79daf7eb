"""Engine children (vLLM's worker, llama-server, the GGUF converter) that never outlive ``wave``.

``PR_SET_PDEATHSIG`` reaches only a direct child, and only with a signal it may ignore: a worker
that ignores SIGTERM, or anything it forks, survived a SIGKILL of ``wave`` (issue 63). Every
engine child therefore runs under the group leader of :mod:`activation_wave.engines.group`: a
new session and process group, a child subreaper, which ends the whole group (SIGTERM, then
SIGKILL after a grace period) when its parent dies, however it dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The group leader script (standard library only; run with ``-I`` by this Python).
GROUP = Path(__file__).with_name("group.py")
#: Seconds an engine's group gets between SIGTERM and SIGKILL.
GRACE_S = 10.0


def start_child(argv: Sequence[str | Path], *, grace: float = GRACE_S, **popen: Any) -> subprocess.Popen:
    """Start ``argv`` under the group leader; ``popen`` goes to :class:`subprocess.Popen` (the
    command inherits stdin, stdout and stderr through the leader). The returned process is the
    leader, whose pid is the group's id: ``os.killpg(proc.pid, sig)`` reaches every member, and
    a SIGTERM to it ends the group (SIGKILL after ``grace`` s)."""
    return subprocess.Popen([sys.executable, "-I", str(GROUP), "--parent", str(os.getpid()), "--grace", str(grace),
                             "--", *map(str, argv)], **popen)


def stop_child(leader: subprocess.Popen, timeout: float) -> int:
    """End a child started by :func:`start_child`: SIGTERM to the leader (which ends its whole
    group); if the leader has not finished after ``timeout`` s, SIGKILL to every member of the
    group. Returns the leader's exit code."""
    if leader.poll() is None:
        try:
            leader.terminate()
            leader.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(leader.pid, signal.SIGKILL)  # the leader's pid is its group's id
            except ProcessLookupError:
                pass
            leader.wait()
    return int(leader.returncode)
