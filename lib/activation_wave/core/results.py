"""Chapter results as data: typed, frozen result objects written to JSON and read back.

A chapter's analysis is a library function returning a frozen dataclass (a *result
object*). :func:`save_result` writes it, with the config and provenance, to
``<results dir>/<name>.json``; a later chapter calls :func:`load_result` with the same
class and reads fields, never display strings. :func:`to_jsonable` is the one JSON
converter of the package (numpy scalars and arrays, tuples, dataclasses, pandas
frames; non-finite floats become ``null``).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo:
...     layers: tuple[int, ...]
...     score: float | None
>>> from_jsonable(Demo, to_jsonable(Demo((2, 15), float("nan"))))
Demo(layers=(2, 15), score=None)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import time
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

import numpy as np

from activation_wave.core import files
from activation_wave.core.config import StudyConfig
from activation_wave.core.paths import REPO_ROOT

RESULTS_ROOT = REPO_ROOT / "data" / "results"
#: The one file every benchmark (``wave bench``) writes its entry into.
BENCHMARKS_FILE = RESULTS_ROOT / "benchmarks.json"
#: Keys every results file carries besides the result's own fields.
META_KEYS = ("name", "config", "written", "git_commit")
#: What an existing file must hold to be replaced as a results file (:func:`save_result`).
RESULTS_OWNED = files.json_with("name", "config", "written")


def benchmarks_owned(path: Path) -> str | None:
    """The guard of the benchmarks file (``wave bench --out``): None when ``path`` holds a JSON
    object of benchmark entries (every value an object, as ``machine`` and each entry are),
    else why not (a file the study did not write, which it never replaces)."""
    why = files.json_with()(path)
    if why is not None:
        return why
    doc = json.loads(path.read_bytes())
    odd = sorted(k for k, v in doc.items() if not isinstance(v, dict))
    return f"its {odd[0]!r} is not a benchmark entry (an object)" if odd else None


class ResultsFileError(ValueError):
    """A results file that exists but cannot be read as one (cut off, not JSON, another
    shape); the message names the file and the chapter that rewrites it."""

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for ``obj`` (recursively); NaN and infinities become ``None``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # a pandas DataFrame
        return to_jsonable(obj.to_dict(orient="records"))
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def from_jsonable(typ: Any, data: Any) -> Any:
    """Rebuild a value of type ``typ`` (dataclass, tuple, list, dict, Optional) from JSON."""
    if data is None:
        return None
    if dataclasses.is_dataclass(typ):
        hints = get_type_hints(typ)
        names = {f.name for f in dataclasses.fields(typ)}
        unknown = sorted(set(data) - names - set(META_KEYS))
        if unknown:
            raise ValueError(f"{typ.__name__}: unexpected field(s) {unknown} in results data; "
                             "the file was written by another version: re-run its chapter")
        return typ(**{k: from_jsonable(hints[k], v) for k, v in data.items() if k in names})
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return from_jsonable(inner[0], data) if len(inner) == 1 else data
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(from_jsonable(a, v) for a, v in zip(args, data, strict=True)) if args else tuple(data)
    if origin is list:
        return [from_jsonable(args[0], v) for v in data] if args else list(data)
    if origin is dict:
        return {k: from_jsonable(args[1], v) for k, v in data.items()} if args else dict(data)
    if typ is float:
        return float(data)
    return data


def cache_key(path: str | Path) -> str:
    """A path as a results file records it: relative to the cache root when it lies under
    it (``capture/<capture id>/drafters/<drafter id>``), so that no machine's home folder
    ends up in a committed file; any other path as it is. :func:`cache_path` reverses it.
    """
    from activation_wave.core.paths import cache_root

    p, root = Path(path), cache_root()
    return p.relative_to(root).as_posix() if p.is_absolute() and p.is_relative_to(root) else str(path)


def cache_path(key: str | Path) -> Path:
    """The folder a recorded :func:`cache_key` names on this machine: a relative key under this
    cache root. Results files written before keys hold absolute paths: such a path is kept
    when it exists here, else re-rooted at its ``capture/`` part under this cache root.
    """
    from activation_wave.core.paths import cache_root

    p = Path(key)
    if not p.is_absolute():
        return cache_root() / p
    if p.exists() or "capture" not in p.parts:
        return p
    parts = p.parts
    return cache_root().joinpath(*parts[parts.index("capture"):])


def without_cache_root(obj: Any) -> Any:
    """``obj`` (plain JSON types) with every string that is a path under the cache root
    replaced by its :func:`cache_key`: what :func:`save_result` and ``wave bench`` write."""
    from activation_wave.core.paths import cache_root

    root = str(cache_root()).rstrip("/") + "/"
    if isinstance(obj, str):
        return cache_key(obj) if obj.startswith(root) else obj
    if isinstance(obj, Mapping):
        return {k: without_cache_root(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_cache_root(v) for v in obj]
    return obj


def results_dir(cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """Where a run's result files go: ``<root>/<profile>/<model slug>/`` (a relative
    ``root`` is taken from the repository root, wherever the notebook runs)."""
    base = Path(root or os.environ.get("WAVE_RESULTS", RESULTS_ROOT))
    if not base.is_absolute():
        base = REPO_ROOT / base
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(cfg.model).name)
    return base / cfg.profile / slug


def git_commit() -> str | None:
    """``git rev-parse HEAD`` of the study's repository, or None if unavailable."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def read_json_object(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`ResultsFileError` naming the file and ``fix`` when it
    is cut off, not JSON or not an object (a truncated file is an error, never "absent")."""
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{path} is not valid JSON (cut off or damaged: {exc}); {fix}") from None
    if not isinstance(doc, dict):
        raise ResultsFileError(f"{path} holds a JSON {type(doc).__name__}, not an object; {fix}")
    return doc


def load_benchmarks(path: Path = BENCHMARKS_FILE) -> dict[str, Any]:
    """The benchmarks file, or an empty mapping when ``wave bench`` has not run yet."""
    if not path.exists():
        return {}
    return read_json_object(path, f"restore it (git checkout -- {path}) or run `wave bench --out {path}` again")


def write_benchmarks(path: Path, doc: Mapping[str, Any], *, force: bool = False) -> Path:
    """Write the benchmarks file ``doc`` to ``path`` through the write layer: atomic (a full
    disk leaves the previous file intact), and an existing file is replaced only when it is a
    benchmarks file (:func:`benchmarks_owned`), unless ``force``."""
    return files.write_json(path, dict(doc), benchmarks_owned, force=force, flag="--out")


def merge_benchmarks(path: Path, entries: Mapping[str, Any], *, force: bool = False) -> dict[str, Any]:
    """Set ``entries`` (name -> entry) in the benchmarks file at ``path``, keeping every other key
    as the file holds it *now* (read, merge and write under the folder's lock): two ``wave bench``
    runs that overlap (an hours-long one and a short one) no longer drop each other's entries.
    Returns the document written."""
    def change(current: dict[str, Any] | None) -> dict[str, Any]:
        return {**(current or {}), **entries}

    read = lambda p: load_benchmarks(p) if p.exists() else None  # noqa: E731
    return files.update_json(path, change, benchmarks_owned, read=read, force=force, flag="--out") or {}


def save_result(name: str, result: Any, cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """Write ``<results dir>/<name>.json`` atomically: the result's fields (a dataclass or
    a mapping) beside the config and provenance (:data:`META_KEYS`). Paths under the cache
    root are written as cache-relative keys (:func:`without_cache_root`, :func:`cache_path`)."""
    fields = without_cache_root(to_jsonable(result))  # cache paths as keys: no machine paths in results
    clash = sorted(set(fields) & set(META_KEYS))
    if clash:
        raise ValueError(f"result field(s) {clash} collide with the results file's own keys {list(META_KEYS)}; "
                         "rename them in the result class")
    folder = results_dir(cfg, root)
    if folder.exists() and not folder.is_dir() or any(p.is_file() for p in folder.parents if p.exists()):
        raise files.WriteRefused(f"results_root: a file lies on the results path {folder}; give a folder as "
                                 "results_root (-p results_root ...) or WAVE_RESULTS")
    doc = {"name": name, "config": cfg.to_dict(), "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "git_commit": git_commit(), **fields}
    # atomic, and a file the study did not write (no name/config/written) is never replaced
    return files.write_json(folder / f"{name}.json", doc, RESULTS_OWNED, indent=1, sort_keys=False)


def load_result(name: str, cfg: StudyConfig, root: str | Path | None = None, cls: type[T] | None = None) -> Any:
    """Read a results file written by :func:`save_result`: the result object when ``cls``
    is given, else the raw mapping. A missing file names the chapter to run."""
    path = results_dir(cfg, root) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"results file {path} does not exist: run the chapter that writes {name!r} first "
                                f"(`wave study --profile {cfg.profile} --only {name}`)")
    doc = read_json_object(path, f"run its chapter again (`wave study --profile {cfg.profile} --only {name}`) "
                                 f"or restore it (git checkout -- {path})")
    return from_jsonable(cls, doc) if cls is not None else doc


def load_optional(name: str, cfg: StudyConfig, root: str | Path | None = None) -> dict[str, Any] | None:
    """The raw results file ``name`` (:func:`load_result`), or None when it was not written:
    for pages that render whether or not an optional study has run."""
    try:
        return load_result(name, cfg, root)
    except FileNotFoundError:
        return None
