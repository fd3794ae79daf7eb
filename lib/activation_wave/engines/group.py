"""Run a command in a process group of its own that dies with the process that started it.

A server started as a child with ``PR_SET_PDEATHSIG`` dies with its parent, but its own
children do not: vLLM's OpenAI server runs its engine in a child process, and a SIGKILL of the
server (or of ``wave``) left that engine alive holding ~2.8 GB (issue 64). So the command runs
under a small *group leader*, this file run as a script (standard library only, so any Python
runs it)::

    wave serve ──► leader (session and process-group leader; SIGTERM when its parent dies)
                     └─► the command (vLLM's server) ──► its engine, workers (the same group)

The leader starts a new session (``setsid``), so its process group holds everything the
command starts unless a descendant leaves it with ``setsid``/``setpgid`` (vLLM 0.32's OpenAI
server does not; its data-parallel launcher does). It is also a child subreaper, so an orphaned
descendant is reparented to it and reaped. When its parent dies (however: ``PR_SET_PDEATHSIG``,
and a check of the parent's pid for the instant before that was set), on SIGTERM, SIGINT or
SIGHUP, or when the command exits, it sends SIGTERM to the whole group, waits ``--grace``
seconds for every member to exit, SIGKILLs the ones left, and exits with the command's code.

    python group.py --parent PID [--grace 10] -- COMMAND ...

Linux only (``prctl`` and ``/proc``); :func:`group_members` lists a group's live processes.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Exit code of the leader when it stopped the command on a signal or its parent's death.
STOPPED = 143


def group_members(pgid: int, *, exclude: tuple[int, ...] = ()) -> list[int]:
    """The live (not zombie) processes whose process group is ``pgid``, from ``/proc``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(name))
    return out


class _Stop(Exception):
    """A signal asked the leader to stop the group."""


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signum)


def _reap(child: int) -> int | None:
    """Reap every exited child (the command and orphans reparented here); the command's exit
    code once it has exited, else None."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == child:
            code = os.waitstatus_to_exitcode(status)


def stop_group(pgid: int, child: int, grace: float) -> None:
    """SIGTERM to every member of the group but this process, ``grace`` seconds to exit, then
    SIGKILL to each one left; orphans reparented here are reaped as they go."""
    me = (os.getpid(),)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # the group's SIGTERM reaches the leader too
        signal.signal(sig, signal.SIG_IGN)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(child)
        if not group_members(pgid, exclude=me):
            return
        time.sleep(0.05)
    for pid in group_members(pgid, exclude=me):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5.0
    while group_members(pgid, exclude=me) and time.monotonic() < deadline:
        _reap(child)
        time.sleep(0.05)
    _reap(child)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="group.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--parent", type=int, required=True, help="pid of the process whose death stops the group")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL (default 10)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("no command given (group.py --parent PID -- COMMAND ...)")
    if os.getpid() != os.getpgrp():
        os.setsid()  # a new session and process group, led by this process
    pgid = os.getpgrp()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    child = None
    code = STOPPED
    try:
        if os.getppid() != args.parent:  # the parent died before PR_SET_PDEATHSIG was set
            raise _Stop(0)
        child = subprocess.Popen(cmd).pid  # same session and group; reaped by _reap, not by Popen
        while True:
            done = _reap(child)
            if done is not None:
                code = done
                break
            if os.getppid() != args.parent:
                raise _Stop(0)
            time.sleep(0.2)
    except _Stop:
        code = STOPPED
    finally:
        stop_group(pgid, child or -1, args.grace)
    return code


if __name__ == "__main__":
    sys.exit(main())
