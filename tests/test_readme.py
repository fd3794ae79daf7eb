"""The README is the front door: short, the two quick-start commands as CI and the scripts
name them, a block the findings record fills, no typed chapter numbers; the operator detail
it used to hold lives in the book (book/operate.md, book/rerun.md), where the reader guard of
activation_wave.study.pages reads it with a word budget."""

from __future__ import annotations

import re

from activation_wave.core.paths import REPO_ROOT
from activation_wave.study import pages as P

README = REPO_ROOT / "README.md"
#: The two quick-start commands, exactly as CI (.ci/run) and the scripts' headers name them.
COMMANDS = ("bash scripts/study.sh", "bash scripts/test.sh")
MAX_WORDS = 1600
#: The operator pages of "Teach and rerun" that took the README's detail.
OPERATOR_PAGES = ("rerun", "operate")


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_is_short():
    n = len(_readme().split())
    assert n <= MAX_WORDS, f"README.md has {n} words (at most {MAX_WORDS}): move operator detail to book/operate.md"


def test_readme_names_both_quick_start_commands_in_one_code_block():
    blocks = re.findall(r"```bash\n(.*?)```", _readme(), flags=re.S)
    assert any(all(re.search(rf"^{re.escape(c)}(\s|$)", b, flags=re.M) for c in COMMANDS) for b in blocks), \
        f"README.md's quick start must show {COMMANDS} as commands"
    for c in COMMANDS:  # and they are what the scripts and CI run
        assert (REPO_ROOT / c.split()[1]).is_file(), c
    assert "bash scripts/test.sh" in (REPO_ROOT / ".ci" / "run").read_text()


def test_readme_has_one_findings_block():
    text = _readme()
    start, end = "<!-- findings:start -->", "<!-- findings:end -->"
    assert text.count(start) == 1 and text.count(end) == 1, "README.md needs one findings block"
    assert text.index(start) < text.index(end)


def test_readme_types_no_chapter_number():
    typed = re.findall(r"\b[Cc]hapters? \d+\w?", _readme())
    assert not typed, f"README.md types chapter numbers {typed}: name the page instead"


def test_readme_links_the_operator_pages_and_they_are_in_the_book():
    text = _readme()
    pages = P.main_pages()
    for entry in OPERATOR_PAGES:
        assert f"book/{entry}.md" in text and f"book/_build/html/{entry}.html" in text, entry
        assert entry in pages, f"{entry} is not in a main part of _toc.yml"


def test_operator_pages_pass_the_reader_guard_within_a_budget():
    for entry in OPERATOR_PAGES:
        budget = P.budget(entry)
        assert budget is not None, f"{entry} has no word budget in pages.BUDGETS"
        problems = P.page_problems(P.reader_text(P.page_file(entry)), budget)
        assert not problems, f"{entry}: " + "; ".join(problems[:12])
