"""The book as committed, read as a reader reads it (activation_wave.study.pages): every page of
the main parts and every per-architecture appendix page is clean of lab-record words,
placeholders, garbled numbers, counts without their plural, machine paths and overlong
sentences, within its word budget; every executed page ran today's code and shows its
parameters once; no committed notebook holds a machine path. (The checks themselves are tested
in test_book_guards.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest

from activation_wave.study import pages as P
from activation_wave.study.notebooks import NOTEBOOK_DIR

BOOK = P.BOOK


@pytest.mark.parametrize("entry", P.main_pages() + P.architecture_pages())
def test_pages_read_clean(entry):
    page = P.page_file(entry)
    problems = P.page_problems(P.reader_text(page), P.budget(entry))
    assert not problems, f"{page.relative_to(BOOK)}: " + "; ".join(problems[:12])


def _executed() -> list[Path]:
    """The executed notebooks of the main parts and the other architectures' copies of Part I
    (the same sources, with a note in markdown)."""
    return [p for p in map(P.page_file, P.main_pages() + P.architecture_pages()) if p.suffix == ".ipynb"]


@pytest.mark.parametrize("path", _executed(), ids=lambda p: str(p.relative_to(BOOK)))
def test_executed_chapters_run_todays_code_and_show_parameters_once(path):
    nb = json.loads(path.read_text())
    source = jupytext.read(NOTEBOOK_DIR / f"{path.stem}.py")
    ran = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
           and "injected-parameters" not in c["metadata"].get("tags", [])]
    name = path.relative_to(BOOK / "chapters").with_suffix("")
    assert ran == [c.source for c in source.cells if c.cell_type == "code"], \
        f"{path.relative_to(BOOK)} was executed from an older source: run `wave study --profile default --only {name}`"
    # a markdown-only edit committed without re-executing would leave the old sentence in the built book;
    # the other architectures' copies are compared with the source as the runner converts it (banner, relocated links)
    shown_md = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert shown_md == _converted_markdown(str(name)), \
        f"{path.relative_to(BOOK)}'s text is older than its source: run `wave study --profile default --only {name}`"
    shown = [c for c in nb["cells"] if {"parameters", "injected-parameters"} & set(c["metadata"].get("tags", []))
             and "remove-cell" not in c["metadata"].get("tags", [])]
    assert len(shown) <= 1, f"{path.relative_to(BOOK)} shows its parameters {len(shown)} times"


def _converted_markdown(name: str) -> list[str]:
    """The markdown cells the study's runner would execute for page ``name`` of the default
    profile ("06_eagle3_speedup", "second/01_layer_entropy"): its source converted as the runner
    converts it (an architecture copy gets its banner and relocated links)."""
    import tempfile

    from activation_wave.study import runner
    from activation_wave.study.notebooks import ARCH_FOLDERS, to_ipynb

    params = {"profile": "default", "model": "", "results_root": "", "overrides": "{}"}
    run = next(r for r in runner._runs("default", None, BOOK / "chapters", params, None) if r[0] == name)
    sub = name.split("/")[0] if "/" in name else None
    with tempfile.TemporaryDirectory() as tmp:
        nb = json.loads(to_ipynb(run[1], Path(tmp) / "page.ipynb", run[4], subfolder=sub,
                                 siblings=ARCH_FOLDERS.get(sub or "", ())).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _committed_notebooks() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.ipynb") if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts)


def _without_images(nb: dict) -> dict:
    """The notebook less its images (base64 text can spell anything)."""
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            o["data"] = {k: v for k, v in o.get("data", {}).items() if not k.startswith("image/")}
    return nb


@pytest.mark.parametrize("path", _committed_notebooks(), ids=lambda p: str(p.relative_to(BOOK)))
def test_no_committed_notebook_holds_a_machine_path(path):
    """A home, the checkout, a scratch folder or an installed package's path, anywhere in a
    committed notebook (outputs, stderr, papermill's metadata): the study's runner rewrites them
    when it saves a page (runner.without_machine_paths)."""
    found = P.machine_paths(json.dumps(_without_images(json.loads(path.read_text()))))
    name = path.relative_to(BOOK / "chapters").with_suffix("") if path.is_relative_to(BOOK / "chapters") else path
    assert not found, (f"{path.relative_to(BOOK)} holds machine paths {sorted(set(found))[:4]}: re-execute it "
                       f"(`wave study --profile default --only {name}`), whose runner writes them relative to their root")


def test_glue_from_another_page_names_its_format():
    """myst-nb reads ``{glue:text}`page::key``` with no format as key "page:" and format "key",
    so the build warns and the value is missing: a glue from another page must end in a format
    (``:s`` for text, ``:.2f`` ...). Every markdown page of the book is checked."""
    import re

    bad = [f"{p.relative_to(BOOK)}: {m}" for p in sorted(BOOK.rglob("*.md")) if "_build" not in p.parts
           for m in re.findall(r"\{glue:text\}`[^`]*::[A-Za-z0-9_]+`", p.read_text())]
    assert not bad, "; ".join(bad[:8])


def test_no_page_links_to_an_architecture_page_the_smoke_build_leaves_out():
    """The smoke profile (CI's build) names no third model, so its book has no Qwen page: a {doc}
    link or a {ref} to one of that page's labels from a page it keeps breaks that build (`-W`).
    Such pages name it in words."""
    import re

    from activation_wave.study.notebooks import ARCH_PAGES
    from activation_wave.study.runner import architecture_runs

    shown = {a[0] for a in architecture_runs("smoke", None, None)}
    bad = []
    for page in (ARCH_PAGES[f] for f in ARCH_PAGES if f not in shown):
        src = (NOTEBOOK_DIR / f"{page}.py").read_text()
        labels = set(re.findall(r"^# \((\S+)\)=\s*$", src, flags=re.M)) | set(re.findall(r"^# :name:\s*(\S+)", src, flags=re.M))
        for other in [*sorted(NOTEBOOK_DIR.glob("*.py")), *(p for p in sorted(BOOK.rglob("*.md")) if "_build" not in p.parts)]:
            if other.stem in ARCH_PAGES.values():
                continue
            text = other.read_text()
            bad += [f"{other.name}: {m}" for m in re.findall(r"\{doc\}`[^`]*" + re.escape(page) + r"[^`]*`", text)]
            bad += [f"{other.name}: {{ref}} {lab}" for lab in labels if re.search(r"\{ref\}`[^`]*<?" + re.escape(lab) + r">?`", text)]
    assert not bad, "; ".join(bad)
