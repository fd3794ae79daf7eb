"""Chapter notebooks hold calls, glue, figures and prose: no function or class is defined
in them and their code stays short (issue 16's budgets, counted as the book counts them:
code-cell lines that are not blank and not comments)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: Every chapter notebook.
ANALYSIS = tuple(sorted(p.stem for p in NOTEBOOKS.glob("*.py")))
#: Most code lines per chapter (issue 16: the chapters that held most of the analysis).
LIMITS = {"04_token_filtering": 100, "05_layer_selection": 100, "06_eagle3_speedup": 100, "09_performance": 100}
#: Most code lines of all chapters together (issue 16).
TOTAL = 600


def code_cells(name: str) -> list[str]:
    import jupytext

    return [c.source for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells if c.cell_type == "code"]


def code_lines(name: str) -> int:
    return sum(1 for src in code_cells(name) for line in src.splitlines()
               if line.strip() and not line.strip().startswith("#"))


@pytest.mark.parametrize("name", ANALYSIS)
def test_no_function_or_class_in_a_chapter(name):
    for src in code_cells(name):
        tree = ast.parse("\n".join(line for line in src.splitlines() if not line.startswith(("%", "!"))))
        defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defined, f"{name} defines {defined}: move them to activation_wave.study.chapters"


def test_code_line_budgets():
    lines = {name: code_lines(name) for name in ANALYSIS}
    for name, limit in LIMITS.items():
        assert lines[name] <= limit, f"{name}: {lines[name]} code lines (limit {limit})"
    assert len(lines) >= 11, f"chapter notebooks not found in {NOTEBOOKS}"
    assert sum(lines.values()) <= TOTAL, f"chapters: {sum(lines.values())} code lines (limit {TOTAL}): {lines}"
