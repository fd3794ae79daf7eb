"""Chapter notebooks: their sources and order, the one-way conversion to ``.ipynb``, the
relocation of a chapter's markdown for its second-architecture copy, and the check of
papermill's parameters.

The notebooks' source of truth is ``notebooks/*.py`` (jupytext percent format); they are
converted one way (``.py`` -> ``.ipynb``), never synced back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from activation_wave.core import files
from activation_wave.core.paths import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"


#: Execution order: the landing page reads every other chapter's results, so it runs last.
ORDER = ["00_data_and_capture", "01_layer_entropy", "02_concat_entropy", "03_cka_compartments",
         "04_token_filtering", "05_layer_selection", "06_eagle3_speedup", "06b_drafter_strength",
         "07_gemma", "07b_qwen",
         "08_results_summary", "09_performance", "10_drafter_recipe", "11_cpu_payoff", "intro"]


#: Chapters the book also shows for a second architecture (see :func:`_runs`), on the
#: cross-model chapter's prompt set; executed into ``chapters/second/``.
SECOND_ARCH = ["01_layer_entropy", "02_concat_entropy", "03_cka_compartments", "04_token_filtering"]
#: Chapters the book shows for a third architecture (the profile's ``third`` section), on its
#: own prompt set; executed into ``chapters/third/``.
THIRD_ARCH = [*SECOND_ARCH, "05_layer_selection"]
#: The other architectures' folders under ``chapters/`` and the chapters each holds.
ARCH_FOLDERS: dict[str, list[str]] = {"second": SECOND_ARCH, "third": THIRD_ARCH}
#: The chapter comparing each other architecture with the study's model: a run that does not
#: show the architecture (a profile naming no ``third`` model) neither executes nor lists it.
ARCH_PAGES: dict[str, str] = {"second": "07_gemma", "third": "07b_qwen"}


def notebooks() -> list[Path]:
    """The chapter sources that exist, in execution order."""
    return [NOTEBOOK_DIR / f"{name}.py" for name in ORDER if (NOTEBOOK_DIR / f"{name}.py").exists()]


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
    return files.write_text(dest, jupytext.writes(nb, fmt="ipynb"))


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


def inherit_parameter_tags(path: Path) -> None:
    """Give papermill's injected-parameters cell the display tags of the parameters cell
    (e.g. ``remove-cell`` on the landing page), so it renders as the parameters cell would,
    and remove the parameters cell itself from the page: the injected cell holds the values
    that ran, so a reader sees the parameters once."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    params = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    if params is None or not injected:
        return
    extra = set(params.metadata["tags"]) - {"parameters"}
    for c in injected:
        c.metadata["tags"] = sorted(set(c.metadata["tags"]) | extra)
    params.metadata["tags"] = sorted(set(params.metadata["tags"]) | {"remove-cell"})
    files.write_text(path, nbformat.writes(nb))


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
    """Raise :class:`~activation_wave.core.config.ConfigError` when papermill passed a parameter
    (``-p modle ...``) that the notebook does not define, instead of running on the defaults."""
    from activation_wave.core.config import ConfigError

    unknown, declared = unknown_notebook_parameters(history)
    if unknown:
        raise ConfigError(f"unknown notebook parameter(s) {unknown} (papermill -p); this notebook's parameters are "
                          f"{declared}: fix the spelling (papermill --help-notebook NOTEBOOK lists them)")
