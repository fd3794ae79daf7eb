"""The one place that writes files: atomic, guarded and locked.

Every results file, ledger entry, timings file, responses file, book page and export goes
through this module:

- **atomic**: the bytes go to a temporary file in the destination's own folder, are
  fsync'ed, then renamed over the destination (:func:`os.replace`), and the folder is
  fsync'ed. A reader never sees half a file; a failure (a full disk, Ctrl-C) leaves the
  previous file byte-identical and no temporary behind. A temporary is named
  ``.NAME.PID-XXXXXXXX.tmp`` after the process writing it; one that a killed process left
  (its process gone, or an older nameless one) is removed by the next write of ``NAME``
  (:func:`sweep_stale`).
- **guarded**: a file that already exists is replaced only when ``owned(path)`` says the
  study wrote it (it carries the study's own header or schema: :func:`json_with`,
  :func:`first_line_with`, :func:`starts_with`) or when the command was told to
  (``force``, ``--force``). Anything else is refused with :class:`WriteRefused`, one line
  naming the file and the fix.
- **locked**: :func:`folder_lock` takes an exclusive ``flock`` on a folder (the folder
  itself, so no lock file is left behind); :func:`update_json` reads, merges and writes a
  JSON file under it, so two processes recording into one file lose nothing.

>>> import tempfile, json
>>> d = Path(tempfile.mkdtemp())
>>> _ = write_json(d / "r.json", {"name": "x"})
>>> update_json(d / "r.json", lambda doc: {**(doc or {}), "n": 1}, owned=json_with("name"))["n"]
1
>>> _ = write_text(d / "notes.txt", "mine")
>>> try:
...     write_json(d / "notes.txt", {}, owned=json_with("name"), flag="--out")
... except WriteRefused as exc:
...     print(str(exc).replace(str(d), "D"))
--out D/notes.txt exists and is not a file the study wrote (not JSON); give a new path, or add --force to replace it
>>> (d / "notes.txt").read_text()
'mine'
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: ``owned(path)``: None when ``path`` carries the study's header/schema, else why not (a few words).
Owned = Callable[[Path], str | None]


class WriteRefused(ValueError):
    """A write the study will not do (it would replace or fill something it does not own)."""


class WriteFailed(RuntimeError):
    """A write that failed (full disk, no permission); the previous file is left as it was.
    ``cause`` is the ``OSError`` (errno and file) and ``kept`` what is left ("nothing was
    written", "the previous file is unchanged"), so a caller can say more (the CLI names
    ``WAVE_CACHE`` for a file in the cache)."""

    def __init__(self, message: str, cause: OSError | None = None, kept: str = ""):
        super().__init__(message)
        self.cause = cause
        self.kept = kept


def os_error_of(exc: Exception, path: str | Path) -> OSError:
    """The ``OSError`` inside a write error a library raises as its own type (safetensors:
    ``IoError(Os { code: 28, ... })``), on ``path``; EIO when it names no code."""
    m = re.search(r"code: (\d+)", str(exc))
    code = int(m.group(1)) if m else errno.EIO
    return OSError(code, os.strerror(code), str(path))


def check_writable(folder: str | Path) -> Path:
    """Create ``folder`` (and its parents) and a file in it, then remove the file: raises the
    ``OSError`` a write there would raise (a read-only cache, a folder of another user) before
    a long step computes what it cannot keep. A folder that can be written is returned."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".write-check.{os.getpid()}-", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(name)
    return folder


#: How old a temporary written before temporaries carried their writer's PID must be to be removed.
LEGACY_TMP_AGE_S = 3600.0
_LEGACY_TMP = re.compile(r"[a-z0-9_]{8}")  # tempfile.mkstemp's random part
_OWN_TMP = re.compile(r"(\d+)-[a-z0-9_]{8}")


def _alive_since(pid: int, mtime: float) -> bool:
    """Whether process ``pid`` is running and started before ``mtime`` (a later start is
    another process that reuses the number)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    try:
        return os.stat(f"/proc/{pid}").st_ctime <= mtime + 1.0
    except OSError:
        return True  # no /proc: a live process is taken as the writer


def sweep_stale(path: str | Path) -> list[Path]:
    """Remove the temporaries of ``path`` that killed writers left in its folder: the study's
    own pattern ``.NAME.PID-XXXXXXXX.tmp`` whose process is gone (or reused), and nameless
    ``.NAME.XXXXXXXX.tmp`` of older versions once over :data:`LEGACY_TMP_AGE_S` old. A live
    writer's temporary, and any other file, is left alone. Returns what was removed."""
    path = Path(path)
    prefix, removed = f".{path.name}.", []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".tmp")) or not entry.is_file(follow_symlinks=False):
            continue
        middle = name[len(prefix):-len(".tmp")]
        try:
            mtime = entry.stat(follow_symlinks=False).st_mtime
            own = _OWN_TMP.fullmatch(middle)
            if own:
                stale = not _alive_since(int(own.group(1)), mtime)
            else:
                stale = bool(_LEGACY_TMP.fullmatch(middle)) and time.time() - mtime > LEGACY_TMP_AGE_S
            if stale:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:  # gone meanwhile, or not ours to remove: left as it is
            continue
    return removed


def anything(path: Path) -> str | None:
    """The guard of files only the study writes (its caches): any existing file may be replaced."""
    return None


def json_with(*keys: str) -> Owned:
    """A guard: the existing file is a JSON object holding every one of ``keys``."""

    def check(path: Path) -> str | None:
        try:
            doc = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            return "not JSON"
        if not isinstance(doc, dict):
            return f"a JSON {type(doc).__name__}, not an object"
        missing = [k for k in keys if k not in doc]
        return f"no {', '.join(repr(k) for k in missing)} key" if missing else None

    return check


def first_line_with(needle: bytes, what: str) -> Owned:
    """A guard: the existing file's first line contains ``needle`` (a header line, named ``what``)."""

    def check(path: Path) -> str | None:
        with open(path, "rb") as fh:
            return None if needle in fh.readline(1 << 16) else f"no {what} on its first line"

    return check


def starts_with(magic: bytes, what: str) -> Owned:
    """A guard: the existing file begins with ``magic`` (a format's signature, named ``what``)."""

    def check(path: Path) -> str | None:
        with open(path, "rb") as fh:
            return None if fh.read(len(magic)) == magic else f"not a {what} file"

    return check


def check_replace(path: str | Path, owned: Owned = anything, *, force: bool = False, flag: str = "") -> Path:
    """Raise :class:`WriteRefused` unless ``path`` may be written: absent, or a file that
    ``owned`` recognises as the study's, or any file with ``force``. Never a folder."""
    path = Path(path)
    label = f"{flag} {path}" if flag else str(path)
    if path.is_dir():
        raise WriteRefused(f"{label} is a folder; give a file path inside it")
    if path.is_symlink() and not force:
        raise WriteRefused(f"{label} is a symbolic link (to {os.readlink(path)}); give a plain file path, or add "
                           "--force to replace the link with a file")
    if path.exists() and not force:
        why = owned(path)
        if why is not None:
            raise WriteRefused(f"{label} exists and is not a file the study wrote ({why}); give a new path, or add "
                               "--force to replace it")
    return path


def umask() -> int:
    """This process's umask, read without changing it (``/proc/self/status``; elsewhere set and
    restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(executable: bool = False) -> int:
    """The mode a new file gets from a normal tool: 0666 (0777 for a script) less the umask,
    0644 (0755) under the usual umask 022. :func:`tempfile.mkstemp` makes 0600 files, which a
    server running as another user cannot read; every atomic write sets this mode instead."""
    return (0o777 if executable else 0o666) & ~umask()


def _fsync(path: Path) -> None:
    """Flush ``path``'s data to the disk (a file written by another writer than this module)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    try:
        _fsync(folder)
    except OSError:  # some filesystems refuse fsync on a folder; the rename is still atomic
        pass


def _failed(path: Path, existed: bool, exc: OSError) -> WriteFailed:
    kept = "the previous file is unchanged" if existed else "nothing was written"
    fix = "free some space" if exc.errno == errno.ENOSPC else "check that the folder is writable"
    return WriteFailed(f"could not write {path} ({exc.strerror or exc}); {kept}: {fix}, or write elsewhere",
                       OSError(exc.errno, exc.strerror or str(exc), str(path)), kept)


@contextlib.contextmanager
def atomic_path(path: str | Path, owned: Owned = anything, *, force: bool = False, flag: str = "",
                mkdir: bool = True, executable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for a writer that needs a file name (safetensors,
    a converter); when the block ends without error the file is fsync'ed, given the user's
    mode (:func:`file_mode`; ``executable`` for a script) and renamed onto ``path``. Any error,
    Ctrl-C included, removes the temporary and leaves ``path`` as it was."""
    path = check_replace(path, owned, force=force, flag=flag)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    sweep_stale(path)  # what a killed writer of this file left behind
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _fsync(tmp)
        os.chmod(tmp, file_mode(executable))  # a writer may have replaced the file: set on what is there
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _failed(path, existed, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def write_bytes(path: str | Path, data: bytes, owned: Owned = anything, *, force: bool = False, flag: str = "",
                mkdir: bool = True, executable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically and guarded (see the module docstring)."""
    path = Path(path)
    with atomic_path(path, owned, force=force, flag=flag, mkdir=mkdir, executable=executable) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return path


def write_text(path: str | Path, text: str, owned: Owned = anything, *, force: bool = False, flag: str = "",
               mkdir: bool = True, executable: bool = False) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), owned, force=force, flag=flag, mkdir=mkdir, executable=executable)


def write_json(path: str | Path, doc: Any, owned: Owned = anything, *, force: bool = False, flag: str = "",
               mkdir: bool = True, **dumps: Any) -> Path:
    """:func:`write_text` of ``json.dumps(doc, **dumps)`` (``indent=1`` unless given)."""
    dumps.setdefault("indent", 1)
    return write_text(path, json.dumps(doc, **dumps), owned, force=force, flag=flag, mkdir=mkdir)


def publish(src: str | Path, path: str | Path, owned: Owned = anything, *, force: bool = False,
            flag: str = "") -> Path:
    """Move a finished file ``src`` (written by another program, in ``path``'s folder) onto
    ``path``: fsync'ed, then renamed, guarded like :func:`write_bytes`. ``src`` is consumed."""
    src, path = Path(src), check_replace(path, owned, force=force, flag=flag)
    existed = path.exists()
    try:
        _fsync(src)
        os.replace(src, path)
    except OSError as exc:
        raise _failed(path, existed, exc) from None
    _fsync_folder(path.parent)
    return path


class Busy(WriteRefused):
    """Another process holds the write lock of a folder (:func:`folder_lock` with ``wait=False``)."""


@contextlib.contextmanager
def folder_lock(folder: str | Path, *, wait: bool = True, flag: str = "") -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (created if absent) for the block: ``flock`` on the
    folder itself, so nothing is left behind; released when the block ends or the process dies.
    ``wait`` False: raise :class:`Busy` (naming ``flag``) at once when another process holds it
    (two exports into one folder: the second is refused, not interleaved with the first)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            label = f"{flag} {folder}" if flag else str(folder)
            raise Busy(f"{label} is being written by another process (it holds the folder's lock); wait for it "
                       "to finish, or give another folder") from None
        yield folder
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def update_json(path: str | Path, change: Callable[[dict[str, Any] | None], Mapping[str, Any] | None],
                owned: Owned = anything, *, read: Callable[[Path], dict[str, Any] | None] | None = None,
                force: bool = False, flag: str = "", **dumps: Any) -> dict[str, Any] | None:
    """Read-merge-write ``path`` under :func:`folder_lock` of its folder: ``change`` gets the
    current document (``read(path)``, default: the JSON object, None when absent) and returns
    the new one (None: write nothing). Returns what was written."""
    path = Path(path)
    with folder_lock(path.parent):
        current = (read or _read_json)(path)
        new = change(current)
        if new is None:
            return None
        write_json(path, dict(new), owned, force=force, flag=flag, **dumps)
        return dict(new)


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
