"""The study key of a chapter run: what an executed chapter depends on.

A notebook is re-executed only when its source, its parameters, the library modules it
imports (transitively, :func:`used_modules`), the profiles or, for a chapter that reads it
(:func:`reads_benchmarks`), the benchmarks file changed since the executed copy was written
*on this machine*: the keys live in the cache folder (:func:`keys_file`),
so a fresh clone runs every chapter once, and a second run redoes only what changed.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from activation_wave.core.paths import PACKAGE_DIR, cache_root
from activation_wave.core.results import BENCHMARKS_FILE

LIB_DIR = PACKAGE_DIR
BENCHMARK_READERS = frozenset({"load_benchmarks", "BENCHMARKS_FILE"})  # the names a reader of the file imports


def _module_file(name: str, lib_dir: Path) -> Path | None:
    """The file of module ``name`` (dotted, the package first) under ``lib_dir``, if any."""
    parts = name.split(".")[1:]
    base = lib_dir.joinpath(*parts)
    candidates = [base.with_suffix(".py"), base / "__init__.py"] if parts else [base / "__init__.py"]
    return next((path for path in candidates if path.is_file()), None)


def _imports(path: Path, lib_dir: Path, package: str) -> set[str]:
    """Modules of ``package`` that the Python file ``path`` imports anywhere (top level or
    inside functions): ``import package.x``, ``from package.x import y`` (``y`` may itself
    be a module), and relative imports when ``path`` lies in the package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here: list[str] | None = None
    if path.is_relative_to(lib_dir):
        here = [package, *path.relative_to(lib_dir).parts[:-1]]  # the package the file lies in
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == package}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if here is None or node.level > len(here):
                    continue
                base = here[: len(here) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
                if mod.split(".")[0] != package:
                    continue
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import module`
    # importing a.b.c runs the __init__ of a and a.b first
    return {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 2)}


def _reach(source: Path, lib_dir: Path, package: str) -> tuple[list[Path], set[str]]:
    """The package's module files that ``source`` uses, transitively through their own imports,
    and every dotted name imported on the way (modules and the names taken from them)."""
    seen: dict[str, Path] = {}
    names = _imports(source, lib_dir, package)
    todo = sorted(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name, lib_dir)
        if path is None:  # a name imported from a module, not a module itself
            continue
        seen[name] = path
        found = _imports(path, lib_dir, package)
        names |= found
        todo += sorted(found - set(seen))
    return sorted(set(seen.values())), names


def used_modules(source: Path, lib_dir: Path = LIB_DIR, package: str = "activation_wave") -> list[Path]:
    """The package's module files that ``source`` uses, transitively through their own imports."""
    return _reach(source, lib_dir, package)[0]


def _reads_benchmarks(names: set[str]) -> bool:
    return any(name.rsplit(".", 1)[-1] in BENCHMARK_READERS for name in names)


def reads_benchmarks(source: Path, lib_dir: Path = LIB_DIR, package: str = "activation_wave") -> bool:
    """Whether ``source`` or a module it uses (transitively) imports a reader of the benchmarks
    file (``load_benchmarks`` or ``BENCHMARKS_FILE``)."""
    return _reads_benchmarks(_reach(source, lib_dir, package)[1])


def chapter_key(source: Path, params: Mapping[str, str], lib_dir: Path = LIB_DIR,
                package: str = "activation_wave", benchmarks: Path = BENCHMARKS_FILE) -> str:
    """The study key of one chapter run: its notebook, its parameters, the library modules
    it imports (transitively, :func:`used_modules`), the profiles and, when the notebook or
    one of those modules reads it, the benchmarks file (``wave bench`` rewrites it outside
    the study); a change anywhere else leaves the key, and the executed chapter, as they are."""
    h = hashlib.sha256(source.read_bytes())
    h.update(json.dumps(dict(params), sort_keys=True).encode())
    modules, names = _reach(source, lib_dir, package)
    for path in modules + sorted(lib_dir.rglob("*.yaml")):
        h.update(path.relative_to(lib_dir).as_posix().encode())
        h.update(path.read_bytes())
    if benchmarks.is_file() and _reads_benchmarks(names):
        h.update(b"benchmarks")
        h.update(benchmarks.read_bytes())
    return h.hexdigest()


def keys_file(book: Path) -> Path:
    """Where the study records the key of each executed copy it wrote into ``book``:
    machine-local (under the cache folder, one file per book folder), never committed."""
    tag = hashlib.sha256(str(Path(book).resolve()).encode()).hexdigest()[:12]
    return cache_root() / "study" / f"keys-{tag}.json"
