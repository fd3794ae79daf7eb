"""``wave study``: execute every chapter notebook with papermill, then build the book.

The notebooks' source of truth is ``notebooks/*.py`` (jupytext percent format). They
are converted one way (``.py`` -> ``.ipynb``) into ``build/notebooks/``, executed with
the run's parameters into ``<book>/chapters/``, and the book is built with warnings as
errors. A notebook is re-executed only when its source, its parameters, the library
modules it imports (:func:`chapter_key`) or the profiles changed since the executed copy
was written *on this machine*: the keys live in the cache folder (:func:`keys_file`), so
a fresh clone runs every chapter once, even though the executed default chapters are
committed, and a second run redoes only what changed.

The default profile writes into ``book/`` and ``data/results/`` (committed). Any other
profile writes a full copy of the book into ``scratch/<profile>/`` and never touches
the committed chapters.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .data import REPO_ROOT
from .models import cache_root
from .progress import relay

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
#: Execution order: the landing page reads every other chapter's results, so it runs last.
ORDER = ["00_data_and_capture", "01_layer_entropy", "02_concat_entropy", "03_cka_compartments",
         "04_token_filtering", "05_layer_selection", "06_eagle3_speedup", "07_cross_model",
         "08_results_summary", "09_performance", "intro"]


#: Chapters the book also shows for a second architecture (see :func:`_runs`), on the
#: cross-model chapter's prompt set; executed into ``chapters/second/``.
SECOND_ARCH = ["01_layer_entropy", "02_concat_entropy", "03_cka_compartments", "04_token_filtering"]


class StudyError(RuntimeError):
    """A chapter notebook failed; ``exit_code`` is 2 when the failing cell rejected an input."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


#: Exceptions that, raised by a chapter cell, mean bad input rather than a broken chapter.
INPUT_ERRORS = ("ConfigError", "PromptFileError", "TargetLoadError", "DrafterError")


def notebooks() -> list[Path]:
    """The chapter sources that exist, in execution order."""
    return [NOTEBOOK_DIR / f"{name}.py" for name in ORDER if (NOTEBOOK_DIR / f"{name}.py").exists()]


LIB_DIR = Path(__file__).resolve().parent


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


def used_modules(source: Path, lib_dir: Path = LIB_DIR, package: str = "activation_wave") -> list[Path]:
    """The package's module files that ``source`` uses, transitively through their own imports."""
    seen: dict[str, Path] = {}
    todo = sorted(_imports(source, lib_dir, package))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name, lib_dir)
        if path is None:  # a name imported from a module, not a module itself
            continue
        seen[name] = path
        todo += sorted(_imports(path, lib_dir, package) - set(seen))
    return sorted(set(seen.values()))


def chapter_key(source: Path, params: Mapping[str, str], lib_dir: Path = LIB_DIR,
                package: str = "activation_wave") -> str:
    """The study key of one chapter run: its notebook, its parameters, the library modules
    it imports (transitively, :func:`used_modules`) and the profiles; a change anywhere
    else in the library leaves the key, and the executed chapter, as they are."""
    h = hashlib.sha256(source.read_bytes())
    h.update(json.dumps(dict(params), sort_keys=True).encode())
    for path in used_modules(source, lib_dir, package) + sorted(lib_dir.rglob("*.yaml")):
        h.update(path.relative_to(lib_dir).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def to_ipynb(src: Path, dest: Path, banner: str | None = None, *, subfolder: str | None = None,
             siblings: Sequence[str] = ()) -> Path:
    """Convert a jupytext percent script to a notebook (one way; never syncs back).

    ``banner``: a markdown note inserted after the title cell. ``subfolder``: the page
    goes one folder below the chapters, so its markdown is relocated (see
    :func:`relocate_markdown`).
    """
    import jupytext
    from nbformat.v4 import new_markdown_cell

    nb = jupytext.read(src)
    if banner:
        nb.cells.insert(1, new_markdown_cell(banner))
    if subfolder:
        md = [c for c in nb.cells if c.cell_type == "markdown"]
        labels = defined_labels("\n".join(c.source for c in md))
        for cell in md:
            cell.source = relocate_markdown(cell.source, subfolder, siblings, labels)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.get("jupytext", {}).pop("text_representation", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, dest)
    return dest


def defined_labels(text: str) -> set[str]:
    """Labels that markdown defines: ``:name:`` options of figures and ``(label)=`` targets."""
    import re

    return set(re.findall(r"^:name:\s*(\S+)\s*$", text, flags=re.M)) | set(re.findall(r"^\((\S+)\)=\s*$", text, flags=re.M))


def relocate_markdown(text: str, prefix: str, siblings: Sequence[str] = (), labels: set[str] | None = None) -> str:
    """Markdown of a chapter rendered a second time one folder deeper (``chapters/<prefix>/``).

    Figure and section labels get ``<prefix>-`` (labels are global to the book, so the
    copy would clash with the original) and so do the references to them; relative
    ``{doc}`` links gain ``../`` unless they name one of ``siblings``, the pages rendered
    alongside in the same folder. ``labels``: the labels of the whole page (default: those
    defined in ``text``), since a reference may sit in another cell than its figure.

    >>> relocate_markdown(":name: fig-a\\nsee {numref}`fig-a`, {doc}`05_x` and {doc}`01_y`", "second", ["01_y"])
    ':name: second-fig-a\\nsee {numref}`second-fig-a`, {doc}`../05_x` and {doc}`01_y`'
    """
    import re

    for label in defined_labels(text) if labels is None else labels:
        text = re.sub(rf"^(:name:\s*){re.escape(label)}(\s*)$", rf"\g<1>{prefix}-{label}\g<2>", text, flags=re.M)
        text = re.sub(rf"^\({re.escape(label)}\)=", f"({prefix}-{label})=", text, flags=re.M)
        text = re.sub(rf"(\{{(?:ref|numref)\}}`(?:[^`<]*<)?){re.escape(label)}(>?`)", rf"\g<1>{prefix}-{label}\g<2>", text)

    def doc(m: re.Match[str]) -> str:
        title, target = m.group(2) or "", m.group(3)
        if target.startswith("/") or target in siblings:
            return m.group(0)
        return f"{m.group(1)}{title}../{target}{'>' if title else ''}`"

    return re.sub(r"(\{doc\}`)([^`<]*<)?([^`>]+)>?`", doc, text)


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


def keys_file(book: Path) -> Path:
    """Where the study records the key of each executed copy it wrote into ``book``:
    machine-local (under the cache folder, one file per book folder), never committed."""
    tag = hashlib.sha256(str(Path(book).resolve()).encode()).hexdigest()[:12]
    return cache_root() / "study" / f"keys-{tag}.json"


def root_parameter(results_root: Path) -> str:
    """The results root as the chapters receive it: repo-relative where possible, so the
    executed copies (and their keys) do not carry the clone's path."""
    return results_root.relative_to(REPO_ROOT).as_posix() if results_root.is_relative_to(REPO_ROOT) \
        else str(results_root)


def check_only(only: Sequence[str] | None, names: Sequence[str]) -> None:
    """Raise :class:`~activation_wave.config.ConfigError` for an ``--only`` prefix that matches no notebook."""
    from .config import ConfigError

    bad = [o for o in only or () if not any(n.startswith(o) for n in names)]
    if bad:
        raise ConfigError(f"--only {', '.join(bad)} matches no notebook; give a name or prefix of one of: "
                          f"{', '.join(names)} (e.g. --only 01)")


def _assigned(source: str) -> set[str]:
    """Names assigned at the top level of a cell's source (``x = 1`` -> ``{"x"}``)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}


def unknown_notebook_parameters(history: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """(unknown, declared) parameters of the notebook running in this kernel.

    papermill injects ``-p`` values as a cell starting ``# Parameters`` right after the
    cell tagged ``parameters``, and only warns about names that cell does not define; the
    kernel's input history (``In``, or ``history``) shows both cells. Outside a kernel, or
    when nothing was injected, both lists are empty.
    """
    if history is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return [], []
        ip = get_ipython()
        history = list(ip.user_ns.get("In", [])) if ip is not None else []
    for i, src in enumerate(history):
        if i > 0 and src.lstrip().startswith("# Parameters"):
            declared = _assigned(history[i - 1])
            return sorted(_assigned(src) - declared), sorted(declared)
    return [], []


def check_notebook_parameters(history: Sequence[str] | None = None) -> None:
    """Raise :class:`~activation_wave.config.ConfigError` when papermill passed a parameter
    (``-p modle ...``) that the notebook does not define, instead of running on the defaults."""
    from .config import ConfigError

    unknown, declared = unknown_notebook_parameters(history)
    if unknown:
        raise ConfigError(f"unknown notebook parameter(s) {unknown} (papermill -p); this notebook's parameters are "
                          f"{declared}: fix the spelling (papermill --help-notebook NOTEBOOK lists them)")


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
    logging.getLogger("papermill").setLevel(logging.ERROR)
    check_only(only, [src.stem for src in notebooks()] + [f"second/{stem}" for stem in SECOND_ARCH])
    book, results_root = prepare_book_dir(profile, book_dir)
    chapters = book / "chapters"
    chapters.mkdir(parents=True, exist_ok=True)
    keys_path = keys_file(book)
    keys_path.parent.mkdir(parents=True, exist_ok=True)
    keys = json.loads(keys_path.read_text()) if keys_path.exists() else {}
    params = {"profile": profile, "model": model or "", "results_root": root_parameter(results_root),
              "overrides": json.dumps(dict(overrides or {}), sort_keys=True)}
    timings: dict[str, float] = {}
    t_all = time.time()
    for name, src, out, run_params, banner in _runs(profile, model, chapters, params, overrides):
        if only and not any(name.startswith(o) for o in only):
            continue
        key = chapter_key(src, run_params)
        if keys.get(name) == key and out.exists():
            print(f"[study] {name}: unchanged, kept {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}")
            continue
        sub = name.split("/")[0] if "/" in name else None
        nb = to_ipynb(src, REPO_ROOT / "build" / "notebooks" / f"{name}.ipynb", banner, subfolder=sub,
                      siblings=SECOND_ARCH)
        print(f"[study] {name}: executing ({profile})", flush=True)
        t0 = time.time()
        out.parent.mkdir(parents=True, exist_ok=True)
        # Executed into build/ first: a failing chapter leaves its partial copy there, not in the book.
        partial = nb.with_name(f"{nb.stem}.executed.ipynb")
        try:
            with relay(f"[study] {name}"):  # the kernel's progress lines (drafter k of n, ...) into this log
                pm.execute_notebook(str(nb), str(partial), parameters=run_params, kernel_name="python3",
                                    cwd=str(REPO_ROOT), progress_bar=_progress(name), log_output=False,
                                    request_save_on_cell_execute=False)
        except pm.PapermillExecutionError as exc:
            raise StudyError(f"notebook {name} failed in cell [{exc.exec_count}]: {exc.ename}: "
                             f"{str(exc.evalue).splitlines()[0] if exc.evalue else ''}; the executed copy with the "
                             f"full traceback is {partial} ({time.time() - t0:.0f} s)",
                             exit_code=2 if exc.ename in INPUT_ERRORS else 1) from None
        shutil.move(partial, out)
        _inherit_parameter_tags(out)
        timings[name] = round(time.time() - t0, 1)
        keys[name] = key
        keys_path.write_text(json.dumps(keys, indent=1, sort_keys=True))
        print(f"[study] {name}: done in {timings[name]} s", flush=True)
    _record_timings(results_root, profile, model, timings, time.time() - t_all)
    if build:
        return build_book(book)
    return 0


def _inherit_parameter_tags(path: Path) -> None:
    """Give papermill's injected-parameters cell the display tags of the parameters cell
    (e.g. ``remove-cell`` on the landing page), so both render alike."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    params = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    extra = set(params.metadata["tags"]) - {"parameters"} if params is not None else set()
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    if extra and injected:
        for c in injected:
            c.metadata["tags"] = sorted(set(c.metadata["tags"]) | extra)
        nbformat.write(nb, path)


def _runs(profile: str, model: str | None, chapters: Path, params: dict[str, str],
          overrides: Mapping[str, str] | None) -> list[tuple[str, Path, Path, dict[str, str], str | None]]:
    """(name, source, executed copy, papermill parameters, banner) of every notebook run:
    the chapters in :data:`ORDER`, then :data:`SECOND_ARCH` on a second architecture,
    executed into ``chapters/second/``: the profile's ``cross.model``, or the profile's
    own model when the study already runs on ``cross.model``."""
    from .config import load_config
    from .crossmodel import cross_overrides

    runs: list[tuple[str, Path, Path, dict[str, str], str | None]] = [
        (src.stem, src, chapters / f"{src.stem}.ipynb", params, None) for src in notebooks()]
    cfg = load_config(profile, dict(overrides or {}), model=model)
    second = cfg.cross.model if cfg.cross.model != cfg.model else load_config(profile).model
    if second == cfg.model:
        return runs
    extra = {**dict(overrides or {}), **cross_overrides(cfg)}
    second_params = {**params, "model": second, "overrides": json.dumps(extra, sort_keys=True)}
    banner = (f"```{{note}}\nThis page is the chapter of the same name rerun on **{second}**, the study's second "
              f"architecture, on the smaller prompt set of {{doc}}`07_cross_model`. Every number and figure "
              f"is this model's; sentences that interpret them were written for {cfg.model} and may not hold "
              f"here: the cross-model chapter compares the two.\n```")
    for stem in SECOND_ARCH:
        src = NOTEBOOK_DIR / f"{stem}.py"
        if src.exists():
            runs.append((f"second/{stem}", src, chapters / "second" / f"{stem}.ipynb", second_params, banner))
    return runs


def _record_timings(results_root: Path, profile: str, model: str | None, timings: dict[str, float], total: float) -> None:
    """Record this run's per-notebook wall times in ``<results>/<profile>/timings.json``:
    ``notebooks`` holds each notebook's last execution, ``longest`` its longest recorded one
    (with when it finished), which for a chapter with caches is the run that filled them,
    the cost a fresh clone pays; a warm rerun never overwrites it."""
    path = results_root / profile / "timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(path.read_text()) if path.exists() else {"notebooks": {}}
    doc["notebooks"].update(timings)
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    longest = doc.setdefault("longest", {})
    for name, seconds in timings.items():
        if seconds > longest.get(name, {}).get("seconds", -1.0):
            longest[name] = {"seconds": seconds, "finished": now}
    if timings:
        doc["last_run"] = {"model": model or "profile default", "seconds": round(total, 1),
                           "executed": sorted(timings), "finished": now}
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
