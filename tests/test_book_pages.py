"""The book as committed, read as a reader reads it (activation_wave.study.pages): every page of
the main parts is clean of lab-record words, placeholders, garbled numbers and overlong
sentences, within its word budget; every executed page of the main parts ran today's code and
shows its parameters once. (The checks themselves are tested in test_book_guards.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest

from activation_wave.study import pages as P
from activation_wave.study.notebooks import NOTEBOOK_DIR

BOOK = P.BOOK


@pytest.mark.parametrize("entry", P.main_pages())
def test_main_pages_read_clean(entry):
    page = P.page_file(entry)
    problems = P.page_problems(P.reader_text(page), P.budget(entry))
    assert not problems, f"{page.relative_to(BOOK)}: " + "; ".join(problems[:12])


def _executed() -> list[Path]:
    """The executed notebooks of the main parts (the other architectures' per-chapter copies are
    appendices)."""
    return [p for p in map(P.page_file, P.main_pages()) if p.suffix == ".ipynb"]


@pytest.mark.parametrize("path", _executed(), ids=lambda p: str(p.relative_to(BOOK)))
def test_executed_chapters_run_todays_code_and_show_parameters_once(path):
    nb = json.loads(path.read_text())
    source = jupytext.read(NOTEBOOK_DIR / f"{path.stem}.py")
    ran = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
           and "injected-parameters" not in c["metadata"].get("tags", [])]
    name = path.relative_to(BOOK / "chapters").with_suffix("")
    assert ran == [c.source for c in source.cells if c.cell_type == "code"], \
        f"{path.relative_to(BOOK)} was executed from an older source: run `wave study --profile default --only {name}`"
    shown = [c for c in nb["cells"] if {"parameters", "injected-parameters"} & set(c["metadata"].get("tags", []))
             and "remove-cell" not in c["metadata"].get("tags", [])]
    assert len(shown) <= 1, f"{path.relative_to(BOOK)} shows its parameters {len(shown)} times"
