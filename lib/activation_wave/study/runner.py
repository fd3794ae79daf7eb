"""``wave study``: execute every chapter notebook with papermill, then build the book.

The notebooks' source of truth is ``notebooks/*.py`` (jupytext percent format). They
are converted one way (``.py`` -> ``.ipynb``) into ``build/notebooks/``, executed with
the run's parameters into ``<book>/chapters/``, and the book is built with warnings as
errors. A chapter is re-executed only when its study key changed
(:mod:`activation_wave.study.keys`); the notebooks themselves are handled by
:mod:`activation_wave.study.notebooks`.

The default profile on its own model writes into ``book/`` and ``data/results/``
(committed). Any other run writes a full copy of the book and its results into a scratch
folder and never touches the committed chapters: ``scratch/<profile>/`` for another
profile, ``scratch/<profile>-<model>/`` for another model (:func:`run_folder`). The config,
``--set`` overrides included, is checked before anything is copied or written.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from activation_wave.core import files
from activation_wave.core.paths import REPO_ROOT
from activation_wave.core.progress import relay
from activation_wave.study.keys import chapter_key, keys_file
from activation_wave.study.notebooks import (ARCH_FOLDERS, ARCH_PAGES, NOTEBOOK_DIR, SECOND_ARCH, THIRD_ARCH,
                                            inherit_parameter_tags, notebooks, to_ipynb)


class StudyError(RuntimeError):
    """A chapter notebook failed; ``exit_code`` is 2 when the failing cell rejected an input."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


#: Exceptions that, raised by a chapter cell, mean bad input rather than a broken chapter.
INPUT_ERRORS = ("ConfigError", "PromptFileError", "TargetLoadError", "DrafterError", "WriteRefused", "WriteFailed",
                "ResultsFileError", "LedgerError")
#: The file that marks a folder as a ``wave study`` run folder: the study writes into a
#: ``--book-dir``'s parent only when it is absent, empty, or carries this marker.
RUN_MARKER = ".wave-study-run"


def model_slug(model: str) -> str:
    """A model name as a folder name (as the results folders name it): ``gemma3-270m``,
    ``Llama-3.1-8B-Instruct`` for ``meta-llama/Llama-3.1-8B-Instruct``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(model).name)


def is_committed_run(profile: str, model: str | None) -> bool:
    """Whether a run is the one the committed book shows: the default profile on the
    default profile's own model (``--model`` left out or naming that model)."""
    from activation_wave.core.config import load_config

    return profile == "default" and (not model or model_slug(model) == model_slug(load_config("default").model))


def run_folder(profile: str, model: str | None) -> Path:
    """Where a run that is not the committed one writes its book and results:
    ``scratch/<profile>/`` on the profile's own model, ``scratch/<profile>-<model>/`` on
    another, so that no two models' pages overwrite each other."""
    from activation_wave.core.config import load_config

    if not model or model_slug(model) == model_slug(load_config(profile).model):
        return REPO_ROOT / "scratch" / profile
    return REPO_ROOT / "scratch" / f"{profile}-{model_slug(model)}"


def prepare_book_dir(profile: str, book_dir: str | Path | None, model: str | None = None, *,
                     copy: bool = True) -> tuple[Path, Path]:
    """Return (book dir, results root). The default profile on its own model writes into the
    committed ``book/`` and ``data/results``; every other run gets a scratch copy of the book
    (:func:`run_folder`, or the parent of ``book_dir``). Naming ``book/`` as ``book_dir`` for
    such a run raises :class:`~activation_wave.core.config.ConfigError`, since its pages would
    overwrite the committed ones."""
    from activation_wave.core.config import ConfigError

    committed = is_committed_run(profile, model)
    if book_dir is None and committed:
        return REPO_ROOT / "book", REPO_ROOT / "data" / "results"
    root = Path(book_dir).resolve().parent if book_dir else run_folder(profile, model)
    book = Path(book_dir).resolve() if book_dir else root / "book"
    if book == (REPO_ROOT / "book").resolve():
        if not committed:
            raise ConfigError(f"--book-dir {book_dir} is the committed book of the default profile's model; a "
                              f"{profile} run on {model or 'the profile model'} would overwrite its pages: leave "
                              f"--book-dir out (it writes into {run_folder(profile, model).relative_to(REPO_ROOT)}/) "
                              "or name another folder")
        return book, REPO_ROOT / "data" / "results"
    if book_dir:
        check_book_dir(book_dir, profile, model)
    if not copy:  # only the paths, checked: nothing is written
        return book, root / "results"
    root.mkdir(parents=True, exist_ok=True)
    files.write_text(root / RUN_MARKER, "a wave study run folder: `wave study --book-dir` may write here\n")
    ignore = shutil.ignore_patterns("_build", "chapters", "_toc.yml")
    shutil.copytree(REPO_ROOT / "book", book, symlinks=True, ignore=ignore, dirs_exist_ok=True,
                    copy_function=_copy_page)
    toc_link = book / "_toc.yml"
    if not toc_link.is_symlink():
        toc_link.unlink(missing_ok=True)
        toc_link.symlink_to("../_toc.yml")
    for name in ("_config.yml", "_toc.yml"):
        _copy_page(REPO_ROOT / name, root / name)
    shown = {folder for folder, *_ in architecture_runs(profile, model)}
    drop_toc_folders(root / "_toc.yml", [f for f in ARCH_FOLDERS if f not in shown])
    # Folders the config refers to relative to the repo (e.g. build/mathjax) are linked in.
    link = root / "build"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "build", target_is_directory=True)
    return book, root / "results"


def _copy_page(src: str | Path, dest: str | Path) -> Path:
    """Copy one book file through the write layer (atomic); the copy_function of the book's copy."""
    return files.write_bytes(dest, Path(src).read_bytes())


def check_book_dir(book_dir: str | Path, profile: str, model: str | None) -> None:
    """Raise :class:`~activation_wave.core.config.ConfigError` unless ``--book-dir`` names a folder
    the study may fill. The study writes the book into it and its config, results and build
    link into its parent (the run folder), so that parent must be absent, empty (but for an
    empty ``book_dir``), or a run folder the study made before (:data:`RUN_MARKER`); never the
    repository, a folder holding it, or a folder inside the committed book."""
    from activation_wave.core.config import ConfigError

    book = Path(book_dir).resolve()
    root = book.parent
    fix = (f"leave --book-dir out (it writes into {run_folder(profile, model).relative_to(REPO_ROOT)}/) or name "
           "a folder inside a new or empty one, e.g. --book-dir /tmp/wave-run/book")
    committed = (REPO_ROOT / "book").resolve()
    if book.is_relative_to(committed) or root.is_relative_to(committed):
        raise ConfigError(f"--book-dir {book_dir} is inside the committed book {committed}: its pages would be "
                          f"overwritten; {fix}")
    if REPO_ROOT.resolve().is_relative_to(root):
        raise ConfigError(f"--book-dir {book_dir}: the study writes its run into the parent folder {root}, which "
                          f"is or holds the repository; {fix}")
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--book-dir {book_dir}: its parent {root} is a file; {fix}")
    if book.exists() and not book.is_dir():
        raise ConfigError(f"--book-dir {book_dir} is a file; {fix}")
    if not root.is_dir() or (root / RUN_MARKER).is_file():
        return
    others = sorted(p.name for p in root.iterdir() if p != book)
    inside = sorted(p.name for p in book.iterdir()) if book.is_dir() else []
    if others or inside:
        shown = ", ".join((others or [f"{book.name}/{n}" for n in inside])[:3])
        raise ConfigError(f"--book-dir {book_dir}: the study writes into its parent folder {root}, which holds "
                          f"files it did not make ({shown}); {fix}")


def drop_toc_folders(toc: Path, folders: Sequence[str]) -> None:
    """Remove from the table of contents ``toc`` every page under ``chapters/<folder>/`` for
    ``folders`` (architectures this run does not show) and the page comparing each with the
    study's model (:data:`~activation_wave.study.notebooks.ARCH_PAGES`), and any part left empty."""
    import yaml

    if not folders:
        return
    doc = yaml.safe_load(toc.read_text()) or {}
    if not doc.get("parts"):
        return
    gone = tuple(f"chapters/{f}/" for f in folders)
    pages = {f"chapters/{ARCH_PAGES[f]}" for f in folders if f in ARCH_PAGES}
    parts = []
    for part in doc.get("parts", []):
        part["chapters"] = [c for c in part.get("chapters", [])
                            if not str(c.get("file", "")).startswith(gone) and c.get("file") not in pages]
        if part["chapters"]:
            parts.append(part)
    doc["parts"] = parts
    files.write_text(toc, yaml.safe_dump(doc, sort_keys=False))


def root_parameter(results_root: Path) -> str:
    """The results root as the chapters receive it: repo-relative where possible, so the
    executed copies (and their keys) do not carry the clone's path."""
    return results_root.relative_to(REPO_ROOT).as_posix() if results_root.is_relative_to(REPO_ROOT) \
        else str(results_root)


def check_only(only: Sequence[str] | None, names: Sequence[str]) -> None:
    """Raise :class:`~activation_wave.core.config.ConfigError` for an ``--only`` prefix that matches no notebook."""
    from activation_wave.core.config import ConfigError

    blank = [o for o in only or () if not o.strip()]
    if blank:
        raise ConfigError(f"--only {blank[0]!r} is empty and would match every notebook; give a name or prefix of "
                          f"one of: {', '.join(names)} (e.g. --only 01), or leave --only out to run them all")
    bad = [o for o in only or () if not any(n.startswith(o) for n in names)]
    if bad:
        raise ConfigError(f"--only {', '.join(bad)} matches no notebook; give a name or prefix of one of: "
                          f"{', '.join(names)} (e.g. --only 01)")


def check_config(profile: str, model: str | None, overrides: Mapping[str, str] | None) -> None:
    """Raise :class:`~activation_wave.core.config.ConfigError` for a config the chapters would
    reject (unknown profile, key or value out of range, ``--set`` included), before a run
    writes anything."""
    from activation_wave.core.config import ConfigError, load_config
    from activation_wave.models.targets import ALIASES, TargetLoadError, _check_hub_id
    from activation_wave.study.estimate import check_before_load

    cfg = load_config(profile, dict(overrides or {}), model=model)
    for key, name in (("cross.model", cfg.cross.model), ("third.model", cfg.third.model)):
        if not name or name in ALIASES or Path(name).expanduser().exists():
            continue
        try:
            _check_hub_id(name)
        except TargetLoadError:
            raise ConfigError(f"{key} = {name!r} is not an embedded alias {sorted(ALIASES)}, an existing folder or "
                              f".gguf file, or a hub id 'org/name'; fix it with --set {key}=<model> (e.g. "
                              f"--set {key}={'qwen2.5-coder-1.5b' if key == 'third.model' else 'gemma3-270m'}), "
                              f"or --set {key}= for none", key=key) from None
    check_before_load(cfg)  # the chapters' own check_fit, from config.json alone


class _LineFile:
    """A file for papermill's tqdm cell counter when stderr is not a terminal: each redraw
    (``\\r``) becomes its own line, repeated lines are dropped."""

    def __init__(self) -> None:
        self.last = ""

    def write(self, text: str) -> None:
        for piece in text.replace("\n", "\r").split("\r"):
            line = piece.strip()
            if line and line != self.last:
                print(line, file=sys.stderr, flush=True)
                self.last = line

    def flush(self) -> None:
        sys.stderr.flush()


def _progress(name: str) -> bool | dict[str, object]:
    """papermill's ``progress_bar``: its tqdm bar on a terminal, one line per cell otherwise."""
    if sys.stderr.isatty():
        return True
    return {"file": _LineFile(), "desc": f"[study] {name}", "mininterval": 0,
            "bar_format": "{desc}: cell {n_fmt}/{total_fmt}, {elapsed}"}


def run_study(profile: str = "default", model: str | None = None, book_dir: str | Path | None = None,
              only: Sequence[str] | None = None, build: bool = True, overrides: Mapping[str, str] | None = None) -> int:
    """Execute the chapters of one profile and build the book; returns a process exit code."""
    import logging

    import papermill as pm

    # papermill's own warnings (an unknown parameter, black not installed) would be extra
    # lines on stderr; a failing chapter is reported as one line below instead.
    # Its error lines repeat what the exception says; the kernel client's (nbclient, through
    # papermill's or traitlets' logger) and asyncio's at exit are noise after a Ctrl-C.
    for logger in ("papermill", "traitlets"):
        logging.getLogger(logger).setLevel(logging.CRITICAL)
    check_only(only, [src.stem for src in notebooks()] + [f"{folder}/{stem}" for folder, stems in ARCH_FOLDERS.items()
                                                         for stem in stems])
    check_config(profile, model, overrides)  # before anything is copied or written
    book, results_root = prepare_book_dir(profile, book_dir, model, copy=False)
    if (results_root / profile / "timings.json").exists():
        _timings_doc(results_root, profile)  # a damaged timings file fails here, before anything is written
    book, results_root = prepare_book_dir(profile, book_dir, model)
    chapters = book / "chapters"
    chapters.mkdir(parents=True, exist_ok=True)
    keys_path = keys_file(book)
    keys_path.parent.mkdir(parents=True, exist_ok=True)
    keys = _json_object(keys_path, "delete it: every chapter is then executed again") if keys_path.exists() else {}
    params = {"profile": profile, "model": model or "", "results_root": root_parameter(results_root),
              "overrides": json.dumps(dict(overrides or {}), sort_keys=True)}
    timings: dict[str, float] = {}
    t_all = time.time()
    todo = []
    for name, src, out, run_params, banner in _runs(profile, model, chapters, params, overrides):
        if only and not any(name.startswith(o) for o in only):
            continue
        key = chapter_key(src, run_params)
        if keys.get(name) == key and out.exists():
            print(f"[study] {name}: unchanged, kept {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}")
            continue
        todo.append((name, src, out, run_params, banner, key))
    recorded = _timings_doc(results_root, profile)
    print(f"[study] estimate: {remaining_text([t[0] for t in todo], recorded)}", flush=True)
    for i, (name, src, out, run_params, banner, key) in enumerate(todo):
        sub = name.split("/")[0] if "/" in name else None
        nb = to_ipynb(src, REPO_ROOT / "build" / "notebooks" / f"{name}.ipynb", banner, subfolder=sub,
                      siblings=ARCH_FOLDERS.get(sub or "", ()))
        print(f"[study] {name}: executing ({profile})", flush=True)
        t0 = time.time()
        out.parent.mkdir(parents=True, exist_ok=True)
        # Executed into build/ first: a failing chapter leaves its partial copy there, not in the book.
        partial = nb.with_name(f"{nb.stem}.executed.ipynb")
        try:
            # the kernel's own stderr (its log lines, a ZMQ traceback on Ctrl-C) goes to a file beside the
            # partial copy; its progress lines (drafter k of n, ...) are relayed into this log
            with kernel_stderr(nb.with_name(f"{nb.stem}.kernel.log")), relay(f"[study] {name}"):
                pm.execute_notebook(str(nb), str(partial), parameters=run_params, kernel_name="python3",
                                    cwd=str(REPO_ROOT), progress_bar=_progress(name), log_output=False,
                                    request_save_on_cell_execute=False)
        except KeyboardInterrupt:
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # "Task exception was never retrieved" at exit
            raise
        except pm.PapermillExecutionError as exc:
            raise StudyError(f"notebook {name} failed in cell [{exc.exec_count}]: {exc.ename}: "
                             f"{str(exc.evalue).splitlines()[0] if exc.evalue else ''}; the executed copy with the "
                             f"full traceback is {partial} ({time.time() - t0:.0f} s)",
                             exit_code=2 if exc.ename in INPUT_ERRORS else 1) from None
        # atomic: a reader never sees half a chapter; no machine path (venv, checkout, cache) goes with it
        files.write_bytes(out, without_machine_paths(partial.read_bytes()))
        partial.unlink()
        inherit_parameter_tags(out)
        timings[name] = round(time.time() - t0, 1)
        keys[name] = key
        files.write_json(keys_path, keys, indent=1, sort_keys=True)
        print(f"[study] {name}: done in {timings[name]} s; left: {remaining_text([t[0] for t in todo[i + 1:]], recorded)}",
              flush=True)
    _record_timings(results_root, profile, model, timings, time.time() - t_all)
    if build:
        return build_book(book)
    return 0


def machine_path_rewrites() -> list[tuple[str, str]]:
    """``(pattern, replacement)`` pairs, in order, that take this machine's absolute paths out of
    a page's outputs: an installed package's file reads as its module path (``tqdm/auto.py``),
    the cache as ``<cache>``, the checkout's files relative to it, the home as ``~`` and the
    scratch folder as ``<tmp>``."""
    import re
    import tempfile

    from activation_wave.core.paths import cache_root

    pairs = [(r"(?:[^\s\"'(]*/)?(?:site|dist)-packages(?:/|\b)", "")]
    try:
        pairs.append((re.escape(str(cache_root())), "<cache>"))
    except ValueError:  # an empty WAVE_CACHE: nothing was cached there
        pass
    pairs += [(re.escape(str(REPO_ROOT)) + "/?", ""), (re.escape(str(Path.home())), "~"),
              (re.escape(tempfile.gettempdir()) + "(?=/)", "<tmp>")]
    return pairs


def without_machine_paths(raw: bytes) -> bytes:
    """An executed notebook with this machine's paths rewritten (:func:`machine_path_rewrites`)
    in its outputs' text (streams, plain and markdown outputs, tracebacks) and in papermill's
    record of the input and output paths; images and code are left as they are.

    >>> nb = {"cells": [{"cell_type": "code", "source": "", "metadata": {}, "outputs": [
    ...     {"output_type": "stream", "name": "stderr", "text": [str(REPO_ROOT / "lib/x.py") + ":3: Warning"]}]}],
    ...       "metadata": {"papermill": {"input_path": str(REPO_ROOT / "build/a.ipynb")}}}
    >>> out = json.loads(without_machine_paths(json.dumps(nb).encode()))
    >>> out["cells"][0]["outputs"][0]["text"], out["metadata"]["papermill"]["input_path"]
    (['lib/x.py:3: Warning'], 'build/a.ipynb')
    """
    import re

    rewrites = [(re.compile(p), r) for p, r in machine_path_rewrites()]

    def clean(text: Any) -> Any:
        if isinstance(text, list):
            return [clean(t) for t in text]
        if isinstance(text, dict):
            return {k: clean(v) for k, v in text.items()}
        if not isinstance(text, str):
            return text
        for pattern, replacement in rewrites:
            text = pattern.sub(replacement, text)
        return text

    nb = json.loads(raw)
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            if "text" in o:
                o["text"] = clean(o["text"])
            if "traceback" in o:
                o["traceback"] = clean(o["traceback"])
            for mime in ("text/plain", "text/markdown"):
                if mime in o.get("data", {}):
                    o["data"][mime] = clean(o["data"][mime])
    pm = nb.get("metadata", {}).get("papermill", {})
    for key in ("input_path", "output_path"):
        if key in pm:
            pm[key] = clean(pm[key])
    if "parameters" in pm:
        pm["parameters"] = clean(pm["parameters"])
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()  # nbformat's layout


@contextlib.contextmanager
def kernel_stderr(log: Path) -> Iterator[Path]:
    """Point file descriptor 2 at ``log`` for the block, so the notebook kernel started inside it
    (which inherits the descriptor) writes its stderr there and not into the study's: Ctrl-C in a
    chapter then prints the study's one line, not the kernel's traceback. This process's own
    ``sys.stderr`` keeps writing where it did."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        real = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a captured stream (pytest's capsys): fd 2 is not it
        real = False
    sys.stderr.flush()
    saved = os.dup(2)
    old = sys.stderr
    with open(log, "ab") as fh:
        os.dup2(fh.fileno(), 2)
    try:
        if real:
            sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding=old.encoding, errors="backslashreplace")
        yield log
    finally:
        if real:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = old
        os.dup2(saved, 2)
        os.close(saved)


def _runs(profile: str, model: str | None, chapters: Path, params: dict[str, str],
          overrides: Mapping[str, str] | None) -> list[tuple[str, Path, Path, dict[str, str], str | None]]:
    """(name, source, executed copy, papermill parameters, banner) of every notebook run:
    the chapters in :data:`~activation_wave.study.notebooks.ORDER` (but the comparison page of
    an architecture the run does not show), then the other architectures' pages
    (:func:`architecture_runs`) into ``chapters/<folder>/``."""
    arch = architecture_runs(profile, model, overrides)
    hidden = {ARCH_PAGES[f] for f in ARCH_PAGES if f not in {a[0] for a in arch}}
    runs: list[tuple[str, Path, Path, dict[str, str], str | None]] = [
        (src.stem, src, chapters / f"{src.stem}.ipynb", params, None) for src in notebooks() if src.stem not in hidden]
    for folder, arch_model, extra, stems, banner in arch:
        arch_params = {**params, "model": arch_model, "overrides": json.dumps(extra, sort_keys=True)}
        for stem in stems:
            src = NOTEBOOK_DIR / f"{stem}.py"
            if src.exists():
                runs.append((f"{folder}/{stem}", src, chapters / folder / f"{stem}.ipynb", arch_params, banner))
    return runs


def architecture_runs(profile: str, model: str | None, overrides: Mapping[str, str] | None = None
                      ) -> list[tuple[str, str, dict[str, Any], list[str], str]]:
    """(folder, model, overrides, chapter stems, banner) of each other architecture the book
    shows: ``second/`` (:data:`SECOND_ARCH` on the profile's ``cross.model``, or on the
    profile's own model when the study already runs on ``cross.model``) and ``third/``
    (:data:`THIRD_ARCH` on ``third.model``, when the profile names one that is not already
    shown), each on its own prompt set."""
    from activation_wave.core.config import load_config
    from activation_wave.select.across_models import cross_overrides, third_overrides

    cfg = load_config(profile, dict(overrides or {}), model=model)
    out: list[tuple[str, str, dict[str, Any], list[str], str]] = []
    second = cfg.cross.model if cfg.cross.model != cfg.model else load_config(profile).model
    if second != cfg.model:
        out.append(("second", second, {**dict(overrides or {}), **cross_overrides(cfg)}, SECOND_ARCH,
                    _banner(second, "second", cfg.model)))
    third = cfg.third.model
    if third and third not in (cfg.model, second):
        out.append(("third", third, {**dict(overrides or {}), **third_overrides(cfg)}, THIRD_ARCH,
                    _banner(third, "third", cfg.model)))
    return out


def _banner(model: str, which: str, study_model: str) -> str:
    """The note at the top of another architecture's page: the markdown of
    ``notebooks/_other_architecture.md`` (where an author edits its words) with the model, which
    architecture it is (an :data:`~activation_wave.study.notebooks.ARCH_PAGES` key), the page
    comparing it with the study's model and that model filled in."""
    text = (NOTEBOOK_DIR / "_other_architecture.md").read_text(encoding="utf-8")
    for field, value in (("model", model), ("which", which), ("page", f"{{doc}}`{ARCH_PAGES[which]}`"),
                         ("study_model", study_model)):
        text = text.replace(f"{{{field}}}", value)
    return text.strip()


def _json_object(path: Path, fix: str) -> dict[str, Any]:
    from activation_wave.core.results import read_json_object

    return read_json_object(path, fix)


def _timings_doc(results_root: Path, profile: str) -> dict[str, Any]:
    """The profile's recorded notebook times (``timings.json``; empty when none), checked:
    a file of another shape raises :class:`~activation_wave.core.results.ResultsFileError`
    naming it, before any notebook runs."""
    from activation_wave.core.results import ResultsFileError

    path = results_root / profile / "timings.json"
    if not path.exists():
        return {}
    fix = "delete it (it holds only the study's timing records; the next run writes a new one) or restore it"
    doc = _json_object(path, fix)
    for section in ("notebooks", "longest"):
        value = doc.get(section, {})
        if not isinstance(value, dict):
            raise ResultsFileError(f"{path}: {section!r} is a JSON {type(value).__name__}, not an object; {fix}")
    for name, rec in doc.get("longest", {}).items():
        if not isinstance(rec, dict) or not isinstance(rec.get("seconds"), (int, float)):
            raise ResultsFileError(f"{path}: longest[{name!r}] has no number 'seconds' (got {rec!r}); {fix}")
    for name, sec in doc.get("notebooks", {}).items():
        if not isinstance(sec, (int, float)):
            raise ResultsFileError(f"{path}: notebooks[{name!r}] = {sec!r} is not a number of seconds; {fix}")
    return doc


#: How many notebooks without a timing record :func:`remaining_text` names before it counts
#: the rest (a cold results root has no record for any of them).
NAMED_UNKNOWN = 3


def remaining_text(names: Sequence[str], recorded: Mapping[str, Any]) -> str:
    """How long the notebooks ``names`` should take, from their longest recorded runs (the
    runs that filled the caches: a cold machine's cost, so an upper bound where caches or the
    drafter ledger are warm); notebooks without a record are named, the first
    :data:`NAMED_UNKNOWN` of them, then counted.

    >>> doc = {"longest": {"a": {"seconds": 600.0}, "b": {"seconds": 4200.0}}}
    >>> remaining_text(["a", "b", "c"], doc)
    '3 notebooks, at most about 1 h 20 min (their longest recorded runs, cold caches); no record for c'
    >>> remaining_text(["c", "d", "e", "f", "g"], doc)
    '5 notebooks; no record for c, d, e and 2 more'
    >>> remaining_text([], doc)
    'nothing left to run'
    """
    if not names:
        return "nothing left to run"
    longest = recorded.get("longest", {})
    seconds = sum(float(longest[n]["seconds"]) for n in names if n in longest)
    unknown = [n for n in names if n not in longest]
    minutes = round(seconds / 60)
    span = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{max(minutes, 1)} min"
    text = f"{len(names)} notebook{'s' if len(names) != 1 else ''}"
    if len(unknown) < len(names):
        text += f", at most about {span} (their longest recorded runs, cold caches)"
    if not unknown:
        return text
    more = len(unknown) - NAMED_UNKNOWN
    named = ", ".join(unknown[:NAMED_UNKNOWN]) + (f" and {more} more" if more > 0 else "")
    return f"{text}; no record for {named}"


def _record_timings(results_root: Path, profile: str, model: str | None, timings: dict[str, float], total: float) -> None:
    """Record this run's per-notebook wall times in ``<results>/<profile>/timings.json``:
    ``notebooks`` holds each notebook's last execution, ``longest`` its longest recorded one
    (with when it finished), which for a chapter with caches is the run that filled them,
    the cost a fresh clone pays; a warm rerun never overwrites it."""
    path = results_root / profile / "timings.json"
    now = time.strftime("%Y-%m-%dT%H:%M:%S")

    def merge(_: Any) -> dict[str, Any]:
        doc = _timings_doc(results_root, profile)  # re-read under the lock: a parallel study's records are kept
        doc.setdefault("notebooks", {}).update(timings)
        longest = doc.setdefault("longest", {})
        for name, seconds in timings.items():
            if seconds > longest.get(name, {}).get("seconds", -1.0):
                longest[name] = {"seconds": seconds, "finished": now}
        if timings:
            doc["last_run"] = {"model": model or "profile default", "seconds": round(total, 1),
                               "executed": sorted(timings), "finished": now}
        return doc

    files.update_json(path, merge, files.json_with(), read=lambda p: None, indent=1, sort_keys=True)


def build_book(book: Path) -> int:
    """Fetch MathJax if needed and build the book with warnings as errors."""
    fetch = REPO_ROOT / "scripts" / "fetch_mathjax.sh"
    if fetch.exists():
        subprocess.run(["bash", str(fetch)], check=True, cwd=REPO_ROOT)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(book), "-W", "-n", "--keep-going", "--path-output", str(book)]
    print("[study] " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO_ROOT).returncode
