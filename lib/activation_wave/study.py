"""``wave study``: execute every chapter notebook with papermill, then build the book.

The notebooks' source of truth is ``notebooks/*.py`` (jupytext percent format). They
are converted one way (``.py`` -> ``.ipynb``) into ``build/notebooks/``, executed with
the run's parameters into ``<book>/chapters/``, and the book is built with warnings as
errors. A notebook is re-executed only when its source, its parameters, the library or
the profile changed since the executed copy was written (keys in ``chapters/.keys.json``).

The default profile writes into ``book/`` and ``data/results/`` (committed). Any other
profile writes a full copy of the book into ``scratch/<profile>/`` and never touches
the committed chapters.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .data import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
#: Execution order: the landing page reads every other chapter's results, so it runs last.
ORDER = ["00_data_and_capture", "01_layer_entropy", "02_concat_entropy", "03_cka_compartments",
         "04_token_filtering", "05_layer_selection", "06_eagle3_speedup", "07_cross_model",
         "08_results_summary", "09_performance", "intro"]


def notebooks() -> list[Path]:
    """The chapter sources that exist, in execution order."""
    return [NOTEBOOK_DIR / f"{name}.py" for name in ORDER if (NOTEBOOK_DIR / f"{name}.py").exists()]


def _tree_hash(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def library_hash() -> str:
    lib = REPO_ROOT / "lib" / "activation_wave"
    return _tree_hash([p for p in lib.rglob("*") if p.suffix in (".py", ".yaml")])


def to_ipynb(src: Path, dest: Path) -> Path:
    """Convert a jupytext percent script to a notebook (one way; never syncs back)."""
    import jupytext

    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.get("jupytext", {}).pop("text_representation", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, dest)
    return dest


def prepare_book_dir(profile: str, book_dir: str | Path | None) -> tuple[Path, Path]:
    """Return (book dir, results root); non-default profiles get a scratch copy of the book."""
    if book_dir is None and profile == "default":
        return REPO_ROOT / "book", REPO_ROOT / "data" / "results"
    root = Path(book_dir).resolve().parent if book_dir else REPO_ROOT / "scratch" / profile
    book = Path(book_dir).resolve() if book_dir else root / "book"
    if book == (REPO_ROOT / "book").resolve():
        return book, REPO_ROOT / "data" / "results"
    root.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("_build", "chapters", "_toc.yml")
    shutil.copytree(REPO_ROOT / "book", book, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    toc_link = book / "_toc.yml"
    if not toc_link.is_symlink():
        toc_link.unlink(missing_ok=True)
        toc_link.symlink_to("../_toc.yml")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copyfile(REPO_ROOT / name, root / name)
    # Folders the config refers to relative to the repo (e.g. build/mathjax) are linked in.
    link = root / "build"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "build", target_is_directory=True)
    return book, root / "results"


def run_study(profile: str = "default", model: str | None = None, book_dir: str | Path | None = None,
              only: Sequence[str] | None = None, build: bool = True, overrides: Mapping[str, str] | None = None) -> int:
    """Execute the chapters of one profile and build the book; returns a process exit code."""
    import papermill as pm

    book, results_root = prepare_book_dir(profile, book_dir)
    chapters = book / "chapters"
    chapters.mkdir(parents=True, exist_ok=True)
    keys_path = chapters / ".keys.json"
    keys = json.loads(keys_path.read_text()) if keys_path.exists() else {}
    lib = library_hash()
    params = {"profile": profile, "model": model or "", "results_root": str(results_root),
              "overrides": json.dumps(dict(overrides or {}), sort_keys=True)}
    timings: dict[str, float] = {}
    t_all = time.time()
    for src in notebooks():
        name = src.stem
        if only and not any(name.startswith(o) for o in only):
            continue
        out = chapters / f"{name}.ipynb"
        key = hashlib.sha256((src.read_text() + json.dumps(params, sort_keys=True) + lib).encode()).hexdigest()
        if keys.get(name) == key and out.exists():
            print(f"[study] {name}: unchanged, kept {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}")
            continue
        nb = to_ipynb(src, REPO_ROOT / "build" / "notebooks" / f"{name}.ipynb")
        print(f"[study] {name}: executing ({profile})", flush=True)
        t0 = time.time()
        pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3", cwd=str(REPO_ROOT),
                            progress_bar=sys.stderr.isatty(), log_output=False, request_save_on_cell_execute=False)
        timings[name] = round(time.time() - t0, 1)
        keys[name] = key
        keys_path.write_text(json.dumps(keys, indent=1, sort_keys=True))
        print(f"[study] {name}: done in {timings[name]} s", flush=True)
    _record_timings(results_root, profile, model, timings, time.time() - t_all)
    if build:
        return build_book(book)
    return 0


def _record_timings(results_root: Path, profile: str, model: str | None, timings: dict[str, float], total: float) -> None:
    """Append this run's per-notebook wall times to ``<results>/<profile>/timings.json``."""
    path = results_root / profile / "timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(path.read_text()) if path.exists() else {"notebooks": {}}
    doc["notebooks"].update(timings)
    if timings:
        doc["last_run"] = {"model": model or "profile default", "seconds": round(total, 1),
                           "executed": sorted(timings), "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


def build_book(book: Path) -> int:
    """Fetch MathJax if needed and build the book with warnings as errors."""
    fetch = REPO_ROOT / "scripts" / "fetch_mathjax.sh"
    if fetch.exists():
        subprocess.run(["bash", str(fetch)], check=True, cwd=REPO_ROOT)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(book), "-W", "-n", "--keep-going", "--path-output", str(book)]
    print("[study] " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO_ROOT).returncode
